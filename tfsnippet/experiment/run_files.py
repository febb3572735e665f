"""The files of a run directory: the console copy, the saved config read back,
package versions and git state for ``run.json``, and HParams files (for
:class:`~tfsnippet.Experiment`; this module imports no TensorFlow)."""

from __future__ import annotations

import contextlib
import functools
import io
import json
import math
import os
import platform
import shlex
import subprocess
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import IO, Any

from .config import all_paths, config_from_dict

__all__ = ['Tee', 'ConsoleCopy', 'hparams_event_files', 'cli_value', 'read_saved_config',
           'json_float', 'package_versions', 'git_info', 'GitProbe', 'shared_git_state',
           'VERSIONED_PACKAGES']

#: The packages whose versions ``run.json`` records.
VERSIONED_PACKAGES = ('tensorflow', 'keras', 'numpy', 'tensorboard')


class Tee:
    """A text stream that writes to the original stream and to the run's console file."""

    def __init__(self, stream: IO[str], copy: IO[str] | ConsoleCopy) -> None:
        self._stream = stream
        self._copy = copy

    def write(self, text: str) -> int:
        n = self._stream.write(text)
        try:
            self._copy.write(text)
        except (OSError, ValueError):   # a full disk or a closed file: the console comes first
            pass
        return n

    def flush(self) -> None:
        self._stream.flush()
        try:
            self._copy.flush()
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:   # isatty, fileno, encoding...
        return getattr(self._stream, name)


class ConsoleCopy:
    """The copy of the console for ``console.log``: held in memory until :meth:`open`
    (a resumed run writes nothing into its directory before the resume works)."""

    def __init__(self) -> None:
        self._buffer: io.StringIO | None = io.StringIO()
        self._file: IO[str] | None = None

    def open(self, path: str) -> None:
        """Append what was held, then write through to the file at `path`."""
        if self._buffer is None:
            return
        self._file = open(path, 'a', encoding='utf-8', buffering=1)
        self._file.write(self._buffer.getvalue())
        self._buffer = None

    def write(self, text: str) -> int:
        if self._file is not None:
            return self._file.write(text)
        if self._buffer is not None:
            return self._buffer.write(text)
        return 0

    def flush(self) -> None:
        if self._file is not None:
            self._file.flush()

    def close(self) -> None:
        """Close the file; what is still held is dropped (the run is left as it was)."""
        self._buffer = None
        if self._file is not None:
            self._file.close()
            self._file = None


def hparams_event_files(run_dir: str) -> list[str]:
    """The event files of `run_dir` holding only HParams data (what HParamsWriter writes)."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    out = []
    try:
        names = sorted(n for n in os.listdir(run_dir) if n.startswith('events.out.tfevents.'))
    except OSError:
        return []
    for name in names:
        path = os.path.join(run_dir, name)
        try:
            tags = [value.tag for event in EventFileLoader(path).Load()
                    if event.HasField('summary') for value in event.summary.value]
        except Exception:  # noqa: BLE001 - a file we cannot read is not ours to remove
            continue
        if tags and any(t.startswith('_hparams_/') for t in tags) and all(
                t.startswith(('_hparams_/', 'best/', 'results/')) for t in tags):
            out.append(path)
    return out


def cli_value(value: Any) -> str:
    """`value` as a command-line option value (``--field VALUE``)."""
    text = json.dumps(value) if isinstance(value, (list, dict, bool)) or value is None \
        else str(value)
    return shlex.quote(text)


def read_saved_config(path: str, cls: type, run_id: str,
                      text: str | None = None) -> dict[str, Any]:
    """The saved config of a run at `path` (or its `text`, already read from an object
    store), checked against the config class `cls`."""
    try:
        if text is not None:
            saved = json.loads(text)
        else:
            with open(path, encoding='utf-8') as f:
                saved = json.load(f)
    except (OSError, ValueError) as e:
        raise ValueError(f'Cannot resume run {run_id!r}: its saved config {path!r} cannot be '
                         f'read ({e})') from e
    if not isinstance(saved, dict):
        raise ValueError(f'Cannot resume run {run_id!r}: its saved config {path!r} holds '
                         f'{type(saved).__name__}, not a mapping')
    known = set(all_paths(cls))
    flat_saved = leaf_paths(saved)
    # a section given or left out whole is named once, not with each of its fields
    unknown = outermost_paths(p for p in flat_saved if p not in known)
    missing = outermost_paths(p for p in known if p not in flat_saved)
    problems = []
    if unknown:
        problems.append(f'the class has no field {", ".join(f"`{p}`" for p in unknown)}')
    if missing:
        problems.append(f'the saved config has no {", ".join(f"`{p}`" for p in missing)}')
    if not problems:
        try:
            config_from_dict(cls, saved)
        except (TypeError, ValueError) as e:
            problems.append(str(e))
    if problems:
        raise ValueError(
            f'Cannot resume run {run_id!r}: its saved config {path!r} no longer matches '
            f'{cls.__name__}: {"; ".join(problems)}. Start a new run (another `name`), or '
            f'edit the saved config')
    return saved


def outermost_paths(paths: Iterable[str]) -> list[str]:
    chosen = sorted(paths)
    return [p for p in chosen if not any(p.startswith(q + '.') for q in chosen)]


def leaf_paths(values: Mapping[str, Any], prefix: str = '') -> set[str]:
    out = set()
    for key, value in values.items():
        path = f'{prefix}{key}'
        out.add(path)
        if isinstance(value, Mapping):
            out.update(leaf_paths(value, path + '.'))
    return out


def json_float(value: float) -> float | str:
    return value if math.isfinite(value) else repr(value)


def package_versions() -> dict[str, str | None]:
    """The versions of :data:`VERSIONED_PACKAGES`, tfsnippet's and Python's.

    Read once a process (the package metadata is parsed from disk, about a
    millisecond a package): the code a process runs is the code it imported,
    whatever is installed later.  Each call returns a new dict.
    """
    return dict(_package_versions())


@functools.lru_cache(maxsize=None)
def _package_versions() -> tuple[tuple[str, str | None], ...]:
    from importlib import metadata

    from .. import __version__
    out: list[tuple[str, str | None]] = []
    for package in VERSIONED_PACKAGES:
        try:
            out.append((package, metadata.version(package)))
        except metadata.PackageNotFoundError:
            out.append((package, None))
    out.append(('tfsnippet', __version__))
    out.append(('python', platform.python_version()))
    return tuple(out)


class GitProbe:
    """The git state of the checkout at `directory`, asked of ``git`` in the background
    (``None``: nothing is asked, both values are ``None``).

    One ``git status`` process is started at once (the branch header gives
    the commit, the change lines the dirty flag; untracked files do not
    count, and no optional lock of the index is taken, so parallel runs do not
    contend); :meth:`result` waits for it.  So a run's start does its other
    work while git looks at the tree.
    """

    _COMMAND = ('git', '--no-optional-locks', 'status', '--porcelain=v2', '--branch',
                '--untracked-files=no')

    def __init__(self, directory: str | None, timeout: float = 10.) -> None:
        self._timeout = timeout
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        self._result: dict[str, Any] | None = None
        if directory is None:   # nothing to ask: both values None
            return
        try:
            self._proc = subprocess.Popen(self._COMMAND, cwd=directory, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                          text=True)
        except (OSError, ValueError):   # no git, or no such directory
            self._proc = None

    def result(self) -> dict[str, Any]:
        """``{'git_commit': sha or None, 'git_dirty': bool or None}`` (both ``None``
        outside a checkout, without git, or before the first commit)."""
        with self._lock:
            if self._result is None:
                self._result = self._read()
            return dict(self._result)

    @classmethod
    def of(cls, directory: str) -> GitProbe:
        """A probe of `directory`: a new one, or inside :func:`shared_git_state`
        the one of the block's first run from that directory."""
        with _SHARED_LOCK:
            if _SHARED_DEPTH[0] == 0:
                return cls(directory)
            probe = _SHARED_PROBES.get(directory)
            if probe is None:
                probe = _SHARED_PROBES[directory] = cls(directory)
            return probe

    def _read(self) -> dict[str, Any]:
        none: dict[str, Any] = {'git_commit': None, 'git_dirty': None}
        proc, self._proc = self._proc, None
        if proc is None:
            return none
        try:
            out, _ = proc.communicate(timeout=self._timeout)
        except (OSError, subprocess.SubprocessError):
            proc.kill()
            proc.communicate()
            return none
        if proc.returncode != 0:
            return none
        commit, dirty = None, False
        for line in out.splitlines():
            if line.startswith('# branch.oid '):
                oid = line[len('# branch.oid '):].strip()
                commit = None if oid.startswith('(') else oid   # '(initial)': no commit yet
            elif line and not line.startswith('#'):
                dirty = True
        return {'git_commit': commit, 'git_dirty': dirty if commit is not None else None}


_SHARED_LOCK = threading.Lock()
_SHARED_DEPTH = [0]
_SHARED_PROBES: dict[str, GitProbe] = {}


@contextlib.contextmanager
def shared_git_state() -> Iterator[None]:
    """Inside the block, the runs this process starts from one checkout record the
    git state asked by the first of them, not a git process each.

    For runs that all execute the code the process has imported (a search's
    in-process trials): starting ``git status`` costs a few milliseconds in a
    process holding TensorFlow, and its answer would only say how the files on
    disk drifted from that code.  Blocks may nest; the shared answers are
    forgotten when the outermost ends.
    """
    with _SHARED_LOCK:
        _SHARED_DEPTH[0] += 1
    try:
        yield
    finally:
        with _SHARED_LOCK:
            _SHARED_DEPTH[0] -= 1
            done = list(_SHARED_PROBES.values()) if _SHARED_DEPTH[0] == 0 else []
            if done:
                _SHARED_PROBES.clear()
        for probe in done:   # reap a process nobody waited for
            probe.result()


def git_info(directory: str) -> dict[str, Any]:
    """``{'git_commit': sha or None, 'git_dirty': bool or None}`` of the checkout at `directory`."""
    return GitProbe(directory).result()
