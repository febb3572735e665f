"""How a checkpoint's files get written: by a background writer, from host copies taken at the save.

An asynchronous save (``CheckpointSaver(..., asynchronous=True)``, which
``TrainLoop(checkpoint_async=True)`` uses) has two halves:

* in the thread that saves, :class:`HostBuffers` copies every variable into
  numpy arrays (eager: each variable read into a buffer allocated once;
  graph: one ``session.run`` of the variables) and the Python state is
  encoded (:mod:`.state_format`), so the checkpoint holds the state *at the save*;
* :class:`AsyncCheckpointWriter` then hands a ``write`` callable to the
  :class:`~.store.CheckpointStore` in a background thread: the variables go
  into the same TensorFlow bundle files a synchronous save writes
  (:func:`write_bundle`), then the store fsyncs them, renames the directory
  into place, moves the index and prunes, exactly as for a synchronous save.

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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

from .store import CheckpointStore

__all__ = ['AsyncCheckpointWriter', 'AsyncSaveStats', 'CheckpointWriteError', 'HostBuffers',
           'write_bundle']


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


class HostBuffers:
    """Copies of variables in host memory, taken in the thread that saves.

    Eager mode: each variable is read into a numpy buffer allocated on its
    first copy and reused afterwards (a new one when its shape or dtype
    changes).  Graph mode: one ``session.run`` of all the variables, whose
    results are fresh arrays.  The arrays of one copy stay valid until the
    next copy.
    """

    def __init__(self) -> None:
        self._buffers: dict[str, np.ndarray] = {}

    def copy(self, variables: Mapping[str, tf.Variable], session: Any = None) -> list[np.ndarray]:
        """The values of `variables` now, in their order.

        Args:
            variables: ``{checkpoint key: tf.Variable}``.
            session: Graph mode: the session to read them with.  ``None`` in
                eager mode.
        """
        if not variables:
            return []
        if session is not None:
            return [np.asarray(a) for a in session.run(list(variables.values()))]
        out = []
        for key, var in variables.items():
            value = np.asarray(var.value())   # a view of the tensor (on the CPU): no copy yet
            buf = self._buffers.get(key)
            if buf is None or buf.shape != value.shape or buf.dtype != value.dtype:
                buf = self._buffers[key] = np.empty_like(value)
            np.copyto(buf, value)
            out.append(buf)
        return out


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

    def __init__(self, store: CheckpointStore):
        self._store = store
        self._thread: threading.Thread | None = None
        self._error: CheckpointWriteError | None = None
        self._blocked_since: float | None = None
        self.stats = AsyncSaveStats()

    @property
    def store(self) -> CheckpointStore:
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
               best: Mapping[str, Any] | None = None) -> str:
        """Start writing the checkpoint of `step` with `write`; return the path it will have.

        Call :meth:`reserve` first.  `copy_seconds` is how long the caller
        took to copy the state (for :attr:`stats`); `best` pins the
        checkpoint as the best one once it is written (see
        :meth:`~.store.CheckpointStore.save`).
        """
        if self._thread is not None:
            raise RuntimeError('`reserve()` must be called before `submit()`: a save is in '
                               'flight')
        thread = threading.Thread(target=self._run, args=(step, write, best),
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

    def _run(self, step: int, write: Callable[[str], Any],
             best: Mapping[str, Any] | None) -> None:
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
