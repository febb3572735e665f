"""Loop components from the seed systems: loss guard, reduce-on-plateau, progress bar."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import tensorflow as tf
import tqdm

from ..scaffold.component import LoopComponent
from ..scaffold.event_keys import EventKeys
from ..scaffold.scheduled_var import ScheduledVariable
from ..utils.tf_vars import is_variable
from ..utils.validation import check_positive_int
from ..utils.var_io import assign_variables, read_variables

__all__ = ['LossGuard', 'LossGuardError', 'ReduceOnPlateau', 'ProgressBar']


class LossGuardError(RuntimeError):
    """The guarded metric was NaN, infinite or above its threshold."""


class LossGuard(LoopComponent):
    """Stops training, or raises, when a metric is NaN/Inf or above a threshold.

    It reads the metric each time ``collect_metrics`` receives it, every
    `every`-th time (reading an eager tensor waits for the device, so a
    larger `every` costs less).

    Args:
        metric: The metric to watch (``'loss'``).
        threshold: Also trip when the value is above this.
        action: ``'raise'`` a :class:`LossGuardError`, or ``'stop'`` the loop
            (``loop.request_stop``) with the reason.
        every: Check every this many values.

    Raises:
        ValueError: `action` is not ``'raise'``/``'stop'``, or `every` is
            not a positive int.
    """

    def __init__(self, metric: str = 'loss', threshold: float | None = None,
                 action: str = 'raise', every: int = 1):
        if not isinstance(metric, str) or not metric:
            raise TypeError(f'`metric` must be a metric name, got {metric!r}')
        if action not in ('raise', 'stop'):
            raise ValueError(f"`action` must be 'raise' or 'stop', got {action!r}")
        every = check_positive_int(every, 'every')
        if threshold is not None and (isinstance(threshold, bool) or
                                      not isinstance(threshold, (int, float))):
            raise TypeError(f'`threshold` must be a number or None, got {threshold!r}')
        self._metric = metric
        self._threshold = threshold
        self._action = action
        self._every = every
        self._count = 0
        self._handle = None

    def on_enter(self, loop: Any) -> None:
        self._handle = loop.events.on(EventKeys.METRICS_COLLECTED, self._check)

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None

    def _check(self, loop: Any, metrics: dict) -> None:
        value = metrics.get(self._metric)
        if value is None:
            return
        self._count += 1
        if (self._count - 1) % self._every:
            return
        if isinstance(value, tf.Tensor):
            value = value.numpy()
        value = float(np.mean(value))
        if math.isnan(value) or math.isinf(value):
            problem = f'`{self._metric}` is {value}'
        elif self._threshold is not None and value > self._threshold:
            problem = f'`{self._metric}` is {value:.6g}, above the threshold {self._threshold:g}'
        else:
            return
        message = f'{problem} at epoch {loop.epoch}, step {loop.step}'
        if self._action == 'raise':
            raise LossGuardError(message)
        loop.request_stop(message)


class ReduceOnPlateau(LoopComponent):
    """Scales a value (a learning rate) when the validation metric stops improving.

    After `patience` validations in a row without a new best of the loop's
    validation metric, the value is multiplied by `factor` (not below
    `min_value`) and a line says so; the count then starts again.

    Args:
        value: A :class:`~tfsnippet.ScheduledVariable`, or a ``tf.Variable``
            or Keras variable (e.g. ``optimizer.learning_rate`` of a Keras
            optimizer built with a float rate).
        factor: The factor, in ``(0, 1)``.
        patience: Validations without improvement before each reduction.
        min_value: The lower bound.

    Raises:
        ValueError: `factor` not in (0, 1), or `patience` not a positive int.
        TypeError: `value` is not a variable.
    """

    def __init__(self, value: Any, factor: float = .5, patience: int = 3,
                 min_value: float | None = None):
        if not (isinstance(value, ScheduledVariable) or is_variable(value)):
            raise TypeError(f'`value` must be a ScheduledVariable or a variable, got {value!r}')
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or \
                not 0. < factor < 1.:
            raise ValueError(f'`factor` must be a number in (0, 1), got {factor!r}')
        patience = check_positive_int(patience, 'patience')
        self._value = value
        self._factor = float(factor)
        self._patience = patience
        self._min_value = min_value
        self._bad = 0

    state_key = 'reduce_on_plateau'

    def _get(self) -> np.ndarray:
        if isinstance(self._value, ScheduledVariable):
            return np.asarray(self._value.get())
        return read_variables([self._value])[0]

    def _set(self, value: np.ndarray) -> None:
        if isinstance(self._value, ScheduledVariable):
            self._value.set(value)
        else:
            assign_variables([self._value], [value])

    def on_valid_metric(self, loop: Any, value: float, improved: bool) -> None:
        if improved:
            self._bad = 0
            return
        self._bad += 1
        if self._bad >= self._patience:
            self._bad = 0
            current = self._get()
            old = float(current)
            new = old * self._factor
            if self._min_value is not None:
                new = max(new, self._min_value)
            new_value = np.asarray(new, dtype=current.dtype)   # as the variable holds it
            new = float(new_value)
            if new != old:
                self._set(new_value)
                loop.println(f'Reduce the learning rate from {old:.6g} to {new:.6g}: '
                             f'`{loop.valid_metric_name}` has not improved for '
                             f'{self._patience} validations', with_tag=loop.within_epoch)

    def state_dict(self) -> dict[str, Any]:
        return {'bad_validations': self._bad}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._bad = int(state['bad_validations'])


class ProgressBar(LoopComponent):
    """A tqdm progress bar over the steps of each epoch.

    While the bar is shown, the loop's printed lines are written above it
    (through ``tqdm``'s external write mode), so ``print_logs`` output and
    the bar do not overwrite each other.  The bar's length is the number of
    steps of the previous epoch (unknown in the first).

    Args:
        leave: Keep each epoch's finished bar on screen.
        **tqdm_kwargs: Further arguments of ``tqdm.tqdm`` (``file``,
            ``mininterval``, ``disable``...).
    """

    def __init__(self, leave: bool = False, **tqdm_kwargs: Any):
        self._leave = leave
        self._kwargs = tqdm_kwargs
        self._bar: tqdm.tqdm | None = None
        self._handles: list[Any] = []
        self._print_func = None
        self._epoch_first_step = 0

    def on_enter(self, loop: Any) -> None:
        self._print_func = loop.print_func
        loop.print_func = self._print
        events = loop.events
        self._handles = [events.on(EventKeys.BEFORE_EPOCH, self._open),
                         events.on(EventKeys.AFTER_STEP, self._update),
                         events.on(EventKeys.AFTER_EPOCH, self._close)]

    def _print(self, line: str) -> None:
        if self._bar is not None:
            with self._bar.external_write_mode():
                self._print_func(line)
        else:
            self._print_func(line)

    def _open(self, loop: Any) -> None:
        self._close(loop)
        total = None if loop.steps_per_epoch is None else int(round(loop.steps_per_epoch))
        desc = f'Epoch {loop.epoch}' + ('' if loop.max_epoch is None else f'/{loop.max_epoch}')
        self._bar = tqdm.tqdm(total=total, desc=desc, leave=self._leave, unit='step',
                              **self._kwargs)

    def _update(self, loop: Any) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def _close(self, loop: Any) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        self._close(loop)
        for h in self._handles:
            h.remove()
        self._handles = []
        if self._print_func is not None:
            loop.print_func = self._print_func
            self._print_func = None
