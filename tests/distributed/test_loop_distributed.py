"""TrainLoop under tf.distribute: the same loop on one device, two replicas and two workers.

Each strategy runs in a child process (``scripts/``), all three at once in
threads, each bounded in time: MirroredStrategy on two logical CPUs
(``mirrored_loop.py``, which also runs the same job on one device),
MultiWorkerMirroredStrategy with two workers started by the launcher
(``mwms_loop.py``) and ParameterServerStrategy with in-process servers
(``ps_loop.py``).  The expected values are the one-device run of the same
global batches, and sums computed here from the data.
"""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.distributed.scripts._run import run_child, run_workers
from tests.helpers import read_scalars

pytestmark = pytest.mark.distributed

CHILD_TIMEOUT = 150.   # seconds; the children take 10-25 s here


@pytest.fixture(scope='module')
def children(tmp_path_factory):
    mirrored_dir = tmp_path_factory.mktemp('mirrored')
    mwms_dir = tmp_path_factory.mktemp('mwms')
    output: list[str] = []
    with ThreadPoolExecutor(3) as pool:
        yield {
            'mirrored': pool.submit(run_child, 'mirrored_loop.py', str(mirrored_dir),
                                    timeout=CHILD_TIMEOUT),
            'ps': pool.submit(run_child, 'ps_loop.py', timeout=CHILD_TIMEOUT, retry_crash=True),
            'mwms': pool.submit(run_workers, 'mwms_loop.py', 2, CHILD_TIMEOUT, (str(mwms_dir),),
                                output),
            'mwms_output': output,
            'mirrored_dir': mirrored_dir,
            'mwms_dir': mwms_dir,
        }


@pytest.fixture(scope='module')
def mirrored(children):
    return children['mirrored'].result()


@pytest.fixture(scope='module')
def workers(children):
    return children['mwms'].result()


@pytest.fixture(scope='module')
def ps(children):
    return children['ps'].result()


def means(line):
    """``{name: mean}`` of a printed line (``name: mean (±std)`` parts)."""
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r'(\w[\w ]*?): ([-\d.e+]+)(?: \(±[^)]*\))?(?:;|$| \()',
                                 line)}


# ------------------------------------------------------------------ MirroredStrategy
def test_mirrored_prints_and_trains_as_one_device(mirrored):
    # the same global batches, the same lines (mean and spread) and the same weights
    assert mirrored['two_seen'] == mirrored['one_seen']
    assert mirrored['two_lines'] == mirrored['one_lines']
    for a, b in zip(mirrored['two_weights'], mirrored['one_weights']):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)
    assert mirrored['roles'] == [True, 2, 'MirroredStrategy']
    assert mirrored['optimizer_iterations'] == 10   # one per global step: built in scope
    assert len(mirrored['one_seen']) == 10 and all(len(b) == 8 for b in mirrored['one_seen'])


def test_mirrored_summaries_equal_one_device(mirrored, children):
    one = read_scalars(children['mirrored_dir'] / 'one_summary', in_step_order=False)
    two = read_scalars(children['mirrored_dir'] / 'two_summary', in_step_order=False)
    for tag in ('metrics/loss', 'metrics/hits'):
        assert [s for s, _ in two[tag]] == list(range(1, 11))
        assert [v for _, v in two[tag]] == pytest.approx([v for _, v in one[tag]], rel=1e-5)


def test_mirrored_early_stopping_restores_the_best(mirrored):
    snapshots = mirrored['es_snapshots']
    assert mirrored['es_final'] == snapshots[1]    # valid_loss 3, 1, 2: the second epoch
    assert snapshots[2] != snapshots[1]


def test_mirrored_resume_mid_epoch_continues_exactly(mirrored):
    assert mirrored['resumed_lines'][0].startswith('Resume training: epoch 2, step 6, ')
    # the interrupted epoch goes on from step 7 with the batches of the full run
    assert mirrored['resumed_seen'] == mirrored['full_seen'][6:]
    assert mirrored['resumed_weights'] == mirrored['full_weights']
    assert mirrored['cut_weights_at_interrupt'] != mirrored['full_weights']
    assert mirrored['resumed_iterations'] == 15
    assert mirrored['built_by_the_loop'] is True
    assert mirrored['full_lines'][-1] == mirrored['resumed_lines'][-1]


def test_mirrored_bad_input(mirrored):
    kind, message = mirrored['err_outside']
    assert kind == 'ValueError'
    assert '`param_vars`' in message and 'outside `strategy.scope()`' in message
    assert "'sequential_" in message and 'stray_dense/kernel' in message
    kind, message = mirrored['err_too_small']
    assert kind == 'ValueError'
    assert 'has 6 rows, less than one global batch of 8 rows' in message
    assert '4 for each of 2 replicas' in message
    kind, message = mirrored['err_not_divisible']
    assert kind == 'ValueError' and 'batches of 7 rows' in message and '2 replicas' in message
    kind, message = mirrored['err_per_replica']
    assert kind == 'TypeError'
    assert 'Metric `loss` is a per-replica value (PerReplica of 2 replicas' in message
    assert 'pass `strategy=`' in message and 'strategy.reduce(' in message


def test_mirrored_trainer_and_evaluator_take_the_strategy_from_the_loop(mirrored):
    assert mirrored['trainer_weights'] == mirrored['two_weights']
    one = [means(line) for line in mirrored['one_lines']]
    got = [means(line) for line in mirrored['trainer_lines'][1:]]
    # the step returns each replica's share of the global loss; the default reduction is
    # the mean of the replicas' values: half the global loss with two replicas
    assert [g['loss'] for g in got] == pytest.approx([o['loss'] / 2 for o in one], rel=1e-5)
    # the evaluator's per-replica mean squared errors, averaged: the MSE over the data
    rng = np.random.RandomState(0)
    x = rng.randn(44, 3)[:40]
    y = x @ np.array([1., -2., .5]) + 0.3
    kernel, bias = (np.asarray(w) for w in mirrored['trainer_weights'])
    mse = float(np.mean((x @ kernel + bias - y) ** 2))
    assert mirrored['evaluator_result']['valid_loss'] == pytest.approx(mse, rel=1e-4)
    assert got[-1]['valid loss'] == pytest.approx(mse, rel=1e-4)


# ------------------------------------------------------------------ MultiWorkerMirrored
def test_multi_worker_statistics_equal_one_process(workers, mirrored, children):
    chief, other = workers
    assert chief['roles'] == [True, 2, 0, 2] and other['roles'] == [False, 2, 1, 2]
    output = children['mwms_output']
    printed = [line for line in output if line.startswith('[worker 0] [Epoch')]
    assert [line for line in output if line.startswith('[worker 1] [')] == []
    one = [means(line) for line in mirrored['one_lines']]
    got = [means(line) for line in printed[:2]]
    assert [g['loss'] for g in got] == pytest.approx([o['loss'] for o in one], rel=1e-5)
    assert [g['hits'] for g in got] == pytest.approx([o['hits'] for o in one], rel=1e-5)
    for a, b in zip(chief['stats_weights'], mirrored['one_weights']):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert chief['stats_weights'] == other['stats_weights']


def test_multi_worker_only_the_chief_writes(workers, children):
    chief, other = workers
    assert chief['stats_writes'] >= 1 and other['stats_writes'] == 0
    assert other['writes'] == 0
    events = list((children['mwms_dir'] / 'summary').glob('events.out.tfevents.*'))
    assert len(events) == 1 and events[0].name.split('.')[-2] == str(chief['pid'])
    listed = sorted(p.name for p in (children['mwms_dir'] / 'stats' / 'checkpoint').iterdir())
    assert 'checkpoint.dat-10' in listed


def test_multi_worker_summaries_hold_the_merged_statistics(workers, mirrored, children):
    # the chief writes the means printed (merged across the workers) at the print steps
    scalars = read_scalars(children['mwms_dir'] / 'summary', in_step_order=False)
    one = [means(line) for line in mirrored['one_lines']]
    for tag, name in (('metrics/loss', 'loss'), ('metrics/hits', 'hits')):
        assert [s for s, _ in scalars[tag]] == [5, 10]
        assert [v for _, v in scalars[tag]] == pytest.approx([o[name] for o in one], rel=1e-5)


def test_multi_worker_stop_on_one_worker_ends_both_at_the_same_step(workers):
    chief, other = workers
    # worker 1 asks at step 7; the sync point 2 steps after that of the end of epoch 1
    # (step 5) agrees at step 7
    assert chief['stop'][0] == other['stop'][0] == 7
    assert other['stop'][1] == 'asked on worker 1'
    assert chief['stop'][1] == 'stop requested by another worker'
    # the validation metric is averaged over the workers: one decision, one restore
    assert chief['stop'][2] == other['stop'][2] == 1.125
    assert chief['stop_weights'] == other['stop_weights']
    assert chief['stop_lines'][:2] == other['stop_lines'][:2]
    assert 'valid loss: 1.125' in chief['stop_lines'][1]


def test_multi_worker_epoch_print_carries_the_sync_point(workers):
    # 5 steps an epoch, one print at its end: the sync point of the epoch rides on the
    # print's all-reduce (the earlier loops of the strategy agreed on the metric names,
    # so the first epoch spends no more)
    for worker in workers:
        assert worker['counted'] == [1, 1, 1]
        # a sync point every 2 steps since the last one: steps 2 and 4, then the
        # print at 5; 7 and 9, then 10; ... (no second one at the end of the epoch)
        assert worker['counted2'] == [3, 3, 3]


def test_multi_worker_stop_around_the_epoch_print(workers):
    chief, other = workers
    # asked on worker 1 before the print of epoch 2: agreed by that print, both end there
    assert chief['stop_before_print'][:2] == other['stop_before_print'][:2] == [2, 10]
    assert other['stop_before_print'][2] == 'asked before the print'
    assert chief['stop_before_print'][2] == 'stop requested by another worker'
    # asked after the print of epoch 1: waits for the next sync point, the end of epoch 2
    assert chief['stop_after_print'][:2] == other['stop_after_print'][:2] == [2, 10]
    assert other['stop_after_print'][2] == 'asked after the print'
    assert chief['stop_after_print'][2] == 'stop requested by another worker'
    for worker in workers:   # no collective of its own for the stop (the names are known)
        assert worker['stop_before_print'][3] == worker['stop_after_print'][3] == [1, 1]


def test_multi_worker_resume_mid_epoch_continues_exactly(workers):
    for worker in workers:
        assert worker['resumed_seen'] == worker['full_seen'][6:]
        assert worker['resumed_weights'] == worker['full_weights']
    # the workers read disjoint halves of every global batch
    chief, other = workers
    for a, b in zip(chief['full_seen'], other['full_seen']):
        assert not set(a) & set(b)


# ------------------------------------------------------------------ ParameterServer
def test_parameter_server_remote_metrics_and_step_counter(ps):
    x = np.arange(12, dtype=np.float64).reshape(4, 3)
    batch_means = x.mean(axis=1)
    expected = f'loss: {batch_means.mean():g} (±{batch_means.std():g})'
    assert ps['lines'] == [expected, expected]
    assert ps['batches'] == x.tolist() * 2       # the batches, unchanged, on the coordinator
    assert ps['step'] == 8 and ps['count'] == 8.
    assert ps['total'] == 2 * x.sum()
    assert ps['is_chief'] is True


def test_parameter_server_step_loop_waits_for_its_steps(ps):
    # read right after each epoch's step loop: the variables hold all its updates
    x = np.arange(12, dtype=np.float64)
    assert ps['after_steps'] == [[4., x.sum()], [8., 2 * x.sum()]]


def test_parameter_server_without_coordinator(ps):
    kind, message = ps['err_no_coordinator']
    assert kind == 'ValueError'
    assert '`coordinator` is required with a ParameterServerStrategy' in message


def test_multi_worker_time_schedule_reads_the_chief_clock(workers):
    # the workers' clocks advance 4 s and 7 s a step; `checkpoint_secs=10` reads the
    # chief's, agreed at the sync points (steps 2, 4, the print of step 5, 7, 9, ...;
    # a save sees the clock agreed at the step before): the same saves on both, 5 (at
    # 16 s), 8 (28 s); 10 is the save at the end
    chief, other = workers
    assert chief['timed_save_steps'] == other['timed_save_steps'] == [5, 8, 10]


def test_multi_worker_preemption_of_one_worker_stops_both(workers):
    # SIGTERM to worker 1 at step 3: both save at the sync point of step 4 and exit 143
    for worker in workers:
        assert worker['preempted'] == ['TrainingPreempted', 143, [4]]


def test_multi_worker_refuses_workers_resuming_different_checkpoints(workers):
    # worker 1 finds a checkpoint (of step 15) in its `checkpoint_dir`, the chief none
    chief, other = workers
    assert other['err_mismatch'].startswith(
        'The workers resumed from different checkpoints (this worker, 1: the checkpoint of '
        'step 15; the chief: no checkpoint): every worker must read the same `checkpoint_dir`')
    assert chief['err_mismatch'].startswith(
        'The workers resumed from different checkpoints (this worker, 0: no checkpoint; '
        'the chief: no checkpoint)')


def test_multi_worker_loss_guard_and_reduce_on_plateau_decide_alike(workers):
    # valid_loss 1.0, 1.2, 1.4 on the chief and 0.5 more on worker 1: worker 1 alone would
    # trip the guard (threshold 1.4) at epoch 1; the mean across workers does at epoch 2,
    # where reduce-on-plateau (patience 1) halves the learning rate too, on both
    chief, other = workers
    assert chief['decided'] == other['decided']
    epoch, step, reason, lr = chief['decided']
    assert (epoch, step) == (2, 10)
    assert reason == '`valid_loss` is 1.45, above the threshold 1.4 at epoch 2, step 10'
    assert lr == pytest.approx(0.025)
