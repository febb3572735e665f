"""The kinds of metric values a backend keeps: pending, per-replica and remote values.

A value collected under a ``tf.distribute`` strategy is kept as it was
produced (no device sync, no remote fetch) and reduced to host numbers only
when the logs are printed: :func:`to_host_values` reduces many at once.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from ..utils.validation import short_repr

__all__ = ['PendingValue', 'ReplicaValue', 'RemoteMetricValue', 'to_host_values',
           'is_distributed_value', 'per_replica_error', 'check_replica_parts', 'value_kind']


# --------------------------------------------------------------- kept values
class PendingValue:
    """A metric value kept as it was produced, copied to the host only when reduced.

    :meth:`~tfsnippet.backend.Backend.to_host_values` reduces many of them in one go;
    ``np.asarray(value)`` reduces one (a device sync or a remote fetch each
    time: for the few values that are read at once).
    """

    __slots__ = ()

    def host_value(self) -> np.ndarray:
        """The reduced value, as a float64 array (waits for the device or the worker)."""
        raise NotImplementedError()

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        value = self.host_value()
        return value if dtype is None else value.astype(dtype)


class ReplicaValue(PendingValue):
    """One metric value per local replica (a ``PerReplica`` result of ``strategy.run``).

    Args:
        parts: The replicas' eager tensors (or arrays), all of one shape.
        mean: Average the parts (else sum them).
        factor: Multiplies the reduced value (see
            :meth:`DistributedBackend.normalize_metric`).
    """

    __slots__ = ('parts', 'mean', 'factor')

    def __init__(self, parts: tuple[Any, ...], mean: bool, factor: float = 1.):
        self.parts = parts
        self.mean = mean
        self.factor = factor

    def host_value(self) -> np.ndarray:
        arrays = [np.asarray(p.numpy() if isinstance(p, tf.Tensor) else p, dtype=np.float64)
                  for p in self.parts]
        total = np.sum(arrays, axis=0)
        return np.asarray(total * (self.factor / len(arrays) if self.mean else self.factor))

    def __repr__(self) -> str:
        mode = 'mean' if self.mean else 'sum'
        return (f'ReplicaValue({mode} of {len(self.parts)} replicas, '
                f'parts={[short_repr(p) for p in self.parts]})')


class RemoteMetricValue(PendingValue):
    """A metric value that a worker of a parameter-server job is computing.

    Args:
        remote: The ``RemoteValue`` returned by ``coordinator.schedule``.
        coordinator: The ``ClusterCoordinator`` that scheduled it.
        mean: Average over the replicas of the worker, if it returns one
            value per replica (else sum them).
    """

    __slots__ = ('remote', 'coordinator', 'mean')

    def __init__(self, remote: Any, coordinator: Any, mean: bool):
        self.remote = remote
        self.coordinator = coordinator
        self.mean = mean

    def host_value(self) -> np.ndarray:
        return _reduce_fetched(self.coordinator.fetch(self.remote), self.mean)

    def __repr__(self) -> str:
        return f'RemoteMetricValue({"mean" if self.mean else "sum"}, {self.remote!r})'


def _reduce_fetched(result: Any, mean: bool) -> np.ndarray:
    if isinstance(result, tf.distribute.DistributedValues):
        arrays = [np.asarray(v, dtype=np.float64) for v in result.values]
        total = np.sum(arrays, axis=0)
        return np.asarray(total / len(arrays) if mean else total)
    return np.asarray(result, dtype=np.float64)


@functools.lru_cache(maxsize=None)
def in_host_memory(device: str) -> bool:
    """Whether a tensor placed on `device` (a full device name) lives in host memory."""
    return tf.DeviceSpec.from_string(device).device_type == 'CPU'


def _read_in_host_memory(values: Sequence[Any]) -> np.ndarray | None:
    """:func:`to_host_values` of replica values whose parts are read as they are:
    all :class:`ReplicaValue`\\ s with the same number of parts of one shape,
    the first value's parts in host memory (a CPU strategy).  ``None`` when
    they are not, for the general path to group them by device.

    A later value with a part elsewhere is still read right (its part is
    copied to the host), only not stacked on its device first.
    """
    first = values[0] if values else None
    if type(first) is not ReplicaValue or not first.parts or not all(
            isinstance(p, tf.Tensor) and in_host_memory(p.device) for p in first.parts):
        return None
    try:
        host = np.array([[p.numpy() for p in v.parts] for v in values], dtype=np.float64)
    except (AttributeError, TypeError, ValueError):   # other kinds, shapes or dtypes
        return None
    if host.ndim < 2 or any(type(v) is not ReplicaValue for v in values):
        return None
    count = host.shape[1]
    scale = np.array([v.factor / count if v.mean else v.factor for v in values])
    sums = host.sum(axis=1)
    return (sums * scale.reshape((-1,) + (1,) * (sums.ndim - 1))).reshape(-1)


def to_host_values(values: Sequence[Any]) -> np.ndarray:
    """Reduce kept values to host numbers in one go: one flat float64 array.

    Every element of every reduced value is one entry, in order (a
    scalar metric gives one entry per value).  :class:`ReplicaValue`\\ s
    of one shape and devices are stacked on each accelerator and copied
    to the host once per device (on a CPU, where they already are in host
    memory, each is read as it is: no op to run),
    :class:`RemoteMetricValue`\\ s are fetched with one
    ``coordinator.fetch``, numbers and arrays are taken as they are and
    eager tensors are copied one by one.

    Raises:
        TypeError: An entry is not numeric.
    """
    flat = _read_in_host_memory(values)
    if flat is not None:
        return flat
    results: list[np.ndarray | None] = [None] * len(values)
    groups: dict[tuple[Any, ...], list[int]] = {}
    remote: list[int] = []
    for i, v in enumerate(values):
        if type(v) is ReplicaValue:
            parts = v.parts
            if all(isinstance(p, tf.Tensor) for p in parts):
                key = tuple((p.device, p.dtype, _shape_key(p)) for p in parts)
                groups.setdefault(key, []).append(i)
            else:
                results[i] = v.host_value()
        elif type(v) is RemoteMetricValue:
            remote.append(i)
        elif isinstance(v, tf.Tensor):
            results[i] = np.asarray(v.numpy(), dtype=np.float64)
        else:
            try:
                results[i] = np.asarray(v, dtype=np.float64)
            except (TypeError, ValueError) as e:
                raise TypeError(f'`values[{i}]` is not numeric: {short_repr(v)}') from e
    for key, indices in groups.items():
        replicas = []
        for r, (device, _, _) in enumerate(key):
            tensors = [values[i].parts[r] for i in indices]
            if in_host_memory(device):   # read as they are: cheaper than running an op
                replicas.append(np.array([t.numpy() for t in tensors], dtype=np.float64))
                continue
            with tf.device(device):   # the op itself: tf.stack's conversion costs more
                stacked = tf.raw_ops.Pack(values=tensors, axis=0)
            replicas.append(np.asarray(stacked.numpy(), dtype=np.float64))
        sums = np.sum(replicas, axis=0)
        scale = np.array([values[i].factor / len(key) if values[i].mean else values[i].factor
                          for i in indices])
        scaled = sums * scale.reshape((-1,) + (1,) * (sums.ndim - 1))
        if len(indices) == len(values):   # the usual case: one metric, one group
            return scaled.reshape(-1)
        for j, i in enumerate(indices):
            results[i] = scaled[j]
    if remote:
        by_coordinator: dict[int, list[int]] = {}
        for i in remote:
            by_coordinator.setdefault(id(values[i].coordinator), []).append(i)
        for indices in by_coordinator.values():
            fetched = values[indices[0]].coordinator.fetch([values[i].remote for i in indices])
            for i, result in zip(indices, fetched):
                results[i] = _reduce_fetched(result, values[i].mean)
    if not results:
        return np.zeros([0], dtype=np.float64)
    return np.concatenate([np.ravel(r) for r in results if r is not None])


# type -> its kind: 'variable' (a distributed variable), 'replica' (another
# DistributedValues), 'remote' (a RemoteValue) or '' (none of them); filled as
# types are met: one lookup per metric value instead of isinstance checks
# against abstract classes, every step
_KINDS: dict[type, str] = {}


def value_kind(value: Any) -> str:
    """What kind of distributed value `value` is: ``'variable'``, ``'replica'``,
    ``'remote'`` or ``''`` (none)."""
    cls = type(value)
    kind = _KINDS.get(cls)
    if kind is None:
        if isinstance(value, tf.distribute.DistributedValues):
            kind = 'variable' if isinstance(value, tf.Variable) else 'replica'
        elif isinstance(value, tf.distribute.experimental.coordinator.RemoteValue):
            kind = 'remote'
        else:
            kind = ''
        _KINDS[cls] = kind
    return kind


def _shape_key(tensor: Any) -> Any:
    """The shape of `tensor`, as a tuple when an eager tensor gives one without
    building a ``TensorShape``."""
    shape_of = getattr(tensor, '_shape_tuple', None)
    return tensor.shape if shape_of is None else shape_of()


def is_distributed_value(value: Any) -> bool:
    """Whether `value` is a ``DistributedValues`` (e.g. ``PerReplica``) or a ``RemoteValue``."""
    return bool(value_kind(value))


def per_replica_error(name: str, value: Any, in_loop: bool = False) -> TypeError:
    """The error for a per-replica (or remote) value found where one number is expected.

    `in_loop`: `value` was collected as a metric by a loop that knows no
    strategy (the advice is then to give it one).  Returns the error, to be
    raised by the caller (``raise per_replica_error(...)``).
    """
    remote = isinstance(value, tf.distribute.experimental.coordinator.RemoteValue)
    if remote:
        what = 'a RemoteValue (the result of `coordinator.schedule`)'
        fix = 'fetch it yourself with `coordinator.fetch(value)`'
        loop_fix = ('pass `strategy=` and `coordinator=` to the TrainLoop, which fetches it '
                    'when the logs are printed')
    else:
        parts = tuple(getattr(value, 'values', ()))
        shown = short_repr(parts[0]) if parts else short_repr(value)
        what = f'a per-replica value ({type(value).__name__} of {len(parts)} replicas, ' \
               f'each like {shown})'
        fix = ('reduce it yourself with `strategy.reduce(tf.distribute.ReduceOp.MEAN, value, '
               'axis=None)`')
        loop_fix = ('pass `strategy=` to the TrainLoop (or enter `strategy.scope()` before the '
                    'loop), which reduces it across replicas when the logs are printed')
    if in_loop:
        return TypeError(f'Metric `{name}` is {what}, but the loop has no tf.distribute '
                         f'strategy: {loop_fix}, or {fix}')
    return TypeError(f'`{name}` is {what}, where a number is expected: collect it with '
                     f'`loop.collect_metrics()`, which '
                     f'{"fetches it" if remote else "reduces it across replicas"} when the '
                     f'logs are printed, or {fix}')


# id(dtype) -> (dtype, whether a metric may have it); filled as dtypes are met.
# Keyed by identity (TensorFlow's DTypes are interned; the entry's dtype is
# compared with `is`): hashing a DType, and its properties, cost more than this
# check may spend every step
_NUMERIC_DTYPES: dict[int, tuple[Any, bool]] = {}


def _is_numeric_dtype(dtype: Any) -> bool:
    entry = _NUMERIC_DTYPES.get(id(dtype))
    if entry is None or entry[0] is not dtype:
        entry = _NUMERIC_DTYPES[id(dtype)] = (
            dtype, bool(dtype.is_floating or dtype.is_integer or dtype.is_bool))
    return entry[1]


def check_replica_parts(name: str, parts: tuple[Any, ...]) -> None:
    """Check that the replicas' values of metric `name` are numeric, eager and of one shape."""
    if _eager_parts_alike(parts):
        return
    shape = None
    for part in parts:
        if isinstance(part, tf.Tensor):
            if not hasattr(part, 'numpy'):
                if not tf.executing_eagerly() and not tf.inside_function():   # TF1 graph
                    raise TypeError(
                        f'Metric `{name}` is a per-replica value of graph tensors '
                        f'{short_repr(part)}: in graph mode collect numbers, the result of '
                        f'`session.run(strategy.reduce(tf.distribute.ReduceOp.MEAN, value, '
                        f'axis=None))`')
                raise TypeError(
                    f'Metric `{name}` is a per-replica value of symbolic tensors '
                    f'{short_repr(part)}: return it from the `tf.function` and collect the '
                    f'result outside')
            dtype = part.dtype
            if not _is_numeric_dtype(dtype):
                raise TypeError(f'Metric `{name}` must be numeric, got a per-replica value '
                                f'of {dtype.name}: {short_repr(part)}')
            part_shape = part.shape   # a TensorShape: compared with == below
        else:
            if isinstance(part, (str, bytes)) or np.asarray(part).dtype.kind not in 'biuf':
                raise TypeError(f'Metric `{name}` must be numeric, got {short_repr(part)}')
            part_shape = np.shape(part)
        if shape is None:
            shape = part_shape
        elif part_shape != shape:
            raise ValueError(
                f'Metric `{name}` has values of different shapes on the replicas: '
                f'{[short_repr(p) for p in parts]}; return values of one shape from every '
                f'replica')


def _eager_parts_alike(parts: tuple[Any, ...]) -> bool:
    """Whether `parts` are eager tensors of one numeric dtype and one shape: the
    usual case, checked at a fraction of a microsecond a part (``False`` leaves
    the check, and the error, to :func:`check_replica_parts`).

    An eager tensor's ``_shape_tuple()`` reads its shape without building a
    ``TensorShape`` (a microsecond for each new tensor, every step).
    """
    dtype = shape = None
    for part in parts:
        if not isinstance(part, tf.Tensor) or not hasattr(part, 'numpy'):
            return False
        shape_of = getattr(part, '_shape_tuple', None)
        if shape_of is None:
            return False
        if dtype is None:
            dtype, shape = part.dtype, shape_of()
            if not _is_numeric_dtype(dtype):
                return False
        elif part.dtype is not dtype or shape_of() != shape:
            return False
    return True
