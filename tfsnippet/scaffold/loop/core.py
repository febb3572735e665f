"""The training loop: counters, generators and events, composed of its collaborators."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ...backend.base import Backend
from ...backend.decisions import Decisions
from ...backend.local import LocalBackend
from ...utils.concepts import DisposableContext
from ...utils.events import EventSource
from ...utils.text import typed_repr
from ...tfops.tf_vars import normalize_variables
from ..components.base import LoopComponent
from ..checkpoint.restore import restore_loop
from ..event_keys import LOOP_EVENT_KEYS, EventKeys
from ..metrics.book import MetricBook
from ..metrics.console import Console, DefaultMetricFormatter, MetricFormatter
from . import facades, reporting
from .build import DEFAULT_SUMMARY_SKIP_PATTERN, build_components
from .distribution import LoopDistribution, attach_distribution, check_strategy_args
from .iteration import LoopIteration
from .progress import LoopProgress, check_limit, check_state_field
from .registry import C, LoopComponents
from .reporting import LoopMetrics

__all__ = ['TrainLoop']


class TrainLoop(DisposableContext):
    """Keeps the books of a training loop whose step the user writes.

    The loop owns the epoch and step counters, fires events around each
    epoch and step, collects metrics and prints them with an ETA, and keeps
    the best value of a validation metric; early stopping, checkpoints and
    summaries are components that its feature arguments plug in (see
    :func:`~tfsnippet.scaffold.loop.build.build_components` for them).  It
    works the same for TF1-style graph code (``session.run`` in the body)
    and TF2 eager code (``tf.function`` steps, Keras 3 models)::

        with spt.TrainLoop(model.trainable_variables, max_epoch=10) as loop:
            for epoch in loop.iter_epochs():
                for step, (x, y) in loop.iter_steps(train_data):
                    loop.collect_metrics(loss=train_step(x, y))
                with loop.timeit('valid_time'):
                    loop.collect_metrics(valid_loss=evaluate(valid_data))
                loop.print_logs()

    Events (``loop.events``) fire around the ``with`` block, each epoch and
    each step; :class:`EventKeys` lists them in order, with what fires on
    ``break``, an exception and :meth:`request_stop`.

    Under a ``tf.distribute`` strategy (`strategy`, or the one whose scope
    is entered) the same script runs on one device, many devices and many
    workers: ``iter_steps`` yields per-replica batches for ``strategy.run``,
    ``collect_metrics`` takes ``PerReplica`` values, only the chief
    (:attr:`is_chief`) prints and writes, and decisions are agreed across
    workers; see :class:`~tfsnippet.scaffold.loop.distribution.LoopDistribution`.

    The loop is composed of collaborators, each of which it hands the
    :attr:`backend` chosen when it is entered: its metrics
    (:class:`~tfsnippet.scaffold.loop.reporting.LoopMetrics`: the
    :attr:`metric_book`, the :attr:`console`, the best validation metric),
    its components (:class:`~tfsnippet.scaffold.loop.registry.LoopComponents`),
    its :attr:`progress` and its :attr:`distribution`.  The constructor's
    feature keywords (``checkpoint_*``, ``summary_*``, ``early_stopping*``,
    ``warm_start``, ``export_best``) are shortcuts for components; new
    features are components, added with :meth:`add_component`.

    Args:
        param_vars: The variables being trained (list or ``{name: var}``).
        var_groups: Name prefixes that group :meth:`print_training_summary`.
        show_eta: Add ``ETA ...`` to tagged log lines when it can be estimated.
        print_func: Receives every line the loop prints.
        max_epoch: Stop after this many epochs (``None``: no limit).
        max_step: Stop after this many steps in all (``None``: no limit).
        metric_formatter: Orders and formats the metrics in log lines.
        valid_metric_name: The metric whose best value is tracked (``None``: none).
        valid_metric_smaller_is_better: ``None`` infers it from the name
            (``acc``/``accuracy`` endings are larger-is-better).
        clock: Time source for timers, the ETA and ``every=`` schedules.
        strategy: A ``tf.distribute.Strategy`` (``None``: the one in scope
            when the loop is made or entered, if any).
        coordinator: The ``ClusterCoordinator`` of a ``ParameterServerStrategy``.
        checkpoint_*, summary_*, early_stopping*, restore_checkpoint, warm_start, export_best:
            The feature arguments, see ``build_components``; ``checkpoint_async=True``
            writes checkpoints in the background, the loop waiting for a host copy.
    """

    def __init__(self, param_vars: Sequence[Any] | Mapping[str, Any] | None = None,
                 var_groups: Sequence[str] | None = None, show_eta: bool = True,
                 print_func: Callable[[str], Any] = print, max_epoch: int | None = None,
                 max_step: int | None = None, metric_formatter: MetricFormatter | None = None,
                 checkpoint_dir: str | None = None, checkpoint_epoch_freq: int | None = None,
                 checkpoint_max_to_keep: int | None = None,
                 checkpoint_save_objects: Mapping[str, Any] | None = None,
                 restore_checkpoint: bool | str = True, summary_dir: str | None = None,
                 summary_writer: Any = None, summary_graph: Any = None,
                 summary_metric_prefix: str = 'metrics/',
                 summary_skip_pattern: str | re.Pattern[str] | None =
                 DEFAULT_SUMMARY_SKIP_PATTERN,
                 summary_commit_freqs: Mapping[str, int] | None = None,
                 valid_metric_name: str | None = 'valid_loss',
                 valid_metric_smaller_is_better: bool | None = None,
                 early_stopping: bool = False, *, early_stopping_patience: int | None = None,
                 checkpoint_step_freq: int | None = None, checkpoint_secs: float | None = None,
                 warm_start: Any = None, summary_histogram_freq: int | None = None,
                 checkpoint_keep_best: bool | str = False, export_best: str | None = None,
                 clock: Callable[[], float] = time.perf_counter, checkpoint_async: bool = False,
                 strategy: Any = None, coordinator: Any = None):
        self._param_vars = normalize_variables(param_vars, 'param_vars')
        self._dist_args = check_strategy_args(strategy, coordinator)
        if var_groups is not None and (isinstance(var_groups, str) or
                                       not all(isinstance(g, str) for g in var_groups)):
            raise TypeError(f'`var_groups` must be a list of name prefixes, got {var_groups!r}')
        if not callable(clock):
            raise TypeError(f'`clock` must be a callable returning seconds, got {clock!r}')
        if valid_metric_name is not None and not isinstance(valid_metric_name, str):
            raise TypeError(f'`valid_metric_name` must be a str or None, got {valid_metric_name!r}')
        mode = ('auto' if valid_metric_smaller_is_better is None
                else 'min' if valid_metric_smaller_is_better else 'max')
        self._var_groups = None if var_groups is None else list(var_groups)
        self._clock = clock
        self._progress = LoopProgress()
        self._events = EventSource(LOOP_EVENT_KEYS, counters=self)
        # the collaborators: iteration (counters, generators, stop), metrics,
        # components, and the distribution (the backend: none until entered)
        self._iter = LoopIteration(self, self._progress, clock, self._require_entered,
                                   check_limit('max_epoch', max_epoch),
                                   check_limit('max_step', max_step))
        self._metrics = LoopMetrics(self, self._iter, print_func,
                                    metric_formatter or DefaultMetricFormatter(), show_eta,
                                    clock, valid_metric_name or None, mode)
        self._iter.metrics = self._metrics
        self._components = LoopComponents(self)
        self._dist = LoopDistribution(self, LocalBackend(), clock, self._iter.stop)
        for component in build_components(
                self._param_vars, valid_metric_name=valid_metric_name or None,
                valid_metric_mode=mode, early_stopping=early_stopping,
                early_stopping_patience=early_stopping_patience, checkpoint_dir=checkpoint_dir,
                checkpoint_epoch_freq=checkpoint_epoch_freq, checkpoint_secs=checkpoint_secs,
                checkpoint_step_freq=checkpoint_step_freq, export_best=export_best,
                checkpoint_max_to_keep=checkpoint_max_to_keep, summary_dir=summary_dir,
                checkpoint_save_objects=checkpoint_save_objects, summary_graph=summary_graph,
                restore_checkpoint=restore_checkpoint, checkpoint_keep_best=checkpoint_keep_best,
                summary_writer=summary_writer, summary_metric_prefix=summary_metric_prefix,
                summary_skip_pattern=summary_skip_pattern, checkpoint_async=checkpoint_async,
                summary_commit_freqs=summary_commit_freqs, warm_start=warm_start,
                summary_histogram_freq=summary_histogram_freq):
            self.add_component(component)

    def __repr__(self) -> str:
        return f'TrainLoop(epoch={self.epoch}, step={self.step})'

    # ---------------------------------------------------------------- properties
    param_vars = property(lambda self: self._param_vars, doc='The trainable parameters.')
    var_groups = property(lambda self: self._var_groups, doc='Name prefixes of the summary.')
    events = property(lambda self: self._events, doc='The event source (loop keys only).')
    epoch = property(lambda self: self._progress.epoch, doc='Epoch counter: 0, then 1, 2...')
    step = property(lambda self: self._progress.step, doc='Global step counter: 0, then 1, 2...')
    progress = property(lambda self: self._progress, doc='The counters, as a LoopProgress.')
    step_data = property(lambda self: self._iter.step_data, doc='The batch of the current step.')
    steps_per_epoch = property(lambda self: self._progress.steps_per_epoch,
                               doc='The mean number of steps of the finished epochs.')
    within_epoch = property(lambda self: self._iter.within_epoch, doc='Whether an epoch is open.')
    within_step = property(lambda self: self._iter.within_step,
                           doc='Whether a step loop is open.')
    clock = property(lambda self: self._dist.schedule_clock, doc="The time source of schedules "
                     "(under multi-worker training the chief's, see LoopDistribution).")
    distribution = property(lambda self: self._dist,
                            doc='The LoopDistribution (its backend chosen when entered).')
    backend: Backend = property(  # type: ignore[assignment]
        lambda self: self._dist.backend,
        doc='The Backend: a LocalBackend until entered, then the one chosen then (kept after).')
    decisions: Decisions = property(  # type: ignore[assignment]
        lambda self: self._dist.decisions,
        doc='The decisions agreed across workers at the sync points (see Decisions).')
    is_chief = property(lambda self: self._dist.backend.is_chief,
                        doc='Whether this process prints and writes (True without a strategy).')
    stop_requested = property(lambda self: self._iter.stop_requested,
                              doc='Whether a stop was asked.')
    stop_reason = property(lambda self: self._iter.stop_reason, doc='Why the epoch loop ended.')
    components = property(lambda self: self._components.as_tuple(),
                          doc='The plugged-in components, in registration order.')
    max_epoch = property(lambda self: self._iter.max_epoch,
                         lambda self, v: setattr(self._iter, 'max_epoch',
                                                 check_limit('max_epoch', v)),
                         doc='The maximum epoch counter; settable, ``None`` for no limit.')
    max_step = property(lambda self: self._iter.max_step,
                        lambda self, v: setattr(self._iter, 'max_step', check_limit('max_step', v)),
                        doc='The maximum step counter; settable, ``None`` for no limit.')
    console: Console = property(  # type: ignore[assignment]
        lambda self: self._metrics.console, doc='The console line (tag, ETA, output).')
    metric_book: MetricBook = property(  # type: ignore[assignment]
        lambda self: self._metrics.book, doc='The one book of collected metrics.')
    valid_metric_name = property(
        lambda self: self._metrics.valid_monitor.name if self._metrics.valid_monitor else None,
        doc='The name of the validation metric, or ``None`` if not tracked.')
    valid_metric_smaller_is_better = property(
        lambda self: (self._metrics.valid_monitor.mode == 'min'
                      if self._metrics.valid_monitor else None),
        doc='Whether a smaller validation metric is better.')
    best_valid_metric = property(
        lambda self: self._metrics.valid_monitor.best if self._metrics.valid_monitor else None,
        doc='The best validation metric so far (never NaN), or ``None``.')

    @property
    def print_func(self) -> Callable[[str], Any]:
        """The function receiving every printed line; settable."""
        return self._metrics.console.print_func

    @print_func.setter
    def print_func(self, func: Callable[[str], Any]) -> None:
        self._metrics.console.print_func = func

    @property
    def results(self) -> dict[str, float]:
        """The final results recorded by :meth:`collect_results`."""
        return dict(self._metrics.results)

    # ------------------------------------------------------------ control
    def request_stop(self, reason: str | None = None, *, resumable: bool = False) -> None:
        """Ask the loop to stop at the next step or epoch boundary, saying `reason`
        (under multi-worker training: at the next sync point, on every worker).
        A later checkpoint keeps the stop (a resume trains no further) unless
        `resumable` (a time budget: the next start goes on training)."""
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f'`reason` must be a str or None, got {reason!r}')
        persist = resumable is not True
        if not self._iter.stop_requested and not self._dist.defer_stop(reason, persist):
            self._iter.stop(reason or 'stop requested', persist)

    # ------------------------------------------------------------ components
    def component(self, role: str) -> Any:
        """The first plugged-in component with this `role` (``'checkpointer'``...), or None."""
        return self._components.by_role(role)

    def components_of(self, kind: type[C]) -> list[C]:
        """The plugged-in components that are instances of `kind`, in registration order."""
        return self._components.of_type(kind)

    def add_component(self, component: LoopComponent) -> None:
        """Plug `component` in, before entering (needed for a resumed state to
        reach it) or inside the ``with`` block (entered at once).

        Raises:
            TypeError: `component` is not a :class:`LoopComponent`.
            ValueError: It is added twice, or another has the same `state_key`.
            RuntimeError: The loop has been left, or an epoch loop is open.
        """
        if not isinstance(component, LoopComponent):
            raise TypeError(f'`component` must be a LoopComponent, got {component!r}')
        if self._has_entered and not self._is_entered:
            raise RuntimeError('Components cannot be added to a loop that has been left')
        if self._iter.within_epoch:
            raise RuntimeError('Components must be added outside of the epoch loop')
        self._components.add(component, entered=self._is_entered)

    def state_dict(self) -> dict[str, Any]:
        """The loop's persistent state as plain data (for checkpoints): counters, the
        best validation metric, the components' states and, inside an epoch, how
        far it went, where each DataFlow of :meth:`iter_steps` is and the epoch's
        statistics so far (``'epoch_metrics'``, see :meth:`LoopMetrics.state_dict`)."""
        state = self._progress.state_dict(self._iter.dataflows)
        monitor = self._metrics.valid_monitor
        state['best_valid_metric'] = monitor.best if monitor else None
        state['valid_monitor'] = monitor.state_dict() if monitor else None
        state['stop_reason'] = self._iter.stop_reason if self._iter.stop_persists else None
        state['components'] = self._components.state_dict()
        if state['epoch_steps'] is not None:   # inside an epoch: its statistics so far
            state['epoch_metrics'] = self._metrics.state_dict()
        return state

    def check_state_dict(self, state: Any) -> None:
        """Check that :meth:`load_state_dict` can take `state` (a checkpoint's), changing
        nothing: a checkpoint whose loop state it refuses is skipped on resume as a
        damaged one is.

        Raises:
            ValueError: A field is missing or of the wrong type (the message names it).
        """
        if not isinstance(state, Mapping):
            raise ValueError(f'the loop state must be a dict, got {typed_repr(state)}')
        self._progress.check_state_dict(state)
        check_state_field(state, 'best_valid_metric', 'number', required=True)
        check_state_field(state, 'stop_reason', 'str')
        check_state_field(state, 'components', 'dict')
        check_state_field(state, 'valid_monitor', 'dict')
        monitor = state.get('valid_monitor')
        if monitor is not None:
            check_state_field(monitor, 'best', 'number', required=True, within='valid_monitor')
            check_state_field(monitor, 'wait', 'count', required=True, nullable=False,
                              within='valid_monitor')

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put back a state from :meth:`state_dict`, before any epoch is opened
        (`KeyError` for a missing key, `RuntimeError` inside an epoch)."""
        missing = [k for k in ('epoch', 'step', 'best_valid_metric') if k not in state]
        if missing:
            raise KeyError(f'`state` lacks the required keys {missing}: got {sorted(state)}')
        if self._iter.within_epoch:
            raise RuntimeError('`load_state_dict()` cannot be called while an epoch loop is open')
        self._progress.load_state_dict(state)
        partial = state.get('epoch_metrics')
        # an epoch to continue goes on from its statistics so far (a checkpoint of an
        # earlier version has none: the epoch's statistics then start at the resume);
        # under multi-worker training each worker kept its own, and only the chief's
        # are saved: the resumed epoch's statistics start at the resume there
        if partial is not None and self._progress.resume_epoch_steps is not None and \
                self._dist.backend.num_workers == 1:
            self._metrics.load_state_dict(partial)
        monitor = self._metrics.valid_monitor
        if monitor is not None:
            monitor.load_state_dict(state.get('valid_monitor') or
                                    {'best': state['best_valid_metric'], 'wait': 0})
        if state.get('stop_reason') is not None:  # a stopped run stays stopped (everywhere)
            self._iter.stop(str(state['stop_reason']))
        self._components.load_state_dict(state.get('components') or {})

    # ------------------------------------------------------------ metrics (see LoopMetrics)
    collect_metrics = reporting.collect_metrics
    watch_metric = reporting.watch_metric
    timeit = reporting.timeit
    metric_collector = reporting.metric_collector
    println = reporting.println
    collect_results = reporting.collect_results
    notice = reporting.notice
    print_logs = reporting.print_logs
    print_training_summary = reporting.print_training_summary
    training_summary_printed = property(reporting.training_summary_printed)
    get_progress = reporting.get_progress
    get_eta = reporting.get_eta

    # ------------------------------------------------------------ feature shortcuts
    use_early_stopping = property(facades.use_early_stopping)
    summary_writer = property(facades.summary_writer)
    checkpoint_saver = property(facades.checkpoint_saver)
    make_checkpoint = facades.make_checkpoint
    export_best = facades.export_best
    add_summary = facades.add_summary

    # ----------------------------------------------------------- enter / exit
    def _enter(self) -> TrainLoop:
        entered: list[LoopComponent] = []
        self._dist = attach_distribution(self, *self._dist_args, clock=self._clock,
                                         on_stop=self._iter.stop)
        self._metrics.enter(self._dist.backend)
        try:
            # the loop resumes its checkpoint first (variables, agreement across
            # workers, its own and its components' states), then enters them
            restore_loop(self)
            self._components.enter(entered)
            self._metrics.start_eta()
            self._events.fire(EventKeys.ENTER_LOOP, self)
        except BaseException as e:
            try:
                self._components.exit(entered, e)
            finally:
                self._leave()
            raise
        return self

    def _leave(self) -> None:
        # the distribution is kept after the exit: `is_chief`, `backend` stay valid
        self._dist.detach()
        self._metrics.leave()

    def _exit(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        try:
            self._events.reverse_fire(EventKeys.EXIT_LOOP, self)
        finally:
            try:
                self._components.exit(None, exc_val)
            finally:
                self._leave()

    # ------------------------------------------------------------ iterations
    def iter_epochs(self) -> Iterator[int]:
        """Iterate through the epochs, yielding the epoch counter (from 1), until
        `max_epoch` epochs or `max_step` steps are done or a stop is requested
        (`RuntimeError` outside the ``with`` block or inside another epoch loop)."""
        return self._iter.iter_epochs()

    def iter_steps(self, data_generator: Iterable[Any] | None = None) -> Iterator[Any]:
        """Iterate through the steps of the current epoch, yielding the step counter
        (from 1), or ``(step, batch)`` with `data_generator`: any iterable (a list,
        a DataFlow, a ``tf.data.Dataset`` in eager mode), iterated anew each epoch,
        one item per step, required without `max_step`.  Under a strategy a
        DataFlow or Dataset becomes per-replica batches (see
        :meth:`LoopDistribution.distribute_data`).

        Raises:
            RuntimeError: No epoch loop is open, a step loop is already open,
                or neither `data_generator` nor `max_step` is given.
            TypeError: `data_generator` is not iterable.
        """
        return self._iter.iter_steps(data_generator)
