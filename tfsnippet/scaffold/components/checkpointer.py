"""The loop component that saves checkpoints on a schedule and resumes from them."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from ...utils.events import Every
from ...utils.misc import warn_user
from ...utils.validation import check_bool, check_positive_int, check_positive_number
from ..checkpoint.export import WEIGHTS_SUFFIX, check_export_path, is_keras_model, write_export
from ..checkpoint.io import AsyncSaveStats, CheckpointWriteError
from ..checkpoint.saver import (_TMP_PREFIX, CheckpointSavableObject, CheckpointSaver,
                                check_checkpoint_objects)
from ..checkpoint.state_format import has_state
from ..checkpoint.store import CheckpointStore
from ..event_keys import EventKeys
from ..metrics.monitor import Monitor, loop_monitor
from .base import LoopComponent

__all__ = ['Checkpointer', 'TrainingPreempted', 'PREEMPTED_EXIT_CODE']


class _LoopState(CheckpointSavableObject):
    """The loop's counters and its components' states, as one savable object."""

    def __init__(self, loop: Any):
        self._loop = loop

    def get_state(self) -> dict[str, Any]:
        return {'loop': self._loop.state_dict()}

    def set_state(self, state: dict[str, Any]) -> None:
        self._loop.load_state_dict(state['loop'])


#: Key of the loop's own state among the checkpointed objects.
LOOP_STATE_KEY = '$$train_loop'

#: What a preempted process exits with: 128 + SIGTERM, as a shell reports a process
#: that SIGTERM ended, so a supervisor that restarts failed jobs restarts it.
PREEMPTED_EXIT_CODE = 143


class TrainingPreempted(SystemExit):
    """Raised out of the loop after a preemption signal, once the checkpoint is saved.

    It is a ``SystemExit`` with :data:`PREEMPTED_EXIT_CODE`: uncaught, the
    process exits with that status, and the next start resumes from the
    checkpoint.
    """


class Checkpointer(LoopComponent):
    """Saves the loop's checkpoints on a schedule and resumes from them.

    Used by ``TrainLoop(checkpoint_dir=...)``; see
    :func:`~tfsnippet.scaffold.loop.build.build_components`.  It restores
    in :meth:`on_restore`, before any component is entered, and saves
    after every `epoch_freq` epochs, every `step_freq` steps, at the end
    of the first step `secs` seconds after the last save, and when the loop
    is left normally (a re-run of a finished job redoes nothing).

    **Preemption**: while the loop is entered (in the main thread), the
    `preemption_signals` (``SIGTERM`` by default: what Kubernetes, SLURM
    and spot instances send before they kill a process) make the loop save
    a checkpoint at the next step or epoch boundary, say so, and raise
    :class:`TrainingPreempted` (exit status 143); the next start resumes
    exactly there.  ``SIGINT`` (Ctrl+C) keeps raising ``KeyboardInterrupt``
    unless it is listed.

    **The best checkpoint** (`keep_best`): ``True`` watches the loop's
    validation metric in its direction, a metric name watches that metric
    (``'min'``/``'max'`` from its name, see :class:`~tfsnippet.Monitor`;
    NaN is never the best).  At the end of an epoch in which the metric
    improved, the checkpoint of that epoch (the scheduled one, or one
    saved for this) is pinned as the best: the index records it with the
    metric's name and value, it is kept beside the `max_to_keep` newest
    checkpoints, and the checkpoint pinned before becomes an ordinary one
    (removed when older than the `max_to_keep` newest).  Resuming still
    starts from the newest checkpoint, and takes the best value so far from
    the index, so the pin survives resumes; ``restore=False`` starts a new
    best.  The pinned checkpoint holds the state at the end of that epoch:
    validate after the step loop for the weights that were validated.

    **Export** (`export_best`): when the loop is left normally (not through
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
    """

    role = 'checkpointer'

    def __init__(self, checkpoint_dir: str, epoch_freq: int | None = None,
                 step_freq: int | None = None, secs: float | None = None,
                 max_to_keep: int | None = None, save_objects: Mapping[str, Any] | None = None,
                 restore: bool | str = True, variables: Any = None,
                 preemption_signals: Sequence[str | int] = ('SIGTERM',),
                 keep_best: bool | str = False,
                 export_best: str | os.PathLike[str] | None = None,
                 asynchronous: bool = False):
        if not isinstance(checkpoint_dir, (str, os.PathLike)) or not str(checkpoint_dir):
            raise TypeError(f'`checkpoint_dir` must be a directory path, got {checkpoint_dir!r}')
        epoch_freq = check_positive_int(epoch_freq, 'checkpoint_epoch_freq', allow_none=True)
        step_freq = check_positive_int(step_freq, 'checkpoint_step_freq', allow_none=True)
        max_to_keep = check_positive_int(max_to_keep, 'checkpoint_max_to_keep', allow_none=True)
        secs = check_positive_number(secs, 'checkpoint_secs', allow_none=True)
        if not isinstance(restore, (bool, str, os.PathLike)):
            raise TypeError(
                f'`restore_checkpoint` must be True, False or a checkpoint path, got {restore!r}')
        if not isinstance(restore, bool):
            restore = os.path.abspath(restore)
            if not has_state(restore):
                raise ValueError(
                    f'`restore_checkpoint` must be True, False or the path of an existing '
                    f'checkpoint, but {restore!r} is not a checkpoint')
        if not isinstance(keep_best, (bool, str)) or keep_best == '':
            raise TypeError(f'`checkpoint_keep_best` must be True, False or a metric name, got '
                            f'{keep_best!r}')
        if export_best is not None:
            if keep_best is False:
                raise ValueError('`export_best` needs `checkpoint_keep_best`: the weights of the '
                                 'best checkpoint are what it exports')
            export_best = check_export_path(export_best, 'export_best')
        self._keep_best = keep_best
        self._export_path = export_best
        self._best_monitor: Monitor | None = None
        self._best_pending: float | None = None     # an improvement not pinned yet
        self._pinned: dict[str, Any] | None = None   # the record this run pinned last
        self._unwatch: Callable[[], None] | None = None
        self._best_saver: CheckpointSaver | None = None   # kept after the exit, for exports
        self._async = check_bool(asynchronous, 'checkpoint_async')
        self._signals = [_check_signal(sig) for sig in preemption_signals]
        self._dir = os.path.abspath(checkpoint_dir)
        self._epoch_freq = epoch_freq
        self._step_freq = step_freq
        self._secs = secs
        self._max_to_keep = max_to_keep
        self._objects = check_checkpoint_objects(save_objects, 'checkpoint_save_objects')
        self._restore = restore
        self._variables = variables
        self._saver: CheckpointSaver | None = None
        self._step_schedules: list[Every] = []
        self._last_saved: tuple[int, int, bool] | None = None   # (epoch, step, epoch over)
        self._previous_handlers: dict[int, Any] = {}
        self._preempted_by: str | None = None
        self._async_stats: AsyncSaveStats | None = None
        self.restored_from: str | None = None   # the checkpoint resumed at enter, if any

    @property
    def checkpoint_dir(self) -> str:
        """The directory of this loop's checkpoints (in its ``checkpoint/`` subfolder)."""
        return self._dir

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
        save_dir = os.path.join(self._dir, 'checkpoint')
        try:
            os.makedirs(save_dir, exist_ok=True)
            probe = os.path.join(save_dir, f'{_TMP_PREFIX}probe-{uuid.uuid4().hex}')
            with open(probe, 'wb') as f:
                f.write(b'ok')
            os.remove(probe)
        except OSError as e:
            raise ValueError(
                f'`checkpoint_dir` {self._dir!r} is not writable: {e}') from e

    @property
    def best_monitor(self) -> Monitor | None:
        """The :class:`~tfsnippet.Monitor` of the metric `keep_best` watches
        (``None`` without `keep_best` or before the loop is entered)."""
        return self._best_monitor

    def best_checkpoint(self) -> tuple[str, dict[str, Any]] | None:
        """``(path, record)`` of the pinned best checkpoint, or ``None``.

        The record holds the ``metric``, its ``value``, ``mode``, ``epoch``
        and ``step``.
        """
        saver = self._saver or self._best_saver
        if saver is None:
            return CheckpointStore(os.path.join(self._dir, 'checkpoint')).best()
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
        backend = loop.backend
        try:
            if backend is not None and backend.coordinator is not None:
                backend.barrier()   # the scheduled steps are done: the variables are settled
            if best is None and self._pinned is not None and self._pinned['step'] == loop.step:
                best = self._pinned   # saved again at the step this run pinned: still the best
            if loop.is_chief:
                path = self._saver.save(loop.step, best=best)
            else:   # read what the chief saves (collectives included), write nothing
                self._saver.rehearse()
                path = self._saver.store.path_of(loop.step)
        except CheckpointWriteError as e:
            raise self._background_error(e) from e.__cause__
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
                raise self._background_error(e) from e.__cause__

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
        assert self._best_monitor is not None
        if self._best_monitor.update(value):
            self._best_pending = self._best_monitor.best

    def _save_best(self, loop: Any) -> str | None:
        """Pin the checkpoint of now as the best, if the metric improved since the
        last pin: the one saved here already, else a new one."""
        if self._best_pending is None:
            return None
        assert self._saver is not None and self._best_monitor is not None
        monitor = self._best_monitor
        record = {'metric': monitor.name, 'value': self._best_pending, 'mode': monitor.mode,
                  'epoch': loop.epoch, 'step': loop.step}
        self._best_pending = None
        store = self._saver.store
        if self._last_saved == (loop.epoch, loop.step, loop.progress.epoch_finished):
            # the checkpoint of now is saved (or on its way): pin it.  The same
            # choice on every worker, so none reads what the others do not
            if not loop.is_chief:
                return store.path_of(loop.step)
            if self._async:
                self.wait()
        self._pinned = record
        if self._last_saved == (loop.epoch, loop.step, loop.progress.epoch_finished) and \
                store.path_of(loop.step) in store.checkpoints():
            try:
                return store.pin_best(loop.step, record)
            except OSError as e:
                raise RuntimeError(
                    f'Could not pin the best checkpoint in `checkpoint_dir` {self._dir!r}: '
                    f'{type(e).__name__}: {e}; the earlier checkpoints are intact') from e
        return self.save(loop, best=record)

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
        if self._keep_best is False:
            raise RuntimeError('`export_best` needs `checkpoint_keep_best=True` (or a metric '
                               'name): the weights of the best checkpoint are what it exports')
        saver = self._saver or self._best_saver
        if saver is None:
            raise RuntimeError('`export_best` needs the loop to have been entered')
        path = check_export_path(path, 'path')
        saver.wait()   # a save in flight may carry a new pin, or prune the old one
        recorded = saver.store.best()
        if recorded is None:
            name = self._best_monitor.name if self._best_monitor is not None else '?'
            raise RuntimeError(
                f'No best checkpoint to export in `checkpoint_dir` {self._dir!r}: `{name}`, '
                f'which `checkpoint_keep_best` watches, has no value that counts (never '
                f'collected, or only NaN); the metrics collected were '
                f'{loop.metric_book.names()}')
        values = saver.saved_values(recorded[0])
        written = []
        for target_path, targets in self._export_targets(path):
            write_export(target_path, targets, values)
            written.append(target_path)
        return written

    def _export_targets(self, path: str) -> list[tuple[str, Any]]:
        if not tf.executing_eagerly():
            variables = self._variables or tf.compat.v1.trainable_variables()
            return [(path, variables)]
        models = [(key, obj) for key, obj in self._objects.items() if is_keras_model(obj)]
        if len(models) == 1:
            return [(path, models[0][1])]
        if models:
            stem = path[:-len(WEIGHTS_SUFFIX)]
            return [(f'{stem}-{key}{WEIGHTS_SUFFIX}', model) for key, model in models]
        if not self._variables:
            raise RuntimeError('`export_best` has nothing to export: pass `param_vars` or a '
                               'Keras model in `checkpoint_save_objects`')
        return [(path, self._variables)]

    # ------------------------------------------------------------ hooks
    @property
    def preempted_by(self) -> str | None:
        """The name of the preemption signal received, or ``None``."""
        return self._preempted_by

    def on_restore(self, loop: Any) -> None:
        chief = loop.is_chief
        if chief:
            self._check_writable()
        if tf.executing_eagerly():
            variables = self._variables
        else:
            # graph mode: every global variable as it is now (not when the
            # loop was constructed, so later variables are not left out)
            variables = list(tf.compat.v1.global_variables())
        objects = dict(self._objects)
        objects[LOOP_STATE_KEY] = _LoopState(loop)
        self._saver = CheckpointSaver(
            variables, os.path.join(self._dir, 'checkpoint'), objects=objects,
            max_to_keep=self._max_to_keep, asynchronous=self._async)
        self._async_stats = self._saver.async_stats
        if chief:   # the other workers only read
            self._saver.remove_stale_temporaries()
        self._refuse_classic_format()
        restored = None
        try:
            if self._restore is True:
                restored = self._saver.restore_latest(ignore_non_exist=True)
            elif self._restore is not False:
                restored = (self._restore, self._saver.restore(self._restore))
        except ValueError as e:
            raise ValueError(
                f'{e}. The model changed since the checkpoint was saved: to start afresh, pass '
                f'`restore_checkpoint=False` or use a new `checkpoint_dir` (and '
                f'`spt.warm_start` to reuse the matching weights)') from e
        backend = loop.backend
        if backend is not None and backend.num_workers > 1:
            # every worker must go on from the chief's checkpoint (two all-reduces)
            mine = -1. if restored is None else float(loop.step)
            chief = backend.broadcast_from_chief(mine)
            if backend.agree_any(chief != mine):
                def desc(step: float) -> str:
                    return 'no checkpoint' if step < 0 else f'the checkpoint of step {int(step)}'
                raise RuntimeError(
                    f'The workers resumed from different checkpoints (this worker, '
                    f'{backend.worker_index}: {desc(mine)}; the chief: {desc(chief)}): every '
                    f'worker must read the same `checkpoint_dir` {self._dir!r}, a directory '
                    f'they share')
        # what is on disk now (or nothing to save yet): the exit saves only a newer state
        self._last_saved = (loop.epoch, loop.step, loop.progress.epoch_finished)
        self.restored_from = None if restored is None else restored[0]
        self._best_saver = self._saver
        self._best_monitor, self._best_pending, self._pinned = None, None, None
        if self._keep_best is not False:
            self._best_monitor = loop_monitor(
                loop, 'checkpoint_keep_best', None if self._keep_best is True else self._keep_best,
                None)
            recorded = self._saver.store.best() if restored is not None else None
            value = None if recorded is None else recorded[1].get('value')
            if (recorded is not None and recorded[1].get('metric') == self._best_monitor.name
                    and isinstance(value, (int, float))):
                self._best_monitor.best = float(value)   # the pinned best survives resumes
        if restored is not None:
            loop.println(f'Resume training: epoch {loop.epoch}, step {loop.step}, '
                         f'from checkpoint {restored[0]}')

    def _refuse_classic_format(self) -> None:
        """A directory of the classic ``tf.train.Saver`` checkpoints is not ours to resume."""
        assert self._saver is not None
        save_dir = self._saver.save_dir
        if self._saver.latest_checkpoint() is None and os.path.isfile(
                os.path.join(save_dir, 'checkpoint')) and any(
                name.endswith('.index') for name in os.listdir(save_dir)):
            raise ValueError(
                f'`checkpoint_dir` {self._dir!r} holds checkpoints of the classic tfsnippet '
                f'(a `tf.train.Saver` directory), which cannot be resumed: use a new '
                f'`checkpoint_dir`, and `spt.warm_start(...)` to load their weights')

    def on_enter(self, loop: Any) -> None:
        if self._best_monitor is not None:
            name = self._best_monitor.name
            self._unwatch = loop.watch_metric(name, self._on_best_value)
            # subscribed before the scheduled save: AFTER_EPOCH handlers run in
            # reverse order, so the pin comes after it and reuses its checkpoint
            self.subscribe(loop, EventKeys.AFTER_EPOCH, self._save_best)
            self.expect_metric(loop, name, '`checkpoint_keep_best`')
        if self._epoch_freq is not None:
            self.subscribe(loop, EventKeys.AFTER_EPOCH, self.save,
                           every=Every(epochs=self._epoch_freq))
        self._step_schedules = []
        if self._step_freq is not None:
            self._step_schedules.append(Every(steps=self._step_freq))
        if self._secs is not None:
            self._step_schedules.append(Every(seconds=self._secs))
        for schedule in self._step_schedules:
            schedule.reset(loop)
        if self._step_schedules:
            self.subscribe(loop, EventKeys.AFTER_STEP, self._after_step)
        if self._async:
            self.subscribe(loop, EventKeys.AFTER_STEP, self._check_background)
            self.subscribe(loop, EventKeys.AFTER_EPOCH, self._check_background)
        self._preempted_by = None
        if threading.current_thread() is threading.main_thread():
            for sig in self._signals:
                self._previous_handlers[sig] = signal.signal(
                    sig, lambda signum, frame: self._on_signal(loop, signum))

    def _on_signal(self, loop: Any, signum: int) -> None:
        # runs in the main thread between two bytecodes: only note it; the save
        # waits for the next step or epoch boundary
        if self._preempted_by is None:
            self._preempted_by = signal.Signals(signum).name
            backend = loop.backend
            if backend is None or backend.num_workers == 1:   # else agreed at a sync point
                self.subscribe(loop, EventKeys.AFTER_STEP, self._preempt)
                self.subscribe(loop, EventKeys.AFTER_EPOCH, self._preempt)

    def _preempt(self, loop: Any) -> None:
        self.preempt(loop, self._preempted_by or 'a signal')

    def preempt(self, loop: Any, signal_name: str) -> None:
        """Save a checkpoint now, say so and raise :class:`TrainingPreempted`."""
        self._preempted_by = signal_name
        path = self._save_best(loop) or self.save(loop)
        self.wait()
        loop.println(f'Preempted by {self._preempted_by} at epoch {loop.epoch}, step '
                     f'{loop.step}: saved checkpoint {path}; exiting with status '
                     f'{PREEMPTED_EXIT_CODE}, the next start resumes from it')
        raise TrainingPreempted(PREEMPTED_EXIT_CODE)

    def _after_step(self, loop: Any) -> None:
        due = False
        for schedule in self._step_schedules:   # every one is checked, so each is consumed
            due = schedule.due(loop) or due
        if due:
            self.save(loop)

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        for sig, previous in self._previous_handlers.items():
            signal.signal(sig, previous)
        self._previous_handlers = {}
        if self._unwatch is not None:
            self._unwatch()
            self._unwatch = None
        if self._best_monitor is not None:
            loop.events.remove_owned((self, 'expect', self._best_monitor.name))
        try:
            try:
                if error is None and self._saver is not None:
                    self._save_best(loop)   # an improvement after the last epoch's end
                    if self._last_saved != (loop.epoch, loop.step,
                                            loop.progress.epoch_finished):
                        self.save(loop)   # the state at the end: a re-run redoes nothing
            except BaseException as e:
                self._wait_at_exit(e)
                raise
            self._wait_at_exit(error)
            if error is None and self._preempted_by is not None:
                loop.println(f'Preempted by {self._preempted_by} after training: exiting with '
                             f'status {PREEMPTED_EXIT_CODE}')
                raise TrainingPreempted(PREEMPTED_EXIT_CODE)
            if error is None and self._export_path is not None and loop.is_chief:
                paths = self.export_best(loop, self._export_path)
                best = self.best_checkpoint()
                assert best is not None
                loop.println(f'Exported the best weights ({best[1]["metric"]} = '
                             f'{best[1]["value"]:.6g}, epoch {best[1]["epoch"]}, step '
                             f'{best[1]["step"]}) to {", ".join(paths)}')
        finally:
            self._step_schedules = []
            self._saver = None

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


def _check_signal(sig: str | int) -> int:
    try:
        return int(signal.Signals[sig] if isinstance(sig, str) else signal.Signals(sig))
    except (KeyError, ValueError):
        raise ValueError(f'`preemption_signals` must hold signal names or numbers such as '
                         f"'SIGTERM', got {sig!r}") from None
