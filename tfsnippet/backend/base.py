"""The protocol of a training loop's backend: who this process is, how values are combined."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ..distributed.cluster import ClusterInfo
from ..utils.statistics import StatisticsCollector

__all__ = ['Backend']


class Backend:
    """What a :class:`~tfsnippet.TrainLoop` asks of the way it runs, answered once.

    A loop always has a backend (``loop.backend``): a
    :class:`~tfsnippet.backend.LocalBackend` without a ``tf.distribute``
    strategy (the null object: values pass through, every reduction is the
    identity, this process is the chief and the only worker), or a
    :class:`~tfsnippet.backend.DistributedBackend` of a strategy.  It is
    chosen when the loop is entered and handed to the loop's collaborators
    (the metric book, the console, the loop's distribution and its
    :class:`~tfsnippet.backend.Decisions`), so none of them asks whether
    there is a strategy.

    The roles (:attr:`is_chief`, :attr:`worker_index`, :attr:`num_workers`)
    come from one :class:`~tfsnippet.distributed.ClusterInfo`
    (:attr:`cluster`), which holds the one chief rule.

    The methods marked *collective* must be called by every worker at the
    same point of the program under multi-worker training; with one worker
    they communicate nothing.
    """

    # ------------------------------------------------------------ roles
    @property
    def cluster(self) -> ClusterInfo:
        """The description of this process's place in the cluster."""
        raise NotImplementedError()

    @property
    def strategy(self) -> Any:
        """The ``tf.distribute.Strategy``, or ``None`` (no strategy)."""
        raise NotImplementedError()

    @property
    def coordinator(self) -> Any:
        """The ``ClusterCoordinator`` of a ``ParameterServerStrategy``, else ``None``."""
        return None

    @property
    def is_chief(self) -> bool:
        """Whether this process is the chief: the one that prints and writes."""
        return self.worker_index == 0

    @property
    def num_workers(self) -> int:
        """Number of processes running the loop in lockstep."""
        raise NotImplementedError()

    @property
    def worker_index(self) -> int:
        """This process's index among them, the chief's being 0."""
        raise NotImplementedError()

    @property
    def num_replicas(self) -> int:
        """Number of replicas of all workers together."""
        raise NotImplementedError()

    @property
    def num_local_replicas(self) -> int:
        """Number of replicas of this process."""
        raise NotImplementedError()

    @property
    def collectives(self) -> int:
        """Number of cross-worker all-reduces issued so far (0 on one worker)."""
        return 0

    @property
    def holds_replica_values(self) -> bool:
        """Whether :meth:`normalize_metric` may keep a value in a form of its own
        (per-replica, remote); when ``False`` it returns every value as it
        is, so the metric book does not call it."""
        raise NotImplementedError()

    # ------------------------------------------------------------ metrics
    def normalize_metric(self, name: str, value: Any, reduce: str = 'mean') -> Any:
        """Turn a collected metric value into one the metric book can keep.

        Args:
            name: The metric's name, for error messages.
            value: The value collected.
            reduce: ``'mean'`` or ``'sum'`` across replicas.
        """
        raise NotImplementedError()

    def to_host_values(self, values: Sequence[Any]) -> np.ndarray:
        """Reduce kept values to host numbers in one go: one flat float64 array."""
        raise NotImplementedError()

    def all_reduce_sum(self, array: Any) -> np.ndarray:
        """The element-wise sum of `array` (float64) over the workers (*collective*)."""
        raise NotImplementedError()

    def worker_mean(self, value: float) -> float:
        """The mean of `value` over the workers (*collective*): every worker
        reads the same number, e.g. a watched validation metric."""
        return float(self.all_reduce_sum(np.array([value]))[0]) / self.num_workers

    def reduce_statistics(self, stats: Mapping[str, StatisticsCollector]
                          ) -> dict[str, StatisticsCollector]:
        """Merge every worker's statistics into those of all values (*collective*)."""
        raise NotImplementedError()

    def reduce_statistics_and_sum(self, stats: Mapping[str, StatisticsCollector],
                                  extra: Any) -> tuple[dict[str, StatisticsCollector], np.ndarray]:
        """:meth:`reduce_statistics` and the sum of the 1-d array `extra` over the
        workers, in one all-reduce (*collective*)."""
        raise NotImplementedError()

    def agree_any(self, flag: bool) -> bool:
        """Whether any worker passes ``True`` (*collective*)."""
        raise NotImplementedError()

    def broadcast_from_chief(self, value: float) -> float:
        """The chief's `value` on every worker (*collective*)."""
        raise NotImplementedError()

    def barrier(self) -> None:
        """Wait for the other workers (*collective*)."""
        raise NotImplementedError()

    def join(self) -> None:
        """Wait until every step scheduled so far has finished (the
        ``coordinator.join()`` of a ``ParameterServerStrategy``; nothing to
        wait for otherwise), so the variables are settled."""

    # ------------------------------------------------------------ data and variables
    def distribute_data(self, data: Any, seed_of: Callable[..., int]) -> Any:
        """The form of `data` (given to ``iter_steps``) that the loop body receives.

        Args:
            data: The iterable given to ``iter_steps``.
            seed_of: Gives the shuffling seed of an ``ArrayFlow`` that is sharded
                (``seed_of(flow)``, or ``seed_of(flow, task=name)`` for the flow
                of a task of a :class:`~tfsnippet.dataflows.MultiTaskFlow`).
        """
        raise NotImplementedError()

    def check_variables_in_scope(self, variables: Any, arg_name: str) -> None:
        """Check that `variables` belong to the strategy (nothing to check without one)."""
        raise NotImplementedError()

    def build_optimizer(self, optimizer: Any, variables: Iterable[Any]) -> Any:
        """Build a Keras `optimizer` for `variables` where the strategy needs it; return it."""
        raise NotImplementedError()
