"""`LearningRateFinder`: the sweep runs the user's step on the first batches, then the
weights, a counter (an optimizer's slot stand-in), the rate and the data flow's
position are put back bitwise, so the training after it equals one without it
(both TF styles).  The model is a vector ``w`` pulled towards each batch's mean by
``w -= lr * 2 * (w - mean(x))``; the loss is ``mean((w - x) ** 2)`` before the update.
"""

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt

X = np.linspace(-1., 3., 24).astype(np.float32)


def build(style):
    """`w`, the counter `n`, the rate `lr` and the step (a callable of a batch)."""
    w = style.variable(np.full(3, 5.), 'w')
    n = style.variable(0., 'n')
    lr = style.variable(0.1, 'lr')

    def fn(x):
        wv = w.read_value()
        loss = tf.reduce_mean((wv[:, None] - x[None, :]) ** 2)
        with tf.control_dependencies([loss]):
            ops = [w.assign_sub(lr * 2. * (wv - tf.reduce_mean(x))), n.assign_add(1.)]
        with tf.control_dependencies(ops):
            return tf.identity(loss)
    return w, n, lr, style.fed(fn, [None])


def train(style, finder_kwargs=None):
    """Train 2 epochs of 3 steps on a shuffled flow; return the values of `w` after each
    step, the final values, the finder and the loop."""
    with style.new_run():
        w, n, lr, step = build(style)
        flow = spt.DataFlow.arrays([X], 4, shuffle=True, random_state=3)
        loop = spt.TrainLoop([w], max_epoch=2, print_func=lambda s: None)
        finder = None
        if finder_kwargs is not None:
            finder = spt.LearningRateFinder(lr, step=step, data=flow, variables=[w, n],
                                            **finder_kwargs)
            loop.add_component(finder)
        seen = []
        with loop:
            for _ in loop.iter_epochs():
                for _, (x,) in loop.iter_steps(flow):
                    loop.collect_metrics(loss=step(x))
                    seen.append(style.value(w).copy())
        return seen, [style.value(v) for v in (w, n, lr)], finder, loop


def test_the_training_after_the_sweep_equals_one_without_it(style):
    plain, plain_final, _, plain_loop = train(style)
    seen, final, finder, loop = train(style, dict(min_lr=1e-3, max_lr=2., steps=5))
    assert len(seen) == len(plain) == 12 and loop.step == plain_loop.step == 12
    for a, b in zip(seen, plain):
        assert a.tobytes() == b.tobytes()
    for a, b in zip(final, plain_final):
        assert np.asarray(a).tobytes() == np.asarray(b).tobytes()
    assert len(finder.rates) == 5 and finder.rates[0] == pytest.approx(1e-3)
    assert finder.rates[-1] == pytest.approx(2.)
    assert finder.suggestion in finder.rates
    assert loop.results['lr_finder_suggestion'] == pytest.approx(finder.suggestion)


def test_apply_sets_the_suggested_rate(style):
    _, final, finder, _ = train(style, dict(min_lr=1e-3, max_lr=0.5, steps=4, apply=True,
                                            mode='linear'))
    assert finder.rates == pytest.approx([1e-3, 1e-3 + 0.499 / 3, 1e-3 + 2 * 0.499 / 3, 0.5])
    assert final[2] == pytest.approx(finder.suggestion)


def test_the_suggestion_is_the_steepest_descent_of_the_smoothed_loss():
    finder = spt.LearningRateFinder(tf.Variable(0.1), 1e-4, 1., steps=5, step=lambda x: 0.,
                                    data=[1])
    finder.rates = [1e-4, 1e-3, 1e-2, 1e-1, 1.]
    # np.gradient against log(rate): the central differences are steepest at 1e-2
    finder.smoothed = [2.0, 1.98, 1.9, 1.0, 0.98]
    assert finder.suggest() == 1e-2
    finder.smoothed = [3.0, 2.9, 2.85, 2.8, 1.0]   # the last point's one-sided difference
    assert finder.suggest() == 1.
    finder.smoothed = [3.0, float('nan'), 2.0]      # fewer than 3 finite points
    assert finder.suggest() is None


def test_bad_arguments_name_themselves():
    lr = tf.Variable(0.1)
    with pytest.raises(TypeError, match='`target`'):
        spt.LearningRateFinder(0.1, step=lambda x: 0., data=[1])
    with pytest.raises(ValueError, match='`max_lr`'):
        spt.LearningRateFinder(lr, 1e-2, 1e-3, step=lambda x: 0., data=[1])
    with pytest.raises(ValueError, match='`mode`'):
        spt.LearningRateFinder(lr, mode='cosine', step=lambda x: 0., data=[1])
    with pytest.raises(TypeError, match='`step`'):
        spt.LearningRateFinder(lr, data=[1])
