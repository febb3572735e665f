"""Benchmark: a checkpoint save to S3 on loopback against the same save to local disk.

A model of 10 million float32 parameters (five ``[1000, 2000]`` variables,
38 MiB; 1M with ``--quick``), eager, saved by ``CheckpointSaver`` four ways,
alternating so that a change of the machine's load hits them alike:

* local disk, synchronous (durable: fsync and rename), the baseline;
* S3, synchronous: the same files written into a local staging folder, then
  uploaded under a fresh prefix, the commit marker, the conditional index write
  and the pruning (:mod:`tfsnippet.scaffold.checkpoint.object_store`);
* local disk and S3, asynchronous (``asynchronous=True``, the previous save
  finished): the time the save *holds the caller* (the loop), which is the copy
  into host buffers, target <= 15 ms; and the time its background write took.

S3 is a moto server (``python -m moto.server``) that the script starts on a
free port of 127.0.0.1 and points the S3 client at (``AWS_ENDPOINT_URL``,
fake credentials): the figures measure the protocol and the loopback
transfer, not a real network.  Medians of 5 saves (3 with ``--quick``); the
machine's load average is printed at the start and the end.

Usage: ``python benchmarks/bench_object_store.py [--quick] [--table-json PATH]``.
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from typing import Any

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _bench import (Row, Samples, Stopwatch, describe_machine, format_table,  # noqa: E402
                    load_average, time_alternating, write_rows)

#: What an asynchronous save may hold the loop for.
TARGET_MS = 15.


def make_variables(n_params: int) -> list[Any]:
    import tensorflow as tf
    rows = n_params // (5 * 2000)
    return [tf.Variable(tf.random.normal([rows, 2000], seed=i), name=f'w{i}')
            for i in range(5)]


def measure(n_params: int, repeats: int, root: str, bucket: str) -> tuple[
        dict[str, Samples], dict[str, float]]:
    """``({case: seconds the save held its caller}, {async case: background seconds})``."""
    import tfsnippet as spt

    variables = make_variables(n_params)
    savers = {
        'local, sync': spt.CheckpointSaver(variables, os.path.join(root, 'sync'),
                                           max_to_keep=2),
        'S3, sync': spt.CheckpointSaver(variables, f'{bucket}/sync', max_to_keep=2),
        'local, async': spt.CheckpointSaver(variables, os.path.join(root, 'async'),
                                            max_to_keep=2, asynchronous=True),
        'S3, async': spt.CheckpointSaver(variables, f'{bucket}/async', max_to_keep=2,
                                         asynchronous=True),
    }
    counter = itertools.count()

    def saving(saver: Any) -> Any:
        def run(watch: Stopwatch) -> None:
            with watch:
                saver.save(next(counter))
            saver.wait()
        return run

    runs = {name: saving(saver) for name, saver in savers.items()}
    for run in runs.values():      # warm-up: bundle graphs, buffers, connections
        run(Stopwatch())
    before = {name: (s.async_stats.write_seconds, s.async_stats.written)
              for name, s in savers.items() if s.async_stats is not None}
    times = time_alternating(runs, repeats, cpu_clock=time.thread_time)
    background = {}
    for name, (seconds, written) in before.items():
        stats = savers[name].async_stats
        assert stats is not None
        background[name] = (stats.write_seconds - seconds) / (stats.written - written)
    return times, background


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true',
                        help='1M parameters, 3 repeats (smoke sizes, not figures)')
    parser.add_argument('--table-json', metavar='PATH', help='also write the rows as JSON')
    args = parser.parse_args()
    n_params = 1_000_000 if args.quick else 10_000_000
    repeats = 3 if args.quick else 5

    from tests.helpers.s3 import MotoServer

    print(describe_machine())
    server = MotoServer().start()
    try:
        bucket = server.new_bucket()
        with tempfile.TemporaryDirectory() as root:
            times, background = measure(n_params, repeats, root, bucket)
    finally:
        server.stop()

    ms = {name: s.median * 1e3 for name, s in times.items()}
    size = n_params * 4 / 2 ** 20
    print(f'\nA save of {n_params:,} float32 parameters ({size:.1f} MiB): the time it holds '
          f'the loop, median of {repeats}, ms')
    table = []
    for name, s in times.items():
        local = ms['local, ' + name.split(', ')[1]]
        table.append((name, f'{s.median * 1e3:.1f}', f'{s.best * 1e3:.1f}',
                      f'{max(s.wall) * 1e3:.1f}', f'{s.cpu_median * 1e3:.1f}',
                      f'{ms[name] / local:.2f}',
                      f'{background[name] * 1e3:.0f}' if name in background else ''))
    print(format_table(('case', 'median', 'min', 'max', 'thread CPU', 'vs local',
                        'background write'), table, align='lrrrrrr'))
    print('("vs local": against the same mode on local disk; "background write": the mean '
          'time\n the background thread took per asynchronous save, upload included)')
    s3_sync, local_sync = ms['S3, sync'], ms['local, sync']
    print(f'\nS3 sync / local sync: {s3_sync / local_sync:.2f}x; S3 async holds the loop '
          f'{ms["S3, async"]:.1f} ms (target <= {TARGET_MS:.0f} ms), '
          f'{s3_sync / ms["S3, async"]:.0f}x less than an S3 sync save')
    print(f'load avg at the end: {load_average()} (1/5/15 min)')

    label = f'{n_params // 1_000_000}M params'
    write_rows(args.table_json, [
        Row(f'sync save to S3 (moto, loopback), {label}', 'local disk, sync', local_sync,
            s3_sync, 'ms'),
        Row(f'async save to S3 holds the loop, {label}', 'local disk, async',
            ms['local, async'], ms['S3, async'], 'ms', f'<= {TARGET_MS:.0f} ms',
            ms['S3, async'] <= TARGET_MS),
    ])


if __name__ == '__main__':
    main()
