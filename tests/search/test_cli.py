"""python -m tfsnippet.search: a trial per process, preempted and resumed."""

import os
import re
import subprocess
import sys

import optuna
import pytest

import tfsnippet as spt
from tfsnippet.search.space import Categorical, Float, Int, parse_space_arg

SCRIPT = os.path.join(os.path.dirname(__file__), 'trial_script.py')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def search(root, *extra, env=None):
    cmd = [sys.executable, '-m', 'tfsnippet.search', '--root', root, '--study', 'cli',
           '--trials', '2', '--jobs', '2', '--space', 'optimizer.lr=float:0.01:0.05:log',
           '--space', 'batch_size=categorical:128,256', '--pruner', 'none', '--seed', '0',
           *extra, '--', SCRIPT]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL,
                          env={**os.environ, 'PYTHONPATH': REPO, 'TF_CPP_MIN_LOG_LEVEL': '3',
                               **(env or {})})


def test_cli_runs_trials_in_processes_and_resumes_a_preempted_one(tmp_path):
    root = str(tmp_path / 'runs')
    first = search(root, env={'PREEMPT_TRIAL': '1'})
    assert first.returncode == 143, first.stdout + first.stderr
    assert 'trial 1 (cli-t0001) preempted: left running' in first.stdout
    assert 'preempted: exiting with status 143; run the same command again' in first.stdout
    journal = os.path.join(root, 'cli.optuna-journal')
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(journal))
    study = optuna.load_study(study_name='cli', storage=storage)
    assert [t.state.name for t in study.trials] == ['COMPLETE', 'RUNNING'], \
        first.stdout[-4000:] + first.stderr[-4000:]

    again = search(root, env={'PREEMPT_TRIAL': '1'})
    assert again.returncode == 0, again.stdout + again.stderr
    assert 'resuming trial 1 of study \'cli\'' in again.stdout   # and no new trial
    assert 'trial 1 (cli-t0001, resumed)' in again.stdout
    with open(os.path.join(root, 'cli-t0001', 'console.log')) as f:
        console = f.read()
    assert "Resuming run 'cli-t0001'" in console
    preempted = re.search(r'Preempted by SIGTERM at epoch 1, step (\d+)', console)
    assert preempted, console
    assert f'Resume training: epoch 1, step {preempted[1]}' in console   # its checkpoint

    study = optuna.load_study(study_name='cli', storage=storage)
    assert [t.state.name for t in study.trials] == ['COMPLETE'] * 2
    rows = {r.run_id: r for r in spt.results.query(root)}
    assert sorted(rows) == ['cli-t0000', 'cli-t0001']   # no duplicate runs
    for t in study.trials:
        row = rows[f'cli-t{t.number:04d}']
        assert row.status == 'completed' and row.epoch == 3
        assert row.config['trial'] == {'study': 'cli', 'number': t.number}
        assert row.config['optimizer']['lr'] == t.params['optimizer.lr']
        assert row.config['batch_size'] == t.params['batch_size']
        assert row.best['valid_loss'] == pytest.approx(t.value)
    assert f'[search] best: trial {study.best_trial.number}' in again.stdout
    assert not os.path.exists(os.path.join(str(tmp_path), 'not-the-search-root'))


def test_cli_refuses_a_bad_space_or_a_changed_one(tmp_path):
    root = str(tmp_path)
    bad = search(root, '--space', 'hidden=int:8')
    assert bad.returncode == 2
    assert ("`--space` must be NAME=int:LOW:HIGH[:log], NAME=float:LOW:HIGH[:log] or "
            "NAME=categorical:A,B,C, got 'hidden=int:8'") in bad.stderr
    # a study made with another space (as a first run would have) is refused, naming it
    storage = optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(
        os.path.join(root, 'cli.optuna-journal')))
    from tfsnippet.search.core import open_study
    open_study('cli', storage, 'valid_loss', 'minimize', {'optimizer.lr': Float(0.01, 0.05)})
    changed = search(root)
    assert changed.returncode == 2
    assert ("another definition: space has no 'batch_size' (now type='categorical', "
            "choices=[128, 256]); space 'optimizer.lr' is type='float', low=0.01, high=0.05, "
            "step=None, log=False (now type='float', low=0.01, high=0.05, step=None, "
            "log=True)") in changed.stderr


def test_space_options():
    name, dim = parse_space_arg('lr=float:1e-4:1e-1:log')
    assert name == 'lr' and isinstance(dim, Float) and dim.describe() == {
        'type': 'float', 'low': 1e-4, 'high': 0.1, 'step': None, 'log': True}
    name, dim = parse_space_arg('units=int:8:64')
    assert isinstance(dim, Int) and (dim.low, dim.high, dim.log) == (8, 64, False)
    name, dim = parse_space_arg('act=categorical:relu,tanh,none,true,2,0.5')
    assert isinstance(dim, Categorical) and dim.choices == ['relu', 'tanh', None, True, 2, 0.5]
    for text in ('lr', 'lr=float:1', 'lr=float:1:2:lin', 'lr=normal:1:2', 'lr=int:a:2'):
        with pytest.raises(ValueError, match='`--space` must be NAME=int:LOW:HIGH'):
            parse_space_arg(text)


def test_pruner_options():
    from tfsnippet.search.core import make_pruner
    assert isinstance(make_pruner('median:2:1'), optuna.pruners.MedianPruner)
    assert isinstance(make_pruner('none'), optuna.pruners.NopPruner)
    assert isinstance(make_pruner('hyperband'), optuna.pruners.HyperbandPruner)
    for text in ('median:x', 'mean', 'none:1', 'median:1:2:3'):
        with pytest.raises(ValueError, match=r'`--pruner` must be median\[:WARMUP_STEPS'):
            make_pruner(text)


@pytest.mark.distributed
def test_cli_runs_each_trial_as_a_two_worker_job(tmp_path):
    root = str(tmp_path / 'runs')
    cmd = [sys.executable, '-m', 'tfsnippet.search', '--root', root, '--study', 'w2',
           '--trials', '1', '--workers', '2', '--space', 'optimizer.lr=float:0.01:0.05:log',
           '--pruner', 'none', '--seed', '0', '--',
           os.path.join(os.path.dirname(__file__), 'mwms_trial_script.py')]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL,
                          env={**os.environ, 'PYTHONPATH': REPO, 'TF_CPP_MIN_LOG_LEVEL': '3'})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert '[launch] starting 2 workers on 127.0.0.1' in out
    epochs = re.findall(r'\[worker (\d)\] \[Epoch (\d)/3', out)
    assert epochs == [('0', '1'), ('0', '2'), ('0', '3')]   # the chief prints, once
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(os.path.join(root, 'w2.optuna-journal')))
    trial, = optuna.load_study(study_name='w2', storage=storage).trials
    assert trial.state.name == 'COMPLETE'
    row, = spt.results.query(root)     # one run for the two workers
    assert (row.run_id, row.status, row.epoch) == ('w2-t0000', 'completed', 3)
    assert row.config['trial'] == {'study': 'w2', 'number': 0}
    assert row.best['valid_loss'] == pytest.approx(trial.value)
