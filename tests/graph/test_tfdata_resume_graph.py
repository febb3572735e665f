"""A ``tf.data.Dataset`` given to ``iter_steps`` in TF1 graph code resumes exactly.

What is graph-only (the rest runs in both styles in tests/scaffold/test_tfdata_resume.py).  In graph mode the loop
reads a Dataset through an initializable iterator whose state a
``tf.compat.v1.train.Saver`` saves; each run builds its own graph and
session, as a new process would.  An initializable iterator restarts its
shuffle seeds at each initialization (every epoch has the same order), so
the exactness is checked with an unseeded shuffle: the batches after a resume
must hold exactly the rows the interrupted epoch had not served.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers import checkpoint_path

v1 = tf.compat.v1
ROWS, BATCH = 20, 4
STEPS = ROWS // BATCH


def unseeded():
    return tf.data.Dataset.range(ROWS).shuffle(ROWS).batch(BATCH)


def seeded():
    return tf.data.Dataset.range(ROWS).shuffle(ROWS, seed=3).batch(BATCH)


def run(root, data, lines=None, stop_at=None, seen=None, max_epoch=2, **kwargs):
    """Train over `data()` in a new graph and session; return the ids of each step."""
    seen = [] if seen is None else seen
    with tf.Graph().as_default(), v1.Session().as_default():
        dataset = data()
        loop = spt.TrainLoop(max_epoch=max_epoch, checkpoint_dir=str(root), show_eta=False,
                             print_func=(lines if lines is not None else []).append,
                             checkpoint_step_freq=1, **kwargs)
        with loop:
            for epoch in loop.iter_epochs():
                for step, batch in loop.iter_steps(dataset):
                    assert isinstance(batch, np.ndarray)   # fetched, ready to feed
                    seen.append(batch.tolist())
                    if step == stop_at:
                        raise KeyboardInterrupt()
    return seen


def test_the_graph_iterator_resumes_mid_epoch_exactly(tmp_path):
    first = []
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, unseeded, stop_at=3, seen=first)
    lines = []
    rest = run(tmp_path, unseeded, lines)
    assert lines[0] == (f'Resume training: epoch 1, step 2, from checkpoint '
                        f'{checkpoint_path(tmp_path, 2)}')
    assert not any('skipped' in line for line in lines)
    assert sorted(os.listdir(os.path.join(checkpoint_path(tmp_path, 2), 'loop'))) == \
        ['iterator-0.data-00000-of-00001', 'iterator-0.index']
    # the interrupted epoch: its first two batches, then exactly the rows it had not served
    epoch = first[:2] + rest[:STEPS - 2]
    assert sorted(sum(epoch, [])) == list(range(ROWS))
    assert len(rest) == 2 * STEPS - 2     # and then one whole epoch


def test_a_seeded_graph_pipeline_matches_an_uninterrupted_run(tmp_path):
    reference = run(tmp_path / 'reference', seeded)
    first = []
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, seeded, stop_at=STEPS + 2, seen=first)
    rest = run(tmp_path, seeded)
    assert first[:STEPS + 1] + rest == reference


def test_a_finalized_graph_is_refused_with_how_to_fix_it(session, graph):
    dataset = seeded()
    graph.finalize()
    with spt.TrainLoop(max_epoch=1, print_func=lambda s: None) as loop:
        for _ in loop.iter_epochs():
            with pytest.raises(RuntimeError, match=r'the graph is finalized: call `iter_steps\(\)` '
                                                   r'with it before finalizing the graph'):
                loop.iter_steps(dataset)
