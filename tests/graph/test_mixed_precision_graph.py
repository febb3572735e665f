"""MixedPrecision in TF1 graph code: a ``tf.compat.v1`` MixedPrecisionLossScaleOptimizer
(dynamic loss scale) with float16 math, run by ``session.run``; one injected
non-finite gradient: one skipped step, the scale halved, the guard silent, in
log lines and summaries.  A Keras 3 LossScaleOptimizer is refused in graph code.

The eager twins are in tests/scaffold/test_mixed_precision.py.
"""

import keras
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers.tensorboard import read_scalars

v1 = tf.compat.v1
INF = float('inf')


class Model:
    """``w`` in float32, the loss computed in float16; `boost` multiplies the
    loss the optimizer scales (``inf``: that step's gradients are not finite)."""

    def __init__(self, session, initial_scale=2. ** 8):
        self.session = session
        self.w = v1.get_variable('w', shape=[], initializer=v1.constant_initializer(.5))
        self.global_step = v1.train.get_or_create_global_step()
        self.boost = v1.placeholder(tf.float32, [])
        loss16 = tf.square(tf.cast(self.w, tf.float16))
        self.loss = tf.cast(loss16, tf.float32)
        self.optimizer = v1.mixed_precision.MixedPrecisionLossScaleOptimizer(
            v1.train.GradientDescentOptimizer(.1),
            v1.mixed_precision.DynamicLossScale(initial_loss_scale=initial_scale))
        self.train_op = self.optimizer.minimize(self.loss * self.boost,
                                                global_step=self.global_step)
        session.run(v1.global_variables_initializer())

    def step(self, boost=1.):
        _, loss = self.session.run([self.train_op, self.loss], {self.boost: boost})
        return loss


def test_one_non_finite_gradient_skips_one_step_halves_the_scale(session, tmp_path):
    model = Model(session)
    lines = []
    loop = spt.TrainLoop([model.w], max_epoch=2, print_func=lines.append, show_eta=False,
                         summary_dir=str(tmp_path))
    loop.add_component(spt.MixedPrecision(model.optimizer, iterations=model.global_step))
    loop.add_component(spt.LossGuard('loss'))
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(4)):
                loop.collect_metrics(loss=model.step(INF if step == 3 else 1.))
            loop.print_logs()
    epoch_lines = [line for line in lines if line.startswith('[Epoch')]
    assert len(epoch_lines) == 2
    assert all('loss scale: 128;' in line and 'skipped steps: 1' in line for line in epoch_lines)
    assert session.run(model.global_step) == 7
    scalars = read_scalars(tmp_path)
    assert scalars['metrics/loss_scale'] == [(4, 128.), (8, 128.)]
    assert scalars['metrics/skipped_steps'] == [(4, 1.), (8, 1.)]


def test_iterations_are_required_and_a_fixed_scale_refused(session):
    w = v1.get_variable('w', shape=[], initializer=v1.ones_initializer())
    dynamic = v1.mixed_precision.MixedPrecisionLossScaleOptimizer(
        v1.train.GradientDescentOptimizer(.1), 'dynamic')
    with pytest.raises(TypeError, match='`iterations` is required with a TF1 '
                                        'MixedPrecisionLossScaleOptimizer'):
        spt.MixedPrecision(dynamic)
    fixed = v1.mixed_precision.MixedPrecisionLossScaleOptimizer(
        v1.train.GradientDescentOptimizer(.1), 128.)
    with pytest.raises(ValueError, match='has a fixed loss scale'):
        spt.MixedPrecision(fixed, iterations=w)
    with pytest.raises(TypeError, match='`optimizer` must be a loss-scaled optimizer'):
        spt.MixedPrecision(v1.train.AdamOptimizer(.1))


def test_a_keras_loss_scale_optimizer_is_refused_in_graph_code(session):
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(.1))
    loop = spt.TrainLoop([], max_epoch=1, print_func=lambda line: None)
    loop.add_component(spt.MixedPrecision(optimizer))
    with pytest.raises(RuntimeError, match='A Keras 3 LossScaleOptimizer runs in eager code'):
        with loop:
            pass
