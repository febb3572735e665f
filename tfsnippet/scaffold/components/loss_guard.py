"""The loop component that stops or fails training on a NaN, infinite or too large loss."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...utils.events import Every
from ...utils.validation import check_positive_int
from .base import LoopComponent

__all__ = ['LossGuard', 'LossGuardError']


class LossGuardError(RuntimeError):
    """The guarded metric was NaN, infinite or above its threshold."""


class LossGuard(LoopComponent):
    """Stops training, or raises, when a metric is NaN/Inf or above a threshold.

    It reads the metric each time ``collect_metrics`` receives it, or only
    when the schedule `every` is due (reading an eager tensor waits for the
    device, so a sparser schedule costs less).

    Under mixed precision, a loss-scaled optimizer skips a step whose
    gradients are not finite and lowers its scale: when `metric` is the
    *scaled* loss named by the loop's :class:`~tfsnippet.MixedPrecision`
    (its `scaled_loss`), a non-finite value does not trip the guard; a
    non-finite *unscaled* loss does.

    Args:
        metric: The metric to watch (``'loss'``).
        threshold: Also trip when the value is above this.
        action: ``'raise'`` a :class:`LossGuardError`, or ``'stop'`` the loop
            (``loop.request_stop``) with the reason.
        every: Check every this many values (an int), or an
            :class:`~tfsnippet.utils.Every` (``Every(steps=100)``,
            ``Every(seconds=30)``).

    Raises:
        ValueError: `action` is not ``'raise'``/``'stop'``, or `every` is
            not a positive int.
    """

    def __init__(self, metric: str = 'loss', threshold: float | None = None,
                 action: str = 'raise', every: Every | int = 1):
        if not isinstance(metric, str) or not metric:
            raise TypeError(f'`metric` must be a metric name, got {metric!r}')
        if action not in ('raise', 'stop'):
            raise ValueError(f"`action` must be 'raise' or 'stop', got {action!r}")
        if not isinstance(every, Every):
            check_positive_int(every, 'every')
        if threshold is not None and (isinstance(threshold, bool) or
                                      not isinstance(threshold, (int, float))):
            raise TypeError(f'`threshold` must be a number or None, got {threshold!r}')
        self._metric = metric
        self._threshold = threshold
        self._action = action
        self._every = Every.coerce(every)
        self._unwatch: Callable[[], None] | None = None

    def on_enter(self, loop: Any) -> None:
        self._unwatch = loop.watch_metric(self._metric, lambda value: self._check(loop, value),
                                          every=self._every)
        self.expect_metric(loop, self._metric, 'the loss guard')

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
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
            return
        message = f'{problem} at epoch {loop.epoch}, step {loop.step}'
        if self._action == 'raise':
            raise LossGuardError(message)
        loop.request_stop(message)
