"""Metric sinks: one interface for TensorBoard, the results store, MLflow, HParams and a user's own.

The user-sink test takes ``style``: it runs in both TF styles (tests/conftest.py).
"""

import ast
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.experiment.store import ResultsStore
from tfsnippet.scaffold.components.base import LoopComponent
from tfsnippet.scaffold.components.run_recorder import MetricRecorder
from tfsnippet.scaffold.components.summaries import SummaryLogger
from tfsnippet.scaffold.loop_context import push_loop_context, remove_loop_context
from tfsnippet.scaffold.metrics.sinks import MetricSink, MultiSink, SinkError, chief_only
from tests.helpers import read_scalars

REPO = Path(__file__).resolve().parents[2]


class RunConfig(spt.Config):
    max_epoch = 4


class ListSink(MetricSink):
    """A user's sink: keeps every call."""

    def __init__(self, fail_in=None):
        self.calls = []
        self.fail_in = fail_in

    def _add(self, *call):
        self.calls.append(call)
        if call[0] == self.fail_in:
            raise ConnectionError('gone')

    def write_stats(self, scope, step, epoch, stats):
        self._add('stats', scope, step, epoch, {k: dict(v) for k, v in stats.items()})

    def write_best(self, values, step):
        self._add('best', dict(values), step)

    def write_results(self, values):
        self._add('results', dict(values))

    def flush(self):
        self._add('flush')

    def close(self, status):
        self._add('close', status)

    def epochs(self):
        return [c for c in self.calls if c[0] == 'stats' and c[1] == 'epoch']


def train(loop, clock, print_every=2, compute=None):
    """4 epochs of 3 steps; the epoch line printed every `print_every` epochs; a
    step line at each epoch's second step.  ``loss = x * epoch``, computed by
    ``compute`` if given (``Style.computed``)."""
    for epoch in loop.iter_epochs():
        for step, x in loop.iter_steps([1., 2., 4.]):
            clock.advance(0.5)
            loop.collect_metrics(loss=x * epoch if compute is None else compute(x * epoch))
            if step % 3 == 2:
                loop.print_logs()
        loop.collect_metrics(valid_loss=1. / epoch)
        if epoch % print_every == 0:
            loop.print_logs()
    loop.collect_results(test_loss=0.25)


def test_a_user_sink_gets_the_same_epoch_statistics_as_the_results_store(
        style, tmp_path, fake_clock):
    sink = ListSink()
    with spt.Experiment(RunConfig, root=tmp_path, name='mine', args=[], sinks=[sink],
                        hparams=False, tee=False, flush_secs=0.) as exp:
        with spt.TrainLoop([], max_epoch=exp.config.max_epoch, print_func=lambda s: None,
                           clock=fake_clock) as loop:
            # the loss computed by TensorFlow in the style (``session.run`` in graph style)
            train(loop, fake_clock, compute=style.computed(tf.identity))
    with ResultsStore(tmp_path) as store:
        rows = store.epochs('mine')
        run = store.get_run('mine')
    mine = sink.epochs()
    assert [(c[2], c[3]) for c in mine] == [(r.step, r.epoch) for r in rows] == \
        [(3, 1), (6, 2), (9, 3), (12, 4)]
    for call, row in zip(mine, rows):
        assert set(call[4]) == set(row.metrics)
        for name, stats in call[4].items():
            assert stats['count'] == row.metrics[name]['count']
            assert stats['mean'] == pytest.approx(row.metrics[name]['mean'])
            assert stats['std'] == pytest.approx(row.metrics[name]['std'], abs=1e-9)
    # each epoch's own values, whether its line was printed (2, 4) or not (1, 3)
    for epoch, (_, _, _, _, stats) in enumerate(mine, 1):
        values = [epoch * 1., epoch * 2., epoch * 4.]
        assert stats['loss']['count'] == 3
        assert stats['loss']['mean'] == pytest.approx(np.mean(values))
        assert stats['loss']['std'] == pytest.approx(np.std(values))
        assert stats['valid_loss'] == {'mean': 1. / epoch, 'std': 0., 'count': 1}
    assert [c[1] for c in sink.calls if c[0] == 'best'] == [{'valid_loss': 1. / e}
                                                            for e in (1, 2, 3, 4)]
    assert run.best == {'valid_loss': 0.25}
    assert ('results', {'test_loss': 0.25}) in sink.calls
    assert sink.calls[-1] == ('close', 'completed')


def test_a_recorder_sends_the_scopes_asked_for_and_closes_with_the_loops_status(fake_clock):
    epochs, lines = ListSink(), ListSink()
    loop = spt.TrainLoop([], max_epoch=4, print_func=lambda s: None, clock=fake_clock)
    loop.add_component(MetricRecorder(epochs))
    loop.add_component(MetricRecorder([lines], scopes=['step_log', 'epoch_log']))
    with loop:
        train(loop, fake_clock)
    assert {c[1] for c in epochs.calls if c[0] == 'stats'} == {'epoch'}
    assert [(c[1], c[2]) for c in lines.calls if c[0] == 'stats'] == [
        ('step_log', 2), ('step_log', 5), ('epoch_log', 6), ('step_log', 8), ('step_log', 11),
        ('epoch_log', 12)]
    # a step line: the values since the last one; the line of epoch 2: epochs 1 and 2
    step_line = [c for c in lines.calls if c[0] == 'stats'][0][4]
    assert step_line['loss'] == {'mean': 1.5, 'std': 0.5, 'count': 2}
    epoch_line = [c for c in lines.calls if c[0] == 'stats' and c[1] == 'epoch_log'][0][4]
    assert epoch_line['loss']['count'] == 6
    assert epochs.calls[-1] == ('close', 'completed') == lines.calls[-1]
    assert ('results', {'test_loss': 0.25}) in epochs.calls

    failed = ListSink()
    loop = spt.TrainLoop([], max_epoch=3, print_func=lambda s: None, clock=fake_clock)
    loop.add_component(MetricRecorder(failed))
    with pytest.raises(ZeroDivisionError):
        with loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(2)):
                    loop.collect_metrics(loss=1.)
                if epoch == 2:
                    1 / 0
    assert [c[3] for c in failed.epochs()] == [1]   # epoch 2 cut short, not printed
    assert failed.calls[-1] == ('close', 'failed')


def test_a_failing_sink_is_reported_once_dropped_and_still_closed(fake_clock):
    bad, good = ListSink(fail_in='stats'), ListSink()
    loop = spt.TrainLoop([], max_epoch=4, print_func=lambda s: None, clock=fake_clock)
    loop.add_component(MetricRecorder([bad, good]))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with loop:
            train(loop, fake_clock)
    messages = [str(w.message) for w in caught if issubclass(w.category, SinkError)]
    assert messages == [f'The run sink {bad!r} failed in `write_stats()` and is not called '
                        f'again in this run (training goes on): ConnectionError: gone']
    assert [c[0] for c in bad.calls] == ['best', 'stats', 'close']
    assert len(good.epochs()) == 4

    with pytest.raises(TypeError, match=r'`sinks\[1\]` must be a MetricSink .* lacks write_stats, '):
        MultiSink([good, object()])


def test_chief_only_keeps_a_worker_quiet():
    quiet, loud = ListSink(), ListSink()
    sinks = MultiSink([chief_only(quiet, is_chief=False), chief_only(loud, lambda: True)])
    sinks.write_stats('epoch', 3, 1, {'loss': {'mean': 1., 'std': 0., 'count': 3}})
    sinks.write_best({'loss': 1.}, 3)
    sinks.flush()
    sinks.close('completed')
    assert quiet.calls == []
    assert [c[0] for c in loud.calls] == ['stats', 'best', 'flush', 'close']
    with pytest.raises(TypeError, match='`is_chief` must be a bool'):
        chief_only(loud, is_chief='yes')


@pytest.mark.parametrize('stream', ['logs', 'epochs'])
def test_tensorboard_writes_the_statistics_of_each_line_or_epoch(tmp_path, fake_clock, stream):
    sink = ListSink()
    loop = spt.TrainLoop([], max_epoch=4, print_func=lambda s: None, clock=fake_clock)
    loop.add_component(SummaryLogger(summary_dir=str(tmp_path), stream=stream))
    loop.add_component(MetricRecorder(
        sink, scopes=['step_log', 'epoch_log'] if stream == 'logs' else ['epoch']))
    with loop:
        train(loop, fake_clock)
    expected = [(c[2], pytest.approx(c[4]['loss']['mean'])) for c in sink.calls
                if c[0] == 'stats']
    assert read_scalars(tmp_path, 'metrics/loss', in_step_order=False) == expected
    assert len(expected) == (6 if stream == 'logs' else 4)


def test_the_classic_stream_writes_every_value_and_the_stream_is_checked(tmp_path, fake_clock):
    with spt.TrainLoop([], max_epoch=1, print_func=lambda s: None, clock=fake_clock,
                       summary_dir=str(tmp_path)) as loop:
        assert loop.component('summaries').stream == 'values'
        for _ in loop.iter_epochs():
            for _, x in loop.iter_steps([1., 2., 4.]):
                loop.collect_metrics(loss=x)
    assert read_scalars(tmp_path, 'metrics/loss', in_step_order=False) == [
        (1, 1.), (2, 2.), (3, 4.)]
    with pytest.raises(ValueError, match="`stream` must be one of 'values', 'logs', 'epochs'"):
        SummaryLogger(summary_dir=str(tmp_path), stream='steps')


def test_a_loop_context_provider_plugs_components_and_a_checkpoint_dir_into_new_loops(
        tmp_path):
    class Marker(LoopComponent):
        role = 'marker'

    class Provider:
        def __init__(self):
            self.claims = []

        def claim_checkpoint_dir(self, take=True):
            self.claims.append(take)
            return str(tmp_path) if take or not any(self.claims[:-1]) else None

        def loop_components(self):
            return [Marker()]

    provider = Provider()
    push_loop_context(provider)
    try:
        loop = spt.TrainLoop([], max_epoch=1)
    finally:
        remove_loop_context(provider)
    assert isinstance(loop.component('marker'), Marker)
    assert loop.component('checkpointer').checkpoint_dir == str(tmp_path)
    assert provider.claims == [False, True]
    assert spt.TrainLoop([], max_epoch=1).component('marker') is None
    with pytest.raises(TypeError, match='lacks claim_checkpoint_dir, loop_components'):
        push_loop_context(object())


def test_the_scaffold_imports_nothing_from_the_experiment_package():
    offenders = []
    for path in sorted((REPO / 'tfsnippet' / 'scaffold').rglob('*.py')):
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or '']
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            if any('experiment' in n.split('.') for n in names):
                offenders.append(f'{path.relative_to(REPO)}:{node.lineno}')
    assert offenders == []


def test_nan_statistics_reach_the_sinks_as_nan(fake_clock):
    sink = ListSink()
    loop = spt.TrainLoop([], max_epoch=1, print_func=lambda s: None, clock=fake_clock)
    loop.add_component(MetricRecorder(sink))
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(loss=float('nan'))
    (stats,) = [c[4] for c in sink.epochs()]
    assert math.isnan(stats['loss']['mean']) and stats['loss']['count'] == 1
