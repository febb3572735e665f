"""Recognising variables and metric values of both TensorFlow styles.

tfsnippet accepts three kinds of variables: graph variables of
``tf.compat.v1`` code, eager ``tf.Variable`` objects and Keras 3
variables (``keras.Variable``, which is not a ``tf.Variable``; its
``.value`` is).  The helpers here hide the differences.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from ..utils.text import short_repr

__all__ = ['is_variable', 'variable_name', 'variable_shape', 'as_tf_variable',
           'normalize_variables']


@functools.lru_cache(maxsize=None)
def _keras_variable_type() -> type[Any] | None:
    try:
        import keras
    except ImportError:  # pragma: no cover - keras ships with TF >= 2.16
        return None
    return getattr(keras, 'Variable', None)


def is_variable(obj: Any) -> bool:
    """Whether `obj` is a ``tf.Variable`` (graph or eager) or a Keras 3 variable."""
    if isinstance(obj, tf.Variable):
        return True
    kv = _keras_variable_type()
    return kv is not None and isinstance(obj, kv)


def as_tf_variable(var: Any) -> tf.Variable:
    """The ``tf.Variable`` behind `var` (a Keras variable's ``.value``)."""
    if isinstance(var, tf.Variable):
        return var
    kv = _keras_variable_type()
    if kv is not None and isinstance(var, kv):
        return var.value
    raise TypeError(f'Not a variable: {var!r}')


def variable_name(var: Any) -> str:
    """A readable name: a Keras variable's ``path``, else ``name`` without ``:0``."""
    path = getattr(var, 'path', None)
    if isinstance(path, str) and not isinstance(var, tf.Variable):
        return path
    name = var.name
    if name.endswith(':0'):
        name = name[:-2]
    return name


def variable_shape(var: Any) -> tuple[int | None, ...]:
    """The static shape of `var` as a tuple (``None`` for unknown dimensions)."""
    shape = var.shape
    if isinstance(shape, tf.TensorShape):
        if shape.rank is None:
            return ()
        return tuple(shape.as_list())
    return tuple(None if d is None else int(d) for d in shape)


def normalize_variables(variables: Any, arg_name: str) -> list[Any] | dict[str, Any]:
    """Check that `variables` is a list or dict of variables and copy it.

    Args:
        variables: ``None``, a mapping ``{name: variable}`` or an iterable of
            variables.
        arg_name: The argument's name, for error messages.

    Returns:
        A new list, or a new dict in the same order.

    Raises:
        TypeError: `variables` is neither, or holds something that is not a
            variable.
    """
    if variables is None:
        return []
    out: list[Any] | dict[str, Any]
    items: list[tuple[Any, Any]]   # a copy: `out` may change while they are checked
    if isinstance(variables, Mapping):
        out = dict(variables)
        items = list(out.items())
    elif (isinstance(variables, (str, bytes)) or is_variable(variables)
          or not hasattr(variables, '__iter__')):
        raise TypeError(
            f'`{arg_name}` must be a list or dict of variables, got {short_repr(variables)}')
    else:
        out = list(variables)
        items = list(enumerate(out))
    for key, var in items:
        wrapped = getattr(var, 'variable', None)
        if not is_variable(var) and is_variable(wrapped):
            var = out[key] = wrapped   # a ScheduledVariable (or another wrapper of one)
        if not is_variable(var):
            raise TypeError(
                f'`{arg_name}` must hold only variables (tf.Variable or '
                f'keras.Variable), but item {key!r} is {short_repr(var)}')
    return out
