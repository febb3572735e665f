"""Histograms and the summary collector in eager mode (API.md 13.7), read back from event files."""

import re

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.scaffold.summary_collector import (GraphKeys, SummaryCollector, add_histogram,
                                                  add_summary, default_summary_collector,
                                                  histogram_summary, write_histogram)
from tfsnippet.settings_ import settings
from tests.helpers import read_histograms as read_tensorboard_histograms


def raises(exc_type, message):
    return pytest.raises(exc_type, match=re.escape(message))


def read_histograms(logdir):
    """``{tag: [(step, num, min, max, sum, sum_squares, limits, counts), ...]}`` in step order."""
    return read_tensorboard_histograms(
        logdir, ('num', 'min', 'max', 'sum', 'sum_squares', 'bucket_limit', 'bucket'),
        in_step_order=True)


# ------------------------------------------------------------ the proto
def test_histogram_summary_proto():
    s = histogram_summary('w', np.array([[0., 1.], [1., 4.]]), bucket_count=4)
    (value,) = s.value
    h = value.histo
    assert value.tag == 'w'
    assert (h.num, h.min, h.max, h.sum, h.sum_squares) == (4., 0., 4., 6., 18.)
    assert list(h.bucket_limit) == [1., 2., 3., 4.]
    assert list(h.bucket) == [1., 2., 0., 1.]     # numpy's last bucket includes its right edge


def test_histogram_of_one_repeated_value_and_of_nothing():
    h = histogram_summary('c', [2.5] * 3).value[0].histo
    assert (h.num, h.min, h.max, list(h.bucket_limit), list(h.bucket)) == \
        (3., 2.5, 2.5, [2.5], [3.])
    empty = histogram_summary('e', np.zeros([0, 3])).value[0].histo
    assert empty.num == 0 and list(empty.bucket) == []


def test_histogram_of_tensors_variables_bools_and_scheduled_variables():
    assert histogram_summary('t', tf.constant([1, 2, 3])).value[0].histo.sum == 6.
    assert histogram_summary('v', tf.Variable([1., 1.])).value[0].histo.num == 2.
    assert histogram_summary('b', [True, False, True]).value[0].histo.sum == 2.
    sv = spt.ScheduledVariable('hist_sv', [.5, 1.5])
    assert histogram_summary('s', sv).value[0].histo.sum == 2.


@pytest.mark.parametrize('kwargs, exc, message', [
    ({'tag': '', 'values': [1.]}, ValueError, "`tag` must be a non-empty str, got ''"),
    ({'tag': 'x', 'values': ['a']}, TypeError, '`values` must hold numbers, got list of '
                                               'dtype <U1'),
    ({'tag': 'x', 'values': [1., np.nan]}, ValueError,
     "`values` of histogram 'x' holds NaN or infinity; the histogram needs finite values"),
    ({'tag': 'x', 'values': [np.inf]}, ValueError,
     "`values` of histogram 'x' holds NaN or infinity"),
    ({'tag': 'x', 'values': [1.], 'bucket_count': 0}, ValueError,
     '`bucket_count` must be a positive int, got 0'),
])
def test_histogram_summary_bad_input(kwargs, exc, message):
    with raises(exc, message):
        histogram_summary(**kwargs)


# ------------------------------------------------------------ writing
def test_write_histogram_read_back(tmp_path):
    with spt.SummaryWriter(str(tmp_path)) as writer:
        write_histogram(writer, 'layer/w', [1., 2., 3.], step=5)
        write_histogram(writer, 'layer/w', np.array([4., 4.]), step=np.int64(7))
        write_histogram(writer, 'b', tf.constant([0.]), step=tf.constant(9, tf.int64))
    hist = read_histograms(tmp_path)
    assert sorted(hist) == ['b', 'layer/w']
    assert [row[:6] for row in hist['layer/w']] == [
        (5, 3., 1., 3., 6., 14.), (7, 2., 4., 4., 8., 32.)]
    assert hist['b'] == [(9, 1., 0., 0., 0., 0., [0.], [1.])]


def test_eager_add_histogram_writes_through_the_given_writer(tmp_path):
    w = tf.Variable([1., 2., 3., 4.], name='dense/kernel')
    with spt.SummaryWriter(str(tmp_path)) as writer:
        proto = add_histogram(w, step=1, writer=writer)                 # tag: variable name
        add_histogram(w, strip_scope=True, step=2, writer=writer)       # last part only
        add_histogram('grads', tf.constant([.5, .5]), step=3, writer=writer)   # TF2 order
        add_histogram(tf.constant([1.]), 'named', step=4, writer=writer)
    assert proto.value[0].tag == 'dense/kernel'
    hist = read_histograms(tmp_path)
    assert {tag: [row[:2] for row in rows] for tag, rows in hist.items()} == {
        'dense/kernel': [(1, 4.)], 'kernel': [(2, 4.)], 'grads': [(3, 2.)], 'named': [(4, 1.)]}


def test_eager_add_histogram_uses_the_collectors_writer(tmp_path):
    with spt.SummaryWriter(str(tmp_path)) as writer:
        collector = SummaryCollector(writer=writer)
        assert collector.writer is writer
        with collector.as_default() as c:
            assert c is collector and default_summary_collector() is collector
            add_histogram('x', np.arange(4.), step=10)
    assert default_summary_collector() is not collector
    assert [row[:2] for row in read_histograms(tmp_path)['x']] == [(10, 4.)]
    assert collector.summary_list == []             # eager histograms are written, not kept


def test_eager_histograms_under_a_train_loop(tmp_path):
    w = tf.Variable([0., 1.], name='w')
    with spt.TrainLoop(max_epoch=2, summary_dir=str(tmp_path),
                       print_func=lambda line: None) as loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([0, 1]):
                w.assign_add([1., 1.])
                loop.collect_metrics(loss=1.)
            add_histogram(w, step=loop.step, writer=loop.summary_writer)
    assert [row[:5] for row in read_histograms(tmp_path)['w']] == [
        (2, 2., 2., 3., 5.), (4, 2., 4., 5., 9.)]


def test_the_top_level_names_are_the_same_objects():
    assert spt.add_histogram is add_histogram
    assert spt.add_summary is add_summary
    assert spt.SummaryCollector is SummaryCollector
    assert spt.default_summary_collector is default_summary_collector
    assert spt.GraphKeys is GraphKeys
    assert spt.settings is settings


# ------------------------------------------------------------ the collector stack
def test_as_default_nests_and_sets_auto_histogram_for_the_block():
    bottom = default_summary_collector()
    assert bottom.collections == (tf.compat.v1.GraphKeys.SUMMARIES,)
    outer, inner = SummaryCollector(), SummaryCollector(collections=['mine'])
    with outer.as_default(auto_histogram=True):
        assert settings.auto_histogram is True
        with inner.as_default():
            assert default_summary_collector() is inner
            assert settings.auto_histogram is True
        assert default_summary_collector() is outer
    assert default_summary_collector() is bottom
    assert settings.auto_histogram is False


def test_as_default_restores_after_an_error():
    collector = SummaryCollector()
    with pytest.raises(KeyError):
        with collector.as_default(auto_histogram=True):
            raise KeyError()
    assert default_summary_collector() is not collector
    assert settings.auto_histogram is False


def test_merge_summary_of_nothing_is_none():
    assert SummaryCollector().merge_summary() is None


# ------------------------------------------------------------ errors
def test_eager_add_histogram_without_writer():
    with raises(ValueError, 'Eager `add_histogram()` writes at once and needs a writer: pass '
                            '`writer=loop.summary_writer` (or a SummaryWriter), or give the '
                            'SummaryCollector one'):
        add_histogram('x', [1.], step=1)


def test_eager_add_histogram_without_step(tmp_path):
    with spt.SummaryWriter(str(tmp_path)) as writer:
        with raises(ValueError, 'Eager `add_histogram()` needs the `step` to write at, '
                                'e.g. `step=loop.step`'):
            add_histogram('x', [1.], writer=writer)


def test_eager_add_histogram_of_a_nameless_tensor(tmp_path):
    with spt.SummaryWriter(str(tmp_path)) as writer:
        with raises(ValueError, '`summary_name` is required for a tensor without a name, '
                                'got EagerTensor'):
            add_histogram(tf.constant([1.]), step=0, writer=writer)


@pytest.mark.parametrize('step, exc', [(-1, ValueError), (1.5, TypeError), ('3', TypeError)])
def test_write_histogram_bad_step(tmp_path, step, exc):
    with spt.SummaryWriter(str(tmp_path)) as writer:
        with raises(exc, f'`step` must be a non-negative int (or an eager scalar tensor), '
                         f'got {step!r}'):
            write_histogram(writer, 'x', [1.], step=step)


def test_write_histogram_bad_writer():
    with raises(TypeError, '`writer` must be a summary writer, got None'):
        write_histogram(None, 'x', [1.], step=0)
    with raises(TypeError, '`writer` must be a tfsnippet SummaryWriter or a writer with '
                           '`add_summary(summary, global_step)`'):
        write_histogram(object(), 'x', [1.], step=0)


def test_add_histogram_bad_summary_name(tmp_path):
    with raises(ValueError, '`summary_name` must be a non-empty str or None, got 3'):
        add_histogram(tf.constant([1.]), 3, step=0)


def test_add_summary_is_graph_only():
    with raises(RuntimeError, '`add_summary()` collects graph-mode summary ops; in eager mode '
                              'write the summary at once with `writer.add_summary(summary, '
                              'step)`'):
        add_summary(histogram_summary('x', [1.]))


def test_add_histogram_inside_tf_function(tmp_path):
    @tf.function
    def step(x):
        add_histogram('x', x, step=0)
        return x

    with raises(RuntimeError, '`add_histogram()` cannot run inside a tf.function: use '
                              '`tf.summary.histogram(name, data, step)` with a `tf.summary` '
                              'writer there'):
        step(tf.constant([1.]))


def test_collector_bad_collections():
    with raises(TypeError, "`collections` must be a list of collection names, not a str: "
                           "got 'summaries'"):
        SummaryCollector(collections='summaries')
    with raises(TypeError, '`collections` must hold collection names (str), got 1'):
        SummaryCollector(collections=[1])
