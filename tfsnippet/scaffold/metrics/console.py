"""The console side of the metrics: formatters and the loop's log line."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ...utils.misc import ETA, humanize_duration
from ...utils.statistics import StatisticsCollector
from ...utils.validation import check_bool
from .values import is_time_metric

if TYPE_CHECKING:  # pragma: no cover
    from ...backend.base import Backend

__all__ = ['MetricFormatter', 'DefaultMetricFormatter', 'MetricGroup', 'Console',
           'format_metric_stats']


def format_metric_stats(stats: Mapping[str, StatisticsCollector],
                        formatter: MetricFormatter,
                        groups: Iterable[MetricGroup] = ()) -> str:
    """``'name: mean (±stddev); ...'`` for the collectors that have values; the
    members of each of `groups` make one entry, where the first of them would be."""
    member_of = {name: group for group in groups for name in group.members}
    pieces = []
    printed: set[int] = set()
    for name in formatter.sort_metrics(stats):
        c = stats[name]
        if not c.has_value:
            continue
        group = member_of.get(name)
        if group is not None:
            if id(group) not in printed:   # its first member: the group's entry
                printed.add(id(group))
                pieces.append(group.format(stats))
            continue
        text = f'{name.replace("_", " ")}: {formatter.format_metric(name, c.mean)}'
        if c.counter > 1:
            text += f' (±{formatter.format_metric(name, c.stddev)})'
        pieces.append(text)
    return '; '.join(pieces)


class MetricFormatter:
    """Decides the order of metrics in a log line and how values read."""

    def sort_metrics(self, names: Iterable[str]) -> list[str]:
        """Return `names` in the order they should be printed."""
        raise NotImplementedError()

    def format_metric(self, name: str, value: Any) -> str:
        """Format one value (a mean or a standard deviation) of metric `name`."""
        raise NotImplementedError()


class DefaultMetricFormatter(MetricFormatter):
    """Time metrics (names ending in ``time``/``timer``) first, then the rest.

    Each group is sorted by name.  Time values read as durations
    (``0.0123s``, ``1m 5s``); other values use ``'{:.6g}'``.

    Example:
        >>> f = DefaultMetricFormatter()
        >>> f.sort_metrics(['loss', 'step_time', 'acc', 'epoch_time'])
        ['epoch_time', 'step_time', 'acc', 'loss']
        >>> f.format_metric('step_time', 65.), f.format_metric('loss', 0.1234567)
        ('1m 5s', '0.123457')
    """

    def sort_metrics(self, names: Iterable[str]) -> list[str]:
        return sorted(names, key=lambda n: (not is_time_metric(n), n))

    def format_metric(self, name: str, value: Any) -> str:
        if isinstance(value, np.ndarray) and value.ndim:
            value = np.mean(value)
        value = float(value)
        if is_time_metric(name):
            return humanize_duration(value, short_units=True)
        return f'{value:.6g}'


class MetricGroup:
    """Metrics printed as one entry of a log line: ``'label: a 80%, b 20%'``.

    Args:
        label: The entry's name.
        members: ``{metric name: its short name in the entry}``, in the order
            printed.
        format_value: Formats the mean of a member (its statistics over the
            line; a member without values is left out).
    """

    def __init__(self, label: str, members: Mapping[str, str],
                 format_value: Callable[[float], str]):
        self.label = label
        self.short = dict(members)
        self.members = list(self.short)
        self.format_value = format_value

    def format(self, stats: Mapping[str, StatisticsCollector]) -> str:
        """The entry of the members in `stats`."""
        values = ', '.join(f'{self.short[name]} {self.format_value(float(stats[name].mean))}'
                           for name in self.members
                           if name in stats and stats[name].has_value)
        return f'{self.label}: {values}'


class Console:
    """The loop's console line: the ``[Epoch e/E, Step s/S, ETA t]`` tag, the
    metric formatter, the ETA estimate and the function lines go to.

    Components that need the terminal (a progress bar) :meth:`wrap` the
    output instead of replacing ``print_func``.

    While the loop is entered (:meth:`enter`) on a worker that is not the
    chief, lines meant for the builtin ``print`` are dropped; another
    ``print_func`` (a logger, a list) still receives them.

    Args:
        print_func: Receives every line (``print``, ``logger.info``,
            ``lines.append``...).
        formatter: Orders and formats metrics in log lines.
        show_eta: Add the ETA to tagged lines when it can be estimated.
        clock: The time source of the ETA.
    """

    def __init__(self, print_func: Callable[[str], Any], formatter: MetricFormatter,
                 show_eta: bool, clock: Callable[[], float]):
        self.print_func = print_func
        if not isinstance(formatter, MetricFormatter):
            raise TypeError(f'`metric_formatter` must be a MetricFormatter, got {formatter!r}')
        self.formatter = formatter
        self.show_eta = check_bool(show_eta, 'show_eta')
        self._clock = clock
        self._eta: ETA | None = None
        self._wrappers: list[Callable[[Callable[[str], Any], str], Any]] = []
        self._groups: list[MetricGroup] = []
        self._muted = False   # a worker that is not the chief: the builtin print is silent

    def enter(self, backend: Backend) -> None:
        """Print as the role of this process in `backend` says (the loop is entered)."""
        self._muted = not backend.is_chief

    def leave(self) -> None:
        """Print again whatever the role (the loop is left)."""
        self._muted = False

    @property
    def print_func(self) -> Callable[[str], Any]:
        """The function receiving every printed line; settable."""
        return self._print_func

    @print_func.setter
    def print_func(self, func: Callable[[str], Any]) -> None:
        if not callable(func):
            raise TypeError(f'`print_func` must be callable, got {func!r}')
        self._print_func = func

    def wrap(self, wrapper: Callable[[Callable[[str], Any], str], Any]) -> Callable[[], None]:
        """Route lines through ``wrapper(print_func, line)``; return the undo function."""
        if not callable(wrapper):
            raise TypeError(f'`wrapper` must be callable, got {wrapper!r}')
        self._wrappers.append(wrapper)

        def unwrap() -> None:
            if wrapper in self._wrappers:
                self._wrappers.remove(wrapper)
        return unwrap

    def group(self, group: MetricGroup) -> Callable[[], None]:
        """Print the members of `group` as one entry of each log line (a
        component's family of metrics); return the undo function."""
        if not isinstance(group, MetricGroup):
            raise TypeError(f'`group` must be a MetricGroup, got {group!r}')
        self._groups.append(group)

        def ungroup() -> None:
            if group in self._groups:
                self._groups.remove(group)
        return ungroup

    def println(self, message: str) -> None:
        """Send `message` to `print_func`, through the wrappers (last added outermost)."""
        wrappers = self._wrappers
        output = self._print_func
        if self._muted and output is builtins.print:
            output = _silent
        if not wrappers:
            output(message)
            return

        def emit(line: str, depth: int = 0) -> None:
            if depth == len(wrappers):
                output(line)
            else:
                wrappers[depth](lambda text: emit(text, depth + 1), line)
        emit(message)

    # ------------------------------------------------------------ ETA
    def start_eta(self, progress: float | None) -> None:
        """Start estimating, with the fraction of training already done."""
        self._eta = ETA(take_initial_snapshot=False, clock=self._clock)
        if progress is not None:
            self._eta.take_snapshot(progress)

    def stop_eta(self) -> None:
        """Stop estimating (the loop was left)."""
        self._eta = None

    def eta(self, progress: float | None) -> float | None:
        """Seconds left at `progress`, or ``None`` when unknown."""
        if self._eta is None or progress is None:
            return None
        return self._eta.get_eta(progress)

    # ------------------------------------------------------------ lines
    def tag(self, epoch: int, max_epoch: int | None, step: int, max_step: int | None,
            eta: float | None) -> str:
        """``[Epoch e/E, Step s/S, ETA t]``: the epoch part is left out when
        ``max_epoch == 1``, each ``/max`` when there is no limit, and the ETA
        when it is unknown or not shown."""
        tags = []
        if max_epoch != 1:
            tags.append(f'Epoch {epoch}' if max_epoch is None else f'Epoch {epoch}/{max_epoch}')
        tags.append(f'Step {step}' if max_step is None else f'Step {step}/{max_step}')
        if self.show_eta and eta is not None:
            tags.append(f'ETA {humanize_duration(eta)}')
        return f'[{", ".join(tags)}]'

    def format_stats(self, stats: Mapping[str, StatisticsCollector]) -> str:
        """The metric part of a log line."""
        return format_metric_stats(stats, self.formatter, self._groups)


def _silent(line: str) -> None:
    """Where the lines of a worker that is not the chief go instead of ``print``."""
