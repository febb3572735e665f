"""A results store for training runs, kept in one SQLite database per root directory."""

from __future__ import annotations

import json
import math
import numbers
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from math import nan
from typing import Any, Union

from ..utils.status import RUN_STATUSES, STALE
from ..utils.text import close_matches_hint, typed_repr
from .store_sql import (DB_FILENAME, FORGET_EPOCHS, IN_CHUNK, RUN_COLUMNS, SCHEMA_SQL,
                        SCHEMA_VERSION, UPSERT_EPOCH_METRIC, UPSERT_RESULT_METRIC)

__all__ = ['ResultsStore', 'RunRow', 'EpochRow', 'RUN_STATUSES', 'STALE', 'DB_FILENAME',
           'SCHEMA_VERSION', 'flatten_config']

#: The statistics of one metric over one epoch, as given to `log_epoch_metrics`.
EpochStats = Union[float, Mapping[str, Any]]

#: How a new connection waits before it tries again (replaced by tests)
_sleep = time.sleep



@dataclass(frozen=True)
class RunRow:
    """One run as the store holds it, returned by queries and `ResultsStore.get_run`.

    Attributes:
        run_id: The run's unique id.
        name: Its human-readable name.
        status: ``'running'``, ``'completed'``, ``'failed'``, ``'preempted'``,
            or ``'stale'``: marked running, but its heartbeat is older than the
            store's ``stale_after`` (the process most likely died, e.g. killed).
        config: The config as given to `ResultsStore.start_run` (nested).
        metrics: ``{name: value}``: the latest epoch mean of each metric,
            replaced by the final result of the same name where there is one.
        best: ``{name: value}`` as given to `ResultsStore.set_best`.
        results: ``{name: value}`` as given to `ResultsStore.update_results`.
        meta: Free-form facts about the run (host, command line, ...).
        created: When the run was first started (seconds since the epoch).
        heartbeat: When the run last showed a sign of life.
        ended: When it was given a final status, or ``None``.
        epoch: The last epoch logged, or ``None``.
        step: The step of that epoch, or ``None``.
    """

    run_id: str
    name: str
    status: str
    config: dict[str, Any]
    metrics: dict[str, float] = field(default_factory=dict)
    best: dict[str, float] = field(default_factory=dict)
    results: dict[str, float] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    created: float = 0.
    heartbeat: float = 0.
    ended: float | None = None
    epoch: int | None = None
    step: int | None = None

    @cached_property
    def flat_config(self) -> dict[str, Any]:
        """The config flattened to dotted keys: ``{'optimizer.lr': 0.001, ...}``."""
        return flatten_config(self.config, check=False)

    def value(self, name: str) -> Any:
        """The value of a field as a query names it, or ``None`` if the run has none.

        Args:
            name: ``'run_id'``, ``'name'``, ``'status'``, ``'config.<key>'``,
                ``'best.<metric>'``, ``'results.<metric>'``,
                ``'metrics.<metric>'`` or a bare metric name.
        """
        if name in ('run_id', 'name', 'status'):
            return getattr(self, name)
        head, _, rest = name.partition('.')
        if rest:
            if head == 'config':
                return self.flat_config.get(rest)
            if head in ('best', 'results', 'metrics'):
                return getattr(self, head).get(rest)
        return self.metrics.get(name)


@dataclass(frozen=True)
class EpochRow:
    """The statistics logged for one epoch of a run.

    Attributes:
        epoch: The epoch number.
        step: The global step at the end of the epoch.
        metrics: ``{name: {'mean': float, 'std': float | None, 'count': int | None}}``.
    """

    epoch: int
    step: int
    metrics: dict[str, dict[str, Any]]


class ResultsStore:
    """Runs, configs, epoch statistics, best values and final results of many runs.

    All runs under one root share the database ``<root>/results.sqlite``
    (SQLite, standard library only).  It is opened in WAL mode with a busy
    timeout, and every write is one ``BEGIN IMMEDIATE`` transaction, so
    several processes can write to one store at once without losing
    anything, and a process killed mid-write leaves every earlier commit
    intact.  With ``synchronous=NORMAL``, a commit survives the death of the
    process, not necessarily a power cut.

    What a query sees of a run:

    * ``config.<key>``: the config, flattened to dotted keys
      (``{'optimizer': {'lr': 0.1}}`` is ``config.optimizer.lr``);
    * ``<metric>`` (or ``metrics.<metric>``): the mean of the latest epoch
      logged for that metric, **except** when a final result of the same
      name exists, which then wins, whatever is logged later;
    * ``best.<metric>`` and ``results.<metric>``: the values given to
      :meth:`set_best` and :meth:`update_results` (the latest call wins);
    * ``run_id``, ``name``, ``status``.

    A run marked ``'running'`` whose heartbeat is older than `stale_after`
    seconds shows the status ``'stale'``.  Any write to a run refreshes its
    heartbeat, and so does :meth:`heartbeat`; a writer whose epochs can be
    longer than `stale_after` should call it from a timer.

    Args:
        root: The directory of the store.  Created if needed when `create`.
        create: Whether to create the directory and the database when they do
            not exist (writers); readers pass ``False`` and get an error instead.
        stale_after: Seconds without a heartbeat after which a running run is
            shown as ``'stale'``.
        clock: Returns the current time in seconds since the epoch.
        busy_timeout: Seconds a write waits for another process's write to end,
            and opening the store for another process's lock.

    Raises:
        ValueError: `root` cannot hold a store (not writable, not a directory,
            not a SQLite database), or holds none and `create` is false.
        RuntimeError: The database was written by a newer version of tfsnippet.

    Example:
        >>> import tempfile
        >>> from tfsnippet.experiment.store import ResultsStore
        >>> with tempfile.TemporaryDirectory() as root, ResultsStore(root) as store:
        ...     store.start_run('r1', 'baseline', {'optimizer': {'lr': 0.01}})
        ...     store.log_epoch_metrics('r1', step=100, epoch=1, metrics={
        ...         'valid_loss': {'mean': 0.5, 'std': 0.1, 'count': 10}})
        ...     store.set_best('r1', {'valid_loss': 0.5})
        ...     store.set_status('r1', 'completed')
        ...     row = store.get_run('r1')
        >>> row.status, row.metrics, row.best, row.flat_config
        ('completed', {'valid_loss': 0.5}, {'valid_loss': 0.5}, {'optimizer.lr': 0.01})
    """

    def __init__(self, root: str | os.PathLike[str], *, create: bool = True,
                 stale_after: float = 600., clock: Callable[[], float] = time.time,
                 busy_timeout: float = 60.) -> None:
        if not isinstance(root, (str, os.PathLike)):
            raise TypeError(f'`root` must be a str or a path, got {typed_repr(root)}')
        for arg, seconds in (('stale_after', stale_after), ('busy_timeout', busy_timeout)):
            if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
                raise TypeError(f'`{arg}` must be a number of seconds, got {typed_repr(seconds)}')
            if not seconds >= 0:
                raise ValueError(f'`{arg}` must be >= 0, got {seconds!r}')
        if not callable(clock):
            raise TypeError(f'`clock` must be a callable returning seconds, '
                            f'got {typed_repr(clock)}')
        from ..storage import is_url
        if is_url(root, argument='root'):
            raise ValueError(f'`root` must be a local directory for a ResultsStore (SQLite '
                             f'cannot live on an object store), got {os.fspath(root)!r}: read '
                             f'the runs of a URL with `tfsnippet.results.query(url)` or '
                             f'`tfsnippet.experiment.remote.open_results_store(url)`')
        self._root = os.path.abspath(os.fspath(root))
        self._path = os.path.join(self._root, DB_FILENAME)
        self._stale_after = float(stale_after)
        self._clock = clock
        self._busy_timeout = float(busy_timeout)
        self._lock = threading.RLock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._known_fields: set[tuple[str, str]] = set()
        self._depth = 0   # of nested writes (transaction() and the writes inside it)
        if create:
            self._make_root()
        elif not os.path.isfile(self._path):
            what = 'does not exist' if not os.path.exists(self._root) else \
                f'holds no {DB_FILENAME}'
            raise ValueError(f'`root` has no results store: {self._root!r} {what}')
        self._create = create
        self._connection()

    # ----------------------------------------------------------- properties
    @property
    def root(self) -> str:
        """The store's directory (absolute)."""
        return self._root

    @property
    def path(self) -> str:
        """The database file."""
        return self._path

    @property
    def stale_after(self) -> float:
        """Seconds without a heartbeat after which a running run is shown as stale."""
        return self._stale_after

    def now(self) -> float:
        """The current time of the store's clock."""
        return float(self._clock())

    # ------------------------------------------------------------ connection
    def _make_root(self) -> None:
        if os.path.exists(self._root) and not os.path.isdir(self._root):
            raise ValueError(f'`root` is not a writable directory: {self._root!r} is a file')
        try:
            os.makedirs(self._root, exist_ok=True)
        except OSError as e:
            raise ValueError(f'`root` is not a writable directory: cannot create '
                             f'{self._root!r} ({e.strerror or e})') from e
        if not os.access(self._root, os.W_OK | os.X_OK):
            raise ValueError(f'`root` is not a writable directory: no permission to write '
                             f'in {self._root!r}')

    def _connection(self) -> sqlite3.Connection:
        """The connection of this process, opened (and the schema checked) on first use."""
        pid = os.getpid()
        if self._conn is not None and self._pid == pid:
            return self._conn
        # a forked child never uses its parent's connection (SQLite forbids it)
        try:
            conn = sqlite3.connect(self._path, timeout=self._busy_timeout,
                                   isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise ValueError(f'`root` is not a writable directory: cannot open '
                             f'{self._path!r} ({e})') from e
        try:
            self._set_up(conn)
        except sqlite3.OperationalError as e:
            conn.close()
            if 'locked' in str(e):
                raise
            raise ValueError(f'`root` is not a writable directory: cannot open '
                             f'{self._path!r} ({e})') from e
        except sqlite3.DatabaseError as e:
            conn.close()
            raise ValueError(f'`root` cannot hold a results store: {self._path!r} is not '
                             f'a SQLite database ({e})') from e
        except BaseException:
            conn.close()
            raise
        self._conn, self._pid = conn, pid
        self._known_fields = set()
        return conn

    def _set_up(self, conn: sqlite3.Connection) -> None:
        """WAL mode and the schema check on a new connection, retried while another
        process holds the lock, up to `busy_timeout` seconds.

        Switching a new database to WAL mode needs the whole file: when several
        processes open the store at once, SQLite may answer "database is
        locked" at once instead of waiting for the busy timeout.
        """
        deadline = time.monotonic() + self._busy_timeout
        pause = 0.005
        while True:
            try:
                conn.execute('PRAGMA journal_mode=WAL')
                conn.execute('PRAGMA synchronous=NORMAL')
                self._check_schema(conn, self._create)
                return
            except sqlite3.OperationalError as e:
                if 'locked' not in str(e) or time.monotonic() + pause > deadline:
                    raise
                if conn.in_transaction:
                    conn.rollback()
            _sleep(pause)
            pause = min(pause * 2, 0.2)

    def _check_schema(self, conn: sqlite3.Connection, create: bool) -> None:
        version = conn.execute('PRAGMA user_version').fetchone()[0]
        if version == 0:
            if not create:
                raise ValueError(f'`root` has no results store: {self._path!r} is empty')
            conn.execute('BEGIN IMMEDIATE')
            try:
                # another process may have created it while we waited for the lock
                if conn.execute('PRAGMA user_version').fetchone()[0] == 0:
                    for statement in SCHEMA_SQL.split(';'):
                        if statement.strip():
                            conn.execute(statement)
                    conn.execute(f'PRAGMA user_version = {SCHEMA_VERSION:d}')
                conn.execute('COMMIT')
            except BaseException:
                if conn.in_transaction:
                    conn.execute('ROLLBACK')
                raise
        elif version > SCHEMA_VERSION:
            raise RuntimeError(
                f'{self._path!r} has schema version {version}, newer than the version '
                f'{SCHEMA_VERSION} this tfsnippet reads: upgrade tfsnippet')

    def close(self) -> None:
        """Close the connection (reopened by the next call that needs it)."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def __enter__(self) -> ResultsStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f'ResultsStore({self._root!r})'

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction, taking the database's write lock at once.

        Inside :meth:`transaction` it is a savepoint of the outer transaction.
        """
        with self._lock:
            conn = self._connection()
            nested = self._depth > 0
            conn.execute('SAVEPOINT write' if nested else 'BEGIN IMMEDIATE')
            self._depth += 1
            try:
                yield conn
                conn.execute('RELEASE write' if nested else 'COMMIT')
            except BaseException:
                self._known_fields = set()   # it may hold names just rolled back
                if nested:
                    conn.execute('ROLLBACK TO write')
                    conn.execute('RELEASE write')
                elif conn.in_transaction:
                    conn.execute('ROLLBACK')
                raise
            finally:
                self._depth -= 1

    @contextmanager
    def transaction(self) -> Iterator[ResultsStore]:
        """Group writes into one transaction: all are committed at the end, or none.

        Writing many runs at once (an import, a benchmark) is much faster
        this way.  The store's write lock is held until the block ends, so
        other processes wait to write: keep the block short.  A write that
        fails inside the block is undone alone (the others stay), unless
        its exception leaves the block, which undoes them all.

        Example:
            >>> import tempfile
            >>> from tfsnippet.experiment.store import ResultsStore
            >>> with tempfile.TemporaryDirectory() as root, ResultsStore(root) as store:
            ...     with store.transaction():
            ...         for i in range(3):
            ...             store.start_run(f'r{i}', 'sweep', {'seed': i})
            ...     len(store.runs())
            3
        """
        with self._write():
            yield self

    @contextmanager
    def snapshot(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every read inside sees the database in one state.

        Yields the connection, for :mod:`tfsnippet.experiment.query`; other
        code should use the methods of the store.
        """
        with self._lock:
            conn = self._connection()
            if conn.in_transaction:   # inside `transaction()`: read what it wrote so far
                yield conn
                return
            conn.execute('BEGIN')
            try:
                yield conn
            finally:
                if conn.in_transaction:
                    conn.execute('COMMIT')

    def _register_fields(self, conn: sqlite3.Connection, kind: str, names: Iterable[str]) -> None:
        new = [(kind, n) for n in names if (kind, n) not in self._known_fields]
        if new:
            conn.executemany('INSERT OR IGNORE INTO fields (kind, name) VALUES (?, ?)', new)
            self._known_fields.update(new)

    def _touch(self, conn: sqlite3.Connection, run_id: str, now: float) -> None:
        cur = conn.execute('UPDATE runs SET heartbeat = ? WHERE run_id = ?', (now, run_id))
        if cur.rowcount == 0:
            raise RuntimeError(f'No run {run_id!r} in {self._path!r}: call '
                               f'`start_run({run_id!r}, ...)` before writing to it')

    # ---------------------------------------------------------------- writing
    def start_run(self, run_id: str, name: str, config: Mapping[str, Any] | None = None,
                  meta: Mapping[str, Any] | None = None) -> None:
        """Record that a run starts, or resumes, with status ``'running'``.

        Starting a `run_id` the store already has resumes it: its name,
        config and meta are replaced, and what it logged so far is kept.

        Args:
            run_id: A unique, non-empty id.
            name: A human-readable name (need not be unique).
            config: The run's config: a nested mapping with str keys and
                values that are None, bool, int, float, str or lists of them.
            meta: JSON-serialisable facts about the run (host, command line...).

        Raises:
            TypeError: An argument, a config key or value has an unsupported type.
            ValueError: `run_id` is empty.
        """
        _check_id(run_id)
        if not isinstance(name, str):
            raise TypeError(f'`name` must be a str, got {typed_repr(name)}')
        config = {} if config is None else config
        if not isinstance(config, Mapping):
            raise TypeError(f'`config` must be a mapping, got {typed_repr(config)}')
        flat = flatten_config(config)
        nested = _to_json(_plain_config(config), 'config')
        meta_json = _to_json({} if meta is None else meta, 'meta')
        with self._write() as conn:
            now = self.now()
            conn.execute(
                'INSERT INTO runs (run_id, name, status, created, heartbeat, config, meta) '
                'VALUES (?, ?, \'running\', ?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE '
                'SET name = excluded.name, status = \'running\', '
                'heartbeat = excluded.heartbeat, ended = NULL, config = excluded.config, '
                'meta = excluded.meta',
                (run_id, name, now, now, nested, meta_json))
            conn.execute('DELETE FROM config WHERE run_id = ?', (run_id,))
            conn.executemany('INSERT INTO config (run_id, key, value) VALUES (?, ?, ?)',
                             [(run_id, k, _sql_config_value(v)) for k, v in flat.items()])
            self._register_fields(conn, 'config', flat)

    def delete_run(self, run_id: str) -> None:
        """Remove a run and everything recorded of it (nothing if there is no such run)."""
        _check_id(run_id)
        with self._write() as conn:
            for table in ('runs', 'config', 'epochs', 'metrics', 'best', 'results'):
                conn.execute(f'DELETE FROM {table} WHERE run_id = ?', (run_id,))

    def heartbeat(self, run_id: str) -> None:
        """Show that a run is alive (any other write to it does too).

        Raises:
            RuntimeError: The store has no run `run_id`.
        """
        with self._write() as conn:
            self._touch(conn, run_id, self.now())

    def set_status(self, run_id: str, status: str) -> None:
        """Set a run's status: one of `RUN_STATUSES`.

        A status other than ``'running'`` also records when the run ended.

        Raises:
            ValueError: `status` is not one of `RUN_STATUSES`.
            RuntimeError: The store has no run `run_id`.
        """
        if status not in RUN_STATUSES:
            raise ValueError(f'`status` must be one of {", ".join(map(repr, RUN_STATUSES))}, '
                             f'got {typed_repr(status)}')
        with self._write() as conn:
            now = self.now()
            self._touch(conn, run_id, now)
            conn.execute('UPDATE runs SET status = ?, ended = ? WHERE run_id = ?',
                         (status, None if status == 'running' else now, run_id))

    def log_epoch_metrics(self, run_id: str, step: int, epoch: int,
                          metrics: Mapping[str, EpochStats]) -> None:
        """Record the statistics of one epoch, in one transaction.

        Args:
            run_id: The run.
            step: The global step at the end of the epoch.
            epoch: The epoch number.
            metrics: ``{name: {'mean': m, 'std': s, 'count': n}}`` (``std``
                and ``count`` may be left out) or ``{name: value}``.  Logging
                an epoch again replaces the statistics of the names given.

        Raises:
            TypeError, ValueError: A step, epoch, name or statistic is invalid.
            RuntimeError: The store has no run `run_id`.
        """
        self.log_epochs(run_id, [(step, epoch, metrics)])

    def log_epochs(self, run_id: str,
                   epochs: Sequence[tuple[int, int, Mapping[str, EpochStats]]]) -> None:
        """Record several epochs (``(step, epoch, metrics)`` triples) in one transaction.

        This is how a buffered writer flushes: all the epochs are written, or
        none.  See :meth:`log_epoch_metrics` for the arguments.
        """
        rows: list[tuple[Any, ...]] = []
        latest: dict[str, tuple[int, float | None]] = {}
        last_epoch = last_step = None
        for i, item in enumerate(epochs):
            if not isinstance(item, tuple) or len(item) != 3:
                raise TypeError(f'`epochs[{i}]` must be a (step, epoch, metrics) tuple, '
                                f'got {typed_repr(item)}')
            step, epoch, metrics = item
            _check_count(step, 'step')
            _check_count(epoch, 'epoch')
            if not isinstance(metrics, Mapping):
                raise TypeError(f'`metrics` must be a mapping, got {typed_repr(metrics)}')
            for name, stats in metrics.items():
                _check_name(name, 'metrics')
                mean, std, count = _epoch_stats(name, stats)
                rows.append((run_id, epoch, name, step, mean, std, count))
                if name not in latest or epoch >= latest[name][0]:
                    latest[name] = (epoch, mean)
            if last_epoch is None or epoch >= last_epoch:
                last_epoch, last_step = epoch, step
        if last_epoch is None:
            return
        with self._write() as conn:
            self._touch(conn, run_id, self.now())
            conn.executemany(
                'INSERT OR REPLACE INTO epochs (run_id, epoch, name, step, mean, std, count) '
                'VALUES (?, ?, ?, ?, ?, ?, ?)', rows)
            conn.executemany(UPSERT_EPOCH_METRIC,
                             [(run_id, n, v, e) for n, (e, v) in latest.items()])
            conn.execute('UPDATE runs SET epoch = ?, step = ? WHERE run_id = ? '
                         'AND (epoch IS NULL OR epoch <= ?)',
                         (last_epoch, last_step, run_id, last_epoch))
            self._register_fields(conn, 'metrics', latest)

    def forget_epochs(self, run_id: str, epoch: int) -> None:
        """Forget the statistics of the epochs from `epoch` on (a resumed run replays
        them), in one transaction; a metric's latest value goes back to the last
        epoch kept.

        Raises:
            TypeError, ValueError: `epoch` is not an int >= 0.
        """
        _check_count(epoch, 'epoch')
        with self._write() as conn:
            for statement in FORGET_EPOCHS:
                conn.execute(statement, {'run': run_id, 'epoch': epoch})

    def set_best(self, run_id: str, values: Mapping[str, float]) -> None:
        """Record best values (``best.<name>`` in queries), replacing earlier ones.

        Raises:
            TypeError, ValueError: A name or value is invalid.
            RuntimeError: The store has no run `run_id`.
        """
        self._set_values(run_id, 'best', values)

    def update_results(self, run_id: str, values: Mapping[str, float]) -> None:
        """Record final results (``results.<name>``), replacing earlier ones.

        A result also becomes the run's metric of the same name, over any
        epoch value, logged before or after.

        Raises:
            TypeError, ValueError: A name or value is invalid.
            RuntimeError: The store has no run `run_id`.
        """
        self._set_values(run_id, 'results', values)

    def _set_values(self, run_id: str, table: str, values: Mapping[str, float]) -> None:
        if not isinstance(values, Mapping):
            raise TypeError(f'`values` must be a mapping, got {typed_repr(values)}')
        rows = []
        for name, value in values.items():
            _check_name(name, 'values')
            rows.append((run_id, name, _to_float(value, f'values[{name!r}]')))
        with self._write() as conn:
            self._touch(conn, run_id, self.now())
            conn.executemany(f'INSERT OR REPLACE INTO {table} (run_id, name, value) '
                             f'VALUES (?, ?, ?)', rows)
            if table == 'results':
                conn.executemany(UPSERT_RESULT_METRIC, rows)
            self._register_fields(conn, table, values)

    # ---------------------------------------------------------------- reading
    def get_run(self, run_id: str) -> RunRow:
        """The run `run_id`.

        Raises:
            ValueError: The store has no such run (the message lists close ids).
        """
        with self.snapshot() as conn:
            rows = self.load_rows(conn, [run_id])
            if not rows:
                ids = [r for (r,) in conn.execute('SELECT run_id FROM runs')]
                raise ValueError(f'`run_id`: no run {run_id!r} in {self._path!r}'
                                 f'{close_matches_hint(str(run_id), ids)}')
        return rows[0]

    def runs(self) -> list[RunRow]:
        """Every run, in the order they were first started."""
        with self.snapshot() as conn:
            ids = [r for (r,) in conn.execute('SELECT run_id FROM runs ORDER BY created, run_id')]
            return self.load_rows(conn, ids)

    def epochs(self, run_id: str) -> list[EpochRow]:
        """The statistics logged for each epoch of a run, by epoch number.

        Raises:
            ValueError: The store has no such run.
        """
        with self.snapshot() as conn:
            if conn.execute('SELECT 1 FROM runs WHERE run_id = ?', (run_id,)).fetchone() is None:
                raise ValueError(f'`run_id`: no run {run_id!r} in {self._path!r}')
            out: list[EpochRow] = []
            for epoch, step, name, mean, std, count in conn.execute(
                    'SELECT epoch, step, name, mean, std, count FROM epochs WHERE run_id = ? '
                    'ORDER BY epoch, name', (run_id,)):
                if not out or out[-1].epoch != epoch:
                    out.append(EpochRow(epoch, step, {}))
                out[-1].metrics[name] = {'mean': _from_sql_float(mean), 'std': std,
                                         'count': count}
        return out

    def fields(self, conn: sqlite3.Connection | None = None) -> dict[str, set[str]]:
        """The names any run has, by kind: ``{'config'|'metrics'|'best'|'results': names}``.

        Args:
            conn: A connection from :meth:`snapshot` to read with.
        """
        out: dict[str, set[str]] = {'config': set(), 'metrics': set(), 'best': set(),
                                    'results': set()}
        if conn is None:
            with self.snapshot() as conn:
                return self.fields(conn)
        for kind, name in conn.execute('SELECT kind, name FROM fields'):
            out.setdefault(kind, set()).add(name)
        return out

    def stale_before(self) -> float:
        """The heartbeat time under which a running run counts as stale, now."""
        return self.now() - self._stale_after

    def load_rows(self, conn: sqlite3.Connection, run_ids: Sequence[str]) -> list[RunRow]:
        """The runs `run_ids`, in that order (ids the store lacks are left out).

        Args:
            conn: A connection from :meth:`snapshot`.
            run_ids: The ids to load.
        """
        threshold = self.stale_before()
        runs: dict[str, tuple[Any, ...]] = {}
        values: dict[str, dict[str, dict[str, float]]] = {
            'metrics': {}, 'best': {}, 'results': {}}
        for start in range(0, len(run_ids), IN_CHUNK):
            chunk = list(run_ids[start:start + IN_CHUNK])
            marks = ', '.join('?' * len(chunk))
            for row in conn.execute(
                    f'SELECT {RUN_COLUMNS} FROM runs WHERE run_id IN ({marks})', chunk):
                runs[row[0]] = row
            for table, by_run in values.items():
                last: str | None = None
                d: dict[str, float] = {}
                for run_id, name, value in conn.execute(
                        f'SELECT run_id, name, value FROM {table} WHERE run_id IN ({marks})',
                        chunk):
                    if run_id != last:   # rows mostly come grouped by run: look up less
                        last = run_id
                        d = by_run.setdefault(run_id, {})
                    d[name] = nan if value is None else value
        out = []
        metrics, best, results = values['metrics'], values['best'], values['results']
        for run_id in run_ids:
            row = runs.get(run_id)
            if row is None:
                continue
            _, name, status, created, heartbeat, ended, epoch, step, config, meta = row
            if status == 'running' and heartbeat < threshold:
                status = STALE
            out.append(RunRow(
                run_id=run_id, name=name, status=status, config=json.loads(config),
                metrics=metrics.get(run_id, {}), best=best.get(run_id, {}),
                results=results.get(run_id, {}), meta=json.loads(meta), created=created,
                heartbeat=heartbeat, ended=ended, epoch=epoch, step=step))
        return out


# ------------------------------------------------------------------ helpers
def flatten_config(config: Mapping[str, Any], *, check: bool = True) -> dict[str, Any]:
    """Flatten a nested config to dotted keys: ``{'a': {'b': 1}}`` -> ``{'a.b': 1}``.

    Args:
        config: A mapping with str keys; values may be mappings themselves.
        check: Check keys and leaf values, as :meth:`ResultsStore.start_run` does.

    Raises:
        TypeError: (with `check`) A key is not a str, or a leaf value is not
            None, bool, int, float, str or a list of JSON-serialisable values.
        ValueError: (with `check`) Two keys flatten to the same dotted key.
    """
    out: dict[str, Any] = {}
    _flatten_into(out, config, '', check)
    return out


def _flatten_into(out: dict[str, Any], config: Mapping[str, Any], prefix: str,
                  check: bool) -> None:
    for key, value in config.items():
        if check and not isinstance(key, str):
            where = f' under {prefix[:-1]!r}' if prefix else ''
            raise TypeError(f'`config` keys must be str, got {typed_repr(key)}{where}')
        dotted = f'{prefix}{key}'
        if isinstance(value, Mapping):
            _flatten_into(out, value, f'{dotted}.', check)
            continue
        if check:
            if dotted in out:
                raise ValueError(f'`config` has two values for the key {dotted!r} once '
                                 f'flattened: rename one of them')
            value = _check_config_value(value, dotted)
        out[dotted] = value


def _plain_config(config: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of a checked config made of dicts, lists and plain scalars (numpy's become them)."""
    return {key: _plain_config(value) if isinstance(value, Mapping)
            else _check_config_value(value, key) for key, value in config.items()}


def _check_config_value(value: Any, key: str) -> Any:
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (list, tuple)):
        return json.loads(_to_json(list(value), f'config[{key!r}]'))
    raise TypeError(f'`config[{key!r}]` must be None, bool, int, float, str or a list, '
                    f'got {typed_repr(value)}: convert it, e.g. with str()')


def _sql_config_value(value: Any) -> Any:
    if isinstance(value, list):
        return json.dumps(value)
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _to_json(value: Any, what: str) -> str:
    try:
        return json.dumps(value, default=_not_json)
    except (TypeError, ValueError) as e:
        raise TypeError(f'`{what}` must be JSON-serialisable: {e}') from e


def _not_json(value: Any) -> Any:
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    raise TypeError(f'cannot store {typed_repr(value)}')


def _epoch_stats(name: str, stats: Any) -> tuple[float | None, float | None, int | None]:
    if type(stats) is dict or isinstance(stats, Mapping):   # `type() is`: skips the ABC check
        unknown = set(stats) - {'mean', 'std', 'count'}
        if 'mean' not in stats or unknown:
            raise ValueError(f'`metrics[{name!r}]` must have a \'mean\' and may have a '
                             f'\'std\' and a \'count\', got the keys {sorted(map(str, stats))}')
        mean = _to_float(stats['mean'], f'metrics[{name!r}][\'mean\']')
        std = stats.get('std')
        std = None if std is None else _to_float(std, f'metrics[{name!r}][\'std\']')
        count = stats.get('count')
        if count is not None:
            _check_count(count, f'metrics[{name!r}][\'count\']')
            count = int(count)
        return mean, std, count
    return _to_float(stats, f'metrics[{name!r}]'), None, None


def _to_float(value: Any, what: str) -> float | None:
    """A float for SQLite; NaN becomes NULL (SQLite has no NaN) and reads back as NaN."""
    if type(value) is float:   # the common case, without the ABC check below
        return None if value != value else value
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f'`{what}` must be a real number, got {typed_repr(value)}')
    value = float(value)
    return None if math.isnan(value) else value


def _from_sql_float(value: float | None) -> float:
    return math.nan if value is None else value


def _check_count(value: Any, what: str) -> None:
    if type(value) is not int and (isinstance(value, bool)
                                   or not isinstance(value, numbers.Integral)):
        raise TypeError(f'`{what}` must be an int, got {typed_repr(value)}')
    if value < 0:
        raise ValueError(f'`{what}` must be >= 0, got {value!r}')


def _check_id(run_id: Any) -> None:
    if not isinstance(run_id, str):
        raise TypeError(f'`run_id` must be a str, got {typed_repr(run_id)}')
    if not run_id:
        raise ValueError('`run_id` must not be empty, got \'\'')


def _check_name(name: Any, what: str) -> None:
    if not isinstance(name, str):
        raise TypeError(f'`{what}` names must be str, got {typed_repr(name)}')
    if not name:
        raise ValueError(f'`{what}` names must not be empty, got \'\'')
