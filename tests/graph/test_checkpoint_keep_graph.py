"""The k best checkpoints kept beside the latest N, with TF1-style graph code.

Each run builds its own graph and session, the way a new process would.
``w`` gains 1 per step, two steps per epoch, so the checkpoint of the end
of epoch ``e`` holds ``2 * e``.
"""

import os

import numpy as np
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint.policies import KeepBest, KeepLatest, SaveAtEnd, SaveEvery
from tests.graph.test_checkpoint_best_graph import NAN, ckpt, index, new_graph

v1 = tf.compat.v1
# improves (1, 2), worsens (3), improves on the 2nd best (4), NaN (5), worsens (6)
VALID = {1: 0.5, 2: 0.2, 3: 0.4, 4: 0.3, 5: NAN, 6: 0.7}


def run(root, valid, max_epoch, lines=None):
    """Train up to `max_epoch` in a new graph with a Checkpointer added by hand."""
    with new_graph() as session:
        w = v1.get_variable('w', shape=[3], initializer=v1.zeros_initializer())
        train_op = v1.assign_add(w, tf.ones([3]))
        session.run(v1.global_variables_initializer())
        checkpointer = spt.Checkpointer(
            str(root), save=[SaveEvery(epochs=1), SaveAtEnd()], variables=[w],
            keep=[KeepLatest(2), KeepBest(k=2, metric='valid_loss')])
        loop = spt.TrainLoop([w], max_epoch=max_epoch,
                             print_func=(lines if lines is not None else []).append)
        loop.add_component(checkpointer)
        with loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(2)):
                    session.run(train_op)
                if epoch in valid:
                    loop.collect_metrics(valid_loss=valid[epoch])
        return checkpointer


def kept(root):
    """``{step: w[0]}`` of every checkpoint on disk, read back."""
    save_dir = os.path.join(str(root), 'checkpoint')
    names = [n for n in os.listdir(save_dir) if n.startswith('checkpoint.dat-')]
    return {int(n.split('-')[1]): float(tf.train.load_checkpoint(
        os.path.join(save_dir, n, 'variables')).get_tensor('w')[0]) for n in names}


def test_the_k_best_and_the_latest_n_are_kept_and_read_back(tmp_path):
    checkpointer = run(tmp_path, VALID, 6)
    assert kept(tmp_path) == {4: 4., 8: 8., 10: 10., 12: 12.}
    assert index(tmp_path)['checkpoints'] == [ckpt(4), ckpt(8), ckpt(10), ckpt(12)]
    assert [(os.path.basename(p), r['value'], r['epoch'])
            for p, r in checkpointer.best_checkpoints()] == [(ckpt(4), 0.2, 2), (ckpt(8), 0.3, 4)]


def test_the_k_best_survive_a_resume_and_are_replaced_by_better(tmp_path):
    run(tmp_path, VALID, 6)
    lines = []
    checkpointer = run(tmp_path, {7: 0.25, 8: 0.1}, 8, lines=lines)
    assert lines[0].startswith('Resume training: epoch 6, step 12, from checkpoint ')
    assert kept(tmp_path) == {4: 4., 14: 14., 16: 16.}
    assert [(os.path.basename(p), r['value']) for p, r in checkpointer.best_checkpoints()] == \
        [(ckpt(16), 0.1), (ckpt(4), 0.2)]
    np.testing.assert_array_equal(
        tf.train.load_checkpoint(os.path.join(checkpointer.best_checkpoint()[0],
                                              'variables')).get_tensor('w'), [16., 16., 16.])
