"""How a training loop runs under a ``tf.distribute`` strategy, chosen once when it is entered."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import tensorflow as tf

from ...backend.base import Backend
from ...backend.decisions import Decisions
from ...backend.distributed import resolve_backend
from ...dataflows import ArrayFlow
from ...utils.statistics import StatisticsCollector
from ...utils.validation import check_positive_int, short_repr
from ..components.checkpointer import Checkpointer
from ..event_keys import EventKeys
from .cluster_checks import check_cluster_use

if TYPE_CHECKING:  # pragma: no cover
    from .core import TrainLoop

__all__ = ['LoopDistribution', 'check_strategy_args', 'attach_distribution', 'check_graph_mode']

_MAX_SEED = 2 ** 31 - 1


def check_strategy_args(strategy: Any, coordinator: Any) -> tuple[Any, Any]:
    """Check `strategy`/`coordinator` of a ``TrainLoop``; ``None`` takes the strategy in scope.

    Raises:
        TypeError: `strategy` is not a ``tf.distribute.Strategy``, or
            `coordinator` not a ``ClusterCoordinator``.
        ValueError: A ``ParameterServerStrategy`` without `coordinator`.
    """
    if strategy is None and tf.distribute.has_strategy():
        strategy = tf.distribute.get_strategy()
    if strategy is not None and not isinstance(strategy, tf.distribute.Strategy):
        raise TypeError(f'`strategy` must be a tf.distribute.Strategy or None, '
                        f'got {short_repr(strategy)}')
    if coordinator is not None:
        if not isinstance(coordinator, tf.distribute.experimental.coordinator.ClusterCoordinator):
            raise TypeError(f'`coordinator` must be a tf.distribute.experimental.coordinator.'
                            f'ClusterCoordinator or None, got {short_repr(coordinator)}')
        if strategy is None:
            strategy = coordinator.strategy
    elif isinstance(strategy, tf.distribute.experimental.ParameterServerStrategy):
        raise ValueError(
            '`coordinator` is required with a ParameterServerStrategy, got None: pass '
            '`coordinator=tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)`, '
            'the one that schedules the training steps (the loop runs on the coordinator)')
    return strategy, coordinator


def attach_distribution(loop: TrainLoop, strategy: Any, coordinator: Any,
                        clock: Callable[[], float],
                        on_stop: Callable[[str, bool], None]) -> LoopDistribution:
    """The :class:`LoopDistribution` of `loop` on its backend, chosen now.

    `strategy` ``None`` takes the strategy whose scope is entered now; the
    default strategy (or none) means a :class:`~tfsnippet.backend.LocalBackend`.
    `clock` is the loop's own time source, `on_stop` what makes the loop
    stop with a reason (a stop agreed by the workers).

    Raises:
        ValueError: A ``ParameterServerStrategy`` without `coordinator`,
            `param_vars` holding variables created outside the strategy's
            scope, or those of a ``MultiWorkerMirroredStrategy`` without it
            (see :func:`~tfsnippet.scaffold.loop.cluster_checks.check_cluster_use`).
        TypeError: As :class:`~tfsnippet.backend.DistributedBackend`.
        RuntimeError: Graph mode (TF1 style) with a ``ParameterServerStrategy``
            or more than one worker (see :func:`check_graph_mode`).
    """
    backend = resolve_backend(strategy, coordinator)
    check_graph_mode(backend)
    params = loop.param_vars
    if params:
        backend.check_variables_in_scope(params, 'param_vars')
    check_cluster_use(backend, params)
    _build_optimizers(loop, backend)
    return LoopDistribution(loop, backend, clock, on_stop)


def check_graph_mode(backend: Backend) -> None:
    """Refuse, in graph mode (TF1 style), a strategy the loop cannot run there.

    Graph mode supports the strategies of one process (``MirroredStrategy``,
    ``OneDeviceStrategy``, a ``MultiWorkerMirroredStrategy`` of one worker):
    the loop then needs no collective of its own.  A cluster needs the
    loop's cross-worker all-reduces (eager ``strategy.reduce``) or, for a
    ``ParameterServerStrategy``, a ``ClusterCoordinator``: both are eager only.

    Raises:
        RuntimeError: Not executing eagerly, with a ``ParameterServerStrategy``
            or more than one worker.
    """
    if tf.executing_eagerly():
        return
    name = type(backend.strategy).__name__
    if backend.coordinator is not None or isinstance(
            backend.strategy, tf.distribute.experimental.ParameterServerStrategy):
        name = 'ParameterServerStrategy'
        raise RuntimeError(
            f'A TrainLoop under a {name} cannot run in graph mode (TF1 style, '
            f'`tf.compat.v1.Session`): the ClusterCoordinator schedules `tf.function`s '
            f'eagerly only; run the loop in eager mode (do not call '
            f'`tf.compat.v1.disable_eager_execution()` nor enter a `tf.Graph`) and schedule '
            f'the step with `coordinator.schedule(train_step, args=...)`')
    if isinstance(backend.strategy, tf.distribute.MultiWorkerMirroredStrategy):
        name = 'MultiWorkerMirroredStrategy'
    if backend.num_workers > 1:
        raise RuntimeError(
            f'A TrainLoop under a {name} of {backend.num_workers} workers cannot run in graph '
            f'mode (TF1 style, `tf.compat.v1.Session`): the workers agree on metrics, stops '
            f'and the clock with eager all-reduces; run the loop in eager mode (do not call '
            f'`tf.compat.v1.disable_eager_execution()` nor enter a `tf.Graph`; step with a '
            f'`tf.function` calling `strategy.run`), or use a MirroredStrategy of the devices '
            f'of one process in graph mode')


def _build_optimizers(loop: TrainLoop, backend: Backend) -> None:
    """Build the Keras optimizers among the checkpointed objects for `param_vars`.

    Under a strategy they must be built in its scope before the first
    ``strategy.run`` (and before a checkpoint is restored into them); an
    optimizer made outside the scope is refused, naming its variables.
    """
    params = loop.param_vars
    for checkpointer in loop.components_of(Checkpointer):
        for obj in checkpointer.save_objects.values():
            if _is_keras_optimizer(obj):
                backend.build_optimizer(obj, params or [])


def _is_keras_optimizer(obj: Any) -> bool:
    return (type(obj).__module__.split('.')[0] in ('keras', 'tf_keras')
            and all(hasattr(obj, a) for a in ('build', 'built', 'apply_gradients', 'variables')))


class LoopDistribution:
    """What a :class:`~tfsnippet.TrainLoop` does differently under a strategy.

    Made by the loop when it is entered (``loop.distribution``;
    ``loop.backend`` is its backend: a :class:`~tfsnippet.backend.LocalBackend`
    without a strategy, where all of the below is the identity), and kept
    after it is left.  It

    * turns the data of :meth:`~tfsnippet.TrainLoop.iter_steps` into
      per-replica batches (:meth:`distribute_data`, through the backend);
    * under multi-worker training (``backend.num_workers > 1``) merges the
      printed statistics of all workers (one all-reduce per
      ``print_logs``, :meth:`reduce_printed`) and holds a **sync point** at
      the end of each epoch and whenever :attr:`sync_steps` steps have run
      since the last one: one all-reduce that agrees on every decision of
      :attr:`decisions` (a stop requested on any worker,
      :meth:`~tfsnippet.TrainLoop.request_stop`; a preemption signal
      received by any worker; the chief's clock; those of components).

    The loop hands the same backend to its other collaborators when it is
    entered: the metric book keeps ``PerReplica``/``RemoteValue`` metrics
    without a device sync (reduced across replicas at print time) and
    averages a watched metric (the validation metric, a loss guard's)
    across the workers, so early stopping, reduce-on-plateau and loss
    guards decide alike everywhere; the console drops the lines of every
    worker but the chief (unless a ``print_func`` other than the builtin
    ``print`` was given).

    The sync point of an epoch rides on the all-reduce of the epoch's
    ``print_logs`` (one called outside the step loop), so an epoch that
    prints its statistics costs one collective, like a hand-written loop
    that prints a mean loss: what that print agreed on is applied at the end
    of the epoch (``AFTER_EPOCH``, where a preemption is raised), unless a
    step ran in between; without such a print, the end of the epoch holds
    its own sync point, unless one was held at that step already.  A stop
    requested (or a signal received) after the epoch's print therefore
    waits for the next sync point: :attr:`sync_steps` steps into the next
    epoch, or its end.

    Every worker must run the same loop: the same data sizes, and
    ``print_logs`` and ``collect_metrics`` of a watched metric at the same
    points (they are collectives there); ``collect_results`` values are
    printed by the chief as they are (not merged).

    Under multi-worker training a stop request therefore takes effect at
    the next sync point, on every worker at the same step; ``loop.clock``
    (which the ``every=`` schedules read: ``checkpoint_secs``, hooks every
    N seconds) is the chief's clock as of the last sync point, so every
    worker sees a time schedule due at the same step.  Timers and the ETA
    keep the local clock.

    In graph mode (TF1 style, a ``tf.compat.v1.Session``) the loop runs
    under the strategies of one process (``MirroredStrategy``,
    ``OneDeviceStrategy``): the data of ``iter_steps`` is yielded
    unchanged (feed the global batch; each replica takes its share with
    :func:`~tfsnippet.backend.replica_slice`), the metrics are the numbers
    ``session.run`` returns, and checkpoints and early stopping restore
    every device's copy of a mirrored variable.  A
    ``MultiWorkerMirroredStrategy`` of several workers and a
    ``ParameterServerStrategy`` are refused at entry
    (``check_graph_mode``): their loops need eager mode.

    Under a ``ParameterServerStrategy`` the loop runs on the coordinator:
    the data of ``iter_steps`` is yielded unchanged (schedule the step with
    ``coordinator.schedule(step_fn, args=batch)``, or iterate a per-worker
    dataset of ``coordinator.create_per_worker_dataset`` yourself), the
    step counter is the loop's own (the coordinator's: asynchronous workers
    lose updates of ``optimizer.iterations``); the end of a step loop (when
    ``iter_steps`` runs out or stops, not when the code breaks out of it or
    raises) and a checkpoint wait for the scheduled steps
    (``coordinator.join()``), so a validation right after the step loop sees
    the weights of the epoch.
    """

    #: The default of :attr:`sync_steps`.
    DEFAULT_SYNC_STEPS = 100

    def __init__(self, loop: TrainLoop, backend: Backend, clock: Callable[[], float],
                 on_stop: Callable[[str, bool], None]):
        self._loop = loop
        self._backend = backend
        self._multi = backend.num_workers > 1
        self._local_clock = clock
        self._on_stop = on_stop
        self._pending_stop: str | None = None
        self._pending_persists = True
        self._data: dict[int, tuple[Any, Any]] = {}   # id(source) -> (source, distributed)
        self._now = 0.
        self._detached = False
        self._sync_steps = self.DEFAULT_SYNC_STEPS
        self._synced_step = -1   # the step of the last sync point
        # a sync point folded into an epoch's print: (step, summed sync vector), to apply
        self._agreed: tuple[int, np.ndarray] | None = None
        self._decisions = Decisions(backend, schedule=self._decide_at_next_boundary)
        self._decisions.register('clock', read=clock, apply=self._set_clock, rule='chief')
        self._decisions.register('stop', read=lambda: self._pending_stop is not None,
                                 apply=self._apply_stop)
        self._schedule_clock = self.agreed_clock if self._multi else clock
        if self._multi:
            self._sync(loop)   # the chief's clock, before any schedule is reset
            loop.events.on(EventKeys.AFTER_STEP, self._after_step, owner=self)
            loop.events.on(EventKeys.AFTER_EPOCH, self._after_epoch, owner=self)

    @property
    def backend(self) -> Backend:
        """The loop's :class:`~tfsnippet.backend.Backend`."""
        return self._backend

    @property
    def decisions(self) -> Decisions:
        """The decisions agreed at the sync points (``'clock'``, ``'stop'``, and
        those the components register, e.g. the checkpointer's ``'preempt'``)."""
        return self._decisions

    @property
    def schedule_clock(self) -> Callable[[], float]:
        """The time source of schedules: the loop's clock, or under multi-worker
        training the chief's clock as of the last sync point."""
        return self._schedule_clock

    @property
    def sync_steps(self) -> int:
        """The most steps between two sync points under multi-worker training (100; settable).

        Each sync point is one all-reduce (except the one an epoch's print
        carries); a stop request or a time schedule waits for the next one.
        A sync point is held after the step that ends :attr:`sync_steps`
        steps since the last one (the end of an epoch is one, too).
        """
        return self._sync_steps

    @sync_steps.setter
    def sync_steps(self, value: int) -> None:
        self._sync_steps = check_positive_int(value, 'sync_steps')

    @property
    def pending_stop(self) -> str | None:
        """The reason of a stop requested on this worker and not yet agreed on, or ``None``."""
        return self._pending_stop

    def detach(self) -> None:
        """Stop taking part in the loop's events (when it is left); once."""
        if self._detached:
            return
        self._detached = True
        self._loop.events.remove_owned(self)
        self._loop.events.remove_owned((self, 'decide'))

    # ------------------------------------------------------------ decisions
    def defer_stop(self, reason: str | None, persist: bool = True) -> bool:
        """Whether a stop request must wait for the next sync point (multi-worker
        training); it is then noted, to be agreed on there (unless `persist`, a
        checkpoint taken after it does not keep it)."""
        if not self._multi:
            return False
        if self._pending_stop is None:
            self._pending_stop = reason or 'stop requested'
            self._pending_persists = persist
        return True

    def agreed_clock(self) -> float:
        """The chief's clock at the last sync point (``loop.clock`` under multi-worker training)."""
        return self._now

    def _set_clock(self, now: float) -> None:
        self._now = now

    def _apply_stop(self, agreed: float) -> None:
        if agreed:
            reason = self._pending_stop or 'stop requested by another worker'
            persist = self._pending_persists or self._pending_stop is None
            self._pending_stop = None
            self._on_stop(reason, persist)

    def _decide_at_next_boundary(self) -> None:
        """A decision was taken on this worker alone: apply it at the next step
        or epoch boundary (once)."""
        owner = (self, 'decide')
        loop = self._loop

        def decide(_: Any) -> None:
            loop.events.remove_owned(owner)
            self._decisions.sync()

        loop.events.on(EventKeys.AFTER_STEP, decide, owner=owner)
        loop.events.on(EventKeys.AFTER_EPOCH, decide, owner=owner)

    def _after_step(self, loop: TrainLoop) -> None:
        if loop.step - self._synced_step >= self._sync_steps:
            self._sync(loop)

    def _after_epoch(self, loop: TrainLoop) -> None:
        # the sync point of the epoch: the one its print carried, else one of its own
        agreed, self._agreed = self._agreed, None
        if agreed is not None and agreed[0] == loop.step:
            self._apply(loop, agreed[1])
        elif self._synced_step != loop.step:
            self._sync(loop)

    def reduce_printed(self, stats: dict[str, StatisticsCollector],
                       within_step: bool) -> dict[str, StatisticsCollector]:
        """The statistics of ``print_logs`` merged across the workers (one
        all-reduce under multi-worker training; `stats` as they are otherwise).

        An epoch's print (outside the step loop) carries the decisions in
        the same all-reduce; they are applied at ``AFTER_EPOCH``, if no step
        ran in between.  Every worker prints at the same points, so every
        worker takes the same path.
        """
        if not self._multi:
            return stats
        if within_step:
            return self._backend.reduce_statistics(stats)
        merged, total = self._backend.reduce_statistics_and_sum(stats, self._decisions.vector())
        self._agreed = (self._loop.step, total)
        return merged

    def _sync(self, loop: TrainLoop) -> None:
        """A sync point: one all-reduce of the decisions, then their outcome applied."""
        self._apply(loop, self._backend.all_reduce_sum(self._decisions.vector()))

    def _apply(self, loop: TrainLoop, total: np.ndarray) -> None:
        """Act on a sync point's summed vector, the same on every worker."""
        self._synced_step = loop.step
        self._decisions.apply(total)

    def steps_ended(self) -> None:
        """Called when a step loop of :meth:`~tfsnippet.TrainLoop.iter_steps` ends
        normally: under a ``ParameterServerStrategy``, wait for the steps it
        scheduled (``coordinator.join()``), so the code after the step loop
        (a validation) sees the weights they trained."""
        self._backend.join()

    # ------------------------------------------------------------ data
    def distribute_data(self, data: Any) -> Any:
        """The form of `data` the loop body receives (cached per `data`): see
        :meth:`Backend.distribute_data <tfsnippet.backend.DistributedBackend.distribute_data>`;
        a shuffled ``ArrayFlow`` sharded among workers draws its seed on the
        chief (or takes the saved one when resuming).

        Raises:
            ValueError, TypeError: As the backend's ``distribute_data``.
        """
        cached = self._data.get(id(data))
        if cached is not None and cached[0] is data:
            return cached[1]
        out = self._backend.distribute_data(data, self._seed)
        if out is not data:
            self._data[id(data)] = (data, out)
        return out

    def _seed(self, flow: ArrayFlow, task: str | None = None) -> int:
        """The shuffling seed of a sharded flow: the saved one when resuming, else one
        drawn from the flow's generator on the chief (sent to every worker); `task`
        names the task of a multi-task flow whose flow it is."""
        loop = self._loop
        states, index = loop.progress.flow_states, len(loop._iter.dataflows)
        state = states[index] if index < len(states) else None
        if task is not None:   # the position of one task's flow, in a multi-task flow's
            flows = state.get('flows') if isinstance(state, dict) else None
            state = flows.get(task) if isinstance(flows, dict) else None
        start = state.get('start') if isinstance(state, dict) else None
        if isinstance(start, dict) and isinstance(start.get('seed'), int):
            return int(start['seed'])
        rng = getattr(flow, '_rng', None)
        draw: Callable[..., Any] = getattr(rng, 'integers', None) or getattr(rng, 'randint')
        seed = float(draw(_MAX_SEED))
        return int(self._backend.broadcast_from_chief(seed))
