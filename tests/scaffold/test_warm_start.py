"""Tests of `warm_start` in eager mode: each source format, name mapping, filters and errors.

Every source is written here, by the tool that normally writes it, from a
model whose variables are filled with constants (variable ``i`` of a model
filled from ``base`` holds ``base + i`` everywhere), so each restored value
tells where it came from.  The models are named, so Keras paths do not
depend on what else the process has built: ``net/hidden/kernel`` (3, 4),
``net/hidden/bias`` (4,), ``net/head/kernel`` (4, head), ``net/head/bias``
(head,).
"""

import os
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfsnippet.scaffold.checkpoint import CheckpointError, CheckpointSaver
from tfsnippet.scaffold.checkpoint.warm_start import WarmStartEntry, warm_start

v1 = tf.compat.v1
NET = ['net/hidden/kernel', 'net/hidden/bias', 'net/head/kernel', 'net/head/bias']


def make_net(name='net', head=2, base=0.):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4, name='hidden'),
                              keras.layers.Dense(head, name='head')], name=name)
    for i, var in enumerate(model.variables):
        var.assign(np.full(var.shape, base + i, dtype='float32'))
    return model


def filled(model):
    """``{path: the distinct values of the variable}``."""
    return {v.path: np.unique(v.numpy()).tolist() for v in model.variables}


def save_tfsnippet(root, model, step):
    """Save `model` the way a TrainLoop does: ``<root>/checkpoint/checkpoint.dat-<step>``."""
    saver = CheckpointSaver([], os.path.join(str(root), 'checkpoint'), objects={'model': model})
    return saver.save(step)


def save_tf1(prefix, values):
    """Write a ``tf.compat.v1.train.Saver`` checkpoint of ``{graph name: value}``."""
    with tf.Graph().as_default() as graph, v1.Session(graph=graph) as sess:
        for name, value in values.items():
            v1.get_variable(name, initializer=np.asarray(value))
        sess.run(v1.global_variables_initializer())
        return v1.train.Saver().save(sess, str(prefix), write_meta_graph=False)


# ------------------------------------------------------------ the four formats
def test_tfsnippet_root_reads_the_newest_checkpoint(tmp_path):
    source = make_net(base=10.)
    save_tfsnippet(tmp_path, source, step=5)
    for var in source.variables:
        var.assign(var + 10.)
    newest = save_tfsnippet(tmp_path, source, step=9)
    target = make_net(base=0.)
    lines = []

    report = warm_start(str(tmp_path), target, print_func=lines.append)

    assert filled(target) == {'net/hidden/kernel': [20.], 'net/hidden/bias': [21.],
                              'net/head/kernel': [22.], 'net/head/bias': [23.]}
    assert (report.source, report.source_format) == (newest, 'tfsnippet')
    assert report.restored == NET
    assert (report.skipped, report.mismatched, report.missing) == ([], [], [])
    assert report.unused == ()
    assert lines == [report.format_table()]


@pytest.mark.parametrize('where', ['checkpoint folder', 'checkpoint dir', 'variables prefix'])
def test_tfsnippet_checkpoint_given_by_its_folder_dir_or_prefix(tmp_path, where):
    old = save_tfsnippet(tmp_path, make_net(base=10.), step=1)
    new = save_tfsnippet(tmp_path, make_net(base=20.), step=2)
    path, want_path, want = {
        'checkpoint folder': (tmp_path / 'checkpoint', new, 20.),
        'checkpoint dir': (old, old, 10.),
        'variables prefix': (os.path.join(old, 'variables'), old, 10.),
    }[where]
    target = make_net()

    report = warm_start(path, target, print_func=None)

    assert report.source == want_path
    assert filled(target)['net/hidden/kernel'] == [want]


def test_tf_train_checkpoint_by_prefix_and_by_directory(tmp_path):
    module = tf.Module()
    module.w = tf.Variable(np.full([2, 3], 1., 'float32'))
    module.b = tf.Variable(np.full([3], 2., 'float32'))
    ckpt = tf.train.Checkpoint(enc=module)
    first = ckpt.save(str(tmp_path / 'ckpt'))
    module.w.assign(module.w + 10.)
    latest = ckpt.save(str(tmp_path / 'ckpt'))
    w, b = tf.Variable(tf.zeros([2, 3])), tf.Variable(tf.zeros([3]))

    report = warm_start(first, {'enc/w': w, 'enc/b': b}, print_func=None)
    assert (w.numpy().tolist(), b.numpy().tolist()) == ([[1.] * 3] * 2, [2.] * 3)
    assert (report.source, report.source_format) == (first, 'tf2')
    assert report.restored == ['enc/w', 'enc/b']
    assert report.unused == ('save_counter',)

    report = warm_start(str(tmp_path), {'enc/w': w}, print_func=None)
    assert report.source == latest
    assert w.numpy().tolist() == [[11.] * 3] * 2


def test_tf1_saver_checkpoint_by_directory_prefix_and_index_file(tmp_path):
    prefix = save_tf1(tmp_path / 'model.ckpt', {'enc/w': np.full([2, 3], 4., 'float32'),
                                                'enc/step': np.int64(7)})
    for path in [str(tmp_path), prefix, prefix + '.index']:
        w, step = tf.Variable(tf.zeros([2, 3])), tf.Variable(0, dtype=tf.int64, name='enc/step')

        report = warm_start(path, {'enc/w': w, 'x': step},
                            mapping={r'^x$': 'enc/step'}, print_func=None)

        assert (report.source, report.source_format) == (prefix, 'tf1')
        assert report.restored == ['enc/w', 'x']
        assert (w.numpy().tolist(), int(step.numpy())) == ([[4.] * 3] * 2, 7)


def test_keras_weights_file_by_dataset_paths(tmp_path):
    path = str(tmp_path / 'pre.weights.h5')
    make_net(base=30.).save_weights(path)
    target = make_net()

    # a .weights.h5 file stores each layer's values by position, under a
    # group named after the layer's class: `layers/dense/vars/0` is the kernel;
    # variables (not the model: that is matched by structure) need a mapping
    report = warm_start(path, list(target.variables), mapping={
        r'^net/hidden/kernel$': 'layers/dense/vars/0',
        r'^net/hidden/bias$': 'layers/dense/vars/1',
    }, print_func=None)

    assert (report.source, report.source_format) == (path, 'keras_h5')
    assert report.restored == ['net/hidden/kernel', 'net/hidden/bias']
    assert report.missing == ['net/head/kernel', 'net/head/bias']
    assert report.unused == ('layers/dense_1/vars/0', 'layers/dense_1/vars/1')
    assert filled(target) == {'net/hidden/kernel': [30.], 'net/hidden/bias': [31.],
                              'net/head/kernel': [2.], 'net/head/bias': [3.]}


# ------------------------------------------------------------ choosing targets
def test_mapping_first_matching_regex_wins_and_none_skips(tmp_path):
    save_tfsnippet(tmp_path, make_net('pre', base=10.), step=1)
    target = make_net()

    report = warm_start(tmp_path, target, mapping={
        r'/head/': None,
        r'^net/': 'pre/',
        r'^net/hidden/': 'never/used/',
    }, print_func=None)

    assert report.entries == (
        WarmStartEntry('net/hidden/kernel', 'restored', 'pre/hidden/kernel', '(3, 4)'),
        WarmStartEntry('net/hidden/bias', 'restored', 'pre/hidden/bias', '(4,)'),
        WarmStartEntry('net/head/kernel', 'skipped', None, 'mapped to None'),
        WarmStartEntry('net/head/bias', 'skipped', None, 'mapped to None'),
    )
    assert report.unused == ('pre/head/bias', 'pre/head/kernel')
    assert filled(target) == {'net/hidden/kernel': [10.], 'net/hidden/bias': [11.],
                              'net/head/kernel': [2.], 'net/head/bias': [3.]}


def test_mapping_replacement_uses_groups(tmp_path):
    save_tfsnippet(tmp_path, make_net('pre', base=10.), step=1)
    target = make_net()

    report = warm_start(tmp_path, target, mapping={r'^net/(\w+)/(\w+)$': r'pre/\1/\2'},
                        print_func=None)

    assert report.restored == NET
    assert filled(target)['net/head/bias'] == [13.]


def test_include_and_exclude(tmp_path):
    save_tfsnippet(tmp_path, make_net(base=10.), step=1)
    target = make_net()

    report = warm_start(tmp_path, target, include=[r'^net/hidden/', r'^net/head/kernel$'],
                        exclude=r'bias$', print_func=None)

    assert report.restored == ['net/hidden/kernel', 'net/head/kernel']
    assert [(e.target, e.detail) for e in report.entries if e.status == 'skipped'] == [
        ('net/hidden/bias', 'matched by `exclude`'),
        ('net/head/bias', 'not matched by `include`'),
    ]
    assert filled(target) == {'net/hidden/kernel': [10.], 'net/hidden/bias': [1.],
                              'net/head/kernel': [12.], 'net/head/bias': [3.]}


def test_targets_as_list_dict_and_module(tmp_path):
    save_tfsnippet(tmp_path, make_net(base=10.), step=1)
    as_list = make_net()
    other = tf.Variable(tf.zeros([4, 2]), name='other')
    module = tf.Module()
    module.k = tf.Variable(tf.zeros([3, 4]), name='net/hidden/kernel')

    by_list = warm_start(tmp_path, list(as_list.variables[:2]), print_func=None)
    by_dict = warm_start(tmp_path, {'net/head/kernel': other}, print_func=None)
    by_module = warm_start(tmp_path, module, print_func=None)

    assert by_list.restored == ['net/hidden/kernel', 'net/hidden/bias']
    assert filled(as_list) == {'net/hidden/kernel': [10.], 'net/hidden/bias': [11.],
                               'net/head/kernel': [2.], 'net/head/bias': [3.]}
    assert by_dict.restored == ['net/head/kernel']   # the key, not the variable's name
    assert np.unique(other.numpy()).tolist() == [12.]
    assert by_module.restored == ['net/hidden/kernel']
    assert np.unique(module.k.numpy()).tolist() == [10.]


def test_floats_are_cast(tmp_path):
    prefix = save_tf1(tmp_path / 'model.ckpt', {'w': np.float64(0.5)})
    w = tf.Variable(0., dtype=tf.float32, name='w')

    report = warm_start(prefix, [w], print_func=None)

    assert report.entries == (WarmStartEntry('w', 'restored', 'w', '(), cast from float64'),)
    assert float(w.numpy()) == 0.5


# ------------------------------------------------------------ mismatches
def test_shape_mismatch_raises_and_assigns_nothing(tmp_path):
    path = save_tfsnippet(tmp_path, make_net(head=2, base=10.), step=1)
    target = make_net(head=5)

    with pytest.raises(ValueError, match=re.escape(
            f"The values of 2 target(s) in the tfsnippet checkpoint {path!r} differ in "
            f"shape or dtype: 'net/head/kernel' <- 'net/head/kernel': shape (4, 5) vs "
            f"source (4, 2), 'net/head/bias' <- 'net/head/bias': shape (5,) vs source "
            f"(2,); pass `skip_mismatch=True` to leave them alone, or `exclude` them")):
        warm_start(tmp_path, target, print_func=None)
    assert filled(target)['net/hidden/kernel'] == [0.]


def test_skip_mismatch_leaves_them_alone(tmp_path):
    save_tfsnippet(tmp_path, make_net(head=2, base=10.), step=1)
    target = make_net(head=5)

    report = warm_start(tmp_path, target, skip_mismatch=True, print_func=None)

    assert report.restored == ['net/hidden/kernel', 'net/hidden/bias']
    assert report.mismatched == ['net/head/kernel', 'net/head/bias']
    assert report.entries[2].detail == 'shape (4, 5) vs source (4, 2)'
    assert filled(target) == {'net/hidden/kernel': [10.], 'net/hidden/bias': [11.],
                              'net/head/kernel': [2.], 'net/head/bias': [3.]}


def test_dtype_mismatch(tmp_path):
    prefix = save_tf1(tmp_path / 'model.ckpt', {'n': np.int32(3), 'w': np.float32(1.)})
    n, w = tf.Variable(0., name='n'), tf.Variable(0., name='w')

    with pytest.raises(ValueError, match=re.escape(
            "'n' <- 'n': dtype float32 vs source int32;")):
        warm_start(prefix, [n, w], print_func=None)
    report = warm_start(prefix, [n, w], skip_mismatch=True, print_func=None)

    assert (report.mismatched, report.restored) == (['n'], ['w'])
    assert (float(n.numpy()), float(w.numpy())) == (0., 1.)


# ------------------------------------------------------------ the table
def test_table(tmp_path):
    path = save_tfsnippet(tmp_path, make_net(head=2, base=10.), step=1)
    extra = tf.Variable(0., name='extra')
    lines = []

    warm_start(tmp_path, [*make_net(head=5).variables, extra], exclude='hidden/bias',
               skip_mismatch=True, print_func=lines.append)

    assert lines == ['\n'.join([
        f'Warm start from tfsnippet checkpoint {path!r} (the newest: no best is pinned)',
        'status      target             source             detail',
        '----------  -----------------  -----------------  -----------------------------',
        'restored    net/hidden/kernel  net/hidden/kernel  (3, 4)',
        'skipped     net/hidden/bias    -                  matched by `exclude`',
        'mismatched  net/head/kernel    net/head/kernel    shape (4, 5) vs source (4, 2)',
        'mismatched  net/head/bias      net/head/bias      shape (5,) vs source (2,)',
        'missing     extra              extra              not in the source',
        '1 restored, 1 skipped, 2 mismatched, 1 missing; 1 source value not used: '
        'net/hidden/bias',
    ])]


# ------------------------------------------------------------ errors
def test_nothing_matched(tmp_path):
    path = save_tfsnippet(tmp_path, make_net('pre'), step=1)
    target = make_net()

    with pytest.raises(ValueError, match=re.escape(
            f'Nothing to warm-start from the tfsnippet checkpoint {path!r}: none of the 4 '
            f'names looked up is there (net/hidden/kernel, net/hidden/bias, net/head/kernel, '
            f'net/head/bias). Its 4 names are: pre/head/bias, pre/head/kernel, '
            f'pre/hidden/bias, pre/hidden/kernel. Pass a `mapping` {{regex: replacement}} '
            f'from target names to source names.')):
        warm_start(tmp_path, target, print_func=None)


def test_nothing_matched_because_all_skipped(tmp_path):
    path = save_tfsnippet(tmp_path, make_net(), step=1)

    with pytest.raises(ValueError, match=re.escape(
            f'Nothing to warm-start from the tfsnippet checkpoint {path!r}: all 4 targets '
            f'are skipped by `include`, `exclude` or `mapping` (net/hidden/kernel, '
            f'net/hidden/bias, net/head/kernel, net/head/bias). Its 4 names are: ')):
        warm_start(tmp_path, make_net(), exclude='^net/', print_func=None)


def test_a_name_recorded_twice_is_ambiguous(tmp_path):
    a, b = tf.Variable(1., name='v'), tf.Variable(2., name='v')
    path = CheckpointSaver([a, b], str(tmp_path)).save(1)

    with pytest.raises(ValueError, match=re.escape(
            f"The tfsnippet checkpoint {path!r} records a name more than once, so the value "
            f"to restore is ambiguous: 'v' looks up 'v', stored as ['v', 'v_1']; `exclude` "
            f"these targets")):
        warm_start(path, [tf.Variable(0., name='v')], print_func=None)


def test_source_that_does_not_exist(tmp_path):
    path = str(tmp_path / 'nowhere')
    with pytest.raises(ValueError, match=re.escape(
            f'`source` must be a tfsnippet checkpoint, a tf.train.Checkpoint or TF1 Saver '
            f'checkpoint (prefix or directory) or a Keras .weights.h5 file, got {path!r}, '
            f'which does not exist')):
        warm_start(path, make_net(), print_func=None)


def test_source_directory_without_checkpoint(tmp_path):
    (tmp_path / 'checkpoint').mkdir()   # an empty tfsnippet checkpoint folder
    with pytest.raises(ValueError, match=re.escape(
            f'got the directory {str(tmp_path)!r} with no checkpoint in it')):
        warm_start(tmp_path, make_net(), print_func=None)


def test_source_file_of_another_kind(tmp_path):
    path = tmp_path / 'notes.txt'
    path.write_text('not weights')
    with pytest.raises(ValueError, match=re.escape(
            f'got the file {str(path)!r}, which is neither HDF5 nor a checkpoint index')):
        warm_start(path, make_net(), print_func=None)


def test_damaged_checkpoint(tmp_path):
    path = save_tfsnippet(tmp_path, make_net(), step=1)
    with open(os.path.join(path, 'state.npz'), 'wb') as f:
        f.write(b'garbage')
    with pytest.raises(CheckpointError, match=re.escape(
            f"Cannot read the checkpoint state {os.path.join(path, 'state.npz')!r}: ")):
        warm_start(tmp_path, make_net(), print_func=None)


def test_several_tf_checkpoints_without_a_latest_record(tmp_path):
    save_tf1(tmp_path / 'a.ckpt', {'w': np.float32(1.)})
    save_tf1(tmp_path / 'b.ckpt', {'w': np.float32(2.)})
    os.remove(tmp_path / 'checkpoint')
    with pytest.raises(ValueError, match=re.escape(
            f'`source` {str(tmp_path)!r} holds several checkpoints (a.ckpt.index, '
            f'b.ckpt.index) and no "checkpoint" file naming the latest: pass a '
            f'checkpoint prefix')):
        warm_start(tmp_path, [tf.Variable(0., name='w')], print_func=None)


@pytest.mark.parametrize('kwargs, error, message', [
    ({'source': 3}, TypeError, '`source` must be a path (str or os.PathLike), got 3'),
    ({'targets': []}, ValueError, '`targets` holds no variables, got []'),
    ({'targets': keras.Sequential([keras.layers.Dense(2)], name='unbuilt')}, ValueError,
     '`targets` holds no variables (a Keras model creates its variables when it is built: '
     'call it on data or `model.build(input_shape)` first), got <Sequential'),
    ({'targets': [1.]}, TypeError, '`targets` must hold only variables (tf.Variable or '
     'keras.Variable), but item 0 is 1.0'),
    ({'targets': {1: tf.Variable(0.)}}, TypeError, '`targets` keys must be str names, got 1'),
    ({'mapping': [('a', 'b')]}, TypeError,
     "`mapping` must be a dict {regex: replacement or None}, got [('a', 'b')]"),
    ({'mapping': {'(': 'x'}}, ValueError, "`mapping` has an invalid regex '(': "),
    ({'mapping': {'a': 1}}, TypeError,
     "`mapping['a']` must be a replacement str, a function of the match or None, got 1"),
    ({'include': 3}, TypeError, '`include` must be a regex or a list of regexes, got 3'),
    ({'exclude': ['[']}, ValueError, "`exclude` has an invalid regex '[': "),
    ({'print_func': 'stdout'}, TypeError, "`print_func` must be callable or None, got 'stdout'"),
])
def test_argument_errors(tmp_path, kwargs, error, message):
    save_tfsnippet(tmp_path, make_net(), step=1)
    args = {'source': tmp_path, 'targets': make_net(), **kwargs}
    with pytest.raises(error, match=re.escape(message)):
        warm_start(**args)
