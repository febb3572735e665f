"""Benchmark: how long an asynchronous checkpoint save blocks the training loop.

Two parts, each run in one process so that its baselines share the load:

1. **A 10-million-parameter model** (five 2000-wide float32 matrices,
   38 MiB; 1M with ``--quick``), eager: the time a save blocks its caller,
   alternating between

   * ``tf.train.Checkpoint.write`` (synchronous: the baseline);
   * ``tf.train.Checkpoint.write`` with ``CheckpointOptions(enable_async=True)``
     (TF's own asynchronous option, eager only), the previous save finished;
   * ``CheckpointSaver.save``, synchronous and durable (fsync);
   * ``CheckpointSaver(asynchronous=True).save``, the previous save finished
     (the copy into host buffers: the figure with the 15 ms target);

   and, back to back (a save started while the previous one is still being
   written), TF's asynchronous option against ours: both wait for the
   previous save.  A child process measures our asynchronous save in graph
   mode (one ``session.run`` of the variables) against a graph-mode
   ``tf.compat.v1.train.Saver.save``.
2. **Steps/s of a digits MLP** (``load_digits``, 64-128-10, batches of 64,
   a ``tf.function`` step) in a ``TrainLoop`` saving a checkpoint every 10
   steps: no checkpoints vs synchronous vs ``checkpoint_async=True``; and
   every 100 steps, sync vs async.  When a durable write (a handful of
   fsyncs) takes longer than the steps between two saves, the asynchronous
   loop waits for it: its steps/s are then bounded by the disk.

Figures are medians (of 7 saves, 5 runs; 1 each with ``--quick``); the
save times come with the CPU time of the calling thread, which other
processes do not inflate.  The machine's load average is printed at the
start and the end: on a busy machine the background writer competes with
the loop for the cores, and the copy's wall time stretches.

Usage: ``python benchmarks/bench_checkpoint_async.py [--quick] [--dir PATH]
[--table-json PATH]``.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _bench import (Row, Samples, Stopwatch, describe_machine, format_table,  # noqa: E402
                    load_average, time_alternating, write_rows)
from _shared import matrices, quick_parser, run_child, scratch_dir  # noqa: E402

#: What an asynchronous save of the 10M-parameter model may block the loop for.
TARGET_MS = 15.
SAVE_FREQ = 10


# ------------------------------------------------------------------ part 1, eager
def measure_saves(n_params: int, repeats: int, root: str) -> dict[str, Samples]:
    """Seconds a save blocks its caller, per contestant, alternating."""
    import tensorflow as tf

    import tfsnippet as spt

    variables = matrices(n_params)
    tf_ckpt = tf.train.Checkpoint(**{f'w{i}': v for i, v in enumerate(variables)})
    tf_async = tf.train.CheckpointOptions(enable_async=True)
    sync_saver = spt.CheckpointSaver(variables, os.path.join(root, 'sync'), max_to_keep=2)
    async_saver = spt.CheckpointSaver(variables, os.path.join(root, 'async'), max_to_keep=2,
                                      asynchronous=True)
    counter = itertools.count()

    def tf_write(watch: Stopwatch) -> None:
        with watch:
            tf_ckpt.write(os.path.join(root, 'tf', 'ckpt'))

    def tf_write_async(watch: Stopwatch) -> None:
        with watch:
            tf_ckpt.write(os.path.join(root, 'tf-async', 'ckpt'), options=tf_async)
        tf_ckpt.sync()

    def tf_write_async_back_to_back(watch: Stopwatch) -> None:
        tf_ckpt.write(os.path.join(root, 'tf-async', 'ckpt'), options=tf_async)
        with watch:   # the previous write is still under way
            tf_ckpt.write(os.path.join(root, 'tf-async', 'ckpt'), options=tf_async)
        tf_ckpt.sync()

    def ours_sync(watch: Stopwatch) -> None:
        with watch:
            sync_saver.save(next(counter))

    def ours_async(watch: Stopwatch) -> None:
        with watch:
            async_saver.save(next(counter))
        async_saver.wait()

    def ours_async_back_to_back(watch: Stopwatch) -> None:
        async_saver.save(next(counter))
        with watch:   # waits for the previous save (back-pressure), then copies
            async_saver.save(next(counter))
        async_saver.wait()

    runs: dict[str, Callable[[Stopwatch], None]] = {
        'tf.train.Checkpoint.write': tf_write,
        'TF enable_async': tf_write_async,
        'CheckpointSaver sync': ours_sync,
        'CheckpointSaver async': ours_async,
        'TF enable_async, back to back': tf_write_async_back_to_back,
        'CheckpointSaver async, back to back': ours_async_back_to_back,
    }
    for run in runs.values():     # warm-up: graphs, files, buffers
        run(Stopwatch())
    return time_alternating(runs, repeats, cpu_clock=time.thread_time)


# ------------------------------------------------------------------ part 1, graph
def graph_child(n_params: int, repeats: int, root: str) -> None:
    """In a child process: our async save vs ``Saver.save``, graph mode; prints JSON."""
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    import tfsnippet as spt

    v1 = tf.compat.v1
    variables = matrices(n_params, graph=True)
    tf_saver = v1.train.Saver(var_list=variables)
    async_saver = spt.CheckpointSaver(variables, os.path.join(root, 'graph-async'),
                                      max_to_keep=2, asynchronous=True)
    counter = itertools.count()
    with v1.Session() as session:
        session.run(v1.global_variables_initializer())

        def tf_save(watch: Stopwatch) -> None:
            with watch:
                tf_saver.save(session, os.path.join(root, 'graph-tf', 'ckpt'),
                              write_meta_graph=False, write_state=False)

        def ours_async(watch: Stopwatch) -> None:
            with watch:
                async_saver.save(next(counter), session=session)
            async_saver.wait()

        runs = {'Saver.save [graph]': tf_save, 'CheckpointSaver async [graph]': ours_async}
        for run in runs.values():
            run(Stopwatch())
        times = time_alternating(runs, repeats, cpu_clock=time.thread_time)
    print(json.dumps({k: [s.wall, s.cpu] for k, s in times.items()}))


def measure_graph(n_params: int, repeats: int, root: str) -> dict[str, Samples]:
    out = run_child(__file__, ['--graph-child', str(n_params), str(repeats), root], graph=True)
    data = json.loads(out.strip().splitlines()[-1])
    return {k: Samples(wall, cpu) for k, (wall, cpu) in data.items()}


# ------------------------------------------------------------------ part 2
def measure_mlp(epochs: int, repeats: int, root: str) -> dict[str, Samples]:
    """Seconds per step of a digits MLP in a TrainLoop: no checkpoints, sync, async."""
    import tfsnippet as spt
    from bench_train_loop import digits_eager_mlp

    batches, model, optimizer, train_step = digits_eager_mlp()

    runs_done = itertools.count()

    def training(mode: str, freq: int = SAVE_FREQ) -> Callable[..., None]:
        def run(watch: Stopwatch, epochs: int = epochs) -> None:
            kwargs: dict[str, Any] = {}
            if mode != 'none':
                kwargs = dict(checkpoint_dir=os.path.join(root, f'mlp-{next(runs_done)}'),
                              checkpoint_step_freq=freq, checkpoint_max_to_keep=2,
                              checkpoint_async=mode == 'async',
                              checkpoint_save_objects={'model': model, 'optimizer': optimizer})
            with watch:
                with spt.TrainLoop(model.trainable_variables, max_epoch=epochs,
                                   print_func=lambda s: None, **kwargs) as loop:
                    for _ in loop.iter_epochs():
                        for _, (x, y) in loop.iter_steps(batches):
                            loop.collect_metrics(loss=train_step(x, y))
        return run

    runs = {'no checkpoints': training('none'), 'sync, every 10 steps': training('sync'),
            'async, every 10 steps': training('async'),
            'sync, every 100 steps': training('sync', 100),
            'async, every 100 steps': training('async', 100)}
    for run in runs.values():
        run(Stopwatch(), 1)
    steps = epochs * len(batches)
    return {k: s.scaled(1 / steps) for k, s in time_alternating(runs, repeats).items()}


# ------------------------------------------------------------------ report
def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == '--graph-child':
        graph_child(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
        return
    args = quick_parser(__doc__.splitlines()[0], '1M parameters, 1 run, 1 epoch',
                        dir=True).parse_args()

    n_params = 1_000_000 if args.quick else 10_000_000
    repeats = 1 if args.quick else 7
    runs = 1 if args.quick else 5
    epochs = 1 if args.quick else 6
    print(describe_machine())
    with scratch_dir(args.dir) as root:
        saves = measure_saves(n_params, repeats, root)
        graph = measure_graph(n_params, repeats, root)
        mlp = measure_mlp(epochs, runs, root)

    size = n_params * 4 / 2 ** 20
    print(f'\n1. The time a save blocks the loop: {n_params:,} float32 parameters ({size:.1f} '
          f'MiB), median of {repeats}, ms')
    table = [(name, f'{s.median * 1e3:.1f}', f'{s.best * 1e3:.1f}', f'{max(s.wall) * 1e3:.1f}',
              f'{s.cpu_median * 1e3:.1f}')
             for name, s in list(saves.items()) + list(graph.items())]
    print(format_table(('case', 'median', 'min', 'max', 'thread CPU median'), table,
                       align='lrrrr'))
    print('(wall times of the saving call; "thread CPU" is the CPU time of the calling thread '
          'only,\n which a busy machine does not inflate)')
    print(f'\n2. A digits MLP in a TrainLoop saving checkpoints, {epochs} epochs, median of '
          f'{runs} runs')
    none = mlp['no checkpoints'].median
    print(format_table(('case', 'steps/s', 'vs none'), [
        (name, f'{1 / s.median:,.0f}', f'{none / s.median:.3f}') for name, s in mlp.items()],
        align='lrr'))
    print(f'\nload avg at the end: {load_average()} (1/5/15 min)')

    ms = {name: s.median * 1e3 for name, s in list(saves.items()) + list(graph.items())}
    label = f'{n_params // 1_000_000}M params'
    rows = [
        Row(f'async save blocks the loop, {label} [eager]', 'tf.train.Checkpoint.write',
            ms['tf.train.Checkpoint.write'], ms['CheckpointSaver async'], 'ms',
            f'<= {TARGET_MS:.0f} ms', ms['CheckpointSaver async'] <= TARGET_MS),
        Row(f'async save blocks the loop, {label} [eager]', 'TF enable_async',
            ms['TF enable_async'], ms['CheckpointSaver async'], 'ms'),
        Row(f'async save back to back, {label} [eager]', 'TF enable_async, back to back',
            ms['TF enable_async, back to back'], ms['CheckpointSaver async, back to back'], 'ms'),
        Row(f'async save blocks the loop, {label} [graph]', 'Saver.save [graph]',
            ms['Saver.save [graph]'], ms['CheckpointSaver async [graph]'], 'ms',
            f'<= {TARGET_MS:.0f} ms', ms['CheckpointSaver async [graph]'] <= TARGET_MS),
        Row(f'digits MLP, sync save every {SAVE_FREQ} steps', 'no checkpoints', 1 / none,
            1 / mlp['sync, every 10 steps'].median, 'steps/s'),
        Row(f'digits MLP, async save every {SAVE_FREQ} steps', 'no checkpoints', 1 / none,
            1 / mlp['async, every 10 steps'].median, 'steps/s'),
        Row(f'digits MLP, async save every {SAVE_FREQ} steps', f'sync every {SAVE_FREQ}',
            1 / mlp['sync, every 10 steps'].median, 1 / mlp['async, every 10 steps'].median,
            'steps/s'),
        Row('digits MLP, async save every 100 steps', 'sync every 100',
            1 / mlp['sync, every 100 steps'].median, 1 / mlp['async, every 100 steps'].median,
            'steps/s'),
    ]
    write_rows(args.table_json, rows)


if __name__ == '__main__':
    main()
