"""File-system helpers: temporary directories, makedirs, a file walker and durable JSON writes."""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import Iterator
from typing import Any

__all__ = ['TemporaryDirectory', 'makedirs', 'iter_files', 'write_json']

#: The standard library's :class:`tempfile.TemporaryDirectory` (the classic name).
TemporaryDirectory = tempfile.TemporaryDirectory

#: The standard library's :func:`os.makedirs` (the classic name).
makedirs = os.makedirs


def iter_files(root_dir: str | os.PathLike, sep: str = '/') -> Iterator[str]:
    """Iterate over the files under `root_dir`, as paths relative to it.

    Sub-directories are entered but not listed themselves.  Names are
    listed in sorted order, each directory's files and sub-directories
    together, so the order does not depend on the file system.  A symbolic
    link is listed like a file and never followed.

    Args:
        root_dir: The directory to walk.
        sep: The separator of the relative paths (``'/'`` on every platform
            by default).

    Raises:
        ValueError: `root_dir` is not an existing directory.

    Example:
        >>> import os, tempfile
        >>> with tempfile.TemporaryDirectory() as d:
        ...     os.makedirs(os.path.join(d, 'b', 'c'))
        ...     for name in ('a.txt', 'b/x.txt', 'b/c/y.txt'):
        ...         open(os.path.join(d, name), 'w').close()
        ...     print(list(iter_files(d)))
        ['a.txt', 'b/c/y.txt', 'b/x.txt']
    """
    root = os.fspath(root_dir)
    if not os.path.isdir(root):
        raise ValueError(f'`root_dir` must be an existing directory, got {root_dir!r}')
    return _walk(root, '', sep)


def _walk(path: str, prefix: str, sep: str) -> Iterator[str]:
    with os.scandir(path) as it:
        entries = sorted(it, key=lambda e: e.name)
    for entry in entries:
        name = prefix + entry.name
        if entry.is_dir(follow_symlinks=False):
            yield from _walk(entry.path, name + sep, sep)
        else:
            yield name


def check_writable_dir(path: str | os.PathLike[str], arg_name: str) -> None:
    """Make directory `path` if needed and check that a file can be written in it.

    Raises:
        ValueError: It cannot be made or written to (the message names `arg_name`).
    """
    probe = os.path.join(path, f'.write-probe-{os.getpid()}')
    try:
        os.makedirs(path, exist_ok=True)
        with open(probe, 'wb') as f:
            f.write(b'ok')
        os.remove(probe)
    except OSError as e:
        raise ValueError(f'`{arg_name}` {os.fspath(path)!r} is not a writable directory: '
                         f'{e.strerror or e}') from e


def write_json(path: str, data: Any) -> None:
    """Write `data` as JSON atomically and durably: a temporary file beside `path`,
    fsynced, then ``os.replace`` over `path`; a failed write leaves `path` as it
    was and no temporary file behind."""
    tmp = f'{path}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}'
    try:
        with open(tmp, 'w', encoding='utf-8') as f:
            json.dump(data, f, indent=2, sort_keys=False, default=str)
            f.write('\n')
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
