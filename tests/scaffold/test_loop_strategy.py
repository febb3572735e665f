"""TrainLoop's `strategy`/`coordinator` arguments and `reduce=` in this (one-device) process.

The strategies themselves run in child processes: tests/distributed/test_loop_distributed.py.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt


def test_no_strategy_means_the_local_backend():
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda line: None)
    assert isinstance(loop.backend, spt.backend.LocalBackend)   # before entering, too
    with loop:
        assert isinstance(loop.backend, spt.backend.LocalBackend) and loop.is_chief
        assert loop.backend.strategy is None and loop.distribution.backend is loop.backend
    # the default strategy is no strategy, given or in scope
    with spt.TrainLoop(max_epoch=1, strategy=tf.distribute.get_strategy()) as loop:
        assert isinstance(loop.backend, spt.backend.LocalBackend) and loop.is_chief


def test_one_device_strategy_from_scope():
    strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
    with strategy.scope():
        v = tf.Variable(1.)
        loop = spt.TrainLoop([v], max_epoch=1, print_func=lambda line: None)
    assert isinstance(loop.backend, spt.backend.LocalBackend)   # chosen when entered
    lines = []
    with loop:
        assert loop.backend.strategy is strategy and loop.is_chief
        assert loop.backend.num_workers == 1 and loop.backend.num_replicas == 1
        loop.print_func = lines.append
        for _ in loop.iter_epochs():
            for _, (x,) in loop.iter_steps(spt.DataFlow.arrays([np.arange(4.)], 2)):
                loop.collect_metrics(loss=strategy.run(tf.reduce_sum, args=(x,)),
                                     n=strategy.run(tf.size, args=(x,)), reduce={'n': 'sum'})
            loop.print_logs()
    assert lines[-1].endswith('loss: 3 (±2); n: 2 (±0)')
    assert loop.backend.strategy is strategy   # still known after the exit


def test_strategy_and_coordinator_types():
    with pytest.raises(TypeError, match=r'`strategy` must be a tf.distribute.Strategy or None, '
                                        r"got 'mirrored'"):
        spt.TrainLoop(max_epoch=1, strategy='mirrored')
    with pytest.raises(TypeError, match='`coordinator` must be a tf.distribute.experimental.'
                                        'coordinator.ClusterCoordinator or None, got 3'):
        spt.TrainLoop(max_epoch=1, coordinator=3)


def test_reduce_is_checked_and_ignored_without_strategy():
    lines = []
    with spt.TrainLoop(max_epoch=1, print_func=lines.append, show_eta=False) as loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([1, 2]):
                loop.collect_metrics(loss=2., reduce='sum')
                loop.collect_metrics({'reduce': 1.}, reduce={'reduce': 'mean'})
            with pytest.raises(ValueError, match=r"`reduce` must be 'mean', 'sum' or a dict "
                                                 r"\{metric name: 'mean' or 'sum'\}, got "
                                                 r"'median'"):
                loop.collect_metrics(loss=1., reduce='median')
            with pytest.raises(ValueError, match=re.escape(
                    "`reduce` names metrics that are not collected here: ['n_corect']; the "
                    "metrics are ['loss', 'n_correct']")):
                loop.collect_metrics(loss=1., n_correct=3., reduce={'n_corect': 'sum'})
            loop.print_logs()
    assert lines[-1].endswith('loss: 2 (±0); reduce: 1 (±0)')


def test_per_replica_metric_without_strategy_says_what_to_do():
    from tensorflow.python.distribute.values import PerReplica
    values = PerReplica((tf.constant(1.), tf.constant(2.)))
    with spt.TrainLoop(max_epoch=1) as loop:
        for _ in loop.iter_epochs():
            with pytest.raises(TypeError, match=r'Metric `loss` is a per-replica value '
                                                r'\(PerReplica of 2 replicas, each like '
                                                r'.*\), but the loop has no tf.distribute '
                                                r'strategy: pass `strategy=`.*strategy.reduce'):
                loop.collect_metrics(loss=values)


class FakeTwoWorkerBackend(spt.backend.DistributedBackend):
    """A strategy backend that says it is worker 0 of 2, 2 replicas each; the
    'all-reduce' of one process stands in for the sum over the workers."""

    def __init__(self, worker_index=0):
        super().__init__(tf.distribute.OneDeviceStrategy('/cpu:0'))
        self._index = worker_index

    num_workers = property(lambda self: 2)
    worker_index = property(lambda self: self._index)
    num_replicas = property(lambda self: 4)
    is_chief = property(lambda self: self._index == 0)

    def normalize_metric(self, name, value, reduce='mean'):
        return value

    def reduce_statistics(self, stats):
        return stats

    def all_reduce_sum(self, array):
        return np.asarray(array, dtype=np.float64)

    def broadcast_from_chief(self, value):
        return float(value)


def distribution_of(loop, backend):
    from tfsnippet.scaffold.loop.distribution import LoopDistribution
    return LoopDistribution(loop, backend, loop.clock, loop._iter.stop)


def test_multi_worker_data_is_sharded_or_refused():
    from tfsnippet.dataflows import shard_flow
    x = np.arange(20.)
    with spt.TrainLoop(max_epoch=1) as loop:
        dist = distribution_of(loop, FakeTwoWorkerBackend())
        try:
            with pytest.raises(TypeError, match=r'cannot be sharded among the 2 workers: give an '
                                                r'ArrayFlow'):
                dist.distribute_data(spt.DataFlow.arrays([x], 8).map(lambda a: (a,)))
            with pytest.raises(ValueError, match=r'has 6 rows, less than one global batch of 8 '
                                                 r'rows \(4 for each of 2 worker\(s\), 2 for each '
                                                 r'of 4 replicas\)'):
                dist.distribute_data(spt.DataFlow.arrays([x[:6]], 8))
            with pytest.raises(ValueError, match=r'batches of 6 rows, which do not divide among '
                                                 r'the 4 replicas'):
                dist.distribute_data(spt.DataFlow.arrays([x], 6))
            # a flow sharded by the user, mapped and threaded, is only split
            sharded = shard_flow(spt.DataFlow.arrays([x], 8), 2, 0).map(lambda a: (a,))
            assert dist.distribute_data(sharded) is dist.distribute_data(sharded)
            # a list, numpy batches and the like pass unchanged
            data = [(x,)]
            assert dist.distribute_data(data) is data
        finally:
            dist.detach()


def test_multi_worker_stop_waits_for_the_sync_point():
    lines = []
    with spt.TrainLoop(max_epoch=3, print_func=lines.append) as loop:
        dist = distribution_of(loop, FakeTwoWorkerBackend())
        loop._dist = dist
        dist.sync_steps = 4
        with pytest.raises(ValueError, match='`sync_steps` must be a positive int'):
            dist.sync_steps = 0
        steps = []
        try:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(10)):
                    steps.append(step)
                    if step == 2:
                        loop.request_stop('asked at 2')
                        assert not loop.stop_requested and dist.pending_stop == 'asked at 2'
        finally:
            dist.detach()
    assert steps == [1, 2, 3, 4] and loop.stop_reason == 'asked at 2'
    assert lines[-1] == 'Training stopped at epoch 1, step 4: asked at 2'
