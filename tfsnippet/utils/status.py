"""How a run ends: its statuses, and the exit code of a preempted process.

The checkpointer exits with :data:`PREEMPTED_EXIT_CODE` after saving on a
preemption signal; the experiment records such an exit as ``'preempted'``;
a sweep script or a supervisor reads the same code to tell a preempted run
(restart it, it resumes) from a failed one.  All of them take the values
from here.
"""

from __future__ import annotations

__all__ = ['PREEMPTED_EXIT_CODE', 'RUNNING', 'COMPLETED', 'FAILED', 'PREEMPTED', 'PRUNED',
           'STALE', 'RUN_STATUSES', 'FINISH_STATUSES', 'RunPruned', 'status_of_exit']

#: What a preempted process exits with: 128 + SIGTERM, as a shell reports a process
#: that SIGTERM ended, so a supervisor that restarts failed jobs restarts it.
PREEMPTED_EXIT_CODE = 143

#: A run in progress.
RUNNING = 'running'
#: A run that ended normally (also ``sys.exit(0)``).
COMPLETED = 'completed'
#: A run that ended with an exception, ``KeyboardInterrupt`` included, or a non-zero exit.
FAILED = 'failed'
#: A run that exited with :data:`PREEMPTED_EXIT_CODE`: it resumes when started again.
PREEMPTED = 'preempted'
#: A run that a hyperparameter search stopped early (:class:`RunPruned`), see
#: :mod:`tfsnippet.search`.
PRUNED = 'pruned'
#: Shown, never written, for a run still marked running whose heartbeat is too old.
STALE = 'stale'

#: The statuses a run may be given.
RUN_STATUSES = (RUNNING, COMPLETED, FAILED, PREEMPTED, PRUNED)
#: The statuses a run may end with.
FINISH_STATUSES = (COMPLETED, FAILED, PREEMPTED, PRUNED)


class RunPruned(Exception):
    """Raised out of a run that a hyperparameter search pruned: the run ends with
    status ``'pruned'`` (``tfsnippet.search.TrialPruned`` is one)."""


def status_of_exit(exc: BaseException | None) -> str:
    """The status of a run that ended by raising `exc` (``None``: it returned).

    ``SystemExit`` with :data:`PREEMPTED_EXIT_CODE` is ``'preempted'``; with
    code 0 or ``None`` it is ``'completed'``; :class:`RunPruned` is
    ``'pruned'``; any other exception is ``'failed'``.

    Example:
        >>> status_of_exit(None), status_of_exit(SystemExit(143)), status_of_exit(ValueError())
        ('completed', 'preempted', 'failed')
    """
    if exc is None:
        return COMPLETED
    if isinstance(exc, SystemExit):
        if exc.code == PREEMPTED_EXIT_CODE:
            return PREEMPTED
        if exc.code in (None, 0):
            return COMPLETED
    if isinstance(exc, RunPruned):
        return PRUNED
    return FAILED
