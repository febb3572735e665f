"""Keep the best parameters in memory and restore them when training ends."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from ...tfops.session import get_default_session_or_error
from ...tfops.tf_vars import normalize_variables, variable_name, variable_shape
from ...utils.validation import check_positive_int
from ..checkpoint.io import HostBuffers
from ..metrics.monitor import Monitor, loop_monitor
from .base import LoopComponent

__all__ = ['EarlyStopping']


class EarlyStopping(LoopComponent):
    """Snapshots `variables` at each new best of a metric, restores them at the end.

    Used by ``TrainLoop(early_stopping=True)``, or added with
    :meth:`TrainLoop.add_component` to watch a metric of its own.  The
    snapshot is a host copy (numpy arrays) taken in memory; nothing is
    written to disk, except as part of the loop's checkpoints, so a resumed
    run still restores the true best at its end.

    * Each time the watched metric improves (see :class:`Monitor`: by more
      than `min_delta`, beating `baseline`; NaN never does), the values of
      `variables` are copied, into host buffers allocated once and
      overwritten at each new best (one host copy of the parameters, no
      more; see :class:`~tfsnippet.scaffold.checkpoint.io.HostBuffers`).
    * With `patience`, after that many values in a row without
      improvement the loop is asked to stop (:meth:`TrainLoop.request_stop`).
    * When the ``with`` block of the loop is left normally, the best values
      are assigned back; when it is left through an exception
      (``KeyboardInterrupt`` included) the variables keep their latest values.

    Args:
        variables: A list or dict of variables (graph, eager or Keras).
        patience: Stop after this many validations without improvement
            (``None``: never stop early, only restore the best at the end).
        metric: The metric to watch (default: the loop's `valid_metric_name`).
        mode: ``'min'``, ``'max'`` or ``'auto'`` (default: the loop's
            direction for its validation metric, else from the name).
        min_delta: How much better a value must be to count.
        baseline: A value to beat before any snapshot is taken.
        name: Tells two early stoppers of one loop apart in checkpoints.
    """

    role = 'early_stopping'

    def __init__(self, variables: Sequence[Any] | Mapping[str, Any], patience: int | None = None,
                 *, metric: str | None = None, mode: str | None = None, min_delta: float = 0.,
                 baseline: float | None = None, name: str | None = None):
        variables = normalize_variables(variables, 'param_vars')
        values = list(variables.values()) if isinstance(variables, dict) else list(variables)
        if not values:
            raise ValueError(
                '`early_stopping=True` needs `param_vars`: the variables whose best '
                'values are kept, got none')
        if metric is not None and (not isinstance(metric, str) or not metric):
            raise TypeError(f'`metric` must be a metric name or None, got {metric!r}')
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f'`name` must be a non-empty str or None, got {name!r}')
        self._variables = values
        self._patience = check_positive_int(patience, 'early_stopping_patience', allow_none=True)
        # checked now, built when the loop tells the metric and its direction
        Monitor(metric or 'metric', mode or 'auto', min_delta, baseline)
        self._metric, self._mode = metric, mode
        self._min_delta, self._baseline = min_delta, baseline
        self._name = name
        self._monitor: Monitor | None = None
        self._unwatch: Callable[[], None] | None = None
        self._snapshot: list[np.ndarray] | None = None
        self._snapshot_step: int | None = None
        self._buffers = HostBuffers()
        if not tf.executing_eagerly():
            self._buffers.prepare(values)   # graph ops: before the graph is finalized

    @property
    def state_key(self) -> str:
        return self._name or f'early_stopping[{self._metric or "valid"}]'

    @property
    def patience(self) -> int | None:
        """Validations without improvement after which the loop stops."""
        return self._patience

    @property
    def monitor(self) -> Monitor | None:
        """The watched metric's :class:`Monitor` (once added to a loop)."""
        return self._monitor

    @property
    def has_snapshot(self) -> bool:
        """Whether a best snapshot has been taken."""
        return self._snapshot is not None

    def take_snapshot(self, loop: Any) -> None:
        """Copy the current values of the variables as the best ones."""
        session = None if tf.executing_eagerly() else get_default_session_or_error()
        self._snapshot = self._buffers.copy(self._variables, session)
        self._snapshot_step = loop.step

    def restore(self) -> None:
        """Assign the snapshot back to the variables."""
        if self._snapshot is not None:
            session = None if tf.executing_eagerly() else get_default_session_or_error()
            self._buffers.assign(self._variables, self._snapshot, session)

    # ------------------------------------------------------------ hooks
    def on_attach(self, loop: Any) -> None:
        self._monitor = loop_monitor(loop, 'EarlyStopping', self._metric, self._mode,
                                     self._min_delta, self._baseline)

    def on_enter(self, loop: Any) -> None:
        monitor = self._monitor
        assert monitor is not None
        self._unwatch = loop.watch_metric(monitor.name, lambda value: self._on_value(loop, value))
        self.expect_metric(loop, monitor.name, 'early stopping')

    def _on_value(self, loop: Any, value: float) -> None:
        monitor = self._monitor
        assert monitor is not None
        if monitor.update(value):
            self.take_snapshot(loop)
        elif self._patience is not None and monitor.wait >= self._patience:
            waited = monitor.wait
            loop.request_stop(
                f'`{monitor.name}` has not improved for {waited} '
                f'validation{"s" if waited != 1 else ""} (patience {self._patience})')

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        name = self._monitor.name if self._monitor is not None else loop.valid_metric_name
        loop.events.remove_owned((self, 'expect', name))
        if error is not None:   # said once (a kill or preemption is no surprise): no warning
            loop.println('Early-stopping variables are not restored, because an error or an '
                         'interruption has occurred.')
        elif self._snapshot is None:
            loop.notice('Early-stopping has never been triggered! The variables will keep '
                        'their latest values. Did you forget to collect the metric '
                        f'`{name}`?')
        else:
            self.restore()
            best = self._monitor.best if self._monitor is not None else None
            loop.println(
                f'Restore early-stopping parameters: from step {self._snapshot_step}, '
                f'where {name} = {best:.6g}')

    # ------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        monitor = self._monitor.state_dict() if self._monitor is not None else None
        return {'snapshot': self._snapshot, 'step': self._snapshot_step, 'monitor': monitor}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        snapshot = state['snapshot']
        if snapshot is not None:
            if len(snapshot) != len(self._variables):
                raise ValueError(
                    f'The early-stopping snapshot holds {len(snapshot)} variables, but '
                    f'`param_vars` has {len(self._variables)}')
            for value, var in zip(snapshot, self._variables):
                shape = variable_shape(var)
                if None not in shape and tuple(np.shape(value)) != shape:
                    raise ValueError(
                        f'The early-stopping snapshot of {variable_name(var)!r} has shape '
                        f'{tuple(np.shape(value))}, the variable {shape}')
            # the loaded arrays become the buffers (copied only if TF cannot take them as
            # they are), so a resumed run still holds one copy
            snapshot = [self._buffers.adopt(str(i), value) for i, value in enumerate(snapshot)]
        if self._monitor is None:
            raise RuntimeError('`EarlyStopping` takes a state once added to a loop '
                               '(`loop.add_component`)')
        self._snapshot = snapshot
        self._snapshot_step = state['step']
        if state['monitor'] is not None:
            self._monitor.load_state_dict(state['monitor'])
