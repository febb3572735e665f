"""Tests of the `Source` protocol in graph mode: a ``Saver`` checkpoint and the
TF1 directory `export_weights` writes of graph variables, opened and read back.
A tfsnippet checkpoint and a weights file are read in both styles in
tests/scaffold/test_checkpoint_sources.py."""

import os

import numpy as np
import tensorflow as tf

from tfsnippet.scaffold.checkpoint import export_weights
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
