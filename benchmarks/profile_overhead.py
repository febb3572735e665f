"""Where tfsnippet's time goes outside the training step, and what that much Python costs.

Two sections; the first needs ``py-spy`` (``pip install py-spy``), the
second needs nothing more than the benchmarks do.

1. **A sampling profile** (py-spy, Python frames only).  For each case a
   child process runs one contestant again and again for ``--seconds``
   under ``py-spy record --format raw``; the samples taken inside the
   child's timed loop are split into those inside the step function (the
   ``tf.function`` call, with TensorFlow's own Python around it) and those
   outside, and the functions outside are ranked by their share of all
   the samples (inclusive: a function and what it calls; self: the
   function's own lines).  The cases are the eager ``Trainer`` (a log
   line per epoch) against a bare ``for`` loop on the digits MLP of
   ``bench_trainer.py``, and ``TrainLoop`` under ``MirroredStrategy``
   (two logical CPUs) against the bare ``strategy.run`` loop of
   ``bench_distributed.py``.  py-spy pauses the child for each sample, so
   the child runs a little slower than unprofiled; the shares are what
   the profile is for.

2. **The same amount of Python, not the Trainer's.**  The Trainer's own
   Python is timed warm (a step function that does nothing, same steps
   per epoch): so many µs a step and so many an epoch.  A hand-written
   loop then runs, after each step and at each epoch end, generic Python
   (a walk over a list of small dicts) calibrated to take just as long
   warm.  The bare loop, that loop and the Trainer run in alternating
   quads on the MLP, and each one's extra time per step over the bare
   loop is printed: when the padded hand loop pays about what the
   Trainer pays, the Trainer's cost is the price of running that much
   Python between two calls of a real step (caches and branch predictors
   cold after the step, the step slower after the Python), not any one
   thing it does.

Usage: ``python benchmarks/profile_overhead.py [--quick] [--seconds S]
[--rate HZ] [--top N] [--case all|trainer|mirrored] [--no-profile]``.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _bench import (describe_machine, format_table, paired_ratio,  # noqa: E402
                    time_alternating, whole_call)

#: the child's timed loop: samples are counted only below this frame
ROOT = '_profiled_runs'
#: frames that belong to calling a ``tf.function`` (the step itself)
STEP_FILES = ('polymorphic_function.py', 'traceback_utils.py')
EPOCHS = {'trainer': 20, 'mirrored': 3}
QUICK_EPOCHS = 2   # the Trainer case's runs with --quick (section 2)
MARK = 'PROFILED '   # the child's line of figures (py-spy prints to the same stdout)


# ------------------------------------------------------------ reading a profile
@dataclass
class Profile:
    """The samples of one contestant's timed loop, split at the step function."""

    total: int = 0
    in_step: int = 0
    inclusive: collections.Counter = field(default_factory=collections.Counter)
    own: collections.Counter = field(default_factory=collections.Counter)

    @property
    def outside(self) -> int:
        """Samples outside the step function."""
        return self.total - self.in_step

    def share(self, samples: int) -> float:
        """`samples` as a fraction of all the samples of the timed loop."""
        return samples / self.total if self.total else 0.


def _frame_name(frame: str) -> str:
    # 'func (path/to/file.py:123)' -> 'func (path/to/file.py)'
    return re.sub(r':\d+\)$', ')', frame)


def read_profile(lines: Iterable[str], root: str = ROOT,
                 step_files: tuple[str, ...] = STEP_FILES) -> Profile:
    """Sum py-spy's raw (collapsed-stack) output: one ``frame;frame;... count``
    a line, outermost frame first.  Stacks without a `root` frame are left
    out; a stack below `root` with a frame from one of `step_files` counts
    as inside the step, the others are added to each function they pass
    through (once a stack) and to the innermost one's own count.

    Raises:
        ValueError: A line does not end in a sample count.
    """
    profile = Profile()
    marker = root + ' ('
    for number, line in enumerate(lines, 1):
        line = line.rstrip('\n')
        if not line:
            continue
        stack, _, count = line.rpartition(' ')
        if not count.isdigit():
            raise ValueError(f'line {number} of the profile does not end in a sample count: '
                             f'{line[:80]!r}')
        frames = stack.split(';')
        at = next((i for i, f in enumerate(frames) if f.startswith(marker)), None)
        if at is None:
            continue
        n = int(count)
        profile.total += n
        below = [_frame_name(f) for f in frames[at + 1:]]
        if any(f.endswith(tail + ')') or (tail + ':') in f
               for f in below for tail in step_files):
            profile.in_step += n
            continue
        if not below:   # the timed loop's own line
            below = [_frame_name(frames[at])]
        for name in dict.fromkeys(below):
            profile.inclusive[name] += n
        profile.own[below[-1]] += n
    return profile


# ------------------------------------------------------------ the cases
class TrainerCase:
    """The digits MLP (64-128-10, SGD) of ``bench_trainer.py``, eager; `epochs` a run."""

    def __init__(self, epochs: int = EPOCHS['trainer']) -> None:
        import tfsnippet as spt
        from bench_trainer import eager_mlp

        self.batches, model, _, self.step = eager_mlp()
        self.steps_per_epoch = len(self.batches)
        self.epochs = epochs
        self.spt, self.variables = spt, model.trainable_variables

    def bare(self, step: Callable[..., Any] | None = None,
             pad: Callable[[], Any] | None = None, epoch_pad: Callable[[], Any] | None = None
             ) -> None:
        """The hand-written loop; `pad` runs after each step and `epoch_pad` at each epoch end."""
        step = step or self.step
        for _ in range(self.epochs):
            for bx, by in self.batches:
                step(bx, by)
                if pad is not None:
                    pad()
            if epoch_pad is not None:
                epoch_pad()

    def trainer(self, step: Callable[..., Any] | None = None) -> None:
        """The same epochs driven by ``Trainer``, with a log line per epoch."""
        with self.spt.TrainLoop(self.variables, max_epoch=self.epochs,
                                print_func=lambda line: None) as loop:
            trainer = self.spt.Trainer(loop, step or self.step, data_flow=self.batches)
            trainer.log_after_epochs(1)
            trainer.run()


def _mirrored_case() -> Any:
    import tensorflow as tf

    cpu = tf.config.list_physical_devices('CPU')[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    from bench_distributed import Job
    job = Job(tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1']))
    job.bare(1)   # trace and build
    job.train_loop(1)
    return job


def _contestants(case: str) -> tuple[dict[str, Callable[[], Any]], int]:
    """``{'bare': run, 'tfsnippet': run}`` of `case` and the steps of one run."""
    if case == 'trainer':
        c = TrainerCase()
        return {'bare': c.bare, 'tfsnippet': c.trainer}, EPOCHS[case] * c.steps_per_epoch
    job = _mirrored_case()
    epochs = EPOCHS[case]
    return ({'bare': lambda: job.bare(epochs), 'tfsnippet': lambda: job.train_loop(epochs)},
            epochs * job.steps_per_epoch)


def _profiled_runs(run: Callable[[], Any], seconds: float) -> int:
    """Call `run` until `seconds` have passed; how many times it ran."""
    start, runs = time.perf_counter(), 0
    while not runs or time.perf_counter() - start < seconds:
        run()
        runs += 1
    return runs


def child_main(case: str, contestant: str, seconds: float) -> int:
    runs, steps = _contestants(case)
    run = runs[contestant]
    run()   # warm-up, outside the profiled frame
    start = time.perf_counter()
    count = _profiled_runs(run, seconds)
    elapsed = time.perf_counter() - start
    print(MARK + json.dumps({"runs": count, "us_per_step": elapsed / (count * steps) * 1e6}),
          flush=True)
    return 0


def profile_contestant(py_spy: str, case: str, contestant: str, seconds: float,
                       rate: int) -> tuple[Profile, float]:
    """Run one contestant under py-spy; its profile and µs a step (profiled)."""
    with tempfile.TemporaryDirectory() as tmp:
        raw = os.path.join(tmp, 'profile.txt')
        cmd = [py_spy, 'record', '--format', 'raw', '--rate', str(rate), '--output', raw,
               '--', sys.executable, os.path.abspath(__file__), '--child', case, contestant,
               '--seconds', str(seconds)]
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              encoding='utf-8', timeout=seconds * 4 + 300)
        if proc.returncode != 0 or not os.path.exists(raw):
            raise RuntimeError(f'py-spy failed ({proc.returncode}): {proc.stderr[-2000:]}')
        marked = [line for line in proc.stdout.splitlines() if line.startswith(MARK)]
        if not marked:
            raise RuntimeError(f'the profiled child printed no figures: {proc.stdout[-2000:]}')
        figures = json.loads(marked[-1][len(MARK):])
        with open(raw, encoding='utf-8') as f:
            return read_profile(f), figures['us_per_step']


def print_profile(case: str, profiles: dict[str, tuple[Profile, float]], top: int) -> None:
    rows = []
    for name, (p, us) in profiles.items():
        rows.append([name, str(p.total), f'{100 * p.share(p.in_step):.2f}%',
                     f'{100 * p.share(p.outside):.2f}%', f'{us:.1f}',
                     f'{p.share(p.outside) * us:.1f}'])
    print(format_table(['contestant', 'samples', 'in the step', 'outside', 'µs/step (profiled)',
                        'outside µs/step'], rows, 'lrrrrr'))
    p, us = profiles['tfsnippet']
    for title, counter in (('inclusive', p.inclusive), ('self', p.own)):
        print(f'\n  tfsnippet, outside the step, top {top} by {title} samples '
              f'(% of all the samples of its run; µs a step at the profiled speed):')
        rows = [[f'{100 * p.share(n):.2f}%', f'{p.share(n) * us:.2f}', name]
                for name, n in counter.most_common(top)]
        print(format_table(['share', 'µs/step', 'function (file)'], rows, 'rrl'))
    print()


# ------------------------------------------------------------ the same Python, padded
class Pad:
    """Generic Python work of a chosen warm duration: a walk over small dicts."""

    def __init__(self) -> None:
        self._items = [{'a': i, 'b': str(i), 'c': [i, i + 1]} for i in range(4096)]
        self._count = 0
        self.unit = self._time_unit()

    def _walk(self) -> int:
        total = 0
        for item in self._items[:self._count]:
            total += item['a'] + len(item['c'])
        return total

    def _time_unit(self) -> float:
        self._count = len(self._items)
        best = min(_warm_seconds(self._walk, 20) for _ in range(5))
        return best / len(self._items)

    def sized(self, seconds: float) -> Callable[[], int]:
        """A function that walks as many dicts as take `seconds` warm."""
        pad = Pad.__new__(Pad)
        pad._items, pad.unit = self._items, self.unit
        pad._count = max(0, min(len(self._items), round(seconds / self.unit)))
        return pad._walk


def _warm_seconds(fn: Callable[[], Any], calls: int) -> float:
    """Seconds per call of `fn`, over `calls` back-to-back calls."""
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - start) / calls


def trainer_warm_cost(case: TrainerCase, rounds: int) -> tuple[float, float]:
    """The Trainer's own Python, warm: (seconds a step, seconds an epoch end).

    A step function that returns a constant tensor (no TensorFlow work) is
    driven by the bare loop and by the Trainer, and timed with a timestamp
    at each call; the Trainer's median gap between steps of one epoch and
    its median gap across an epoch end, minus the bare loop's, are its cost.
    """
    import tensorflow as tf

    result = {'loss': tf.constant(1.5)}
    stamps: list[float] = []

    def noop(*batch: Any) -> dict[str, Any]:
        stamps.append(time.perf_counter())
        return result

    gaps: dict[str, dict[str, list[float]]] = {}
    for name, run in (('bare', case.bare), ('trainer', case.trainer)) * rounds:
        stamps.clear()
        run(noop)
        inner, ends = gaps.setdefault(name, {'step': [], 'epoch': []}).values()
        for i in range(1, len(stamps)):
            (ends if i % case.steps_per_epoch == 0 else inner).append(stamps[i] - stamps[i - 1])
    bare, trainer = gaps['bare'], gaps['trainer']
    step = statistics.median(trainer['step']) - statistics.median(bare['step'])
    epoch = statistics.median(trainer['epoch']) - statistics.median(bare['epoch'])
    return max(step, 0.), max(epoch - step, 0.)


def padded_section(quads: int, warm_rounds: int, epochs: int = EPOCHS['trainer']) -> None:
    case = TrainerCase(epochs)
    step_cost, epoch_cost = trainer_warm_cost(case, warm_rounds)
    pad = Pad()
    step_pad, epoch_pad = pad.sized(step_cost), pad.sized(epoch_cost)
    print(f"  the Trainer's own Python, warm (no-op step): {step_cost * 1e6:.2f} µs a step, "
          f'{epoch_cost * 1e6:.1f} µs more at an epoch end')
    print(f'  the padding: {pad.unit * 1e9:.0f} ns a dict walked warm; '
          f'{_warm_seconds(step_pad, 2000) * 1e6:.2f} µs after each step, '
          f'{_warm_seconds(epoch_pad, 200) * 1e6:.1f} µs at each epoch end\n')
    runs = {'bare': case.bare, 'padded hand loop': lambda: case.bare(pad=step_pad,
                                                                       epoch_pad=epoch_pad),
            'Trainer': case.trainer}
    for run in runs.values():
        run()
    samples = time_alternating({k: whole_call(v) for k, v in runs.items()}, quads, quads=True,
                               cpu_clock=time.thread_time)
    steps = epochs * case.steps_per_epoch
    base = samples['bare']
    rows = []
    for name, s in samples.items():
        # the median of the quads' differences: each quad's runs were made side by side
        extra = statistics.median(c - b for b, c in zip(base.wall, s.wall)) / steps * 1e6
        if name == 'bare':
            rows.append([name, f'{s.median / steps * 1e6:.1f}', '', '', ''])
            continue
        ratio = paired_ratio(base, s, higher_is_better=True)   # a ratio of speeds
        low, high = ratio.interval
        rows.append([name, f'{s.median / steps * 1e6:.1f}', f'{extra:+.1f}',
                     f'{ratio.median:.3f}', f'{low:.3f}-{high:.3f}'])
    print(format_table(['loop', 'µs/step', 'extra µs/step', 'speed vs bare',
                        '95% interval'], rows, 'lrrrr'))
    print(f'  ({quads} quads of {epochs}-epoch runs: the median quad, and the '
          f'medians of the quads\' differences and ratios against the bare loop)\n')


# ------------------------------------------------------------ main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--quick', action='store_true', help='smoke sizes, not figures')
    parser.add_argument('--case', choices=['all', 'trainer', 'mirrored'], default='all')
    parser.add_argument('--seconds', type=float, default=None,
                        help='profiled seconds per contestant (default 90; 2 with --quick)')
    parser.add_argument('--rate', type=int, default=100, help='py-spy samples a second')
    parser.add_argument('--top', type=int, default=20, help='functions listed')
    parser.add_argument('--no-profile', action='store_true', help='only the padded section')
    parser.add_argument('--child', nargs=2, metavar=('CASE', 'CONTESTANT'), help=argparse.SUPPRESS)
    args = parser.parse_args()
    seconds = args.seconds if args.seconds is not None else (2. if args.quick else 90.)
    if args.child:
        return child_main(args.child[0], args.child[1], seconds)

    print('Where tfsnippet spends time outside the step'
          f'{" (--quick: smoke sizes, not figures)" if args.quick else ""}')
    print(describe_machine())
    print()
    cases = ['trainer', 'mirrored'] if args.case == 'all' else [args.case]
    py_spy = shutil.which('py-spy') or shutil.which(
        'py-spy', path=os.path.dirname(sys.executable))
    if args.no_profile:
        pass
    elif py_spy is None:
        print('1. Profile: skipped, py-spy is not installed (pip install py-spy)\n')
    else:
        print(f'1. Profile: py-spy record --format raw --rate {args.rate}, {seconds:g} s a '
              'contestant, Python frames only\n')
        for case in cases:
            title = {'trainer': f'eager Trainer vs bare loop, digits MLP, {EPOCHS[case]}-epoch '
                                'runs',
                     'mirrored': f'TrainLoop under MirroredStrategy (2 logical CPUs) vs bare '
                                 f'strategy.run loop, {EPOCHS[case]}-epoch runs'}[case]
            print(f'-- {title}', flush=True)
            profiles = {name: profile_contestant(py_spy, case, name, seconds, args.rate)
                        for name in ('bare', 'tfsnippet')}
            print_profile(case, profiles, args.top)
    if 'trainer' in cases:
        print('2. The same amount of Python, not the Trainer\'s (eager, digits MLP)\n',
              flush=True)
        padded_section(quads=2 if args.quick else 15, warm_rounds=2 if args.quick else 20,
                       epochs=QUICK_EPOCHS if args.quick else EPOCHS['trainer'])
    return 0


if __name__ == '__main__':
    sys.exit(main())
