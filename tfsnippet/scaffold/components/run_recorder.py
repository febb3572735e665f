"""The loop component that records a loop's epochs, best values and results into an Experiment."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from ...utils.statistics import StatisticsCollector
from ..event_keys import EventKeys
from .base import LoopComponent

if TYPE_CHECKING:  # pragma: no cover
    from ..loop.core import TrainLoop

__all__ = ['RunRecorder', 'RecordingTarget']


class RecordingTarget(Protocol):
    """What a :class:`RunRecorder` writes to (an :class:`~tfsnippet.Experiment`)."""

    flush_secs: float

    @property
    def active(self) -> bool: ...

    def log_epochs(self, epochs: list[tuple[int, int, dict[str, dict[str, Any]]]],
                   best: Mapping[str, float] | None = None) -> None: ...

    @property
    def results(self) -> Any: ...


class RunRecorder(LoopComponent):
    """Records a loop into an Experiment: epoch statistics, best values, final results.

    A :class:`~tfsnippet.TrainLoop` made inside an open
    :class:`~tfsnippet.Experiment` gets one with no extra code.  It costs the
    step loop nothing: it listens to the epoch-level ``print_logs``
    (``METRIC_STATS_PRINTED`` and ``TIME_METRIC_STATS_PRINTED`` outside a
    step loop), so what it records is exactly what the epoch log line
    prints (mean, std and count of each metric, reduced once by the metric
    book); an epoch without an epoch-level ``print_logs`` is recorded
    with the statistics of the values that epoch added to the book.  It keeps the epochs and
    the best validation value in memory and hands them to the Experiment at
    the end of an epoch when the Experiment's ``flush_secs`` have passed on
    the loop's clock since the last hand-over (which is one transaction of
    the store; at once when the epoch improved the best value), and when the loop is
    left, with ``loop.results`` (from
    ``collect_results``) as final results; results collected after the
    loop's block (the best weights restored) are recorded at once.  When the loop is entered (its
    checkpoint restored) it calls the target's ``confirm_resume()``, if it
    has one: a resumed run is recorded only once its resume has worked.

    Args:
        target: The Experiment to record into.
    """

    role = 'run_recorder'

    def __init__(self, target: RecordingTarget) -> None:
        self._target = target
        self._pending: list[tuple[int, int, dict[str, dict[str, Any]]]] = []
        self._improved = False
        self._current: dict[str, dict[str, Any]] = {}
        self._printed = False
        self._best: dict[str, float] = {}
        self._last_flush: float | None = None
        # name -> (weight sum, count, mean, mean square) of the book's epoch
        # statistics at the end of the last unprinted epoch
        self._totals: dict[str, tuple[float, int, float, float]] = {}

    @property
    def target(self) -> RecordingTarget:
        """The Experiment recorded into."""
        return self._target

    def on_enter(self, loop: TrainLoop) -> None:
        # every component has restored its state: a resumed run's start may be recorded
        confirm = getattr(self._target, 'confirm_resume', None)
        if callable(confirm):
            confirm()
        # the best weights the checkpointer exports are an artifact of the run (MLflow)
        export = getattr(loop.component('checkpointer'), 'export_path', None)
        add_artifact = getattr(self._target, 'add_artifact', None)
        if isinstance(export, str) and callable(add_artifact):
            add_artifact(export)
        self._pending, self._current, self._printed, self._best = [], {}, False, {}
        self._totals = {}
        self._last_flush = loop.clock()
        self.subscribe(loop, EventKeys.METRIC_STATS_PRINTED, self._on_printed)
        self.subscribe(loop, EventKeys.TIME_METRIC_STATS_PRINTED, self._on_printed)
        self.subscribe(loop, EventKeys.AFTER_EPOCH, self._after_epoch)

    def _on_printed(self, loop: TrainLoop, stats: Mapping[str, StatisticsCollector]) -> None:
        if loop.within_step:   # a step-level line: the epoch's line is what is kept
            return
        self._printed = True
        self._totals = {}      # the print clears the book's epoch statistics
        current = self._current
        for name, c in stats.items():
            if c.has_value:
                current[name] = {'mean': float(c.mean), 'std': float(c.stddev),
                                 'count': int(c.counter)}

    def _after_epoch(self, loop: TrainLoop) -> None:
        if not self._printed:   # no epoch-level line: this epoch's part of the book's statistics
            self._current.update(self._epoch_part(loop.metric_book.epoch_stats()))
        if self._current:
            self._pending.append((loop.step, loop.epoch, self._current))
        self._current, self._printed = {}, False
        now = loop.clock()
        # an epoch that improved the best is handed over at once: the sinks log each
        # new best at its step (MLflow's `best_<metric>` history), not only the last one
        if (self._improved or self._last_flush is None or
                now - self._last_flush >= self._target.flush_secs):
            self._improved = False
            self._last_flush = now
            self.flush()

    def _epoch_part(self, stats: Mapping[str, StatisticsCollector]) -> dict[str, dict[str, Any]]:
        """Mean, std and count of the values added to `stats` since the last epoch.

        Without an epoch-level ``print_logs`` nothing clears the book's epoch
        statistics, so they hold every epoch so far: this epoch's part is
        their difference from the totals seen at the end of the last one.
        """
        part = {}
        totals = self._totals
        for name, c in stats.items():
            if not c.has_value or c.shape != ():
                continue
            weight, mean, square = c.weight_sum, float(c.mean), float(c.square)
            last = totals.get(name)
            totals[name] = (weight, c.counter, mean, square)
            count = c.counter
            if last is not None:
                last_weight, last_count, last_mean, last_square = last
                count -= last_count
                if count <= 0 or weight <= last_weight:
                    continue   # nothing new this epoch
                mean, square = ((mean * weight - last_mean * last_weight) / (weight - last_weight),
                                (square * weight - last_square * last_weight) /
                                (weight - last_weight))
            part[name] = {'mean': mean, 'std': math.sqrt(max(square - mean * mean, 0.)),
                          'count': count}
        return part

    def on_valid_metric(self, loop: TrainLoop, value: float, improved: bool) -> None:
        if improved and loop.valid_metric_name is not None:
            self._best[loop.valid_metric_name] = value
            self._improved = True

    def flush(self) -> None:
        """Hand the buffered epochs and the best value over to the Experiment now."""
        pending, best = self._pending, self._best
        self._pending, self._best = [], {}
        if (pending or best) and self._target.active:
            self._target.log_epochs(pending, best or None)

    def on_exit(self, loop: TrainLoop, error: BaseException | None) -> None:
        if self._current:   # an epoch cut short (an exception): what it printed
            self._pending.append((loop.step, loop.epoch, self._current))
            self._current = {}
        self.flush()
        results = loop.results
        if results and self._target.active:   # else the Experiment was left before the loop
            self._target.results.update(results)

    def on_results(self, loop: TrainLoop, results: dict[str, float]) -> None:
        """Record results collected after the loop's block (the best weights restored)."""
        if not self._target.active:
            raise RuntimeError(
                f'`collect_results()` after the loop\'s `with` block records into the '
                f'Experiment only while its `with` block is open, and it has been left: '
                f'collect {sorted(results)} inside the Experiment\'s block')
        self._target.results.update(results)
