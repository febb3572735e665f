"""Smoke test: the TrainLoop benchmark script runs and prints its table.

Only that it runs is checked here; its timings are never asserted (they
depend on the machine and on whatever else is running on it).
"""

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / 'benchmarks' / 'bench_train_loop.py'

EXPECTED_ROWS = (
    'no-op step, float loss [eager]',
    'no-op step, eager tensor loss [eager]',
    'MLP 64-128-10 on digits, tf.function [eager]',
    'no-op step, float loss [graph]',
    'no-op step, numpy float32 loss [graph]',
    'MLP 64-128-10 on digits, session.run [graph]',
)


def test_bench_train_loop_quick_run_prints_the_table():
    env = dict(os.environ, PYTHONIOENCODING='utf-8')
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), '--quick'], cwd=str(SCRIPT.parents[1]), env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding='utf-8', timeout=600)
    assert proc.returncode == 0, f'stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}'

    out = proc.stdout
    assert 'TensorFlow' in out and 'CPU' in out
    summary = out[out.index('Summary'):]
    lines = summary.splitlines()
    header = lines[1]
    for column in ('case', 'bare µs/step', 'TrainLoop µs/step', 'difference µs/step',
                   'ratio', 'target', 'met'):
        assert column in header, header
    rows = {line.split('  ')[0].strip(): line for line in lines[3:]}
    for case in EXPECTED_ROWS:
        assert case in rows, f'no row for {case!r} in:\n{summary}'
        assert rows[case].rstrip().endswith(('yes', 'no')), rows[case]


DATAFLOW_SCRIPT = SCRIPT.parent / 'bench_dataflow.py'

DATAFLOW_ROWS = (
    ('(a) numpy loop, x[idx], y[idx]', False),
    ('(b) DataFlow.arrays', True),
    ('(c) mapper alone', False),
    ('(c) map(mapper), inline + step', False),
    ('(c) map(mapper).threaded + step', False),
    ('(c) mapper cost hidden by thread', True),
    ('(d) tf.data slices.shuffle.batch', False),
)


def test_bench_dataflow_quick_run_prints_the_table():
    env = dict(os.environ, PYTHONIOENCODING='utf-8')
    proc = subprocess.run(
        [sys.executable, str(DATAFLOW_SCRIPT), '--quick'], cwd=str(DATAFLOW_SCRIPT.parents[1]),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, encoding='utf-8', timeout=600)
    assert proc.returncode == 0, f'stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}'

    out = proc.stdout
    assert 'TensorFlow' in out and 'CPU' in out
    summary = out[out.index('Summary'):]
    lines = summary.splitlines()
    header = lines[1]
    for column in ('case', 'batch size', 'batches/s', 'µs/batch', 'ratio', 'target', 'met'):
        assert column in header, header
    rows = {}
    for line in lines[3:]:
        cells = [c for c in line.split('  ') if c.strip()]
        if len(cells) >= 4 and cells[1].strip().isdigit():
            rows[(cells[0].strip(), int(cells[1]))] = line
    for batch_size in (64, 256):
        for case, judged in DATAFLOW_ROWS:
            assert (case, batch_size) in rows, \
                f'no row for {case!r} at batch size {batch_size} in:\n{summary}'
            if judged:
                assert rows[case, batch_size].rstrip().endswith(('yes', 'no')), \
                    rows[case, batch_size]
