"""Who runs a trial: the lock a trial's run is held by, and the parent-death signal that
ends a trial's process with its search.

A killed search (``SIGKILL``: no handler runs) must neither leave its trials
training nor let the next search resume a trial whose process still writes
its run and checkpoints.  Two mechanisms, both held by the kernel, so they
outlive any crash:

* :func:`end_with_parent`: on Linux, a trial's process is started with
  ``PR_SET_PDEATHSIG``, so the kernel sends it ``SIGTERM`` when the search
  dies (its loop then saves a checkpoint and exits as preempted).
* :class:`RunLock`: an exclusive ``flock`` on ``<root>/.tfsnippet-search/
  <run_id>.lock``, taken by the search before a trial runs and inherited by
  the trial's process.  The kernel drops it when the last process holding it
  is gone, so a run whose lock cannot be taken is still written by a live
  process, and is not resumed a second time.

Nothing here imports Optuna or TensorFlow.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: no lock, every run is free
    fcntl = None  # type: ignore[assignment]

__all__ = ['LOCK_DIR', 'RunLock', 'end_with_parent']

#: The folder under a search's root holding its runs' lock files.
LOCK_DIR = '.tfsnippet-search'
_PR_SET_PDEATHSIG = 1   # <linux/prctl.h>


class RunLock:
    """The exclusive lock of one trial's run, ``<root>/.tfsnippet-search/<run_id>.lock``.

    :meth:`acquire` takes it without waiting; :meth:`pass_fds` gives the
    descriptor a trial's process inherits (``subprocess.Popen(pass_fds=...)``),
    so that the lock is held while any of the two lives; :meth:`release`
    closes this process's copy.  The file names the last process that ran
    the trial (:meth:`note`), for messages.  Without ``fcntl`` (not POSIX)
    every lock is taken at once.

    Args:
        root: The search's root (a local folder).
        run_id: The trial's run id.
    """

    def __init__(self, root: str, run_id: str) -> None:
        self.path = os.path.join(root, LOCK_DIR, f'{run_id}.lock')
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        """Whether this object holds the lock."""
        return self._fd is not None

    def acquire(self) -> bool:
        """Take the lock; ``False`` when another process (or another RunLock) holds it."""
        if self._fd is not None:
            return True
        if fcntl is None:  # pragma: no cover
            return True
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        return True

    def note(self, pid: int) -> None:
        """Write `pid`, the process that runs the trial now, into the lock file."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, f'{pid}\n'.encode(), 0)

    def holder(self) -> int | None:
        """The process the lock file names (the last one that ran the trial), if any."""
        try:
            with open(self.path, encoding='utf-8') as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def pass_fds(self) -> tuple[int, ...]:
        """The descriptor a child process inherits to hold the lock too (none when not held)."""
        return () if self._fd is None else (self._fd,)

    def release(self) -> None:
        """Close this process's copy (the lock is free once no child holds it either)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def end_with_parent(signum: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen` that makes the kernel send the child
    `signum` when this process dies, however it dies (Linux ``PR_SET_PDEATHSIG``).

    The signal comes when the *thread* that started the child ends: start it
    from a thread that waits for it.  ``None`` where the call is not
    available (not Linux): the child then outlives a killed parent.
    """
    if not sys.platform.startswith('linux'):
        return None
    import ctypes
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # pragma: no cover - no libc prctl
        return None
    parent = os.getpid()

    def preexec() -> None:   # in the child, between fork and exec
        prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
        if os.getppid() != parent:   # the parent died before the line above
            os._exit(128 + int(signum))

    return preexec
