"""Metric sinks: one small interface for everywhere a loop's statistics go.

TensorBoard, an Experiment's results store, MLflow, TensorBoard's HParams
and a user's own tracker (a CSV file, W&B...) all receive a loop's metrics
through :class:`MetricSink`; :class:`MultiSink` sends to several of them,
reporting and dropping one that fails; :func:`chief_only` keeps a sink quiet
on the workers that are not the chief.  This module imports no TensorFlow.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from ...utils.statistics import StatisticsCollector

__all__ = ['MetricSink', 'MultiSink', 'ChiefOnlySink', 'chief_only', 'SinkError', 'SinkCallError',
           'check_sink', 'report_sink_error', 'plain_stats', 'STEP_LOG', 'EPOCH_LOG', 'EPOCH', 'SCOPES', 'CLOSE_STATUSES']

#: The scope of the statistics of a step-level ``print_logs()`` line.
STEP_LOG = 'step_log'
#: The scope of the statistics of an epoch-level ``print_logs()`` line.
EPOCH_LOG = 'epoch_log'
#: The scope of the statistics of a whole epoch, announced when it ends (printed or not).
EPOCH = 'epoch'
#: Every scope, in the order they happen within an epoch.
SCOPES = (STEP_LOG, EPOCH_LOG, EPOCH)
#: The statuses :meth:`MetricSink.close` receives.
CLOSE_STATUSES = ('completed', 'failed', 'preempted', 'pruned')

#: ``{metric name: {'mean': m, 'std': s, 'count': n}}``
Stats = Mapping[str, Mapping[str, Any]]

_METHODS = ('write_stats', 'write_best', 'write_results', 'flush', 'close')


class SinkError(Warning):
    """The warning issued when a sink raised: the sink is not called again in this run."""


class SinkCallError(Exception):
    """What a sink that wraps another raises when the inner one failed, so that
    the report names the inner sink and its method.

    Args:
        sink: The inner sink.
        method: The method of it that raised.
        error: What it raised.
    """

    def __init__(self, sink: Any, method: str, error: Exception) -> None:
        super().__init__(f'{type(error).__name__}: {error}')
        self.sink, self.method, self.error = sink, method, error


def plain_stats(stats: Mapping[str, StatisticsCollector]) -> dict[str, dict[str, Any]]:
    """``{name: {'mean': m, 'std': s, 'count': n}}`` of the scalar metrics among
    `stats` (``{name: StatisticsCollector}``) that hold a value: what sinks receive."""
    out = {}
    for name, c in stats.items():
        if c.has_value and c.shape == ():
            out[name] = {'mean': float(c.mean), 'std': float(c.stddev), 'count': int(c.counter)}
    return out


class MetricSink:
    """Receives the statistics of a training loop (a base class with empty methods).

    A sink is a class with these five methods; subclass this one and
    override those you need (the others do nothing).  It is called from
    the loop's process, at the end of an epoch or of a ``print_logs()``
    line, never per step; a sink that writes to a slow place buffers in
    :meth:`write_stats` and writes in :meth:`flush`.

    * :meth:`write_stats` -- the statistics of one `scope` at the loop's
      `step` and `epoch`: ``'epoch'`` (:data:`EPOCH`) once per epoch when
      it ends, with this epoch's values whether it printed a line or not;
      ``'epoch_log'`` and ``'step_log'`` for each epoch- and step-level
      ``print_logs()`` line.  Under multi-worker training they are the
      statistics merged across the workers, as the printed line shows them.
    * :meth:`write_best` -- a new best value of the validation metric.
    * :meth:`write_results` -- final results (``loop.collect_results``,
      ``Experiment.results.update``).
    * :meth:`flush` -- write what is buffered (at the end of an epoch, every
      ``flush_secs`` of the recorder, and when the loop is left).
    * :meth:`close` -- the run ended with a status in :data:`CLOSE_STATUSES`.
    * :meth:`resumed` (optional: a sink without it is not told) -- the run
      goes on from a checkpoint: what the sink received of the epochs from
      the one named on is sent again (a *replay*), see :meth:`resumed`.

    Values are plain floats (NaN allowed) and ints.  Attach a sink to a
    loop with ``loop.add_component(MetricRecorder(sink))`` (see
    :class:`~tfsnippet.scaffold.components.run_recorder.MetricRecorder`), or
    give it to an :class:`~tfsnippet.Experiment` (``sinks=[...]``), which
    sends it what every loop of the run records.
    """

    def write_stats(self, scope: str, step: int, epoch: int, stats: Stats) -> None:
        """The statistics ``{name: {'mean': m, 'std': s, 'count': n}}`` of `scope`
        (``'epoch'``, ``'epoch_log'`` or ``'step_log'``) at `step` of `epoch`."""

    def write_best(self, values: Mapping[str, float], step: int) -> None:
        """The best validation values so far (``{name: value}``), reached at `step`."""

    def write_results(self, values: Mapping[str, float]) -> None:
        """Final results (``{name: value}``), e.g. test metrics."""

    def flush(self) -> None:
        """Write what is buffered."""

    def close(self, status: str) -> None:
        """The run ended: ``'completed'``, ``'failed'`` or ``'preempted'``."""

    def resumed(self, step: int, epoch: int) -> None:
        """The run resumed from a checkpoint taken at global `step`, and `epoch`
        is the first epoch it runs (again); called when the loop is entered,
        before anything of the resumed run is written.

        What the interrupted run sent after its checkpoint is sent again
        (a replay): the statistics of scope ``'epoch'`` and ``'epoch_log'``
        of the epochs from `epoch` on, and those of ``'step_log'`` at steps
        after `step`.  A sink that keeps what it received (a file, a table)
        drops those rows here, or overwrites them when they come again, so
        that it never holds an epoch twice.  The base class does nothing.
        """


def check_sink(sink: Any, what: str = '`sink`') -> Any:
    """Return `sink` if it has the five methods of :class:`MetricSink`.

    Raises:
        TypeError: A method is missing (named in the message).
    """
    missing = [m for m in _METHODS if not callable(getattr(sink, m, None))]
    if missing:
        raise TypeError(f'{what} must be a MetricSink (with {", ".join(_METHODS)}), got '
                        f'{_short(sink)}, which lacks {", ".join(missing)}')
    return sink


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + '...'


def report_sink_error(sink: Any, method: str, error: Exception) -> None:
    """Say that `sink` failed in `method` and will not be called again this run."""
    if isinstance(error, SinkCallError):
        sink, method, error = error.sink, error.method, error.error
    message = (f'The run sink {sink!r} failed in `{method}()` and is not called again in this '
               f'run (training goes on): {type(error).__name__}: {error}')
    warnings.warn(message, SinkError, stacklevel=4)


class MultiSink(MetricSink):
    """Sends everything to several sinks, in order.

    An ``Exception`` raised by one of them never reaches the caller: it is
    reported once (a :class:`SinkError` warning) and that sink is dropped
    (not called again), so a tracking server that went away costs one
    message, not one per epoch.  :meth:`close` is still attempted on a
    dropped sink.

    Args:
        sinks: The sinks (each with the methods of :class:`MetricSink`).
    """

    def __init__(self, sinks: Iterable[Any] = ()) -> None:
        self._sinks = [check_sink(s, f'`sinks[{i}]`') for i, s in enumerate(sinks)]
        self._live = list(self._sinks)

    @property
    def sinks(self) -> tuple[Any, ...]:
        """Every sink given, dropped ones included."""
        return tuple(self._sinks)

    @property
    def live(self) -> tuple[Any, ...]:
        """The sinks still called (those that have not failed)."""
        return tuple(self._live)

    def add(self, sink: Any) -> None:
        """Send to `sink` too."""
        check_sink(sink)
        self._sinks.append(sink)
        self._live.append(sink)

    def call(self, sink: Any, method: str, *args: Any) -> bool:
        """Call ``sink.method(*args)`` if `sink` is live; on an error report it and
        drop the sink.  Return whether the call succeeded."""
        if sink not in self._live:
            return False
        try:
            getattr(sink, method)(*args)
            return True
        except Exception as e:  # noqa: BLE001 - a sink never stops training; reported
            self._live.remove(sink)
            report_sink_error(sink, method, e)
            return False

    def _each(self, method: str, *args: Any) -> None:
        for sink in tuple(self._live):
            self.call(sink, method, *args)

    def write_stats(self, scope: str, step: int, epoch: int, stats: Stats) -> None:
        self._each('write_stats', scope, step, epoch, stats)

    def write_best(self, values: Mapping[str, float], step: int) -> None:
        self._each('write_best', values, step)

    def write_results(self, values: Mapping[str, float]) -> None:
        self._each('write_results', values)

    def flush(self) -> None:
        self._each('flush')

    def resumed(self, step: int, epoch: int) -> None:
        """Tell each live sink that has a ``resumed`` method (see :meth:`MetricSink.resumed`)."""
        for sink in tuple(self._live):
            if callable(getattr(sink, 'resumed', None)):
                self.call(sink, 'resumed', step, epoch)

    def close(self, status: str) -> None:
        """Close every sink, those dropped included; an error is reported, not raised."""
        for sink in self._sinks:
            try:
                sink.close(status)
            except Exception as e:  # noqa: BLE001 - reported like any sink's error
                report_sink_error(sink, 'close', e)
        self._live = []

    def __repr__(self) -> str:
        return f'MultiSink({self._sinks!r})'


class ChiefOnlySink(MetricSink):
    """A sink that forwards to `sink` only in the chief process (see :func:`chief_only`)."""

    def __init__(self, sink: Any, is_chief: bool | Callable[[], bool] | None = None) -> None:
        self._sink = check_sink(sink)
        if is_chief is not None and not isinstance(is_chief, bool) and not callable(is_chief):
            raise TypeError(f'`is_chief` must be a bool, a function returning one or None, '
                            f'got {_short(is_chief)}')
        self._is_chief = is_chief
        self._decided: bool | None = is_chief if isinstance(is_chief, bool) else None

    @property
    def sink(self) -> Any:
        """The wrapped sink."""
        return self._sink

    @property
    def is_chief(self) -> bool:
        """Whether this process is the chief (decided at the first call)."""
        if self._decided is None:
            if callable(self._is_chief):
                self._decided = bool(self._is_chief())
            else:
                from ...distributed import cluster_info
                self._decided = bool(cluster_info().is_chief)
        return self._decided

    def write_stats(self, scope: str, step: int, epoch: int, stats: Stats) -> None:
        if self.is_chief:
            self._sink.write_stats(scope, step, epoch, stats)

    def write_best(self, values: Mapping[str, float], step: int) -> None:
        if self.is_chief:
            self._sink.write_best(values, step)

    def write_results(self, values: Mapping[str, float]) -> None:
        if self.is_chief:
            self._sink.write_results(values)

    def flush(self) -> None:
        if self.is_chief:
            self._sink.flush()

    def close(self, status: str) -> None:
        if self.is_chief:
            self._sink.close(status)

    def resumed(self, step: int, epoch: int) -> None:
        if self.is_chief and callable(getattr(self._sink, 'resumed', None)):
            self._sink.resumed(step, epoch)

    def __repr__(self) -> str:
        return f'chief_only({self._sink!r})'


def chief_only(sink: Any, is_chief: bool | Callable[[], bool] | None = None) -> ChiefOnlySink:
    """`sink`, called in the chief process only (a worker that is not the chief
    skips every call).

    Args:
        sink: A :class:`MetricSink`.
        is_chief: Whether this process is the chief: a bool, a function
            asked at the first call, or ``None`` for the cluster description
            (``TF_CONFIG``, see :func:`tfsnippet.distributed.cluster_info`).
    """
    return ChiefOnlySink(sink, is_chief)

