"""Runs on object storage: an Experiment with an ``s3://`` root (a moto server on
127.0.0.1, see tests/helpers/s3.py), its objects read back, ``spt.results.query``
and ``python -m tfsnippet.results`` on the URL, four runs writing at once, and
the errors of a bad root."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import tfsnippet as spt
from tfsnippet.experiment import Experiment, ResultsStore
from tfsnippet.experiment.remote import RunRecordWriter, index_cache_dir, open_results_store
from tfsnippet.results import query
from tfsnippet.results.cli import main
from tfsnippet.storage import StorageUnavailableError, resolve

REPO = Path(__file__).resolve().parents[2]


class RunConfig(spt.Config):
    lr = 0.1
    seed = 0


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    """The index of every URL in a folder of this test (children inherit it)."""
    folder = tmp_path / 'cache'
    monkeypatch.setenv('TFSNIPPET_CACHE_DIR', str(folder))
    return folder


def s3fs_of():
    import s3fs
    return s3fs.S3FileSystem(skip_instance_cache=True, use_listings_cache=False)


def objects(url):
    """The object names under `url`, relative to it."""
    prefix = url[len('s3://'):]
    return sorted(p[len(prefix) + 1:] for p in s3fs_of().find(prefix))


def read_object(url):
    return s3fs_of().cat_file(url[len('s3://'):])


def stats(mean):
    return {'loss': {'mean': mean, 'std': 0.5, 'count': 4}}


def record_run(root, name, args=(), epochs=2, result=None, **kwargs):
    kwargs.setdefault('hparams', False)
    with Experiment(RunConfig, root=root, name=name, args=list(args), **kwargs) as exp:
        print(f'run {name} lr={exp.config.lr}')
        first = len(list(filter(None, [exp.resumed]))) * 10
        for epoch in range(1, epochs + 1):
            exp.log_epochs([(10 * (first + epoch), first + epoch, stats(1. / epoch))],
                           best={'loss': 1. / epoch})
        if result is not None:
            exp.results.update(acc=result)
    return exp


# ------------------------------------------------------------------ one run
def test_run_files_and_records_land_under_the_run_url(s3_bucket):
    root = f'{s3_bucket}/runs'
    exp = record_run(root, 'a', ['--lr', '0.5'], result=0.75)
    assert (exp.root, exp.run_dir, exp.checkpoint_dir) == (root, f'{root}/a', f'{root}/a')
    assert exp.store is None
    names = objects(root)
    assert {'a/config.json', 'a/run.json', 'a/result.json', 'a/console.log',
            'a/heartbeat.json'} <= set(names)
    assert [n for n in names if n.startswith('a/records/')] == [
        f'a/records/{i:010d}.json' for i in range(5)]   # start, 2 flushes, results, status
    assert json.loads(read_object(f'{root}/a/config.json')) == {'lr': 0.5, 'seed': 0}
    assert json.loads(read_object(f'{root}/a/result.json')) == {'acc': 0.75}
    run = json.loads(read_object(f'{root}/a/run.json'))
    assert (run['status'], run['run_dir']) == ('completed', f'{root}/a')
    assert read_object(f'{root}/a/console.log') == b'run a lr=0.5\n'
    assert not os.path.exists('s3:')   # nothing went to a local folder of that name

    [row] = query(root)
    assert (row.run_id, row.status, row.epoch, row.step) == ('a', 'completed', 2, 20)
    assert row.config == {'lr': 0.5, 'seed': 0}
    assert (row.metrics, row.best, row.results) == (
        {'loss': 0.5, 'acc': 0.75}, {'loss': 0.5}, {'acc': 0.75})
    with open_results_store(root) as store:
        assert [(e.epoch, e.metrics) for e in store.epochs('a')] == [
            (1, {'loss': {'mean': 1.0, 'std': 0.5, 'count': 4}}),
            (2, {'loss': {'mean': 0.5, 'std': 0.5, 'count': 4}})]


def test_a_resumed_run_reloads_its_config_and_goes_on_numbering(s3_bucket, capsys):
    root = f'{s3_bucket}/runs'
    record_run(root, 'a', ['--lr', '0.5'], epochs=1, hparams=True)
    exp = record_run(root, 'a', [], epochs=1, hparams=True)
    assert exp.resumed and exp.config.lr == 0.5
    names = objects(root)
    assert len([n for n in names if n.startswith('a/records/')]) == 6
    # the earlier start's HParams file gave way to this one's
    assert len([n for n in names if n.startswith('a/events.out.tfevents.')]) == 1
    console = read_object(f'{root}/a/console.log').decode()
    assert console.startswith('run a lr=0.5\nResuming run \'a\' in s3://')
    assert console.endswith('run a lr=0.5\n')
    assert len(json.loads(read_object(f'{root}/a/run.json'))['starts']) == 2
    [row] = query(root)
    assert (row.status, row.epoch, row.best) == ('completed', 11, {'loss': 1.0})
    with open_results_store(root) as store:
        assert [e.epoch for e in store.epochs('a')] == [1, 11]


def test_resume_by_id_of_a_run_that_is_not_there_names_the_close_ones(s3_bucket, capsys):
    root = f'{s3_bucket}/runs'
    record_run(root, 'baseline', epochs=1)
    with pytest.raises(SystemExit) as info:
        Experiment(RunConfig, root=root, args=['--resume', 'baseline2'])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "no run 'baseline2'" in err and 'baseline' in err


# ------------------------------------------------------------------ the index
def test_the_index_downloads_only_new_records(s3_bucket, monkeypatch):
    import s3fs
    root = f'{s3_bucket}/runs'
    record_run(root, 'a', epochs=2)
    fetched = []
    original = s3fs.S3FileSystem._cat_file   # every download of an object goes through it

    async def counting_cat_file(self, path, *args, **kwargs):
        fetched.append(path)
        return await original(self, path, *args, **kwargs)

    monkeypatch.setattr(s3fs.S3FileSystem, '_cat_file', counting_cat_file)
    assert [r.epoch for r in query(root)] == [2]
    assert len(fetched) == 5   # four records and the heartbeat
    fetched.clear()
    assert [r.epoch for r in query(root)] == [2]
    assert fetched == []   # nothing changed: nothing downloaded
    record_run(root, 'b', epochs=1)
    assert [r.run_id for r in query(root)] == ['a', 'b']
    assert all('/b/' in p for p in fetched) and len(fetched) == 4


def test_a_rewritten_record_rebuilds_its_run_and_a_deleted_run_leaves(s3_bucket):
    root = f'{s3_bucket}/runs'
    record_run(root, 'a', epochs=1)
    record_run(root, 'b', epochs=1)
    assert [r.best for r in query(root)] == [{'loss': 1.0}, {'loss': 1.0}]
    fs = s3fs_of()
    path = f'{root[5:]}/a/records/0000000001.json'
    record = json.loads(fs.cat_file(path))
    record['ops'][1] = ['best', {'loss': 0.125}]
    fs.pipe_file(path, json.dumps(record).encode())
    fs.rm(f'{root[5:]}/b', recursive=True)
    [row] = query(root)
    assert (row.run_id, row.best, row.epoch) == ('a', {'loss': 0.125}, 1)


def test_a_run_killed_shows_stale_after_its_last_heartbeat(s3_bucket):
    root = f'{s3_bucket}/runs'
    now = [1000.]
    writer = RunRecordWriter(resolve(f'{root}/k'), clock=lambda: now[0])
    writer.write(['start', 'k', {'lr': 0.1}, {}])
    writer.heartbeat()
    assert [r.status for r in query(root)] == ['stale']   # 1000 s after the epoch
    with open_results_store(root, stale_after=1e12) as store:
        row = store.get_run('k')
    assert (row.status, row.heartbeat) == ('running', 1000.)
    now[0] = 2000.
    writer.heartbeat()
    with open_results_store(root, stale_after=1e12) as store:
        assert store.get_run('k').heartbeat == 2000.


def test_refreshes_at_once_agree_and_apply_each_record_once(s3_bucket):
    import threading
    root = f'{s3_bucket}/runs'
    for name in ('a', 'b', 'c'):
        record_run(root, name, epochs=2)
    results, errors = [], []

    def read():
        try:
            results.append([(r.run_id, r.epoch, r.best) for r in query(root)])
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert results == [[(n, 2, {'loss': 0.5}) for n in ('a', 'b', 'c')]] * 4
    with open_results_store(root) as store, store.snapshot() as conn:
        applied = conn.execute('SELECT COUNT(*) FROM remote_objects').fetchone()[0]
    assert applied == 3 * 5   # four records and a heartbeat per run, each once


def test_the_cache_folder_is_keyed_by_the_url(s3_bucket, cache_dir):
    root = f'{s3_bucket}/runs'
    record_run(root, 'a', epochs=1)
    query(root)
    folder = index_cache_dir(root)
    assert folder.startswith(str(cache_dir)) and index_cache_dir(root + '2') != folder
    assert os.path.isfile(os.path.join(folder, 'results.sqlite'))


# ------------------------------------------------------------------ several jobs at once
WORKER = textwrap.dedent('''
    import sys
    import tfsnippet as spt

    class RunConfig(spt.Config):
        seed = 0

    root, index = sys.argv[1], int(sys.argv[2])
    with spt.Experiment(RunConfig, root=root, name=f'job{index}', args=['--seed', str(index)],
                        hparams=False, flush_secs=0) as exp:
        for epoch in range(1, 4):
            exp.log_epochs([(epoch * 10, epoch, {'loss': {'mean': index + 1. / epoch,
                                                          'std': 0., 'count': 10}})],
                           best={'loss': index + 1. / epoch})
        exp.results.update(final=index * 10.)
''')


def test_four_jobs_writing_one_root_at_once_lose_nothing(s3_bucket, tmp_path, capsys,
                                                         fork_server):
    # four processes started together (not threads), forked from the session's server
    # (which made no S3 client): each its own S3 client
    root = f'{s3_bucket}/runs'
    script = tmp_path / 'job.py'
    script.write_text(WORKER)
    env = {**os.environ, 'PYTHONPATH': str(REPO)}
    logs = [tmp_path / f'job{i}.log' for i in range(4)]
    procs = []
    for i, log in enumerate(logs):
        with open(log, 'w') as f:
            procs.append(fork_server.start([script, root, i], cwd=tmp_path, env=env,
                                           stdout=f, stderr=f))
    guards = [threading.Timer(180, p.kill) for p in procs]   # the bound on each job
    try:
        for guard in guards:
            guard.start()
        codes = [p.wait() for p in procs]
    finally:
        for guard in guards:
            guard.cancel()
        for p in procs:
            p.kill()          # (nothing, once it ended)
            p.wait()
    outputs = [log.read_text() for log in logs]
    assert codes == [0] * 4, outputs
    rows = query(root, order_by='config.seed')
    assert [(r.run_id, r.status, r.epoch, r.results, r.best) for r in rows] == [
        (f'job{i}', 'completed', 3, {'final': i * 10.}, {'loss': i + 1 / 3}) for i in range(4)]
    with open_results_store(root) as store:
        for i in range(4):
            assert [e.metrics['loss']['mean'] for e in store.epochs(f'job{i}')] == [
                i + 1., i + 0.5, i + 1 / 3]

    # the command line, as a user would run it
    cli = subprocess.run([sys.executable, '-m', 'tfsnippet.results', root, 'list',
                          '--where', 'config.seed >= 2', '--order-by', 'config.seed'],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         timeout=120)
    assert cli.returncode == 0, cli.stderr
    lines = cli.stdout.splitlines()
    assert lines[0].split() == ['run_id', 'name', 'status', 'epoch', 'config.seed', 'best.loss']
    assert [line.split()[:5] for line in lines[2:4]] == [
        ['job2', 'job2', 'completed', '3', '2'], ['job3', 'job3', 'completed', '3', '3']]
    assert lines[-1] == '(2 runs)'
    assert main([root, 'show', 'job3', '--epochs']) == 0
    assert main([root, 'compare', 'job0', 'job1', 'job2', 'job3']) == 0
    out = capsys.readouterr().out
    assert 'results.final' in out and 'seed' in out
    assert main([root, 'export', '--csv']) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert sorted((r['run_id'], r['config.seed'], r['results.final']) for r in table) == [
        (f'job{i}', str(i), str(i * 10.)) for i in range(4)]


def test_show_compare_and_export_on_a_url(s3_bucket, capsys):
    root = f'{s3_bucket}/runs'
    record_run(root, 'a', ['--lr', '0.5'], result=0.5)
    record_run(root, 'b', ['--lr', '0.25'], result=0.75)
    capsys.readouterr()
    assert main([root, 'show', 'b', '--epochs']) == 0
    out = capsys.readouterr().out
    assert 'status     completed' in out and f'run_dir     {root}/b' in out
    assert '      2    20   0.5' in out
    assert main([root, 'compare', 'a', 'b']) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[:4] == ['config (fields that differ)', '  field  a    b',
                                    '  -----  ---  ----', '  lr     0.5  0.25']
    assert main([root, 'export', '--csv']) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r['run_id'], r['config.lr'], r['results.acc']) for r in table] == [
        ('a', '0.5', '0.5'), ('b', '0.25', '0.75')]


# ------------------------------------------------------------------ bad input
def test_an_unknown_protocol_is_refused_when_the_experiment_is_made(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"root='ftp://host/runs' has the protocol 'ftp'"):
        Experiment(RunConfig, root='ftp://host/runs', args=[])
    assert os.listdir(tmp_path) == []


def test_a_missing_package_names_the_extra(tmp_path, monkeypatch):
    pytest.importorskip('fsspec')
    if _importable('gcsfs'):
        pytest.skip('gcsfs is installed here')
    monkeypatch.chdir(tmp_path)
    with pytest.raises(StorageUnavailableError, match=r'tfsnippet\[gcs\]'):
        Experiment(RunConfig, root='gs://bucket/runs', args=[])
    assert main(['gs://bucket/runs', 'list']) == 2
    assert os.listdir(tmp_path) == []


def _importable(name):
    import importlib.util
    return importlib.util.find_spec(name) is not None


def test_a_missing_bucket_fails_when_made_and_in_queries(s3_server, capsys):
    root = 's3://no-such-bucket-here/runs'
    with pytest.raises(ValueError, match=r"the bucket 'no-such-bucket-here' does not exist"):
        Experiment(RunConfig, root=root, name='a', args=[], hparams=False)
    with pytest.raises(ValueError, match=r"the bucket 'no-such-bucket-here' does not exist"):
        query(root)
    assert main([root, 'list']) == 2
    assert 'does not exist' in capsys.readouterr().err


def test_a_root_without_runs_is_an_error(s3_bucket):
    with pytest.raises(ValueError, match='holds no run records'):
        query(f'{s3_bucket}/empty')


def test_results_store_refuses_a_url():
    with pytest.raises(ValueError, match='SQLite cannot live on an object store'):
        ResultsStore('s3://bucket/runs')


# ------------------------------------------------------------------ with a TrainLoop
def checkpoints_of_run(root, run_id, cwd):
    """The run's checkpoint objects; skips the test while the checkpointer still
    takes a URL for a local folder name (checkpoints on object stores: store18)."""
    if os.path.isdir(os.path.join(cwd, 's3:')):
        pytest.skip('the checkpointer does not write to object stores yet: it made a local '
                    './s3:/ folder (needs the checkpoint store on URLs, store18)')
    return [n for n in objects(f'{root}/{run_id}') if n.startswith('checkpoint/')]


def test_a_loop_inside_records_into_the_bucket_and_resumes_from_it(
        style, s3_bucket, tmp_path, monkeypatch, fake_clock):
    monkeypatch.chdir(tmp_path)
    root = f'{s3_bucket}/runs'
    w = style.variable(0., 'w')
    add = style.updater(w, 1.)

    def train(args):
        lines = []
        with Experiment(RunConfig, root=root, name='t', args=args, hparams=False) as exp:
            with spt.TrainLoop([w], max_epoch=int(exp.config.lr * 10), print_func=lines.append,
                               clock=fake_clock) as loop:
                for _ in loop.iter_epochs():
                    for _ in loop.iter_steps(range(2)):
                        fake_clock.advance(0.5)
                        add()
                        loop.collect_metrics(loss=float(style.value(w)))
        return exp, loop, lines

    exp, loop, lines = train(['--lr', '0.2'])
    [row] = query(root)
    assert (row.status, row.epoch, row.step, row.metrics['loss']) == ('completed', 2, 4, 3.5)
    assert exp.checkpoint_dir == f'{root}/t'
    assert checkpoints_of_run(root, 't', tmp_path)   # objects under <run>/checkpoint/
    style.assign(w, -100.)
    exp, loop, lines = train(['--lr', '0.3'])
    assert lines[0].startswith('Resume training: epoch 2, step 4')
    assert (loop.epoch, float(style.value(w))) == (3, 6.)
    assert [(r.epoch, r.step) for r in query(root)] == [(3, 6)]
