"""Running weighted statistics of scalars or arrays."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ['StatisticsCollector']


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
        self._shape = tuple(int(s) for s in shape)
        self.reset()

    def reset(self) -> None:
        """Forget every value collected so far."""
        self._mean = np.zeros(self._shape, dtype=np.float64)
        self._square = np.zeros(self._shape, dtype=np.float64)
        self._weight_sum = 0.
        self._counter = 0

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one sample."""
        return self._shape

    @property
    def mean(self) -> np.ndarray:
        """The weighted mean of the samples."""
        return self._mean

    @property
    def square(self) -> np.ndarray:
        """The weighted mean of the squared samples, E[X**2]."""
        return self._square

    @property
    def var(self) -> np.ndarray:
        """The weighted (population) variance, ``max(E[X**2] - E[X]**2, 0)``."""
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

    def collect(self, values, weight=1.) -> None:
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
        new_weight_sum = self._weight_sum + batch_weight
        ratio = batch_weight / new_weight_sum
        self._mean = self._mean + (np.sum(flat * w, axis=0) / batch_weight - self._mean) * ratio
        self._square = self._square + (
            np.sum(flat * flat * w, axis=0) / batch_weight - self._square) * ratio
        self._weight_sum = new_weight_sum
        self._counter += batch_size
