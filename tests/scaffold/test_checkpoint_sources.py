"""Tests of the `Source` protocol: each kind of source opened, its names,
shapes and dtypes listed, and one tensor read back (the tests taking
``style`` in both TF styles: no op is added to a graph; the rest in eager
mode, tests/graph/test_checkpoint_sources_graph.py has the graph export).

Each source is written by the tool that normally writes it; the values
differ per variable, so a value read back tells which one it is.
"""

import os
import pickle

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf

from tfsnippet.scaffold.checkpoint import (CheckpointError, CheckpointSaver,
                                           UntrustedCheckpointError, export_weights)
from tfsnippet.scaffold.checkpoint.sources import (Source, describe_source, open_keras_h5,
                                                   open_source, open_tf_checkpoint,
                                                   open_tfsnippet)
from tfsnippet.scaffold.checkpoint.state_format import read_state
from tests.helpers import Style

v1 = tf.compat.v1
W = np.arange(6, dtype='float32').reshape([2, 3])
B = np.array([7, 8, 9], dtype='int64')


def check_source(source, source_format, name, key, value):
    """`source` is a `Source` of `source_format` holding `value` as `name` (stored as `key`)."""
    assert isinstance(source, Source)
    assert source.source_format == source_format
    assert list(source.keys[name]) == [key]
    assert source.shapes[key] == value.shape
    assert source.dtypes[key] == tf.as_dtype(value.dtype)
    got = source.read(key)
    assert got.dtype == value.dtype
    np.testing.assert_array_equal(got, value)
    source.close()
    np.testing.assert_array_equal(source.read(key), value)   # reopened after close
    source.close()


def save_tfsnippet(save_dir, step=3, style=Style('eager')):
    w = style.variable(W, 'enc/w')
    b = style.variable(B, 'enc/b', dtype='int64')
    return CheckpointSaver([w, b], str(save_dir)).save(step)


def test_tfsnippet_checkpoint(style, tmp_path):
    path = save_tfsnippet(tmp_path / 'checkpoint', style=style)
    ops = len(style.graph.get_operations()) if style.is_graph else None
    for given in (tmp_path, tmp_path / 'checkpoint', path, os.path.join(path, 'variables')):
        source = open_source(given)
        assert source.path == path
        check_source(source, 'tfsnippet', 'enc/w', 'enc/w', W)
        check_source(source, 'tfsnippet', 'enc/b', 'enc/b', B)
    assert sorted(open_tfsnippet(path).keys) == ['enc/b', 'enc/w']
    assert describe_source(open_source(path)) == f'tfsnippet checkpoint {path!r}'
    if style.is_graph:
        assert len(style.graph.get_operations()) == ops     # no op added to the graph


def test_tfsnippet_checkpoint_names_are_the_recorded_ones(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2, name='dense')],
                             name='net')
    model.layers[0].kernel.assign(np.full([3, 2], 5., 'float32'))
    path = CheckpointSaver([], str(tmp_path), objects={'model': model}).save(1)
    labels = read_state(path)['variables']
    key = next(k for k, name in labels.items() if name == 'net/dense/kernel')

    source = open_source(path)

    check_source(source, 'tfsnippet', 'net/dense/kernel', key, np.full([3, 2], 5., 'float32'))


def test_legacy_tfsnippet_checkpoint_only_when_trusted(tmp_path, monkeypatch):
    monkeypatch.delenv('TFSNIPPET_TRUST_PICKLE', raising=False)
    path = save_tfsnippet(tmp_path)
    saved = read_state(path)
    with open(os.path.join(path, 'state.pkl'), 'wb') as f:
        pickle.dump({'format': 1, 'step': saved['step'], 'variables': saved['variables'],
                     'objects': saved['objects']}, f)
    os.remove(os.path.join(path, 'state.npz'))

    with pytest.raises(UntrustedCheckpointError):
        open_source(path)
    check_source(open_source(path, trust_pickle=True), 'tfsnippet', 'enc/w', 'enc/w', W)


def test_tf_train_checkpoint(tmp_path):
    module = tf.Module()
    module.w = tf.Variable(W)
    prefix = tf.train.Checkpoint(enc=module).save(str(tmp_path / 'ckpt'))
    for given in (prefix, prefix + '.index', tmp_path):
        source = open_source(given)
        assert source.path == prefix
        check_source(source, 'tf2', 'enc/w', 'enc/w/.ATTRIBUTES/VARIABLE_VALUE', W)
        assert '_CHECKPOINTABLE_OBJECT_GRAPH' not in source.keys   # not a value
    assert open_tf_checkpoint(prefix).source_format == 'tf2'


def test_tf1_saver_checkpoint(tmp_path):
    with tf.Graph().as_default() as graph, v1.Session(graph=graph) as sess:
        v1.get_variable('enc/w', initializer=W)
        v1.get_variable('enc/b', initializer=B)
        sess.run(v1.global_variables_initializer())
        prefix = v1.train.Saver().save(sess, str(tmp_path / 'model.ckpt'),
                                       write_meta_graph=False)

    source = open_source(tmp_path)

    assert source.path == prefix
    check_source(source, 'tf1', 'enc/w', 'enc/w', W)
    check_source(source, 'tf1', 'enc/b', 'enc/b', B)


def test_keras_weights_files(tmp_path):
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
    model.layers[0].bias.assign([4., 5.])
    path = str(tmp_path / 'model.weights.h5')
    model.save_weights(path)
    check_source(open_source(path), 'keras_h5', 'layers/dense/vars/1', 'layers/dense/vars/1',
                 np.array([4., 5.], 'float32'))

    exported = export_weights(str(tmp_path / 'vars.weights.h5'),
                              {'enc/w': tf.Variable(W), 'enc/b': tf.Variable(B)})
    source = open_keras_h5(exported)
    check_source(source, 'keras_h5', 'enc/w', 'enc/w', W)
    check_source(source, 'keras_h5', 'enc/b', 'enc/b', B)


def test_saved_values_read_what_the_source_reads(style, tmp_path):
    w = style.variable(W, 'w')
    b = style.variable(B, 'b', dtype='int64')
    saver = CheckpointSaver([w, b], str(tmp_path))
    path = saver.save(1)
    style.assign(w, W + 100.)

    values = saver.saved_values(path)

    np.testing.assert_array_equal(values[id(w)], W)
    np.testing.assert_array_equal(values[id(b)], B)
    np.testing.assert_array_equal(values[id(w)], open_source(path).read('w'))
    with pytest.raises(CheckpointError, match="not found in the checkpoint"):
        CheckpointSaver([style.variable(0., 'other')], str(tmp_path)).saved_values(path)


def test_a_weights_file_written_by_h5py(style, tmp_path):
    path = str(tmp_path / 'x.weights.h5')
    with h5py.File(path, 'w') as f:
        f.create_dataset('enc/w', data=W)
        f.create_dataset('enc/b', data=B)
    source = open_source(path)
    check_source(source, 'keras_h5', 'enc/w', 'enc/w', W)
    check_source(source, 'keras_h5', 'enc/b', 'enc/b', B)


def test_errors(tmp_path):
    path = save_tfsnippet(tmp_path)
    source = open_source(path)
    with pytest.raises(KeyError, match="'nope' is not a value of the variables of checkpoint"):
        source.read('nope')
    with pytest.raises(TypeError, match='`source` must be a path'):
        open_source(123)
    with pytest.raises(ValueError, match='which does not exist'):
        open_source(str(tmp_path / 'nothing'))
    data = [n for n in os.listdir(path) if n.startswith('variables.data')]
    with open(os.path.join(path, data[0]), 'wb') as f:
        f.write(b'broken')
    with pytest.raises(CheckpointError, match='Cannot read the variables of checkpoint'):
        open_source(path).read('enc/w')
