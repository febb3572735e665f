"""The trial's loop component: reports each epoch, prunes at the epoch's end (or, under
several workers, at the sync point where the chief's decision is agreed)."""

import os

import numpy as np
import pytest

import tfsnippet as spt
from tests.scaffold.test_loop_strategy import FakeTwoWorkerBackend
from tfsnippet.experiment.experiment import add_run_plugin, remove_run_plugin
from tfsnippet.search import TrialPruned
from tfsnippet.search.trial import TrialPlugin, TrialReporter


class FakeTrial:
    """Records what is reported; says prune from epoch `prune_at` on."""

    def __init__(self, prune_at=None, number=7):
        self.number = number
        self.prune_at = prune_at
        self.reports = []

    def report(self, value, step):
        self.reports.append((step, round(value, 6)))

    def should_prune(self):
        return self.prune_at is not None and self.reports[-1][0] >= self.prune_at


class NoStudy:
    """The trial of a worker that is not the chief: must never be called."""

    number = 7

    def report(self, value, step):
        raise AssertionError('a worker that is not the chief reported to the study')

    should_prune = report


def test_loop_in_a_trial_reports_each_epoch_and_is_pruned(tmp_path, style):
    trial = FakeTrial(prune_at=2)
    plugin = TrialPlugin(trial, 'st', 7, 'valid_loss', str(tmp_path), 'st-t0007')
    add_run_plugin(plugin)
    lines = []
    try:
        with pytest.raises(TrialPruned, match='pruned at epoch 2'):
            with spt.Experiment(DigitsLike, root='elsewhere', args=[], tee=False,
                                hparams=False) as exp:
                var = style.variable(0., 'w')
                add = style.updater(var, 1.)
                loss = style.computed(lambda x: 10. - x)
                with spt.TrainLoop([var], max_epoch=5, print_func=lines.append) as loop:
                    for _ in loop.iter_epochs():
                        for _ in loop.iter_steps(range(3)):
                            add()
                        loop.collect_metrics(valid_loss=loss(style.value(var)))
                        loop.print_logs()
    finally:
        remove_run_plugin(plugin)
    assert exp.run_dir == os.path.join(str(tmp_path), 'st-t0007')   # the trial's root and run
    assert exp.status == 'pruned'
    assert trial.reports == [(1, 7.), (2, 4.)]
    assert lines[-1] == (f'Trial 7 pruned at epoch 2, step 6 (valid_loss = 4); saved checkpoint '
                         f'{os.path.join(exp.run_dir, "checkpoint", "checkpoint.dat-6")}')
    row = spt.results.query(str(tmp_path))[0]
    assert (row.status, row.epoch, row.config['trial']) == ('pruned', 2,
                                                            {'study': 'st', 'number': 7})


class DigitsLike(spt.Config):
    lr = 0.1


class FakeTwoWorkers(FakeTwoWorkerBackend):
    """Worker `index` of 2 (2 replicas in all): its 'all-reduce' adds the chief's vectors,
    recorded by the chief's run (`chief_vectors`), to its own: the sum over the two workers."""

    def __init__(self, index, chief_vectors):
        super().__init__(index)
        self.vectors = chief_vectors

    num_replicas = property(lambda self: 2)

    def all_reduce_sum(self, array):
        array = np.asarray(array, dtype=np.float64)
        if self.is_chief:
            self.vectors.append(array.copy())
            return array
        return array + self.vectors.pop(0)


def run_worker(index, trial, vectors):
    from tfsnippet.scaffold.loop.distribution import LoopDistribution
    lines, steps = [], []
    with pytest.raises(TrialPruned):
        with spt.TrainLoop(max_epoch=4, print_func=lines.append) as loop:
            # the fake strategy, then the component that registers its decision with it
            loop._dist = LoopDistribution(loop, FakeTwoWorkers(index, vectors), loop.clock,
                                          loop._iter.stop)
            loop.distribution.sync_steps = 4
            reporter = TrialReporter(trial, 'valid_loss')
            loop.add_component(reporter)
            try:
                for epoch in loop.iter_epochs():
                    for step, _ in loop.iter_steps(range(10)):
                        steps.append(step)
                    loop.collect_metrics(valid_loss=float(epoch))
            finally:
                loop.distribution.detach()
    assert reporter.pruned and 'prune' in loop.decisions.names
    return steps, lines


def test_under_two_workers_only_the_chief_asks_and_all_prune_at_the_same_step():
    vectors = []
    trial = FakeTrial(prune_at=1, number=3)
    chief_steps, chief_lines = run_worker(0, trial, vectors)
    # the chief's decision after epoch 1 is agreed at the next sync point: 4 steps into
    # epoch 2 (`sync_steps`), where the loop stops
    assert trial.reports == [(1, 1.)]
    assert chief_steps[-1] == 14
    assert chief_lines[-1] == 'Trial 3 pruned at epoch 2, step 14 (valid_loss = 1)'
    worker_steps, worker_lines = run_worker(1, NoStudy(), vectors)
    assert worker_steps == chief_steps
    assert worker_lines[-1] == 'Trial 7 pruned at epoch 2, step 14 (valid_loss = 1)'
    assert not vectors   # both took part in the same sync points
