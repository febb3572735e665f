"""The loop component that puts the current learning rate into the loop's metrics."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import tensorflow as tf

from ...tfops.session import get_default_session_or_error
from ...tfops.tf_vars import is_variable
from ...tfops.var_io import read_variables
from ...utils.text import short_repr
from ..event_keys import EventKeys
from ..scheduled_var import ScheduledVariable
from .base import LoopComponent

__all__ = ['LearningRateMonitor']


def _keras_module() -> Any:
    import keras
    return keras


def _is_keras_optimizer(obj: Any) -> bool:
    return isinstance(obj, _keras_module().optimizers.Optimizer)


def _is_schedule(obj: Any) -> bool:
    return isinstance(obj, _keras_module().optimizers.schedules.LearningRateSchedule)


def _is_v1_optimizer(obj: Any) -> bool:
    return isinstance(obj, tf.compat.v1.train.Optimizer)


class LearningRateMonitor(LoopComponent):
    """Collects the current learning rate as a metric, so that it reaches the
    log lines, the summaries and every sink::

        loop.add_component(spt.LearningRateMonitor(optimizer))
        # [Epoch 3/10, Step 300] ... loss: 0.21 lr: 0.0005

    `source` is where the rate is read:

    * a Keras 3 optimizer: its ``learning_rate`` now, a
      ``LearningRateSchedule`` evaluated at the optimizer's ``iterations``
      (as the optimizer does for its next update);
    * a ``tf.Variable``, a Keras variable or a
      :class:`~tfsnippet.ScheduledVariable` (an
      :class:`~tfsnippet.AnnealingVariable`): its value;
    * a ``keras.optimizers.schedules.LearningRateSchedule`` alone: evaluated
      at the loop's step (give the optimizer to use its own counter);
    * in graph style (TF1), also a scalar tensor (``exponential_decay(...)``),
      run with the default session; for a ``tf.compat.v1.train`` optimizer,
      give the variable or tensor it was given as its learning rate;
    * a callable without arguments returning the rate as a number.

    It is read once per printed line (``print_logs()``, step- or epoch-level,
    as :class:`~tfsnippet.MixedPrecision` reads its loss scale), and at the
    end of an epoch that printed none, so that every epoch's statistics (the
    summaries, the results store) have it; in an epoch line that follows
    step lines it is the mean of that epoch's readings.  Nothing is read per
    step: in graph style a schedule or tensor is built into the graph once,
    when the component is made (make it before the graph is finalized), and
    each reading is one ``session.run``.

    Args:
        source: Where the rate is read (see above).
        name: The metric's name.

    Raises:
        TypeError: `source` is none of the above (a ``tf.compat.v1.train``
            optimizer, a tensor in eager style...), or `name` is not a
            non-empty str.
    """

    def __init__(self, source: Any, name: str = 'lr'):
        if not isinstance(name, str) or not name:
            raise TypeError(f'`name` must be a non-empty str, got {short_repr(name)}')
        self._name = name
        self._source = source
        self._read = self._reader(source)
        self._read_in_epoch = False
        self._value: float | None = None

    def _reader(self, source: Any) -> Callable[[Any], float]:
        """A function of the loop returning the rate now (a float)."""
        graph = not tf.executing_eagerly()
        if isinstance(source, ScheduledVariable):
            source = source.variable
        if _is_keras_optimizer(source):
            if not graph:
                return lambda loop: float(np.asarray(source.learning_rate))
            source = source.learning_rate   # a variable, or the schedule's tensor: built once
        if is_variable(source):
            return lambda loop: float(read_variables([source])[0])
        if _is_schedule(source):
            if not graph:
                return lambda loop: float(np.asarray(source(loop.step)))
            step = tf.compat.v1.placeholder(tf.int64, [], name='lr_monitor_step')
            rate = source(step)
            return lambda loop: float(get_default_session_or_error().run(
                rate, feed_dict={step: loop.step}))
        if graph and isinstance(source, tf.Tensor):
            if source.shape.rank not in (0, None):
                raise TypeError(f'`source` must be a scalar tensor, got shape {source.shape}')
            return lambda loop: float(get_default_session_or_error().run(source))
        if callable(source) and not _is_v1_optimizer(source):
            return lambda loop: float(np.asarray(source()))
        hint = (': give the variable or tensor it was given as `learning_rate`'
                if _is_v1_optimizer(source) else '')
        raise TypeError(
            f'`source` must be a Keras optimizer, a variable, a ScheduledVariable, a '
            f'LearningRateSchedule, a scalar tensor (graph style) or a callable returning '
            f'the rate, got {short_repr(source)}{hint}')

    @property
    def name(self) -> str:
        """The metric's name."""
        return self._name

    @property
    def source(self) -> Any:
        """Where the rate is read."""
        return self._source

    @property
    def learning_rate(self) -> float | None:
        """The rate at the last reading (``None`` before the first)."""
        return self._value

    def read(self, loop: Any) -> float:
        """Read the rate now (one device sync) and collect it into `loop`'s metrics."""
        value = self._value = self._read(loop)
        self._read_in_epoch = True
        loop.collect_metrics({self._name: value})
        return value

    # ------------------------------------------------------------ hooks
    def on_enter(self, loop: Any) -> None:
        self._read_in_epoch = False
        self.subscribe(loop, EventKeys.LOGS_PRINTING, self.read)
        self.subscribe(loop, EventKeys.BEFORE_EPOCH, self._epoch_begins)
        self.subscribe(loop, EventKeys.AFTER_EPOCH, self._epoch_ends)

    def _epoch_begins(self, loop: Any) -> None:
        self._read_in_epoch = False

    def _epoch_ends(self, loop: Any) -> None:
        if not self._read_in_epoch:   # no line printed in this epoch
            self.read(loop)
