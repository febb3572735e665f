"""A resumed run replays the epochs after its checkpoint: the results store
forgets them first, so it never holds an epoch twice nor mixes two attempts."""

import pytest

import tfsnippet as spt
from tfsnippet.experiment.sinks import StoreSink


def test_forget_epochs_drops_the_replayed_rows_and_their_latest_values(tmp_path):
    store = spt.ResultsStore(str(tmp_path))
    store.start_run('r', 'r', {}, {})
    store.log_epochs('r', [(10, 1, {'loss': 1., 'x': 5.}), (20, 2, {'loss': 2., 'epoch_time': 9.}),
                           (30, 3, {'loss': 3., 'y': 1.})])
    store.forget_epochs('r', 2)
    assert [(row.epoch, row.step, sorted(row.metrics)) for row in store.epochs('r')] == \
        [(1, 10, ['loss', 'x'])]
    run = store.get_run('r')
    assert (run.epoch, run.step, run.metrics) == (1, 10, {'loss': 1., 'x': 5.})
    # the replay writes epoch 2 afresh: none of the first attempt's values stays
    store.log_epochs('r', [(20, 2, {'loss': 2.5})])
    assert store.epochs('r')[1].metrics == {'loss': {'mean': 2.5, 'std': None, 'count': None}}
    assert store.get_run('r').metrics == {'loss': 2.5, 'x': 5.}


def test_the_store_sink_forgets_the_epochs_it_is_told_are_replayed(tmp_path):
    store = spt.ResultsStore(str(tmp_path))
    sink = StoreSink(store)
    sink.start('r', 'r', {}, {})
    stats = {'loss': {'mean': 1., 'std': 0., 'count': 4}}
    for epoch in (1, 2):
        sink.write_stats('epoch', epoch * 4, epoch, stats)
    sink.flush()
    sink.write_stats('epoch', 12, 3, stats)   # kept for the next flush, then replayed too
    sink.resumed(6, 2)
    sink.flush()
    assert [row.epoch for row in store.epochs('r')] == [1]


def test_forget_epochs_checks_the_epoch(tmp_path):
    store = spt.ResultsStore(str(tmp_path))
    with pytest.raises(ValueError, match=r'^`epoch` must be >= 0, got -1$'):
        store.forget_epochs('r', -1)


def test_a_run_sink_of_the_earlier_interface_is_told_of_the_replay():
    from tfsnippet.experiment.sinks import as_metric_sink

    class Earlier:
        def __init__(self):
            self.calls = []

        def start(self, run_id, name, config, info):
            pass

        def log_epoch(self, step, epoch, metrics):
            self.calls.append(('log_epoch', epoch))

        def log_best(self, values):
            pass

        def log_results(self, values):
            pass

        def finish(self, status):
            pass

        def resumed(self, step, epoch):
            self.calls.append(('resumed', step, epoch))

    inner = Earlier()
    sink = as_metric_sink(inner)
    for epoch in (1, 2):
        sink.write_stats('epoch', epoch * 4, epoch, {'loss': {'mean': 1., 'std': 0., 'count': 4}})
    sink.resumed(5, 2)   # epoch 2, kept for the next flush, is replayed: it is dropped
    sink.flush()
    assert inner.calls == [('resumed', 5, 2), ('log_epoch', 1)]
