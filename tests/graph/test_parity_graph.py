"""The same data on any topology, with TF1-style graph code.

In graph mode the loop feeds the flow's own global batches, under a strategy
too (each replica takes its share inside the graph with ``replica_slice``).
A run without a strategy and a run under ``OneDeviceStrategy`` see the same
rows at every step, and a checkpoint written by one, in the middle of an
epoch, resumes the other with the rest of the same epoch.  Each run builds
its own graph and session, the way a new process would.
"""

import contextlib

import numpy as np
import tensorflow as tf

import tfsnippet as spt

v1 = tf.compat.v1

ROWS, BATCH, SEED = 30, 4, 5      # 7 full batches an epoch, 2 rows dropped
STOP_AT = 10                      # the 3rd step of epoch 2


@contextlib.contextmanager
def new_graph():
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph) as session:
        yield session


def rows_of_run(root, strategy=None, stop_at=None):
    """The x rows of each step of 3 epochs (step checkpoints in `root`)."""
    seen = []
    with new_graph() as session:
        scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
        with scope:
            w = v1.get_variable('w', shape=(), initializer=v1.zeros_initializer())
        session.run(v1.global_variables_initializer())
        flow = spt.DataFlow.arrays([np.arange(ROWS)], BATCH, shuffle=True,
                                   skip_incomplete=True, random_state=SEED)
        try:
            with spt.TrainLoop([w], max_epoch=3, strategy=strategy, print_func=lambda s: None,
                               checkpoint_dir=str(root), checkpoint_step_freq=1) as loop:
                for _ in loop.iter_epochs():
                    for step, (x,) in loop.iter_steps(flow):
                        if step == stop_at:
                            raise KeyboardInterrupt()
                        seen.append(np.asarray(x).tolist())
        except KeyboardInterrupt:
            pass
    return seen


def test_graph_runs_see_the_same_rows_with_and_without_a_strategy_and_across_a_resume(
        tmp_path):
    expected = []
    rng = np.random.RandomState(SEED)   # the orders of DataFlow.arrays(random_state=SEED)
    for _ in range(3):
        order = rng.permutation(ROWS).tolist()
        expected.extend(order[i:i + BATCH] for i in range(0, ROWS - BATCH + 1, BATCH))
    strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
    assert rows_of_run(tmp_path / 'alone') == expected
    assert rows_of_run(tmp_path / 'strategy', strategy) == expected
    # saved without a strategy, resumed under one; and the other way round
    before = rows_of_run(tmp_path / 'a', stop_at=STOP_AT)
    after = rows_of_run(tmp_path / 'a', strategy)
    assert before + after == expected and len(before) == STOP_AT - 1
    before = rows_of_run(tmp_path / 'b', strategy, stop_at=STOP_AT)
    after = rows_of_run(tmp_path / 'b')
    assert before + after == expected and len(before) == STOP_AT - 1
