"""Run a child script (alone, or as a local cluster through the launcher) and read its report.

A child prints one line ``RESULT <json>`` with what it observed; the tests
assert on that.  Every run is bounded: past its timeout the child (or the
launcher, which then stops its tasks) gets SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

SCRIPTS = Path(__file__).resolve().parent
ROOT = SCRIPTS.parents[2]
LAUNCH_PY = ROOT / 'tfsnippet' / 'launch.py'
MARK = 'RESULT '


def _env() -> dict[str, str]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='',
               PYTHONUNBUFFERED='1')
    env['PYTHONPATH'] = os.pathsep.join([str(ROOT), env.get('PYTHONPATH', '')])
    env.setdefault('PYTHONFAULTHANDLER', '1')   # a crash shows where it happened
    env.pop('TF_CONFIG', None)
    return env


def _communicate(command: list[str], timeout: float) -> tuple[int, str, str]:
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=_env(), cwd=str(ROOT), start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)   # the launcher stops its tasks on SIGTERM
        try:
            out, err = proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
        raise AssertionError(f'{command[-1]} did not finish in {timeout} s:\n'
                             f'{out[-3000:]}\n{err[-3000:]}') from None
    return proc.returncode, out, err


def run_child(script: str, *args: str, timeout: float = 60.,
              retry_crash: bool = False) -> dict[str, Any]:
    """Run ``scripts/<script>`` in a fresh process; return its ``RESULT``.

    With `retry_crash`, a child killed by a signal (a crash inside
    TensorFlow) before it reported anything is run once more, and a warning
    says so with the crash's output.
    """
    command = [sys.executable, str(SCRIPTS / script), *args]
    code, out, err = _communicate(command, timeout)
    if retry_crash and code < 0 and MARK not in out:
        warnings.warn(f'{script} was killed by signal {-code} before reporting; running it '
                      f'again. Its standard error ended with:\n{err[-3000:]}')
        code, out, err = _communicate(command, timeout)
    results = [json.loads(line[len(MARK):]) for line in out.splitlines()
               if line.startswith(MARK)]
    assert code == 0 and len(results) == 1, f'exit {code}:\n{out[-3000:]}\n{err[-5000:]}'
    return results[0]


def run_workers(script: str, workers: int, timeout: float = 90., args: tuple[str, ...] = (),
                output: list[str] | None = None) -> list[dict[str, Any]]:
    """Run ``scripts/<script> ARGS`` as `workers` processes through ``tfsnippet/launch.py``;
    return the ``RESULT`` of each worker, by index (and the launcher's output
    lines in `output`, if given)."""
    code, out, err = _communicate(
        [sys.executable, str(LAUNCH_PY), '--workers', str(workers), str(SCRIPTS / script),
         *args], timeout)
    if output is not None:
        output.extend(out.splitlines())
    found: dict[int, dict[str, Any]] = {}
    for line in out.splitlines():
        for i in range(workers):
            prefix = f'[worker {i}] {MARK}'
            if line.startswith(prefix):
                found[i] = json.loads(line[len(prefix):])
    assert code == 0 and sorted(found) == list(range(workers)), \
        f'exit {code}:\n{out[-3000:]}\n{err[-6000:]}'
    return [found[i] for i in range(workers)]
