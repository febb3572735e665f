"""One worker of a 2-worker MultiWorkerMirroredStrategy job running a TrainLoop: report.

Argument: a directory shared by the workers (checkpoints, summaries,
printed lines) and a mode, ``train`` (2 epochs, a stop requested on worker
1 only), ``resume`` (interrupted mid-epoch, then resumed).
"""

from __future__ import annotations

import os
import sys

import numpy as np
import tensorflow as tf
from _child import report

strategy = tf.distribute.MultiWorkerMirroredStrategy()

import keras  # noqa: E402

import tfsnippet as spt  # noqa: E402
from tfsnippet.dataflows import DataFlow  # noqa: E402

root, mode = sys.argv[1], sys.argv[2]
GLOBAL_BATCH = 8
x = np.random.RandomState(0).randn(44, 3).astype(np.float32)
y = (x @ np.array([1., -2., .5], np.float32) + 0.3).astype(np.float32)

with strategy.scope():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.05)
model.set_weights([np.full((3, 1), .1, np.float32), np.zeros(1, np.float32)])


def replica_step(x, y):
    with tf.GradientTape() as tape:
        err = model(x)[:, 0] - y
        loss = tf.reduce_sum(err * err) / GLOBAL_BATCH
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


@tf.function
def train_step(x, y):
    return strategy.run(replica_step, args=(x, y))


def train(max_epoch, stop_at=None, stop_worker=None, sync_steps=2, kill_at=None):
    lines = []
    flow = DataFlow.arrays([x, y], GLOBAL_BATCH, shuffle=True, random_state=7)
    kwargs = {} if mode == 'silent' else {'print_func': lines.append}
    with spt.TrainLoop(model.trainable_variables, max_epoch=max_epoch, show_eta=False,
                       checkpoint_dir=os.path.join(root, 'ckpt'), checkpoint_step_freq=3,
                       checkpoint_save_objects={'optimizer': optimizer},
                       summary_dir=os.path.join(root, 'summary'), early_stopping=True,
                       strategy=strategy, **kwargs) as loop:
        loop.distribution.sync_steps = sync_steps
        me = loop.backend.worker_index
        for epoch in loop.iter_epochs():
            rows = []
            for step, (bx, by) in loop.iter_steps(flow):
                loop.collect_metrics(loss=train_step(bx, by), reduce='sum')
                if step == stop_at and me == stop_worker:
                    loop.request_stop('asked on one worker')
                if step == kill_at:
                    raise KeyboardInterrupt()
            loop.collect_metrics(valid_loss=float(loop.epoch == 1) + me)
            loop.print_logs()
    return loop, lines


out = {}
if mode == 'train':
    loop, lines = train(3, stop_at=7, stop_worker=1)
    out['lines'] = lines
    out['step'] = loop.step
    out['stop_reason'] = loop.stop_reason
    out['is_chief'] = loop.is_chief
    out['weights'] = [w.ravel().tolist() for w in model.get_weights()]
report(out)
