"""Array flows split among the workers of a job, and batches split among a worker's replicas."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from ..utils.validation import check_positive_int, short_repr
from .array_flow import ArrayFlow
from .base import ExtraInfoDataFlow

__all__ = ['ShardedFlow', 'shard_flow', 'split_batch', 'replica_slice']


class ShardedFlow(ExtraInfoDataFlow):
    """This worker's part of an :class:`~tfsnippet.dataflows.ArrayFlow`.

    The source's `batch_size` is the *global* batch size, the batch one
    process would train on.  Each epoch the global batches are exactly those
    the source alone would serve, in the same order (see "Same data on any
    topology" in the distributed guide), except that a last, smaller one is
    dropped; each global batch is cut into `num_workers` consecutive slices,
    of which worker ``k`` serves the ``k``-th.  So:

    * the workers' batches of an epoch are disjoint, and together they are
      exactly what one process iterating `flow` would train on;
    * every worker serves the same number of batches, ``data_length //
      batch_size`` per epoch (no collective waits for a worker that ran out);
    * the order is one function of the data, the shuffling seed, the global
      batch size and the epoch: every run, every worker and every number of
      workers agree on it.

    The order of the rows is that of `flow` itself from where it stands (a
    copy of its random generator, so `flow` is not moved), or, given `seed`,
    that of ``DataFlow.arrays(..., shuffle=True, random_state=seed)``.  With
    several workers of a shuffled flow, every worker must draw the same
    order: give `seed`, or make `flow` with the same int ``random_state`` on
    every worker.

    The rows left after the last full global batch (fewer than
    ``batch_size``) are **dropped** in that epoch: a smaller last batch
    could not be split evenly, and padding it would count rows twice.  When
    shuffled, other rows are left out in each epoch.

    The position (:meth:`state_dict`) is that of the global batches, in the
    form of an ``ArrayFlow``'s position, the same on every worker: a
    checkpoint written by the chief resumes every worker, with another number
    of workers too, and a position of the same flow without any sharding (a
    run on one device) resumes a sharded one, and the other way round.

    Args:
        flow: The flow to split; its arrays, batch size, shuffling and random
            generator are used (not moved).
        num_workers: Number of workers.
        worker_index: This worker's index, in ``range(num_workers)``.
        seed: Seed of the order of the rows, the same on every worker; ``None``
            takes `flow`'s own generator.  Ignored if `flow` is not shuffled.

    Raises:
        TypeError: `flow` is not an ``ArrayFlow``; `seed` is not an int.
        ValueError: `worker_index` is out of range; the global batch size does
            not divide among the workers; the data holds less than one
            global batch; `flow` is shuffled among several workers, and
            neither `seed` nor `flow`'s own seed is given.
    """

    def __init__(self, flow: ArrayFlow, num_workers: int, worker_index: int,
                 seed: int | None = None):
        if not isinstance(flow, ArrayFlow):
            raise TypeError(
                f'`flow` must be an ArrayFlow (made by `DataFlow.arrays` or `DataFlow.seq`) to '
                f'be sharded, got {short_repr(flow)}: shard the array flow, then `.map()` or '
                f'`.threaded()` the sharded one')
        num_workers = check_positive_int(num_workers, 'num_workers')
        if isinstance(worker_index, np.integer):
            worker_index = int(worker_index)
        if type(worker_index) is not int:
            raise TypeError(f'`worker_index` must be an int, got {short_repr(worker_index)}')
        if not 0 <= worker_index < num_workers:
            raise ValueError(f'`worker_index` must be in range({num_workers}) '
                             f'(`num_workers` {num_workers}), got {worker_index}')
        if seed is not None:
            if isinstance(seed, np.integer):
                seed = int(seed)
            if type(seed) is not int:
                raise TypeError(f'`seed` must be an int or None, got {short_repr(seed)}')
            if seed < 0:
                raise ValueError(f'`seed` must be a non-negative int, got {seed}')
        if flow.is_shuffled and seed is None and flow.seed is None and num_workers > 1:
            raise ValueError(
                '`seed` is required to shard a shuffled flow made without an int '
                '`random_state` among several workers, got None: every worker must draw the '
                'same order of rows, so pass the same int on every worker (e.g. one the chief '
                'drew, sent with `backend.broadcast_from_chief`), or make the flow with '
                '`random_state=` the same int on every worker')
        global_batch, length = flow.batch_size, flow.data_length
        if global_batch % num_workers:
            raise ValueError(
                f'`flow.batch_size` {global_batch} (the global batch size) does not divide '
                f'among `num_workers` {num_workers} workers: use a multiple of {num_workers}')
        if length < global_batch:
            per_worker = global_batch // num_workers
            raise ValueError(
                f'`flow` has {length} rows, less than one global batch of {global_batch} '
                f'({per_worker} rows for each of {num_workers} workers): every worker needs '
                f'at least one batch an epoch; use more data or a smaller `batch_size`')
        self._source = flow
        self._num_workers = num_workers
        self._worker_index = worker_index
        self._global_batch = global_batch
        if not flow.is_shuffled:
            self._seed = None
            glob = flow.copy(skip_incomplete=True)
        elif seed is None:
            self._seed = flow.seed
            glob = flow.copy(skip_incomplete=True)
        else:
            self._seed = seed
            glob = ArrayFlow(flow.the_arrays, global_batch, shuffle=True,
                             skip_incomplete=True, random_state=seed)
        # the global batches, as one process would iterate them; `_origin` stays
        # where they started (for `epoch_order`)
        self._global = glob
        self._origin = glob.copy()
        steps = length // global_batch
        super().__init__(
            array_count=flow.array_count, data_length=steps * (global_batch // num_workers),
            data_shapes=flow.data_shapes, batch_size=global_batch // num_workers,
            skip_incomplete=True, is_shuffled=flow.is_shuffled)
        self._steps = steps

    # ------------------------------------------------------------ properties
    @property
    def source(self) -> ArrayFlow:
        """The flow this one splits."""
        return self._source

    @property
    def num_workers(self) -> int:
        """Number of workers."""
        return self._num_workers

    @property
    def worker_index(self) -> int:
        """This worker's index."""
        return self._worker_index

    @property
    def global_batch_size(self) -> int:
        """Rows of one global batch, all workers together (the source's batch size)."""
        return self._global_batch

    @property
    def seed(self) -> int | None:
        """Seed of the order of the rows: `seed`, else the source's int seed
        (``None`` when not shuffled, or when the source had no int seed)."""
        return self._seed

    @property
    def steps_per_epoch(self) -> int:
        """Batches served by each worker in a whole epoch."""
        return self._steps

    def epoch_order(self, epoch: int) -> np.ndarray:
        """The order of the rows in the `epoch`-th epoch (counted from 0) this flow
        serves from its creation, the same on every worker.

        The global batches of that epoch are its consecutive runs of
        :attr:`global_batch_size` rows (a last, shorter run is dropped).
        """
        return self._origin.upcoming_order(epoch)

    # ------------------------------------------------------------ position
    @property
    def is_resumable(self) -> bool:
        return True

    def state_dict(self) -> dict[str, Any]:
        """The position of the global batches: that of an ``ArrayFlow``
        (``{'start', 'served', 'rows', 'length'}``), the same on every worker.

        ``'served'`` counts the global batches of the epoch already served
        and ``'rows'`` the rows of its order they used.
        """
        return self._global.state_dict()

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at a position of :meth:`state_dict` (of any worker, any number of
        workers), or of the source flow iterated alone.

        Raises:
            RuntimeError: The flow is being iterated.
            TypeError, KeyError: `state` is not a position.
            ValueError: The position is of other data, of a flow shuffled or
                not unlike this one, or was written by the sharded flow of an
                earlier tfsnippet that shuffled in another order.
        """
        if self._is_iterating:
            raise RuntimeError('`load_state_dict()` cannot be called while the flow is iterated')
        self._global.load_state_dict(state)

    # ------------------------------------------------------------ batches
    def _minibatch_iterator(self) -> Iterator[tuple]:
        size = self._batch_size
        first = self._worker_index * size
        part = slice(first, first + size)
        take = itemgetter(part)
        if self._num_workers == 1:
            yield from self._global
            return
        for batch in self._global:
            yield tuple(map(take, batch))


def shard_flow(flow: ArrayFlow, num_workers: int, worker_index: int,
               seed: int | None = None) -> ShardedFlow:
    """Worker `worker_index`'s part of `flow`, of `num_workers` disjoint parts.

    See :class:`ShardedFlow`: `flow`'s batch size is the global batch
    size, each worker gets an equal slice of every global batch, the
    remainder of an epoch (less than a global batch) is dropped.

    Example:
        >>> import numpy as np
        >>> flow = DataFlow.arrays([np.arange(10)], batch_size=4)
        >>> [b[0].tolist() for b in shard_flow(flow, 2, 0)]
        [[0, 1], [4, 5]]
        >>> [b[0].tolist() for b in shard_flow(flow, 2, 1)]
        [[2, 3], [6, 7]]
    """
    return ShardedFlow(flow, num_workers, worker_index, seed=seed)


def split_batch(strategy: Any, batch: Sequence[np.ndarray]) -> tuple[Any, ...]:
    """Split this worker's batch evenly among its replicas, ready for ``strategy.run``.

    Replica ``i`` of this worker gets the ``i``-th of equal consecutive
    slices of every array, as a tensor placed on its device.

    Args:
        strategy: A ``tf.distribute.Strategy``.
        batch: A tuple (or list) of arrays of the same length, e.g. a batch
            of :class:`ShardedFlow`.

    Returns:
        One per-replica value per array (``strategy.run(step, args=...)``).

    Raises:
        TypeError: `batch` is not a tuple or list of arrays.
        ValueError: `batch` is empty, its arrays differ in length, or their
            length does not divide among the local replicas.

    Example:
        >>> strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
        >>> (x,) = split_batch(strategy, (np.arange(4.),))
        >>> strategy.run(tf.reduce_sum, args=(x,)).numpy()
        np.float64(6.0)
    """
    import tensorflow as tf

    if not isinstance(batch, (tuple, list)):
        raise TypeError(f'`batch` must be a tuple or list of arrays, got {short_repr(batch)}')
    if not batch:
        raise ValueError('`batch` must hold at least one array, got an empty one')
    arrays = []
    for i, a in enumerate(batch):
        if not hasattr(a, 'shape') or len(a.shape) < 1:
            raise TypeError(f'`batch[{i}]` must be an array of at least one dimension, '
                            f'got {short_repr(a)}')
        arrays.append(a)
    lengths = [int(a.shape[0]) for a in arrays]
    if len(set(lengths)) != 1:
        raise ValueError(f'`batch` must hold arrays of the same length, got lengths {lengths}')
    devices = tuple(strategy.extended.worker_devices)
    replicas = len(devices)
    length = lengths[0]
    if length % replicas or not length:
        raise ValueError(
            f'`batch` has {length} rows, which do not divide evenly among the {replicas} '
            f'replicas of this worker: use a per-worker batch size that is a positive '
            f'multiple of {replicas}')
    size = length // replicas

    def value_fn(ctx: Any) -> tuple[Any, ...]:
        local = ctx.replica_id_in_sync_group % replicas
        with tf.device(devices[local]):
            return tuple(tf.convert_to_tensor(a[local * size:(local + 1) * size])
                         for a in arrays)

    values = strategy.experimental_distribute_values_from_function(value_fn)
    return tuple(values)


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
        >>> from tfsnippet.dataflows import replica_slice
        >>> strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
        >>> strategy.run(lambda x: tf.reduce_sum(replica_slice(x)),
        ...              args=(tf.constant([1., 2., 3.]),)).numpy()
        np.float32(6.0)
    """
    import tensorflow as tf

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
