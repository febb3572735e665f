"""The tf.distribute backend: metric values per replica, cross-worker statistics and agreement.

Strategies need a fresh TensorFlow, so each runs in a child process
(``scripts/``): MirroredStrategy on two logical CPUs, MultiWorkerMirrored
with two workers started by ``tfsnippet/launch.py``, ParameterServerStrategy
with in-process servers.  A child reports what it observed as JSON; the
expected values here are computed by hand (or by numpy from the same data).
The three children start together, in threads, and each is bounded in time.

The reduction protocol itself (:class:`CrossWorkerReducer`) is also run
in this process with workers as threads, summing through a barrier.
"""

from __future__ import annotations

import doctest
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tensorflow as tf

from tests.distributed.scripts._run import run_child, run_workers
from tfsnippet import backend as backend_pkg
from tfsnippet.backend import AgreedLayout, CrossWorkerReducer, DistributedBackend, backend_for
from tfsnippet.backend import distributed as distributed_module
from tfsnippet.utils.statistics import StatisticsCollector

CHILD_TIMEOUT = 120.   # seconds; each child takes 6-8 s here


# ------------------------------------------------------------------ children
@pytest.fixture(scope='module')
def children():
    with ThreadPoolExecutor(3) as pool:
        yield {
            'mirrored': pool.submit(run_child, 'mirrored_backend.py', timeout=CHILD_TIMEOUT),
            # twice in its first dozen runs here this child died of SIGSEGV inside
            # TensorFlow before reporting (its servers share its process); not in 50 since
            'ps': pool.submit(run_child, 'ps_backend.py', timeout=CHILD_TIMEOUT,
                              retry_crash=True),
            'mwms': pool.submit(run_workers, 'mwms_backend.py', 2, timeout=CHILD_TIMEOUT),
        }


@pytest.fixture(scope='module')
def mirrored(children):
    return children['mirrored'].result()


@pytest.fixture(scope='module')
def ps(children):
    return children['ps'].result()


@pytest.fixture(scope='module')
def workers(children):
    return children['mwms'].result()


def stats_of(values, weights=None, shape=()):
    """One collector holding `values` (with `weights`): what one process would hold."""
    c = StatisticsCollector(shape)
    for i, v in enumerate(values):
        c.collect(v, 1. if weights is None else weights[i])
    return c


def described(c):
    """A collector as the children describe one: [counter, mean, var], flattened."""
    return [c.counter, np.ravel(c.mean).tolist(), np.ravel(c.var).tolist()]


def assert_described(got, expected):
    assert sorted(got) == sorted(expected)
    for name, (counter, mean, var) in expected.items():
        assert got[name][0] == counter, name
        np.testing.assert_allclose(got[name][1], mean, rtol=1e-12, atol=1e-12, err_msg=name)
        np.testing.assert_allclose(got[name][2], var, rtol=1e-9, atol=1e-12, err_msg=name)


def expected_training(x, y, batches, lr=0.1, momentum=0.5):
    """SGD with momentum on ``y ~ x @ w + b`` (MSE), one process, by numpy."""
    w, b = np.array([0.5, -0.25]), 0.1
    vw, vb = np.zeros(2), 0.
    losses = []
    for rows in batches:
        xb, yb = x[rows].astype(np.float64), y[rows].astype(np.float64)
        err = xb @ w + b - yb
        losses.append(float(np.mean(err ** 2)))
        gw, gb = 2. * xb.T @ err / len(rows), 2. * err.sum() / len(rows)
        vw, vb = momentum * vw - lr * gw, momentum * vb - lr * gb
        w, b = w + vw, b + vb
    return losses, w, b


X = np.arange(16, dtype=np.float32).reshape(8, 2) / 10.
Y = (X[:, 0] * 2. - X[:, 1] + 0.3).astype(np.float32)
LOSSES, KERNEL, BIAS = expected_training(X, Y, [[0, 1, 2, 3], [4, 5, 6, 7]])


# ------------------------------------------------------- MirroredStrategy
def test_mirrored_roles_and_backend_for(mirrored):
    # is_chief, num_workers, worker_index, num_replicas, num_local_replicas
    assert mirrored['roles'] == [True, 1, 0, 2, 2]
    assert mirrored['backend_for_none'] and mirrored['backend_for_default']
    assert mirrored['backend_for_scope']


def test_mirrored_per_replica_metric_kept_without_host_copy(mirrored):
    assert mirrored['kept_type'] == 'ReplicaValue'
    assert mirrored['kept_same_tensors']
    assert mirrored['copies_while_kept'] == 0
    # to_host_values of 5 values over 2 logical CPUs: each part read as it is (no op
    # to run); on accelerators the parts are stacked on each device: one copy per replica
    assert mirrored['copies_for_mean'] == 10
    assert mirrored['copies_for_mean_stacked'] == 2
    assert mirrored['host_mean_stacked'] == mirrored['host_mean']


def test_mirrored_mean_and_sum_across_replicas(mirrored):
    # replica r returns (t + 1) * (r + 1) / 2 at step t
    assert mirrored['host_mean'] == [(t + 1) * (0.5 + 1.) / 2 for t in range(5)]
    assert mirrored['host_sum'] == [(t + 1) * (0.5 + 1.) for t in range(5)]
    # the vector [r, 10 r], averaged element-wise over r = 0, 1; flattened per value
    assert mirrored['host_vec'] == [0.5, 5., 0.5, 5.]
    assert mirrored['host_mean_then_number'] == mirrored['host_mean'] + [3.]
    assert mirrored['host_two_shapes'] == [0.75, 0.5, 5.]
    # a number, a kept sum, an eager tensor and a numpy scalar, in order
    assert mirrored['host_mixed'] == [3., 1.5, 7., 8., 0.5]
    assert mirrored['one_as_array'] == 3.75
    assert mirrored['plain_passes']
    assert mirrored['variable_read'] == [True, 2.5]


def test_mirrored_metric_errors(mirrored):
    assert mirrored['err_reduce'] == [
        'ValueError', "`reduce` must be one of ('mean', 'sum'), got 'max'"]
    kind, message = mirrored['err_shapes']
    assert kind == 'ValueError'
    assert message.startswith('Metric `loss` has values of different shapes on the replicas: '
                              "['<EagerTensor shape=(1,) dtype=float32>', "
                              "'<EagerTensor shape=(2,) dtype=float32>']")
    kind, message = mirrored['err_symbolic']
    assert kind == 'TypeError'
    assert ('Metric `loss` is a per-replica value of symbolic tensors <SymbolicTensor shape=() '
            'dtype=float32>: return it from the `tf.function` and collect the result '
            'outside') in message


def test_mirrored_per_replica_error_says_what_to_do(mirrored):
    assert mirrored['per_replica_error'] == [
        'TypeError',
        '`loss` is a per-replica value (PerReplica of 2 replicas, each like <EagerTensor '
        'shape=() dtype=float32>), where a number is expected: collect it with '
        '`loop.collect_metrics()`, which reduces it across replicas when the logs are '
        'printed, or reduce it yourself with '
        '`strategy.reduce(tf.distribute.ReduceOp.MEAN, value, axis=None)`']


def test_mirrored_one_process_communicates_nothing(mirrored):
    assert mirrored['single_reduce_same']
    assert mirrored['single_agree'] == [True, False]
    assert mirrored['single_broadcast'] == 2.5
    assert mirrored['single_collectives'] == 0


def test_mirrored_variables_outside_scope_are_named(mirrored):
    assert mirrored['err_outside'] == [
        'ValueError',
        "`variables` holds variables created outside `strategy.scope()` of the "
        "MirroredStrategy (3 of 4): 'outside_w', 'sequential/late/kernel', "
        "'sequential/late/bias'; create them (build the model) inside "
        "`with strategy.scope():`"]
    assert mirrored['inside_ok'] is None


def test_mirrored_optimizer_made_or_built_outside_scope(mirrored):
    assert mirrored['err_made_outside'] == [
        'ValueError',
        "`optimizer` was made outside `strategy.scope()` of the MirroredStrategy: its "
        "variables 'sgd/iteration', 'sgd/learning_rate' are not the strategy's, so each "
        "replica would keep its own; make the optimizer inside `with strategy.scope():` and "
        "build it there (`backend.build_optimizer(optimizer, model.trainable_variables)`)"]
    kind, message = mirrored['err_built_outside']
    assert kind == 'ValueError'
    assert message.startswith("`optimizer` was built outside `strategy.scope()` of the "
                              "MirroredStrategy: its variables 'adam/iteration', ")
    assert "'adam/sequential_late_bias_momentum' and 1 more are not" in message
    assert mirrored['err_not_optimizer'] == [
        'TypeError', "`optimizer` must be a Keras optimizer, got 'sgd'"]


def test_mirrored_build_optimizer_then_train_like_one_process(mirrored):
    assert not mirrored['built_before'] and mirrored['built_after']
    # iteration, learning rate and one momentum slot per variable, all mirrored
    assert mirrored['optimizer_variables'] == 4
    assert mirrored['optimizer_in_scope'] is None
    # two steps on global batches of 4 rows split over 2 replicas equal one process's
    np.testing.assert_allclose(mirrored['losses'], LOSSES, rtol=1e-5)
    for kernel in mirrored['kernel_replicas']:
        np.testing.assert_allclose(kernel, KERNEL, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(mirrored['bias'], [BIAS], rtol=1e-5)
    assert mirrored['iterations'] == 2   # counted once, not once per replica


# ------------------------------------------------------- MultiWorkerMirrored
WORKER_VALUES = {
    0: {'loss': [1., 2., 3.], 'acc': [0.5, 0.75], 'only0': [7.], 'vec': [[1., 2.], [3., 4.]]},
    1: {'loss': [4., 5.], 'only1': [1., 2.], 'vec': [[5., 6.]]},
}


def test_multi_worker_roles(workers):
    assert [w['roles'] for w in workers] == [[True, 2, 0, 2], [False, 2, 1, 2]]


def all_workers_described() -> dict:
    """The statistics one process would collect from the values of both workers."""
    expected = {}
    for name in ('loss', 'acc', 'only0', 'only1', 'vec'):
        values = [v for w in (0, 1) for v in WORKER_VALUES[w].get(name, [])]
        expected[name] = described(stats_of(values, shape=np.shape(values[0])))
    return expected


def test_multi_worker_statistics_equal_one_process_with_all_values(workers):
    expected = all_workers_described()
    for w in workers:
        assert_described(w['first'], expected)
        assert_described(w['second'], expected)
        assert_described(w['after_error'], expected)
    # only worker 0 has values of `loss`, worker 1 has none at all
    for w in workers:
        assert_described(w['third'], {'loss': described(stats_of([1., 2., 3.]))})


def test_multi_worker_one_all_reduce_once_names_are_agreed(workers):
    for w in workers:
        # the first call: the workers' names differ, two all-reduces agree on
        # them, one reduces
        assert w['first_collectives'] == 3
        assert w['second_collectives'] == 1
        assert w['third_collectives'] == 1
        # a later backend of the strategy: one all-reduce from its first call
        assert w['later_backend_collectives'] == 1
        # new names, alike on both workers: one all-reduce finds them new, one
        # finds them alike (no exchange of names), one reduces
        assert w['same_names_collectives'] == 3


def test_multi_worker_later_backend_and_same_names_merge_alike(workers):
    expected = all_workers_described()
    for w in workers:
        assert_described(w['later_backend'], expected)
        assert_described(w['same_names'], {'same_a': described(stats_of([0., 1.])),
                                           'same_b': described(stats_of([2., 2.]))})


def test_multi_worker_shape_conflict_raises_on_every_worker(workers):
    for w in workers:
        assert w['err_shapes'] == [
            'ValueError', 'Metric `bad` has samples of shape (2,) on worker 1 but () on '
                          'worker 0: a metric must have the same shape on every worker']


def test_multi_worker_agreement(workers):
    assert [w['agree_one'] for w in workers] == [True, True]      # only worker 1 said yes
    assert [w['agree_none'] for w in workers] == [False, False]
    assert [w['from_chief'] for w in workers] == [3.25, 3.25]
    assert [w['from_chief_nan'] for w in workers] == ['nan', 'nan']
    for w in workers:
        assert w['summed_2d'] == [[0., 3., 6.], [9., 12., 15.]]
        assert w['summed_scalar'] == 2.


def test_multi_worker_sum_metric_means_the_global_sum(workers):
    # one replica per worker; worker k's replica returns k + 1 at every step
    assert [w['local_mean'] for w in workers] == [[1.] * 3, [2.] * 3]
    assert [w['local_sum'] for w in workers] == [[2.] * 3, [4.] * 3]   # share x 2 workers
    for w in workers:
        assert w['global_per_replica']['mean'][1] == [1.5]   # mean over the 2 replicas
        assert w['global_per_replica']['sum'][1] == [3.]     # 1 + 2, the sum over replicas


def test_multi_worker_training_equals_one_process(workers):
    # each worker trains on its half of every global batch of 4 rows
    np.testing.assert_allclose(workers[0]['rows'], [[0., 0.2], [0.8, 1.]], rtol=1e-6)
    np.testing.assert_allclose(workers[1]['rows'], [[0.4, 0.6], [1.2, 1.4]], rtol=1e-6)
    for w in workers:
        np.testing.assert_allclose(w['kernel'], KERNEL, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(w['bias'], [BIAS], rtol=1e-5)
        assert w['iterations'] == 2
        counter, mean, _ = w['train_loss']['loss']
        assert counter == 4   # 2 steps x 2 workers
        np.testing.assert_allclose(mean, [np.mean(LOSSES)], rtol=1e-5)


# ------------------------------------------------------- ParameterServer
def test_parameter_server_needs_a_coordinator(ps):
    message = ('`coordinator` is required with a ParameterServerStrategy, got None: pass '
               '`coordinator=tf.distribute.experimental.coordinator.ClusterCoordinator('
               'strategy)`, the one that schedules the training steps')
    assert ps['err_no_coordinator'] == ['ValueError', message]
    assert ps['err_no_coordinator_for'] == ['ValueError', message]
    assert ps['err_coordinator_elsewhere'] == [
        'ValueError', '`coordinator` is only for a ParameterServerStrategy; `strategy` is a '
                      'OneDeviceStrategy']


def test_parameter_server_remote_values_fetched_once_when_reduced(ps):
    assert ps['roles'] == [True, 1, 0]   # the coordinator runs the loop alone
    assert ps['kept_types'] == ['RemoteMetricValue'] and ps['is_remote_metric']
    assert ps['fetches_while_kept'] == 0
    assert ps['host'] == [0., 2., 4., 6.]
    assert ps['fetches_for_host'] == 1
    assert ps['one_as_array'] == 6.


def test_parameter_server_barrier_waits_for_scheduled_steps(ps):
    assert ps['done_after_barrier']
    assert ps['counter_after_barrier'] == 12.   # 4 + 8 scheduled steps, each adds 1


def test_parameter_server_errors(ps):
    assert ps['err_remote_elsewhere'] == [
        'TypeError', 'Metric `loss` is a RemoteValue (the result of a function scheduled by a '
                     'ClusterCoordinator), but this backend has no coordinator: make it with '
                     '`coordinator=` the ClusterCoordinator that scheduled the step']
    assert ps['err_outside'] == [
        'ValueError', "`variables` holds variables created outside `strategy.scope()` of the "
                      "ParameterServerStrategyV2 (1 of 2): 'stray'; create them (build the "
                      "model) inside `with strategy.scope():`"]
    assert ps['single_agree'] is True and ps['collectives'] == 0


# ------------------------------------------------------- in this process
def test_backend_for_default_strategy_is_none():
    assert backend_for(None) is None
    assert backend_for(tf.distribute.get_strategy()) is None


def test_backend_argument_errors():
    with pytest.raises(TypeError, match=re.escape(
            "`strategy` must be a tf.distribute.Strategy, got 'mirrored'")):
        DistributedBackend('mirrored')
    with pytest.raises(TypeError, match=re.escape(
            "`strategy` must be a tf.distribute.Strategy or None, got 3")):
        backend_for(3)
    one = tf.distribute.OneDeviceStrategy('/cpu:0')
    with pytest.raises(TypeError, match=re.escape(
            '`coordinator` must be a tf.distribute.experimental.coordinator.'
            "ClusterCoordinator, got 'object'")):
        DistributedBackend(one, coordinator='object')
    other = tf.distribute.OneDeviceStrategy('/cpu:0')
    with one.scope():
        with pytest.raises(ValueError, match=re.escape(
                '`strategy` (OneDeviceStrategy) is not the strategy whose scope is entered '
                '(OneDeviceStrategy): use that one, or leave its scope first')):
            backend_for(other)


def test_one_device_backend_passes_plain_values():
    backend = DistributedBackend(tf.distribute.OneDeviceStrategy('/cpu:0'))
    assert (backend.is_chief, backend.num_workers, backend.num_replicas) == (True, 1, 1)
    tensor = tf.constant(2.)
    assert backend.normalize_metric('loss', tensor) is tensor
    assert backend.normalize_metric('loss', tensor, reduce='sum') is tensor   # one worker
    np.testing.assert_array_equal(backend.to_host_values([1, tensor, np.array([3., 4.])]),
                                  [1., 2., 3., 4.])
    assert backend.to_host_values([]).shape == (0,)
    with pytest.raises(TypeError, match=re.escape("`values[1]` is not numeric: 'x'")):
        backend.to_host_values([1., 'x'])


def test_replica_parts_checks_and_value_kinds():
    from tfsnippet.backend.values import check_replica_parts, value_kind

    # parts alike, parts of two numeric dtypes, and parts that are not tensors: accepted
    check_replica_parts('m', (tf.constant([1., 2.]), tf.constant([3., 4.])))
    check_replica_parts('m', (tf.constant([1., 2.]), tf.constant([3, 4], tf.int64)))
    check_replica_parts('m', (tf.constant([1., 2.]), np.array([3., 4.])))
    check_replica_parts('m', ())
    with pytest.raises(ValueError, match=re.escape(
            "Metric `m` has values of different shapes on the replicas: "
            "['<EagerTensor shape=(1,) dtype=float32>', '<EagerTensor shape=(2,) "
            "dtype=float32>']")):
        check_replica_parts('m', (tf.constant([1.]), tf.constant([1., 2.])))
    with pytest.raises(ValueError, match='different shapes'):
        check_replica_parts('m', (tf.constant([1., 2.]), np.array([1., 2., 3.])))
    for parts in ((tf.constant('a'), tf.constant('b')), (tf.constant(1.), tf.constant('b'))):
        with pytest.raises(TypeError, match=re.escape(
                'Metric `m` must be numeric, got a per-replica value of string')):
            check_replica_parts('m', parts)

    strategy = tf.distribute.MirroredStrategy(['/cpu:0'])
    with strategy.scope():
        variable = tf.Variable(1.5)
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant(1.))
    for _ in range(2):   # the second time from what the first learned
        assert [value_kind(v) for v in (per_replica, variable, tf.constant(1.), 2.)] == [
            'replica', 'variable', '', '']
        assert [backend_pkg.is_distributed_value(v) for v in (per_replica, variable, 2.)] == [
            True, True, False]
    backend = DistributedBackend(strategy)
    assert backend.normalize_metric('v', variable).numpy() == 1.5


def test_is_distributed_value_and_one_replica_mirrored():
    strategy = tf.distribute.MirroredStrategy(['/cpu:0'])
    per_replica = strategy.experimental_distribute_values_from_function(
        lambda ctx: tf.constant([1., 3.]))
    assert backend_pkg.is_distributed_value(per_replica)
    assert not backend_pkg.is_distributed_value(tf.constant(1.))
    backend = DistributedBackend(strategy)
    kept = backend.normalize_metric('vec', per_replica, reduce='sum')
    assert isinstance(kept, backend_pkg.ReplicaValue)
    assert kept.parts == (per_replica.values[0],) and not kept.mean and kept.factor == 1.
    np.testing.assert_array_equal(backend.to_host_values([kept, kept]), [1., 3., 1., 3.])
    with pytest.raises(TypeError, match=re.escape(
            "Metric `name` must be numeric, got a per-replica value of string")):
        backend.normalize_metric('name', strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.constant('x')))


def test_backend_examples_run():
    for module in (distributed_module, backend_pkg.reduction):
        result = doctest.testmod(module, extraglobs={'tf': tf, 'np': np})
        assert result.failed == 0


# ------------------------------------------- the reduction protocol, threads as workers
class ThreadCluster:
    """`n` workers as threads; `all_reduce_sum` meets at a barrier and sums."""

    def __init__(self, n):
        self.n = n
        self.slots = [None] * n
        self.barrier = threading.Barrier(n, timeout=10)

    def reducer(self, index, layout=None):
        def all_reduce_sum(array):
            self.slots[index] = array
            self.barrier.wait()
            total = np.sum(self.slots, axis=0)
            self.barrier.wait()   # every worker has read the slots
            return total
        return CrossWorkerReducer(all_reduce_sum, self.n, index, layout=layout)

    def run(self, program):
        """Run ``program(reducer)`` on every worker; return results (or exceptions) by index."""
        results = [None] * self.n

        def target(i):
            try:
                results[i] = program(reducers[i])
            except Exception as e:   # handed to the test, which checks it
                results[i] = e

        reducers = [self.reducer(i) for i in range(self.n)]
        threads = [threading.Thread(target=target, args=(i,)) for i in range(self.n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=20)
        assert not any(t.is_alive() for t in threads)
        return results, reducers


def test_reducer_merges_weighted_statistics_of_three_workers():
    values = {0: ([1., 2.], [1., 3.]), 1: ([], []), 2: ([10., -4., 0.5], [0.5, 2., 1.])}
    vectors = {0: [[1., 0.]], 1: [[2., 1.], [3., -1.]], 2: []}

    def program(reducer):
        me = reducer.worker_index
        stats = {}
        if values[me][0]:
            stats['loss'] = stats_of(*values[me])
        if vectors[me]:
            stats['vec'] = stats_of(vectors[me], shape=(2,))
        stats['never'] = StatisticsCollector()
        first = reducer.reduce_statistics(stats)
        mark = reducer.collectives
        second = reducer.reduce_statistics(stats)
        return first, second, reducer.collectives - mark

    results, _ = ThreadCluster(3).run(program)
    loss = stats_of([1., 2., 10., -4., 0.5], weights=[1., 3., 0.5, 2., 1.])
    vec = stats_of([[1., 0.], [2., 1.], [3., -1.]], shape=(2,))
    for first, second, collectives in results:
        for got in (first, second):
            assert list(got) == ['loss', 'never', 'vec']
            assert got['loss'].counter == 5 and got['loss'].weight_sum == loss.weight_sum
            np.testing.assert_allclose(got['loss'].mean, loss.mean, rtol=1e-12)
            np.testing.assert_allclose(got['loss'].var, loss.var, rtol=1e-12)
            np.testing.assert_allclose(got['vec'].mean, vec.mean, rtol=1e-12)
            np.testing.assert_allclose(got['vec'].var, vec.var, rtol=1e-12)
            assert got['vec'].counter == 3 and not got['never'].has_value
        assert collectives == 1


def test_reducer_new_metric_later_is_agreed_again():
    def program(reducer):
        me = reducer.worker_index
        a = stats_of([float(me)])
        reducer.reduce_statistics({'a': a})
        mark = reducer.collectives
        # worker 1 meets a new metric; worker 0 does not know about it
        extra = {'b': stats_of([5.])} if me == 1 else {}
        got = reducer.reduce_statistics({'a': a, **extra})
        return {k: (c.counter, float(c.mean)) for k, c in got.items()}, reducer.collectives - mark

    results, _ = ThreadCluster(2).run(program)
    assert results == [({'a': (2, 0.5), 'b': (1, 5.)}, 4)] * 2


def test_reducer_sums_extra_values_in_the_same_all_reduce():
    def program(reducer):
        me = reducer.worker_index
        calls = []
        for extra in ([1. if me == 1 else 0., 2. * me], [0., 0.5]):
            mark = reducer.collectives
            got, total = reducer.reduce_statistics_and_sum(
                {'loss': stats_of([float(me), 3.])}, np.array(extra))
            calls.append((got['loss'].counter, float(got['loss'].mean), total.tolist(),
                          reducer.collectives - mark))
        # nothing to merge, still the sum of the extra values
        got, total = reducer.reduce_statistics_and_sum({}, np.array([me + 1.]))
        calls.append((list(got), total.tolist()))
        return calls

    results, _ = ThreadCluster(3).run(program)
    mean = np.mean([0., 3., 1., 3., 2., 3.])
    # the first call: one all-reduce finds the names alike, one reduces
    assert results == [[(6, mean, [1., 6.], 2), (6, mean, [0., 1.5], 1), ([], [6.])]] * 3


def test_reducer_sharing_a_layout_reduces_known_names_with_one_all_reduce():
    cluster = ThreadCluster(2)

    def program(reducer):
        me = reducer.worker_index
        layout = AgreedLayout()
        first = cluster.reducer(me, layout)
        first.reduce_statistics({'loss': stats_of([float(me)])})
        # the next loop's reducer on this worker: 'loss' is known, 'acc' new
        later = cluster.reducer(me, layout)
        known = later.reduce_statistics({'loss': stats_of([2. * me])})
        counts = [first.collectives, later.collectives]
        new = later.reduce_statistics({'loss': stats_of([1.]), 'acc': stats_of([0.5])})
        counts.append(later.collectives - counts[1])
        # a shape that conflicts with the earlier reduction, alike on both workers
        vec = StatisticsCollector((2,))
        vec.collect([1., 2.])
        try:
            later.reduce_statistics({'loss': vec})
        except ValueError as e:
            error = str(e)
        return (float(known['loss'].mean), known['loss'].counter, sorted(new), counts,
                list(layout.shapes.items()), error)

    results, _ = cluster.run(program)
    assert results == [(1., 2, ['acc', 'loss'], [2, 1, 3], [('acc', ()), ('loss', ())],
                        'Metric `loss` has samples of shape (2,) on worker 0 but () on an '
                        'earlier reduction: a metric must have the same shape on every '
                        'worker')] * 2
    with pytest.raises(TypeError, match=re.escape('`layout` must be an AgreedLayout or None, '
                                                  'got {}')):
        CrossWorkerReducer(lambda a: a, 2, 0, layout={})


def test_reducer_extra_values_on_one_worker_and_bad_extra():
    reducer = CrossWorkerReducer(lambda a: a, 1, 0)
    stats = {'loss': stats_of([1.])}
    got, total = reducer.reduce_statistics_and_sum(stats, np.array([1, 2]))
    assert got is stats and total.dtype == np.float64 and total.tolist() == [1., 2.]
    with pytest.raises(ValueError, match=re.escape('`extra` must be a 1-d array, got shape ()')):
        reducer.reduce_statistics_and_sum(stats, np.array(1.))


def test_reducer_shape_conflict_raises_everywhere():
    def program(reducer):
        c = StatisticsCollector(() if reducer.worker_index == 0 else (3,))
        c.collect(np.zeros(c.shape))
        return reducer.reduce_statistics({'m': c})

    results, _ = ThreadCluster(2).run(program)
    for r in results:
        assert isinstance(r, ValueError)
        assert str(r) == ('Metric `m` has samples of shape (3,) on worker 1 but () on worker 0: '
                          'a metric must have the same shape on every worker')


def test_reducer_decisions():
    def program(reducer):
        me = reducer.worker_index
        return (reducer.agree_any(me == 2), reducer.agree_any(False),
                reducer.broadcast_from_chief(float('inf') if me == 0 else 1.),
                reducer.broadcast_from_chief(-0.125 if me == 0 else float('nan')),
                reducer.barrier())

    results, reducers = ThreadCluster(3).run(program)
    assert results == [(True, False, float('inf'), -0.125, None)] * 3
    assert [r.collectives for r in reducers] == [5] * 3


def test_reducer_on_one_worker_communicates_nothing():
    def never(array):
        raise AssertionError('no all-reduce on one worker')

    reducer = CrossWorkerReducer(never, 1, 0)
    stats = {'loss': stats_of([1., 2.])}
    assert reducer.reduce_statistics(stats) is stats
    assert reducer.agree_any(True) is True
    assert reducer.broadcast_from_chief(3) == 3.
    reducer.barrier()
    assert reducer.collectives == 0


def test_reducer_argument_errors():
    reducer = CrossWorkerReducer(lambda a: a, 2, 1)
    with pytest.raises(TypeError, match=re.escape("`flag` must be True or False, got 1")):
        reducer.agree_any(1)
    with pytest.raises(TypeError, match=re.escape("`value` must be a real number, got 'x'")):
        reducer.broadcast_from_chief('x')
    with pytest.raises(TypeError, match=re.escape(
            "`stats` must map metric names (str) to StatisticsCollector, got 'loss': 1.0")):
        reducer.reduce_statistics({'loss': 1.})
    with pytest.raises(ValueError, match=re.escape(
            '`worker_index` must be an int in range(2), got 2')):
        CrossWorkerReducer(lambda a: a, 2, 2)
    with pytest.raises(ValueError, match=re.escape('`num_workers` must be a positive int, got 0')):
        CrossWorkerReducer(lambda a: a, 0, 0)
