"""A run resumed inside a gradient-accumulation window goes on bitwise as if
never stopped, in both TF styles (one body, the ``style`` fixture)."""

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt

TARGETS = np.random.RandomState(7).normal(size=(9, 4)).astype(np.float32)
SCALE = np.arange(1., 5., dtype=np.float32)


class Job:
    """``w`` trained by momentum SGD on one target per step, the gradients of three
    steps averaged by a GradientAccumulator (a Keras optimizer in a ``tf.function``
    eagerly, a ``tf.compat.v1`` optimizer's op in graph style)."""

    def __init__(self, style):
        self.style = style
        self.w = style.variable(np.ones(4, np.float32), 'w')
        self.acc = spt.GradientAccumulator([self.w], num_batches=3)
        if style.is_graph:
            self.optimizer = tf.compat.v1.train.MomentumOptimizer(.1, .9)
            target = tf.compat.v1.placeholder(tf.float32, [4])
            loss = tf.reduce_sum((self.w - target) ** 2 * SCALE)
            op = self.acc.apply(self.optimizer, tf.gradients(loss, [self.w]))
            init = tf.compat.v1.global_variables_initializer()
            self.train = lambda t: style.session.run(op, feed_dict={target: t})
            self.reset = lambda: style.session.run(init)
        else:
            self.optimizer = tf.keras.optimizers.SGD(.1, momentum=.9)
            self.optimizer.build([self.w])

            @tf.function
            def step(t):
                with tf.GradientTape() as tape:
                    loss = tf.reduce_sum((self.w - t) ** 2 * SCALE)
                self.acc.apply(self.optimizer, tape.gradient(loss, [self.w]))

            every = [self.w, *self.optimizer.variables, *self.acc.variables]
            first = [v.numpy() for v in every]
            self.train = step
            self.reset = lambda: [v.assign(x) for v, x in zip(every, first)]
        self.reset()

    def run(self, max_step, checkpoint_dir=None):
        """Train up to step `max_step` (resuming from `checkpoint_dir` if it holds a
        checkpoint, saving one there at the end); return the weights."""
        options = {}
        if checkpoint_dir is not None:
            # graph style: the loop saves every global variable (the slots of the
            # v1 optimizer included); the accumulator is named all the same
            objects = {'accumulator': self.acc}
            if not self.style.is_graph:
                objects['optimizer'] = self.optimizer
            options = dict(checkpoint_dir=str(checkpoint_dir), checkpoint_save_objects=objects)
        with spt.TrainLoop([self.w], max_step=max_step, print_func=lambda line: None,
                           **options) as loop:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(2)):
                    self.train(TARGETS[step - 1])
        return self.style.value(self.w)


@pytest.mark.parametrize('stop_at', [4, 5])
def test_a_resume_inside_an_accumulation_window_is_exact(style, tmp_path, stop_at):
    job = Job(style)
    uninterrupted = job.run(max_step=9)

    job.reset()
    job.run(max_step=stop_at, checkpoint_dir=tmp_path)      # 1 or 2 batches of a window of 3
    assert style.value(job.acc.variables[-1]) == stop_at - 3
    job.reset()                                             # a new process: the sums are empty
    resumed = job.run(max_step=9, checkpoint_dir=tmp_path)

    np.testing.assert_array_equal(resumed, uninterrupted)
    assert not np.array_equal(uninterrupted, np.ones(4, np.float32))


def test_the_accumulator_checkpoints_only_its_own_variables(style):
    w = style.variable(np.zeros(3, np.float32), 'w')
    acc = spt.GradientAccumulator([w], num_batches=2)
    assert [v.shape for v in acc.variables] == [(3,), ()]
    assert all(id(v) != id(w) for v in acc.variables)
    assert isinstance(acc, tf.Module) and not acc.trainable_variables
