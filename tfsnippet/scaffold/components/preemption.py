"""The loop component that saves a checkpoint and exits when the process is told to stop."""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence
from typing import Any

from ...utils.status import PREEMPTED_EXIT_CODE
from .base import LoopComponent

__all__ = ['Preemption', 'TrainingPreempted', 'PREEMPTED_EXIT_CODE', 'check_signal']

class TrainingPreempted(SystemExit):
    """Raised out of the loop after a preemption signal, once the checkpoint is saved.

    It is a ``SystemExit`` with :data:`PREEMPTED_EXIT_CODE`: uncaught, the
    process exits with that status, and the next start resumes from the
    checkpoint.
    """


class Preemption(LoopComponent):
    """Saves a checkpoint at the next step or epoch boundary after a signal, then exits 143.

    While the loop is entered (in the main thread), the `signals`
    (``SIGTERM`` by default: what Kubernetes, SLURM and spot instances send
    before they kill a process) make the loop save a checkpoint through the
    loop's :class:`~tfsnippet.Checkpointer` (pinned among the best if it
    enters them) at the next step or epoch boundary, say so, and raise
    :class:`TrainingPreempted` (exit status 143); the next start resumes
    exactly there.  A signal after the last step raises it when the loop is
    left.  Under multi-worker training a signal received by any worker is
    agreed on at the next sync point, where every worker saves (the chief
    writes) and exits at the same step.

    ``TrainLoop(checkpoint_dir=...)`` adds one for ``SIGTERM``; add it before
    the :class:`~tfsnippet.Checkpointer` so that it exits after the final save.

    Args:
        signals: Signal names or numbers.
        checkpointer: The checkpointer to save through (default: the loop's).

    Raises:
        ValueError: A signal is not a signal name or number.
    """

    role = 'preemption'

    def __init__(self, signals: Sequence[str | int] = ('SIGTERM',), checkpointer: Any = None):
        self._signals = [check_signal(sig) for sig in signals]
        self._checkpointer = checkpointer
        self._saver_of_loop: Any = None
        self._previous_handlers: dict[int, Any] = {}
        self._preempted_by: str | None = None

    @property
    def signals(self) -> list[int]:
        """The signal numbers handled."""
        return list(self._signals)

    @property
    def preempted_by(self) -> str | None:
        """The name of the preemption signal received, or ``None``."""
        return self._preempted_by

    def on_enter(self, loop: Any) -> None:
        checkpointer = self._checkpointer or loop.component('checkpointer')
        if checkpointer is None:
            raise RuntimeError('`Preemption` saves through a Checkpointer: the loop has none '
                               '(pass `checkpoint_dir`)')
        checkpointer.use_preemption(self)
        self._saver_of_loop = checkpointer
        self._preempted_by = None
        # a signal on any worker is agreed on by all of them (at once with one worker)
        loop.decisions.register('preempt', read=lambda: self._preempted_by is not None,
                                apply=lambda agreed: self._on_preempt_agreed(loop, agreed))
        if threading.current_thread() is threading.main_thread():
            for sig in self._signals:
                self._previous_handlers[sig] = signal.signal(
                    sig, lambda signum, frame: self._on_signal(loop, signum))

    def _on_signal(self, loop: Any, signum: int) -> None:
        # runs in the main thread between two bytecodes: only note it; the save
        # waits for the next step or epoch boundary (or sync point)
        if self._preempted_by is None:
            self._preempted_by = signal.Signals(signum).name
            loop.decisions.request()

    def _on_preempt_agreed(self, loop: Any, agreed: float) -> None:
        if agreed:
            self.preempt(loop, self._preempted_by or 'a signal to another worker')

    def preempt(self, loop: Any, signal_name: str) -> None:
        """Save a checkpoint now, say so and raise :class:`TrainingPreempted`."""
        self._preempted_by = signal_name
        path = self._saver_of_loop.save_now(loop)
        loop.println(f'Preempted by {self._preempted_by} at epoch {loop.epoch}, step '
                     f'{loop.step}: saved checkpoint {path}; exiting with status '
                     f'{PREEMPTED_EXIT_CODE}, the next start resumes from it')
        raise TrainingPreempted(PREEMPTED_EXIT_CODE)

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        for sig, previous in self._previous_handlers.items():
            signal.signal(sig, previous)
        self._previous_handlers = {}
        if error is None and self._preempted_by is not None:
            loop.println(f'Preempted by {self._preempted_by} after training: exiting with '
                         f'status {PREEMPTED_EXIT_CODE}')
            raise TrainingPreempted(PREEMPTED_EXIT_CODE)


def check_signal(sig: str | int) -> int:
    """The number of signal `sig` (a name such as ``'SIGTERM'`` or a number).

    Raises:
        ValueError: `sig` is no signal.
    """
    try:
        return int(signal.Signals[sig] if isinstance(sig, str) else signal.Signals(sig))
    except (KeyError, ValueError):
        raise ValueError(f'`preemption_signals` must hold signal names or numbers such as '
                         f"'SIGTERM', got {sig!r}") from None
