"""The loop component that warm-starts a fresh run from other weights."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from ...tfops.tf_vars import is_variable
from ..checkpoint.matching import NothingMatchedError
from ..checkpoint.warm_start import warm_start
from .base import LoopComponent
from .checkpointer import Checkpointer

__all__ = ['WarmStart']


class WarmStart(LoopComponent):
    """Puts other weights into the variables of a run that has nothing to resume.

    Used by ``TrainLoop(warm_start=...)``.  When the loop is entered and
    no checkpoint was resumed (there was none, or ``restore_checkpoint=False``),
    it calls :func:`~tfsnippet.scaffold.checkpoint.warm_start.warm_start` (a
    tfsnippet checkpoint, a ``tf.train.Checkpoint``, a TF1 ``Saver``
    checkpoint or a Keras ``.weights.h5``, with name mappings), or your own
    function, as TF's Supervisor ran its ``init_fn``.  A resumed run keeps
    its checkpoint's values.

    Without ``targets``, the targets are the loop's model: the one Keras
    model or layer or ``tf.Module`` among the checkpointer's objects
    (``checkpoint_save_objects``), matched by object structure when the
    source is a Keras ``.weights.h5`` or a ``tf.train.Checkpoint`` and by
    name otherwise; when there is no such object, or several, the loop's
    `param_vars` in eager mode and the graph's global variables in graph
    mode, matched by name (if nothing matches, the error says which
    ``targets`` to pass).

    Args:
        spec: A source path; or a dict of :func:`warm_start` arguments
            (``source`` required; ``targets`` as above by default); or a
            function called with the loop.
    """

    role = 'warm_start'

    def __init__(self, spec: str | os.PathLike[str] | Mapping[str, Any] |
                 Callable[[Any], Any]):
        if isinstance(spec, (str, os.PathLike)):
            spec = {'source': spec}
        if isinstance(spec, Mapping):
            if 'source' not in spec:
                raise ValueError(f'`warm_start` as a dict needs a `source`, got keys '
                                 f'{sorted(spec)}')
            unknown = sorted(set(spec) - {'source', 'targets', 'mapping', 'include', 'exclude',
                                          'skip_mismatch'})
            if unknown:
                raise ValueError(f'`warm_start` has unknown keys {unknown}: expected the '
                                 f'arguments of `spt.warm_start`')
            spec = dict(spec)
        elif not callable(spec):
            raise TypeError(f'`warm_start` must be a checkpoint path, a dict of `spt.warm_start` '
                            f'arguments or a function of the loop, got {spec!r}')
        self._spec = spec
        self.report: Any = None

    def on_restore(self, loop: Any) -> None:
        checkpointer = loop.component('checkpointer')
        if checkpointer is not None and checkpointer.restored_from is not None:
            return
        if callable(self._spec):
            self._spec(loop)
            return
        kwargs = dict(self._spec)
        models: dict[str, Any] | None = None   # the loop's, when `targets` are not given
        if kwargs.get('targets') is None:
            models = _models_of(loop)
            if len(models) == 1:
                kwargs['targets'] = next(iter(models.values()))
            else:
                kwargs['targets'] = (loop.param_vars if tf.executing_eagerly()
                                     else list(tf.compat.v1.global_variables()))
        try:
            self.report = warm_start(print_func=loop.println, **kwargs)
        except NothingMatchedError as e:
            if models is None or len(models) == 1:
                raise
            raise NothingMatchedError(f'{e} {_targets_hint(kwargs["source"], models)}') from None


def _models_of(loop: Any) -> dict[str, Any]:
    """``{key: object}`` of the Keras models and layers and ``tf.Module`` objects among the
    objects of the loop's checkpointers (not optimizers, variables or other states)."""
    keras = sys.modules.get('keras')   # no Keras object exists unless Keras was imported
    layer_type = () if keras is None else (keras.layers.Layer,)
    found: dict[str, Any] = {}
    for checkpointer in loop.components_of(Checkpointer):
        for key, obj in checkpointer.save_objects.items():
            if isinstance(obj, (tf.Module, *layer_type)) and not is_variable(obj):
                found.setdefault(key, obj)
    return found


def _targets_hint(source: Any, models: dict[str, Any]) -> str:
    """What to pass as `targets`, for a warm start of the loop's variables that matched nothing."""
    what = 'the graph\'s global variables' if not tf.executing_eagerly() else '`param_vars`'
    spec = f"warm_start={{'source': {os.fspath(source)!r}, 'targets': model}}"
    if models:
        keys = ', '.join(repr(k) for k in models)
        return (f'The targets were the loop\'s {what}, since `checkpoint_save_objects` holds '
                f'several models ({keys}): pass `{spec}` with the one the source was saved '
                f'from.')
    return (f'The targets were the loop\'s {what}, since `checkpoint_save_objects` holds no '
            f'Keras model or tf.Module: pass `{spec}` with the model the source was saved '
            f'from (its layers are found by structure), or put it in '
            f'`checkpoint_save_objects`.')
