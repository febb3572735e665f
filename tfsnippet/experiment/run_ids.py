"""The id of a run given no name: new for a lone process, shared by the workers of a job."""

from __future__ import annotations

import re
import threading
import time
import uuid

__all__ = ['default_run_id', 'new_run_id']

_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._-]*')
_lock = threading.Lock()
_taken: dict[str, int] = {}   # shared id -> unnamed experiments made with it in this process


def new_run_id() -> str:
    """A new id from the time and a random suffix, e.g. ``'20260101-120000-3fa2c1'``."""
    return f'{time.strftime("%Y%m%d-%H%M%S")}-{uuid.uuid4().hex[:6]}'


def default_run_id() -> str:
    """The id of an :class:`~tfsnippet.Experiment` given neither `name` nor ``--resume``.

    Under a job whose processes share an id (see
    :func:`tfsnippet.distributed.shared_run_id`: ``TFSNIPPET_RUN_ID``, which
    the launcher sets, a Kubernetes Indexed Job, a SLURM job, of one task
    or several), the first unnamed experiment of the process takes that id,
    the n-th ``'<id>-<n>'``: every worker runs the same script, so all land
    in the chief's run, and a restarted or requeued job resumes it.  A
    process alone (outside such a job) gets a new id.

    Raises:
        ValueError: Several workers but no shared id (a ``TF_CONFIG`` alone,
            as Vertex AI sets it): each worker would make its own id, and a
            restart could not resume the run; or ``TFSNIPPET_RUN_ID`` is not
            a run id.
    """
    from ..distributed import RUN_ID_ENV, cluster_info, shared_run_id
    shared = shared_run_id()
    if shared is None:
        info = cluster_info()
        if info.num_workers > 1:
            raise ValueError(
                f'`name` is required under several workers: this process is '
                f'{info.task_type} {info.task_index} of {info.num_workers} workers (from '
                f'{info.source}), and without a `name` each worker would make its own run '
                f'id, so they would not share the chief\'s run and a restart could not '
                f'resume it; pass `name=` (the same on every worker), `--resume RUN_ID`, or '
                f'set `{RUN_ID_ENV}` in every worker\'s environment')
        return new_run_id()
    if not _NAME.fullmatch(shared):
        raise ValueError(f'`{RUN_ID_ENV}` must be a run id of letters, digits, ".", "_" and '
                         f'"-" (not starting with "." or "-"), got {shared!r}')
    with _lock:
        count = _taken[shared] = _taken.get(shared, 0) + 1
    return shared if count == 1 else f'{shared}-{count}'
