"""One worker of a MultiWorkerMirroredStrategy job (run by tfsnippet/launch.py): report.

Each worker collects different values; the test compares what the workers
report with what one process holding all the values computes.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from _child import error_of, report

strategy = tf.distribute.MultiWorkerMirroredStrategy()

import keras  # noqa: E402

from tfsnippet.backend import DistributedBackend  # noqa: E402
from tfsnippet.dataflows import DataFlow  # noqa: E402
from tfsnippet.dataflows.sharding import shard_flow, split_batch  # noqa: E402
from tfsnippet.utils.statistics import StatisticsCollector  # noqa: E402

backend = DistributedBackend(strategy)
me = backend.worker_index
out: dict = {'roles': [backend.is_chief, backend.num_workers, backend.worker_index,
                       backend.num_replicas]}

# The values each worker collects (the test holds the same table).
VALUES = {
    0: {'loss': [1., 2., 3.], 'acc': [0.5, 0.75], 'only0': [7.], 'vec': [[1., 2.], [3., 4.]]},
    1: {'loss': [4., 5.], 'only1': [1., 2.], 'vec': [[5., 6.]]},
}


def collectors(values):
    stats = {}
    for name, vs in values.items():
        c = stats[name] = StatisticsCollector(np.shape(vs[0]))
        for v in vs:
            c.collect(v)
    return stats


def describe(stats):
    return {name: [c.counter, np.ravel(c.mean).tolist(), np.ravel(c.var).tolist()]
            for name, c in stats.items()}


mine = collectors(VALUES[me])
start = backend.collectives
out['first'] = describe(backend.reduce_statistics(mine))
out['first_collectives'] = backend.collectives - start
start = backend.collectives
out['second'] = describe(backend.reduce_statistics(mine))
out['second_collectives'] = backend.collectives - start
# a metric seen before but without values here now: still one all-reduce
start = backend.collectives
only_loss = {'loss': mine['loss']} if me == 0 else {}
out['third'] = describe(backend.reduce_statistics(only_loss))
out['third_collectives'] = backend.collectives - start

# a later backend of the same strategy (the next loop's) knows the names already
later = DistributedBackend(strategy)
out['later_backend'] = describe(later.reduce_statistics(mine))
out['later_backend_collectives'] = later.collectives
# the same metrics on both workers: one all-reduce learns that, one reduces
same = {'same_' + name: c for name, c in collectors({'a': [float(me)], 'b': [2.]}).items()}
start = backend.collectives
out['same_names'] = describe(backend.reduce_statistics(same))
out['same_names_collectives'] = backend.collectives - start

bad = {'bad': StatisticsCollector(() if me == 0 else (2,))}
bad['bad'].collect(np.zeros(bad['bad'].shape))
out['err_shapes'] = error_of(lambda: backend.reduce_statistics(bad))
out['after_error'] = describe(backend.reduce_statistics(mine))

# ------------------------------------------------------------ decisions
out['agree_one'] = backend.agree_any(me == 1)
out['agree_none'] = backend.agree_any(False)
out['from_chief'] = backend.broadcast_from_chief(3.25 if me == 0 else -1.)
out['from_chief_nan'] = str(backend.broadcast_from_chief(float('nan') if me == 0 else 5.))
backend.barrier()
# arrays of any shape, and a scalar, summed over the workers
out['summed_2d'] = backend.all_reduce_sum(np.arange(6.).reshape(2, 3) * (me + 1)).tolist()
out['summed_scalar'] = backend.all_reduce_sum(np.float64(me + 0.5)).tolist()


# ------------------------------------------------------------ per-replica metrics
@tf.function
def worker_loss():
    return strategy.run(lambda: tf.constant(float(me + 1)))


losses = [worker_loss() for _ in range(3)]
sums = [backend.normalize_metric('loss', v, reduce='sum') for v in losses]
means = [backend.normalize_metric('loss', v) for v in losses]
out['local_sum'] = backend.to_host_values(sums).tolist()
out['local_mean'] = backend.to_host_values(means).tolist()
per_metric = {}
for name, kept in (('sum', sums), ('mean', means)):
    c = per_metric[name] = StatisticsCollector()
    c.collect(backend.to_host_values(kept))
out['global_per_replica'] = describe(backend.reduce_statistics(per_metric))

# ------------------------------------------------------------ a train step
with strategy.scope():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    optimizer = keras.optimizers.SGD(0.1, momentum=0.5)
model.set_weights([np.array([[0.5], [-0.25]], np.float32), np.array([0.1], np.float32)])
backend.build_optimizer(optimizer, model.trainable_variables)
GLOBAL_BATCH = 4


@tf.function
def train_step(x, y):
    def step(x, y):
        with tf.GradientTape() as tape:
            err = model(x)[:, 0] - y
            loss = tf.reduce_sum(err * err) / GLOBAL_BATCH
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss
    return strategy.run(step, args=(x, y))


x = (np.arange(16, dtype=np.float32).reshape(8, 2) / 10.)
y = (x[:, 0] * 2. - x[:, 1] + 0.3).astype(np.float32)
flow = shard_flow(DataFlow.arrays([x, y], GLOBAL_BATCH), backend.num_workers, me)
losses = []
rows = []
for batch in flow:
    rows.append(batch[0][:, 0].tolist())
    losses.append(backend.normalize_metric('loss', train_step(*split_batch(strategy, batch)),
                                           reduce='sum'))
loss_stats = {'loss': StatisticsCollector()}
loss_stats['loss'].collect(backend.to_host_values(losses))
out['rows'] = rows
out['train_loss'] = describe(backend.reduce_statistics(loss_stats))
out['kernel'] = model.trainable_variables[0].numpy().ravel().tolist()
out['bias'] = model.trainable_variables[1].numpy().tolist()
out['iterations'] = int(optimizer.iterations.numpy())
backend.barrier()
report(out)
