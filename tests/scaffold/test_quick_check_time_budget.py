"""Dry runs and time limits: ``spt.QuickCheck``, ``spt.SanityCheck`` and ``spt.TimeBudget``.

The tests taking ``style`` run in both TF styles with one body.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers import checkpoint_listing, saved_loop_state
from tests.scaffold.health_models import regression_data, sgd_regression


class RecordingSink(spt.MetricSink):
    def __init__(self):
        self.calls = []

    def write_stats(self, scope, step, epoch, stats):
        self.calls.append(('write_stats', scope))

    def write_results(self, values):
        self.calls.append(('write_results', dict(values)))

    def close(self, status):
        self.calls.append(('close', status))


def evaluator(style, loop, w, data, seen):
    """An Evaluator of the regression's loss over `data`, counting the batches in `seen`."""
    def weight(x, y):
        seen.append(len(x))
        return float(len(x))
    if style.is_graph:
        x = tf.compat.v1.placeholder(tf.float32, [None, 4])
        y = tf.compat.v1.placeholder(tf.float32, [None])
        loss = tf.reduce_mean(tf.square(tf.linalg.matvec(x, w) - y))
        return spt.Evaluator(loop, loss, inputs=[x, y], data_flow=data,
                             batch_weight_func=weight)
    return spt.Evaluator(loop, lambda x, y: tf.reduce_mean(tf.square(
        tf.linalg.matvec(x, w) - y)), data_flow=data, batch_weight_func=weight)


# ----------------------------------------------------------------- quick check
def test_a_quick_check_runs_two_steps_and_two_batches_and_writes_nothing(style, tmp_path):
    batches, _ = regression_data()
    w, step = sgd_regression(style)
    lines, seen, sink = [], [], RecordingSink()
    ckpt, summaries = tmp_path / 'ckpt', tmp_path / 'summaries'
    loop = spt.TrainLoop([w], max_epoch=5, checkpoint_dir=str(ckpt), checkpoint_step_freq=1,
                         summary_dir=str(summaries), print_func=lines.append, show_eta=False)
    loop.add_component(spt.MetricRecorder(sink))
    loop.add_component(spt.QuickCheck(train_steps=2, valid_steps=2))
    valid = evaluator(style, loop, w, batches, seen)
    with loop:
        for _ in loop.iter_epochs():
            for _, (x, y) in loop.iter_steps(batches):
                loop.collect_metrics(loss=step(x, y))
            valid.run()
            loop.print_logs()
        loop.collect_results(test_loss=1.)
    assert (loop.epoch, loop.step) == (1, 2)
    assert seen == [16, 16]   # two validation batches of the ten
    assert loop.stop_reason == 'quick check: 2 training steps done'
    assert 'Training stopped at epoch 1, step 2: quick check: 2 training steps done' in lines
    assert any(line.startswith('[Epoch 1/5, Step 2]') and 'valid loss' in line for line in lines)
    # nothing lasting: no checkpoint folder, no summary file, nothing sent to the sink
    assert not ckpt.exists() and not summaries.exists()
    assert sink.calls == []
    assert os.listdir(tmp_path) == []


def test_a_quick_check_suspends_writers_added_after_it(style, tmp_path):
    batches, _ = regression_data(n_batches=3)
    w, step = sgd_regression(style)
    loop = spt.TrainLoop([w], max_epoch=2, print_func=lambda s: None)
    loop.add_component(spt.QuickCheck(train_steps=1))
    summaries = spt.SummaryLogger(str(tmp_path / 'later'))
    loop.add_component(summaries)
    with loop:
        for _ in loop.iter_epochs():
            for _, (x, y) in loop.iter_steps(batches):
                loop.collect_metrics(loss=step(x, y))
    assert loop.step == 1
    assert summaries.writes_suspended == 'quick check (1 training steps)'
    assert os.listdir(tmp_path) == []


def test_quick_check_arguments_are_checked():
    with pytest.raises(ValueError, match='`train_steps` must be a positive int'):
        spt.QuickCheck(train_steps=0)
    with pytest.raises(TypeError, match='`reason` must be a non-empty str, got 3'):
        spt.SummaryLogger(summary_dir='x').suspend_writes(3)


# ----------------------------------------------------------------- sanity check
def test_a_sanity_check_validates_two_batches_before_the_first_step(style):
    batches, _ = regression_data()
    w, step = sgd_regression(style)
    lines, seen, steps = [], [], []
    loop = spt.TrainLoop([w], max_epoch=1, print_func=lines.append, show_eta=False)
    valid = evaluator(style, loop, w, batches, seen)
    loop.add_component(spt.SanityCheck(valid, steps=2))
    with loop:
        assert seen == [16, 16]   # before any step, nothing collected into the loop
        for _ in loop.iter_epochs():
            for _, (x, y) in loop.iter_steps(batches[:1]):
                steps.append(step(x, y))
    sanity = [line for line in lines if line.startswith('Sanity check')]
    assert len(sanity) == 1 and sanity[0].endswith('on 2 batches')
    x = np.concatenate([b[0] for b in batches[:2]])
    y = np.concatenate([b[1] for b in batches[:2]])
    assert float(sanity[0].split()[3]) == pytest.approx(float(np.mean(y ** 2)), rel=1e-4)
    assert loop.best_valid_metric is None


def test_a_broken_validation_fails_before_the_first_step():
    steps = []
    loop = spt.TrainLoop(max_epoch=1, max_step=3, print_func=lambda s: None)
    loop.add_component(spt.SanityCheck(lambda: {'valid_loss': float('nan')}))
    with pytest.raises(RuntimeError, match=r'^Sanity check: the validation before the first '
                                           r'epoch gave `valid_loss` = nan: fix the '
                                           r'validation \(or the model\) before training$'), loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps():
                steps.append(1)
    assert steps == []

    def broken():
        raise KeyError('valid_x')
    loop = spt.TrainLoop(max_epoch=1, max_step=3, print_func=lambda s: None)
    loop.add_component(spt.SanityCheck(broken))
    with pytest.raises(KeyError, match='valid_x'), loop:
        pass
    with pytest.raises(TypeError, match='`validate` must be an Evaluator or a function'):
        spt.SanityCheck(3)


# ----------------------------------------------------------------- time budget
def test_a_time_budget_stops_before_the_limit_with_a_checkpoint_that_resumes(
        style, tmp_path, fake_clock):
    batches, w_true = regression_data()
    ckpt = str(tmp_path / 'ckpt')
    lines = []
    w, step = sgd_regression(style)
    loop = spt.TrainLoop([w], max_epoch=10, checkpoint_dir=ckpt, checkpoint_epoch_freq=1,
                         clock=fake_clock, print_func=lines.append, show_eta=False)
    budget = spt.TimeBudget(seconds=30, margin=2, save_estimate=3)
    loop.add_component(budget)
    start = fake_clock()
    with loop:
        for _ in loop.iter_epochs():
            for _, (x, y) in loop.iter_steps(batches):
                loop.collect_metrics(loss=step(x, y))
                fake_clock.advance(1.)
            loop.print_logs()
        w_stopped = style.value(w)
    # each step takes 1 s and the saves 0 s on the fake clock: the reserve is 1 + 2 s,
    # so after step 28 (2 s left) it stops, in epoch 3
    assert (loop.epoch, loop.step) == (3, 28)
    assert fake_clock() - start < 30
    assert loop.stop_reason == 'time budget: 2s left of 30s, keeping 3s to save'
    assert 'Time budget: stopping at epoch 3, step 28, 2s before the limit' in lines
    assert loop.results == {'time_budget_stopped': 1., 'time_budget_left': 2.}
    assert 'checkpoint.dat-28' in checkpoint_listing(ckpt)
    assert saved_loop_state(ckpt, 28)['stop_reason'] is None   # the next start trains on
    with style.new_run():
        w, step = sgd_regression(style)
        lines = []
        loop = spt.TrainLoop([w], max_epoch=10, checkpoint_dir=ckpt, checkpoint_epoch_freq=1,
                             clock=fake_clock, print_func=lines.append, show_eta=False)
        loop.add_component(spt.TimeBudget(seconds=1000))
        with loop:
            np.testing.assert_array_equal(style.value(w), w_stopped)
            for _ in loop.iter_epochs():
                for _, (x, y) in loop.iter_steps(batches):
                    loop.collect_metrics(loss=step(x, y))
                    fake_clock.advance(1.)
            w_final = style.value(w)
    assert any(line.startswith('Resume training: epoch 3, step 28') for line in lines)
    assert (loop.epoch, loop.step, loop.stop_reason) == (10, 98, 'max_epoch reached')
    np.testing.assert_allclose(w_final, w_true, atol=1e-3)


def test_the_time_budget_keeps_the_longest_recent_save(fake_clock):
    budget = spt.TimeBudget(seconds=100, margin=1, save_estimate=50)
    loop = spt.TrainLoop(max_step=1000, clock=fake_clock, print_func=lambda s: None)
    loop.add_component(budget)
    with loop:
        assert budget.reserve() == 51
        loop.events.fire(spt.EventKeys.LOOP_HELD, loop, 'checkpoint', 7.)
        loop.events.fire(spt.EventKeys.LOOP_HELD, loop, 'summaries', 70.)
        assert budget.reserve() == 8
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps():
                fake_clock.advance(4.)
    # the reserve: the 7 s save, the 4 s step and the 1 s margin; after step 22, 12 s
    # are left: one more step fits, and after it the 8 s that the save and margin need
    assert loop.step == 23
    assert budget.stopped == 'time budget: 8s left of 1m 40s, keeping 12s to save'


def test_time_budget_arguments_are_checked():
    with pytest.raises(ValueError, match='`seconds` must be'):
        spt.TimeBudget(seconds=0)
    with pytest.raises(ValueError, match=r'`margin` must be a number of seconds >= 0, got -1'):
        spt.TimeBudget(seconds=10, margin=-1)


# ----------------------------------------------------------------- in an Experiment
class Cfg(spt.Config):
    max_epoch = 10


def test_an_experiment_records_why_the_time_budget_stopped_and_nothing_of_a_quick_check(
        style, tmp_path, fake_clock):
    import json

    from tfsnippet.experiment.store import ResultsStore
    batches, _ = regression_data(n_batches=5)
    for name, component in [('budget', spt.TimeBudget(seconds=12, margin=1, save_estimate=0)),
                            ('quick', spt.QuickCheck(train_steps=2))]:
        with style.new_run(), spt.Experiment(Cfg, root=tmp_path, name=name, args=[]) as exp:
            w, step = sgd_regression(style)
            loop = spt.TrainLoop([w], max_epoch=exp.config.max_epoch, clock=fake_clock,
                                 print_func=lambda s: None)
            loop.add_component(component)
            with loop:
                for _ in loop.iter_epochs():
                    for _, (x, y) in loop.iter_steps(batches):
                        loop.collect_metrics(loss=step(x, y))
                        fake_clock.advance(1.)
                    loop.print_logs()
    # 1 s steps, a 1 s margin: after step 10, 2 s are left: one more step, then stop
    result = json.loads((tmp_path / 'budget' / 'result.json').read_text())
    assert result == {'time_budget_stopped': 1., 'time_budget_left': 1.}
    with ResultsStore(tmp_path) as store:
        assert store.get_run('budget').results == result
        assert store.get_run('quick').results == {}
        assert [e.epoch for e in store.epochs('budget')] == [1, 2, 3]
        assert store.epochs('quick') == []
    assert not (tmp_path / 'quick' / 'result.json').exists()
