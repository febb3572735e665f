"""Non-trainable variables set from Python, e.g. a learning rate on a schedule."""

from __future__ import annotations

from typing import Any

import numpy as np
import tensorflow as tf

from ..tfops.tensor_wrapper import TensorWrapper
from ..tfops.var_io import assign_variables, read_variables

__all__ = ['ScheduledVariable', 'AnnealingVariable']


class ScheduledVariable(TensorWrapper):
    """A non-trainable variable that the training code changes from Python.

    It is a :class:`~tfsnippet.utils.TensorWrapper` of a read of the
    variable, so it is used as a tensor: ``lr * 2``, ``loss * beta`` and
    ``tf.convert_to_tensor(lr)`` work in both modes (a read in eager mode
    and inside ``tf.function`` gives the current value), and in graph mode
    ``session.run([train_op, lr])`` fetches its value.  ``float(lr)`` is
    its current value (:meth:`get`), so it may be passed straight to
    ``loop.collect_metrics(lr=lr)``.

    It serves as a learning rate in both TensorFlow styles:

    * ``tf.compat.v1.train.AdamOptimizer(learning_rate=sv)`` (graph mode):
      it converts to a tensor reading the variable;
    * ``keras.optimizers.Adam(learning_rate=sv)`` (eager mode): it is a
      zero-argument callable returning the variable, which Keras reads at
      every step, inside ``tf.function`` too.

    :meth:`get` and :meth:`set` need the default session in graph mode (and
    work on a finalized graph); the variable must be initialized first, as
    with ``spt.utils.ensure_variables_initialized()``.

    Args:
        name: The variable's name.
        initial_value: Its first value.
        dtype: Its dtype (``tf.float32``); `initial_value` is cast to it.
        model_var: Graph mode: also add it to ``MODEL_VARIABLES``.
        collections: Graph mode: further collections to add it to.
    """

    def __init__(self, name: str, initial_value: Any, dtype: Any = tf.float32,
                 model_var: bool = False, collections: list[str] | None = None):
        if not isinstance(name, str) or not name:
            raise ValueError(f'`name` must be a non-empty str, got {name!r}')
        self._init(name, initial_value, tf.as_dtype(dtype), model_var, collections)

    def _init(self, name: str, initial_value: Any, dtype: tf.DType, model_var: bool,
              collections: list[str] | None) -> None:
        value = np.asarray(initial_value).astype(dtype.as_numpy_dtype)
        self._dtype = dtype
        # graph mode: the one read op of the variable's graph, so that fetching
        # or using the wrapper does not add ops to the graph each time
        self._read: tf.Tensor | None = None
        if tf.executing_eagerly():
            self._variable = tf.Variable(value, dtype=dtype, name=name, trainable=False)
        else:
            names = [tf.compat.v1.GraphKeys.GLOBAL_VARIABLES]
            if model_var:
                names.append(tf.compat.v1.GraphKeys.MODEL_VARIABLES)
            names.extend(c for c in (collections or ()) if c not in names)
            self._variable = tf.compat.v1.get_variable(
                name, initializer=tf.constant(value, dtype=dtype), dtype=dtype,
                trainable=False, collections=names)
            with tf.compat.v1.name_scope(self._variable.op.name + '/'):
                self._read = tf.identity(self._variable, name='scheduled_value')

    @property
    def tensor(self) -> tf.Tensor:
        """A read of the variable: in graph mode the same tensor each time
        (in the variable's graph), otherwise a new read in the current
        context (eager or ``tf.function``)."""
        read = self._read
        if read is not None and read.graph is tf.compat.v1.get_default_graph():
            return read
        return self._variable.value()

    @property
    def variable(self) -> tf.Variable:
        """The ``tf.Variable``."""
        return self._variable

    @property
    def dtype(self) -> tf.DType:
        """The variable's dtype."""
        return self._dtype

    def get(self) -> Any:
        """The current value, as a numpy value."""
        return read_variables([self._variable])[0]

    def set(self, value: Any) -> Any:
        """Assign `value` (cast to the dtype) and return what was assigned."""
        value = np.asarray(value).astype(self._dtype.as_numpy_dtype)
        assign_variables([self._variable], [value])
        return value

    def __call__(self) -> tf.Variable:
        """The variable itself: what a Keras optimizer reads as its learning rate."""
        return self._variable

    def __float__(self) -> float:
        return float(self.get())

    def __repr__(self) -> str:
        return f'{type(self).__name__}({self._variable.name!r})'


class AnnealingVariable(ScheduledVariable):
    """A :class:`ScheduledVariable` multiplied by `ratio` at each :meth:`anneal`.

    Args:
        name: The variable's name.
        initial_value: Its first value (raised to `min_value` if below it).
        ratio: The factor of each :meth:`anneal`, in ``(0, 1]``.
        min_value: The value never goes below this.
        dtype, model_var, collections: As for :class:`ScheduledVariable`.

    Raises:
        ValueError: `ratio` is not in ``(0, 1]``.
    """

    def __init__(self, name: str, initial_value: Any, ratio: float, min_value: Any = None,
                 dtype: Any = tf.float32, model_var: bool = False,
                 collections: list[str] | None = None):
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float, np.number)) or \
                not 0. < float(ratio) <= 1.:
            raise ValueError(f'`ratio` must be a number in (0, 1], got {ratio!r}')
        dtype = tf.as_dtype(dtype)
        self._ratio = np.asarray(ratio).astype(dtype.as_numpy_dtype)
        self._min_value = (None if min_value is None
                           else np.asarray(min_value).astype(dtype.as_numpy_dtype))
        if self._min_value is not None:
            initial_value = np.maximum(initial_value, self._min_value)
        super().__init__(name, initial_value, dtype=dtype, model_var=model_var,
                         collections=collections)

    @property
    def ratio(self) -> Any:
        """The factor of each :meth:`anneal`."""
        return self._ratio

    @property
    def min_value(self) -> Any:
        """The lower bound, or ``None``."""
        return self._min_value

    def anneal(self) -> Any:
        """Multiply the value by `ratio` (not below `min_value`); return the new value."""
        value = self.get() * self._ratio
        if self._min_value is not None:
            value = np.maximum(value, self._min_value)
        return self.set(value)
