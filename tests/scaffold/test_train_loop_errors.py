"""Misuses of `TrainLoop`: one test each, with the exception type and its message.

The messages come from API.md sections 7 and 16; where the spec gives only
the rule, the test matches its distinctive part.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt

NOT_IN_LOOP = 'An epoch or a step loop is expected, but neither has been opened'


# ------------------------------------------------------------- iterations
def test_iter_steps_outside_an_epoch():
    with spt.TrainLoop(max_step=3) as loop:
        with pytest.raises(RuntimeError,
                           match=re.escape('Step loop must be opened within active epoch loop')):
            loop.iter_steps([1, 2])
        assert loop.step == 0


def test_iter_steps_nested():
    with spt.TrainLoop(max_epoch=1) as loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([1, 2]):
                with pytest.raises(RuntimeError,
                                   match=re.escape('Another step loop has been opened')):
                    loop.iter_steps([3])
        # the outer step loop was not disturbed
        assert loop.step == 2


def test_iter_epochs_nested():
    with spt.TrainLoop(max_epoch=2) as loop:
        for _ in loop.iter_epochs():
            with pytest.raises(RuntimeError,
                               match=re.escape('Another epoch loop has been opened')):
                loop.iter_epochs()
        assert loop.epoch == 2


def test_iter_epochs_outside_the_with_block():
    loop = spt.TrainLoop(max_epoch=1)
    with pytest.raises(RuntimeError,
                       match=re.escape(f'{loop!r} must be entered first: call this inside its `with` block')):
        loop.iter_epochs()


def test_iter_epochs_after_the_with_block():
    loop = spt.TrainLoop(max_epoch=1)
    with loop:
        pass
    with pytest.raises(RuntimeError,
                       match=re.escape(f'{loop!r} must be entered first: call this inside its `with` block')):
        loop.iter_epochs()


def test_iter_steps_without_data_or_max_step():
    with spt.TrainLoop(max_epoch=1) as loop:
        for _ in loop.iter_epochs():
            with pytest.raises(RuntimeError, match=re.escape(
                    '`data_generator` is required when `max_step` is not configured, so as '
                    'to prevent an unstoppable step loop')):
                loop.iter_steps()
            assert not loop.within_step


@pytest.mark.parametrize('data', [123, object()])
def test_data_generator_not_iterable(data):
    with spt.TrainLoop(max_epoch=1) as loop:
        for _ in loop.iter_epochs():
            with pytest.raises(TypeError, match=re.escape(
                    f'`data_generator` must be iterable, got {data!r}')):
                loop.iter_steps(data)
            # the failed call left no step loop open
            assert [s for s, _ in loop.iter_steps(['a'])] == [1]


# ----------------------------------------------- metrics outside any loop
def test_collect_metrics_outside_any_loop():
    with spt.TrainLoop() as loop:
        with pytest.raises(RuntimeError, match=re.escape(NOT_IN_LOOP)):
            loop.collect_metrics(loss=1.)


def test_timeit_outside_any_loop():
    ran = []
    with spt.TrainLoop() as loop:
        with pytest.raises(RuntimeError, match=re.escape(NOT_IN_LOOP)):
            with loop.timeit('eval_time'):
                ran.append(True)
    assert ran == []


def test_metric_collector_outside_any_loop():
    ran = []
    with spt.TrainLoop() as loop:
        with pytest.raises(RuntimeError, match=re.escape(NOT_IN_LOOP)):
            with loop.metric_collector('x'):
                ran.append(True)
    assert ran == []


def test_print_logs_outside_any_loop():
    lines = []
    with spt.TrainLoop(print_func=lines.append) as loop:
        with pytest.raises(RuntimeError, match=re.escape(NOT_IN_LOOP)):
            loop.print_logs()
    assert lines == []


def test_tagged_println_outside_any_loop():
    lines = []
    with spt.TrainLoop(print_func=lines.append) as loop:
        with pytest.raises(RuntimeError, match=re.escape(NOT_IN_LOOP)):
            loop.println('hello', with_tag=True)
    assert lines == []


# ------------------------------------------------------------ metric values
@pytest.mark.parametrize('metrics', [[('loss', 1.)], 'loss', 1.5])
def test_collect_metrics_with_a_non_dict(metrics):
    with spt.TrainLoop(max_epoch=1) as loop:
        for _ in loop.iter_epochs():
            with pytest.raises(TypeError, match=re.escape('`metrics` should be a dict')):
                loop.collect_metrics(metrics)


@pytest.mark.parametrize('value', ['abc', None, object(), np.array(['a', 'b']),
                                   tf.constant('text')])
def test_collect_metrics_with_a_non_numeric_value(value, fake_clock):
    lines = []
    with spt.TrainLoop(max_epoch=1, show_eta=False, print_func=lines.append,
                       clock=fake_clock) as loop:
        for _ in loop.iter_epochs():
            with pytest.raises(TypeError, match=re.escape('Metric `my_loss` must be a number')):
                loop.collect_metrics(my_loss=value)
            loop.print_logs()
    assert lines == ['[Step 0] epoch time: 0s']       # nothing was recorded


# -------------------------------------------------------------- the context
def test_second_with_after_exit():
    loop = spt.TrainLoop()
    with loop:
        pass
    with pytest.raises(RuntimeError, match=re.escape(
            f'A disposable context cannot be entered twice: {loop!r}.')):
        with loop:
            pass


def test_second_with_while_entered():
    exits = []
    loop = spt.TrainLoop(max_epoch=1)
    loop.events.on(spt.EventKeys.EXIT_LOOP, lambda lp: exits.append(lp.epoch))
    with loop:
        with pytest.raises(RuntimeError, match=re.escape(
                f'A disposable context cannot be entered twice: {loop!r}.')):
            with loop:
                pass
        # the failed entry did not leave the outer block
        assert exits == []
        assert list(loop.iter_epochs()) == [1]
    assert exits == [1]


def test_add_component_inside_an_epoch():
    loop = spt.TrainLoop(max_epoch=1)
    with loop:
        for _ in loop.iter_epochs():
            with pytest.raises(RuntimeError, match=re.escape(
                    'Components must be added outside of the epoch loop')):
                loop.add_component(spt.LoopComponent())


def test_add_component_after_the_loop_was_left():
    loop = spt.TrainLoop()
    with loop:
        pass
    with pytest.raises(RuntimeError, match=re.escape(
            'Components cannot be added to a loop that has been left')):
        loop.add_component(spt.LoopComponent())


def test_add_component_inside_the_with_block_enters_it_at_once():
    calls = []

    class Recorder(spt.LoopComponent):
        def on_enter(self, loop):
            calls.append(('enter', loop.within_epoch))

        def on_exit(self, loop, error):
            calls.append(('exit', error))

    with spt.TrainLoop() as loop:
        loop.add_component(Recorder())
        assert calls == [('enter', False)]
    assert calls == [('enter', False), ('exit', None)]


def test_add_component_that_is_not_a_component():
    loop = spt.TrainLoop()
    with pytest.raises(TypeError, match=re.escape('`component` must be a LoopComponent')):
        loop.add_component(object())


def test_print_training_summary_outside_the_loop():
    loop = spt.TrainLoop([tf.Variable(1.)], print_func=lambda s: None)
    with pytest.raises(RuntimeError,
                       match=re.escape(f'{loop!r} must be entered first: call this inside its `with` block')):
        loop.print_training_summary()


# ------------------------------------------------------------------ limits
@pytest.mark.parametrize('name', ['max_epoch', 'max_step'])
@pytest.mark.parametrize('value', [0, -1])
def test_non_positive_limit_in_the_constructor(name, value):
    with pytest.raises(ValueError, match=re.escape(
            f'`{name}` must be a positive int or None, got {value}')):
        spt.TrainLoop(**{name: value})


@pytest.mark.parametrize('name', ['max_epoch', 'max_step'])
def test_non_positive_limit_in_the_setter(name):
    loop = spt.TrainLoop(**{name: 5})
    with pytest.raises(ValueError, match=re.escape(
            f'`{name}` must be a positive int or None, got 0')):
        setattr(loop, name, 0)
    assert getattr(loop, name) == 5           # unchanged


@pytest.mark.parametrize('value', [1.5, '2', 2.0])
def test_non_int_max_epoch(value):
    with pytest.raises(TypeError, match=re.escape(
            f'`max_epoch` must be a positive int or None, got {value!r}')):
        spt.TrainLoop(max_epoch=value)


def test_non_int_max_step_in_the_setter():
    loop = spt.TrainLoop(max_step=3)
    with pytest.raises(TypeError, match=re.escape(
            "`max_step` must be a positive int or None, got '10'")):
        loop.max_step = '10'
    assert loop.max_step == 3


# -------------------------------------------------------------- param_vars
@pytest.mark.parametrize('make_value', [lambda: np.zeros([2]), lambda: tf.constant([1., 2.])],
                         ids=['numpy array', 'tf.constant'])
def test_param_vars_holding_a_non_variable(make_value):
    with pytest.raises(TypeError, match=re.escape(
            '`param_vars` must hold only variables (tf.Variable or keras.Variable), '
            'but item 1 is')):
        spt.TrainLoop([tf.Variable(1.), make_value()])


def test_param_vars_dict_holding_a_non_variable():
    with pytest.raises(TypeError, match=re.escape(
            "`param_vars` must hold only variables (tf.Variable or keras.Variable), "
            "but item 'w' is")):
        spt.TrainLoop({'b': tf.Variable(1.), 'w': np.ones([3])})


# -------------------------------------------------------------------- state
def test_load_state_dict_with_a_missing_key():
    loop = spt.TrainLoop()
    with pytest.raises(KeyError, match=re.escape("lacks the required keys ['best_valid_metric']")):
        loop.load_state_dict({'epoch': 1, 'step': 2})
    assert (loop.epoch, loop.step) == (0, 0)


def test_load_state_dict_inside_an_epoch():
    with spt.TrainLoop(max_epoch=1) as loop:
        for _ in loop.iter_epochs():
            with pytest.raises(RuntimeError, match=re.escape(
                    '`load_state_dict()` cannot be called while an epoch loop is open')):
                loop.load_state_dict({'epoch': 5, 'step': 9, 'best_valid_metric': None})
    assert (loop.epoch, loop.step) == (1, 0)
