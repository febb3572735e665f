"""Run every benchmark and print one table of figures and ratios against their baselines.

Each benchmark script runs in its own process (graph-mode parts in a further
child) and hands its rows back as JSON; this script prints them as one
table under a description of the machine.  ``--write-docs`` also writes the
output to ``docs/benchmark_results.txt``, which the documentation shows.

Usage: ``python benchmarks/run_all.py [--quick] [--write-docs]``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from _machine import describe_machine  # noqa: E402

SCRIPTS = ['bench_train_loop.py', 'bench_state.py', 'bench_dataflow.py', 'bench_trainer.py']


def _fmt(value: float) -> str:
    if value >= 100:
        return f'{value:,.0f}'
    if value >= 1:
        return f'{value:.2f}'
    return f'{value:.3g}'


def format_table(rows: list[dict]) -> str:
    header = ('case', 'unit', 'baseline', 'baseline value', 'tfsnippet', 'ratio', 'target',
              'met')
    cells = [header]
    for r in rows:
        met = '' if r['met'] is None else ('yes' if r['met'] else 'no')
        cells.append((r['case'], r['unit'], r['baseline'], _fmt(r['baseline_value']),
                      _fmt(r['value']), f'{r["ratio"]:.3f}', r['target'], met))
    widths = [max(len(c[i]) for c in cells) for i in range(len(header))]
    lines = []
    for i, c in enumerate(cells):
        parts = [c[0].ljust(widths[0]), c[1].ljust(widths[1]), c[2].ljust(widths[2]),
                 c[3].rjust(widths[3]), c[4].rjust(widths[4]), c[5].rjust(widths[5]),
                 c[6].ljust(widths[6]), c[7]]
        lines.append('  '.join(parts).rstrip())
        if i == 0:
            lines.append('  '.join('-' * w for w in widths))
    return '\n'.join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='smoke-run sizes (not figures)')
    parser.add_argument('--write-docs', action='store_true',
                        help='also write the output to docs/benchmark_results.txt')
    args = parser.parse_args()

    rows: list[dict] = []
    failed = []
    with tempfile.TemporaryDirectory() as tmp:
        for script in SCRIPTS:
            out = os.path.join(tmp, script + '.json')
            cmd = [sys.executable, os.path.join(HERE, script), '--table-json', out]
            if args.quick:
                cmd.append('--quick')
            print(f'running {script} ...', flush=True)
            proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True)
            if proc.returncode != 0 or not os.path.exists(out):
                failed.append(script)
                print(proc.stdout[-3000:])
                continue
            with open(out, encoding='utf-8') as f:
                rows.extend(json.load(f))

    today = datetime.date.today().isoformat()
    text = '\n'.join([
        f'tfsnippet benchmarks, {today}{" (--quick: smoke sizes, not figures)" if args.quick else ""}',
        describe_machine(),
        '',
        format_table(rows),
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
