"""Run every benchmark and print one table of figures and ratios against their baselines.

Each benchmark script runs in its own process (graph-mode parts in a further
child) and hands its rows back as JSON; this script prints them as one
table under a description of the machine.  ``--write-docs`` also writes the
output to ``docs/benchmark_results.txt``, which the documentation shows.

``--quick`` (smoke sizes, one round: a check that everything runs, not
figures) runs every script in this one process instead, their graph-mode
parts in one shared child (``_shared.run_quick``), so TensorFlow is imported
twice, not once or more per script; ``--output-dir`` keeps each script's
output there (``<script>.out``, ``.err``, ``.json``).

Usage: ``python benchmarks/run_all.py [--quick [--output-dir DIR]] [--write-docs]``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
if '--quick' in sys.argv[1:]:
    # Before numpy is imported: the scripts run in this process then, and
    # bench_dataflow's one BLAS thread per Python thread must hold for all of
    # them (OpenBLAS's idle threads would spin meanwhile, burning a core).
    os.environ.setdefault('OPENBLAS_NUM_THREADS', '1')

from _bench import Row, describe_machine, format_table, met_text, read_rows  # noqa: E402
from _shared import run_quick, scratch_dir  # noqa: E402

SCRIPTS = ['bench_train_loop.py', 'bench_state.py', 'bench_dataflow.py', 'bench_trainer.py',
           'bench_recording.py', 'bench_results.py', 'bench_checkpoint_async.py',
           'bench_mlflow.py', 'bench_distributed.py', 'bench_state_format.py',
           'bench_components.py', 'bench_tfdata_checkpoint.py', 'bench_object_store.py',
           'bench_search.py', 'bench_checkpoint_store.py', 'bench_memory.py',
           'bench_health_checks.py', 'bench_health.py']


def _read(path: str) -> str:
    with open(path, encoding='utf-8') as f:
        return f.read()


def _fmt(value: float) -> str:
    if value >= 100:
        return f'{value:,.0f}'
    if value >= 1:
        return f'{value:.2f}'
    return f'{value:.3g}'


def combined_table(rows: list[Row]) -> str:
    """Every script's rows as one table."""
    return format_table(
        ('case', 'unit', 'baseline', 'baseline value', 'tfsnippet', 'ratio', 'target', 'met'),
        [(r.case, r.unit, r.baseline, _fmt(r.baseline_value), _fmt(r.value), f'{r.ratio:.3f}',
          r.target, met_text(r.met)) for r in rows], align='lllrrrll')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='smoke-run sizes (not figures)')
    parser.add_argument('--write-docs', action='store_true',
                        help='also write the output to docs/benchmark_results.txt')
    parser.add_argument('--output-dir', metavar='DIR',
                        help="with --quick: keep each script's output and rows there")
    args = parser.parse_args()
    if args.output_dir and not args.quick:
        parser.error('--output-dir goes with --quick')

    rows: list[Row] = []
    if args.quick:
        with scratch_dir() as tmp:
            out_dir = args.output_dir or tmp
            started = time.perf_counter()
            failed = run_quick(SCRIPTS, out_dir)
            took = time.perf_counter() - started
            print(f'--quick: {took:.1f} s in all; each script (wall s): ' + ', '.join(
                f'{script} {_read(os.path.join(out_dir, script + ".secs"))}'
                for script in SCRIPTS))
            for script in SCRIPTS:
                if script in failed:
                    print(f'{script} failed:')
                    for ext in ('.out', '.err'):
                        with open(os.path.join(out_dir, script + ext), encoding='utf-8') as f:
                            print(f.read()[-3000:])
                else:
                    rows.extend(read_rows(os.path.join(out_dir, script + '.json')))
        return report(rows, failed, args)
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for script in SCRIPTS:
            out = os.path.join(tmp, script + '.json')
            cmd = [sys.executable, os.path.join(HERE, script), '--table-json', out]
            print(f'running {script} ...', flush=True)
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
            if proc.returncode != 0 or not os.path.exists(out):
                failed.append(script)
                print(proc.stdout[-3000:])
                continue
            rows.extend(read_rows(out))
    return report(rows, failed, args)


def report(rows: list[Row], failed: list[str], args: argparse.Namespace) -> int:
    """Print the combined table (and write it to the docs); 1 when a script failed."""
    today = datetime.date.today().isoformat()
    quick = ' (--quick: smoke sizes, not figures)' if args.quick else ''
    text = '\n'.join([
        f'tfsnippet benchmarks, {today}{quick}',
        describe_machine(),
        '',
        combined_table(rows),
        '',
        'Ratios are tfsnippet / baseline; for steps/s and batches/s higher is better, '
        'for times lower.',
    ])
    print()
    print(text)
    if args.write_docs:
        with open(os.path.join(HERE, '..', 'docs', 'benchmark_results.txt'), 'w',
                  encoding='utf-8') as f:
            f.write(text + '\n')
    if failed:
        print(f'failed: {", ".join(failed)}', file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
