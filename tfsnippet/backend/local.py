"""The backend of a loop without a ``tf.distribute`` strategy: the null object."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..distributed.cluster import ClusterInfo
from ..utils.statistics import StatisticsCollector
from ..tfops.tf_vars import normalize_variables
from ..utils.validation import short_repr
from .base import Backend
from .values import is_distributed_value, per_replica_error, to_host_values

__all__ = ['LocalBackend']

_REDUCE_MODES = ('mean', 'sum')


class LocalBackend(Backend):
    """The backend of a loop that runs alone, without a strategy.

    This process is the chief and the only worker (:attr:`cluster` is
    :meth:`ClusterInfo.alone() <tfsnippet.distributed.ClusterInfo.alone>`),
    every reduction across workers is the identity and communicates
    nothing, a metric value is kept as it is, and the data of
    ``iter_steps`` passes through unchanged.

    Example:
        >>> import numpy as np
        >>> from tfsnippet.backend import LocalBackend
        >>> backend = LocalBackend()
        >>> backend.is_chief, backend.num_workers, backend.agree_any(True)
        (True, 1, True)
        >>> backend.all_reduce_sum([1., 2.])
        array([1., 2.])
    """

    __slots__ = ()

    def __repr__(self) -> str:
        return 'LocalBackend()'

    # ------------------------------------------------------------ roles
    @property
    def cluster(self) -> ClusterInfo:
        return ClusterInfo.alone()

    @property
    def strategy(self) -> Any:
        return None

    @property
    def is_chief(self) -> bool:
        return True

    @property
    def num_workers(self) -> int:
        return 1

    @property
    def worker_index(self) -> int:
        return 0

    @property
    def num_replicas(self) -> int:
        return 1

    @property
    def num_local_replicas(self) -> int:
        return 1

    @property
    def holds_replica_values(self) -> bool:
        return False

    # ------------------------------------------------------------ metrics
    def normalize_metric(self, name: str, value: Any, reduce: str = 'mean') -> Any:
        """`value` as it is (`reduce` is checked and has nothing to combine).

        Raises:
            ValueError: `reduce` is neither ``'mean'`` nor ``'sum'``.
            TypeError: `value` is a per-replica or remote value: this
                backend has no strategy (the message says what to do).
        """
        if reduce != 'mean' and reduce != 'sum':
            raise ValueError(f'`reduce` must be one of {_REDUCE_MODES}, got {reduce!r}')
        if is_distributed_value(value):
            raise per_replica_error(name, value, in_loop=True)
        return value

    def to_host_values(self, values: Sequence[Any]) -> np.ndarray:
        """Values to host numbers in one go (see :func:`~tfsnippet.backend.to_host_values`)."""
        return to_host_values(values)

    def all_reduce_sum(self, array: Any) -> np.ndarray:
        """`array` itself, as float64."""
        return np.asarray(array, dtype=np.float64)

    def worker_mean(self, value: float) -> float:
        """`value` itself."""
        return value

    def reduce_statistics(self, stats: Mapping[str, StatisticsCollector]
                          ) -> dict[str, StatisticsCollector]:
        """`stats` as they are (a dict)."""
        return stats if isinstance(stats, dict) else dict(stats)

    def reduce_statistics_and_sum(self, stats: Mapping[str, StatisticsCollector],
                                  extra: Any) -> tuple[dict[str, StatisticsCollector], np.ndarray]:
        """`stats` and `extra` (as float64) as they are.

        Raises:
            ValueError: `extra` is not 1-d.
        """
        extra = np.asarray(extra, dtype=np.float64)
        if extra.ndim != 1:
            raise ValueError(f'`extra` must be a 1-d array, got shape {extra.shape}')
        return self.reduce_statistics(stats), extra

    def agree_any(self, flag: bool) -> bool:
        """`flag` itself.

        Raises:
            TypeError: `flag` is not a bool.
        """
        if not isinstance(flag, (bool, np.bool_)):
            raise TypeError(f'`flag` must be True or False, got {short_repr(flag)}')
        return bool(flag)

    def broadcast_from_chief(self, value: float) -> float:
        """`value` itself (this process is the chief), as a float."""
        return float(value)

    def barrier(self) -> None:
        """Nothing to wait for."""

    # ------------------------------------------------------------ data and variables
    def distribute_data(self, data: Any, seed_of: Callable[..., int]) -> Any:
        """`data` unchanged."""
        return data

    def check_variables_in_scope(self, variables: Any, arg_name: str) -> None:
        """Check only that `variables` is a list or dict of variables (`TypeError`)."""
        normalize_variables(variables, arg_name)

    def build_optimizer(self, optimizer: Any, variables: Iterable[Any]) -> Any:
        """`optimizer` as it is: without a strategy it builds itself when first used."""
        return optimizer
