"""Tests of the SQLite results store: writes read back, staleness, errors and concurrent writers."""

from __future__ import annotations

import math
import os
import re
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tfsnippet.experiment.store import DB_FILENAME, SCHEMA_VERSION, ResultsStore

REPO = Path(__file__).resolve().parents[2]

@pytest.fixture
def store(tmp_path, fake_clock):
    with ResultsStore(tmp_path / 'results', clock=fake_clock, stale_after=60.) as s:
        yield s


# -------------------------------------------------------------------- runs
def test_start_run_keeps_config_nested_and_flattened(store, fake_clock):
    config = {'optimizer': {'name': 'adam', 'lr': 1e-3, 'betas': (0.9, 0.99)},
              'batch_size': 64, 'use_bn': True, 'note': None}
    store.start_run('r1', 'baseline', config, {'host': 'node-1'})

    row = store.get_run('r1')
    assert (row.run_id, row.name, row.status) == ('r1', 'baseline', 'running')
    assert row.config == {'optimizer': {'name': 'adam', 'lr': 1e-3, 'betas': [0.9, 0.99]},
                          'batch_size': 64, 'use_bn': True, 'note': None}
    assert row.flat_config == {'optimizer.name': 'adam', 'optimizer.lr': 1e-3,
                               'optimizer.betas': [0.9, 0.99], 'batch_size': 64,
                               'use_bn': True, 'note': None}
    assert row.meta == {'host': 'node-1'}
    assert (row.created, row.heartbeat, row.ended, row.epoch) == (1000., 1000., None, None)
    assert (row.metrics, row.best, row.results) == ({}, {}, {})
    assert store.fields()['config'] == {'optimizer.name', 'optimizer.lr', 'optimizer.betas',
                                        'batch_size', 'use_bn', 'note'}


def test_numpy_numbers_are_stored_as_plain_numbers(store):
    np = pytest.importorskip('numpy')
    store.start_run('r1', 'r1', {'lr': np.float32(0.5), 'depth': np.int64(3),
                                 'layers': [np.int64(64), np.float64(0.5)]})
    store.log_epoch_metrics('r1', np.int64(10), np.int64(1), {
        'loss': np.float32(0.25), 'acc': {'mean': np.float64(0.5), 'count': np.int32(4)}})
    store.set_best('r1', {'loss': np.float16(0.25)})

    row = store.get_run('r1')
    assert row.config == {'lr': 0.5, 'depth': 3, 'layers': [64, 0.5]}
    assert [type(v) for v in row.config.values()] == [float, int, list]
    assert row.metrics == {'loss': 0.25, 'acc': 0.5}
    assert store.epochs('r1')[0].metrics['acc'] == {'mean': 0.5, 'std': None, 'count': 4}
    assert row.best == {'loss': 0.25}


@pytest.mark.parametrize('kwargs, error, message', [
    ({'stale_after': -1}, ValueError, '`stale_after` must be >= 0, got -1'),
    ({'stale_after': '60'}, TypeError, "`stale_after` must be a number of seconds, got '60' (str)"),
    ({'busy_timeout': None}, TypeError,
     '`busy_timeout` must be a number of seconds, got None (NoneType)'),
    ({'clock': 3.0}, TypeError, '`clock` must be a callable returning seconds, got 3.0 (float)'),
])
def test_bad_store_options_are_refused(tmp_path, kwargs, error, message):
    with pytest.raises(error, match=f'^{re.escape(message)}$'):
        ResultsStore(tmp_path, **kwargs)


def test_runs_come_in_the_order_they_started(store, fake_clock):
    for run_id in ('b', 'c', 'a'):
        store.start_run(run_id, run_id, {})
        fake_clock.advance(1.)
    assert [r.run_id for r in store.runs()] == ['b', 'c', 'a']


def test_starting_a_run_again_resumes_it(store, fake_clock):
    store.start_run('r1', 'first', {'lr': 0.1, 'old': 1})
    store.log_epoch_metrics('r1', step=10, epoch=1, metrics={'loss': 1.})
    store.set_status('r1', 'preempted')
    fake_clock.advance(5.)
    store.start_run('r1', 'second', {'lr': 0.1})

    row = store.get_run('r1')
    assert (row.name, row.status, row.ended, row.config) == ('second', 'running', None,
                                                             {'lr': 0.1})
    assert (row.created, row.heartbeat) == (1000., 1005.)
    assert row.metrics == {'loss': 1.}
    assert [e.epoch for e in store.epochs('r1')] == [1]


# ------------------------------------------------------------------ epochs
def test_epoch_statistics_read_back(store):
    store.start_run('r1', 'r1', {})
    store.log_epoch_metrics('r1', step=100, epoch=1, metrics={
        'loss': {'mean': 0.5, 'std': 0.1, 'count': 100}, 'acc': 0.75})
    store.log_epochs('r1', [(200, 2, {'loss': {'mean': 0.25}}),
                            (300, 3, {'loss': 0.125, 'acc': {'mean': 0.9, 'count': 3}})])

    epochs = store.epochs('r1')
    assert [(e.epoch, e.step) for e in epochs] == [(1, 100), (2, 200), (3, 300)]
    assert epochs[0].metrics == {'loss': {'mean': 0.5, 'std': 0.1, 'count': 100},
                                 'acc': {'mean': 0.75, 'std': None, 'count': None}}
    assert epochs[1].metrics == {'loss': {'mean': 0.25, 'std': None, 'count': None}}
    assert epochs[2].metrics['acc'] == {'mean': 0.9, 'std': None, 'count': 3}
    row = store.get_run('r1')
    assert row.metrics == {'loss': 0.125, 'acc': 0.9}
    assert (row.epoch, row.step) == (3, 300)


def test_the_latest_epoch_wins_even_when_an_older_one_is_logged_again(store):
    store.start_run('r1', 'r1', {})
    store.log_epoch_metrics('r1', 20, 2, {'loss': 0.2})
    store.log_epoch_metrics('r1', 10, 1, {'loss': 0.9})   # e.g. replayed after a resume

    row = store.get_run('r1')
    assert (row.metrics, row.epoch, row.step) == ({'loss': 0.2}, 2, 20)
    assert [e.metrics['loss']['mean'] for e in store.epochs('r1')] == [0.9, 0.2]


def test_logging_an_epoch_again_replaces_its_statistics(store):
    store.start_run('r1', 'r1', {})
    store.log_epoch_metrics('r1', 10, 1, {'loss': 0.9, 'acc': 0.1})
    store.log_epoch_metrics('r1', 10, 1, {'loss': 0.8})
    assert store.epochs('r1')[0].metrics == {
        'loss': {'mean': 0.8, 'std': None, 'count': None},
        'acc': {'mean': 0.1, 'std': None, 'count': None}}


def test_final_results_win_over_epoch_values_logged_before_and_after(store):
    store.start_run('r1', 'r1', {})
    store.log_epoch_metrics('r1', 10, 1, {'valid_loss': 0.5, 'loss': 0.4})
    store.update_results('r1', {'valid_loss': 0.3, 'test_acc': 0.9})
    store.log_epoch_metrics('r1', 20, 2, {'valid_loss': 0.1, 'loss': 0.2})

    row = store.get_run('r1')
    assert row.metrics == {'valid_loss': 0.3, 'loss': 0.2, 'test_acc': 0.9}
    assert row.results == {'valid_loss': 0.3, 'test_acc': 0.9}
    assert store.epochs('r1')[1].metrics['valid_loss']['mean'] == 0.1


def test_best_values_and_results_replace_earlier_ones(store):
    store.start_run('r1', 'r1', {})
    store.set_best('r1', {'valid_loss': 0.5, 'valid_acc': 0.6})
    store.set_best('r1', {'valid_loss': 0.4})
    store.update_results('r1', {'test_acc': 0.8})
    store.update_results('r1', {'test_acc': 0.85})

    row = store.get_run('r1')
    assert row.best == {'valid_loss': 0.4, 'valid_acc': 0.6}
    assert row.results == {'test_acc': 0.85}
    assert row.value('best.valid_loss') == 0.4
    assert row.value('results.test_acc') == row.value('test_acc') == 0.85
    assert row.value('best.nothing') is None


def test_nan_and_inf_read_back(store):
    store.start_run('r1', 'r1', {})
    store.log_epoch_metrics('r1', 10, 1, {'loss': math.nan, 'big': math.inf})
    store.set_best('r1', {'loss': math.nan})

    row = store.get_run('r1')
    assert math.isnan(row.metrics['loss']) and math.isnan(row.best['loss'])
    assert row.metrics['big'] == math.inf
    assert math.isnan(store.epochs('r1')[0].metrics['loss']['mean'])


def test_a_batch_with_a_bad_epoch_writes_nothing(store):
    store.start_run('r1', 'r1', {})
    with pytest.raises(TypeError, match=re.escape(
            "`metrics['loss']` must be a real number, got 'high' (str)")):
        store.log_epochs('r1', [(10, 1, {'loss': 0.5}), (20, 2, {'loss': 'high'})])
    assert store.epochs('r1') == []
    assert store.get_run('r1').metrics == {}


@pytest.mark.parametrize('call, error, message', [
    (lambda s: s.log_epoch_metrics('r1', -1, 1, {'a': 1.}), ValueError,
     '`step` must be >= 0, got -1'),
    (lambda s: s.log_epoch_metrics('r1', 1, 1.5, {'a': 1.}), TypeError,
     '`epoch` must be an int, got 1.5 (float)'),
    (lambda s: s.log_epoch_metrics('r1', 1, 1, {'a': {'std': 1.}}), ValueError,
     "`metrics['a']` must have a 'mean' and may have a 'std' and a 'count', "
     "got the keys ['std']"),
    (lambda s: s.log_epoch_metrics('r1', 1, 1, {'a': True}), TypeError,
     "`metrics['a']` must be a real number, got True (bool)"),
    (lambda s: s.log_epoch_metrics('r1', 1, 1, {'': 1.}), ValueError,
     "`metrics` names must not be empty, got ''"),
    (lambda s: s.log_epochs('r1', [[1, 1, {}]]), TypeError,
     '`epochs[0]` must be a (step, epoch, metrics) tuple, got [1, 1, {}] (list)'),
    (lambda s: s.set_best('r1', {'a': None}), TypeError,
     "`values['a']` must be a real number, got None (NoneType)"),
    (lambda s: s.set_status('r1', 'stale'), ValueError,
     "`status` must be one of 'running', 'completed', 'failed', 'preempted', 'pruned', "
     "got 'stale' (str)"),
    (lambda s: s.start_run('', 'x', {}), ValueError, "`run_id` must not be empty, got ''"),
    (lambda s: s.start_run('r2', 'x', {'a': {1: 2}}), TypeError,
     "`config` keys must be str, got 1 (int) under 'a'"),
    (lambda s: s.start_run('r2', 'x', {'path': Path('/x')}), TypeError,
     "`config['path']` must be None, bool, int, float, str or a list, got "
     "PosixPath('/x') (PosixPath): convert it, e.g. with str()"),
    (lambda s: s.start_run('r2', 'x', {'a.b': 1, 'a': {'b': 2}}), ValueError,
     "`config` has two values for the key 'a.b' once flattened: rename one of them"),
])
def test_bad_input_is_refused_with_a_message(store, call, error, message):
    store.start_run('r1', 'r1', {})
    with pytest.raises(error, match=f'^{re.escape(message)}$'):
        call(store)


def test_writing_to_an_unknown_run_says_to_start_it(store):
    with pytest.raises(RuntimeError, match=re.escape(
            f"No run 'nope' in {store.path!r}: call `start_run('nope', ...)` before "
            f"writing to it")):
        store.log_epoch_metrics('nope', 1, 1, {'loss': 1.})


def test_reading_an_unknown_run_lists_close_ids(store):
    store.start_run('run-17', 'x', {})
    with pytest.raises(ValueError, match=re.escape(
            f"`run_id`: no run 'run-71' in {store.path!r}; close matches: run-17")):
        store.get_run('run-71')


# ------------------------------------------------------- status, heartbeat
def test_a_running_run_goes_stale_without_heartbeats(store, fake_clock):
    store.start_run('r1', 'r1', {})
    store.start_run('r2', 'r2', {})
    store.set_status('r2', 'completed')
    fake_clock.advance(60.)
    assert [r.status for r in store.runs()] == ['running', 'completed']

    fake_clock.advance(0.5)
    assert [r.status for r in store.runs()] == ['stale', 'completed']

    store.heartbeat('r1')
    assert store.get_run('r1').status == 'running'
    assert store.get_run('r1').heartbeat == 1060.5
    fake_clock.advance(61.)
    store.log_epoch_metrics('r1', 1, 1, {'loss': 1.})   # any write is a sign of life
    assert store.get_run('r1').status == 'running'


def test_a_final_status_records_when_the_run_ended(store, fake_clock):
    store.start_run('r1', 'r1', {})
    fake_clock.advance(10.)
    store.set_status('r1', 'failed')
    row = store.get_run('r1')
    assert (row.status, row.ended) == ('failed', 1010.)


# ------------------------------------------------------------ transactions
def test_a_transaction_commits_all_writes_or_none(store):
    with store.transaction():
        store.start_run('r1', 'r1', {'lr': 0.1})
        store.log_epoch_metrics('r1', 1, 1, {'loss': 1.})
    with pytest.raises(KeyError):
        with store.transaction():
            store.start_run('r2', 'r2', {'new_key': 1})
            store.log_epoch_metrics('r1', 2, 2, {'loss': 0.5})
            raise KeyError('boom')

    assert [r.run_id for r in store.runs()] == ['r1']
    assert store.get_run('r1').metrics == {'loss': 1.}
    assert 'new_key' not in store.fields()['config']
    # the name rolled back is registered again when it is really written
    store.start_run('r3', 'r3', {'new_key': 1})
    assert 'new_key' in store.fields()['config']


def test_a_failed_write_inside_a_transaction_is_undone_alone(store):
    with store.transaction():
        store.start_run('r1', 'r1', {})
        with pytest.raises(RuntimeError):
            store.set_best('missing', {'loss': 1.})
        store.set_best('r1', {'loss': 0.5})
    assert store.get_run('r1').best == {'loss': 0.5}


def test_two_stores_on_one_root_see_each_others_writes(tmp_path):
    with ResultsStore(tmp_path) as a, ResultsStore(tmp_path) as b:
        a.start_run('r1', 'r1', {})
        b.log_epoch_metrics('r1', 1, 1, {'loss': 0.5})
        assert a.get_run('r1').metrics == {'loss': 0.5}
        assert b.fields()['metrics'] == {'loss'}


def test_threads_can_share_a_store(store):
    store.start_run('a', 'a', {})
    store.start_run('b', 'b', {})
    errors: list[BaseException] = []

    def write(run_id: str) -> None:
        try:
            for epoch in range(1, 51):
                store.log_epoch_metrics(run_id, epoch, epoch, {'loss': float(epoch)})
                store.heartbeat(run_id)
        except BaseException as e:   # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=write, args=(r,)) for r in ('a', 'b')]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert [len(store.epochs(r)) for r in ('a', 'b')] == [50, 50]


# ------------------------------------------------------------------ the root
def test_a_root_that_cannot_be_created_is_refused(tmp_path):
    blocker = tmp_path / 'file.txt'
    blocker.write_text('not a directory')
    root = blocker / 'results'
    with pytest.raises(ValueError, match=re.escape(
            f"`root` is not a writable directory: cannot create '{root}' (Not a directory)")):
        ResultsStore(root)


def test_a_root_that_is_a_file_is_refused(tmp_path):
    root = tmp_path / 'file.txt'
    root.write_text('x')
    with pytest.raises(ValueError, match=re.escape(
            f"`root` is not a writable directory: '{root}' is a file")):
        ResultsStore(root)


@pytest.mark.skipif(not hasattr(os, 'geteuid') or os.geteuid() == 0,
                    reason='permissions do not stop root')
def test_a_read_only_root_is_refused(tmp_path):
    root = tmp_path / 'ro'
    root.mkdir()
    root.chmod(0o500)
    try:
        with pytest.raises(ValueError, match=re.escape(
                f"`root` is not a writable directory: no permission to write in '{root}'")):
            ResultsStore(root)
    finally:
        root.chmod(0o700)


def test_readers_do_not_create_a_store(tmp_path):
    with pytest.raises(ValueError, match=re.escape(
            f"`root` has no results store: '{tmp_path / 'none'}' does not exist")):
        ResultsStore(tmp_path / 'none', create=False)
    with pytest.raises(ValueError, match=re.escape(
            f"`root` has no results store: '{tmp_path}' holds no {DB_FILENAME}")):
        ResultsStore(tmp_path, create=False)
    assert not (tmp_path / DB_FILENAME).exists()


def test_a_file_that_is_not_a_database_is_refused(tmp_path):
    (tmp_path / DB_FILENAME).write_bytes(b'this is not SQLite' * 100)
    with pytest.raises(ValueError, match=re.escape(
            f"`root` cannot hold a results store: '{tmp_path / DB_FILENAME}' is not a "
            f"SQLite database (file is not a database)")):
        ResultsStore(tmp_path)


def test_a_database_from_a_newer_version_is_refused(tmp_path):
    ResultsStore(tmp_path).close()
    with sqlite3.connect(tmp_path / DB_FILENAME) as conn:
        conn.execute(f'PRAGMA user_version = {SCHEMA_VERSION + 1}')
    with pytest.raises(RuntimeError, match=re.escape(
            f"'{tmp_path / DB_FILENAME}' has schema version {SCHEMA_VERSION + 1}, newer than "
            f"the version {SCHEMA_VERSION} this tfsnippet reads: upgrade tfsnippet")):
        ResultsStore(tmp_path)


def test_the_database_uses_wal_and_a_schema_version(tmp_path):
    ResultsStore(tmp_path).close()
    with sqlite3.connect(tmp_path / DB_FILENAME) as conn:
        assert conn.execute('PRAGMA journal_mode').fetchone() == ('wal',)
        assert conn.execute('PRAGMA user_version').fetchone() == (SCHEMA_VERSION,)


def test_the_store_imports_neither_tensorflow_nor_numpy():
    code = (
        'import sys\n'
        'import tfsnippet.experiment.store, tfsnippet.experiment.query, tfsnippet.results\n'
        'import tfsnippet.results.cli\n'
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'numpy', "
        "'keras'}))\n")
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          cwd=str(REPO), timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == '[]'


# ------------------------------------------------------- concurrent writers
N_METRICS = 20

_WORKER = f'''
import sys
from tfsnippet.experiment.store import ResultsStore
root, run_id, n_epochs = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = ResultsStore(root)
store.start_run(run_id, run_id, {{'worker': run_id, 'optimizer': {{'lr': 0.1}}}})
print('ready', flush=True)
sys.stdin.readline()   # all workers start writing together
for epoch in range(1, n_epochs + 1):
    store.log_epoch_metrics(run_id, epoch * 10, epoch, {{
        f'm{{i}}': {{'mean': epoch + i / 100, 'std': 0.5, 'count': 10}}
        for i in range({N_METRICS})}})
    print(epoch, flush=True)
    if epoch == n_epochs // 2:
        sys.stdin.readline()   # finish only once the other worker has been killed
store.set_best(run_id, {{'m0': 1.0}})
store.update_results(run_id, {{'test_acc': 0.5}})
store.set_status(run_id, 'completed')
print('done', flush=True)
'''


class _Lines:
    """Reads a child's stdout line by line, never waiting past a deadline."""

    def __init__(self, proc: subprocess.Popen, deadline: float) -> None:
        self.fd = proc.stdout.fileno()
        self.deadline = deadline
        self.buffer = b''
        self.eof = False

    def next(self) -> str | None:
        while b'\n' not in self.buffer:
            if self.eof:
                return None
            remaining = self.deadline - time.monotonic()
            assert remaining > 0, 'a worker took too long'
            ready, _, _ = select.select([self.fd], [], [], remaining)
            if ready:
                chunk = os.read(self.fd, 65536)
                self.buffer += chunk
                self.eof = not chunk
        line, self.buffer = self.buffer.split(b'\n', 1)
        return line.decode()

    def rest(self) -> list[str]:
        out = []
        while (line := self.next()) is not None:
            out.append(line)
        return out


@pytest.mark.skipif(not hasattr(signal, 'SIGKILL'), reason='needs SIGKILL')
def test_concurrent_writers_lose_nothing_and_a_killed_one_shows_stale(tmp_path):
    """Four processes write at once; one is killed while the other three are mid-run."""
    root = tmp_path / 'store'    # created by the workers themselves, at the same time
    n_epochs = 150
    deadline = time.monotonic() + 180.
    runs = {'w0': n_epochs, 'w1': n_epochs, 'w2': n_epochs, 'killed': 10 ** 6}
    procs = {r: subprocess.Popen([sys.executable, '-c', _WORKER, str(root), r, str(n)],
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=str(REPO))
             for r, n in runs.items()}
    try:
        lines = {r: _Lines(p, deadline) for r, p in procs.items()}
        for r in runs:
            assert lines[r].next() == 'ready', f'{r} did not start'
        for p in procs.values():
            p.stdin.write(b'go\n')
            p.stdin.flush()
        # kill one mid-run, while the others are writing
        reported = 0
        while reported < 30:
            reported = int(lines['killed'].next())
        os.kill(procs['killed'].pid, signal.SIGKILL)
        assert procs['killed'].wait(timeout=60) == -signal.SIGKILL
        # epochs it reported before dying, still in the pipe
        reported = max([reported] + [int(x) for x in lines['killed'].rest()])
        for r in ('w0', 'w1', 'w2'):   # they are half-way at most: let them finish
            procs[r].stdin.write(b'finish\n')
            procs[r].stdin.flush()
        for r in ('w0', 'w1', 'w2'):
            assert lines[r].rest()[-1] == 'done'
            assert procs[r].wait(timeout=60) == 0
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()

    an_hour_later = ResultsStore(root, create=False, clock=lambda: time.time() + 3600.)
    with an_hour_later as store:
        with store.snapshot() as conn:
            assert conn.execute('PRAGMA integrity_check').fetchone() == ('ok',)
        expected = {f'm{i}': {'mean': n_epochs + i / 100, 'std': 0.5, 'count': 10}
                    for i in range(N_METRICS)}
        for r in ('w0', 'w1', 'w2'):
            row = store.get_run(r)
            assert (row.status, row.epoch, row.step) == ('completed', n_epochs, n_epochs * 10)
            assert (row.best, row.results) == ({'m0': 1.0}, {'test_acc': 0.5})
            epochs = store.epochs(r)
            assert [e.epoch for e in epochs] == list(range(1, n_epochs + 1))
            assert all(len(e.metrics) == N_METRICS for e in epochs)
            assert epochs[-1].metrics == expected

        killed = store.get_run('killed')
        assert killed.status == 'stale'
        epochs = store.epochs('killed')
        # every epoch it reported is there; at most one more was committed unreported
        assert reported <= len(epochs) <= reported + 1
        assert [e.epoch for e in epochs] == list(range(1, len(epochs) + 1))
        assert all(len(e.metrics) == N_METRICS for e in epochs)   # no half-written epoch
        assert killed.epoch == len(epochs)
        assert killed.metrics['m0'] == len(epochs)


class _LockedAtFirst:
    """A connection whose first `fails` WAL switches answer "database is locked", as
    SQLite does when other processes open a new store at the same moment."""

    def __init__(self, conn: sqlite3.Connection, fails: int) -> None:
        self._conn, self.fails, self.tries = conn, fails, 0

    def execute(self, sql: str, *args):
        if sql.startswith('PRAGMA journal_mode'):
            self.tries += 1
            if self.tries <= self.fails:
                raise sqlite3.OperationalError('database is locked')
        return self._conn.execute(sql, *args)

    def __getattr__(self, name: str):
        return getattr(self._conn, name)


def _open_with_locks(monkeypatch, fails: int, **kwargs):
    import tfsnippet.experiment.store as store_module
    made, pauses = [], []
    connect = sqlite3.connect

    def locked_connect(*args, **kw):
        made.append(_LockedAtFirst(connect(*args, **kw), fails))
        return made[-1]

    monkeypatch.setattr(store_module.sqlite3, 'connect', locked_connect)
    monkeypatch.setattr(store_module, '_sleep', pauses.append)
    return made, pauses, kwargs


def test_a_store_opened_while_another_process_holds_the_lock_waits_and_opens(
        tmp_path, monkeypatch):
    made, pauses, _ = _open_with_locks(monkeypatch, fails=3)
    store = ResultsStore(tmp_path / 'store')
    store.start_run('r1', 'r1', {'lr': 0.1})
    monkeypatch.undo()
    assert made[0].tries == 4            # three refusals, then WAL mode
    assert pauses == [0.005, 0.01, 0.02]  # a growing pause between the tries
    assert [r.run_id for r in ResultsStore(tmp_path / 'store').runs()] == ['r1']


def test_a_store_still_locked_after_the_busy_timeout_raises_the_lock_error(
        tmp_path, monkeypatch):
    made, pauses, _ = _open_with_locks(monkeypatch, fails=10 ** 6)
    with pytest.raises(sqlite3.OperationalError, match='database is locked'):
        ResultsStore(tmp_path / 'store', busy_timeout=0.)
    assert made[0].tries == 1 and pauses == []
