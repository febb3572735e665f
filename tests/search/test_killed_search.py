"""A killed search: its trial's process dies with it, and a trial still run by a live
process is not resumed a second time."""

import os
import signal
import subprocess
import sys
import time

import optuna
import pytest

import tfsnippet as spt
from tfsnippet.search.processes import RunLock
from tests.search.digits import DigitsConfig

optuna.logging.set_verbosity(optuna.logging.WARNING)

SCRIPT = os.path.join(os.path.dirname(__file__), 'tiny_trial_script.py')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def search_command(root, trials=1):
    return [sys.executable, '-m', 'tfsnippet.search', '--root', root, '--study', 'k',
            '--trials', str(trials), '--space', 'lr=float:0.01:0.05', '--pruner', 'none',
            '--seed', '0', '--', SCRIPT]


def env(**extra):
    return {**os.environ, 'PYTHONPATH': REPO, **extra}


def wait_for(predicate, seconds, what):
    deadline = time.monotonic() + seconds
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f'no {what} within {seconds} s')
        time.sleep(0.05)


def alive(pid):
    """Whether `pid` runs (a zombie left for init to reap counts as gone)."""
    try:
        with open(f'/proc/{pid}/stat') as f:
            return f.read().rsplit(')', 1)[1].split()[0] != 'Z'
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='PR_SET_PDEATHSIG is Linux')
def test_sigkilled_search_leaves_no_trial_running_and_its_lock_free(tmp_path):
    root = str(tmp_path / 'runs')
    pidfile = str(tmp_path / 'trial.pid')
    search = subprocess.Popen(search_command(root), env=env(HANG_PIDFILE=pidfile),
                              stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    trial_pid = None
    try:
        wait_for(lambda: os.path.exists(pidfile), 120, 'trial process')
        with open(pidfile) as f:
            trial_pid = int(f.read())
        assert alive(trial_pid)
        search.kill()   # SIGKILL: no handler of the search runs
        search.wait(timeout=10)
        wait_for(lambda: not alive(trial_pid), 5, 'end of the trial process')
    finally:
        if search.poll() is None:
            search.kill()
        search.communicate(timeout=10)
        if trial_pid is not None and alive(trial_pid):   # the test failed: clean up
            os.kill(trial_pid, signal.SIGKILL)
    # the study has the trial running, its search dead, and the lock the trial's process
    # held is free: the next search resumes it (see the test below)
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(os.path.join(root, 'k.optuna-journal')))
    trial, = optuna.load_study(study_name='k', storage=storage).trials
    assert trial.state.name == 'RUNNING'
    assert trial.user_attrs['tfsnippet.trial']['pid'] == search.pid
    lock = RunLock(root, 'k-t0000')
    assert lock.holder() == trial_pid
    assert lock.acquire()
    lock.release()


def test_trial_whose_run_a_live_process_holds_is_not_resumed(tmp_path, capsys):
    root = str(tmp_path)
    search = spt.Search(DigitsConfig, {'optimizer.lr': spt.search.Float(1e-6, 0.1, log=True)},
                        metric='valid_loss', root=root, study='held',
                        pruner=optuna.pruners.NopPruner())
    dead = subprocess.Popen([sys.executable, '-c', 'pass'])
    dead.wait()
    # what a killed search left: a running trial, its search gone, but its trial's
    # process (no parent-death signal: not Linux, or the signal ignored) still writing
    trial = search.study.ask()
    trial.suggest_float('optimizer.lr', 1e-6, 0.1, log=True)
    trial.set_user_attr('tfsnippet.trial', {'run_id': 'held-t0000', 'token': 'x',
                                            'host': os.uname().nodename, 'pid': dead.pid})
    holder = RunLock(root, 'held-t0000')
    assert holder.acquire()
    holder.note(4242)
    try:
        search.optimize(lambda config: 0.5, n_trials=2)
    finally:
        holder.release()
    assert [t.state.name for t in search.study.trials] == ['RUNNING', 'COMPLETE']
    out = capsys.readouterr().out
    assert ("[search] trial 0 is still run by process 4242 (its run's lock "
            f"{os.path.join(root, '.tfsnippet-search', 'held-t0000.lock')} is held): "
            "not resumed") in out
    assert 'resuming trial 0' not in out
    # once that process is gone, the next search resumes it
    search.optimize(lambda config: 0.5, n_trials=2)
    assert [t.state.name for t in search.study.trials] == ['COMPLETE', 'COMPLETE']
    assert 'resuming trial 0 of study' in capsys.readouterr().out
