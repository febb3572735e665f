"""The distributed digits example end to end: same weights, a killed worker, one writer.

``examples/digits_distributed.py`` runs as users run it: alone, or as a
local cluster started by ``tfsnippet/launch.py`` on 127.0.0.1.  The runs
start together (they are mostly TensorFlow's start-up and the workers'
handshake) and each is bounded by a timeout; the tests then read what the
runs printed and wrote:

* without a strategy (``--strategy none``) the same training code trains;
* two workers (``MultiWorkerMirroredStrategy``) and two replicas in one
  process (``MirroredStrategy`` on two logical CPUs) end with the weights of
  one replica training on the same global batches, to 1e-5 (the gradients
  of the replicas are summed in another order than one replica sums them);
* a worker killed with ``SIGKILL`` in the middle of an epoch: the launcher
  restarts both, they resume from the step checkpoint, and the run ends with
  bitwise the weights of the run that was never interrupted (seeds and
  ``enable_op_determinism``; the all-reduce of two workers adds the same two
  numbers in the same order every time);
* only the chief prints the epoch lines and writes files: every task has a
  run folder of its own, and worker 1's stays empty;
* with parameter servers, the coordinator runs the loop, counts the steps
  and alone prints and writes; the workers and the server only serve.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.distributed.scripts._run import LAUNCH_PY, ROOT, SCRIPTS, _env

pytest.importorskip('sklearn', reason='the example needs scikit-learn (`pip install ".[test]"`)')
pytestmark = pytest.mark.distributed

EXAMPLE = ROOT / 'examples' / 'digits_distributed.py'
OWN_FOLDER = SCRIPTS / 'digits_own_folder.py'
EPOCHS = 3
STEPS_PER_EPOCH = 33     # 1,078 training digits in global batches of 32, remainder dropped
CHECKPOINT_STEPS = 20
KILL_AT_STEP = 50        # in epoch 2, ten steps after the checkpoint of step 40
COMMON = ['--epochs', str(EPOCHS), '--patience', '0', '--seed', '42']
TIMEOUT = 240.           # a guard against a hung run, not an expected duration


class Run:
    """One command, started at once; :meth:`wait` bounds it and keeps its output.

    With `server` (the session's ``fork_server``) a one-process run is forked from it,
    its output going to files; a launch (its own tasks' processes) is started anew."""

    def __init__(self, args: list[str], server: Any = None):
        self.args = [sys.executable, *args]
        self.files: list[Any] = []
        if server is None:
            self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True, env=_env(),
                                         cwd=str(ROOT), start_new_session=True)
        else:
            self.files = [tempfile.TemporaryFile('w+'), tempfile.TemporaryFile('w+')]
            self.proc = server.start(args, cwd=ROOT, env=_env(), stdout=self.files[0],
                                     stderr=self.files[1])
        self.out = self.err = ''
        self.code: int | None = None

    def _wait_forked(self) -> None:
        timed_out = []
        guard = threading.Timer(TIMEOUT, lambda: (timed_out.append(1), self.proc.kill()))
        guard.start()
        try:
            self.code = self.proc.wait()
        finally:
            guard.cancel()
        self.out, self.err = (self._read(f) for f in self.files)
        if timed_out:
            self.code = -1
            pytest.fail(f'{self} ran over {TIMEOUT} s:\n{self.report()}')

    @staticmethod
    def _read(f: Any) -> str:
        f.seek(0)
        text = f.read()
        f.close()
        return text

    def wait(self) -> Run:
        if self.code is None and self.files:
            self._wait_forked()
        if self.code is None:
            try:
                self.out, self.err = self.proc.communicate(timeout=TIMEOUT)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGTERM)   # the launcher stops its tasks
                try:
                    self.out, self.err = self.proc.communicate(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                    self.out, self.err = self.proc.communicate()
                self.code = -1
                pytest.fail(f'{self} ran over {TIMEOUT} s:\n{self.report()}')
            self.code = self.proc.returncode
        assert self.code == 0, f'{self} exited with {self.code}:\n{self.report()}'
        return self

    def kill(self) -> None:
        if self.files:
            if self.code is None:
                self.proc.kill()
                self.proc.wait()
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.communicate()

    def lines(self, task: str | None = None) -> list[str]:
        """Its standard output; of one task (``'worker 0'``) of a launch, without the prefix."""
        lines = self.out.splitlines()
        if task is None:
            return lines
        prefix = f'[{task}] '
        return [line[len(prefix):] for line in lines if line.startswith(prefix)]

    def report(self) -> str:
        return f'stdout:\n{self.out[-4000:]}\nstderr:\n{self.err[-6000:]}'

    def __str__(self) -> str:
        return ' '.join(map(str, self.args[1:]))


def launch(workers: int, *args: object) -> list[str]:
    return [str(LAUNCH_PY), '--workers', str(workers), *map(str, args)]


@pytest.fixture(scope='module')
def runs(tmp_path_factory, fork_server):
    """Every run of the module, started together; ``{name: (Run, run folder)}``; the
    one-process runs forked from the session's server."""
    tmp = tmp_path_factory.mktemp('digits')
    specs = {
        # no strategy at all: the same training code on TensorFlow's default strategy
        'none': ([str(EXAMPLE), '--strategy', 'none'], tmp / 'none'),
        # one replica: the reference
        'one': ([str(EXAMPLE), '--strategy', 'mirrored', '--replicas', '1'], tmp / 'one'),
        'mirrored': ([str(EXAMPLE), '--strategy', 'mirrored', '--replicas', '2'],
                     tmp / 'mirrored'),
        # two workers, each with a run folder of its own
        'two': (launch(2, OWN_FOLDER, tmp / 'two', '--strategy', 'multiworker',
                       '--checkpoint-steps', CHECKPOINT_STEPS), tmp / 'two' / 'worker0'),
        # parameter servers: a chief (the coordinator), two workers, one ps
        'ps': (launch(2, '--ps', 1, OWN_FOLDER, tmp / 'ps', '--strategy', 'ps'),
               tmp / 'ps' / 'chief0'),
        # the same, worker 1 killed after step KILL_AT_STEP, one folder for both
        'killed': (launch(2, '--max-restarts', 1, '--grace-period', 2, EXAMPLE,
                          '--strategy', 'multiworker', '--checkpoint-steps', CHECKPOINT_STEPS,
                          '--kill-worker-at-step', KILL_AT_STEP), tmp / 'killed'),
    }
    started = {}
    try:
        for name, (args, folder) in specs.items():
            if name in ('none', 'one', 'mirrored', 'killed'):
                args = [*args, '--output-dir', str(folder)]
            one_process = name in ('none', 'one', 'mirrored')
            started[name] = (Run([*args, *COMMON], fork_server if one_process else None),
                             folder)
        yield started
    finally:
        for run, _ in started.values():
            run.kill()


def finished(runs, name):
    run, folder = runs[name]
    return run.wait(), folder


def weights(folder: Path) -> list[np.ndarray]:
    with np.load(folder / 'weights.npz') as data:
        return [data[f'arr_{i}'] for i in range(len(data.files))]


def max_difference(a: list[np.ndarray], b: list[np.ndarray]) -> float:
    assert [w.shape for w in a] == [w.shape for w in b]
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))


def epoch_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if re.match(r'\[Epoch \d+/\d+', line)]


# ------------------------------------------------------------------- tests
def test_the_same_code_trains_without_a_strategy(runs):
    none, folder = finished(runs, 'none')
    assert len(epoch_lines(none.lines())) == EPOCHS, none.report()
    result = json.loads((folder / 'result.json').read_text())
    assert (result['strategy'], result['replicas']) == ('none', 1)
    # the default strategy does not shard: the last, smaller batch is dropped by the flow
    assert result['steps_run'] == EPOCHS * STEPS_PER_EPOCH
    assert result['test_accuracy'] > 0.7, result
    assert len(weights(folder)) == 6   # kernels and biases of the three layers


@pytest.mark.parametrize('name', ['two', 'mirrored'])
def test_two_replicas_reach_the_weights_of_one_with_the_same_global_batch(runs, name):
    one, one_folder = finished(runs, 'one')
    run, folder = finished(runs, name)
    reference, trained = weights(one_folder), weights(folder)
    result = json.loads((folder / 'result.json').read_text())
    assert result['steps_run'] == EPOCHS * STEPS_PER_EPOCH
    assert result['replicas'] == 2
    difference = max_difference(reference, trained)
    assert difference <= 1e-5, f'{name}: max |difference| {difference:.3g}'
    # they trained: far from the weights of a step or two
    assert max(float(np.max(np.abs(w))) for w in trained) > 0.1
    assert abs(result['best_valid_loss']
               - json.loads((one_folder / 'result.json').read_text())['best_valid_loss']) < 1e-4


def test_a_worker_killed_mid_epoch_is_restarted_and_the_run_ends_as_if_never_killed(runs):
    killed, killed_folder = finished(runs, 'killed')
    _, two_folder = finished(runs, 'two')
    launcher_lines = [line for line in killed.err.splitlines() if line.startswith('[launch]')]
    assert any(re.fullmatch(r'\[launch\] worker \d .*; restarting all tasks '
                            r'\(restart 1 of 1\)', line) for line in launcher_lines), \
        killed.report()
    assert launcher_lines[-1] == '[launch] finished: all tasks succeeded after 1 restart'
    chief = killed.lines('worker 0')
    resumed = [line for line in chief if line.startswith('Resume training')]
    assert len(resumed) == 1, chief
    assert f'step {KILL_AT_STEP // CHECKPOINT_STEPS * CHECKPOINT_STEPS}' in resumed[0]
    result = json.loads((killed_folder / 'result.json').read_text())
    assert result['steps_run'] == EPOCHS * STEPS_PER_EPOCH
    for got, expected in zip(weights(killed_folder), weights(two_folder)):
        np.testing.assert_array_equal(got, expected)   # bitwise


def test_only_the_chief_prints_and_writes(runs):
    two, chief_folder = finished(runs, 'two')
    chief = two.lines('worker 0')
    assert len(epoch_lines(chief)) == EPOCHS, chief
    assert any(line.startswith('test accuracy: ') for line in chief)
    assert two.lines('worker 1') == []
    for name in ('result.json', 'weights.npz'):
        assert (chief_folder / name).is_file()
    assert any((chief_folder / 'checkpoints').rglob('*'))
    assert any((chief_folder / 'tensorboard').rglob('*'))
    other = chief_folder.parent / 'worker1'
    left = [str(p) for p in other.rglob('*') if p.is_file()] if other.exists() else []
    assert left == []


def test_parameter_servers_train_and_only_the_coordinator_prints_and_writes(runs):
    ps, chief_folder = finished(runs, 'ps')
    chief = ps.lines('chief 0')
    assert len(epoch_lines(chief)) == EPOCHS, chief
    result = json.loads((chief_folder / 'result.json').read_text())
    # the steps are counted on the coordinator, whatever the workers' optimizers count
    assert result['steps_run'] == EPOCHS * STEPS_PER_EPOCH
    assert result['test_accuracy'] > 0.7, result   # it learned (chance is 0.1)
    for task in ('worker 0', 'worker 1', 'ps 0'):
        assert ps.lines(task) == [], task
        folder = chief_folder.parent / task.replace(' ', '')
        assert not folder.exists() or not [p for p in folder.rglob('*') if p.is_file()]
