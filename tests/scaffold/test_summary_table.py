"""Tests of `summarize_variables` (API.md section 6); the tests taking ``style``
run in both TF styles.

Every expected table below was worked out by hand from the layout rules:
columns separated by two spaces, name column left-aligned and padded to
fill the width, shape column left-aligned, size column right-aligned with
thousands separators, and the total right-aligned on the title line.
"""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

from tfsnippet import summarize_variables


def zeros(*shape):
    return tf.Variable(tf.zeros(shape))


def dense_layer_variables():
    return {
        'dense/kernel': zeros(784, 500),
        'dense/bias': zeros(500),
        'out/kernel': zeros(500, 10),
        'out/bias': zeros(10),
    }


# Table of API.md section 6: 392,000 + 500 + 5,000 + 10 = 397,510
DENSE_TABLE = '\n'.join([
    'Trainable Parameters (397,510 in total)',
    '---------------------------------------',
    'dense/kernel        (784, 500)  392,000',
    'dense/bias          (500,)          500',
    'out/kernel          (500, 10)     5,000',
    'out/bias            (10,)            10',
])


def test_empty_input_gives_empty_string():
    assert summarize_variables([]) == ''
    assert summarize_variables({}) == ''
    assert summarize_variables([], groups=['a']) == ''


def test_dict_of_tf_variables_keeps_keys_and_order():
    assert summarize_variables(dense_layer_variables(),
                               title='Trainable Parameters') == DENSE_TABLE


def test_list_of_tf_variables_is_named_without_output_index(style):
    variables = []
    with tf.name_scope('dense'):
        variables.append(style.variable(np.zeros([784, 500]), 'kernel'))
        variables.append(style.variable(np.zeros([500]), 'bias'))
    with tf.name_scope('out'):
        variables.append(style.variable(np.zeros([500, 10]), 'kernel'))
        variables.append(style.variable(np.zeros([10]), 'bias'))
    assert summarize_variables(variables, title='Trainable Parameters') == DENSE_TABLE


def test_default_title_and_scalar_variable():
    # a scalar has shape () and size 1
    assert summarize_variables({'step': tf.Variable(0)}) == '\n'.join([
        'Variables Summary (1 in total)',
        '------------------------------',
        'step' + ' ' * 21 + '()  1',
    ])


def test_keras_variables_are_named_by_path():
    layer = keras.layers.Dense(3, name='dense')
    layer.build((None, 4))
    # 12 + 3 = 15; width 31 = len('Variables Summary (15 in total)')
    assert summarize_variables(layer.weights) == '\n'.join([
        'Variables Summary (15 in total)',
        '-------------------------------',
        'dense/kernel         (4, 3)  12',
        'dense/bias           (3,)     3',
    ])


def test_dict_of_mixed_keras_and_tf_variables_uses_the_keys():
    variables = {'renamed': keras.Variable(tf.zeros([2, 2])), 'b': zeros(2)}
    # the rows (18 wide) are wider than the title line 'T (6 in total)' (14)
    assert summarize_variables(variables, title='T') == '\n'.join([
        'T     (6 in total)',
        '------------------',
        'renamed  (2, 2)  4',
        'b        (2,)    2',
    ])


# ------------------------------------------------------------------ sorting
def layer_variables():
    return {'layer10/w': zeros(10), 'layer2/w': zeros(2), 'layer1/w': zeros(1)}


def test_rows_keep_input_order_by_default():
    assert summarize_variables(layer_variables()) == '\n'.join([
        'Variables Summary (13 in total)',
        '-------------------------------',
        'layer10/w             (10,)  10',
        'layer2/w              (2,)    2',
        'layer1/w              (1,)    1',
    ])


def test_sort_by_names_uses_natural_order():
    # plain string order would put `layer10/w` before `layer2/w`
    assert summarize_variables(layer_variables(), sort_by_names=True) == '\n'.join([
        'Variables Summary (13 in total)',
        '-------------------------------',
        'layer1/w              (1,)    1',
        'layer2/w              (2,)    2',
        'layer10/w             (10,)  10',
    ])


def test_groups_matching_nothing_give_plain_table_in_input_order():
    # Q9 fixed: the classic code forced sorting here
    assert summarize_variables(layer_variables(), groups=['nothing', 'other/']) == \
        summarize_variables(layer_variables())


def test_groups_matching_nothing_honour_sort_by_names():
    assert summarize_variables(layer_variables(), groups=['nothing'], sort_by_names=True) == \
        summarize_variables(layer_variables(), sort_by_names=True)


# ------------------------------------------------------------------- groups
def test_groups_example_of_the_spec():
    variables = {
        'q_net/dense/kernel': zeros(784, 100),
        'q_net/dense/bias': zeros(100),
        'p_net/out/kernel': zeros(100, 784),
        'p_net/out/bias': zeros(784),
        'beta': zeros(1),
    }
    expected = '\n'.join([
        'Trainable Parameters (157,685 in total)',
        '=======================================',
        'q_net/                (78,500 in total)',
        '---------------------------------------',
        'dense/kernel         (784, 100)  78,400',
        'dense/bias           (100,)         100',
        '',
        'p_net/                (79,184 in total)',
        '---------------------------------------',
        'out/kernel           (100, 784)  78,400',
        'out/bias             (784,)         784',
        '',
        'Other Parameters           (1 in total)',
        '---------------------------------------',
        'beta                            (1,)  1',
    ])
    assert summarize_variables(variables, title='Trainable Parameters',
                               other_variables_title='Other Parameters',
                               groups=['q_net', 'p_net']) == expected


def test_groups_of_keras_model_variables():
    model = keras.Sequential([
        keras.Input((4,)),
        keras.layers.Dense(3, name='hidden'),
        keras.layers.Dense(2, name='out'),
    ], name='mlp')
    # hidden: 12 + 3 = 15; out: 6 + 2 = 8; width 31 from the title line
    assert summarize_variables(model.variables, groups=['mlp/hidden']) == '\n'.join([
        'Variables Summary (23 in total)',
        '===============================',
        'mlp/hidden/' + ' ' * 7 + '(15 in total)',
        '-------------------------------',
        'kernel               (4, 3)  12',
        'bias                 (3,)     3',
        '',
        'Other Variables' + ' ' * 4 + '(8 in total)',
        '-------------------------------',
        'mlp/out/kernel        (3, 2)  6',
        'mlp/out/bias          (2,)    2',
    ])


def test_groups_in_given_order_deduplicated_and_sorted_within():
    variables = {'enc/layer10': zeros(10), 'enc/layer2': zeros(2), 'dec/out': zeros(5, 5)}
    # '' is dropped, 'dec' and 'dec/' are the same group; no "other" table
    assert summarize_variables(variables, groups=['', 'dec/', 'enc', 'dec'],
                               sort_by_names=True) == '\n'.join([
        'Variables Summary (37 in total)',
        '===============================',
        'dec/' + ' ' * 14 + '(25 in total)',
        '-------------------------------',
        'out                  (5, 5)  25',
        '',
        'enc/' + ' ' * 14 + '(12 in total)',
        '-------------------------------',
        'layer2                (2,)    2',
        'layer10               (10,)  10',
    ])


def test_group_prefix_must_match_a_whole_scope():
    variables = {'net/w': zeros(2), 'network/w': zeros(3)}
    # width 28 from the line 'Other Variables (3 in total)'
    assert summarize_variables(variables, groups=['net'], title='T') == '\n'.join([
        'T' + ' ' * 15 + '(5 in total)',
        '=' * 28,
        'net/' + ' ' * 12 + '(2 in total)',
        '-' * 28,
        'w' + ' ' * 20 + '(2,)  2',
        '',
        'Other Variables (3 in total)',
        '-' * 28,
        'network/w' + ' ' * 12 + '(3,)  3',
    ])


def test_wide_group_table_sets_the_width_of_all_tables():
    variables = {'net/a_very_long_variable_name': zeros(1000, 1000), 'x': zeros(1)}
    # the row `a_very_long_variable_name  (1000, 1000)  1,000,000` is 50 wide
    assert summarize_variables(variables, title='T', groups=['net']) == '\n'.join([
        'T' + ' ' * 29 + '(1,000,001 in total)',
        '=' * 50,
        'net/' + ' ' * 26 + '(1,000,000 in total)',
        '-' * 50,
        'a_very_long_variable_name  (1000, 1000)  1,000,000',
        '',
        'Other Variables' + ' ' * 23 + '(1 in total)',
        '-' * 50,
        'x' + ' ' * 42 + '(1,)  1',
    ])


# ------------------------------------------------------------------- errors
def test_non_variable_raises():
    t = tf.zeros([2])
    expected = ('`variables` must hold only variables (tf.Variable or keras.Variable), '
                'but item 0 is <EagerTensor shape=(2,) dtype=float32>')
    with pytest.raises(TypeError, match='^' + re.escape(expected) + '$'):
        summarize_variables([t])
