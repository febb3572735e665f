"""An Experiment resumed from a checkpoint inside an epoch: its store holds each
epoch once, with the statistics of the whole epoch (as an uninterrupted run's)."""

import pytest
import tensorflow as tf

import tfsnippet as spt


class Config(spt.Config):
    max_epoch = 3


def train(exp, clock, interrupt_at=None):
    w = tf.Variable(0., name='w')
    loop = spt.TrainLoop([w], max_epoch=exp.config.max_epoch, clock=clock,
                         checkpoint_step_freq=3, print_func=lambda line: None)
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(4)):
                w.assign_add(1.)
                clock.advance(1.)
                loop.collect_metrics(loss=float(step))
                if step == interrupt_at:
                    raise KeyboardInterrupt()
            loop.collect_metrics(valid_loss=1. / epoch)
            loop.print_logs()


class Held(spt.MetricSink):
    """A sink of the Experiment holding its epoch rows across attempts."""

    def __init__(self):
        self.rows = []

    def write_stats(self, scope, step, epoch, stats):
        self.rows.append((epoch, step, stats))

    def resumed(self, step, epoch):
        self.rows = [row for row in self.rows if row[0] < epoch]


def rows(store, run_id):
    return [(r.epoch, r.step, r.metrics) for r in store.epochs(run_id)]


def test_the_store_of_a_resumed_experiment_holds_what_an_uninterrupted_run_records(
        tmp_path, fake_clock):
    want_held, held = Held(), Held()
    with spt.Experiment(Config, root=tmp_path, name='reference', args=[],
                        sinks=[want_held]) as exp:
        train(exp, fake_clock)
    # killed at step 5 (epoch 2), after epoch 1's row was written; the last
    # checkpoint is step 3's, inside epoch 1
    with pytest.raises(KeyboardInterrupt):
        with spt.Experiment(Config, root=tmp_path, name='run', args=[], sinks=[held]) as exp:
            train(exp, fake_clock, interrupt_at=5)
    assert [row[0] for row in held.rows] == [1]
    with spt.Experiment(Config, root=tmp_path, args=['--resume', 'run'], sinks=[held]) as exp:
        train(exp, fake_clock)
    assert held.rows == want_held.rows   # epoch 1 once, with its 4 steps
    store = spt.ResultsStore(str(tmp_path))
    want = rows(store, 'reference')
    assert [r[:2] for r in want] == [(1, 4), (2, 8), (3, 12)]
    assert want[0][2]['loss'] == {'mean': 2.5, 'std': pytest.approx(1.118034), 'count': 4}
    assert rows(store, 'run') == want
    assert store.get_run('run').metrics == store.get_run('reference').metrics
