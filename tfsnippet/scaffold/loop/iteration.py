"""The epoch and step generators of the training loop, and the flags and stop state they keep."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ...dataflows import DataFlow
from ..event_keys import EventKeys
from ..metrics.book import MetricBook
from .progress import LoopProgress

if TYPE_CHECKING:  # pragma: no cover
    from .core import TrainLoop
    from .reporting import LoopMetrics

__all__ = ['LoopIteration']


class LoopIteration:
    """The generators of :meth:`TrainLoop.iter_epochs <tfsnippet.TrainLoop.iter_epochs>`
    and :meth:`~tfsnippet.TrainLoop.iter_steps`: they count in the loop's
    :class:`LoopProgress`, fire its events around each epoch and step, and
    keep whether an epoch or a step loop is open, the current batch, the
    limits and the stop request.

    Args:
        loop: The loop whose events fire (handlers receive it).
        progress: The loop's counters.
        clock: The loop's time source.
        require_entered: Raises ``RuntimeError`` unless the loop is entered.
        max_epoch, max_step: The limits (checked by the loop).
    """

    def __init__(self, loop: TrainLoop, progress: LoopProgress, clock: Callable[[], float],
                 require_entered: Callable[[], None], max_epoch: int | None,
                 max_step: int | None):
        self._loop = loop
        self._events = events = loop.events
        self._clock = clock
        self._require_entered = require_entered
        self.progress = progress
        self.max_epoch = max_epoch
        self.max_step = max_step
        #: the loop's metrics (set by the loop once made)
        self.metrics: LoopMetrics
        # live handler lists of the events fired on every step, checked inline
        self._before_step_handlers = events.handlers(EventKeys.BEFORE_STEP)
        self._after_step_handlers = events.handlers(EventKeys.AFTER_STEP)
        self._time_metrics_handlers = events.handlers(EventKeys.TIME_METRICS_COLLECTED)
        self._before_steps_handlers = events.handlers(EventKeys.BEFORE_STEPS)
        self._after_steps_handlers = events.handlers(EventKeys.AFTER_STEPS)
        self.within_epoch = self.within_step = False
        self.step_data: Any = None
        self.dataflows: list[DataFlow] = []   # DataFlows given to iter_steps, in order
        self.stop_requested = False
        self.stop_reason: str | None = None
        self.stop_persists = False   # a stop requested, which a checkpoint keeps

    def stop(self, reason: str, persist: bool = True) -> None:
        """Stop at the next step or epoch boundary, saying `reason`; unless
        `persist`, a checkpoint taken after it resumes training (a time budget)."""
        self.stop_requested, self.stop_reason = True, reason
        self.stop_persists = persist

    def iter_epochs(self) -> Iterator[int]:
        """Iterate through the epochs, yielding the epoch counter (from 1), until
        `max_epoch` epochs or `max_step` steps are done or a stop is requested
        (`RuntimeError` outside the ``with`` block or inside another epoch loop)."""
        self._check_can_open_epoch_loop()
        return self._epochs_generator()

    def _check_can_open_epoch_loop(self) -> None:
        self._require_entered()
        if self.within_epoch:
            raise RuntimeError('Another epoch loop has been opened: `iter_epochs()` cannot '
                               'be nested')

    def _check_can_open_step_loop(self) -> None:
        if not self.within_epoch:
            raise RuntimeError('Step loop must be opened within active epoch loop: call '
                               '`iter_steps()` inside `for epoch in loop.iter_epochs():`')
        if self.within_step:
            raise RuntimeError('Another step loop has been opened: `iter_steps()` cannot be nested')

    def _epochs_generator(self) -> Iterator[int]:
        # checked again: two generators may have been made before either started
        self._check_can_open_epoch_loop()
        self.within_epoch = True
        loop, events, progress = self._loop, self._events, self.progress
        metrics = self.metrics
        if not self.stop_requested:
            self.stop_reason = None
        first = True
        try:
            while True:
                if self.stop_requested:
                    metrics.println(f'Training stopped at epoch {progress.epoch}, step '
                                    f'{progress.step}: {self.stop_reason}')
                    break
                self.stop_reason = progress.limit_reached(self.max_epoch, self.max_step)
                if self.stop_reason is not None:
                    if first and progress.step:   # a resumed run that had finished
                        metrics.println(f'Training has already finished at epoch '
                                        f'{progress.epoch}, step {progress.step}: '
                                        f'{self.stop_reason}')
                    break
                first = False
                progress.begin_epoch()
                metrics.start_epoch_timer()
                events.fire(EventKeys.BEFORE_EPOCH, loop)
                yield progress.epoch
                progress.end_epoch()
                events.reverse_fire(EventKeys.AFTER_EPOCH, loop)
                metrics.stop_epoch_timer()
                metrics.close_epoch()
        finally:
            try:
                metrics.close_epoch(cut_short=True)   # an epoch cut short (break, an exception)
            finally:
                self.within_epoch = False
                metrics.end_epoch_loop()

    def iter_steps(self, data_generator: Iterable[Any] | None = None) -> Iterator[Any]:
        """``TrainLoop.iter_steps`` (its docstring says what it yields and raises)."""
        self._check_can_open_step_loop()
        data, iterator = data_generator, None
        if data is None and self.max_step is None:
            raise RuntimeError('`data_generator` is required when `max_step` is not '
                               'configured, so as to prevent an unstoppable step loop')
        if data is not None:
            data = self._loop.distribution.distribute_data(data)
            iterator, skip = self.progress.open_data(data, self.dataflows, self.metrics.notice)
            if iterator is None:
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
        self.within_step = True
        loop = self._loop
        before, after = self._before_step_handlers, self._after_step_handlers
        time_handlers, clock, progress = self._time_metrics_handlers, self._clock, self.progress
        metrics = self.metrics
        book = metrics.book
        # the book's lists are emptied in place, never replaced, while steps run
        add_step_time = book.step_pending.setdefault('step_time', []).append
        batches = iterator if iterator is not None else itertools.repeat(None)
        max_step = self.max_step
        first_step = progress.step
        try:
            if self._before_steps_handlers:
                self._events.fire(EventKeys.BEFORE_STEPS, loop)
            if self.stop_requested or (max_step is not None and progress.step >= max_step):
                return
            for batch in batches:   # the limit is checked after each step, before fetching
                progress.step = step = progress.step + 1
                self.step_data = batch
                metrics.step_start = start = clock()
                if before:
                    for h in tuple(before):
                        h(loop)
                yield (step, batch) if iterator is not None else step
                if after:
                    for h in tuple(reversed(after)):
                        h(loop)
                if metrics.step_start is not None:  # else print_logs() recorded it
                    metrics.step_start = None
                    seconds = clock() - start
                    add_step_time(seconds)
                    if time_handlers:
                        self._events.fire(EventKeys.TIME_METRICS_COLLECTED, loop,
                                          {'step_time': seconds})
                if not step & MetricBook.COMPACT_MASK:
                    book.compact()
                max_step = self.max_step
                if self.stop_requested or (max_step is not None and step >= max_step):
                    break
            if progress.step == first_step and iterator is not None and \
                    not progress.epoch_resumed:
                metrics.notice(progress.EMPTY_EPOCH.format(epoch=progress.epoch))
            progress.epoch_finished = True   # the step loop ran to its end
            loop.distribution.steps_ended()
        finally:
            self.within_step = False
            metrics.step_start = self.step_data = None
            try:
                close = getattr(iterator, 'close', None) if owns_iterator else None
                if close is not None:
                    close()
            finally:
                if self._after_steps_handlers:
                    self._events.reverse_fire(EventKeys.AFTER_STEPS, loop)
