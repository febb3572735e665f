"""A TrainLoop under MirroredStrategy on two logical CPUs, and the same job on one device.

Reports the printed lines and weights of both, an early-stopping run, an
interrupted-then-resumed run beside an uninterrupted one, and the errors of
bad input.  Argument: a scratch directory.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import tensorflow as tf
from _child import error_of, regression_replica_step, report, two_cpus

two_cpus()

import keras  # noqa: E402

import tfsnippet as spt  # noqa: E402
from tfsnippet.dataflows import DataFlow  # noqa: E402

root = sys.argv[1]
strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
GLOBAL_BATCH = 8
x = np.random.RandomState(0).randn(44, 3).astype(np.float32)
y = (x @ np.array([1., -2., .5], np.float32) + 0.3).astype(np.float32)
INIT = [np.full((3, 1), .1, np.float32), np.zeros(1, np.float32)]


class Job:
    """A linear model trained by SGD with momentum, under `strat` (None: one device)."""

    def __init__(self, strat, build=True):
        self.strat = strat
        scope = strat if strat is not None else tf.distribute.get_strategy()
        with scope.scope():
            self.model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
            self.optimizer = keras.optimizers.SGD(0.05, momentum=0.5)
        self.model.set_weights(INIT)
        if build:   # else the loop builds it: it is among `checkpoint_save_objects`
            with scope.scope():
                self.optimizer.build(self.model.trainable_variables)
        self.step = tf.function(self._step)

    def _replica(self, x, y):
        return regression_replica_step(self.model, self.optimizer, x, y, GLOBAL_BATCH)

    def _step(self, x, y):
        if self.strat is None:
            return self._replica(x, y)
        return self.strat.run(self._replica, args=(x, y))

    def weights(self):
        return [w.ravel().tolist() for w in self.model.get_weights()]

    def train(self, flow, max_epoch, interrupt_at=None, valid=None, **kwargs):
        lines, seen = [], []
        kwargs.setdefault('checkpoint_save_objects', {'optimizer': self.optimizer})
        if kwargs.get('checkpoint_dir') is None:
            kwargs.pop('checkpoint_save_objects')
        with spt.TrainLoop(self.model.trainable_variables, max_epoch=max_epoch,
                           print_func=lines.append, show_eta=False, strategy=self.strat,
                           **kwargs) as loop:
            self.built_on_enter = self.optimizer.built
            for epoch in loop.iter_epochs():
                for step, batch in loop.iter_steps(flow):
                    if self.strat is not None:
                        seen.append(np.concatenate(
                            [v.numpy()[:, 0] for v in batch[0].values]).tolist())
                    else:
                        seen.append(batch[0][:, 0].tolist())
                    loss, hits = self.step(*batch)
                    loop.collect_metrics(loss=loss, hits=hits, reduce={'loss': 'sum',
                                                                        'hits': 'sum'})
                    if step == interrupt_at:
                        raise KeyboardInterrupt()
                if valid is not None:
                    loop.collect_metrics(valid_loss=valid[epoch - 1])
                loop.print_logs()
        return loop, [line.split('; ', 2)[-1] for line in lines], seen


def flow(shuffle=False, skip_incomplete=False):
    return DataFlow.arrays([x, y], GLOBAL_BATCH, shuffle=shuffle, random_state=3,
                           skip_incomplete=skip_incomplete)


out: dict = {}
# ------------------------------------------------------------ same as one device
one = Job(None)
# a strategy drops the remainder of an epoch (4 rows), which one device keeps unless told
_, out['one_lines'], out['one_seen'] = one.train(
    flow(skip_incomplete=True), 2, summary_dir=os.path.join(root, 'one_summary'))
out['one_weights'] = one.weights()
two = Job(strategy)
loop, out['two_lines'], out['two_seen'] = two.train(
    flow(), 2, summary_dir=os.path.join(root, 'two_summary'))
out['two_weights'] = two.weights()
out['roles'] = [loop.is_chief, loop.backend.num_replicas, type(loop.backend.strategy).__name__]
out['optimizer_iterations'] = int(two.optimizer.iterations.numpy())

# ------------------------------------------------------------ early stopping
job = Job(strategy)
snapshots = []
with spt.TrainLoop(job.model.trainable_variables, max_epoch=3, early_stopping=True,
                   print_func=lambda line: None, strategy=strategy) as loop:
    for epoch in loop.iter_epochs():
        for _, batch in loop.iter_steps(flow()):
            job.step(*batch)
        snapshots.append(job.weights())
        loop.collect_metrics(valid_loss=[3., 1., 2.][epoch - 1])
out['es_snapshots'] = snapshots
out['es_final'] = job.weights()

# ------------------------------------------------------------ resume mid-epoch
full = Job(strategy, build=False)
_, out['full_lines'], out['full_seen'] = full.train(
    flow(shuffle=True), 3, checkpoint_dir=os.path.join(root, 'full'))
out['full_weights'] = full.weights()
out['built_by_the_loop'] = full.built_on_enter   # among checkpoint_save_objects, unbuilt
cut = Job(strategy, build=False)
ckpt = os.path.join(root, 'cut')
try:
    cut.train(flow(shuffle=True), 3, interrupt_at=8, checkpoint_dir=ckpt,
              checkpoint_step_freq=3)
except KeyboardInterrupt:
    pass
out['cut_weights_at_interrupt'] = cut.weights()
again = Job(strategy, build=False)
_, out['resumed_lines'], out['resumed_seen'] = again.train(
    flow(shuffle=True), 3, checkpoint_dir=ckpt, checkpoint_step_freq=3)
out['resumed_weights'] = again.weights()
out['resumed_iterations'] = int(again.optimizer.iterations.numpy())

# ------------------------------------------------------------ Trainer and Evaluator
job = Job(strategy)
lines = []


def evaluate(x, y):
    def replica(x, y):
        err = job.model(x)[:, 0] - y
        return tf.reduce_mean(err * err)
    return {'valid_loss': strategy.run(replica, args=(x, y))}


with spt.TrainLoop(job.model.trainable_variables, max_epoch=2, print_func=lines.append,
                   show_eta=False, strategy=strategy) as loop:
    trainer = spt.Trainer(loop, lambda x, y: {'loss': job.step(x, y)[0]},
                          data_flow=flow(skip_incomplete=True))
    evaluator = spt.Evaluator(loop, tf.function(evaluate), data_flow=flow(skip_incomplete=True)
                              .map(lambda x, y: spt.dataflows.split_batch(strategy, (x, y))),
                              time_metric_name=None, batch_weight_func=None)
    trainer.evaluate_after_epochs(evaluator, 1)
    trainer.log_after_epochs(1)
    trainer.run()
out['trainer_lines'] = [line.split('; ', 2)[-1] for line in lines]
out['trainer_weights'] = job.weights()
out['evaluator_result'] = evaluator.last_metrics_dict

# ------------------------------------------------------------ bad input
stray = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, name='stray_dense')])
out['err_outside'] = error_of(lambda: spt.TrainLoop(
    stray.trainable_variables, max_epoch=1, strategy=strategy).__enter__())


def too_small():
    with spt.TrainLoop(two.model.trainable_variables, max_epoch=1, strategy=strategy) as lp:
        for _ in lp.iter_epochs():
            for _ in lp.iter_steps(DataFlow.arrays([x[:6], y[:6]], GLOBAL_BATCH)):
                pass


def not_divisible():
    with spt.TrainLoop(two.model.trainable_variables, max_epoch=1, strategy=strategy) as lp:
        for _ in lp.iter_epochs():
            for _ in lp.iter_steps(DataFlow.arrays([x, y], 7)):
                pass


def per_replica_without_strategy():
    value = two.step(*spt.dataflows.split_batch(strategy, (x[:8], y[:8])))[0]
    with spt.TrainLoop(max_epoch=1, strategy=tf.distribute.get_strategy()) as lp:
        for _ in lp.iter_epochs():
            lp.collect_metrics(loss=value)


out['err_too_small'] = error_of(too_small)
out['err_not_divisible'] = error_of(not_divisible)
out['err_per_replica'] = error_of(per_replica_without_strategy)
report(out)
