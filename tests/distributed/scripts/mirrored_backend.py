"""DistributedBackend under MirroredStrategy on two logical CPUs: report what it does."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from _child import error_of, report, two_cpus

two_cpus()

import keras  # noqa: E402
from tensorflow.python.framework import ops  # noqa: E402

import tfsnippet.backend.values as values_module  # noqa: E402
from tfsnippet.backend import backend_for  # noqa: E402
from tfsnippet.backend.values import in_host_memory  # noqa: E402
from tfsnippet.dataflows import DataFlow  # noqa: E402
from tfsnippet.dataflows.sharding import split_batch  # noqa: E402
from tfsnippet.utils.statistics import StatisticsCollector  # noqa: E402

# every copy of an eager tensor to the host goes through `_numpy`: count them
host_copies = [0]
_numpy = ops._EagerTensorBase._numpy


def counting_numpy(self):
    host_copies[0] += 1
    return _numpy(self)


ops._EagerTensorBase._numpy = counting_numpy

out: dict = {}
strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
out['backend_for_none'] = backend_for(None) is None
out['backend_for_default'] = backend_for(tf.distribute.get_strategy()) is None
with strategy.scope():
    out['backend_for_scope'] = backend_for(None).strategy is strategy
backend = backend_for(strategy)
out['roles'] = [backend.is_chief, backend.num_workers, backend.worker_index,
                backend.num_replicas, backend.num_local_replicas]


# ------------------------------------------------------------ metrics
@tf.function
def replica_values(x):
    """Replica r returns x * (r + 1) / 2 and the vector [r, 10 r]."""
    def fn(x):
        r = tf.cast(tf.distribute.get_replica_context().replica_id_in_sync_group, tf.float32)
        return x * (r + 1.) / 2., tf.stack([r, 10. * r])
    return strategy.run(fn, args=(x,))


steps = [replica_values(tf.constant(float(t + 1))) for t in range(5)]
before = host_copies[0]
kept_mean = [backend.normalize_metric('loss', s[0]) for s in steps]
kept_sum = [backend.normalize_metric('loss', s[0], reduce='sum') for s in steps]
kept_vec = [backend.normalize_metric('vec', s[1]) for s in steps[:2]]
out['copies_while_kept'] = host_copies[0] - before
out['kept_type'] = type(kept_mean[0]).__name__
out['kept_same_tensors'] = all(k.parts[i] is s[0].values[i]
                               for k, s in zip(kept_mean, steps) for i in range(2))

before = host_copies[0]
out['host_mean'] = backend.to_host_values(kept_mean).tolist()
out['copies_for_mean'] = host_copies[0] - before
# as on accelerators: the values of each replica stacked on its device, one copy each
values_module.in_host_memory = lambda device: False
before = host_copies[0]
out['host_mean_stacked'] = backend.to_host_values(kept_mean).tolist()
out['copies_for_mean_stacked'] = host_copies[0] - before
values_module.in_host_memory = in_host_memory
out['host_sum'] = backend.to_host_values(kept_sum).tolist()
out['host_vec'] = backend.to_host_values(kept_vec).tolist()
# replica values followed by a number, and replica values of two shapes: the
# parts no longer read in one array, the values grouped (by device and shape)
out['host_mean_then_number'] = backend.to_host_values(kept_mean + [3.]).tolist()
out['host_two_shapes'] = backend.to_host_values(kept_mean[:1] + kept_vec[:1]).tolist()
out['host_mixed'] = backend.to_host_values([3., kept_sum[0], tf.constant([7., 8.]),
                                            np.float32(0.5)]).tolist()
out['one_as_array'] = np.asarray(kept_mean[4]).tolist()
out['plain_passes'] = backend.normalize_metric('lr', 0.25) == 0.25

with strategy.scope():
    mirrored_var = tf.Variable(2.5)
read = backend.normalize_metric('v', mirrored_var)
out['variable_read'] = [type(read).__name__ == 'EagerTensor', float(read)]

uneven = strategy.experimental_distribute_values_from_function(
    lambda ctx: tf.zeros([ctx.replica_id_in_sync_group + 1]))
out['err_reduce'] = error_of(lambda: backend.normalize_metric('loss', steps[0][0], reduce='max'))
out['err_shapes'] = error_of(lambda: backend.normalize_metric('loss', uneven))


@tf.function
def collect_inside():
    backend.normalize_metric('loss', strategy.run(lambda: tf.constant(1.)))


out['err_symbolic'] = error_of(collect_inside)
out['per_replica_error'] = [type(backend.per_replica_error('loss', steps[0][0])).__name__,
                            str(backend.per_replica_error('loss', steps[0][0]))]

# one process: nothing to communicate
stats = {'loss': StatisticsCollector()}
out['single_reduce_same'] = backend.reduce_statistics(stats) is stats
out['single_agree'] = [backend.agree_any(True), backend.agree_any(False)]
out['single_broadcast'] = backend.broadcast_from_chief(2.5)
backend.barrier()
out['single_collectives'] = backend.collectives

# ------------------------------------------------------------ variables
outside_var = tf.Variable(1., name='outside_w')
outside_model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name='late')])
with strategy.scope():
    inside_var = tf.Variable(1., name='inside_w')
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, name='dense')])
out['err_outside'] = error_of(lambda: backend.check_variables_in_scope(
    [inside_var, outside_var] + outside_model.trainable_variables, 'variables'))
out['inside_ok'] = error_of(lambda: backend.check_variables_in_scope(
    {'w': inside_var, **{v.path: v for v in model.trainable_variables}}, 'variables'))

made_outside = keras.optimizers.SGD(0.1)
out['err_made_outside'] = error_of(lambda: backend.build_optimizer(
    made_outside, model.trainable_variables))
built_outside = keras.optimizers.Adam()
built_outside.build(outside_model.trainable_variables)
out['err_built_outside'] = error_of(lambda: backend.build_optimizer(
    built_outside, model.trainable_variables))
out['err_not_optimizer'] = error_of(lambda: backend.build_optimizer(
    'sgd', model.trainable_variables))

# ------------------------------------------------------------ a train step
model.set_weights([np.array([[0.5], [-0.25]], np.float32), np.array([0.1], np.float32)])
with strategy.scope():
    optimizer = keras.optimizers.SGD(0.1, momentum=0.5)
out['built_before'] = optimizer.built
assert backend.build_optimizer(optimizer, model.trainable_variables) is optimizer
out['built_after'] = optimizer.built
out['optimizer_variables'] = len(optimizer.variables)
out['optimizer_in_scope'] = error_of(lambda: backend.check_variables_in_scope(
    optimizer.variables, 'optimizer.variables'))

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
losses = []
for batch in DataFlow.arrays([x, y], GLOBAL_BATCH):
    losses.append(backend.normalize_metric('loss', train_step(*split_batch(strategy, batch)),
                                           reduce='sum'))
out['losses'] = backend.to_host_values(losses).tolist()
kernel = model.trainable_variables[0].value
out['kernel_replicas'] = [v.numpy().ravel().tolist() for v in kernel.values]
out['bias'] = model.trainable_variables[1].numpy().tolist()
out['iterations'] = int(optimizer.iterations.numpy())
report(out)
