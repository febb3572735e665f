"""The loop component that lowers a learning rate when the validation metric stalls."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...tfops.tf_vars import is_variable, variable_name
from ...utils.validation import check_positive_int
from ...tfops.var_io import assign_variables, read_variables
from ..scheduled_var import ScheduledVariable
from ..metrics.monitor import Monitor, loop_monitor
from .base import LoopComponent

__all__ = ['ReduceOnPlateau']


class ReduceOnPlateau(LoopComponent):
    """Scales a value (a learning rate) when a metric stops improving.

    After `patience` values in a row without improvement of the watched
    metric (see :class:`Monitor`), the value is multiplied by `factor` (not
    below `min_value`) and a line says so; then `cooldown` values pass
    before the count starts again.

    Args:
        value: A :class:`~tfsnippet.ScheduledVariable`, or a ``tf.Variable``
            or Keras variable (e.g. ``optimizer.learning_rate`` of a Keras
            optimizer built with a float rate).
        factor: The factor, in ``(0, 1)``.
        patience: Values without improvement before each reduction.
        min_value: The lower bound (`min_lr` is the same, by Keras's name).
        metric: The metric to watch (default: the loop's `valid_metric_name`).
        mode: ``'min'``, ``'max'`` or ``'auto'`` (default: the loop's
            direction for its validation metric, else from the name).
        min_delta: How much better a value must be to count.
        cooldown: Values to skip after a reduction before counting again.
        name: Tells two components of the same configuration apart in
            checkpoints (the state key is derived from `metric` and the
            variable's name otherwise).

    Raises:
        ValueError: `factor` not in (0, 1), `patience` not a positive int,
            `cooldown` negative, or both `min_value` and `min_lr`.
        TypeError: `value` is not a variable.
    """

    def __init__(self, value: Any, factor: float = .5, patience: int = 3,
                 min_value: float | None = None, *, metric: str | None = None,
                 mode: str | None = None, min_delta: float = 0., cooldown: int = 0,
                 min_lr: float | None = None, name: str | None = None):
        if not (isinstance(value, ScheduledVariable) or is_variable(value)):
            raise TypeError(f'`value` must be a ScheduledVariable or a variable, got {value!r}')
        if isinstance(factor, bool) or not isinstance(factor, (int, float)) or \
                not 0. < factor < 1.:
            raise ValueError(f'`factor` must be a number in (0, 1), got {factor!r}')
        if min_value is not None and min_lr is not None:
            raise ValueError('`min_value` and `min_lr` are the same option: pass one of them')
        if isinstance(cooldown, bool) or not isinstance(cooldown, int) or cooldown < 0:
            raise ValueError(f'`cooldown` must be an int >= 0, got {cooldown!r}')
        if metric is not None and (not isinstance(metric, str) or not metric):
            raise TypeError(f'`metric` must be a metric name or None, got {metric!r}')
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f'`name` must be a non-empty str or None, got {name!r}')
        Monitor(metric or 'metric', mode or 'auto', min_delta)   # checked now
        self._value = value
        self._factor = float(factor)
        self._patience = check_positive_int(patience, 'patience')
        self._min_value = min_value if min_value is not None else min_lr
        self._metric, self._mode, self._min_delta = metric, mode, min_delta
        self._cooldown = cooldown
        self._name = name
        self._monitor: Monitor | None = None
        self._cooling = 0
        self._unwatch: Callable[[], None] | None = None

    @property
    def state_key(self) -> str:
        if self._name:
            return self._name
        var = self._value.variable if isinstance(self._value, ScheduledVariable) else self._value
        return f'reduce_on_plateau[{self._metric or "valid"}:{variable_name(var)}]'

    def _get(self) -> np.ndarray:
        if isinstance(self._value, ScheduledVariable):
            return np.asarray(self._value.get())
        return read_variables([self._value])[0]

    def _set(self, value: np.ndarray) -> None:
        if isinstance(self._value, ScheduledVariable):
            self._value.set(value)
        else:
            assign_variables([self._value], [value])

    def on_attach(self, loop: Any) -> None:
        self._monitor = loop_monitor(loop, 'ReduceOnPlateau', self._metric, self._mode,
                                     self._min_delta)

    def on_enter(self, loop: Any) -> None:
        assert self._monitor is not None
        self._unwatch = loop.watch_metric(self._monitor.name,
                                          lambda value: self._on_value(loop, value))
        self.expect_metric(loop, self._monitor.name, 'reduce-on-plateau')

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None

    def _on_value(self, loop: Any, value: float) -> None:
        monitor = self._monitor
        assert monitor is not None
        improved = monitor.update(value)
        if self._cooling:
            self._cooling -= 1
            monitor.wait = 0
            return
        if improved or monitor.wait < self._patience:
            return
        monitor.wait = 0
        current = self._get()
        old = float(current)
        new = old * self._factor
        if self._min_value is not None:
            new = max(new, self._min_value)
        new_value = np.asarray(new, dtype=current.dtype)   # as the variable holds it
        new = float(new_value)
        if new != old:
            self._set(new_value)
            self._cooling = self._cooldown
            loop.println(f'Reduce the learning rate from {old:.6g} to {new:.6g}: '
                         f'`{monitor.name}` has not improved for {self._patience} '
                         f'validation{"s" if self._patience != 1 else ""}',
                         with_tag=loop.within_epoch)

    def state_dict(self) -> dict[str, Any]:
        monitor = self._monitor.state_dict() if self._monitor is not None else None
        return {'monitor': monitor, 'cooling': self._cooling}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self._monitor is None:
            raise RuntimeError('`ReduceOnPlateau` takes a state once added to a loop '
                               '(`loop.add_component`)')
        if state.get('monitor') is not None:
            self._monitor.load_state_dict(state['monitor'])
        self._cooling = int(state.get('cooling', 0))
