"""The loop component that runs a learning-rate range test before the training."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from ...dataflows import DataFlow
from ...tfops.tf_vars import as_tf_variable, is_variable
from ...tfops.var_io import assign_variables, read_variables
from ...utils.text import short_repr
from ..event_keys import EventKeys
from .base import LoopComponent

__all__ = ['LearningRateFinder']

_MODES = ('exponential', 'linear')


def _keras_optimizer_type() -> Any:
    import keras
    return keras.optimizers.Optimizer


class LearningRateFinder(LoopComponent):
    """A learning-rate range test, run when the loop is entered, before its first
    epoch: `steps` steps of your `step` on the first batches of `data`, the rate
    going from `min_lr` to `max_lr`; then everything is put back::

        finder = spt.LearningRateFinder(optimizer, 1e-6, 1., steps=100,
                                        step=train_step, data=train_flow)
        loop.add_component(finder)
        with loop:              # the sweep runs here, then the weights, the
            ...                 # optimizer, the rate and the flow are as before
        print(finder.suggestion)

    **The sweep.**  Step ``i`` (from 0) uses the rate ``min_lr * (max_lr /
    min_lr) ** (i / (steps - 1))`` (``mode='exponential'``) or ``min_lr + (max_lr -
    min_lr) * i / (steps - 1)`` (``'linear'``); ``step(*batch)`` (or
    ``step(batch)`` for a batch that is not a tuple) returns the loss (a
    number, a scalar tensor, or a dict holding `metric`).  The losses are
    smoothed with an exponential moving average (`smoothing`, bias-corrected);
    the sweep ends early once the smoothed loss exceeds 4 times its lowest,
    or at the end of one pass of `data`.
    :attr:`rates` and :attr:`losses` hold the curve.

    **The suggestion** (:attr:`suggestion`) is the rate where the smoothed
    loss falls fastest against the rate's logarithm (the steepest descent of
    the smoothed curve, ``argmin`` of its gradient), not divided by anything.
    It is collected as the result ``lr_finder_suggestion`` (so it reaches the
    results store and every sink), and set as the rate only with
    ``apply=True``.

    **What is put back**, bitwise: `variables` (eager: default the loop's
    ``param_vars``; graph: default every global variable of the graph, so the
    optimizer's slots and counters too), the optimizer's own variables (its
    slots, ``iterations``) and its rate, and the position of `data` (a
    :class:`~tfsnippet.DataFlow`: its state, the shuffling included; a list or
    range needs nothing).  The loop's counters never moved: the sweep's steps
    are not the loop's.  The training after it is the same as without it.

    Args:
        target: A Keras optimizer (its ``learning_rate`` is set) or the
            ``tf.Variable`` the rate is read from.
        min_lr: The first rate (> 0).
        max_lr: The last rate (> `min_lr`).
        steps: How many steps the sweep takes (>= 2).
        mode: ``'exponential'`` or ``'linear'``.
        apply: Whether to set the suggested rate after the sweep.
        step: Your step: a callable of a batch, returning the loss.
        data: Where the batches come from (a DataFlow, a list...).
        variables: What to put back besides the optimizer (see above).
        metric: The key of the loss when `step` returns a dict.
        smoothing: The factor of the loss's moving average, in ``[0, 1)``.

    Raises:
        TypeError: `target`, `step` or `variables` is of the wrong kind.
        ValueError: A rate, `steps`, `mode` or `smoothing` is out of range.
    """

    def __init__(self, target: Any, min_lr: float = 1e-6, max_lr: float = 1., steps: int = 100,
                 mode: str = 'exponential', apply: bool = False, *,
                 step: Callable[..., Any] | None = None, data: Any = None,
                 variables: Any = None, metric: str = 'loss', smoothing: float = 0.98):
        optimizer_type = _keras_optimizer_type()
        if not (isinstance(target, optimizer_type) or is_variable(target)):
            raise TypeError(f'`target` must be a Keras optimizer or the variable holding the '
                            f'rate, got {short_repr(target)}')
        if not (isinstance(min_lr, (int, float)) and min_lr > 0):
            raise ValueError(f'`min_lr` must be a positive number, got {short_repr(min_lr)}')
        if not (isinstance(max_lr, (int, float)) and max_lr > min_lr):
            raise ValueError(f'`max_lr` must be a number above `min_lr` ({min_lr}), got '
                             f'{short_repr(max_lr)}')
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 2:
            raise ValueError(f'`steps` must be an int >= 2, got {short_repr(steps)}')
        if mode not in _MODES:
            raise ValueError(f'`mode` must be one of {_MODES}, got {short_repr(mode)}')
        if not callable(step):
            raise TypeError(f'`step` must be your step, a callable of a batch returning the '
                            f'loss, got {short_repr(step)}')
        if data is None:
            raise TypeError('`data` must give the batches of the sweep (a DataFlow, a list...), '
                            'got None')
        if not (isinstance(smoothing, (int, float)) and 0. <= smoothing < 1.):
            raise ValueError(f'`smoothing` must be in [0, 1), got {short_repr(smoothing)}')
        self._optimizer = target if isinstance(target, optimizer_type) else None
        self._rate_var = None if self._optimizer is not None else as_tf_variable(target)
        self._min_lr, self._max_lr, self._steps = float(min_lr), float(max_lr), steps
        self._mode, self._apply = mode, bool(apply)
        self._step, self._data, self._metric = step, data, metric
        self._smoothing = float(smoothing)
        if variables is not None:
            variables = list(variables.values()) if isinstance(variables, Mapping) \
                else list(variables)
            for v in variables:
                if not is_variable(v):
                    raise TypeError(f'`variables` must hold variables, got {short_repr(v)}')
        self._variables = variables
        self.rates: list[float] = []
        self.losses: list[float] = []
        self.smoothed: list[float] = []
        self.suggestion: float | None = None

    # ------------------------------------------------------------ the rate
    def rate_at(self, i: int) -> float:
        """The rate of the sweep's step `i` (from 0)."""
        t = i / (self._steps - 1)
        if self._mode == 'linear':
            return self._min_lr + (self._max_lr - self._min_lr) * t
        return self._min_lr * (self._max_lr / self._min_lr) ** t

    def _set_rate(self, value: float) -> None:
        if self._optimizer is not None:
            self._optimizer.learning_rate = value
        else:
            var = self._rate_var
            assert var is not None
            assign_variables([var], [np.asarray(value, var.dtype.as_numpy_dtype)])

    def _saved_variables(self, loop: Any) -> list[Any]:
        if self._variables is not None:
            found = [as_tf_variable(v) for v in self._variables]
        elif not tf.executing_eagerly():
            found = list(tf.compat.v1.global_variables())
        else:
            params = loop.param_vars
            params = list(params.values()) if isinstance(params, Mapping) else list(params or ())
            found = [as_tf_variable(v) for v in params]
        if self._optimizer is not None:
            found += [as_tf_variable(v) for v in self._optimizer.variables]
        elif self._rate_var is not None:
            found.append(self._rate_var)
        unique: dict[int, Any] = {}
        for v in found:
            unique.setdefault(id(v), v)
        return list(unique.values())

    def _loss_of(self, out: Any) -> float:
        if isinstance(out, Mapping):
            if self._metric not in out:
                raise ValueError(f'`step` returned a dict without `{self._metric}` (the '
                                 f'`metric` of the finder): got keys {sorted(out)}')
            out = out[self._metric]
        return float(np.asarray(out))

    # ------------------------------------------------------------ hooks
    def on_enter(self, loop: Any) -> None:
        saved_vars = self._saved_variables(loop)
        before = read_variables(saved_vars)
        flow_state = self._data.state_dict() \
            if isinstance(self._data, DataFlow) and self._data.is_resumable else None
        self.rates, self.losses, self.smoothed = [], [], []
        avg, best = 0., math.inf
        iterator = iter(self._data)
        try:
            for i in range(self._steps):
                try:
                    batch = next(iterator)
                except StopIteration:
                    break
                rate = self.rate_at(i)
                self._set_rate(rate)
                out = self._step(*batch) if isinstance(batch, tuple) else self._step(batch)
                loss = self._loss_of(out)
                avg = self._smoothing * avg + (1. - self._smoothing) * loss
                smooth = avg / (1. - self._smoothing ** (i + 1))
                self.rates.append(rate)
                self.losses.append(loss)
                self.smoothed.append(smooth)
                if not math.isfinite(smooth) or smooth > 4. * best:
                    break
                best = min(best, smooth)
        finally:
            close = getattr(iterator, 'close', None)
            if close is not None:
                close()
            assign_variables(saved_vars, before)
            if flow_state is not None:
                self._data.load_state_dict(flow_state)
        self.suggestion = self.suggest()
        if self.suggestion is None:
            loop.println('Learning-rate finder: too few finite losses to suggest a rate')
            return
        # reported when the first epoch begins: the loop counts as entered only then
        self._handle = self.subscribe(loop, EventKeys.BEFORE_EPOCH, self._report)
        if self._apply:
            self._set_rate(self.suggestion)

    def _report(self, loop: Any) -> None:
        self._handle.remove()
        assert self.suggestion is not None
        loop.collect_results(lr_finder_suggestion=self.suggestion)
        loop.println(f'Learning-rate finder: {len(self.rates)} steps from {self.rates[0]:.3g} '
                     f'to {self.rates[-1]:.3g}; suggested rate {self.suggestion:.3g}'
                     + (' (applied)' if self._apply else ''))

    def suggest(self) -> float | None:
        """The rate where the smoothed loss falls fastest (``None`` with fewer than 3
        finite points)."""
        points = [(r, s) for r, s in zip(self.rates, self.smoothed) if math.isfinite(s)]
        if len(points) < 3:
            return None
        rates = np.array([p[0] for p in points])
        smooth = np.array([p[1] for p in points])
        x = np.log(rates) if self._mode == 'exponential' else rates
        return float(rates[int(np.argmin(np.gradient(smooth, x)))])
