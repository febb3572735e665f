#!/usr/bin/env python
"""What do the training-health components cost per step?

* **Idle**: a :class:`tfsnippet.WeightAverage` with ``manual=True`` attached
  to a no-op loop, nothing updating it: the difference of µs per step over a
  bare :class:`tfsnippet.TrainLoop`, target at most 1 µs (issue 35).
* **Updating every step**, on the digits MLP (64-128-10, Adam, batch 64, an
  eager ``tf.function`` step inside a :class:`tfsnippet.TrainLoop`): the
  loop without an average is the baseline; against it, the loop with a
  ``WeightAverage`` that the loop updates after each step (one more
  ``tf.function`` call per step) and one updated inside the step
  (``manual=True``, ``average.update()`` in the step's ``tf.function``).
  Target: at most 5% more per step.  The ratio is the median of the rounds'
  paired ratios (mirrored quads, so the load's drift cancels).
* **LearningRateFinder**: a loop entered with a finder sweeping 100 steps of
  the digits MLP (batch 16), against those steps run by hand: target at most
  2 s more (the snapshot, the restore, the flow's state).
* **Memory**: the bytes of the averages over the bytes of the parameters
  (target at most 1 extra copy).

It is a benchmark, not a test: it prints figures and exits 0 whether or not
the targets are met.  Usage::

    python benchmarks/bench_health.py [--quick] [--table-json PATH]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bench import (
    Row,
    Stopwatch,
    describe_machine,
    finish,
    format_table,
    met_text,
    paired_ratio,
    print_summary,
    quick_arguments,
    time_alternating,
)

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

IDLE_TARGET_US = 1.0
STEP_TARGET = 1.05
BATCH = 64

SIZES = {
    'full': {'idle_steps': 20_000, 'idle_repeats': 7, 'epochs': 3, 'repeats': 6,
             'finder_steps': 100},
    'quick': {'idle_steps': 200, 'idle_repeats': 1, 'epochs': 1, 'repeats': 1,
              'finder_steps': 10},
}


def idle_run(with_average: bool, steps: int) -> Callable[[Stopwatch], None]:
    """A no-op loop of `steps` steps, with an idle manual WeightAverage if asked."""
    import tensorflow as tf

    import tfsnippet as spt
    var = tf.Variable(tf.zeros([128]))
    average = spt.WeightAverage([var], manual=True)   # made once: its copy op traced once
    warm_up = spt.TrainLoop(print_func=lambda s: None)
    warm_up.add_component(average)
    with warm_up:   # its copy op traced here, not in a timed run
        pass

    def run(watch: Stopwatch) -> None:
        loop = spt.TrainLoop(max_epoch=1, print_func=lambda s: None)
        if with_average:
            loop.add_component(average)
        with watch, loop:
            for _ in loop.iter_epochs():
                for _ in loop.iter_steps(range(steps)):
                    loop.collect_metrics(loss=0.5)
    return run


def digits() -> tuple[Any, Any]:
    import numpy as np
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    return (x / 16.).astype(np.float32), y.astype(np.int32)


def mlp_run(mode: str, epochs: int) -> tuple[Callable[[Stopwatch], None], list[Any]]:
    """A loop training the digits MLP; `mode` is ``'none'``, ``'auto'`` or ``'manual'``.
    Also returns the model's variables and the averages (for the memory figure)."""
    import keras
    import tensorflow as tf

    import tfsnippet as spt
    x, y = digits()
    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation='relu'),
                              keras.layers.Dense(10)])
    opt = keras.optimizers.Adam(1e-3)
    opt.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    average = None if mode == 'none' else \
        spt.WeightAverage(model.trainable_variables, decay=0.99, manual=mode == 'manual')

    @tf.function
    def step(xb: Any, yb: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))
        if mode == 'manual':
            average.update()
        return loss

    flow = spt.DataFlow.arrays([x, y], BATCH, shuffle=True, random_state=0)
    for xb, yb in flow:   # traced before the timing
        step(xb, yb)
        break

    def run(watch: Stopwatch) -> None:
        loop = spt.TrainLoop(max_epoch=epochs, print_func=lambda s: None)
        if average is not None:
            loop.add_component(average)
        with watch, loop:
            for _ in loop.iter_epochs():
                for _, (xb, yb) in loop.iter_steps(flow):
                    loop.collect_metrics(loss=step(xb, yb))
    return run, [model.trainable_variables, average]


def finder_runs(steps: int) -> dict[str, Callable[[Stopwatch], None]]:
    """`steps` steps of the digits MLP (batch 16) by hand, and a loop entered with a
    LearningRateFinder sweeping those steps (then left at once)."""
    import keras
    import tensorflow as tf

    import tfsnippet as spt
    x, y = digits()
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128, activation='relu'),
                              keras.layers.Dense(10)])
    opt = keras.optimizers.Adam(1e-3)
    opt.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def step(xb: Any, yb: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(yb, model(xb, training=True))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                model.trainable_variables))
        return loss

    flow = spt.DataFlow.arrays([x, y], 16, shuffle=True, random_state=0)
    for xb, yb in flow:   # traced before the timing
        step(xb, yb)
        break

    def by_hand(watch: Stopwatch) -> None:
        with watch:
            for i, (xb, yb) in enumerate(flow):
                if i == steps:
                    break
                float(step(xb, yb))

    def finder(watch: Stopwatch) -> None:
        loop = spt.TrainLoop(model.trainable_variables, max_epoch=1,
                             print_func=lambda s: None)
        found = spt.LearningRateFinder(opt, 1e-5, 1e-2, steps=steps, step=step, data=flow)
        loop.add_component(found)
        with watch, loop:
            pass
        assert len(found.rates) == steps, len(found.rates)

    return {'by hand': by_hand, 'finder': finder}


def measure(size: dict[str, int]) -> list[Row]:
    rows = []
    steps = size['idle_steps']
    samples = time_alternating({'bare': idle_run(False, steps), 'with': idle_run(True, steps)},
                               size['idle_repeats'])
    bare = samples['bare'].scaled(1e6 / steps).best
    value = samples['with'].scaled(1e6 / steps).best
    rows.append(Row('WeightAverage(manual=True) attached, idle', 'bare TrainLoop', bare, value,
                    'µs/step', f'<= +{IDLE_TARGET_US:g} µs', value - bare <= IDLE_TARGET_US))

    epochs = size['epochs']
    per_step = 1e6 / (epochs * -(-1797 // BATCH))
    none, _ = mlp_run('none', epochs)
    auto, _ = mlp_run('auto', epochs)
    manual, (params, average) = mlp_run('manual', epochs)
    samples = time_alternating({'none': none, 'auto': auto, 'manual': manual}, size['repeats'],
                               quads=True)
    base = samples['none'].scaled(per_step).median
    for name, label in (('auto', 'WeightAverage, the loop updates it (one call more per step)'),
                        ('manual', 'WeightAverage(manual=True), update() inside the step')):
        ratio = paired_ratio(samples['none'], samples[name]).median
        rows.append(Row(f'{label}, digits MLP', 'loop without it', base, base * ratio,
                        'µs/step', f'<= x{STEP_TARGET:g}', ratio <= STEP_TARGET))

    param_bytes = sum(int(v.numpy().nbytes) for v in params)
    avg_bytes = sum(int(v.numpy().nbytes) for v in average.average_variables)
    rows.append(Row('WeightAverage memory: averages over parameters', 'parameters bytes',
                    float(param_bytes), float(avg_bytes), 'bytes', '<= x1',
                    avg_bytes <= param_bytes))

    samples = time_alternating(finder_runs(size['finder_steps']), size['repeats'])
    base, value = samples['by hand'].best, samples['finder'].best
    rows.append(Row(f'LearningRateFinder, {size["finder_steps"]} digits MLP steps',
                    'the steps by hand', base, value, 's', '<= +2 s', value - base <= 2.))
    return rows


def table(rows: list[Row]) -> str:
    return format_table(('case', 'baseline', 'with it', 'unit', 'ratio', 'target', 'met'), [
        (r.case, f'{r.baseline_value:.2f}', f'{r.value:.2f}', r.unit, f'{r.ratio:.3f}',
         r.target, met_text(r.met)) for r in rows], align='lrrlrll')


def main() -> int:
    args = quick_arguments(__doc__)
    size = SIZES['quick' if args.quick else 'full']
    print('Training health: WeightAverage per-step cost and memory')
    print(describe_machine())
    rows = measure(size)
    print_summary(table(rows))
    return finish(rows, args.table_json)


if __name__ == '__main__':
    sys.exit(main())
