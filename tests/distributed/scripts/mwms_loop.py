"""One worker of a 2-worker MultiWorkerMirroredStrategy job running TrainLoops: report.

Argument: a directory the workers share.  Scenarios, one after the other:
``stats`` (the job of ``mirrored_loop.py``'s one-device run, printed with the
builtin ``print``, checkpoints and summaries on), ``stop`` (a stop requested
on worker 1 only; early stopping on a validation metric that differs per
worker), ``full`` / ``cut`` / ``resumed`` (an uninterrupted run, one
interrupted mid-epoch on both workers, and its resumption), ``counted``
(the collectives of each epoch), ``stop_before_print`` /
``stop_after_print`` (a stop asked on worker 1 around an epoch's print).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys

import numpy as np
import tensorflow as tf
from _child import regression_replica_step, report

strategy = tf.distribute.MultiWorkerMirroredStrategy()

import keras  # noqa: E402

import tfsnippet as spt  # noqa: E402
from tfsnippet.dataflows import DataFlow  # noqa: E402
from tfsnippet.scaffold.checkpoint.store import CheckpointStore  # noqa: E402
from tfsnippet.scaffold.components.checkpointer import Checkpointer  # noqa: E402

root = sys.argv[1]
GLOBAL_BATCH = 8
x = np.random.RandomState(0).randn(44, 3).astype(np.float32)
y = (x @ np.array([1., -2., .5], np.float32) + 0.3).astype(np.float32)
INIT = [np.full((3, 1), .1, np.float32), np.zeros(1, np.float32)]

# count the checkpoint writes of this worker
writes = [0]
_save = CheckpointStore.save


def counting_save(self, step, write, **kwargs):
    writes[0] += 1
    return _save(self, step, write, **kwargs)


CheckpointStore.save = counting_save
# the steps at which this worker took part in a save (wrote it, or read for it)
save_steps = []
_checkpointer_save = Checkpointer.save


def recording_save(self, loop, **kwargs):
    save_steps.append(loop.step)
    return _checkpointer_save(self, loop, **kwargs)


Checkpointer.save = recording_save


class Job:
    """A linear model trained by SGD with momentum (the optimizer is built by the loop)."""

    def __init__(self):
        with strategy.scope():
            self.model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
            self.optimizer = keras.optimizers.SGD(0.05, momentum=0.5)
        self.model.set_weights(INIT)
        self.step = tf.function(self._step)

    def _replica(self, x, y):
        return regression_replica_step(self.model, self.optimizer, x, y, GLOBAL_BATCH)

    def _step(self, x, y):
        return strategy.run(self._replica, args=(x, y))

    def weights(self):
        return [w.ravel().tolist() for w in self.model.get_weights()]

    def train(self, name, max_epoch, shuffle=False, interrupt_at=None, stop_at=None,
              valid=None, signal_at=None, tick=None, sync_steps=2, stop_before_print=None,
              stop_after_print=None, counts=None, **kwargs):
        flow = DataFlow.arrays([x, y], GLOBAL_BATCH, shuffle=shuffle, random_state=3)
        seen = []
        with spt.TrainLoop(self.model.trainable_variables, max_epoch=max_epoch, show_eta=False,
                           checkpoint_dir=os.path.join(root, name),
                           checkpoint_save_objects={'optimizer': self.optimizer},
                           strategy=strategy, **kwargs) as loop:
            loop.distribution.sync_steps = sync_steps
            me = loop.backend.worker_index
            for epoch in loop.iter_epochs():
                if counts is not None:
                    counts.append(loop.backend.collectives)
                for step, batch in loop.iter_steps(flow):
                    seen.append(batch[0].values[0].numpy()[:, 0].tolist())
                    loss, hits = self.step(*batch)
                    loop.collect_metrics(loss=loss, hits=hits, reduce='sum')
                    if step == stop_at and me == 1:
                        loop.request_stop('asked on worker 1')
                    if step == interrupt_at:
                        raise KeyboardInterrupt()
                    if step == signal_at and me == 1:
                        os.kill(os.getpid(), signal.SIGTERM)
                    if tick is not None:
                        tick()
                if valid is not None:
                    loop.collect_metrics(valid_loss=valid[epoch - 1] + 0.25 * me)
                if epoch == stop_before_print and me == 1:
                    loop.request_stop('asked before the print')
                loop.print_logs()
                if epoch == stop_after_print and me == 1:
                    loop.request_stop('asked after the print')
            if counts is not None:
                counts.append(loop.backend.collectives)
        return loop, seen


out: dict = {'pid': os.getpid()}
job = Job()
loop, _ = job.train('stats', 2, summary_dir=os.path.join(root, 'summary'))
out['roles'] = [loop.is_chief, loop.backend.num_workers, loop.backend.worker_index,
                loop.backend.num_replicas]
out['stats_weights'] = job.weights()
out['stats_writes'] = writes[0]

job = Job()
lines = []
loop, _ = job.train('stop', 4, stop_at=7, valid=[3., 1., 2., 0.5], early_stopping=True,
                    print_func=lines.append)
out['stop'] = [loop.step, loop.stop_reason, loop.best_valid_metric]
out['stop_lines'] = lines
out['stop_weights'] = job.weights()

job = Job()
_, out['full_seen'] = job.train('full', 3, shuffle=True)
out['full_weights'] = job.weights()
job = Job()
try:
    job.train('cut', 3, shuffle=True, interrupt_at=8, checkpoint_step_freq=3)
except KeyboardInterrupt:
    pass
job = Job()
_, out['resumed_seen'] = job.train('cut', 3, shuffle=True, checkpoint_step_freq=3)
out['resumed_weights'] = job.weights()
out['writes'] = writes[0]

# the collectives of each epoch (the metric names are known from the loops above), with the
# default sync_steps (5 steps an epoch) and with a sync point every 2 steps
for name, sync_steps in (('counted', 100), ('counted2', 2)):
    counts = []
    Job().train(name, 3, sync_steps=sync_steps, counts=counts)
    out[name] = np.diff(counts).tolist()

# a stop asked on worker 1 before the print of epoch 2: both stop at its end; one
# asked after the print of epoch 1 waits for the end of epoch 2 (the next sync point)
for name in ('stop_before_print', 'stop_after_print'):
    counts = []
    loop, _ = Job().train(name, 4, sync_steps=100, counts=counts,
                          **{name: 2 if name == 'stop_before_print' else 1})
    out[name] = [loop.epoch, loop.step, loop.stop_reason, np.diff(counts).tolist()]

# a loss guard and reduce-on-plateau on a validation metric that differs per worker
job = Job()
guard = spt.LossGuard('valid_loss', threshold=1.4, action='stop')
plateau = spt.ReduceOnPlateau(job.optimizer.learning_rate, factor=0.5, patience=1)
loop = spt.TrainLoop(job.model.trainable_variables, max_epoch=3, strategy=strategy,
                     print_func=lambda line: None)
loop.add_component(guard)
loop.add_component(plateau)
with loop:
    for epoch in loop.iter_epochs():
        flow = DataFlow.arrays([x, y], GLOBAL_BATCH)
        for _, batch in loop.iter_steps(flow):
            job.step(*batch)
        loop.collect_metrics(valid_loss=[1.0, 1.2, 1.4][epoch - 1] + 0.5 * out['roles'][2])
out['decided'] = [loop.epoch, loop.step, loop.stop_reason,
                  float(np.asarray(job.optimizer.learning_rate))]

# a clock of each worker's own pace: checkpoint_secs reads the chief's, agreed every 2 steps
now = [0.]


def tick():
    now[0] += 4. if out['roles'][2] == 0 else 7.


del save_steps[:]
job = Job()
job.train('timed', 2, checkpoint_secs=10., clock=lambda: now[0], tick=tick)
out['timed_save_steps'] = list(save_steps)

# a worker that sees another checkpoint than the chief: refused on both, no hang
me = out['roles'][2]
if me == 1:
    shutil.copytree(os.path.join(root, 'cut'), os.path.join(root, 'mismatch-1'))
try:
    Job().train(f'mismatch-{me}', 3)
except RuntimeError as e:
    out['err_mismatch'] = str(e)

# SIGTERM to worker 1 only: both save at the next sync point and exit
del save_steps[:]
job = Job()
try:
    job.train('preempt', 3, signal_at=3)
except SystemExit as e:
    out['preempted'] = [type(e).__name__, e.code, list(save_steps)]
report(out)
