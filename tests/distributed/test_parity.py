"""The same data on any topology: one sequence of global batches, whatever runs it.

A shuffled ``DataFlow.arrays(..., random_state=seed)`` gives the same global
batches, in the same order, iterated alone (no strategy), sharded for one
worker of several replicas (``MirroredStrategy``) and for each of N workers
(``MultiWorkerMirroredStrategy``), each worker taking its consecutive slice
of every global batch; a position saved on one topology resumes on another
with the rest of the same epoch.

The first part runs in this process, on the flows and on a strategy
backend's data path (``OneDeviceStrategy`` standing in for worker ``k`` of
``N``).  The last test (marked ``distributed``) trains the digits example
two epochs without a strategy, under ``MirroredStrategy`` on two logical
CPUs and as two ``MultiWorkerMirroredStrategy`` workers started by
``python -m tfsnippet.launch`` on 127.0.0.1, and compares the printed epoch
metrics and the final weights.
"""

from __future__ import annotations

import re
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.distributed.scripts._run import ROOT, _communicate
from tfsnippet.dataflows import DataFlow, shard_flow

N, GLOBAL_BATCH, SEED = 50, 8, 7


def rows(batch):
    return np.asarray(batch[0]).tolist()


def global_batches(flows, epochs=1):
    """The global batches of `epochs` epochs of the workers' `flows`, each the
    concatenation of the workers' batches of one step."""
    out = []
    for _ in range(epochs):
        per_worker = [[rows(b) for b in f] for f in flows]
        assert len({len(w) for w in per_worker}) == 1   # the same number of steps everywhere
        out.extend(sum(step, []) for step in zip(*per_worker))
    return out


def alone(random_state=SEED, n=N, skip_incomplete=True):
    return DataFlow.arrays([np.arange(n)], GLOBAL_BATCH, shuffle=True,
                           skip_incomplete=skip_incomplete, random_state=random_state)


def reference(epochs, **kwargs):
    """The batches of the flow iterated alone, with no strategy."""
    flow = alone(**kwargs)
    return [rows(b) for _ in range(epochs) for b in flow]


# ------------------------------------------------------------------ the flows
@pytest.mark.parametrize('workers', [1, 2, 4])
def test_every_topology_serves_the_global_batches_of_the_flow_alone(workers):
    flows = [shard_flow(alone(), workers, k) for k in range(workers)]
    assert global_batches(flows, 3) == reference(3)
    # and they are those of `random_state=SEED`, drawn independently here
    rng = np.random.RandomState(SEED)
    first = rng.permutation(N).tolist()
    assert reference(1)[:2] == [first[:8], first[8:16]]


def test_a_seed_given_to_the_sharding_is_the_random_state_of_the_flow_alone():
    flows = [shard_flow(alone(random_state=None), 2, k, seed=SEED) for k in range(2)]
    assert global_batches(flows, 2) == reference(2)


def test_one_worker_follows_any_generator_of_the_flow():
    # a Generator, or a flow already one epoch on: the sharded flow goes on from its state
    for make in (lambda: np.random.default_rng(3), lambda: np.random.RandomState(3)):
        plain, source = alone(random_state=make()), alone(random_state=make())
        for flow in (plain, source):
            list(flow)
        sharded = shard_flow(source, 1, 0)
        assert global_batches([sharded], 2) == [rows(b) for _ in range(2) for b in plain]
        assert sharded.epoch_order(2)[:8].tolist() == global_batches([sharded])[0]


def test_the_source_flow_is_not_moved():
    source = alone()
    shard_flow(source, 2, 0)
    list(shard_flow(source, 2, 1))
    assert [rows(b) for b in source] == reference(1)


@pytest.mark.parametrize('saved_on, resumed_on', [(None, 2), (2, None), (2, 4), (None, 1)])
def test_a_mid_epoch_position_resumes_the_same_rows_on_another_topology(saved_on, resumed_on):
    def make(workers):
        if workers is None:
            return [alone(random_state=99)]   # the position carries the random state
        return [shard_flow(alone(random_state=99), workers, k, seed=99)
                for k in range(workers)]

    expected = reference(3)          # epochs 0-2 of the flow alone, uninterrupted
    per_epoch = N // GLOBAL_BATCH
    saver = (alone() if saved_on is None
             else shard_flow(alone(), saved_on, 0))   # the chief saves
    list(saver)                      # epoch 0
    running = iter(saver)
    for _ in range(2):               # 2 steps of epoch 1, then the job is killed
        next(running)
    state = saver.state_dict()
    running.close()
    resumed = make(resumed_on)
    for flow in resumed:
        flow.load_state_dict(state)
    rest = global_batches(resumed, 2)
    assert rest == expected[per_epoch + 2:]


def test_a_position_of_another_kind_of_generator_is_refused():
    # a Generator's position (PCG64) given to a flow sharded with an int seed (RandomState)
    saver = alone(random_state=np.random.default_rng(1))
    next(iter(saver))
    with pytest.raises(ValueError, match=re.escape(
            "The saved position is of a flow shuffled by the 'PCG64' bit generator, this one "
            "shuffles with 'MT19937': its order of rows would differ")):
        shard_flow(alone(random_state=None), 2, 0, seed=1).load_state_dict(saver.state_dict())


# ------------------------------------------------------------------ a strategy backend
class WorkerBackend(spt.backend.DistributedBackend):
    """A strategy backend that says it is worker `index` of `workers` (one
    replica each); the chief's broadcast gives `chief_value` when set."""

    def __init__(self, workers, index, chief_value=None):
        super().__init__(tf.distribute.OneDeviceStrategy('/cpu:0'))
        self._workers, self._index, self._chief_value = workers, index, chief_value

    num_workers = property(lambda self: self._workers)
    worker_index = property(lambda self: self._index)
    num_replicas = property(lambda self: self._workers)

    def broadcast_from_chief(self, value):
        return float(value if self._chief_value is None else self._chief_value)


def no_seed(flow):
    raise AssertionError('the flow has an int seed: no other is drawn')


@pytest.mark.parametrize('workers', [1, 2])
def test_the_backend_gives_each_worker_its_slice_of_the_same_global_batch(workers):
    flows = [WorkerBackend(workers, k).distribute_data(alone(), no_seed)
             for k in range(workers)]
    assert global_batches(flows, 2) == reference(2)


def test_the_backend_seeds_a_flow_without_an_int_seed_from_seed_of():
    asked = []

    def seed_of(flow):
        asked.append(flow)
        return SEED

    flows = [WorkerBackend(2, k).distribute_data(alone(random_state=None), seed_of)
             for k in range(2)]
    assert len(asked) == 2 and global_batches(flows, 2) == reference(2)
    # one worker needs no agreement: the flow's own generator goes on
    source = alone(random_state=np.random.RandomState(5))
    one = WorkerBackend(1, 0).distribute_data(source, no_seed)
    assert global_batches([one]) == reference(1, random_state=5)


def test_the_backend_warns_of_a_dropped_remainder_and_of_another_seed_than_the_chiefs():
    with pytest.warns(UserWarning, match=re.escape(
            'has 50 rows, 2 more than its full global batches of 8: under a strategy the last, '
            'smaller batch of each epoch is dropped')):
        WorkerBackend(1, 0).distribute_data(alone(skip_incomplete=False), no_seed)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        WorkerBackend(1, 0).distribute_data(alone(), no_seed)
    with pytest.warns(UserWarning, match=re.escape(
            'on worker 1 was made with `random_state=3`, the chief\'s with 7: every worker takes '
            'the chief\'s order of rows')):
        flow = WorkerBackend(2, 1, chief_value=SEED).distribute_data(alone(3), no_seed)
    chief = WorkerBackend(2, 0).distribute_data(alone(), no_seed)
    assert global_batches([chief, flow], 1) == reference(1)


# ------------------------------------------------------------------ a TrainLoop
def train_rows(style, strategy, flow, checkpoint_dir, stop_at=None):
    """The rows of each step of a TrainLoop of 3 epochs (checkpoints every 3 steps),
    interrupted after step `stop_at`; a new run of the program in `style`."""
    seen = []
    with style.new_run():
        with (strategy or tf.distribute.get_strategy()).scope():
            v = style.variable(0., 'v')
        try:
            with spt.TrainLoop([v], max_epoch=3, strategy=strategy,
                               print_func=lambda line: None, checkpoint_step_freq=3,
                               checkpoint_dir=str(checkpoint_dir)) as loop:
                for _ in loop.iter_epochs():
                    for step, batch in loop.iter_steps(flow):
                        seen.append(rows(batch))
                        if step == stop_at:
                            raise KeyboardInterrupt()
        except KeyboardInterrupt:
            pass
    return seen


def test_a_loop_saved_with_or_without_a_strategy_resumes_on_the_other_with_the_same_rows(
        style, tmp_path):
    strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
    expected = train_rows(style, None, alone(), tmp_path / 'whole')
    assert expected == reference(3)
    assert train_rows(style, strategy, alone(), tmp_path / 'sharded') == expected
    for name, first, then in (('a', None, strategy), ('b', strategy, None)):
        before = train_rows(style, first, alone(), tmp_path / name, stop_at=10)  # saved at 9
        after = train_rows(style, then, alone(), tmp_path / name)
        assert len(before) == 10 and len(after) == len(expected) - 9
        assert before[:9] + after == expected


# ------------------------------------------------------------------ the digits MLP
EPOCHS = 2
TIMEOUT = 240.   # a guard against a hung run, not an expected duration (~15 s here)
EXAMPLE = str(ROOT / 'examples' / 'digits_distributed.py')
METRICS = ('loss', 'valid loss', 'valid acc')


def epoch_means(lines, prefix=''):
    """``[{metric: printed mean}]`` of the epoch lines (those starting with `prefix`)."""
    out = []
    for line in lines:
        if line.startswith(prefix + '[Epoch '):
            found = dict(re.findall(r'(\w[\w ]*?): ([-\d.e+]+)', line))
            out.append({name: float(found[name]) for name in METRICS})
    return out


def weights_of(folder):
    with np.load(folder / 'weights.npz') as data:
        return [data[f'arr_{i}'] for i in range(len(data.files))]


@pytest.mark.distributed
def test_digits_train_alike_without_strategy_on_two_replicas_and_on_two_workers(tmp_path):
    pytest.importorskip('sklearn', reason='the example needs scikit-learn (`pip install '
                                          '".[test]"`)')
    common = ['--epochs', str(EPOCHS), '--patience', '0', '--seed', '42']
    commands = {
        'none': [sys.executable, EXAMPLE, '--strategy', 'none'],
        'mirrored': [sys.executable, EXAMPLE, '--strategy', 'mirrored', '--replicas', '2'],
        'workers': [sys.executable, '-m', 'tfsnippet.launch', '--workers', '2', EXAMPLE,
                    '--strategy', 'multiworker'],
    }
    with ThreadPoolExecutor(len(commands)) as pool:
        futures = {name: pool.submit(_communicate, [*command, *common, '--output-dir',
                                                    str(tmp_path / name)], TIMEOUT)
                   for name, command in commands.items()}
        done = {name: f.result() for name, f in futures.items()}
    for name, (code, out, err) in done.items():
        assert code == 0, f'{name} exited with {code}:\n{out[-3000:]}\n{err[-5000:]}'
    printed = {name: epoch_means(done[name][1].splitlines(),
                                 '[worker 0] ' if name == 'workers' else '')
               for name in commands}
    assert len(printed['none']) == EPOCHS, done['none'][1]
    weights = {name: weights_of(tmp_path / name) for name in commands}
    for name in ('mirrored', 'workers'):
        assert len(printed[name]) == EPOCHS, done[name][1]
        for got, expected in zip(printed[name], printed['none']):
            for metric in METRICS:
                assert got[metric] == pytest.approx(expected[metric], rel=1e-4), (name, metric)
        for got, expected in zip(weights[name], weights['none']):
            np.testing.assert_allclose(got, expected, rtol=0, atol=1e-5)
    # two replicas in one process and two workers of one replica: bitwise the same
    for got, expected in zip(weights['workers'], weights['mirrored']):
        np.testing.assert_array_equal(got, expected)
    # and they trained: far from the first steps' weights
    assert max(float(np.max(np.abs(w))) for w in weights['none']) > 0.1
