"""The file that holds a checkpoint's Python state: data only, never code.

A checkpoint directory holds, beside the variables in TensorFlow's format,
one file ``state.npz`` with the state of the loop and of the registered
:class:`~tfsnippet.CheckpointSavableObject`\\ s.  Reading it runs no code
of the file's author: it is safe to resume or warm-start from a checkpoint
somebody else wrote.

**The format** (version 2; version 1 was a pickle, see below) is an
uncompressed NumPy ``.npz`` archive, readable with
``numpy.load(path, allow_pickle=False)``:

* the member ``__state__`` is a 1-D ``uint8`` array holding UTF-8 JSON:
  ``{"format": "tfsnippet-checkpoint-state", "version": 2, "step": <int>,
  "variables": {<checkpoint key>: <variable name>}, "objects": {<object
  key>: <encoded state>}}``;
* the members ``a0``, ``a1``... are the numpy arrays (and numpy scalars,
  as 0-d arrays) of the states, in NumPy's ``.npy`` format (never of
  ``object`` dtype).

An encoded state is the state as JSON, with these rules: an array is
written as ``{"$array": <n>}`` (the member ``a<n>``), a numpy scalar as
``{"$scalar": <n>}`` (the 0-d member ``a<n>``), a tuple as ``{"$tuple":
[<items>]}``, and a dict key that starts with ``$`` is written with one
more ``$`` in front.  Floats are written exactly (``NaN`` and ``Infinity``
as Python's ``json`` writes them), integers of any size as JSON integers.

**What a state may hold** ("plain data"): ``None``, ``bool``, ``int``,
``float``, ``str``, ``list``, ``tuple``, ``dict`` with ``str`` keys,
``numpy.ndarray`` and numpy scalars such as ``np.float32(1.)`` (not of
``object`` dtype), nested in any way.  Each of them reads back as the same
type and value.  Anything else (a set, bytes, a subclass of these types
such as an ``OrderedDict`` or an enum, an object) is refused when
the checkpoint is saved, with a :class:`TypeError` that names the object
and the path inside its state.

**Legacy checkpoints**: tfsnippet before this format wrote ``state.pkl``,
a pickle.  Loading a pickle can run any code its author put in it, so such
a checkpoint is read only when the user says they trust it: the
environment variable ``TFSNIPPET_TRUST_PICKLE=1`` (which resuming loops
honour), or ``trust_pickle=True`` where an API reads a checkpoint
(:func:`~tfsnippet.warm_start`, :meth:`~tfsnippet.CheckpointSaver.restore`).
Otherwise reading it raises
:class:`~tfsnippet.scaffold.checkpoint.UntrustedCheckpointError` and nothing
of the file is loaded.  ``python -m tfsnippet.scaffold.checkpoint convert
DIR`` (:func:`~tfsnippet.scaffold.checkpoint.convert_legacy_checkpoints`)
rewrites trusted legacy checkpoints into this format once.
"""

from __future__ import annotations

import io
import json
import os
import struct
import zipfile
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# CheckpointError, UntrustedCheckpointError and convert_legacy_checkpoints are public
# through tfsnippet.scaffold.checkpoint, which documents them
__all__ = ['EncodedState', 'encode_state', 'decode_state', 'read_state', 'write_state_file',
           'has_state', 'trust_pickle_from_env',
           'STATE_FILE', 'LEGACY_STATE_FILE', 'TRUST_PICKLE_ENV', 'FORMAT_NAME',
           'FORMAT_VERSION']

#: The state file of a checkpoint.
STATE_FILE = 'state.npz'
#: The pickled state file of the checkpoints of earlier versions.
LEGACY_STATE_FILE = 'state.pkl'
#: The environment variable that lets legacy (pickled) checkpoints be read.
TRUST_PICKLE_ENV = 'TFSNIPPET_TRUST_PICKLE'
#: The ``format`` field of the JSON structure.
FORMAT_NAME = 'tfsnippet-checkpoint-state'
#: The version of the format written (1 was the pickle).
FORMAT_VERSION = 2

_STRUCTURE = '__state__'
_ARRAY = '$array'
_SCALAR = '$scalar'
_TUPLE = '$tuple'
_LEGACY_FORMAT = 1
# above this many bytes of arrays a state is streamed into its file, not built in memory
_STREAM_BYTES = 1 << 20
_PLAIN = ('None, bool, int, float, str, lists, tuples, dicts with str keys, numpy arrays '
          'and numpy scalars (not of object dtype)')


class CheckpointError(RuntimeError):
    """A checkpoint could not be read (missing or damaged files)."""


class UntrustedCheckpointError(CheckpointError):
    """A legacy checkpoint (a pickled ``state.pkl``) was not read, since loading it may run code.

    It is never skipped as a damaged checkpoint would be: the user decides.
    """


class CheckpointMismatchError(ValueError):
    """A checkpoint holds other variables than those to restore: it was saved by another model.

    Raised before anything is assigned, with a one-line message that names
    a few of the differences (the full lists are its attributes); a
    :class:`~tfsnippet.TrainLoop` resuming such a checkpoint adds how to
    start afresh.

    Attributes:
        path: The checkpoint.
        missing: The names of the variables to restore that it lacks.
        unexpected: The names of its values that no variable to restore has.
        mismatched: ``'name: (shape) vs saved (shape)'`` of each variable
            whose saved value has another shape.
        advice: What to do about it (the end of the message), or ``''``.
    """

    def __init__(self, path: str, missing: Sequence[str] = (), unexpected: Sequence[str] = (),
                 mismatched: Sequence[str] = (), advice: str = ''):
        self.path = path
        self.missing = list(missing)
        self.unexpected = list(unexpected)
        self.mismatched = list(mismatched)
        self.advice = advice
        problems = []
        if self.missing:
            problems.append(f'missing from the checkpoint: {_few(self.missing)}')
        if self.unexpected:
            problems.append(
                f'in the checkpoint but not among the variables to restore: '
                f'{_few(self.unexpected)} (a Keras optimizer creates its variables on its '
                f'first step or `optimizer.build(model.trainable_variables)`)')
        if self.mismatched:
            problems.append(f'shapes differ: {_few(self.mismatched)}')
        message = f'The checkpoint {path!r} does not match the variables: ' + '; '.join(problems)
        super().__init__(f'{message}. {advice}' if advice else message)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.path, self.missing, self.unexpected, self.mismatched,
                             self.advice))


def _few(names: list[str], shown: int = 5) -> str:
    """``repr(names)``, cut after `shown` of them (saying how many there are in all)."""
    if len(names) <= shown:
        return repr(names)
    return f'{repr(names[:shown])[:-1]}, ... ({len(names)} in all)]'


def trust_pickle_from_env() -> bool:
    """Whether ``TFSNIPPET_TRUST_PICKLE`` says legacy pickled checkpoints may be read."""
    return os.environ.get(TRUST_PICKLE_ENV, '').strip().lower() in ('1', 'true', 'yes', 'on')


# ---------------------------------------------------------------- encoding
class _NotPlain(Exception):
    """Raised by the fast encoder; the slow walk then finds where, for the message."""


def _encode(value: Any, arrays: list[np.ndarray]) -> Any:
    t = type(value)
    if t is str or t is int or t is float or t is bool or value is None:
        return value
    if t is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain()
            if key[:1] == '$':
                key = '$' + key
            out[key] = _encode(item, arrays)
        return out
    if t is list:
        return [_encode(item, arrays) for item in value]
    if t is tuple:
        return {_TUPLE: [_encode(item, arrays) for item in value]}
    if t is np.ndarray and not value.dtype.hasobject:
        arrays.append(value)
        return {_ARRAY: len(arrays) - 1}
    if isinstance(value, np.generic) and not value.dtype.hasobject:
        arrays.append(np.asarray(value))
        return {_SCALAR: len(arrays) - 1}
    raise _NotPlain()


def _describe(value: Any) -> str:
    t = type(value)
    if isinstance(value, np.ndarray):
        return ('an array of object dtype' if value.dtype.hasobject
                else f'an array subclass {t.__name__} (use np.asarray(x))')
    return f'a {t.__module__}.{t.__qualname__}' if t.__module__ != 'builtins' \
        else f'a {t.__name__}'


def _find_not_plain(value: Any, path: str) -> str | None:
    """`path` + where in `value` the first value that is not plain data is, and what it is."""
    t = type(value)
    if t in (str, int, float, bool) or value is None:
        return None
    if t is dict:
        for key, item in value.items():
            if type(key) is not str:
                return f'{path} has the key {key!r}, {_describe(key)} (keys must be str)'
            found = _find_not_plain(item, f'{path}[{key!r}]')
            if found:
                return found
        return None
    if t is list or t is tuple:
        for i, item in enumerate(value):
            found = _find_not_plain(item, f'{path}[{i}]')
            if found:
                return found
        return None
    if t is np.ndarray and not value.dtype.hasobject:
        return None
    if isinstance(value, np.generic) and not value.dtype.hasobject:
        return None
    return f'{path} is {_describe(value)}'


class EncodedState:
    """A checkpoint's state checked and split into its JSON structure and its arrays.

    Made by :func:`encode_state`; written by :func:`write_state_file` or
    turned into the file's bytes by :meth:`to_bytes`.
    """

    __slots__ = ('structure', 'arrays')

    def __init__(self, structure: bytes, arrays: list[np.ndarray]):
        self.structure = structure
        self.arrays = arrays

    @property
    def array_bytes(self) -> int:
        """How many bytes the arrays hold."""
        return sum(a.nbytes for a in self.arrays)

    def write_to(self, f: Any) -> None:
        """Write the ``.npz`` archive into the binary file object `f`."""
        with zipfile.ZipFile(f, 'w', zipfile.ZIP_STORED) as zf:
            header = io.BytesIO()
            np.lib.format.write_array(header, np.frombuffer(self.structure, np.uint8))
            zf.writestr(_STRUCTURE + '.npy', header.getvalue())
            for i, array in enumerate(self.arrays):
                if array.nbytes < _STREAM_BYTES:
                    member = io.BytesIO()
                    np.lib.format.write_array(member, array, allow_pickle=False)
                    zf.writestr(f'a{i}.npy', member.getvalue())
                else:
                    with zf.open(f'a{i}.npy', 'w', force_zip64=True) as out:
                        _write_npy(out, array)

    def to_bytes(self) -> bytes:
        """The bytes of the file: a copy, which later changes of the arrays do not reach."""
        if self.array_bytes < _STREAM_BYTES:
            return _small_npz([(_STRUCTURE + '.npy', _npy_bytes(np.frombuffer(
                self.structure, np.uint8)))] + [(f'a{i}.npy', _npy_bytes(a))
                                                for i, a in enumerate(self.arrays)])
        buffer = io.BytesIO()
        self.write_to(buffer)
        return buffer.getvalue()


# a large array is written by pieces of this many bytes (no whole transient copy)
_PIECE_BYTES = 4 << 20


def _write_npy(out: Any, array: np.ndarray) -> None:
    """Write `array` in the ``.npy`` format into the binary stream `out`: a contiguous
    array straight from its memory, by pieces, so no transient copy of it is made
    (``np.lib.format.write_array`` makes 16 MiB ones)."""
    if not (array.flags.c_contiguous or array.flags.f_contiguous) or array.dtype.hasobject:
        np.lib.format.write_array(out, array, allow_pickle=False)
        return
    fortran = bool(array.flags.f_contiguous and not array.flags.c_contiguous)
    np.lib.format.write_array_header_1_0(out, {
        'descr': np.lib.format.dtype_to_descr(array.dtype), 'fortran_order': fortran,
        'shape': tuple(array.shape)})
    flat: np.ndarray = (array.T if fortran else array).reshape(-1).view(np.uint8)
    data = memoryview(flat)  # type: ignore[arg-type]
    for start in range(0, len(data), _PIECE_BYTES):
        out.write(data[start:start + _PIECE_BYTES])


def _npy_bytes(array: np.ndarray) -> bytes:
    """`array` in NumPy's ``.npy`` format (version 1.0), as ``np.save`` writes it."""
    fortran = bool(array.flags.f_contiguous and not array.flags.c_contiguous)
    header = (f"{{'descr': {np.lib.format.dtype_to_descr(array.dtype)!r}, "
              f"'fortran_order': {fortran}, 'shape': {tuple(array.shape)!r}, }}")
    # magic, version, header length; the header padded with spaces to a multiple of 64
    pad = 63 - (10 + len(header)) % 64
    header = header + ' ' * pad + '\n'
    if len(header) > 0xffff:   # only for records of very many fields: let numpy write it
        out = io.BytesIO()
        np.lib.format.write_array(out, array, allow_pickle=False)
        return out.getvalue()
    data = (array.T if fortran else np.ascontiguousarray(array)).tobytes()
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode('latin1') + data


# what a zip file of stored (uncompressed) members is made of: local headers, central
# directory entries and the end record (PKWARE's APPNOTE, the parts a .npz uses)
_LOCAL = struct.Struct('<IHHHHHIIIHH')
_CENTRAL = struct.Struct('<IHHHHHHIIIHHHHHII')
_END = struct.Struct('<IHHHHIIH')
_DOS_DATE = (1980 - 1980) << 9 | 1 << 5 | 1   # 1980-01-01: the files carry no time


def _small_npz(members: list[tuple[str, bytes]]) -> bytes:
    """An uncompressed zip archive of `members` (each under 4 GiB)."""
    parts: list[bytes] = []
    central: list[bytes] = []
    offset = 0
    for name, data in members:
        raw = name.encode('ascii')
        crc = zlib.crc32(data)
        local = _LOCAL.pack(0x04034b50, 20, 0, 0, 0, _DOS_DATE, crc, len(data), len(data),
                            len(raw), 0) + raw
        central.append(_CENTRAL.pack(0x02014b50, 20, 20, 0, 0, 0, _DOS_DATE, crc, len(data),
                                     len(data), len(raw), 0, 0, 0, 0, 0o600 << 16,
                                     offset) + raw)
        parts.append(local)
        parts.append(data)
        offset += len(local) + len(data)
    directory = b''.join(central)
    parts.append(directory)
    parts.append(_END.pack(0x06054b50, 0, 0, len(members), len(members), len(directory),
                           offset, 0))
    return b''.join(parts)


def encode_state(step: int, variables: Mapping[str, str],
                 objects: Mapping[str, Any]) -> EncodedState:
    """Check and encode the state of a checkpoint of `step`.

    Args:
        step: The checkpoint's step.
        variables: ``{checkpoint key: variable name}`` of its variables.
        objects: ``{object key: state}``, each state plain data.

    Raises:
        TypeError: A state is not plain data; the message names the
            object's key, the path inside its state and what is there.
    """
    arrays: list[np.ndarray] = []
    encoded = {}
    for key, state in objects.items():
        try:
            encoded[key] = _encode(state, arrays)
        except (_NotPlain, RecursionError):
            where = _find_not_plain(state, 'state') or 'state nests too deeply'
            raise TypeError(
                f'The checkpoint state of {key!r} is not plain data: {where}. A checkpoint '
                f'state may hold only {_PLAIN}') from None
    structure = json.dumps(
        {'format': FORMAT_NAME, 'version': FORMAT_VERSION, 'step': step,
         'variables': dict(variables), 'objects': encoded},
        ensure_ascii=False, separators=(',', ':')).encode('utf-8')
    return EncodedState(structure, arrays)


def write_state_file(directory: str, state: EncodedState | bytes) -> None:
    """Write `state` (encoded, or the bytes of :meth:`EncodedState.to_bytes`) into
    ``directory/state.npz``; the caller makes it durable."""
    path = os.path.join(directory, STATE_FILE)
    if isinstance(state, EncodedState) and state.array_bytes >= _STREAM_BYTES:
        with open(path, 'wb') as f:
            state.write_to(f)
        return
    data = state.to_bytes() if isinstance(state, EncodedState) else state
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, 'O_BINARY', 0), 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
    finally:
        os.close(fd)


# ---------------------------------------------------------------- decoding
def _decode_hook(arrays: Mapping[str, np.ndarray]) -> Any:
    def hook(obj: dict[str, Any]) -> Any:
        if not any(key[:1] == '$' for key in obj):
            return obj
        if len(obj) == 1 and _TUPLE in obj:
            if type(obj[_TUPLE]) is not list:
                raise ValueError('its tuple is not a list')
            return tuple(obj[_TUPLE])
        if len(obj) == 1 and (_ARRAY in obj or _SCALAR in obj):
            index = obj.get(_ARRAY, obj.get(_SCALAR))
            name = f'a{index}'
            if type(index) is not int or name not in arrays:
                raise ValueError(f'it refers to an array {index!r} that it does not hold')
            if _ARRAY in obj:
                return arrays[name]
            if arrays[name].ndim != 0:
                raise ValueError(f'its scalar {index!r} is not a 0-d array')
            return arrays[name][()]
        out = {}
        for key, value in obj.items():
            if key[:1] == '$':
                if key[:2] != '$$':
                    raise ValueError(f'it holds an unknown marker {key!r}')
                key = key[1:]
            out[key] = value
        return out
    return hook


def decode_state(data: bytes | Any, source: str = 'the state') -> dict[str, Any]:
    """Read a state file (its bytes or a binary file object); return
    ``{'format', 'version', 'step', 'variables', 'objects'}``.

    Raises:
        CheckpointError: It is not a state file of a version this tfsnippet reads.
    """
    try:
        stream = io.BytesIO(data) if isinstance(data, (bytes, bytearray)) else data
        start = stream.read(4)
        stream.seek(-len(start), io.SEEK_CUR)
        if start[:2] != b'PK':   # else NumPy would try it as a pickle, and say so
            raise ValueError(f'it is not a .npz archive (it starts with {start!r})')
        with np.load(stream, allow_pickle=False) as npz:
            if _STRUCTURE not in npz.files:
                raise ValueError(f'it is not a .npz archive with a {_STRUCTURE!r} member')
            header = _member(npz, _STRUCTURE)
            if header.dtype != np.uint8 or header.ndim != 1:
                raise ValueError(f'its {_STRUCTURE!r} member is not a 1-D uint8 array')
            arrays = {name: _member(npz, name) for name in npz.files if name != _STRUCTURE}
        saved = json.loads(header.tobytes().decode('utf-8'))
        if not isinstance(saved, dict) or saved.get('format') != FORMAT_NAME:
            raise ValueError(f'its structure is not a {FORMAT_NAME!r}')
        version = saved.get('version')
        if type(version) is not int or version > FORMAT_VERSION:
            raise ValueError(f'its format version {version!r} is newer than this tfsnippet '
                             f'reads ({FORMAT_VERSION}): upgrade tfsnippet')
        objects = saved.get('objects')
        if not isinstance(objects, dict) or not isinstance(saved.get('variables'), dict):
            raise ValueError('its "objects" or "variables" is not a dict')
        hook = _decode_hook(arrays)
        saved['objects'] = {key: _rebuild(value, hook) for key, value in objects.items()}
        return saved
    except CheckpointError:
        raise
    except Exception as e:
        raise CheckpointError(f'Cannot read the checkpoint state {source}: {e}') from e


def _member(npz: Any, name: str) -> np.ndarray:
    """The member `name` of a state file, never unpickled."""
    try:
        return npz[name]
    except ValueError as e:
        if 'allow_pickle' not in str(e):
            raise
        raise ValueError(f'its member {name!r} holds pickled objects, which a state never '
                         f'holds (not loaded)') from None


def _rebuild(value: Any, hook: Any) -> Any:
    """Apply `hook` bottom-up to the dicts of `value` (one state, already parsed)."""
    t = type(value)
    if t is dict:
        return hook({key: _rebuild(item, hook) for key, item in value.items()})
    if t is list:
        return [_rebuild(item, hook) for item in value]
    return value


def has_state(directory: str) -> bool:
    """Whether `directory` holds the state file of a checkpoint (or a legacy one)."""
    return (os.path.isfile(os.path.join(directory, STATE_FILE)) or
            os.path.isfile(os.path.join(directory, LEGACY_STATE_FILE)))


def _untrusted(path: str) -> UntrustedCheckpointError:
    return UntrustedCheckpointError(
        f'The checkpoint {path!r} was written by an earlier tfsnippet as a pickle '
        f'({LEGACY_STATE_FILE}), which can run code when it is loaded: it was not read. If you '
        f'trust whoever wrote it, set the environment variable {TRUST_PICKLE_ENV}=1 (a '
        f'TrainLoop resuming from it reads it then), pass `trust_pickle=True` '
        f'(spt.warm_start, CheckpointSaver.restore), or convert it once with '
        f'`python -m tfsnippet.scaffold.checkpoint convert {path}`')


def read_state(directory: str, trust_pickle: bool = False) -> dict[str, Any]:
    """Read the state of the checkpoint `directory`.

    Args:
        directory: The checkpoint's directory.
        trust_pickle: Read a legacy ``state.pkl`` (also read when
            ``TFSNIPPET_TRUST_PICKLE=1``).

    Raises:
        FileNotFoundError: `directory` holds no state file.
        UntrustedCheckpointError: It holds only a legacy ``state.pkl``,
            and nothing says it is trusted.
        CheckpointError: The state file cannot be read.
    """
    path = os.path.join(directory, STATE_FILE)
    try:
        with open(path, 'rb') as f:
            return decode_state(f.read(), repr(path))
    except FileNotFoundError:
        pass
    legacy = os.path.join(directory, LEGACY_STATE_FILE)
    if not os.path.isfile(legacy):
        raise FileNotFoundError(
            f'No checkpoint at {directory!r} (no {STATE_FILE} in it)')
    if not (trust_pickle or trust_pickle_from_env()):
        raise _untrusted(directory)
    return _read_legacy(legacy)


def _read_legacy(legacy: str) -> dict[str, Any]:
    import pickle   # only ever for a legacy checkpoint the user said they trust

    try:
        with open(legacy, 'rb') as f:
            saved = pickle.load(f)  # noqa: S301  (trusted by the user, see read_state)
        if not isinstance(saved, dict) or saved.get('format') != _LEGACY_FORMAT:
            raise ValueError('unknown state format')
        if not isinstance(saved.get('objects'), dict):
            raise ValueError('its "objects" is not a dict')
        saved['variables'] = saved.get('variables') or {}
        return saved
    except Exception as e:
        raise CheckpointError(f'Cannot read the checkpoint state {legacy!r}: {e}') from e


# ---------------------------------------------------------------- conversion
def _legacy_dirs(path: str) -> list[str]:
    if os.path.isfile(os.path.join(path, LEGACY_STATE_FILE)):
        return [path]
    found = []
    for directory, subdirs, files in os.walk(path):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith('.'))
        if LEGACY_STATE_FILE in files:
            found.append(directory)
    return found


def convert_legacy_checkpoints(path: str) -> list[str]:
    """Rewrite the legacy (pickled) checkpoints at or under `path` into the current format.

    Calling it says that you trust them: their pickles are loaded (which
    may run code) and their states written as ``state.npz``; then the
    ``state.pkl`` is removed.  The new file is written beside it and
    renamed into place, fsynced, so a conversion killed half-way leaves a
    readable checkpoint.  A directory that holds both is finished.

    Returns:
        The directories converted.

    Raises:
        FileNotFoundError: `path` does not exist.
        TypeError: A legacy state is not plain data (the message names it).
        CheckpointError: A legacy state cannot be read.
    """
    from .store import sync_file

    path = os.path.abspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f'`path` {path!r} does not exist')
    converted = []
    for directory in _legacy_dirs(path):
        legacy = os.path.join(directory, LEGACY_STATE_FILE)
        target = os.path.join(directory, STATE_FILE)
        if not os.path.isfile(target):
            saved = _read_legacy(legacy)
            try:
                encoded = encode_state(int(saved.get('step', 0)), saved['variables'],
                                       saved['objects'])
            except TypeError as e:
                raise TypeError(f'Cannot convert the checkpoint {directory!r}: {e}') from None
            tmp = target + '.tmp'
            with open(tmp, 'wb') as f:
                f.write(encoded.to_bytes())
            sync_file(tmp)
            os.replace(tmp, target)
        os.remove(legacy)
        converted.append(directory)
    return converted
