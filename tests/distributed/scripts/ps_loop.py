"""A TrainLoop on the coordinator of a ParameterServerStrategy (in-process servers): report."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
from _child import error_of, in_process_ps_strategy, report

import tfsnippet as spt
from tfsnippet.dataflows import DataFlow

strategy, servers = in_process_ps_strategy()

out: dict = {}
with strategy.scope():
    total = tf.Variable(0., name='total')
    count = tf.Variable(0., name='count')
out['err_no_coordinator'] = error_of(lambda: spt.TrainLoop([total], strategy=strategy))
coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)


@tf.function
def step(x):
    def replica_fn(x):
        total.assign_add(tf.reduce_sum(x))
        count.assign_add(1.)
        return tf.reduce_mean(x)
    return strategy.run(replica_fn, args=(x,))


x = np.arange(12, dtype=np.float32)
flow = DataFlow.arrays([x], 3)
lines = []
batches = []
after_steps = []
with spt.TrainLoop([total, count], max_epoch=2, print_func=lines.append, show_eta=False,
                   strategy=strategy, coordinator=coordinator) as loop:
    for epoch in loop.iter_epochs():
        for s, (bx,) in loop.iter_steps(flow):
            batches.append(bx.tolist())
            loop.collect_metrics(loss=coordinator.schedule(step, args=(bx,)))
        # a validation right after the step loop: the scheduled steps are done
        after_steps.append([float(count.numpy()), float(total.numpy())])
        loop.print_logs()
out['lines'] = [line.split('; ', 2)[-1] for line in lines]
out['step'] = loop.step
out['after_steps'] = after_steps
out['batches'] = batches
out['count'] = float(count.numpy())
out['total'] = float(total.numpy())
out['is_chief'] = loop.is_chief
report(out)
os._exit(0)   # the in-process servers never stop on their own
