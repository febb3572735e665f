"""Metric collection and formatting for the console logs of the training loop."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from ..utils.misc import humanize_duration
from ..utils.statistics import StatisticsCollector
from ..utils.tf_vars import as_tf_variable, is_variable

__all__ = ['MetricFormatter', 'DefaultMetricFormatter', 'MetricLogger', 'LoopMetrics',
           'TIME_METRIC_PATTERN', 'check_metric_value', 'format_metric_stats']

#: Names matching this pattern are time metrics: formatted as durations,
#: listed first, and reported through ``TIME_METRIC_STATS_PRINTED``.
TIME_METRIC_PATTERN = re.compile(r'.*timer?$')


@functools.lru_cache(maxsize=4096)
def is_time_metric(name: str) -> bool:
    """Whether metric `name` is a time metric (it ends in ``time`` or ``timer``)."""
    return TIME_METRIC_PATTERN.match(name) is not None

_NUMERIC_KINDS = frozenset('biuf')
# Values collected per metric are kept as they arrive and reduced in one go
# (when logs are printed, or after this many values), so that collecting a
# metric costs a list append and an eager tensor is not copied to the host
# on every step.
_PENDING_LIMIT = 1024


def check_metric_value(name: str, value: Any) -> Any:
    """Check that `value` is numeric and return it in the form to store.

    Python numbers, numpy scalars and eager tensors are kept as they are
    (reduced later, when the logs are printed), numpy arrays and lists
    become float64 copies, and eager variables are read.

    Raises:
        TypeError: `value` is not numeric, or is a symbolic graph tensor or
            graph variable that has not been evaluated.
    """
    t = type(value)
    if t is float or t is int:
        return value
    if isinstance(value, np.generic):
        if value.dtype.kind not in _NUMERIC_KINDS:
            raise _not_numeric(name, value)
        return value
    if isinstance(value, tf.Tensor):
        if not hasattr(value, 'numpy') or not tf.executing_eagerly():
            raise TypeError(
                f'Metric `{name}` is a symbolic graph tensor {value!r}: evaluate it '
                f'with `session.run` and pass the result instead')
        if not (value.dtype.is_floating or value.dtype.is_integer or value.dtype.is_bool):
            raise _not_numeric(name, value)
        return value
    if is_variable(value):
        if not tf.executing_eagerly():
            raise TypeError(
                f'Metric `{name}` is a graph variable {value!r}: evaluate it with '
                f'`session.run` and pass the result instead')
        return check_metric_value(name, as_tf_variable(value).read_value())
    if isinstance(value, (np.ndarray, list, tuple)):
        try:
            arr = np.array(value, dtype=None)
        except ValueError as e:
            raise _not_numeric(name, value) from e
        if arr.dtype.kind not in _NUMERIC_KINDS:
            raise _not_numeric(name, value)
        return arr.astype(np.float64)
    if t is not bool and hasattr(value, '__float__') and not isinstance(value, (str, bytes)):
        return float(value)
    if t is bool:
        return int(value)
    raise _not_numeric(name, value)


def _not_numeric(name: str, value: Any) -> TypeError:
    return TypeError(
        f'Metric `{name}` must be a number, a numeric numpy array or an eager tensor, '
        f'got {value!r}')


def _to_float64(name: str, values: list[Any]) -> np.ndarray:
    """The pending values of metric `name` as one flat float64 array."""
    try:
        # one C-level conversion for numbers, numpy scalars and same-shaped arrays
        return np.array(values, dtype=np.float64).reshape(-1)
    except (ValueError, TypeError):
        pass
    parts = []
    for v in values:
        if isinstance(v, tf.Tensor):
            v = v.numpy()
        try:
            parts.append(np.asarray(v, dtype=np.float64).reshape(-1))
        except (ValueError, TypeError) as e:
            raise TypeError(
                f'Metric `{name}` received a value that is not numeric: {v!r}') from e
    return np.concatenate(parts)


def _reduce(name: str, values: list[Any]) -> StatisticsCollector:
    """A collector holding the pending `values` (each element one unit-weight sample)."""
    stats = StatisticsCollector()
    try:
        # numbers, numpy scalars and scalar eager tensors (one host copy each,
        # taken here rather than on every step)
        flat = np.fromiter(values, dtype=np.float64, count=len(values))
    except (TypeError, ValueError):
        flat = _to_float64(name, [v.numpy() if isinstance(v, tf.Tensor) else v for v in values])
    stats._collect_unit_scalars(flat)
    return stats


def _move_pending(name: str, values: list[Any],
                  targets: tuple[dict[str, StatisticsCollector], ...]) -> None:
    """Reduce the pending `values` of metric `name` into each of `targets`, then empty them."""
    chunk = _reduce(name, values)
    values.clear()
    for stats in targets:
        c = stats.get(name)
        if c is None:
            c = stats[name] = StatisticsCollector()
        c.merge(chunk)


def format_metric_stats(stats: Mapping[str, StatisticsCollector],
                        formatter: MetricFormatter) -> str:
    """``'name: mean (±stddev); ...'`` for the collectors that have values."""
    pieces = []
    for name in formatter.sort_metrics(stats):
        c = stats[name]
        if not c.has_value:
            continue
        text = f'{name.replace("_", " ")}: {formatter.format_metric(name, c.mean)}'
        if c.counter > 1:
            text += f' (±{formatter.format_metric(name, c.stddev)})'
        pieces.append(text)
    return '; '.join(pieces)


class MetricFormatter:
    """Decides the order of metrics in a log line and how values read."""

    def sort_metrics(self, names: Iterable[str]) -> list[str]:
        """Return `names` in the order they should be printed."""
        raise NotImplementedError()

    def format_metric(self, name: str, value: Any) -> str:
        """Format one value (a mean or a standard deviation) of metric `name`."""
        raise NotImplementedError()


class DefaultMetricFormatter(MetricFormatter):
    """Time metrics (names ending in ``time``/``timer``) first, then the rest.

    Each group is sorted by name.  Time values read as durations
    (``0.0123s``, ``1m 5s``); other values use ``'{:.6g}'``.

    Example:
        >>> f = DefaultMetricFormatter()
        >>> f.sort_metrics(['loss', 'step_time', 'acc', 'epoch_time'])
        ['epoch_time', 'step_time', 'acc', 'loss']
        >>> f.format_metric('step_time', 65.), f.format_metric('loss', 0.1234567)
        ('1m 5s', '0.123457')
    """

    def sort_metrics(self, names: Iterable[str]) -> list[str]:
        return sorted(names, key=lambda n: (not is_time_metric(n), n))

    def format_metric(self, name: str, value: Any) -> str:
        if isinstance(value, np.ndarray) and value.ndim:
            value = np.mean(value)
        value = float(value)
        if is_time_metric(name):
            return humanize_duration(value, short_units=True)
        return f'{value:.6g}'


class MetricLogger:
    """Collects metric values and formats their statistics as one log line.

    Each value counts as one sample; each element of an array counts as one
    equally weighted sample.  Values are reduced lazily, so collecting is a
    cheap append and eager tensors are copied to the host only when the
    statistics are read (:attr:`metrics`, :meth:`format_logs`).

    Args:
        formatter: Orders and formats the metrics; a
            :class:`DefaultMetricFormatter` by default.

    Example:
        >>> logger = MetricLogger()
        >>> logger.collect_metrics({'loss': 0.8, 'step_time': 0.5})
        >>> logger.collect_metrics({'loss': 0.6})
        >>> logger.format_logs()
        'step time: 0.5s; loss: 0.7 (±0.1)'
    """

    def __init__(self, formatter: MetricFormatter | None = None):
        self._formatter = formatter if formatter is not None else DefaultMetricFormatter()
        self._pending: dict[str, list[Any]] = {}
        self._stats: dict[str, StatisticsCollector] = {}

    @property
    def formatter(self) -> MetricFormatter:
        """The metric formatter."""
        return self._formatter

    def collect_metrics(self, metrics: Mapping[str, Any]) -> None:
        """Add the values of `metrics` (``{name: value}``).

        Raises:
            TypeError: `metrics` is not a mapping, or a value is not numeric.
        """
        if not isinstance(metrics, Mapping):
            raise TypeError(f'`metrics` should be a dict, got {metrics!r}')
        checked = {name: check_metric_value(name, v) for name, v in metrics.items()}
        for name, v in checked.items():
            pending = self._pending.get(name)
            if pending is None:
                self._pending[name] = [v]
            else:
                pending.append(v)
                if len(pending) >= _PENDING_LIMIT:
                    _move_pending(name, pending, (self._stats,))

    @property
    def metrics(self) -> dict[str, StatisticsCollector]:
        """``{name: StatisticsCollector}`` of every metric collected since the last clear."""
        for name, pending in self._pending.items():
            if pending:
                _move_pending(name, pending, (self._stats,))
        return dict(self._stats)

    def clear(self) -> None:
        """Forget all metrics (their names too)."""
        self._pending.clear()
        self._stats.clear()

    def format_logs(self) -> str:
        """Return ``'name: mean (±stddev); ...'`` over the collected metrics.

        Underscores in names read as spaces; the ``(±...)`` part appears only
        for metrics with more than one sample.  Nothing collected gives ``''``.
        """
        return format_metric_stats(self.metrics, self._formatter)


class LoopMetrics:
    """The step and epoch statistics of a training loop, kept in one place.

    Values collected inside a step loop count for both the step statistics
    (printed and cleared by a step-level ``print_logs``) and the epoch
    statistics; values collected outside count for the epoch only.  Each
    value is appended once to a list and reduced once (on printing, or in
    chunks of 1024), the chunk's moments then merged into both collectors,
    so the per-step cost is one list append and an eager tensor is copied
    to the host once.
    """

    def __init__(self) -> None:
        self.step_pending: dict[str, list[Any]] = {}    # inside steps, not reduced yet
        self.epoch_pending: dict[str, list[Any]] = {}   # outside steps, not reduced yet
        self._step_stats: dict[str, StatisticsCollector] = {}
        self._epoch_stats: dict[str, StatisticsCollector] = {}

    def _reduce_step_values(self) -> None:
        for name, values in self.step_pending.items():
            if values:
                _move_pending(name, values, (self._step_stats, self._epoch_stats))

    def compact(self) -> None:
        """Reduce long lists of pending values, bounding memory."""
        for name, values in self.step_pending.items():
            if len(values) >= _PENDING_LIMIT:
                _move_pending(name, values, (self._step_stats, self._epoch_stats))
        for name, values in self.epoch_pending.items():
            if len(values) >= _PENDING_LIMIT:
                _move_pending(name, values, (self._epoch_stats,))

    def step_stats(self) -> dict[str, StatisticsCollector]:
        """The statistics since the last step-level clear."""
        self._reduce_step_values()
        return dict(self._step_stats)

    def epoch_stats(self) -> dict[str, StatisticsCollector]:
        """The statistics since the last epoch-level clear."""
        self._reduce_step_values()
        for name, values in self.epoch_pending.items():
            if values:
                _move_pending(name, values, (self._epoch_stats,))
        return dict(self._epoch_stats)

    def clear_step(self) -> None:
        """Forget the step statistics (values stay in the epoch statistics)."""
        self._reduce_step_values()
        self._step_stats.clear()

    def clear_epoch(self) -> None:
        """Forget the epoch statistics (values stay in the step statistics)."""
        self._reduce_step_values()
        for values in self.epoch_pending.values():
            values.clear()
        self._epoch_stats.clear()

    def clear(self) -> None:
        """Forget everything (the pending lists are emptied in place)."""
        for values in self.step_pending.values():
            values.clear()
        for values in self.epoch_pending.values():
            values.clear()
        self._step_stats.clear()
        self._epoch_stats.clear()
