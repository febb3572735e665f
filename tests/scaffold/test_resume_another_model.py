"""Resuming a checkpoint saved by another model: one line saying what differs, in short, and
how to start afresh, as a `spt.CheckpointMismatchError` (a ValueError) whose attributes hold
the full lists; nothing is assigned and the loop body does not run."""

import os

import numpy as np
import pytest

import tfsnippet as spt


def test_a_checkpoint_of_another_model_is_one_line_saying_how_to_start_afresh(style, tmp_path):
    w = style.variable([1., 2.], 'w')
    with spt.TrainLoop([w], checkpoint_dir=str(tmp_path)) as loop:
        loop.make_checkpoint()
    path = os.path.join(str(tmp_path), 'checkpoint', 'checkpoint.dat-0')
    # the model grew a variable (in graph style: the graph did, and the loop saves all)
    v = style.variable([7., 7., 7.], 'v')
    ran = []
    with pytest.raises(spt.CheckpointMismatchError) as e:
        with spt.TrainLoop([w, v], max_epoch=1, checkpoint_dir=str(tmp_path)):
            ran.append(True)
    assert str(e.value) == (
        f"The checkpoint {path!r} does not match the variables: missing from the checkpoint: "
        f"['v']. The model changed since the checkpoint was saved: to start afresh, pass "
        f"`restore_checkpoint=False` or use a new `checkpoint_dir` (and `warm_start=` to "
        f"reuse the matching weights)")
    assert (e.value.path, e.value.missing, e.value.unexpected) == (path, ['v'], [])
    assert isinstance(e.value, ValueError) and ran == []
    np.testing.assert_array_equal(style.value(v), [7., 7., 7.])

    # starting afresh as it says works
    with spt.TrainLoop([w, v], max_epoch=1, checkpoint_dir=str(tmp_path),
                       restore_checkpoint=False):
        ran.append(True)
    assert ran == [True]


def test_many_differences_are_cut_short(tmp_path):
    import tensorflow as tf
    old = [tf.Variable(0., name=f'old{i}') for i in range(7)]
    with spt.TrainLoop(old, checkpoint_dir=str(tmp_path)) as loop:
        loop.make_checkpoint()
    new = [tf.Variable(0., name=f'new{i}') for i in range(6)]
    with pytest.raises(spt.CheckpointMismatchError) as e:
        with spt.TrainLoop(new, checkpoint_dir=str(tmp_path)):
            pass
    message = str(e.value)
    assert '\n' not in message
    assert ("missing from the checkpoint: ['new0', 'new1', 'new2', 'new3', 'new4', ... (6 in "
            "all)]; in the checkpoint but not among the variables to restore: ['old0', 'old1', "
            "'old2', 'old3', 'old4', ... (7 in all)] (a Keras optimizer") in message
    assert message.endswith('to start afresh, pass `restore_checkpoint=False` or use a new '
                            '`checkpoint_dir` (and `warm_start=` to reuse the matching weights)')
    assert e.value.missing == [f'new{i}' for i in range(6)]
    assert e.value.unexpected == [f'old{i}' for i in range(7)]
