"""Gradient clipping and accumulation over several mini-batches, for both styles."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, overload

import tensorflow as tf

from ..tfops.tf_vars import as_tf_variable
from ..utils.validation import check_bool, check_positive_int, check_positive_number

__all__ = ['clip_gradients', 'GradientAccumulator']


@overload
def clip_gradients(grads: Sequence[Any], clip_norm: float | None = ...,
                   clip_value: float | None = ..., *,
                   return_norm: Literal[False] = ...) -> list[Any]: ...


@overload
def clip_gradients(grads: Sequence[Any], clip_norm: float | None = ...,
                   clip_value: float | None = ..., *,
                   return_norm: Literal[True]) -> tuple[list[Any], Any]: ...


def clip_gradients(grads: Sequence[Any], clip_norm: float | None = None,
                   clip_value: float | None = None, *,
                   return_norm: bool = False) -> list[Any] | tuple[list[Any], Any]:
    """Clip gradients by their global norm and/or element-wise by value.

    Works on eager tensors (inside or outside ``tf.function``) and on graph
    tensors alike; ``None`` gradients stay ``None``.

    Args:
        grads: The gradients (e.g. ``tape.gradient(loss, variables)`` or the
            first items of ``optimizer.compute_gradients(loss)``).
        clip_norm: Rescale so that the global norm is at most this.
        clip_value: Then clip each element to ``[-clip_value, clip_value]``.
        return_norm: Also return the global norm of `grads` before any
            clipping (a scalar tensor; the one ``tf.clip_by_global_norm``
            returns), e.g. to collect it as a metric.  With it, `clip_norm`
            and `clip_value` may both be ``None``: the gradients come back
            unchanged, with their norm.

    Returns:
        The clipped gradients, a list; with `return_norm`, the tuple
        ``(clipped gradients, global norm)``::

            grads, norm = spt.clip_gradients(grads, clip_norm=1., return_norm=True)
            optimizer.apply_gradients(zip(grads, variables))
            return {'loss': loss, 'grad_norm': norm}

    Raises:
        ValueError: Neither option is given (without `return_norm`), or one
            is not positive.
        TypeError: `return_norm` is not a bool.

    .. versionchanged:: 0.3
        ``return_norm``.
    """
    return_norm = check_bool(return_norm, 'return_norm')
    if clip_norm is None and clip_value is None and not return_norm:
        raise ValueError('Give `clip_norm` and/or `clip_value` (or `return_norm=True` for the '
                         'global norm alone)')
    clip_norm = check_positive_number(clip_norm, 'clip_norm', allow_none=True)
    clip_value = check_positive_number(clip_value, 'clip_value', allow_none=True)
    grads = list(grads)
    norm = None
    present = [g for g in grads if g is not None]
    if clip_norm is not None:
        clipped, norm = tf.clip_by_global_norm(present, clip_norm)
        it = iter(clipped)
        grads = [None if g is None else next(it) for g in grads]
    elif return_norm:
        norm = tf.linalg.global_norm(present)
    if clip_value is not None:
        grads = [None if g is None else tf.clip_by_value(g, -clip_value, clip_value)
                 for g in grads]
    if return_norm:
        return grads, norm
    return grads


class GradientAccumulator(tf.Module):
    """Averages the gradients of N mini-batches, then applies them once.

    Each :meth:`apply` call adds the gradients to accumulators; every
    `num_batches`-th call applies their mean with the optimizer (after
    optional clipping) and resets them.  One call serves both styles:

    * eager: call it inside the ``tf.function`` step; it runs the update
      with ``tf.cond``, so a Keras optimizer must be built first
      (``optimizer.build(variables)``);
    * graph: it returns an op to run every step in ``session.run``.

    The sums of the open window and the count of its batches are variables
    (:attr:`variables`), and the accumulator is a ``tf.Module`` whose
    ``.variables`` are those only (not the trained ones): save it with the
    model and the optimizer, ``TrainLoop(checkpoint_save_objects={'model':
    model, 'optimizer': optimizer, 'accumulator': acc})``, and a run resumed
    inside an accumulation window goes on exactly as if never stopped.
    Left out of the checkpoints, the resumed run starts the window again
    from empty sums and diverges.  (In graph style the loop saves every
    global variable, the accumulator's included.)

    Args:
        variables: The trained variables (graph, eager or Keras).
        num_batches: How many mini-batches make one update.
        clip_norm, clip_value: Passed to :func:`clip_gradients` for the mean.

    Raises:
        ValueError: `num_batches` is not a positive int, or `variables` is empty.

    .. versionchanged:: 0.3
        A ``tf.Module``: accepted in ``checkpoint_save_objects`` (was refused
        with a ``TypeError``) and in ``tf.train.Checkpoint``.
    """

    # the trained variables are the model's: not part of this module
    _TF_MODULE_IGNORED_PROPERTIES = tf.Module._TF_MODULE_IGNORED_PROPERTIES | {'_variables'}

    def __init__(self, variables: Sequence[Any], num_batches: int,
                 clip_norm: float | None = None, clip_value: float | None = None):
        num_batches = check_positive_int(num_batches, 'num_batches')
        super().__init__(name='gradient_accumulator')
        self._variables = [as_tf_variable(v) for v in variables]
        if not self._variables:
            raise ValueError('`variables` must not be empty')
        self._num_batches = num_batches
        self._clip_norm = clip_norm
        self._clip_value = clip_value
        with self.name_scope:
            self._sums = [tf.Variable(tf.zeros(v.shape, v.dtype), trainable=False,
                                      name='sum') for v in self._variables]
            self._count = tf.Variable(0, dtype=tf.int64, trainable=False, name='count')

    @property
    def num_batches(self) -> int:
        """How many mini-batches make one update."""
        return self._num_batches

    @property
    def variables(self) -> list[tf.Variable]:
        """The accumulators and the counter: the state a checkpoint must hold
        (initialize them in graph mode)."""
        return list(self._sums) + [self._count]

    def apply(self, optimizer: Any, grads: Sequence[Any]) -> Any:
        """Accumulate `grads`; on every `num_batches`-th call apply the mean.

        Returns:
            In graph mode the op to run; in eager mode whether an update happened.
        """
        grads = list(grads)
        if len(grads) != len(self._variables):
            raise ValueError(f'{len(grads)} gradients given for {len(self._variables)} variables')
        adds = [s.assign_add(g) for s, g in zip(self._sums, grads) if g is not None]
        with tf.control_dependencies(adds):
            count = self._count.assign_add(1)

        def update() -> Any:
            mean = [s / tf.cast(self._num_batches, s.dtype) for s in self._sums]
            if self._clip_norm is not None or self._clip_value is not None:
                mean = clip_gradients(mean, self._clip_norm, self._clip_value)
            applied = optimizer.apply_gradients(zip(mean, self._variables))
            deps = [applied] if isinstance(applied, tf.Operation) else []
            with tf.control_dependencies(deps):
                resets = [s.assign(tf.zeros_like(s)) for s in self._sums]
                with tf.control_dependencies(resets):
                    return self._count.assign(0) >= 0

        def skip() -> Any:
            return tf.constant(False)

        return tf.cond(count >= self._num_batches, update, skip)
