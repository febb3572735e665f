#!/usr/bin/env python
"""What does recording a TrainLoop into an Experiment's results store cost per step?

The same loop runs with and without an open :class:`tfsnippet.Experiment`:
epochs of 100 no-op steps, one ``loop.collect_metrics(loss=...)`` per
step, a validation loss and one ``loop.print_logs()`` per epoch (lines
sent nowhere), then ``loop.collect_results``.  Inside the Experiment the
loop's ``RunRecorder`` hands each epoch's statistics and the best value to
the store (SQLite, one transaction per write, in a temporary directory):

* ``flush_secs=0``: a write at the end of every epoch, the worst case;
* the default ``flush_secs`` (1 s): a write at the end of the first epoch
  a second after the last one (and when the loop is left).

The Experiment's automatic checkpoints are off (``auto_checkpoint=False``):
what is measured is recording, not saving weights.  The figure is the
difference in µs per step against the loop without an Experiment, best
of the repeats (contestants alternate, so a change of load hits all
alike); target: at most 5 µs per step.  It is a benchmark, not a test: it
exits 0 whether or not the target is met.

Usage: ``python benchmarks/bench_recording.py [--quick] [--table-json PATH]``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from _bench import (Row, Stopwatch, describe_machine, format_table,  # noqa: E402
                    load_average, met_text, time_alternating, write_rows)
from _shared import lean_experiment, quick_parser, scratch_dir  # noqa: E402

import tfsnippet as spt  # noqa: E402

TARGET_US = 5.0
STEPS_PER_EPOCH = 100
SIZES = {'full': {'epochs': 100, 'repeats': 9}, 'quick': {'epochs': 2, 'repeats': 1}}


def make_loop(epochs: int) -> Any:
    return spt.TrainLoop([], max_epoch=epochs, print_func=lambda line: None)


def train(loop: Any, watch: Stopwatch) -> None:
    data = range(STEPS_PER_EPOCH)
    with watch:
        with loop:
            for epoch in loop.iter_epochs():
                for step, _ in loop.iter_steps(data):
                    loop.collect_metrics(loss=0.5)
                loop.collect_metrics(valid_loss=1. / epoch)
                loop.print_logs()
            loop.collect_results(test_loss=0.25)


def main() -> None:
    args = quick_parser(__doc__.splitlines()[0], '2 epochs, 1 run each').parse_args()
    size = SIZES['quick' if args.quick else 'full']
    epochs, repeats = size['epochs'], size['repeats']
    steps = epochs * STEPS_PER_EPOCH
    print(describe_machine())
    print(f'{epochs} epochs x {STEPS_PER_EPOCH} steps per run, {repeats} runs each')

    with scratch_dir() as root:
        # the loops without an Experiment are made before it opens: no recorder
        bare: Iterator[Any] = iter([make_loop(epochs) for _ in range(repeats)])
        with lean_experiment(root, 'bench', auto_checkpoint=False) as exp:
            every: Iterator[Any] = iter([make_loop(epochs) for _ in range(repeats)])
            default: Iterator[Any] = iter([make_loop(epochs) for _ in range(repeats)])
            default_secs = exp.flush_secs

            def run_with(loops: Iterator[Any], flush_secs: float) -> Any:
                def run(watch: Stopwatch) -> None:
                    exp.flush_secs = flush_secs
                    train(next(loops), watch)
                return run

            samples = time_alternating({
                'bare': lambda watch: train(next(bare), watch),
                'every': run_with(every, 0.),
                'default': run_with(default, default_secs),
            }, repeats)
            recorded = exp.store.epochs('bench') if exp.store is not None else []
    if len(recorded) != epochs:   # every run records epochs 1..epochs into one run
        raise RuntimeError(f'the store holds {len(recorded)} epochs, expected {epochs}')

    per_step = {name: s.scaled(1e6 / steps) for name, s in samples.items()}
    base = per_step['bare'].best
    table, rows = [], []
    table.append(('TrainLoop, no Experiment', f'{base:.2f}', f'{per_step["bare"].median:.2f}',
                  '', '', ''))
    for name, label in (('every', 'in an Experiment, flush_secs=0 (a write per epoch)'),
                        ('default', f'in an Experiment, flush_secs={default_secs:g} (default)')):
        best = per_step[name].best
        diff = best - base
        met = diff <= TARGET_US
        table.append((label, f'{best:.2f}', f'{per_step[name].median:.2f}', f'{diff:+.2f}',
                      f'≤ {TARGET_US:g}', met_text(met)))
        rows.append(Row(f'recording a TrainLoop into the results store, {label}',
                        'the same TrainLoop without an Experiment', base, best, 'µs/step',
                        f'diff ≤ {TARGET_US:g} µs/step', met))
    print()
    print(f'Summary (µs per step, epochs of {STEPS_PER_EPOCH} steps; best and median of '
          f'{repeats} runs)')
    print(format_table(('case', 'best µs/step', 'median µs/step', 'difference µs/step',
                        'target', 'met'), table, align='lrrrll'))
    print(f'\nload avg    {load_average()} (1/5/15 min) at end')
    write_rows(args.table_json, rows)


if __name__ == '__main__':
    main()
