"""Multi-task training under MirroredStrategy on two logical CPUs, and on one device.

A shared Keras trunk with one head per task, trained on a MultiTaskFlow
(tasks taken in turn), one ``strategy.run`` step per task; the loop prints
the per-task metrics (each task's summed loss share, reduced by sum) and
``MultiTaskMetrics`` combines the tasks' validation losses.  Reports the
printed lines and weights of the one-device and the two-replica runs, and of
a shuffled two-replica run interrupted mid-epoch and resumed beside an
uninterrupted one.  Argument: a scratch directory.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import tensorflow as tf
from _child import report, two_cpus

two_cpus()

import keras  # noqa: E402

import tfsnippet as spt  # noqa: E402
from tfsnippet.dataflows import DataFlow  # noqa: E402

root = sys.argv[1]
strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
GLOBAL_BATCH = 8
rng = np.random.RandomState(0)
X = {'up': rng.randn(32, 3).astype(np.float32), 'down': rng.randn(24, 3).astype(np.float32)}
Y = {'up': (X['up'] @ np.array([1., -2., .5], np.float32)).astype(np.float32),
     'down': (X['down'] @ np.array([.5, .5, -1.], np.float32) + 1.).astype(np.float32)}
INIT = np.full((3, 4), .1, np.float32)


def make_flow(shuffle=False):
    return DataFlow.tasks(
        {t: DataFlow.arrays([X[t], Y[t]], GLOBAL_BATCH, shuffle=shuffle, random_state=i + 1)
         for i, t in enumerate(('up', 'down'))},
        mode='alternate', epoch='longest')


class Job:
    """A trunk (3 -> 4) and a head (4 -> 1) per task, SGD, under `strat` (None: one device)."""

    def __init__(self, strat):
        self.strat = strat
        scope = strat if strat is not None else tf.distribute.get_strategy()
        with scope.scope():
            self.trunk = keras.layers.Dense(4, use_bias=False)
            self.heads = {t: keras.layers.Dense(1) for t in X}
            self.trunk.build((None, 3))
            for head in self.heads.values():
                head.build((None, 4))
            self.optimizer = keras.optimizers.SGD(0.05)
            self.variables = self.trunk.trainable_variables + [
                v for h in self.heads.values() for v in h.trainable_variables]
            self.optimizer.build(self.variables)
        self.trunk.kernel.assign(INIT)
        for i, head in enumerate(self.heads.values()):
            head.kernel.assign(np.full((4, 1), .2 * (i + 1), np.float32))
        self.steps = {t: tf.function(self._step_of(t)) for t in X}

    def _step_of(self, task):
        head = self.heads[task]
        variables = self.trunk.trainable_variables + head.trainable_variables

        def replica(x, y):
            with tf.GradientTape() as tape:
                err = head(self.trunk(x))[:, 0] - y
                loss = tf.reduce_sum(err * err) / GLOBAL_BATCH
            self.optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss

        def step(x, y):
            return replica(x, y) if self.strat is None else self.strat.run(replica, args=(x, y))
        return step

    def weights(self):
        return [v.numpy().ravel().tolist() for v in self.variables]

    def train(self, flow, max_epoch, interrupt_at=None, **kwargs):
        lines, seen = [], []
        tasks = spt.MultiTaskMetrics(flow)
        loop = spt.TrainLoop(self.variables, max_epoch=max_epoch, print_func=lines.append,
                             show_eta=False, strategy=self.strat, **kwargs)
        loop.add_component(tasks)
        with loop:
            for epoch in loop.iter_epochs():
                for step, batch in loop.iter_steps(flow):
                    (task, (x, y)), = batch.items()
                    first = x.values[0] if self.strat is not None else x
                    seen.append((task, float(np.asarray(first)[0, 0])))
                    loop.collect_metrics({f'{task}/loss': self.steps[task](x, y)},
                                         reduce='sum')
                    if step == interrupt_at:
                        raise KeyboardInterrupt()
                loop.collect_metrics({'up/valid_loss': 1. / epoch, 'down/valid_loss': 3.})
                loop.print_logs()
        return [line.split('; ', 2)[-1] for line in lines], seen, tasks.best


out: dict = {}
one = Job(None)
out['one_lines'], out['one_seen'], _ = one.train(make_flow(), 2)
out['one_weights'] = one.weights()
two = Job(strategy)
out['two_lines'], out['two_seen'], out['two_best'] = two.train(make_flow(), 2)
out['two_weights'] = two.weights()

full = Job(strategy)
_, out['full_seen'], _ = full.train(make_flow(shuffle=True), 3,
                                    checkpoint_dir=os.path.join(root, 'full'))
out['full_weights'] = full.weights()
cut = Job(strategy)
ckpt = os.path.join(root, 'cut')
try:
    cut.train(make_flow(shuffle=True), 3, interrupt_at=10, checkpoint_dir=ckpt,
              checkpoint_step_freq=3)
except KeyboardInterrupt:
    pass
again = Job(strategy)
out['resumed_lines'], out['resumed_seen'], _ = again.train(
    make_flow(shuffle=True), 3, checkpoint_dir=ckpt, checkpoint_step_freq=3)
out['resumed_weights'] = again.weights()
report(out)
