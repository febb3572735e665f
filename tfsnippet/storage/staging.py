"""Local staging folders in the temporary directory, and what killed processes left of them.

A file bound for an object store is written into a local *staging* folder
first (a checkpoint before its upload, a run's files before their sync).
Each such folder is named ``tfsnippet-<kind>-<pid>-<random>`` (see
:func:`staging_prefix`): the process id of its writer is in its name.  A
process killed with ``SIGKILL`` cannot remove its folders;
:func:`clean_stale_staging`, called when a store or an experiment starts,
removes the folders whose writer is no longer running.  Folders of the
older naming (without a process id) and those of live processes stay.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile

__all__ = ['STAGING_KINDS', 'staging_prefix', 'clean_stale_staging', 'pid_alive']

#: The kinds of staging folder cleaned by :func:`clean_stale_staging`.
STAGING_KINDS = ('run', 'staging')
_NAME = re.compile(r'tfsnippet-(?:' + '|'.join(STAGING_KINDS) + r')-(?:.*-)?pid(\d+)-.*')


def staging_prefix(kind: str, label: str | None = None) -> str:
    """The ``tempfile.mkdtemp`` prefix of a staging folder of this process:
    ``tfsnippet-<kind>-[<label>-]pid<pid>-``.

    Raises:
        ValueError: `kind` is not one of :data:`STAGING_KINDS`.
    """
    if kind not in STAGING_KINDS:
        raise ValueError(f'`kind` must be one of {STAGING_KINDS}, got {kind!r}')
    middle = f'{label}-' if label else ''
    return f'tfsnippet-{kind}-{middle}pid{os.getpid()}-'


def pid_alive(pid: int) -> bool:
    """Whether a process of this id runs (one of another user counts as running)."""
    if pid <= 0:
        return False
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True
    return True


def clean_stale_staging(directory: str | None = None) -> list[str]:
    """Remove the staging folders of processes that are no longer running;
    return their paths.

    Args:
        directory: Where to look (default: :func:`tempfile.gettempdir`).
    """
    directory = directory or tempfile.gettempdir()
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    removed = []
    for name in names:
        m = _NAME.fullmatch(name)
        if m is None or pid_alive(int(m.group(1))):
            continue
        path = os.path.join(directory, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed
