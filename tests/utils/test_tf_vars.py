"""Tests of the variable helpers in eager mode, for `tf.Variable` and Keras 3 variables.

Also covers what the session helpers (API.md 13.6) do when eager execution
is on; their graph-mode behaviour is tested in ``tests/graph/test_utils_graph.py``.
"""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfsnippet.utils import (as_tf_variable, create_session, ensure_variables_initialized,
                             get_uninitialized_variables, get_variables_as_dict, is_variable,
                             variable_name, variable_shape)
from tfsnippet.tfops.tf_vars import normalize_variables


@pytest.fixture
def tf_var():
    return tf.Variable(tf.zeros([2, 3]), name='weights')


@pytest.fixture
def keras_var():
    return keras.Variable(np.zeros([4]), name='bias')


def test_keras_variable_is_not_a_tf_variable(keras_var):
    # the reason these helpers exist at all
    assert not isinstance(keras_var, tf.Variable)


# ------------------------------------------------------------------ is_variable
def test_is_variable_accepts_tf_and_keras_variables(tf_var, keras_var):
    assert is_variable(tf_var)
    assert is_variable(keras_var)


@pytest.mark.parametrize('obj', [
    tf.constant(1.),
    np.zeros([2]),
    1.,
    None,
    'weights',
], ids=['tensor', 'ndarray', 'float', 'None', 'str'])
def test_is_variable_rejects_non_variables(obj):
    assert not is_variable(obj)


# ---------------------------------------------------------------- variable_name
def test_variable_name_of_tf_variable_drops_output_index(tf_var):
    assert tf_var.name == 'weights:0'
    assert variable_name(tf_var) == 'weights'


def test_variable_name_of_tf_variable_in_name_scope():
    with tf.name_scope('block'):
        v = tf.Variable(1., name='scale')
    assert variable_name(v) == 'block/scale'


def test_variable_name_of_keras_variable_is_its_path(keras_var):
    assert variable_name(keras_var) == 'bias'


def test_variable_name_of_keras_layer_variables_includes_layer_name():
    layer = keras.layers.Dense(3, name='dense')
    layer.build((None, 4))
    assert [variable_name(v) for v in layer.weights] == ['dense/kernel', 'dense/bias']


# --------------------------------------------------------------- variable_shape
def test_variable_shape_of_tf_variable(tf_var):
    assert variable_shape(tf_var) == (2, 3)
    assert variable_shape(tf.Variable(1.)) == ()


def test_variable_shape_of_keras_variable(keras_var):
    assert variable_shape(keras_var) == (4,)
    assert variable_shape(keras.Variable(np.zeros([5, 1, 2]))) == (5, 1, 2)


def test_variable_shape_with_unknown_dimension():
    v = tf.Variable(tf.zeros([2, 3]), shape=tf.TensorShape([None, 3]))
    assert variable_shape(v) == (None, 3)


def test_variable_shape_returns_plain_ints(tf_var, keras_var):
    for v in (tf_var, keras_var):
        assert all(type(d) is int for d in variable_shape(v))


# --------------------------------------------------------------- as_tf_variable
def test_as_tf_variable(tf_var, keras_var):
    assert as_tf_variable(tf_var) is tf_var
    inner = as_tf_variable(keras_var)
    assert isinstance(inner, tf.Variable)
    keras_var.assign(np.arange(4.))
    np.testing.assert_allclose(inner.numpy(), [0., 1., 2., 3.])


def test_as_tf_variable_rejects_tensor():
    t = tf.constant(1.)
    with pytest.raises(TypeError, match='^' + re.escape(f'Not a variable: {t!r}') + '$'):
        as_tf_variable(t)


# ---------------------------------------------------------- normalize_variables
def test_normalize_variables_none_gives_empty_list():
    assert normalize_variables(None, 'variables') == []


def test_normalize_variables_copies_a_list(tf_var, keras_var):
    original = [tf_var, keras_var]
    out = normalize_variables(original, 'variables')
    assert isinstance(out, list)
    assert out == original and out is not original
    original.append(tf_var)
    assert len(out) == 2


def test_normalize_variables_accepts_tuples_and_generators(tf_var, keras_var):
    assert normalize_variables((tf_var, keras_var), 'variables') == [tf_var, keras_var]
    assert normalize_variables((v for v in [keras_var]), 'variables') == [keras_var]


def test_normalize_variables_copies_a_dict_keeping_order(tf_var, keras_var):
    original = {'z': tf_var, 'a': keras_var}
    out = normalize_variables(original, 'variables')
    assert isinstance(out, dict)
    assert out is not original
    assert list(out.items()) == [('z', tf_var), ('a', keras_var)]


def test_normalize_variables_rejects_a_string():
    expected = "`param_vars` must be a list or dict of variables, got 'weights'"
    with pytest.raises(TypeError, match='^' + re.escape(expected) + '$'):
        normalize_variables('weights', 'param_vars')


def test_normalize_variables_rejects_a_single_tf_variable(tf_var):
    # a tf.Variable is iterable (over its rows), but it is not a list of variables
    # shown by name, shape and dtype: never the whole value
    expected = ("`param_vars` must be a list or dict of variables, got <ResourceVariable "
                "'weights:0' shape=(2, 3) dtype=float32>")
    with pytest.raises(TypeError, match='^' + re.escape(expected) + '$'):
        normalize_variables(tf_var, 'param_vars')


def test_normalize_variables_rejects_a_single_keras_variable(keras_var):
    expected = ("`param_vars` must be a list or dict of variables, got <Variable 'bias' "
                "shape=(4,) dtype=float64>")
    with pytest.raises(TypeError, match='^' + re.escape(expected) + '$'):
        normalize_variables(keras_var, 'param_vars')


def test_normalize_variables_rejects_a_tensor_in_a_list(tf_var):
    t = tf.constant(2.)
    expected = ('`param_vars` must hold only variables (tf.Variable or keras.Variable), '
                'but item 1 is <EagerTensor shape=() dtype=float32>')
    with pytest.raises(TypeError, match='^' + re.escape(expected) + '$'):
        normalize_variables([tf_var, t], 'param_vars')


def test_normalize_variables_rejects_a_non_variable_dict_value(keras_var):
    expected = ('`variables` must hold only variables (tf.Variable or keras.Variable), '
                "but item 'lr' is 0.1")
    with pytest.raises(TypeError, match='^' + re.escape(expected) + '$'):
        normalize_variables({'b': keras_var, 'lr': 0.1}, 'variables')


# ------------------------------------------------------- session helpers, eager
def test_create_session_in_eager_mode_raises():
    expected = ('`create_session()` needs graph mode: call '
                '`tf.compat.v1.disable_eager_execution()` first, or run eager code '
                'without a session.')
    with pytest.raises(RuntimeError, match='^' + re.escape(expected) + '$'):
        create_session()


def test_create_session_bad_lock_memory_raises_type_error_even_in_eager_mode():
    with pytest.raises(TypeError,
                       match='^' + re.escape('`lock_memory` must be True, False or float, got 1')):
        create_session(lock_memory=1)


def test_eager_variables_are_never_uninitialized(tf_var, keras_var):
    assert get_uninitialized_variables() == []
    assert get_uninitialized_variables([tf_var, keras_var]) == []


def test_ensure_variables_initialized_keeps_eager_values(tf_var):
    tf_var.assign(tf.ones([2, 3]))
    ensure_variables_initialized([tf_var])
    ensure_variables_initialized()
    np.testing.assert_allclose(tf_var.numpy(), np.ones([2, 3]))


class Block(tf.Module):
    def __init__(self):
        super().__init__(name='block')
        with self.name_scope:
            self.w = tf.Variable(tf.zeros([2, 3]), name='w')
            self.b = tf.Variable(tf.zeros([3]), name='b')


def test_get_variables_as_dict_of_tf_module():
    block = Block()
    out = get_variables_as_dict(block)
    assert set(out) == {'block/w', 'block/b'}
    assert out['block/w'] is block.w
    assert out['block/b'] is block.b


def test_get_variables_as_dict_of_keras_model_uses_variable_paths():
    model = keras.Sequential([
        keras.Input((4,)),
        keras.layers.Dense(3, name='hidden'),
        keras.layers.Dense(2, name='out'),
    ], name='mlp')
    out = get_variables_as_dict(model)
    assert set(out) == {'mlp/hidden/kernel', 'mlp/hidden/bias', 'mlp/out/kernel', 'mlp/out/bias'}
    assert out['mlp/out/kernel'] is model.get_layer('out').kernel
    assert variable_shape(out['mlp/hidden/kernel']) == (4, 3)


def test_get_variables_as_dict_of_keras_layer():
    layer = keras.layers.Dense(3, name='dense')
    layer.build((None, 4))
    out = get_variables_as_dict(layer)
    assert out == {'dense/kernel': layer.kernel, 'dense/bias': layer.bias}
