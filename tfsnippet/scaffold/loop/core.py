"""The training loop's core: counters, events, metrics and the component registry."""

from __future__ import annotations

import itertools
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ...dataflows import DataFlow
from ...utils.concepts import DisposableContext
from ...utils.events import EventSource
from ...utils.misc import warn_user
from ...tfops.tf_vars import normalize_variables
from ..components.base import LoopComponent
from ..checkpoint.restore import restore_loop
from ..event_keys import LOOP_EVENT_KEYS, EventKeys
from ..metrics.book import MetricBook
from ..metrics.console import Console, DefaultMetricFormatter, MetricFormatter
from ..metrics.monitor import Monitor
from .build import DEFAULT_SUMMARY_SKIP_PATTERN, build_components
from .distribution import LoopDistribution, attach_distribution, check_strategy_args
from .facades import FeatureFacades
from .progress import LoopProgress, check_limit
from .registry import ComponentRegistry
from .reporting import LoopReporting

__all__ = ['TrainLoop']


class TrainLoop(LoopReporting, FeatureFacades, ComponentRegistry, DisposableContext):
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
        self._dist: LoopDistribution | None = None
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
        self._clock = self._schedule_clock = clock
        self._console = Console(print_func, metric_formatter or DefaultMetricFormatter(),
                                show_eta, clock)
        self._book = MetricBook()
        self._progress = LoopProgress()
        self._events = EventSource(LOOP_EVENT_KEYS, counters=self)
        # live handler lists of the events fired on every step, checked inline
        self._before_step_handlers = self._events.handlers(EventKeys.BEFORE_STEP)
        self._after_step_handlers = self._events.handlers(EventKeys.AFTER_STEP)
        self._metrics_handlers = self._events.handlers(EventKeys.METRICS_COLLECTED)
        self._time_metrics_handlers = self._events.handlers(EventKeys.TIME_METRICS_COLLECTED)
        self._valid_monitor = Monitor(valid_metric_name, mode) if valid_metric_name else None
        if valid_metric_name:
            self._book.watch(valid_metric_name, self._on_valid_metric)
        self._stop_reason: str | None = None
        self._stop_requested = False
        self._dataflows: list[DataFlow] = []   # DataFlows given to iter_steps, in order
        self._is_best_valid_metric = False
        self._within_epoch = self._within_step = False
        self._step_data: Any = None
        self._epoch_start: float | None = None  # running epoch timer
        self._step_start: float | None = None   # running step timer
        self._components: list[LoopComponent] = []
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
    clock = property(lambda self: self._schedule_clock, doc="The time source of schedules (under "
                     "multi-worker training the chief's, see LoopDistribution).")
    distribution = property(lambda self: self._dist, doc='The LoopDistribution, or None.')
    backend = property(lambda self: self._dist and self._dist.backend,
                       doc='The DistributedBackend chosen when entered, or None.')
    is_chief = property(lambda self: self._dist is None or self._dist.backend.is_chief,
                        doc='Whether this process prints and writes (True without a strategy).')
    stop_requested = property(lambda self: self._stop_requested, doc='Whether a stop was asked.')
    stop_reason = property(lambda self: self._stop_reason, doc='Why the epoch loop ended.')
    components = property(lambda self: tuple(self._components),
                          doc='The plugged-in components, in registration order.')
    max_epoch = property(lambda self: self._max_epoch,
                         lambda self, v: setattr(self, '_max_epoch', check_limit('max_epoch', v)),
                         doc='The maximum epoch counter; settable, ``None`` for no limit.')
    max_step = property(lambda self: self._max_step,
                        lambda self, v: setattr(self, '_max_step', check_limit('max_step', v)),
                        doc='The maximum step counter; settable, ``None`` for no limit.')

    # ------------------------------------------------------------ control
    def request_stop(self, reason: str | None = None) -> None:
        """Ask the loop to stop at the next step or epoch boundary, saying `reason`
        (under multi-worker training: at the next sync point, on every worker)."""
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f'`reason` must be a str or None, got {reason!r}')
        if not self._stop_requested and not (self._dist and self._dist.defer_stop(reason)):
            self._stop_requested = True
            self._stop_reason = reason or 'stop requested'

    # ----------------------------------------------------------- enter / exit
    def _enter(self) -> TrainLoop:
        entered: list[LoopComponent] = []
        self._dist = attach_distribution(self, *self._dist_args)
        try:
            # restore hook (issue 17): the loop resumes its checkpoint (variables,
            # agreement across workers, its own and its components' states) first
            restore_loop(self)
            for c in self._components:
                c.on_restore(self)
            for c in self._components:
                entered.append(c)
                c.on_enter(self)
            self._console.start_eta(self.get_progress())
            self._events.fire(EventKeys.ENTER_LOOP, self)
        except BaseException as e:
            try:
                self._exit_components(entered, e)
            finally:
                self._detach()
            raise
        return self

    def _detach(self) -> None:
        if self._dist is not None:   # kept after the exit: `is_chief`, `backend` stay valid
            self._dist.detach()

    def _exit_components(self, components: list[LoopComponent],
                         error: BaseException | None) -> None:
        # every component exits, whatever another raises (the checkpointer must
        # still wait for its last save); the first error is raised, unless the
        # loop is left through one of its own, which it does not replace
        first: BaseException | None = None
        for c in reversed(components):
            try:
                c.on_exit(self, error)
            except BaseException as e:
                if first is None and (error is None or not isinstance(e, Exception)):
                    first = e
                else:
                    warn_user(f'{type(c).__name__} failed to exit the loop: '
                              f'{type(e).__name__}: {e}', RuntimeWarning)
            finally:
                self._events.remove_owned(c)
        if first is not None:
            raise first

    def _exit(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:
        try:
            self._events.reverse_fire(EventKeys.EXIT_LOOP, self)
        finally:
            try:
                self._exit_components(self._components, exc_val)
            finally:
                self._console.stop_eta()
                self._book.clear()
                self._detach()

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
                self._epoch_start = clock()
                events.fire(EventKeys.BEFORE_EPOCH, self)
                yield progress.epoch
                progress.end_epoch()
                events.reverse_fire(EventKeys.AFTER_EPOCH, self)
                self._stop_timer('epoch_time')
                self._close_epoch()
        finally:
            try:
                self._close_epoch(cut_short=True)   # an epoch cut short (break, an exception)
            finally:
                self._within_epoch = False
                self._epoch_start = None
                self._is_best_valid_metric = False
                self._book.clear()

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
            if self._dist is not None:
                data = self._dist.distribute_data(data)
            skip = self._progress.attach(data, self._dataflows, self.notice)
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
        # the book's lists are emptied in place, never replaced, while steps run
        add_step_time = self._book.step_pending.setdefault('step_time', []).append
        batches = iterator if iterator is not None else itertools.repeat(None)
        max_step = self._max_step
        first_step = progress.step
        try:
            if self._stop_requested or (max_step is not None and progress.step >= max_step):
                return
            for batch in batches:   # the limit is checked after each step, before fetching
                progress.step = step = progress.step + 1
                self._step_data = batch
                self._step_start = start = clock()
                if before:
                    for h in tuple(before):
                        h(self)
                yield (step, batch) if iterator is not None else step
                if after:
                    for h in tuple(reversed(after)):
                        h(self)
                if self._step_start is not None:  # else print_logs() recorded it
                    self._step_start = None
                    seconds = clock() - start
                    add_step_time(seconds)
                    if time_handlers:
                        self._events.fire(EventKeys.TIME_METRICS_COLLECTED, self,
                                          {'step_time': seconds})
                if not step & MetricBook.COMPACT_MASK:
                    self._book.compact()
                max_step = self._max_step
                if self._stop_requested or (max_step is not None and step >= max_step):
                    break
            if progress.step == first_step and iterator is not None and \
                    not progress.epoch_resumed:
                self._notice(progress.EMPTY_EPOCH.format(epoch=progress.epoch))
            progress.epoch_finished = True   # the step loop ran to its end
            if self._dist is not None:
                self._dist.steps_ended()
        finally:
            self._within_step = False
            self._step_start = self._step_data = None
            close = getattr(iterator, 'close', None) if owns_iterator else None
            if close is not None:
                close()
