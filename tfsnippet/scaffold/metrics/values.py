"""Metric values: what may be collected, checked once, and reduced to statistics."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from ...backend.values import (PendingValue, is_distributed_value, per_replica_error,
                                    to_host_values)
from ...utils.misc import humanize_duration
from ...utils.statistics import StatisticsCollector
from ...tfops.tf_vars import as_tf_variable, is_variable
from ...utils.validation import short_repr

__all__ = ['TIME_METRIC_PATTERN', 'is_time_metric', 'check_metric_value', 'to_float']

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
PENDING_LIMIT = 1024


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
            raise _symbolic(name, value, 'tensor')
        if not (value.dtype.is_floating or value.dtype.is_integer or value.dtype.is_bool):
            raise _not_numeric(name, value)
        return value
    if is_variable(value):
        if not tf.executing_eagerly():
            raise _symbolic(name, value, 'variable')
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
    if is_distributed_value(value):
        raise per_replica_error(name, value, in_loop=True)
    raise _not_numeric(name, value)


def _symbolic(name: str, value: Any, what: str) -> TypeError:
    if tf.inside_function() and tf.compat.v1.executing_eagerly_outside_functions():
        return TypeError(
            f'Metric `{name}` is a symbolic {what} {value!r} inside a `tf.function`: return it '
            f'from the function and collect the result outside')
    if what == 'tensor':
        what = 'symbolic graph tensor'
    else:
        what = 'graph variable'
    return TypeError(f'Metric `{name}` is a {what} {value!r}: evaluate it with '
                     f'`session.run` and pass the result instead')


def to_float(name: str, value: Any) -> float:
    """The mean of one value returned by :func:`check_metric_value`, as a float.

    This copies an eager tensor to the host (a device sync): it is for the
    few values that are read at once (a validation metric, a guarded loss).
    """
    if type(value) is float:
        return value
    if isinstance(value, tf.Tensor):
        value = value.numpy()
    elif isinstance(value, PendingValue):   # a kept per-replica or remote value (backend)
        value = value.host_value()
    try:
        return float(np.mean(value))
    except (TypeError, ValueError) as e:
        raise _not_numeric(name, value) from e


def _not_numeric(name: str, value: Any) -> TypeError:
    return TypeError(
        f'Metric `{name}` must be a number, a numeric numpy array or an eager tensor, '
        f'got {short_repr(value)}')


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
    if values and isinstance(values[0], PendingValue):
        # per-replica or remote values: to the host in one go per device or coordinator
        flat = to_host_values(values)
    else:
        try:
            # numbers, numpy scalars and scalar eager tensors (one host copy each,
            # taken here rather than on every step)
            flat = np.fromiter(values, dtype=np.float64, count=len(values))
        except (TypeError, ValueError):
            if any(isinstance(v, PendingValue) for v in values):   # a kept value further on
                flat = to_host_values(values)
            else:
                flat = _to_float64(name, [v.numpy() if isinstance(v, tf.Tensor) else v
                                          for v in values])
    stats._collect_unit_scalars(flat)
    return stats


def move_pending(name: str, values: list[Any],
                 targets: tuple[dict[str, StatisticsCollector], ...]) -> None:
    """Reduce the pending `values` of metric `name` into each of `targets`, then empty them."""
    chunk = _reduce(name, values)
    values.clear()
    for stats in targets:
        c = stats.get(name)
        if c is None:
            c = stats[name] = StatisticsCollector()
        c.merge(chunk)
