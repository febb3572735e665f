"""Metric collection and formatting for the console logs of the training loop."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from ..utils.misc import humanize_duration
from ..utils.statistics import StatisticsCollector
from ..utils.tf_vars import as_tf_variable, is_variable

__all__ = ['MetricFormatter', 'DefaultMetricFormatter', 'MetricLogger', 'TIME_METRIC_PATTERN',
           'check_metric_value']

#: Names matching this pattern are time metrics: formatted as durations,
#: listed first, and reported through ``TIME_METRIC_STATS_PRINTED``.
TIME_METRIC_PATTERN = re.compile(r'.*timer?$')

_NUMERIC_KINDS = frozenset('biuf')
# Values collected per metric are kept as they arrive and reduced in one go
# (when logs are printed, or after this many values), so that collecting a
# metric costs a list append and an eager tensor is not copied to the host
# on every step.
_PENDING_LIMIT = 1024


def check_metric_value(name: str, value: Any) -> Any:
    """Check that `value` is numeric and return it in the form to store.

    Python numbers and numpy scalars become Python floats/ints, numpy arrays
    (and lists) become float64 arrays, eager tensors are kept as they are
    (reduced later, when the logs are printed), and eager variables are
    read.

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
        return value.item()
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


def _reduce_into(collector: StatisticsCollector, values: list[Any]) -> None:
    """Add the pending `values` (numbers, arrays, eager tensors) to `collector`."""
    try:
        # one conversion for numbers, same-shaped arrays and eager tensors alike
        arr = np.asarray(values, dtype=np.float64)
    except (ValueError, TypeError):
        arr = np.concatenate([np.asarray(v, dtype=np.float64).reshape(-1) for v in values])
    collector.collect(arr.reshape(-1))


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
        names = list(names)
        timers = sorted(n for n in names if TIME_METRIC_PATTERN.match(n))
        others = sorted(n for n in names if not TIME_METRIC_PATTERN.match(n))
        return timers + others

    def format_metric(self, name: str, value: Any) -> str:
        value = float(np.mean(value))
        if TIME_METRIC_PATTERN.match(name):
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
            self._add(name, v)

    def _add(self, name: str, value: Any) -> None:
        # `value` has passed `check_metric_value`
        pending = self._pending.get(name)
        if pending is None:
            self._pending[name] = [value]
        else:
            pending.append(value)
            if len(pending) >= _PENDING_LIMIT:
                self._flush_one(name, pending)

    def compact(self) -> None:
        """Reduce long lists of raw values into the statistics, bounding memory."""
        for name, pending in self._pending.items():
            if len(pending) >= _PENDING_LIMIT:
                self._flush_one(name, pending)

    def _flush_one(self, name: str, pending: list[Any]) -> None:
        stats = self._stats.get(name)
        if stats is None:
            stats = self._stats[name] = StatisticsCollector()
        _reduce_into(stats, pending)
        pending.clear()

    @property
    def metrics(self) -> dict[str, StatisticsCollector]:
        """``{name: StatisticsCollector}`` of every metric collected since the last clear."""
        for name, pending in self._pending.items():
            if pending:
                self._flush_one(name, pending)
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
        stats = self.metrics
        fmt = self._formatter
        pieces = []
        for name in fmt.sort_metrics(stats):
            c = stats[name]
            if not c.has_value:
                continue
            text = f'{name.replace("_", " ")}: {fmt.format_metric(name, c.mean)}'
            if c.counter > 1:
                text += f' (±{fmt.format_metric(name, c.stddev)})'
            pieces.append(text)
        return '; '.join(pieces)
