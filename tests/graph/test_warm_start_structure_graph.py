"""Graph twin: a tf.Module warm-started from an object-based tf.train.Checkpoint written in
graph mode is matched by its structure; a reversed `mapping` is refused."""

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


def test_a_tf_module_is_matched_by_structure_in_graph_mode(tmp_path, session):
    prefix = write_checkpoint(str(tmp_path / 'c'))
    fresh = make_module(0., 0., names=('x', 'y'))
    session.run(v1.global_variables_initializer())
    report = warm_start(prefix, fresh, print_func=None)
    assert report.matched_by == 'structure'
    assert [e.source for e in report.entries] == ['net/b', 'net/enc/w']
    assert session.run(fresh.enc.w).tolist() == [5., 5.] and session.run(fresh.b) == 6.


def test_a_reversed_mapping_is_refused_in_graph_mode(tmp_path, session):
    prefix = write_checkpoint(str(tmp_path / 'c'))
    targets = {'enc/w': tf.Variable(tf.zeros([2]))}
    session.run(v1.global_variables_initializer())
    with pytest.raises(ValueError, match=re.escape('`mapping` looks reversed')):
        warm_start(prefix, targets, mapping={'^net/enc/': 'enc/'}, print_func=None)
