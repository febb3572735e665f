"""The metric book: the one place where a loop's collected values are checked and reduced."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...backend.base import Backend
from ...backend.local import LocalBackend
from ...backend.values import PendingValue, is_distributed_value
from ...utils.events import NO_COUNTERS, Counters, Every
from ...utils.statistics import StatisticsCollector
from ...utils.validation import short_repr
from .values import PENDING_LIMIT, check_metric_value, move_pending, to_float

__all__ = ['MetricBook']


class MetricBook:
    """The step and epoch statistics of a training loop, kept in one place.

    Every reader of metrics reads this book or what it hands out: the
    console line and ``METRIC_STATS_PRINTED`` read its reduced statistics,
    ``METRICS_COLLECTED`` handlers (TensorBoard, a results store) receive
    the values as :meth:`collect` normalised them, and watchers (the best
    validation metric, early stopping, a loss guard) receive one float per
    value of the metric they watch.

    Values collected inside a step loop count for both the step statistics
    (printed and cleared by a step-level ``print_logs``) and the epoch
    statistics; values collected outside count for the epoch only.  Each
    value is checked once (then only its type, with one dict lookup),
    appended once to a list and reduced once (on printing, or in chunks of
    1024), the chunk's moments then merged into both collectors, so the
    per-step cost is one list append and an eager tensor is copied to the
    host once.  Eager variables are read when collected.

    The book works with the loop's backend (:meth:`use_backend`, when the
    loop is entered): under a ``tf.distribute`` strategy its
    ``normalize_metric`` keeps ``PerReplica`` and ``RemoteValue`` values as
    they are (reduced across replicas at print time), and a watched value
    is averaged across the workers (``worker_mean``), so every worker
    decides alike.

    Args:
        backend: The backend to start with (a :class:`~tfsnippet.backend.LocalBackend`
            by default).
    """

    #: A loop asks for :meth:`compact` when ``step & COMPACT_MASK == 0`` (every 1024 steps).
    COMPACT_MASK = 1023

    def __init__(self, backend: Backend | None = None) -> None:
        self.step_pending: dict[str, list[Any]] = {}    # inside steps, not reduced yet
        self.epoch_pending: dict[str, list[Any]] = {}   # outside steps, not reduced yet
        self._step_stats: dict[str, StatisticsCollector] = {}
        self._epoch_stats: dict[str, StatisticsCollector] = {}
        self._outside_stats: dict[str, StatisticsCollector] = {}   # collected outside steps
        # this epoch's statistics, printed or not (handed out by `close_epoch`)
        self._closing: dict[str, StatisticsCollector] = {}
        # the parts of `_epoch_stats` and `_closing` collected inside steps: what a
        # checkpoint inside an epoch keeps (a resumed epoch runs its code outside
        # the steps again, and collects those values again)
        self._epoch_steps: dict[str, StatisticsCollector] = {}
        self._closing_steps: dict[str, StatisticsCollector] = {}
        self._step_targets = (self._step_stats, self._epoch_stats, self._closing,
                              self._epoch_steps, self._closing_steps)
        # {metric name: type of its values} once checked, for a one-lookup check
        self._types: dict[str, type] = {}
        # {metric name: its watchers}; read-only outside the book (use `watch`)
        self.watchers: dict[str, list[tuple[Callable[[float], Any], Every | None,
                                             Counters]]] = {}
        self._backend: Backend = LocalBackend()
        # the backend's normalize_metric, when it may keep values of its own
        self._normalize: Callable[[str, Any, str], Any] | None = None
        self.use_backend(backend or self._backend)

    @property
    def backend(self) -> Backend:
        """The backend that normalises collected values and averages watched ones."""
        return self._backend

    def use_backend(self, backend: Backend) -> None:
        """Work with `backend` from now on (the loop's, when it is entered).

        Raises:
            TypeError: `backend` is not a :class:`~tfsnippet.backend.Backend`.
        """
        if not isinstance(backend, Backend):
            raise TypeError(f'`backend` must be a Backend, got {short_repr(backend)}')
        self._backend = backend
        self._normalize = backend.normalize_metric if backend.holds_replica_values else None

    # ------------------------------------------------------------ collecting
    def collect(self, metrics: Mapping[str, Any], within_step: bool,
                reduce: str | Mapping[str, str] | None = None) -> Mapping[str, Any]:
        """Check and add `metrics`; return them as stored (normalised).

        `reduce` (``'mean'``, ``'sum'`` or ``{name: mode}``) says how the
        values of replicas are combined, under a strategy (see
        :meth:`use_backend`); without one it is checked and ignored.

        Raises:
            TypeError: A name is not a str or a value is not numeric.
            ValueError: `reduce` is not ``'mean'``, ``'sum'`` or a dict of them.
        """
        if reduce is not None and self._normalize is not None:
            metrics = self._check(metrics, reduce)
        else:
            if reduce is not None:   # no strategy: checked, then as without it
                _reduce_modes(reduce, metrics)
            types = self._types
            for name, value in metrics.items():
                if types.get(name) is not type(value):
                    metrics = self._check(metrics)
                    break
        pending = self.step_pending if within_step else self.epoch_pending
        for name, value in metrics.items():
            values = pending.get(name)
            if values is None:
                pending[name] = [value]
            else:
                values.append(value)
        return metrics

    def _check(self, metrics: Mapping[str, Any],
               reduce: str | Mapping[str, str] | None = None) -> dict[str, Any]:
        modes = _reduce_modes(reduce, metrics)
        normalize = self._normalize
        out = {}
        for name, value in metrics.items():
            if not isinstance(name, str):
                raise TypeError(f'Metric names must be str, got {name!r}')
            if normalize is not None and (modes or is_distributed_value(value)):
                mode = modes.get(name, 'mean')
                value = normalize(name, value, mode)
                if isinstance(value, PendingValue):
                    out[name] = value
                    continue
            out[name] = check_metric_value(name, value)
        for name, value in metrics.items():
            if out[name] is value:   # kept as it is: values of this type need no check
                self._types[name] = type(value)
        return out

    def add_time(self, name: str, seconds: float, within_step: bool) -> None:
        """Add a duration (already a float) to the step or epoch statistics."""
        pending = self.step_pending if within_step else self.epoch_pending
        values = pending.get(name)
        if values is None:
            pending[name] = [seconds]
        else:
            values.append(seconds)

    # ------------------------------------------------------------ watchers
    def watch(self, name: str, callback: Callable[[float], Any], every: Every | None = None,
              counters: Counters | None = None) -> Callable[[], None]:
        """Call ``callback(value)`` with each value of metric `name` as a float
        (its mean), or only when the schedule `every` (read with `counters`)
        is due; return a function that stops it.

        Reading a value as a float waits for the device: watch metrics that
        are collected once per validation, or use `every`.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f'`name` must be a metric name, got {name!r}')
        if not callable(callback):
            raise TypeError(f'`callback` must be callable, got {callback!r}')
        if every is not None and counters is None and every.kind != 'calls':
            raise ValueError(f'`every={every!r}` needs `counters`')
        read_by = counters if counters is not None else NO_COUNTERS
        if every is not None:
            every.reset(read_by)
        entry = (callback, every, read_by)
        entries = self.watchers.setdefault(name, [])
        entries.append(entry)

        def unwatch() -> None:
            if entry in entries:
                entries.remove(entry)
                if not entries and self.watchers.get(name) is entries:
                    del self.watchers[name]
        return unwatch

    def dispatch(self, metrics: Mapping[str, Any]) -> None:
        """Hand the watched values among `metrics` (as stored) to their watchers."""
        watchers = self.watchers
        for name, value in metrics.items():
            entries = watchers.get(name)
            if entries:
                number = None
                for callback, every, counters in tuple(entries):
                    if every is None or every.due(counters):
                        if number is None:
                            number = self._backend.worker_mean(to_float(name, value))
                        callback(number)

    # ------------------------------------------------------------ statistics
    def _reduce_step_values(self) -> None:
        for name, values in self.step_pending.items():
            if values:
                move_pending(name, values, self._step_targets)

    def compact(self) -> None:
        """Reduce long lists of pending values, bounding memory."""
        for name, values in self.step_pending.items():
            if len(values) >= PENDING_LIMIT:
                move_pending(name, values, self._step_targets)
        for name, values in self.epoch_pending.items():
            if len(values) >= PENDING_LIMIT:
                move_pending(name, values, (self._epoch_stats, self._closing))

    def step_stats(self) -> dict[str, StatisticsCollector]:
        """The statistics since the last step-level clear."""
        self._reduce_step_values()
        return dict(self._step_stats)

    def epoch_stats(self) -> dict[str, StatisticsCollector]:
        """The statistics since the last epoch-level clear."""
        self._reduce_step_values()
        self._reduce_outside_values()
        return dict(self._epoch_stats)

    def _reduce_outside_values(self) -> None:
        for name, values in self.epoch_pending.items():
            if values:
                move_pending(name, values, (self._epoch_stats, self._outside_stats,
                                             self._closing))

    def step_line_stats(self) -> dict[str, StatisticsCollector]:
        """What a step-level log line shows: the step statistics, and the values
        of this epoch collected outside its steps (a learning rate set at
        ``BEFORE_EPOCH``), which stay until the epoch-level clear."""
        self._reduce_outside_values()
        step = self.step_stats()
        return {**{k: v for k, v in self._outside_stats.items() if k not in step}, **step}

    def end_epoch(self) -> None:
        """The values collected outside steps so far belong to the ending epoch:
        they stay in its statistics and leave the step lines."""
        for name, values in self.epoch_pending.items():
            if values:
                move_pending(name, values, (self._epoch_stats, self._closing))
        self._outside_stats.clear()

    def epoch_so_far(self) -> dict[str, StatisticsCollector]:
        """This epoch's statistics so far, printed or not (what :meth:`close_epoch`
        would return now), without closing it."""
        self._reduce_step_values()
        self._reduce_outside_values()
        return dict(self._closing)

    def close_epoch(self) -> dict[str, StatisticsCollector]:
        """This epoch's statistics, whether its lines were printed or not, then
        forget them (the printed statistics are not touched)."""
        self._reduce_step_values()
        self.end_epoch()
        closed = dict(self._closing)
        self._closing.clear()
        self._closing_steps.clear()
        return closed

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The statistics of the values collected inside steps so far, as plain
        data: what a checkpoint taken inside an epoch keeps, so that the resumed
        epoch's lines, callbacks and sinks get the statistics of the whole epoch.

        Values collected outside steps are not kept: a resumed epoch runs its
        code outside the step loop again (a learning rate collected before
        it is collected again).  The pending values are reduced first (as
        :meth:`compact` would do), so a run that saves at a step and one
        resumed from that save merge the same chunks and print the same
        bits.  This reads the values to the host.
        """
        self._reduce_step_values()
        return {'step': _states(self._step_stats), 'epoch': _states(self._epoch_steps),
                'closing': _states(self._closing_steps), 'names': sorted(self.step_pending)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put back the statistics of :meth:`state_dict` (those collected so far
        are replaced; the watchers and the backend stay).

        Raises:
            KeyError: A part of the state is missing.
        """
        missing = [k for k in ('step', 'epoch', 'closing') if k not in state]
        if missing:
            raise KeyError(f'`state` lacks the parts {missing} of a MetricBook state: '
                           f'got {sorted(state)}')
        self.clear()
        for key, targets in (('step', (self._step_stats,)),
                             ('epoch', (self._epoch_stats, self._epoch_steps)),
                             ('closing', (self._closing, self._closing_steps))):
            for name, saved in state[key].items():
                for target in targets:
                    target[name] = StatisticsCollector.from_state_dict(saved)
        for name in state.get('names') or ():
            self.step_pending.setdefault(name, [])

    def seen(self, name: str) -> bool:
        """Whether metric `name` has been collected since the book was made."""
        return name in self.step_pending or name in self.epoch_pending

    def names(self) -> list[str]:
        """The names of every metric collected since the book was made."""
        return sorted(set(self.step_pending) | set(self.epoch_pending))

    def clear_step(self) -> None:
        """Forget the step statistics (values stay in the epoch statistics)."""
        self._reduce_step_values()
        self._step_stats.clear()

    def clear_epoch(self) -> None:
        """Forget the epoch statistics (values stay in the step statistics)."""
        self._reduce_step_values()
        for name, values in self.epoch_pending.items():
            if values:   # not printed, but still this epoch's
                move_pending(name, values, (self._closing,))
        self._epoch_stats.clear()
        self._epoch_steps.clear()
        self._outside_stats.clear()

    def clear(self, forget_names: bool = False) -> None:
        """Forget the values; the pending lists are emptied in place, or
        dropped with their names when `forget_names`."""
        if forget_names:
            self.step_pending.clear()
            self.epoch_pending.clear()
        else:
            for values in self.step_pending.values():
                values.clear()
            for values in self.epoch_pending.values():
                values.clear()
        self._step_stats.clear()
        self._epoch_stats.clear()
        self._outside_stats.clear()
        self._closing.clear()
        self._epoch_steps.clear()
        self._closing_steps.clear()


def _states(stats: Mapping[str, StatisticsCollector]) -> dict[str, Any]:
    return {name: c.state_dict() for name, c in stats.items()}


def _reduce_modes(reduce: str | Mapping[str, str] | None,
                  metrics: Mapping[str, Any]) -> dict[str, str]:
    """``{name: mode}`` of a `reduce` argument for `metrics` (``{}`` for None)."""
    if reduce is None:
        return {}
    modes = dict.fromkeys(metrics, reduce) if isinstance(reduce, str) else reduce
    if not isinstance(modes, Mapping) or not all(
            isinstance(k, str) and v in ('mean', 'sum') for k, v in modes.items()):
        raise ValueError(f"`reduce` must be 'mean', 'sum' or a dict {{metric name: 'mean' or "
                         f"'sum'}}, got {short_repr(reduce)}")
    unknown = sorted(set(modes) - set(metrics))
    if unknown:
        raise ValueError(f'`reduce` names metrics that are not collected here: {unknown}; '
                         f'the metrics are {sorted(metrics)}')
    return dict(modes)
