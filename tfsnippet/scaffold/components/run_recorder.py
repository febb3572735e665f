"""The loop components that send a loop's statistics to metric sinks."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ...utils.status import status_of_exit
from ..event_keys import EventKeys
from ..metrics.sinks import EPOCH, SCOPES, MultiSink, check_sink
from .base import LoopComponent
from .suspend import SuspendableWrites

if TYPE_CHECKING:  # pragma: no cover
    from ..loop.core import TrainLoop

__all__ = ['MetricRecorder', 'RunRecorder', 'RecordingTarget']

class MetricRecorder(LoopComponent, SuspendableWrites):
    """Sends the statistics a loop announces to metric sinks.

    The loop announces each reduction of its metric book once
    (``METRIC_STATS_REDUCED``): each ``print_logs()`` line and the end of
    each epoch, with the statistics (mean, std and count) merged across the
    workers under multi-worker training.  This component hands those of the
    `scopes` asked for to the sinks (``write_stats``), a new best value of
    the validation metric (``write_best``), and when the loop is left its
    :attr:`~tfsnippet.TrainLoop.results` (``write_results``).  It flushes the
    sinks at the end of an epoch when `flush_secs` have passed on the
    loop's clock since the last flush, and when the loop is left; with
    `close`, it then closes them with the loop's status.  It costs the step
    loop nothing (no per-step handler).

    When the loop resumed from a checkpoint, the sinks are told first
    (``resumed(step, epoch)``, see
    :meth:`~tfsnippet.scaffold.metrics.sinks.MetricSink.resumed`): what the
    interrupted run sent after its checkpoint is sent again, and a sink
    that keeps rows drops those of the replayed epochs.

    The sinks are called through a
    :class:`~tfsnippet.scaffold.metrics.sinks.MultiSink`: a sink that raises
    is reported once and not called again.  Every process of a
    multi-worker job calls its sinks; wrap a sink with
    :func:`~tfsnippet.scaffold.metrics.sinks.chief_only` to write from the
    chief only.

    Args:
        sinks: A :class:`~tfsnippet.scaffold.metrics.sinks.MetricSink`, or a
            list of them.
        scopes: The scopes sent to ``write_stats``: ``'epoch'`` (each epoch
            when it ends, the default), ``'epoch_log'``, ``'step_log'``.
        flush_secs: The least seconds between two flushes at the end of an
            epoch (``0``: every epoch).
        close: Whether to close the sinks when the loop is left.

    Example::

        loop.add_component(MetricRecorder(CsvSink('metrics.csv')))
    """

    role = 'metric_recorder'

    def __init__(self, sinks: Any, *, scopes: Sequence[str] = (EPOCH,), flush_secs: float = 0.,
                 close: bool = True) -> None:
        items = list(sinks) if isinstance(sinks, (list, tuple)) else [check_sink(sinks)]
        if isinstance(scopes, str) or not all(s in SCOPES for s in scopes):
            raise ValueError(f'`scopes` must be a list of {", ".join(map(repr, SCOPES))}, '
                             f'got {scopes!r}')
        if isinstance(flush_secs, bool) or not isinstance(flush_secs, (int, float)) or \
                not (flush_secs >= 0 and math.isfinite(flush_secs)):
            raise ValueError(f'`flush_secs` must be a number of seconds >= 0, got {flush_secs!r}')
        if not isinstance(close, bool):
            raise TypeError(f'`close` must be a bool, got {close!r}')
        self._sink = MultiSink(items)
        self._scopes = frozenset(scopes)
        self._flush_secs = float(flush_secs)
        self._close = close
        self._last_flush: float | None = None
        self._improved = False   # this epoch improved the best value: flushed at its end

    @property
    def sink(self) -> MultiSink:
        """The sinks, as one :class:`~tfsnippet.scaffold.metrics.sinks.MultiSink`."""
        return self._sink

    @property
    def flush_secs(self) -> float:
        """The least seconds between two flushes at the end of an epoch."""
        return self._flush_secs

    def on_enter(self, loop: TrainLoop) -> None:
        if self._writes_suspended is not None:   # a quick check: nothing is recorded
            return
        self._last_flush = loop.clock()
        self._improved = False
        progress = loop.progress
        if progress.step or progress.epoch:   # resumed: what follows the checkpoint is replayed
            self._sink.resumed(progress.step, progress.next_epoch)
        self.subscribe(loop, EventKeys.METRIC_STATS_REDUCED, self._on_reduced)

    def _on_reduced(self, loop: TrainLoop, scope: str,
                    stats: Mapping[str, Mapping[str, Any]]) -> None:
        if scope in self._scopes:
            self._sink.write_stats(scope, loop.step, loop.epoch, stats)
        if scope == EPOCH:
            # an epoch that improved the best is flushed at once: the sinks log each new
            # best at its step (MLflow's `best_<metric>` history), not only the last one
            now = loop.clock()
            if (self._improved or self._last_flush is None or
                    now - self._last_flush >= self.flush_secs):
                self._improved = False
                self._last_flush = now
                self._sink.flush()

    def on_valid_metric(self, loop: TrainLoop, value: float, improved: bool) -> None:
        if self._writes_suspended is None and improved and loop.valid_metric_name is not None:
            self._sink.write_best({loop.valid_metric_name: value}, loop.step)
            self._improved = True

    def flush(self) -> None:
        """Flush the sinks now."""
        self._sink.flush()

    def _write_results(self, results: dict[str, float]) -> None:
        self._sink.write_results(results)

    def on_exit(self, loop: TrainLoop, error: BaseException | None) -> None:
        if self._writes_suspended is not None:
            return
        self._sink.flush()
        results = loop.results
        if results:
            self._write_results(results)
            self._sink.flush()
        if self._close:
            self._sink.close(status_of_exit(error))


class RecordingTarget(Protocol):
    """What a :class:`RunRecorder` writes to (an :class:`~tfsnippet.Experiment`)."""

    flush_secs: float

    @property
    def active(self) -> bool: ...

    @property
    def sink(self) -> Any: ...

    @property
    def results(self) -> Any: ...


class RunRecorder(MetricRecorder):
    """Records a loop into an Experiment: epoch statistics, best values, final results.

    A :class:`~tfsnippet.TrainLoop` made inside an open
    :class:`~tfsnippet.Experiment` gets one with no extra code (the
    Experiment offers it as a loop context provider).  It is a
    :class:`MetricRecorder` whose sink is the run (its results store,
    MLflow, HParams and the Experiment's own sinks): each epoch's
    statistics when the epoch ends, exactly those of its epoch-level log
    line when it printed one, and this epoch's own values when not (mean,
    std and count); the best validation value; and ``loop.results`` (from
    ``collect_results``) as final results when the loop is left.  The run's
    sinks are flushed at the end of an epoch when the Experiment's
    ``flush_secs`` have passed on the loop's clock since the last flush
    (one transaction of the store), and when the loop is left; the
    Experiment closes them when its block is left.  A loop left after the
    Experiment's block records nowhere.

    Args:
        target: The Experiment to record into.
    """

    role = 'run_recorder'

    def __init__(self, target: RecordingTarget) -> None:
        super().__init__(target.sink, close=False)
        self._target = target

    @property
    def target(self) -> RecordingTarget:
        """The Experiment recorded into."""
        return self._target

    @property
    def flush_secs(self) -> float:
        return float(self._target.flush_secs)

    def on_enter(self, loop: TrainLoop) -> None:
        if self._writes_suspended is not None:   # a quick check: nothing is recorded
            return
        # the loop has restored its checkpoint: a resumed run's start may be recorded
        confirm = getattr(self._target, 'confirm_resume', None)
        if callable(confirm):
            confirm()
        # the best weights the loop exports are an artifact of the run (MLflow)
        export, checkpointer = loop.component('export'), loop.component('checkpointer')
        path = export.path if export is not None else getattr(checkpointer, 'export_path', None)
        add_artifact = getattr(self._target, 'add_artifact', None)
        if isinstance(path, str) and callable(add_artifact):
            add_artifact(path)
        super().on_enter(loop)

    def _write_results(self, results: dict[str, float]) -> None:
        if self._target.active:   # else the Experiment was left before the loop
            self._target.results.update(results)

    def on_results(self, loop: TrainLoop, results: dict[str, float]) -> None:
        """Record results collected after the loop's block (the best weights restored)."""
        if self._writes_suspended is not None:
            return
        if not self._target.active:
            raise RuntimeError(
                f'`collect_results()` after the loop\'s `with` block records into the '
                f'Experiment only while its `with` block is open, and it has been left: '
                f'collect {sorted(results)} inside the Experiment\'s block')
        self._target.results.update(results)
