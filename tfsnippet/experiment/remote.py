"""Runs on object storage: each run writes its own records as objects, and a
local SQLite index is built from them when the runs are queried.

**Why this design.**  The results store of a local root is one SQLite
database that every run writes into (:class:`~tfsnippet.ResultsStore`).
SQLite needs file locks and writes pages in place; an object store (S3,
GCS) has neither, and a database copied down, changed and uploaded again by
several jobs at once would lose all but the last job's writes.  So under a
URL root nothing is shared: every object has exactly one writer (the chief
process of the run it belongs to), and no object is ever read, changed and
written back.

**The layout under the root** (``<root>/<run_id>/``):

* ``config.json``, ``run.json``, ``result.json``, ``console.log`` and the
  HParams event file: the run directory's files, as on a local root, each
  uploaded whole (see :class:`~tfsnippet.Experiment`);
* ``records/<seq>.json``: what the run records, as append-only numbered
  objects (``0000000000.json``, ``0000000001.json``...), one per write: the
  run's start (name, config, meta), the epochs and best values of a flush,
  final results, the final status.  Each holds the time it was written.  A
  resumed run goes on numbering after the highest number it finds;
* ``heartbeat.json``: the time of the last heartbeat, rewritten whole.

A PUT of an object is atomic on every object store, so a run killed
mid-write leaves its earlier records intact and no half-written record.

**The index** (:func:`open_results_store`): a local
:class:`~tfsnippet.ResultsStore` in a cache folder keyed by the URL
(``$TFSNIPPET_CACHE_DIR/results/<hash>/``, by default under
``$XDG_CACHE_HOME/tfsnippet`` or ``~/.cache/tfsnippet``).  Each refresh lists
the root once (one paged LIST request), then downloads only the records it
has not applied yet and the heartbeats whose ETag (or size and time, where
the store gives no ETag) changed, and replays them into the local database
with the time each was written.  Which objects were applied (their ETags)
is kept in the same database and updated in the same transaction as the
rows, so a refresh killed half-way, or two refreshes at once, leave the
index consistent.  A record whose ETag changed, or that vanished, makes the
index rebuild that run from its records; a run whose records are all gone
leaves the index.  The cache is only a cache: deleting it costs a full
download at the next query.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import Any

from ..storage import Location, bucket_error, check_bucket, is_url, resolve
from ..storage.staging import staging_prefix
from ..utils.text import short_repr
from .store import ResultsStore, RunRow

__all__ = ['RunRecordWriter', 'open_results_store', 'index_cache_dir', 'read_remote_run',
           'is_remote_root', 'RECORDS_DIR', 'HEARTBEAT_FILE']

RECORDS_DIR = 'records'
"""The folder of a run's numbered record objects, under ``<root>/<run_id>/``."""

HEARTBEAT_FILE = 'heartbeat.json'
"""The run's last heartbeat, ``{"time": seconds}``, under ``<root>/<run_id>/``."""

_FORMAT = 1
_RECORD = re.compile(r'^([0-9]{1,20})\.json$')
_INDEX_TABLE = ('CREATE TABLE IF NOT EXISTS remote_objects (path TEXT PRIMARY KEY, '
                'run_id TEXT NOT NULL, tag TEXT NOT NULL)')


# ------------------------------------------------------------------ writing
class RunRecordWriter:
    """Writes one run's records under ``<run>/records/`` (numbered objects,
    never rewritten) and its heartbeat; one writer per run (the chief).

    Args:
        run: The run's location (``<root>/<run_id>``), a URL.
        clock: Returns the current time in seconds since the epoch.
    """

    def __init__(self, run: Location, clock: Callable[[], float] = time.time) -> None:
        if run.is_local:
            raise ValueError(f'`run` must be an object-store location, got {run.url!r}')
        self._run = run
        self._fs = run.fs
        self._clock = clock
        self._lock = threading.Lock()
        self._next = self._first_free()

    @property
    def location(self) -> Location:
        """Where the run's objects are."""
        return self._run

    def _first_free(self) -> int:
        numbers = [seq for seq, _ in _record_objects(self._fs, self._run.join(RECORDS_DIR).path)]
        return max(numbers) + 1 if numbers else 0

    def write(self, *ops: list[Any]) -> None:
        """Write one record object holding `ops` (``[kind, args...]`` lists)."""
        with self._lock:
            data = {'format': _FORMAT, 'time': float(self._clock()), 'ops': list(ops)}
            path = self._run.join(RECORDS_DIR, f'{self._next:010d}.json').path
            self._fs.pipe_file(path, json.dumps(data, default=_plain).encode('utf-8'))
            self._next += 1

    def heartbeat(self) -> None:
        """Rewrite ``heartbeat.json`` with the current time."""
        data = json.dumps({'format': _FORMAT, 'time': float(self._clock())}).encode('utf-8')
        self._fs.pipe_file(self._run.join(HEARTBEAT_FILE).path, data)

    def __repr__(self) -> str:
        return f'RunRecordWriter({self._run.url!r})'


def _plain(value: Any) -> Any:
    """numpy scalars and the like as plain JSON numbers."""
    for kind in (int, float):
        try:
            return kind(value)
        except (TypeError, ValueError):
            continue
    raise TypeError(f'cannot record {short_repr(value)} ({type(value).__name__})')


def _record_objects(fs: Any, folder: str) -> list[tuple[int, str]]:
    try:
        names = fs.ls(folder, detail=False)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        match = _RECORD.match(name.rstrip('/').rsplit('/', 1)[-1])
        if match is not None:
            out.append((int(match.group(1)), name))
    return sorted(out)


# ------------------------------------------------------------------ reading
def index_cache_dir(url: str) -> str:
    """The local folder of the index of the runs under `url`."""
    base = os.environ.get('TFSNIPPET_CACHE_DIR')
    if not base:
        xdg = os.environ.get('XDG_CACHE_HOME') or os.path.join(os.path.expanduser('~'), '.cache')
        base = os.path.join(xdg, 'tfsnippet')
    key = hashlib.sha256(url.encode('utf-8')).hexdigest()[:24]
    return os.path.join(base, 'results', key)


class _ReplayClock:
    """The index's clock: the time a record was written while it is replayed,
    else the current time (for the ``stale`` status of queries)."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self) -> float:
        return time.time() if self.at is None else self.at


def open_results_store(root: Any, *, stale_after: float = 600.,
                       argument: str = 'root') -> ResultsStore:
    """The results store of `root` to read: a local root's own database, or
    for a URL the local index of its runs, refreshed from the bucket first.

    Raises:
        ValueError: A local root holds no store; a URL's bucket does not
            exist, refuses the credentials, or holds no run records; an
            unknown protocol.
        ~tfsnippet.storage.StorageUnavailableError: The URL's package is not installed.
    """
    location = resolve(root, argument=argument)
    if location.is_local:
        return ResultsStore(location.path, create=False, stale_after=stale_after)
    check_bucket(location, argument)
    clock = _ReplayClock()
    store = ResultsStore(index_cache_dir(location.url), stale_after=stale_after, clock=clock)
    try:
        listing = _refresh(store, clock, location, None, argument)
    except BaseException:
        store.close()
        raise
    if not listing:
        store.close()
        raise ValueError(f'`{argument}` has no results store: {location.url!r} holds no run '
                         f'records (no <run>/{RECORDS_DIR}/*.json)')
    return store


def read_remote_run(run: Location, run_id: str) -> RunRow | None:
    """What the records of one run under `run` say of it (``None`` without records):
    replayed into a throwaway store."""
    listing = {}
    for _, path in _record_objects(run.fs, run.join(RECORDS_DIR).path):
        listing[f'{run_id}/{RECORDS_DIR}/{path.rsplit("/", 1)[-1]}'] = ('', path)
    if not listing:
        return None
    folder = tempfile.mkdtemp(prefix=staging_prefix('run'))
    try:
        clock = _ReplayClock()
        with ResultsStore(folder, clock=clock) as store:
            parent = Location(run.url.rsplit('/', 1)[0], run.protocol,
                              run.path.rsplit('/', 1)[0], run.fs)
            _refresh(store, clock, parent, listing)
            try:
                return store.get_run(run_id)
            except ValueError:
                return None
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _listing(location: Location, argument: str) -> dict[str, tuple[str, str]]:
    """``{relative path: (tag, full path)}`` of the record and heartbeat objects."""
    try:
        found = location.fs.find(location.path, detail=True)
    except FileNotFoundError:
        return {}
    except PermissionError as e:
        raise bucket_error(location, argument, e) from e
    prefix = location.path.rstrip('/') + '/'
    out = {}
    for path, info in found.items():
        norm = path if path.startswith(prefix) or not prefix.startswith('/') else '/' + path
        if not norm.startswith(prefix):
            continue
        rel = norm[len(prefix):]
        parts = rel.split('/')
        if (len(parts) == 3 and parts[1] == RECORDS_DIR and _RECORD.match(parts[2])) or (
                len(parts) == 2 and parts[1] == HEARTBEAT_FILE):
            tag = info.get('ETag') or info.get('etag') or info.get('md5Hash') or \
                f'{info.get("size")}:{info.get("mtime") or info.get("created") or ""}'
            out[rel] = (str(tag), path)
    return out


def _refresh(store: ResultsStore, clock: _ReplayClock, location: Location,
             listing: Mapping[str, tuple[str, str]] | None,
             argument: str = 'root') -> Mapping[str, tuple[str, str]]:
    """Bring the index `store` up to the objects of `listing` (by default, the
    root listed once the index's write lock is held, so that a refresh never
    goes back behind one that ran meanwhile), in one transaction; return the listing."""
    with store.transaction():
        if listing is None:
            listing = _listing(location, argument)
        by_run: dict[str, dict[str, tuple[str, str]]] = {}
        for rel, entry in listing.items():
            by_run.setdefault(rel.split('/', 1)[0], {})[rel] = entry
        with store.snapshot() as conn:
            conn.execute(_INDEX_TABLE)
            applied: dict[str, dict[str, str]] = {}
            for path, run_id, tag in conn.execute('SELECT path, run_id, tag FROM remote_objects'):
                applied.setdefault(run_id, {})[path] = tag
        for run_id in sorted(set(applied) - set(by_run)):   # a run deleted from the bucket
            _forget(store, run_id)
        for run_id, objects in sorted(by_run.items()):
            done = applied.get(run_id, {})
            changed = any(rel not in objects or objects[rel][0] != tag
                          for rel, tag in done.items() if f'/{RECORDS_DIR}/' in rel)
            if changed:   # a record rewritten or gone: replay the run from its records
                _forget(store, run_id)
                done = {}
            _apply_run(store, clock, location, run_id, objects, done)
    return listing


def _forget(store: ResultsStore, run_id: str) -> None:
    store.delete_run(run_id)
    with store.snapshot() as conn:
        conn.execute('DELETE FROM remote_objects WHERE run_id = ?', (run_id,))


def _apply_run(store: ResultsStore, clock: _ReplayClock, location: Location, run_id: str,
               objects: Mapping[str, tuple[str, str]], done: Mapping[str, str]) -> None:
    records = sorted((int(rel.rsplit('/', 1)[-1][:-len('.json')]), rel)
                     for rel in objects if f'/{RECORDS_DIR}/' in rel and rel not in done)
    heartbeat = f'{run_id}/{HEARTBEAT_FILE}'
    fetch = [objects[rel][1] for _, rel in records]
    if heartbeat in objects and done.get(heartbeat) != objects[heartbeat][0]:
        fetch.append(objects[heartbeat][1])
    if not fetch:
        return
    data = location.fs.cat(fetch) if len(fetch) > 1 else {fetch[0]: location.fs.cat(fetch[0])}
    applied: list[tuple[str, str, str]] = []
    try:
        for _, rel in records:
            path = objects[rel][1]
            try:
                record = json.loads(data[path])
                for op in record['ops']:
                    clock.at = float(record['time'])
                    _apply_op(store, run_id, op)
            except (KeyError, TypeError, ValueError, RuntimeError) as e:
                warnings.warn(f'Skipped the record {path!r} of run {run_id!r}: {e}',
                              RuntimeWarning, stacklevel=4)
                continue
            applied.append((rel, run_id, objects[rel][0]))
        if heartbeat in objects and objects[heartbeat][1] in data:
            try:
                beat = float(json.loads(data[objects[heartbeat][1]])['time'])
                with store.snapshot() as conn:
                    row = conn.execute('SELECT heartbeat FROM runs WHERE run_id = ?',
                                       (run_id,)).fetchone()
                if row is not None and beat > row[0]:
                    clock.at = beat
                    store.heartbeat(run_id)
                if row is not None:
                    applied.append((heartbeat, run_id, objects[heartbeat][0]))
            except (KeyError, TypeError, ValueError) as e:
                warnings.warn(f'Skipped the heartbeat of run {run_id!r}: {e}',
                              RuntimeWarning, stacklevel=4)
    finally:
        clock.at = None
    with store.snapshot() as conn:
        conn.executemany('INSERT OR REPLACE INTO remote_objects (path, run_id, tag) '
                         'VALUES (?, ?, ?)', applied)


def _apply_op(store: ResultsStore, run_id: str, op: Any) -> None:
    kind, *args = op
    if kind == 'start':
        name, config, meta = args
        store.start_run(run_id, name, config, meta)
    elif kind == 'epochs':
        store.log_epochs(run_id, [(int(s), int(e), stats) for s, e, stats in args[0]])
    elif kind == 'best':
        store.set_best(run_id, args[0])
    elif kind == 'results':
        store.update_results(run_id, args[0])
    elif kind == 'status':
        store.set_status(run_id, args[0])
    elif kind == 'forget_epochs':
        store.forget_epochs(run_id, int(args[0]))
    else:
        raise ValueError(f'unknown record kind {kind!r}')


def is_remote_root(root: Any) -> bool:
    """Whether `root` names an object-store URL (not a local path)."""
    return isinstance(root, Location) and not root.is_local or is_url(root)
