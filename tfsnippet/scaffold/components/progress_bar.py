"""The loop component that shows a tqdm progress bar over each epoch's steps."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import tqdm

from ..event_keys import EventKeys
from .base import LoopComponent

__all__ = ['ProgressBar']


class ProgressBar(LoopComponent):
    """A tqdm progress bar over the steps of each epoch.

    While the bar is shown, the loop's printed lines are written above it
    (it wraps the loop's :attr:`~tfsnippet.TrainLoop.console` output in
    ``tqdm``'s external write mode), so ``print_logs`` output and the bar do
    not overwrite each other.  The bar's length is the number of
    steps of the previous epoch, or in the first epoch the number of batches
    of its data when that is known (a list, a DataFlow).

    On a terminal a printed line erases the bar and the bar is redrawn
    below it.  A stream that is not a tty (``file``, standard error by
    default, redirected to a log file or a pipe) cannot erase: there each
    line the loop prints first ends the bar's current state with a newline,
    so the bar's last state and the loop's line never share a line.  Pass
    ``disable=None`` to write no bar at all into a stream that is not a tty
    (tqdm's rule), so such a log holds the loop's lines alone.

    Args:
        leave: Keep each epoch's finished bar on screen.
        **tqdm_kwargs: Further arguments of ``tqdm.tqdm`` (``file``,
            ``mininterval``, ``disable``...).
    """

    def __init__(self, leave: bool = False, **tqdm_kwargs: Any):
        self._leave = leave
        self._kwargs = tqdm_kwargs
        self._terminal = True   # whether the bar's stream is a tty (known when it opens)
        self._bar: tqdm.tqdm | None = None
        self._unwrap: Callable[[], None] | None = None

    def on_enter(self, loop: Any) -> None:
        self._unwrap = loop.console.wrap(self._write)
        self.subscribe(loop, EventKeys.BEFORE_EPOCH, self._open)
        self.subscribe(loop, EventKeys.AFTER_STEP, self._update)
        self.subscribe(loop, EventKeys.AFTER_EPOCH, self._close)

    def _write(self, emit: Callable[[str], Any], line: str) -> None:
        bar = self._bar
        if bar is None or bar.disable:
            emit(line)
        elif self._terminal:
            with bar.external_write_mode():
                emit(line)
        else:   # a stream without `\r` erasing: end the bar's line, then the loop's
            bar.fp.write('\n')
            bar.fp.flush()
            emit(line)

    def _open(self, loop: Any) -> None:
        self._close(loop)
        stream = self._kwargs.get('file') or sys.stderr
        isatty = getattr(stream, 'isatty', None)
        self._terminal = bool(isatty is not None and isatty())
        total = None if loop.steps_per_epoch is None else int(round(loop.steps_per_epoch))
        desc = f'Epoch {loop.epoch}' + ('' if loop.max_epoch is None else f'/{loop.max_epoch}')
        self._bar = tqdm.tqdm(total=total, desc=desc, leave=self._leave, unit='step',
                              **self._kwargs)

    def _update(self, loop: Any) -> None:
        bar = self._bar
        if bar is not None:
            if bar.total is None and loop.progress.epoch_batches:   # the first epoch's length
                bar.total = loop.progress.epoch_batches
            bar.update(1)

    def _close(self, loop: Any) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        self._close(loop)
        if self._unwrap is not None:
            self._unwrap()
            self._unwrap = None
