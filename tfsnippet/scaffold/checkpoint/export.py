"""Writing trained weights for serving, atomically: a Keras weights file or a plain TF checkpoint.

:func:`export_weights` writes what it is given in the format of the TF
style in use:

* **eager**, a Keras model: ``model.save_weights``, a ``.weights.h5``
  file that ``model.load_weights`` reads back;
* **eager**, variables: a ``.weights.h5`` (HDF5) file with one dataset per
  variable, at its name (``dense/kernel``): :func:`~tfsnippet.warm_start`
  reads it back by name;
* **graph**: a directory holding a ``tf.compat.v1.train.Saver``-format
  checkpoint of the variables under their graph names, with TensorFlow's
  ``checkpoint`` file naming it: ``Saver.restore`` (with
  ``tf.train.latest_checkpoint(directory)``) and :func:`~tfsnippet.warm_start`
  read it back.

Every export is atomic: a file is written under a temporary name, fsynced
and renamed over `path`; a directory gets the new checkpoint files under a
new name and then its ``checkpoint`` file is replaced, which is the instant
the export takes effect.  A process killed at any time leaves the previous
export or the new one, never a mix.

**To an object store** (`path` an ``s3://``/``gs://`` URL, see
:func:`tfsnippet.storage.resolve`): the export is written into a local
temporary folder as above, then uploaded.  A weights file is one object,
whose upload is atomic (a reader sees the previous object or the new one);
a graph-mode directory gets its ``weights-<hex>.*`` objects first and its
``checkpoint`` object last (the instant the export takes effect), then the
objects of the previous export are deleted.
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from ...storage import Location, is_url, resolve
from ...tfops.tf_vars import as_tf_variable, normalize_variables, variable_name
from ...utils.validation import short_repr
from ...tfops.var_io import read_variables
from .io import HostBuffers, write_bundle
from .store import TMP_PREFIX, sync_dir, sync_file

__all__ = ['export_weights', 'WEIGHTS_SUFFIX']

#: The file name ending Keras requires of a weights file (eager exports).
WEIGHTS_SUFFIX = '.weights.h5'
_TF_STATE_FILE = 'checkpoint'
_EXPORT_PREFIX = 'weights-'
_EXPORT_RE = re.compile(re.escape(_EXPORT_PREFIX) + r'[0-9a-f]{32}\.(index|data-.*)')
_TMP_RE = re.compile(re.escape(TMP_PREFIX) + r'[0-9a-f]{32}')

# {id(tf.Variable): value}: the values to export instead of the variables' own
Values = Mapping[int, np.ndarray]


def is_keras_model(obj: Any) -> bool:
    """Whether `obj` is a Keras model (it has ``save_weights``)."""
    import keras
    return isinstance(obj, keras.Model)


def check_export_path(path: Any, arg_name: str, created_dir: str | None = None) -> str:
    """`path` made absolute, once checked for the TF style in use.

    Its directory must exist, unless it is `created_dir` (a directory the
    caller creates, e.g. a loop's ``checkpoint_dir``) or inside it.

    Raises:
        TypeError: `path` is not a path.
        ValueError: Its directory does not exist, or (eager) it does not end
            in ``.weights.h5``, or (graph) it is a file.
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise TypeError(f'`{arg_name}` must be a file or directory path, got {short_repr(path)}')
    if is_url(path, argument=arg_name):   # an object store has no directories to create first
        url = resolve(path, argument=arg_name).url
        if tf.executing_eagerly() and not url.endswith(WEIGHTS_SUFFIX):
            raise ValueError(f'`{arg_name}` must end in {WEIGHTS_SUFFIX!r} in eager mode (a '
                             f'Keras weights file), got {url!r}')
        return url
    path = os.path.abspath(os.fspath(path))
    parent = os.path.dirname(path)
    inside = created_dir is not None and _is_within(parent, os.path.abspath(created_dir))
    if not os.path.isdir(parent) and not inside:
        raise ValueError(f'`{arg_name}` {path!r} is in a directory that does not exist: '
                         f'create {parent!r} first')
    if tf.executing_eagerly():
        if not path.endswith(WEIGHTS_SUFFIX):
            raise ValueError(f'`{arg_name}` must end in {WEIGHTS_SUFFIX!r} in eager mode (a '
                             f'Keras weights file), got {path!r}')
    elif os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f'`{arg_name}` must be a directory path in graph mode (it receives a '
                         f'TF checkpoint), but {path!r} is a file')
    return path


def _is_within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip(os.sep) + os.sep)


def export_weights(path: str | os.PathLike[str], targets: Any, session: Any = None) -> str:
    """Write the current values of `targets` to `path` for serving, atomically.

    In eager mode `path` is a ``.weights.h5`` file: a Keras model's
    ``save_weights``, or for variables one dataset per variable under its
    name (a ``{name: variable}`` dict gives the names).  In graph mode
    `path` is a directory, created if needed, that receives a
    ``tf.compat.v1.train.Saver``-format checkpoint of the variables under
    their graph names (or the dict's names), read with `session` (default:
    the default session); a model's ``.variables`` are exported there.
    Either is read back by :func:`~tfsnippet.warm_start`, and a weights file
    of a model by ``model.load_weights``.

    Example:
        >>> import keras, os, tempfile
        >>> model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        >>> path = os.path.join(tempfile.mkdtemp(), 'model.weights.h5')
        >>> spt.export_weights(path, model) == path
        True
        >>> copy = keras.Sequential([keras.Input((3,)), keras.layers.Dense(2)])
        >>> copy.load_weights(path)
        >>> bool((copy.layers[0].kernel.numpy() == model.layers[0].kernel.numpy()).all())
        True

    Args:
        path: Eager mode: the ``.weights.h5`` file; graph mode: the directory.
            Its parent directory must exist.
        targets: A Keras model, or a list or dict of variables.
        session: Graph mode: the session to read the variables with.

    Returns:
        The absolute `path`.

    Raises:
        TypeError: `path` is not a path, or `targets` neither a model nor
            variables.
        ValueError: The directory of `path` does not exist, `path` does not
            suit the TF style (see above), or two variables have one name.
    """
    path = check_export_path(path, 'path')
    write_export(path, targets, None, session)
    return path


def write_export(path: str, targets: Any, values: Values | None, session: Any = None) -> None:
    """:func:`export_weights` of `values` (by variable) instead of the variables'
    own values, when given; `path` is checked already (a URL is written locally,
    then uploaded)."""
    if not is_url(path):
        _write_local(path, targets, values, session)
        return
    location = resolve(path, argument='path')
    with tempfile.TemporaryDirectory(prefix='tfsnippet-export-') as tmp:
        local = os.path.join(tmp, location.url.rsplit('/', 1)[-1])
        _write_local(local, targets, values, session)
        _upload_export(local, location)


def _upload_export(local: str, location: Location) -> None:
    """Upload the export at `local` to `location`, as the module says."""
    fs = location.fs
    if os.path.isfile(local):
        fs.put_file(local, location.path)   # one object: atomic
        return
    state = None
    for name in sorted(os.listdir(local)):
        if name == _TF_STATE_FILE:
            state = os.path.join(local, name)
        elif _EXPORT_RE.fullmatch(name):
            fs.put_file(os.path.join(local, name), location.join(name).path)
    if state is None:
        raise RuntimeError(f'The export in {local!r} has no {_TF_STATE_FILE!r} file')
    with open(state, encoding='utf-8') as f:
        current = re.search(r'model_checkpoint_path: "([^"]+)"', f.read())
    fs.put_file(state, location.join(_TF_STATE_FILE).path)   # the export takes effect
    keep = current.group(1) if current else None
    try:
        existing = fs.ls(location.path, detail=False)
    except FileNotFoundError:
        existing = []
    for item in existing:
        name = str(item).rstrip('/').rsplit('/', 1)[-1]
        if _EXPORT_RE.fullmatch(name) and (keep is None or not name.startswith(keep + '.')):
            fs.rm_file(location.join(name).path)


def _write_local(path: str, targets: Any, values: Values | None, session: Any = None) -> None:
    if is_keras_model(targets):
        if tf.executing_eagerly():
            _export_model(path, targets, values)
            return
        targets = list(targets.variables)
    elif not (isinstance(targets, Mapping) or
              (isinstance(targets, Sequence) and not isinstance(targets, str))):
        raise TypeError(f'`targets` must be a Keras model or a list or dict of variables, got '
                        f'{short_repr(targets)}')
    variables = normalize_variables(targets, 'targets')
    named = (list(variables.items()) if isinstance(variables, dict)
             else [(variable_name(v), v) for v in variables])
    names = [n for n, _ in named]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f'`targets` has several variables named {twice}: pass a dict '
                         f'{{name: variable}} to name them apart')
    if values is None:
        if session is not None:
            with session.as_default():
                arrays = read_variables([v for _, v in named])
        else:
            arrays = read_variables([v for _, v in named])
    elif tf.executing_eagerly():   # read one at a time as the file is written
        _export_h5(path, names, (values[id(as_tf_variable(v))] for _, v in named))
        return
    else:
        arrays = [values[id(as_tf_variable(v))] for _, v in named]
    if tf.executing_eagerly():
        _export_h5(path, names, arrays)
    else:
        _export_tf_checkpoint(path, names, arrays)


def _tmp_beside(path: str) -> str:
    """A new temporary name beside `path`; the ones an export killed before its
    rename left there are removed first."""
    directory, base = os.path.split(path)
    leftover = re.compile(re.escape(TMP_PREFIX) + '[0-9a-f]{32}-' + re.escape(base) + '$')
    for name in os.listdir(directory or '.'):
        if leftover.match(name):
            try:
                os.remove(os.path.join(directory, name))
            except OSError:
                pass
    return os.path.join(directory, f'{TMP_PREFIX}{uuid.uuid4().hex}-{base}')


def _commit_file(tmp: str, path: str) -> None:
    """Fsync `tmp` and rename it over `path`, durably."""
    sync_file(tmp)
    os.replace(tmp, path)
    sync_dir(os.path.dirname(path))


def _export_model(path: str, model: Any, values: Values | None) -> None:
    variables = list(model.weights)
    current: list[np.ndarray] | None = None
    buffers = HostBuffers()
    tmp = _tmp_beside(path)
    try:
        if values is not None:
            # put the values in for save_weights, then the current ones back: one variable
            # at a time, in place, so that only the current values make a host copy
            current = []
            for var in variables:
                current += buffers.copy({str(len(current)): var})
                HostBuffers.assign([var], [values[id(as_tf_variable(var))]])
        model.save_weights(tmp)
        _commit_file(tmp, path)
    finally:
        if current is not None:
            HostBuffers.assign(variables[:len(current)], current)
        if os.path.exists(tmp):
            os.remove(tmp)


def _export_h5(path: str, names: list[str], arrays: Iterable[np.ndarray]) -> None:
    import h5py   # installed with Keras
    tmp = _tmp_beside(path)
    try:
        with h5py.File(tmp, 'w') as f:
            for name, value in zip(names, arrays):
                f.create_dataset(name, data=np.asarray(value))
        _commit_file(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def _export_tf_checkpoint(path: str, names: list[str], arrays: list[np.ndarray]) -> None:
    os.makedirs(path, exist_ok=True)
    name = f'{_EXPORT_PREFIX}{uuid.uuid4().hex}'
    prefix = os.path.join(path, name)
    written = []
    try:
        # the bundle writer of the checkpoints: its own graph (the user's may be finalized)
        write_bundle(prefix, names, [np.asarray(a) for a in arrays])
        written = [n for n in os.listdir(path) if n.startswith(name + '.')]
        for item in written:
            sync_file(os.path.join(path, item))
        tmp = os.path.join(path, f'{TMP_PREFIX}{uuid.uuid4().hex}')
        with open(tmp, 'w', encoding='utf-8') as f:
            f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
        _commit_file(tmp, os.path.join(path, _TF_STATE_FILE))   # the export takes effect
    except BaseException:
        for item in written:
            os.remove(os.path.join(path, item))
        raise
    for item in os.listdir(path):   # the previous export, and leftovers of killed ones
        if (_EXPORT_RE.fullmatch(item) and not item.startswith(name + '.')) or \
                _TMP_RE.fullmatch(item):
            os.remove(os.path.join(path, item))
