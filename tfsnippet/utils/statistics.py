"""Running weighted statistics of scalars or arrays."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ['StatisticsCollector']

# Up to this many values (an epoch's steps, say) are summed by Python: its
# sums run less code than numpy's, which matters once an epoch, when the
# training step has pushed that code out of the CPU's caches
# (benchmarks/profile_overhead.py).
_PYTHON_SUM_LIMIT = 64


class StatisticsCollector:
    """Accumulates the weighted mean and variance of values of one shape.

    Each call to :meth:`collect` takes a batch: the dimensions of `values`
    in front of `shape` index the samples, and `weight` broadcasts over
    them.  The collector keeps running weighted means of ``X`` and ``X**2``
    (element-wise over `shape`), so its memory does not grow.

    Args:
        shape: Shape of one sample; ``()`` for scalars.

    Example:
        >>> c = StatisticsCollector()
        >>> c.collect([2., 1., 7., 6.])
        >>> float(c.mean), float(c.var)
        (4.0, 6.5)
    """

    def __init__(self, shape: Sequence[int] = ()):
        self._shape = () if shape == () else tuple(int(s) for s in shape)
        self.reset()

    def reset(self) -> None:
        """Forget every value collected so far."""
        # scalar moments are Python floats: far cheaper than 0-d arrays
        self._mean: Any = 0. if not self._shape else np.zeros(self._shape, dtype=np.float64)
        self._square: Any = 0. if not self._shape else np.zeros(self._shape, dtype=np.float64)
        self._weight_sum = 0.
        self._counter = 0

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one sample."""
        return self._shape

    @property
    def mean(self) -> np.ndarray:
        """The weighted mean of the samples (a ``np.float64`` for scalars)."""
        return np.float64(self._mean) if not self._shape else self._mean

    @property
    def square(self) -> np.ndarray:
        """The weighted mean of the squared samples, E[X**2]."""
        return np.float64(self._square) if not self._shape else self._square

    @property
    def var(self) -> np.ndarray:
        """The weighted (population) variance, ``max(E[X**2] - E[X]**2, 0)``."""
        if not self._shape:
            return np.float64(max(self._square - self._mean * self._mean, 0.))
        return np.maximum(self._square - self._mean ** 2, 0.)

    @property
    def stddev(self) -> np.ndarray:
        """The weighted (population) standard deviation."""
        return np.sqrt(self.var)

    @property
    def weight_sum(self) -> float:
        """The sum of the weights of all samples."""
        return self._weight_sum

    @property
    def counter(self) -> int:
        """The number of samples (not their weight)."""
        return self._counter

    @property
    def has_value(self) -> bool:
        """Whether at least one sample has been collected."""
        return self._counter > 0

    def merge(self, other: StatisticsCollector) -> None:
        """Add all samples of `other` (a collector of the same shape).

        Raises:
            ValueError: The shapes differ.
        """
        if other._shape != self._shape:
            raise ValueError(f'Shape mismatch: {other._shape} vs {self._shape}')
        self._add_moments(other._mean, other._square, other._weight_sum, other._counter)

    def _add_moments(self, mean: Any, square: Any, weight_sum: float, counter: int) -> None:
        """Add `counter` samples of total weight `weight_sum` with these weighted moments."""
        if counter == 0:
            return
        if weight_sum:
            new_weight_sum = self._weight_sum + weight_sum
            ratio = weight_sum / new_weight_sum
            self._mean = self._mean + (mean - self._mean) * ratio
            self._square = self._square + (square - self._square) * ratio
            self._weight_sum = new_weight_sum
        self._counter += counter

    def _collect_unit_scalars(self, values: np.ndarray) -> None:
        """Fast path: add each element of a 1-d float64 array as a sample of weight 1."""
        n = values.size
        if not n:
            return
        if n <= _PYTHON_SUM_LIMIT:
            floats = values.tolist()
            total, square = sum(floats), sum([v * v for v in floats])
        else:
            total, square = float(values.sum()), float(np.dot(values, values))
        self._add_moments(total / n, square / n, float(n), n)

    def collect(self, values: npt.ArrayLike, weight: npt.ArrayLike = 1.) -> None:
        """Add a batch of samples.

        Args:
            values: An array whose shape ends with :attr:`shape`.
            weight: The weight of each sample; broadcast over the batch.
                An empty `weight` counts as 1.

        Raises:
            ValueError: The shape of `values` does not end with :attr:`shape`.
        """
        values = np.asarray(values, dtype=np.float64)
        weight = np.asarray(weight, dtype=np.float64)
        if not values.size:
            return
        if not weight.size:
            weight = np.asarray(1., dtype=np.float64)
        ndim = len(self._shape)
        if values.shape[values.ndim - ndim:] != self._shape or values.ndim < ndim:
            raise ValueError(
                f'Shape mismatch: {values.shape} not ending with {self._shape}')
        batch_shape = values.shape[:values.ndim - ndim]
        batch_size = int(np.prod(batch_shape, dtype=np.int64))
        weight = np.broadcast_to(weight, batch_shape).reshape(-1)
        flat = values.reshape((batch_size,) + self._shape)
        w = weight.reshape((batch_size,) + (1,) * ndim)
        batch_weight = float(np.sum(weight))
        if batch_weight == 0.:
            self._counter += batch_size
            return
        mean = np.sum(flat * w, axis=0) / batch_weight
        square = np.sum(flat * flat * w, axis=0) / batch_weight
        if not self._shape:
            mean, square = float(mean), float(square)
        self._add_moments(mean, square, batch_weight, batch_size)

    def state_dict(self) -> dict[str, Any]:
        """The collector's moments as plain data (floats, or arrays for a
        `shape`), from which :meth:`load_state_dict` puts back exactly the
        same statistics (a checkpoint stores an epoch's partial statistics so)."""
        moments = (self._mean, self._square) if not self._shape else \
            (self._mean.copy(), self._square.copy())
        return {'shape': list(self._shape), 'mean': moments[0], 'square': moments[1],
                'weight_sum': self._weight_sum, 'counter': self._counter}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put back the moments of :meth:`state_dict`.

        Raises:
            KeyError: A key of :meth:`state_dict` is missing.
            ValueError: The saved shape is not :attr:`shape`.
        """
        missing = [k for k in ('shape', 'mean', 'square', 'weight_sum', 'counter')
                   if k not in state]
        if missing:
            raise KeyError(f'`state` lacks the keys {missing} of a StatisticsCollector: '
                           f'got {sorted(state)}')
        shape = tuple(int(s) for s in state['shape'])
        if shape != self._shape:
            raise ValueError(f'`state` holds statistics of shape {shape}, this collector '
                             f'has shape {self._shape}')
        if not shape:
            self._mean, self._square = float(state['mean']), float(state['square'])
        else:
            self._mean = np.array(state['mean'], dtype=np.float64).reshape(shape)
            self._square = np.array(state['square'], dtype=np.float64).reshape(shape)
        self._weight_sum = float(state['weight_sum'])
        self._counter = int(state['counter'])

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> StatisticsCollector:
        """A new collector holding the statistics of :meth:`state_dict`."""
        if not isinstance(state, Mapping) or 'shape' not in state:
            raise KeyError(f'`state` is not the state of a StatisticsCollector: '
                           f'got {state!r:.80}')
        collector = cls(tuple(state['shape']))
        collector.load_state_dict(state)
        return collector
