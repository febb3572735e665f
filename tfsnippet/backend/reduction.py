"""Statistics, stop flags and chief values combined across workers, one all-reduce at a time."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..utils.statistics import StatisticsCollector
from ..utils.validation import short_repr

__all__ = ['CrossWorkerReducer', 'AgreedLayout']

AllReduceSum = Callable[[np.ndarray], np.ndarray]


class CrossWorkerReducer:
    """Combines what each worker of a job holds, through an element-wise sum.

    Every method is a *collective*: every worker must call it, at the same
    point of its program and with arguments of the same kind, or the job
    hangs.  Each call issues exactly one all-reduce (a sum of float64 arrays
    of the same shape on every worker), except that the first
    :meth:`reduce_statistics` (or :meth:`reduce_statistics_and_sum`) issues
    two when every worker holds the same metric names and shapes (one to
    find that out, then the reduction) and three when they differ (their
    names exchanged in between); a later one that meets a metric name (or
    shape) not seen before on some worker issues one more than that (the
    reduction that finds it out).  Later calls are back to one.  Reducers
    handed the same `layout` (those of one strategy) share the metrics
    agreed on: a later reducer reduces known metrics with one all-reduce
    from its first call.  On a job of one worker nothing is communicated at
    all.

    The communication itself is the `all_reduce_sum` function handed in,
    which keeps this class free of TensorFlow (the
    :class:`~tfsnippet.backend.DistributedBackend` hands in one that runs on
    its strategy; a test may hand in one that sums across threads).

    Args:
        all_reduce_sum: Takes this worker's float64 array, returns the
            element-wise sum of the arrays of all workers; called at the same
            points, with arrays of the same shape, on every worker.
        num_workers: Number of workers taking part.
        worker_index: This worker's index, 0 being the chief.
        layout: The metrics agreed on so far, shared with the reducers
            given the same object (``None``: this reducer's own).  Every
            worker must share it alike.

    Raises:
        ValueError: `num_workers` is not positive, or `worker_index` is not
            in ``range(num_workers)``.
        TypeError: `all_reduce_sum` is not callable.
    """

    def __init__(self, all_reduce_sum: AllReduceSum, num_workers: int, worker_index: int,
                 layout: AgreedLayout | None = None):
        if not callable(all_reduce_sum):
            raise TypeError(f'`all_reduce_sum` must be callable, got {short_repr(all_reduce_sum)}')
        if type(num_workers) is not int or num_workers < 1:
            raise ValueError(f'`num_workers` must be a positive int, got {num_workers!r}')
        if type(worker_index) is not int or not 0 <= worker_index < num_workers:
            raise ValueError(f'`worker_index` must be an int in range({num_workers}), '
                             f'got {worker_index!r}')
        self._all_reduce_sum = all_reduce_sum
        self._num_workers = num_workers
        self._worker_index = worker_index
        if layout is not None and not isinstance(layout, AgreedLayout):
            raise TypeError(f'`layout` must be an AgreedLayout or None, got {short_repr(layout)}')
        self._collectives = 0
        self._agreed = AgreedLayout() if layout is None else layout

    @property
    def num_workers(self) -> int:
        """Number of workers taking part."""
        return self._num_workers

    @property
    def worker_index(self) -> int:
        """This worker's index (0 is the chief)."""
        return self._worker_index

    @property
    def collectives(self) -> int:
        """Number of all-reduces issued so far (0 on a job of one worker)."""
        return self._collectives

    def all_reduce_sum(self, array: np.ndarray) -> np.ndarray:
        """Sum `array` (as float64) element-wise over all workers.

        Raises:
            RuntimeError: The sum came back with another shape.
        """
        local = np.asarray(array, dtype=np.float64)
        self._collectives += 1
        total = np.asarray(self._all_reduce_sum(local), dtype=np.float64)
        if total.shape != local.shape:
            raise RuntimeError(f'The all-reduce of an array of shape {local.shape} returned '
                               f'shape {total.shape}')
        return total

    # ----------------------------------------------------------- decisions
    def agree_any(self, flag: bool) -> bool:
        """Whether `flag` is true on at least one worker (the same answer on every worker).

        Raises:
            TypeError: `flag` is not a bool.
        """
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f'`flag` must be True or False, got {short_repr(flag)}')
        if self._num_workers == 1:
            return bool(flag)
        total = self.all_reduce_sum(np.array([1. if flag else 0.]))
        return bool(total[0] > 0.)

    def broadcast_from_chief(self, value: float) -> float:
        """The chief's `value`, on every worker (the others' values are ignored).

        Raises:
            TypeError: `value` is not a real number.
        """
        if isinstance(value, (bool, np.bool_)) \
                or not isinstance(value, (int, float, np.integer, np.floating)):
            raise TypeError(f'`value` must be a real number, got {short_repr(value)}')
        value = float(value)
        if self._num_workers == 1:
            return value
        # x + 0. + 0. ... is x exactly, infinities and NaN included
        mine = value if self._worker_index == 0 else 0.
        return float(self.all_reduce_sum(np.array([mine]))[0])

    def barrier(self) -> None:
        """Return once every worker has called it."""
        if self._num_workers > 1:
            self.all_reduce_sum(np.zeros([1]))

    # ----------------------------------------------------------- statistics
    def reduce_statistics(self, stats: Mapping[str, StatisticsCollector]
                          ) -> dict[str, StatisticsCollector]:
        """Merge the statistics of every worker, as if one process had collected all values.

        The result holds, for every metric that has values on some worker,
        a collector whose counter, weight and moments are those of all the
        workers' samples together; a metric of `stats` with no value
        anywhere is an empty collector.  Every worker receives the same
        result.  On one worker, `stats` itself is returned.

        Args:
            stats: This worker's collectors by metric name.  A metric may be
                missing on some workers; a metric present on several must have
                the same sample shape on each.

        Returns:
            New collectors, in metric name order.

        Raises:
            TypeError: `stats` is not a mapping of str to collectors.
            ValueError: A metric has different shapes on different workers
                (raised on every worker).
        """
        return self.reduce_statistics_and_sum(stats, np.zeros([0]))[0]

    def reduce_statistics_and_sum(self, stats: Mapping[str, StatisticsCollector],
                                  extra: np.ndarray
                                  ) -> tuple[dict[str, StatisticsCollector], np.ndarray]:
        """:meth:`reduce_statistics`, and the element-wise sum of `extra` over the
        workers, in the same all-reduce (e.g. the flags of a sync point).

        Args:
            stats: As :meth:`reduce_statistics`.
            extra: A 1-d array (float64) of the same length on every worker.

        Returns:
            The merged collectors, and the sum of `extra` (`extra` itself, as
            float64, on one worker).

        Raises:
            TypeError: As :meth:`reduce_statistics`.
            ValueError: As :meth:`reduce_statistics`, or `extra` is not 1-d.
        """
        if not isinstance(stats, Mapping):
            raise TypeError(f'`stats` must be a dict of StatisticsCollector, '
                            f'got {short_repr(stats)}')
        for name, c in stats.items():
            if not isinstance(name, str) or not isinstance(c, StatisticsCollector):
                raise TypeError(f'`stats` must map metric names (str) to StatisticsCollector, '
                                f'got {name!r}: {short_repr(c)}')
        extra = np.asarray(extra, dtype=np.float64)
        if extra.ndim != 1:
            raise ValueError(f'`extra` must be a 1-d array, got shape {extra.shape}')
        if self._num_workers == 1:
            return (stats if isinstance(stats, dict) else dict(stats)), extra
        present = {name: c.shape for name, c in stats.items() if c.counter}
        if not self._agreed.started:   # the first call: agree on the names, then reduce
            self._agree_on_layout(present)
            self._agreed.started = True
            totals = self.all_reduce_sum(self._pack(stats, 0., extra))
        else:
            layout = self._agreed.shapes
            unknown = any(layout.get(name) != shape for name, shape in present.items())
            totals = self.all_reduce_sum(self._pack(stats, 1. if unknown else 0., extra))
            if totals[0] > 0.:   # some worker met a new metric: agree again, then reduce
                self._agree_on_layout(present)
                totals = self.all_reduce_sum(self._pack(stats, 0., extra))
        n = totals.shape[0] - extra.shape[0]
        return self._unpack(totals[:n], stats), totals[n:]

    def _pack(self, stats: Mapping[str, StatisticsCollector], flag: float,
              extra: np.ndarray) -> np.ndarray:
        """``[flag]``, then for each metric of the layout ``[count, weight]``, the
        weighted mean times the weight, and E[X**2] times the weight (both
        flattened), then `extra`."""
        layout = self._agreed.shapes
        sizes = [math.prod(shape) for shape in layout.values()]
        out = np.zeros(1 + sum(2 + 2 * k for k in sizes) + extra.shape[0], dtype=np.float64)
        out[0] = flag
        if extra.shape[0]:
            out[-extra.shape[0]:] = extra
        pos = 1
        for (name, shape), k in zip(layout.items(), sizes):
            c = stats.get(name)
            if c is not None and c.counter and c.shape == shape:
                weight = c.weight_sum
                out[pos] = c.counter
                out[pos + 1] = weight
                out[pos + 2:pos + 2 + k] = np.ravel(c.mean) * weight
                out[pos + 2 + k:pos + 2 + 2 * k] = np.ravel(c.square) * weight
            pos += 2 + 2 * k
        return out

    def _unpack(self, totals: np.ndarray, stats: Mapping[str, StatisticsCollector]
                ) -> dict[str, StatisticsCollector]:
        out: dict[str, StatisticsCollector] = {}
        pos = 1
        for name, shape in self._agreed.shapes.items():
            k = math.prod(shape)
            counter = int(round(totals[pos]))
            weight = float(totals[pos + 1])
            if counter > 0:
                if weight:
                    mean = totals[pos + 2:pos + 2 + k] / weight
                    square = totals[pos + 2 + k:pos + 2 + 2 * k] / weight
                else:
                    mean = square = np.zeros([k])
                c = StatisticsCollector(shape)
                if shape:
                    c._add_moments(mean.reshape(shape), square.reshape(shape), weight, counter)
                else:
                    c._add_moments(float(mean[0]), float(square[0]), weight, counter)
                out[name] = c
            pos += 2 + 2 * k
        for name, c in stats.items():
            if name not in out:
                out[name] = StatisticsCollector(c.shape)
        return dict(sorted(out.items()))

    def _agree_on_layout(self, present: Mapping[str, tuple[int, ...]]) -> None:
        """Learn the metric names and shapes of every worker; adopt their union.

        One all-reduce carries a fingerprint and the length of each worker's
        list: when they are all alike (the usual case), every worker holds
        the same list and nothing more is sent; else a second all-reduce
        exchanges the lists themselves.
        """
        mine = json.dumps(sorted([name, list(shape)] for name, shape in present.items()),
                          separators=(',', ':')).encode('utf-8')
        n, me = self._num_workers, self._worker_index
        header = np.zeros([2 * n])
        # 48 bits of a hash: an int that a float64 holds exactly
        header[me] = float(int.from_bytes(hashlib.blake2b(mine, digest_size=6).digest(), 'big'))
        header[n + me] = len(mine)
        header = self.all_reduce_sum(header)
        prints, lengths = header[:n], header[n:]
        if np.all(prints == prints[0]) and np.all(lengths == lengths[0]):
            lists = [mine] * n
        else:
            table = np.zeros([n, max(1, int(lengths.max()))])
            table[me, :len(mine)] = np.frombuffer(mine, dtype=np.uint8)
            table = self.all_reduce_sum(table)
            lists = [bytes(table[w, :int(lengths[w])].astype(np.uint8)) for w in range(n)]
        merged = dict(self._agreed.shapes)
        origin: dict[str, str] = {name: 'an earlier reduction' for name in merged}
        for worker, raw in enumerate(lists):
            entries: list[Any] = json.loads(raw.decode('utf-8'))
            for name, dims in entries:
                shape = tuple(int(d) for d in dims)
                seen = merged.setdefault(name, shape)
                origin.setdefault(name, f'worker {worker}')
                if seen != shape:
                    raise ValueError(
                        f'Metric `{name}` has samples of shape {shape} on worker {worker} but '
                        f'{seen} on {origin[name]}: a metric must have the same shape on '
                        f'every worker')
        self._agreed.shapes = dict(sorted(merged.items()))


class AgreedLayout:
    """The metrics (names and sample shapes) the workers agreed to reduce, in name order.

    What a :class:`CrossWorkerReducer` learns at its first reduction; the
    reducers given one object share it, so those of one strategy (the
    :class:`~tfsnippet.backend.DistributedBackend` of each training loop)
    agree on the metric names once.  Every worker changes it alike (only
    after an all-reduce), so it stays the same on every worker.
    """

    __slots__ = ('shapes', 'started')

    def __init__(self) -> None:
        #: name -> shape, in sorted name order
        self.shapes: dict[str, tuple[int, ...]] = {}
        #: whether a reduction has run (the names were exchanged once)
        self.started = False
