#!/usr/bin/env python
"""What does a loop component cost per step when it is attached but idle?

Each row times the same no-op training loop twice, alternating in this one
process: a bare :class:`tfsnippet.TrainLoop` (one ``collect_metrics`` per
step, one ``print_logs()`` per epoch, lines sent to a list) and the same
loop with the row's component(s) attached.  The figure is the difference of
the best runs in µs per step, target at most 1 µs (issue 19), and the
ratio of the two; each row has its own bare runs, so a change of load
during the script hits a row and its baseline alike.

**Adding a row** is one entry in :data:`CASES`: a :class:`Case` with the
row's name and a function that returns the components to attach to a new
loop (it is called once per timed run, outside the timed part only for
what it builds; the loop is made inside it, as a user's would be).

It is a benchmark, not a test: it prints figures and exits 0 whether or not
the targets are met.  Usage::

    python benchmarks/bench_components.py [--quick] [--table-json PATH]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bench import (Row, Stopwatch, describe_machine, finish, format_table,  # noqa: E402
                    met_text, print_summary, quick_arguments, time_alternating)

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

TARGET_US = 1.0   # component attached but idle - bare TrainLoop, µs per step

SIZES = {
    'full': {'epochs': 10, 'steps': 10_000, 'repeats': 7},
    'quick': {'epochs': 1, 'steps': 200, 'repeats': 1},
}

TABLE_COLUMNS = ('case', 'bare µs/step', 'with it µs/step', 'difference µs/step',
                 'ratio', 'target', 'met')


@dataclass(frozen=True)
class Case:
    """One row: `make()` returns the components attached to a fresh loop.

    Attributes:
        name: The row's name in the table.
        make: Builds the component(s) (a new set for each run).
        target_us: The target of the difference in µs per step (``None``:
            the row is shown for information, with no target).
    """

    name: str
    make: Callable[[], Sequence[Any]]
    target_us: float | None = TARGET_US


# ------------------------------------------------------------------ the rows
def _keras_model() -> Any:
    import keras
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(0.1))
    return model


def keras_callbacks_epoch_only() -> Sequence[Any]:
    """Keras callbacks without a batch method (the usual case)."""
    import keras
    import tfsnippet as spt
    callbacks = [keras.callbacks.EarlyStopping(monitor='loss', patience=10 ** 6),
                 keras.callbacks.ReduceLROnPlateau(monitor='loss', patience=10 ** 6),
                 keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: None)]
    return [spt.KerasCallbacks(callbacks, model=_keras_model())]


def keras_callbacks_batch_method() -> Sequence[Any]:
    """A callback with a batch method (TerminateOnNaN): called every step, by design."""
    import keras
    import tfsnippet as spt
    return [spt.KerasCallbacks([keras.callbacks.TerminateOnNaN()], model=_keras_model())]


_OPTIMIZER: list[Any] = []


def mixed_precision_idle() -> Sequence[Any]:
    """MixedPrecision over a built LossScaleOptimizer: it reads it at print time only."""
    import keras
    import tensorflow as tf
    import tfsnippet as spt
    if not _OPTIMIZER:
        var = tf.Variable(1.)
        optimizer = keras.optimizers.LossScaleOptimizer(keras.optimizers.SGD(0.1))
        optimizer.apply([tf.constant(0.)], [var])   # built: its scale is a variable
        _OPTIMIZER.append(optimizer)
    return [spt.MixedPrecision(_OPTIMIZER[0])]


def profiler_outside_window() -> Sequence[Any]:
    """A Profiler whose steps window is never reached."""
    import tempfile
    import tfsnippet as spt
    return [spt.Profiler(steps=(10 ** 9, 10 ** 9), logdir=tempfile.gettempdir())]


def profiler_breakdown() -> Sequence[Any]:
    """The Profiler's time breakdown (no trace)."""
    import tfsnippet as spt
    return [spt.Profiler(breakdown=True)]


#: The rows, in table order: add yours here.
CASES: list[Case] = [
    Case('KerasCallbacks, no batch method (3 callbacks)', keras_callbacks_epoch_only),
    Case('KerasCallbacks, TerminateOnNaN (a batch method: per step by design)',
         keras_callbacks_batch_method, target_us=None),
    Case('MixedPrecision (LossScaleOptimizer), idle', mixed_precision_idle),
    Case('Profiler outside its steps window', profiler_outside_window),
    Case('Profiler(breakdown=True)', profiler_breakdown),
]


# ------------------------------------------------------------------ timing
def loop_run(make: Callable[[], Sequence[Any]] | None, epochs: int,
             steps: int) -> Callable[[Stopwatch], None]:
    """A run of `epochs` x `steps` no-op steps, with the components of `make` if given."""
    import tfsnippet as spt

    def run(watch: Stopwatch) -> None:
        components = list(make()) if make is not None else []
        lines: list[str] = []
        loop = spt.TrainLoop(max_epoch=epochs, print_func=lines.append)
        for component in components:
            loop.add_component(component)
        data = range(steps)
        with watch:
            with loop:
                for _ in loop.iter_epochs():
                    for _ in loop.iter_steps(data):
                        loop.collect_metrics(loss=0.5)
                    loop.print_logs()
        assert len(lines) >= epochs, lines

    return run


def measure(cases: Sequence[Case], size: dict[str, int]) -> list[Row]:
    """Time every case against its own bare runs; one :class:`Row` each."""
    epochs, steps, repeats = size['epochs'], size['steps'], size['repeats']
    per_step = 1e6 / (epochs * steps)
    rows = []
    for case in cases:
        samples = time_alternating({'bare': loop_run(None, epochs, steps),
                                    'with': loop_run(case.make, epochs, steps)}, repeats)
        bare = samples['bare'].scaled(per_step).best
        value = samples['with'].scaled(per_step).best
        target = '' if case.target_us is None else f'<= +{case.target_us:g} µs'
        met = None if case.target_us is None else value - bare <= case.target_us
        rows.append(Row(case.name, 'bare TrainLoop', bare, value, 'µs/step', target, met))
    return rows


def table(rows: Sequence[Row]) -> str:
    """The rows as the script's table."""
    return format_table(TABLE_COLUMNS, [
        (r.case, f'{r.baseline_value:.2f}', f'{r.value:.2f}',
         f'{r.value - r.baseline_value:+.2f}', f'{r.ratio:.3f}', r.target, met_text(r.met))
        for r in rows], align='lrrrrll')


def idle_report(title: str, cases: Sequence[Case], quick: bool) -> list[Row]:
    """Measure `cases` attached but idle and print the header and the summary."""
    size = SIZES['quick' if quick else 'full']
    print(title)
    print(describe_machine())
    print(f'  sizes       {size["epochs"]} epochs x {size["steps"]:,} no-op steps, '
          f'{size["repeats"]} alternating repeats, best run of each')
    rows = measure(cases, size)
    print_summary(table(rows))
    return rows


def main() -> int:
    args = quick_arguments(__doc__)
    rows = idle_report('Loop components attached but idle: cost per step over a bare TrainLoop',
                       CASES, args.quick)
    return finish(rows, args.table_json)


if __name__ == '__main__':
    sys.exit(main())
