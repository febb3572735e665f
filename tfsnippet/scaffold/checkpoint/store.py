"""Where and when checkpoint directories are written, listed, kept and removed, crash-safely.

:class:`CheckpointStore` knows nothing of TensorFlow or of the training
loop: it receives a callable that fills a directory, and owns everything
else on disk.

**Layout** of ``save_dir``:

``<filename>-<step>/``
    A complete checkpoint.  Besides what the caller wrote, it holds the
    store's marker ``.checkpoint-store.json`` with the step and the
    checkpoint's *sequence number*: 1 for the first save into the folder,
    one more than any number seen before for each later save.
``checkpoint_index.json``
    ``{"checkpoints": [names, oldest first], "seq": N, "best": B, "pins": P}``,
    where ``N`` is the highest sequence number assigned when the index was
    written, ``P`` the pinned checkpoints, best first (each ``{"name":
    <checkpoint>, ...what the caller recorded with it}``; the k best of a
    :class:`~.policies.KeepBest` policy), and ``B`` is ``null`` or the first
    of them (what an index without ``"pins"``, of an older version, holds).
``.tmp-*``
    Unfinished writes (a checkpoint directory ``.tmp-<name>-<hex>/``, an
    index ``.tmp-<hex>.json``).  Never complete: removed by recovery.
``.displaced-<name>-<hex>/``
    A complete checkpoint moved aside by a save of the same step.  It is
    the only copy of ``<name>`` until the new one is renamed into place.
``.doomed-<name>-<hex>/``
    A checkpoint being deleted, possibly half-deleted.  Removed by recovery.

A checkpoint directory only ever carries its real name when it is complete:
it is filled under a ``.tmp-`` name and renamed into place, and it is
renamed to a ``.doomed-`` name before its files are deleted.

**Saving**: what :meth:`CheckpointStore.save` does, and what a kill after each
step leaves.

1. Create ``.tmp-<name>-<hex>/`` and call ``write`` to fill it; write the
   marker with the next sequence number; fsync every file, every directory
   of the tree and the tree itself.
   *Killed during or after it:* a ``.tmp-`` directory, deleted by recovery; the folder
   is otherwise as before the save.
2. Only if ``<name>`` exists (a save of the same step): rename it to
   ``.displaced-<name>-<hex>/``; fsync ``save_dir``.
   *Killed after it:* ``<name>`` is missing and the displaced copy is complete.
   Recovery renames it back (it keeps its place in the index: its sequence
   number is not above the index's).  Until then the read-only views report
   the displaced copy in place of ``<name>``.
3. Rename ``.tmp-<name>-<hex>/`` to ``<name>``; fsync ``save_dir``.  This is
   the commit point: from here on ``<name>`` is the newest checkpoint.
   *Killed after it* (or in step 4 before ``os.replace``): the index does
   not list ``<name>`` as the newest, but its sequence number is above the
   index's, which only a directory renamed into place after the index was
   written can have: the views put it after every listed checkpoint, and
   recovery writes the index to match.  A
   displaced copy left from step 2 is outdated (``<name>`` exists), and
   recovery deletes it.
4. Write the new index (kept checkpoints, oldest first, and the new
   sequence number) to ``.tmp-<hex>.json``, fsync it, ``os.replace`` it over
   ``checkpoint_index.json``; fsync ``save_dir``.
   *Killed after it:* the checkpoints that the retention rule removed are no
   longer listed but still carry their real names.  Their sequence numbers
   are not above the index's, so they are pruning leftovers: never
   counted, deleted by recovery.  An unlisted directory is counted as newer
   than the index only when its number is above the index's.
5. Rename the pruned checkpoints and the displaced copy of step 2 to
   ``.doomed-`` names; fsync ``save_dir``.
6. Delete the ``.doomed-`` directories.
   *Killed in 5 or 6:* ``.doomed-`` directories, complete or half-deleted,
   deleted by recovery; a pruned checkpoint not yet renamed is a pruning
   leftover as in step 4.

So a kill at any instant leaves the next start the newest complete
checkpoint: the one of the killed save if it passed step 3, otherwise the
one that was newest before it.  No directory with a checkpoint's name is
ever incomplete.  Every step that the next one builds on is fsynced before
the next one starts, so once ``save`` has returned an OS crash cannot undo
it or surface a half-written file; an OS crash during a save leaves one of
the states above.

**The best checkpoint**: ``save(step, write, best=info)`` or
``pin_best(step, info)`` pins one checkpoint as the best.  The pin is a
field of the index, so it moves with the index's atomic ``os.replace``:
the index written in step 4 (or by ``pin_best``) names the new best and no
longer lists the old best if the retention rule drops it; the old best is
then pruned like any other checkpoint (steps 5 and 6, or recovery after a
kill).  Retention keeps the `max_to_keep` newest checkpoints and the
pinned best, which it never removes (one more when the best is older).  A
kill at any instant thus leaves the old best pinned (and present) or the
new one.

**Keep policies** (`keep`, see :mod:`~.policies`) generalise retention: a
checkpoint stays when :class:`~.policies.KeepLatest` (the `max_to_keep`
rule), :class:`~.policies.KeepEveryNth` or :class:`~.policies.KeepBest`
keeps it, and the newest always stays.  With ``KeepBest(k)`` a pin adds the
checkpoint to the k best (by the recorded ``value`` in its ``mode``) instead
of replacing the one best; the one that falls out of them is unpinned and
pruned in the same index replace, so a kill leaves the old pins or the new
ones.

**Recovery**: :meth:`CheckpointStore.recover` (what a start does, and what
the first save of a store does first) deletes ``.tmp-`` entries, renames
back a displaced copy whose checkpoint is missing and dooms the other
displaced copies, rewrites the index if it does not match the view (the
case of step 3), dooms pruning leftovers, and deletes every ``.doomed-``
directory.  Each of
these steps is itself safe to kill.  Recovery does not apply the retention
rule: a checkpoint is only removed by a save, after a newer one exists.

Without an index (lost, unreadable, or written by an older version without
``"seq"``) nothing tells pruning leftovers apart: every checkpoint directory
counts, the listed ones first, then the others by sequence number,
modification time and step.

The store assumes one writer per folder at a time; readers may list while
a writer saves.  Directories are fsynced where the system allows it (not on
Windows).  ``durable=False`` skips every fsync: a killed process still
leaves a consistent folder, an OS crash may not.
"""

from __future__ import annotations

import contextlib
import json
import operator
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...storage import is_url
from .policies import KeepPolicy, Retention

__all__ = ['CheckpointStore', 'INDEX_FILE', 'MARKER_FILE', 'TMP_PREFIX']

#: The index of the checkpoints, in ``save_dir``.
INDEX_FILE = 'checkpoint_index.json'
#: The store's own file in each checkpoint directory.
MARKER_FILE = '.checkpoint-store.json'
#: Name prefix of unfinished writes, which recovery deletes.
TMP_PREFIX = '.tmp-'
_DISPLACED_PREFIX = '.displaced-'
_DOOMED_PREFIX = '.doomed-'
_DISPLACED_RE = re.compile(re.escape(_DISPLACED_PREFIX) + r'(.+)-[0-9a-f]{32}')
_INDEX_FORMAT = 2


@dataclass
class _Entry:
    """A checkpoint directory found on disk."""

    name: str       # its real name, ``<filename>-<step>``
    path: str       # where it is now (a displaced copy's temporary path)
    step: int
    seq: int        # 0 when it has no marker (written by an older version)
    mtime: float


@dataclass
class _Scan:
    """What one listing of ``save_dir`` found."""

    listed: list[str] = field(default_factory=list)
    index_seq: int | None = None
    pins: list[dict[str, Any]] = field(default_factory=list)   # the pinned, best first
    entries: dict[str, _Entry] = field(default_factory=dict)
    displaced: dict[str, list[_Entry]] = field(default_factory=dict)
    doomed: list[str] = field(default_factory=list)
    temporaries: list[str] = field(default_factory=list)

    def max_seq(self) -> int:
        seqs = [self.index_seq or 0] + [e.seq for e in self.entries.values()]
        seqs += [e.seq for copies in self.displaced.values() for e in copies]
        return max(seqs)


class StoreSettings:
    """What both checkpoint stores (a local folder, and a bucket's
    :class:`~.object_store.ObjectCheckpointStore`) are given: the checkpoints'
    name prefix, whether writes are made durable, and what is kept.

    Raises:
        ValueError: `filename` is not a plain file name, or `max_to_keep`
            is below 1.
        TypeError: `durable` is not a bool, `max_to_keep` not an int, or
            `keep` holds something other than keep policies.
    """

    def __init__(self, filename: str, max_to_keep: int | None, durable: bool,
                 keep: KeepPolicy | list[KeepPolicy] | None):
        if (not isinstance(filename, str) or not filename or filename.startswith('.') or
                '/' in filename or os.sep in filename or
                (os.altsep is not None and os.altsep in filename)):
            raise ValueError(
                f'`filename` must be a plain file name not starting with ".", got {filename!r}')
        if not isinstance(durable, bool):
            raise TypeError(f'`durable` must be True or False, got {durable!r}')
        self._filename = filename
        self._durable = durable
        self._retention = Retention(max_to_keep, keep)

    @property
    def filename(self) -> str:
        """The name prefix of the checkpoints."""
        return self._filename

    @property
    def max_to_keep(self) -> int | None:
        """How many checkpoints are kept (``None``: all)."""
        return self._retention.max_to_keep

    @property
    def keep(self) -> list[KeepPolicy]:
        """The keep policies (`max_to_keep` as a :class:`~.policies.KeepLatest`)."""
        return list(self._retention.policies)

    @property
    def best_k(self) -> int:
        """How many checkpoints a pin keeps pinned (the ``k`` of its
        :class:`~.policies.KeepBest`, else 1)."""
        return self._retention.best_k

    @property
    def durable(self) -> bool:
        """Whether writes are fsynced (a bucket's uploads are durable either way)."""
        return self._durable


class CheckpointStore(StoreSettings):
    """Lays out numbered checkpoint directories in a folder, crash-safely.

    The store decides where a checkpoint goes and when it becomes visible
    or is removed; the caller decides what goes in it.  The protocol, and
    what a process killed at each of its steps leaves behind, is described
    in the documentation of this module.

    Args:
        save_dir: The folder owned by this store; created on the first save.
        filename: Checkpoints are the directories ``<filename>-<step>``.
        max_to_keep: Keep this many newest checkpoints (``None``: all).
        durable: Fsync files and directories, so that a saved checkpoint
            survives an OS crash or a power loss, not only a killed process.
            ``False`` is faster and still safe against a killed process.
        keep: Keep policies (see :mod:`~.policies`), besides
            `max_to_keep` (which is ``KeepLatest(max_to_keep)``).  Without
            either, every checkpoint is kept.

    Raises:
        TypeError: `save_dir` is not a path, or `max_to_keep` not an int.
        ValueError: `filename` is not a plain file name, or `max_to_keep`
            is below 1.

    Example::

        store = CheckpointStore('/tmp/run/checkpoint', max_to_keep=3)
        store.recover()                    # at start: clean up after a crash

        def write(directory):
            with open(os.path.join(directory, 'weights.bin'), 'wb') as f:
                f.write(weights)

        path = store.save(step, write)     # '/tmp/run/checkpoint/checkpoint.dat-<step>'
        assert store.latest() == path
    """

    def __init__(self, save_dir: str | os.PathLike[str], filename: str = 'checkpoint.dat',
                 max_to_keep: int | None = None, durable: bool = True,
                 keep: KeepPolicy | list[KeepPolicy] | None = None):
        if not isinstance(save_dir, (str, os.PathLike)) or not os.fspath(save_dir):
            raise TypeError(f'`save_dir` must be a directory path, got {save_dir!r}')
        if is_url(save_dir, argument='save_dir'):   # a malformed URL is refused there too
            raise ValueError(f'`save_dir` must be a local directory for a CheckpointStore, got '
                             f'the URL {os.fspath(save_dir)!r}: use an ObjectCheckpointStore '
                             f'for a URL')
        super().__init__(filename, max_to_keep, durable, keep)
        self._save_dir = os.path.abspath(os.fspath(save_dir))
        self._name_re = re.compile(re.escape(filename) + r'-(\d+)')
        self._recovered = False

    # ------------------------------------------------------------ properties
    @property
    def save_dir(self) -> str:
        """The absolute path of the folder."""
        return self._save_dir

    def path_of(self, step: int) -> str:
        """The path the checkpoint of `step` has once saved."""
        return os.path.join(self._save_dir, f'{self._filename}-{check_step(step)}')

    # ------------------------------------------------------------ reading
    def checkpoints(self) -> list[str]:
        """The paths of the complete checkpoints, oldest first.

        This only reads the folder (recovery is not needed first): a
        checkpoint renamed into place after the index was last written
        counts as the newest, pruning leftovers do not count, and a
        checkpoint displaced by a killed save of the same step is reported
        at its temporary path until :meth:`recover` renames it back.
        """
        return [e.path for e in self._view(self._scan())[0]]

    def latest(self) -> str | None:
        """The path of the newest complete checkpoint, or ``None``."""
        paths = self.checkpoints()
        return paths[-1] if paths else None

    def best(self) -> tuple[str, dict[str, Any]] | None:
        """``(path, info)`` of the pinned best checkpoint, or ``None``.

        `info` is what was given with it to :meth:`save` or :meth:`pin_best`.
        ``None`` when no checkpoint is pinned or the pinned one is gone.
        """
        pinned = self.pinned()
        return pinned[0] if pinned else None

    def pinned(self) -> list[tuple[str, dict[str, Any]]]:
        """``(path, info)`` of each pinned checkpoint present, best first."""
        scan = self._scan()
        paths = {e.name: e.path for e in self._view(scan)[0]}
        return [(paths[pin['name']], {k: v for k, v in pin.items() if k != 'name'})
                for pin in scan.pins if pin['name'] in paths]

    @contextlib.contextmanager
    def local_copy(self, path: str | os.PathLike[str]) -> Iterator[str]:
        """The local folder to read the checkpoint `path` from: on local disk, `path`
        itself (made absolute); the object store's downloads it (see
        :meth:`~.object_store.ObjectCheckpointStore.local_copy`)."""
        yield os.path.abspath(os.fspath(path))

    def make_staging(self, label: str) -> str:
        """A new empty local folder for files bound for a later save (removed by
        :meth:`recover` if the process dies): a ``.tmp-`` folder of `save_dir`,
        so the files reach the checkpoint by a rename on the same disk."""
        os.makedirs(self._save_dir, exist_ok=True)
        return tempfile.mkdtemp(prefix=f'{TMP_PREFIX}{label}-', dir=self._save_dir)

    def _step_of(self, name: str) -> int | None:
        m = self._name_re.fullmatch(name)
        return int(m.group(1)) if m else None

    def _entry(self, name: str, path: str, step: int) -> _Entry:
        try:
            mtime = os.stat(path).st_mtime
        except OSError:
            mtime = 0.
        return _Entry(name, path, step, _read_seq(path), mtime)

    def _scan(self) -> _Scan:
        scan = _Scan()
        if not os.path.isdir(self._save_dir):
            return scan
        scan.listed, scan.index_seq, scan.pins = _read_index(
            os.path.join(self._save_dir, INDEX_FILE))
        for item in os.scandir(self._save_dir):
            name = item.name
            if name.startswith(TMP_PREFIX):
                scan.temporaries.append(item.path)
            elif name.startswith(_DOOMED_PREFIX):
                scan.doomed.append(item.path)
            elif name.startswith(_DISPLACED_PREFIX):
                m = _DISPLACED_RE.fullmatch(name)
                step = self._step_of(m.group(1)) if m else None
                if m and step is not None and item.is_dir():
                    scan.displaced.setdefault(m.group(1), []).append(
                        self._entry(m.group(1), item.path, step))
            else:
                step = self._step_of(name)
                if step is not None and item.is_dir():
                    scan.entries[name] = self._entry(name, item.path, step)
        return scan

    @staticmethod
    def _view(scan: _Scan) -> tuple[list[_Entry], list[_Entry]]:
        """``(complete checkpoints oldest first, pruning leftovers)``."""
        present = dict(scan.entries)
        for name, copies in scan.displaced.items():
            if name not in present:
                present[name] = max(copies, key=lambda e: e.seq)
        limit = scan.index_seq
        kept = [present[n] for n in dict.fromkeys(scan.listed)
                if n in present and (limit is None or present[n].seq <= limit)]
        kept_names = {e.name for e in kept}
        rest = [e for n, e in present.items() if n not in kept_names]
        if limit is None:
            newer, stale = rest, []
        else:
            newer = [e for e in rest if e.seq > limit]
            stale = [e for e in rest if e.seq <= limit]
        newer.sort(key=lambda e: (e.seq, e.mtime, e.step))
        return kept + newer, stale

    # ------------------------------------------------------------ writing
    def save(self, step: int, write: Callable[[str], Any],
             best: Mapping[str, Any] | None = None) -> str:
        """Write the checkpoint of `step` and make it the newest; return its path.

        `write` is called with the path of a new empty directory and fills
        it; the store then makes it durable, renames it into place, updates
        the index and removes the checkpoints beyond `max_to_keep`.  A
        checkpoint of the same step is replaced (and becomes the newest).
        The first save of a store runs :meth:`recover` first.

        Args:
            step: The step number (an int >= 0).
            write: Fills the directory it is given; must not create
                ``.checkpoint-store.json``.
            best: Pin the new checkpoint as the best, recording this
                JSON-serializable dict with it (see :meth:`pin_best`);
                ``None`` keeps the pin where it is, unless this save
                replaces the pinned checkpoint (its content is no longer
                what was pinned): then nothing is pinned.

        Returns:
            The path of the checkpoint, ``<save_dir>/<filename>-<step>``.

        Raises:
            TypeError: `step` is not an int, `write` is not callable or
                `best` is not a JSON-serializable dict.
            ValueError: `step` is negative.
            RuntimeError: `write` created the store's marker file.

        If `write` raises (or anything before the rename into place fails),
        its directory is removed, the error propagates and the folder is as
        before.
        """
        step = check_step(step)
        if not callable(write):
            raise TypeError(f'`write` must be a callable taking a directory path, got {write!r}')
        best_info = None if best is None else _check_best_info(best)
        if not self._recovered:
            self.recover()
        self._make_save_dir()
        name = f'{self._filename}-{step}'
        final = os.path.join(self._save_dir, name)
        scan = self._scan()
        view = self._view(scan)[0]
        seq = scan.max_seq() + 1

        # 1. fill a temporary directory and make it durable
        tmp = os.path.join(self._save_dir, f'{TMP_PREFIX}{name}-{uuid.uuid4().hex}')
        os.mkdir(tmp)
        displaced = None
        try:
            write(tmp)
            marker = os.path.join(tmp, MARKER_FILE)
            if os.path.lexists(marker):
                raise RuntimeError(
                    f'`write` must not create {MARKER_FILE!r}: the store writes it; '
                    f'got one in {tmp!r}')
            with open(marker, 'w', encoding='utf-8') as f:
                json.dump({'step': step, 'seq': seq}, f)
            if self._durable:
                _sync_tree(tmp)
            # 2. move a checkpoint of the same step aside
            if os.path.lexists(final):
                displaced = os.path.join(
                    self._save_dir, f'{_DISPLACED_PREFIX}{name}-{uuid.uuid4().hex}')
                os.rename(final, displaced)
                self._sync_dir()
            # 3. commit
            os.rename(tmp, final)
        except BaseException:
            if displaced is not None and not os.path.lexists(final):
                os.rename(displaced, final)          # undo step 2
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self._sync_dir()

        # 4. the index, with the retention rule applied
        names = [e.name for e in view if e.name != name] + [name]
        paths = {e.name: e.path for e in view}
        # replacing a pinned checkpoint's content unpins it: the pin was of the old
        pins = [p for p in scan.pins if p['name'] in names and p['name'] != name]
        if best_info is not None:
            pins = self._retention.add_pin(pins, {**best_info, 'name': name})
        victims, names = self._retention.split(names, [self._step_of(n) or 0 for n in names],
                                               pins)
        self._write_index(names, seq, pins)

        # 5.-6. delete the pruned checkpoints and the displaced copy
        doomed = [self._doom(paths[n], n) for n in victims]
        if displaced is not None:
            doomed.append(self._doom(displaced, name))
        self._delete(doomed)
        return final

    def pin_best(self, step: int, info: Mapping[str, Any]) -> str:
        """Pin the existing checkpoint of `step` as the best; return its path.

        The index records `info` (a JSON-serializable dict, such as
        ``{'metric': 'valid_loss', 'value': 0.25}``) with it, and
        :meth:`best` returns it.  Retention never removes the pinned best;
        the checkpoint pinned before becomes an ordinary one, and is removed
        at once if it is older than the `max_to_keep` newest.

        Raises:
            TypeError: `step` is not an int, or `info` is not a
                JSON-serializable dict.
            ValueError: There is no checkpoint of `step`.
        """
        step = check_step(step)
        info = _check_best_info(info)
        if not self._recovered:
            self.recover()
        name = f'{self._filename}-{step}'
        scan = self._scan()
        view = self._view(scan)[0]
        names = [e.name for e in view]
        if name not in names:
            raise ValueError(f'`step` {step} has no checkpoint to pin in {self._save_dir!r}; '
                             f'the checkpoints are {names}')
        paths = {e.name: e.path for e in view}
        pins = self._retention.add_pin([p for p in scan.pins if p['name'] in names],
                             {**info, 'name': name})
        victims, names = self._retention.split(names, [self._step_of(n) or 0 for n in names],
                                               pins)
        self._write_index(names, scan.max_seq(), pins)
        self._delete([self._doom(paths[n], n) for n in victims])
        return paths[name]

    def recover(self) -> None:
        """Finish or undo what killed saves left; keep every complete checkpoint.

        Deletes unfinished writes and half-deleted checkpoints, puts back a
        checkpoint displaced by a killed save of the same step, and brings
        the index up to date with a checkpoint renamed into place after it
        was written.  The newest complete checkpoint is never removed.

        Only the single writer of the folder may call this (a save under
        way in another process would lose its temporary directory).
        """
        if not os.path.isdir(self._save_dir):
            self._recovered = True
            return
        scan = self._scan()
        for path in scan.temporaries:
            _remove(path)
        doomed = list(scan.doomed)
        moved = False
        for name, copies in scan.displaced.items():
            copies = sorted(copies, key=lambda e: e.seq)
            if name not in scan.entries:
                os.rename(copies.pop().path, os.path.join(self._save_dir, name))
                moved = True
            doomed += [self._doom(e.path, name) for e in copies]
            moved = moved or bool(copies)
        if moved:
            self._sync_dir()
            scan = self._scan()
        view, stale = self._view(scan)
        names = [e.name for e in view]
        seq = scan.max_seq()
        pins = [p for p in scan.pins if p['name'] in names]
        if (names != scan.listed or pins != scan.pins or
                (seq != scan.index_seq and (names or scan.listed))):
            self._write_index(names, seq, pins)
        doomed += [self._doom(e.path, e.name) for e in stale]
        self._delete(doomed, sync=bool(stale))
        self._recovered = True

    # ------------------------------------------------------------ helpers
    def _make_save_dir(self) -> None:
        created = []
        path = self._save_dir
        while not os.path.isdir(path):
            created.append(path)
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
        if created:
            os.makedirs(self._save_dir, exist_ok=True)
            for path in reversed(created):
                self._sync_dir(os.path.dirname(path))

    def _write_index(self, names: list[str], seq: int,
                     pins: list[dict[str, Any]] | None = None) -> None:
        pins = pins or []
        tmp = os.path.join(self._save_dir, f'{TMP_PREFIX}{uuid.uuid4().hex}.json')
        try:
            with open(tmp, 'w', encoding='utf-8') as f:
                json.dump({'format': _INDEX_FORMAT, 'seq': seq, 'checkpoints': names,
                           'best': pins[0] if pins else None, 'pins': pins}, f)
                f.flush()
                if self._durable:
                    os.fsync(f.fileno())
            os.replace(tmp, os.path.join(self._save_dir, INDEX_FILE))
        except BaseException:
            _remove(tmp)
            raise
        self._sync_dir()

    def _doom(self, path: str, name: str) -> str:
        """Rename a checkpoint directory so that it never counts again; return the new path."""
        doomed = os.path.join(self._save_dir, f'{_DOOMED_PREFIX}{name}-{uuid.uuid4().hex}')
        os.rename(path, doomed)
        return doomed

    def _delete(self, doomed: list[str], sync: bool = True) -> None:
        """Delete ``.doomed-`` directories, after their renames are durable."""
        if not doomed:
            return
        if sync:
            self._sync_dir()
        for path in doomed:
            shutil.rmtree(path, ignore_errors=True)

    def _sync_dir(self, path: str | None = None) -> None:
        if self._durable:
            sync_dir(self._save_dir if path is None else path)


def check_step(step: Any, name: str = 'step') -> int:
    """Return `step` as an int if it is an int >= 0 (a numpy int too).

    Raises:
        TypeError: `step` is not an int (a bool is not one).
        ValueError: `step` is negative.
    """
    rule = f'`{name}` must be an int >= 0, got {step!r}'
    if isinstance(step, bool):
        raise TypeError(rule)
    try:
        value = operator.index(step)
    except TypeError as e:
        raise TypeError(rule) from e
    if value < 0:
        raise ValueError(rule)
    return value


def _read_index(path: str) -> tuple[list[str], int | None, list[dict[str, Any]]]:
    """``(listed names, sequence number, pins best first)``; ``([], None, [])``
    without a readable index."""
    try:
        with open(path, encoding='utf-8') as f:
            data = json.load(f)
    except (OSError, ValueError):
        return [], None, []
    if not isinstance(data, dict) or not isinstance(data.get('checkpoints'), list):
        return [], None, []
    names = [n for n in data['checkpoints'] if isinstance(n, str)]
    seq = data.get('seq')
    if isinstance(seq, bool) or not isinstance(seq, int) or seq < 0:
        seq = None
    pins = data.get('pins')
    if not isinstance(pins, list):   # an index of an older version: its one best
        pins = [data.get('best')]
    pins = [p for p in pins if isinstance(p, dict) and p.get('name') in names]
    return names, seq, pins


def _check_best_info(info: Any) -> dict[str, Any]:
    """A copy of `info`, the record of a best checkpoint, once checked."""
    rule = '`best` must be a JSON-serializable dict without the key "name"'
    if not isinstance(info, Mapping) or 'name' in info:
        raise TypeError(f'{rule}, got {info!r}')
    try:
        return dict(json.loads(json.dumps(dict(info), allow_nan=False)))
    except (TypeError, ValueError) as e:
        raise TypeError(f'{rule}, got {info!r}: {e}') from e


def _read_seq(path: str) -> int:
    """The sequence number in a checkpoint's marker (0 without a valid one)."""
    try:
        with open(os.path.join(path, MARKER_FILE), encoding='utf-8') as f:
            seq = json.load(f).get('seq')
    except (OSError, ValueError, AttributeError):
        return 0
    return seq if isinstance(seq, int) and not isinstance(seq, bool) and seq > 0 else 0


def _remove(path: str) -> None:
    """Remove a temporary file or directory tree, as far as possible.

    What cannot be removed stays: a ``.tmp-`` entry never counts as a
    checkpoint, so it does no harm besides taking space.
    """
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.remove(path)
        except OSError:
            pass


def sync_dir(path: str) -> None:
    """Fsync a directory, so that the renames inside it survive an OS crash."""
    if os.name == 'nt':       # directories cannot be opened for fsync on Windows
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, 'O_DIRECTORY', 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sync_file(path: str) -> None:
    """Fsync a file that is already written and closed."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _sync_tree(root: str) -> None:
    """Fsync every file and directory under `root`, and `root` itself."""
    for directory, _, files in os.walk(root, topdown=False):
        for name in files:
            sync_file(os.path.join(directory, name))
        sync_dir(directory)
