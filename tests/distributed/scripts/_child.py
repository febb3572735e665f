"""Shared by the child scripts: two logical CPUs, a report line, error capture."""

from __future__ import annotations

import json
import sys
from typing import Any, Callable


def two_cpus() -> None:
    """Split the CPU into two logical devices; call before TensorFlow sets up its devices."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices('CPU')[0]
    tf.config.set_logical_device_configuration(
        cpu, [tf.config.LogicalDeviceConfiguration()] * 2)


def error_of(fn: Callable[[], Any]) -> list[str] | None:
    """``[type name, message]`` of what `fn()` raises, or None."""
    try:
        fn()
    except Exception as e:  # the test compares the type and the message
        return [type(e).__name__, str(e)]
    return None


def report(result: dict[str, Any]) -> None:
    """Print the one ``RESULT`` line the test reads."""
    sys.stdout.write('RESULT ' + json.dumps(result) + '\n')
    sys.stdout.flush()


def in_process_ps_strategy() -> tuple[Any, list[Any]]:
    """A ``ParameterServerStrategy`` for this process as the chief, with two
    workers and a parameter server running in this process on loopback ports:
    ``(strategy, servers)``.  The servers never stop: end with ``os._exit``."""
    import socket

    import tensorflow as tf

    sockets = [socket.socket() for _ in range(4)]   # bound, then released for the servers
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
    return tf.distribute.experimental.ParameterServerStrategy(resolver), servers


def regression_replica_step(model: Any, optimizer: Any, x: Any, y: Any,
                            global_batch: int) -> tuple[Any, Any]:
    """One replica's training step of a one-output regression: its share of the
    global batch's summed squared error (the loss), and how many errors are below 1."""
    import tensorflow as tf

    with tf.GradientTape() as tape:
        err = model(x)[:, 0] - y
        loss = tf.reduce_sum(err * err) / global_batch
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss, tf.reduce_sum(tf.cast(tf.abs(err) < 1., tf.float32))
