"""The backend of a loop without a strategy (LocalBackend) and the decisions service, in process."""

from __future__ import annotations

import re
import signal

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.backend import Backend, Decisions, LocalBackend, replica_slice
from tfsnippet.distributed import ClusterInfo
from tfsnippet.utils.statistics import StatisticsCollector


# ------------------------------------------------------------------ LocalBackend
def test_local_backend_is_one_chief_worker():
    backend = LocalBackend()
    assert isinstance(backend, Backend)
    assert (backend.is_chief, backend.num_workers, backend.worker_index) == (True, 1, 0)
    assert (backend.num_replicas, backend.num_local_replicas) == (1, 1)
    assert backend.strategy is None and backend.coordinator is None
    assert backend.cluster == ClusterInfo.alone() and backend.cluster.is_chief
    assert backend.collectives == 0 and not backend.holds_replica_values


def test_local_backend_reductions_are_the_identity():
    backend = LocalBackend()
    np.testing.assert_array_equal(backend.all_reduce_sum([1, 2.5]), [1., 2.5])
    assert backend.all_reduce_sum([1, 2]).dtype == np.float64
    assert backend.agree_any(True) is True and backend.agree_any(False) is False
    assert backend.broadcast_from_chief(3) == 3. and backend.worker_mean(0.25) == 0.25
    c = StatisticsCollector()
    c.collect(2.)
    stats = {'loss': c}
    assert backend.reduce_statistics(stats) is stats
    merged, extra = backend.reduce_statistics_and_sum(stats, [1., 0.])
    assert merged is stats and extra.tolist() == [1., 0.]
    backend.barrier()
    backend.join()
    with pytest.raises(TypeError, match=re.escape('`flag` must be True or False, got 1')):
        backend.agree_any(1)
    with pytest.raises(ValueError, match=re.escape('`extra` must be a 1-d array, got shape ()')):
        backend.reduce_statistics_and_sum(stats, 1.)


def test_local_backend_values_and_data_pass_through():
    backend = LocalBackend()
    tensor = tf.constant(2.)
    assert backend.normalize_metric('loss', tensor) is tensor
    assert backend.normalize_metric('n', 3, reduce='sum') == 3
    np.testing.assert_array_equal(backend.to_host_values([1, tensor, np.array([3., 4.])]),
                                  [1., 2., 3., 4.])
    data = [1, 2, 3]
    assert backend.distribute_data(data, seed_of=lambda flow: 0) is data
    flow = spt.DataFlow.arrays([np.arange(4.)], 2)
    assert backend.distribute_data(flow, seed_of=lambda flow: 0) is flow
    v = tf.Variable(1.)
    backend.check_variables_in_scope([v], 'param_vars')
    optimizer = object()
    assert backend.build_optimizer(optimizer, [v]) is optimizer
    with pytest.raises(ValueError, match=re.escape(
            "`reduce` must be one of ('mean', 'sum'), got 'max'")):
        backend.normalize_metric('loss', 1., reduce='max')


def test_local_backend_refuses_per_replica_values():
    from tensorflow.python.distribute.values import PerReplica
    with pytest.raises(TypeError, match=r'Metric `loss` is a per-replica value \(PerReplica of '
                                        r'2 replicas, .*but the loop has no tf.distribute '
                                        r'strategy'):
        LocalBackend().normalize_metric('loss', PerReplica((tf.constant(1.), tf.constant(2.))))


def test_replica_slice_stays_reachable_from_the_backend():
    assert replica_slice is spt.dataflows.replica_slice
    strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
    out = strategy.run(lambda x: tf.reduce_sum(replica_slice(x)), args=(tf.constant([1., 2.]),))
    assert float(out) == 3.


def test_loop_backend_is_never_none_and_stays_after_exit():
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda line: None)
    before = loop.backend
    assert isinstance(before, LocalBackend) and loop.is_chief
    with loop:
        assert isinstance(loop.backend, LocalBackend) and loop.decisions.immediate
        assert loop.decisions.names == ('clock', 'stop')
    assert isinstance(loop.backend, LocalBackend)


# ------------------------------------------------------------------ Decisions
class FakeWorkers(Backend):
    """Worker `index` of `n` whose all-reduce adds what the other workers hold."""

    def __init__(self, n, index, others):
        self.n, self.index, self.others, self.calls = n, index, others, []

    num_workers = property(lambda self: self.n)
    worker_index = property(lambda self: self.index)

    def all_reduce_sum(self, array):
        self.calls.append(np.asarray(array).tolist())
        return np.asarray(array, dtype=np.float64) + np.asarray(self.others, dtype=np.float64)


def test_decisions_without_strategy_are_the_identity():
    decisions = Decisions(LocalBackend())
    seen = []
    decisions.register('stop', read=lambda: True, apply=lambda v: seen.append(('stop', v)))
    decisions.register('clock', read=lambda: 12.5, apply=lambda v: seen.append(('clock', v)),
                       rule='chief')
    decisions.register('quiet', read=lambda: False, apply=lambda v: seen.append(('quiet', v)))
    assert decisions.immediate and decisions.names == ('stop', 'clock', 'quiet')
    assert decisions.vector().tolist() == [1., 12.5, 0.]
    decisions.sync()
    assert seen == [('stop', 1.), ('clock', 12.5), ('quiet', 0.)]
    seen.clear()
    decisions.request()   # no schedule given: decided at once
    assert seen == [('stop', 1.), ('clock', 12.5), ('quiet', 0.)]


def test_decisions_agree_any_and_take_the_chiefs_value():
    # worker 1 of 2: its own clock is ignored, another worker's flag counts
    backend = FakeWorkers(2, 1, others=[0., 1., 99.])
    decisions = Decisions(backend)
    seen = {}
    decisions.register('stop', read=lambda: False, apply=lambda v: seen.__setitem__('stop', v))
    decisions.register('preempt', read=lambda: False,
                       apply=lambda v: seen.__setitem__('preempt', v))
    decisions.register('clock', read=lambda: 5., apply=lambda v: seen.__setitem__('clock', v),
                       rule='chief')
    assert not decisions.immediate
    assert decisions.vector().tolist() == [0., 0., 0.]   # not the chief: no clock
    decisions.sync()
    assert seen == {'stop': 0., 'preempt': 1., 'clock': 99.}
    assert backend.calls == [[0., 0., 0.]]   # one all-reduce for all of them
    decisions.request()   # several workers: waits for the loop's sync point
    assert backend.calls == [[0., 0., 0.]]


def test_decisions_errors():
    decisions = Decisions(LocalBackend())
    decisions.register('stop', read=lambda: False, apply=lambda v: None)
    with pytest.raises(ValueError, match=re.escape(
            "The decision 'stop' is registered already; the decisions are ['stop']")):
        decisions.register('stop', read=lambda: False, apply=lambda v: None)
    with pytest.raises(ValueError, match=re.escape(
            "`rule` must be one of ('any', 'chief'), got 'all'")):
        decisions.register('x', read=lambda: False, apply=lambda v: None, rule='all')
    with pytest.raises(TypeError, match=re.escape('`apply` must be callable, got 3')):
        decisions.register('x', read=lambda: False, apply=3)
    with pytest.raises(ValueError, match=re.escape(
            '`total` must hold one value per decision (1), got shape (2,)')):
        decisions.apply(np.zeros([2]))
    with pytest.raises(TypeError, match=re.escape('`backend` must be a Backend, got None')):
        Decisions(None)


def test_a_component_decision_is_applied_at_the_next_step_boundary():
    class Halt(spt.LoopComponent):
        """Registers 'halt'; a request at step 2 stops the loop after that step."""

        role = 'halt'

        def __init__(self):
            self.wanted = False

        def on_enter(self, loop):
            loop.decisions.register('halt', read=lambda: self.wanted,
                                    apply=lambda agreed: agreed and loop.request_stop('halted'))

    halt = Halt()
    steps, lines = [], []
    with spt.TrainLoop(max_epoch=3, print_func=lines.append) as loop:
        loop.add_component(halt)
        assert loop.decisions.names == ('clock', 'stop', 'halt')
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(5)):
                steps.append(step)
                if step == 2:
                    halt.wanted = True
                    loop.decisions.request()
                    assert not loop.stop_requested   # applied at the step's end
    assert steps == [1, 2] and loop.stop_reason == 'halted'
    assert lines[-1] == 'Training stopped at epoch 1, step 2: halted'


def test_preemption_without_strategy_goes_through_the_decisions(tmp_path):
    v = tf.Variable(0.)
    lines, steps = [], []
    with pytest.raises(spt.scaffold.components.checkpointer.TrainingPreempted):
        with spt.TrainLoop([v], max_epoch=2, checkpoint_dir=str(tmp_path),
                           print_func=lines.append) as loop:
            assert 'preempt' in loop.decisions.names
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(5)):
                    steps.append(step)
                    v.assign_add(1.)
                    if step == 3:
                        signal.raise_signal(signal.SIGTERM)
    assert steps == [1, 2, 3]
    assert any(line.startswith('Preempted by SIGTERM at epoch 1, step 3: saved checkpoint')
               for line in lines)
    v.assign(-1.)   # the checkpoint of step 3 holds what the variable was then
    with spt.TrainLoop([v], max_epoch=2, checkpoint_dir=str(tmp_path),
                       print_func=lines.append) as loop:
        assert loop.step == 3 and float(v.numpy()) == 3.


# ------------------------------------------------------------------ one chief rule
@pytest.mark.parametrize('cluster, task, expected', [
    ({'chief': ['a:1'], 'worker': ['b:1', 'c:1']}, ('chief', 0), (True, 3, 0)),
    ({'chief': ['a:1'], 'worker': ['b:1', 'c:1']}, ('worker', 0), (False, 3, 1)),
    ({'worker': ['b:1', 'c:1']}, ('worker', 0), (True, 2, 0)),
    ({'worker': ['b:1', 'c:1']}, ('worker', 1), (False, 2, 1)),
    ({'worker': ['b:1'], 'ps': ['p:1']}, ('ps', 0), (False, 1, None)),
])
def test_one_chief_rule_of_the_cluster_description(cluster, task, expected):
    info = ClusterInfo.of_task(cluster, *task)
    assert (info.is_chief, info.num_workers, info.worker_rank) == expected
    # the environment reader applies the same rule
    import json
    from tfsnippet.distributed import cluster_info
    env = {'TF_CONFIG': json.dumps({'cluster': cluster,
                                    'task': {'type': task[0], 'index': task[1]}})}
    assert cluster_info(env) == info


def test_strategy_backend_of_one_process_is_alone():
    backend = spt.backend.DistributedBackend(tf.distribute.OneDeviceStrategy('/cpu:0'))
    assert backend.cluster == ClusterInfo.alone()
    assert (backend.is_chief, backend.num_workers, backend.worker_index) == (True, 1, 0)
