"""Checkpoints on an object store (S3, GCS), crash-safely, where there is no rename.

:class:`ObjectCheckpointStore` has the interface of the local
:class:`~.store.CheckpointStore` (``save``, ``pin_best``, ``checkpoints``,
``latest``, ``best``, ``pinned``, ``recover``, ``path_of``) for a folder
given as a URL (``s3://bucket/run/checkpoint``); :func:`open_store` picks
one of the two from :func:`tfsnippet.storage.resolve`.  TensorFlow cannot
write to ``s3://`` here, so a checkpoint is written into a local *staging*
folder first, exactly as on local disk, and its files are then uploaded.

**Layout** under the store's URL ``<dir>``:

``<dir>/<filename>-<step>.<hex>/...``
    One save of the checkpoint of `step`: its files under a *fresh prefix*
    (``<hex>``: 32 random hex digits), so a save never writes over an
    object that a reader or an earlier save uses.
``<dir>/<filename>-<step>.<hex>/.checkpoint-store.json``
    The *commit marker*: ``{"step", "seq", "files": {name: size}}``,
    uploaded after every other file of the prefix.  A prefix without it
    is an unfinished (or half-deleted) save: never read, never counted.
``<dir>/checkpoint_index.json``
    The local store's index (checkpoints oldest first, ``seq``, ``pins``,
    ``best``) plus ``"prefixes": {name: "<name>.<hex>"}``, the prefix that
    holds each listed checkpoint.

A checkpoint's *path* is ``<dir>/<filename>-<step>`` (what
:meth:`~ObjectCheckpointStore.path_of` returns and resumes print); the store
maps it to the prefix that holds it.  :meth:`~ObjectCheckpointStore.local_copy`
downloads a committed checkpoint into a local temporary folder to read it.

**Saving** (each numbered item is one or more object-store operations; what a
process killed before each of them leaves):

1. List ``<dir>`` and read the index and the markers (recovery first, on the
   first save of a store).  *Killed:* nothing was written.
2. Fill the local staging folder (``write``), then upload its files under
   the fresh prefix.  *Killed before or during an upload:* a prefix without a
   marker, never read, deleted by recovery.
3. Upload the marker with the next sequence number: the **commit point**.
   *Killed after it:* the index does not list the checkpoint, but its
   sequence number is above the index's, which only a checkpoint committed
   after the index was written has: readers count it as the newest (a save
   of the same step supersedes the older one), and recovery writes the index
   to match.
4. Write the index, listing the kept checkpoints and their prefixes, with a
   **conditional write**: ``If-Match`` the ETag of the index read in step 1
   (``If-None-Match: *`` when there was none).  S3 (and moto) enforce both on
   ``PutObject``; a refused write means another process wrote the index
   meanwhile, two writers in one folder, and the save fails with a
   ``RuntimeError`` instead of losing the other's update.  Stores without
   conditional writes (``memory://``; GCS through ``gcsfs``, whose
   generation preconditions are not used here) write the index plainly:
   one writer per folder is then the rule, as for local folders.
   *Killed after it:* pruned checkpoints are unlisted and their numbers are
   not above the index's: never counted, deleted by recovery.
5. Prune: for each checkpoint that the keep policies drop (and the older
   prefix of a re-saved step), delete its marker first, then its other
   objects.  *Killed in between:* a prefix without a marker, deleted by
   recovery.

So a kill at any instant leaves every reader the newest committed
checkpoint: the one of the killed save if its marker was uploaded, otherwise
the one before.  Pruning and recovery delete only prefixes under this
store's ``<dir>`` that match ``<filename>-<step>.<hex>``: several runs that
share a bucket (each its own ``checkpoint_dir``) never touch each other's
objects.  A ``durable`` argument is accepted for the local store's sake; an
object is durable once its upload is acknowledged.

**The best checkpoint** and **keep policies** work as in the local store:
the pins are fields of the index and move with its conditional write.

**Recovery** (:meth:`~ObjectCheckpointStore.recover`) deletes the prefixes
without a marker and the committed ones that are no longer counted, and
rewrites the index when a committed checkpoint is newer than it.  It
assumes one writer per folder (an unfinished prefix of a save under way in
another process would be deleted).

**Asynchronous saves** need nothing else: the background writer of
:mod:`~.io` calls :meth:`~ObjectCheckpointStore.save`, so the staging write,
the uploads, the marker, the index and the pruning all run in its thread.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...storage import Location, bucket_error, is_url, resolve
from ...storage.retry import RetryPolicy, call_with_retry
from ...storage.staging import clean_stale_staging, staging_prefix
from ...utils.text import short_repr
from .policies import KeepPolicy
from .store import INDEX_FILE, MARKER_FILE, TMP_PREFIX, CheckpointStore, StoreSettings, check_step

__all__ = ['ObjectCheckpointStore', 'open_store', 'check_store_access', 'StoreConflictError',
           'filenames_in']

_INDEX_FORMAT = 2
_HEX = re.compile(r'[0-9a-f]{32}')


class StoreConflictError(RuntimeError):
    """The index was changed by another process during a save (two writers in one folder)."""


@dataclass
class _Entry:
    """A committed checkpoint prefix."""

    name: str       # ``<filename>-<step>``
    prefix: str     # ``<name>.<hex>``
    step: int
    seq: int
    files: dict[str, int] = field(default_factory=dict)


@dataclass
class _Scan:
    """What one listing of the store's folder found."""

    listed: list[str] = field(default_factory=list)
    index_seq: int | None = None
    pins: list[dict[str, Any]] = field(default_factory=list)
    prefixes: dict[str, str] = field(default_factory=dict)   # the index's name -> prefix
    etag: str | None = None                                  # the index's, if any
    committed: dict[str, _Entry] = field(default_factory=dict)   # prefix -> entry
    unfinished: list[str] = field(default_factory=list)          # prefixes without a marker

    def max_seq(self) -> int:
        return max([self.index_seq or 0] + [e.seq for e in self.committed.values()])


def open_store(save_dir: str | os.PathLike[str] | Location, *, argument: str = 'save_dir',
               **options: Any) -> CheckpointStore | ObjectCheckpointStore:
    """The store of `save_dir`: a :class:`~.store.CheckpointStore` for a local path
    (or a ``file://`` URL), an :class:`ObjectCheckpointStore` for an object-store URL.

    `options` are those of the stores (``filename``, ``max_to_keep``,
    ``durable``, ``keep``).

    Raises:
        ValueError: A URL of an unknown protocol (see :func:`~tfsnippet.storage.resolve`).
        ~tfsnippet.storage.StorageUnavailableError: The protocol's package is
            not installed.
    """
    location = None
    if isinstance(save_dir, Location):
        location = save_dir
    elif isinstance(save_dir, (str, os.PathLike)) and (
            is_url(save_dir, argument=argument) or '://' in os.fsdecode(os.fspath(save_dir))):
        location = resolve(save_dir, argument=argument)
    if location is None:
        return CheckpointStore(save_dir, **options)   # a local path (it checks it)
    if location.is_local:
        return CheckpointStore(location.path, **options)
    return ObjectCheckpointStore(location, argument=argument, **options)


def check_store_access(location: Location, argument: str, shown: Location | None = None) -> None:
    """Write and delete a probe object in `location`; turn what refuses it into a
    ``ValueError`` naming `argument` and its value `shown` (default: `location`):
    the bucket does not exist, the credentials are refused, or what the store says.
    """
    probe = location.join(f'{TMP_PREFIX}probe-{uuid.uuid4().hex}')
    try:
        location.fs.pipe_file(probe.path, b'ok')
        location.fs.rm_file(probe.path)
    except Exception as e:
        raise access_error(shown or location, argument, e) from e


def access_error(location: Location, argument: str, error: BaseException) -> ValueError:
    """The ``ValueError`` naming `argument` for what the store answered (the
    same message as wherever else a bucket is checked: :func:`~tfsnippet.storage.bucket_error`)."""
    return bucket_error(location, argument, error, doing='written')


class ObjectCheckpointStore(StoreSettings):
    """Lays out numbered checkpoints under an object-store URL, crash-safely.

    The protocol, and what a process killed before each object-store
    operation leaves, is described in the documentation of this module.

    Args:
        save_dir: The URL (or its resolved :class:`~tfsnippet.storage.Location`)
            of the folder owned by this store.
        filename: Checkpoints are ``<filename>-<step>``.
        max_to_keep: Keep this many newest checkpoints (``None``: all).
        durable: Accepted for the local store's interface (an uploaded
            object is durable).
        keep: Keep policies (see :mod:`~.policies`).
        argument: The argument's name, for error messages.

    Raises:
        TypeError: `save_dir` is not a URL, or `max_to_keep` not an int.
        ValueError: `filename` is not a plain file name, `max_to_keep` is
            below 1, or the URL's protocol is unknown.
    """

    def __init__(self, save_dir: str | Location, filename: str = 'checkpoint.dat',
                 max_to_keep: int | None = None, durable: bool = True,
                 keep: KeepPolicy | list[KeepPolicy] | None = None,
                 argument: str = 'save_dir'):
        location = resolve(save_dir, argument=argument)
        if location.is_local:
            raise TypeError(f'`{argument}` must be an object-store URL, got '
                            f'{short_repr(save_dir)}: use a CheckpointStore for a local path')
        super().__init__(filename, max_to_keep, durable, keep)
        self._location = location
        self._fs = location.fs
        self._argument = argument
        self._prefix_re = re.compile(re.escape(filename) + r'-(\d+)\.([0-9a-f]{32})')
        self._conditional = location.protocol in ('s3', 's3a')
        self._recovered = False
        self._retry: RetryPolicy | None = None   # the default policy
        clean_stale_staging()

    # ------------------------------------------------------------ properties
    @property
    def save_dir(self) -> str:
        """The URL of the folder."""
        return self._location.url

    @property
    def location(self) -> Location:
        """The resolved location of the folder."""
        return self._location

    def path_of(self, step: int) -> str:
        """The path (URL) the checkpoint of `step` has once saved."""
        return f'{self._location.url}/{self._filename}-{check_step(step)}'

    # ------------------------------------------------------------ object-store calls
    def _key(self, *names: str) -> str:
        return self._location.join(*names).path

    def _call(self, op: str, target: str, fn: Callable[..., Any], *args: Any,
              **kwargs: Any) -> Any:
        """Every object-store operation of the store goes through here (`op` names
        it, `target` is the object or prefix): the one place to watch them.
        Transient errors are retried with a bounded backoff
        (:mod:`tfsnippet.storage.retry`), then raise
        :class:`~tfsnippet.storage.retry.StoreOutageError` naming the store."""
        return call_with_retry(self._location.url, f'{op} of {target!r}', fn, *args,
                               policy=self._retry, **kwargs)

    def _listing(self) -> list[str]:
        try:
            return list(self._call('list', self._location.path, self._fs.find,
                                   self._location.path))
        except FileNotFoundError:
            if self._bucket_exists():
                return []
            raise

    def _bucket_exists(self) -> bool:
        bucket = self._location.path.lstrip('/').split('/', 1)[0]
        try:
            return bool(self._fs.exists(bucket))
        except FileNotFoundError:
            return False

    # ------------------------------------------------------------ reading
    def _scan(self) -> _Scan:
        scan = _Scan()
        root = self._location.path.rstrip('/') + '/'
        markers: list[str] = []
        prefixes: set[str] = set()
        index_seen = False
        for key in self._listing():
            key = '/' + key.lstrip('/') if root.startswith('/') else key.lstrip('/')
            if not key.startswith(root):
                continue
            rel = key[len(root):]
            if rel == INDEX_FILE:
                index_seen = True
                continue
            top, _, rest = rel.partition('/')
            if not rest or self._prefix_re.fullmatch(top) is None:
                continue
            prefixes.add(top)
            if rest == MARKER_FILE:
                markers.append(top)
        paths = [self._key(p, MARKER_FILE) for p in markers]
        if index_seen:
            paths.append(self._key(INDEX_FILE))
        if index_seen:   # the ETag before the content: a change in between fails the write
            scan.etag = self._index_etag()
        contents = self._call('read', self._location.path, self._fs.cat, paths,
                              on_error='omit') if paths else {}
        contents = {('/' + k.lstrip('/') if root.startswith('/') else k.lstrip('/')): v
                    for k, v in contents.items()}
        for prefix in markers:
            entry = self._entry(prefix, contents.get(self._key(prefix, MARKER_FILE)))
            if entry is not None:
                scan.committed[prefix] = entry
        scan.unfinished = sorted(prefixes - set(scan.committed))
        if index_seen:
            self._read_index(scan, contents.get(self._key(INDEX_FILE)))
        return scan

    def _entry(self, prefix: str, raw: bytes | None) -> _Entry | None:
        m = self._prefix_re.fullmatch(prefix)
        if m is None or raw is None:
            return None
        try:
            data = json.loads(raw)
        except ValueError:
            return None
        seq = data.get('seq') if isinstance(data, dict) else None
        files = data.get('files') if isinstance(data, dict) else None
        if isinstance(seq, bool) or not isinstance(seq, int) or seq <= 0 or \
                not isinstance(files, dict):
            return None
        name = prefix[:-33]
        return _Entry(name, prefix, int(m.group(1)), seq,
                      {str(k): int(v) for k, v in files.items() if isinstance(v, int)})

    def _index_etag(self) -> str | None:
        if not self._conditional:
            return None
        try:
            info = self._call('read', INDEX_FILE, self._fs.info, self._key(INDEX_FILE))
        except FileNotFoundError:
            return None
        etag = info.get('ETag')
        return str(etag) if etag else None

    @staticmethod
    def _read_index(scan: _Scan, raw: bytes | None) -> None:
        try:
            data = json.loads(raw) if raw is not None else None
        except ValueError:
            data = None
        if not isinstance(data, dict) or not isinstance(data.get('checkpoints'), list):
            return
        names = [n for n in data['checkpoints'] if isinstance(n, str)]
        prefixes = data.get('prefixes')
        prefixes = {str(k): str(v) for k, v in prefixes.items()} \
            if isinstance(prefixes, dict) else {}
        seq = data.get('seq')
        scan.listed = names
        scan.prefixes = prefixes
        scan.index_seq = seq if isinstance(seq, int) and not isinstance(seq, bool) and \
            seq >= 0 else None
        pins = data.get('pins')
        if not isinstance(pins, list):
            pins = [data.get('best')]
        scan.pins = [p for p in pins if isinstance(p, dict) and p.get('name') in names]

    @staticmethod
    def _view(scan: _Scan) -> tuple[list[_Entry], list[_Entry]]:
        """``(committed checkpoints counted, oldest first; committed ones not counted)``."""
        limit = scan.index_seq
        kept = []
        for name in dict.fromkeys(scan.listed):
            entry = scan.committed.get(scan.prefixes.get(name, ''))
            if entry is not None and (limit is None or entry.seq <= limit):
                kept.append(entry)
        kept_prefixes = {e.prefix for e in kept}
        rest = sorted((e for e in scan.committed.values() if e.prefix not in kept_prefixes),
                      key=lambda e: (e.seq, e.step))
        stale = [] if limit is None else [e for e in rest if e.seq <= limit]
        newer: dict[str, _Entry] = {}
        for entry in (rest if limit is None else [e for e in rest if e.seq > limit]):
            if entry.name in newer:          # an older save of the same step
                stale.append(newer.pop(entry.name))
            newer[entry.name] = entry
        superseded = [e for e in kept if e.name in newer]
        kept = [e for e in kept if e.name not in newer]
        return kept + sorted(newer.values(), key=lambda e: e.seq), stale + superseded

    def _path(self, entry: _Entry) -> str:
        return f'{self._location.url}/{entry.name}'

    def checkpoints(self) -> list[str]:
        """The paths of the committed checkpoints, oldest first (see the module)."""
        return [self._path(e) for e in self._view(self._scan())[0]]

    def latest(self) -> str | None:
        """The path of the newest committed checkpoint, or ``None``."""
        paths = self.checkpoints()
        return paths[-1] if paths else None

    def best(self) -> tuple[str, dict[str, Any]] | None:
        """``(path, info)`` of the pinned best checkpoint, or ``None``."""
        pinned = self.pinned()
        return pinned[0] if pinned else None

    def pinned(self) -> list[tuple[str, dict[str, Any]]]:
        """``(path, info)`` of each pinned checkpoint present, best first."""
        scan = self._scan()
        paths = {e.name: self._path(e) for e in self._view(scan)[0]}
        return [(paths[pin['name']], {k: v for k, v in pin.items() if k != 'name'})
                for pin in scan.pins if pin['name'] in paths]

    @contextlib.contextmanager
    def local_copy(self, path: str | os.PathLike[str]) -> Iterator[str]:
        """Download the committed checkpoint `path` (as :meth:`checkpoints` names it)
        into a local temporary folder, yield that folder's path, delete it after.

        A local `path` is yielded as it is.

        Raises:
            FileNotFoundError: `path` is not a committed checkpoint of this
                store, or one of its files is missing or of another size.
        """
        if not is_url(os.fspath(path)):
            yield os.path.abspath(os.fspath(path))
            return
        with tempfile.TemporaryDirectory(prefix='tfsnippet-restore-') as tmp:
            local = os.path.join(tmp, str(path).rstrip('/').rsplit('/', 1)[-1])
            self.fetch(str(path), local)
            yield local

    def make_staging(self, label: str) -> str:
        """A new empty local folder for files bound for a later save (uploaded from
        there): in the temporary directory, its name carrying this process's id, so
        a killed process's is cleaned at the next start."""
        return tempfile.mkdtemp(prefix=staging_prefix('staging', label))

    def fetch(self, path: str, local: str) -> None:
        """Download the committed checkpoint `path` (as :meth:`checkpoints` names it)
        into the new local folder `local`.

        Raises:
            FileNotFoundError: `path` is not a committed checkpoint of this
                store, or one of its files is missing or of another size.
        """
        url = path.rstrip('/')
        entry = next((e for e in self._view(self._scan())[0] if self._path(e) == url), None)
        if entry is None:
            raise FileNotFoundError(f'{url!r} is not a committed checkpoint of '
                                    f'{self.save_dir!r}')
        self._download(entry, local)

    def _download(self, entry: _Entry, local: str) -> None:
        os.makedirs(local)
        names = sorted(entry.files)
        remote = [self._key(entry.prefix, n) for n in names]
        targets = [os.path.join(local, *n.split('/')) for n in names]
        for target in targets:
            os.makedirs(os.path.dirname(target), exist_ok=True)
        if remote:
            self._call('get', entry.prefix, self._fs.get, remote, targets)
        for name, target in zip(names, targets):
            size = os.path.getsize(target) if os.path.isfile(target) else -1
            if size != entry.files[name]:
                raise FileNotFoundError(
                    f'The checkpoint {self._path(entry)!r} is damaged: {name!r} has '
                    f'{size} bytes, its commit marker says {entry.files[name]}')

    # ------------------------------------------------------------ writing
    def save(self, step: int, write: Callable[[str], Any],
             best: Mapping[str, Any] | None = None) -> str:
        """Write the checkpoint of `step` and make it the newest; return its path.

        `write` fills a local staging directory, which is uploaded under a
        fresh prefix and committed (see the module); the rest is as
        :meth:`~.store.CheckpointStore.save`.

        Raises:
            TypeError: `step` is not an int, `write` is not callable or
                `best` is not a JSON-serializable dict.
            ValueError: `step` is negative.
            RuntimeError: `write` created the store's marker file.
            StoreConflictError: Another process wrote the index during the
                save (the checkpoint is committed but not listed).
        """
        from .store import _check_best_info
        step = check_step(step)
        if not callable(write):
            raise TypeError(f'`write` must be a callable taking a directory path, got {write!r}')
        best_info = None if best is None else _check_best_info(best)
        if not self._recovered:
            self.recover()
        name = f'{self._filename}-{step}'
        scan = self._scan()
        view = self._view(scan)[0]
        seq = scan.max_seq() + 1
        prefix = f'{name}.{uuid.uuid4().hex}'

        staging = tempfile.mkdtemp(prefix=staging_prefix('staging'))
        try:
            write(staging)
            if os.path.lexists(os.path.join(staging, MARKER_FILE)):
                raise RuntimeError(
                    f'`write` must not create {MARKER_FILE!r}: the store writes it; '
                    f'got one in {staging!r}')
            files = _files_under(staging)
            # 2. upload under the fresh prefix
            for rel, size in files.items():
                self._call('put', f'{prefix}/{rel}', self._fs.put_file,
                           os.path.join(staging, *rel.split('/')), self._key(prefix, rel))
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        # 3. commit
        marker = json.dumps({'step': step, 'seq': seq, 'files': files}).encode('utf-8')
        self._call('commit', f'{prefix}/{MARKER_FILE}', self._fs.pipe_file,
                   self._key(prefix, MARKER_FILE), marker)
        entry = _Entry(name, prefix, step, seq, files)

        # 4. the index, with the retention rule applied
        names = [e.name for e in view if e.name != name] + [name]
        entries = {e.name: e for e in view}
        old = entries.get(name)
        entries[name] = entry
        pins = [p for p in scan.pins if p['name'] in names and p['name'] != name]
        if best_info is not None:
            pins = self._retention.add_pin(pins, {**best_info, 'name': name})
        victims, names = self._retention.split(names, _steps(names), pins)
        self._write_index(names, {n: entries[n].prefix for n in names}, seq, pins, scan.etag)

        # 5. prune
        doomed = [entries[n] for n in victims]
        if old is not None:
            doomed.append(old)
        self._delete(doomed)
        return self._path(entry)

    def pin_best(self, step: int, info: Mapping[str, Any]) -> str:
        """Pin the existing checkpoint of `step` as the best; return its path
        (see :meth:`~.store.CheckpointStore.pin_best`).

        Raises:
            TypeError: `step` is not an int, or `info` is not a
                JSON-serializable dict.
            ValueError: There is no checkpoint of `step`.
        """
        from .store import _check_best_info
        step = check_step(step)
        info = _check_best_info(info)
        if not self._recovered:
            self.recover()
        name = f'{self._filename}-{step}'
        scan = self._scan()
        view = self._view(scan)[0]
        entries = {e.name: e for e in view}
        if name not in entries:
            raise ValueError(f'`step` {step} has no checkpoint to pin in {self.save_dir!r}; '
                             f'the checkpoints are {list(entries)}')
        pins = self._retention.add_pin([p for p in scan.pins if p['name'] in entries],
                             {**info, 'name': name})
        victims, names = self._retention.split(list(entries), _steps(entries), pins)
        self._write_index(names, {n: entries[n].prefix for n in names}, scan.max_seq(), pins,
                          scan.etag)
        self._delete([entries[n] for n in victims])
        return self._path(entries[name])

    def recover(self) -> None:
        """Delete what killed saves left (prefixes without a marker, committed ones
        no longer counted) and bring the index up to date; keep every counted
        checkpoint.  Only the single writer of the folder may call this."""
        scan = self._scan()
        view, stale = self._view(scan)
        names = [e.name for e in view]
        prefixes = {e.name: e.prefix for e in view}
        pins = [p for p in scan.pins if p['name'] in prefixes]
        seq = scan.max_seq()
        if (names != scan.listed or pins != scan.pins or
                any(scan.prefixes.get(n) != p for n, p in prefixes.items()) or
                (seq != scan.index_seq and (names or scan.listed))):
            self._write_index(names, prefixes, seq, pins, scan.etag)
        self._delete(stale)
        for prefix in scan.unfinished:
            self._call('delete', prefix, self._fs.rm, self._key(prefix), recursive=True)
        self._recovered = True

    # ------------------------------------------------------------ helpers
    def _write_index(self, names: list[str], prefixes: dict[str, str], seq: int,
                     pins: list[dict[str, Any]], etag: str | None) -> None:
        data = json.dumps({'format': _INDEX_FORMAT, 'seq': seq, 'checkpoints': names,
                           'best': pins[0] if pins else None, 'pins': pins,
                           'prefixes': prefixes}).encode('utf-8')
        key = self._key(INDEX_FILE)
        if not self._conditional:
            self._call('index', INDEX_FILE, self._fs.pipe_file, key, data)
            return
        bucket, _, object_key = key.partition('/')
        condition = {'IfMatch': etag} if etag else {'IfNoneMatch': '*'}
        try:
            self._call('index', INDEX_FILE, self._fs.call_s3, 'put_object', Bucket=bucket,
                       Key=object_key, Body=data, **condition)
        except (FileExistsError, OSError) as e:
            if isinstance(e, (FileNotFoundError, PermissionError)) or \
                    'pre-condition' not in str(e) and 'precondition' not in str(e).lower():
                raise
            raise StoreConflictError(
                f'The index of {self.save_dir!r} was written by another process during this '
                f'save: two writers share one checkpoint folder (give each run its own '
                f'`checkpoint_dir`); the checkpoint is committed but not listed: {e}') from e

    def _delete(self, entries: list[_Entry]) -> None:
        """Delete committed prefixes: the marker first, so none is ever half-counted."""
        for entry in entries:
            self._call('unmark', entry.prefix, self._fs.rm_file,
                       self._key(entry.prefix, MARKER_FILE))
            self._call('delete', entry.prefix, self._fs.rm, self._key(entry.prefix),
                       recursive=True)

    def check_access(self) -> None:
        """Write and delete a probe object: a clear ``ValueError`` naming the argument
        when the bucket does not exist or the credentials are refused."""
        check_store_access(self._location, self._argument)


def _steps(names: Any) -> list[int]:
    """The steps of checkpoint names ``<filename>-<step>``."""
    return [int(n.rsplit('-', 1)[1]) for n in names]


def filenames_in(location: Location) -> list[str]:
    """The `filename` of each set of checkpoints an object store holds right under
    `location` (``<filename>-<step>.<hex>/`` prefixes), sorted."""
    try:
        items = location.fs.ls(location.path, detail=False)
    except FileNotFoundError:
        return []
    found = set()
    for item in items:
        name = str(item).rstrip('/').rsplit('/', 1)[-1]
        m = re.fullmatch(r'(.+)-\d+\.[0-9a-f]{32}', name)
        if m and not name.startswith('.'):
            found.add(m.group(1))
    return sorted(found)


def _files_under(root: str) -> dict[str, int]:
    """``{relative path with '/': size}`` of every file under `root`."""
    out = {}
    for directory, _, files in os.walk(root):
        for name in sorted(files):
            path = os.path.join(directory, name)
            rel = os.path.relpath(path, root).replace(os.sep, '/')
            out[rel] = os.path.getsize(path)
    return out
