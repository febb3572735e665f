"""The loop component that stops, fails or rolls back training on a NaN, infinite,
too large or spiking loss."""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Callable
from typing import Any

from ...utils.events import Every
from ...utils.validation import check_positive_int
from ..checkpoint.saver import LOOP_STATE_KEY
from .base import LoopComponent
from .checkpointer import Checkpointer

__all__ = ['LossGuard', 'LossGuardError']

ACTIONS = ('raise', 'stop', 'rollback')


class LossGuardError(RuntimeError):
    """The guarded metric was NaN, infinite or above its threshold (or kept being
    so after the rollbacks allowed)."""


class LossGuard(LoopComponent):
    """Stops training, raises, or rolls back to the newest checkpoint when a
    metric is NaN/Inf, above a threshold, or spikes.

    It reads the metric each time ``collect_metrics`` receives it, or only
    when the schedule `every` is due (reading an eager tensor waits for the
    device, so a sparser schedule costs less).

    **A spike** (`spike`): a value above `spike` times the running median of
    the last `window` finite values checked (Fabric's spike detection).  It
    is judged once `window` values have been seen, and only while that
    median is positive (a loss that may be negative, an ELBO, is guarded
    against NaN and the threshold only).  A value that trips the guard does
    not enter the window.  The window is kept sorted as it slides (a
    bisection per value), so a check costs well under a microsecond.

    **Rollback** (``action='rollback'``, Composer's NaN monitor): the loop's
    :class:`~tfsnippet.Checkpointer` waits for any save in flight and puts
    back its newest committed checkpoint, the variables and the saved
    objects (optimizer slots, their step counters); the loop's counters and
    data go on, so the batches that followed that checkpoint, up to the bad
    one, are skipped (their updates undone).  Each rollback is printed
    (``Loss guard: `loss` is nan at epoch 2, step 37: rolled back to the
    checkpoint of step 30 (...), skipping the batches of steps 31-37,
    rollback 1 of 3``) and kept in :attr:`rollbacks`, which the loop's
    checkpoints save; after `max_rollbacks` of them the next trip raises a
    :class:`LossGuardError`.  With no checkpoint yet it raises at once.
    The epoch's statistics keep the bad value (its mean is NaN): the
    weights, not the log line, are what the rollback mends.  Save often
    enough (``checkpoint_step_freq``) for a rollback to lose little.

    Under mixed precision, a loss-scaled optimizer skips a step whose
    gradients are not finite and lowers its scale: when `metric` is the
    *scaled* loss named by the loop's :class:`~tfsnippet.MixedPrecision`
    (its `scaled_loss`), a non-finite value does not trip the guard; a
    non-finite *unscaled* loss does.

    Args:
        metric: The metric to watch (``'loss'``).
        threshold: Also trip when the value is above this.
        action: ``'raise'`` a :class:`LossGuardError`, ``'stop'`` the loop
            (``loop.request_stop``) with the reason, or ``'rollback'``.
        every: Check every this many values (an int), or an
            :class:`~tfsnippet.utils.Every` (``Every(steps=100)``,
            ``Every(seconds=30)``).
        spike: Also trip on a value above `spike` (> 1) times the running
            median (``None``: no spike detection).
        window: The values the running median is taken over.
        max_rollbacks: The rollbacks allowed before giving up.
        name: Tells apart the saved states of two rollback guards of one metric.

    Raises:
        ValueError: `action` is not one of ``'raise'``/``'stop'``/``'rollback'``,
            `every`, `window` or `max_rollbacks` is not a positive int, or
            `spike` is not above 1.
    """

    def __init__(self, metric: str = 'loss', threshold: float | None = None,
                 action: str = 'raise', every: Every | int = 1, *,
                 spike: float | None = None, window: int = 20, max_rollbacks: int = 3,
                 name: str = ''):
        if not isinstance(metric, str) or not metric:
            raise TypeError(f'`metric` must be a metric name, got {metric!r}')
        if action not in ACTIONS:
            raise ValueError(f"`action` must be 'raise', 'stop' or 'rollback', got {action!r}")
        if not isinstance(every, Every):
            check_positive_int(every, 'every')
        if threshold is not None and (isinstance(threshold, bool) or
                                      not isinstance(threshold, (int, float))):
            raise TypeError(f'`threshold` must be a number or None, got {threshold!r}')
        if spike is not None and (isinstance(spike, bool) or not isinstance(spike, (int, float))
                                  or not spike > 1):
            raise ValueError(f'`spike` must be a number above 1 (a multiple of the running '
                             f'median) or None, got {spike!r}')
        if not isinstance(name, str):
            raise TypeError(f'`name` must be a str, got {name!r}')
        self._metric = metric
        self._threshold = threshold
        self._action = action
        self._every = Every.coerce(every)
        self._spike = None if spike is None else float(spike)
        self._size = check_positive_int(window, 'window')
        self._window: deque[float] = deque()   # the last values, oldest first
        self._sorted: list[float] = []         # the same, sorted
        self._max_rollbacks = check_positive_int(max_rollbacks, 'max_rollbacks')
        self._name = name
        self._unwatch: Callable[[], None] | None = None
        self._checkpointer: Checkpointer | None = None
        #: One record per rollback: ``step`` (the bad one), ``restored_step``,
        #: ``path``, ``skipped`` (batches), ``problem``.
        self.rollbacks: list[dict[str, Any]] = []

    @property
    def state_key(self) -> str:
        if self._action != 'rollback':
            return ''
        return f'loss_guard/{self._metric}' + (f'/{self._name}' if self._name else '')

    def state_dict(self) -> dict[str, Any]:
        return {'rollbacks': [dict(r) for r in self.rollbacks]}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        rollbacks = state.get('rollbacks')
        if not isinstance(rollbacks, list):
            raise TypeError(f'`rollbacks` of the loss guard state must be a list, got '
                             f'{rollbacks!r}')
        self.rollbacks = [dict(r) for r in rollbacks]

    def on_enter(self, loop: Any) -> None:
        if self._action == 'rollback':
            found = [c for c in loop.components_of(Checkpointer) if c.saver is not None]
            if not found:
                raise RuntimeError("`LossGuard(action='rollback')` restores the loop's newest "
                                   "checkpoint: the loop has no Checkpointer (pass "
                                   "`checkpoint_dir`)")
            self._checkpointer = found[0]
        self._window.clear()
        self._sorted.clear()
        self._unwatch = loop.watch_metric(self._metric, lambda value: self._check(loop, value),
                                          every=self._every)
        self.expect_metric(loop, self._metric, 'the loss guard')

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        self._checkpointer = None
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None

    def _check(self, loop: Any, value: float) -> None:
        if math.isnan(value) or math.isinf(value):
            scaling = loop.component('mixed_precision')
            if scaling is not None and scaling.excuses(self._metric, value):
                return   # a scaled loss: the optimizer skips this step and lowers the scale
            problem = f'`{self._metric}` is {value}'
        elif self._threshold is not None and value > self._threshold:
            problem = f'`{self._metric}` is {value:.6g}, above the threshold {self._threshold:g}'
        else:
            if self._spike is None:
                return
            ordered = self._sorted
            n = len(ordered)
            if n == self._size:
                half = n // 2
                median = ordered[half] if n % 2 else (ordered[half - 1] + ordered[half]) / 2
                if 0 < median and self._spike * median < value:
                    problem = (f'`{self._metric}` is {value:.6g}, a spike above '
                               f'{self._spike:g} times the median {median:.6g} of the last '
                               f'{n} values')
                    return self._trip(loop, problem)
                del ordered[bisect.bisect_left(ordered, self._window.popleft())]
            self._window.append(value)
            bisect.insort(ordered, value)
            return
        self._trip(loop, problem)

    def _trip(self, loop: Any, problem: str) -> None:
        message = f'{problem} at epoch {loop.epoch}, step {loop.step}'
        if self._action == 'raise':
            raise LossGuardError(message)
        if self._action == 'stop':
            loop.request_stop(message)
            return
        self._rollback(loop, message)

    def _rollback(self, loop: Any, message: str) -> None:
        if len(self.rollbacks) >= self._max_rollbacks:
            raise LossGuardError(f'{message}, after {len(self.rollbacks)} rollbacks (the '
                                 f'most `max_rollbacks` allows): giving up; the newest '
                                 f'checkpoint keeps diverging, lower the learning rate or '
                                 f'look at the data of these steps')
        checkpointer = self._checkpointer
        assert checkpointer is not None and checkpointer.saver is not None
        checkpointer.wait()   # a save in flight is committed first
        restored = checkpointer.saver.restore_latest(ignore_non_exist=True)
        if restored is None:
            raise LossGuardError(f'{message}: no checkpoint to roll back to yet in '
                                 f'`checkpoint_dir` {checkpointer.checkpoint_dir!r} (save '
                                 f'earlier with `checkpoint_step_freq`)')
        path, states = restored
        saved = states.get(LOOP_STATE_KEY) or {}
        restored_step = int(saved.get('loop', {}).get('step', 0))
        record = {'step': loop.step, 'epoch': loop.epoch, 'restored_step': restored_step,
                  'path': path, 'skipped': loop.step - restored_step, 'problem': message}
        self.rollbacks.append(record)
        steps = (f'step {loop.step}' if restored_step + 1 == loop.step
                 else f'steps {restored_step + 1}-{loop.step}')
        loop.println(f'Loss guard: {message}: rolled back to the checkpoint of step '
                     f'{restored_step} ({path}), skipping the batches of {steps}, rollback '
                     f'{len(self.rollbacks)} of {self._max_rollbacks}')
