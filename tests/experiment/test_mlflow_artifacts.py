"""An Experiment mirrored to MLflow: each new best at its step, and the run's files as
artifacts (config, console log, results, the exported best weights)."""

from __future__ import annotations

import os

import pytest

mlflow = pytest.importorskip('mlflow', reason='the MLflow mirror needs MLflow')

import keras  # noqa: E402
import numpy as np  # noqa: E402

import tfsnippet as spt  # noqa: E402
from tfsnippet.experiment.mlflow_mirror import MlflowMirror  # noqa: E402

VALID = {1: 0.5, 2: 0.6, 3: 0.2, 4: 0.3}   # new bests at epochs 1 and 3


class Cfg(spt.Config):
    max_epoch = 4


def test_best_values_at_each_improvement_and_the_run_files_as_artifacts(
        tmp_path, monkeypatch, fake_clock):
    (tmp_path / 'cwd').mkdir()
    monkeypatch.chdir(tmp_path / 'cwd')
    uri = f'sqlite:///{tmp_path / "mlflow.db"}'
    mirror = MlflowMirror(uri, 'artifacts')
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    with spt.Experiment(Cfg, tmp_path / 'runs', name='a', args=[], mlflow=mirror,
                        hparams=False, flush_secs=1e9) as exp:   # no flush by time
        with spt.TrainLoop(model.trainable_variables, max_epoch=exp.config.max_epoch,
                           clock=fake_clock, print_func=print, checkpoint_keep_best=True,
                           export_best=str(tmp_path / 'best.weights.h5'),
                           checkpoint_save_objects={'model': model}) as loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(2)):
                    loop.collect_metrics(loss=1.)
                loop.collect_metrics(valid_loss=VALID[epoch])
                loop.print_logs()
        loop.collect_results(test_loss=0.25)

    client = mlflow.MlflowClient(uri)
    run_id = mirror.mlflow_run_id
    best = sorted((m.step, m.value) for m in client.get_metric_history(run_id, 'best_valid_loss'))
    assert best == [(2, 0.5), (6, pytest.approx(0.2))]   # the steps of epochs 1 and 3
    files = sorted(a.path for a in client.list_artifacts(run_id))
    assert files == ['best.weights.h5', 'config.json', 'console.log', 'result.json']
    local = client.download_artifacts(run_id, 'console.log', str(tmp_path / 'dl'))
    with open(local, encoding='utf-8') as f:
        assert 'Results: test loss: 0.25' in f.read()
    assert os.listdir(tmp_path / 'mlruns')   # beside the SQLite database, not in the cwd
    assert os.listdir(tmp_path / 'cwd') == []
    weights = client.download_artifacts(run_id, 'best.weights.h5', str(tmp_path / 'dl'))
    assert os.path.getsize(weights) == os.path.getsize(tmp_path / 'best.weights.h5')
    assert np.isfinite(model.layers[0].kernel.numpy()).all()
