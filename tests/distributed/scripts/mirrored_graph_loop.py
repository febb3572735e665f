"""A TrainLoop in graph mode (TF1 style) under MirroredStrategy on two logical CPUs.

``train DIR``: the same job with ``tf.compat.v1`` variables, placeholders
and ``session.run``, under the strategy and on one device; an
early-stopping run; a run interrupted mid-epoch and resumed from its
checkpoint in a new graph, beside an uninterrupted one; a Keras 3 layer made
in the strategy's scope; the errors of bad input.  ``mwms``: a two-worker
MultiWorkerMirroredStrategy refused at loop entry.  ``ps``: a
ParameterServerStrategy (made eagerly) refused in a graph.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import tensorflow as tf
from _child import error_of, report, two_cpus

two_cpus()
MODE = sys.argv[1]
if MODE != 'ps':
    tf.compat.v1.disable_eager_execution()

import tfsnippet as spt  # noqa: E402
from tfsnippet.backend import replica_slice  # noqa: E402

v1 = tf.compat.v1
GLOBAL_BATCH = 8
X = np.random.RandomState(0).randn(32, 3).astype(np.float32)
Y = (X @ np.array([1., -2., .5], np.float32) + 0.3).astype(np.float32)


class Job:
    """A linear model trained by SGD with momentum (slot variables), in a new graph."""

    def __init__(self, strategy):
        self.strategy = strategy
        self.graph = tf.Graph()
        with self.graph.as_default():
            scope = (strategy or tf.distribute.get_strategy()).scope()
            with scope:
                self.w = v1.get_variable('w', shape=[3, 1],
                                         initializer=v1.constant_initializer(.1))
                self.b = v1.get_variable('b', shape=[1], initializer=v1.zeros_initializer())
                self.optimizer = v1.train.MomentumOptimizer(0.05, momentum=0.5)
            self.x = v1.placeholder(tf.float32, [None, 3], name='x')
            self.y = v1.placeholder(tf.float32, [None], name='y')
            if strategy is None:
                loss, n_ok = self._replica(self.x, self.y)
                self.loss, self.n_ok = loss, n_ok
            else:
                loss, n_ok = strategy.run(self._replica, args=(self.x, self.y))
                self.per_replica_loss = loss
                self.loss = strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
                self.n_ok = strategy.reduce(tf.distribute.ReduceOp.SUM, n_ok, axis=None)
            self.session = v1.Session(graph=self.graph)
            self.session.run(v1.global_variables_initializer())

    def _replica(self, x, y):
        if self.strategy is not None:
            x, y = replica_slice(x, y)
        err = (tf.matmul(x, self.w) + self.b)[:, 0] - y
        loss = tf.reduce_sum(err * err) / GLOBAL_BATCH
        train = self.optimizer.minimize(loss, var_list=[self.w, self.b])
        with tf.control_dependencies([train]):
            return tf.identity(loss), tf.reduce_sum(tf.cast(tf.abs(err) < 1., tf.float32))

    def step(self, bx, by):
        return self.session.run([self.loss, self.n_ok], {self.x: bx, self.y: by})

    def weights(self):
        return [a.ravel().tolist() for a in self.session.run([self.w, self.b])]

    def copies(self):
        """``w`` and ``b`` as held on each device: ``[[w, b] of device 0, ...]``."""
        parts = self.session.run([list(self.w.values), list(self.b.values)])
        return [[w.ravel().tolist(), b.ravel().tolist()] for w, b in zip(*parts)]

    def loop(self, **kwargs):
        kwargs.setdefault('show_eta', False)
        return spt.TrainLoop([self.w, self.b], strategy=self.strategy, **kwargs)


def flow():
    return spt.DataFlow.arrays([X, Y], batch_size=GLOBAL_BATCH)


def train(job, lines, epochs=3, valid=None, interrupt_at=None, **kwargs):
    """Train `job` under a loop printing to `lines`; returns what the loop saw."""
    seen = {}
    data = flow()
    with job.graph.as_default(), job.session.as_default():
        with job.loop(max_epoch=epochs, print_func=lines.append, **kwargs) as loop:
            backend = loop.backend
            seen['backend'] = backend and [type(backend).__name__, backend.is_chief,
                                           backend.num_workers, backend.num_replicas]
            seen['is_chief'] = loop.is_chief if hasattr(loop, 'is_chief') else None
            seen['epoch_weights'] = {}
            for epoch in loop.iter_epochs():
                for step, (bx, by) in loop.iter_steps(data):
                    loss, n_ok = job.step(bx, by)
                    loop.collect_metrics(loss=loss)
                    loop.collect_metrics(n_ok=n_ok, reduce='sum')
                    if step == interrupt_at:
                        loop.make_checkpoint()
                        raise KeyboardInterrupt()
                if valid is not None:
                    loop.collect_metrics(valid_loss=valid[epoch - 1])
                seen['epoch_weights'][epoch] = job.weights()
                loop.print_logs()
    return seen


def main_train(root):
    strategy = tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1'])
    result = {}

    # the same job under the strategy and on one device
    lines, single_lines = [], []
    job = Job(strategy)
    seen = train(job, lines)
    single = Job(None)
    train(single, single_lines)
    result.update(lines=lines, single_lines=single_lines, weights=job.weights(),
                  single_weights=single.weights(), backend=seen['backend'],
                  is_chief=seen['is_chief'],
                  variable_type=type(job.w).__name__)
    with job.graph.as_default(), job.session.as_default():
        loop = job.loop(max_epoch=1)
        with loop:
            for _ in loop.iter_epochs():
                for _ in loop.iter_steps(flow()):
                    result['symbolic_metric_error'] = error_of(
                        lambda: loop.collect_metrics(loss=job.per_replica_loss))
                    break
                break
        # 7 rows: 3 on one replica, 4 on the other; the loss of all 7 together
        w, b = job.session.run([job.w, job.b])
        err = (X[:7] @ w + b)[:, 0] - Y[:7]
        result['odd_batch'] = [float(job.session.run(job.loss, {job.x: X[:7], job.y: Y[:7]})),
                               float(np.sum(err * err) / GLOBAL_BATCH)]

    # early stopping: the best validation is at epoch 2
    es_lines = []
    job = Job(strategy)
    seen = train(job, es_lines, valid=[.5, .2, .9], early_stopping=True)
    result.update(es_lines=es_lines, es_weights=job.weights(), es_copies=job.copies(),
                  es_epoch_weights=seen['epoch_weights'])

    # interrupted mid-epoch at step 6 (epoch 2 of 4 steps each), resumed in a new graph
    ckpt = os.path.join(root, 'ckpt')
    first_lines, resumed_lines, full_lines = [], [], []
    job = Job(strategy)
    try:
        train(job, first_lines, interrupt_at=6, checkpoint_dir=ckpt)
    except KeyboardInterrupt:
        pass
    result['interrupted_weights'] = job.weights()
    job = Job(strategy)
    result['fresh_weights'] = job.weights()
    train(job, resumed_lines, checkpoint_dir=ckpt)
    full = Job(strategy)
    train(full, full_lines)
    result.update(resumed_lines=resumed_lines, resumed_weights=job.weights(),
                  full_weights=full.weights(), resumed_copies=job.copies())

    # a Keras 3 layer made in the strategy's scope, in graph mode
    import keras
    graph = tf.Graph()
    with graph.as_default():
        def keras_layer():
            with strategy.scope():
                layer = keras.layers.Dense(1)
                layer.build((None, 3))
            return [type(v).__name__ for v in layer.weights]
        result['keras_layer'] = error_of(keras_layer) or keras_layer()
    report(result)


def main_mwms():
    import socket
    sockets = [socket.socket() for _ in range(2)]
    for s in sockets:
        s.bind(('127.0.0.1', 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec({'worker': [f'127.0.0.1:{p}' for p in ports]}),
        task_type='worker', task_id=0, rpc_layer='grpc')
    strategy = tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver)
    with strategy.scope():
        w = v1.get_variable('w', shape=[], initializer=v1.zeros_initializer())
    lines = []
    # (the variables cannot even be initialized: their initializer is a collective
    # bound to the cluster's devices, which a local session does not have)
    with v1.Session():
        loop = spt.TrainLoop([w], strategy=strategy, max_epoch=1, print_func=lines.append)
        error = error_of(loop.__enter__)
    report({'error': error, 'lines': lines})


def main_ps():
    from _child import in_process_ps_strategy
    strategy, _ = in_process_ps_strategy()
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        w = tf.Variable(0.)
    with tf.Graph().as_default(), v1.Session():
        loop = spt.TrainLoop([w], strategy=strategy, coordinator=coordinator, max_epoch=1)
        error = error_of(loop.__enter__)
    report({'error': error})
    sys.stdout.flush()
    os._exit(0)


if MODE == 'train':
    main_train(sys.argv[2])
elif MODE == 'mwms':
    main_mwms()
else:
    main_ps()
