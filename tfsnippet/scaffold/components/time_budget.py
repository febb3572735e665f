"""The loop component that stops training before a wall-clock limit, leaving time to save."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...utils.misc import humanize_duration
from ...utils.validation import check_positive_number
from ..checkpoint.policies import SaveAtEnd
from ..event_keys import EventKeys
from .base import LoopComponent
from .checkpointer import Checkpointer

if TYPE_CHECKING:  # pragma: no cover
    from ..loop.core import TrainLoop

__all__ = ['TimeBudget']


class TimeBudget(LoopComponent):
    """Stops training at a step boundary early enough to save a checkpoint
    before `seconds` have passed since the loop was entered (Lightning's
    ``max_time``): for a job with a wall-clock limit (SLURM ``--time``, a
    spot instance's notice, a CI slot).

    After each step it reads the loop's clock once and stops when the time
    left is less than what the rest needs: the longest of the last
    checkpoint saves (the loop's :class:`~tfsnippet.Checkpointer`; none
    yet: `save_estimate`), the longest recent step (one more step must fit)
    and the `margin`.  The stop is *resumable*
    (``loop.request_stop(reason, resumable=True)``): the rest of the epoch's
    body runs (its validation, its log line), the checkpointer's final save
    (``SaveAtEnd``, or one made here when its policies have none) holds
    the state, and the next start goes on training from it, with the next
    epoch (the batches left in the interrupted epoch are not trained on).

    Why it stopped: the loop's :attr:`~tfsnippet.TrainLoop.stop_reason`
    (``time budget: ...``), a printed line, :attr:`stopped`, and the loop's
    results (``time_budget_stopped`` = 1 and ``time_budget_left`` in
    seconds, recorded by an :class:`~tfsnippet.Experiment` into its results
    store).

    Args:
        seconds: The budget, in seconds of the loop's clock, counted from
            the moment the loop is entered (each start has its own budget).
        margin: Seconds kept in reserve beyond the estimates.
        save_estimate: What a save is taken to cost before one was timed.

    Raises:
        ValueError: A number is not positive (`margin`, `save_estimate`: >= 0).
    """

    #: How many of the last saves the estimate looks at; the longest step is
    #: that of the current and the previous block of this many steps.
    HISTORY = 8

    def __init__(self, seconds: float, margin: float = 5., save_estimate: float = 10.):
        self._seconds = check_positive_number(seconds, 'seconds')
        self._margin = _non_negative(margin, 'margin')
        self._save_estimate = _non_negative(save_estimate, 'save_estimate')
        self._saves: deque[float] = deque(maxlen=self.HISTORY)
        self._deadline = self._stop_at = self._last = 0.
        self._block_max = self._previous_max = 0.   # the longest step of each block
        self._count = 0
        self._clock: Callable[[], float] = time.perf_counter
        self.stopped: str | None = None   # the reason, once it stopped the loop

    def __repr__(self) -> str:
        return f'TimeBudget(seconds={self._seconds:g}, margin={self._margin:g})'

    @property
    def seconds(self) -> float:
        """The budget."""
        return self._seconds

    def reserve(self) -> float:
        """The seconds kept for the rest: the longest recent save (or
        `save_estimate`), the longest recent step and `margin`."""
        save = max(self._saves) if self._saves else self._save_estimate
        return save + max(self._block_max, self._previous_max) + self._margin

    def _update(self) -> None:
        self._stop_at = self._deadline - self.reserve()

    def on_enter(self, loop: TrainLoop) -> None:
        self.stopped = None
        self._saves.clear()
        self._block_max = self._previous_max = 0.
        self._count = 0
        self._clock = loop.clock   # fixed while the loop is entered
        self._last = now = self._clock()
        self._deadline = now + self._seconds
        self._update()
        self.subscribe(loop, EventKeys.AFTER_STEP, self._after_step)
        self.subscribe(loop, EventKeys.LOOP_HELD, self._on_held)

    def _on_held(self, loop: TrainLoop, cause: str, seconds: float) -> None:
        if cause == 'checkpoint':
            self._saves.append(seconds)
            self._update()

    def _after_step(self, loop: TrainLoop) -> None:
        # the per-step path: a clock reading and a few comparisons
        now = self._clock()
        took, self._last = now - self._last, now
        if took > self._block_max:
            self._block_max = took
            self._update()
        self._count += 1
        if self._count == self.HISTORY:   # a new block: the one before it is forgotten
            self._count, self._previous_max, self._block_max = 0, self._block_max, 0.
            self._update()
        if now <= self._stop_at:   # what is left covers the reserve
            return
        left = self._deadline - now
        self.stopped = (f'time budget: {humanize_duration(left)} left of '
                        f'{humanize_duration(self._seconds)}, keeping '
                        f'{humanize_duration(self.reserve())} to save')
        loop.request_stop(self.stopped, resumable=True)
        loop.println(f'Time budget: stopping at epoch {loop.epoch}, step {loop.step}, '
                     f'{humanize_duration(left)} before the limit')

    def on_exit(self, loop: TrainLoop, error: BaseException | None) -> None:
        if self.stopped is None or error is not None:
            return
        for checkpointer in loop.components_of(Checkpointer):
            if checkpointer.saver is not None and not checkpointer.writes_suspended and \
                    not any(isinstance(p, SaveAtEnd) for p in checkpointer.save_policies):
                checkpointer.save(loop)   # its policies have no final save: this one
        left = self._deadline - loop.clock()
        loop.collect_results(time_budget_stopped=1., time_budget_left=left)


def _non_negative(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(f'`{name}` must be a number of seconds >= 0, got {value!r}')
    return float(value)
