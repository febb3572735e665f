"""The loop component that records a TensorFlow profiler trace and breaks the epoch time down."""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import tensorflow as tf

from ...storage import Location, check_bucket, resolve
from ...utils.events import EventHandle
from ...utils.files import check_writable_dir
from ...utils.validation import short_repr
from ..event_keys import EventKeys
from ..metrics.console import MetricGroup
from .base import LoopComponent

__all__ = ['Profiler', 'BREAKDOWN_PARTS']

#: The parts of the time breakdown, in the order printed: ``(metric name, label)``.
#: Each metric is that part's share of the epoch, in ``[0, 1]``.
BREAKDOWN_PARTS = (
    ('time_share_data', 'data wait'),
    ('time_share_step', 'user step'),
    ('time_share_outside', 'outside steps'),
    ('time_share_checkpoint', 'checkpoint saves'),
    ('time_share_summaries', 'summaries'),
    ('time_share_loop', 'loop bookkeeping'),
)

#: How the shares read on a log line: one ``time share`` entry, in the order above.
_LINE_ENTRY = MetricGroup('time share', {name: name[len('time_share_'):]
                                         for name, _ in BREAKDOWN_PARTS},
                          lambda share: f'{share:.0%}')


def _check_window(window: Any, arg: str) -> tuple[int, int] | None:
    if window is None:
        return None
    if not isinstance(window, (tuple, list)) or len(window) != 2 or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in window):
        raise TypeError(f'`{arg}` must be a pair of ints (start, stop), got {short_repr(window)}')
    start, stop = window
    if start < 1:
        raise ValueError(f'`{arg}` must start at 1 or later (counters start at 1), got '
                         f'{short_repr(window)}')
    if stop < start:
        raise ValueError(f'`{arg}`={short_repr(window)} ends before it starts: give '
                         f'(start, stop) with start <= stop')
    return int(start), int(stop)


class Profiler(LoopComponent):
    """Records a TensorFlow profiler trace of some steps or epochs, and the
    time breakdown of each epoch.

    ``loop.add_component(spt.Profiler(steps=(10, 20)))`` traces steps 10 to
    20 (both included; ``epochs=(2, 2)`` traces epoch 2) with
    ``tf.profiler.experimental.start``/``stop`` into the loop's summary folder
    (``plugins/profile/<run>/``, opened by TensorBoard's Profile tab), or
    into `logdir`.  Nothing is traced outside the window.  In TF1 graph code
    the ops the session runs inside the window are traced by the same
    profiler.  Under a strategy, the chief traces.  A window is traced once:
    a run resumed after it does not trace it again (the checkpoint says it
    was done), and one resumed past its start without having traced it is
    an error.

    With `breakdown`, each epoch's time is split into the parts of
    :data:`BREAKDOWN_PARTS`: waiting for data in ``iter_steps``, the
    user's step (from a batch's arrival to the end of its step), the epoch
    body outside the steps (a validation), the time the loop was held by
    checkpoint saves and summary writes, and the loop's own bookkeeping
    (the rest: its work between two epochs, a component's handlers; its
    microsecond or two per step counts as data wait).  The epoch of the
    breakdown runs from the previous epoch's report (the first time: the
    epoch's start) to this one's: its epoch-level ``print_logs()``, or the
    end of the epoch if it prints none; a save after the report counts in
    the next epoch.  The shares (each in
    ``[0, 1]``, summing to 1) are collected as the metrics
    ``time_share_data``... so the summaries and every sink receive them;
    the epoch line shows them as one entry, ``time share: data 10%, step
    80%, outside 5%, checkpoint 3%, summaries 1%, loop 1%``, and
    `print_breakdown` also prints one line of percentages and seconds.
    The clock is read only at the boundaries the loop passes (each step's
    start and end, the step loop's, the epoch's); without
    `breakdown` the component adds nothing per step.

    Args:
        steps: ``(start, stop)``, the global steps to trace.
        epochs: ``(start, stop)``, the epochs to trace (instead of `steps`).
        logdir: Where the trace goes (default: the loop's summary folder).
        breakdown: Measure and collect the time breakdown of each epoch.
        print_breakdown: Also print it, one line per epoch (implies `breakdown`).
        name: The key of the state (whether the window was traced) in checkpoints.

    Raises:
        TypeError: A window is not a pair of ints.
        ValueError: A window ends before it starts or starts before 1, both
            `steps` and `epochs` are given, or there is nothing to do
            (neither a window nor a breakdown).
    """

    role = 'profiler'

    def __init__(self, steps: tuple[int, int] | None = None, *,
                 epochs: tuple[int, int] | None = None, logdir: str | None = None,
                 breakdown: bool = False, print_breakdown: bool = False,
                 name: str = 'profiler'):
        if steps is not None and epochs is not None:
            raise ValueError(f'Give one of `steps` and `epochs`, got steps={short_repr(steps)} '
                             f'and epochs={short_repr(epochs)}')
        self._steps = _check_window(steps, 'steps')
        self._epochs = _check_window(epochs, 'epochs')
        if logdir is not None and not isinstance(logdir, (str, os.PathLike)):
            raise TypeError(f'`logdir` must be a directory path or None, got {short_repr(logdir)}')
        for arg, flag in (('breakdown', breakdown), ('print_breakdown', print_breakdown)):
            if not isinstance(flag, bool):
                raise TypeError(f'`{arg}` must be a bool, got {short_repr(flag)}')
        if not isinstance(name, str) or not name:
            raise TypeError(f'`name` must be a non-empty str, got {short_repr(name)}')
        self._breakdown = breakdown or print_breakdown
        self._print = print_breakdown
        if self._steps is None and self._epochs is None and not self._breakdown:
            raise ValueError('`Profiler` has nothing to do: give `steps=(start, stop)` or '
                             '`epochs=(start, stop)` to trace, and/or `breakdown=True`')
        self._logdir = None if logdir is None else os.fspath(logdir)
        self._bucket: Location | None = None     # the trace folder when it is a URL
        self._staging: str | None = None         # where the trace is written meanwhile
        self._name = name
        self._traced = False     # the window was traced (kept in checkpoints)
        self._tracing = False
        self._trace_dir: str | None = None
        self._handle: EventHandle | None = None
        # the breakdown: the clock, the last boundary, the parts so far
        self._clock: Any = None
        self._mark = self._start = 0.
        self._started = False
        self._data = self._step = self._outside = self._checkpoint = self._summaries = 0.
        self._reported_epoch = 0
        #: the last epoch's breakdown, ``{metric name: share}`` and ``'seconds'``
        self.last_breakdown: dict[str, float] | None = None
        self._ungroup: Any = None   # undoes the one-entry form of the shares on log lines

    @property
    def state_key(self) -> str:
        return self._name if (self._steps or self._epochs) else ''

    @property
    def window(self) -> tuple[str, tuple[int, int]] | None:
        """``('steps', (start, stop))``, ``('epochs', (start, stop))`` or ``None``."""
        if self._steps is not None:
            return 'steps', self._steps
        if self._epochs is not None:
            return 'epochs', self._epochs
        return None

    @property
    def traced(self) -> bool:
        """Whether the window has been traced (in this run or one it resumed)."""
        return self._traced

    @property
    def trace_dir(self) -> str | None:
        """The folder the trace is written to (known once the loop is entered)."""
        return self._trace_dir

    # ------------------------------------------------------------ the trace
    def _find_logdir(self, loop: Any) -> str:
        if self._logdir is not None:
            return self._logdir
        summaries = loop.component('summaries')
        folder = getattr(summaries, 'summary_dir', None) if summaries is not None else None
        if folder is None:
            raise ValueError(
                '`Profiler` writes its trace into a summary folder, and the loop has none: '
                'pass `logdir=` to the Profiler, or make the loop with `summary_dir=`')
        return str(folder)

    def _start_trace(self, loop: Any) -> None:
        assert self._trace_dir is not None
        target = self._trace_dir
        if self._bucket is not None:   # the profiler writes local files: staged, then uploaded
            self._staging = target = tempfile.mkdtemp(prefix='tfsnippet-profile-')
        try:
            tf.profiler.experimental.start(target)
        except (tf.errors.OpError, RuntimeError, ValueError) as e:
            raise RuntimeError(
                f'Could not start the TensorFlow profiler into {self._trace_dir!r} (is another '
                f'trace running?): {type(e).__name__}: {e}') from e
        self._tracing = True

    def _stop_trace(self, loop: Any, complete: bool = True) -> None:
        self._tracing = False
        tf.profiler.experimental.stop()
        self._traced = True
        if self._staging is not None and self._bucket is not None:
            staging, self._staging = self._staging, None
            try:   # the trace's files, whole, under the bucket's folder
                self._bucket.fs.put(staging.rstrip('/') + '/', self._bucket.path, recursive=True)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        kind, (start, stop) = self.window   # type: ignore[misc]
        last = stop if complete else getattr(loop, kind[:-1])   # left inside the window
        what = f'{kind} {start}-{last}'
        loop.println(f'Profiler trace of {what} written to '
                     f'{self._trace_dir}/plugins/profile (TensorBoard: '
                     f'the Profile tab)')

    def _before_step(self, loop: Any) -> None:
        if loop.step >= self._steps[0]:   # type: ignore[index]
            self._swap(loop, EventKeys.AFTER_STEP, self._after_step)
            self._start_trace(loop)

    def _after_step(self, loop: Any) -> None:
        if loop.step >= self._steps[1]:   # type: ignore[index]
            self._swap(loop, None, None)
            self._stop_trace(loop)

    def _before_epoch(self, loop: Any) -> None:
        if loop.epoch >= self._epochs[0]:   # type: ignore[index]
            self._swap(loop, EventKeys.AFTER_EPOCH, self._after_epoch)
            self._start_trace(loop)

    def _after_epoch(self, loop: Any) -> None:
        if loop.epoch >= self._epochs[1]:   # type: ignore[index]
            self._swap(loop, None, None)
            self._stop_trace(loop)

    def _swap(self, loop: Any, key: Any, handler: Any) -> None:
        if self._handle is not None:
            self._handle.remove()
            self._handle = None
        if key is not None:
            self._handle = self.subscribe(loop, key, handler)

    # ------------------------------------------------------------ the breakdown
    def _on_held(self, loop: Any, cause: str, seconds: float) -> None:
        if not self._started:
            return
        if cause == 'checkpoint':
            self._checkpoint += seconds
        elif cause == 'summaries':
            self._summaries += seconds
        # (another cause: left to the loop's bookkeeping, the rest)
        self._mark += seconds   # out of the interval open now (data, step, outside)

    def _bd_before_epoch(self, loop: Any) -> None:
        if not self._started:   # the first epoch's breakdown starts with it
            self._started = True
            self._start = self._mark = self._clock()
        else:   # since the last report (a save aside): the loop's, the rest of its share
            self._mark = self._clock()

    def _bd_before_steps(self, loop: Any) -> None:
        if self._started:
            now = self._clock()
            self._outside += now - self._mark
            self._mark = now

    # the two per-step handlers: one clock read, two additions
    def _bd_before_step(self, loop: Any) -> None:
        now = self._clock()
        self._data += now - self._mark
        self._mark = now

    def _bd_after_step(self, loop: Any) -> None:
        now = self._clock()
        self._step += now - self._mark
        self._mark = now

    def _bd_after_steps(self, loop: Any) -> None:
        if self._started:
            now = self._clock()
            self._data += now - self._mark
            self._mark = now

    def _bd_printing(self, loop: Any) -> None:
        if not loop.within_step:
            self._report(loop)

    def _bd_after_epoch(self, loop: Any) -> None:
        self._report(loop)

    def _report(self, loop: Any) -> None:
        if not self._started or self._reported_epoch == loop.epoch:
            return
        self._reported_epoch = loop.epoch
        now = self._clock()
        self._outside += now - self._mark
        total = now - self._start
        parts = [self._data, self._step, self._outside, self._checkpoint, self._summaries]
        parts.append(total - sum(parts))
        shares = {name: (part / total if total > 0 else 0.)
                  for (name, _), part in zip(BREAKDOWN_PARTS, parts)}
        self.last_breakdown = {**shares, 'seconds': total}
        self._start = self._mark = now
        self._data = self._step = self._outside = self._checkpoint = self._summaries = 0.
        loop.collect_metrics(shares)
        if self._print:
            text = ', '.join(f'{label} {share:.1%} ({part:.3g} s)' for (name, label), share, part
                             in zip(BREAKDOWN_PARTS, shares.values(), parts))
            loop.println(f'Time breakdown of epoch {loop.epoch} ({total:.3g} s): {text}')

    # ------------------------------------------------------------ hooks
    def on_enter(self, loop: Any) -> None:
        window = self.window
        if window is not None:
            kind, (start, stop) = window
            location = resolve(self._find_logdir(loop), argument='logdir')
            self._trace_dir = location.url
            self._bucket = None if location.is_local else location
            reached = loop.step if kind == 'steps' else loop.epoch
            if not self._traced and reached >= start:
                raise ValueError(
                    f'`{kind}`=({start}, {stop}) lies in the past: the loop resumed at '
                    f'{kind[:-1]} {reached}, and the window was not traced; give a window '
                    f'after it, e.g. {kind}=({reached + 1}, {reached + 1 + stop - start})')
            if not self._traced and loop.is_chief:
                if self._bucket is None:
                    check_writable_dir(self._trace_dir, 'logdir')
                else:
                    check_bucket(self._bucket, 'logdir')
                if kind == 'steps':
                    self._handle = self.subscribe(loop, EventKeys.BEFORE_STEP, self._before_step)
                else:
                    self._handle = self.subscribe(loop, EventKeys.BEFORE_EPOCH,
                                                  self._before_epoch)
        if self._breakdown:
            self._ungroup = loop.console.group(_LINE_ENTRY)
            self._clock = loop.clock
            self._started = False
            self._reported_epoch = loop.epoch
            self._data = self._step = self._outside = self._checkpoint = self._summaries = 0.
            for key, handler in (
                    (EventKeys.BEFORE_EPOCH, self._bd_before_epoch),
                    (EventKeys.BEFORE_STEPS, self._bd_before_steps),
                    (EventKeys.BEFORE_STEP, self._bd_before_step),
                    (EventKeys.AFTER_STEP, self._bd_after_step),
                    (EventKeys.AFTER_STEPS, self._bd_after_steps),
                    (EventKeys.LOGS_PRINTING, self._bd_printing),
                    (EventKeys.AFTER_EPOCH, self._bd_after_epoch),
                    (EventKeys.LOOP_HELD, self._on_held)):
                self.subscribe(loop, key, handler)

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        self._handle = None   # removed with the component's other handlers
        if self._ungroup is not None:
            self._ungroup()
            self._ungroup = None
        if self._tracing:   # left inside the window: keep what was traced
            self._stop_trace(loop, complete=False)

    def state_dict(self) -> dict[str, Any]:
        return {'traced': self._traced}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._traced = bool(state.get('traced', False))
