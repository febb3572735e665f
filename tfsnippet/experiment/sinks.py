"""Where an Experiment sends what a run records: the `RunSink` protocol and the built-in sinks."""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ..utils.status import FINISH_STATUSES
from .store import ResultsStore

__all__ = ['RunSink', 'StoreSink', 'SinkError', 'check_sinks', 'report_sink_error',
           'FINISH_STATUSES']



@runtime_checkable
class RunSink(Protocol):
    """Receives what one run of an :class:`~tfsnippet.Experiment` records.

    An Experiment calls its sinks in this order, from the chief process only:
    :meth:`start` once when its ``with`` block is entered (also when a run is
    resumed: the same `run_id` again), :meth:`log_epoch` once per epoch
    (buffered: a few epochs at once, at the end of an epoch, never per step),
    :meth:`log_best` when the best validation value improved,
    :meth:`log_results` for final results, and :meth:`finish` once when the
    block is left.  Values are plain floats (NaN allowed).

    A sink that also has ``log_epochs(epochs, best)`` gets all the epochs
    of one flush (``[(step, epoch, means), ...]``) and the best values (or
    ``None``) in one call instead of :meth:`log_epoch` and :meth:`log_best`
    (:class:`~tfsnippet.experiment.mlflow_mirror.MlflowMirror` sends them
    as one request).  A sink that also has ``log_epoch_stats(step, epoch, stats)`` gets the
    full statistics ``{name: {'mean': m, 'std': s, 'count': n}}`` there
    instead of :meth:`log_epoch` (the built-in :class:`StoreSink` does).

    **Errors**: an ``Exception`` raised by a sink never stops training.  It
    is reported once (a :class:`SinkError` warning), and that sink is
    not called again during the run, so a tracking server that went away
    costs one message, not one per epoch.  ``finish`` is still attempted on
    a sink that failed after :meth:`start` succeeded.
    """

    def start(self, run_id: str, name: str, config: Mapping[str, Any],
              info: Mapping[str, Any]) -> None:
        """A run starts (or resumes): its id, name, nested config and facts
        (``host``, ``argv``, ``versions``, ``git_commit``, ``run_dir``,
        ``resumed``...)."""

    def log_epoch(self, step: int, epoch: int, metrics: Mapping[str, float]) -> None:
        """The epoch means of the metrics, at the global `step` ending `epoch`."""

    def log_best(self, values: Mapping[str, float]) -> None:
        """The best validation values so far (``{name: value}``)."""

    def log_results(self, values: Mapping[str, float]) -> None:
        """Final results (``{name: value}``), e.g. test metrics."""

    def finish(self, status: str) -> None:
        """The run ends: ``'completed'``, ``'failed'`` or ``'preempted'``."""


class StoreSink:
    """The built-in sink: one run in a :class:`~tfsnippet.ResultsStore` (SQLite).

    Each call is one transaction of the store; :meth:`write` groups several
    (the epochs of a flush, the best values and the heartbeat) into one.

    Args:
        store: The store to write to.
    """

    def __init__(self, store: ResultsStore) -> None:
        if not isinstance(store, ResultsStore):
            raise TypeError(f'`store` must be a ResultsStore, got {store!r}')
        self._store = store
        self._run_id: str | None = None

    @property
    def store(self) -> ResultsStore:
        """The store written to."""
        return self._store

    @property
    def run_id(self) -> str | None:
        """The run being written, once :meth:`start` was called."""
        return self._run_id

    def _id(self) -> str:
        if self._run_id is None:
            raise RuntimeError('`StoreSink.start()` must be called before anything is logged')
        return self._run_id

    def start(self, run_id: str, name: str, config: Mapping[str, Any],
              info: Mapping[str, Any]) -> None:
        # the store keeps the run's id, name and status itself: a start-time copy in
        # the meta would go stale (`status` 'running' beside the final one)
        meta = {k: v for k, v in info.items() if k not in ('run_id', 'name', 'status')}
        self._store.start_run(run_id, name, config, meta)
        self._run_id = run_id

    def log_epoch(self, step: int, epoch: int, metrics: Mapping[str, float]) -> None:
        self._store.log_epoch_metrics(self._id(), step, epoch, metrics)

    def log_epoch_stats(self, step: int, epoch: int,
                        stats: Mapping[str, Mapping[str, Any]]) -> None:
        """Record the full statistics (mean, std, count) of one epoch."""
        self._store.log_epoch_metrics(self._id(), step, epoch, stats)

    def write(self, epochs: Sequence[tuple[int, int, Mapping[str, Any]]],
              best: Mapping[str, float] | None) -> None:
        """Epochs (``(step, epoch, stats)``) and best values in one transaction,
        refreshing the heartbeat even when there is nothing else."""
        run_id = self._id()
        with self._store.transaction():
            if epochs:
                self._store.log_epochs(run_id, list(epochs))
            if best:
                self._store.set_best(run_id, best)
            if not epochs and not best:
                self._store.heartbeat(run_id)

    def log_best(self, values: Mapping[str, float]) -> None:
        self._store.set_best(self._id(), values)

    def log_results(self, values: Mapping[str, float]) -> None:
        self._store.update_results(self._id(), values)

    def heartbeat(self) -> None:
        """Show the run is alive."""
        self._store.heartbeat(self._id())

    def finish(self, status: str) -> None:
        self._store.set_status(self._id(), status)

    def __repr__(self) -> str:
        return f'StoreSink({self._store.root!r})'


class SinkError(Warning):
    """The warning issued when a sink raised: the sink is not called again in this run."""


_METHODS = ('start', 'log_epoch', 'log_best', 'log_results', 'finish')


def check_sinks(sinks: Any) -> list[Any]:
    """Check the `sinks` argument of an Experiment: a sequence of :class:`RunSink`.

    Raises:
        TypeError: `sinks` is not a list or tuple, or an item lacks a method.
    """
    if sinks is None:
        return []
    if not isinstance(sinks, (list, tuple)):
        raise TypeError(f'`sinks` must be a list of RunSink objects, got {sinks!r}')
    for i, sink in enumerate(sinks):
        missing = [m for m in _METHODS if not callable(getattr(sink, m, None))]
        if missing:
            raise TypeError(f'`sinks[{i}]` must be a RunSink (with {", ".join(_METHODS)}), '
                            f'got {sink!r}, which lacks {", ".join(missing)}')
    return list(sinks)


def report_sink_error(sink: Any, method: str, error: Exception) -> None:
    """Say that `sink` failed in `method` and will not be called again this run."""
    message = (f'The run sink {sink!r} failed in `{method}()` and is not called again in this '
               f'run (training goes on): {type(error).__name__}: {error}')
    warnings.warn(message, SinkError, stacklevel=3)
