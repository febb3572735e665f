"""Benchmark: queries over a results store of 10,000 runs with 20 metrics each, and epoch writes.

Builds a fresh store (in one transaction) in a temporary directory: each run
has a config of 8 fields, one logged epoch of 20 metrics, two best values
and two final results.  Then it prints the median of 7 timings of:

* the representative query, ``where="valid_loss < 0.1 and config.optimizer.lr
  >= 1e-3", order_by="valid_loss"`` (about 5% of the runs; target: under
  100 ms);
* a wider query with ``or``, ``not`` and parentheses, a top-10 query, and
  every run unfiltered (no target: loading 10,000 full rows is bound by
  building Python objects);
* one epoch of 20 metrics written by ``log_epoch_metrics`` (one
  transaction), which a training loop does once per epoch, next to bare
  ``sqlite3`` inserting the same 20 rows in one transaction (the baseline:
  the store also updates each metric's latest value and the heartbeat).

Usage: ``python benchmarks/bench_results.py [--quick] [--runs N] [--table-json PATH]``.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from _bench import (Row, Stopwatch, describe_machine, format_table,  # noqa: E402
                    load_average, met_text, time_alternating, write_rows)

from tfsnippet.experiment.query import query  # noqa: E402
from tfsnippet.experiment.store import ResultsStore  # noqa: E402

N_METRICS = 20
TARGET_MS = 100.
REPRESENTATIVE: dict[str, Any] = dict(
    where='valid_loss < 0.1 and config.optimizer.lr >= 1e-3', order_by='valid_loss')


def build(store: ResultsStore, n_runs: int, seed: int = 0) -> None:
    """Fill `store` with `n_runs` random runs, in one transaction."""
    rng = random.Random(seed)
    names = ['valid_loss', 'train_loss'] + [f'metric_{i:02d}' for i in range(N_METRICS - 2)]
    with store.transaction():
        for i in range(n_runs):
            run_id = f'run-{i:06d}'
            config = {'optimizer': {'name': rng.choice(['adam', 'sgd']),
                                    'lr': rng.choice([1e-4, 3e-4, 1e-3, 3e-3]),
                                    'momentum': 0.9},
                      'batch_size': rng.choice([32, 64, 128]), 'seed': i,
                      'layers': [256, 128], 'dropout': rng.random() / 2, 'data': 'mnist'}
            store.start_run(run_id, f'sweep-{i % 50}', config, {'host': 'bench'})
            metrics = {n: {'mean': rng.random(), 'std': rng.random() / 10, 'count': 100}
                       for n in names}
            store.log_epoch_metrics(run_id, step=1000, epoch=10, metrics=metrics)
            store.set_best(run_id, {'valid_loss': metrics['valid_loss']['mean'],
                                    'train_loss': metrics['train_loss']['mean']})
            store.update_results(run_id, {'test_loss': rng.random(), 'test_acc': rng.random()})
            store.set_status(run_id, rng.choice(['completed', 'completed', 'failed']))


def timed(fn: Callable[[], Any], repeats: int) -> tuple[float, float, Any]:
    """The median wall and CPU times of `repeats` calls, in ms, and the last result."""
    result = None

    def run(watch: Stopwatch) -> None:
        nonlocal result
        with watch:
            result = fn()

    samples = time_alternating({'call': run}, repeats)['call']
    return samples.median * 1e3, samples.cpu_median * 1e3, result


def raw_sqlite_epoch_ms(root: str, names: list[str], repeats: int = 101) -> tuple[float, float]:
    """The median wall and CPU ms of writing 20 epoch rows with bare sqlite3 (a baseline)."""
    conn = sqlite3.connect(os.path.join(root, 'raw.sqlite'), isolation_level=None)
    conn.execute('PRAGMA journal_mode=WAL')
    conn.execute('PRAGMA synchronous=NORMAL')
    conn.execute('CREATE TABLE epochs (run_id TEXT, epoch INTEGER, name TEXT, step INTEGER, '
                 'mean REAL, std REAL, count INTEGER, PRIMARY KEY (run_id, epoch, name)) '
                 'WITHOUT ROWID')
    epoch = iter(range(1, 10 ** 6))

    def write() -> None:
        e = next(epoch)
        conn.execute('BEGIN IMMEDIATE')
        conn.executemany('INSERT INTO epochs VALUES (?, ?, ?, ?, ?, ?, ?)',
                         [('writer', e, n, e * 100, 0.5, 0.1, 100) for n in names])
        conn.execute('COMMIT')

    wall, cpu, _ = timed(write, repeats)
    conn.close()
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true',
                        help='200 runs, 1 timing per case (smoke sizes, one round)')
    parser.add_argument('--runs', type=int, default=None, help='the number of runs')
    parser.add_argument('--repeats', type=int, default=None,
                        help='timings per case (median; default 7)')
    parser.add_argument('--table-json', metavar='PATH', help='also write the rows as JSON')
    args = parser.parse_args()
    n_runs = args.runs or (200 if args.quick else 10_000)
    repeats = args.repeats or (1 if args.quick else 7)
    epoch_repeats = 3 if args.quick else 101

    print(describe_machine(tensorflow=False, extra={'SQLite': sqlite3.sqlite_version}))

    with tempfile.TemporaryDirectory() as root:
        store = ResultsStore(root)
        start = time.perf_counter()
        build(store, n_runs)
        print(f'built {n_runs:,} runs x {N_METRICS} metrics in '
              f'{time.perf_counter() - start:.1f} s; database '
              f'{os.path.getsize(store.path) / 2 ** 20:.1f} MiB (+ WAL)')

        cases: list[tuple[str, dict[str, Any], float | None]] = [
            ('representative query', REPRESENTATIVE, TARGET_MS),
            ('or / not / parentheses', dict(
                where="(config.optimizer.name = 'adam' or config.batch_size >= 128) "
                      "and not status = 'failed' and best.valid_loss < 0.2",
                order_by='-results.test_acc'), None),
            ('top 10 by valid_loss', dict(order_by='valid_loss', limit=10), None),
            ('every run, no filter', {}, None),
        ]
        rows: list[Row] = []
        table: list[tuple[str, ...]] = []
        for name, kwargs, target in cases:
            # `query(store, ...)` reuses the open store; `query(root, ...)`, which
            # opens it each time, is timed below
            ms, cpu, result = timed(lambda: query(store, **kwargs), repeats)
            met = None if target is None else ms < target
            table.append((name, str(len(result)), f'{ms:.1f}', f'{cpu:.1f}',
                          '' if target is None else f'<{target:g}', met_text(met), ''))
            rows.append(Row(f'results store: {name} ({n_runs:,} runs)', '100 ms target',
                            TARGET_MS, ms, 'ms', '' if target is None else f'< {target:g} ms',
                            met))
        ms, cpu, result = timed(lambda: query(root, **REPRESENTATIVE), repeats)
        table.append(('representative, opening', str(len(result)), f'{ms:.1f}', f'{cpu:.1f}',
                      '', '', '(query(root, ...) opens the store each time)'))

        names = [f'm{i:02d}' for i in range(N_METRICS)]
        store.start_run('writer', 'writer', {'lr': 0.1})
        epoch = iter(range(1, 10 ** 6))

        def write_epoch() -> None:
            e = next(epoch)
            store.log_epoch_metrics('writer', e * 100, e, {
                n: {'mean': 0.5, 'std': 0.1, 'count': 100} for n in names})

        write_ms, write_cpu, _ = timed(write_epoch, epoch_repeats)
        raw_ms, raw_cpu = raw_sqlite_epoch_ms(root, names, epoch_repeats)
        table.append(('write one epoch, 20 metrics', '', f'{write_ms:.2f}', f'{write_cpu:.2f}',
                      '', '', ''))
        table.append(('  raw sqlite3, same rows', '', f'{raw_ms:.2f}', f'{raw_cpu:.2f}', '', '',
                      '(baseline: one INSERT transaction, same journal settings)'))
        rows.append(Row('results store: write one epoch of 20 metrics',
                        'raw sqlite3 INSERT transaction', raw_ms, write_ms, 'ms'))
        store.close()
    print()
    print(format_table(('case', 'runs', 'median ms', 'cpu ms', 'target', 'met', 'note'), table,
                       align='lrrrrll'))
    print(f'\nload avg    {load_average()} (1/5/15 min) at end')
    write_rows(args.table_json, rows)


if __name__ == '__main__':
    main()
