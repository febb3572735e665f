"""TensorWrapper and ScheduledVariable used as tensors in eager mode (API.md 13.9 and 3)."""

import operator
import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.tfops.tensor_wrapper import TensorWrapper, register_tensor_wrapper_class


def raises(exc_type, message):
    return pytest.raises(exc_type, match=re.escape(message))


class Wrapped(TensorWrapper):
    """Wraps a fixed tensor, with one attribute of its own."""

    def __init__(self, value, tag='t'):
        self._tensor = tf.convert_to_tensor(value)
        self.tag = tag

    @property
    def tensor(self):
        return self._tensor


def value_of(x, style=None):
    """The value of the tensor `x` (an op of the style's graph in graph style)."""
    assert isinstance(x, tf.Tensor), f'expected a tensor, got {x!r}'
    if style is not None and style.is_graph:
        assert x.graph is style.graph
        return style.value(x)
    return x.numpy()


A = np.array([[1., 2.], [3., 4.]], dtype=np.float32)
B = np.array([[2., 1.], [.5, 4.]], dtype=np.float32)


# ------------------------------------------------------------ conversion and attributes
def test_converts_to_its_tensor():
    w = Wrapped(A)
    t = tf.convert_to_tensor(w)
    assert t is w.tensor
    np.testing.assert_array_equal(value_of(tf.reduce_sum(w, axis=0)), [4., 6.])
    np.testing.assert_array_equal(value_of(tf.add(w, 1.)), A + 1.)


def test_conversion_to_another_dtype_is_refused_as_for_tensors():
    with pytest.raises(ValueError, match='Tensor conversion requested dtype int32 for Tensor '
                                         'with dtype float32'):
        tf.convert_to_tensor(Wrapped(A), dtype=tf.int32)


def test_attributes_fall_back_to_the_tensor():
    w = Wrapped(A, tag='mine')
    assert w.dtype == tf.float32
    assert w.shape == (2, 2)
    assert w.tag == 'mine'                     # its own attribute wins
    np.testing.assert_array_equal(w.numpy(), A)
    assert 'numpy' in dir(w) and 'tag' in dir(w)


def test_missing_attributes():
    w = Wrapped(A)
    with raises(AttributeError, "'Wrapped' object has no attribute '_secret'"):
        w._secret                               # private names are never forwarded
    with pytest.raises(AttributeError, match='no_such_thing'):
        w.no_such_thing


def test_a_subclass_without_tensor():
    class Empty(TensorWrapper):
        pass

    with raises(NotImplementedError, 'Empty must implement the `tensor` property'):
        tf.convert_to_tensor(Empty())


def test_repr_shows_the_tensor():
    assert repr(Wrapped([1.])).startswith('Wrapped(<tf.Tensor: shape=(1,), dtype=float32')


# ------------------------------------------------------------ operators
BINARY = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv,
          operator.mod, operator.pow, operator.lt, operator.le, operator.gt, operator.ge]


@pytest.mark.parametrize('op', BINARY, ids=lambda op: op.__name__)
def test_binary_operators_match_the_tensors(style, op):
    w, t = Wrapped(A), tf.constant(A)
    for other in (B, tf.constant(B), Wrapped(B), 2.):
        np.testing.assert_allclose(value_of(op(w, other), style), value_of(op(t, other), style))
        # reflected: the wrapper on the right
        if not isinstance(other, Wrapped):
            np.testing.assert_allclose(value_of(op(other, w), style),
                                       value_of(op(other, t), style))


def test_numpy_values_on_the_left_defer_to_the_wrapper():
    w = Wrapped(A)
    np.testing.assert_array_equal(value_of(np.float32(2.) * w), A * 2.)
    np.testing.assert_array_equal(value_of(B + w), A + B)


def test_matmul_unary_and_indexing(style):
    w = Wrapped(A)
    np.testing.assert_allclose(value_of(w @ B, style), A @ B)
    np.testing.assert_allclose(value_of(B @ w, style), B @ A)
    np.testing.assert_array_equal(value_of(-w, style), -A)
    np.testing.assert_array_equal(value_of(abs(Wrapped(-A)), style), A)
    np.testing.assert_array_equal(value_of(w[1], style), A[1])
    np.testing.assert_array_equal(value_of(w[:, 0], style), A[:, 0])


def test_logical_operators():
    p = Wrapped([True, True, False])
    q = [True, False, False]
    assert value_of(p & q).tolist() == [True, False, False]
    assert value_of(q | p).tolist() == [True, True, False]
    assert value_of(p ^ q).tolist() == [False, True, False]
    assert value_of(~p).tolist() == [False, False, True]


def test_equality_is_identity_so_wrappers_are_dict_keys():
    w1, w2 = Wrapped(A), Wrapped(A)
    assert w1 == w1 and w1 != w2
    assert {w1: 1, w2: 2}[w2] == 2


def test_not_a_bool_and_not_iterable():
    w = Wrapped([1., 2.])
    with raises(TypeError, 'A `Wrapped` cannot be used as a Python bool'):
        bool(w)
    with raises(TypeError, '`Wrapped` is not iterable'):
        list(w)


def test_used_inside_a_tf_function():
    w = Wrapped(A)

    @tf.function
    def f(x):
        return w * x + tf.reduce_sum(w)

    np.testing.assert_array_equal(value_of(f(tf.constant(2.))), A * 2. + 10.)


# ------------------------------------------------------------ register_tensor_wrapper_class
def test_register_tensor_wrapper_class_checks_and_returns_the_class():
    @register_tensor_wrapper_class
    class Mine(Wrapped):
        pass

    assert issubclass(Mine, Wrapped)
    np.testing.assert_array_equal(value_of(tf.convert_to_tensor(Mine([3.]))), [3.])
    with raises(TypeError, "`cls` must be a subclass of TensorWrapper, got <class 'int'>"):
        register_tensor_wrapper_class(int)
    with raises(TypeError, '`cls` must be a subclass of TensorWrapper, got 3'):
        register_tensor_wrapper_class(3)


# ------------------------------------------------------------ ScheduledVariable
def test_scheduled_variable_is_a_tensor_wrapper_reading_the_current_value():
    lr = spt.ScheduledVariable('tw_lr', .1)
    assert isinstance(lr, TensorWrapper)
    assert lr.dtype == tf.float32 and lr.shape == ()
    assert value_of(lr * 2) == pytest.approx(.2)
    assert value_of(tf.convert_to_tensor(lr)) == pytest.approx(.1)
    lr.set(.5)
    assert value_of(lr * 2) == pytest.approx(1.)
    assert value_of(3. - lr) == pytest.approx(2.5)
    assert value_of(tf.convert_to_tensor(lr)) == pytest.approx(.5)
    assert float(lr) == .5
    assert value_of(lr > .4)


def test_scheduled_variable_inside_tf_function_reads_each_call():
    beta = spt.AnnealingVariable('tw_beta', 1., .5)
    traces = []

    @tf.function
    def weighted(loss):
        traces.append(1)
        return loss * beta

    assert value_of(weighted(tf.constant(4.))) == 4.
    beta.anneal()
    assert value_of(weighted(tf.constant(4.))) == 2.
    assert len(traces) == 1                    # read inside the graph, not baked in


def test_scheduled_variable_still_a_keras_learning_rate():
    lr = spt.ScheduledVariable('tw_keras_lr', .25)
    w = tf.Variable(1.)
    opt = keras.optimizers.SGD(learning_rate=lr)
    opt.apply_gradients([(tf.constant(1.), w)])
    assert w.numpy() == pytest.approx(.75)
    lr.set(.5)
    opt.apply_gradients([(tf.constant(1.), w)])
    assert w.numpy() == pytest.approx(.25)
    assert callable(lr) and lr() is lr.variable


def test_scheduled_variable_keeps_its_own_attributes():
    lr = spt.AnnealingVariable('tw_own', 1., .5, min_value=.3)
    assert lr.ratio == .5 and lr.min_value == np.float32(.3)
    assert isinstance(lr.variable, tf.Variable)
    assert repr(lr) == "AnnealingVariable('tw_own:0')"
    with raises(AttributeError, "'AnnealingVariable' object has no attribute '_nothing'"):
        lr._nothing


# ------------------------------------------------------------ attribute assignment (classic)
def test_assigning_and_deleting_an_attribute_acts_on_the_tensor():
    # classic: `w.x = ...` and `del w.x` reach the wrapped tensor; what the
    # constructor set, private names and names already on the wrapper stay
    class OfVariable(TensorWrapper):
        def __init__(self, var, tag):
            self._var = var
            self.tag = tag

        @property
        def tensor(self):
            return self._var

    var = tf.Variable([1., 2.])
    w = OfVariable(var, tag='mine')
    w.note = 'on the tensor'
    assert var.note == 'on the tensor' and w.note == 'on the tensor'
    assert 'note' not in vars(w)
    del w.note
    assert not hasattr(var, 'note') and not hasattr(w, 'note')
    with pytest.raises(AttributeError):
        del w.note
    w.tag = 'changed'                  # set by the constructor: the wrapper's own
    w._private = 1
    assert (vars(w)['tag'], vars(w)['_private']) == ('changed', 1)
    assert not hasattr(var, 'tag') and not hasattr(var, '_private')
    del w.tag
    assert 'tag' not in vars(w)


def test_a_constructor_may_set_what_its_tensor_needs():
    class Scaled(TensorWrapper):
        def __init__(self, x, scale):
            self._x = tf.convert_to_tensor(x)
            self.scale = scale           # public, set before `tensor` can be computed

        @property
        def tensor(self):
            return self._x * self.scale

    s = Scaled([1., 2.], 3.)
    np.testing.assert_array_equal(value_of(tf.convert_to_tensor(s)), [3., 6.])
    s.scale = 2.                         # already the wrapper's
    np.testing.assert_array_equal(value_of(s + 0.), [2., 4.])
