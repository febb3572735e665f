"""The tf.distribute backend: roles, metric values kept per replica, cross-worker agreement."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from ..utils.statistics import StatisticsCollector
from ..tfops.tf_vars import as_tf_variable, is_variable, normalize_variables, variable_name
from ..utils.validation import short_repr
from .reduction import CrossWorkerReducer

__all__ = ['DistributedBackend', 'backend_for', 'PendingValue', 'ReplicaValue',
           'RemoteMetricValue', 'is_distributed_value', 'per_replica_error', 'to_host_values',
           'replica_slice']

_REDUCE_MODES = ('mean', 'sum')
_SHOWN_NAMES = 5   # variables named in an error message, at most


# --------------------------------------------------------------- kept values
class PendingValue:
    """A metric value kept as it was produced, copied to the host only when reduced.

    :meth:`DistributedBackend.to_host_values` reduces many of them in one go;
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


def to_host_values(values: Sequence[Any]) -> np.ndarray:
    """Reduce kept values to host numbers in one go: one flat float64 array.

    Every element of every reduced value is one entry, in order (a
    scalar metric gives one entry per value).  :class:`ReplicaValue`\\ s
    of one shape and devices are stacked on each device and copied to
    the host once per device, :class:`RemoteMetricValue`\\ s are fetched
    with one ``coordinator.fetch``, numbers and arrays are taken as they
    are and eager tensors are copied one by one.

    Raises:
        TypeError: An entry is not numeric.
    """
    results: list[np.ndarray | None] = [None] * len(values)
    groups: dict[tuple[Any, ...], list[int]] = {}
    remote: list[int] = []
    for i, v in enumerate(values):
        if type(v) is ReplicaValue:
            parts = v.parts
            if all(isinstance(p, tf.Tensor) for p in parts):
                key = tuple((p.device, p.dtype, tuple(p.shape)) for p in parts)
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
            with tf.device(device):
                stacked = tf.stack([values[i].parts[r] for i in indices])
            replicas.append(np.asarray(stacked.numpy(), dtype=np.float64))
        sums = np.sum(replicas, axis=0)
        for j, i in enumerate(indices):
            v = values[i]
            results[i] = sums[j] * (v.factor / len(key) if v.mean else v.factor)
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


def is_distributed_value(value: Any) -> bool:
    """Whether `value` is a ``DistributedValues`` (e.g. ``PerReplica``) or a ``RemoteValue``."""
    return isinstance(value, (tf.distribute.DistributedValues,
                              tf.distribute.experimental.coordinator.RemoteValue))


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


def _check_parts(name: str, parts: tuple[Any, ...]) -> None:
    """Check that the replicas' values of metric `name` are numeric, eager and of one shape."""
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
            if not (dtype.is_floating or dtype.is_integer or dtype.is_bool):
                raise TypeError(f'Metric `{name}` must be numeric, got a per-replica value '
                                f'of {dtype.name}: {short_repr(part)}')
            part_shape = tuple(part.shape)
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


def replica_slice(*tensors: Any) -> Any:
    """This replica's share of global-batch tensors, inside ``strategy.run``.

    In graph mode (TF1 style) the global batch is fed to placeholders and
    ``strategy.run(fn, args=(x, y))`` hands the whole of it to every
    replica; ``x, y = replica_slice(x, y)`` in `fn` gives replica ``i`` of
    ``n`` the rows ``[i * b // n, (i + 1) * b // n)`` of a batch of ``b``
    rows (consecutive slices, as even as `b` allows), so the replicas
    together see each row once.  Scale a summed loss by the global batch
    size (``tf.shape(x)[0]`` before slicing), and the summed gradients are
    those of the whole batch.  Works in an eager ``tf.function`` too, for a
    tensor every replica got whole.

    Args:
        tensors: Tensors of one length along their first axis.

    Returns:
        The share of the one tensor, or a tuple of shares of several.

    Raises:
        RuntimeError: Not called in a replica context (inside ``strategy.run``).
        TypeError: No tensor given.

    Example:
        >>> import tensorflow as tf
        >>> from tfsnippet.backend import replica_slice
        >>> strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
        >>> strategy.run(lambda x: tf.reduce_sum(replica_slice(x)),
        ...              args=(tf.constant([1., 2., 3.]),)).numpy()
        np.float32(6.0)
    """
    if not tensors:
        raise TypeError('`replica_slice()` needs at least one tensor, got none')
    ctx = tf.distribute.get_replica_context()
    if ctx is None:
        raise RuntimeError(
            '`replica_slice()` must be called inside the replica function of '
            '`strategy.run(fn, args=...)`, where each replica takes its share; it was called '
            'in a cross-replica context (`strategy.scope()` outside `strategy.run`)')
    count = ctx.num_replicas_in_sync
    index = ctx.replica_id_in_sync_group
    out = []
    for t in tensors:
        t = tf.convert_to_tensor(t)
        if count == 1:
            out.append(t)
            continue
        rows = tf.shape(t, out_type=tf.int64)[0]
        index64 = tf.cast(index, tf.int64)
        start = index64 * rows // count
        end = (index64 + 1) * rows // count
        out.append(t[start:end])
    return out[0] if len(out) == 1 else tuple(out)


# -------------------------------------------------------------- the backend
def _is_default_strategy(strategy: Any) -> bool:
    """Whether `strategy` is TensorFlow's default (no-op) strategy.

    Raises:
        ValueError: The scope of another strategy is entered.
    """
    if tf.distribute.has_strategy():
        current = tf.distribute.get_strategy()
        if strategy is current:
            return False
        raise ValueError(f'`strategy` ({type(strategy).__name__}) is not the strategy whose '
                         f'scope is entered ({type(current).__name__}): use that one, or '
                         f'leave its scope first')
    with strategy.scope():   # the default strategy's scope makes no strategy current
        return not tf.distribute.has_strategy()


def _cluster_position(strategy: Any) -> tuple[int, int]:
    """``(num_workers, worker_index)`` of this process among the chief and workers."""
    resolver = getattr(strategy, 'cluster_resolver', None)
    if resolver is None:
        return 1, 0
    cluster = resolver.cluster_spec().as_dict()
    chiefs, workers = cluster.get('chief', []), cluster.get('worker', [])
    num_workers = len(chiefs) + len(workers)
    task_type, task_id = resolver.task_type, resolver.task_id
    if num_workers <= 1 or task_type is None:
        return 1, 0
    if task_type == 'chief':
        return num_workers, 0
    if task_type == 'worker':
        return num_workers, len(chiefs) + int(task_id)
    raise ValueError(f'`strategy` runs in a task of type {task_type!r}: a training loop '
                     f'runs only in a chief or worker task')


class DistributedBackend:
    """What a training loop needs from a ``tf.distribute`` strategy, decided once.

    It answers who this process is (:attr:`is_chief`, :attr:`worker_index`),
    keeps metric values produced per replica without waiting for the
    devices (:meth:`normalize_metric`, then :meth:`to_host_values` for many
    at once), merges the statistics of all workers when logs are printed
    (:meth:`reduce_statistics`), and lets the workers agree on decisions
    (:meth:`agree_any`, :meth:`broadcast_from_chief`, :meth:`barrier`).
    It also checks that the model's variables and the optimizer belong to
    the strategy (:meth:`check_variables_in_scope`, :meth:`build_optimizer`).

    "Workers" are the processes that run the training loop in lockstep:
    all the chief and worker tasks under ``MultiWorkerMirroredStrategy``;
    just this process under ``MirroredStrategy``, ``OneDeviceStrategy``, and
    under ``ParameterServerStrategy``, whose loop runs in the coordinator
    (the workers there only run what it schedules).

    Args:
        strategy: A ``tf.distribute.Strategy``.
        coordinator: The ``ClusterCoordinator`` of a ``ParameterServerStrategy``
            (required with one, refused with any other strategy).

    Raises:
        TypeError: `strategy` is not a ``tf.distribute.Strategy``, or
            `coordinator` not a ``ClusterCoordinator``.
        ValueError: A ``ParameterServerStrategy`` without `coordinator`, a
            `coordinator` of another strategy, a strategy of an
            ``'evaluator'`` or ``'ps'`` task, or the scope of another
            strategy is entered.

    Example:
        >>> import tensorflow as tf
        >>> from tfsnippet.backend import DistributedBackend
        >>> backend = DistributedBackend(tf.distribute.OneDeviceStrategy('/cpu:0'))
        >>> backend.is_chief, backend.num_workers, backend.num_replicas
        (True, 1, 1)

    .. note::
        :meth:`reduce_statistics`, :meth:`reduce_statistics_and_sum`,
        :meth:`agree_any`, :meth:`broadcast_from_chief` and :meth:`barrier`
        are collectives under multi-worker training: every worker must call
        them at the same step, in the same order, or the job hangs.
    """

    def __init__(self, strategy: Any, coordinator: Any = None):
        if not isinstance(strategy, tf.distribute.Strategy):
            raise TypeError(f'`strategy` must be a tf.distribute.Strategy, '
                            f'got {short_repr(strategy)}')
        is_ps = isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy)
        coordinator_type = tf.distribute.experimental.coordinator.ClusterCoordinator
        if coordinator is None and is_ps:
            raise ValueError(
                '`coordinator` is required with a ParameterServerStrategy, got None: pass '
                '`coordinator=tf.distribute.experimental.coordinator.ClusterCoordinator('
                'strategy)`, the one that schedules the training steps')
        if coordinator is not None:
            if not isinstance(coordinator, coordinator_type):
                raise TypeError(f'`coordinator` must be a tf.distribute.experimental.coordinator.'
                                f'ClusterCoordinator, got {short_repr(coordinator)}')
            if not is_ps:
                raise ValueError(f'`coordinator` is only for a ParameterServerStrategy; '
                                 f'`strategy` is a {type(strategy).__name__}')
            if coordinator.strategy is not strategy:
                raise ValueError('`coordinator` was made for another strategy than `strategy`')
        self._strategy = strategy
        self._coordinator = coordinator
        self._is_default = _is_default_strategy(strategy)
        if is_ps or self._is_default:
            num_workers, worker_index = 1, 0
        else:
            num_workers, worker_index = _cluster_position(strategy)
        self._devices: tuple[str, ...] = (
            () if self._is_default else tuple(strategy.extended.worker_devices))
        self._reducer = CrossWorkerReducer(self._all_reduce_sum, num_workers, worker_index)
        self._sum_factor = float(num_workers)

    # ------------------------------------------------------------ roles
    @property
    def strategy(self) -> Any:
        """The ``tf.distribute.Strategy``."""
        return self._strategy

    @property
    def coordinator(self) -> Any:
        """The ``ClusterCoordinator`` (``None`` except under a ``ParameterServerStrategy``)."""
        return self._coordinator

    @property
    def is_chief(self) -> bool:
        """Whether this process is the chief: the one that writes checkpoints, logs, summaries."""
        return self._reducer.worker_index == 0

    @property
    def num_workers(self) -> int:
        """Number of processes running the loop in lockstep (see the class documentation)."""
        return self._reducer.num_workers

    @property
    def worker_index(self) -> int:
        """This process's index among them, the chief's being 0."""
        return self._reducer.worker_index

    @property
    def num_replicas(self) -> int:
        """Number of replicas of all workers together (``strategy.num_replicas_in_sync``)."""
        return int(self._strategy.num_replicas_in_sync)

    @property
    def num_local_replicas(self) -> int:
        """Number of replicas of this process (its devices)."""
        return max(1, len(self._devices))

    @property
    def collectives(self) -> int:
        """Number of cross-worker all-reduces issued so far (0 on one worker)."""
        return self._reducer.collectives

    # ------------------------------------------------------------ metrics
    def normalize_metric(self, name: str, value: Any, reduce: str = 'mean') -> Any:
        """Turn a distributed metric value into one the metric book can keep.

        * A ``PerReplica`` (any ``DistributedValues`` that is not a variable)
          becomes a :class:`ReplicaValue` holding this process's replica
          tensors as they are: nothing waits for the devices here.  Its
          reduction (mean or sum across replicas, element-wise) happens in
          :meth:`to_host_values`.
        * A distributed variable is read (one logical value).
        * A ``RemoteValue`` of the coordinator becomes a
          :class:`RemoteMetricValue`, fetched only by :meth:`to_host_values`.
        * Anything else is returned as it is, except a sum under
          multi-worker training (below).

        Under multi-worker training a worker holds only its own replicas
        (with one replica, ``strategy.run`` returns a plain tensor), so with
        ``reduce='sum'`` every value is this worker's share of the sum and
        is kept as ``num_workers`` times that share: averaged over the
        workers, which is what :meth:`reduce_statistics` does, that is
        exactly the sum over all replicas.

        Args:
            name: The metric's name, for error messages.
            value: The value collected.
            reduce: ``'mean'`` or ``'sum'`` across replicas.

        Raises:
            ValueError: `reduce` is neither, or the replicas' values differ in shape.
            TypeError: The replicas' values are symbolic or not numeric, or a
                ``RemoteValue`` arrives without a coordinator.
        """
        if reduce != 'mean' and reduce != 'sum':
            raise ValueError(f'`reduce` must be one of {_REDUCE_MODES}, got {reduce!r}')
        if isinstance(value, tf.distribute.DistributedValues):
            if isinstance(value, tf.Variable):
                return value.read_value()
            parts = tuple(value.values)
            _check_parts(name, parts)
            mean = reduce == 'mean'
            return ReplicaValue(parts, mean, 1. if mean else self._sum_factor)
        if isinstance(value, tf.distribute.experimental.coordinator.RemoteValue):
            if self._coordinator is None:
                raise TypeError(
                    f'Metric `{name}` is a RemoteValue (the result of a function scheduled by '
                    f'a ClusterCoordinator), but this backend has no coordinator: make it '
                    f'with `coordinator=` the ClusterCoordinator that scheduled the step')
            return RemoteMetricValue(value, self._coordinator, reduce == 'mean')
        if reduce == 'sum' and self._sum_factor != 1.:
            if is_variable(value):
                value = as_tf_variable(value).read_value()
            _check_parts(name, (value,))
            return ReplicaValue((value,), False, self._sum_factor)
        return value

    def to_host_values(self, values: Sequence[Any]) -> np.ndarray:
        """Reduce kept values to host numbers in one go (see :func:`to_host_values`)."""
        return to_host_values(values)

    def all_reduce_sum(self, array: Any) -> np.ndarray:
        """The element-wise sum of `array` (float64) over the workers: one all-reduce.

        A collective under multi-worker training (see the class note); on one
        worker, `array` itself as float64.
        """
        local = np.asarray(array, dtype=np.float64)
        return local if self.num_workers == 1 else self._reducer.all_reduce_sum(local)

    per_replica_error = staticmethod(per_replica_error)

    # ------------------------------------------------------- cross-worker
    def _all_reduce_sum(self, array: np.ndarray) -> np.ndarray:
        """The element-wise sum of `array` over the workers: one all-reduce of the strategy."""
        local = self.num_local_replicas

        def value_fn(ctx: Any) -> Any:
            # one replica of each worker carries the array, the others zeros
            if ctx.replica_id_in_sync_group % local == 0:
                return tf.constant(array, dtype=tf.float64)
            return tf.zeros(array.shape, dtype=tf.float64)

        values = self._strategy.experimental_distribute_values_from_function(value_fn)
        total = self._strategy.reduce(tf.distribute.ReduceOp.SUM, values, axis=None)
        return np.asarray(total.numpy(), dtype=np.float64)

    def reduce_statistics(self, stats: Mapping[str, StatisticsCollector]
                          ) -> dict[str, StatisticsCollector]:
        """Merge every worker's statistics into those of all values (a collective).

        Counters, weights and moments of each metric are packed, in a metric
        order all workers agreed on, into one float64 array and summed with
        one all-reduce, so every worker gets the statistics one process
        would have collected from the values of all workers.  A metric
        missing on some workers is taken from the others; the first call
        spends two more all-reduces agreeing on the names, and a later one
        that meets a new metric name three more.  With one worker, `stats` is returned as it is.

        .. note::
            The count is that of all workers' values, and the spread is
            that of the per-worker values: with per-replica metrics reduced
            by :meth:`normalize_metric`, the mean equals that of one process
            running the same global batches; the standard deviation is
            larger than that of one process, whose values average over the
            whole global batch.

        Raises:
            ValueError: A metric has different shapes on different workers.
        """
        return self._reducer.reduce_statistics(stats)

    def reduce_statistics_and_sum(self, stats: Mapping[str, StatisticsCollector],
                                  extra: Any) -> tuple[dict[str, StatisticsCollector], np.ndarray]:
        """:meth:`reduce_statistics`, and the element-wise sum of the 1-d array
        `extra` over the workers, carried by the same all-reduce (a collective).

        The training loop folds a sync point into the all-reduce of an
        epoch's ``print_logs`` this way.  With one worker, `stats` and
        `extra` (as float64) are returned as they are.

        Raises:
            ValueError: As :meth:`reduce_statistics`, or `extra` is not 1-d.
        """
        return self._reducer.reduce_statistics_and_sum(stats, np.asarray(extra, np.float64))

    def agree_any(self, flag: bool) -> bool:
        """Whether any worker passes ``True`` (one all-reduce; use at step boundaries).

        Take a stop decision with it: every worker then stops at the same step.
        """
        return self._reducer.agree_any(flag)

    def broadcast_from_chief(self, value: float) -> float:
        """The chief's `value` on every worker (one all-reduce), e.g. its clock or a metric."""
        return self._reducer.broadcast_from_chief(value)

    def barrier(self) -> None:
        """Wait for the other workers (one all-reduce).

        Under a ``ParameterServerStrategy``, wait instead until every function
        scheduled so far has finished (``coordinator.join()``), so that the
        variables are settled, e.g. before a checkpoint.
        """
        if self._coordinator is not None:
            self._coordinator.join()
        else:
            self._reducer.barrier()

    # ------------------------------------------------------- variables
    def check_variables_in_scope(self, variables: Any, arg_name: str) -> None:
        """Check that `variables` were created in ``strategy.scope()``.

        A variable made outside the scope is not mirrored on the replicas
        (nor placed on the parameter servers): training would update one
        copy, or fail inside ``strategy.run``.

        Args:
            variables: A list or dict of ``tf.Variable`` or ``keras.Variable``.
            arg_name: The argument they came in, for the message.

        Raises:
            TypeError: `variables` is not a list or dict of variables.
            ValueError: Some were created outside the scope; the message names them.
        """
        found = normalize_variables(variables, arg_name)
        if self._is_default:
            return
        items = list(found.values()) if isinstance(found, dict) else found
        outside = [var for var in items if getattr(as_tf_variable(var), '_distribute_strategy',
                                                   None) is not self._strategy]
        if outside:
            raise ValueError(f'`{arg_name}` {_outside_scope_text(outside, len(items), self)}')

    def build_optimizer(self, optimizer: Any, variables: Iterable[Any]) -> Any:
        """Build a Keras 3 `optimizer` for `variables` inside ``strategy.scope()``.

        A Keras 3 optimizer creates its step counter and learning rate when
        it is made, and its slots (momentum, ...) when it is built: all must
        be the strategy's variables before the first ``strategy.run``, or
        each replica counts its own steps.  So make the optimizer inside
        ``with strategy.scope():`` and call this once, before training; an
        optimizer already built is only checked.

        Args:
            optimizer: A ``keras.optimizers.Optimizer`` made in the scope.
            variables: The variables it will train (``model.trainable_variables``).

        Returns:
            `optimizer`.

        Raises:
            TypeError: `optimizer` is not a Keras optimizer, or `variables`
                not a list of variables.
            ValueError: `variables`, or the optimizer's own variables, were
                created outside the scope.
        """
        if not (hasattr(optimizer, 'build') and hasattr(optimizer, 'built')
                and hasattr(optimizer, 'apply_gradients') and hasattr(optimizer, 'variables')):
            raise TypeError(f'`optimizer` must be a Keras optimizer, got {short_repr(optimizer)}')
        found = normalize_variables(variables, 'variables')
        items = list(found.values()) if isinstance(found, dict) else found
        self.check_variables_in_scope(items, 'variables')
        if not self._is_default:
            own = [v for v in optimizer.variables if is_variable(v)]
            outside = [v for v in own if getattr(as_tf_variable(v), '_distribute_strategy',
                                                 None) is not self._strategy]
            if outside:
                names = ', '.join(repr(variable_name(v)) for v in outside[:_SHOWN_NAMES])
                more = (f' and {len(outside) - _SHOWN_NAMES} more'
                        if len(outside) > _SHOWN_NAMES else '')
                when = 'built' if optimizer.built else 'made'
                raise ValueError(
                    f'`optimizer` was {when} outside `strategy.scope()` of the '
                    f'{type(self._strategy).__name__}: its variables {names}{more} are not '
                    f'the strategy\'s, so each replica would keep its own; make the optimizer '
                    f'inside `with strategy.scope():` and build it there '
                    f'(`backend.build_optimizer(optimizer, model.trainable_variables)`)')
        if not optimizer.built:
            with self._strategy.scope():
                optimizer.build(items)
        return optimizer


def _outside_scope_text(outside: list[Any], total: int, backend: DistributedBackend) -> str:
    names = ', '.join(repr(variable_name(v)) for v in outside[:_SHOWN_NAMES])
    more = f' and {len(outside) - _SHOWN_NAMES} more' if len(outside) > _SHOWN_NAMES else ''
    return (f'holds variables created outside `strategy.scope()` of the '
            f'{type(backend.strategy).__name__} ({len(outside)} of {total}): {names}{more}; '
            f'create them (build the model) inside `with strategy.scope():`')


def backend_for(strategy: Any = None, coordinator: Any = None) -> DistributedBackend | None:
    """The backend of `strategy`, or ``None`` when there is nothing to distribute.

    Args:
        strategy: A ``tf.distribute.Strategy``; ``None`` takes the strategy
            whose ``scope()`` is entered, if any.
        coordinator: The ``ClusterCoordinator`` of a ``ParameterServerStrategy``.

    Returns:
        ``None`` for the default strategy (or none at all), else a
        :class:`DistributedBackend`.

    Raises:
        TypeError, ValueError: As :class:`DistributedBackend`.
    """
    if strategy is None:
        if not tf.distribute.has_strategy():
            if coordinator is not None:
                raise ValueError('`coordinator` was given without its `strategy`')
            return None
        strategy = tf.distribute.get_strategy()
    if not isinstance(strategy, tf.distribute.Strategy):
        raise TypeError(f'`strategy` must be a tf.distribute.Strategy or None, '
                        f'got {short_repr(strategy)}')
    if _is_default_strategy(strategy):
        if coordinator is not None:
            raise ValueError('`coordinator` is only for a ParameterServerStrategy; '
                             '`strategy` is the default strategy')
        return None
    return DistributedBackend(strategy, coordinator)
