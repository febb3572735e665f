"""Where a Keras model, layer or ``tf.Module`` keeps each variable in the files of its kind.

:func:`~tfsnippet.scaffold.checkpoint.warm_start.warm_start` matches a
target object to a Keras ``.weights.h5`` file or an object-based
``tf.train.Checkpoint`` by the object structure first, as Keras's
``load_weights`` and ``Checkpoint.restore`` do: the path under which the
source kind stores each variable of the target is worked out from the
target itself, then found among the source's names.

* A ``.weights.h5`` file stores a layer's variables as numbered datasets of
  a group named after the layer's place and class (``layers/dense/vars/0``):
  the paths are those Keras's own ``save_weights`` would write for the
  target (no value is read or written to find them).
* A ``tf.train.Checkpoint`` stores each variable under the path of
  attribute names leading to it from the checkpoint's root
  (``model/_functional/_operations/1/_kernel``): the paths are those of
  TensorFlow's object graph of the target, found in the source under the
  prefix (``model/``, the attribute the target was saved as) that matches
  the most of them.

Either way a variable the walk does not reach is left to name matching.

The structure places a layer by its rank among the layers (of its class, in
a weights file), so a layer *inserted* into a model shifts the layers after
it: the structure would give the inserted layer the values of the one it
displaced, whenever their shapes fit.  Both kinds of file record the layers'
names (a weights file of Keras 3; a checkpoint, its Keras variables' paths):
when a layer of one name is placed elsewhere in the source than in the
target, :func:`realign_by_layer_names` matches the layers by name instead,
provided that restores at least as many values (auto-named layers of
another run that happen to share a name do not), and a layer of a name the
source lacks gets nothing.  When no layer keeps its name, nothing tells an
inserted layer apart: it gets the values at its place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

__all__ = ['structure_paths', 'match_structure', 'realign_by_layer_names',
           'target_layer_names']


def structure_paths(target: Any, source_format: str) -> dict[int, str]:
    """``{id(variable): path}`` of the variables of `target` as a source of
    `source_format` (``'keras_h5'`` or ``'tf2'``) stores them; ``{}`` when the
    target is not an object of that kind or the walk fails."""
    try:
        if source_format == 'keras_h5':
            return _keras_weights_paths(target)
        if source_format == 'tf2':
            return _object_graph_paths(target)
    except Exception:  # noqa: BLE001 - a private walk that fails: names are matched instead
        return {}
    return {}


def match_structure(paths: dict[int, str], source_names: Iterable[str]) -> dict[int, str]:
    """``{id(variable): source name}`` for `paths` (from :func:`structure_paths`).

    Each source name may hold a target path under a prefix (the part of the
    source above the target object); the prefix under which the most paths
    are found is taken, and every path gets the source name it has there,
    found or not (a target with layers the source lacks: those are missing).
    ``{}`` when no path is found under any prefix.
    """
    if not paths:
        return {}
    wanted = set(paths.values())
    counts: dict[str, int] = {}
    for name in source_names:
        parts = name.split('/')
        for i in range(len(parts)):
            if '/'.join(parts[i:]) in wanted:
                prefix = '/'.join(parts[:i]) + '/' if i else ''
                counts[prefix] = counts.get(prefix, 0) + 1
    if not counts:
        return {}
    prefix = min(counts, key=lambda p: (-counts[p], len(p), p))
    return {key: prefix + path for key, path in paths.items()}


def realign_by_layer_names(matched: dict[int, str], target_layers: Mapping[int, str],
                           source_layers: Mapping[str, str],
                           fits: Callable[[int, str], bool]) -> dict[int, str | None] | None:
    """`matched` (from :func:`match_structure`) done again by layer name, or ``None`` when
    the structure stands.

    Args:
        matched: ``{id(variable): source name}`` by structure.
        target_layers: ``{id(variable): the name of its layer}`` of the targets.
        source_layers: ``{source name: the name of its layer}`` (the source's
            ``layer_names``).
        fits: ``fits(id(variable), source name)``: whether that source value
            exists and may be assigned to the variable.

    Returns:
        ``None`` when every layer whose name is found once on each side is at
        the same place on both, or when matching by name would restore fewer
        values than the structure; else ``{id(variable): source name, or None
        when its layer's name is not (once) in the source}``.
    """
    def owner(name: str) -> str:
        return name.rsplit('/', 1)[0]

    def places(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
        """``{layer name: its place}`` of the names found at exactly one place."""
        seen: dict[str, set[str]] = {}
        for layer, place in pairs:
            seen.setdefault(layer, set()).add(place)
        return {layer: next(iter(p)) for layer, p in seen.items() if len(p) == 1}

    target_at = places((target_layers[key], owner(name)) for key, name in matched.items()
                       if key in target_layers)
    source_at = places((layer, owner(name)) for name, layer in source_layers.items())
    if all(source_at[layer] == place for layer, place in target_at.items()
           if layer in source_at):
        return None
    by_name: dict[int, str | None] = {}
    for key, name in matched.items():
        layer = target_layers.get(key)
        by_name[key] = (f'{source_at[layer]}/{name.rsplit("/", 1)[-1]}'
                        if layer in source_at and layer in target_at else None)
    restored = sum(fits(key, name) for key, name in matched.items())
    if sum(name is not None and fits(key, name) for key, name in by_name.items()) < restored:
        return None
    return by_name


def target_layer_names(items: Iterable[tuple[str, Any]]) -> dict[int, str]:
    """``{id(variable): the name of its layer}`` of named variables `items` whose name is a
    path (``model/layer/kernel``: ``layer``)."""
    return {id(var): name.split('/')[-2] for name, var in items if name.count('/') >= 1}


def _ids(variable: Any) -> list[int]:
    """The ids a variable may be known by (a Keras variable and the tf.Variable it wraps)."""
    out = [id(variable)]
    inner = getattr(variable, 'value', None)
    if inner is not None and not callable(inner):
        out.append(id(inner))
    return out


def _keras_weights_paths(target: Any) -> dict[int, str]:
    from keras.src.saving import saving_lib
    from keras.src.saving.keras_saveable import KerasSaveable

    if not isinstance(target, KerasSaveable):
        return {}
    found: dict[int, str] = {}

    class _PathRecorder(saving_lib.H5IOStore):
        """A weights store that writes nothing: it notes where each variable would go."""

        def __init__(self) -> None:   # no file
            self._entry = ''

        def __bool__(self) -> bool:
            return True

        def make(self, path: str, metadata: Any = None) -> _PathRecorder:
            self._entry = path
            return self

        def __setitem__(self, key: str, value: Any) -> None:
            path = f'{self._entry}/vars/{key}' if self._entry else f'vars/{key}'
            for i in _ids(value):
                found.setdefault(i, path)

        def close(self) -> None:
            pass

    saving_lib._save_state(target, weights_store=_PathRecorder(), assets_store=None,
                           inner_path='', visited_saveables=set())
    return found


def _escape(name: str) -> str:
    """A local name as TensorFlow writes it into checkpoint keys."""
    return name.replace('.', '..').replace('/', '.S')


def _object_graph_paths(target: Any) -> dict[int, str]:
    import tensorflow as tf
    from tensorflow.python.checkpoint import graph_view

    if not isinstance(target, tf.__internal__.tracking.Trackable):
        return {}
    objects, paths = graph_view.ObjectGraphView(target).breadth_first_traversal()
    found: dict[int, str] = {}
    for obj in objects:
        refs = paths.get(obj)
        if not refs or not hasattr(obj, 'dtype') or not hasattr(obj, 'shape'):
            continue
        path = '/'.join(_escape(ref.name) for ref in refs)
        for i in _ids(obj):
            found.setdefault(i, path)
    return found
