"""Reading and writing variable values the same way in graph and eager mode."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from .session import get_default_session_or_error
from .tf_vars import as_tf_variable

__all__ = ['read_variables', 'assign_variables']


def read_variables(variables: Sequence[Any]) -> list[np.ndarray]:
    """Copy the values of `variables` into new host numpy arrays.

    Graph mode fetches them all with one ``session.run`` of the default
    session; eager mode reads each variable.
    """
    tf_vars = [as_tf_variable(v) for v in variables]
    if not tf_vars:
        return []
    if tf.executing_eagerly():
        out = []
        for v in tf_vars:
            value = v.numpy()  # normally a fresh host copy already
            if not value.flags['OWNDATA'] or not value.flags['WRITEABLE']:
                value = value.copy()  # it may alias a tensor buffer: detach it
            out.append(value)
        return out
    return list(get_default_session_or_error().run(tf_vars))


def assign_variables(variables: Sequence[Any], values: Sequence[Any],
                     session: Any = None) -> None:
    """Assign `values` to `variables` (Keras variables through ``.value``).

    Graph mode feeds the values to the variables' initializers in one
    ``session.run``, so it needs no new ops and works on a finalized graph
    (a distributed variable, e.g. a ``MirroredVariable``, through the
    initializer of each of its copies); `session` is the default session
    if ``None``.
    """
    tf_vars = [as_tf_variable(v) for v in variables]
    if len(tf_vars) != len(values):
        raise ValueError(
            f'{len(values)} values given for {len(tf_vars)} variables')
    if not tf_vars:
        return
    if tf.executing_eagerly():
        for var, value in zip(tf_vars, values):
            var.assign(value)
        return
    sess = session if session is not None else get_default_session_or_error()
    feed = {}
    inits = []
    for var, value in zip(tf_vars, values):
        for part in _copies(var):
            feed[part.initializer.inputs[1]] = value
            inits.append(part.initializer)
    sess.run(inits, feed_dict=feed)


def _copies(var: Any) -> list[Any]:
    """The per-device copies of a distributed variable (their initializers take the
    value), else ``[var]``."""
    if isinstance(var, tf.distribute.DistributedValues):
        return list(var.values)
    return [var]
