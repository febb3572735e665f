"""TensorWrapper and ScheduledVariable in graph mode: ``session.run`` fetches and feeds (the
operators run in both styles in tests/utils/test_tensor_wrapper.py)."""

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.tfops.tensor_wrapper import TensorWrapper

v1 = tf.compat.v1


class Wrapped(TensorWrapper):
    def __init__(self, tensor):
        self._tensor = tensor

    @property
    def tensor(self):
        return self._tensor


def test_session_fetches_a_wrapper_alone_in_lists_and_in_dicts(session):
    ph = v1.placeholder(tf.float32, [None])
    w = Wrapped(ph * 2.)
    feed = {ph: [1., 2.]}
    np.testing.assert_array_equal(session.run(w, feed_dict=feed), [2., 4.])
    a, b = session.run([w, ph], feed_dict=feed)
    np.testing.assert_array_equal(a, [2., 4.])
    out = session.run({'w': w, 'sum': tf.reduce_sum(w)}, feed_dict=feed)
    np.testing.assert_array_equal(out['w'], [2., 4.])
    assert out['sum'] == 6.


def test_a_wrapper_is_a_feed_dict_key(session):
    ph = v1.placeholder(tf.float32, [])
    w = Wrapped(ph)
    assert session.run(w * 3., feed_dict={w: 2.}) == 6.


def test_attributes_of_a_graph_tensor():
    t = tf.constant([1., 2.], name='values')
    w = Wrapped(t)
    assert w.name == 'values:0'
    assert w.op is t.op and w.graph is t.graph
    assert w.get_shape().as_list() == [2]


# ------------------------------------------------------------ ScheduledVariable
def test_scheduled_variable_fetched_with_the_train_op(session):
    x = v1.placeholder(tf.float32, [])
    w = v1.get_variable('w', initializer=0.)
    lr = spt.ScheduledVariable('lr', .5)
    train_op = v1.train.GradientDescentOptimizer(lr).minimize(-w * x)
    spt.utils.ensure_variables_initialized()
    _, lr_value = session.run([train_op, lr], feed_dict={x: 1.})
    assert lr_value == np.float32(.5)
    lr.set(.25)
    _, lr_value = session.run([train_op, lr], feed_dict={x: 1.})
    assert lr_value == np.float32(.25)
    assert session.run(w) == pytest.approx(.75)


def test_scheduled_variable_in_expressions(session):
    loss = v1.placeholder(tf.float32, [])
    beta = spt.AnnealingVariable('beta', 1., .5)
    lr = spt.ScheduledVariable('lr', .1)
    weighted, doubled = loss * beta, lr * 2
    spt.utils.ensure_variables_initialized()
    assert session.run([weighted, doubled], feed_dict={loss: 3.}) == \
        pytest.approx([3., .2])
    beta.anneal()
    assert session.run(weighted, feed_dict={loss: 3.}) == pytest.approx(1.5)
    assert session.run(tf.convert_to_tensor(lr)) == pytest.approx(.1)
    assert float(beta) == .5
    assert beta.name == 'beta/scheduled_value:0'   # the read tensor's, as in the classic


def test_fetching_a_scheduled_variable_adds_no_ops(session):
    lr = spt.ScheduledVariable('lr', .1)
    spt.utils.ensure_variables_initialized()
    session.graph.finalize()
    values = []
    for value in (.2, .3):
        lr.set(value)
        values.append(session.run(lr))
        values.append(lr.get())
    assert values == pytest.approx([.2, .2, .3, .3])
    assert lr.tensor is lr.tensor


def test_feeding_a_scheduled_variable_overrides_it_for_one_run(session):
    lr = spt.ScheduledVariable('lr', .1)
    spt.utils.ensure_variables_initialized()
    assert session.run(lr * 10., feed_dict={lr: .5}) == pytest.approx(5.)
    assert session.run(lr * 10.) == pytest.approx(1.)
