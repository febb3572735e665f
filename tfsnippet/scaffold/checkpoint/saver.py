"""What a checkpoint holds, variables and Python state, and how it is read back.

A checkpoint is a directory ``<save_dir>/<filename>-<step>/`` holding

* ``variables.index`` / ``variables.data-*``: the variables, in TensorFlow's
  checkpoint format (``tf.train.list_variables`` reads them, keyed by the
  names this saver gives them);
* ``state.npz``: the Python state of the loop and of the registered
  objects, as data only (JSON and numpy arrays, see :mod:`.state_format`):
  reading it runs no code.  Checkpoints of earlier versions hold a pickled
  ``state.pkl`` instead, read only when trusted;
* ``loop/`` (only when the loop has such files): files the loop writes
  itself, in TensorFlow's checkpoint format, e.g. the state of the
  ``tf.data`` iterators of its step loops (see
  :mod:`tfsnippet.scaffold.loop.tfdata`), named by the loop's state.

Where the directories go, the index ``checkpoint_index.json`` that lists
them oldest first, retention and the crash-safe, durable way they are
written are the business of :class:`~.store.CheckpointStore`: a process
killed at any instant, or an OS crash after a save returned, leaves the
newest complete checkpoint for the next start.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import tensorflow as tf

from ...storage import Location, is_url
from ...tfops.session import get_default_session_or_error
from ...tfops.tf_vars import as_tf_variable, is_variable, normalize_variables, variable_name
from ...tfops.var_io import assign_variables
from ...utils.misc import warn_user
from ...utils.validation import check_bool
from . import state_format
from .io import AsyncCheckpointWriter, AsyncSaveStats, HostBuffers, freeze_state, write_bundle
from .matching import check_restore_match
from .object_store import ObjectCheckpointStore, open_store
from .sources import VARS_PREFIX, BundleSource, tfsnippet_variables
from .state_format import CheckpointError, UntrustedCheckpointError
from .store import CheckpointStore, check_step

__all__ = ['CheckpointSavableObject', 'CheckpointSaver', 'CheckpointError', 'LOOP_STATE_KEY']

STATE_FILE = state_format.STATE_FILE
#: Where the loop's state is in a checkpoint's objects: the key of the format
#: read since 0.3 (kept so that every checkpoint written so far still resumes).
LOOP_STATE_KEY = '$$train_loop'
#: The folder of a checkpoint that holds the files the loop writes itself.
LOOP_FILES_DIR = 'loop'


class CheckpointSavableObject:
    """A Python object whose state is saved in checkpoints.

    Subclasses return their state from :meth:`get_state` and take it back
    in :meth:`set_state`.  The state is a dict of **plain data**: ``None``,
    ``bool``, ``int``, ``float``, ``str``, lists, tuples, dicts with ``str``
    keys, numpy arrays and numpy scalars (not of ``object`` dtype), nested
    in any way; it is saved as JSON and ``.npz`` (see
    :mod:`~tfsnippet.scaffold.checkpoint.state_format`), never as code, and
    :meth:`set_state` receives the same types and values back.  A set,
    bytes, a subclass of these types (an ``OrderedDict``, an enum) or any
    other object is refused when the checkpoint is saved, by a
    :class:`TypeError` that names the object's key and where in its state
    the value is.
    Arrays are copied when the checkpoint is taken, also for asynchronous
    saves.
    """

    def get_state(self) -> dict[str, Any]:
        """Return the state to save, as a dict of plain data (see the class)."""
        raise NotImplementedError()

    def set_state(self, state: dict[str, Any]) -> None:
        """Restore a state returned earlier by :meth:`get_state`."""
        raise NotImplementedError()


def _is_trackable_container(obj: Any) -> bool:
    """A Keras model/layer/optimizer or ``tf.Module``: anything with ``.variables``."""
    return (isinstance(obj, tf.Module) or
            (hasattr(obj, 'variables') and not isinstance(obj, (str, bytes, Mapping)) and
             type(obj).__module__.split('.')[0] in ('keras', 'tensorflow', 'tf_keras')))


def check_checkpoint_objects(objects: Mapping[str, Any] | None, arg_name: str,
                             allow_reserved: bool = False) -> dict[str, Any]:
    """Check a ``{name: object}`` dict of things to save; return a copy.

    Each object must be a variable, a TF trackable with ``.variables`` (a
    Keras model, layer or optimizer, a ``tf.Module``) or a
    :class:`CheckpointSavableObject`.
    """
    if objects is None:
        return {}
    if not isinstance(objects, Mapping):
        raise TypeError(f'`{arg_name}` must be a dict {{name: object}}, got {objects!r}')
    out = {}
    for key, obj in objects.items():
        if not isinstance(key, str) or not key or (key.startswith('$$') and not allow_reserved):
            raise ValueError(
                f'`{arg_name}` keys must be non-empty str not starting with "$$", got {key!r}')
        if not (isinstance(obj, CheckpointSavableObject) or is_variable(obj) or
                _is_trackable_container(obj)):
            raise TypeError(
                f'`{arg_name}[{key!r}]` must be a variable, a TF trackable with '
                f'variables (Keras model, layer or optimizer, tf.Module) or a '
                f'CheckpointSavableObject, got {obj!r}')
        out[key] = obj
    return out


class _SavedValues(Mapping[int, Any]):
    """``{id(tf.Variable): numpy array}`` read from a checkpoint's variables at each look-up."""

    def __init__(self, source: BundleSource, keys: dict[int, str]):
        self._source = source
        self._keys = keys
        self.local_copy: contextlib.ExitStack | None = None   # what holds a download

    def hold(self, stack: contextlib.ExitStack) -> None:
        """Keep the download in `stack` while these values may be read (closed when
        this object is collected)."""
        self.local_copy = stack
        weakref.finalize(self, stack.close)

    def __getitem__(self, var_id: int) -> Any:
        return self._source.read(self._keys[var_id])

    def __iter__(self) -> Iterator[int]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


class CheckpointSaver:
    """Saves and restores variables plus the state of Python objects.

    Args:
        variables: A list or dict ``{name: variable}`` of graph variables,
            eager ``tf.Variable``\\ s or Keras variables (saved under their
            name: a list item under its Keras path or its name without
            ``:0``, made unique with a ``_1``, ``_2``... suffix).
        save_dir: The directory owned by this saver; created on first save.
        objects: ``{name: object}``.  A :class:`CheckpointSavableObject`
            has its ``get_state()`` saved; a Keras model, layer or
            optimizer or a ``tf.Module`` has all of its ``.variables`` saved
            under ``name/...`` (read anew at each save, so an optimizer's
            slots created after construction are included); a variable is
            saved under ``name``.
        filename: Checkpoints are named ``<filename>-<step>``.
        max_to_keep: Keep this many newest checkpoints (``None``: all).
        durable: Fsync what a save writes, so that a saved checkpoint
            survives an OS crash too (see :class:`~.store.CheckpointStore`).
        loop_state: A callable returning the training loop's state (a
            picklable dict), saved beside the objects' states; :meth:`restore`
            returns it under :data:`LOOP_STATE_KEY` without applying it (the
            loop's restorer does).
        loop_state_check: A callable that raises ``ValueError`` (naming the
            field) for a saved loop state the loop cannot take; a checkpoint
            it refuses is a :class:`CheckpointError` naming the checkpoint,
            raised before any variable is assigned (so :meth:`restore_latest`
            falls back to the one before, as past a damaged file).
        loop_files: A callable returning ``None`` (nothing to write) or a
            function that writes the loop's own files into a folder; called
            at each save before `loop_state` (so that the state can name what
            was written), the files go to the checkpoint's ``loop/`` folder.
        keep: Keep policies for the store (see :mod:`~.policies`).
        asynchronous: Write in the background (see :mod:`~.io`): :meth:`save`
            waits for the previous save still in flight (back-pressure),
            copies the variables into host memory and the objects' states,
            starts a background thread that writes the same files a
            synchronous save would, and returns the path the checkpoint
            will have once written.  :meth:`wait` waits for it; a failed
            background write raises
            :class:`~.io.CheckpointWriteError` from the next :meth:`save` or
            :meth:`wait`.  :attr:`async_stats` says what the saves cost.
        save_meta: Accepted for classic scripts and kept as :attr:`save_meta`;
            no meta graph is written (a script rebuilds its graph).
        strict: Refuse to restore a checkpoint that holds variables not
            among `variables`.  By default they are left out (the subset is
            restored, as by the classic saver and ``tf.compat.v1.train.Saver``);
            the loop's own resume is strict.  Variables missing from the
            checkpoint, or of another shape, are an error either way.

    Variables are read and written with the default session in graph mode
    (or the one passed as `session`), where the saver must be created
    before the graph is finalized.

    Raises:
        TypeError: An entry of `variables` or `objects` has the wrong type.
        ValueError: `max_to_keep` is not a positive int, `filename` is not
            a plain file name, or names clash.

    .. versionchanged:: 0.3
        The files are laid out by a :class:`~.store.CheckpointStore`: each
        save is fsynced, and a save killed while it prunes old checkpoints
        or replaces one of the same step no longer loses the newest one.
        ``save``, ``restore`` and ``restore_latest`` take ``session``;
        ``asynchronous`` saves.
    """

    def __init__(self, variables: Sequence[Any] | Mapping[str, Any] | None,
                 save_dir: str | Location,
                 objects: Mapping[str, Any] | None = None, filename: str = 'checkpoint.dat',
                 max_to_keep: int | None = None, durable: bool = True,
                 asynchronous: bool = False, save_meta: bool = True, strict: bool = False,
                 loop_state: Callable[[], Any] | None = None, keep: Any = None,
                 loop_files: Callable[[], Callable[[str], Any] | None] | None = None,
                 loop_state_check: Callable[[Any], Any] | None = None):
        asynchronous = check_bool(asynchronous, 'asynchronous')
        self._save_meta = check_bool(save_meta, 'save_meta')
        self._strict = check_bool(strict, 'strict')
        for name, hook in (('loop_state', loop_state), ('loop_files', loop_files),
                           ('loop_state_check', loop_state_check)):
            if hook is not None and not callable(hook):
                raise TypeError(f'`{name}` must be a callable or None, got {hook!r}')
        self._loop_state, self._loop_files = loop_state, loop_files
        self._loop_state_check = loop_state_check
        self._staging_ready = False
        self._kept_loop_files: dict[str, str] = {}   # checkpoint URL -> its loop files
        self._variables = normalize_variables(variables, 'variables')
        self._objects = check_checkpoint_objects(objects, 'objects', allow_reserved=True)
        self._store = open_store(save_dir, filename=filename, max_to_keep=max_to_keep,
                                 durable=durable, keep=keep)
        self._graph_mode = not tf.executing_eagerly()
        self._graph = tf.compat.v1.get_default_graph() if self._graph_mode else None
        self._saver: Any = None
        self._saver_key: tuple[tuple[str, int], ...] | None = None
        self._labels: dict[str, str] = {}
        self._writer = AsyncCheckpointWriter(self._store) if asynchronous else None
        self._buffers = HostBuffers()
        if self._graph_mode:
            # graph savers add ops: build them now, before the graph is finalized
            var_dict = self._variable_dict()
            self._get_saver(var_dict)
            if asynchronous:
                self._buffers.prepare(var_dict)

    # ------------------------------------------------------------ properties
    @property
    def save_meta(self) -> bool:
        """The classic ``save_meta`` argument (no meta graph is written)."""
        return self._save_meta

    @property
    def saver(self) -> Any:
        """Graph mode: the ``tf.compat.v1.train.Saver`` that reads and writes the
        variables (``None`` in eager mode or without variables).  Saving through
        it directly writes a TF checkpoint, not one of this saver's directories."""
        return self._saver

    @property
    def strict(self) -> bool:
        """Whether a checkpoint with variables not among `variables` is refused."""
        return self._strict

    @property
    def save_dir(self) -> str:
        """The absolute path (or the URL) of the checkpoint directory."""
        return self._store.save_dir

    @property
    def filename(self) -> str:
        """The name prefix of the checkpoints."""
        return self._store.filename

    @property
    def max_to_keep(self) -> int | None:
        """How many checkpoints are kept (``None``: all)."""
        return self._store.max_to_keep

    @property
    def store(self) -> CheckpointStore | ObjectCheckpointStore:
        """The :class:`~.store.CheckpointStore` that lays the checkpoints out on disk
        (an :class:`~.object_store.ObjectCheckpointStore` for a URL)."""
        return self._store

    @property
    def asynchronous(self) -> bool:
        """Whether checkpoints are written in the background."""
        return self._writer is not None

    @property
    def async_stats(self) -> AsyncSaveStats | None:
        """What the asynchronous saves cost so far (``None`` for a synchronous saver)."""
        return None if self._writer is None else self._writer.stats

    @property
    def async_failed(self) -> bool:
        """Whether a background save failed and its error waits to be raised (cheap)."""
        return self._writer is not None and self._writer.failed

    def wait(self) -> None:
        """Wait for the asynchronous save in flight, if any (nothing to do if synchronous).

        Raises:
            ~tfsnippet.scaffold.checkpoint.io.CheckpointWriteError: It failed,
                or an earlier save did whose error was not raised yet.
        """
        if self._writer is not None:
            self._writer.wait()

    # ------------------------------------------------------------ variables
    def _variable_dict(self) -> dict[str, tf.Variable]:
        """``{checkpoint key: tf.Variable}``, each variable once.

        Variables of a dict are keyed by the dict's keys and ``tf.Variable``\\ s
        of a list by name.  Keras variables of a list and the variables of a
        model/layer/optimizer/module are keyed by position (``variables/3``,
        ``model/3``): Keras names them by creation order in the process
        (``dense_1`` for a model built twice), so their names would not match
        between a run and its resumption in the same process (a notebook).
        :attr:`variable_labels` maps each key to the variable's name.
        """
        out: dict[str, tf.Variable] = {}
        labels: dict[str, str] = {}
        seen: set[int] = set()

        def add(key: str, var: Any, unique: bool) -> None:
            tf_var = as_tf_variable(var)
            if id(tf_var) in seen:
                return
            if key in out:
                if not unique:
                    raise ValueError(f'Two variables are saved under the same name {key!r}')
                base, i = key, 1
                while f'{base}_{i}' in out:
                    i += 1
                key = f'{base}_{i}'
            seen.add(id(tf_var))
            out[key] = tf_var
            labels[key] = variable_name(var)

        if isinstance(self._variables, dict):
            for name, var in self._variables.items():
                add(name, var, unique=False)
        else:
            for i, var in enumerate(self._variables):
                by_name = self._graph_mode or isinstance(var, tf.Variable)
                add(variable_name(var) if by_name else f'variables/{i}', var, unique=True)
        for key, obj in self._objects.items():
            if isinstance(obj, CheckpointSavableObject):
                continue
            if is_variable(obj):
                add(key, obj, unique=False)
            else:
                for i, var in enumerate(obj.variables):
                    add(f'{key}/{i}', var, unique=True)
        self._labels = labels
        return out

    @property
    def variable_labels(self) -> dict[str, str]:
        """``{checkpoint key: variable name}`` of the variables saved now."""
        self._variable_dict()
        return dict(self._labels)

    def _get_saver(self, var_dict: dict[str, tf.Variable]) -> Any:
        """Graph mode: the ``tf.compat.v1.train.Saver`` of `var_dict`, built once."""
        key = tuple((name, id(v)) for name, v in var_dict.items())
        if self._saver is None or key != self._saver_key:
            if self._saver is not None:
                raise ValueError(
                    'The variables to save changed after the saver was created in '
                    'graph mode; create the saver after all variables')
            self._saver = tf.compat.v1.train.Saver(
                var_list=var_dict, max_to_keep=None) if var_dict else None
            self._saver_key = key
        return self._saver

    def _write_variables(self, var_dict: dict[str, tf.Variable], prefix: str,
                         session: Any) -> None:
        if not var_dict:
            return
        if self._graph_mode:
            self._get_saver(var_dict).save(session, prefix, write_meta_graph=False,
                                           write_state=False)
            return
        names = list(var_dict)
        tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[''] * len(names),
                          tensors=[var_dict[n].read_value() for n in names])

    def _read_variables(self, var_dict: dict[str, tf.Variable], prefix: str,
                        session: Any) -> None:
        if not var_dict:
            return
        if self._graph_mode:
            self._get_saver(var_dict).restore(session, prefix)
            # the saver restores the first copy of a distributed variable (a
            # MirroredVariable's): give every copy that value
            mirrored = [v for v in var_dict.values()
                        if isinstance(v, tf.distribute.DistributedValues) and len(v.values) > 1]
            if mirrored:
                values = session.run([v.values[0] for v in mirrored])
                assign_variables(mirrored, values, session=session)
            return
        names = list(var_dict)
        values = tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=names,
                                      shape_and_slices=[''] * len(names),
                                      dtypes=[var_dict[n].dtype for n in names])
        for name, value in zip(names, values):
            var_dict[name].assign(value)

    def _session(self, session: Any, var_dict: dict[str, tf.Variable]) -> Any:
        """The session to read or assign `var_dict` with.

        Graph mode: `session`, else the default one (needed only when there
        are variables).  Eager mode: ``None``.
        """
        if not self._graph_mode:
            if session is not None:
                raise ValueError(
                    f'`session` must be None in eager mode (there is no session), '
                    f'got {session!r}')
            return None
        if session is None:
            return get_default_session_or_error() if var_dict else None
        if not isinstance(session, (tf.compat.v1.Session, tf.compat.v1.InteractiveSession)):
            raise TypeError(
                f'`session` must be a tf.compat.v1.Session or None, got {session!r}')
        if session.graph is not self._graph:
            raise ValueError(
                f'`session` must run the graph this saver was created in, but '
                f'{session!r} runs another graph')
        return session

    # ------------------------------------------------------------ listing
    def checkpoints(self) -> list[str]:
        """The paths of the kept checkpoints, oldest first."""
        return self._store.checkpoints()

    def latest_checkpoint(self) -> str | None:
        """The path of the newest checkpoint, or ``None``."""
        return self._store.latest()

    def remove_stale_temporaries(self) -> None:
        """Clean up after saves that were killed half-way (:meth:`CheckpointStore.recover`).

        Call it when a run starts, before restoring: it removes unfinished
        and half-deleted directories, puts back a checkpoint that a killed
        save of the same step had moved aside, and updates the index.
        """
        self._store.recover()

    # ------------------------------------------------------------ save
    def save(self, global_step: int, session: Any = None,
             best: Mapping[str, Any] | None = None) -> str:
        """Write a checkpoint named ``<filename>-<global_step>``; return its path.

        The states of the objects are taken at this moment.  A checkpoint
        of the same name is replaced.  If writing fails, the error
        propagates and the earlier checkpoints are left untouched.

        Args:
            global_step: The step number (an int >= 0).
            session: Graph mode: the session to read the variables with
                (default: the default session).  Must be ``None`` in eager
                mode.
            best: Pin the checkpoint as the best one, recording this
                JSON-serializable dict with it (see
                :meth:`~.store.CheckpointStore.pin_best`).

        With ``asynchronous=True`` the variables and states are copied now,
        the files are written in the background, and the returned path is
        where the checkpoint will be once written (see the class).

        Raises:
            TypeError: `global_step` is not an int, or `session` not a session.
            ValueError: `global_step` is negative, or `session` is given in
                eager mode or runs another graph.
            ~tfsnippet.scaffold.checkpoint.io.CheckpointWriteError: Asynchronous
                saver: the previous save failed in the background (this one
                is not taken).
        """
        step = check_step(global_step, 'global_step')
        var_dict = self._variable_dict()
        session = self._session(session, var_dict)
        labels = dict(self._labels)
        if self._writer is not None:
            return self._save_async(step, var_dict, labels, session, self._writer, best)
        staged = self._stage_loop_files()
        try:
            # checked and encoded before any file is written: a state that is not
            # plain data leaves nothing behind
            state = self._encode_states(step, labels)

            def write(directory: str) -> None:
                self._write_variables(var_dict, os.path.join(directory, VARS_PREFIX), session)
                if staged is not None:
                    os.rename(staged, os.path.join(directory, LOOP_FILES_DIR))
                state_format.write_state_file(directory, state)

            return self._store.save(step, write, best=best)
        finally:
            _remove_staged(staged)

    def _stage_loop_files(self) -> str | None:
        """Write the loop's files now into a temporary folder of `save_dir` (removed
        by :meth:`remove_stale_temporaries` if the process dies); its path, or
        ``None`` when the loop has none."""
        write = self._loop_files() if self._loop_files is not None else None
        if write is None:
            return None
        if not self._staging_ready:
            # the store's first save cleans up its temporaries: before this one exists
            self._store.recover()
            self._staging_ready = True
        staged = self._store.make_staging(LOOP_FILES_DIR)   # where the store says
        try:
            written = write(staged)
        except BaseException:
            _remove_staged(staged)
            raise
        if not written:
            _remove_staged(staged)
            return None
        return staged

    def _states(self) -> dict[str, Any]:
        states = {key: obj.get_state() for key, obj in self._objects.items()
                  if isinstance(obj, CheckpointSavableObject)}
        if self._loop_state is not None:
            states[LOOP_STATE_KEY] = {'loop': self._loop_state()}
        return states

    def saved_values(self, path: str) -> Mapping[int, Any]:
        """The values that the checkpoint at `path` holds for the registered
        variables, as ``{id(tf.Variable): numpy array}``; nothing is assigned.

        Each value is read from the files when it is looked up (and not
        kept), so an export that takes them one variable at a time holds one
        of them at a time, not a host copy of all the parameters.

        Raises:
            CheckpointError: The checkpoint's variables cannot be read, or
                one of the registered variables is not among them (at the
                call, or at a look-up if the files break meanwhile).
        """
        var_dict = self._variable_dict()
        stack = contextlib.ExitStack()
        try:
            local = stack.enter_context(self._store.local_copy(path))   # downloaded from a URL
            source = tfsnippet_variables(local)   # the reader warm start has too
            missing = sorted(key for key in var_dict if key not in source.shapes)
            if missing:
                raise CheckpointError(f'Cannot read the variables of checkpoint {path!r}: '
                                      f'{KeyError(f"{missing} not found in the checkpoint")}')
        except BaseException:
            stack.close()
            raise
        values = _SavedValues(source, {id(var): key for key, var in var_dict.items()})
        values.hold(stack)
        return values

    def _save_async(self, step: int, var_dict: dict[str, tf.Variable], labels: dict[str, str],
                    session: Any, writer: AsyncCheckpointWriter,
                    best: Mapping[str, Any] | None) -> str:
        writer.reserve()            # back-pressure: the buffers are the previous save's
        start = time.perf_counter()
        staged = self._stage_loop_files()   # now: the loop moves on meanwhile
        try:
            # encoded now: later changes of the objects must not reach this checkpoint (the
            # arrays of host buffers, an early-stopping snapshot, are lent instead of copied)
            state = freeze_state(self._encode_states(step, labels))
        except BaseException:
            _remove_staged(staged)
            raise
        try:
            if self._graph_mode:     # the order a graph-mode `Saver` writes them in
                var_dict = {key: var_dict[key] for key in sorted(var_dict)}
            names = list(var_dict)
            arrays = self._buffers.copy(var_dict, session)
        except BaseException:
            state.release()
            _remove_staged(staged)
            raise

        def write(directory: str) -> None:
            if names:
                write_bundle(os.path.join(directory, VARS_PREFIX), names, arrays)
            if staged is not None:
                os.rename(staged, os.path.join(directory, LOOP_FILES_DIR))
            state_format.write_state_file(directory, state.encoded)

        def release() -> None:
            state.release()
            _remove_staged(staged)

        return writer.submit(step, write, copy_seconds=time.perf_counter() - start,
                             best=best, release=release)

    def _encode_states(self, step: int, labels: dict[str, str]) -> state_format.EncodedState:
        """The objects' states taken now, checked to be plain data and encoded."""
        return state_format.encode_state(step, labels, self._states())

    def rehearse(self, session: Any = None) -> None:
        """Read what :meth:`save` would write (variables and object states), write nothing.

        What a worker that is not the chief does under a ``tf.distribute``
        strategy when the chief saves: reading a variable may be a
        collective (a sync-on-read variable), which every worker must join.
        """
        var_dict = self._variable_dict()
        session = self._session(session, var_dict)
        self._states()
        if not var_dict:
            return
        if self._graph_mode:
            session.run(list(var_dict.values()))
        else:
            for var in var_dict.values():
                var.read_value()

    # ------------------------------------------------------------ restore
    def restore(self, path: str, session: Any = None,
                trust_pickle: bool = False) -> dict[str, Any]:
        """Restore the checkpoint at `path` and return the saved object states.

        Every registered variable must be in the checkpoint with the same
        shape, and (with `strict`) every variable of the checkpoint must be
        registered; otherwise nothing is changed and a :class:`ValueError`
        names them.

        Args:
            path: The checkpoint's directory.
            session: Graph mode: the session to assign the variables with
                (default: the default session).  Must be ``None`` in eager
                mode.
            trust_pickle: Read a legacy checkpoint (a pickled ``state.pkl``
                of an earlier tfsnippet), which may run code when loaded.
                ``TFSNIPPET_TRUST_PICKLE=1`` says the same.

        Raises:
            FileNotFoundError: `path` is not a checkpoint.
            ~tfsnippet.scaffold.checkpoint.UntrustedCheckpointError:
                `path` is a legacy checkpoint and nothing says it is trusted
                (nothing is read).
            CheckpointError: The checkpoint's files cannot be read.
            ValueError: The checkpoint's variables do not match, or
                `session` is given in eager mode or runs another graph.
            TypeError: `session` is not a session.
            KeyError: A registered object has no state in the checkpoint.
        """
        self._session(session, {})               # check it before reading anything
        if self._writer is not None:
            self._writer.wait(raise_error=False)  # not while a save may prune it
        trust_pickle = check_bool(trust_pickle, 'trust_pickle')
        with self._store.local_copy(path) as local:   # a URL's checkpoint is downloaded
            if is_url(path):
                self._keep_loop_files(os.fspath(path), local)
            return self._restore_from(local, os.fspath(path) if is_url(path) else local,
                                      session, trust_pickle)

    def _keep_loop_files(self, path: str, local: str) -> None:
        """Keep a copy of the loop's files of a downloaded checkpoint (the iterators of
        ``tf.data``), read after the download is gone; removed with this saver."""
        source = loop_files_dir(local)
        if not os.path.isdir(source):
            return
        kept = tempfile.mkdtemp(prefix='tfsnippet-loop-files-')
        weakref.finalize(self, shutil.rmtree, kept, True)
        target = os.path.join(kept, LOOP_FILES_DIR)
        shutil.copytree(source, target)
        self._kept_loop_files[path] = target

    def loop_files_of(self, path: str) -> str:
        """The local folder of the loop's own files of the checkpoint at `path`
        (for a checkpoint on a bucket, the copy kept when it was restored)."""
        return self._kept_loop_files.get(os.fspath(path)) or loop_files_dir(path)

    def _restore_from(self, local: str, path: str, session: Any,
                      trust_pickle: bool) -> dict[str, Any]:
        """:meth:`restore` from the local folder `local` (`path`, in messages)."""
        saved = state_format.read_state(local, trust_pickle=trust_pickle)
        self._check_loop_state(path, saved['objects'].get(LOOP_STATE_KEY))
        var_dict = self._variable_dict()
        prefix = os.path.join(local, VARS_PREFIX)
        saved_shapes: dict[str, list[int]] = {}
        if saved.get('variables'):
            try:
                saved_shapes = dict(tf.train.list_variables(prefix))
            except Exception as e:
                raise CheckpointError(
                    f'Cannot read the variables of checkpoint {path!r}: {e}') from e
        if not self._strict:   # restore the subset that is registered
            saved_shapes = {k: v for k, v in saved_shapes.items() if k in var_dict}
        check_restore_match(path, var_dict, saved_shapes, self._labels,
                          saved.get('variables') or {})
        missing = [k for k, obj in self._objects.items()
                   if isinstance(obj, CheckpointSavableObject) and k not in saved['objects']]
        if missing:
            raise KeyError(f'Objects {missing} not found in the checkpoint: {path}')
        if var_dict:
            try:
                self._read_variables(var_dict, prefix, self._session(session, var_dict))
            except tf.errors.OpError as e:
                raise CheckpointError(
                    f'Cannot read the variables of checkpoint {path!r}: {e}') from e
        for key, obj in self._objects.items():
            if isinstance(obj, CheckpointSavableObject):
                obj.set_state(saved['objects'][key])
        return saved['objects']

    def _check_loop_state(self, path: str, saved: Any) -> None:
        """Refuse the checkpoint `path` if `loop_state_check` refuses its loop state
        (none at all: the restorer says so)."""
        try:
            if self._loop_state_check is not None and isinstance(saved, dict) and 'loop' in saved:
                self._loop_state_check(saved['loop'])
        except ValueError as e:
            raise CheckpointError(f'The checkpoint {path!r} holds a loop state that cannot be '
                                  f'loaded: {e}') from e

    def restore_latest(self, ignore_non_exist: bool = False, session: Any = None,
                       trust_pickle: bool = False) -> tuple[str, dict] | None:
        """Restore the newest readable checkpoint.

        A checkpoint that cannot be read is skipped with a warning and the
        one before it is tried.  A legacy checkpoint that is not trusted is
        not skipped: its :class:`UntrustedCheckpointError` propagates.

        Args:
            ignore_non_exist: Return ``None`` instead of raising when there
                is no checkpoint.
            session: Graph mode: the session to assign the variables with
                (default: the default session).  Must be ``None`` in eager
                mode.
            trust_pickle: Read legacy checkpoints (see :meth:`restore`).

        Returns:
            ``(path, object states)``, or ``None`` when there is no
            checkpoint and `ignore_non_exist` is set.

        Raises:
            FileNotFoundError: There is no (readable) checkpoint and
                `ignore_non_exist` is not set.
            ~tfsnippet.scaffold.checkpoint.UntrustedCheckpointError:
                The newest checkpoint is a legacy one that is not trusted.
            ValueError: The checkpoint's variables do not match, or
                `session` is given in eager mode or runs another graph.
            TypeError: `session` is not a session.
        """
        self._session(session, {})               # check it before reading anything
        paths = self.checkpoints()
        for path in reversed(paths):
            try:
                return path, self.restore(path, session=session, trust_pickle=trust_pickle)
            except UntrustedCheckpointError:
                raise   # the user decides: never passed over as if it were damaged
            except (CheckpointError, FileNotFoundError) as e:
                warn_user(f'Skipping a checkpoint that cannot be read: {e}', RuntimeWarning)
        if ignore_non_exist:
            return None
        raise FileNotFoundError(f'No checkpoint file is found in {self.save_dir!r}.')


def _remove_staged(staged: str | None) -> None:
    """Remove the loop's staged files if a save did not move them into its checkpoint."""
    if staged is not None and os.path.isdir(staged):
        shutil.rmtree(staged, ignore_errors=True)


def loop_files_dir(path: str) -> str:
    """The folder of the loop's own files in the checkpoint at `path`."""
    return os.path.join(path, LOOP_FILES_DIR)
