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
import gc
import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _machine import core_count, cpu_model, load_average, row, write_rows  # noqa: E402

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
        'noop_epochs': 2, 'noop_steps': 2_000, 'noop_repeats': 2,
        'mlp_epochs': 2, 'mlp_pairs': 2, 'mlp_warmup_epochs': 1,
        'own_cost_epochs': 20,
    },
}

BATCH_SIZE = 64
HIDDEN_UNITS = 128
LEARNING_RATE = 1e-3
TABLE_COLUMNS = ('case', 'bare µs/step', 'TrainLoop µs/step', 'difference µs/step',
                 'ratio', 'target', 'met')


@dataclass
class CaseResult:
    """The timings of one case, in µs per step, one entry per repeat."""

    case: str
    kind: str                   # 'noop': judged on the difference; 'mlp': on the ratio
    bare_us: list[float]        # wall-clock time
    loop_us: list[float]
    bare_cpu_us: list[float]    # CPU time (see `Stopwatch`)
    loop_cpu_us: list[float]
    cpu_clock: str
    notes: list[str] = field(default_factory=list)

    @property
    def basis(self) -> str:
        # No-op steps last well under a microsecond, so any disturbance from
        # other processes only adds time: the best run is the best estimate
        # of the intrinsic cost.  MLP steps are judged on the median, as asked.
        return 'min' if self.kind == 'noop' else 'median'

    def _pick(self, values: list[float]) -> float:
        return min(values) if self.basis == 'min' else statistics.median(values)

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
    import numpy as np
    import tensorflow as tf

    import tfsnippet as spt
    try:
        import keras
        keras_version = keras.__version__
    except ImportError:
        keras_version = 'not installed'
    print('TrainLoop per-step overhead benchmark')
    print(f'  Python      {platform.python_version()} ({platform.python_implementation()})')
    print(f'  TensorFlow  {tf.__version__}   Keras {keras_version}   numpy {np.__version__}'
          f'   tfsnippet {spt.__version__} (sources {source_fingerprint()})')
    print(f'  CPU         {cpu_model()}, {core_count()} cores')
    print(f'  load avg    {load_average()} (1/5/15 min) at start; other processes may share '
          f'the cores')
    print(f'  mode        {"--quick" if args.quick else "full"}, --style {args.style}')
    print()


def print_details(r: CaseResult) -> None:
    def fmt(values: list[float]) -> str:
        return ' '.join(f'{v:.3f}' for v in values)

    med = statistics.median
    print(f'{r.case}')
    for label, values in (('bare', r.bare_us), ('TrainLoop', r.loop_us)):
        print(f'  {label:9s}  wall µs/step: min {min(values):9.3f}  median {med(values):9.3f}'
              f'   runs [{fmt(values)}]')
    print(f'  TrainLoop - bare, wall: {min(r.loop_us) - min(r.bare_us):+.3f} µs/step (min), '
          f'{med(r.loop_us) - med(r.bare_us):+.3f} µs/step (median); '
          f'ratio of medians {med(r.loop_us) / med(r.bare_us):.4f}')
    pair_ratios = [lp / b for b, lp in zip(r.bare_us, r.loop_us)]
    print(f'  TrainLoop / bare per bare-TrainLoop pair, wall: [{fmt(pair_ratios)}], '
          f'median {med(pair_ratios):.4f}')
    print(f'  CPU time ({r.cpu_clock}): bare min {min(r.bare_cpu_us):.3f} / median '
          f'{med(r.bare_cpu_us):.3f}, TrainLoop min {min(r.loop_cpu_us):.3f} / median '
          f'{med(r.loop_cpu_us):.3f} µs/step; TrainLoop - bare '
          f'{min(r.loop_cpu_us) - min(r.bare_cpu_us):+.3f} (min), ratio of medians '
          f'{med(r.loop_cpu_us) / med(r.bare_cpu_us):.4f}')
    for note in r.notes:
        print(f'  {note}')
    print(f'  -> {r.target} (wall, {r.basis}): {"met" if r.met else "NOT met"}')
    sys.stdout.flush()


def print_table(results: list[CaseResult]) -> None:
    rows = [TABLE_COLUMNS]
    for r in results:
        rows.append((r.case, f'{r.bare:.3f}', f'{r.loop:.3f}', f'{r.difference:+.3f}',
                     f'{r.ratio:.4f}', r.target, 'yes' if r.met else 'no'))
    widths = [max(len(row[i]) for row in rows) for i in range(len(TABLE_COLUMNS))]

    def line(row) -> str:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:5], widths[1:5])]
        cells += [row[5].ljust(widths[5]), row[6].ljust(widths[6])]
        return '  '.join(cells).rstrip()

    print('Summary (no-op rows: best of the repeats; MLP rows: median of the repeats)')
    print(line(rows[0]))
    print('  '.join('-' * w for w in widths))
    for cells in rows[1:]:
        print(line(cells))
    print(f'load avg at end: {load_average()} (1/5/15 min)')
    sys.stdout.flush()


# -------------------------------------------------------------- measurement
class Stopwatch:
    """Wall-clock time and CPU time of one run.

    The wall time is what is reported and judged.  The CPU time is shown
    next to it because it leaves out the time this process waits for a core
    that another process holds, which inflates the wall time on a busy
    machine (slow-downs from shared caches or a hypervisor remain in both).
    `cpu_clock` is ``time.thread_time`` for the single-threaded no-op loops
    and ``time.process_time`` (all threads, TensorFlow's included) for the
    training loops.
    """

    __slots__ = ('_cpu_clock', '_wall0', '_cpu0', 'wall', 'cpu')

    def __init__(self, cpu_clock):
        self._cpu_clock = cpu_clock

    def __enter__(self):
        self._cpu0 = self._cpu_clock()
        self._wall0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self._wall0
        self.cpu = self._cpu_clock() - self._cpu0


def _check_loop(loop, lines: list[str], epochs: int, steps_per_epoch: int) -> None:
    # Make sure the TrainLoop run did the work it is credited with.
    if loop.epoch != epochs or loop.step != epochs * steps_per_epoch or len(lines) != epochs:
        raise RuntimeError(
            f'TrainLoop ran {loop.epoch} epochs, {loop.step} steps, printed {len(lines)} '
            f'lines; expected {epochs}, {epochs * steps_per_epoch}, {epochs}')


def alternate(case: str, kind: str, bare_fn, loop_fn, repeats: int, steps: int,
              cpu_clock) -> CaseResult:
    """Run bare, TrainLoop, bare, TrainLoop, ... `repeats` times each.

    Each function takes a :class:`Stopwatch` and runs its whole loop inside it.
    """
    runs = {'bare': ([], []), 'loop': ([], [])}
    for _ in range(repeats):
        for name, fn in (('bare', bare_fn), ('loop', loop_fn)):
            gc.collect()
            watch = Stopwatch(cpu_clock)
            fn(watch)
            runs[name][0].append(watch.wall / steps * 1e6)
            runs[name][1].append(watch.cpu / steps * 1e6)
    return CaseResult(case, kind, runs['bare'][0], runs['loop'][0], runs['bare'][1],
                      runs['loop'][1], cpu_clock=cpu_clock.__name__)


def noop_loops(case: str, value, data: list, epochs: int, repeats: int) -> CaseResult:
    """Time a step body that only produces the loss `value`, over `data` per epoch."""
    import tfsnippet as spt

    def bare(watch, epochs=epochs, data=data) -> None:
        with watch:
            for epoch in range(epochs):
                for batch in data:
                    loss = value
        del loss

    def with_loop(watch, epochs=epochs, data=data) -> None:
        lines = []
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


def bench_noop(case: str, value, sizes: dict, conversion_note: bool = False) -> CaseResult:
    """A no-op step: its body only produces the loss `value`."""
    epochs, n, repeats = sizes['noop_epochs'], sizes['noop_steps'], sizes['noop_repeats']
    data = list(range(n))
    result = noop_loops(case, value, data, epochs, repeats)
    result.notes.append(f'{epochs} epochs x {n} steps, {repeats} repeats')
    if conversion_note:
        def bare_converting(watch) -> None:
            # the bare loop, copying the loss to a Python float on every step
            with watch:
                for epoch in range(epochs):
                    for batch in data:
                        loss = float(value)
            del loss

        conv = alternate(case, 'noop', bare_converting, bare_converting, repeats,
                         epochs * n, time.thread_time)
        result.notes.append(
            f'for reference, the bare loop doing float(loss) on every step: '
            f'+{min(conv.bare_us + conv.loop_us) - result.bare:.3f} µs/step over the bare '
            f'loop (min)')
    return result


def load_digit_batches() -> list[tuple]:
    """``load_digits`` scaled to [0, 1], shuffled once, sliced into batches of 64."""
    import numpy as np
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.data / 16.).astype(np.float32)
    y = digits.target.astype(np.int32)
    order = np.random.RandomState(1234).permutation(len(x))
    x, y = x[order], y[order]
    return [(x[i:i + BATCH_SIZE], y[i:i + BATCH_SIZE]) for i in range(0, len(x), BATCH_SIZE)]


def bench_training(case: str, step_fn, batches: list, param_vars, sizes: dict) -> CaseResult:
    """Train with `step_fn(x, y) -> loss`, bare and with TrainLoop, alternately."""
    import tfsnippet as spt

    epochs = sizes['mlp_epochs']

    def bare(watch, epochs=epochs) -> None:
        with watch:
            for epoch in range(epochs):
                for x, y in batches:
                    loss = step_fn(x, y)
        del loss

    def with_loop(watch, epochs=epochs) -> None:
        lines = []
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
    loss_type = type(sample_loss)
    loss_type = f'{loss_type.__module__.split(".")[0]}.{loss_type.__name__}'
    result.notes.append(
        f'TrainLoop\'s own cost in this loop ({loss_type} loss, '
        f'{len(batches)} steps/epoch, step body only returning the loss, {own_epochs} epochs, '
        f'best of {sizes["noop_repeats"]}): +{own.difference:.3f} µs/step wall, '
        f'+{min(own.loop_cpu_us) - min(own.bare_cpu_us):.3f} µs/step CPU; with the bare '
        f'median above that is a ratio of {expected:.4f}')
    return result


# ---------------------------------------------------------------- the styles
def run_eager(sizes: dict) -> list[CaseResult]:
    import keras
    import tensorflow as tf

    results = []
    r = bench_noop('no-op step, float loss [eager]', 0.5, sizes)
    print_details(r)
    results.append(r)

    r = bench_noop('no-op step, eager tensor loss [eager]', tf.constant(0.5), sizes,
                   conversion_note=True)
    print_details(r)
    results.append(r)

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
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    r = bench_training('MLP 64-128-10 on digits, tf.function [eager]', train_step, batches,
                       model.trainable_variables, sizes)
    print_details(r)
    results.append(r)
    return results


def run_graph(sizes: dict) -> list[CaseResult]:
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

    def train_step(x, y):
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
    """Run ``--style graph`` in a child process; return its results and sources hash."""
    cmd = [sys.executable, os.path.abspath(__file__), '--style', 'graph']
    if args.quick:
        cmd.append('--quick')
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, 'graph_results.json')
        cmd += ['--json-out', out_path]
        env = dict(os.environ, PYTHONIOENCODING='utf-8')
        sys.stdout.flush()
        # the child's detail lines go straight to our stdout, its stderr too
        proc = subprocess.run(cmd, env=env)
        if proc.returncode != 0 or not os.path.exists(out_path):
            raise RuntimeError(f'the graph-style child process failed (exit code '
                               f'{proc.returncode}): {" ".join(cmd)}')
        with open(out_path, encoding='utf-8') as f:
            data = json.load(f)
    return [CaseResult(**d) for d in data['results']], data['sources']


# ---------------------------------------------------------------------- main
def parse_args(argv=None) -> argparse.Namespace:
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


def main(argv=None) -> int:
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
            json.dump({'sources': sources, 'results': [asdict(r) for r in results]}, f)
        return 0
    print()
    print_table(results)
    write_rows(args.table_json, [row(r.case, 'bare loop', r.bare, r.loop, 'µs/step',
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
