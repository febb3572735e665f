"""Graph-mode tests of the session and variable helpers (API.md section 13.6).

This file runs in a child pytest process with eager execution disabled
(see ``tests/conftest.py``); each test gets a fresh default `graph`, and
the `session` fixture makes a session the default one.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

from tfsnippet import MetricLogger, summarize_variables
from tfsnippet.utils import (create_session, ensure_variables_initialized,
                             get_default_session_or_error, get_uninitialized_variables,
                             get_variables_as_dict, is_variable, variable_name, variable_shape)
from tests.helpers import read_scalars

v1 = tf.compat.v1


def get_var(name, value=0., shape=(), **kwargs):
    return v1.get_variable(name, shape=shape, initializer=v1.constant_initializer(value),
                           **kwargs)


def is_initialized(session, var):
    return bool(session.run(v1.is_variable_initialized(var)))


# -------------------------------------------------------------- create_session
def session_config(sess):
    # `tf.compat.v1.Session` has no public accessor for the ConfigProto it
    # was built with; `_config` is where BaseSession keeps it.
    return sess._config


def test_create_session_returns_a_working_session_on_the_default_graph(graph):
    sess = create_session()
    try:
        assert isinstance(sess, v1.Session)
        assert sess.graph is graph
        assert sess.run(tf.constant(2) * 3) == 6
    finally:
        sess.close()


@pytest.mark.parametrize('kwargs, expected', [
    ({'lock_memory': True}, {'allow_growth': False, 'fraction': 0., 'allow_soft_placement': True,
                             'log_device_placement': False}),   # TF's defaults
    ({'lock_memory': False}, {'allow_growth': True, 'fraction': 0.}),
    ({'lock_memory': .5}, {'allow_growth': False, 'fraction': .5}),
    ({'log_device_placement': True, 'allow_soft_placement': False,
      'inter_op_parallelism_threads': 2},   # passed on to the ConfigProto
     {'log_device_placement': True, 'allow_soft_placement': False,
      'inter_op_parallelism_threads': 2}),
])
def test_create_session_config(kwargs, expected):
    sess = create_session(**kwargs)
    try:
        config = session_config(sess)
        got = {'allow_growth': config.gpu_options.allow_growth,
               'fraction': config.gpu_options.per_process_gpu_memory_fraction,
               'allow_soft_placement': config.allow_soft_placement,
               'log_device_placement': config.log_device_placement,
               'inter_op_parallelism_threads': config.inter_op_parallelism_threads}
        assert {k: got[k] for k in expected} == pytest.approx(expected)
    finally:
        sess.close()


@pytest.mark.parametrize('value', [1, None])
def test_create_session_lock_memory_of_another_type_raises(value):
    with pytest.raises(TypeError, match='^' + re.escape(
            f'`lock_memory` must be True, False or float, got {value}') + '$'):
        create_session(lock_memory=value)


# ------------------------------------------------ get_default_session_or_error
def test_get_default_session_or_error_returns_default_session(session):
    assert get_default_session_or_error() is session


def test_get_default_session_or_error_without_session_raises():
    with pytest.raises(RuntimeError, match='^' + re.escape(
            'No session is active: enter `with session.as_default():` first') + '$'):
        get_default_session_or_error()


# ------------------------------------------------- variables: names and shapes
def test_graph_variables_are_variables_with_names_and_shapes():
    with v1.variable_scope('net'):
        w = get_var('w', shape=[3, 4])
    assert is_variable(w)
    assert not is_variable(tf.constant(1.))
    assert variable_name(w) == 'net/w'
    assert variable_shape(w) == (3, 4)


# ------------------------------------------------- get_uninitialized_variables
def test_get_uninitialized_variables_of_all_a_list_or_a_dict(session):
    a = get_var('a', 1.)
    b = get_var('b', 2.)
    c = get_var('c', 3.)
    session.run(b.initializer)
    assert get_uninitialized_variables() == [a, c]
    assert get_uninitialized_variables([c, a, b]) == [c, a]     # in the given order
    assert get_uninitialized_variables({'x': b, 'y': a}) == [a]
    session.run([a.initializer, c.initializer])
    assert get_uninitialized_variables() == []
    assert get_uninitialized_variables([]) == []


def test_get_uninitialized_variables_without_session_raises():
    get_var('a', 1.)
    with pytest.raises(RuntimeError, match=re.escape('No session is active')):
        get_uninitialized_variables()


# ------------------------------------------------ ensure_variables_initialized
def test_ensure_variables_initialized_initializes_only_uninitialized_ones(session):
    a = get_var('a', 1.)
    b = get_var('b', 2.)
    session.run(a.initializer)
    session.run(a.assign(10.))

    ensure_variables_initialized()
    assert session.run([a, b]) == [10., 2.]  # `a` kept its assigned value

    session.run(b.assign(20.))
    ensure_variables_initialized()  # nothing left to do
    assert session.run([a, b]) == [10., 20.]


def test_ensure_variables_initialized_of_a_list_touches_only_those(session):
    a = get_var('a', 1.)
    b = get_var('b', 2.)
    ensure_variables_initialized([b])
    assert not is_initialized(session, a)
    assert session.run(b) == 2.


def test_ensure_variables_initialized_of_a_dict(session):
    a = get_var('a', 1.)
    b = get_var('b', 2.)
    session.run(a.initializer)
    session.run(a.assign(5.))
    ensure_variables_initialized({'first': a, 'second': b})
    assert session.run([a, b]) == [5., 2.]


def test_ensure_variables_initialized_skips_non_global_variables_by_default(session):
    g = get_var('g', 1.)
    m = get_var('m', 3., collections=[v1.GraphKeys.MODEL_VARIABLES])
    ensure_variables_initialized()
    assert session.run(g) == 1.
    assert not is_initialized(session, m)

    ensure_variables_initialized([m])
    assert session.run(m) == 3.


# ------------------------------------------------------ get_variables_as_dict
@pytest.fixture
def scoped_variables():
    a = get_var('a')
    with v1.variable_scope('child') as child_scope:
        b = get_var('b')
        c = get_var('c', trainable=False)
        with v1.variable_scope('sub'):
            e = get_var('e')
    with v1.variable_scope('child2'):
        d = get_var('d')
    return {'a': a, 'b': b, 'c': c, 'd': d, 'e': e, 'child_scope': child_scope}


ALL = {'a': 'a', 'child/b': 'b', 'child/c': 'c', 'child/sub/e': 'e', 'child2/d': 'd'}
CHILD = {'b': 'b', 'c': 'c', 'sub/e': 'e'}


@pytest.mark.parametrize('args, expected', [
    ((), ALL), (('',), ALL),
    (('child',), CHILD), (('child/',), CHILD),          # not child2's
    (('child/sub',), {'e': 'e'}),
    (('child_scope',), CHILD),                          # the VariableScope object
    (('child', v1.GraphKeys.TRAINABLE_VARIABLES), {'b': 'b', 'sub/e': 'e'}),
    (('nothing',), {}),
])
def test_get_variables_as_dict(scoped_variables, args, expected):
    if args == ('child_scope',):
        args = (scoped_variables['child_scope'],)
    assert get_variables_as_dict(*args) == {k: scoped_variables[v] for k, v in expected.items()}


# -------------------------------------------------------- summarize_variables
def test_summarize_graph_variables_with_groups():
    with v1.variable_scope('q_net'):
        get_var('w', shape=[3, 2])
    get_var('beta', shape=[1])
    # all tables are 30 wide, the width of the title line
    assert summarize_variables(v1.global_variables(), groups=['q_net']) == '\n'.join([
        'Variables Summary (7 in total)',
        '==============================',
        'q_net/' + ' ' * 12 + '(6 in total)',
        '-' * 30,
        'w' + ' ' * 20 + '(3, 2)  6',
        '',
        'Other Variables' + ' ' * 3 + '(1 in total)',
        '-' * 30,
        'beta' + ' ' * 19 + '(1,)  1',
    ])


# --------------------------------------------------- metric logger, graph mode
def test_metric_logger_rejects_symbolic_tensor():
    t = tf.constant(1.)
    logger = MetricLogger()
    expected = (f'Metric `loss` is a symbolic graph tensor {t!r}: evaluate it with '
                f'`session.run` and pass the result instead')
    with pytest.raises(TypeError, match='^' + re.escape(expected) + '$'):
        logger.collect_metrics({'loss': t})


def test_metric_logger_rejects_graph_variable():
    v = get_var('v', 1.)
    logger = MetricLogger()
    expected = (f'Metric `v` is a graph variable {v!r}: evaluate it with '
                f'`session.run` and pass the result instead')
    with pytest.raises(TypeError, match='^' + re.escape(expected) + '$'):
        logger.collect_metrics({'v': v})


def test_metric_logger_accepts_evaluated_values(session):
    x = v1.placeholder(tf.float32, [None])
    logger = MetricLogger()
    logger.collect_metrics({'loss': session.run(tf.reduce_mean(x), {x: [0.5, 1.]})})
    logger.collect_metrics({'loss': session.run(x, {x: [0.25, 0.75]})})
    # samples 0.75, 0.25, 0.75: mean 0.583333, stddev sqrt(1/18) = 0.235702
    assert logger.format_logs() == 'loss: 0.583333 (±0.235702)'
    assert np.isclose(float(logger.metrics['loss'].mean), 7. / 12)


def test_metric_logger_writes_through_a_tf1_file_writer(session, tmp_path):
    step = tf.compat.v1.train.get_or_create_global_step()
    loss = tf.compat.v1.placeholder(tf.float32, [])
    session.run(tf.compat.v1.global_variables_initializer())
    writer = tf.compat.v1.summary.FileWriter(str(tmp_path))
    logger = MetricLogger(writer, summary_commit_freqs={'loss': 3})
    for i in range(1, 8):
        session.run(step.assign(i))
        logger.collect_metrics({'loss': session.run(loss, {loss: i / 2})}, global_step=step)
    writer.close()
    assert read_scalars(tmp_path, 'loss', in_step_order=False) == [(1, .5), (4, 2.), (7, 3.5)]
