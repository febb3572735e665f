"""Metric sinks with TF1 graph code: the twin of the user-sink test of
tests/scaffold/test_metric_sinks.py (values from ``session.run``)."""

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.experiment.store import ResultsStore
from tfsnippet.scaffold.metrics.sinks import MetricSink

v1 = tf.compat.v1


class RunConfig(spt.Config):
    max_epoch = 3


class EpochSink(MetricSink):
    def __init__(self):
        self.epochs = []

    def write_stats(self, scope, step, epoch, stats):
        self.epochs.append((scope, step, epoch, {k: dict(v) for k, v in stats.items()}))


def test_a_user_sink_gets_the_same_epoch_statistics_as_the_results_store(
        tmp_path, session, fake_clock):
    w = v1.get_variable('w', shape=[], initializer=v1.zeros_initializer())
    step_op = v1.assign_add(w, 1.)
    session.run(v1.global_variables_initializer())
    sink = EpochSink()
    with spt.Experiment(RunConfig, root=tmp_path, name='g', args=[], sinks=[sink],
                        hparams=False, tee=False, flush_secs=0.) as exp:
        with spt.TrainLoop([w], max_epoch=exp.config.max_epoch, print_func=lambda s: None,
                           clock=fake_clock) as loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(4)):
                    fake_clock.advance(0.25)
                    loop.collect_metrics(loss=session.run(step_op) ** 2)
                loop.collect_metrics(valid_loss=1. / session.run(w))
                if epoch == 2:   # one epoch printed, two not
                    loop.print_logs()
    with ResultsStore(tmp_path) as store:
        rows = store.epochs('g')
    assert [(s[1], s[2]) for s in sink.epochs] == [(r.step, r.epoch) for r in rows] == \
        [(4, 1), (8, 2), (12, 3)]
    for (scope, step, epoch, stats), row in zip(sink.epochs, rows):
        assert scope == 'epoch'
        assert set(stats) == set(row.metrics)
        for name in stats:
            for key in ('mean', 'std', 'count'):
                assert stats[name][key] == pytest.approx(row.metrics[name][key], abs=1e-9)
        values = np.arange(step - 3, step + 1, dtype=np.float64) ** 2
        assert stats['loss'] == {'mean': pytest.approx(values.mean()),
                                 'std': pytest.approx(values.std()), 'count': 4}
