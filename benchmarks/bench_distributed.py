#!/usr/bin/env python
"""What does :class:`tfsnippet.TrainLoop` cost under ``tf.distribute``, and what does a launch cost?

In one run, on the digits MLP (sklearn's ``load_digits``, 64-128-64-10,
Adam, a global batch of 64, the remainder of each epoch dropped):

* **Mirrored**: ``MirroredStrategy`` over two logical CPUs, in this
  process.  A bare loop (``shard_flow`` + ``split_batch`` +
  ``strategy.run`` in a ``tf.function``, the per-replica losses kept and
  averaged on the host at the end of each epoch) against ``TrainLoop``
  doing the same step (``loop.iter_steps(flow)`` yields the per-replica
  batches, ``loop.collect_metrics(loss=...)``, ``loop.print_logs()`` per
  epoch).  Target: TrainLoop / bare of the median time per step at most 1.02.
  The epochs are timed; entering and leaving the loop, once per job, is
  printed apart, with the all-reduces per epoch of both variants.
* **MultiWorkerMirrored, 2 workers on loopback**: the same two variants in
  two worker processes started by ``python -m tfsnippet.launch --workers 2``
  (this script with ``--worker``), which time them alternately and print
  their figures; the bare loop averages the loss across the workers with one
  ``strategy.reduce`` per epoch, as ``TrainLoop`` does when it prints.
  Target: at most 1.02.
* **The launcher's start-up**: ``python -m tfsnippet.launch --workers 2``
  running a script that does nothing, against starting the same two Python
  processes directly; and, reported, the time from the launch until both
  workers hold their ``MultiWorkerMirroredStrategy``.
* **1 vs 2 workers**: steps/s of the bare loop at the same global batch with
  one worker and with two (reported, not a target: on two cores the two
  workers share them, and each step pays an all-reduce on loopback).

It is a benchmark, not a test: it prints figures and exits 0 whether or not
the targets are met.  Usage::

    python benchmarks/bench_distributed.py [--quick] [--table-json PATH]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _bench import (Row, Samples, StepTimeline, Stopwatch, describe_machine,  # noqa: E402
                    format_table, load_average, paired_ratio, time_alternating,
                    timeline_rounds, write_rows)

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

TARGET_RATIO = 1.02       # TrainLoop / bare, median time per step
GLOBAL_BATCH = 64
SEED = 1234
MARK = 'BENCH '           # a worker's line of figures
T0_ENV = 'TFSNIPPET_BENCH_T0'   # the launch time, handed to the workers

# epochs per timed run, timed pairs (bare, TrainLoop), warm-up epochs
SIZES = {
    'full': {'epochs': 3, 'pairs': 41, 'warmup': 2, 'launch_repeats': 7},
    'quick': {'epochs': 1, 'pairs': 2, 'warmup': 1, 'launch_repeats': 1},
}


# ------------------------------------------------------------------- the job
class Job:
    """The digits MLP and its step under `strategy`, and the two loops that drive it."""

    def __init__(self, strategy: Any):
        import keras
        import numpy as np
        import tensorflow as tf
        from sklearn.datasets import load_digits

        import tfsnippet as spt
        from tfsnippet.backend import backend_for

        keras.utils.set_random_seed(SEED)
        x, y = load_digits(return_X_y=True)
        self.x, self.y = (x / 16.).astype(np.float32), y.astype(np.int32)
        self.strategy = strategy
        self.backend = backend_for(strategy)
        self.num_workers = self.backend.num_workers if self.backend else 1
        self.worker_index = self.backend.worker_index if self.backend else 0
        with strategy.scope():
            self.model = keras.Sequential([
                keras.Input(shape=(64,)),
                keras.layers.Dense(128, activation='relu'),
                keras.layers.Dense(64, activation='relu'),
                keras.layers.Dense(10)])
            self.optimizer = keras.optimizers.Adam(1e-3)
            self.optimizer.build(self.model.trainable_variables)
        model, optimizer = self.model, self.optimizer

        def replica_step(bx: Any, by: Any) -> Any:
            with tf.GradientTape() as tape:
                per_example = keras.losses.sparse_categorical_crossentropy(
                    by, model(bx, training=True), from_logits=True)
                loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
            variables = model.trainable_variables
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss * strategy.num_replicas_in_sync   # this replica's mean loss

        @tf.function   # no input_signature: per-replica arguments; batches of one shape
        def train_step(bx: Any, by: Any) -> Any:
            return strategy.run(replica_step, args=(bx, by))

        self.train_step = train_step
        self.spt = spt
        self.steps_per_epoch = len(self.x) // GLOBAL_BATCH
        self.setup_ms: list[float] = []              # TrainLoop entry + exit, per run
        self.epoch_collectives: list[float] = []     # TrainLoop all-reduces per epoch
        self.all_reduce_ms: list[float] = []         # the bare loop's all-reduces

    def flow(self) -> Any:
        """The global-batch flow: shuffled with the seed, the remainder of an epoch dropped."""
        return self.spt.DataFlow.arrays([self.x, self.y], GLOBAL_BATCH, shuffle=True,
                                        skip_incomplete=True, random_state=SEED)

    def bare(self, epochs: int, watch: Any = None, train_step: Any = None) -> list[float]:
        """`epochs` epochs of the hand-written loop (timed by `watch`), calling
        `train_step` (default: the job's); each epoch's mean loss."""
        import numpy as np
        import tensorflow as tf

        from tfsnippet.dataflows.sharding import shard_flow, split_batch

        strategy, train_step = self.strategy, train_step or self.train_step
        flow = self.flow()
        means = []
        with watch or contextlib.nullcontext():
            # sharded inside the timed block, as TrainLoop shards its flow in `iter_steps`
            flow = shard_flow(flow, self.num_workers, self.worker_index, seed=SEED)
            for _ in range(epochs):
                losses = []
                for batch in flow:
                    losses.append(train_step(*split_batch(strategy, batch)))
                local = np.mean([np.asarray(v) for loss in losses
                                 for v in strategy.experimental_local_results(loss)])
                if self.num_workers > 1:   # one all-reduce, as TrainLoop's when it prints
                    t0 = time.perf_counter()
                    per_replica = strategy.experimental_distribute_values_from_function(
                        lambda ctx: tf.constant(local / strategy.num_replicas_in_sync,
                                                tf.float64))
                    local = float(strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica,
                                                  axis=None))
                    self.all_reduce_ms.append((time.perf_counter() - t0) * 1e3)
                means.append(float(local))
        return means

    def train_loop(self, epochs: int, watch: Any = None, train_step: Any = None) -> list[str]:
        """`epochs` epochs driven by ``TrainLoop``, calling `train_step` (default:
        the job's); returns the lines it printed.

        `watch` times the epochs; entering and leaving the loop (once per
        job) go to :attr:`setup_ms`, its collectives during the epochs to
        :attr:`epoch_collectives`.
        """
        lines: list[str] = []
        flow = self.flow()
        train_step = train_step or self.train_step
        setup = Stopwatch()
        with setup:
            loop = self.spt.TrainLoop(self.model.trainable_variables, max_epoch=epochs,
                                      print_func=lines.append, strategy=self.strategy)
            loop.__enter__()
        try:
            before = loop.backend.collectives
            with watch or contextlib.nullcontext():
                for _ in loop.iter_epochs():
                    for _, (bx, by) in loop.iter_steps(flow):
                        loop.collect_metrics(loss=train_step(bx, by))
                    loop.print_logs()
            self.epoch_collectives.append((loop.backend.collectives - before) / epochs)
        finally:
            with setup:
                loop.__exit__(None, None, None)
        self.setup_ms.append(setup.wall * 1e3)
        return lines

    def time_both(self, size: dict[str, int], with_loop: bool = True) -> dict[str, Any]:
        """Warm up, then time the variants alternately; ms per step of each run."""
        self.bare(size['warmup'])
        epochs = size['epochs']
        runs: dict[str, Any] = {'bare': lambda watch: self.bare(epochs, watch)}
        if with_loop:
            self.train_loop(size['warmup'])
            runs['TrainLoop'] = lambda watch: self.train_loop(epochs, watch)
        self.setup_ms, self.epoch_collectives, self.all_reduce_ms = [], [], []
        samples = time_alternating(runs, size['pairs'], mirror=True)
        per_step = 1e3 / (epochs * self.steps_per_epoch)
        return {name: s.scaled(per_step).wall for name, s in samples.items()}

    def where_time_goes(self, size: dict[str, int]) -> dict[str, dict[str, float]]:
        """The parts of a run of each loop (see ``StepTimeline``), the step
        function timestamped, in mirrored rounds: medians, µs per step."""
        epochs = size['epochs']
        timelines = {name: StepTimeline(self.steps_per_epoch) for name in ('bare', 'TrainLoop')}
        steps = {name: t.wrap(self.train_step) for name, t in timelines.items()}

        @contextlib.contextmanager
        def timed(watch: Any, name: str) -> Any:   # the timed epochs, both ways
            with watch, timelines[name].run():
                yield

        def bare(watch: Any) -> None:
            self.bare(epochs, timed(watch, 'bare'), steps['bare'])

        def loop(watch: Any) -> None:
            self.train_loop(epochs, timed(watch, 'TrainLoop'), steps['TrainLoop'])

        time_alternating({'bare': bare, 'TrainLoop': loop}, timeline_rounds(size['pairs']),
                         mirror=True)
        per_step = 1e6 / (epochs * self.steps_per_epoch)
        return {name: {part: v * per_step for part, v in t.medians().items()}
                for name, t in timelines.items()}


# ----------------------------------------------------------------- a worker
def worker_main(size_name: str, with_loop: bool) -> int:
    """One worker of the MultiWorkerMirrored part (run by the launcher): print its figures."""
    import tensorflow as tf

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    ready = time.time() - float(os.environ.get(T0_ENV, 'nan'))
    job = Job(strategy)
    times = job.time_both(SIZES[size_name], with_loop=with_loop)
    print(MARK + json.dumps({'worker': job.worker_index, 'ready_s': ready,
                             'steps_per_epoch': job.steps_per_epoch, 'ms_per_step': times,
                             'setup_ms': job.setup_ms,
                             'epoch_collectives': job.epoch_collectives,
                             'all_reduce_ms': job.all_reduce_ms}), flush=True)
    return 0


def launch_command(workers: int, script: str, *args: str) -> list[str]:
    """``python -m tfsnippet.launch --workers N script ARGS``."""
    return [sys.executable, '-m', 'tfsnippet.launch', '--workers', str(workers), script, *args]


class Workers:
    """`workers` workers of this script started through the launcher, in the background."""

    def __init__(self, workers: int, size_name: str, with_loop: bool):
        args = ['--worker', '--size', size_name] + ([] if with_loop else ['--bare-only'])
        env = dict(os.environ, **{T0_ENV: repr(time.time())})
        self.workers = workers
        self.out, self.err = tempfile.TemporaryFile('w+'), tempfile.TemporaryFile('w+')
        self.proc = subprocess.Popen(launch_command(workers, os.path.abspath(__file__), *args),
                                     stdout=self.out, stderr=self.err, text=True, env=env)

    def figures(self) -> list[dict[str, Any]]:
        """Wait for the job to end; each worker's figures."""
        try:
            code = self.proc.wait(timeout=900)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        outputs = []
        for f in (self.out, self.err):
            f.seek(0)
            outputs.append(f.read())
            f.close()
        stdout, stderr = outputs
        found = {}
        for line in stdout.splitlines():
            head, _, rest = line.partition('] ')
            if rest.startswith(MARK):
                data = json.loads(rest[len(MARK):])
                found[data['worker']] = data
        if code != 0 or sorted(found) != list(range(self.workers)):
            raise RuntimeError(f'the {self.workers}-worker run failed (exit {code}):\n'
                               f'{stdout[-3000:]}\n{stderr[-5000:]}')
        return [found[i] for i in range(self.workers)]


def run_workers(workers: int, size_name: str, with_loop: bool) -> list[dict[str, Any]]:
    """Run `workers` workers of this script through the launcher; each one's figures."""
    return Workers(workers, size_name, with_loop).figures()


# --------------------------------------------------------------- the parts
def noop_costs(strategy: Any, batches: int, repeats: int) -> tuple[Samples, Samples, Samples]:
    """µs per step of the data and metric handling alone: bare, by TrainLoop, and
    by TrainLoop without the metric.

    The step is a no-op: the bare loop shards and splits each batch
    (``shard_flow`` + ``split_batch``); the TrainLoop yields the per-replica
    batches of ``iter_steps`` and collects one per-replica loss per step (or,
    in the third variant, collects nothing: the data path alone).
    """
    import numpy as np
    import tensorflow as tf

    import tfsnippet as spt
    from tfsnippet.dataflows.sharding import shard_flow, split_batch

    with strategy.scope():
        var = tf.Variable(0.)
    def replica_loss() -> Any:
        return tf.constant(1.)

    @tf.function
    def step() -> Any:
        return strategy.run(replica_loss)

    loss = step()
    flow = spt.DataFlow.arrays([np.zeros((GLOBAL_BATCH * batches, 64), np.float32)],
                               GLOBAL_BATCH)

    def bare(watch: Any) -> None:
        with watch:   # sharded inside, as TrainLoop shards the flow inside `iter_steps`
            for batch in shard_flow(flow, 1, 0):
                split_batch(strategy, batch)

    def loop(watch: Any, collect: bool = True) -> None:
        with spt.TrainLoop([var], max_epoch=1, print_func=lambda line: None,
                           strategy=strategy) as train_loop:
            for _ in train_loop.iter_epochs():
                with watch:
                    for _ in train_loop.iter_steps(flow):
                        if collect:
                            train_loop.collect_metrics(loss=loss)
                train_loop.print_logs()

    samples = time_alternating({'bare': bare, 'TrainLoop': loop,
                                'data only': lambda watch: loop(watch, collect=False)},
                               repeats)
    per_step = 1e6 / batches
    return (samples['bare'].scaled(per_step), samples['TrainLoop'].scaled(per_step),
            samples['data only'].scaled(per_step))


def ratio_row(case: str, times: dict[str, list[float]]) -> tuple[Row, list[str]]:
    """The TrainLoop / bare row of `times` (ms per step of each run, paired by
    round), and its table cells.  The figure is the median of the per-round
    ratios; the target counts as met when the whole 95% confidence interval
    of that median meets it (``unclear`` in the table, and not met in the
    row, when it straddles the target)."""
    bare, loop = Samples(times['bare'], times['bare']), Samples(times['TrainLoop'],
                                                                times['TrainLoop'])
    paired = paired_ratio(bare, loop)
    decided = paired.decide(at_most=TARGET_RATIO)
    row = Row(case, 'bare strategy.run loop', bare.median, bare.median * paired.median,
              'ms/step', f'ratio ≤ {TARGET_RATIO} (whole 95% CI)', decided == 'yes')
    cells = [case, f'{bare.median:.3f}', f'{loop.median:.3f}', f'{bare.best:.3f}',
             f'{loop.best:.3f}', paired.text(), f'{paired.spread:.1%}', f'≤ {TARGET_RATIO}',
             decided]
    return row, cells


def launcher_startup(repeats: int) -> tuple[Samples, Samples]:
    """Wall times of two trivial processes started directly, and through the launcher."""
    with tempfile.TemporaryDirectory() as tmp:
        script = os.path.join(tmp, 'trivial.py')
        with open(script, 'w') as f:
            f.write('pass\n')

        def direct(watch: Any) -> None:
            with watch:
                procs = [subprocess.Popen([sys.executable, script]) for _ in range(2)]
                codes = [p.wait() for p in procs]
            assert codes == [0, 0], codes

        def launched(watch: Any) -> None:
            with watch:
                proc = subprocess.run(launch_command(2, script), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.PIPE, text=True)
            assert proc.returncode == 0, proc.stderr

        samples = time_alternating({'direct': direct, 'launch': launched}, repeats)
    return samples['direct'], samples['launch']


def main_process(size_name: str, table_json: str | None) -> int:
    import tensorflow as tf

    # two logical CPUs for MirroredStrategy; only this process's devices
    cpu = tf.config.list_physical_devices('CPU')[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    tf.config.experimental.enable_op_determinism()
    size = SIZES[size_name]
    print(f'TrainLoop under tf.distribute, digits MLP 64-128-64-10, global batch {GLOBAL_BATCH}'
          f'{" (--quick: smoke sizes, not figures)" if size_name == "quick" else ""}')
    print(describe_machine())
    print(f'  runs        {size["pairs"]} mirrored rounds (bare, TrainLoop, TrainLoop, bare, '
          f'...) of {size["epochs"]} epoch(s) a run, after {size["warmup"]} warm-up epoch(s)')
    print(flush=True)

    # --quick (not figures): both launcher jobs run meanwhile, in the background
    jobs = ({2: Workers(2, size_name, with_loop=True), 1: Workers(1, size_name, with_loop=False)}
            if size_name == 'quick' else {})
    rows: list[Row] = []
    ratio_cells = []
    notes = []   # (case, TrainLoop entry + exit ms, its all-reduces per epoch, the bare loop's)

    print('Mirrored, 2 logical CPUs, in this process ...', flush=True)
    mirrored = Job(tf.distribute.MirroredStrategy(['/cpu:0', '/cpu:1']))
    times = mirrored.time_both(size)
    row, cells = ratio_row('Mirrored, 2 logical CPUs', times)
    rows.append(row)
    ratio_cells.append(cells)
    notes.append((row.case, statistics.median(mirrored.setup_ms),
                  statistics.median(mirrored.epoch_collectives), 0, None))
    parts = mirrored.where_time_goes(size)

    noop_bare, noop_loop, noop_data = noop_costs(
        mirrored.strategy, 50 if size_name == 'quick' else 500, size['pairs'])
    rows.append(Row('Mirrored, no-op step: data + metrics per step',
                    'shard_flow + split_batch', noop_bare.median, noop_loop.median, 'µs/step'))
    rows.append(Row('Mirrored, no-op step: data only (no metric)',
                    'shard_flow + split_batch', noop_bare.median, noop_data.median, 'µs/step'))

    print('MultiWorkerMirrored, 2 workers on loopback (launcher) ...', flush=True)
    two = jobs[2].figures() if jobs else run_workers(2, size_name, with_loop=True)
    for w in two:
        row, cells = ratio_row(f'MultiWorkerMirrored, 2 workers [worker {w["worker"]}]',
                               w['ms_per_step'])
        ratio_cells.append(cells)
        notes.append((row.case, statistics.median(w['setup_ms']),
                      statistics.median(w['epoch_collectives']), 1,
                      statistics.median(w['all_reduce_ms'])))
        if w['worker'] == 0:
            rows.append(row)

    print('MultiWorkerMirrored, 1 worker (launcher) ...', flush=True)
    one = jobs[1].figures() if jobs else run_workers(1, size_name, with_loop=False)

    print('launcher start-up, 2 trivial workers ...', flush=True)
    direct, launched = launcher_startup(size['launch_repeats'])
    rows.append(Row('launcher start-up, 2 trivial workers', '2 processes started directly',
                    direct.median * 1e3, launched.median * 1e3, 'ms'))
    ready_two = max(w['ready_s'] for w in two)
    rows.append(Row('launch until MWMS strategy ready', '1 worker', one[0]['ready_s'],
                    ready_two, 's'))
    steps_one = 1e3 / statistics.median(one[0]['ms_per_step']['bare'])
    steps_two = 1e3 / statistics.median(two[0]['ms_per_step']['bare'])
    rows.append(Row('digits MLP, bare loop, 2 workers vs 1', '1 worker', steps_one, steps_two,
                    'steps/s'))

    print()
    print('Summary (ms per step; medians and bests of the timed runs; the ratio is the median '
          'of the per-round ratios, with its 95% confidence interval)')
    print(format_table(('case', 'bare median', 'TrainLoop median', 'bare best',
                        'TrainLoop best', 'ratio: median (95% CI) best', 'IQR/median', 'target',
                        'met'), ratio_cells, align='lrrrrrrll'))
    print('  The epochs are timed; entering and leaving the TrainLoop (once per job) is not.')
    print('  "their share" = (TrainLoop - bare all-reduces per epoch) x ms per all-reduce '
          '/ steps per epoch:')
    steps = mirrored.steps_per_epoch
    print(format_table(
        ('case', 'entry + exit ms', 'all-reduces/epoch: TrainLoop', 'bare', 'ms/all-reduce',
         'their share ms/step'),
        [(case, f'{ms:.1f}', f'{n:.2f}', str(b), '' if each is None else f'{each:.2f}',
          '' if each is None else f'{(n - b) * each / steps:.3f}')
         for case, ms, n, b, each in notes], align='lrrrrr'))
    print()
    print(f'Where the time of a Mirrored run goes: timestamps around each call of the step '
          f'function, medians of {timeline_rounds(size["pairs"])} rounds, µs per step (the timed '
          f'epochs, as above)')
    lines = []
    bare_total = sum(parts['bare'].values())
    for part in StepTimeline.PARTS + ('total',):
        b, t = (sum(p.values()) if part == 'total' else p[part]
                for p in (parts['bare'], parts['TrainLoop']))
        lines.append((part, f'{b:.2f}', f'{t:.2f}', f'{t - b:+.2f}',
                      f'{(t - b) / bare_total:+.2%}'))
    print(format_table(('part', 'bare', 'TrainLoop', 'TrainLoop - bare', 'of the bare time'),
                       lines, align='lrrrr'))
    print()
    print(format_table(
        ('figure', 'baseline', 'baseline value', 'value', 'unit', 'ratio'),
        [(r.case, r.baseline, f'{r.baseline_value:.3f}', f'{r.value:.3f}', r.unit,
          f'{r.ratio:.3f}') for r in rows if r.target == ''], align='llrrlr'))
    print(f'  (global batch {GLOBAL_BATCH}: {GLOBAL_BATCH * steps_one:,.0f} samples/s on one '
          f'worker, {GLOBAL_BATCH * steps_two:,.0f} on two; not a target)')
    print(f'\nload avg {load_average()} (1/5/15 min) at the end')
    write_rows(table_json, rows)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='smoke-run sizes (not figures)')
    parser.add_argument('--table-json', metavar='PATH', help='also write the rows as JSON')
    parser.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    parser.add_argument('--size', choices=sorted(SIZES), default='full', help=argparse.SUPPRESS)
    parser.add_argument('--bare-only', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker_main(args.size, with_loop=not args.bare_only)
    return main_process('quick' if args.quick else args.size, args.table_json)


if __name__ == '__main__':
    sys.exit(main())
