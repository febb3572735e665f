"""MixedPrecision: a Keras 3 LossScaleOptimizer watched by the loop, on CPU with the
``mixed_float16`` policy: the loss scale and the skipped steps in log lines,
summaries and sinks, read at print time; the loss guard and a skipped step's
scaled loss; the falling-scale warning; bad input.

The TF1 graph twin (a ``tf.compat.v1`` MixedPrecisionLossScaleOptimizer run by
``session.run``) is tests/graph/test_mixed_precision_graph.py.
"""

import math
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers.tensorboard import read_scalars

INF = float('inf')


@pytest.fixture
def mixed_float16():
    keras.mixed_precision.set_global_policy('mixed_float16')
    try:
        yield
    finally:
        keras.mixed_precision.set_global_policy('float32')


class Model:
    """A float16 Dense layer and a float32 head; `boost` multiplies the scaled
    loss (``inf`` makes that step's gradients non-finite, the loss staying finite)."""

    def __init__(self, initial_scale=2. ** 8):
        keras.utils.set_random_seed(1)
        self.net = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3),
                                     keras.layers.Dense(1, dtype='float32')])
        assert self.net.layers[0].compute_dtype == 'float16'
        self.optimizer = keras.optimizers.LossScaleOptimizer(
            keras.optimizers.SGD(0.01), initial_scale=initial_scale)
        self.boost = tf.Variable(1.)
        self.x = np.ones((8, 4), np.float32)
        self.y = np.zeros((8, 1), np.float32)

        @tf.function
        def step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(self.net(x) - y))
                scaled = self.optimizer.scale_loss(loss) * self.boost
            grads = tape.gradient(scaled, self.net.trainable_variables)
            self.optimizer.apply(grads, self.net.trainable_variables)
            return loss, scaled

        self._step = step

    def step(self, boost=1.):
        self.boost.assign(boost)
        return self._step(self.x, self.y)


class ListSink(spt.MetricSink):
    def __init__(self):
        self.stats = []

    def write_stats(self, scope, step, epoch, stats):
        self.stats.append((scope, step, {k: v['mean'] for k, v in stats.items()}))


def train(loop, model, bad_steps=(), epochs_lines=True, step_lines=False, unscaled=None):
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(4)):
                loss, scaled = model.step(INF if step in bad_steps else 1.)
                if unscaled is not None:
                    loss = unscaled(step, loss)
                loop.collect_metrics(loss=loss, scaled_loss=scaled)
                if step_lines:
                    loop.print_logs()
            if epochs_lines:
                loop.print_logs()


def test_one_non_finite_gradient_skips_one_step_halves_the_scale_guard_silent(
        mixed_float16, tmp_path):
    model = Model()
    lines, sink = [], ListSink()
    loop = spt.TrainLoop(model.net.trainable_variables, max_epoch=2, print_func=lines.append,
                         show_eta=False, summary_dir=str(tmp_path))
    loop.add_component(spt.MixedPrecision(model.optimizer, scaled_loss='scaled_loss'))
    loop.add_component(spt.LossGuard('scaled_loss'))
    loop.add_component(spt.LossGuard('loss'))
    loop.add_component(spt.scaffold.components.run_recorder.MetricRecorder(sink))
    with warnings.catch_warnings():
        warnings.simplefilter('error')   # no notice: the scale fell once only
        train(loop, model, bad_steps=(3,))

    # the log lines: the scale halved (256 -> 128), one skipped step
    epoch_lines = [line for line in lines if line.startswith('[Epoch')]
    assert len(epoch_lines) == 2
    for line in epoch_lines:
        assert 'loss scale: 128;' in line and 'skipped steps: 1' in line, line
    assert model.optimizer.iterations.numpy() == 7   # 8 steps, one skipped
    assert float(model.optimizer.dynamic_scale.numpy()) == 128.

    # the summaries, read back from the event files
    scalars = read_scalars(tmp_path)
    assert scalars['metrics/loss_scale'] == [(4, 128.), (8, 128.)]
    assert scalars['metrics/skipped_steps'] == [(4, 1.), (8, 1.)]
    assert any(math.isinf(v) for _, v in scalars['metrics/scaled_loss'])

    # every sink: the epoch statistics carry them
    epochs = [s for scope, _, s in sink.stats if scope == 'epoch']
    assert [(s['loss_scale'], s['skipped_steps']) for s in epochs] == [(128., 1.), (128., 1.)]


def test_values_are_read_at_print_time_only(mixed_float16):
    model = Model()
    mp = spt.MixedPrecision(model.optimizer)
    loop = spt.TrainLoop([], max_epoch=1, print_func=lambda line: None)
    loop.add_component(mp)
    reads = []
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(6)):
                model.step(INF if step == 2 else 1.)
                reads.append(mp.loss_scale)
            loop.print_logs()
    assert reads == [None] * 6   # nothing read while the steps ran
    assert (mp.loss_scale, mp.skipped_steps) == (128., 1)


def test_step_lines_each_read_once_and_the_skip_shows_where_it_happened(mixed_float16):
    model = Model()
    lines = []
    loop = spt.TrainLoop([], max_epoch=1, print_func=lines.append, show_eta=False)
    loop.add_component(spt.MixedPrecision(model.optimizer))
    train(loop, model, bad_steps=(2,), step_lines=True, epochs_lines=False)
    step_lines = [line for line in lines if 'loss scale' in line]
    assert [('loss scale: 256;' in s, 'skipped steps: 0' in s) for s in step_lines[:1]] == \
        [(True, True)]
    assert all('loss scale: 128;' in s and 'skipped steps: 1' in s for s in step_lines[1:])
    assert len(step_lines) == 4


def test_the_guard_still_trips_on_a_non_finite_unscaled_loss(mixed_float16):
    model = Model()
    loop = spt.TrainLoop([], max_epoch=1, print_func=lambda line: None)
    loop.add_component(spt.MixedPrecision(model.optimizer, scaled_loss='scaled_loss'))
    loop.add_component(spt.LossGuard('loss'))
    with pytest.raises(spt.LossGuardError, match=r'`loss` is inf at epoch 1, step 2'):
        train(loop, model, unscaled=lambda step, loss: INF if step == 2 else loss)


def test_without_mixed_precision_a_non_finite_scaled_loss_trips_the_guard(mixed_float16):
    model = Model()
    loop = spt.TrainLoop([], max_epoch=1, print_func=lambda line: None)
    loop.add_component(spt.LossGuard('scaled_loss'))
    with pytest.raises(spt.LossGuardError, match='`scaled_loss` is inf'):
        train(loop, model, bad_steps=(3,))


def test_a_scale_that_keeps_falling_is_said_once(mixed_float16):
    model = Model()
    lines = []
    loop = spt.TrainLoop([], max_epoch=2, print_func=lines.append, show_eta=False)
    loop.add_component(spt.MixedPrecision(model.optimizer, warn_after=3))
    with pytest.warns(UserWarning, match=r'`loss_scale` fell at each of the last 3 log lines, '
                                         r'to 32, and 3 steps were skipped') as record:
        train(loop, model, bad_steps=(2, 3, 4, 5, 6, 7, 8), step_lines=True,
              epochs_lines=False)
    assert len([w for w in record if 'fell at each' in str(w.message)]) == 1
    assert sum('may never train' in line for line in lines) == 1


def test_skipped_steps_resume_with_the_loop(mixed_float16, tmp_path):
    model = Model()
    for max_epoch, bad in ((1, (2,)), (2, ())):
        lines = []
        loop = spt.TrainLoop(model.net.trainable_variables, max_epoch=max_epoch,
                             print_func=lines.append, show_eta=False,
                             checkpoint_dir=str(tmp_path), checkpoint_epoch_freq=1)
        loop.add_component(spt.MixedPrecision(model.optimizer))
        train(loop, model, bad_steps=bad)
    # the second run resumed at epoch 2: its line counts the skip of epoch 1
    assert [line for line in lines if line.startswith('[Epoch 2/2')][0].count(
        'skipped steps: 1') == 1


def test_bad_input_names_the_argument(mixed_float16):
    plain = keras.optimizers.Adam(0.01)
    with pytest.raises(TypeError, match=r'`optimizer` must be a loss-scaled optimizer: a '
                                        r'Keras keras.optimizers.LossScaleOptimizer \(wrap '
                                        r'yours.*got type Adam'):
        spt.MixedPrecision(plain)
    opt = keras.optimizers.LossScaleOptimizer(plain)
    with pytest.raises(TypeError, match='`scaled_loss` must be a metric name'):
        spt.MixedPrecision(opt, scaled_loss=3)
    with pytest.raises(ValueError, match='`warn_after`'):
        spt.MixedPrecision(opt, warn_after=0)
    with pytest.raises(TypeError, match='`optimizer`'):
        spt.MixedPrecision(tf.compat.v1.train.GradientDescentOptimizer(0.1))
