"""The loop component that keeps an exponential moving average of the weights."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import tensorflow as tf

from ...tfops.session import get_default_session_or_error
from ...tfops.tf_vars import as_tf_variable, is_variable
from ...tfops.var_io import assign_variables, read_variables
from ...utils.text import short_repr
from ..event_keys import EventKeys
from .base import LoopComponent

__all__ = ['WeightAverage']


def _no_result(build: Any) -> Any:
    """A ``tf.function`` running the ops `build` makes, returning nothing."""
    def run() -> None:
        build()
    return tf.function(run, autograph=False)


class WeightAverage(LoopComponent):
    """An exponential moving average (EMA) of `variables`, to evaluate, pick
    the best and export while the live weights train::

        average = spt.WeightAverage(model.trainable_variables, decay=0.999,
                                    swap_at_epoch_end=True)
        loop.add_component(average)
        ...
        with average.swapped():      # the averages in the variables
            evaluate(model)          # the live values come back afterwards

    **The average** is plain: after each step ``avg = decay * avg + (1 -
    decay) * w``, starting from the variables' values when the loop is
    entered.  With ``warmup=True`` the `n`-th update (from 0) uses
    ``min(decay, (1 + n) / (10 + n))`` instead, as
    ``tf.train.ExponentialMovingAverage`` does with ``num_updates``.

    **How it is updated**: by default one fused op after each step (the
    loop's ``AFTER_STEP``): one call of a ``tf.function`` over all the
    variables in eager style, one ``session.run`` of a grouped assign op in
    graph style, built once.  That is one more dispatch per step; with
    ``manual=True`` the loop does not update it and you fold the update into
    your own step, where it costs no dispatch of its own::

        @tf.function
        def train_step(x, y):
            ...optimizer.apply_gradients(...)
            average.update()            # eager: the assigns join the step's graph

        train_op = average.update(after=train_op)   # graph: one op to run

    **With the loop's features**: ``swap_at_epoch_end=True`` puts the
    averages in the variables when each epoch's step loop ends
    (``AFTER_STEPS``), so that the validation you run after it, the metric
    :class:`~tfsnippet.EarlyStopping` snapshots at a new best, the epoch's
    checkpoints (the best one and what ``export_best`` exports included)
    hold the averaged weights; the live values go back when the next epoch
    begins.  When the loop is left the live values go back too, unless
    ``finalize=True``, which leaves the averages in the variables (as Keras'
    ``use_ema`` does at the end of ``fit``).  Add the component *before* an
    :class:`~tfsnippet.EarlyStopping` that restores its best, unless
    ``finalize=True`` (components exit in reverse order).

    **Checkpoints**: the averages (and whether the variables held them when
    the checkpoint was saved) are the component's state, so a resumed loop
    goes on with the same averages and the live weights in its variables.

    Memory: one copy of the variables (the averages, as non-trainable
    variables beside them); a swap needs no more.

    Args:
        variables: The variables to average (``tf.Variable``\\ s or Keras
            variables), a list or a dict.
        decay: The decay, in ``[0, 1)``.
        warmup: Whether to use the smaller decay of the first updates.
        manual: Whether you call :meth:`update` yourself (the loop does not).
        swap_at_epoch_end: Whether to put the averages in the variables from
            the end of each epoch's steps to the start of the next epoch.
        finalize: Whether to leave the averages in the variables when the
            loop is left.
        name: Tells two averages of the same variables apart in checkpoints.

    Raises:
        TypeError: `variables` holds something that is not a variable.
        ValueError: `variables` is empty, or `decay` is not in ``[0, 1)``.
    """

    def __init__(self, variables: Any, decay: float = 0.999, *, warmup: bool = False,
                 manual: bool = False, swap_at_epoch_end: bool = False,
                 finalize: bool = False, name: str = ''):
        if isinstance(variables, dict):
            variables = list(variables.values())
        variables = list(variables) if isinstance(variables, (list, tuple)) else [variables]
        if not variables:
            raise ValueError('`variables` must hold at least one variable, got none')
        for v in variables:
            if not is_variable(v):
                raise TypeError(f'`variables` must hold tf.Variables or Keras variables, got '
                                f'{short_repr(v)}')
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or \
                not 0. <= decay < 1.:
            raise ValueError(f'`decay` must be a float in [0, 1), got {short_repr(decay)}')
        self._vars = [as_tf_variable(v) for v in variables]
        self._decay = float(decay)
        self._warmup = bool(warmup)
        self._manual = bool(manual)
        self._swap_at_epoch_end = bool(swap_at_epoch_end)
        self._finalize = bool(finalize)
        self._name = str(name)
        self._graph = not tf.executing_eagerly()
        self._swapped = False
        self._loaded: dict[str, Any] | None = None
        with tf.init_scope() if not self._graph else contextlib.nullcontext():
            self._avgs = [tf.Variable(v.read_value() if not self._graph else
                                      tf.zeros(v.shape, v.dtype),
                                      trainable=False, name='weight_average')
                          for v in self._vars]
            self._count = tf.Variable(0, dtype=tf.int64, trainable=False,
                                      name='weight_average_count')
        if self._graph:
            self._update_op = self._update_ops()
            self._swap_op = self._swap_ops()
            self._copy_op = tf.group(*[a.assign(v) for a, v in zip(self._avgs, self._vars)],
                                     self._count.assign(0))
            self._run_update: Any = None
        else:
            self._update_fn = _no_result(self._update_ops)
            self._swap_fn = _no_result(self._swap_ops)
            self._copy_fn = _no_result(self._copy_ops)

    # ------------------------------------------------------------ the ops
    def _decay_now(self) -> Any:
        if not self._warmup:
            return None
        n = tf.cast(self._count, tf.float32)
        return tf.minimum(self._decay, (1. + n) / (10. + n))

    def _update_ops(self) -> Any:
        decay = self._decay_now()
        ops = []
        for v, a in zip(self._vars, self._avgs):
            rate = (1. - self._decay) if decay is None else tf.cast(1. - decay, a.dtype)
            ops.append(a.assign_sub(rate * (a - tf.cast(v, a.dtype))))
        if self._warmup:
            with tf.control_dependencies(ops):
                ops.append(self._count.assign_add(1))
        return tf.group(*ops)

    def _swap_ops(self) -> Any:
        live = [tf.identity(v.read_value()) for v in self._vars]
        avgs = [tf.identity(a.read_value()) for a in self._avgs]
        with tf.control_dependencies(live + avgs):
            ops = [v.assign(x) for v, x in zip(self._vars, avgs)]
            ops += [a.assign(x) for a, x in zip(self._avgs, live)]
        return tf.group(*ops)

    def _copy_ops(self) -> Any:
        return tf.group(*[a.assign(v) for a, v in zip(self._avgs, self._vars)],
                        self._count.assign(0))

    # ------------------------------------------------------------ public
    @property
    def decay(self) -> float:
        """The decay."""
        return self._decay

    @property
    def variables(self) -> list[Any]:
        """The averaged variables (``tf.Variable``\\ s)."""
        return list(self._vars)

    @property
    def average_variables(self) -> list[tf.Variable]:
        """The variables holding the averages (the live values while swapped)."""
        return list(self._avgs)

    @property
    def is_swapped(self) -> bool:
        """Whether the variables hold the averages now."""
        return self._swapped

    def update(self, after: Any = None) -> Any:
        """Update the averages from the variables now.

        Eager style: inside a ``tf.function`` the assigns join the function's
        graph (after the ops before the call); outside one, one call of the
        fused update.  Graph style: returns the grouped update op, run after
        the op(s) `after` (your train op) if given: run it instead of them.
        """
        if self._graph:
            if after is None:
                return self._update_op
            with tf.control_dependencies(tf.nest.flatten(after)):
                return self._update_ops()
        if after is not None:
            raise ValueError('`after` is for graph style; in eager style call `update()` '
                             'after your step, got `after`=' + short_repr(after))
        if tf.inside_function():
            return self._update_ops()
        return self._update_fn()

    def averages(self) -> list[np.ndarray]:
        """The averages now, as numpy arrays (a read of each)."""
        return read_variables(self._vars if self._swapped else self._avgs)

    def swap(self) -> None:
        """Exchange the values of the variables and of the averages (one fused op)."""
        if self._graph:
            get_default_session_or_error().run(self._swap_op)
        else:
            self._swap_fn()
        self._swapped = not self._swapped

    @contextlib.contextmanager
    def swapped(self) -> Iterator[WeightAverage]:
        """Put the averages in the variables for the block, the live values back after."""
        if self._swapped:
            yield self
            return
        self.swap()
        try:
            yield self
        finally:
            if self._swapped:
                self.swap()

    # ------------------------------------------------------------ state
    @property
    def state_key(self) -> str:
        return 'weight_average' + (f'.{self._name}' if self._name else '')

    def state_dict(self) -> dict[str, Any]:
        values = read_variables(self._avgs + [self._count])
        return {'values': values[:-1], 'count': int(values[-1]), 'swapped': self._swapped}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for key in ('values', 'count', 'swapped'):
            if key not in state:
                raise ValueError(f'The state of `WeightAverage` lacks {key!r}: got keys '
                                 f'{sorted(state)}')
        if len(state['values']) != len(self._avgs):
            raise ValueError(f'The state of `WeightAverage` holds {len(state["values"])} '
                             f'averages for {len(self._avgs)} variables')
        self._loaded = dict(state)

    # ------------------------------------------------------------ hooks
    def on_enter(self, loop: Any) -> None:
        state, self._loaded = self._loaded, None
        if state is None:
            if self._graph:
                get_default_session_or_error().run(self._copy_op)
            else:
                self._copy_fn()
            self._swapped = False
        else:
            assign_variables(self._avgs + [self._count],
                             list(state['values']) + [np.int64(state['count'])])
            # saved while swapped: the variables hold the averages, the state the live values
            self._swapped = bool(state['swapped'])
            if self._swapped:
                self.swap()
        if not self._manual:
            if self._graph:
                self._run_update = get_default_session_or_error().make_callable(
                    self._update_op)
                self.subscribe(loop, EventKeys.AFTER_STEP, self._after_step_graph)
            else:
                self.subscribe(loop, EventKeys.AFTER_STEP, self._after_step_eager)
        if self._swap_at_epoch_end:
            self.subscribe(loop, EventKeys.AFTER_STEPS, self._steps_ended)
            self.subscribe(loop, EventKeys.BEFORE_EPOCH, self._epoch_begins)

    def _after_step_eager(self, loop: Any) -> None:
        self._update_fn()

    def _after_step_graph(self, loop: Any) -> None:
        self._run_update()

    def _steps_ended(self, loop: Any) -> None:
        if not self._swapped:
            self.swap()

    def _epoch_begins(self, loop: Any) -> None:
        if self._swapped:
            self.swap()

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        if self._swapped != (self._finalize and error is None):
            self.swap()
        if self._graph:
            self._run_update = None
