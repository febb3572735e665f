"""DistributedBackend under ParameterServerStrategy, with in-process servers on loopback."""

from __future__ import annotations

import os

import numpy as np
import tensorflow as tf
from _child import error_of, in_process_ps_strategy, report

from tfsnippet.backend import DistributedBackend, RemoteMetricValue, backend_for

strategy, servers = in_process_ps_strategy()

out: dict = {}
out['err_no_coordinator'] = error_of(lambda: DistributedBackend(strategy))
out['err_no_coordinator_for'] = error_of(lambda: backend_for(strategy))
coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
out['err_coordinator_elsewhere'] = error_of(lambda: DistributedBackend(
    tf.distribute.OneDeviceStrategy('/cpu:0'), coordinator))
backend = DistributedBackend(strategy, coordinator)
out['roles'] = [backend.is_chief, backend.num_workers, backend.worker_index]

# count the fetches: normalising must not wait for the workers
fetches = [0]
fetch = coordinator.fetch


def counting_fetch(value):
    fetches[0] += 1
    return fetch(value)


coordinator.fetch = counting_fetch

with strategy.scope():
    counter = tf.Variable(0., name='counter')
outside = tf.Variable(0., name='stray')


@tf.function
def step(x):
    def replica_fn(x):
        counter.assign_add(1.)
        return x * 2.
    return strategy.run(replica_fn, args=(x,))


remotes = [coordinator.schedule(step, args=(tf.constant(float(i)),)) for i in range(4)]
kept = [backend.normalize_metric('loss', r) for r in remotes]
out['kept_types'] = sorted({type(k).__name__ for k in kept})
out['fetches_while_kept'] = fetches[0]
out['host'] = backend.to_host_values(kept).tolist()
out['fetches_for_host'] = fetches[0]
out['one_as_array'] = float(np.asarray(kept[3]))
more = [coordinator.schedule(step, args=(tf.constant(1.),)) for _ in range(8)]
backend.barrier()   # coordinator.join(): every scheduled step has run
out['done_after_barrier'] = coordinator.done()
out['counter_after_barrier'] = float(counter.numpy())
out['is_remote_metric'] = isinstance(kept[0], RemoteMetricValue)
out['err_remote_elsewhere'] = error_of(lambda: DistributedBackend(
    tf.distribute.OneDeviceStrategy('/cpu:0')).normalize_metric('loss', remotes[0]))
out['err_outside'] = error_of(lambda: backend.check_variables_in_scope(
    [counter, outside], 'variables'))
out['single_agree'] = backend.agree_any(True)
out['collectives'] = backend.collectives
report(out)
os._exit(0)   # the in-process servers never stop on their own
