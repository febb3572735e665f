"""Session and variable helpers for TF1-style (``tf.compat.v1``) graph code.

In eager mode there is no session: :func:`ensure_variables_initialized`
does nothing (variables are initialized when created) and
:func:`get_variables_as_dict` reads a ``tf.Module`` or Keras model instead
of graph collections.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from .tf_vars import as_tf_variable, variable_name

__all__ = ['create_session', 'get_default_session_or_error', 'get_uninitialized_variables',
           'ensure_variables_initialized', 'get_variables_as_dict']

v1 = tf.compat.v1


def create_session(lock_memory: bool | float = True, log_device_placement: bool = False,
                   allow_soft_placement: bool = True, **kwargs: Any) -> tf.compat.v1.Session:
    """Create a ``tf.compat.v1.Session`` for graph-mode code.

    Args:
        lock_memory: ``True`` keeps TensorFlow's default GPU memory policy,
            ``False`` grows GPU memory as needed, and a float in (0, 1] takes
            that fraction of each GPU's memory.
        log_device_placement: Log where each op is placed.
        allow_soft_placement: Fall back to another device when an op has no
            kernel for the requested one.
        **kwargs: Further fields of ``tf.compat.v1.ConfigProto``.

    Raises:
        TypeError: `lock_memory` is not True, False or a float.
        RuntimeError: Eager execution is on (a session needs graph mode).
    """
    if lock_memory is not True and lock_memory is not False and type(lock_memory) is not float:
        raise TypeError(
            f'`lock_memory` must be True, False or float, got {lock_memory!r}')
    if tf.executing_eagerly():
        raise RuntimeError(
            '`create_session()` needs graph mode: call '
            '`tf.compat.v1.disable_eager_execution()` first, or run eager code '
            'without a session.')
    config = v1.ConfigProto(log_device_placement=log_device_placement,
                            allow_soft_placement=allow_soft_placement, **kwargs)
    if lock_memory is False:
        config.gpu_options.allow_growth = True
    elif lock_memory is not True:
        config.gpu_options.per_process_gpu_memory_fraction = lock_memory
    return v1.Session(config=config)


def get_default_session_or_error() -> tf.compat.v1.Session:
    """Return the default ``tf.compat.v1`` session.

    Raises:
        RuntimeError: No session is active (enter ``with session.as_default():``).
    """
    sess = v1.get_default_session()
    if sess is None:
        raise RuntimeError(
            'No session is active: enter `with session.as_default():` first')
    return sess


def _as_var_list(variables: Any) -> list[Any]:
    if variables is None:
        return list(v1.global_variables())
    if isinstance(variables, Mapping):
        variables = list(variables.values())
    return [as_tf_variable(v) for v in variables]


def get_uninitialized_variables(variables: Any = None, name: str | None = None) -> list[Any]:
    """Return the variables of `variables` not yet initialized, in order.

    Args:
        variables: A list or dict of variables; all global variables by default.
        name: Name scope of the checking op.

    Eager variables are always initialized, so in eager mode this is ``[]``.
    """
    if tf.executing_eagerly():
        return []
    var_list = _as_var_list(variables)
    if not var_list:
        return []
    sess = get_default_session_or_error()
    flags = sess.run(_is_initialized_ops(var_list, name))
    return [v for v, ok in zip(var_list, flags) if not ok]


# {graph: {variable: its is-initialized op}}: the ops are made once per
# variable, so repeated checks do not keep growing the graph
_INIT_CHECKS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _is_initialized_ops(var_list: list[Any], name: str | None) -> list[Any]:
    graph = v1.get_default_graph()
    cache = _INIT_CHECKS.setdefault(graph, {})
    missing = [v for v in var_list if v not in cache]
    if missing:
        with v1.name_scope(name or 'get_uninitialized_variables'):
            for v in missing:
                cache[v] = v1.is_variable_initialized(v)
    return [cache[v] for v in var_list]


def ensure_variables_initialized(variables: Any = None, name: str | None = None) -> None:
    """Initialize those of `variables` that are not initialized yet.

    Args:
        variables: A list or dict of variables; all global variables by
            default (variables only in other collections are not touched).
        name: Name scope of the created ops.

    Does nothing in eager mode.
    """
    if tf.executing_eagerly():
        return
    uninit = get_uninitialized_variables(variables, name=name)
    if uninit:
        sess = get_default_session_or_error()
        with v1.name_scope(name or 'ensure_variables_initialized'):
            sess.run(v1.variables_initializer(uninit))


def get_variables_as_dict(scope: Any = None,
                          collection: str = v1.GraphKeys.GLOBAL_VARIABLES) -> dict[str, Any]:
    """Return ``{name: variable}`` for the variables under `scope`.

    Args:
        scope: In graph mode a scope name (``'child'`` and ``'child/'`` both
            match ``child/...`` but not ``child2/...``), a
            ``tf.compat.v1.VariableScope`` or ``None`` for all.  In either mode
            a ``tf.Module`` or Keras layer/model, whose variables are then
            keyed by their path (Keras) or name.
        collection: The graph collection to read (graph mode only).

    Names have their ``:0`` suffix and the scope prefix removed.
    """
    if scope is not None and hasattr(scope, 'variables') and not isinstance(
            scope, (str, v1.VariableScope)):
        return {variable_name(v): v for v in scope.variables}
    if isinstance(scope, v1.VariableScope):
        scope = scope.name
    prefix = ''
    if scope:
        prefix = scope if scope.endswith('/') else scope + '/'
    out = {}
    for v in v1.get_collection(collection):
        name = variable_name(v)
        if prefix:
            if not name.startswith(prefix):
                continue
            name = name[len(prefix):]
        out[name] = v
    return out
