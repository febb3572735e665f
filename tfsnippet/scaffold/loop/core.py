"""The training loop: counters, generators and events, composed of its collaborators."""

from __future__ import annotations

import contextlib
import itertools
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ...backend.base import Backend
from ...backend.decisions import Decisions
from ...backend.local import LocalBackend
from ...dataflows import DataFlow
from ...utils.concepts import DisposableContext
from ...utils.events import EventSource, Every
from ...utils.statistics import StatisticsCollector
from ...utils.tf_vars import normalize_variables
from ..components.base import LoopComponent
from ..event_keys import LOOP_EVENT_KEYS, EventKeys
from ..metrics.book import MetricBook
from ..metrics.console import Console, DefaultMetricFormatter, MetricFormatter
from .build import DEFAULT_SUMMARY_SKIP_PATTERN, build_components
from .distribution import LoopDistribution, attach_distribution, check_strategy_args
from .progress import LoopProgress, check_limit
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
        self._max_epoch = check_limit('max_epoch', max_epoch)
        self._max_step = check_limit('max_step', max_step)
        self._clock = clock
        self._progress = LoopProgress()
        self._events = EventSource(LOOP_EVENT_KEYS, counters=self)
        # live handler lists of the events fired on every step, checked inline
        self._before_step_handlers = self._events.handlers(EventKeys.BEFORE_STEP)
        self._after_step_handlers = self._events.handlers(EventKeys.AFTER_STEP)
        self._time_metrics_handlers = self._events.handlers(EventKeys.TIME_METRICS_COLLECTED)
        self._metrics = LoopMetrics(self, print_func,
                                    metric_formatter or DefaultMetricFormatter(), show_eta,
                                    clock, valid_metric_name or None, mode)
        self._components = LoopComponents(self)
        # the backend of no strategy until the loop is entered, where it is chosen
        self._dist = LoopDistribution(self, LocalBackend(), clock, self._stop_agreed)
        self._stop_reason: str | None = None
        self._stop_requested = False
        self._dataflows: list[DataFlow] = []   # DataFlows given to iter_steps, in order
        self._within_epoch = self._within_step = False
        self._step_data: Any = None
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
    step_data = property(lambda self: self._step_data, doc='The batch of the current step.')
    steps_per_epoch = property(lambda self: self._progress.steps_per_epoch,
                               doc='The mean number of steps of the finished epochs.')
    within_epoch = property(lambda self: self._within_epoch, doc='Whether an epoch is open.')
    within_step = property(lambda self: self._within_step, doc='Whether a step loop is open.')
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
    stop_requested = property(lambda self: self._stop_requested, doc='Whether a stop was asked.')
    stop_reason = property(lambda self: self._stop_reason, doc='Why the epoch loop ended.')
    components = property(lambda self: self._components.as_tuple(),
                          doc='The plugged-in components, in registration order.')
    max_epoch = property(lambda self: self._max_epoch,
                         lambda self, v: setattr(self, '_max_epoch', check_limit('max_epoch', v)),
                         doc='The maximum epoch counter; settable, ``None`` for no limit.')
    max_step = property(lambda self: self._max_step,
                        lambda self, v: setattr(self, '_max_step', check_limit('max_step', v)),
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
    def request_stop(self, reason: str | None = None) -> None:
        """Ask the loop to stop at the next step or epoch boundary, saying `reason`
        (under multi-worker training: at the next sync point, on every worker)."""
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f'`reason` must be a str or None, got {reason!r}')
        if not self._stop_requested and not self._dist.defer_stop(reason):
            self._stop_requested = True
            self._stop_reason = reason or 'stop requested'

    def _stop_agreed(self, reason: str) -> None:
        # the workers agreed on a stop (called by the loop's distribution)
        self._stop_requested, self._stop_reason = True, reason

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
        if self._within_epoch:
            raise RuntimeError('Components must be added outside of the epoch loop')
        self._components.add(component, entered=self._is_entered)

    def state_dict(self) -> dict[str, Any]:
        """The loop's persistent state as plain data (for checkpoints): counters, the
        best validation metric, the components' states and, inside an epoch, how
        far it went and where each DataFlow of :meth:`iter_steps` is."""
        state = self._progress.state_dict(self._dataflows)
        monitor = self._metrics.valid_monitor
        state['best_valid_metric'] = monitor.best if monitor else None
        state['valid_monitor'] = monitor.state_dict() if monitor else None
        state['stop_reason'] = self._stop_reason if self._stop_requested else None
        state['components'] = self._components.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put back a state from :meth:`state_dict`, before any epoch is opened
        (`KeyError` for a missing key, `RuntimeError` inside an epoch)."""
        missing = [k for k in ('epoch', 'step', 'best_valid_metric') if k not in state]
        if missing:
            raise KeyError(f'`state` lacks the required keys {missing}: got {sorted(state)}')
        if self._within_epoch:
            raise RuntimeError('`load_state_dict()` cannot be called while an epoch loop is open')
        self._progress.load_state_dict(state)
        monitor = self._metrics.valid_monitor
        if monitor is not None:
            monitor.load_state_dict(state.get('valid_monitor') or
                                    {'best': state['best_valid_metric'], 'wait': 0})
        if state.get('stop_reason') is not None:  # a stopped run stays stopped (everywhere)
            self._stop_requested, self._stop_reason = True, str(state['stop_reason'])
        self._components.load_state_dict(state.get('components') or {})

    # ------------------------------------------------------------ metrics
    def collect_metrics(self, metrics: Mapping[str, Any] | None = None, *,
                        reduce: str | Mapping[str, str] | None = None, **kwargs: Any) -> None:
        """Add metric values, as a dict and/or as keyword arguments.

        Values go to the epoch's statistics, and inside a step loop also to
        the step's: Python numbers, numpy scalars and arrays (each element a
        sample) and eager tensors (read when the logs print); eager
        variables are read now.  ``METRICS_COLLECTED`` fires with the values
        as stored, then the watchers of these metrics (the best validation
        metric first) see them.

        Under a ``tf.distribute`` strategy (see :attr:`backend`) a value may
        also be a ``PerReplica`` result of ``strategy.run`` or a
        ``RemoteValue`` of ``coordinator.schedule``: it is kept as it is and
        reduced across replicas when the logs are printed, the **mean** of
        the replicas' values, or their **sum** with ``reduce='sum'`` (for
        all the metrics of the call) or ``reduce={'n_correct': 'sum'}`` (per
        name; so a metric cannot be named ``reduce`` as a keyword argument:
        pass it in the dict).  Under multi-worker training the printed
        statistics are then merged across the workers, as one process with
        the global batch would print them.

        Raises:
            TypeError: `metrics` is not a dict, or a value is not numeric (a
                ``PerReplica`` in a loop without a strategy says what to do).
            ValueError: `reduce` is not ``'mean'``, ``'sum'`` or a dict of them.
            RuntimeError: No epoch or step loop is open.
        """
        self._metrics.collect(metrics, reduce, kwargs)

    def watch_metric(self, name: str, callback: Callable[[float], Any],
                     every: Every | int | dict[str, Any] | None = None) -> Callable[[], None]:
        """Call ``callback(value)`` with each collected value of `name` as a float,
        or only when the schedule `every` is due (see :class:`Every`); return
        the function that stops it (see :meth:`MetricBook.watch`)."""
        return self._metrics.watch(name, callback, every)

    def timeit(self, metric_name: str) -> contextlib.AbstractContextManager[None]:
        """Record the seconds the block takes as `metric_name` (nothing if it raises)."""
        return self._metrics.timeit(metric_name)

    def metric_collector(self, metric_name: str
                         ) -> contextlib.AbstractContextManager[StatisticsCollector]:
        """Yield a :class:`StatisticsCollector`; its weighted mean is collected as
        `metric_name` when the block ends (nothing if it raises or is empty)."""
        return self._metrics.metric_collector(metric_name)

    def println(self, message: str, with_tag: bool = False) -> None:
        """Print `message`, after the ``[Epoch e/E, Step s/S, ETA t]`` tag if asked."""
        self._metrics.println(message, with_tag)

    def collect_results(self, results: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """Record final results (test metrics, after the epoch loop) and print them
        as one line, ``Results: test acc: 0.97; ...``.

        They are kept in :attr:`results` (a results store of an Experiment
        records them too); values are checked as metrics and read at once.

        Raises:
            RuntimeError: The loop is not entered.
            TypeError: A value is not numeric.
        """
        self._require_entered()
        self._metrics.collect_results(results, kwargs)

    def notice(self, message: str) -> None:
        """Tell the user of something unexpected: a warning, and the same line
        through `print_func` (so a ``logger.info`` log has it too)."""
        self._metrics.notice(message)

    def print_logs(self) -> None:
        """Print the step (inside a step loop) or epoch statistics since the last
        print, then clear them; `` (*)`` marks a new best validation metric.

        The matching timer stops first.  ``METRIC_STATS_PRINTED`` and
        ``TIME_METRIC_STATS_PRINTED`` then fire with ``{name: StatisticsCollector}``.
        """
        self._metrics.print_logs()

    def print_training_summary(self) -> None:
        """Print the table of `param_vars` (grouped by `var_groups`) and an empty line,
        as one line of `print_func` (one record for ``logger.info``)."""
        self._require_entered()
        self._metrics.print_training_summary()

    def get_progress(self) -> float | None:
        """The fraction of training done, in ``[0, 1]``, or ``None`` if unknown
        (see :meth:`LoopProgress.fraction_done`)."""
        return self._metrics.progress()

    def get_eta(self) -> float | None:
        """The estimated seconds left, or ``None`` if unknown."""
        return self._metrics.eta()

    # ------------------------------------------------------------ feature shortcuts
    @property
    def use_early_stopping(self) -> bool:
        """Whether an early-stopping component is plugged in."""
        return self.component('early_stopping') is not None

    @property
    def summary_writer(self) -> Any:
        """The summary writer, or ``None`` (a loop-opened one exists while entered)."""
        summaries = self.component('summaries')
        return summaries.writer if summaries is not None else None

    @property
    def checkpoint_saver(self) -> Any:
        """The checkpoint saver of `checkpoint_dir` while entered, else ``None``."""
        checkpointer = self.component('checkpointer')
        return checkpointer.saver if checkpointer is not None else None

    def _feature(self, role: str, what: str, how: str) -> Any:
        component = self.component(role)
        if component is None:
            raise RuntimeError(f'{what}: pass {how} to TrainLoop')
        self._require_entered()
        return component

    def make_checkpoint(self) -> str:
        """Save a checkpoint at the current step now and return its path (with
        ``checkpoint_async=True``: the path it has once written in the background)."""
        return self._feature('checkpointer', 'Checkpoint directory is not configured',
                             '`checkpoint_dir`').save(self)

    def export_best(self, path: str) -> list[str]:
        """Write the weights of the best checkpoint (``checkpoint_keep_best``) to
        `path` for serving, inside the ``with`` block or after it; return the
        paths written (see :meth:`Checkpointer.export_best
        <tfsnippet.scaffold.components.checkpointer.Checkpointer.export_best>`)."""
        checkpointer = self.component('checkpointer')
        if checkpointer is None:
            raise RuntimeError('`export_best()` needs the best checkpoint: pass '
                               '`checkpoint_dir` and `checkpoint_keep_best=True` to TrainLoop')
        return checkpointer.export_best(self, path)

    def add_summary(self, summary: Any) -> None:
        """Write a ``Summary`` proto or its bytes (from ``session.run``) at the loop's step."""
        self._feature('summaries', '`add_summary()` needs a summary writer',
                      '`summary_dir` or `summary_writer`').add_summary(summary, self.step)
        self._events.fire(EventKeys.SUMMARY_ADDED, self, summary)

    # ----------------------------------------------------------- enter / exit
    def _enter(self) -> TrainLoop:
        entered: list[LoopComponent] = []
        self._dist = attach_distribution(self, *self._dist_args, clock=self._clock,
                                         on_stop=self._stop_agreed)
        self._metrics.enter(self._dist.backend)
        try:
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
        self._check_can_open_epoch_loop()
        return self._epochs_generator()

    def _check_can_open_epoch_loop(self) -> None:
        self._require_entered()
        if self._within_epoch:
            raise RuntimeError('Another epoch loop has been opened: `iter_epochs()` cannot '
                               'be nested')

    def _check_can_open_step_loop(self) -> None:
        if not self._within_epoch:
            raise RuntimeError('Step loop must be opened within active epoch loop: call '
                               '`iter_steps()` inside `for epoch in loop.iter_epochs():`')
        if self._within_step:
            raise RuntimeError('Another step loop has been opened: `iter_steps()` cannot be nested')

    def _epochs_generator(self) -> Iterator[int]:
        # checked again: two generators may have been made before either started
        self._check_can_open_epoch_loop()
        self._within_epoch = True
        events, clock, progress = self._events, self._clock, self._progress
        metrics = self._metrics
        if not self._stop_requested:
            self._stop_reason = None
        first = True
        try:
            while True:
                if self._stop_requested:
                    self.println(f'Training stopped at epoch {progress.epoch}, step '
                                 f'{progress.step}: {self._stop_reason}')
                    break
                self._stop_reason = progress.limit_reached(self._max_epoch, self._max_step)
                if self._stop_reason is not None:
                    if first and progress.step:   # a resumed run that had finished
                        self.println(f'Training has already finished at epoch {progress.epoch}, '
                                     f'step {progress.step}: {self._stop_reason}')
                    break
                first = False
                progress.begin_epoch()
                metrics.epoch_start = clock()
                events.fire(EventKeys.BEFORE_EPOCH, self)
                yield progress.epoch
                progress.end_epoch()
                events.reverse_fire(EventKeys.AFTER_EPOCH, self)
                metrics.stop_epoch_timer()
        finally:
            self._within_epoch = False
            metrics.end_epoch_loop()

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
        self._check_can_open_step_loop()
        data, iterator = data_generator, None
        if data is None and self._max_step is None:
            raise RuntimeError('`data_generator` is required when `max_step` is not '
                               'configured, so as to prevent an unstoppable step loop')
        if data is not None:
            data = self._dist.distribute_data(data)
            skip = self._progress.attach(data, self._dataflows, self._metrics.notice)
            try:
                iterator = iter(data)
            except TypeError as e:
                raise TypeError(f'`data_generator` must be iterable, got {data!r}') from e
            if skip:   # not a resumable DataFlow: skip what the interrupted epoch consumed
                iterator = itertools.islice(iterator, skip, None)
        return self._steps_generator(iterator, owns_iterator=iterator is not data)

    def _steps_generator(self, iterator: Iterator[Any] | None,
                         owns_iterator: bool) -> Iterator[Any]:
        # The per-step path of every training loop: keep it to plain
        # attribute and list operations (see benchmarks/bench_train_loop.py).
        self._check_can_open_step_loop()
        self._within_step = True
        before, after = self._before_step_handlers, self._after_step_handlers
        time_handlers, clock, progress = self._time_metrics_handlers, self._clock, self._progress
        metrics = self._metrics
        book = metrics.book
        # the book's lists are emptied in place, never replaced, while steps run
        add_step_time = book.step_pending.setdefault('step_time', []).append
        batches = iterator if iterator is not None else itertools.repeat(None)
        max_step = self._max_step
        first_step = progress.step
        try:
            if self._stop_requested or (max_step is not None and progress.step >= max_step):
                return
            for batch in batches:   # the limit is checked after each step, before fetching
                progress.step = step = progress.step + 1
                self._step_data = batch
                metrics.step_start = start = clock()
                if before:
                    for h in tuple(before):
                        h(self)
                yield (step, batch) if iterator is not None else step
                if after:
                    for h in tuple(reversed(after)):
                        h(self)
                if metrics.step_start is not None:  # else print_logs() recorded it
                    metrics.step_start = None
                    seconds = clock() - start
                    add_step_time(seconds)
                    if time_handlers:
                        self._events.fire(EventKeys.TIME_METRICS_COLLECTED, self,
                                          {'step_time': seconds})
                if not step & MetricBook.COMPACT_MASK:
                    book.compact()
                max_step = self._max_step
                if self._stop_requested or (max_step is not None and step >= max_step):
                    break
            if progress.step == first_step and iterator is not None and \
                    not progress.epoch_resumed:
                metrics.notice(progress.EMPTY_EPOCH.format(epoch=progress.epoch))
            progress.epoch_finished = True   # the step loop ran to its end
            self._dist.steps_ended()
        finally:
            self._within_step = False
            metrics.step_start = self._step_data = None
            close = getattr(iterator, 'close', None) if owns_iterator else None
            if close is not None:
                close()
