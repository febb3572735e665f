#!/usr/bin/env python
"""What do the MixedPrecision and Profiler components cost per step while idle?

The same loop of no-op steps (one ``loop.collect_metrics(loss=0.5)`` per
step, one epoch-level ``loop.print_logs()`` per epoch, lines sent nowhere)
runs bare and with one component attached:

* ``MixedPrecision`` watching a built Keras ``LossScaleOptimizer`` (it reads
  the optimizer at each printed line, never per step);
* ``Profiler(steps=...)`` whose window lies after the run (one integer
  comparison per step before its window);
* ``Profiler(breakdown=True)`` (four clock reads per step, at the step's
  start and end).

The figure is the difference in µs per step against the bare loop, best
of the repeats (contestants alternate, so a change of load hits all
alike); target: at most 1 µs per step each.  It is a benchmark, not a
test: it exits 0 whether or not the targets are met.

Usage: ``python benchmarks/bench_components_mp_profiler.py [--quick] [--table-json PATH]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from _bench import (Row, Stopwatch, describe_machine, format_table,  # noqa: E402
                    load_average, met_text, time_alternating, write_rows)

import tfsnippet as spt  # noqa: E402

TARGET_US = 1.0
STEPS_PER_EPOCH = 1000
SIZES = {'full': {'epochs': 20, 'repeats': 9}, 'quick': {'epochs': 2, 'repeats': 2}}


def train(loop: Any, watch: Stopwatch) -> None:
    data = range(STEPS_PER_EPOCH)
    with watch:
        with loop:
            for _ in loop.iter_epochs():
                for _ in loop.iter_steps(data):
                    loop.collect_metrics(loss=0.5)
                loop.print_logs()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='smoke-run sizes (not figures)')
    parser.add_argument('--table-json', metavar='PATH', help='also write the rows as JSON')
    args = parser.parse_args()
    size = SIZES['quick' if args.quick else 'full']
    epochs, repeats = size['epochs'], size['repeats']
    steps = epochs * STEPS_PER_EPOCH
    print(describe_machine())
    print(f'{epochs} epochs x {STEPS_PER_EPOCH} steps per run, {repeats} runs each')

    import keras
    import tensorflow as tf
    var = tf.Variable(1.)
    optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
    optimizer.apply([tf.constant(0.)], [var])   # built: its scale is a variable

    with tempfile.TemporaryDirectory() as root:
        def loops(make_component: Callable[[], Any] | None) -> Iterator[Any]:
            made = []
            for _ in range(repeats):
                loop = spt.TrainLoop([], max_epoch=epochs, print_func=lambda line: None)
                if make_component is not None:
                    loop.add_component(make_component())
                made.append(loop)
            return iter(made)

        contestants = {
            'bare': loops(None),
            'mixed_precision': loops(lambda: spt.MixedPrecision(optimizer)),
            'profiler_idle': loops(lambda: spt.Profiler(steps=(10 ** 9, 10 ** 9), logdir=root)),
            'breakdown': loops(lambda: spt.Profiler(breakdown=True)),
        }

        def run(name: str) -> Callable[[Stopwatch], None]:
            return lambda watch: train(next(contestants[name]), watch)

        samples = time_alternating({name: run(name) for name in contestants}, repeats)

    per_step = {name: s.scaled(1e6 / steps) for name, s in samples.items()}
    base = per_step['bare'].best
    table, rows = [], []
    table.append(('TrainLoop, bare', f'{base:.2f}', f'{per_step["bare"].median:.2f}',
                  '', '', ''))
    labels = {'mixed_precision': 'MixedPrecision attached (LossScaleOptimizer), idle',
              'profiler_idle': 'Profiler outside its steps window',
              'breakdown': 'Profiler(breakdown=True)'}
    for name, label in labels.items():
        best = per_step[name].best
        diff = best - base
        met = diff <= TARGET_US
        table.append((label, f'{best:.2f}', f'{per_step[name].median:.2f}', f'{diff:+.2f}',
                      f'≤ {TARGET_US:g}', met_text(met)))
        rows.append(Row(f'component idle: {label}', 'the same TrainLoop without it', base,
                        best, 'µs/step', f'diff ≤ {TARGET_US:g} µs/step', met))
    print()
    print(f'Summary (µs per step, epochs of {STEPS_PER_EPOCH} no-op steps; best and median of '
          f'{repeats} runs)')
    print(format_table(('case', 'best µs/step', 'median µs/step', 'difference µs/step',
                        'target', 'met'), table, align='lrrrll'))
    print(f'\nload avg    {load_average()} (1/5/15 min) at end')
    write_rows(args.table_json, rows)


if __name__ == '__main__':
    main()
