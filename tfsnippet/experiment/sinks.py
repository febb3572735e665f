"""Where an Experiment sends what a run records: the built-in sinks, and `RunSink`.

Every sink of an Experiment is a
:class:`~tfsnippet.scaffold.metrics.sinks.MetricSink` (``write_stats``,
``write_best``, ``write_results``, ``flush``, ``close``), with an optional
``start(run_id, name, config, info)`` called when the run starts.  A sink
written for the earlier :class:`RunSink` interface (``log_epoch``...) is
adapted once, when the Experiment is made (:func:`as_metric_sink`).  This
module imports no TensorFlow (the scaffold's sink module is imported when
first needed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from ..utils.status import FINISH_STATUSES
from ..utils.text import typed_repr
from .store import ResultsStore, _epoch_stats, _plain_config, _to_float, flatten_config

__all__ = ['RunSink', 'StoreSink', 'RecordsSink', 'SinkError', 'check_sinks', 'as_metric_sink',
           'report_sink_error', 'FINISH_STATUSES']


_SINK_METHODS = ('write_stats', 'write_best', 'write_results', 'flush', 'close')
_RUN_SINK_METHODS = ('start', 'log_epoch', 'log_best', 'log_results', 'finish')


def __getattr__(name: str) -> Any:
    # the scaffold's sink module, imported when first needed (it is TF-free, its package is not)
    if name == 'SinkError':
        from ..scaffold.metrics.sinks import SinkError
        return SinkError
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def report_sink_error(sink: Any, method: str, error: Exception) -> None:
    """Say that `sink` failed in `method` and will not be called again this run
    (a :class:`~tfsnippet.scaffold.metrics.sinks.SinkError` warning)."""
    from ..scaffold.metrics.sinks import report_sink_error as report
    report(sink, method, error)


@runtime_checkable
class RunSink(Protocol):
    """The earlier interface of an Experiment's sinks, still accepted.

    New sinks implement :class:`~tfsnippet.scaffold.metrics.sinks.MetricSink`
    instead (one method for the statistics of each epoch, mean, std and
    count, and ``close`` for ``finish``), optionally with :meth:`start`.

    An Experiment adapts a sink of this interface (see
    :func:`as_metric_sink`) and calls it, from the chief process only:
    :meth:`start` once when its ``with`` block is entered (also when a run is
    resumed: the same `run_id` again), then at each flush (a few epochs at
    once, at the end of an epoch, never per step) :meth:`log_epoch` for
    each epoch and :meth:`log_best` when the best validation value
    improved, :meth:`log_results` for final results, and :meth:`finish`
    once when the block is left.  Values are plain floats (NaN allowed).
    A sink that also has ``log_epochs(epochs, best)`` gets the epochs of a
    flush (``[(step, epoch, means), ...]``) and the best values (or ``None``)
    in one call instead; one that has ``log_epoch_stats(step, epoch,
    stats)`` gets the full statistics ``{name: {'mean': m, 'std': s,
    'count': n}}`` there instead of :meth:`log_epoch`; one that has
    ``resumed(step, epoch)`` is told when a resumed run replays the epochs
    from `epoch` on (see :meth:`~tfsnippet.scaffold.metrics.sinks.MetricSink.resumed`).

    **Errors**: an ``Exception`` raised by a sink never stops training.  It
    is reported once (a :class:`~tfsnippet.scaffold.metrics.sinks.SinkError`
    warning), and that sink is not called again during the run, so a
    tracking server that went away costs one message, not one per epoch.
    ``finish`` is still attempted on a sink that failed after :meth:`start`
    succeeded.
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


class _EpochBuffer:
    """What a sink that writes at :meth:`flush` keeps in between: the statistics of
    each epoch (scope ``'epoch'``; others are not kept) and the best values."""

    def __init__(self) -> None:
        self._epochs: list[tuple[int, int, Mapping[str, Mapping[str, Any]]]] = []
        self._best: dict[str, float] = {}

    def write_stats(self, scope: str, step: int, epoch: int,
                    stats: Mapping[str, Mapping[str, Any]]) -> None:
        """Keep the statistics of an epoch, written at the next flush."""
        if scope == 'epoch':
            self._epochs.append((step, epoch, stats))

    def write_best(self, values: Mapping[str, float], step: int) -> None:
        """Keep the best values, written at the next flush."""
        self._best.update(values)

    def resumed(self, step: int, epoch: int) -> None:
        """The epochs from `epoch` on are replayed: forget those kept."""
        self._epochs = [e for e in self._epochs if e[1] < epoch]

    def _take(self) -> tuple[list[tuple[int, int, Mapping[str, Mapping[str, Any]]]],
                             dict[str, float]]:
        """The kept epochs and best values, forgotten here."""
        epochs, best = self._epochs, self._best
        self._epochs, self._best = [], {}
        return epochs, best


class _RunSinkAdapter(_EpochBuffer):
    """A :class:`RunSink` seen as a MetricSink: the epochs and best values of a
    flush are handed over at :meth:`flush`, the way the sink takes them."""

    def __init__(self, sink: Any) -> None:
        super().__init__()
        self.sink = sink

    def _call(self, method: str, *args: Any) -> None:
        try:
            getattr(self.sink, method)(*args)
        except Exception as e:  # noqa: BLE001 - re-raised naming the inner sink
            from ..scaffold.metrics.sinks import SinkCallError
            raise SinkCallError(self.sink, method, e) from e

    def start(self, run_id: str, name: str, config: Mapping[str, Any],
              info: Mapping[str, Any]) -> None:
        self._call('start', run_id, name, config, info)

    def write_results(self, values: Mapping[str, float]) -> None:
        self._call('log_results', dict(values))

    def resumed(self, step: int, epoch: int) -> None:
        """Forget the kept epochs from `epoch` on, and tell the sink if it has ``resumed``."""
        super().resumed(step, epoch)
        if callable(getattr(self.sink, 'resumed', None)):
            self._call('resumed', step, epoch)

    def flush(self) -> None:
        epochs, best = self._take()
        if callable(getattr(self.sink, 'log_epochs', None)):   # the whole flush at once
            if epochs or best:
                self._call('log_epochs', [(step, epoch, _means(stats))
                                          for step, epoch, stats in epochs], best or None)
            return
        with_stats = callable(getattr(self.sink, 'log_epoch_stats', None))
        for step, epoch, stats in epochs:
            if with_stats:
                self._call('log_epoch_stats', step, epoch, stats)
            else:
                self._call('log_epoch', step, epoch, _means(stats))
        if best:
            self._call('log_best', best)

    def close(self, status: str) -> None:
        self._call('finish', status)

    def __repr__(self) -> str:
        return repr(self.sink)


def _means(stats: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    return {name: float(s['mean']) for name, s in stats.items()}


def as_metric_sink(sink: Any) -> Any:
    """`sink` as a MetricSink: itself when it has the five methods of
    :class:`~tfsnippet.scaffold.metrics.sinks.MetricSink`, else (a
    :class:`RunSink`) an adapter that calls it the way it is written for."""
    if all(callable(getattr(sink, m, None)) for m in _SINK_METHODS):
        return sink
    return _RunSinkAdapter(sink)


class StoreSink(_EpochBuffer):
    """The built-in sink: one run in a :class:`~tfsnippet.ResultsStore` (SQLite).

    A :class:`~tfsnippet.scaffold.metrics.sinks.MetricSink`: it keeps the
    statistics of each epoch (scope ``'epoch'``: mean, std and count) and
    the best values it receives, and :meth:`flush` writes them in one
    transaction of the store; results and the final status are written at
    once.  The earlier methods (``log_epoch``...) write at once, each call
    one transaction; :meth:`write` groups several (the epochs of a flush,
    the best values and the heartbeat) into one.

    Args:
        store: The store to write to.
    """

    def __init__(self, store: ResultsStore) -> None:
        if not isinstance(store, ResultsStore):
            raise TypeError(f'`store` must be a ResultsStore, got {store!r}')
        super().__init__()
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

    # ------------------------------------------------------------ the MetricSink
    def write_results(self, values: Mapping[str, float]) -> None:
        """Write final results now."""
        self._store.update_results(self._id(), values)

    def flush(self) -> None:
        """Write the kept epochs and best values in one transaction."""
        epochs, best = self._take()
        if epochs or best:
            self.write(epochs, best)

    def close(self, status: str) -> None:
        """Write what is kept, then the run's final status."""
        try:
            self.flush()
        finally:
            self.finish(status)

    def resumed(self, step: int, epoch: int) -> None:
        """The epochs from `epoch` on are replayed: the store forgets its rows of
        them now, the replay writes them again (never a mix of two attempts)."""
        super().resumed(step, epoch)
        self._store.forget_epochs(self._id(), epoch)

    # ------------------------------------------------------------ one call, one transaction
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


class RecordsSink(_EpochBuffer):
    """The built-in sink of a run under an object-store root: its records as
    numbered objects (see :mod:`tfsnippet.experiment.remote`).

    Like :class:`StoreSink`, it keeps the statistics of each epoch and the
    best values, and :meth:`flush` writes them as one object; results and
    the final status are written at once.  Values are checked as the store
    checks them, so the records always replay.

    Args:
        writer: The run's :class:`~tfsnippet.experiment.remote.RunRecordWriter`.
    """

    def __init__(self, writer: Any) -> None:
        super().__init__()
        self._writer = writer

    def start(self, run_id: str, name: str, config: Mapping[str, Any],
              info: Mapping[str, Any]) -> None:
        flatten_config(config)   # the store's checks: a bad config fails here, not at replay
        meta = {k: v for k, v in info.items() if k not in ('run_id', 'name', 'status')}
        self._writer.write(['start', name, _plain_config(config), meta])
        self._writer.heartbeat()

    def write_results(self, values: Mapping[str, float]) -> None:
        """Write final results now."""
        self._writer.write(['results', _checked_values(values)])

    def resumed(self, step: int, epoch: int) -> None:
        """The epochs from `epoch` on are replayed: a record says the store forgets
        its rows of them (before the replay's records)."""
        super().resumed(step, epoch)
        self._writer.write(['forget_epochs', int(epoch)])

    def flush(self) -> None:
        """Write the kept epochs and best values as one record (or a heartbeat)."""
        epochs, best = self._take()
        ops: list[list[Any]] = []
        if epochs:
            rows = []
            for step, epoch, stats in epochs:
                checked = {}
                for name, value in stats.items():
                    mean, std, count = _epoch_stats(name, value)
                    checked[name] = {'mean': float('nan') if mean is None else mean,
                                     'std': std, 'count': count}
                rows.append([int(step), int(epoch), checked])
            ops.append(['epochs', rows])
        if best:
            ops.append(['best', _checked_values(best)])
        if ops:
            self._writer.write(*ops)
        else:
            self._writer.heartbeat()

    def close(self, status: str) -> None:
        """Write what is kept, then the run's final status."""
        try:
            self.flush()
        finally:
            self.finish(status)

    def heartbeat(self) -> None:
        """Show the run is alive (rewrites its heartbeat object)."""
        self._writer.heartbeat()

    def finish(self, status: str) -> None:
        self._writer.write(['status', status])
        self._writer.heartbeat()

    def __repr__(self) -> str:
        return f'RecordsSink({self._writer.location.url!r})'


def _checked_values(values: Mapping[str, Any]) -> dict[str, float]:
    if not isinstance(values, Mapping):
        raise TypeError(f'`values` must be a mapping, got {typed_repr(values)}')
    out = {}
    for name, value in values.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f'`values` names must be non-empty str, got {typed_repr(name)}')
        number = _to_float(value, f'values[{name!r}]')
        out[name] = float('nan') if number is None else number
    return out


def check_sinks(sinks: Any) -> list[Any]:
    """Check the `sinks` argument of an Experiment: a sequence of
    :class:`~tfsnippet.scaffold.metrics.sinks.MetricSink` or :class:`RunSink`
    objects; return them as MetricSinks (see :func:`as_metric_sink`).

    Raises:
        TypeError: `sinks` is not a list or tuple, or an item is neither.
    """
    if sinks is None:
        return []
    if not isinstance(sinks, (list, tuple)):
        raise TypeError(f'`sinks` must be a list of MetricSink objects, got {typed_repr(sinks)}')
    out = []
    for i, sink in enumerate(sinks):
        if not all(callable(getattr(sink, m, None)) for m in _SINK_METHODS):
            missing = [m for m in _RUN_SINK_METHODS if not callable(getattr(sink, m, None))]
            if missing:
                lacking = [m for m in _SINK_METHODS if not callable(getattr(sink, m, None))]
                raise TypeError(f'`sinks[{i}]` must be a MetricSink (with '
                                f'{", ".join(_SINK_METHODS)}), got {typed_repr(sink)}, which lacks '
                                f'{", ".join(lacking)}')
        out.append(as_metric_sink(sink))
    return out
