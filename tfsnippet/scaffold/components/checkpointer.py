"""The loop component that decides when checkpoints are saved and what is kept.

Where they go and what stays is the store's business (:mod:`..checkpoint.store`
with the keep policies of :mod:`..checkpoint.policies`); resuming is the
loop's (:mod:`..checkpoint.restore`); saving on preemption and exporting the
best weights are components of their own (:mod:`.preemption`, :mod:`.export`).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Callable

import tensorflow as tf

from ...storage import Location, is_url, resolve
from ...storage.retry import StoreOutageError
from ...utils.events import Every
from ...utils.misc import warn_user
from ...utils.validation import check_bool, check_positive_int, check_positive_number
from ..checkpoint.export import check_export_path
from ..checkpoint.io import AsyncSaveStats, CheckpointWriteError
from ..checkpoint.object_store import ObjectCheckpointStore, check_store_access, open_store
from ..checkpoint.policies import (KeepBest, KeepLatest, KeepPolicy, SaveAtEnd, SaveEvery,
                                   SavePolicy, check_keep_policies, check_save_policies,
                                   enters_best, rank_pins)
from ..checkpoint.saver import CheckpointSaver, check_checkpoint_objects
from ..checkpoint.state_format import has_state
from ..checkpoint.store import TMP_PREFIX, CheckpointStore
from ..event_keys import EventKeys
from ..metrics.monitor import Monitor, loop_monitor
from .base import LoopComponent
from .export import ExportBest, export_best_weights
from .suspend import SuspendableWrites
from .preemption import PREEMPTED_EXIT_CODE, Preemption, TrainingPreempted, check_signal

__all__ = ['Checkpointer', 'TrainingPreempted', 'PREEMPTED_EXIT_CODE']


class Checkpointer(LoopComponent, SuspendableWrites):
    """Saves the loop's checkpoints when its save policies say so; the loop resumes from them.

    Used by ``TrainLoop(checkpoint_dir=...)``; see
    :func:`~tfsnippet.scaffold.loop.build.build_components`.  The loop
    restores from the newest checkpoint when entered, before any component
    (:func:`~tfsnippet.scaffold.checkpoint.restore.restore_loop`; this
    component provides the saver), so add it before entering the loop.

    **Where** (`checkpoint_dir`): a local folder (its ``checkpoint/``
    subfolder holds the checkpoints, see :class:`~tfsnippet.scaffold.checkpoint.CheckpointStore`)
    or an object-store URL, ``s3://bucket/run1`` or ``gs://bucket/run1``
    (see :mod:`~tfsnippet.scaffold.checkpoint.object_store`): the store is
    picked by :func:`~tfsnippet.scaffold.checkpoint.object_store.open_store`.
    A URL nothing can serve is refused here; on entering the loop the chief
    writes and deletes a probe, so a missing bucket or refused credentials
    are a ``ValueError`` naming `checkpoint_dir`.

    **When** (`save`, a list of :mod:`save policies
    <tfsnippet.scaffold.checkpoint.policies>`): by default from the classic
    keywords, after every `epoch_freq` epochs (``SaveEvery(epochs=N)``),
    every `step_freq` steps (``SaveEvery(steps=N)``), at the end of the
    first step `secs` seconds after the last save (``SaveEvery(seconds=S)``),
    and when the loop is left normally (``SaveAtEnd()``: a re-run of a
    finished job redoes nothing).

    **What stays** (`keep`, a list of keep policies applied by the store):
    by default the `max_to_keep` newest (``KeepLatest``; all without it)
    and, with `keep_best`, the best (``KeepBest(k=1)``).  ``KeepBest(k=2,
    metric='valid_loss')`` keeps the two best; ``KeepEveryNth(n)`` the
    checkpoints of steps that are multiples of n.

    **Preemption** (`preemption_signals`, a shortcut for a
    :class:`~tfsnippet.scaffold.components.preemption.Preemption` that this
    component runs itself; ``TrainLoop`` adds one of its own instead):
    while the loop is entered (in the main thread), ``SIGTERM`` (what
    Kubernetes, SLURM and spot instances send before they kill a process)
    makes the loop save a checkpoint at the next step or epoch boundary,
    say so, and raise :class:`TrainingPreempted` (exit status 143); the
    next start resumes exactly there.  ``SIGINT`` (Ctrl+C) keeps raising
    ``KeyboardInterrupt`` unless it is listed.

    **The best checkpoints** (`keep_best`, or a ``KeepBest`` in `keep`):
    ``True`` watches the loop's
    validation metric in its direction, a metric name watches that metric
    (``'min'``/``'max'`` from its name, see :class:`~tfsnippet.Monitor`;
    NaN is never the best).  At the end of an epoch in which the metric
    improved (with ``KeepBest(k)``: in which its best value enters the k
    best), the checkpoint of that epoch (the scheduled one, or one
    saved for this) is pinned as the best: the index records it with the
    metric's name and value, it is kept beside the `max_to_keep` newest
    checkpoints, and the checkpoint pinned before becomes an ordinary one
    (removed when older than the `max_to_keep` newest).  Resuming still
    starts from the newest checkpoint, and takes the best value so far from
    the index, so the pin survives resumes; ``restore=False`` starts a new
    best.  The pinned checkpoint holds the state at the end of that epoch:
    validate after the step loop for the weights that were validated.

    **Export** (`export_best`, a shortcut for an
    :class:`~tfsnippet.scaffold.components.export.ExportBest` that this
    component runs itself): when the loop is left normally (not through
    an exception or a preemption), the pinned best weights are written for
    serving with :meth:`export_best`.

    **Asynchronous saves** (``asynchronous=True``, ``TrainLoop(checkpoint_async=True)``):
    a save blocks the loop only while it copies the variables into host
    memory (eager: each read into a buffer allocated once; graph: one
    ``session.run``) and takes the loop's and the objects' states; a
    background thread then writes the same files, as durably and atomically
    as a synchronous save.  One save is in flight: a save due while the
    previous one is still written waits for it (:attr:`async_stats` counts
    these waits).  A failed background write raises
    :class:`~tfsnippet.scaffold.checkpoint.io.CheckpointWriteError` (naming
    `checkpoint_dir`) at the next step or epoch boundary, at the next save or
    when the loop is left, the earlier checkpoints intact.  Leaving the loop,
    normally, through an exception or by preemption, waits for the last save;
    a resume only ever sees complete checkpoints.  ``make_checkpoint()``
    returns the path the checkpoint will have once written.

    **A store outage** (an object store that stays unreachable through the
    retries of :mod:`tfsnippet.storage.retry`) does not stop training: the
    save is reported (a ``RuntimeWarning`` naming the store) and skipped,
    synchronous or asynchronous, up to `max_failed_saves` saves in a row
    (default 3); the next one that fails stops the run with a
    ``RuntimeError`` naming the store.  A skipped save leaves the store as
    it was: the newest complete checkpoint stays what a resume takes.

    **Under a tf.distribute strategy** every worker restores the same
    checkpoint from `checkpoint_dir` (a directory every worker can read),
    but only the chief writes: the others read everything a save reads
    (the variables and the states, so they take part in any collective a
    read needs, and no save can deadlock) and write nothing.  Under
    multi-worker training a preemption signal received by any worker is
    agreed on at the next sync point (see
    :class:`~tfsnippet.scaffold.loop.distribution.LoopDistribution`), where
    every worker saves (the chief writes) and exits at the same step; under
    a ``ParameterServerStrategy`` a save first waits for the scheduled
    steps (``coordinator.join()``).

    **Suspended** (:meth:`suspend_writes`, what a :class:`~tfsnippet.QuickCheck`
    does): it still resumes a checkpoint found in `checkpoint_dir`, but
    creates no folder and saves nothing (:meth:`save` returns ``''``).
    """

    role = 'checkpointer'

    def __init__(self, checkpoint_dir: str, epoch_freq: int | None = None,
                 step_freq: int | None = None, secs: float | None = None,
                 max_to_keep: int | None = None, save_objects: Mapping[str, Any] | None = None,
                 restore: bool | str = True, variables: Any = None,
                 preemption_signals: Sequence[str | int] = ('SIGTERM',),
                 keep_best: bool | str = False,
                 export_best: str | os.PathLike[str] | None = None,
                 asynchronous: bool = False,
                 save: Sequence[SavePolicy] | None = None,
                 keep: Sequence[KeepPolicy] | None = None,
                 max_failed_saves: int = 3):
        if not isinstance(checkpoint_dir, (str, os.PathLike)) or not str(checkpoint_dir):
            raise TypeError(f'`checkpoint_dir` must be a directory path or URL, got '
                            f'{checkpoint_dir!r}')
        # a URL of an unknown protocol, or one whose package is missing, is refused here
        self._location = resolve(checkpoint_dir, argument='checkpoint_dir')
        epoch_freq = check_positive_int(epoch_freq, 'checkpoint_epoch_freq', allow_none=True)
        step_freq = check_positive_int(step_freq, 'checkpoint_step_freq', allow_none=True)
        max_to_keep = check_positive_int(max_to_keep, 'checkpoint_max_to_keep', allow_none=True)
        secs = check_positive_number(secs, 'checkpoint_secs', allow_none=True)
        if not isinstance(restore, (bool, str, os.PathLike)):
            raise TypeError(
                f'`restore_checkpoint` must be True, False or a checkpoint path, got {restore!r}')
        if not isinstance(restore, bool) and is_url(restore, argument='restore_checkpoint'):
            if self._location.is_local:
                raise ValueError(f'`restore_checkpoint` {restore!r} is a URL: it must be a '
                                 f'checkpoint of the loop\'s own `checkpoint_dir` on that store')
            restore = os.fspath(restore)   # checked when restored
        elif not isinstance(restore, bool):
            restore = os.path.abspath(restore)
            if not has_state(restore):
                raise ValueError(
                    f'`restore_checkpoint` must be True, False or the path of an existing '
                    f'checkpoint, but {restore!r} is not a checkpoint')
        if not isinstance(keep_best, (bool, str)) or keep_best == '':
            raise TypeError(f'`checkpoint_keep_best` must be True, False or a metric name, got '
                            f'{keep_best!r}')
        if save is None:
            save = [SaveEvery(epochs=epoch_freq)] if epoch_freq is not None else []
            save += [SaveEvery(steps=step_freq)] if step_freq is not None else []
            save += [SaveEvery(seconds=secs)] if secs is not None else []
            save.append(SaveAtEnd())
        elif (epoch_freq, step_freq, secs) != (None, None, None):
            raise ValueError('`save` replaces `epoch_freq`, `step_freq` and `secs`: give '
                             'one or the other')
        self._save = check_save_policies(save)
        policies = check_keep_policies(keep)
        if max_to_keep is not None:
            policies.append(KeepLatest(max_to_keep))
        if keep_best is not False:
            if any(isinstance(p, KeepBest) for p in policies):
                raise ValueError('`checkpoint_keep_best` is a shortcut for `KeepBest(k=1)`: '
                                 'give it or a KeepBest in `keep`, not both')
            policies.append(KeepBest(1, None if keep_best is True else keep_best))
        self._keep = policies
        self._keep_best: KeepBest | None = next(
            (p for p in policies if isinstance(p, KeepBest)), None)
        if export_best is not None:
            if self._keep_best is None:
                raise ValueError('`export_best` needs `checkpoint_keep_best`: the weights of the '
                                 'best checkpoint are what it exports')
            # the loop creates `checkpoint_dir`: the export may go into it
            export_best = check_export_path(export_best, 'export_best',
                                            created_dir=self._location.url)
        self._best_monitor: Monitor | None = None
        self._candidate: float | None = None    # this epoch's best value, not judged yet
        self._pins: list[dict[str, Any]] = []   # the k best pinned, best first
        self._unwatch: Callable[[], None] | None = None
        self._best_saver: CheckpointSaver | None = None   # kept after the exit, for exports
        self._async = check_bool(asynchronous, 'checkpoint_async')
        self._max_failed = check_positive_int(max_failed_saves, 'max_failed_saves')
        self._failed_in_row = 0   # saves lost to a store outage since the last good one
        self._dir = self._location.url   # the absolute path, or the URL
        self._objects = check_checkpoint_objects(save_objects, 'checkpoint_save_objects')
        self._restore = restore
        self._variables = variables
        self._saver: CheckpointSaver | None = None
        self._step_schedules: list[Every] = []
        self._last_saved: tuple[int, int, bool] | None = None   # (epoch, step, epoch over)
        self._async_stats: AsyncSaveStats | None = None
        self._finished = False
        self._preemption: Preemption | None = None
        # the shortcuts this component runs itself (TrainLoop adds its own instead)
        self._inner: list[LoopComponent] = []
        if preemption_signals:
            signals = [check_signal(sig, 'preemption_signals') for sig in preemption_signals]
            self._inner.append(Preemption(signals, checkpointer=self))
        if export_best is not None:
            self._inner.append(ExportBest(export_best, checkpointer=self))
        self.restored_from: str | None = None   # the checkpoint resumed at enter, if any

    @property
    def save_policies(self) -> list[SavePolicy]:
        """When this checkpointer saves."""
        return list(self._save)

    @property
    def keep_policies(self) -> list[KeepPolicy]:
        """What its store keeps."""
        return list(self._keep)

    @property
    def restore_from(self) -> bool | str:
        """What the loop resumes from: ``True`` the newest checkpoint, ``False``
        none, or a checkpoint's path (``restore_checkpoint``)."""
        return self._restore

    @property
    def finished(self) -> bool:
        """Whether the last loop was left normally with every save done."""
        return self._finished

    @property
    def checkpoint_dir(self) -> str:
        """The directory of this loop's checkpoints (in its ``checkpoint/`` subfolder)."""
        return self._dir

    @property
    def export_path(self) -> str | None:
        """Where this checkpointer's own ``export_best`` writes the best weights
        when the loop is left (``None``: it has none; ``TrainLoop(export_best=...)``
        adds an :class:`~tfsnippet.scaffold.components.export.ExportBest` instead)."""
        return next((c.path for c in self._inner if isinstance(c, ExportBest)), None)

    @property
    def save_objects(self) -> dict[str, Any]:
        """The objects saved besides the variables (``checkpoint_save_objects``)."""
        return dict(self._objects)

    @property
    def saver(self) -> CheckpointSaver | None:
        """The :class:`CheckpointSaver` (``None`` before the loop is entered)."""
        return self._saver

    @property
    def asynchronous(self) -> bool:
        """Whether checkpoints are written in the background."""
        return self._async

    @property
    def async_stats(self) -> AsyncSaveStats | None:
        """What the asynchronous saves of the latest entered loop cost (kept after
        the loop is left; ``None`` for synchronous saves or before entering)."""
        return self._async_stats

    def _check_writable(self) -> None:
        if not self._location.is_local:   # a missing bucket, refused credentials: say so
            check_store_access(self._location.join('checkpoint'), 'checkpoint_dir',
                               shown=self._location)
            return
        save_dir = os.path.join(self._dir, 'checkpoint')
        try:
            os.makedirs(save_dir, exist_ok=True)
            probe = os.path.join(save_dir, f'{TMP_PREFIX}probe-{uuid.uuid4().hex}')
            with open(probe, 'wb') as f:
                f.write(b'ok')
            os.remove(probe)
        except OSError as e:
            raise ValueError(
                f'`checkpoint_dir` {self._dir!r} is not writable: {e}') from e

    @property
    def best_monitor(self) -> Monitor | None:
        """The :class:`~tfsnippet.Monitor` of the metric `keep_best` watches
        (``None`` without `keep_best` or before it is added to a loop)."""
        return self._best_monitor

    def best_checkpoint(self) -> tuple[str, dict[str, Any]] | None:
        """``(path, record)`` of the pinned best checkpoint, or ``None``.

        The record holds the ``metric``, its ``value``, ``mode``, ``epoch``
        and ``step``.
        """
        saver = self._saver or self._best_saver
        if saver is None:
            return self._store().best()
        saver.wait()   # a save in flight may carry a new pin
        return saver.store.best()

    def save(self, loop: Any, best: Mapping[str, Any] | None = None) -> str:
        """Write a checkpoint now, at `loop.step`; return its path.

        `best` pins it as the best checkpoint, with this record (see
        :meth:`~tfsnippet.scaffold.checkpoint.store.CheckpointStore.pin_best`).
        With asynchronous saves, the path the checkpoint will have once the
        background write is done.

        Raises:
            RuntimeError: The loop is not entered, or the checkpoint could not
                be written (the message names `checkpoint_dir`; the earlier
                checkpoints are left intact).
            ~tfsnippet.scaffold.checkpoint.io.CheckpointWriteError: The
                previous asynchronous save failed (a ``RuntimeError`` too).
        """
        if self._saver is None:
            raise RuntimeError('The loop of this Checkpointer is not entered')
        if self._writes_suspended is not None:
            return ''
        with self.hold(loop, 'checkpoint'):   # timed only for a time breakdown
            return self._write_checkpoint(loop, best)

    def _write_checkpoint(self, loop: Any, best: Mapping[str, Any] | None) -> str:
        assert self._saver is not None
        try:
            loop.backend.join()   # the scheduled steps are done: the variables are settled
            if best is None:   # saved again at a step pinned: still among the best
                best = next((p for p in self._pins if p.get('step') == loop.step), None)
            if loop.is_chief:
                path = self._saver.save(loop.step, best=best)
            else:   # read what the chief saves (collectives included), write nothing
                self._saver.rehearse()
                path = self._saver.store.path_of(loop.step)
            if not self._async:
                self._failed_in_row = 0
        except CheckpointWriteError as e:
            if isinstance(e.__cause__, StoreOutageError):
                self._skip_failed_save(e.__cause__, e.step)
                return self._write_checkpoint(loop, best)   # the error is raised once

            raise self._background_error(e) from e.__cause__
        except StoreOutageError as e:
            self._skip_failed_save(e, loop.step)
            return self._saver.store.path_of(loop.step)
        except (OSError, tf.errors.OpError) as e:
            raise RuntimeError(
                f'Could not write a checkpoint into `checkpoint_dir` {self._dir!r} (is the disk '
                f'full or read-only?): {type(e).__name__}: {e}; the earlier checkpoints are '
                f'intact') from e
        self._last_saved = (loop.epoch, loop.step, loop.progress.epoch_finished)
        for schedule in self._step_schedules:
            if schedule.kind == 'seconds':   # `secs` count from the last save of any kind
                schedule.reset(loop)
        return path

    def wait(self) -> None:
        """Wait for the asynchronous save in flight, if any.

        Raises:
            ~tfsnippet.scaffold.checkpoint.io.CheckpointWriteError: It failed.
        """
        if self._saver is not None:
            try:
                self._saver.wait()
            except CheckpointWriteError as e:
                if isinstance(e.__cause__, StoreOutageError):
                    self._skip_failed_save(e.__cause__, e.step)
                    return
                raise self._background_error(e) from e.__cause__
            if self._async:
                self._failed_in_row = 0

    @property
    def max_failed_saves(self) -> int:
        """How many saves in a row a store outage may skip before the run stops."""
        return self._max_failed

    @property
    def failed_saves(self) -> int:
        """The saves skipped by a store outage since the last one that succeeded."""
        return self._failed_in_row

    def _skip_failed_save(self, error: StoreOutageError, step: int | None) -> None:
        """Report a save lost to a store outage, or stop the run after too many in a row."""
        self._failed_in_row += 1
        if self._failed_in_row > self._max_failed:
            raise RuntimeError(
                f'The store {error.store!r} of `checkpoint_dir` {self._dir!r} failed '
                f'{self._failed_in_row} saves in a row (`max_failed_saves` is '
                f'{self._max_failed}); the run stops, the newest complete checkpoint is what '
                f'a resume takes: {error}') from error
        newest = None
        if self._saver is not None:
            try:
                newest = self._saver.store.latest()
            except (OSError, RuntimeError):   # the store is away: it cannot be listed either
                newest = None
        warn_user(f'The checkpoint of step {step} was not saved: {error}; training goes on '
                  f'({self._failed_in_row} of at most {self._max_failed} failed saves in a '
                  f'row), the newest complete checkpoint is '
                  f'{newest if newest else "the one before the outage"}', RuntimeWarning)

    def _background_error(self, error: CheckpointWriteError) -> CheckpointWriteError:
        cause = error.__cause__
        return CheckpointWriteError(
            f'Could not write the checkpoint of step {error.step} into `checkpoint_dir` '
            f'{self._dir!r} in the background (is the disk full or read-only?): '
            f'{type(cause).__name__}: {cause}; the earlier checkpoints are intact',
            error.step, error.save_dir)

    def _check_background(self, loop: Any) -> None:
        # after each step and epoch of an asynchronous loop: one attribute test
        if self._saver is not None and self._saver.async_failed:
            self.wait()

    # ------------------------------------------------------------ the best
    def _on_best_value(self, value: float) -> None:
        monitor = self._best_monitor
        assert monitor is not None
        monitor.update(value)
        if monitor.is_better(value, self._candidate):
            self._candidate = float(value)

    def _save_best(self, loop: Any) -> str | None:
        """Pin the checkpoint of now among the best, if this epoch's best value enters
        them: the one saved here already, else a new one."""
        value, self._candidate = self._candidate, None
        policy, monitor = self._keep_best, self._best_monitor
        if self._writes_suspended is not None or value is None or policy is None or monitor is None or \
                not enters_best(self._pins, value, monitor.mode, policy.k):
            return None
        assert self._saver is not None
        record = {'metric': monitor.name, 'value': value, 'mode': monitor.mode,
                  'epoch': loop.epoch, 'step': loop.step}
        others = [p for p in self._pins if p.get('step') != loop.step]
        self._pins = [record] if policy.k == 1 else rank_pins([record] + others, policy.k)
        store = self._saver.store
        now = (loop.epoch, loop.step, loop.progress.epoch_finished)
        if self._last_saved == now:
            # the checkpoint of now is saved (or on its way): pin it.  The same
            # choice on every worker, so none reads what the others do not
            if not loop.is_chief:
                return store.path_of(loop.step)
            if self._async:
                self.wait()
            if store.path_of(loop.step) in store.checkpoints():
                try:
                    return store.pin_best(loop.step, record)
                except OSError as e:
                    raise RuntimeError(
                        f'Could not pin the best checkpoint in `checkpoint_dir` {self._dir!r}: '
                        f'{type(e).__name__}: {e}; the earlier checkpoints are intact') from e
        return self.save(loop, best=record)

    def best_checkpoints(self) -> list[tuple[str, dict[str, Any]]]:
        """``(path, record)`` of each pinned best checkpoint on disk, best first."""
        saver = self._saver or self._best_saver
        if saver is None:
            return self._store().pinned()
        saver.wait()
        return saver.store.pinned()

    def _save_dir(self) -> Location:
        # the Location itself, resolved once: its file system (and options) go on
        return self._location.join('checkpoint')

    def _store(self) -> CheckpointStore | ObjectCheckpointStore:
        return open_store(self._save_dir(), argument='checkpoint_dir', keep=self._keep)

    def export_best(self, loop: Any, path: str | os.PathLike[str]) -> list[str]:
        """Write the weights of the pinned best checkpoint to `path`, for serving.

        Eager mode: `path` is a ``.weights.h5`` file written by
        ``model.save_weights`` for the Keras model in `save_objects` (with
        several, model ``key`` goes to ``<path stem>-<key>.weights.h5``), or
        with no model, a file of the values of the loop's `param_vars` by
        name.  Graph mode: `path` is a directory that receives a
        ``tf.compat.v1.train.Saver`` checkpoint of `param_vars` (all
        trainable variables without them).  See
        :func:`~tfsnippet.export_weights`: each file is written atomically,
        and :func:`~tfsnippet.warm_start` reads it back.  The values come
        from the checkpoint; the variables keep their own.

        Returns:
            The paths written.

        Raises:
            RuntimeError: The loop was never entered, no `keep_best`, or no
                best checkpoint has been pinned (the message names the
                watched metric and the metrics collected).
            ValueError: The directory of `path` does not exist, or `path`
                does not suit the TF style.
        """
        return export_best_weights(self, loop, path)

    @property
    def variables(self) -> Any:
        """The variables given as `variables` (the loop's `param_vars`)."""
        return self._variables

    @property
    def best_saver(self) -> CheckpointSaver | None:
        """The saver of the latest entered loop, kept after it is left (for exports)."""
        return self._saver or self._best_saver

    @property
    def keep_best(self) -> KeepBest | None:
        """The :class:`~tfsnippet.scaffold.checkpoint.policies.KeepBest` policy, if any."""
        return self._keep_best

    # ------------------------------------------------------------ restore
    def on_attach(self, loop: Any) -> None:
        policy = self._keep_best
        self._best_monitor = None if policy is None else loop_monitor(
            loop, 'checkpoint_keep_best', policy.metric,
            None if policy.mode == 'auto' else policy.mode)

    def open_saver(self, loop: Any) -> CheckpointSaver:
        """Build the saver of an entered `loop` (its variables and objects, and the
        loop's state as :meth:`TrainLoop.state_dict` gives it) and, on the chief,
        clean up after a killed save; what the loop's restorer reads from.

        Raises:
            ValueError: `checkpoint_dir` is not writable (on the chief), or holds
                checkpoints of the classic ``tf.train.Saver``.
        """
        writes = loop.is_chief and self._writes_suspended is None
        if writes:
            self._check_writable()
        if tf.executing_eagerly():
            variables = self._variables
        else:
            # graph mode: every global variable as it is now (not when the
            # loop was constructed, so later variables are not left out)
            variables = list(tf.compat.v1.global_variables())
        self._saver = CheckpointSaver(
            variables, self._save_dir(), objects=self._objects,
            keep=self._keep, asynchronous=self._async, loop_state=loop.state_dict,
            loop_files=loop.progress.datasets.writer, loop_state_check=loop.check_state_dict,
            strict=True)
        self._async_stats = self._saver.async_stats
        if writes:   # the other workers only read
            self._saver.remove_stale_temporaries()
        self._refuse_classic_format()
        return self._saver

    def restored(self, loop: Any, path: str | None) -> None:
        """The loop's restorer resumed `loop` from `path` (``None``: from nothing)."""
        assert self._saver is not None
        # what is on disk now (or nothing to save yet): the exit saves only a newer state
        self._last_saved = (loop.epoch, loop.step, loop.progress.epoch_finished)
        self.restored_from = path
        self._best_saver = self._saver
        self._candidate, self._pins = None, []
        self._finished = False
        policy = self._keep_best
        if policy is not None and self._best_monitor is not None:
            self._best_monitor.reset()
            if path is not None:   # the pinned best survive resumes
                self._pins = [dict(info) for _, info in self._saver.store.pinned()
                              if info.get('metric') == self._best_monitor.name and
                              isinstance(info.get('value'), (int, float))][:policy.k]
            if self._pins:
                self._best_monitor.best = float(self._pins[0]['value'])

    def _refuse_classic_format(self) -> None:
        """A directory of the classic ``tf.train.Saver`` checkpoints is not ours to resume."""
        assert self._saver is not None
        if not self._location.is_local:   # no classic Saver wrote to a bucket
            return
        save_dir = self._saver.save_dir
        if self._saver.latest_checkpoint() is None and os.path.isfile(
                os.path.join(save_dir, 'checkpoint')) and any(
                name.endswith('.index') for name in os.listdir(save_dir)):
            raise ValueError(
                f'`checkpoint_dir` {self._dir!r} holds checkpoints of the classic tfsnippet '
                f'(a `tf.train.Saver` directory), which cannot be resumed: use a new '
                f'`checkpoint_dir`, and `spt.warm_start(...)` to load their weights')

    # ------------------------------------------------------------ preemption
    def use_preemption(self, preemption: Preemption) -> None:
        """Called by the :class:`Preemption` that saves through this checkpointer."""
        self._preemption = preemption

    @property
    def preempted_by(self) -> str | None:
        """The name of the preemption signal received, or ``None``."""
        return None if self._preemption is None else self._preemption.preempted_by

    def preempt(self, loop: Any, signal_name: str) -> None:
        """Save a checkpoint now, say so and raise :class:`TrainingPreempted`
        (through the loop's :class:`Preemption`)."""
        if self._preemption is None:
            raise RuntimeError('No Preemption component saves through this Checkpointer')
        self._preemption.preempt(loop, signal_name)

    def save_now(self, loop: Any) -> str:
        """Save the checkpoint of now (pinned if it enters the best) and wait for it."""
        path = self._save_best(loop) or self.save(loop)
        self.wait()
        return path

    # ------------------------------------------------------------ hooks
    def on_enter(self, loop: Any) -> None:
        if self._saver is None:
            raise RuntimeError('A Checkpointer must be added before the loop is entered: the '
                               'loop restores through it when entered')
        if self._best_monitor is not None:
            name = self._best_monitor.name
            self._unwatch = loop.watch_metric(name, self._on_best_value)
            # subscribed before the scheduled save: AFTER_EPOCH handlers run in
            # reverse order, so the pin comes after it and reuses its checkpoint
            self.subscribe(loop, EventKeys.AFTER_EPOCH, self._save_best)
            self.expect_metric(loop, name, '`checkpoint_keep_best`')
        self._step_schedules = []
        for policy in self._save:
            if isinstance(policy, SaveEvery) and policy.epochs is not None:
                self.subscribe(loop, EventKeys.AFTER_EPOCH, self.save,
                               every=Every(epochs=policy.epochs))
            elif isinstance(policy, SaveEvery) and policy.steps is not None:
                self._step_schedules.append(Every(steps=policy.steps))
            elif isinstance(policy, SaveEvery):
                self._step_schedules.append(Every(seconds=policy.seconds))
        for schedule in self._step_schedules:
            schedule.reset(loop)
        if self._step_schedules:
            self.subscribe(loop, EventKeys.AFTER_STEP, self._after_step)
        if self._async:
            self.subscribe(loop, EventKeys.AFTER_STEP, self._check_background)
            self.subscribe(loop, EventKeys.AFTER_EPOCH, self._check_background)
        for inner in self._inner:
            inner.on_enter(loop)

    def _after_step(self, loop: Any) -> None:
        due = False
        for schedule in self._step_schedules:   # every one is checked, so each is consumed
            due = schedule.due(loop) or due
        if due:
            self.save(loop)

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        # the shortcuts exit after the final save, the preemption first
        inner = [c for c in self._inner if isinstance(c, Preemption)] + \
            [c for c in self._inner if not isinstance(c, Preemption)]
        try:
            try:
                self._exit(loop, error)
            except BaseException as e:
                for c in inner:
                    try:
                        c.on_exit(loop, e)
                    except BaseException as other:
                        warn_user(f'{type(c).__name__} failed to exit the loop: '
                                  f'{type(other).__name__}: {other}', RuntimeWarning)
                    finally:
                        loop.events.remove_owned(c)
                raise
            for c in inner:
                try:
                    c.on_exit(loop, error)
                finally:
                    loop.events.remove_owned(c)
        finally:
            self._saver = None

    def _exit(self, loop: Any, error: BaseException | None) -> None:
        self._finished = False
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        if self._best_monitor is not None:
            loop.events.remove_owned((self, 'expect', self._best_monitor.name))
        try:
            try:
                if error is None and self._saver is not None:
                    self._save_best(loop)   # an improvement after the last epoch's end
                    if any(isinstance(p, SaveAtEnd) for p in self._save) and \
                            self._last_saved != (loop.epoch, loop.step,
                                                 loop.progress.epoch_finished):
                        self.save(loop)   # the state at the end: a re-run redoes nothing
            except BaseException as e:
                self._wait_at_exit(e)
                raise
            self._wait_at_exit(error)
            self._finished = error is None
        finally:
            self._step_schedules = []

    def _wait_at_exit(self, error: BaseException | None) -> None:
        """Wait for the last asynchronous save; raise its error unless `error` leaves."""
        if self._saver is None or not self._async:
            return
        try:
            self.wait()
        except CheckpointWriteError as e:
            if error is None:
                raise
            # the loop is left through another exception: keep it, say this one
            warn_user(str(e), RuntimeWarning)


