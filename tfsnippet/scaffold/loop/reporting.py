"""The metrics side of the training loop: collecting, timing and printing them."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast

from ...utils.events import EventSource, Every
from ...utils.misc import warn_user
from ...utils.statistics import StatisticsCollector
from ..components.base import LoopComponent
from ..event_keys import EventKeys
from ..metrics.book import MetricBook
from ..metrics.console import Console
from ..metrics.monitor import Monitor
from ..metrics.values import check_metric_value, is_time_metric, to_float
from ..summary_table import summarize_variables
from .progress import LoopProgress

if TYPE_CHECKING:  # pragma: no cover
    from .core import TrainLoop

__all__ = ['LoopReporting']

NOT_IN_LOOP = 'An epoch or a step loop is expected, but neither has been opened'


class LoopReporting:
    """What :class:`~tfsnippet.TrainLoop` does with metrics, as a base class of it.

    Every value goes into the loop's one :class:`MetricBook`; the console
    line (:class:`Console`) and the event handlers read it from there.
    """

    # set by TrainLoop.__init__
    _book: MetricBook
    _console: Console
    _events: EventSource
    _progress: LoopProgress
    _valid_monitor: Monitor | None
    _components: list[LoopComponent]
    _param_vars: Any
    _var_groups: list[str] | None
    _clock: Callable[[], float]
    _max_epoch: int | None
    _max_step: int | None
    _within_epoch: bool
    _within_step: bool
    _is_best_valid_metric: bool
    _epoch_start: float | None
    _step_start: float | None
    _time_metrics_handlers: list[Callable[..., Any]]
    _metrics_handlers: list[Callable[..., Any]]
    #: merges the printed statistics of every worker (set under multi-worker training)
    _reduce_stats: Callable[[dict[str, StatisticsCollector]],
                            dict[str, StatisticsCollector]] | None = None

    if TYPE_CHECKING:  # provided by TrainLoop and DisposableContext
        _has_entered: bool
        _is_entered: bool

        def _require_entered(self) -> None: ...

        @property
        def step(self) -> int: ...

        @property
        def epoch(self) -> int: ...

        @property
        def clock(self) -> Callable[[], float]: ...

    console = property(lambda self: self._console, doc='The console line (tag, ETA, output).')
    metric_book = property(lambda self: self._book, doc='The one book of collected metrics.')
    valid_metric_name = property(
        lambda self: self._valid_monitor.name if self._valid_monitor else None,
        doc='The name of the validation metric, or ``None`` if not tracked.')
    valid_metric_smaller_is_better = property(
        lambda self: self._valid_monitor.mode == 'min' if self._valid_monitor else None,
        doc='Whether a smaller validation metric is better.')
    best_valid_metric = property(
        lambda self: self._valid_monitor.best if self._valid_monitor else None,
        doc='The best validation metric so far (never NaN), or ``None``.')

    @property
    def print_func(self) -> Callable[[str], Any]:
        """The function receiving every printed line; settable."""
        return self._console.print_func

    @print_func.setter
    def print_func(self, func: Callable[[str], Any]) -> None:
        self._console.print_func = func

    # ------------------------------------------------------------ metrics and timers
    def _record_time(self, name: str, seconds: float) -> None:
        self._book.add_time(name, seconds, self._within_step)
        if self._time_metrics_handlers:
            self._events.fire(EventKeys.TIME_METRICS_COLLECTED, self, {name: seconds})

    def _stop_timer(self, name: str) -> None:
        attr = '_step_start' if name == 'step_time' else '_epoch_start'
        start = getattr(self, attr)
        if start is not None:
            setattr(self, attr, None)
            self._record_time(name, self._clock() - start)
            if name == 'epoch_time':
                self._book.end_epoch()

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
        if metrics is None:
            metrics = kwargs
        elif kwargs or type(metrics) is not dict:
            if not isinstance(metrics, Mapping):
                raise TypeError(f'`metrics` should be a dict, got {metrics!r}')
            metrics = {**metrics, **kwargs}
        if not self._within_epoch:
            raise RuntimeError(f'{NOT_IN_LOOP}: `collect_metrics()` needs a loop')
        book = self._book
        stored = book.collect(metrics, self._within_step, reduce)
        if self._metrics_handlers:
            self._events.fire(EventKeys.METRICS_COLLECTED, self, stored)
        watchers = book.watchers
        if watchers:
            for name in stored:
                if name in watchers:   # a metric read at once (a validation loss)
                    book.dispatch(stored)
                    break

    def watch_metric(self, name: str, callback: Callable[[float], Any],
                     every: Every | int | dict[str, Any] | None = None) -> Callable[[], None]:
        """Call ``callback(value)`` with each collected value of `name` as a float,
        or only when the schedule `every` is due (see :class:`Every`); return
        the function that stops it (see :meth:`MetricBook.watch`)."""
        return self._book.watch(name, callback, Every.coerce(every), counters=self)

    def _on_valid_metric(self, value: float) -> None:
        improved = self._valid_monitor.update(value)  # type: ignore[union-attr]
        self._is_best_valid_metric = improved
        for c in self._components:
            c.on_valid_metric(cast('TrainLoop', self), value, improved)

    @contextlib.contextmanager
    def timeit(self, metric_name: str) -> Iterator[None]:
        """Record the seconds the block takes as `metric_name` (nothing if it raises)."""
        if not isinstance(metric_name, str):
            raise TypeError(f'`metric_name` must be a str, got {metric_name!r}')
        if not self._within_epoch:
            raise RuntimeError(f'{NOT_IN_LOOP}: `timeit()` needs a loop')
        start = self._clock()
        yield
        self._record_time(metric_name, self._clock() - start)

    @contextlib.contextmanager
    def metric_collector(self, metric_name: str) -> Iterator[StatisticsCollector]:
        """Yield a :class:`StatisticsCollector`; its weighted mean is collected as
        `metric_name` when the block ends (nothing if it raises or is empty)."""
        if not isinstance(metric_name, str):
            raise TypeError(f'`metric_name` must be a str, got {metric_name!r}')
        if not self._within_epoch:
            raise RuntimeError(f'{NOT_IN_LOOP}: `metric_collector()` needs a loop')
        collector = StatisticsCollector()
        yield collector
        if collector.has_value:
            self.collect_metrics({metric_name: float(collector.mean)})

    # ------------------------------------------------------------ printing and progress
    def println(self, message: str, with_tag: bool = False) -> None:
        """Print `message`, after the ``[Epoch e/E, Step s/S, ETA t]`` tag if asked."""
        if with_tag:
            if not self._within_epoch:
                raise RuntimeError(f'{NOT_IN_LOOP}: a tagged line needs a loop')
            progress = self._progress
            tag = self._console.tag(progress.epoch, self._max_epoch, progress.step, self._max_step,
                                    self.get_eta() if self._console.show_eta else None)
            message = f'{tag} {message}'
        self._console.println(message)

    @property
    def results(self) -> dict[str, float]:
        """The final results recorded by :meth:`collect_results`."""
        return dict(self.__dict__.get('_results', {}))

    def collect_results(self, results: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """Record final results (test metrics, after the epoch loop) and print them
        as one line, ``Results: test acc: 0.97; ...``.

        They are kept in :attr:`results` (a results store of an Experiment
        records them too); values are checked as metrics and read at once.
        They may be collected inside the ``with`` block, or after it has been
        left: then ``early_stopping=True`` has restored the best weights, so
        a test score computed there is the best epoch's (an Experiment whose
        block is still open records it at once, through the loop's components'
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
        merged = {**(results or {}), **kwargs}
        numbers = {name: to_float(name, check_metric_value(name, value))
                   for name, value in merged.items()}
        if left:   # the components have exited: each is told of the late results
            for component in self._components:
                component.on_results(cast('TrainLoop', self), dict(numbers))
        self.__dict__.setdefault('_results', {}).update(numbers)
        stats = {}
        for name, number in numbers.items():
            stats[name] = StatisticsCollector()
            stats[name].collect(number)
        self._console.println(f'Results: {self._console.format_stats(stats)}')

    def notice(self, message: str) -> None:
        """Tell the user of something unexpected: a warning, and the same line
        through `print_func` (so a ``logger.info`` log has it too)."""
        warn_user(message)
        self._console.println(message)

    _notice = notice

    def print_logs(self) -> None:
        """Print the step (inside a step loop) or epoch statistics since the last
        print, then clear them; `` (*)`` marks a new best validation metric.

        The matching timer stops first.  ``METRIC_STATS_PRINTED`` and
        ``TIME_METRIC_STATS_PRINTED`` then fire with ``{name: StatisticsCollector}``.
        """
        book = self._book
        if self._within_step:
            self._stop_timer('step_time')
            stats, clear = book.step_line_stats(), book.clear_step
        elif self._within_epoch:
            self._stop_timer('epoch_time')
            stats, clear = book.epoch_stats(), book.clear_epoch
        else:
            raise RuntimeError(f'{NOT_IN_LOOP}: `print_logs()` needs a loop')
        if self._reduce_stats is not None:   # a collective: every worker prints alike
            stats = self._reduce_stats(stats)
        line = self._console.format_stats(stats)
        if self._is_best_valid_metric:
            line += ' (*)'
            self._is_best_valid_metric = False
        self.println(line, with_tag=True)
        metric_stats = {k: v for k, v in stats.items() if not is_time_metric(k)}
        time_stats = {k: v for k, v in stats.items() if is_time_metric(k)}
        try:
            if metric_stats:
                self._events.fire(EventKeys.METRIC_STATS_PRINTED, self, metric_stats)
            if time_stats:
                self._events.fire(EventKeys.TIME_METRIC_STATS_PRINTED, self, time_stats)
        finally:
            clear()

    def print_training_summary(self) -> None:
        """Print the table of `param_vars` (grouped by `var_groups`) and an empty line,
        as one line of `print_func` (one record for ``logger.info``)."""
        self._require_entered()
        table = summarize_variables(self._param_vars, title='Trainable Parameters',
                                    other_variables_title='Other Parameters',
                                    groups=self._var_groups)
        if table:
            self._console.println(table + '\n')   # one record for a logger, a blank line after

    def get_progress(self) -> float | None:
        """The fraction of training done, in ``[0, 1]``, or ``None`` if unknown
        (see :meth:`LoopProgress.fraction_done`)."""
        return self._progress.fraction_done(self._max_epoch, self._max_step,
                                            self._step_start is not None,
                                            self._epoch_start is not None)

    def get_eta(self) -> float | None:
        """The estimated seconds left, or ``None`` if unknown."""
        return self._console.eta(self.get_progress())
