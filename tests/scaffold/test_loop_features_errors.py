"""Misuses of the loop's optional features: one test per bad input.

Each test names the exception type and matches its whole message.  The
invalid options are rejected when the loop is constructed, except those that
depend on the file system when it is entered (then before any training).
"""

import os
import re

import pytest
import tensorflow as tf

import tfsnippet as spt


def var():
    return tf.Variable(0., name='w')


# ------------------------------------------------------------ checkpoint options
@pytest.mark.parametrize('value', [0, -1])
def test_non_positive_checkpoint_epoch_freq(tmp_path, value):
    with pytest.raises(ValueError, match=re.escape(
            f'`checkpoint_epoch_freq` must be a positive int or None, got {value}')):
        spt.TrainLoop([var()], checkpoint_dir=str(tmp_path), checkpoint_epoch_freq=value)


@pytest.mark.parametrize('value', [0, -2])
def test_non_positive_checkpoint_step_freq(tmp_path, value):
    with pytest.raises(ValueError, match=re.escape(
            f'`checkpoint_step_freq` must be a positive int or None, got {value}')):
        spt.TrainLoop([var()], checkpoint_dir=str(tmp_path), checkpoint_step_freq=value)


@pytest.mark.parametrize('value', [0, -3])
def test_non_positive_checkpoint_max_to_keep(tmp_path, value):
    with pytest.raises(ValueError, match=re.escape(
            f'`checkpoint_max_to_keep` must be a positive int or None, got {value}')):
        spt.TrainLoop([var()], checkpoint_dir=str(tmp_path), checkpoint_max_to_keep=value)


@pytest.mark.parametrize('value', [0, -1.5, 0.])
def test_non_positive_checkpoint_secs(tmp_path, value):
    with pytest.raises(ValueError, match=re.escape(
            f'`checkpoint_secs` must be a positive number or None, got {value}')):
        spt.TrainLoop([var()], checkpoint_dir=str(tmp_path), checkpoint_secs=value)


def test_checkpoint_epoch_freq_of_a_float(tmp_path):
    with pytest.raises(TypeError, match=re.escape(
            '`checkpoint_epoch_freq` must be a positive int or None, got 1.5')):
        spt.TrainLoop([var()], checkpoint_dir=str(tmp_path), checkpoint_epoch_freq=1.5)


@pytest.mark.parametrize('option,value', [
    ('checkpoint_epoch_freq', 1), ('checkpoint_step_freq', 1), ('checkpoint_secs', 10.),
    ('checkpoint_max_to_keep', 2), ('checkpoint_save_objects', {}),
    ('checkpoint_keep_best', True), ('checkpoint_keep_best', 'valid_acc'),
    ('export_best', 'best.weights.h5'), ('checkpoint_async', True),
])
def test_checkpoint_options_without_checkpoint_dir(option, value):
    with pytest.raises(ValueError, match=re.escape(
            f'The `checkpoint_*` options need `checkpoint_dir`; `{option}` was given without it')):
        spt.TrainLoop([var()], **{option: value})


def test_restore_checkpoint_of_a_missing_path(tmp_path):
    missing = str(tmp_path / 'no' / 'checkpoint.dat-3')
    with pytest.raises(ValueError, match=re.escape(
            f'`restore_checkpoint` must be True, False or the path of an existing checkpoint, '
            f'but {missing!r} is not a checkpoint')):
        spt.TrainLoop([var()], checkpoint_dir=str(tmp_path), restore_checkpoint=missing)


def test_restore_checkpoint_of_a_directory_that_is_not_a_checkpoint(tmp_path):
    with pytest.raises(ValueError, match=re.escape(
            f'`restore_checkpoint` must be True, False or the path of an existing checkpoint, '
            f'but {str(tmp_path)!r} is not a checkpoint')):
        spt.TrainLoop([var()], checkpoint_dir=str(tmp_path), restore_checkpoint=str(tmp_path))


def test_restore_checkpoint_of_a_wrong_type(tmp_path):
    with pytest.raises(TypeError, match=re.escape(
            '`restore_checkpoint` must be True, False or a checkpoint path, got 1')):
        spt.TrainLoop([var()], checkpoint_dir=str(tmp_path), restore_checkpoint=1)


@pytest.mark.parametrize('obj', [object(), {'a': 1}, [tf.Variable(1.)], 'text'],
                         ids=['object', 'dict', 'list', 'str'])
def test_checkpoint_save_objects_of_a_wrong_type(tmp_path, obj):
    with pytest.raises(TypeError, match=re.escape(
            "`checkpoint_save_objects['thing']` must be a variable, a TF trackable with "
            "variables (Keras model, layer or optimizer, tf.Module) or a "
            f"CheckpointSavableObject, got {obj!r}")):
        spt.TrainLoop([var()], checkpoint_dir=str(tmp_path),
                      checkpoint_save_objects={'thing': obj})


def test_checkpoint_save_objects_not_a_dict(tmp_path):
    objects = [spt.CheckpointSavableObject()]
    with pytest.raises(TypeError, match=re.escape(
            f'`checkpoint_save_objects` must be a dict {{name: object}}, got {objects!r}')):
        spt.TrainLoop([var()], checkpoint_dir=str(tmp_path), checkpoint_save_objects=objects)


def test_checkpoint_save_objects_reserved_key(tmp_path):
    with pytest.raises(ValueError, match=re.escape(
            '`checkpoint_save_objects` keys must be non-empty str not starting with "$$", '
            "got '$$train_loop'")):
        spt.TrainLoop([var()], checkpoint_dir=str(tmp_path),
                      checkpoint_save_objects={'$$train_loop': spt.CheckpointSavableObject()})


def test_unwritable_checkpoint_dir_fails_on_enter_before_training(tmp_path):
    blocker = tmp_path / 'a_file'
    blocker.write_text('not a directory')
    ckpt_dir = str(blocker / 'ckpt')
    loop = spt.TrainLoop([var()], max_epoch=2, checkpoint_dir=ckpt_dir, checkpoint_epoch_freq=1)
    ran = []
    with pytest.raises(ValueError, match=re.escape(f'`checkpoint_dir` {ckpt_dir!r} is not '
                                                   f'writable: ')):
        with loop:
            ran.append('body')
    assert ran == []
    assert (loop.epoch, loop.step) == (0, 0)
    assert not os.path.exists(ckpt_dir)


def test_make_checkpoint_without_checkpoint_dir():
    with spt.TrainLoop([var()]) as loop:
        with pytest.raises(RuntimeError, match=re.escape(
                'Checkpoint directory is not configured: pass `checkpoint_dir` to TrainLoop')):
            loop.make_checkpoint()


def test_make_checkpoint_outside_the_loop(tmp_path):
    loop = spt.TrainLoop([var()], checkpoint_dir=str(tmp_path))
    with pytest.raises(RuntimeError, match=re.escape(
            f'{loop!r} must be entered first: call this inside its `with` block')):
        loop.make_checkpoint()
    assert not os.path.exists(tmp_path / 'checkpoint')


# ------------------------------------------------------------ early stopping
@pytest.mark.parametrize('param_vars', [None, [], {}], ids=['None', 'list', 'dict'])
def test_early_stopping_without_param_vars(param_vars):
    with pytest.raises(ValueError, match=re.escape(
            '`early_stopping=True` needs `param_vars`: the variables whose best values are '
            'kept, got none')):
        spt.TrainLoop(param_vars, early_stopping=True)


def test_early_stopping_without_a_valid_metric_name():
    with pytest.raises(ValueError, match=re.escape(
            '`early_stopping=True` needs a `valid_metric_name`, got None')):
        spt.TrainLoop([var()], early_stopping=True, valid_metric_name=None)


def test_early_stopping_patience_without_early_stopping():
    with pytest.raises(ValueError, match=re.escape(
            '`early_stopping_patience` needs `early_stopping=True`')):
        spt.TrainLoop([var()], early_stopping_patience=3)


@pytest.mark.parametrize('value, error', [(0, ValueError), (-1, ValueError), (2.5, TypeError)])
def test_bad_early_stopping_patience(value, error):
    with pytest.raises(error, match=re.escape(
            f'`early_stopping_patience` must be a positive int or None, got {value}')):
        spt.TrainLoop([var()], early_stopping=True, early_stopping_patience=value)


def test_request_stop_with_a_reason_that_is_not_a_str():
    with spt.TrainLoop(max_epoch=1) as loop:
        with pytest.raises(TypeError, match=re.escape(
                '`reason` must be a str or None, got 42')):
            loop.request_stop(42)
        assert not loop.stop_requested


# ------------------------------------------------------------------ summaries
def test_add_summary_without_a_writer():
    summary = tf.compat.v1.Summary()
    with spt.TrainLoop(max_epoch=1) as loop:
        with pytest.raises(RuntimeError, match=re.escape(
                '`add_summary()` needs a summary writer: pass `summary_dir` or '
                '`summary_writer` to TrainLoop')):
            loop.add_summary(summary)


def test_add_summary_of_a_wrong_type(tmp_path):
    with spt.TrainLoop(max_epoch=1, summary_dir=str(tmp_path)) as loop:
        with pytest.raises(TypeError, match=re.escape(
                '`summary` must be a Summary protocol buffer or its serialized bytes (e.g. '
                "what `session.run` returns for a merged summary), got 'loss'")):
            loop.add_summary('loss')


@pytest.mark.parametrize('writer', [object(), 'logs', tf.summary.create_noop_writer()],
                         ids=['object', 'str', 'tf2-writer'])
def test_summary_writer_of_a_wrong_type(writer):
    with pytest.raises(TypeError, match=re.escape(
            '`summary_writer` must be a tfsnippet SummaryWriter or a writer with '
            '`add_summary(summary, global_step)` such as tf.compat.v1.summary.FileWriter, '
            f'got {writer!r}')):
        spt.TrainLoop(summary_writer=writer)


def test_summary_commit_freq_not_positive(tmp_path):
    with pytest.raises(ValueError, match=re.escape(
            "`summary_commit_freqs['loss']` must be a positive int, got 0")):
        spt.TrainLoop(summary_dir=str(tmp_path), summary_commit_freqs={'loss': 0})


def test_summary_skip_pattern_of_a_wrong_type(tmp_path):
    with pytest.raises(TypeError, match=re.escape(
            '`summary_skip_pattern` must be a regex, a str or None, got 3')):
        spt.TrainLoop(summary_dir=str(tmp_path), summary_skip_pattern=3)


def test_summary_graph_of_a_wrong_type(tmp_path):
    with pytest.raises(TypeError, match=re.escape(
            "`summary_graph` must be a tf.Graph, got 'graph'")):
        spt.TrainLoop(summary_dir=str(tmp_path), summary_graph='graph')
