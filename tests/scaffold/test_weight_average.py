"""`WeightAverage`: an EMA of the weights, compared with a NumPy EMA of the values
the weights had after each step, in both TF styles (the ``style`` fixture).

The model is a vector ``w`` (3 values) that gains ``[1, 2, 3]`` per step, so its
value after step ``k`` is ``k * [1, 2, 3]`` and the expected average is computed
by hand from those values.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers import checkpoint_variable
from tests.helpers.loops import run_epochs
from tfsnippet.scaffold.checkpoint.store import CheckpointStore

DELTA = np.array([1., 2., 3.], np.float32)


def numpy_ema(steps, decay, start=0, warmup=False):
    """The EMA of ``k * DELTA`` for k = start+1..steps, started at ``start * DELTA``."""
    avg = start * DELTA
    for n, k in enumerate(range(start + 1, steps + 1)):
        d = min(decay, (1. + n) / (10. + n)) if warmup else decay
        avg = d * avg + (1. - d) * (k * DELTA)
    return avg


def make(style, **kwargs):
    w = style.variable(np.zeros(3), 'w')
    return w, style.updater(w, DELTA), spt.WeightAverage([w], **kwargs)


@pytest.mark.parametrize('warmup', [False, True], ids=['plain', 'warmup'])
def test_the_average_is_the_numpy_ema_of_the_recorded_weights(style, warmup):
    w, step, average = make(style, decay=0.9, warmup=warmup)
    loop = spt.TrainLoop([w], max_epoch=3, print_func=lambda s: None)
    loop.add_component(average)
    run_epochs(loop, lambda s: step(), steps_per_epoch=4)
    np.testing.assert_allclose(average.averages()[0], numpy_ema(12, 0.9, warmup=warmup),
                               rtol=1e-5)
    np.testing.assert_array_equal(style.value(w), 12 * DELTA)   # the live values stay


def test_swapped_puts_the_averages_in_and_the_live_values_back(style):
    w, step, average = make(style, decay=0.5)
    loop = spt.TrainLoop([w], max_epoch=1, print_func=lambda s: None)
    loop.add_component(average)
    run_epochs(loop, lambda s: step(), steps_per_epoch=3)
    with average.swapped():
        np.testing.assert_allclose(style.value(w), numpy_ema(3, 0.5), rtol=1e-6)
        assert average.is_swapped
    assert not average.is_swapped
    np.testing.assert_array_equal(style.value(w), 3 * DELTA)


def test_manual_update_inside_the_step(style):
    w = style.variable(np.zeros(3), 'w')
    average = spt.WeightAverage([w], decay=0.8, manual=True)
    if style.is_graph:
        op = average.update(after=w.assign_add(DELTA))
        step = lambda: style.session.run(op)
    else:
        @tf.function
        def fused():
            w.assign_add(DELTA)
            average.update()
        step = fused
    loop = spt.TrainLoop([w], max_epoch=2, print_func=lambda s: None)
    loop.add_component(average)
    run_epochs(loop, lambda s: step(), steps_per_epoch=3)
    np.testing.assert_allclose(average.averages()[0], numpy_ema(6, 0.8), rtol=1e-5)


def test_the_best_checkpoint_holds_the_averages_and_a_resume_goes_on(style, tmp_path):
    valid = {1: 0.5, 2: 0.2, 3: 0.4}

    def run(max_epoch):
        with style.new_run():
            w, step, average = make(style, decay=0.5, swap_at_epoch_end=True)
            seen = []
            loop = spt.TrainLoop([w], max_epoch=max_epoch, checkpoint_dir=str(tmp_path),
                                 checkpoint_epoch_freq=1, checkpoint_keep_best=True,
                                 print_func=lambda s: None)
            loop.add_component(average)
            loop.events.on(spt.EventKeys.AFTER_STEPS, lambda lp: seen.append(style.value(w)))
            run_epochs(loop, lambda s: step(), steps_per_epoch=2, valid=valid)
            return style.value(w), average.averages()[0], seen

    live, _, seen = run(2)
    np.testing.assert_array_equal(live, 4 * DELTA)   # the live values come back at the exit
    # the validation after each epoch's steps saw the averages
    np.testing.assert_allclose(seen[1], numpy_ema(4, 0.5), rtol=1e-6)
    path, record = CheckpointStore(os.path.join(str(tmp_path), 'checkpoint')).best()
    assert record['epoch'] == 2
    np.testing.assert_allclose(checkpoint_variable(path, 'w'), numpy_ema(4, 0.5), rtol=1e-6)
    # resumed: live weights from step 4, the averages go on from theirs
    live, avg, _ = run(3)
    np.testing.assert_array_equal(live, 6 * DELTA)
    np.testing.assert_allclose(avg, numpy_ema(6, 0.5), rtol=1e-5)


def test_finalize_leaves_the_averages_in_the_variables(style):
    w, step, average = make(style, decay=0.5, finalize=True)
    loop = spt.TrainLoop([w], max_epoch=1, print_func=lambda s: None)
    loop.add_component(average)
    run_epochs(loop, lambda s: step(), steps_per_epoch=2)
    np.testing.assert_allclose(style.value(w), numpy_ema(2, 0.5), rtol=1e-6)


def test_bad_arguments_name_themselves():
    v = tf.Variable(1.)
    with pytest.raises(ValueError, match='`decay`'):
        spt.WeightAverage([v], decay=1.)
    with pytest.raises(TypeError, match='`variables`'):
        spt.WeightAverage([1.])
    with pytest.raises(ValueError, match='`variables`'):
        spt.WeightAverage([])


def test_early_stopping_restores_the_averages_of_its_best_epoch(style):
    w, step, average = make(style, decay=0.5, swap_at_epoch_end=True)
    loop = spt.TrainLoop([w], max_epoch=3, early_stopping=True, print_func=lambda s: None)
    loop.add_component(average)
    run_epochs(loop, lambda s: step(), steps_per_epoch=2, valid={1: 0.5, 2: 0.2, 3: 0.4})
    # epoch 2 (step 4) was the best, validated with the averages in the variables
    np.testing.assert_allclose(style.value(w), numpy_ema(4, 0.5), rtol=1e-6)
