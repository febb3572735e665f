"""Run each example script end to end, for two epochs, as a user would.

The eager usage example in README.rst is run as well, so that it keeps working.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip('sklearn', reason='the examples need scikit-learn (`pip install ".[test]"`)')

ROOT_DIR = Path(__file__).resolve().parent.parent
EXAMPLES_DIR = ROOT_DIR / 'examples'
SCRIPTS = ['digits_eager.py', 'digits_graph.py']
README_SNIPPET = 'README.rst usage'


def readme_usage_code() -> str:
    """The first ``code-block:: python`` of README.rst, dedented."""
    lines = (ROOT_DIR / 'README.rst').read_text(encoding='utf-8').splitlines()
    start = lines.index('.. code-block:: python') + 1
    code = []
    for line in lines[start:]:
        if line.strip() and not line.startswith('    '):
            break
        code.append(line[4:])
    return '\n'.join(code).strip() + '\n'


@pytest.fixture(scope='module')
def example_runs(tmp_path_factory):
    """Start every example at once (they are mostly TensorFlow start-up), then wait."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')
    commands = {}
    for script in SCRIPTS:
        work_dir = tmp_path_factory.mktemp(script.replace('.py', ''))
        output_dir = work_dir / 'out'
        commands[script] = (work_dir, output_dir, [
            str(EXAMPLES_DIR / script), '--epochs', '2', '--output-dir', str(output_dir)])
    work_dir = tmp_path_factory.mktemp('readme')
    (work_dir / 'usage.py').write_text(readme_usage_code(), encoding='utf-8')
    commands[README_SNIPPET] = (work_dir, None, [str(work_dir / 'usage.py')])

    started = {}
    for name, (work_dir, output_dir, args) in commands.items():
        proc = subprocess.Popen(
            [sys.executable, *args], cwd=str(work_dir), env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True)
        started[name] = (proc, output_dir)
    runs = {}
    try:
        for name, (proc, output_dir) in started.items():
            stdout, stderr = proc.communicate(timeout=300)
            runs[name] = (proc.returncode, stdout, stderr, output_dir)
    finally:
        for proc, _ in started.values():
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    return runs


@pytest.mark.parametrize('script', SCRIPTS)
def test_example_runs(script, example_runs):
    returncode, stdout, stderr, output_dir = example_runs[script]
    report = f'stdout:\n{stdout[-4000:]}\nstderr:\n{stderr[-4000:]}'
    assert returncode == 0, report

    lines = stdout.splitlines()
    assert any(line.startswith('[Epoch 1/2, ') for line in lines), report
    assert any(line.startswith('[Epoch 2/2, ') for line in lines), report
    assert not any(line.startswith('[Epoch 3/') for line in lines), report

    found = [re.fullmatch(r'test accuracy: (\S+)', line) for line in lines]
    values = [float(m.group(1)) for m in found if m]
    assert len(values) == 1, report
    assert 0. <= values[0] <= 1., report

    result = json.loads((output_dir / 'result.json').read_text())
    assert 0. <= result['test_accuracy'] <= 1.
    assert abs(result['test_accuracy'] - values[0]) < 1e-4
    assert result['epochs'] == 2


def test_readme_usage_example_runs(example_runs):
    returncode, stdout, stderr, _ = example_runs[README_SNIPPET]
    report = f'stdout:\n{stdout[-4000:]}\nstderr:\n{stderr[-4000:]}'
    assert returncode == 0, report
    lines = stdout.splitlines()
    assert lines and lines[0].startswith('Trainable Parameters'), report
    assert any(line.startswith('[Epoch 10/10, ') for line in lines), report
