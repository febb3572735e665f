"""Duration formatting and a progress-based ETA estimator."""

from __future__ import annotations

import os
import sys
import time
import warnings
from collections.abc import Callable
from types import FrameType

__all__ = ['humanize_duration', 'ETA', 'warn_user']

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def warn_user(message: str, category: type[Warning] = UserWarning) -> None:
    """Issue a warning attributed to the first caller outside tfsnippet."""
    level = 1
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(
            _PACKAGE_DIR + os.sep):
        frame = frame.f_back
        level += 1
    warnings.warn(message, category, stacklevel=level + 1)

_EPS = sys.float_info.epsilon
_UNITS = ((86400, 'd', ' day'), (3600, 'h', ' hour'), (60, 'm', ' minute'))


def humanize_duration(seconds: float, short_units: bool = True) -> str:
    """Format a duration in seconds as readable text.

    Whole days, hours and minutes are split off first; what remains is shown
    as seconds with 4 significant digits (left out when it is zero and a
    larger unit was shown).  A negative duration reads as "... ago".

    Args:
        seconds: The duration.
        short_units: ``1h 2m 3s`` (the default) or ``1 hour 2 minutes 3 seconds``.

    Example:
        >>> humanize_duration(172799)
        '1d 23h 59m 59s'
        >>> humanize_duration(120, short_units=False)
        '2 minutes'
        >>> humanize_duration(0.5, short_units=False)
        '0.5 second'
    """
    seconds = float(seconds)
    suffix = ' ago' if seconds < 0 else ''
    rest = abs(seconds)
    pieces = []
    for size, short, long in _UNITS:
        if rest >= size:
            n = int(rest // size)
            rest -= n * size
            if short_units:
                pieces.append(f'{n}{short}')
            else:
                pieces.append(f'{n}{long}{"s" if n != 1 else ""}')
    if rest > _EPS or not pieces:
        text = f'{rest:.4g}'
        if short_units:
            pieces.append(f'{text}s')
        else:
            # singular up to one second, as in the classic version ("0.5 second")
            pieces.append(f'{text} second{"s" if rest > 1 else ""}')
    return ' '.join(pieces) + suffix


class ETA:
    """Estimates the time left from snapshots of ``(progress, time)``.

    The estimate extrapolates linearly from the *first* snapshot:
    ``(now - t0) / (p - p0) * (1 - p)``.

    Args:
        take_initial_snapshot: Record progress 0 at construction time.
        clock: The time source, ``time.perf_counter`` by default.  Pass a
            fake clock in tests.

    Example:
        >>> eta = ETA(take_initial_snapshot=False)
        >>> eta.take_snapshot(0., now=0.)
        >>> eta.get_eta(.25, now=1.)
        3.0
    """

    __slots__ = ('_clock', '_times', '_progresses')

    def __init__(self, take_initial_snapshot: bool = True,
                 clock: Callable[[], float] = time.perf_counter):
        self._clock = clock
        self._times: list[float] = []
        self._progresses: list[float] = []
        if take_initial_snapshot:
            self.take_snapshot(0.)

    def take_snapshot(self, progress: float, now: float | None = None) -> None:
        """Record `progress` at time `now` (default: the clock).

        Ignored unless it is the first snapshot or the progress moved more
        than 0.001 past the last one.
        """
        if not self._progresses or progress - self._progresses[-1] > .001:
            self._times.append(self._clock() if now is None else now)
            self._progresses.append(progress)

    def get_eta(self, progress: float, now: float | None = None,
                take_snapshot: bool = True) -> float | None:
        """Return the estimated seconds left, or ``None`` if not known yet.

        Args:
            progress: The progress now, in ``[0, 1]``.
            now: The time now (default: the clock).
            take_snapshot: Also record this progress as a snapshot.
        """
        if now is None:
            now = self._clock()
        eta = None
        if self._progresses:
            dp = progress - self._progresses[0]
            if dp >= 1e-7:
                eta = (now - self._times[0]) / dp * (1. - progress)
        if take_snapshot:
            self.take_snapshot(progress, now)
        return eta
