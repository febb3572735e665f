"""The loop component that saves checkpoints on a schedule and resumes from them."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from ...utils.events import Every
from ...utils.validation import check_positive_int, check_positive_number
from ..checkpoint.saver import (_STATE_FILE, _TMP_PREFIX, CheckpointSavableObject,
                                CheckpointSaver, check_checkpoint_objects)
from ..event_keys import EventKeys
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
                 preemption_signals: Sequence[str | int] = ('SIGTERM',)):
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
            if not os.path.isfile(os.path.join(restore, _STATE_FILE)):
                raise ValueError(
                    f'`restore_checkpoint` must be True, False or the path of an existing '
                    f'checkpoint, but {restore!r} is not a checkpoint')
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

    def save(self, loop: Any) -> str:
        """Write a checkpoint now, at `loop.step`; return its path.

        Raises:
            RuntimeError: The loop is not entered, or the checkpoint could not
                be written (the message names `checkpoint_dir`; the earlier
                checkpoints are left intact).
        """
        if self._saver is None:
            raise RuntimeError('The loop of this Checkpointer is not entered')
        backend = loop.backend
        try:
            if backend is not None and backend.coordinator is not None:
                backend.barrier()   # the scheduled steps are done: the variables are settled
            if loop.is_chief:
                path = self._saver.save(loop.step)
            else:   # read what the chief saves (collectives included), write nothing
                self._saver.rehearse()
                path = self._saver.store.path_of(loop.step)
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
            max_to_keep=self._max_to_keep)
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
        path = self.save(loop)
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
        try:
            if error is None and self._saver is not None and self._last_saved != (
                    loop.epoch, loop.step, loop.progress.epoch_finished):
                self.save(loop)   # the state at the end, so a re-run redoes nothing
            if error is None and self._preempted_by is not None:
                loop.println(f'Preempted by {self._preempted_by} after training: exiting with '
                             f'status {PREEMPTED_EXIT_CODE}')
                raise TrainingPreempted(PREEMPTED_EXIT_CODE)
        finally:
            self._step_schedules = []
            self._saver = None


def _check_signal(sig: str | int) -> int:
    try:
        return int(signal.Signals[sig] if isinstance(sig, str) else signal.Signals(sig))
    except (KeyError, ValueError):
        raise ValueError(f'`preemption_signals` must hold signal names or numbers such as '
                         f"'SIGTERM', got {sig!r}") from None
