"""Helpers of the benchmark scripts: the machine, alternating timed runs, rows, one table printer.

Scripts in this directory put it on ``sys.path`` themselves and import it as
``_bench``.  The pieces:

* :func:`describe_machine` and :func:`load_average`, printed at the start and
  the end of every run;
* :class:`Stopwatch` and :func:`time_alternating`: run several contestants
  in turn (baseline, candidate, baseline, candidate, ...) so that a change of
  the machine's load hits them alike, or in mirrored quads (baseline,
  candidate, candidate, baseline, then candidate, baseline, baseline,
  candidate) so that the position in a round cancels too, and keep each
  one's wall and CPU times as :class:`Samples` (with :attr:`Samples.best`
  and :attr:`Samples.median`);
* :func:`paired_ratio`: the per-round ratios of two contestants, their
  median, quartiles and the 95% confidence interval of the median
  (:class:`PairedRatio`), and whether a target is met by all of that
  interval, by none of it, or is unclear;
* :class:`Row`, one line of the combined table of ``run_all.py``, which the
  scripts hand over as JSON with :func:`write_rows` and :func:`read_rows`;
* :func:`format_table`, the one way a table is printed.

Example:
    >>> from _bench import Row, format_table, time_alternating, whole_call
    >>> samples = time_alternating({'sum': whole_call(lambda: sum(range(1000))),
    ...                             'len': whole_call(lambda: len(range(1000)))}, repeats=3)
    >>> len(samples['sum'].wall), samples['len'].best <= samples['len'].median
    (3, True)
    >>> print(format_table(('case', 'ms'), [('a', '1.00'), ('longer', '10.00')], align='lr'))
    case       ms
    ------  -----
    a        1.00
    longer  10.00
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ['cpu_model', 'core_count', 'load_average', 'describe_machine', 'Stopwatch',
           'Samples', 'Run', 'whole_call', 'time_alternating', 'PairedRatio', 'paired_ratio',
           'StepTimeline', 'timeline_rounds',
           'Row', 'write_rows',
           'read_rows', 'met_text', 'format_table']


# ------------------------------------------------------------------ the machine
def cpu_model() -> str:
    """The CPU's model name, from /proc/cpuinfo where there is one."""
    try:
        with open('/proc/cpuinfo', encoding='utf-8') as f:
            for line in f:
                if line.lower().startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or 'unknown'


def core_count() -> str:
    """The number of cores, and how many this process may use if fewer."""
    total = os.cpu_count()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:   # not on Linux
        usable = total or 0
    return f'{total}' if usable == total else f'{total} ({usable} usable by this process)'


def load_average() -> str:
    """The 1/5/15-minute load averages, as text."""
    try:
        return ', '.join(f'{x:.2f}' for x in os.getloadavg())
    except OSError:
        return 'unknown'


def describe_machine(tensorflow: bool = True, extra: Mapping[str, str] | None = None) -> str:
    """Python (and TensorFlow, Keras, numpy) versions, CPU, cores, GPUs and load, as text.

    Args:
        tensorflow: Also give the TensorFlow, Keras and numpy versions and
            the number of GPUs (this imports TensorFlow).
        extra: Further ``{label: text}`` lines, after the versions.
    """
    lines = [('Python', f'{platform.python_version()} ({platform.python_implementation()})')]
    gpus = ''
    if tensorflow:
        import numpy as np
        import tensorflow as tf
        try:
            import keras
            keras_version = keras.__version__
        except ImportError:
            keras_version = 'not installed'
        lines.append(('TensorFlow', f'{tf.__version__}   Keras {keras_version}   '
                                    f'numpy {np.__version__}'))
        gpus = f'; {len(tf.config.list_physical_devices("GPU"))} GPU(s)'
    lines += list((extra or {}).items())
    lines.append(('CPU', f'{cpu_model()}, {core_count()} cores{gpus}'))
    lines.append(('load avg', f'{load_average()} (1/5/15 min) at start'))
    return '\n'.join(f'  {label:<10}  {text}' for label, text in lines)


# ----------------------------------------------------------------------- timing
class Stopwatch:
    """The wall-clock and CPU time of one run, measured by ``with watch:``.

    The wall time is what benchmarks report and judge.  The CPU time leaves
    out the time the process waited for a core that another process held,
    which inflates the wall time on a busy machine.  `cpu_clock` is
    ``time.process_time`` (all threads, TensorFlow's included) or
    ``time.thread_time`` (the calling thread only, for single-threaded loops).

    A run may enter the stopwatch several times; the times add up.
    """

    __slots__ = ('_cpu_clock', '_wall0', '_cpu0', 'wall', 'cpu')

    def __init__(self, cpu_clock: Callable[[], float] = time.process_time):
        self._cpu_clock = cpu_clock
        self._wall0 = self._cpu0 = 0.
        self.wall = 0.
        self.cpu = 0.

    def __enter__(self) -> Stopwatch:
        self._cpu0 = self._cpu_clock()
        self._wall0 = time.perf_counter()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.wall += time.perf_counter() - self._wall0
        self.cpu += self._cpu_clock() - self._cpu0


@dataclass
class Samples:
    """The wall and CPU times of the repeated runs of one contestant, in run order."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    #: The wall time of every single run, when a sample is the mean of several
    #: (the quads of :func:`time_alternating`); empty otherwise.
    single: list[float] = field(default_factory=list)

    @property
    def best(self) -> float:
        """The shortest wall time of a single run: the best estimate of an intrinsic
        cost, since disturbances from other processes only add time."""
        return min(self.single or self.wall)

    @property
    def median(self) -> float:
        """The median wall time."""
        return statistics.median(self.wall)

    @property
    def cpu_best(self) -> float:
        """The shortest CPU time."""
        return min(self.cpu)

    @property
    def cpu_median(self) -> float:
        """The median CPU time."""
        return statistics.median(self.cpu)

    def scaled(self, factor: float) -> Samples:
        """Every time multiplied by `factor` (e.g. ``1e6 / steps`` for µs per step)."""
        return Samples([v * factor for v in self.wall], [v * factor for v in self.cpu],
                       [v * factor for v in self.single])


Run = Callable[[Stopwatch], Any]
"""One run of a contestant: it does its set-up, then its timed part inside
``with watch:``, then any checks (only the ``with`` block is timed)."""


def whole_call(fn: Callable[[], Any]) -> Run:
    """A :data:`Run` that times the whole call of `fn`."""

    def run(watch: Stopwatch) -> Any:
        with watch:
            return fn()

    return run


def time_alternating(runs: Mapping[str, Run], repeats: int, *,
                     cpu_clock: Callable[[], float] = time.process_time,
                     collect_garbage: bool = True, mirror: bool = False,
                     quads: bool = False) -> dict[str, Samples]:
    """Run the contestants in turn, `repeats` rounds, and time each run.

    With ``{'bare': a, 'loop': b}`` the order is a, b, a, b, ...: a change
    of the machine's load during the measurement hits both alike.  With
    ``mirror=True`` every other round runs in reverse order (a, b, b, a,
    a, b, ...), so that neither contestant always runs first, right after
    the other's garbage or with its caches warm; a steady drift of the load
    then cancels out of the ratio of a round pair.  One contestant alone is
    simply timed `repeats` times.

    With ``quads=True`` each round is itself mirrored and runs every
    contestant twice: a, b, b, a, then b, a, a, b in the next round, and so
    on; a round's sample of a contestant is the mean of its two runs.  Both
    contestants then hold the same mean position in every round, so a steady
    drift of the load and the effect of running first or second in a pair
    cancel out of each round's ratio, and the contestant running on the
    outside alternates between rounds (each run's times are kept in
    :attr:`Samples.single`).

    Args:
        runs: ``{name: run}``, in the order of each round; each run gets a
            fresh :class:`Stopwatch` and times its work inside ``with watch:``.
        repeats: How many rounds.
        cpu_clock: The CPU clock of the stopwatches.
        collect_garbage: Call ``gc.collect()`` before each run, so that no
            run pays for the garbage of the one before.  The objects alive
            when the rounds start are frozen meanwhile (``gc.freeze()``), so
            that a collection walks only what the runs made, not every
            object of TensorFlow, Keras and the rest (most of a second each
            in a process that imported them).
        mirror: Reverse the order of every other round.
        quads: Make each round a mirrored quad (see above); not with `mirror`.

    Returns:
        ``{name: Samples}`` in seconds per run (per round's mean with `quads`).

    Raises:
        ValueError: `runs` is empty, `repeats` is below 1, or both `mirror`
            and `quads` are set.
    """
    if not runs:
        raise ValueError(f'`runs` must name at least one contestant, got {dict(runs)!r}')
    if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f'`repeats` must be a positive int, got {repeats!r}')
    if mirror and quads:
        raise ValueError('`mirror` and `quads` cannot both be set: quads are mirrored rounds '
                         'of their own, got mirror=True and quads=True')
    out = {name: Samples() for name in runs}
    order = list(runs.items())
    if collect_garbage:    # (the garbage of before is frozen too: collected after)
        gc.freeze()
    try:
        _rounds(out, order, repeats, cpu_clock, collect_garbage, mirror, quads)
    finally:
        if collect_garbage:
            gc.unfreeze()
    return out


def _rounds(out: dict[str, Samples], order: list[tuple[str, Run]], repeats: int,
            cpu_clock: Callable[[], float], collect_garbage: bool, mirror: bool,
            quads: bool) -> None:
    """`time_alternating`'s rounds, their samples added to `out`."""

    def timed(run: Run) -> Stopwatch:
        if collect_garbage:
            gc.collect()
        watch = Stopwatch(cpu_clock)
        run(watch)
        return watch

    for round_ in range(repeats):
        if quads:
            first = order[::-1] if round_ % 2 else order
            walls: dict[str, list[float]] = {name: [] for name in out}
            cpus: dict[str, list[float]] = {name: [] for name in out}
            for name, run in first + first[::-1]:
                watch = timed(run)
                walls[name].append(watch.wall)
                cpus[name].append(watch.cpu)
            for name in out:
                out[name].wall.append(statistics.fmean(walls[name]))
                out[name].cpu.append(statistics.fmean(cpus[name]))
                out[name].single.extend(walls[name])
            continue
        for name, run in (order[::-1] if mirror and round_ % 2 else order):
            watch = timed(run)
            out[name].wall.append(watch.wall)
            out[name].cpu.append(watch.cpu)


@dataclass(frozen=True)
class PairedRatio:
    """How a candidate compares with a baseline over rounds of alternating runs.

    Each round gives one ratio, candidate time / baseline time (or, with
    ``higher_is_better``, baseline time / candidate time, a ratio of speeds),
    taken from runs made side by side, so a change of the machine's load
    between rounds cancels out of it.  The median of these ratios is the
    figure; their quartiles say how much one round varies, and the 95%
    confidence interval of the median whether a target is decided: met when
    the whole interval meets it, missed when none of it does, unclear
    otherwise.

    Attributes:
        ratios: One ratio per round, in run order.
        best: The ratio of the best (shortest) single runs of each contestant.
    """

    ratios: tuple[float, ...]
    best: float

    @property
    def median(self) -> float:
        """The median of the per-round ratios."""
        return statistics.median(self.ratios)

    @property
    def quartiles(self) -> tuple[float, float]:
        """The first and third quartiles of the per-round ratios."""
        if len(self.ratios) < 2:
            return self.ratios[0], self.ratios[0]
        q = statistics.quantiles(self.ratios, n=4, method='inclusive')
        return q[0], q[2]

    @property
    def spread(self) -> float:
        """The interquartile range relative to the median (0.01 is 1%)."""
        low, high = self.quartiles
        return (high - low) / self.median

    @property
    def interval(self) -> tuple[float, float]:
        """A 95% confidence interval of the median ratio, from the order statistics
        of the per-round ratios (no assumption on their distribution): the
        ratios of ranks ``(n - 1.96 sqrt(n)) / 2`` and the same from the top.
        Narrower than the quartiles once there are more than about 16 rounds;
        with fewer, the quartiles."""
        n = len(self.ratios)
        k = int((n - 1.96 * math.sqrt(n)) / 2)
        ordered = sorted(self.ratios)
        q_low, q_high = self.quartiles
        if n < 2 or k < 0:
            return q_low, q_high
        return max(ordered[k], q_low), min(ordered[n - 1 - k], q_high)

    def decide(self, at_least: float | None = None, at_most: float | None = None) -> str:
        """``'yes'``, ``'no'`` or ``'unclear'``: whether the target (a bound on the
        ratio) is met by all, none, or part of :attr:`interval` (the 95%
        confidence interval of the median ratio)."""
        if (at_least is None) == (at_most is None):
            raise ValueError(f'give exactly one of `at_least` and `at_most`, got '
                             f'{at_least!r} and {at_most!r}')
        low, high = self.interval
        if at_least is not None:
            return 'yes' if low >= at_least else ('no' if high < at_least else 'unclear')
        assert at_most is not None
        return 'yes' if high <= at_most else ('no' if low > at_most else 'unclear')

    def text(self) -> str:
        """``median (95% CI low-high) best B``, for a table cell."""
        low, high = self.interval
        return f'{self.median:.3f} ({low:.3f}-{high:.3f}) best {self.best:.3f}'

    def quartiles_text(self) -> str:
        """``Q1-Q3``, for a table cell."""
        low, high = self.quartiles
        return f'{low:.3f}-{high:.3f}'


def paired_ratio(baseline: Samples, candidate: Samples, *,
                 higher_is_better: bool = False, cpu: bool = False) -> PairedRatio:
    """The :class:`PairedRatio` of two contestants timed by one :func:`time_alternating`.

    Args:
        baseline: The baseline's wall times, one per round.
        candidate: The candidate's, of the same rounds.
        higher_is_better: Compare speeds (baseline time / candidate time)
            rather than times (candidate / baseline).
        cpu: Compare the CPU times of the rounds (and their best) instead of
            the wall times.

    Raises:
        ValueError: The two hold different numbers of rounds, or none.
    """
    base, cand = (baseline.cpu, candidate.cpu) if cpu else (baseline.wall, candidate.wall)
    if len(base) != len(cand) or not base:
        raise ValueError(f'`baseline` and `candidate` must hold the same rounds, got '
                         f'{len(base)} and {len(cand)} runs')
    base_best, cand_best = (min(base), min(cand)) if cpu else (baseline.best, candidate.best)
    if higher_is_better:
        return PairedRatio(tuple(b / c for b, c in zip(base, cand)), base_best / cand_best)
    return PairedRatio(tuple(c / b for b, c in zip(base, cand)), cand_best / base_best)


def timeline_rounds(rounds: int) -> int:
    """How many rounds a script's :class:`StepTimeline` pass runs: a third of its
    timed rounds, at least 2."""
    return max(2, rounds // 3)


class StepTimeline:
    """Where a run's wall time goes, from timestamps taken around each call of its step.

    :meth:`wrap` gives the step function with a timestamp before and after
    each call; ``with timeline.run():`` around a whole run then splits the
    run's time into four parts (seconds, one dict per run in :attr:`runs`):
    ``'step'``, the calls themselves; ``'between steps'``, the time from one
    call's end to the next call's start inside an epoch; ``'epoch ends'``,
    the same gaps across an epoch boundary (every `steps_per_epoch` calls);
    ``'before and after'``, from the run's start to the first call and from
    the last call to the run's end.  The parts add up to the run's time.
    Two contestants timed alike (each with its own timeline) show what one
    of them spends outside the step function, and whether its steps
    themselves got slower.
    """

    PARTS = ('step', 'between steps', 'epoch ends', 'before and after')

    def __init__(self, steps_per_epoch: int, clock: Callable[[], float] = time.perf_counter):
        if isinstance(steps_per_epoch, bool) or not isinstance(steps_per_epoch, int) or \
                steps_per_epoch < 1:
            raise ValueError(f'`steps_per_epoch` must be a positive int, got {steps_per_epoch!r}')
        self.steps_per_epoch = steps_per_epoch
        self._clock = clock
        self.runs: list[dict[str, float]] = []
        self._starts: list[float] = []
        self._ends: list[float] = []

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """`fn`, timestamped at each call's start and end."""
        starts, ends, clock = self._starts, self._ends, self._clock

        def timed(*args: Any, **kwargs: Any) -> Any:
            starts.append(clock())
            try:
                return fn(*args, **kwargs)
            finally:
                ends.append(clock())

        return timed

    @contextlib.contextmanager
    def run(self) -> Iterator[None]:
        """Time one run: the calls of the wrapped step made inside the block."""
        starts, ends = self._starts, self._ends
        starts.clear()
        ends.clear()
        begin = self._clock()
        yield
        finish = self._clock()
        if not starts:
            raise RuntimeError('the run made no call of the wrapped step function')
        inside = sum(e - s for s, e in zip(starts, ends))
        between = epoch_ends = 0.
        for i in range(1, len(starts)):
            gap = starts[i] - ends[i - 1]
            if i % self.steps_per_epoch:
                between += gap
            else:
                epoch_ends += gap
        self.runs.append({'step': inside, 'between steps': between, 'epoch ends': epoch_ends,
                          'before and after': (starts[0] - begin) + (finish - ends[-1])})

    def medians(self) -> dict[str, float]:
        """The median of each part over the runs (seconds per run)."""
        return {part: statistics.median(r[part] for r in self.runs) for part in self.PARTS}


# ---------------------------------------------------------------- result rows
@dataclass(frozen=True)
class Row:
    """One figure against its baseline: a line of ``run_all.py``'s table.

    Attributes:
        case: What was measured.
        baseline: The name of what it is compared with.
        baseline_value: The baseline's figure.
        value: tfsnippet's figure, in the same unit.
        unit: E.g. ``'µs/step'``, ``'ms'``, ``'batches/s'``.
        target: The target, as text (empty without one).
        met: Whether the target is met (None without a target).
    """

    case: str
    baseline: str
    baseline_value: float
    value: float
    unit: str
    target: str = ''
    met: bool | None = None

    @property
    def ratio(self) -> float:
        """``value / baseline_value`` (infinite for a zero baseline)."""
        return self.value / self.baseline_value if self.baseline_value else float('inf')

    def to_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict, its ratio included."""
        return {'case': self.case, 'baseline': self.baseline,
                'baseline_value': self.baseline_value, 'value': self.value,
                'unit': self.unit, 'ratio': self.ratio, 'target': self.target,
                'met': self.met}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Row:
        """The row of :meth:`to_json`'s dict (its ratio is recomputed)."""
        return cls(data['case'], data['baseline'], data['baseline_value'], data['value'],
                   data['unit'], data.get('target', ''), data.get('met'))


def quick_arguments(doc: str | None) -> argparse.Namespace:
    """The command line of a benchmark with a smoke-run mode: ``--quick`` and
    ``--table-json PATH``; `doc` is the script's docstring (its first line
    describes the script)."""
    parser = argparse.ArgumentParser(description=(doc or '').splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='smoke-run sizes (not figures)')
    parser.add_argument('--table-json', metavar='PATH', help='also write the rows as JSON')
    return parser.parse_args()


def print_summary(table_text: str) -> None:
    """The end of a benchmark's output: its summary table."""
    print()
    print('Summary')
    print(table_text)


def finish(rows: Iterable[Row], table_json: str | None) -> int:
    """Print the load average at the end, write the rows for ``run_all.py``; the
    script's exit status."""
    print(f'\n  load avg    {load_average()} (1/5/15 min) at end')
    write_rows(table_json, rows)
    return 0


def write_rows(path: str | None, rows: Iterable[Row]) -> None:
    """Write `rows` as JSON for ``run_all.py`` (nothing without a path)."""
    if path:
        with open(path, 'w', encoding='utf-8') as f:
            json.dump([r.to_json() for r in rows], f)


def read_rows(path: str) -> list[Row]:
    """The rows that :func:`write_rows` wrote to `path`."""
    with open(path, encoding='utf-8') as f:
        return [Row.from_json(d) for d in json.load(f)]


# ----------------------------------------------------------------------- tables
def met_text(met: bool | None) -> str:
    """``'yes'``, ``'no'``, or ``''`` when there is no target."""
    return '' if met is None else ('yes' if met else 'no')


def format_table(header: Sequence[str], rows: Iterable[Sequence[str]], align: str) -> str:
    """A plain-text table: the header, a rule of dashes, then the rows.

    Columns are two spaces apart and as wide as their widest cell; trailing
    spaces are dropped, so an empty last cell leaves no trace.

    Args:
        header: The column titles.
        rows: The cells of each row, as text, one per column.
        align: One letter per column, ``'l'`` (left) or ``'r'`` (right).

    Raises:
        ValueError: `align` or a row does not have one entry per column, or
            `align` holds a letter other than ``l`` and ``r``.
    """
    if len(align) != len(header) or set(align) - {'l', 'r'}:
        raise ValueError(f'`align` must be one of "l"/"r" per column ({len(header)}), '
                         f'got {align!r}')
    cells = [tuple(header)]
    for r in rows:
        if len(r) != len(header):
            raise ValueError(f'each row must have {len(header)} cells, got {tuple(r)!r}')
        cells.append(tuple(r))
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]

    def line(row: Sequence[str]) -> str:
        return '  '.join(c.ljust(w) if a == 'l' else c.rjust(w)
                         for c, w, a in zip(row, widths, align)).rstrip()

    return '\n'.join([line(cells[0]), '  '.join('-' * w for w in widths)]
                     + [line(c) for c in cells[1:]])
