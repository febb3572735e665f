"""A seeded search run again draws new points: the trials already in the study move the
sampler's seed, and the same history still gives the same points."""

import os
import subprocess
import sys

import optuna
import pytest

import tfsnippet as spt
from tests.search.digits import DigitsConfig

optuna.logging.set_verbosity(optuna.logging.WARNING)

SCRIPT = os.path.join(os.path.dirname(__file__), 'tiny_trial_script.py')
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SPACE = {'optimizer.lr': spt.search.Float(1e-6, 0.1, log=True)}


def lrs(search):
    return [t.params['optimizer.lr'] for t in search.study.trials]


def test_search_continued_with_the_same_seed_draws_new_points(tmp_path):
    first = spt.Search(DigitsConfig, SPACE, metric='valid_loss', root=str(tmp_path / 'a'),
                       seed=0)
    first.optimize(lambda config: 0.5, n_trials=2)
    again = spt.Search(DigitsConfig, SPACE, metric='valid_loss', root=str(tmp_path / 'a'),
                       seed=0)
    again.optimize(lambda config: 0.5, n_trials=4)
    drawn = lrs(again)
    assert len(set(drawn)) == 4, drawn   # trials 2 and 3 repeat neither 0 nor 1
    # reproducible: the same seed and the same history draw the same points
    other = spt.Search(DigitsConfig, SPACE, metric='valid_loss', root=str(tmp_path / 'b'),
                       seed=0)
    other.optimize(lambda config: 0.5, n_trials=2)
    spt.Search(DigitsConfig, SPACE, metric='valid_loss', root=str(tmp_path / 'b'),
               seed=0).optimize(lambda config: 0.5, n_trials=4)
    assert lrs(other) == drawn


def test_seed_and_sampler_are_refused_together(tmp_path):
    with pytest.raises(ValueError, match=r'Give `sampler` or `seed`, not both: `seed` seeds a '
                                         r'TPE sampler, got sampler=<optuna'):
        spt.Search(DigitsConfig, SPACE, metric='valid_loss', root=str(tmp_path), seed=0,
                   sampler=optuna.samplers.RandomSampler())
    with pytest.raises(TypeError, match=r"`seed` must be an int, got '0'"):
        spt.Search(DigitsConfig, SPACE, metric='valid_loss', root=str(tmp_path), seed='0')
    assert not os.listdir(tmp_path)


def test_cli_run_again_with_the_same_seed_draws_new_points(tmp_path):
    root = str(tmp_path)

    def run(trials):
        cmd = [sys.executable, '-m', 'tfsnippet.search', '--root', root, '--study', 's',
               '--trials', str(trials), '--space', 'lr=float:0.0001:0.1:log', '--seed', '0',
               '--', SCRIPT]
        # the trials record no run (they fail), which is enough: their points were drawn
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                              stdin=subprocess.DEVNULL,
                              env={**os.environ, 'PYTHONPATH': REPO, 'NO_RUN': '1'})
        assert done.returncode == 0, done.stdout + done.stderr

    run(2)
    run(4)
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(os.path.join(root, 's.optuna-journal')))
    drawn = [t.params['lr'] for t in optuna.load_study(study_name='s', storage=storage).trials]
    assert len(drawn) == 4 and len(set(drawn)) == 4, drawn
