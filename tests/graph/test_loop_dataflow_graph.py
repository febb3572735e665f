"""TrainLoop over a DataFlow with TF1-style graph code, resumed mid-epoch.

Each run builds its own graph and session, the way a new process would.  A
linear model is trained with ``session.run`` on the batches of a shuffled
flow; run 1 is interrupted inside epoch 2, run 2 resumes from its step
checkpoints, and together they must see the same batches, and end with the
same weights, as an uninterrupted run.
"""

import contextlib

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt

v1 = tf.compat.v1

ROWS, BATCH, SEED = 21, 4, 11      # 6 batches per epoch
STOP_AT = 10                       # the 4th step of epoch 2


@contextlib.contextmanager
def new_graph():
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph) as session:
        yield session


def make_flow():
    x = np.linspace(-1., 1., ROWS).astype(np.float32)
    y = (3. * x - 0.5).astype(np.float32)
    return spt.DataFlow.arrays([x, y], BATCH, shuffle=True, random_state=SEED)


def run(session, root=None, stop_at=None, seen=None):
    """Train 3 epochs; append ``(epoch, step, x batch)`` to `seen`; return (w, b)."""
    x_ph = v1.placeholder(tf.float32, [None], name='x')
    y_ph = v1.placeholder(tf.float32, [None], name='y')
    w = v1.get_variable('w', shape=(), initializer=v1.zeros_initializer())
    b = v1.get_variable('b', shape=(), initializer=v1.zeros_initializer())
    loss = tf.reduce_mean(tf.square(w * x_ph + b - y_ph))
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    session.run(v1.global_variables_initializer())
    flow = make_flow()
    options = {} if root is None else dict(checkpoint_dir=str(root), checkpoint_step_freq=1)
    with spt.TrainLoop([w, b], max_epoch=3, print_func=lambda s: None, **options) as loop:
        for epoch in loop.iter_epochs():
            for step, (bx, by) in loop.iter_steps(flow):
                if step == stop_at:
                    raise KeyboardInterrupt()
                session.run(train_op, feed_dict={x_ph: bx, y_ph: by})
                seen.append((epoch, step, bx.tolist()))
    return session.run([w, b])


def test_graph_training_resumed_mid_epoch_sees_the_same_batches(tmp_path):
    full = []
    with new_graph() as session:
        expected_wb = run(session, seen=full)
    # the uninterrupted run follows the flow's permutations
    rng = np.random.RandomState(SEED)
    x = make_flow().the_arrays[0]
    perms = [rng.permutation(ROWS) for _ in range(3)]
    assert [b for (_, _, b) in full] == [
        x[p[i:i + BATCH]].tolist() for p in perms for i in range(0, ROWS, BATCH)]

    first, second = [], []
    with new_graph() as session:
        with pytest.raises(KeyboardInterrupt):
            run(session, root=tmp_path, stop_at=STOP_AT, seen=first)
    with new_graph() as session:
        resumed_wb = run(session, root=tmp_path, seen=second)
    assert len(first) == STOP_AT - 1
    assert second[0][:2] == (2, STOP_AT)
    assert first + second == full
    np.testing.assert_allclose(resumed_wb, expected_wb, rtol=1e-6)
