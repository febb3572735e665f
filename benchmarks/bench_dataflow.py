#!/usr/bin/env python
"""Benchmark: shuffled mini-batches from ``tfsnippet.DataFlow`` against a hand-written loop.

All cases run in this one process (TensorFlow in eager mode), over
60,000 x 784 float32 rows with int64 labels (random data from a seeded
``numpy.random.Generator``), shuffled, with batch sizes 64 and 256:

(a) a hand-written numpy loop, the baseline: one ``rng.permutation(n)``
    per epoch, then ``x[idx], y[idx]`` for each slice ``idx`` of it;
(b) ``spt.DataFlow.arrays([x, y], bs, shuffle=True, random_state=...)``
    iterated with ``for bx, by in flow`` (it gets a Generator seeded like
    the baseline's, so both draw the same permutations and serve the same
    batches).  Target: at least 0.95x the baseline's batches/s;
(c) a mapper that costs about as much as the training step that consumes
    its batches: ``flow.map(mapper)`` consumed inline, against
    ``flow.map(mapper).threaded(prefetch)``.  The mapper and the simulated
    step do the same numpy work (two float32 matrix products and a tanh, in
    which numpy releases the GIL, with OpenBLAS held to one thread), so the
    worker thread and the consumer can really run on two cores at once.
    The figure judged is the fraction of the mapper's cost that the thread
    hides, ``(inline - threaded) / mapper cost``.  Target: at least 80%;
(d) ``tf.data.Dataset.from_tensor_slices((x, y)).shuffle(n, seed=...)
    .batch(bs)`` iterated in eager mode, with ``.numpy()`` on both tensors
    of each batch.  No target: for reference.

Each case is warmed up with one epoch, then timed over several epochs
(the cases of one batch size alternate epoch by epoch, so that a change of
the machine's load hits them alike); the table shows the median epoch.
For (c), lines above the table also give the CPU time of the process per
batch (how many cores the run kept busy) and the CPU time spent inside the
mapper and the step: the threaded run can hide the mapper only on a second
free core, and only if the work itself does not slow down when both cores
run (both are properties of the machine and its load, not of the flow).

It is a benchmark, not a test: it prints figures and exits 0 whether or
not the targets are met.  Usage::

    python benchmarks/bench_dataflow.py [--quick] [--prefetch N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

# Before numpy is imported: one BLAS thread per Python thread, so that the
# worker of (c) and the consumer each keep to one core.
os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _bench import (Row, Stopwatch, describe_machine, format_table,  # noqa: E402
                    load_average, time_alternating, whole_call, write_rows)

# Sizes of the full run and of the `--quick` smoke run.  `ab_repeats` is for
# (a) and (b), whose epochs are short; `repeats` for (c) and (d).
SIZES = {
    'full': {'rows': 60_000, 'ab_repeats': 15, 'repeats': 5},
    'quick': {'rows': 2_000, 'ab_repeats': 1, 'repeats': 1},
}
FEATURES = 784
CLASSES = 10
BATCH_SIZES = (64, 256)
HIDDEN = 256               # width of the simulated work of (c)
SEED = 20240601
ARRAYS_TARGET = 0.95       # (b): batches/s of DataFlow.arrays / baseline, at least
HIDDEN_TARGET = 0.80       # (c): (inline - threaded) / mapper cost, at least

CASES = {
    'baseline': '(a) numpy loop, x[idx], y[idx]',
    'arrays': '(b) DataFlow.arrays',
    'mapper': '(c) mapper alone',
    'inline': '(c) map(mapper), inline + step',
    'threaded': '(c) map(mapper).threaded + step',
    'hidden': '(c) mapper cost hidden by thread',
    'tf_data': '(d) tf.data slices.shuffle.batch',
}
TABLE_COLUMNS = ('case', 'batch size', 'batches/s', 'µs/batch', 'ratio', 'target', 'met')


# -------------------------------------------------------------- the cases
def _numpy_epoch(x: Any, y: Any, batch_size: int, rng: Any) -> int:
    """(a): one shuffled epoch by hand; returns the number of batches."""
    n = len(x)
    perm = rng.permutation(n)
    count = 0
    for i in range(0, n, batch_size):
        idx = perm[i:i + batch_size]
        bx, by = x[idx], y[idx]  # noqa: F841  (the gathers are what is timed)
        count += 1
    return count


def _flow_epoch(flow: Iterable[Any]) -> int:
    """(b): one epoch of a flow, nothing done with the batches."""
    count = 0
    for bx, by in flow:
        count += 1
    return count


class DenseWork:
    """The numpy work of the mapper and of the simulated training step.

    ``tanh(batch @ w1) @ w2``, float32, (bs x 784) -> (bs x HIDDEN) ->
    (bs x 784): two matrix products (OpenBLAS, which runs without the GIL)
    and an elementwise tanh (a ufunc, also without the GIL).  Its output
    has the shape of its input, so the step consuming the mapper's output
    does exactly the mapper's work.
    """

    def __init__(self, rng: Any, hidden: int):
        import numpy as np
        scale = np.float32(FEATURES ** -0.5)   # a float64 scale would make float64 weights
        self.w1 = rng.standard_normal((FEATURES, hidden), dtype=np.float32) * scale
        self.w2 = rng.standard_normal((hidden, FEATURES), dtype=np.float32) * scale
        assert self.w1.dtype == self.w2.dtype == np.float32

    def __call__(self, bx: Any) -> Any:
        import numpy as np
        h = bx @ self.w1
        np.tanh(h, out=h)
        return h @ self.w2

    def describe(self) -> str:
        return (f'tanh(batch @ W1) @ W2, float32, batch x {FEATURES} -> batch x '
                f'{self.w1.shape[1]} -> batch x {FEATURES}')


def _mapper_alone_epoch(flow: Iterable[Any], mapper: Callable[..., Any],
                        step: Callable[[Any], Any]) -> tuple[int, float, float]:
    """One epoch of the plain flow; the seconds spent in the mapper and in the step."""
    in_mapper = in_step = 0.
    count = 0
    clock = time.perf_counter
    for bx, by in flow:
        t0 = clock()
        mx, my = mapper(bx, by)
        t1 = clock()
        step(mx)
        t2 = clock()
        in_mapper += t1 - t0
        in_step += t2 - t1
        count += 1
    return count, in_mapper, in_step


class CpuClocked:
    """Calls `fn`, adding up the CPU time of the calling thread spent in it.

    The mapper and the step of (c) are wrapped in one each: if their CPU
    time per call grows in the threaded run, the work itself ran slower
    while the two threads ran at once (cores shared with other processes or
    slowed by the host), which no data flow can help.  Each instance is
    called by one thread at a time.
    """

    def __init__(self, fn: Callable[..., Any]):
        self.fn = fn
        self.seconds = 0.
        self.calls = 0

    def __call__(self, *args: Any) -> Any:
        start = time.thread_time()
        out = self.fn(*args)
        self.seconds += time.thread_time() - start
        self.calls += 1
        return out

    def take_us_per_call(self) -> float:
        """µs per call since the last `take_us_per_call`, and reset."""
        us = self.seconds / max(self.calls, 1) * 1e6
        self.seconds, self.calls = 0., 0
        return us


def _consumer_epoch(flow: Iterable[Any], step: Callable[[Any], Any]) -> int:
    """(c): one epoch of a mapped flow, each batch consumed by the simulated step."""
    count = 0
    for bx, by in flow:
        step(bx)
        count += 1
    return count


def _tf_data_epoch(dataset: Iterable[Any]) -> int:
    """(d): one epoch of a tf.data pipeline, both tensors of each batch fetched to numpy."""
    count = 0
    for bx, by in dataset:
        bx.numpy()
        by.numpy()
        count += 1
    return count


# -------------------------------------------------------------- measurement
def measure(batch_size: int, x: Any, y: Any, sizes: dict[str, int], prefetch: int,
            work: DenseWork) -> dict[str, float]:
    """µs per batch of every case at one batch size (the median epoch of each)."""
    import numpy as np
    import tensorflow as tf

    import tfsnippet as spt

    out = {}

    # --- (a) and (b): same seed, same permutations, alternating epochs.
    base_rng = np.random.default_rng(SEED + batch_size)
    flow = spt.DataFlow.arrays([x, y], batch_size, shuffle=True,
                               random_state=np.random.default_rng(SEED + batch_size))
    batches = _numpy_epoch(x, y, batch_size, base_rng)           # warm-up
    _flow_epoch(flow)
    ab = time_alternating(
        {'baseline': whole_call(lambda: _numpy_epoch(x, y, batch_size, base_rng)),
         'arrays': whole_call(lambda: _flow_epoch(flow))}, sizes['ab_repeats'])
    out['baseline'] = ab['baseline'].median / batches * 1e6
    out['arrays'] = ab['arrays'].median / batches * 1e6

    # --- (c): mapper cost, inline and threaded, alternating epochs.
    def mapper(bx: Any, by: Any) -> tuple[Any, Any]:
        return work(bx), by

    clocked_mapper, clocked_step = CpuClocked(mapper), CpuClocked(work)
    source = spt.DataFlow.arrays([x, y], batch_size, shuffle=True,
                                 random_state=np.random.default_rng(SEED + 1 + batch_size))
    inline = source.map(clocked_mapper)
    threaded = source.map(clocked_mapper).threaded(prefetch)
    # The seconds spent in the mapper and in the step of the plain flow, per
    # epoch; the CPU µs per call of the mapper and of the step in each run.
    alone: dict[str, list[float]] = {'mapper': [], 'step': []}
    cpu_in_work: dict[str, dict[str, list[float]]] = {
        key: {'mapper': [], 'step': []} for key in ('inline', 'threaded')}

    def mapper_alone(watch: Stopwatch) -> None:
        with watch:
            _, in_mapper, in_step = _mapper_alone_epoch(source, mapper, work)
        alone['mapper'].append(in_mapper)
        alone['step'].append(in_step)

    def consumer(key: str, flow: Iterable[Any]) -> Callable[[Stopwatch], None]:
        def run(watch: Stopwatch) -> None:
            with watch:
                _consumer_epoch(flow, clocked_step)
            cpu_in_work[key]['mapper'].append(clocked_mapper.take_us_per_call())
            cpu_in_work[key]['step'].append(clocked_step.take_us_per_call())
        return run

    try:
        _mapper_alone_epoch(source, mapper, work)        # warm-up
        _consumer_epoch(inline, work)
        _consumer_epoch(threaded, work)
        # with the CPU time of the process (all its threads): next to the wall
        # time, it tells whether the threaded run found a second core free
        c = time_alternating({'alone': mapper_alone, 'inline': consumer('inline', inline),
                              'threaded': consumer('threaded', threaded)},
                             sizes['repeats'], cpu_clock=time.process_time)
    finally:
        threaded.close()
    out['mapper'] = statistics.median(alone['mapper']) / batches * 1e6
    out['step'] = statistics.median(alone['step']) / batches * 1e6
    for key in ('inline', 'threaded'):
        out[key] = c[key].median / batches * 1e6
        out[key + '_cpu'] = c[key].cpu_median / batches * 1e6
        out[key + '_mapper_cpu'] = statistics.median(cpu_in_work[key]['mapper'])
        out[key + '_step_cpu'] = statistics.median(cpu_in_work[key]['step'])

    # --- (d): tf.data, eager.
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(
        len(x), seed=SEED + batch_size).batch(batch_size)
    _tf_data_epoch(dataset)                               # warm-up
    d = time_alternating({'tf_data': whole_call(lambda: _tf_data_epoch(dataset))},
                         sizes['repeats'])
    out['tf_data'] = d['tf_data'].median / batches * 1e6
    return out


# -------------------------------------------------------------- report
def table_rows(batch_size: int, r: dict[str, float]) -> list[tuple[str, ...]]:
    """The rows of one batch size: case, bs, batches/s, µs/batch, ratio, target, met."""

    def rate(us: float) -> str:
        return f'{1e6 / us:,.0f}'

    def row(key: str, us: float, ratio: float | None = None, target: float | None = None,
            met: bool | None = None) -> tuple[str, ...]:
        return (CASES[key], str(batch_size), '-' if key == 'hidden' else rate(us), f'{us:,.1f}',
                '' if ratio is None else f'{ratio:.2f}',
                '' if target is None else f'>={target:.2f}',
                '' if met is None else ('yes' if met else 'no'))

    arrays_ratio = r['baseline'] / r['arrays']
    hidden = (r['inline'] - r['threaded']) / r['mapper']
    return [
        row('baseline', r['baseline'], 1.),
        row('arrays', r['arrays'], arrays_ratio, ARRAYS_TARGET, arrays_ratio >= ARRAYS_TARGET),
        row('mapper', r['mapper']),
        row('inline', r['inline'], 1.),
        row('threaded', r['threaded'], r['inline'] / r['threaded']),
        row('hidden', r['inline'] - r['threaded'], hidden, HIDDEN_TARGET,
            hidden >= HIDDEN_TARGET),
        row('tf_data', r['tf_data'], r['baseline'] / r['tf_data']),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true',
                        help=f'{SIZES["quick"]["rows"]:,} rows, one timed epoch per case')
    parser.add_argument('--prefetch', type=int, default=4,
                        help='batches the worker of (c) may read ahead (default: 4)')
    parser.add_argument('--table-json', metavar='PATH', help='also write the rows as JSON')
    args = parser.parse_args()
    sizes = SIZES['quick' if args.quick else 'full']

    import numpy as np
    import tensorflow as tf  # noqa: F401  (imported up front: its start-up is not timed)

    import tfsnippet  # noqa: F401

    print(describe_machine())
    rng = np.random.default_rng(SEED)
    n = sizes['rows']
    x = rng.standard_normal((n, FEATURES), dtype=np.float32)
    y = rng.integers(0, CLASSES, size=n, dtype=np.int64)
    work = DenseWork(rng, HIDDEN)
    print(f'  data        {n:,} x {FEATURES} float32 rows, int64 labels; shuffled; '
          f'batch sizes {", ".join(map(str, BATCH_SIZES))}')
    print(f'  timing      one warm-up epoch, then the median of {sizes["ab_repeats"]} '
          f'epochs for (a)/(b), of {sizes["repeats"]} for (c)/(d)')
    print(f'  (c) work    mapper and simulated step each do {work.describe()}')
    blas_threads = os.environ['OPENBLAS_NUM_THREADS']
    print(f'              (GIL released; OPENBLAS_NUM_THREADS={blas_threads}); '
          f'prefetch {args.prefetch}')
    print()
    sys.stdout.flush()

    rows: list[tuple[str, ...]] = []
    json_rows: list[Row] = []
    for batch_size in BATCH_SIZES:
        r = measure(batch_size, x, y, sizes, args.prefetch, work)
        hidden = (r['inline'] - r['threaded']) / r['mapper']
        json_rows += [
            Row(f'DataFlow.arrays, batch {batch_size}', 'numpy permutation + indexing',
                1e6 / r['baseline'], 1e6 / r['arrays'], 'batches/s',
                f'ratio >= {ARRAYS_TARGET:g}', r['baseline'] / r['arrays'] >= ARRAYS_TARGET),
            Row(f'threaded mapper: share of its cost hidden, batch {batch_size}',
                'mapper cost (µs/batch)', r['mapper'], r['inline'] - r['threaded'],
                'µs/batch', f'ratio >= {HIDDEN_TARGET:g}', hidden >= HIDDEN_TARGET),
            Row(f'DataFlow.arrays vs tf.data, batch {batch_size}',
                'tf.data shuffle+batch, .numpy()', 1e6 / r['tf_data'],
                1e6 / r['arrays'], 'batches/s'),
        ]
        print(f'batch size {batch_size}: (c) mapper {r["mapper"]:,.1f} µs/batch, simulated '
              f'step {r["step"]:,.1f} µs/batch (step / mapper {r["step"] / r["mapper"]:.2f}); '
              f'hidden {(r["inline"] - r["threaded"]) / r["mapper"]:.0%} of the mapper')
        for key in ('inline', 'threaded'):
            print(f'  {key:<8}  wall {r[key]:>9,.1f} µs/batch, CPU {r[key + "_cpu"]:>9,.1f} '
                  f'µs/batch ({r[key + "_cpu"] / r[key]:.2f} cores busy); CPU in mapper '
                  f'{r[key + "_mapper_cpu"]:,.1f}, in step {r[key + "_step_cpu"]:,.1f} µs/batch')
        sys.stdout.flush()
        rows.extend(table_rows(batch_size, r))

    print()
    print('Summary (median epoch of each case)')
    print(format_table(TABLE_COLUMNS, rows, align='lrrrrrr'))
    print('ratio: batches/s over the baseline: (a) for (b) and (d), the inline run for (c);')
    print('       for the "hidden" row, (inline - threaded) / mapper cost, its µs/batch '
          'being inline - threaded.')
    print(f'load avg at end: {load_average()} (1/5/15 min)')
    write_rows(args.table_json, json_rows)


if __name__ == '__main__':
    main()
