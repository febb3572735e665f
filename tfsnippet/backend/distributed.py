"""The tf.distribute backend: roles, metric values kept per replica, cross-worker agreement."""

from __future__ import annotations

import warnings
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from ..dataflows import (ArrayFlow, DataFlow, MultiTaskFlow, ShardedFlow, replica_slice,
                         split_batch)
from ..distributed.cluster import ClusterInfo
from ..utils.statistics import StatisticsCollector
from ..tfops.tf_vars import as_tf_variable, is_variable, normalize_variables, variable_name
from ..utils.validation import short_repr
from .base import Backend
from .local import LocalBackend
from .reduction import AgreedLayout, CrossWorkerReducer
from .values import (PendingValue, RemoteMetricValue, ReplicaValue, check_replica_parts,
                     is_distributed_value, per_replica_error, to_host_values, value_kind)

__all__ = ['DistributedBackend', 'backend_for', 'resolve_backend', 'PendingValue',
           'ReplicaValue', 'RemoteMetricValue', 'is_distributed_value', 'per_replica_error',
           'to_host_values', 'replica_slice']

_REDUCE_MODES = ('mean', 'sum')
_SHOWN_NAMES = 5   # variables named in an error message, at most

# the metrics agreed on by the backends of each strategy (every worker makes
# the same backends in the same order, so these stay alike on every worker)
_AGREED: weakref.WeakKeyDictionary[Any, AgreedLayout] = weakref.WeakKeyDictionary()


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


def _cluster_of(strategy: Any) -> ClusterInfo:
    """This process's place among the chief and workers of `strategy`'s cluster."""
    resolver = getattr(strategy, 'cluster_resolver', None)
    if resolver is None:
        return ClusterInfo.alone()
    cluster = resolver.cluster_spec().as_dict()
    task_type, task_id = resolver.task_type, resolver.task_id
    if task_type is None or len(cluster.get('chief', [])) + len(cluster.get('worker', [])) <= 1:
        return ClusterInfo.alone()
    info = ClusterInfo.of_task(cluster, task_type, int(task_id or 0))
    if info.worker_rank is None:
        raise ValueError(f'`strategy` runs in a task of type {task_type!r}: a training loop '
                         f'runs only in a chief or worker task')
    return info


class DistributedBackend(Backend):
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
        self._cluster = (ClusterInfo.alone() if is_ps or self._is_default
                         else _cluster_of(strategy))
        num_workers = self._cluster.num_workers
        worker_index = self._cluster.worker_rank or 0
        self._devices: tuple[str, ...] = (
            () if self._is_default else tuple(strategy.extended.worker_devices))
        layout = _AGREED.get(strategy)
        if layout is None:
            layout = _AGREED[strategy] = AgreedLayout()
        self._reducer = CrossWorkerReducer(self._all_reduce_sum, num_workers, worker_index,
                                           layout=layout)
        self._sum_factor = float(num_workers)

    # ------------------------------------------------------------ roles
    @property
    def cluster(self) -> ClusterInfo:
        """This process's place among the chief and workers of the strategy
        (alone for one process, and on the coordinator of a ``ParameterServerStrategy``)."""
        return self._cluster

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
        """Whether this process is the chief: the one that writes checkpoints, logs,
        summaries (the rule of :meth:`ClusterInfo.of_task
        <tfsnippet.distributed.ClusterInfo.of_task>`)."""
        return self._cluster.is_chief

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

    @property
    def holds_replica_values(self) -> bool:
        """``True``: per-replica and remote values are kept as they are (see
        :meth:`normalize_metric`)."""
        return True

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
        kind = value_kind(value)
        if kind == 'replica':   # every step, so the common case comes first
            parts = tuple(value.values)
            check_replica_parts(name, parts)
            mean = reduce == 'mean'
            return ReplicaValue(parts, mean, 1. if mean else self._sum_factor)
        if kind == 'variable':
            return value.read_value()
        if kind == 'remote':
            if self._coordinator is None:
                raise TypeError(
                    f'Metric `{name}` is a RemoteValue (the result of a function scheduled by '
                    f'a ClusterCoordinator), but this backend has no coordinator: make it '
                    f'with `coordinator=` the ClusterCoordinator that scheduled the step')
            return RemoteMetricValue(value, self._coordinator, reduce == 'mean')
        if reduce == 'sum' and self._sum_factor != 1.:
            if is_variable(value):
                value = as_tf_variable(value).read_value()
            check_replica_parts(name, (value,))
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

    def join(self) -> None:
        """Under a ``ParameterServerStrategy``, wait for the steps scheduled so
        far (``coordinator.join()``); nothing otherwise."""
        if self._coordinator is not None:
            self._coordinator.join()

    # ------------------------------------------------------- cross-worker
    def _all_reduce_sum(self, array: np.ndarray) -> np.ndarray:
        """The element-wise sum of `array` over the workers: one all-reduce of the strategy."""
        strategy = self._strategy
        summed = _SUMS.get(strategy)
        if summed is None:
            summed = _SUMS[strategy] = _all_reduce_function(strategy, self.num_local_replicas)
        out = summed(tf.constant(np.ravel(array), dtype=tf.float64))
        first = strategy.experimental_local_results(out)[0]
        return np.asarray(first.numpy(), dtype=np.float64).reshape(array.shape)

    def reduce_statistics(self, stats: Mapping[str, StatisticsCollector]
                          ) -> dict[str, StatisticsCollector]:
        """Merge every worker's statistics into those of all values (a collective).

        Counters, weights and moments of each metric are packed, in a metric
        order all workers agreed on, into one float64 array and summed with
        one all-reduce, so every worker gets the statistics one process
        would have collected from the values of all workers.  A metric
        missing on some workers is taken from the others.  The first call
        on a strategy (of any backend of it: the names agreed are kept for
        the strategy's later backends, e.g. the next training loop) spends
        one more all-reduce agreeing on the names when every worker has the
        same, two more when they differ; a later call that meets a new
        metric name on some worker, one more than that.  With one worker,
        `stats` is returned as it is.

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
        if not optimizer.built and not items:
            raise ValueError(
                'A Keras optimizer among `checkpoint_save_objects` is not built, and the '
                'loop has no `param_vars` to build it for: build it inside '
                '`strategy.scope()` before entering the loop '
                '(`optimizer.build(model.trainable_variables)`)')
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

    # ------------------------------------------------------- data
    def distribute_data(self, data: Any, seed_of: Callable[..., int]) -> Any:
        """The per-replica form of `data` for ``strategy.run``.

        * A :class:`~tfsnippet.dataflows.ArrayFlow` is sharded among the
          workers (:class:`~tfsnippet.dataflows.ShardedFlow`: its batch size
          is the global batch, the remainder of an epoch is dropped) and each
          worker's batch split among its replicas
          (:func:`~tfsnippet.dataflows.split_batch`).  The global batches are
          those the flow serves without a strategy, in the same order: the
          sharded flow continues from a copy of the flow's random generator.
          Under multi-worker training a shuffled flow made with an int
          ``random_state`` is checked against the chief's (one collective; the
          chief's seed wins, with a warning), and one made without takes the
          seed `seed_of(flow)` that every worker agrees on.  Another DataFlow
          is split only: under multi-worker training it must be made from a
          ``ShardedFlow``.
        * A :class:`~tfsnippet.dataflows.MultiTaskFlow` has each task's flow
          distributed as above (a shuffled one takes its seed from
          ``seed_of(flow, task=name)``); with several workers its weighted
          drawing takes its seed from `seed_of` (the multi-task flow), so
          every worker draws the same task at each step.
        * A ``tf.data.Dataset`` goes through
          ``strategy.experimental_distribute_dataset`` (its batch size is the
          global batch); a distributed dataset and any other iterable pass
          unchanged.
        * Under a ``ParameterServerStrategy``, and in graph mode (feed the
          global batch to a placeholder; ``strategy.run`` hands it whole to
          every replica, each takes its share with
          :func:`~tfsnippet.backend.replica_slice`), everything passes
          unchanged.

        Raises:
            ValueError: The flow is too small to give every worker a batch,
                or its batch does not divide among the replicas.
            TypeError: A DataFlow that cannot be sharded, under multi-worker training.
        """
        if self.coordinator is not None or not isinstance(data, (DataFlow, tf.data.Dataset)) \
                or not tf.executing_eagerly():
            return data
        if isinstance(data, tf.data.Dataset):
            return self.strategy.experimental_distribute_dataset(data)
        return self._distribute_flow(data, seed_of)

    def _distribute_flow(self, flow: DataFlow, seed_of: Callable[..., int]) -> DataFlow:
        workers, replicas = self.num_workers, self.num_replicas
        if isinstance(flow, MultiTaskFlow):
            drawing = seed_of(flow) if workers > 1 and flow.mode == 'weighted' else None

            def per_task(task: str, sub: DataFlow) -> DataFlow:
                try:
                    return self._distribute_flow(sub, lambda f: seed_of(f, task=task))
                except (TypeError, ValueError) as e:
                    raise type(e)(f'Task {task!r} of the MultiTaskFlow: {e}') from e

            return flow.map_flows(per_task, random_state=drawing)
        if isinstance(flow, ArrayFlow):
            size, length = flow.batch_size, flow.data_length
            if size % replicas:
                raise ValueError(
                    f'The DataFlow given to `iter_steps()` has batches of {size} rows, which '
                    f'do not divide among the {replicas} replicas of the strategy '
                    f'({workers} worker(s)): use a global batch size that is a multiple of '
                    f'{replicas}')
            if length < size:
                raise ValueError(
                    f'The DataFlow given to `iter_steps()` has {length} rows, less than one '
                    f'global batch of {size} rows ({size // workers} for each of {workers} '
                    f'worker(s), {size // replicas} for each of {replicas} replicas): every '
                    f'worker needs a batch each epoch; use more data or a smaller batch size')
            if not flow.skip_incomplete and length % size:
                warnings.warn(
                    f'The DataFlow given to `iter_steps()` has {length} rows, {length % size} '
                    f'more than its full global batches of {size}: under a strategy the last, '
                    f'smaller batch of each epoch is dropped, which the flow alone would '
                    f'serve. Make it with `skip_incomplete=True` to train on the same batches '
                    f'with and without a strategy', UserWarning, stacklevel=2)
            seed = self._shard_seed(flow, seed_of) if flow.is_shuffled and workers > 1 else None
            flow = ShardedFlow(flow, workers, self.worker_index, seed=seed)
        elif workers > 1 and not _is_sharded(flow):
            raise TypeError(
                f'The DataFlow given to `iter_steps()` ({short_repr(flow)}) cannot be sharded '
                f'among the {workers} workers: give an ArrayFlow (`DataFlow.arrays(...)`), '
                f'or shard one yourself (`spt.dataflows.shard_flow(flow, '
                f'loop.backend.num_workers, loop.backend.worker_index, seed=...)`) and map or '
                f'thread the sharded flow')
        strategy = self.strategy

        def split(*arrays: Any) -> tuple[Any, ...]:
            return split_batch(strategy, arrays)

        return flow.map(split)

    def _shard_seed(self, flow: ArrayFlow, seed_of: Callable[..., int]) -> int | None:
        """The seed of a shuffled flow sharded among several workers: ``None`` (the
        flow's own generator) when the chief's flow has the same int seed, else
        the seed every worker agrees on (one collective either way)."""
        own = flow.seed
        if own is None:
            return seed_of(flow)
        chief = int(self.broadcast_from_chief(float(own)))
        if chief == own:
            return None
        warnings.warn(
            f'The shuffled DataFlow given to `iter_steps()` on worker {self.worker_index} was '
            f'made with `random_state={own}`, the chief\'s with {chief}: every worker takes the '
            f'chief\'s order of rows; give every worker the same `random_state`',
            UserWarning, stacklevel=3)
        return chief


# the all-reduce function of each strategy: traced once, on its first collective
_SUMS: weakref.WeakKeyDictionary[Any, Callable[[Any], Any]] = weakref.WeakKeyDictionary()


def _all_reduce_function(strategy: Any, local: int) -> Callable[[Any], Any]:
    """A ``tf.function`` summing a 1-d float64 tensor over the workers of `strategy`.

    One replica of each worker contributes the tensor, the others zeros.  A
    traced function runs the collective for a fraction of what the eager
    ``strategy.reduce`` spends building it each time (a third or more, on
    loopback).  It holds `strategy` weakly (it is cached by strategy).
    """
    ref = weakref.ref(strategy)

    def replica_sum(flat: Any) -> Any:
        ctx = tf.distribute.get_replica_context()
        keep = tf.cast(tf.equal(ctx.replica_id_in_sync_group % local, 0), tf.float64)
        return ctx.all_reduce(tf.distribute.ReduceOp.SUM, flat * keep)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.float64)])
    def summed(flat: Any) -> Any:
        return ref().run(replica_sum, args=(flat,))   # type: ignore[union-attr]

    return summed


def _is_sharded(flow: Any) -> bool:
    """Whether `flow` is a ShardedFlow, or made from one by ``map``/``threaded``."""
    for _ in range(64):
        if isinstance(flow, ShardedFlow):
            return True
        flow = getattr(flow, 'source', None)
        if not isinstance(flow, DataFlow):
            return False
    return False


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


def resolve_backend(strategy: Any = None, coordinator: Any = None) -> Backend:
    """The backend of a loop: that of `strategy` (see :func:`backend_for`), or a
    :class:`~tfsnippet.backend.LocalBackend` when there is nothing to distribute.

    Raises:
        TypeError, ValueError: As :func:`backend_for`.
    """
    backend = backend_for(strategy, coordinator)
    return LocalBackend() if backend is None else backend
