#!/usr/bin/env python
"""How much time does :class:`tfsnippet.TrainLoop` add to each training step?

The script times a bare Python loop and the same loop driven by
``TrainLoop`` (one ``loop.collect_metrics(loss=...)`` per step, one
``loop.print_logs()`` per epoch, lines sent to a list instead of the
console), in two kinds of cases:

* no-op steps, whose body only produces a loss (a Python float, an eager
  scalar tensor, or a numpy float32 as ``session.run`` returns): the
  difference in microseconds per step is TrainLoop's own cost, target at
  most 2 µs per step;
* a small MLP (64-128-10, Adam, batch size 64) trained on sklearn's
  ``load_digits``, in eager style (Keras 3 layers, ``tf.function`` step)
  and in graph style (``tf.compat.v1`` placeholders and ``session.run``):
  the ratio TrainLoop / bare of the median time per step, target at most
  1.02.

Graph style needs ``tf.compat.v1.disable_eager_execution()``, which is
process-global, so ``--style all`` (the default) runs the eager cases in
this process and the graph cases in a child process of this script
(``--style graph``), then prints one combined table.

It is a benchmark, not a test: it prints figures and exits 0 whether or not
the targets are met.  Usage::

    python benchmarks/bench_train_loop.py [--quick] [--style {all,eager,graph}]
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bench import (Row, Samples, Stopwatch, describe_machine, format_table,  # noqa: E402
                    load_average, met_text, time_alternating, write_rows)
from _shared import run_child  # noqa: E402

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

NOOP_TARGET_US = 2.0      # TrainLoop - bare, µs per step, no-op step
MLP_TARGET_RATIO = 1.02   # TrainLoop / bare, median time per step, MLP step

# Sizes of the full run and of the `--quick` smoke run.
SIZES = {
    'full': {
        'noop_epochs': 20, 'noop_steps': 10_000, 'noop_repeats': 5,
        'mlp_epochs': 20, 'mlp_pairs': 15, 'mlp_warmup_epochs': 3,
        'own_cost_epochs': 300,
    },
    'quick': {
        'noop_epochs': 2, 'noop_steps': 500, 'noop_repeats': 1,
        'mlp_epochs': 1, 'mlp_pairs': 2, 'mlp_warmup_epochs': 1,
        'own_cost_epochs': 5,
    },
}

BATCH_SIZE = 64
HIDDEN_UNITS = 128
LEARNING_RATE = 1e-3
TABLE_COLUMNS = ('case', 'bare µs/step', 'TrainLoop µs/step', 'difference µs/step',
                 'ratio', 'target', 'met')


@dataclass
class CaseResult:
    """The timings of one case, in µs per step (wall and CPU), one entry per repeat."""

    case: str
    kind: str                   # 'noop': judged on the difference; 'mlp': on the ratio
    bare_us: Samples
    loop_us: Samples
    cpu_clock: str              # the CPU clock of the samples (see `_bench.Stopwatch`)
    notes: list[str] = field(default_factory=list)

    @property
    def basis(self) -> str:
        # No-op steps last well under a microsecond, so any disturbance from
        # other processes only adds time: the best run is the best estimate
        # of the intrinsic cost.  MLP steps are judged on the median, as asked.
        return 'min' if self.kind == 'noop' else 'median'

    def _pick(self, samples: Samples) -> float:
        return samples.best if self.basis == 'min' else samples.median

    @property
    def bare(self) -> float:
        return self._pick(self.bare_us)

    @property
    def loop(self) -> float:
        return self._pick(self.loop_us)

    @property
    def difference(self) -> float:
        return self.loop - self.bare

    @property
    def ratio(self) -> float:
        return self.loop / self.bare if self.bare > 0 else float('inf')

    @property
    def target(self) -> str:
        if self.kind == 'noop':
            return f'diff ≤ {NOOP_TARGET_US:g} µs'
        return f'ratio ≤ {MLP_TARGET_RATIO:g}'

    @property
    def met(self) -> bool:
        if self.kind == 'noop':
            return self.difference <= NOOP_TARGET_US
        return self.ratio <= MLP_TARGET_RATIO

    def to_json(self) -> dict[str, Any]:
        return {'case': self.case, 'kind': self.kind, 'cpu_clock': self.cpu_clock,
                'notes': self.notes,
                'bare_us': {'wall': self.bare_us.wall, 'cpu': self.bare_us.cpu},
                'loop_us': {'wall': self.loop_us.wall, 'cpu': self.loop_us.cpu}}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CaseResult:
        return cls(data['case'], data['kind'], Samples(**data['bare_us']),
                   Samples(**data['loop_us']), data['cpu_clock'], data['notes'])


# ------------------------------------------------------------------ reporting
@functools.lru_cache(maxsize=None)
def source_fingerprint() -> str:
    """A short hash of the tfsnippet sources this process imported.

    Printed so that figures can be matched with the code they measured, and
    compared with the graph-style child's, which imports tfsnippet later.
    Computed once, at the start of :func:`main`.
    """
    import tfsnippet as spt

    root = os.path.dirname(os.path.abspath(spt.__file__))
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith('.py'):
                path = os.path.join(dirpath, name)
                digest.update(os.path.relpath(path, root).encode())
                with open(path, 'rb') as f:
                    digest.update(f.read())
    return digest.hexdigest()[:12]


def print_header(args: argparse.Namespace) -> None:
    import tfsnippet as spt

    print('TrainLoop per-step overhead benchmark')
    print(describe_machine(extra={
        'tfsnippet': f'{spt.__version__} (sources {source_fingerprint()})',
        'mode': f'{"--quick" if args.quick else "full"}, --style {args.style}'}))
    print('  (other processes may share the cores: see the load average)')
    print()


def print_details(r: CaseResult) -> None:
    def fmt(values: list[float]) -> str:
        return ' '.join(f'{v:.3f}' for v in values)

    bare, loop = r.bare_us, r.loop_us
    print(f'{r.case}')
    for label, s in (('bare', bare), ('TrainLoop', loop)):
        print(f'  {label:9s}  wall µs/step: min {s.best:9.3f}  median {s.median:9.3f}'
              f'   runs [{fmt(s.wall)}]')
    print(f'  TrainLoop - bare, wall: {loop.best - bare.best:+.3f} µs/step (min), '
          f'{loop.median - bare.median:+.3f} µs/step (median); '
          f'ratio of medians {loop.median / bare.median:.4f}')
    pair_ratios = [lp / b for b, lp in zip(bare.wall, loop.wall)]
    print(f'  TrainLoop / bare per bare-TrainLoop pair, wall: [{fmt(pair_ratios)}], '
          f'median {statistics.median(pair_ratios):.4f}')
    print(f'  CPU time ({r.cpu_clock}): bare min {bare.cpu_best:.3f} / median '
          f'{bare.cpu_median:.3f}, TrainLoop min {loop.cpu_best:.3f} / median '
          f'{loop.cpu_median:.3f} µs/step; TrainLoop - bare '
          f'{loop.cpu_best - bare.cpu_best:+.3f} (min), ratio of medians '
          f'{loop.cpu_median / bare.cpu_median:.4f}')
    for note in r.notes:
        print(f'  {note}')
    print(f'  -> {r.target} (wall, {r.basis}): {"met" if r.met else "NOT met"}')
    sys.stdout.flush()


def print_table(results: list[CaseResult]) -> None:
    rows = [(r.case, f'{r.bare:.3f}', f'{r.loop:.3f}', f'{r.difference:+.3f}',
             f'{r.ratio:.4f}', r.target, met_text(r.met)) for r in results]
    print('Summary (no-op rows: best of the repeats; MLP rows: median of the repeats)')
    print(format_table(TABLE_COLUMNS, rows, align='lrrrrll'))
    print(f'load avg at end: {load_average()} (1/5/15 min)')
    sys.stdout.flush()


# -------------------------------------------------------------- measurement
# The wall time is what is reported and judged; the CPU time is shown next to
# it (see `_bench.Stopwatch`).  The CPU clock is `time.thread_time` for the
# single-threaded no-op loops and `time.process_time` (all threads,
# TensorFlow's included) for the training loops.

def _check_loop(loop: Any, lines: list[str], epochs: int, steps_per_epoch: int) -> None:
    # Make sure the TrainLoop run did the work it is credited with.
    if loop.epoch != epochs or loop.step != epochs * steps_per_epoch or len(lines) != epochs:
        raise RuntimeError(
            f'TrainLoop ran {loop.epoch} epochs, {loop.step} steps, printed {len(lines)} '
            f'lines; expected {epochs}, {epochs * steps_per_epoch}, {epochs}')


def alternate(case: str, kind: str, bare_fn: Callable[[Stopwatch], None],
              loop_fn: Callable[[Stopwatch], None], repeats: int, steps: int,
              cpu_clock: Callable[[], float]) -> CaseResult:
    """Run bare, TrainLoop, bare, TrainLoop, ... `repeats` times each; µs per step.

    Each function takes a :class:`Stopwatch` and runs its whole loop inside it.
    """
    runs = time_alternating({'bare': bare_fn, 'loop': loop_fn}, repeats, cpu_clock=cpu_clock)
    return CaseResult(case, kind, runs['bare'].scaled(1e6 / steps),
                      runs['loop'].scaled(1e6 / steps), cpu_clock=cpu_clock.__name__)


def noop_loops(case: str, value: Any, data: Sequence[Any], epochs: int,
               repeats: int) -> CaseResult:
    """Time a step body that only produces the loss `value`, over `data` per epoch."""
    import tfsnippet as spt

    def bare(watch: Stopwatch, epochs: int = epochs, data: Sequence[Any] = data) -> None:
        with watch:
            for epoch in range(epochs):
                for batch in data:
                    loss = value
        del loss

    def with_loop(watch: Stopwatch, epochs: int = epochs,
                  data: Sequence[Any] = data) -> None:
        lines: list[str] = []
        with watch:
            with spt.TrainLoop(max_epoch=epochs, print_func=lines.append) as loop:
                for epoch in loop.iter_epochs():
                    for step, batch in loop.iter_steps(data):
                        loss = value
                        loop.collect_metrics(loss=loss)
                    loop.print_logs()
        _check_loop(loop, lines, epochs, len(data))

    warm = Stopwatch(time.thread_time)   # warm up both code paths
    bare(warm, 1, data[:1000])
    with_loop(warm, 1, data[:1000])
    return alternate(case, 'noop', bare, with_loop, repeats, epochs * len(data),
                     time.thread_time)


def bench_noop(case: str, value: Any, sizes: dict[str, int],
               conversion_note: bool = False) -> CaseResult:
    """A no-op step: its body only produces the loss `value`."""
    epochs, n, repeats = sizes['noop_epochs'], sizes['noop_steps'], sizes['noop_repeats']
    data = list(range(n))
    result = noop_loops(case, value, data, epochs, repeats)
    result.notes.append(f'{epochs} epochs x {n} steps, {repeats} repeats')
    if conversion_note:
        def bare_converting(watch: Stopwatch) -> None:
            # the bare loop, copying the loss to a Python float on every step
            with watch:
                for epoch in range(epochs):
                    for batch in data:
                        loss = float(value)
            del loss

        conv = time_alternating({'converting': bare_converting}, 2 * repeats,
                                cpu_clock=time.thread_time)['converting'].scaled(1e6 / (epochs * n))
        result.notes.append(
            f'for reference, the bare loop doing float(loss) on every step: '
            f'+{conv.best - result.bare:.3f} µs/step over the bare loop (min)')
    return result


def digits_eager_mlp() -> tuple[list[tuple[Any, Any]], Any, Any, Any]:
    """The eager digits MLP (seeded): ``(batches as tensors, model, optimizer, train_step)``,
    `train_step` a ``tf.function`` of a batch returning its loss."""
    import keras
    import tensorflow as tf

    keras.utils.set_random_seed(0)
    batches = [(tf.constant(x), tf.constant(y)) for x, y in load_digit_batches()]
    model = keras.Sequential([
        keras.Input(shape=(64,)),
        keras.layers.Dense(HIDDEN_UNITS, activation='relu'),
        keras.layers.Dense(10),
    ])
    optimizer = keras.optimizers.Adam(LEARNING_RATE)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(input_signature=[tf.TensorSpec([None, 64], tf.float32),
                                  tf.TensorSpec([None], tf.int32)])
    def train_step(x: Any, y: Any) -> Any:
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    return batches, model, optimizer, train_step


def load_digit_batches() -> list[tuple[Any, Any]]:
    """``load_digits`` scaled to [0, 1], shuffled once, sliced into batches of 64."""
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.).astype(np.float32)
    y = digits.target.astype(np.int32)
    order = np.random.RandomState(1234).permutation(len(x))
    x, y = x[order], y[order]
    return [(x[i:i + BATCH_SIZE], y[i:i + BATCH_SIZE]) for i in range(0, len(x), BATCH_SIZE)]


def bench_training(case: str, step_fn: Callable[[Any, Any], Any], batches: list[Any],
                   param_vars: Any, sizes: dict[str, int]) -> CaseResult:
    """Train with `step_fn(x, y) -> loss`, bare and with TrainLoop, alternately."""
    import tfsnippet as spt

    epochs = sizes['mlp_epochs']

    def bare(watch: Stopwatch, epochs: int = epochs) -> None:
        with watch:
            for epoch in range(epochs):
                for x, y in batches:
                    loss = step_fn(x, y)
        del loss

    def with_loop(watch: Stopwatch, epochs: int = epochs) -> None:
        lines: list[str] = []
        with watch:
            with spt.TrainLoop(param_vars, max_epoch=epochs, print_func=lines.append) as loop:
                for epoch in loop.iter_epochs():
                    for step, (x, y) in loop.iter_steps(batches):
                        loss = step_fn(x, y)
                        loop.collect_metrics(loss=loss)
                    loop.print_logs()
        _check_loop(loop, lines, epochs, len(batches))

    warmup = sizes['mlp_warmup_epochs']
    warm = Stopwatch(time.process_time)
    bare(warm, warmup)
    with_loop(warm, warmup)
    result = alternate(case, 'mlp', bare, with_loop, sizes['mlp_pairs'],
                       epochs * len(batches), time.process_time)
    result.notes.append(f'{epochs} epochs x {len(batches)} batches of {BATCH_SIZE}, '
                        f'{sizes["mlp_pairs"]} bare/TrainLoop pairs, '
                        f'{warmup} warm-up epoch(s) each')

    # TrainLoop's own cost in a loop of this shape: the same batches per epoch,
    # the same kind of loss, but a step body that only hands over that loss.
    # Unlike the ratio above, this hardly moves with the load of the machine.
    sample_loss = step_fn(*batches[0])
    own_epochs = sizes['own_cost_epochs']
    own = noop_loops(case, sample_loss, batches, own_epochs, sizes['noop_repeats'])
    expected = (result.bare + own.difference) / result.bare
    loss_class = type(sample_loss)
    loss_type = f'{loss_class.__module__.split(".")[0]}.{loss_class.__name__}'
    result.notes.append(
        f'TrainLoop\'s own cost in this loop ({loss_type} loss, '
        f'{len(batches)} steps/epoch, step body only returning the loss, {own_epochs} epochs, '
        f'best of {sizes["noop_repeats"]}): +{own.difference:.3f} µs/step wall, '
        f'+{own.loop_us.cpu_best - own.bare_us.cpu_best:.3f} µs/step CPU; with the bare '
        f'median above that is a ratio of {expected:.4f}')
    return result


# ---------------------------------------------------------------- the styles
def run_eager(sizes: dict[str, int]) -> list[CaseResult]:
    import tensorflow as tf

    results = []
    r = bench_noop('no-op step, float loss [eager]', 0.5, sizes)
    print_details(r)
    results.append(r)

    r = bench_noop('no-op step, eager tensor loss [eager]', tf.constant(0.5), sizes,
                   conversion_note=True)
    print_details(r)
    results.append(r)

    batches, model, _, train_step = digits_eager_mlp()
    r = bench_training('MLP 64-128-10 on digits, tf.function [eager]', train_step, batches,
                       model.trainable_variables, sizes)
    print_details(r)
    results.append(r)
    return results


def run_graph(sizes: dict[str, int]) -> list[CaseResult]:
    import numpy as np
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    v1 = tf.compat.v1
    results = []
    r = bench_noop('no-op step, float loss [graph]', 0.5, sizes)
    print_details(r)
    results.append(r)

    r = bench_noop('no-op step, numpy float32 loss [graph]', np.float32(0.5), sizes)
    print_details(r)
    results.append(r)

    batches = load_digit_batches()
    graph = tf.Graph()
    with graph.as_default():
        v1.set_random_seed(0)
        x_ph = v1.placeholder(tf.float32, [None, 64], name='x')
        y_ph = v1.placeholder(tf.int32, [None], name='y')
        init = v1.glorot_uniform_initializer()
        w1 = v1.get_variable('dense1/kernel', [64, HIDDEN_UNITS], initializer=init)
        b1 = v1.get_variable('dense1/bias', [HIDDEN_UNITS], initializer=v1.zeros_initializer())
        w2 = v1.get_variable('dense2/kernel', [HIDDEN_UNITS, 10], initializer=init)
        b2 = v1.get_variable('dense2/bias', [10], initializer=v1.zeros_initializer())
        logits = tf.matmul(tf.nn.relu(tf.matmul(x_ph, w1) + b1), w2) + b2
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y_ph, logits=logits))
        train_op = v1.train.AdamOptimizer(LEARNING_RATE).minimize(loss)
        params = v1.trainable_variables()
        session = v1.Session(graph=graph)
        session.run(v1.global_variables_initializer())

    def train_step(x: Any, y: Any) -> Any:
        loss_value, _ = session.run([loss, train_op], feed_dict={x_ph: x, y_ph: y})
        return loss_value

    with session.as_default(), graph.as_default():
        r = bench_training('MLP 64-128-10 on digits, session.run [graph]', train_step,
                           batches, params, sizes)
    session.close()
    print_details(r)
    results.append(r)
    return results


def run_graph_child(args: argparse.Namespace) -> tuple[list[CaseResult], str]:
    """Run ``--style graph`` in a child (`_shared.run_child`); return its results and
    sources hash."""
    argv = ['--style', 'graph'] + (['--quick'] if args.quick else [])
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, 'graph_results.json')
        sys.stdout.flush()
        # the child's detail lines, then its results
        print(run_child(__file__, argv + ['--json-out', out_path], graph=True,
                        env={'PYTHONIOENCODING': 'utf-8'}), end='')
        with open(out_path, encoding='utf-8') as f:
            data = json.load(f)
    return [CaseResult.from_json(d) for d in data['results']], data['sources']


# ---------------------------------------------------------------------- main
def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Time per step of a bare loop and of the same loop driven by '
                    'tfsnippet.TrainLoop, in eager and graph style.')
    parser.add_argument('--quick', action='store_true',
                        help='few steps and repeats: a smoke run, not a measurement')
    parser.add_argument('--style', choices=('all', 'eager', 'graph'), default='all',
                        help='which TensorFlow style to run (graph runs in a child '
                             'process under "all")')
    parser.add_argument('--json-out', metavar='PATH', help=argparse.SUPPRESS)
    parser.add_argument('--table-json', metavar='PATH', help='also write the rows as JSON')
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = SIZES['quick' if args.quick else 'full']
    child = args.json_out is not None
    sources = source_fingerprint()   # hash the sources now, when they are imported
    if not child:
        print_header(args)

    results: list[CaseResult] = []
    error = None
    child_sources = sources
    if args.style == 'graph':
        results += run_graph(sizes)
    else:
        results += run_eager(sizes)
        if args.style == 'all':
            try:
                graph_results, child_sources = run_graph_child(args)
                results += graph_results
            except RuntimeError as e:
                error = e

    if child:
        with open(args.json_out, 'w', encoding='utf-8') as f:
            json.dump({'sources': sources, 'results': [r.to_json() for r in results]}, f)
        return 0
    print()
    print_table(results)
    write_rows(args.table_json, [Row(r.case, 'bare loop', r.bare, r.loop, 'µs/step',
                                     r.target, r.met) for r in results])
    if child_sources != sources:
        print(f'warning: the tfsnippet sources changed during the run: the eager rows '
              f'measured sources {sources}, the graph rows {child_sources}')
    if error is not None:
        print(f'error: {error}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
