"""The MLflow mirror against a real MLflow tracking store (SQLite in a temporary folder)."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

mlflow = pytest.importorskip('mlflow', reason='the MLflow mirror needs MLflow '
                                               '(`pip install ".[test]"`)')

from tfsnippet.experiment.mlflow_mirror import (CHANGED_TAG_PREFIX, INSTALL_HINT,  # noqa: E402
                                                RUN_FILE, RUN_ID_TAG, STATUS_TAG, MlflowMirror,
                                                mlflow_mirror_of)
from tests.helpers import FakeClock  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


START = 1_700_000_000.   # the fake clocks' time at the start


@pytest.fixture(scope='module')
def uri(tmp_path_factory):
    """One tracking store for the module: creating one runs MLflow's migrations (seconds)."""
    path = tmp_path_factory.mktemp('mlflow') / 'store' / 'mlflow.db'   # `store/` is created
    uri = f'sqlite:///{path}'
    saved = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    yield uri
    mlflow.set_tracking_uri(saved)


@pytest.fixture
def experiment(request):
    """An MLflow experiment name of this test's own."""
    return f'test-{request.node.name}'


@pytest.fixture
def client(uri):
    return mlflow.MlflowClient(uri)


def search(experiment, filter_string=''):
    return mlflow.search_runs(experiment_names=[experiment], filter_string=filter_string,
                              output_format='list')


def history(client, run_id, key):
    return [(m.step, m.value) for m in sorted(client.get_metric_history(run_id, key),
                                              key=lambda m: (m.step, m.timestamp))]


def run_sweep_member(uri, experiment, run_id, lr, losses, clock=None):
    mirror = MlflowMirror(uri, experiment, clock=clock or FakeClock(START))
    mirror.start(run_id, f'lr={lr}', {'optimizer': {'lr': lr, 'name': 'adam'}, 'epochs': 3},
                 {'host': 'node-1'})
    for epoch, loss in enumerate(losses, 1):
        mirror.log_epoch(step=10 * epoch, epoch=epoch, metrics={'valid_loss': loss,
                                                                'loss': loss + 0.1})
    mirror.log_best({'valid_loss': min(losses)})
    mirror.log_results({'test_acc': 1. - losses[-1]})
    mirror.finish('completed')
    return mirror


# ------------------------------------------------------------- what is mirrored
def test_run_params_metrics_results_and_status_read_back(uri, experiment, client):
    clock = FakeClock(START)
    mirror = MlflowMirror(uri, experiment, tags={'team': 'vision'}, clock=clock)
    mirror.start('run-1', 'baseline',
                 {'optimizer': {'lr': 0.001, 'betas': [0.9, 0.99]}, 'batch_size': 32,
                  'use_bn': True, 'note': None},
                 {'host': 'node-1', 'git_commit': 'abc123', 'argv': ['train.py', '--x'],
                  'note': None})
    for epoch, (loss, acc) in enumerate([(0.9, 0.6), (0.5, 0.8), (0.4, 0.85)], 1):
        clock.now += 60.
        mirror.log_epoch(step=34 * epoch, epoch=epoch,
                         metrics={'valid_loss': loss, 'valid_acc': acc})
    mirror.log_best({'valid_loss': 0.4})
    mirror.log_results({'test_acc': 0.87})
    mirror.finish('completed')

    (run,) = search(experiment)
    assert run.info.run_id == mirror.mlflow_run_id
    assert run.info.run_name == 'baseline'
    assert run.info.status == 'FINISHED'
    assert run.info.end_time == int(clock.now * 1000)
    assert run.data.params == {'optimizer.lr': '0.001', 'optimizer.betas': '[0.9, 0.99]',
                               'batch_size': '32', 'use_bn': 'True', 'note': 'None'}
    tags = run.data.tags
    assert tags[RUN_ID_TAG] == 'run-1'
    assert tags[STATUS_TAG] == 'completed'
    assert tags['team'] == 'vision'
    assert tags['tfsnippet.host'] == 'node-1'
    assert tags['tfsnippet.argv'] == '["train.py", "--x"]'
    assert 'tfsnippet.note' not in tags
    assert tags['mlflow.source.git.commit'] == 'abc123'
    assert run.data.metrics == {'valid_loss': 0.4, 'valid_acc': 0.85, 'epoch': 3.,
                                'best_valid_loss': 0.4, 'test_acc': 0.87}

    assert history(client, run.info.run_id, 'valid_loss') == [(34, 0.9), (68, 0.5), (102, 0.4)]
    assert history(client, run.info.run_id, 'epoch') == [(34, 1.), (68, 2.), (102, 3.)]
    assert [m.timestamp for m in client.get_metric_history(run.info.run_id, 'valid_acc')] == \
        [int((1_700_000_000. + 60. * i) * 1000) for i in (1, 2, 3)]
    assert history(client, run.info.run_id, 'test_acc') == [(102, 0.87)]


def test_search_runs_on_metrics_and_params(uri, experiment):
    for i, lr in enumerate([0.1, 0.01, 0.001]):
        run_sweep_member(uri, experiment, f'sweep-{i}', lr, [0.9, 0.5 + lr, 0.3 + lr])

    found = search(experiment, "metrics.valid_loss < 0.35 and params.`optimizer.lr` = '0.01'")
    assert [r.data.tags[RUN_ID_TAG] for r in found] == ['sweep-1']
    found = search(experiment, 'metrics.test_acc > 0.65')
    assert sorted(r.data.tags[RUN_ID_TAG] for r in found) == ['sweep-1', 'sweep-2']
    found = search(experiment, "tags.`tfsnippet.status` = 'completed'")
    assert len(found) == 3


@pytest.mark.parametrize('status,mlflow_status', [('failed', 'FAILED'),
                                                  ('preempted', 'KILLED')])
def test_final_status(uri, experiment, status, mlflow_status):
    mirror = MlflowMirror(uri, experiment)
    mirror.start('r', 'r', {}, {})
    (run,) = search(experiment)
    assert (run.info.status, run.data.tags[STATUS_TAG]) == ('RUNNING', 'running')
    mirror.finish(status)
    (run,) = search(experiment)
    assert (run.info.status, run.data.tags[STATUS_TAG]) == (mlflow_status, status)


def test_an_epoch_is_one_request_and_limits_split_batches(uri, experiment, client,
                                                          monkeypatch):
    mirror = MlflowMirror(uri, experiment)
    calls = []
    real_log_batch = mirror.client.log_batch

    def counting_log_batch(run_id, metrics=(), params=(), tags=()):
        calls.append((len(metrics), len(params), len(tags)))
        return real_log_batch(run_id, metrics=metrics, params=params, tags=tags)

    monkeypatch.setattr(mirror.client, 'log_batch', counting_log_batch)
    config = {f'section{i // 50}': {f'field{j}': j for j in range(50)} for i in range(0, 250, 50)}
    mirror.start('big', 'big', config, {})
    # 250 params + 3 tags (run id, status, run name): requests of at most 100 of them
    assert calls == [(0, 100, 0), (0, 100, 0), (0, 50, 3)]
    calls.clear()
    mirror.log_epoch(step=1, epoch=1, metrics={'loss': 1., 'valid_loss': 2.})
    assert calls == [(3, 0, 0)]    # loss, valid_loss and epoch
    calls.clear()
    # an Experiment's flush: three epochs and the best value, one request
    mirror.log_epochs([(2, 2, {'loss': 0.9}), (3, 3, {'loss': 0.8}), (4, 4, {'loss': 0.7})],
                      {'valid_loss': 1.5})
    assert calls == [(7, 0, 0)]
    calls.clear()
    mirror.log_epochs([], None)
    assert calls == []
    mirror.log_results({f'm{i}': float(i) for i in range(1500)})
    assert calls == [(1000, 0, 0), (500, 0, 0)]
    mirror.finish('completed')

    run = client.get_run(mirror.mlflow_run_id)
    assert history(client, mirror.mlflow_run_id, 'loss') == [(1, 1.), (2, .9), (3, .8), (4, .7)]
    assert history(client, mirror.mlflow_run_id, 'best_valid_loss') == [(4, 1.5)]
    assert len(run.data.params) == 250
    assert run.data.params['section4.field49'] == '49'
    assert run.data.metrics['m1499'] == 1499.


# ---------------------------------------------------------------------- resume
def test_resume_continues_the_same_mlflow_run(uri, experiment, client):
    config = {'optimizer': {'lr': 0.01}, 'epochs': 4}
    first = MlflowMirror(uri, experiment)
    first.start('r-resume', 'resumable', config, {'host': 'a'})
    assert not first.resumed
    first.log_epoch(step=10, epoch=1, metrics={'valid_loss': 0.8})
    first.log_epoch(step=20, epoch=2, metrics={'valid_loss': 0.6})
    first.log_best({'valid_loss': 0.6})
    first.finish('preempted')
    (run,) = search(experiment)
    assert run.info.status == 'KILLED'

    # a new process: another mirror, the same tfsnippet run id
    second = MlflowMirror(uri, experiment)
    second.start('r-resume', 'resumable', config, {'host': 'b'})
    assert second.resumed
    assert second.mlflow_run_id == first.mlflow_run_id
    (run,) = search(experiment)
    assert (run.info.status, run.data.tags[STATUS_TAG]) == ('RUNNING', 'running')
    assert run.data.tags['tfsnippet.host'] == 'b'
    # resumed from the checkpoint of step 15: epoch 2 is replayed, then goes on
    second.log_epoch(step=20, epoch=2, metrics={'valid_loss': 0.61})
    second.log_epoch(step=30, epoch=3, metrics={'valid_loss': 0.5})
    second.log_best({'valid_loss': 0.5})
    second.finish('completed')

    (run,) = search(experiment)
    assert run.info.status == 'FINISHED'
    assert run.data.params == {'optimizer.lr': '0.01', 'epochs': '4'}
    assert history(client, run.info.run_id, 'valid_loss') == [(10, 0.8), (20, 0.6), (30, 0.5)]
    assert history(client, run.info.run_id, 'best_valid_loss') == [(20, 0.6), (30, 0.5)]
    assert run.data.metrics['best_valid_loss'] == 0.5


def test_resume_with_a_changed_param_keeps_it_and_tags_the_new_value(uri, experiment, client):
    first = MlflowMirror(uri, experiment)
    first.start('r-changed', 'changed', {'lr': 0.1, 'max_epoch': 2}, {})
    first.finish('preempted')

    second = MlflowMirror(uri, experiment)   # resumed with a larger --max_epoch, a new field
    second.start('r-changed', 'changed', {'lr': 0.1, 'max_epoch': 5, 'seed': 7}, {})
    second.finish('completed')
    run = client.get_run(second.mlflow_run_id)
    assert run.data.params == {'lr': '0.1', 'max_epoch': '2', 'seed': '7'}
    assert run.data.tags[f'{CHANGED_TAG_PREFIX}max_epoch'] == '5'
    assert not any(k.startswith(CHANGED_TAG_PREFIX) and k != f'{CHANGED_TAG_PREFIX}max_epoch'
                   for k in run.data.tags)


def test_runs_of_other_experiments_are_not_resumed(uri, experiment):
    a = MlflowMirror(uri, f'{experiment}-a')
    a.start('same-id', 'x', {}, {})
    a.finish('completed')
    b = MlflowMirror(uri, f'{experiment}-b')
    b.start('same-id', 'x', {}, {})
    b.finish('completed')
    assert not b.resumed
    assert a.mlflow_run_id != b.mlflow_run_id
    assert a.experiment_id != b.experiment_id


STARTER = """
import sys
from tfsnippet.experiment.mlflow_mirror import MlflowMirror
mirror = MlflowMirror(sys.argv[1], 'together')
mirror.start(sys.argv[2], sys.argv[2], {'lr': float(sys.argv[3])}, {})
mirror.log_epoch(step=1, epoch=1, metrics={'valid_loss': float(sys.argv[3])})
mirror.finish('completed')
"""


def test_runs_starting_together_on_a_new_sqlite_store(tmp_path):
    uri = f'sqlite:///{tmp_path}/new/mlflow.db'
    env = {'PYTHONPATH': str(REPO), 'PATH': '/usr/bin:/bin'}
    procs = [subprocess.Popen([sys.executable, '-c', STARTER, uri, f'r{i}', str(i)], cwd=tmp_path,
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True) for i in range(3)]
    try:
        outputs = [proc.communicate(timeout=120)[0] for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert [proc.returncode for proc in procs] == [0, 0, 0], '\n'.join(outputs)
    client = mlflow.MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name('together').experiment_id])
    assert sorted((r.data.tags[RUN_ID_TAG], r.info.status, r.data.metrics['valid_loss'])
                  for r in runs) == [('r0', 'FINISHED', 0.), ('r1', 'FINISHED', 1.),
                                     ('r2', 'FINISHED', 2.)]


# ---------------------------------------------------------------- bad input
def test_calls_before_start_fail(uri, experiment):
    mirror = MlflowMirror(uri, experiment)
    with pytest.raises(RuntimeError, match=r'^`MlflowMirror.log_epoch` called before `start`$'):
        mirror.log_epoch(step=1, epoch=1, metrics={'loss': 1.})
    with pytest.raises(RuntimeError, match=r'^`MlflowMirror.finish` called before `start`$'):
        mirror.finish('completed')


def test_bad_arguments(uri, experiment):
    with pytest.raises(TypeError, match=r'^`tracking_uri` must be a str \(e.g. '
                                        r'"sqlite:///mlflow.db"\) or None, got 5 \(int\)$'):
        MlflowMirror(5)   # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^`experiment_name` must not be empty, got ' '$"):
        MlflowMirror(uri, ' ')
    mirror = MlflowMirror(uri, experiment)
    with pytest.raises(TypeError, match=r'^`config` must be a mapping, got \[1\] \(list\)$'):
        mirror.start('r', 'r', [1], {})   # type: ignore[arg-type]
    mirror.start('r', 'r', {}, {})
    with pytest.raises(TypeError, match=r"^`metrics`\['loss'\] must be a number, got "
                                        r"'high' \(str\)$"):
        mirror.log_epoch(step=1, epoch=1, metrics={'loss': 'high'})   # type: ignore[dict-item]
    with pytest.raises(TypeError, match=r"^`step` must be an int, got 1.5 \(float\)$"):
        mirror.log_epoch(step=1.5, epoch=1, metrics={})   # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^`status` must be one of \['completed', 'failed', "
                                         r"'preempted', 'pruned'\], got 'running' \(str\)$"):
        mirror.finish('running')
    mirror.finish('failed')


def test_without_mlflow_the_error_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, 'mlflow', None)   # `import mlflow` now fails
    with pytest.raises(ImportError, match=r'^MlflowMirror needs MLflow, which is not '
                                          r'installed: pip install "tfsnippet\[mlflow\]"$'):
        MlflowMirror('sqlite:///unused.db')
    assert INSTALL_HINT == 'pip install "tfsnippet[mlflow]"'

    import tfsnippet as spt

    class Small(spt.Config):
        lr = 0.1

    # the Experiment fails when it is made, before any run directory exists
    with pytest.raises(ImportError, match=r'^MlflowMirror needs MLflow, which is not '
                                          r'installed: pip install "tfsnippet\[mlflow\]"$'):
        spt.Experiment(Small, tmp_path / 'runs', args=[], mlflow='sqlite:///m.db')
    assert not (tmp_path / 'runs').exists()
    assert spt.Experiment(Small, tmp_path / 'runs', args=[], mlflow=None).config.lr == 0.1


def test_the_experiment_package_does_not_import_mlflow():
    code = ('import sys, tfsnippet.experiment, tfsnippet.experiment.mlflow_mirror, '
            'tfsnippet.results; print("mlflow" in sys.modules)')
    out = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True,
                         text=True, timeout=120, env={'PYTHONPATH': str(REPO),
                                                      'PATH': '/usr/bin:/bin'})
    assert out.stdout.strip() == 'False', out.stderr


def test_the_mlflow_argument_of_experiment(uri, tmp_path):
    assert mlflow_mirror_of(None) is None and mlflow_mirror_of(False) is None
    assert mlflow_mirror_of(True).tracking_uri is None        # MLflow's default
    assert mlflow_mirror_of(uri).tracking_uri == uri
    assert mlflow_mirror_of(tmp_path / 'm.db').tracking_uri == f'sqlite:///{tmp_path}/m.db'
    mirror = MlflowMirror(uri, 'mine')
    assert mlflow_mirror_of(mirror) is mirror
    with pytest.raises(TypeError, match=r'^`mlflow` must be a tracking URI \(e.g. '
                                        r'"sqlite:///mlflow.db"\), True \(the default URI\), '
                                        r'an MlflowMirror or None, got 3 \(int\)$'):
        mlflow_mirror_of(3)


# ------------------------------------------------ with an Experiment and a TrainLoop
def train(root, uri, args, name='exp-run'):
    """A tiny run: the loss is a variable stepped down by the config's lr."""
    import tensorflow as tf

    import tfsnippet as spt

    class RunConfig(spt.Config):
        lr = 0.01
        max_epoch = 2

    with spt.Experiment(RunConfig, root, name=name, args=args, mlflow=uri, tee=False,
                        hparams=False, flush_secs=0) as exp:
        w = tf.Variable(1.)
        with spt.TrainLoop([w], max_epoch=exp.config.max_epoch,
                           print_func=lambda line: None) as loop:
            for _ in loop.iter_epochs():
                for _ in loop.iter_steps(range(3)):
                    w.assign_sub(exp.config.lr)
                    loop.collect_metrics(loss=float(w.numpy()))
                loop.collect_metrics(valid_loss=2 * float(w.numpy()))
                loop.print_logs()
            loop.collect_results(test_acc=0.9)
        exp.results.update(n_params=1)
    return exp


def test_experiment_mirrors_its_run_and_resumes_into_the_same_mlflow_run(uri, tmp_path,
                                                                          recwarn):
    from tfsnippet.experiment.sinks import SinkError

    exp = train(tmp_path / 'runs', uri, ['--lr', '0.05'])
    saved = json.loads((Path(exp.run_dir) / RUN_FILE).read_text())
    (run,) = search('tfsnippet', "tags.`tfsnippet.run_id` = 'exp-run' and "
                                 "params.lr = '0.05'")
    assert saved == {'tracking_uri': uri, 'experiment_name': 'tfsnippet',
                     'experiment_id': run.info.experiment_id, 'run_id': run.info.run_id}
    assert run.info.status == 'FINISHED'
    assert run.data.params == {'lr': '0.05', 'max_epoch': '2'}
    client = mlflow.MlflowClient(uri)
    assert history(client, run.info.run_id, 'valid_loss') == \
        [(3, pytest.approx(1.7)), (6, pytest.approx(1.4))]
    assert run.data.metrics['best_valid_loss'] == pytest.approx(1.4)
    assert run.data.metrics['test_acc'] == 0.9 and run.data.metrics['n_params'] == 1.

    # the same run again, one epoch longer: it resumes from its checkpoint
    exp = train(tmp_path / 'runs', uri, ['--max_epoch', '3'])
    assert exp.resumed
    (resumed,) = search('tfsnippet', "tags.`tfsnippet.run_id` = 'exp-run'")
    assert resumed.info.run_id == run.info.run_id
    assert resumed.info.status == 'FINISHED'
    assert resumed.data.params == {'lr': '0.05', 'max_epoch': '2'}
    assert resumed.data.tags[f'{CHANGED_TAG_PREFIX}max_epoch'] == '3'
    assert history(client, run.info.run_id, 'valid_loss') == \
        [(3, pytest.approx(1.7)), (6, pytest.approx(1.4)), (9, pytest.approx(1.1))]
    assert not [w for w in recwarn if issubclass(w.category, SinkError)]


def test_an_experiment_calls_mlflow_per_flush_never_per_step(uri, monkeypatch):
    import tfsnippet as spt

    class RunConfig(spt.Config):
        max_epoch = 5

    mirror = MlflowMirror(uri, 'per-flush')
    requests = []
    real_log_batch = mirror.client.log_batch

    def counting_log_batch(run_id, metrics=(), params=(), tags=()):
        requests.append(sorted({m.key for m in metrics}))
        return real_log_batch(run_id, metrics=metrics, params=params, tags=tags)

    monkeypatch.setattr(mirror.client, 'log_batch', counting_log_batch)
    clock = FakeClock(START)   # never advances: the loop's recorder flushes once, at the end
    with tempfile.TemporaryDirectory() as root:
        with spt.Experiment(RunConfig, root, name='steps', args=[], mlflow=mirror, tee=False,
                            hparams=False) as exp:
            with spt.TrainLoop(max_epoch=exp.config.max_epoch, clock=clock,
                               print_func=lambda line: None) as loop:
                for epoch in loop.iter_epochs():
                    for _ in loop.iter_steps(range(100)):
                        loop.collect_metrics(loss=1. / epoch)
                    loop.collect_metrics(valid_loss=1. / epoch)
                    loop.print_logs()
                loop.collect_results(test_loss=0.1)
    # start (params, tags), one flush per epoch of 100 steps (each improves the best, which
    # is handed over at once), the results, finish (tag)
    assert requests == [[], *[['best_valid_loss', 'epoch', 'epoch_time', 'loss', 'step_time',
                               'valid_loss']] * 5, ['test_loss'], []]
    assert history(mlflow.MlflowClient(uri), mirror.mlflow_run_id, 'loss') == \
        [(100 * e, pytest.approx(1. / e)) for e in range(1, 6)]
