"""The classic ``CheckpointSaver`` arguments and restoring a subset (issue 22, eager mode;
the graph twins are in tests/graph/test_classic_compat.py)."""

import re

import pytest
import tensorflow as tf

from tfsnippet.scaffold.checkpoint.saver import CheckpointSaver


def test_save_meta_is_accepted_and_kept(tmp_path):
    v = tf.Variable(1.)
    assert CheckpointSaver([v], str(tmp_path), save_meta=False).save_meta is False
    saver = CheckpointSaver([v], str(tmp_path))
    assert saver.save_meta is True
    assert saver.saver is None                 # eager mode: no tf.compat.v1 Saver
    assert saver.strict is False
    with pytest.raises(TypeError, match=re.escape('`save_meta` must be True or False')):
        CheckpointSaver([v], str(tmp_path), save_meta='no')


def test_a_checkpoint_of_more_variables_restores_the_subset(tmp_path):
    x, y = tf.Variable(1., name='x'), tf.Variable(2., name='y')
    CheckpointSaver([x, y], str(tmp_path)).save(0)
    x2 = tf.Variable(0., name='x')
    path, _ = CheckpointSaver([x2], str(tmp_path)).restore_latest()
    assert path.endswith('checkpoint.dat-0') and x2.numpy() == 1.


def test_strict_refuses_the_checkpoint_of_more_variables(tmp_path):
    x, y = tf.Variable(1., name='x'), tf.Variable(2., name='y')
    CheckpointSaver([x, y], str(tmp_path)).save(0)
    x2 = tf.Variable(0., name='x')
    with pytest.raises(ValueError, match=re.escape(
            "in the checkpoint but not among the variables to restore: ['y']")):
        CheckpointSaver([x2], str(tmp_path), strict=True).restore_latest()
    assert x2.numpy() == 0.


def test_a_variable_missing_from_the_checkpoint_is_still_an_error(tmp_path):
    x = tf.Variable(1., name='x')
    CheckpointSaver([x], str(tmp_path)).save(0)
    x2, z = tf.Variable(0., name='x'), tf.Variable(0., name='z')
    with pytest.raises(ValueError, match=re.escape("missing from the checkpoint: ['z']")):
        CheckpointSaver([x2, z], str(tmp_path)).restore_latest()
    assert x2.numpy() == 0.
