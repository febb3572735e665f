"""A checkpoint whose loop state holds a wrong-typed value, or whose ``state.npz``
is damaged, is a CheckpointError naming the checkpoint and the field (or file);
on resume it is skipped with a warning and the loop goes on from the one
before, in both TF styles."""

from __future__ import annotations

import contextlib
import io
import os
import re
import zipfile

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers import checkpoint_path as ckpt_path
from tfsnippet.scaffold.checkpoint.state_format import decode_state, encode_state

SKIPPED = 'Skipping a checkpoint that cannot be read: '


@contextlib.contextmanager
def model(style):
    """``(variables, step, value)``: a variable `w`, a step adding 1 to it, its value;
    in graph style in a graph and session of their own, as a new process builds them."""
    if not style.is_graph:
        w = tf.Variable(0., name='w')
        add = tf.function(lambda: w.assign_add(1.))
        yield [w], (lambda: add()), (lambda: float(w.numpy()))
        return
    with tf.Graph().as_default(), tf.compat.v1.Session() as session:
        w = tf.Variable(0., name='w')
        op = w.assign_add(1.)
        session.run(w.initializer)
        yield [w], (lambda: session.run(op)), (lambda: float(session.run(w)))


def train(style, root, lines, max_epoch=2, **kwargs):
    """Two steps an epoch, a checkpoint after each epoch (steps 2, 4, ...);
    returns the value of `w` after the loop."""
    with model(style) as (variables, step, value):
        loop = spt.TrainLoop(variables, max_epoch=max_epoch, checkpoint_dir=str(root),
                             checkpoint_epoch_freq=1, print_func=lines.append, show_eta=False,
                             **kwargs)
        with loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(2)):
                    step()
                loop.collect_metrics(valid_loss=1. / epoch)
        return value()


def rewrite_loop_state(path, field, value):
    """Write `value` into the field `field` (``a.b`` for nested) of the loop state of the
    checkpoint `path`, keeping the file a well-formed state file."""
    file = os.path.join(path, 'state.npz')
    with open(file, 'rb') as f:
        saved = decode_state(f.read())
    state = saved['objects']['$$train_loop']['loop']
    *parents, last = field.split('.')
    for name in parents:
        state = state[name]
    state[last] = value
    with open(file, 'wb') as f:
        f.write(encode_state(saved['step'], saved['variables'], saved['objects']).to_bytes())


BAD_FIELDS = [
    ('epoch', 'abc', "`epoch` must be an int >= 0, got 'abc' (str)"),
    ('step', -3, '`step` must be an int >= 0, got -3 (int)'),
    ('epoch_steps', 1.5, '`epoch_steps` must be an int >= 0 or None, got 1.5 (float)'),
    ('best_valid_metric', 'low', "`best_valid_metric` must be a number or None, got 'low' (str)"),
    ('valid_monitor.wait', 'x', "`valid_monitor.wait` must be an int >= 0, got 'x' (str)"),
    ('stop_reason', 7, '`stop_reason` must be a str or None, got 7 (int)'),
]


@pytest.mark.parametrize('field, value, problem', BAD_FIELDS, ids=[f[0] for f in BAD_FIELDS])
def test_a_wrong_typed_loop_state_field_falls_back_to_the_previous_checkpoint(
        style, tmp_path, field, value, problem):
    assert train(style, tmp_path, []) == 4.
    rewrite_loop_state(ckpt_path(tmp_path, 4), field, value)

    lines = []
    with pytest.warns(RuntimeWarning) as record:
        assert train(style, tmp_path, lines, max_epoch=3) == 6.   # 2 restored, then 2 epochs
    messages = [str(r.message) for r in record if str(r.message).startswith(SKIPPED)]
    assert messages == [f'{SKIPPED}The checkpoint {ckpt_path(tmp_path, 4)!r} holds a loop '
                        f'state that cannot be loaded: {problem}']
    assert lines[0] == f'Resume training: epoch 1, step 2, from checkpoint ' \
                       f'{ckpt_path(tmp_path, 2)}'


def test_restoring_that_checkpoint_by_name_is_a_checkpoint_error(style, tmp_path):
    train(style, tmp_path, [])
    rewrite_loop_state(ckpt_path(tmp_path, 4), 'epoch', 'abc')
    with pytest.raises(spt.CheckpointError, match=re.escape(
            f'The checkpoint {ckpt_path(tmp_path, 4)!r} holds a loop state that cannot be '
            f"loaded: `epoch` must be an int >= 0, got 'abc' (str)")):
        train(style, tmp_path, [], max_epoch=3, restore_checkpoint=ckpt_path(tmp_path, 4))


def damage_not_a_zip(path):
    with open(os.path.join(path, 'state.npz'), 'wb') as f:
        f.write(b'garbage, not an archive')


def damage_pickled_member(path):
    """A well-formed archive whose member ``a0`` is an object array (a pickle)."""
    file = os.path.join(path, 'state.npz')
    with zipfile.ZipFile(file, 'a') as archive:
        member = io.BytesIO()
        np.lib.format.write_array(member, np.array([{'x': 1}], dtype=object),
                                  allow_pickle=True)
        archive.writestr('a0.npy', member.getvalue())


@pytest.mark.parametrize('damage, problem', [
    (damage_not_a_zip, "it is not a .npz archive (it starts with b'garb')"),
    (damage_pickled_member, "its member 'a0' holds pickled objects, which a state never "
                            "holds (not loaded)"),
], ids=['not_a_zip', 'pickled_member'])
def test_a_damaged_state_file_is_skipped_without_numpy_s_pickle_advice(
        style, tmp_path, damage, problem):
    train(style, tmp_path, [])
    damage(ckpt_path(tmp_path, 4))

    lines = []
    with pytest.warns(RuntimeWarning) as record:
        assert train(style, tmp_path, lines, max_epoch=3) == 6.
    messages = [str(r.message) for r in record if str(r.message).startswith(SKIPPED)]
    state_file = os.path.join(ckpt_path(tmp_path, 4), 'state.npz')
    assert messages == [f'{SKIPPED}Cannot read the checkpoint state {state_file!r}: {problem}']
    assert 'allow_pickle' not in messages[0]
    assert lines[0] == f'Resume training: epoch 1, step 2, from checkpoint ' \
                       f'{ckpt_path(tmp_path, 2)}'
