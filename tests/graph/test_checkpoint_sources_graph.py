"""Tests of the `Source` protocol in graph mode: the sources a TF1-style script
writes (a tfsnippet checkpoint of graph variables, a ``Saver`` checkpoint, an
exported directory) opened and read back, no op added to the user's graph."""

import os

import h5py
import numpy as np
import tensorflow as tf

from tfsnippet.scaffold.checkpoint import CheckpointSaver, export_weights
from tfsnippet.scaffold.checkpoint.sources import Source, open_source

v1 = tf.compat.v1
W = np.arange(6, dtype='float32').reshape([2, 3])
B = np.array([7, 8, 9], dtype='int64')


def graph_variables(session):
    w = v1.get_variable('enc/w', initializer=W)
    b = v1.get_variable('enc/b', initializer=B)
    session.run(v1.global_variables_initializer())
    return w, b


def check_reads(source, source_format, keys):
    assert isinstance(source, Source)
    assert source.source_format == source_format
    for key, value in zip(keys, (W, B)):
        assert source.shapes[key] == value.shape
        assert source.dtypes[key] == tf.as_dtype(value.dtype)
        np.testing.assert_array_equal(source.read(key), value)
    source.close()


def test_tfsnippet_checkpoint_of_graph_variables(tmp_path, graph, session):
    w, b = graph_variables(session)
    saver = CheckpointSaver([w, b], str(tmp_path))
    path = saver.save(5)
    ops = len(graph.get_operations())

    source = open_source(str(tmp_path))

    assert source.path == path
    assert {name: list(keys) for name, keys in source.keys.items()} == {
        'enc/b': ['enc/b'], 'enc/w': ['enc/w']}
    check_reads(source, 'tfsnippet', ['enc/w', 'enc/b'])
    values = saver.saved_values(path)   # the same reader
    np.testing.assert_array_equal(values[id(w)], W)
    np.testing.assert_array_equal(values[id(b)], B)
    assert len(graph.get_operations()) == ops


def test_saver_checkpoint_and_graph_export(tmp_path, session):
    w, b = graph_variables(session)
    prefix = v1.train.Saver([w, b]).save(session, str(tmp_path / 'saver' / 'model.ckpt'),
                                         write_meta_graph=False)
    check_reads(open_source(prefix), 'tf1', ['enc/w', 'enc/b'])

    exported = export_weights(str(tmp_path / 'export'), [w, b])   # written by write_bundle
    source = open_source(exported)

    assert os.path.dirname(source.path) == exported
    check_reads(source, 'tf1', ['enc/w', 'enc/b'])
    assert tf.train.latest_checkpoint(exported) == source.path


def test_weights_file_read_in_graph_mode(tmp_path):
    path = str(tmp_path / 'x.weights.h5')
    with h5py.File(path, 'w') as f:
        f.create_dataset('enc/w', data=W)
        f.create_dataset('enc/b', data=B)

    check_reads(open_source(path), 'keras_h5', ['enc/w', 'enc/b'])
