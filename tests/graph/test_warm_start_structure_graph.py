"""Graph mode: a reversed `mapping` is refused for an object-based checkpoint written in
graph mode (the match by structure runs in both styles in
tests/scaffold/test_warm_start_structure.py)."""

import re

import numpy as np
import pytest
import tensorflow as tf

from tfsnippet.scaffold.checkpoint.warm_start import warm_start

v1 = tf.compat.v1


def make_module(w, b, names=('w', 'b')):
    module = tf.Module()
    module.enc = tf.Module()
    module.enc.w = tf.Variable(np.full([2], w, 'float32'), name=names[0])
    module.b = tf.Variable(np.float32(b), name=names[1])
    return module


def write_checkpoint(prefix):
    with tf.Graph().as_default() as graph, v1.Session(graph=graph) as sess:
        pre = make_module(5., 6.)
        ckpt = v1.train.Checkpoint(net=pre)   # the object-based checkpoint of graph code
        sess.run(v1.global_variables_initializer())
        return ckpt.save(prefix, session=sess)


def test_a_reversed_mapping_is_refused_in_graph_mode(tmp_path, session):
    prefix = write_checkpoint(str(tmp_path / 'c'))
    targets = {'enc/w': tf.Variable(tf.zeros([2]))}
    session.run(v1.global_variables_initializer())
    with pytest.raises(ValueError, match=re.escape('`mapping` looks reversed')):
        warm_start(prefix, targets, mapping={'^net/enc/': 'enc/'}, print_func=None)
