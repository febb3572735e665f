"""Tests of `DefaultMetricFormatter` and `MetricLogger` (API.md section 5)."""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet import DefaultMetricFormatter, MetricFormatter, MetricLogger
from tfsnippet.utils import StatisticsCollector
from tests.helpers import read_scalars


# ------------------------------------------------------ DefaultMetricFormatter
def test_sort_metrics_puts_time_metrics_first_each_group_sorted():
    names = ['loss', 'step_time', 'acc', 'epoch_time', 'valid_loss', 'timer', 'my_timer',
             'timeout', 'times', 'runtime', 'Time']
    assert DefaultMetricFormatter().sort_metrics(names) == [
        # names ending in `time` or `timer`, by raw key
        'epoch_time', 'my_timer', 'runtime', 'step_time', 'timer',
        # the others, by raw key (upper case sorts first)
        'Time', 'acc', 'loss', 'timeout', 'times', 'valid_loss',
    ]


def test_sort_metrics_accepts_any_iterable():
    assert DefaultMetricFormatter().sort_metrics(iter(['b', 'a_time', 'a'])) == \
        ['a_time', 'a', 'b']
    assert DefaultMetricFormatter().sort_metrics([]) == []


@pytest.mark.parametrize('name, value, expected', [
    ('loss', 0.1234567, '0.123457'),
    ('loss', 1234567., '1.23457e+06'),
    ('loss', 3, '3'),
    ('loss', 0.1, '0.1'),
    ('loss', -2.5, '-2.5'),
    ('loss', np.float64(0.5), '0.5'),
    ('loss', np.array(0.25), '0.25'),
    ('acc', 1e-7, '1e-07'),
    ('step_time', 65., '1m 5s'),
    ('step_time', 0.0123, '0.0123s'),
    ('epoch_time', 2.31, '2.31s'),
    ('train_timer', 3600, '1h'),
    ('runtime', np.float32(0.5), '0.5s'),
    ('timeout', 65., '65'),   # not a time metric: it ends in `out`
])
def test_format_metric(name, value, expected):
    assert DefaultMetricFormatter().format_metric(name, value) == expected


def test_default_formatter_is_a_metric_formatter():
    assert isinstance(DefaultMetricFormatter(), MetricFormatter)


# ----------------------------------------------------------------- format_logs
def test_format_logs_of_nothing_is_empty():
    assert MetricLogger().format_logs() == ''


def test_format_logs_single_value_has_no_stddev():
    logger = MetricLogger()
    logger.collect_metrics({'loss': 0.5})
    assert logger.format_logs() == 'loss: 0.5'


def test_format_logs_uses_population_stddev():
    # mean 0.7; deviations 0.1, -0.1, 0 -> sqrt(0.02 / 3) = 0.0816497 (the
    # sample stddev would be 0.1)
    logger = MetricLogger()
    for v in (0.8, 0.6, 0.7):
        logger.collect_metrics({'loss': v})
    assert logger.format_logs() == 'loss: 0.7 (±0.0816497)'


def test_format_logs_full_line_order_and_format():
    logger = MetricLogger()
    logger.collect_metrics({'valid_loss': 0.1, 'loss': 0.1, 'step_time': 0.02})
    logger.collect_metrics({'loss': 0.3, 'step_time': 0.0226, 'epoch_time': 2.31})
    # step time: mean 0.0213, stddev 0.0013; loss: mean 0.2, stddev 0.1
    assert logger.format_logs() == (
        'epoch time: 2.31s; step time: 0.0213s (±0.0013s); '
        'loss: 0.2 (±0.1); valid loss: 0.1')


def test_format_logs_time_metrics_in_minutes():
    logger = MetricLogger()
    logger.collect_metrics({'step_time': 61.})
    logger.collect_metrics({'step_time': 63.})
    assert logger.format_logs() == 'step time: 1m 2s (±1s)'


def test_format_logs_replaces_every_underscore():
    logger = MetricLogger()
    logger.collect_metrics({'valid_nll_loss': 1234567., 'my_train_timer': 0.5})
    assert logger.format_logs() == 'my train timer: 0.5s; valid nll loss: 1.23457e+06'


def test_format_logs_skips_metrics_without_values():
    logger = MetricLogger()
    logger.collect_metrics({'empty': np.zeros([0]), 'loss': 1.})
    assert logger.format_logs() == 'loss: 1'


def test_format_logs_can_be_called_repeatedly_while_collecting():
    logger = MetricLogger()
    logger.collect_metrics({'loss': 1.})
    assert logger.format_logs() == 'loss: 1'
    assert logger.format_logs() == 'loss: 1'
    logger.collect_metrics({'loss': 3.})
    assert logger.format_logs() == 'loss: 2 (±1)'


def test_custom_formatter_is_used():
    class Brackets(MetricFormatter):
        def sort_metrics(self, names):
            return sorted(names, reverse=True)

        def format_metric(self, name, value):
            return f'<{float(value):.1f}>'

    formatter = Brackets()
    logger = MetricLogger(formatter=formatter)
    assert logger.formatter is formatter
    logger.collect_metrics({'a': 1., 'b_c': 2.})
    logger.collect_metrics({'a': 3.})
    assert logger.format_logs() == 'b c: <2.0>; a: <2.0> (±<1.0>)'


def test_default_formatter():
    assert isinstance(MetricLogger().formatter, DefaultMetricFormatter)


# ------------------------------------------------------------- value kinds
def test_each_array_element_is_one_sample():
    # 1, 2, 3, 4: mean 2.5, population variance 1.25, stddev 1.11803
    by_array = MetricLogger()
    by_array.collect_metrics({'x': np.array([1., 2., 3., 4.])})
    by_scalars = MetricLogger()
    for v in (1., 2., 3., 4.):
        by_scalars.collect_metrics({'x': v})

    assert by_array.format_logs() == 'x: 2.5 (±1.11803)'
    assert by_scalars.format_logs() == 'x: 2.5 (±1.11803)'
    assert by_array.metrics['x'].counter == 4


def test_multi_dimensional_arrays_and_lists_count_each_element():
    logger = MetricLogger()
    logger.collect_metrics({'x': np.array([[1, 2], [3, 4]])})
    logger.collect_metrics({'y': [1, 2, 3, 4]})
    assert logger.format_logs() == 'x: 2.5 (±1.11803); y: 2.5 (±1.11803)'


def test_array_with_one_element_is_one_sample():
    logger = MetricLogger()
    logger.collect_metrics({'x': np.array([5.])})
    assert logger.format_logs() == 'x: 5'


def test_eager_tensors_are_accepted():
    # 0.25, 0.75, 0.5: mean 0.5, stddev sqrt(0.125 / 3) = 0.204124
    logger = MetricLogger()
    for v in (0.25, 0.75, 0.5):
        logger.collect_metrics({'loss': tf.constant(v)})
    logger.collect_metrics({'count': tf.constant(3)})
    assert logger.format_logs() == 'count: 3; loss: 0.5 (±0.204124)'


def test_eager_tensor_arrays_count_each_element_and_mix_with_floats():
    logger = MetricLogger()
    logger.collect_metrics({'x': tf.constant([1., 2.])})
    logger.collect_metrics({'x': 3.})
    logger.collect_metrics({'x': np.float32(4.)})
    assert logger.format_logs() == 'x: 2.5 (±1.11803)'


def test_eager_variable_value_is_read_when_collected():
    v = tf.Variable(2.)
    logger = MetricLogger()
    logger.collect_metrics({'x': v})
    v.assign(5.)
    logger.collect_metrics({'x': v})
    v.assign(100.)
    assert logger.format_logs() == 'x: 3.5 (±1.5)'


def test_keras_variable_value_is_accepted():
    v = keras.Variable(2.)
    logger = MetricLogger()
    logger.collect_metrics({'x': v})
    v.assign(4.)
    logger.collect_metrics({'x': v})
    assert logger.format_logs() == 'x: 3 (±1)'


def test_numpy_scalars_are_accepted():
    logger = MetricLogger()
    logger.collect_metrics({'x': np.float32(0.25), 'n': np.int64(3)})
    logger.collect_metrics({'x': np.float64(0.75), 'n': np.int32(3)})
    assert logger.format_logs() == 'n: 3 (±0); x: 0.5 (±0.25)'


# ------------------------------------------------------------------ bad values
SHORT_REPRS = {'str-ndarray': 'ndarray(shape=(2,), dtype=str32)',
               'string-tensor': '<EagerTensor shape=() dtype=string>'}


def _bad_value_message(name, value, shown=None):
    return (f'Metric `{name}` must be a number, a numeric numpy array or an eager tensor, '
            f'got {shown or repr(value)}')


@pytest.mark.parametrize('value', [
    'abc',
    None,
    {'a': 1.},
    np.array(['a', 'b']),
    ['a', 'b'],
    [[1., 2.], [3.]],
    tf.constant('text'),
], ids=['str', 'None', 'dict', 'str-ndarray', 'str-list', 'ragged-list', 'string-tensor'])
def test_non_numeric_value_raises_type_error_naming_the_metric(value, request):
    logger = MetricLogger()
    # arrays and tensors are shown by type, shape and dtype, never with their values
    shown = SHORT_REPRS.get(request.node.callspec.id)
    with pytest.raises(TypeError, match='^' + re.escape(
            _bad_value_message('valid_loss', value, shown)) + '$'):
        logger.collect_metrics({'valid_loss': value})
    assert logger.format_logs() == ''


def test_bad_value_records_nothing_of_the_same_call():
    logger = MetricLogger()
    logger.collect_metrics({'loss': 1.})
    with pytest.raises(TypeError, match='^' + re.escape(_bad_value_message('acc', 'x')) + '$'):
        logger.collect_metrics({'loss': 3., 'acc': 'x'})
    assert logger.format_logs() == 'loss: 1'


def test_metrics_not_a_dict_raises():
    logger = MetricLogger()
    expected = '`metrics` should be a dict, got [0.5]'
    with pytest.raises(TypeError, match='^' + re.escape(expected) + '$'):
        logger.collect_metrics([0.5])


# ----------------------------------------------------------- metrics / clear
def test_metrics_gives_statistics_collectors():
    logger = MetricLogger()
    logger.collect_metrics({'loss': 1., 'acc': 0.5})
    logger.collect_metrics({'loss': 3.})
    metrics = logger.metrics
    assert set(metrics) == {'loss', 'acc'}
    assert all(isinstance(c, StatisticsCollector) for c in metrics.values())
    assert metrics['loss'].counter == 2
    assert float(metrics['loss'].mean) == 2.
    assert float(metrics['loss'].stddev) == 1.
    assert metrics['acc'].counter == 1


def test_clear_forgets_values_and_metric_names():
    logger = MetricLogger()
    logger.collect_metrics({'loss': 1., 'acc': 0.5})
    logger.format_logs()  # reduce the pending values first
    logger.collect_metrics({'loss': 3.})

    logger.clear()
    assert logger.metrics == {}
    assert logger.format_logs() == ''

    logger.collect_metrics({'loss': 7.})
    assert set(logger.metrics) == {'loss'}
    assert logger.format_logs() == 'loss: 7'


def test_more_than_1024_values_keep_the_exact_mean_and_stddev():
    # 0, 1, ..., 2999: mean 1499.5, population variance (3000**2 - 1) / 12,
    # stddev 866.025
    logger = MetricLogger()
    for i in range(3000):
        logger.collect_metrics({'x': float(i)})
    stats = logger.metrics['x']
    assert stats.counter == 3000
    assert float(stats.mean) == pytest.approx(1499.5, rel=1e-12)
    assert float(stats.var) == pytest.approx((3000 ** 2 - 1) / 12, rel=1e-9)
    assert logger.format_logs() == 'x: 1499.5 (±866.025)'


def test_many_values_of_mixed_kinds_across_reads():
    logger = MetricLogger()
    values = np.arange(2050, dtype=np.float64)
    for i, v in enumerate(values):
        value = tf.constant(v, dtype=tf.float64) if i % 3 == 0 else (
            np.float64(v) if i % 3 == 1 else float(v))
        logger.collect_metrics({'x': value})
        if i == 1500:
            assert logger.metrics['x'].counter == 1501
    stats = logger.metrics['x']
    assert stats.counter == 2050
    assert float(stats.mean) == pytest.approx(1024.5, rel=1e-12)
    assert float(stats.var) == pytest.approx((2050 ** 2 - 1) / 12, rel=1e-9)


# ------------------------------------------------------------ classic summary arguments
def test_metric_logger_writes_summaries_with_commit_freqs_and_skip_pattern(tmp_path):
    writer = spt.SummaryWriter(str(tmp_path))
    logger = MetricLogger(writer, summary_metric_prefix='m/', summary_skip_pattern='.*_time$',
                          summary_commit_freqs={'loss': 2})
    for step in range(1, 21):
        logger.collect_metrics({'loss': float(step), 'acc': [0.5, 1.], 'step_time': 0.1},
                               global_step=step)
    writer.close()
    scalars = read_scalars(tmp_path, in_step_order=False)
    assert sorted(scalars) == ['m/acc', 'm/loss']
    assert [s for s, _ in scalars['m/loss']] == list(range(1, 21, 2))
    assert scalars['m/acc'][0] == (1, 0.75)
    assert logger.format_logs().startswith('step time: 0.1s')


def test_metric_logger_needs_a_step_with_a_writer(tmp_path):
    logger = MetricLogger(spt.SummaryWriter(str(tmp_path)))
    with pytest.raises(ValueError, match='`global_step` is required when the logger has a '
                                         'summary writer'):
        logger.collect_metrics({'loss': 1.})
