"""The loop component that watches a loss-scaled (mixed-precision) optimizer."""

from __future__ import annotations

import math
from typing import Any

import tensorflow as tf

from ...tfops.var_io import read_variables
from ...utils.validation import check_positive_int, short_repr
from ..event_keys import EventKeys
from .base import LoopComponent

__all__ = ['MixedPrecision']

#: The metrics a :class:`MixedPrecision` collects when a line is printed.
LOSS_SCALE, SKIPPED_STEPS = 'loss_scale', 'skipped_steps'


def _keras_loss_scale_optimizer() -> type | None:
    try:
        import keras
    except ImportError:   # pragma: no cover - keras ships with TensorFlow 2.16+
        return None
    return keras.optimizers.LossScaleOptimizer


def _is_v1_loss_scale_optimizer(optimizer: Any) -> bool:
    v1 = getattr(tf.compat.v1, 'mixed_precision', None)
    cls = getattr(v1, 'MixedPrecisionLossScaleOptimizer', None)
    return cls is not None and isinstance(optimizer, cls)


class MixedPrecision(LoopComponent):
    """Reports the loss scale and the skipped steps of a loss-scaled optimizer.

    ``loop.add_component(spt.MixedPrecision(optimizer))`` for a Keras 3
    ``keras.optimizers.LossScaleOptimizer`` (eager steps and ``tf.function``
    steps), or, in TF1 graph code, a
    ``tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer`` with a
    dynamic loss scale and `iterations` (the ``global_step`` given to its
    ``minimize``/``apply_gradients``, which it does not increment on a
    skipped step).

    Each time the loop prints a line (``print_logs()``, step- or
    epoch-level) it reads the optimizer's variables once and collects

    * ``loss_scale``: the current loss scale;
    * ``skipped_steps``: how many steps of this run (resumes included) the
      optimizer skipped because their gradients were not finite (each
      skip halves the scale).  It is the loop's steps minus the steps the
      optimizer applied, so it assumes one ``apply`` per loop step.

    They reach the log line, the summaries and every sink as any collected
    metric does; in an epoch line that follows step lines, each is the mean
    of that epoch's readings.  Nothing is read per step (no device sync).

    When the loss scale fell at `warn_after` readings in a row, the loop's
    :meth:`~tfsnippet.TrainLoop.notice` says once that the model may never
    train (its gradients are not finite even at a small scale).

    A :class:`~tfsnippet.LossGuard` watching `scaled_loss` (the metric name
    under which the *scaled* loss is collected, if it is) does not trip on
    a non-finite value of it: that step is skipped by the optimizer and the
    scale lowered.  A non-finite *unscaled* loss still trips it.

    Args:
        optimizer: The loss-scaled optimizer.
        iterations: The applied-step counter of a TF1
            ``MixedPrecisionLossScaleOptimizer`` (a variable); not used with
            Keras, whose ``optimizer.iterations`` counts applied steps.
        scaled_loss: The name of the collected metric that holds the scaled
            loss, if any.
        warn_after: Readings in a row with a falling scale before the warning.
        name: The key of the state (the skipped steps) in checkpoints.

    Raises:
        TypeError: `optimizer` is not a loss-scaled optimizer (a plain one
            must be wrapped), or `iterations` is missing for a TF1 one.
        ValueError: A TF1 optimizer with a fixed loss scale (nothing to watch).
    """

    role = 'mixed_precision'

    def __init__(self, optimizer: Any, *, iterations: Any = None, scaled_loss: str | None = None,
                 warn_after: int = 3, name: str = 'mixed_precision'):
        keras_cls = _keras_loss_scale_optimizer()
        self._keras = keras_cls is not None and isinstance(optimizer, keras_cls)
        if not self._keras and not _is_v1_loss_scale_optimizer(optimizer):
            raise TypeError(
                f'`optimizer` must be a loss-scaled optimizer: a Keras '
                f'keras.optimizers.LossScaleOptimizer (wrap yours: '
                f'keras.optimizers.LossScaleOptimizer(optimizer)), or in TF1 graph code a '
                f'tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer; got type '
                f'{type(optimizer).__name__}: {short_repr(optimizer)}')
        self._scale_var: Any = None
        if not self._keras:
            scales = [v for v in optimizer.variables() if 'current_loss_scale' in v.name]
            if not scales:
                raise ValueError(
                    f'`optimizer` {short_repr(optimizer)} has a fixed loss scale: it never '
                    f'skips a step, so there is nothing to watch (make it with '
                    f"loss_scale='dynamic')")
            self._scale_var = scales[0]
            if iterations is None:
                raise TypeError(
                    '`iterations` is required with a TF1 MixedPrecisionLossScaleOptimizer: '
                    'pass the `global_step` variable given to its minimize()/apply_gradients() '
                    '(it is not incremented on a skipped step)')
        if scaled_loss is not None and (not isinstance(scaled_loss, str) or not scaled_loss):
            raise TypeError(f'`scaled_loss` must be a metric name or None, got '
                            f'{short_repr(scaled_loss)}')
        if not isinstance(name, str) or not name:
            raise TypeError(f'`name` must be a non-empty str, got {short_repr(name)}')
        self._optimizer = optimizer
        self._iterations = iterations
        self._scaled_loss = scaled_loss
        self._warn_after = check_positive_int(warn_after, 'warn_after')
        self._name = name
        self._base: tuple[int, int] | None = None   # (loop step, applied steps) when entered
        self._skipped_before = 0   # skipped steps of earlier runs (from the checkpoint)
        self._skipped = 0
        self._scale: float | None = None
        self._falls = 0
        self._warned = False
        self._loop: Any = None

    @property
    def state_key(self) -> str:
        return self._name

    @property
    def optimizer(self) -> Any:
        """The watched optimizer."""
        return self._optimizer

    @property
    def scaled_loss(self) -> str | None:
        """The name of the metric holding the scaled loss, if any."""
        return self._scaled_loss

    @property
    def loss_scale(self) -> float | None:
        """The loss scale at the last reading (``None`` before the first)."""
        return self._scale

    @property
    def skipped_steps(self) -> int:
        """The skipped steps at the last reading (earlier runs included)."""
        return self._skipped

    def excuses(self, metric: str, value: float) -> bool:
        """Whether a guard should let a non-finite `value` of `metric` pass: it
        is the scaled loss, whose step the optimizer skips."""
        return metric == self._scaled_loss and not math.isfinite(value)

    # ------------------------------------------------------------ readings
    def _variables(self) -> list[Any]:
        opt = self._optimizer
        if self._keras:
            scale = opt.dynamic_scale if getattr(opt, 'built', False) else None
            return [opt.iterations] + ([scale] if scale is not None else [])
        return [self._iterations, self._scale_var]

    def read(self) -> tuple[float, int]:
        """Read the optimizer now (one device sync): ``(loss scale, skipped steps)``."""
        values = read_variables(self._variables())
        applied = int(values[0])
        scale = float(values[1]) if len(values) > 1 else float(self._optimizer.initial_scale)
        if self._base is not None and self._loop is not None:
            base_step, base_applied = self._base
            steps = self._loop.step - base_step
            self._skipped = self._skipped_before + max(0, steps - (applied - base_applied))
        return scale, self._skipped

    def _on_printing(self, loop: Any) -> None:
        scale, skipped = self.read()
        previous, self._scale = self._scale, scale
        if previous is not None:
            self._falls = self._falls + 1 if scale < previous else 0
        if self._falls >= self._warn_after and not self._warned:
            self._warned = True
            loop.notice(
                f'`loss_scale` fell at each of the last {self._falls} log lines, to {scale:g}, '
                f'and {skipped} step{"s" if skipped != 1 else ""} were skipped: the gradients '
                f'are not finite even at a small scale, so the model may never train (look '
                f'for a NaN or Inf in the data or the model, or a float16 overflow in a '
                f'layer that should compute in float32)')
        loop.collect_metrics({LOSS_SCALE: scale, SKIPPED_STEPS: skipped})

    # ------------------------------------------------------------ hooks
    def on_enter(self, loop: Any) -> None:
        if self._keras and not tf.executing_eagerly():
            raise RuntimeError(
                'A Keras 3 LossScaleOptimizer runs in eager code (eager or tf.function '
                'steps), not in TF1 graph code: there, use '
                'tf.compat.v1.mixed_precision.MixedPrecisionLossScaleOptimizer and pass '
                '`iterations=` (see the mixed-precision guide)')
        self._loop = loop
        self._base = None
        applied = int(read_variables(self._variables()[:1])[0])
        self._base = (loop.step, applied)
        self._skipped = self._skipped_before
        self._scale, self._falls = None, 0
        self.subscribe(loop, EventKeys.LOGS_PRINTING, self._on_printing)

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        self._base = None
        self._loop = None

    def state_dict(self) -> dict[str, Any]:
        if self._base is not None:
            self.read()
        return {'skipped_steps': self._skipped}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._skipped_before = self._skipped = int(state.get('skipped_steps', 0))
