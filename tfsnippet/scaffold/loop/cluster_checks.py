"""Mistakes of a multi-worker job caught when a loop is entered: a strategy the loop was not
given, or a cluster of workers each training alone."""

from __future__ import annotations

import threading
import warnings
from typing import Any

import tensorflow as tf

from ...backend.base import Backend
from ...distributed.cluster import ClusterInfo, cluster_info
from ...tfops.tf_vars import as_tf_variable, variable_name

__all__ = ['check_cluster_use']

_warned: set[ClusterInfo] = set()   # the clusters warned about in this process
_lock = threading.Lock()
_SHOWN = 3


def check_cluster_use(backend: Backend, params: Any) -> None:
    """Refuse or warn, at loop entry, about a loop without a strategy where one is needed.

    * `params` holds variables of a ``MultiWorkerMirroredStrategy`` (made in
      its scope) but the loop has no strategy: ``ValueError`` (every worker
      would train unsplit and print); variables of another strategy: a
      ``RuntimeWarning``.
    * This process is one of several workers (``TF_CONFIG``, a Kubernetes
      Indexed Job, SLURM) and the loop has no strategy: a ``RuntimeWarning``,
      once per process: every worker trains the whole model alone and writes
      into the same folders.

    Raises:
        ValueError: Variables of a ``MultiWorkerMirroredStrategy`` without `strategy`.
    """
    if backend.strategy is not None:
        return
    items = list(params.values()) if isinstance(params, dict) else list(params or ())
    by_strategy: dict[int, tuple[Any, list[Any]]] = {}
    for var in items:
        strategy = getattr(as_tf_variable(var), '_distribute_strategy', None)
        if strategy is not None and type(strategy).__name__ != '_DefaultDistributionStrategy':
            by_strategy.setdefault(id(strategy), (strategy, []))[1].append(var)
    for strategy, found in by_strategy.values():
        multi_worker = isinstance(strategy, tf.distribute.MultiWorkerMirroredStrategy)
        name = 'MultiWorkerMirroredStrategy' if multi_worker else type(strategy).__name__
        names = ', '.join(repr(variable_name(v)) for v in found[:_SHOWN])
        more = f' and {len(found) - _SHOWN} more' if len(found) > _SHOWN else ''
        text = (f'`param_vars` holds variables created in the scope of a {name} ({len(found)} '
                f'of {len(items)}: {names}{more}), but the TrainLoop has no strategy')
        fix = (f'pass `strategy=strategy` to the TrainLoop (or make the loop inside '
               f'`with strategy.scope():`)')
        if multi_worker:
            raise ValueError(f'{text}: every worker would train on whole batches, unsplit, '
                             f'and every worker would print and write; {fix}')
        warnings.warn(f'{text}: it would neither split the batches over the replicas nor '
                      f'reduce their metrics; {fix}', RuntimeWarning, stacklevel=6)
        return
    try:
        info = cluster_info()
    except ValueError:   # a malformed cluster description: the strategy reports it
        return
    if info.num_workers < 2 or info.task_type == 'evaluator':
        return
    with _lock:
        if info in _warned:
            return
        _warned.add(info)
    warnings.warn(
        f'This process is {info.task_type} {info.task_index} of {info.num_workers} workers '
        f'(from {info.source}) but the TrainLoop has no strategy: every worker trains the '
        f'whole model alone, on all the data, and writes into the same folders (checkpoints, '
        f'summaries, results); create a `tf.distribute.MultiWorkerMirroredStrategy()` first, '
        f'build the model in its scope and pass `strategy=` to the TrainLoop (see the '
        f'"Several processes" section of the distributed training guide)',
        RuntimeWarning, stacklevel=6)
