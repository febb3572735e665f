"""A pruned trial of the command line reads as pruned, not as a crash: one line from its
loop and one from the search, no traceback."""

import os
import subprocess
import sys

import optuna

import tfsnippet as spt
from tfsnippet.search.core import open_study
from tfsnippet.search.space import Float

optuna.logging.set_verbosity(optuna.logging.WARNING)

SCRIPT = os.path.join(os.path.dirname(__file__), 'tiny_trial_script.py')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_pruned_trial_prints_one_line_and_no_traceback(tmp_path):
    root = str(tmp_path)
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(os.path.join(root, 'p.optuna-journal')))
    space = {'lr': Float(0.5, 0.9)}
    study = open_study('p', storage, 'valid_loss', 'minimize', space)
    # a finished trial far better at each epoch: the median pruner prunes the next at epoch 1
    study.add_trial(optuna.trial.create_trial(
        params={'lr': 0.5}, distributions={'lr': optuna.distributions.FloatDistribution(0.5, 0.9)},
        value=0.01, intermediate_values={1: 0.01, 2: 0.01}))
    cmd = [sys.executable, '-m', 'tfsnippet.search', '--root', root, '--study', 'p',
           '--trials', '2', '--space', 'lr=float:0.5:0.9', '--pruner', 'median:0:1',
           '--', SCRIPT]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                          stdin=subprocess.DEVNULL,
                          env={**os.environ, 'PYTHONPATH': REPO, 'LOOP': '1',
                               'TF_CPP_MIN_LOG_LEVEL': '3'})
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    trial = optuna.load_study(study_name='p', storage=storage).trials[1]
    assert trial.state.name == 'PRUNED'
    lr = trial.params['lr']
    assert 'Traceback' not in out and 'TrialPruned' not in out, out
    assert f'Trial 1 pruned at epoch 1, step 2 (valid_loss = {lr:.6g})' in done.stdout
    assert f'[search] trial 1 (p-t0001) pruned at epoch 1: valid_loss = {lr:.6g}' \
        in done.stdout
    row, = spt.results.query(root)
    assert (row.run_id, row.status, row.epoch) == ('p-t0001', 'pruned', 1)
