"""How a checkpoint's files get written: by a background writer, from host copies taken at the save.

An asynchronous save (``CheckpointSaver(..., asynchronous=True)``, which
``TrainLoop(checkpoint_async=True)`` uses) has two halves:

* in the thread that saves, :class:`HostBuffers` copies every variable into
  numpy buffers allocated once and reused by every save (eager: each
  variable's host tensor copied straight in; graph: fetched by pieces, so no
  whole transient copy) and the Python state is encoded
  (:mod:`.state_format`) and frozen (:func:`freeze_state`), so the
  checkpoint holds the state *at the save*; the arrays of other
  :class:`HostBuffers` in that state (the early-stopping snapshot) are not
  copied but lent to the save, and their next copy waits for it;
* :class:`AsyncCheckpointWriter` then hands a ``write`` callable to the
  :class:`~.store.CheckpointStore` in a background thread: the variables go
  into the same TensorFlow bundle files a synchronous save writes
  (:func:`write_bundle`), then the store fsyncs them, renames the directory
  into place, moves the index and prunes, exactly as for a synchronous save
  (an :class:`~.object_store.ObjectCheckpointStore` uploads them, commits,
  writes the index and prunes, all in the background thread too).

One save is in flight at a time: the next save first waits for it (the
*back-pressure*, counted in :class:`AsyncSaveStats`), since it reuses the
buffers.  A failed background write is kept and raised as a
:class:`CheckpointWriteError` in the saving thread by the next
:meth:`AsyncCheckpointWriter.reserve` (the next save) or
:meth:`AsyncCheckpointWriter.wait`; the store leaves the earlier
checkpoints intact.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import tensorflow as tf

from ...tfops.tf_vars import as_tf_variable
from ...tfops.var_io import assign_variables
from .state_format import EncodedState
from .object_store import ObjectCheckpointStore
from .store import CheckpointStore

__all__ = ['AsyncCheckpointWriter', 'AsyncSaveStats', 'CheckpointWriteError', 'HostBuffers',
           'FrozenState', 'freeze_state', 'aligned_empty', 'write_bundle']


class CheckpointWriteError(RuntimeError):
    """An asynchronous checkpoint save failed in the background.

    Raised in the thread that saves, at the first chance after the failure;
    the exception of the background write is its ``__cause__``.  The
    earlier checkpoints are intact.

    Attributes:
        step: The step of the checkpoint that could not be written.
        save_dir: The folder it was written into.
    """

    def __init__(self, message: str, step: int, save_dir: str):
        super().__init__(message)
        self.step = step
        self.save_dir = save_dir


@dataclass
class AsyncSaveStats:
    """What the asynchronous saves of a writer cost the thread that saves, and the writer.

    Attributes:
        saves: Saves handed to the background writer.
        written: Saves the background writer completed.
        failed: Saves the background writer failed.
        blocked_seconds: The total time saves blocked the saving thread
            (waiting for the previous save, plus copying the state).
        max_blocked_seconds: The longest time one save blocked it.
        copy_seconds: The total time spent copying the state to the host.
        waits: Saves that had to wait for the previous one to finish.
        wait_seconds: The total time those waits took (the back-pressure).
        write_seconds: The total time the background writer worked.
    """

    saves: int = 0
    written: int = 0
    failed: int = 0
    blocked_seconds: float = 0.
    max_blocked_seconds: float = 0.
    copy_seconds: float = 0.
    waits: int = 0
    wait_seconds: float = 0.
    write_seconds: float = 0.

    def summary(self) -> str:
        """One line: saves, the mean and longest block, the back-pressure."""
        mean = self.blocked_seconds / self.saves if self.saves else 0.
        return (f'{self.saves} asynchronous checkpoint saves: the loop waited {mean * 1e3:.1f} '
                f'ms per save on average, {self.max_blocked_seconds * 1e3:.1f} ms at most; '
                f'{self.waits} waited for the previous save ({self.wait_seconds:.3f} s in all)')


#: Host buffers are aligned to this many bytes: TensorFlow then takes a numpy array
#: fed to a session or converted to a tensor without copying it.
_ALIGN = 64
#: A graph-mode copy fetches at most about this many bytes per ``session.run``, and an
#: eager assignment from host memory writes this many at a time, so that the
#: transient tensors of a copy stay small next to the buffers.
CHUNK_BYTES = 4 << 20


def aligned_empty(shape: Sequence[int], dtype: Any) -> np.ndarray:
    """An uninitialized C-contiguous array whose data is aligned to 64 bytes.

    TensorFlow takes such an array (fed to a session, or converted to an
    eager tensor) without copying it; a misaligned one it copies first.
    """
    dtype = np.dtype(dtype)
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    raw = np.empty(nbytes + _ALIGN, dtype=np.uint8)
    offset = (-raw.ctypes.data) % _ALIGN
    return raw[offset:offset + nbytes].view(dtype).reshape(tuple(shape))


def _is_aligned(array: np.ndarray) -> bool:
    return (array.flags['C_CONTIGUOUS'] and array.flags['WRITEABLE'] and
            array.ctypes.data % _ALIGN == 0)


# ------------------------------------------------------------------ lending buffers
# A host buffer may be written to disk by a background save without being copied
# (see `freeze_state`): it is *lent* until that save ends, and `HostBuffers.copy`
# waits for it to come back before writing into it.
_registry_lock = threading.Lock()
_owned: dict[int, weakref.ref[np.ndarray]] = {}    # id -> a HostBuffers' array
_lent: dict[int, threading.Event] = {}              # id -> set when given back


def _register(array: np.ndarray) -> None:
    key = id(array)

    def forget(_: Any, key: int = key) -> None:
        with _registry_lock:
            _owned.pop(key, None)

    with _registry_lock:
        _owned[key] = weakref.ref(array, forget)


def _is_owned(array: Any) -> bool:
    with _registry_lock:
        ref = _owned.get(id(array))
    return ref is not None and ref() is array


def _wait_returned(array: np.ndarray) -> None:
    with _registry_lock:
        event = _lent.get(id(array))
    if event is not None:
        event.wait()


class FrozenState:
    """A checkpoint's encoded state taken at a save, to be written later in another thread.

    Made by :func:`freeze_state`.  :attr:`encoded` is what the writer writes
    (:func:`~.state_format.write_state_file`); :meth:`release` gives the lent
    host buffers back (the writer calls it once the save ended).
    """

    def __init__(self, encoded: EncodedState, event: threading.Event | None, keys: list[int]):
        self.encoded = encoded
        self._event = event
        self._keys = keys

    @property
    def lent(self) -> int:
        """How many host buffers are lent to this state (until :meth:`release`)."""
        return len(self._keys) if self._event is not None else 0

    def release(self) -> None:
        """Give the lent host buffers back (they may be written into again)."""
        if self._event is not None:
            with _registry_lock:
                for key in self._keys:
                    if _lent.get(key) is self._event:
                        del _lent[key]
            self._event.set()
            self._event = None


def freeze_state(encoded: EncodedState) -> FrozenState:
    """Take the `encoded` state now, for a background save: its arrays are copied,
    except those of :class:`HostBuffers`, which are lent (not copied) until
    :meth:`FrozenState.release`: meanwhile :meth:`HostBuffers.copy` waits
    before it writes into them, so the saved values stay those of the save.
    """
    lent: list[np.ndarray] = []
    arrays = []
    for array in encoded.arrays:
        if _is_owned(array):
            lent.append(array)
            arrays.append(array)
        else:
            arrays.append(np.array(array, copy=True))   # later changes must not reach it
    frozen = EncodedState(encoded.structure, arrays)
    if not lent:
        return FrozenState(frozen, None, [])
    event = threading.Event()
    keys = [id(a) for a in lent]
    with _registry_lock:
        for key in keys:
            _lent[key] = event
    return FrozenState(frozen, event, keys)


class HostBuffers:
    """Copies of variables in host memory, each buffer allocated once and reused.

    :meth:`copy` reads each variable into its buffer, made on its first copy
    (again only when the variable's shape or dtype changes): eager mode
    copies the variable's host tensor straight into it (a device tensor
    comes to the host one variable at a time); graph mode fetches the
    variables by pieces of about :data:`CHUNK_BYTES` with ops built by
    :meth:`prepare`, so the transient arrays of ``session.run`` stay small.
    :meth:`assign` writes buffers back into the variables without a whole
    transient copy either.  The arrays of one copy stay valid until the next
    copy, which first waits for the ones a background save still writes
    (:func:`freeze_state`).

    :attr:`allocations` counts the buffers ever allocated, by all instances
    (what the tests count).
    """

    allocations: ClassVar[int] = 0

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}
        self._readers: dict[int, Any] = {}    # graph mode: id(variable) -> _ChunkReader

    @property
    def nbytes(self) -> int:
        """The bytes the buffers take."""
        return sum(b.nbytes for b in self._buffers.values())

    def _buffer(self, key: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray:
        buf = self._buffers.get(key)
        if buf is None or buf.shape != shape or buf.dtype != np.dtype(dtype):
            self._buffers.pop(key, None)
            buf = self._buffers[key] = aligned_empty(shape, dtype)
            HostBuffers.allocations += 1
            _register(buf)
        else:
            _wait_returned(buf)
        return buf

    def adopt(self, key: str, array: Any) -> np.ndarray:
        """Use `array` as the buffer of `key` (copied into an aligned one if it cannot be)."""
        if isinstance(array, np.ndarray) and _is_aligned(array) and array.dtype != object:
            self._buffers[key] = array
            _register(array)
            return array
        value = np.asarray(array)
        buf = self._buffer(key, value.shape, value.dtype)
        np.copyto(buf, value)
        return buf

    def prepare(self, variables: Mapping[str, Any] | Sequence[Any]) -> None:
        """Graph mode: build the ops that fetch the variables by pieces (do it before the
        graph is finalized; without them a variable is fetched whole)."""
        for var in (variables.values() if isinstance(variables, Mapping) else variables):
            var = as_tf_variable(var)
            if id(var) in self._readers or isinstance(var, tf.distribute.DistributedValues):
                continue
            shape = var.shape
            if shape.rank is None or shape.rank == 0 or not shape.is_fully_defined():
                continue
            row_bytes = int(np.prod(shape.as_list()[1:], dtype=np.int64)) * var.dtype.size
            if shape[0] * row_bytes <= CHUNK_BYTES or var.graph.finalized:
                continue
            self._readers[id(var)] = _ChunkReader(var, max(1, CHUNK_BYTES // max(row_bytes, 1)))

    def copy(self, variables: Mapping[str, Any] | Sequence[Any],
             session: Any = None) -> list[np.ndarray]:
        """The values of `variables` now, in their order, in the buffers.

        Args:
            variables: ``{key: variable}``, or a list (keyed by position).
            session: Graph mode: the session to read them with.  ``None`` in
                eager mode.
        """
        items = (list(variables.items()) if isinstance(variables, Mapping)
                 else [(str(i), v) for i, v in enumerate(variables)])
        if session is None:
            out = []
            for key, var in items:
                var = as_tf_variable(var)
                # a view of the tensor when it is on the host: no copy but this one
                value = np.asarray(var.value())
                buf = self._buffer(key, value.shape, value.dtype)
                np.copyto(buf, value)
                del value
                out.append(buf)
            return out
        return self._copy_graph(items, session)

    def _copy_graph(self, items: list[tuple[str, Any]], session: Any) -> list[np.ndarray]:
        out: list[np.ndarray | None] = [None] * len(items)
        batch: list[int] = []      # small variables, fetched together up to CHUNK_BYTES
        batch_bytes = 0

        def flush() -> None:
            nonlocal batch_bytes
            if batch:
                values = session.run([as_tf_variable(items[i][1]) for i in batch])
                for i, value in zip(batch, values):
                    value = np.asarray(value)
                    buf = self._buffer(items[i][0], value.shape, value.dtype)
                    np.copyto(buf, value)
                    out[i] = buf
                batch.clear()
                batch_bytes = 0

        for i, (key, var) in enumerate(items):
            var = as_tf_variable(var)
            reader = self._readers.get(id(var))
            if reader is None:
                shape = var.shape
                size = (int(np.prod(shape.as_list(), dtype=np.int64)) * var.dtype.size
                        if shape.is_fully_defined() else CHUNK_BYTES)
                if batch_bytes + size > CHUNK_BYTES:
                    flush()
                batch.append(i)
                batch_bytes += size
                continue
            buf = self._buffer(key, tuple(var.shape.as_list()), var.dtype.as_numpy_dtype)
            reader.read_into(buf, session)
            out[i] = buf
        flush()
        return [b for b in out if b is not None]

    @staticmethod
    def assign(variables: Sequence[Any], arrays: Sequence[np.ndarray],
               session: Any = None) -> None:
        """Assign `arrays` to `variables`, one variable at a time.

        Eager mode writes a large variable in place by pieces of about
        :data:`CHUNK_BYTES` (a whole assignment would allocate a new tensor
        next to the old one); graph mode feeds each array (aligned: not
        copied) to the variable's initializer.
        """
        if len(variables) != len(arrays):
            raise ValueError(f'{len(arrays)} values given for {len(variables)} variables')
        if session is not None or not tf.executing_eagerly():
            for var, array in zip(variables, arrays):
                assign_variables([var], [array], session=session)
            return
        for var, array in zip(variables, arrays):
            tf_var = as_tf_variable(var)
            array = np.asarray(array, dtype=tf_var.dtype.as_numpy_dtype)
            rows = _chunk_rows(array)
            if rows is None or isinstance(tf_var, tf.distribute.DistributedValues):
                tf_var.assign(array)
                continue
            for begin in range(0, array.shape[0], rows):
                end = min(array.shape[0], begin + rows)
                tf.raw_ops.ResourceStridedSliceAssign(
                    ref=tf_var.handle, begin=[begin], end=[end], strides=[1],
                    value=array[begin:end])


def _chunk_rows(array: np.ndarray) -> int | None:
    """How many rows of `array` make a piece of about CHUNK_BYTES (None: write it whole)."""
    if array.ndim == 0 or array.nbytes <= CHUNK_BYTES or array.shape[0] < 2:
        return None
    row_bytes = max(1, array.nbytes // array.shape[0])
    return max(1, CHUNK_BYTES // row_bytes)


class _ChunkReader:
    """Graph mode: the ops that fetch rows ``[begin, end)`` of a variable."""

    def __init__(self, var: Any, rows: int):
        v1 = tf.compat.v1
        with var.graph.as_default(), var.graph.name_scope('tfsnippet_host_copy/'):
            self.begin = v1.placeholder(tf.int32, [1])
            self.end = v1.placeholder(tf.int32, [1])
            self.piece = tf.strided_slice(var, self.begin, self.end, [1])
        self.rows = rows

    def read_into(self, buf: np.ndarray, session: Any) -> None:
        for begin in range(0, buf.shape[0], self.rows):
            end = min(buf.shape[0], begin + self.rows)
            np.copyto(buf[begin:end],
                      session.run(self.piece, feed_dict={self.begin: [begin], self.end: [end]}))


class _BundleGraph:
    """A private graph and session that run ``SaveV2`` on fed numpy arrays."""

    def __init__(self, dtypes: tuple[tf.DType, ...]):
        v1 = tf.compat.v1
        self.graph = tf.Graph()
        with self.graph.as_default(), tf.device('/cpu:0'):
            self.prefix = v1.placeholder(tf.string, [])
            self.names = v1.placeholder(tf.string, [len(dtypes)])
            self.slices = v1.placeholder(tf.string, [len(dtypes)])
            self.tensors = [v1.placeholder(dtype) for dtype in dtypes]
            self.op = tf.raw_ops.SaveV2(prefix=self.prefix, tensor_names=self.names,
                                        shape_and_slices=self.slices, tensors=self.tensors)
        self.graph.finalize()
        self.session = v1.Session(graph=self.graph,
                                  config=v1.ConfigProto(device_count={'GPU': 0}))

    def write(self, prefix: str, names: Sequence[str], arrays: Sequence[np.ndarray]) -> None:
        feed: dict[Any, Any] = dict(zip(self.tensors, arrays))
        feed[self.prefix] = prefix
        feed[self.names] = list(names)
        feed[self.slices] = [''] * len(names)
        self.session.run(self.op, feed_dict=feed)


class _BundleWriters:
    """One :class:`_BundleGraph` per list of dtypes, made on first use."""

    def __init__(self) -> None:
        self._graphs: dict[tuple[tf.DType, ...], _BundleGraph] = {}
        self._lock = threading.Lock()

    def write(self, prefix: str, names: Sequence[str], arrays: Sequence[np.ndarray]) -> None:
        dtypes = tuple(tf.as_dtype(a.dtype) if a.dtype != object else tf.string for a in arrays)
        with self._lock:
            graph = self._graphs.get(dtypes)
            if graph is None:
                graph = self._graphs[dtypes] = _BundleGraph(dtypes)
            graph.write(prefix, names, arrays)



_default_writers = _BundleWriters()


def write_bundle(prefix: str, names: Sequence[str], arrays: Sequence[np.ndarray]) -> None:
    """Write numpy arrays as the TensorFlow checkpoint bundle ``<prefix>.index/.data-*``.

    The files are those ``tf.raw_ops.SaveV2`` (and a graph-mode
    ``tf.compat.v1.train.Saver`` of the same keys) writes: byte for byte
    the same for the same keys and values, read by ``tf.train.list_variables``,
    ``tf.train.load_variable`` and ``RestoreV2``.  It runs ``SaveV2`` in a
    private graph and session on the CPU, so it works in any thread, in
    eager and in graph mode, and touches no variable.

    Args:
        prefix: The path prefix of the files.
        names: The key of each array.
        arrays: Numpy arrays.
    """
    if len(names) != len(arrays):
        raise ValueError(f'`names` and `arrays` must have the same length, got {len(names)} '
                         f'and {len(arrays)}')
    _default_writers.write(prefix, names, arrays)


_malloc_trim: Any = None


def _trim_heap() -> None:
    """Give the C heap's free memory back to the system (glibc only; else nothing).

    Each save's thread gets a malloc arena of its own, where the bundle
    writer's buffers stay once freed: without this, every new arena would
    keep several MiB of RSS.
    """
    global _malloc_trim
    if _malloc_trim is None:
        _malloc_trim = False
        try:
            import ctypes
            import ctypes.util
            name = ctypes.util.find_library('c')
            if name:
                _malloc_trim = getattr(ctypes.CDLL(name), 'malloc_trim', False)
        except (OSError, AttributeError):   # not glibc
            _malloc_trim = False
    if _malloc_trim:
        _malloc_trim(0)


class AsyncCheckpointWriter:
    """Saves checkpoints through a store in a background thread, one at a time.

    The thread that saves calls :meth:`reserve` (which waits for the save in
    flight and raises its error, if it failed), takes its copies, then
    :meth:`submit` with a ``write`` callable that fills a directory from
    them.  :meth:`wait` waits for the save in flight.  Each save runs in its
    own (non-daemon) thread, so an interpreter that exits also waits for it.

    Args:
        store: The store that lays the checkpoints out.
    """

    def __init__(self, store: CheckpointStore | ObjectCheckpointStore):
        self._store = store
        self._thread: threading.Thread | None = None
        self._error: CheckpointWriteError | None = None
        self._blocked_since: float | None = None
        self.stats = AsyncSaveStats()

    @property
    def store(self) -> CheckpointStore | ObjectCheckpointStore:
        """The store the checkpoints are saved through."""
        return self._store

    @property
    def busy(self) -> bool:
        """Whether a save is being written now."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def failed(self) -> bool:
        """Whether a save failed and its error has not been raised yet (cheap to check)."""
        return self._error is not None

    def reserve(self) -> None:
        """Begin a save: wait for the one in flight (counted as back-pressure).

        Raises:
            CheckpointWriteError: The previous save failed (raised once).
        """
        self._blocked_since = time.perf_counter()
        thread = self._thread
        if thread is not None:
            if thread.is_alive():
                thread.join()
                self.stats.waits += 1
                self.stats.wait_seconds += time.perf_counter() - self._blocked_since
            else:
                thread.join()
            self._thread = None
        self.raise_error()

    def submit(self, step: int, write: Callable[[str], Any], copy_seconds: float = 0.,
               best: Mapping[str, Any] | None = None,
               release: Callable[[], Any] | None = None) -> str:
        """Start writing the checkpoint of `step` with `write`; return the path it will have.

        Call :meth:`reserve` first.  `copy_seconds` is how long the caller
        took to copy the state (for :attr:`stats`); `best` pins the
        checkpoint as the best one once it is written (see
        :meth:`~.store.CheckpointStore.save`); `release` is called when the
        save ends, written or failed (e.g. :meth:`FrozenState.release`).
        """
        if self._thread is not None:
            raise RuntimeError('`reserve()` must be called before `submit()`: a save is in '
                               'flight')
        thread = threading.Thread(target=self._run, args=(step, write, best, release),
                                  name=f'tfsnippet-checkpoint-{step}')
        self._thread = thread
        thread.start()
        stats = self.stats
        stats.saves += 1
        stats.copy_seconds += copy_seconds
        if self._blocked_since is not None:
            blocked = time.perf_counter() - self._blocked_since
            stats.blocked_seconds += blocked
            stats.max_blocked_seconds = max(stats.max_blocked_seconds, blocked)
            self._blocked_since = None
        return self._store.path_of(step)

    def _run(self, step: int, write: Callable[[str], Any], best: Mapping[str, Any] | None,
             release: Callable[[], Any] | None) -> None:
        start = time.perf_counter()
        try:
            self._store.save(step, write, best=best)
        except BaseException as e:
            error = CheckpointWriteError(
                f'The asynchronous save of the checkpoint of step {step} into '
                f'{self._store.save_dir!r} failed: {type(e).__name__}: {e}; the earlier '
                f'checkpoints are intact', step, self._store.save_dir)
            error.__cause__ = e
            self.stats.failed += 1
            self._error = error
        else:
            self.stats.written += 1
        finally:
            self.stats.write_seconds += time.perf_counter() - start
            if release is not None:
                release()
            _trim_heap()

    def raise_error(self) -> None:
        """Raise the error of a failed save, once.

        Raises:
            CheckpointWriteError: A save failed since the last call.
        """
        error, self._error = self._error, None
        if error is not None:
            raise error

    def wait(self, raise_error: bool = True) -> None:
        """Wait until the save in flight, if any, is written.

        Raises:
            CheckpointWriteError: It failed (or an earlier one did, not
                raised yet); not with ``raise_error=False``, which leaves
                the error for later.
        """
        thread = self._thread
        if thread is not None:
            thread.join()
            self._thread = None
        if raise_error:
            self.raise_error()
