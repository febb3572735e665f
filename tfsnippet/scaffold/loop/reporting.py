"""The metrics collaborator of the training loop: collecting, timing and printing them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ...utils.events import Every
from ...utils.misc import warn_user
from ...utils.statistics import StatisticsCollector
from ..event_keys import EventKeys
from ..metrics.book import MetricBook
from ..metrics.console import Console, MetricFormatter
from ..metrics.monitor import Monitor
from ..metrics.sinks import EPOCH, EPOCH_LOG, STEP_LOG, plain_stats
from ..metrics.values import check_metric_value, is_time_metric, to_float
from ..summary_table import summarize_variables

if TYPE_CHECKING:  # pragma: no cover
    from ...backend.base import Backend
    from .core import TrainLoop
    from .iteration import LoopIteration

__all__ = ['LoopMetrics', 'NOT_IN_LOOP']

# The metric methods of TrainLoop (assigned in its class body) delegate to its
# LoopMetrics, `self._metrics`; they are defined below the class.

NOT_IN_LOOP = 'An epoch or a step loop is expected, but neither has been opened'


class LoopMetrics:
    """What a :class:`~tfsnippet.TrainLoop` does with metrics: its one
    :class:`MetricBook`, its :class:`Console`, the best validation metric and
    the epoch and step timers.

    The loop delegates its metric methods (``collect_metrics``,
    ``print_logs``, ``timeit``...) here; this object reads the loop's
    counters and flags through its public properties and writes only its
    own state.

    Args:
        loop: The loop it reports for.
        flags: The loop's iteration (whether an epoch or a step loop is open).
        print_func, formatter, show_eta, clock: As the loop's arguments.
        valid_metric_name: The metric whose best value is tracked, or ``None``.
        valid_metric_mode: ``'min'``, ``'max'`` or ``'auto'``.
    """

    def __init__(self, loop: TrainLoop, flags: LoopIteration, print_func: Callable[[str], Any],
                 formatter: MetricFormatter, show_eta: bool, clock: Callable[[], float],
                 valid_metric_name: str | None, valid_metric_mode: str):
        self._loop = loop
        self._flags = flags   # whether an epoch or step loop is open, read on every collect
        self._clock = clock
        self.console = Console(print_func, formatter, show_eta, clock)
        self.book = MetricBook()
        self.valid_monitor = Monitor(valid_metric_name, valid_metric_mode) \
            if valid_metric_name else None
        if valid_metric_name:
            self.book.watch(valid_metric_name, self._on_valid_metric)
        self.results: dict[str, float] = {}
        #: whether the latest validation value was a new best (the `` (*)`` of a step
        #: line, as classic), and whether one was within this epoch (that of its line)
        self.latest_is_best = False
        self.best_in_epoch = False
        #: start of the running epoch and step timers (``None``: not running)
        self.epoch_start: float | None = None
        self.step_start: float | None = None
        events = loop.events
        self._time_handlers = events.handlers(EventKeys.TIME_METRICS_COLLECTED)
        #: the handlers of ``METRICS_COLLECTED`` (a live list: checked on every collect)
        self.metrics_handlers = events.handlers(EventKeys.METRICS_COLLECTED)
        self._printing_handlers = events.handlers(EventKeys.LOGS_PRINTING)
        #: the statistics of this epoch's epoch-level lines (merged across workers), if any
        self._printed_epoch: dict[str, StatisticsCollector] | None = None
        #: the seconds a resumed epoch had taken before its checkpoint (see load_state_dict)
        self._resume_elapsed: float | None = None
        #: whether the table of parameters was printed (a trainer then does not repeat it)
        self.summary_printed = False

    # ------------------------------------------------------------ the loop's life
    def enter(self, backend: Backend) -> None:
        """Work with `backend` (the loop is entered): the book normalises values
        with it, the console prints as the role of this process says."""
        self.book.use_backend(backend)
        self.console.enter(backend)

    def start_eta(self) -> None:
        """Start estimating the time left, from the progress now (after a resume)."""
        self.console.start_eta(self.progress())

    def leave(self) -> None:
        """The loop is left: forget the values, stop the ETA, print whatever the role."""
        self.console.stop_eta()
        self.console.leave()
        self.book.clear()

    def end_epoch_loop(self) -> None:
        """The epoch loop ended: no timer runs, the values are forgotten."""
        self.epoch_start = self._resume_elapsed = None
        self.latest_is_best = self.best_in_epoch = False
        self.book.clear()

    # ------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The current epoch's partial statistics, as plain data: the book's
        (the values collected inside steps, see :meth:`MetricBook.state_dict`),
        the seconds the epoch and the running step have taken so far, and
        the `` (*)`` marks not printed yet (of the next step line and of the
        epoch's line)."""
        clock = self._clock
        return {'book': self.book.state_dict(),
                'epoch_elapsed': None if self.epoch_start is None else clock() - self.epoch_start,
                'step_elapsed': None if self.step_start is None else clock() - self.step_start,
                'latest_is_best': self.latest_is_best, 'best_in_epoch': self.best_in_epoch}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put back the partial statistics of :meth:`state_dict`: the resumed
        epoch goes on from them, its timer counting the seconds it had taken.

        The ``epoch_time`` of a resumed epoch is the seconds it took up to
        the checkpoint plus those it takes after the resume; the step that
        was running when the checkpoint was taken counts as it went so far
        (its ``step_time`` up to the save).  The time between the checkpoint
        and the interruption is not counted: that work is done again.
        """
        if 'book' not in state:
            raise KeyError(f'`state` lacks the key \'book\' of the partial statistics: got '
                           f'{sorted(state)}')
        self.book.load_state_dict(state['book'])
        step_elapsed = state.get('step_elapsed')
        if step_elapsed is not None:
            self.book.add_time('step_time', float(step_elapsed), within_step=True)
        elapsed = state.get('epoch_elapsed')
        self._resume_elapsed = None if elapsed is None else float(elapsed)
        self.latest_is_best = bool(state.get('latest_is_best'))
        self.best_in_epoch = bool(state.get('best_in_epoch'))

    def start_epoch_timer(self) -> None:
        """Start the epoch timer; a resumed epoch's counts the seconds it had taken."""
        elapsed, self._resume_elapsed = self._resume_elapsed, None
        self.epoch_start = self._clock() - (elapsed or 0.)

    # ------------------------------------------------------------ timers
    def record_time(self, name: str, seconds: float) -> None:
        """Add a duration to the step or epoch statistics and announce it."""
        loop = self._loop
        self.book.add_time(name, seconds, self._flags.within_step)
        if self._time_handlers:
            loop.events.fire(EventKeys.TIME_METRICS_COLLECTED, loop, {name: seconds})

    def stop_step_timer(self) -> None:
        """Record ``step_time`` if the step timer runs."""
        start = self.step_start
        if start is not None:
            self.step_start = None
            self.record_time('step_time', self._clock() - start)

    def stop_epoch_timer(self) -> None:
        """Record ``epoch_time`` if the epoch timer runs; the epoch's values are closed."""
        start = self.epoch_start
        if start is not None:
            self.epoch_start = None
            self.record_time('epoch_time', self._clock() - start)
            self.book.end_epoch()

    # ------------------------------------------------------------ metrics
    def watch(self, name: str, callback: Callable[[float], Any],
              every: Every | int | dict[str, Any] | None = None) -> Callable[[], None]:
        """``TrainLoop.watch_metric``."""
        return self.book.watch(name, callback, Every.coerce(every), counters=self._loop)

    def _on_valid_metric(self, value: float) -> None:
        improved = self.valid_monitor.update(value)  # type: ignore[union-attr]
        self.latest_is_best = improved
        if improved:
            self.best_in_epoch = True
        loop = self._loop
        for c in loop.components:
            c.on_valid_metric(loop, value, improved)

    @contextlib.contextmanager
    def timeit(self, metric_name: str) -> Iterator[None]:
        """``TrainLoop.timeit``."""
        if not isinstance(metric_name, str):
            raise TypeError(f'`metric_name` must be a str, got {metric_name!r}')
        if not self._loop.within_epoch:
            raise RuntimeError(f'{NOT_IN_LOOP}: `timeit()` needs a loop')
        start = self._clock()
        yield
        self.record_time(metric_name, self._clock() - start)

    @contextlib.contextmanager
    def metric_collector(self, metric_name: str) -> Iterator[StatisticsCollector]:
        """``TrainLoop.metric_collector``."""
        if not isinstance(metric_name, str):
            raise TypeError(f'`metric_name` must be a str, got {metric_name!r}')
        if not self._loop.within_epoch:
            raise RuntimeError(f'{NOT_IN_LOOP}: `metric_collector()` needs a loop')
        collector = StatisticsCollector()
        yield collector
        if collector.has_value:
            self._loop.collect_metrics({metric_name: float(collector.mean)})

    # ------------------------------------------------------------ printing and progress
    def println(self, message: str, with_tag: bool = False) -> None:
        """``TrainLoop.println``."""
        if with_tag:
            loop = self._loop
            if not loop.within_epoch:
                raise RuntimeError(f'{NOT_IN_LOOP}: a tagged line needs a loop')
            progress = loop.progress
            console = self.console
            tag = console.tag(progress.epoch, loop.max_epoch, progress.step, loop.max_step,
                              self.eta() if console.show_eta else None)
            message = f'{tag} {message}'
        self.console.println(message)

    def collect_results(self, results: Mapping[str, Any] | None, kwargs: dict[str, Any],
                        left: bool = False) -> None:
        """``TrainLoop.collect_results``; `left`: the loop's block has been left."""
        merged = {**(results or {}), **kwargs}
        numbers = {name: to_float(name, check_metric_value(name, value))
                   for name, value in merged.items()}
        if left:   # the components have exited: each is told of the late results
            loop = self._loop
            for component in loop.components:
                component.on_results(loop, dict(numbers))
        self.results.update(numbers)
        stats = {}
        for name, number in numbers.items():
            stats[name] = StatisticsCollector()
            stats[name].collect(number)
        self.console.println(f'Results: {self.console.format_stats(stats)}')

    def notice(self, message: str) -> None:
        """``TrainLoop.notice``."""
        warn_user(message)
        self.console.println(message)

    def print_logs(self) -> None:
        """``TrainLoop.print_logs``."""
        loop = self._loop
        book = self.book
        within_step = loop.within_step
        if within_step:
            self.stop_step_timer()
        elif loop.within_epoch:
            self.stop_epoch_timer()
        else:
            raise RuntimeError(f'{NOT_IN_LOOP}: `print_logs()` needs a loop')
        if self._printing_handlers:   # values read only when a line is printed
            loop.events.fire(EventKeys.LOGS_PRINTING, loop)
        if within_step:
            stats, clear = book.step_line_stats(), book.clear_step
        else:
            stats, clear = book.epoch_stats(), book.clear_epoch
        # a collective under multi-worker training: every worker prints alike
        stats = loop.distribution.reduce_printed(stats, within_step)
        if not within_step:   # what this epoch announces when it ends
            self._keep_printed_epoch(stats)
        line = self.console.format_stats(stats)
        if self.latest_is_best if within_step else self.best_in_epoch:
            line += ' (*)'
        self.latest_is_best = False
        if not within_step:
            self.best_in_epoch = False
        self.println(line, with_tag=True)
        metric_stats = {k: v for k, v in stats.items() if not is_time_metric(k)}
        time_stats = {k: v for k, v in stats.items() if is_time_metric(k)}
        events = loop.events
        try:
            if metric_stats:
                events.fire(EventKeys.METRIC_STATS_PRINTED, loop, metric_stats)
            if time_stats:
                events.fire(EventKeys.TIME_METRIC_STATS_PRINTED, loop, time_stats)
            self._announce(STEP_LOG if within_step else EPOCH_LOG, stats)
        finally:
            clear()

    # ------------------------------------------------------------ announcing reductions
    def _announce(self, scope: str, stats: Mapping[str, StatisticsCollector]) -> None:
        """Fire ``METRIC_STATS_REDUCED`` with the plain statistics of `scope`
        (converted once, for every handler alike)."""
        events = self._loop.events
        if events.handlers(EventKeys.METRIC_STATS_REDUCED):
            plain = plain_stats(stats)
            if plain:
                events.fire(EventKeys.METRIC_STATS_REDUCED, self._loop, scope, plain)

    def _keep_printed_epoch(self, stats: Mapping[str, StatisticsCollector]) -> None:
        kept = self._printed_epoch
        if kept is None:
            kept = self._printed_epoch = {}
        for name, c in stats.items():
            if name not in kept:
                kept[name] = StatisticsCollector(c.shape)
            kept[name].merge(c)

    def close_epoch(self, cut_short: bool = False) -> None:
        """Announce this epoch's statistics (scope ``'epoch'``), printed or not;
        an epoch `cut_short` (``break``, an exception) only if it printed a line.

        Under multi-worker training the metrics of its epoch-level lines are
        those merged across the workers when they were printed (no other
        collective is run); without a line, the process's own.
        """
        stats = self.book.close_epoch()
        self.best_in_epoch = False
        printed, self._printed_epoch = self._printed_epoch, None
        if cut_short and printed is None:
            return
        if printed and self._loop.backend.num_workers > 1:
            stats = {**stats, **printed}
        if stats:
            self._announce(EPOCH, stats)

    def print_training_summary(self) -> None:
        """``TrainLoop.print_training_summary``."""
        loop = self._loop
        self.summary_printed = True
        table = summarize_variables(loop.param_vars, title='Trainable Parameters',
                                    other_variables_title='Other Parameters',
                                    groups=loop.var_groups)
        if table:
            self.console.println(table + '\n')   # one record for a logger, a blank line after

    def progress(self) -> float | None:
        """``TrainLoop.get_progress``."""
        loop = self._loop
        return loop.progress.fraction_done(loop.max_epoch, loop.max_step,
                                           self.step_start is not None,
                                           self.epoch_start is not None)

    def eta(self) -> float | None:
        """``TrainLoop.get_eta``."""
        return self.console.eta(self.progress())


# ------------------------------------------------------------ TrainLoop's methods
def collect_metrics(self: TrainLoop, metrics: Mapping[str, Any] | None = None, *,
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
    # the per-step path: inline, plain attribute reads (see benchmarks/bench_train_loop.py)
    if metrics is None:
        metrics = kwargs
    elif kwargs or type(metrics) is not dict:
        if not isinstance(metrics, Mapping):
            raise TypeError(f'`metrics` should be a dict, got {metrics!r}')
        metrics = {**metrics, **kwargs}
    flags = self._iter
    if not flags.within_epoch:
        raise RuntimeError(f'{NOT_IN_LOOP}: `collect_metrics()` needs a loop')
    reporting = self._metrics
    book = reporting.book
    stored = book.collect(metrics, flags.within_step, reduce)
    if reporting.metrics_handlers:
        self._events.fire(EventKeys.METRICS_COLLECTED, self, stored)
    watchers = book.watchers
    if watchers:
        for name in stored:
            if name in watchers:   # a metric read at once (a validation loss)
                book.dispatch(stored)
                break


def watch_metric(self: TrainLoop, name: str, callback: Callable[[float], Any],
                 every: Every | int | dict[str, Any] | None = None) -> Callable[[], None]:
    """Call ``callback(value)`` with each collected value of `name` as a float,
    or only when the schedule `every` is due (see :class:`Every`); return
    the function that stops it (see :meth:`MetricBook.watch`)."""
    return self._metrics.watch(name, callback, every)


def timeit(self: TrainLoop, metric_name: str) -> contextlib.AbstractContextManager[None]:
    """Record the seconds the block takes as `metric_name` (nothing if it raises)."""
    return self._metrics.timeit(metric_name)


def metric_collector(self: TrainLoop, metric_name: str
                     ) -> contextlib.AbstractContextManager[StatisticsCollector]:
    """Yield a :class:`StatisticsCollector`; its weighted mean is collected as
    `metric_name` when the block ends (nothing if it raises or is empty)."""
    return self._metrics.metric_collector(metric_name)


def println(self: TrainLoop, message: str, with_tag: bool = False) -> None:
    """Print `message`, after the ``[Epoch e/E, Step s/S, ETA t]`` tag if asked."""
    self._metrics.println(message, with_tag)


def collect_results(self: TrainLoop, results: Mapping[str, Any] | None = None,
                    **kwargs: Any) -> None:
    """Record final results (test metrics, after the epoch loop) and print them
    as one line, ``Results: test acc: 0.97; ...``.

    They are kept in :attr:`results` (a results store of an Experiment
    records them too); values are checked as metrics and read at once.
    They may be collected inside the ``with`` block, or after it has been
    left: then ``early_stopping=True`` has restored the best weights, so a
    test score computed there is the best epoch's (an Experiment whose block
    is still open records it at once, through the loop's components'
    :meth:`~tfsnippet.LoopComponent.on_results`).

    Raises:
        RuntimeError: The loop has not been entered yet, or a component
            cannot record results collected after the block.
        TypeError: A value is not numeric.
    """
    left = self._has_entered and not self._is_entered
    if not left and not self._is_entered:
        raise RuntimeError('`collect_results()` needs the loop entered: call it inside its '
                           '`with` block, or after the block has been left (the best '
                           'weights are restored then)')
    self._metrics.collect_results(results, kwargs, left)


def notice(self: TrainLoop, message: str) -> None:
    """Tell the user of something unexpected: a warning, and the same line
    through `print_func` (so a ``logger.info`` log has it too)."""
    self._metrics.notice(message)


def print_logs(self: TrainLoop) -> None:
    """Print the step (inside a step loop) or epoch statistics since the last
    print, then clear them; `` (*)`` marks a new best validation metric: a
    step line if the latest validation value (since the last line) was one,
    the epoch's line if one was reached at any time in the epoch (since its
    last line).

    The matching timer stops first.  ``METRIC_STATS_PRINTED`` and
    ``TIME_METRIC_STATS_PRINTED`` then fire with ``{name: StatisticsCollector}``.
    """
    self._metrics.print_logs()


def print_training_summary(self: TrainLoop) -> None:
    """Print the table of `param_vars` (grouped by `var_groups`) and an empty line,
    as one line of `print_func` (one record for ``logger.info``)."""
    self._require_entered()
    self._metrics.print_training_summary()


def training_summary_printed(self: TrainLoop) -> bool:
    """Whether :meth:`print_training_summary` was called (a trainer's ``run()``
    then does not print the table again)."""
    return self._metrics.summary_printed


def get_progress(self: TrainLoop) -> float | None:
    """The fraction of training done, in ``[0, 1]``, or ``None`` if unknown
    (see :meth:`LoopProgress.fraction_done`)."""
    return self._metrics.progress()


def get_eta(self: TrainLoop) -> float | None:
    """The estimated seconds left, or ``None`` if unknown."""
    return self._metrics.eta()
