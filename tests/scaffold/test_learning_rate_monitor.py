"""The current learning rate in the log lines and summaries (``spt.LearningRateMonitor``),
and the global norm of the gradients from ``spt.clip_gradients(..., return_norm=True)``.

The tests taking ``style`` run in both TF styles with one body.
"""

import re

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers import read_scalars


def lr_of(line):
    found = re.search(r'\blr: ([0-9.e-]+)', line)
    return None if found is None else float(found.group(1))


def train(loop, steps_per_epoch, step=lambda: None, after_epoch=lambda: None, print_logs=True):
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(steps_per_epoch)):
                step()
            if print_logs:
                loop.print_logs()
            after_epoch()


# ----------------------------------------------------------------- the monitor
def test_a_variable_s_rate_reaches_the_epoch_lines_and_summaries(style, tmp_path):
    lr = style.variable(.5, 'lr')
    lower = style.updater(lr, -.125)
    lines = []
    loop = spt.TrainLoop(max_epoch=3, summary_dir=str(tmp_path), print_func=lines.append,
                         show_eta=False)
    loop.add_component(spt.LearningRateMonitor(lr))
    train(loop, 2, after_epoch=lower)
    epoch_lines = [line for line in lines if line.startswith('[Epoch')]
    assert [lr_of(line) for line in epoch_lines] == [.5, .375, .25]
    assert read_scalars(tmp_path, 'metrics/lr') == [(2, .5), (4, .375), (6, .25)]


def test_a_scheduled_variable_is_read_by_its_variable(style):
    lr = spt.AnnealingVariable('lr', .5, ratio=.5)
    if style.is_graph:
        style.session.run(lr.variable.initializer)
    lines = []
    loop = spt.TrainLoop(max_epoch=2, print_func=lines.append, show_eta=False)
    loop.add_component(spt.LearningRateMonitor(lr, name='learning_rate'))
    train(loop, 1, after_epoch=lr.anneal)
    assert [line.split('learning rate: ')[1] for line in lines if 'learning rate' in line] == \
        ['0.5', '0.25']


def test_a_schedule_alone_is_evaluated_at_the_loop_s_step(style):
    schedule = keras.optimizers.schedules.PiecewiseConstantDecay([2, 4], [.1, .01, .001])
    lines = []
    loop = spt.TrainLoop(max_step=6, print_func=lines.append, show_eta=False)
    loop.add_component(spt.LearningRateMonitor(schedule))
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(6)):
                if step % 2 == 1:
                    loop.print_logs()   # step lines, at steps 1, 3 and 5
    assert [lr_of(line) for line in lines if lr_of(line) is not None] == [.1, .01, .001]


def test_a_keras_optimizer_s_schedule_is_evaluated_at_its_iterations():
    schedule = keras.optimizers.schedules.ExponentialDecay(.1, decay_steps=1, decay_rate=.5)
    optimizer = keras.optimizers.SGD(schedule)
    w = tf.Variable([1.])
    optimizer.build([w])
    apply = tf.function(lambda: optimizer.apply_gradients([(tf.constant([1.]), w)]))
    lines = []
    loop = spt.TrainLoop(max_epoch=2, print_func=lines.append, show_eta=False)
    monitor = spt.LearningRateMonitor(optimizer)
    loop.add_component(monitor)
    train(loop, 2, step=apply)
    # 2 updates, then 4: the rate of the next update
    assert [lr_of(line) for line in lines if lr_of(line) is not None] == [.025, .00625]
    assert monitor.learning_rate == pytest.approx(.00625)


def test_a_keras_optimizer_s_plain_rate_follows_its_changes():
    optimizer = keras.optimizers.Adam(1e-3)
    optimizer.build([tf.Variable([1.])])
    lines = []
    loop = spt.TrainLoop(max_epoch=2, print_func=lines.append, show_eta=False)
    loop.add_component(spt.LearningRateMonitor(optimizer))

    def halve():
        optimizer.learning_rate = float(optimizer.learning_rate) / 2

    train(loop, 1, after_epoch=halve)
    assert [lr_of(line) for line in lines if lr_of(line) is not None] == [1e-3, 5e-4]


def test_read_once_per_line_and_once_per_unprinted_epoch_never_per_step(style, tmp_path):
    readings = []

    def rate():
        readings.append(loop.step)
        return .125

    loop = spt.TrainLoop(max_epoch=3, summary_dir=str(tmp_path), print_func=lambda line: None)
    loop.add_component(spt.LearningRateMonitor(rate))

    def step():
        if loop.step == 2:
            loop.print_logs()   # a step line in epoch 1 only

    train(loop, 4, step=step, print_logs=False)
    # epoch 1: its step line; epochs 2 and 3 print none: read when they end
    assert readings == [2, 8, 12]
    assert read_scalars(tmp_path, 'metrics/lr') == [(2, .125), (8, .125), (12, .125)]


def test_a_tensor_is_a_source_in_graph_style_only(style):
    lr = style.variable(.25, 'lr')
    if not style.is_graph:
        with pytest.raises(TypeError, match=r'^`source` must be a Keras optimizer, a variable, '
                                            r'.* got <EagerTensor shape=\(\) dtype=float32>$'):
            spt.LearningRateMonitor(lr * 2.)
        return
    lines = []
    loop = spt.TrainLoop(max_epoch=1, print_func=lines.append, show_eta=False)
    loop.add_component(spt.LearningRateMonitor(lr * 2.))
    train(loop, 1)
    assert lr_of(lines[0]) == .5


def test_bad_sources_are_refused_naming_the_argument(style):
    with pytest.raises(TypeError, match=r"^`source` must be a Keras optimizer, a variable, a "
                                        r"ScheduledVariable, a LearningRateSchedule, a scalar "
                                        r"tensor \(graph style\) or a callable returning the "
                                        r"rate, got 'lr'$"):
        spt.LearningRateMonitor('lr')
    v1_optimizer = tf.compat.v1.train.GradientDescentOptimizer(.1)
    with pytest.raises(TypeError, match=r'got <tensorflow.*GradientDescentOptimizer.*: give the '
                                        r'variable or tensor it was given as `learning_rate`$'):
        spt.LearningRateMonitor(v1_optimizer)
    with pytest.raises(TypeError, match=r"^`name` must be a non-empty str, got ''$"):
        spt.LearningRateMonitor(lambda: .1, name='')


# ----------------------------------------------------------------- clip_gradients
def test_clip_gradients_returns_the_global_norm_on_request(style):
    grads = [tf.constant([3., 4.]), None, tf.constant([0., 12.])]     # global norm 13
    clipped, norm = spt.clip_gradients(grads, clip_norm=6.5, return_norm=True)
    assert style.value(norm) == pytest.approx(13.)
    np.testing.assert_allclose(style.value(clipped[0]), [1.5, 2.])
    assert clipped[1] is None
    # the norm before clipping by value, too
    clipped, norm = spt.clip_gradients(grads, clip_value=3.5, return_norm=True)
    assert style.value(norm) == pytest.approx(13.)
    np.testing.assert_allclose(style.value(clipped[2]), [0., 3.5])
    # the norm alone: the gradients unchanged
    same, norm = spt.clip_gradients(grads, return_norm=True)
    assert style.value(norm) == pytest.approx(13.) and same[0] is grads[0]
    # the classic call still returns the list
    assert isinstance(spt.clip_gradients(grads, clip_norm=1.), list)


def test_clip_gradients_return_norm_must_be_a_bool():
    with pytest.raises(TypeError, match=r"^`return_norm` must be True or False, got 'yes'$"):
        spt.clip_gradients([tf.ones(2)], clip_norm=1., return_norm='yes')
