"""Sharded flows (each worker's part of every epoch) and batches split among replicas.

Expected batches are written out by hand, or computed independently of the
flow: a sharded flow with seed ``s`` orders epoch ``e`` as the ``e``-th
permutation drawn from ``np.random.RandomState(s)`` (the order of
``DataFlow.arrays(..., random_state=s)`` alone), cuts that order into
global batches and hands worker ``k`` the ``k``-th slice of each.
``split_batch`` runs under MirroredStrategy on two logical CPUs in a child
process (a fresh TensorFlow), bounded in time.
"""

from __future__ import annotations

import doctest
import pickle
import re

import numpy as np
import pytest

from tests.distributed.scripts._run import run_child
from tfsnippet.dataflows import DataFlow, SeqFlow
from tfsnippet.dataflows import sharding
from tfsnippet.dataflows.sharding import ShardedFlow, shard_flow


def epoch(flow, i=0):
    """One epoch of `flow`: the `i`-th array of each batch, as lists."""
    return [b[i].tolist() for b in flow]


def shards(flow, workers, seed=None):
    return [shard_flow(flow, workers, k, seed=seed) for k in range(workers)]


def orders(seed, n, epochs):
    """The orders of `epochs` epochs of `n` rows shuffled with the int `seed`."""
    rng = np.random.RandomState(seed)
    return [rng.permutation(n).tolist() for _ in range(epochs)]


def expected_batches(order, global_batch, workers, k):
    """Worker k's batches of an epoch in `order`, written from the rule above."""
    size = global_batch // workers
    steps = len(order) // global_batch
    return [list(order[s * global_batch + k * size:s * global_batch + (k + 1) * size])
            for s in range(steps)]


# ------------------------------------------------------------------ splitting
def test_unshuffled_global_batches_split_in_order():
    flow = DataFlow.arrays([np.arange(10)], batch_size=4)
    assert epoch(shard_flow(flow, 2, 0)) == [[0, 1], [4, 5]]
    assert epoch(shard_flow(flow, 2, 1)) == [[2, 3], [6, 7]]   # rows 8, 9 dropped


def test_shuffled_epochs_follow_the_seeded_order():
    n, global_batch, workers, seed = 23, 6, 3, 11
    flows = shards(DataFlow.arrays([np.arange(n)], global_batch, shuffle=True), workers, seed)
    for order in orders(seed, n, 3):
        for k, f in enumerate(flows):
            assert epoch(f) == expected_batches(order, global_batch, workers, k)


def test_workers_disjoint_equal_counts_and_cover_full_batches():
    n, global_batch, workers = 50, 12, 4
    x = np.arange(n)
    flows = shards(DataFlow.arrays([x, x * 10], global_batch, shuffle=True), workers, seed=3)
    for _ in range(3):
        epochs = [list(f) for f in flows]
        assert [len(e) for e in epochs] == [n // global_batch] * workers   # 4 batches each
        rows = [int(r) for e in epochs for b in e for r in b[0]]
        assert len(rows) == len(set(rows)) == (n // global_batch) * global_batch
        for e in epochs:
            for b in e:
                assert len(b[0]) == global_batch // workers
                assert (b[1] == b[0] * 10).all()   # arrays keep their rows together
    # the same step of every worker makes one global batch of the epoch's order
    order = orders(3, n, 4)[3]
    step0 = [list(f)[0][0].tolist() for f in flows]
    assert sum(step0, []) == order[:global_batch]


def test_shuffled_epochs_differ_and_leave_out_different_rows():
    flow = shard_flow(DataFlow.arrays([np.arange(10)], 4, shuffle=True), 1, 0, seed=0)
    first, second = epoch(flow), epoch(flow)
    assert first != second
    assert len(sum(first, [])) == len(sum(second, [])) == 8


def test_reproducible_across_flows_and_processes_by_seed():
    make = lambda seed: shard_flow(   # noqa: E731
        DataFlow.arrays([np.arange(30)], 6, shuffle=True, random_state=np.random.randint(99)),
        3, 1, seed=seed)
    a, b, c = make(5), make(5), make(6)
    assert [epoch(a) for _ in range(2)] == [epoch(b) for _ in range(2)]
    assert epoch(make(5)) != epoch(c)


def test_seed_ignored_without_shuffling_and_seq_flow_works():
    flow = shard_flow(DataFlow.seq(0, 8, batch_size=4), 2, 1, seed=7)
    assert flow.seed is None
    assert epoch(flow) == [[2, 3], [6, 7]]
    assert isinstance(flow.source, SeqFlow)


def test_properties():
    flow = shard_flow(DataFlow.arrays([np.zeros([26, 3]), np.zeros([26])], 8, shuffle=True),
                      4, 2, seed=1)
    assert isinstance(flow, ShardedFlow)
    assert (flow.num_workers, flow.worker_index, flow.global_batch_size, flow.batch_size) == \
        (4, 2, 8, 2)
    assert (flow.steps_per_epoch, flow.data_length, flow.array_count) == (3, 6, 2)
    assert flow.data_shapes == ((3,), ())
    assert flow.skip_incomplete and flow.is_shuffled and flow.seed == 1


def test_unshuffled_batches_are_read_only_views():
    x = np.arange(8)
    batch = next(iter(shard_flow(DataFlow.arrays([x], 4), 2, 0)))
    with pytest.raises(ValueError, match='read-only'):
        batch[0][0] = 100
    assert x[0] == 0


def test_map_on_a_sharded_flow():
    flow = shard_flow(DataFlow.arrays([np.arange(8)], 4), 2, 1).map(lambda x: (x * 2,))
    assert epoch(flow) == [[4, 6], [12, 14]]


# ------------------------------------------------------------------ bad input
def test_too_small_for_one_global_batch():
    with pytest.raises(ValueError, match=re.escape(
            '`flow` has 5 rows, less than one global batch of 8 (4 rows for each of 2 '
            'workers): every worker needs at least one batch an epoch; use more data or a '
            'smaller `batch_size`')):
        shard_flow(DataFlow.arrays([np.arange(5)], 8), 2, 0)


def test_global_batch_must_divide_among_workers():
    with pytest.raises(ValueError, match=re.escape(
            '`flow.batch_size` 10 (the global batch size) does not divide among '
            '`num_workers` 3 workers: use a multiple of 3')):
        shard_flow(DataFlow.arrays([np.arange(30)], 10), 3, 0)


def test_shuffled_flow_needs_a_seed():
    for random_state in (None, np.random.RandomState(1)):
        with pytest.raises(ValueError, match=re.escape(
                '`seed` is required to shard a shuffled flow made without an int '
                '`random_state` among several workers, got None: every worker must draw the '
                'same order of rows')):
            shard_flow(DataFlow.arrays([np.arange(8)], 4, shuffle=True,
                                       random_state=random_state), 2, 0)


def test_only_array_flows():
    mapped = DataFlow.arrays([np.arange(8)], 4).map(lambda x: (x,))
    with pytest.raises(TypeError, match=re.escape(
            '`flow` must be an ArrayFlow (made by `DataFlow.arrays` or `DataFlow.seq`) to be '
            'sharded, got <tfsnippet.dataflows.mapper_flow.MapperFlow')):
        shard_flow(mapped, 2, 0)


@pytest.mark.parametrize('workers, index, error, message', [
    (2, 2, ValueError, '`worker_index` must be in range(2) (`num_workers` 2), got 2'),
    (2, -1, ValueError, '`worker_index` must be in range(2) (`num_workers` 2), got -1'),
    (2, 0.0, TypeError, '`worker_index` must be an int, got 0.0'),
    (0, 0, ValueError, '`num_workers` must be a positive int, got 0'),
])
def test_worker_arguments(workers, index, error, message):
    with pytest.raises(error, match=re.escape(message)):
        shard_flow(DataFlow.arrays([np.arange(8)], 4), workers, index)


@pytest.mark.parametrize('seed, error, message', [
    ('1', TypeError, "`seed` must be an int or None, got '1'"),
    (-1, ValueError, '`seed` must be a non-negative int, got -1'),
])
def test_seed_arguments(seed, error, message):
    with pytest.raises(error, match=re.escape(message)):
        shard_flow(DataFlow.arrays([np.arange(8)], 4, shuffle=True), 2, 0, seed=seed)


# ------------------------------------------------------------------ positions
def shuffled(workers, index, global_batch=6, seed=4):
    return shard_flow(DataFlow.arrays([np.arange(40)], global_batch, shuffle=True),
                      workers, index, seed=seed)


def test_position_resumes_the_rest_of_the_epoch():
    flow = shuffled(3, 1)
    epoch(flow)                       # epoch 0
    it = iter(flow)
    done = [next(it)[0].tolist() for _ in range(2)]
    state = pickle.loads(pickle.dumps(flow.state_dict()))
    rest = [b[0].tolist() for b in it]
    assert (state['served'], state['rows'], state['length']) == (2, 12, 40)
    again = shuffled(3, 1, seed=9)    # the position carries the random state
    again.load_state_dict(state)
    assert again.state_dict() == state
    assert epoch(again) == rest
    assert done + rest == expected_batches(orders(4, 40, 2)[1], 6, 3, 1)
    assert epoch(again) == epoch(flow)   # both go on with epoch 2


def test_position_is_the_same_on_every_worker():
    flows = [shuffled(2, k) for k in range(2)]
    running = [iter(f) for f in flows]
    for it in running:
        next(it)
        next(it)
    assert pickle.dumps(flows[0].state_dict()) == pickle.dumps(flows[1].state_dict())
    assert flows[0].state_dict()['served'] == 2


def test_position_from_another_worker_count():
    # chief of 2 workers saved after 2 global batches of 6 rows; resume on 3 workers
    saver = shuffled(2, 0)
    it = iter(saver)
    next(it)
    next(it)
    state = saver.state_dict()
    resumed = [shuffled(3, k) for k in range(3)]
    for f in resumed:
        f.load_state_dict(state)
    rows = sorted(r for f in resumed for b in epoch(f) for r in b)
    assert rows == sorted(orders(4, 40, 1)[0][12:36])   # 4 more global batches; 4 rows dropped


def test_position_between_epochs():
    flow = shuffled(2, 0)
    plain = DataFlow.arrays([np.arange(40)], 6, shuffle=True, random_state=4)
    assert pickle.dumps(flow.state_dict()) == pickle.dumps(plain.state_dict())
    epoch(flow)
    epoch(plain)
    assert pickle.dumps(flow.state_dict()) == pickle.dumps(plain.state_dict())
    assert flow.state_dict()['served'] == 0


def test_position_mismatches():
    state = shuffled(2, 0).state_dict()
    other = shard_flow(DataFlow.arrays([np.arange(41)], 6, shuffle=True), 2, 0, seed=4)
    with pytest.raises(ValueError, match=re.escape(
            'The saved position is of a flow of 40 rows, this one has 41: resume with the '
            'same data, or start afresh')):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match=re.escape(
            'The saved position is of a flow that was not shuffled')):
        shuffled(2, 0).load_state_dict(DataFlow.arrays([np.arange(40)], 2).state_dict())
    with pytest.raises(ValueError, match=re.escape(
            '`state["served"]` must be a non-negative int, got -1')):
        shuffled(2, 0).load_state_dict({**state, 'served': -1})


def test_position_of_an_earlier_sharded_flow_is_refused_when_shuffled():
    # what a ShardedFlow of an earlier version saved: its epochs were drawn from
    # default_rng([seed, epoch]), today's from the flow's own generator
    legacy = {'start': {'epoch': 1, 'seed': 4}, 'served': 2, 'rows': 12, 'length': 40}
    message = re.escape(
        "The saved position (`start` {'epoch': 1, 'seed': 4}) was written by the sharded flow "
        "of an earlier tfsnippet, which shuffled each epoch with another order of rows than "
        "this version")
    for flow in (shuffled(2, 0), DataFlow.arrays([np.arange(40)], 6, shuffle=True)):
        with pytest.raises(ValueError, match=message) as caught:
            flow.load_state_dict(legacy)
        assert 'start it afresh (`restore_checkpoint=False`, or a new `checkpoint_dir`)' in \
            str(caught.value)
    # not shuffled, the order was and is the row order: resumed at its row
    flow = shard_flow(DataFlow.arrays([np.arange(40)], 6), 2, 1)
    flow.load_state_dict({**legacy, 'start': {'epoch': 1, 'seed': None}})
    assert epoch(flow)[0] == [15, 16, 17]


def test_no_load_while_iterating():
    flow = shuffled(2, 0)
    state = flow.state_dict()
    it = iter(flow)
    next(it)
    with pytest.raises(RuntimeError, match=re.escape(
            '`load_state_dict()` cannot be called while the flow is iterated')):
        flow.load_state_dict(state)


def test_module_examples_run():
    result = doctest.testmod(sharding, extraglobs={'np': np, 'DataFlow': DataFlow,
                                                   'tf': pytest.importorskip('tensorflow')})
    assert result.attempted >= 4 and result.failed == 0


# ------------------------------------------------------------------ split_batch
@pytest.fixture(scope='module')
def split():
    return run_child('split_batch_mirrored.py', timeout=120.)


def test_split_batch_gives_each_replica_its_slice(split):
    assert split['types'] == ['PerReplica', 'PerReplica']
    assert split['x_parts'] == [[[0., 1.], [2., 3.], [4., 5.]], [[6., 7.], [8., 9.], [10., 11.]]]
    assert split['label_parts'] == [[0, 10, 20], [30, 40, 50]]
    assert [d.rsplit('/', 1)[-1] for d in split['devices']] == ['device:CPU:0', 'device:CPU:1']
    assert split['dtypes'] == ['float32', 'int64']
    # strategy.run receives them: the sums of each replica's slices
    assert split['run_sums'] == [[15., 51.], [30., 120.]]


def test_split_batch_of_a_sharded_flow(split):
    # worker 1 of 2, global batches of 8: rows 4-7 then 12-15, two rows a replica
    assert split['sharded_parts'] == [[[4, 5], [6, 7]], [[12, 13], [14, 15]]]


def test_split_batch_errors(split):
    assert split['err_odd'] == [
        'ValueError', '`batch` has 5 rows, which do not divide evenly among the 2 replicas of '
                      'this worker: use a per-worker batch size that is a positive multiple of 2']
    assert split['err_lengths'] == [
        'ValueError', '`batch` must hold arrays of the same length, got lengths [4, 6]']
    assert split['err_type'] == [
        'TypeError', '`batch` must be a tuple or list of arrays, got ndarray(shape=(4,), '
                     'dtype=float64)']
    assert split['err_empty'] == ['ValueError',
                                  '`batch` must hold at least one array, got an empty one']
    assert split['err_scalar'] == [
        'TypeError', '`batch[0]` must be an array of at least one dimension, got '
                     'np.float32(1.0)']
