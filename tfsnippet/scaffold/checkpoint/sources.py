"""Opening the saved values that :func:`~tfsnippet.warm_start` reads: one :class:`Source` per file.

A :class:`Source` is the read-only view of one checkpoint or weights file:
its format, the names of its values (each with the storage keys holding
it), the shape and dtype of each stored value, and a way to read one of
them.  :func:`open_source` finds out what a path is and opens it with the
opener of its kind:

* a tfsnippet checkpoint (its directory, the checkpoint root or its
  ``checkpoint/`` folder: the pinned best one, else the newest), by
  :func:`open_tfsnippet`: the
  values are named by the recorded variable names (Keras ``path``, or
  ``name`` without ``:0``);
* a ``tf.train.Checkpoint`` (prefix, ``.index`` file or folder), by
  :func:`open_tf_checkpoint`: the keys without
  ``/.ATTRIBUTES/VARIABLE_VALUE`` (``model/_functional/_operations/1/_kernel``);
* a TF1 ``Saver`` checkpoint, by :func:`open_tf_checkpoint` too: the graph
  names without ``:0`` (``dense/kernel``);
* a Keras ``.weights.h5`` file, by :func:`open_keras_h5`: the dataset
  paths (``layers/dense/vars/0``).

Example:
    >>> import tempfile
    >>> from tfsnippet.scaffold.checkpoint import CheckpointSaver
    >>> from tfsnippet.scaffold.checkpoint.sources import open_source
    >>> save_dir = tempfile.mkdtemp()
    >>> _ = CheckpointSaver([tf.Variable([1., 2.], name='w')], save_dir).save(3)
    >>> source = open_source(save_dir)
    >>> source.source_format, dict(source.keys)
    ('tfsnippet', {'w': ['w']})
    >>> source.read('w')
    array([1., 2.], dtype=float32)
    >>> source.close()

A tfsnippet checkpoint holds data only; the pickled state of an earlier
version is read only when trusted (``trust_pickle=True``, or
``TFSNIPPET_TRUST_PICKLE=1``), else
:class:`~tfsnippet.scaffold.checkpoint.UntrustedCheckpointError` is raised
before anything is read.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import tensorflow as tf

from .state_format import CheckpointError, has_state, read_state
from ...storage import check_bucket, is_url, resolve
from .store import CheckpointStore

__all__ = ['Source', 'BundleSource', 'KerasH5Source', 'open_source', 'open_tfsnippet',
           'open_tf_checkpoint', 'open_keras_h5', 'tfsnippet_variables', 'describe_source',
           'short_list', 'SOURCE_KINDS', 'VARS_PREFIX']

#: The path prefix, inside a tfsnippet checkpoint's directory, of its variables' bundle.
VARS_PREFIX = 'variables'
#: What each ``source_format`` is called in messages.
SOURCE_KINDS = {
    'tfsnippet': 'tfsnippet checkpoint',
    'tf2': 'tf.train.Checkpoint',
    'tf1': 'TF1 Saver checkpoint',
    'keras_h5': 'Keras weights file',
}
_VALUE_SUFFIX = '/.ATTRIBUTES/VARIABLE_VALUE'
_OBJECT_GRAPH_KEY = '_CHECKPOINTABLE_OBJECT_GRAPH'
_LISTED_NAMES = 5   # how many names a message shows


def short_list(names: Sequence[str]) -> str:
    """The first few of `names`, comma-separated, with how many there are in all when cut."""
    shown = ', '.join(names[:_LISTED_NAMES])
    if len(names) > _LISTED_NAMES:
        shown += f', ... ({len(names)} in all)'
    return shown


@runtime_checkable
class Source(Protocol):
    """The saved values of one checkpoint or weights file, read on demand.

    A value has a *name* (what a target is matched against) and is stored
    under a *key* of the file; a name is stored under one key, or under
    several when the file recorded it more than once (which warm start
    refuses as ambiguous).

    Attributes:
        path: The path that was opened (a checkpoint directory or prefix, or
            a weights file).
        source_format: ``'tfsnippet'``, ``'tf2'`` (``tf.train.Checkpoint``),
            ``'tf1'`` (``tf.compat.v1.train.Saver``) or ``'keras_h5'``.
        keys: ``{name: [storage key, ...]}`` of every value.
        shapes: ``{storage key: shape}``.
        dtypes: ``{storage key: tf.DType}``.
        layer_names: ``{name: the name of the layer holding that value}``
            of the values whose file records it (a Keras weights file; the
            Keras variables of a ``tf.train.Checkpoint``), else ``{}``.
        chosen: Which checkpoint of a folder this is, when a folder was
            given: ``'the best: valid_loss = 0.21, epoch 4, step 40'`` (the
            pinned best), ``'the newest: no best is pinned'``; else ``''``.
    """

    @property
    def path(self) -> str: ...

    @property
    def source_format(self) -> str: ...

    @property
    def keys(self) -> Mapping[str, Sequence[str]]: ...

    @property
    def shapes(self) -> Mapping[str, tuple[int, ...]]: ...

    @property
    def dtypes(self) -> Mapping[str, tf.DType]: ...

    @property
    def layer_names(self) -> Mapping[str, str]: ...

    @property
    def chosen(self) -> str: ...

    def read(self, key: str) -> np.ndarray:
        """The value stored under `key`, read from the file now.

        Raises:
            CheckpointError: The file cannot be read.
        """
        ...

    def close(self) -> None:
        """Let go of the open file, if any (reading again reopens it)."""
        ...


def describe_source(source: Source) -> str:
    """``"<kind> '<path>'"``, how messages name `source`."""
    return f'{SOURCE_KINDS.get(source.source_format, source.source_format)} {source.path!r}'


# ---------------------------------------------------------------- TF bundles
class BundleSource:
    """A :class:`Source` of a TensorFlow checkpoint bundle (``<prefix>.index``, ``.data-*``).

    Args:
        path: The path reported as the source's.
        source_format: ``'tfsnippet'``, ``'tf2'`` or ``'tf1'``.
        reader: A ``tf.train.load_checkpoint`` reader, or ``None`` for a
            checkpoint of no variables.
        name_of: Names a storage key (``None``: not a value, e.g. the object
            graph of a ``tf.train.Checkpoint``).
        what: Names the files in a read error (``"the checkpoint '...'"``).
        layer_names: The source's `layer_names`.
    """

    def __init__(self, path: str, source_format: str, reader: Any | None,
                 name_of: Callable[[str], str | None], what: str,
                 layer_names: Mapping[str, str] | None = None):
        self.path = path
        self.source_format = source_format
        self._reader = reader
        self._what = what
        shape_map = reader.get_variable_to_shape_map() if reader is not None else {}
        dtype_map = reader.get_variable_to_dtype_map() if reader is not None else {}
        keys: dict[str, list[str]] = {}
        for key in sorted(shape_map):
            name = name_of(key)
            if name is not None:
                keys.setdefault(name, []).append(key)
        used = [k for ks in keys.values() for k in ks]
        self.keys: Mapping[str, Sequence[str]] = keys
        self.shapes: Mapping[str, tuple[int, ...]] = {k: tuple(shape_map[k]) for k in used}
        self.dtypes: Mapping[str, tf.DType] = {k: tf.as_dtype(dtype_map[k]) for k in used}
        self.layer_names: Mapping[str, str] = dict(layer_names or {})
        self.chosen = ''

    def read(self, key: str) -> np.ndarray:
        if self._reader is None or key not in self.shapes:
            raise KeyError(f'{key!r} is not a value of {self._what}')
        try:
            return np.asarray(self._reader.get_tensor(key))
        except Exception as e:
            raise CheckpointError(f'Cannot read {self._what}: {e}') from e

    def close(self) -> None:
        pass   # the reader holds no file open between reads


def _load_reader(prefix: str, what: str) -> Any:
    try:
        return tf.train.load_checkpoint(prefix)
    except Exception as e:
        raise CheckpointError(f'Cannot read {what}: {e}') from e


def tfsnippet_variables(path: str, labels: Mapping[str, str] | None = None) -> BundleSource:
    """The variables of the tfsnippet checkpoint at `path`, without its state.

    The one reader of a checkpoint's variables: warm start reads them
    through it, and :meth:`~tfsnippet.scaffold.checkpoint.CheckpointSaver.saved_values`
    (the best weights an export writes).  Its names are `labels`
    (``{storage key: name}``, the ``variables`` of the checkpoint's state),
    else the storage keys; a checkpoint of no variables has no values.

    Raises:
        CheckpointError: The variables cannot be read.
    """
    path = os.fspath(path)
    prefix = os.path.join(os.path.abspath(path), VARS_PREFIX)
    what = f'the variables of checkpoint {path!r}'
    reader = None
    if labels is None or labels or os.path.isfile(prefix + '.index'):
        reader = _load_reader(prefix, what)
    names = labels or {}
    return BundleSource(path, 'tfsnippet', reader, lambda key: str(names.get(key, key)), what)


def open_tfsnippet(path: str, trust_pickle: bool = False) -> BundleSource:
    """The tfsnippet checkpoint whose directory is `path`, its values by recorded name.

    Raises:
        CheckpointError: Its files cannot be read.
        ~tfsnippet.scaffold.checkpoint.UntrustedCheckpointError: A legacy
            (pickled) checkpoint, and `trust_pickle` is false.
    """
    # data only; a legacy pickled state only when trusted (else UntrustedCheckpointError)
    labels = read_state(path, trust_pickle=trust_pickle)['variables'] or {}
    if not os.path.isfile(os.path.join(path, VARS_PREFIX) + '.index'):
        labels = {}   # a checkpoint of no variables
    return tfsnippet_variables(path, labels)


def open_tf_checkpoint(prefix: str, trust_pickle: bool = False) -> BundleSource:
    """The TensorFlow checkpoint of `prefix`: a ``tf.train.Checkpoint`` (format
    ``'tf2'``, when it holds an object graph) or a TF1 ``Saver`` one (``'tf1'``);
    the variables of a tfsnippet checkpoint open that checkpoint.

    Raises:
        CheckpointError: Its files cannot be read.
    """
    directory, base = os.path.split(prefix)
    if base == VARS_PREFIX and has_state(directory):
        return open_tfsnippet(directory, trust_pickle)
    what = f'the checkpoint {prefix!r}'
    reader = _load_reader(prefix, what)
    if _OBJECT_GRAPH_KEY in reader.get_variable_to_shape_map():
        def object_name(key: str) -> str | None:
            return key[:-len(_VALUE_SUFFIX)] if key.endswith(_VALUE_SUFFIX) else None
        return BundleSource(prefix, 'tf2', reader, object_name,
                            f'the values of checkpoint {prefix!r}', _tf2_layer_names(reader))
    return BundleSource(prefix, 'tf1', reader, lambda key: key,
                        f'the values of checkpoint {prefix!r}')


def _tf2_layer_names(reader: Any) -> dict[str, str]:
    """``{name: layer name}`` of the values of a ``tf.train.Checkpoint`` whose recorded full
    name is a path (a Keras variable's ``model/layer/kernel``: the layer is ``layer``)."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    try:
        graph.ParseFromString(reader.get_tensor(_OBJECT_GRAPH_KEY))
    except Exception:  # noqa: BLE001 - an unreadable graph: values are matched without names
        return {}
    found = {}
    for node in graph.nodes:
        for attr in node.attributes:
            parts = attr.full_name.split('/')
            if attr.checkpoint_key.endswith(_VALUE_SUFFIX) and len(parts) >= 2:
                found[attr.checkpoint_key[:-len(_VALUE_SUFFIX)]] = parts[-2]
    return found


# ---------------------------------------------------------------- Keras files
class KerasH5Source:
    """A :class:`Source` of a Keras weights file (``model.save_weights('x.weights.h5')``).

    Its names are the paths of its datasets (a Keras 2 name loses its
    ``:0``); the file is opened at the first :meth:`read` and stays open
    until :meth:`close`.

    Raises:
        CheckpointError: The file cannot be read.
    """

    source_format = 'keras_h5'

    def __init__(self, path: str):
        import h5py   # installed with Keras

        self.path = path
        self._file: Any = None
        keys: dict[str, list[str]] = {}
        shapes: dict[str, tuple[int, ...]] = {}
        dtypes: dict[str, tf.DType] = {}
        layer_names: dict[str, str] = {}

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
            layer = obj.parent.attrs.get('name')   # Keras 3 records each layer's name
            if isinstance(layer, bytes):
                layer = layer.decode('utf-8', 'replace')
            if isinstance(layer, str):
                layer_names[name] = layer

        try:
            with h5py.File(path, 'r') as f:
                f.visititems(visit)
        except OSError as e:
            raise CheckpointError(f'Cannot read the weights file {path!r}: {e}') from e
        self.keys: Mapping[str, Sequence[str]] = keys
        self.shapes: Mapping[str, tuple[int, ...]] = shapes
        self.dtypes: Mapping[str, tf.DType] = dtypes
        self.layer_names: Mapping[str, str] = layer_names
        self.chosen = ''

    def read(self, key: str) -> np.ndarray:
        import h5py

        if key not in self.shapes:
            raise KeyError(f'{key!r} is not a value of the weights file {self.path!r}')
        try:
            if self._file is None:
                self._file = h5py.File(self.path, 'r')
            return np.asarray(self._file[key][()])
        except OSError as e:
            raise CheckpointError(f'Cannot read the weights file {self.path!r}: {e}') from e

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def open_keras_h5(path: str) -> KerasH5Source:
    """The Keras weights file `path`, its values by dataset path."""
    return KerasH5Source(path)


# ---------------------------------------------------------------- any path
def chosen_checkpoint(store: Any) -> tuple[str, str] | None:
    """``(path, which)`` of the checkpoint a warm start reads from a folder of checkpoints
    (`store`, local or on a bucket): the pinned best when there is one, else the newest;
    `which` says which (:attr:`Source.chosen`); ``None`` when it holds none."""
    pinned = store.pinned()
    if pinned:
        path, info = pinned[0]
        what = [f'{info["metric"]} = {info["value"]:.6g}'] if isinstance(
            info.get('value'), (int, float)) and info.get('metric') else []
        what += [f'{k} {info[k]}' for k in ('epoch', 'step') if info.get(k) is not None]
        return path, 'the best' + (f': {", ".join(what)}' if what else '')
    latest = store.latest()
    return None if latest is None else (latest, 'the newest: no best is pinned')


def _chosen_tfsnippet(save_dir: str) -> tuple[str, str] | None:
    """``(path, which)`` of the tfsnippet checkpoint of `save_dir` to read (see
    :func:`chosen_checkpoint`), or ``None`` if it holds none."""
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
    # the store knows the best and the newest (its index, or the directories)
    return chosen_checkpoint(CheckpointStore(save_dir, filename=filenames.pop()))


def _tf_prefix_in(directory: str) -> str | None:
    """The latest TF checkpoint prefix in `directory`, or ``None`` if it holds none."""
    if os.path.isfile(os.path.join(directory, 'checkpoint')):   # TF's "latest" record
        latest = tf.train.latest_checkpoint(directory)
        if latest:
            return str(latest)
    indexes = sorted(n for n in os.listdir(directory) if n.endswith('.index'))
    if len(indexes) > 1:
        raise ValueError(
            f'`source` {directory!r} holds several checkpoints ({short_list(indexes)}) and '
            f'no "checkpoint" file naming the latest: pass a checkpoint prefix')
    return os.path.join(directory, indexes[0][:-len('.index')]) if indexes else None


def _is_hdf5(path: str) -> bool:
    import h5py   # installed with Keras
    return bool(h5py.is_hdf5(path))


def open_source(path: str | os.PathLike[str], trust_pickle: bool = False) -> Source:
    """Open the checkpoint or weights file at `path` with the opener of its kind.

    Args:
        path: A tfsnippet checkpoint directory, checkpoint root or
            ``checkpoint/`` folder (the pinned best checkpoint is opened,
            else the newest: see :attr:`Source.chosen`); a
            ``tf.train.Checkpoint`` or TF1 ``Saver`` checkpoint prefix, its
            ``.index`` file or its folder (the ``checkpoint`` file there
            names the latest); or a Keras ``.weights.h5`` file.
        trust_pickle: Read a legacy tfsnippet checkpoint (a pickled state
            of an earlier version), which may run code when loaded.

    Raises:
        TypeError: `path` is not a path.
        ValueError: `path` is none of these, or a folder holding several
            checkpoints with nothing naming the latest.
        CheckpointError: The files cannot be read.
        ~tfsnippet.scaffold.checkpoint.UntrustedCheckpointError: A legacy
            checkpoint, and nothing says it is trusted.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f'`source` must be a path (str or os.PathLike), got {path!r}')
    if is_url(os.fsdecode(os.fspath(path)), argument='source'):
        return _open_url(os.fsdecode(os.fspath(path)), trust_pickle)
    path = os.path.abspath(os.fsdecode(os.fspath(path)))
    expected = ('a tfsnippet checkpoint, a tf.train.Checkpoint or TF1 Saver checkpoint '
                '(prefix or directory) or a Keras .weights.h5 file')
    if os.path.isdir(path):
        found = ((path, '') if has_state(path) else
                 _chosen_tfsnippet(path) or
                 _chosen_tfsnippet(os.path.join(path, 'checkpoint')))
        if found:
            source = open_tfsnippet(found[0], trust_pickle)
            source.chosen = found[1]
            return source
        prefix = _tf_prefix_in(path)
        if prefix:
            return open_tf_checkpoint(prefix, trust_pickle)
        raise ValueError(f'`source` must be {expected}, got the directory {path!r} '
                         f'with no checkpoint in it')
    if os.path.isfile(path):
        if path.endswith('.index'):
            return open_tf_checkpoint(path[:-len('.index')], trust_pickle)
        if _is_hdf5(path):
            return open_keras_h5(path)
        raise ValueError(f'`source` must be {expected}, got the file {path!r}, '
                         f'which is neither HDF5 nor a checkpoint index')
    if os.path.isfile(path + '.index'):
        return open_tf_checkpoint(path, trust_pickle)
    raise ValueError(f'`source` must be {expected}, got {path!r}, which does not exist')


# ---------------------------------------------------------------- URLs
class _FetchedSource:
    """A :class:`Source` downloaded from an object store: `path` is the URL; the local
    copy is deleted by :meth:`close`."""

    def __init__(self, source: Source, url: str, tmp: tempfile.TemporaryDirectory[str],
                 chosen: str = ''):
        self._source = source
        self._tmp = tmp
        self.path = url
        self.source_format = source.source_format
        self.keys = source.keys
        self.shapes = source.shapes
        self.dtypes = source.dtypes
        self.layer_names = source.layer_names
        self.chosen = chosen

    def read(self, key: str) -> np.ndarray:
        return self._source.read(key)

    def close(self) -> None:
        self._source.close()
        self._tmp.cleanup()


def _open_url(url: str, trust_pickle: bool) -> Source:
    """Download what `url` names (as :func:`open_source` reads a local path) and open it."""
    location = resolve(url, argument='source')
    check_bucket(location, 'source')   # a missing bucket, refused credentials: one message
    tmp = tempfile.TemporaryDirectory(prefix='tfsnippet-source-')
    try:
        local, shown, chosen = _fetch(location, tmp.name)
        source = open_source(local, trust_pickle)
    except BaseException:
        tmp.cleanup()
        raise
    return _FetchedSource(source, shown, tmp, chosen)


def _fetch(location: Any, dest: str) -> tuple[str, str, str]:
    """Download what `location` names into `dest`; return ``(local path, URL shown, which
    checkpoint of a folder it is)``."""
    from .object_store import ObjectCheckpointStore, filenames_in

    fs = location.fs
    base = location.url.rsplit('/', 1)[-1]
    local = os.path.join(dest, base)
    # a tfsnippet checkpoint root, its checkpoint/ folder, or one checkpoint of them
    for folder in (location, location.join('checkpoint')):
        names = filenames_in(folder)
        if len(names) > 1:
            raise ValueError(f'`source` {location.url!r} holds tfsnippet checkpoints of several '
                             f'names {names}: pass the URL of one checkpoint')
        if names:
            store = ObjectCheckpointStore(folder, filename=names[0], argument='source')
            found = chosen_checkpoint(store)
            if found is not None:
                store.fetch(found[0], local)
                return local, found[0], found[1]
    parent_url, _, name = location.url.rpartition('/')
    m = re.fullmatch(r'(.+)-\d+', name)
    if m and '://' in parent_url and not parent_url.endswith(':/'):
        store = ObjectCheckpointStore(parent_url, filename=m.group(1), argument='source')
        if location.url in store.checkpoints():
            store.fetch(location.url, local)
            return local, location.url, ''
    if fs.isfile(location.path):        # a weights file, or a TF checkpoint's .index
        if location.url.endswith('.index'):
            prefix = location.path[:-len('.index')]
            _get_prefix(fs, prefix, dest)
            return os.path.join(dest, base), location.url, ''
        fs.get_file(location.path, local)
        return local, location.url, ''
    if fs.exists(location.path + '.index'):   # a TF checkpoint prefix
        _get_prefix(fs, location.path, dest)
        return local, location.url, ''
    if fs.isdir(location.path):         # a TF checkpoint's folder
        fs.get(location.path.rstrip('/') + '/', local + '/', recursive=True)
        return local, location.url, ''
    raise ValueError(f'`source` must be a checkpoint or weights file, got {location.url!r}, '
                     f'which does not exist')


def _get_prefix(fs: Any, prefix: str, dest: str) -> None:
    """Download the files ``<prefix>.*`` (a TF checkpoint bundle) into `dest`."""
    for item in fs.glob(prefix + '.*'):
        fs.get_file(item, os.path.join(dest, str(item).rsplit('/', 1)[-1]))
