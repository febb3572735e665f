"""A TrainLoop on the coordinator of a ParameterServerStrategy (in-process servers): report."""

from __future__ import annotations

import os
import socket

import numpy as np
import tensorflow as tf
from _child import error_of, report

import tfsnippet as spt
from tfsnippet.dataflows import DataFlow

# ports for a chief, two workers and a parameter server; bound then released
sockets = [socket.socket() for _ in range(4)]
for s in sockets:
    s.bind(('127.0.0.1', 0))
ports = [s.getsockname()[1] for s in sockets]
for s in sockets:
    s.close()
cluster = tf.train.ClusterSpec({
    'chief': [f'127.0.0.1:{ports[0]}'],
    'worker': [f'127.0.0.1:{ports[1]}', f'127.0.0.1:{ports[2]}'],
    'ps': [f'127.0.0.1:{ports[3]}']})
# with the default thread pools (sized by the 2 cores), servers sharing one
# process deadlock as soon as a worker's step touches a variable on the ps
config = tf.compat.v1.ConfigProto(inter_op_parallelism_threads=8)
servers = [tf.distribute.Server(cluster, job_name=job, task_index=i, protocol='grpc',
                                config=config, start=True)
           for job, i in (('worker', 0), ('worker', 1), ('ps', 0))]
resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
    cluster, task_type='chief', task_id=0, rpc_layer='grpc')
strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)

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
