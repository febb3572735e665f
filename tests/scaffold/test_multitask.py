"""Multi-task training with TrainLoop: per-task metrics, the combined validation
metric, and a MultiTaskFlow resumed from the loop's checkpoints.

The tests taking ``style`` run in both TF styles (the metric values are
computed by TensorFlow, the variables are changed by a ``tf.function`` or
a ``session.run``).  Metric values are chosen exact in float32 so summaries read
back compare with ``==``.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers import read_scalars, saved_loop_state
from tfsnippet.utils import Every


def task_flows(shuffle=True):
    """'digit': 12 rows in 4 batches of 3; 'coarse': 8 rows in 4 batches of 2
    (values 100+), both shuffled with their own seed."""
    return {'digit': spt.DataFlow.arrays([np.arange(12.)], 3, shuffle=shuffle, random_state=3),
            'coarse': spt.DataFlow.arrays([np.arange(100., 108.)], 2, shuffle=shuffle,
                                          random_state=4)}


def lists(batch):
    return {task: b[0].tolist() for task, b in batch.items()}


# ----------------------------------------------------------------- metrics
def test_per_task_lines_and_summaries(style, tmp_path):
    half = style.computed(lambda x: x / 2.)
    flow = spt.DataFlow.tasks(task_flows(shuffle=False), mode='together')
    lines = []
    valid = {1: {'digit': 3., 'coarse': 1.}, 2: {'digit': 1., 'coarse': 2.}}
    with spt.TrainLoop(max_epoch=2, summary_dir=str(tmp_path), print_func=lines.append) as loop:
        loop.add_component(spt.MultiTaskMetrics(flow))
        for epoch in loop.iter_epochs():
            for step, batch in loop.iter_steps(flow):
                # each task's loss: half the first value of its batch
                loop.collect_metrics({f'{task}/loss': half(float(x[0]))
                                      for task, (x,) in batch.items()})
            loop.collect_metrics({f'{t}/valid_loss': half(2 * v)
                                  for t, v in valid[epoch].items()})
            loop.print_logs()
    epoch_lines = [line for line in lines if line.startswith('[Epoch')]
    assert len(epoch_lines) == 2
    assert 'coarse/loss: 51.5 (±1.11803)' in epoch_lines[0]  # (100 + 102 + 104 + 106) / 4 / 2
    assert 'digit/loss: 2.25 (±1.67705)' in epoch_lines[0]   # (0 + 3 + 6 + 9) / 4 / 2
    for part in ('coarse/valid loss: 1;', 'digit/valid loss: 3;', 'valid loss: 2 (*)'):
        assert part in epoch_lines[0]
    for part in ('coarse/valid loss: 2;', 'digit/valid loss: 1;', 'valid loss: 1.5 (*)'):
        assert part in epoch_lines[1]
    assert lines[-1] == ('Best per task: digit/valid_loss 1 (step 8); '
                         'coarse/valid_loss 1 (step 4)')
    scalars = read_scalars(tmp_path)
    assert scalars['metrics/digit/loss'] == [(s, (3. * ((s - 1) % 4)) / 2) for s in range(1, 9)]
    assert scalars['metrics/coarse/loss'][:2] == [(1, 50.), (2, 51.)]
    assert scalars['metrics/digit/valid_loss'] == [(4, 3.), (8, 1.)]
    assert scalars['metrics/coarse/valid_loss'] == [(4, 1.), (8, 2.)]
    assert scalars['metrics/valid_loss'] == [(4, 2.), (8, 1.5)]


def test_the_combined_metric_drives_early_stopping(style):
    w = style.variable(0., 'w')
    bump = style.updater(w, 1.)
    # valid losses per epoch; their mean is best (1.5) at epoch 2, then worse twice
    valid = [(4., 2.), (1., 2.), (3., 3.), (0.5, 6.), (9., 9.)]
    lines = []
    tasks = spt.MultiTaskMetrics(['a', 'b'])
    with spt.TrainLoop(param_vars=[w], max_epoch=5, early_stopping=True,
                       early_stopping_patience=2, print_func=lines.append) as loop:
        loop.add_component(tasks)
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                bump()
            va, vb = valid[epoch - 1]
            loop.collect_metrics({'a/valid_loss': va, 'b/valid_loss': vb})
        assert loop.best_valid_metric == 1.5
    assert loop.epoch == 4                      # stopped after two worse validations
    assert style.value(w) == 4.                 # the weights of epoch 2 (step 4) are back
    assert tasks.best == {'a': 0.5, 'b': 2.} and tasks.best_step == {'a': 8, 'b': 2}
    assert any('`valid_loss` has not improved for 2 validations' in line for line in lines)


def test_a_formula_of_the_user_combines_the_tasks(style):
    to_float = style.computed(lambda x: x * 1.)
    seen = []
    tasks = spt.MultiTaskMetrics(['a', 'b'], combine=lambda v: v['a'] + 3 * v['b'])
    with spt.TrainLoop(max_epoch=2, print_func=lambda s: None) as loop:
        loop.add_component(tasks)
        loop.watch_metric('valid_loss', seen.append)
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(1)):
                pass
            # one task at a time: the combination waits for both
            loop.collect_metrics({'a/valid_loss': to_float(epoch)})
            assert len(seen) == epoch - 1
            loop.collect_metrics({'b/valid_loss': to_float(10. * epoch)})
    assert seen == [31., 62.]


def test_validation_every_n_steps_halves_the_learning_rate(style):
    lr = style.variable(0.5, 'lr')
    lines, combined = [], []
    # the valid losses never improve after the first one
    valid = iter([2., 2., 3., 3., 3., 3., 3., 3., 3., 3.])
    flow = spt.DataFlow.tasks(task_flows(), mode='alternate', epoch=6)

    def validate(loop):
        loop.collect_metrics({'digit/valid_loss': next(valid), 'coarse/valid_loss': 1.})

    with spt.TrainLoop(max_epoch=2, print_func=lines.append) as loop:
        loop.add_component(spt.MultiTaskMetrics(flow))
        loop.add_component(spt.ReduceOnPlateau(lr, factor=.5, patience=2))
        loop.watch_metric('valid_loss', combined.append)
        loop.events.on(spt.EventKeys.AFTER_STEP, validate, every=Every(steps=3))
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(flow):
                pass
    assert combined == [1.5, 1.5, 2., 2.]       # steps 3, 6, 9, 12
    assert style.value(lr) == 0.25              # halved once: steps 6 and 9 did not improve
    assert sum('Reduce the learning rate from 0.5 to 0.25' in line for line in lines) == 1



def test_the_best_checkpoint_is_that_of_the_best_combined_metric(style, tmp_path):
    from tfsnippet.scaffold.checkpoint.store import CheckpointStore
    w = style.variable(0., 'w')
    bump = style.updater(w, 1.)
    # the tasks' bests are at epochs 1 and 3, their mean's at epoch 2
    valid = [(1., 5.), (2., 2.), (4., 1.5)]
    with spt.TrainLoop(param_vars=[w], max_epoch=3, checkpoint_dir=str(tmp_path),
                       checkpoint_epoch_freq=1, checkpoint_max_to_keep=1,
                       checkpoint_keep_best=True, print_func=lambda s: None) as loop:
        loop.add_component(spt.MultiTaskMetrics(['a', 'b']))
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                bump()
            va, vb = valid[epoch - 1]
            loop.collect_metrics({'a/valid_loss': va, 'b/valid_loss': vb})
    path, record = CheckpointStore(str(tmp_path / 'checkpoint')).best()
    assert (record['metric'], record['value'], record['epoch'], record['step']) == (
        'valid_loss', 2., 2, 4)



def test_a_sink_receives_the_per_task_statistics_and_the_bests():
    from tests.scaffold.test_metric_sinks import ListSink
    from tfsnippet.scaffold.components.run_recorder import MetricRecorder
    sink = ListSink()
    loop = spt.TrainLoop([], max_epoch=2, print_func=lambda s: None)
    loop.add_component(spt.MultiTaskMetrics(['a', 'b']))
    loop.add_component(MetricRecorder(sink))
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(2)):
                loop.collect_metrics({'a/loss': float(step), 'b/loss': 10. * step})
            loop.collect_metrics({'a/valid_loss': 2. / epoch, 'b/valid_loss': 4.})
    epochs = sink.epochs()
    assert len(epochs) == 2
    stats = epochs[1][4]
    assert stats['a/loss'] == {'mean': 3.5, 'std': 0.5, 'count': 2}
    assert stats['b/loss'] == {'mean': 35., 'std': 5., 'count': 2}
    assert stats['a/valid_loss'] == {'mean': 1., 'std': 0., 'count': 1}
    assert stats['valid_loss'] == {'mean': 2.5, 'std': 0., 'count': 1}
    assert [c[1] for c in sink.calls if c[0] == 'best'] == [{'valid_loss': 3.},
                                                            {'valid_loss': 2.5}]


# ----------------------------------------------------------------- resume
STOP_AT = 7           # epochs of 5 steps: the 2nd step of epoch 2


def train(style, root, mode, stop_at=None, seen=None):
    """Three epochs of 5 steps over a MultiTaskFlow, checkpointed at every step, in a
    new run of `style`: each task's batch ``x`` sets ``w = w / 2 + mean(x)`` (so ``w``
    depends on the order of the batches); ``(epoch, step, batch)`` appended to
    `seen`; KeyboardInterrupt at `stop_at`.  Returns `seen`, the MultiTaskMetrics
    and the final ``w``."""
    seen = [] if seen is None else seen
    weights = {'digit': 2, 'coarse': 1} if mode == 'weighted' else None
    flow = spt.DataFlow.tasks(task_flows(), mode=mode, weights=weights, epoch=5,
                              random_state=0)
    tasks = spt.MultiTaskMetrics(flow)
    options = {} if root is None else dict(checkpoint_dir=str(root), checkpoint_step_freq=1)
    with style.new_run():
        w = style.variable(0., 'w')
        update = style.fed(lambda x: w.assign(w / 2. + tf.reduce_mean(x)), [None])
        loop = spt.TrainLoop([w], max_epoch=3, print_func=lambda s: None, **options)
        loop.add_component(tasks)     # before entering: a resumed state reaches it
        with loop:
            for epoch in loop.iter_epochs():
                for step, batch in loop.iter_steps(flow):
                    if step == stop_at:
                        raise KeyboardInterrupt()
                    seen.append((epoch, step, lists(batch)))
                    for x, in batch.values():
                        update(x)
                    loop.collect_metrics({f'{t}/valid_loss': float(step) for t in batch})
        return seen, tasks, style.value(w)


@pytest.mark.parametrize('mode', ['together', 'alternate', 'weighted'])
def test_interleaved_flows_resume_exactly_mid_epoch(style, tmp_path, mode):
    whole, whole_tasks, whole_w = train(style, None, mode)
    first = []
    with pytest.raises(KeyboardInterrupt):
        train(style, tmp_path, mode, stop_at=STOP_AT, seen=first)
    assert len(first) == STOP_AT - 1
    second, tasks, w = train(style, tmp_path, mode)
    assert second[0][:2] == (2, STOP_AT)
    assert first + second == whole
    assert w == whole_w          # the same batches in the same order
    assert tasks.best == whole_tasks.best and tasks.best_step == whole_tasks.best_step
    # the checkpoint holds one position per task's flow
    state = saved_loop_state(tmp_path, STOP_AT - 1)
    (position,) = state['dataflows']
    assert set(position['flows']) == {'digit', 'coarse'} and position['served'] == 1
    if mode == 'together':
        # both tasks' valid losses were the step: the per-task bests resumed
        assert tasks.best == {'digit': 1., 'coarse': 1.}


# ----------------------------------------------------------------- strategy
def test_under_two_workers_each_task_flow_is_sharded_with_its_own_seed():
    from tests.scaffold.test_loop_strategy import FakeTwoWorkerBackend, distribution_of
    from tfsnippet.dataflows import ShardedFlow

    def make(shuffle=False, digit_batch=4):
        return spt.DataFlow.tasks({
            'digit': spt.DataFlow.arrays([np.arange(16.)], digit_batch, shuffle=shuffle,
                                         random_state=1),
            'coarse': spt.DataFlow.arrays([np.arange(100., 116.)], 8, shuffle=shuffle,
                                          random_state=2)},
            mode='weighted', weights=[1, 1], epoch=4, random_state=5)

    with spt.TrainLoop(max_epoch=1) as loop:
        dist = distribution_of(loop, FakeTwoWorkerBackend(worker_index=1))
        try:
            out = dist.distribute_data(make())
            assert isinstance(out, spt.dataflows.MultiTaskFlow)
            assert out.task_names == ('digit', 'coarse')
            sharded = {t: f.source for t, f in out.flows.items()}
            assert all(isinstance(f, ShardedFlow) and f.worker_index == 1 and f.num_workers == 2
                       for f in sharded.values())
            # worker 1 serves the second half of each global batch
            assert [b[0].tolist() for b in sharded['coarse']] == [[104., 105., 106., 107.],
                                                                 [112., 113., 114., 115.]]
            # a task's flow that cannot be distributed is named
            with pytest.raises(ValueError, match=r"Task 'digit' of the MultiTaskFlow: The "
                                                 r"DataFlow given to `iter_steps\(\)` has "
                                                 r"batches of 6 rows"):
                dist.distribute_data(make(digit_batch=6))
            # shuffled task flows made with an int random_state keep their own seeds, so
            # every worker (and a run without a strategy) draws each task's order alike
            out = dist.distribute_data(make(shuffle=True))
            assert {t: f.source.seed for t, f in out.flows.items()} == {'digit': 1, 'coarse': 2}
        finally:
            dist.detach()
