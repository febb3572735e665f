"""Multi-task training with TF1-style graph code: a shared trunk, two heads, two train ops.

What both styles share is in tests/scaffold/test_multitask.py (the tests
taking ``style``); here a graph model is trained with ``session.run`` on a
MultiTaskFlow, one train op per task, its per-task metrics computed by the
graph.  Run 1 is interrupted inside epoch 2, run 2 resumes from its step
checkpoints; together they must see the batches, print the per-task
lines and end with the weights of an uninterrupted run.  Each run builds
its own graph and session, the way a new process would.
"""

import contextlib

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers import read_scalars

v1 = tf.compat.v1

STOP_AT = 9            # inside epoch 2 or 3 (epochs of 4 to 8 steps, by the mode)


@contextlib.contextmanager
def new_graph():
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph) as session:
        yield session


def make_flow(mode):
    x = np.linspace(-1., 1., 12).astype(np.float32)
    flows = {'up': spt.DataFlow.arrays([x, 2. * x], 3, shuffle=True, random_state=1),
             'down': spt.DataFlow.arrays([x[:8], -x[:8] + .5], 4, shuffle=True,
                                         random_state=2)}
    weights = [1, 1] if mode == 'weighted' else None
    return spt.DataFlow.tasks(flows, mode=mode, weights=weights, epoch='longest',
                              random_state=3)


def run(session, mode, root=None, stop_at=None, seen=None, lines=None, summary_dir=None):
    """Train 3 epochs of a trunk ``h = w * x`` with one head per task; return the weights."""
    x_ph = v1.placeholder(tf.float32, [None], name='x')
    y_ph = v1.placeholder(tf.float32, [None], name='y')
    w = v1.get_variable('w', shape=(), initializer=v1.constant_initializer(.5))
    heads, train_ops, losses = {}, {}, {}
    for task in ('up', 'down'):
        heads[task] = v1.get_variable(f'{task}_head', shape=(),
                                      initializer=v1.constant_initializer(.1))
        losses[task] = tf.reduce_mean(tf.square(heads[task] * w * x_ph - y_ph))
        train_ops[task] = v1.train.GradientDescentOptimizer(0.1).minimize(losses[task])
    session.run(v1.global_variables_initializer())
    flow = make_flow(mode)
    options = {} if root is None else dict(checkpoint_dir=str(root), checkpoint_step_freq=1)
    if summary_dir is not None:
        options['summary_dir'] = str(summary_dir)
    variables = [w, *heads.values()]
    print_func = (lines if lines is not None else []).append
    loop = spt.TrainLoop(variables, max_epoch=3, print_func=print_func, **options)
    tasks = spt.MultiTaskMetrics(flow)
    loop.add_component(tasks)
    with loop:
        for epoch in loop.iter_epochs():
            for step, batch in loop.iter_steps(flow):
                if step == stop_at:
                    raise KeyboardInterrupt()
                for task, (bx, by) in batch.items():
                    _, loss = session.run([train_ops[task], losses[task]],
                                          feed_dict={x_ph: bx, y_ph: by})
                    loop.collect_metrics({f'{task}/loss': loss})
                    seen.append((epoch, step, task, bx.tolist()))
            x = make_flow(mode).flows['up'].the_arrays[0]
            loop.collect_metrics({
                f'{task}/valid_loss': session.run(losses[task], feed_dict={
                    x_ph: x, y_ph: 2. * x if task == 'up' else -x + .5})
                for task in ('up', 'down')})
            loop.print_logs()
    return session.run(variables), tasks


@pytest.mark.parametrize('mode', ['together', 'alternate', 'weighted'])
def test_two_heads_resumed_mid_epoch_see_the_same_batches(tmp_path, mode):
    full, lines = [], []
    with new_graph() as session:
        expected, tasks = run(session, mode, seen=full, lines=lines,
                              summary_dir=tmp_path / 'tb')
    first, second = [], []
    with new_graph() as session:
        with pytest.raises(KeyboardInterrupt):
            run(session, mode, root=tmp_path / 'ckpt', stop_at=STOP_AT, seen=first)
    with new_graph() as session:
        resumed, resumed_tasks = run(session, mode, root=tmp_path / 'ckpt', seen=second)
    assert {step for (_, step, _, _) in first} == set(range(1, STOP_AT))
    assert STOP_AT - 1 not in {s for (_, s, _, _) in second}
    assert second[0][1] == STOP_AT
    assert first + second == full
    np.testing.assert_allclose(resumed, expected, rtol=1e-6)
    assert resumed_tasks.best == tasks.best and resumed_tasks.best_step == tasks.best_step
    # per-task lines and summaries
    epoch_lines = [line for line in lines if line.startswith('[Epoch')]
    assert len(epoch_lines) == 3
    for part in ('up/loss: ', 'down/loss: ', 'up/valid loss: ', 'down/valid loss: ',
                 'valid loss: '):
        assert all(part in line for line in epoch_lines)
    assert lines[-1].startswith('Best per task: up/valid_loss ')
    scalars = read_scalars(tmp_path / 'tb')
    up, down = dict(scalars['metrics/up/valid_loss']), dict(scalars['metrics/down/valid_loss'])
    assert [s for s, _ in scalars['metrics/valid_loss']] == sorted(up)
    for s, v in scalars['metrics/valid_loss']:
        assert v == pytest.approx((up[s] + down[s]) / 2, rel=1e-6)
    assert {'metrics/up/loss', 'metrics/down/loss'} <= set(scalars)
