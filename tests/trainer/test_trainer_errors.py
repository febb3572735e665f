"""One test per bad input of the trainer package, each matching the full message.

Messages of the classic API come from API.md sections 8, 9 and 16; the
others from the docstrings' ``Raises:`` and the messages of the rewrite.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.trainer import (GradientAccumulator, LossGuard, ReduceOnPlateau,
                               clip_gradients)

BATCHES = [(np.arange(3, dtype=np.float32),)]


def raises(exc_type, message):
    return pytest.raises(exc_type, match=re.escape(message))


@pytest.fixture
def loop():
    return spt.TrainLoop(max_epoch=1, print_func=lambda line: None)


@pytest.fixture
def trainer(loop):
    return spt.Trainer(loop, lambda x: None, data_flow=BATCHES)


# ------------------------------------------------------------ Trainer construction
@pytest.mark.parametrize('train_op', [3, 'train'], ids=['int', 'str'])
def test_train_op_neither_op_nor_callable(loop, train_op):
    with raises(TypeError, '`train_op` must be a graph op/tensor to run with `session.run`, '
                           'or a step function (e.g. a tf.function) called with each batch, '
                           f'got {train_op!r}'):
        spt.Trainer(loop, train_op, data_flow=BATCHES)


def test_inputs_given_with_a_step_function(loop):
    with raises(ValueError, '`inputs` is for a graph `train_op`; a step function receives '
                            'the arrays of each batch as its arguments'):
        spt.Trainer(loop, lambda x: None, inputs=[], data_flow=BATCHES)


def test_metrics_given_with_a_step_function(loop):
    with raises(ValueError, '`metrics` is for a graph `train_op`; a step function returns '
                            'its metrics'):
        spt.Trainer(loop, lambda x: None, data_flow=BATCHES, metrics={'loss': 1.})


def test_summaries_given_with_a_step_function(loop):
    with raises(ValueError, '`summaries` is for a graph `train_op`; a step function writes '
                            'its own'):
        spt.Trainer(loop, lambda x: None, data_flow=BATCHES, summaries=[object()])


def test_graph_train_op_without_inputs(loop):
    with tf.Graph().as_default():
        train_op = tf.no_op()
        with raises(ValueError, '`inputs` is required with a graph `train_op`: the '
                                'placeholders to feed each batch to'):
            spt.Trainer(loop, train_op, data_flow=BATCHES)


def test_graph_inputs_do_not_match_the_dataflow_arity(loop):
    flow = spt.DataFlow.arrays([np.zeros(4), np.zeros(4)], batch_size=2)
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [None])
        with raises(ValueError, '`inputs` has 1 placeholders but the batches of `data_flow` '
                                'hold 2 arrays'):
            spt.Trainer(loop, tf.no_op(), [x], flow)


def test_loop_without_max_epoch_or_max_step():
    with raises(ValueError, 'At least one of `max_epoch`, `max_step` should be configured '
                            'for `loop`.'):
        spt.Trainer(spt.TrainLoop(), lambda x: None, data_flow=BATCHES)


def test_trainer_without_data_flow(loop):
    with raises(ValueError, '`data_flow` is required: the batches to train on'):
        spt.Trainer(loop, lambda x: None)


def test_trainer_data_flow_not_iterable(loop):
    with raises(TypeError, '`data_flow` must be iterable, got 5'):
        spt.Trainer(loop, lambda x: None, data_flow=5)


def test_trainer_feed_dict_not_a_dict(loop):
    with raises(TypeError, "`feed_dict` must be a dict, got [('a', 1)]"):
        spt.Trainer(loop, lambda x: None, data_flow=BATCHES, feed_dict=[('a', 1)])


def test_trainer_loop_not_a_train_loop():
    with raises(TypeError, '`loop` must be a TrainLoop, got None'):
        spt.Trainer(None, lambda x: None, data_flow=BATCHES)


# ------------------------------------------------------------ hook schedules
@pytest.mark.parametrize('freq, error', [(0, ValueError), (-1, ValueError), (1.5, TypeError),
                                          (True, TypeError)],
                         ids=['zero', 'negative', 'float', 'bool'])
def test_step_frequency_not_a_positive_int(trainer, freq, error):
    with raises(error, f'`steps` must be a positive int, got {freq!r}'):
        trainer.log_after_steps(freq)


@pytest.mark.parametrize('freq, error', [(0, ValueError), (-1, ValueError), (1.5, TypeError)],
                         ids=['zero', 'negative', 'float'])
def test_epoch_frequency_not_a_positive_int(trainer, freq, error):
    with raises(error, f'`epochs` must be a positive int, got {freq!r}'):
        trainer.evaluate_after_epochs(lambda: None, freq)


@pytest.mark.parametrize('seconds, error', [(0, ValueError), (-2.5, ValueError), ('10', TypeError)],
                         ids=['zero', 'negative', 'str'])
def test_seconds_not_a_positive_number(trainer, seconds, error):
    with raises(error, f'`seconds` must be a positive number, got {seconds!r}'):
        trainer.anneal_after(lambda: None, seconds=seconds)


def test_two_schedules_at_once(trainer):
    with raises(ValueError, 'One and only one of `epochs`, `steps` and `seconds` should be '
                            "specified, got {'epochs': 1, 'steps': 2}"):
        trainer.log_after(epochs=1, steps=2)


def test_no_schedule(trainer):
    with raises(ValueError, 'One and only one of `epochs`, `steps` and `seconds` should be '
                            'specified, got none'):
        trainer.evaluate_after(lambda: None)


def test_evaluator_hook_neither_evaluator_nor_callable(trainer):
    with raises(TypeError, '`evaluator` must be an Evaluator or a callable, got 3'):
        trainer.evaluate_after_steps(3, 1)


def test_anneal_hook_neither_annealable_nor_callable(trainer):
    with raises(TypeError, '`value` must be an AnnealingVariable (or have `anneal()`) or a '
                           'callable, got 0.5'):
        trainer.anneal_after_epochs(.5, 1)


# ------------------------------------------------------------ AnnealingVariable
@pytest.mark.parametrize('ratio', [0, 1.5, -1, 0.], ids=['zero', 'above-one', 'negative',
                                                          'float-zero'])
def test_annealing_variable_ratio_outside_0_1(ratio):
    with raises(ValueError, f'`ratio` must be a number in (0, 1], got {ratio!r}'):
        spt.AnnealingVariable('bad_ratio', 1., ratio)


def test_scheduled_variable_empty_name():
    with raises(ValueError, "`name` must be a non-empty str, got ''"):
        spt.ScheduledVariable('', 1.)


# ------------------------------------------------------------ ReduceOnPlateau
@pytest.mark.parametrize('factor', [0., 1., 1.5, -.5], ids=['zero', 'one', 'above', 'negative'])
def test_reduce_on_plateau_factor_outside_0_1(factor):
    with raises(ValueError, f'`factor` must be a number in (0, 1), got {factor!r}'):
        ReduceOnPlateau(spt.ScheduledVariable('plateau', 1.), factor=factor)


def test_reduce_on_plateau_patience_not_positive():
    with raises(ValueError, '`patience` must be a positive int, got 0'):
        ReduceOnPlateau(spt.ScheduledVariable('plateau', 1.), patience=0)


def test_reduce_on_plateau_value_not_a_variable():
    with raises(TypeError, '`value` must be a ScheduledVariable or a variable, got 0.1'):
        ReduceOnPlateau(.1)


# ------------------------------------------------------------ Evaluator
@pytest.mark.parametrize('metrics', [None, {}], ids=['none', 'empty-dict'])
def test_evaluator_without_metrics(loop, metrics):
    with raises(ValueError, '`metrics` is required: a scalar tensor, a dict of them, or a '
                            'function of the batch returning the metrics'):
        spt.Evaluator(loop, metrics, data_flow=BATCHES)


def test_evaluator_without_data_flow(loop):
    with raises(ValueError, '`data_flow` must be an iterable of batches, got None'):
        spt.Evaluator(loop, lambda x: 0.)


def test_evaluator_inputs_with_a_metrics_function(loop):
    with raises(ValueError, '`inputs` is for graph metrics; a metrics function receives the '
                            'arrays of each batch as its arguments'):
        spt.Evaluator(loop, lambda x: 0., inputs=[], data_flow=BATCHES)


def test_evaluator_batch_weight_func_not_callable(loop):
    with raises(TypeError, '`batch_weight_func` must be callable or None, got 1.0'):
        spt.Evaluator(loop, lambda x: 0., data_flow=BATCHES, batch_weight_func=1.)


def test_evaluator_metric_not_a_tensor_in_eager_mode(loop):
    with raises(TypeError, "`metrics['acc']` must be a graph tensor (or pass a function of the "
                           "batch in eager mode), got 0.5"):
        spt.Evaluator(loop, {'acc': .5}, data_flow=BATCHES)


# ------------------------------------------------------------ LossGuard
@pytest.mark.parametrize('action', ['warn', None], ids=['warn', 'none'])
def test_loss_guard_bad_action(action):
    with raises(ValueError, f"`action` must be 'raise', 'stop' or 'rollback', got {action!r}"):
        LossGuard(action=action)


@pytest.mark.parametrize('every, error', [(0, ValueError), (-3, ValueError), (2., TypeError)],
                         ids=['zero', 'negative', 'float'])
def test_loss_guard_bad_every(every, error):
    with raises(error, f'`every` must be a positive int, got {every!r}'):
        LossGuard(every=every)


def test_loss_guard_threshold_not_a_number():
    with raises(TypeError, "`threshold` must be a number or None, got '1'"):
        LossGuard(threshold='1')


# ------------------------------------------------------------ AnnealingScalar (API.md 8)
class Counters:
    epoch = step = 0


def test_annealing_scalar_initial_below_min_is_checked_first():
    # every later check fails too: min > max, no epochs/steps
    with raises(ValueError, '`initial_value` must >= `min_value`: initial_value 1.0 vs '
                            'min_value 2.0'):
        spt.AnnealingScalar(Counters, 1., .5, min_value=2., max_value=.5)


def test_annealing_scalar_min_above_max_is_checked_second():
    with raises(ValueError, '`min_value` must <= `max_value`: min_value 2.0 vs max_value 1.0'):
        spt.AnnealingScalar(Counters, 3., .5, min_value=2., max_value=1.)


def test_annealing_scalar_initial_above_max_is_checked_third():
    with raises(ValueError, '`initial_value` must <= `max_value`: initial_value 3.0 vs '
                            'max_value 2.0'):
        spt.AnnealingScalar(Counters, 3., .5, epochs=-1, steps=-1, max_value=2.)


@pytest.mark.parametrize('kwargs', [{}, {'epochs': 1, 'steps': 1}], ids=['neither', 'both'])
def test_annealing_scalar_one_and_only_one_of_epochs_and_steps(kwargs):
    with raises(ValueError, 'One and only one of `epochs` and `steps` should be specified.'):
        spt.AnnealingScalar(Counters, 1., .5, **kwargs)


@pytest.mark.parametrize('name', ['epochs', 'steps'])
def test_annealing_scalar_frequency_not_positive(name):
    with raises(ValueError, f'`{name}` must be positive: -1'):
        spt.AnnealingScalar(Counters, 1., .5, **{name: -1})


def test_annealing_scalar_frequency_zero():
    with raises(ValueError, '`steps` must be positive: 0'):
        spt.AnnealingScalar(Counters, 1., .5, steps=0)


# ------------------------------------------------------------ gradients
def test_clip_gradients_with_neither_option():
    with raises(ValueError, 'Give `clip_norm` and/or `clip_value`'):
        clip_gradients([tf.ones(2)])


@pytest.mark.parametrize('kwargs, message', [
    ({'clip_norm': 0}, '`clip_norm` must be a positive number or None, got 0'),
    ({'clip_norm': -1.}, '`clip_norm` must be a positive number or None, got -1.0'),
    ({'clip_value': 0.}, '`clip_value` must be a positive number or None, got 0.0'),
    ({'clip_norm': 1., 'clip_value': -2},
     '`clip_value` must be a positive number or None, got -2'),
], ids=['norm-zero', 'norm-negative', 'value-zero', 'value-negative'])
def test_clip_gradients_non_positive_option(kwargs, message):
    with raises(ValueError, message):
        clip_gradients([tf.ones(2)], **kwargs)


@pytest.mark.parametrize('num_batches, error', [(0, ValueError), (-1, ValueError),
                                                 (2., TypeError)],
                         ids=['zero', 'negative', 'float'])
def test_gradient_accumulator_num_batches_not_positive(num_batches, error):
    with raises(error, f'`num_batches` must be a positive int, got {num_batches!r}'):
        GradientAccumulator([tf.Variable(1.)], num_batches)


def test_gradient_accumulator_without_variables():
    with raises(ValueError, '`variables` must not be empty'):
        GradientAccumulator([], 2)


def test_gradient_accumulator_gradient_count_mismatch():
    acc = GradientAccumulator([tf.Variable(1.), tf.Variable(2.)], 2)
    with raises(ValueError, '1 gradients given for 2 variables'):
        acc.apply(None, [tf.constant(1.)])


def test_evaluator_time_metric_name_not_a_name():
    with spt.TrainLoop(max_epoch=1) as loop:
        with raises(TypeError, '`time_metric_name` must be a metric name or None, got 3'):
            spt.Evaluator(loop, lambda x: {'valid_loss': x}, data_flow=[(1.,)],
                          time_metric_name=3)


@pytest.mark.parametrize('kwargs, error, message', [
    ({'flush_secs': 0}, ValueError, '`flush_secs` must be a positive number, got 0'),
    ({'max_queue': 1.5}, TypeError, '`max_queue` must be a positive int, got 1.5'),
], ids=['flush_secs', 'max_queue'])
def test_summary_writer_bad_options(tmp_path, kwargs, error, message):
    with raises(error, message):
        spt.SummaryWriter(str(tmp_path), **kwargs)
