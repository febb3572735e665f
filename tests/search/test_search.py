"""spt.Search: trials as Experiment runs, pruned from the loop's epoch metric, resumed."""

import io
import os
import re
import signal
import subprocess
import sys

import optuna
import pytest

import tfsnippet as spt
from tfsnippet.results.cli import main as results_main
from tests.search.digits import DigitsConfig, train

optuna.logging.set_verbosity(optuna.logging.WARNING)

GOOD, BAD = 0.03, 1e-6   # Adam's learning rates: a good fit in 3 epochs, and no progress


def make_search(root, study='digits', space=None, pruner=None, **kwargs):
    space = space or {'optimizer.lr': spt.search.Float(1e-6, 0.1, log=True)}
    return spt.Search(DigitsConfig, space, metric='valid_loss', root=root, study=study,
                      pruner=pruner or optuna.pruners.MedianPruner(n_startup_trials=1),
                      **kwargs)


def test_study_of_six_trials_prunes_the_bad_ones_and_returns_the_best_run(tmp_path, capsys):
    root = str(tmp_path)
    search = make_search(root)
    # two jobs: trials 0 and 1 run together, so a bad trial (2 or later) starts once one
    # trial is complete, and the median pruner (1 startup trial) prunes it at epoch 1
    for lr in (GOOD, 0.01, BAD, 0.02, BAD, GOOD):
        search.study.enqueue_trial({'optimizer.lr': lr})
    best = search.optimize(train, n_trials=6, n_jobs=2)

    trials = search.study.get_trials()
    assert len(trials) == 6
    states = {t.number: t.state for t in trials}
    assert states[2] == states[4] == optuna.trial.TrialState.PRUNED
    assert all(s in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
               for s in states.values())
    # the best row is the trial Optuna calls best
    best_trial = search.study.best_trial
    assert best.run_id == f'digits-t{best_trial.number:04d}'
    assert best.best['valid_loss'] == pytest.approx(best_trial.value)
    assert best.config['trial'] == {'study': 'digits', 'number': best_trial.number}
    assert best.config['optimizer']['lr'] == best_trial.params['optimizer.lr']

    rows = {r.run_id: r for r in spt.results.query(root, where="config.trial.study = 'digits'",
                                                    order_by='config.trial.number')}
    assert len(rows) == 6
    for t in trials:
        row = rows[f'digits-t{t.number:04d}']
        assert row.config['trial']['number'] == t.number
        assert row.status == ('pruned' if t.state == optuna.trial.TrialState.PRUNED
                              else 'completed')
        if row.status == 'pruned':   # a checkpoint saved; the bad ones stopped early
            # (a middling trial may be pruned too, at any epoch: with two jobs, what it
            # is compared with depends on which trial completed first)
            assert row.epoch < 3 or t.number not in (2, 4)
            assert os.listdir(os.path.join(root, row.run_id, 'checkpoint'))
        else:
            assert row.epoch == 3
    out = capsys.readouterr().out
    assert re.search(r'Trial 2 pruned at epoch 1, step 10 \(valid_loss = [\d.]+\); saved '
                     r'checkpoint .*digits-t0002', out)

    # the results command line compares them: params, status and best value
    buf = io.StringIO()
    sys.stdout, saved = buf, sys.stdout
    try:
        results_main([root, 'compare', 'digits-t0000', 'digits-t0002'])
    finally:
        sys.stdout = saved
    text = buf.getvalue()
    assert 'optimizer.lr' in text and 'trial.number' in text and 'pruned' in text


def test_preempted_trial_is_resumed_from_its_checkpoint_as_the_same_trial(tmp_path, capsys):
    root = str(tmp_path)
    search = make_search(root, pruner=optuna.pruners.NopPruner())
    for lr in (GOOD, 0.01, 0.02):
        search.study.enqueue_trial({'optimizer.lr': lr})

    def train_marked(config):
        exp = spt.current_experiment()
        preempt = exp.run_id.endswith('t0001') and not exp.resumed

        def on_epoch(loop, epoch):
            if preempt and epoch == 1:   # what a scheduler sends
                os.kill(os.getpid(), signal.SIGTERM)
        return train(config, on_epoch)

    with pytest.raises(SystemExit) as caught:
        search.optimize(train_marked, n_trials=3)
    assert caught.value.code == 143
    # no new trial starts after a preemption (the third, enqueued, is still waiting)
    assert [t.state.name for t in search.study.trials] == ['COMPLETE', 'RUNNING', 'WAITING']
    out = capsys.readouterr().out
    assert 'trial 1 (digits-t0001) preempted: left running' in out

    again = make_search(root, pruner=optuna.pruners.NopPruner())   # the same study, re-run
    again.optimize(train_marked, n_trials=3)
    out = capsys.readouterr().out
    assert 'resuming trial 1 of study \'digits\'' in out
    assert f'Resuming run \'digits-t0001\' in {os.path.join(root, "digits-t0001")}' in out
    assert 'Resume training: epoch 1, step 10' in out
    assert [t.state.name for t in again.study.trials] == ['COMPLETE'] * 3
    rows = spt.results.query(root)
    assert sorted(r.run_id for r in rows) == ['digits-t0000', 'digits-t0001', 'digits-t0002']
    assert {r.status for r in rows} == {'completed'} and {r.epoch for r in rows} == {3}
    # the resumed trial kept its parameters and reported each epoch once
    trial = again.study.trials[1]
    assert trial.params['optimizer.lr'] == 0.01
    assert sorted(trial.intermediate_values) == [1, 2, 3]
    # re-running a finished study repeats nothing
    again.optimize(train_marked, n_trials=3)
    assert len(again.study.trials) == 3 and len(spt.results.query(root)) == 3


def test_trial_of_a_killed_search_is_resumed(tmp_path, capsys):
    root = str(tmp_path)
    search = make_search(root, pruner=optuna.pruners.NopPruner())
    dead = subprocess.Popen([sys.executable, '-c', 'pass'])
    dead.wait()
    trial = search.study.ask()   # what a killed search left: a running trial, a dead owner
    trial.suggest_float('optimizer.lr', 1e-6, 0.1, log=True)
    trial.set_user_attr('tfsnippet.trial', {'run_id': 'digits-t0000', 'token': 'x',
                                            'host': os.uname().nodename, 'pid': dead.pid})
    alive = search.study.ask()   # a trial another live process runs: left alone
    alive.set_user_attr('tfsnippet.trial', {'run_id': 'digits-t0001', 'token': 'y',
                                            'host': os.uname().nodename, 'pid': os.getppid()})
    search.optimize(lambda config: 0.5, n_trials=3)
    assert [t.state.name for t in search.study.trials] == ['COMPLETE', 'RUNNING', 'COMPLETE']
    assert 'resuming trial 0 of study' in capsys.readouterr().out


def test_bad_space_is_refused_before_any_trial(tmp_path):
    root = str(tmp_path)
    with pytest.raises(ValueError, match=r"`space` names the field 'optimizer.lrr', which the "
                                         r"section `optimizer` does not have; close matches: lr"):
        make_search(root, space={'optimizer.lrr': spt.search.Float(0.1, 1.)})
    with pytest.raises(ValueError, match=r"`space` names 'optimizer', a section: name one of "
                                         r"its fields \(optimizer.lr, optimizer.beta_1\)"):
        make_search(root, space={'optimizer': spt.search.Float(0.1, 1.)})
    with pytest.raises(TypeError, match=r"`space\['hidden'\]` must be an int, got 0.5 .*the "
                                        r"search space gives Float\(0.5, 2.0\)"):
        make_search(root, space={'hidden': spt.search.Float(0.5, 2.)})
    with pytest.raises(TypeError, match=r"`space\['hidden'\]` must be spt.search.Int, Float or "
                                        r"Categorical, got \[1, 2\]"):
        make_search(root, space={'hidden': [1, 2]})
    with pytest.raises(ValueError, match=r'`low` must be <= `high`, got low=3, high=1'):
        spt.search.Int(3, 1)
    with pytest.raises(ValueError, match=r'`log=True` needs `low` > 0'):
        spt.search.Float(0., 1., log=True)
    with pytest.raises(ValueError, match=r'`choices` must not repeat a value'):
        spt.search.Categorical([32, 32])
    assert not os.listdir(root)   # nothing made


def test_bad_metric_is_refused(tmp_path):
    root = str(tmp_path)
    with pytest.raises(TypeError, match=r'`metric` must be the name of a metric'):
        spt.Search(DigitsConfig, {'hidden': spt.search.Int(8, 16)}, metric='', root=root)
    with pytest.raises(ValueError, match=r"`direction` must be 'minimize' or 'maximize', "
                                         r"got 'min'"):
        spt.Search(DigitsConfig, {'hidden': spt.search.Int(8, 16)}, metric='valid_loss',
                   direction='min', root=root)
    # a metric no run records: the first trial fails and the search stops, naming what it has
    search = spt.Search(DigitsConfig, {'hidden': spt.search.Int(8, 16)}, metric='valid_los',
                        root=root, study='typo')

    def record_loss(config):
        spt.current_experiment().results.update(valid_loss=1.)

    with pytest.raises(RuntimeError, match=r"The run 'typo-t0000' recorded no `valid_los`, "
                                           r"the search's `metric`: it recorded \['valid_loss'\]"
                                           r"; close matches: valid_loss"):
        search.optimize(record_loss, n_trials=3)
    assert [t.state.name for t in search.study.trials] == ['FAIL']


def test_changed_definition_is_refused_naming_the_difference(tmp_path):
    root = str(tmp_path)
    make_search(root, space={'optimizer.lr': spt.search.Float(1e-4, 0.1, log=True)})
    with pytest.raises(ValueError, match=re.escape(
            "The study 'digits' was made with another definition: space has no 'hidden' (now "
            "type='int', low=8, high=16, step=1, log=False); space 'optimizer.lr' is "
            "type='float', low=0.0001, high=0.1, step=None, log=True (now type='float', "
            "low=0.001, high=0.1, step=None, log=True). Continue it with its own definition")):
        make_search(root, space={'optimizer.lr': spt.search.Float(1e-3, 0.1, log=True),
                                 'hidden': spt.search.Int(8, 16)})
    with pytest.raises(ValueError, match=r"another definition: metric 'valid_loss' \(now "
                                         r"'loss'\); direction 'minimize' \(now 'maximize'\)"):
        spt.Search(DigitsConfig, {'optimizer.lr': spt.search.Float(1e-4, 0.1, log=True)},
                   metric='loss', direction='maximize', root=root, study='digits')
    # the same definition continues it
    assert make_search(root, space={'optimizer.lr': spt.search.Float(1e-4, 0.1, log=True)})


def test_import_tfsnippet_imports_no_optuna():
    code = ('import sys, tfsnippet as spt; assert "optuna" not in sys.modules; '
            'spt.search.Int; assert "optuna" in sys.modules; '
            'assert "tensorflow" not in sys.modules; print("ok")')
    done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          env={**os.environ, 'PYTHONPATH': os.getcwd()})
    assert done.stdout.strip() == 'ok', done.stderr


def test_an_object_store_root_is_refused_not_taken_for_a_local_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"`root` must be a local folder .* got the URL "
                                         r"'s3://bucket/runs'"):
        spt.Search(DigitsConfig, {'hidden': spt.search.Int(8, 16)}, metric='valid_loss',
                   root='s3://bucket/runs')
    from tfsnippet.search.cli import main as search_main
    with pytest.raises(SystemExit) as info:
        search_main(['--root', 'memory://bucket/runs', '--study', 's', '--trials', '1',
                     '--space', 'hidden=int:8:16', '--', 'script.py'])
    assert info.value.code == 2
    assert not os.listdir(tmp_path)   # no local folder named after the URL
