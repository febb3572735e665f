"""The loop component that saves a checkpoint and exits when the process is told to stop."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from ...utils.status import PREEMPTED_EXIT_CODE
from .base import LoopComponent

__all__ = ['Preemption', 'TrainingPreempted', 'PREEMPTED_EXIT_CODE', 'check_signal',
           'SLURM_SIGNAL_ENV', 'REQUEUE_TIMEOUT']

SLURM_SIGNAL_ENV = 'TFSNIPPET_SLURM_SIGNAL'
"""Variable naming the signal a SLURM cluster sends ahead of the time limit (``SIGUSR1``
by default), read by :meth:`Preemption.for_cluster`."""

REQUEUE_TIMEOUT = 60.
"""Seconds ``scontrol requeue`` may take before it counts as failed."""

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

    **SLURM** sends a signal ahead of the time limit when the job asks for
    one (``#SBATCH --signal=USR1@90``: ``SIGUSR1`` 90 seconds before) and
    expects the job to requeue itself.  With `requeue`, after a signal it
    names the chief saves the checkpoint, then runs ``scontrol requeue
    $SLURM_JOB_ID`` (the ``scontrol`` found on ``PATH``; the job needs
    ``#SBATCH --requeue``), says so, and exits 143; the requeued job keeps its
    id and resumes from the checkpoint.  A failed ``scontrol`` is printed
    and warned about, and the process still exits 143 (the checkpoint is
    saved).  Under SLURM, :meth:`for_cluster` (what
    ``TrainLoop(checkpoint_dir=...)`` adds) handles ``SIGTERM`` (save and
    exit) and ``SIGUSR1`` (save, requeue and exit).

    ``TrainLoop(checkpoint_dir=...)`` adds ``Preemption.for_cluster()``; to
    choose other signals, build the loop without `checkpoint_dir` and add
    ``Preemption(...)`` before a ``Checkpointer(..., preemption_signals=())``,
    so that it exits after the final save.

    Args:
        signals: Signal names or numbers.
        checkpointer: The checkpointer to save through (default: the loop's).
        requeue: ``True`` to requeue the SLURM job after any of `signals`, or
            the signals (names or numbers, among `signals`) after which to
            requeue it; ``False`` (or empty) never.

    Raises:
        ValueError: A signal is not a signal name or number, or a `requeue`
            signal is not among `signals`.

    Example:
        >>> import signal
        >>> from tfsnippet.scaffold.components.preemption import Preemption
        >>> p = Preemption(signals=('SIGTERM', 'SIGUSR1'), requeue=('SIGUSR1',))
        >>> [signal.Signals(s).name for s in p.requeue_signals]
        ['SIGUSR1']
    """

    role = 'preemption'

    def __init__(self, signals: Sequence[str | int] = ('SIGTERM',), checkpointer: Any = None,
                 requeue: bool | Sequence[str | int] = False):
        self._signals = [check_signal(sig, 'signals') for sig in signals]
        if isinstance(requeue, bool):
            self._requeue = list(self._signals) if requeue else []
        elif isinstance(requeue, (str, int)) or not isinstance(requeue, Sequence):
            raise TypeError(f'`requeue` must be True, False or a sequence of signals, '
                            f'got {requeue!r}')
        else:
            self._requeue = [check_signal(sig, 'requeue') for sig in requeue]
            strays = [signal.Signals(s).name for s in self._requeue if s not in self._signals]
            if strays:
                raise ValueError(f'`requeue` must name signals among `signals` '
                                 f'{[signal.Signals(s).name for s in self._signals]}, got '
                                 f'{strays}')
        self._checkpointer = checkpointer
        self._saver_of_loop: Any = None
        self._previous_handlers: dict[int, Any] = {}
        self._preempted_by: str | None = None

    @classmethod
    def for_cluster(cls, environ: Mapping[str, str] | None = None,
                    checkpointer: Any = None) -> Preemption:
        """The preemption handling of the cluster this process runs in.

        Under SLURM (``SLURM_JOB_ID`` is set): ``SIGTERM`` saves and exits;
        the signal named by ``TFSNIPPET_SLURM_SIGNAL`` (``SIGUSR1`` by
        default, for ``#SBATCH --signal=USR1@90``) saves, requeues the job
        and exits.  Elsewhere (the local launcher, Kubernetes, Vertex AI,
        which all send ``SIGTERM`` before they kill a process): ``SIGTERM``.

        Args:
            environ: The variables to read; ``os.environ`` by default.
            checkpointer: As for :class:`Preemption`.

        Raises:
            ValueError: ``TFSNIPPET_SLURM_SIGNAL`` is no signal.
        """
        env = os.environ if environ is None else environ
        if not env.get('SLURM_JOB_ID', '').strip():
            return cls(('SIGTERM',), checkpointer=checkpointer)
        name = env.get(SLURM_SIGNAL_ENV, '').strip().upper() or 'SIGUSR1'
        name = name if name.startswith('SIG') or name.isdigit() else f'SIG{name}'
        try:
            sig = check_signal(int(name) if name.isdigit() else name)
        except ValueError:
            raise ValueError(f'`{SLURM_SIGNAL_ENV}` must be a signal name such as SIGUSR1, '
                             f'got {env[SLURM_SIGNAL_ENV]!r}') from None
        signals = ['SIGTERM'] + ([] if sig == signal.SIGTERM else [sig])
        return cls(signals, checkpointer=checkpointer, requeue=[sig])

    @property
    def signals(self) -> list[int]:
        """The signal numbers handled."""
        return list(self._signals)

    @property
    def requeue_signals(self) -> list[int]:
        """The signal numbers after which the SLURM job is requeued."""
        return list(self._requeue)

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
        if self._requeue and not os.environ.get('SLURM_JOB_ID', '').strip():
            warnings.warn(f'`Preemption(requeue=...)` requeues the SLURM job after '
                          f'{", ".join(signal.Signals(s).name for s in self._requeue)}, but '
                          f'`SLURM_JOB_ID` is not set (not under SLURM): a preemption will '
                          f'save and exit without requeueing', RuntimeWarning, stacklevel=6)
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
        requeued = self._requeue_job(loop) if self._requeue_wanted(signal_name) else ''
        loop.println(f'Preempted by {self._preempted_by} at epoch {loop.epoch}, step '
                     f'{loop.step}: saved checkpoint {path}; {requeued}exiting with status '
                     f'{PREEMPTED_EXIT_CODE}, the '
                     f'{"requeued job" if requeued.startswith("requeued") else "next start"} '
                     f'resumes from it')
        raise TrainingPreempted(PREEMPTED_EXIT_CODE)

    def _requeue_wanted(self, signal_name: str) -> bool:
        try:
            return int(signal.Signals[signal_name]) in self._requeue
        except KeyError:   # agreed from another worker: that worker's chief decides
            return bool(self._requeue)

    def _requeue_job(self, loop: Any) -> str:
        """Run ``scontrol requeue $SLURM_JOB_ID`` on the chief; what to say about it."""
        job = os.environ.get('SLURM_JOB_ID', '').strip()
        if not job or not loop.is_chief:
            return ''
        command = ['scontrol', 'requeue', job]
        problem = None
        if shutil.which('scontrol') is None:
            problem = '`scontrol` is not on PATH'
        else:
            try:
                done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True,
                                      timeout=REQUEUE_TIMEOUT)
                if done.returncode != 0:
                    problem = (f'`{" ".join(command)}` exited with status {done.returncode}: '
                               f'{done.stdout.strip()[-300:]}')
            except subprocess.TimeoutExpired:
                problem = f'`{" ".join(command)}` took more than {REQUEUE_TIMEOUT:g} s'
            except OSError as e:
                problem = f'`{" ".join(command)}` failed: {e}'
        if problem is None:
            return f'requeued SLURM job {job}; '
        message = (f'could not requeue SLURM job {job}: {problem} (the job needs '
                   f'`#SBATCH --requeue`; requeue it from the batch script instead)')
        warnings.warn(message, RuntimeWarning, stacklevel=2)
        return f'{message}; '

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        for sig, previous in self._previous_handlers.items():
            signal.signal(sig, previous)
        self._previous_handlers = {}
        if error is None and self._preempted_by is not None:
            loop.println(f'Preempted by {self._preempted_by} after training: exiting with '
                         f'status {PREEMPTED_EXIT_CODE}')
            raise TrainingPreempted(PREEMPTED_EXIT_CODE)


def check_signal(sig: str | int, arg_name: str = 'preemption_signals') -> int:
    """The number of signal `sig` (a name such as ``'SIGTERM'`` or a number), an
    item of the argument `arg_name`.

    Raises:
        ValueError: `sig` is no signal.
    """
    try:
        return int(signal.Signals[sig] if isinstance(sig, str) else signal.Signals(sig))
    except (KeyError, ValueError):
        raise ValueError(f'`{arg_name}` must hold signal names or numbers such as '
                         f"'SIGTERM', got {sig!r}") from None
