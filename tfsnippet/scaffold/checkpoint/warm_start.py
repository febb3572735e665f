"""Warm start: copy matching values of a checkpoint or weights file into other variables.

:func:`warm_start` initializes some variables from the saved values of
another run (a pre-trained encoder, the previous stage of a curriculum, a
model whose head changed shape) instead of resuming that run.  It reads
four kinds of sources:

* a tfsnippet checkpoint (``<root>/checkpoint/checkpoint.dat-<step>/``),
  the checkpoint root or the ``checkpoint/`` folder (then the newest one);
* a ``tf.train.Checkpoint`` (object-graph) checkpoint, by prefix or folder;
* a ``tf.compat.v1.train.Saver`` checkpoint, by prefix or folder;
* a Keras weights file (``model.save_weights('x.weights.h5')``).

When `targets` is a Keras model or layer or a ``tf.Module`` and the
source a Keras ``.weights.h5`` file or a ``tf.train.Checkpoint``, its
variables are found by the *object structure* first, as Keras's
``load_weights`` and ``Checkpoint.restore`` find them (see
:mod:`~tfsnippet.scaffold.checkpoint.structure`): a fresh model of the
architecture that wrote the file needs no `mapping`, and one with more
layers gets the matching part (the others are reported missing).  A
`mapping` rule that matches a target's name still decides for that target.

Otherwise values are matched by *name*, never by position: each target variable is
known by a human name and looked up under that name (after `mapping`)
among the names of the source, which are

============================  ================================================
source                        names of its values
============================  ================================================
tfsnippet checkpoint          the recorded variable names (Keras ``path``,
                              or ``name`` without ``:0``)
``tf.train.Checkpoint``       the keys without ``/.ATTRIBUTES/VARIABLE_VALUE``
                              (``model/_functional/_operations/1/_kernel``)
TF1 ``Saver`` checkpoint      the graph names without ``:0`` (``dense/kernel``)
Keras ``.weights.h5``         the dataset paths (``layers/dense/vars/0``)
============================  ================================================

A ``.weights.h5`` file keeps no variable names: a layer's values are
numbered in creation order, in a group named after the layer's *class*
(``layers/dense``, ``layers/dense_1``, ... whatever the layers' names), so
a warm start from one into a list of variables needs a `mapping` to those
paths (a model or layer as `targets` is matched by structure).  The error raised
when nothing matches lists the names of the source, to write it from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from ...tfops.tf_vars import as_tf_variable, is_variable, normalize_variables, variable_name
from ...tfops.var_io import assign_variables
from ...utils.validation import check_bool
from .saver import VARS_PREFIX, CheckpointError, CheckpointSaver
from .state_format import has_state, read_state
from .structure import match_structure, structure_paths

__all__ = ['warm_start', 'WarmStartReport', 'WarmStartEntry']

PatternLike = str | re.Pattern[str]
Replacement = str | Callable[[re.Match[str]], str] | None

_VALUE_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'
_OBJECT_GRAPH_KEY = '_CHECKPOINTABLE_OBJECT_GRAPH'
_SOURCE_KINDS = {
    'tfsnippet': 'tfsnippet checkpoint',
    'tf2': 'tf.train.Checkpoint',
    'tf1': 'TF1 Saver checkpoint',
    'keras_h5': 'Keras weights file',
}
_STATUSES = ('restored', 'skipped', 'mismatched', 'missing')
_LISTED_NAMES = 5   # how many names an error message or the table's footer shows


# ---------------------------------------------------------------- the report
@dataclass(frozen=True)
class WarmStartEntry:
    """What :func:`warm_start` did with one target variable.

    Attributes:
        target: The target's name (Keras ``path``, ``name`` without ``:0``,
            or its key when the targets are a dict).
        status: ``'restored'``, ``'skipped'`` (left out by `include`,
            `exclude` or a mapping to ``None``), ``'mismatched'`` (the source
            value has another shape or dtype) or ``'missing'`` (the source
            has no value of that name).
        source: The name looked up in the source, ``None`` when skipped.
        detail: The shape restored, why it was skipped, or what differs.
    """

    target: str
    status: str
    source: str | None
    detail: str


@dataclass(frozen=True)
class WarmStartReport:
    """The outcome of :func:`warm_start`, one entry per target variable.

    Attributes:
        source: The path that was read (a checkpoint directory or prefix, or
            a weights file; the newest checkpoint when a folder was given).
        source_format: ``'tfsnippet'``, ``'tf2'`` (``tf.train.Checkpoint``),
            ``'tf1'`` (``tf.compat.v1.train.Saver``) or ``'keras_h5'``.
        entries: One :class:`WarmStartEntry` per target, in target order.
        unused: The source names that no target looked up.
        matched_by: ``'structure'`` when the targets (a Keras model, layer
            or ``tf.Module``) were found in the source by their object
            structure, ``'name'`` otherwise.
    """

    source: str
    source_format: str
    entries: tuple[WarmStartEntry, ...]
    unused: tuple[str, ...]
    matched_by: str = 'name'

    def _targets(self, status: str) -> list[str]:
        return [e.target for e in self.entries if e.status == status]

    @property
    def restored(self) -> list[str]:
        """Names of the targets given the source's values."""
        return self._targets('restored')

    @property
    def skipped(self) -> list[str]:
        """Names of the targets left out by `include`, `exclude` or `mapping`."""
        return self._targets('skipped')

    @property
    def mismatched(self) -> list[str]:
        """Names of the targets whose source value differs in shape or dtype."""
        return self._targets('mismatched')

    @property
    def missing(self) -> list[str]:
        """Names of the targets with no value in the source."""
        return self._targets('missing')

    def format_table(self) -> str:
        """The table :func:`warm_start` prints: one row per target, then totals."""
        kind = _SOURCE_KINDS.get(self.source_format, self.source_format)
        header = ('status', 'target', 'source', 'detail')
        rows = [(e.status, e.target, '-' if e.source is None else e.source, e.detail)
                for e in self.entries]
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
        by = ' (matched by object structure)' if self.matched_by == 'structure' else ''
        lines = [f'Warm start from {kind} {self.source!r}{by}']
        for row in [header, tuple('-' * w for w in widths), *rows]:
            lines.append('  '.join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        counts = ', '.join(f'{len(self._targets(s))} {s}' for s in _STATUSES)
        plural = '' if len(self.unused) == 1 else 's'
        footer = f'{counts}; {len(self.unused)} source value{plural} not used'
        if self.unused:
            footer += f': {_short_list(self.unused)}'
        lines.append(footer)
        return '\n'.join(lines)


def _short_list(names: Sequence[str]) -> str:
    shown = ', '.join(names[:_LISTED_NAMES])
    if len(names) > _LISTED_NAMES:
        shown += f', ... ({len(names)} in all)'
    return shown


# ---------------------------------------------------------------- sources
@dataclass
class _Source:
    """The named values of one checkpoint or weights file.

    ``keys`` maps each human name to the storage keys holding it (one,
    unless the source recorded the name twice); shapes and dtypes are
    by storage key, and ``fetch`` reads values by storage key.
    """

    path: str
    source_format: str
    keys: dict[str, list[str]]
    shapes: dict[str, tuple[int, ...]]
    dtypes: dict[str, tf.DType]
    fetch: Callable[[list[str]], list[np.ndarray]]

    @property
    def description(self) -> str:
        return f'{_SOURCE_KINDS[self.source_format]} {self.path!r}'


def _from_reader(path: str, source_format: str, prefix: str, reader: Any,
                 name_of: Callable[[str], str | None]) -> _Source:
    """A source of the TF checkpoint `prefix`; `name_of` names a key (``None``: not a value)."""
    shape_map = reader.get_variable_to_shape_map()
    dtype_map = reader.get_variable_to_dtype_map()
    keys: dict[str, list[str]] = {}
    for key in sorted(shape_map):
        name = name_of(key)
        if name is not None:
            keys.setdefault(name, []).append(key)
    used = [k for ks in keys.values() for k in ks]

    def fetch(wanted: list[str]) -> list[np.ndarray]:
        try:
            return [np.asarray(reader.get_tensor(k)) for k in wanted]
        except tf.errors.OpError as e:
            raise CheckpointError(f'Cannot read the values of checkpoint {prefix!r}: {e}') from e

    return _Source(path, source_format, keys, {k: tuple(shape_map[k]) for k in used},
                   {k: tf.as_dtype(dtype_map[k]) for k in used}, fetch)


def _load_reader(prefix: str) -> Any:
    try:
        return tf.train.load_checkpoint(prefix)
    except (tf.errors.OpError, ValueError) as e:
        raise CheckpointError(f'Cannot read the checkpoint {prefix!r}: {e}') from e


def _open_tfsnippet(path: str, trust_pickle: bool) -> _Source:
    # data only; a legacy pickled state only when trusted (else UntrustedCheckpointError)
    labels = read_state(path, trust_pickle=trust_pickle)['variables']
    prefix = os.path.join(path, VARS_PREFIX)
    if not os.path.isfile(prefix + '.index'):   # a checkpoint of no variables
        return _Source(path, 'tfsnippet', {}, {}, {}, lambda wanted: [])
    return _from_reader(path, 'tfsnippet', prefix, _load_reader(prefix),
                        lambda key: str(labels.get(key, key)))


def _open_tf_prefix(prefix: str, trust_pickle: bool) -> _Source:
    directory, base = os.path.split(prefix)
    if base == VARS_PREFIX and has_state(directory):
        return _open_tfsnippet(directory, trust_pickle)   # the variables of a tfsnippet one
    reader = _load_reader(prefix)
    if _OBJECT_GRAPH_KEY in reader.get_variable_to_shape_map():
        def object_name(key: str) -> str | None:
            return key[:-len(_VALUE_SUFFIX)] if key.endswith(_VALUE_SUFFIX) else None
        return _from_reader(prefix, 'tf2', prefix, reader, object_name)
    return _from_reader(prefix, 'tf1', prefix, reader, lambda key: key)


def _open_h5(path: str) -> _Source:
    import h5py   # installed with Keras

    keys: dict[str, list[str]] = {}
    shapes: dict[str, tuple[int, ...]] = {}
    dtypes: dict[str, tf.DType] = {}

    def visit(key: str, obj: Any) -> None:
        if not isinstance(obj, h5py.Dataset):
            return
        try:
            dtype = tf.as_dtype(obj.dtype)
        except TypeError:   # records and other non-tensor data: not weights
            return
        name = key[:-2] if key.endswith(':0') else key   # Keras 2 names end in ``:0``
        keys.setdefault(name, []).append(key)
        shapes[key] = tuple(int(d) for d in obj.shape)
        dtypes[key] = dtype

    try:
        with h5py.File(path, 'r') as f:
            f.visititems(visit)
    except OSError as e:
        raise CheckpointError(f'Cannot read the weights file {path!r}: {e}') from e

    def fetch(wanted: list[str]) -> list[np.ndarray]:
        with h5py.File(path, 'r') as f:
            return [np.asarray(f[k][()]) for k in wanted]

    return _Source(path, 'keras_h5', keys, shapes, dtypes, fetch)


def _latest_tfsnippet(save_dir: str) -> str | None:
    """The newest tfsnippet checkpoint in `save_dir`, or ``None`` if it holds none."""
    if not os.path.isdir(save_dir):
        return None
    filenames = set()
    for entry in os.scandir(save_dir):
        m = re.fullmatch(r'(.+)-\d+', entry.name)
        # names starting with '.' are the store's temporaries, displaced or doomed copies
        if (m and entry.is_dir() and not entry.name.startswith('.') and
                has_state(entry.path)):
            filenames.add(m.group(1))
    if not filenames:
        return None
    if len(filenames) > 1:
        raise ValueError(
            f'`source` {save_dir!r} holds tfsnippet checkpoints of several names '
            f'{sorted(filenames)}: pass the directory of one checkpoint')
    # the saver knows which checkpoint is the newest (its index, or the directories)
    return CheckpointSaver(None, save_dir, filename=filenames.pop()).latest_checkpoint()


def _tf_prefix_in(directory: str) -> str | None:
    """The latest TF checkpoint prefix in `directory`, or ``None`` if it holds none."""
    if os.path.isfile(os.path.join(directory, 'checkpoint')):   # TF's "latest" record
        latest = tf.train.latest_checkpoint(directory)
        if latest:
            return str(latest)
    indexes = sorted(n for n in os.listdir(directory) if n.endswith('.index'))
    if len(indexes) > 1:
        raise ValueError(
            f'`source` {directory!r} holds several checkpoints ({_short_list(indexes)}) and '
            f'no "checkpoint" file naming the latest: pass a checkpoint prefix')
    return os.path.join(directory, indexes[0][:-len('.index')]) if indexes else None


def _is_hdf5(path: str) -> bool:
    import h5py   # installed with Keras
    return bool(h5py.is_hdf5(path))


def _open_source(source: Any, trust_pickle: bool) -> _Source:
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f'`source` must be a path (str or os.PathLike), got {source!r}')
    path = os.path.abspath(os.fsdecode(os.fspath(source)))
    expected = ('a tfsnippet checkpoint, a tf.train.Checkpoint or TF1 Saver checkpoint '
                '(prefix or directory) or a Keras .weights.h5 file')
    if os.path.isdir(path):
        found = (path if has_state(path) else
                 _latest_tfsnippet(path) or
                 _latest_tfsnippet(os.path.join(path, 'checkpoint')))
        if found:
            return _open_tfsnippet(found, trust_pickle)
        prefix = _tf_prefix_in(path)
        if prefix:
            return _open_tf_prefix(prefix, trust_pickle)
        raise ValueError(f'`source` must be {expected}, got the directory {path!r} '
                         f'with no checkpoint in it')
    if os.path.isfile(path):
        if path.endswith('.index'):
            return _open_tf_prefix(path[:-len('.index')], trust_pickle)
        if _is_hdf5(path):
            return _open_h5(path)
        raise ValueError(f'`source` must be {expected}, got the file {path!r}, '
                         f'which is neither HDF5 nor a checkpoint index')
    if os.path.isfile(path + '.index'):
        return _open_tf_prefix(path, trust_pickle)
    raise ValueError(f'`source` must be {expected}, got {path!r}, which does not exist')


# ---------------------------------------------------------------- arguments
def _collect_targets(targets: Any) -> list[tuple[str, Any]]:
    """``[(name, variable)]`` of `targets`, each variable once."""
    items: list[tuple[str, Any]]
    if (hasattr(targets, 'variables') and not is_variable(targets) and
            not isinstance(targets, (str, bytes, Mapping, list, tuple))):
        items = _name_all(list(targets.variables), 'targets.variables')
    else:
        checked = normalize_variables(targets, 'targets')
        if isinstance(checked, dict):
            for key in checked:
                if not isinstance(key, str):
                    raise TypeError(f'`targets` keys must be str names, got {key!r}')
            items = list(checked.items())
        else:
            items = [(variable_name(v), v) for v in checked]
    out, seen = [], set()
    for name, var in items:
        if id(as_tf_variable(var)) not in seen:
            seen.add(id(as_tf_variable(var)))
            out.append((name, var))
    if not out:
        hint = (' (a Keras model creates its variables when it is built: call it on data '
                'or `model.build(input_shape)` first)' if hasattr(targets, 'variables') else '')
        raise ValueError(f'`targets` holds no variables{hint}, got {targets!r}')
    return out


def _name_all(variables: list[Any], arg_name: str) -> list[tuple[str, Any]]:
    """``[(name, variable)]``, checking that each of `variables` is a variable."""
    for i, var in enumerate(variables):
        if not is_variable(var):
            raise TypeError(f'`{arg_name}` must hold only variables (tf.Variable or '
                            f'keras.Variable), but item {i} is {var!r}')
    return [(variable_name(v), v) for v in variables]


def _compile(pattern: Any, arg_name: str) -> re.Pattern[str]:
    if isinstance(pattern, re.Pattern):
        return pattern
    if not isinstance(pattern, str):
        raise TypeError(f'`{arg_name}` must hold regexes (str or re.Pattern), got {pattern!r}')
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ValueError(f'`{arg_name}` has an invalid regex {pattern!r}: {e}') from e


def _compile_patterns(patterns: Any, arg_name: str) -> list[re.Pattern[str]] | None:
    if patterns is None:
        return None
    if isinstance(patterns, (str, re.Pattern)):
        return [_compile(patterns, arg_name)]
    if not isinstance(patterns, Sequence):
        raise TypeError(f'`{arg_name}` must be a regex or a list of regexes, got {patterns!r}')
    return [_compile(p, arg_name) for p in patterns]


def _compile_mapping(mapping: Any) -> list[tuple[re.Pattern[str], Replacement]]:
    if mapping is None:
        return []
    if not isinstance(mapping, Mapping):
        raise TypeError(
            f'`mapping` must be a dict {{regex: replacement or None}}, got {mapping!r}')
    out = []
    for pattern, repl in mapping.items():
        if repl is not None and not isinstance(repl, str) and not callable(repl):
            raise TypeError(f'`mapping[{pattern!r}]` must be a replacement str, a function '
                            f'of the match or None, got {repl!r}')
        out.append((_compile(pattern, 'mapping'), repl))
    return out


def _shape_str(shape: Sequence[int | None] | tf.TensorShape) -> str:
    if isinstance(shape, tf.TensorShape):
        if shape.rank is None:
            return '<unknown>'
        shape = shape.as_list()
    return repr(tuple(shape))


def _castable(target: tf.DType, source: tf.DType) -> bool:
    """Whether a `source` value may be assigned to a `target` variable (cast if need be)."""
    return (target == source or (target.is_floating and source.is_floating) or
            (target.is_integer and source.is_integer) or
            (target.is_complex and source.is_complex))


def _source_name(name: str, includes: list[re.Pattern[str]] | None,
                 excludes: list[re.Pattern[str]] | None,
                 rules: list[tuple[re.Pattern[str], Replacement]],
                 default: str | None = None) -> tuple[str | None, str]:
    """``(the name to look up in the source, '')``, or ``(None, why the target is skipped)``;
    `default` (the structural match) is looked up when no rule of `mapping` matches."""
    if includes is not None and not any(p.search(name) for p in includes):
        return None, 'not matched by `include`'
    if excludes is not None and any(p.search(name) for p in excludes):
        return None, 'matched by `exclude`'
    for pattern, repl in rules:
        if pattern.search(name):
            if repl is None:
                return None, 'mapped to None'
            return pattern.sub(repl, name), ''
    return (name if default is None else default), ''


def _compare(tf_var: tf.Variable, src: _Source, key: str) -> tuple[str, str]:
    """``('restored', shape)`` or ``('mismatched', what differs)`` for the value under `key`."""
    shape, want_shape = tf_var.shape, src.shapes[key]
    dtype, want_dtype = tf_var.dtype.base_dtype, src.dtypes[key]
    if not shape.is_compatible_with(want_shape):
        return 'mismatched', f'shape {_shape_str(shape)} vs source {_shape_str(want_shape)}'
    if not _castable(dtype, want_dtype):
        return 'mismatched', f'dtype {dtype.name} vs source {want_dtype.name}'
    if dtype != want_dtype:
        return 'restored', f'{_shape_str(want_shape)}, cast from {want_dtype.name}'
    return 'restored', _shape_str(want_shape)


# ---------------------------------------------------------------- warm_start
def warm_start(source: str | os.PathLike[str],
               targets: Sequence[Any] | Mapping[str, Any] | Any,
               mapping: Mapping[PatternLike, Replacement] | None = None,
               include: PatternLike | Sequence[PatternLike] | None = None,
               exclude: PatternLike | Sequence[PatternLike] | None = None,
               skip_mismatch: bool = False,
               print_func: Callable[[str], Any] | None = print,
               trust_pickle: bool = False) -> WarmStartReport:
    """Assign the values of `source` to those of `targets` that have a value there.

    Each target is known by a name: its Keras ``path``, its ``name``
    without ``:0``, or its key when `targets` is a dict.  A target is
    skipped if `include` is given and none of its regexes matches the name,
    or if a regex of `exclude` matches it.  Otherwise the first regex of
    `mapping` that matches the name rewrites it with ``re.sub`` (a ``None``
    replacement skips the target), and the result is looked up among the
    names of the source (see the module's table).  Regexes match anywhere
    in a name (``re.search``): anchor them with ``^`` and ``$``.

    Nothing is assigned unless every target found in the source has the
    same shape there, and a compatible dtype (floats are cast to floats and
    integers to integers).  The table of what was done goes to
    `print_func` as one string (:meth:`WarmStartReport.format_table`).

    Example: a pre-trained encoder, saved under other names, starts a new model.

        >>> import tempfile
        >>> from tfsnippet.scaffold.checkpoint import CheckpointSaver
        >>> from tfsnippet.scaffold.checkpoint.warm_start import warm_start
        >>> save_dir = tempfile.mkdtemp()
        >>> pretrained = [tf.Variable([1., 2.], name='enc/w'), tf.Variable([3.], name='enc/b')]
        >>> _ = CheckpointSaver(pretrained, save_dir).save(100)
        >>> w = tf.Variable([0., 0.], name='encoder/w')
        >>> head = tf.Variable([0., 0., 0.], name='head/w')
        >>> report = warm_start(save_dir, [w, head], mapping={'^encoder/': 'enc/'})
        Warm start from tfsnippet checkpoint '...checkpoint.dat-100'
        status    target     source  detail
        --------  ---------  ------  -----------------
        restored  encoder/w  enc/w   (2,)
        missing   head/w     head/w  not in the source
        1 restored, 0 skipped, 0 mismatched, 1 missing; 1 source value not used: enc/b
        >>> w.numpy()
        array([1., 2.], dtype=float32)
        >>> report.missing
        ['head/w']

    Args:
        source: A tfsnippet checkpoint directory, checkpoint root or
            ``checkpoint/`` folder (the newest checkpoint is read); a
            ``tf.train.Checkpoint`` or TF1 ``Saver`` checkpoint prefix, its
            ``.index`` file or its folder (the ``checkpoint`` file there
            names the latest); or a Keras ``.weights.h5`` file.
        targets: A list or dict ``{name: variable}`` of graph, eager or
            Keras variables, or a Keras model or layer or a ``tf.Module``
            (its ``.variables``).
        mapping: An ordered dict ``{regex: replacement}`` from target names
            to source names (the opposite direction of
            ``tf.compat.v1.train.init_from_checkpoint``'s ``assignment_map``:
            a mapping whose keys match no target but match source names is
            refused as reversed); the replacement is a ``re.sub`` template,
            a function of the match, or ``None`` to skip the target.
        include: A regex, or a list of them: only targets whose name matches
            one are restored.
        exclude: A regex, or a list of them: targets whose name matches one
            are not restored.
        skip_mismatch: Leave the targets whose source value has another shape
            or dtype alone (reported as ``'mismatched'``) instead of raising.
        print_func: Receives the table; ``None`` prints nothing.
        trust_pickle: Read a legacy tfsnippet checkpoint (a pickled
            ``state.pkl`` of an earlier version), which may run code when
            loaded: only for a checkpoint whose author you trust.
            ``TFSNIPPET_TRUST_PICKLE=1`` says the same.  A current
            checkpoint holds data only and is safe to read without it.

    Returns:
        The :class:`WarmStartReport`, listing the targets restored, skipped,
        mismatched and missing.

    Raises:
        TypeError: An argument has the wrong type.
        ValueError: `source` is not a checkpoint or weights file; `targets`
            holds no variables; a regex is invalid; values differ in shape
            or dtype (without `skip_mismatch`); a target's source name is
            recorded twice in the source; or no target has a value in the
            source (write a `mapping`: the message lists names of both).
        CheckpointError: The source's files cannot be read.
        ~tfsnippet.scaffold.checkpoint.UntrustedCheckpointError:
            `source` is a legacy tfsnippet checkpoint and nothing says it is
            trusted: nothing was read or assigned.
        RuntimeError: Graph mode and no default session.

    .. note::
        In graph mode the values are assigned with the default session by
        feeding the variables' initializers, so no op is added (a finalized
        graph is fine) and the restored variables need not be initialized
        beforehand.  Running their initializers afterwards overwrites the
        values: initialize the others with
        :func:`~tfsnippet.utils.ensure_variables_initialized`.
    """
    if print_func is not None and not callable(print_func):
        raise TypeError(f'`print_func` must be callable or None, got {print_func!r}')
    rules = _compile_mapping(mapping)
    includes = _compile_patterns(include, 'include')
    excludes = _compile_patterns(exclude, 'exclude')
    items = _collect_targets(targets)
    src = _open_source(source, check_bool(trust_pickle, 'trust_pickle'))
    _check_mapping_direction(rules, [name for name, _ in items], src)
    structure: dict[int, str] = {}
    if hasattr(targets, 'variables') and not isinstance(targets, (Mapping, list, tuple)):
        structure = match_structure(structure_paths(targets, src.source_format), src.keys)

    entries: list[WarmStartEntry] = []
    to_assign: list[tuple[Any, str, tf.DType]] = []    # (variable, storage key, its dtype)
    problems: list[str] = []
    ambiguous: list[str] = []
    for name, var in items:
        src_name, skip_reason = _source_name(name, includes, excludes, rules,
                                             structure.get(id(var)))
        if src_name is None:
            entries.append(WarmStartEntry(name, 'skipped', None, skip_reason))
            continue
        keys = src.keys.get(src_name, [])
        if len(keys) > 1:
            ambiguous.append(f'{name!r} looks up {src_name!r}, stored as {keys}')
            continue
        if not keys:
            entries.append(WarmStartEntry(name, 'missing', src_name, 'not in the source'))
            continue
        tf_var = as_tf_variable(var)
        status, detail = _compare(tf_var, src, keys[0])
        entries.append(WarmStartEntry(name, status, src_name, detail))
        if status == 'restored':
            to_assign.append((var, keys[0], tf_var.dtype.base_dtype))
        else:
            problems.append(f'{name!r} <- {src_name!r}: {detail}')

    if ambiguous:
        raise ValueError(f'The {src.description} records a name more than once, so the '
                         f'value to restore is ambiguous: {"; ".join(ambiguous)}; `exclude` '
                         f'these targets')
    if problems and not skip_mismatch:
        raise ValueError(
            f'The values of {len(problems)} target(s) in the {src.description} differ in '
            f'shape or dtype: {", ".join(problems)}; pass `skip_mismatch=True` to leave '
            f'them alone, or `exclude` them')
    if not any(e.status in ('restored', 'mismatched') for e in entries):
        raise ValueError(_nothing_matched_message(src, entries))

    values = src.fetch([key for _, key, _ in to_assign])
    values = [np.asarray(value).astype(dtype.as_numpy_dtype, copy=False)
              for value, (_, _, dtype) in zip(values, to_assign)]
    assign_variables([var for var, _, _ in to_assign], values)

    looked_up = {e.source for e in entries}
    unused = tuple(sorted(n for n in src.keys if n not in looked_up))
    report = WarmStartReport(src.path, src.source_format, tuple(entries), unused,
                             'structure' if structure else 'name')
    if print_func is not None:
        print_func(report.format_table())
    return report


def _check_mapping_direction(rules: list[tuple[re.Pattern[str], Replacement]],
                             target_names: list[str], src: _Source) -> None:
    """Refuse a `mapping` whose keys match no target name but match source names."""
    if not rules or any(p.search(n) for p, _ in rules for n in target_names):
        return
    hits = [(p.pattern, n) for p, _ in rules for n in sorted(src.keys) if p.search(n)]
    if hits:
        pattern, name = hits[0]
        raise ValueError(
            f'`mapping` looks reversed: it goes from target names to source names (the '
            f'opposite of tf.compat.v1.train.init_from_checkpoint\'s `assignment_map`), but '
            f'none of its keys {_short_list([p.pattern for p, _ in rules])} matches a target '
            f'name, while {pattern!r} matches the source name {name!r}. Write it as '
            f'{{target regex: source name}}; the targets are named '
            f'{_short_list(target_names)}')


def _nothing_matched_message(src: _Source, entries: list[WarmStartEntry]) -> str:
    looked_up = [e.source for e in entries if e.source is not None]
    skipped = sum(e.status == 'skipped' for e in entries)
    if looked_up:
        what = (f'none of the {len(looked_up)} names looked up is there '
                f'({_short_list(looked_up)})')
    else:
        what = (f'all {len(entries)} targets are skipped by `include`, `exclude` or '
                f'`mapping` ({_short_list([e.target for e in entries])})')
    if skipped and looked_up:
        what += f'; {skipped} target(s) are skipped'
    source_names = sorted(src.keys)
    return (f'Nothing to warm-start from the {src.description}: {what}. '
            f'Its {len(source_names)} names are: {_short_list(source_names) or "(none)"}. '
            f'Pass a `mapping` {{regex: replacement}} from target names to source names.')
