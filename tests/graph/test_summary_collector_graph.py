"""Graph-mode summary collection (API.md 13.7): ops collected, merged, run and read back."""

import re

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.scaffold.summary_collector import (SummaryCollector, add_histogram, add_summary,
                                                  default_summary_collector)
from tests.helpers import read_histograms as read_tensorboard_histograms

v1 = tf.compat.v1
SUMMARIES = v1.GraphKeys.SUMMARIES


def raises(exc_type, message):
    return pytest.raises(exc_type, match=re.escape(message))


def read_histograms(logdir):
    """``{tag: [(step, num, min, max, sum), ...]}`` in step order."""
    return read_tensorboard_histograms(logdir, ('num', 'min', 'max', 'sum'), in_step_order=True)


def tag_of(serialized):
    return v1.Summary.FromString(serialized).value[0].tag


def test_default_collector_adds_to_the_summaries_collection(session):
    x = v1.placeholder(tf.float32, [None], name='x')
    hist = add_histogram(x)
    assert isinstance(hist, tf.Tensor) and hist.dtype == tf.string
    assert v1.get_collection(SUMMARIES) == [hist]
    assert default_summary_collector().summary_list[-1] is hist
    out = session.run(v1.summary.merge_all(), feed_dict={x: [1., 2., 3.]})
    h = v1.Summary.FromString(out).value[0]
    assert h.tag == 'x'
    assert (h.histo.num, h.histo.min, h.histo.max, h.histo.sum) == (3., 1., 3., 6.)


def test_tags_from_names_are_exact_whatever_the_name_scope(session):
    with v1.variable_scope('dense'):
        kernel = v1.get_variable('kernel', initializer=[[1., 2.]])
    with tf.name_scope('outer'):
        y = tf.identity(kernel, name='y')
        ops = [add_histogram(kernel), add_histogram(kernel, strip_scope=True),
               add_histogram(y), add_histogram(y, 'my_tag'),
               add_histogram(tf.split(y, 2, axis=1)[1]),
               add_histogram('tf2_order', y, name='scoped_op')]
    spt.utils.ensure_variables_initialized()
    assert [tag_of(s) for s in session.run(ops)] == [
        'dense/kernel', 'kernel', 'outer/y', 'my_tag', 'outer/split_1', 'tf2_order']
    assert ops[-1].op.name.startswith('outer/scoped_op/')


def test_own_collector_merges_its_summaries_only(session):
    x = v1.placeholder(tf.float32, [None])
    collector = SummaryCollector(collections=['mine'])
    with collector.as_default():
        h1 = add_histogram(x, 'a')
        s1 = add_summary(v1.summary.scalar('x_mean', tf.reduce_mean(x), collections=[]))
        s2 = add_summary(v1.summary.scalar('nowhere', tf.reduce_max(x), collections=[]),
                         collections=[])
    add_histogram(x, 'outside')              # the default collector, not ours
    assert collector.summary_list == [h1, s1, s2]
    assert v1.get_collection('mine') == [h1, s1]
    assert [tag_of(s) for s in session.run(v1.get_collection(SUMMARIES),
                                           feed_dict={x: [1.]})] == ['outside']
    merged = session.run(collector.merge_summary(), feed_dict={x: [1., 3.]})
    assert sorted(v.tag for v in v1.Summary.FromString(merged).value) == ['a', 'nowhere', 'x_mean']


def test_no_add_to_collections(session):
    x = tf.constant([1.])
    collector = SummaryCollector(collections=['mine'], no_add_to_collections=True)
    collector.add_histogram(x, 'a', collections=['other'])
    assert v1.get_collection('mine') == [] and v1.get_collection('other') == []
    assert len(collector.summary_list) == 1


def test_histograms_of_bools_and_scheduled_variables(session):
    mask = tf.constant([True, False, True])
    lr = spt.ScheduledVariable('lr', [.5, 1.5])
    spt.utils.ensure_variables_initialized()
    out = session.run([add_histogram(mask, 'mask'), add_histogram(lr, 'lr')])
    assert [v1.Summary.FromString(s).value[0].histo.sum for s in out] == [2., 2.]


def test_run_through_a_train_loop_and_read_back(session, tmp_path):
    x = v1.placeholder(tf.float32, [None])
    w = v1.get_variable('w', initializer=[0., 1.])
    step_op = v1.assign_add(w, [1., 1.])
    collector = SummaryCollector()
    with collector.as_default():
        add_histogram(w)
        add_histogram(x * 2., 'doubled_x')
    merged = collector.merge_summary()
    spt.utils.ensure_variables_initialized()
    with spt.TrainLoop([w], max_epoch=2, summary_dir=str(tmp_path),
                       print_func=lambda line: None) as loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps([0]):
                session.run(step_op)
                loop.add_summary(session.run(merged, feed_dict={x: [epoch, 1.]}))
    assert read_histograms(tmp_path) == {
        'w': [(1, 2., 1., 2., 3.), (2, 2., 2., 3., 5.)],
        'doubled_x': [(1, 2., 2., 2., 4.), (2, 2., 2., 4., 6.)],
    }


def test_graph_add_histogram_refuses_eager_arguments(session):
    with raises(ValueError, '`step` and `writer` are for eager mode; in graph mode run the '
                            'summary op (e.g. `collector.merge_summary()`) and pass the '
                            'result to `loop.add_summary`'):
        add_histogram(tf.constant([1.]), 'x', step=1)
