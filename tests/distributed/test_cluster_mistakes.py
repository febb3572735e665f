"""A multi-worker mistake is an error or a warning at loop entry, never silence."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest
import tensorflow as tf

import tfsnippet as spt

ROOT = Path(__file__).resolve().parents[2]
LAUNCH_PY = ROOT / 'tfsnippet' / 'launch.py'


def two_workers(task_type: str = 'worker', index: int = 1) -> str:
    return json.dumps({'cluster': {'worker': ['127.0.0.1:7001', '127.0.0.1:7002']},
                       'task': {'type': task_type, 'index': index}})


def run_loop(variables: list[tf.Variable], step=None, **kwargs: object) -> list[str]:
    """One epoch of two steps, each calling `step` (if given); the lines printed."""
    lines: list[str] = []
    with spt.TrainLoop(variables, max_epoch=1, show_eta=False, print_func=lines.append,
                       **kwargs) as loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                if step is not None:
                    step()
                loop.collect_metrics(loss=1.)
            loop.print_logs()
    return lines


@pytest.fixture
def alone(monkeypatch):
    for name in ('TF_CONFIG', 'SLURM_PROCID', 'TFSNIPPET_NUM_WORKERS', 'TFSNIPPET_SERVICE'):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_variables_of_a_multi_worker_strategy_without_strategy_are_refused(alone):
    strategy = tf.distribute.MultiWorkerMirroredStrategy()   # one worker: no TF_CONFIG
    with strategy.scope():
        w = tf.Variable(0., name='mwms_w')
        b = tf.Variable(0., name='mwms_b')
    with pytest.raises(ValueError, match=re.escape(
            "`param_vars` holds variables created in the scope of a "
            "MultiWorkerMirroredStrategy (2 of 2: 'mwms_w', 'mwms_b'), but the TrainLoop "
            "has no strategy: every worker would train on whole batches, unsplit, and every "
            "worker would print and write; pass `strategy=strategy` to the TrainLoop (or make "
            "the loop inside `with strategy.scope():`)")):
        run_loop([w, b])
    assert run_loop([w, b], strategy=strategy)[-1].startswith('[Step 2] epoch time')


def test_variables_of_another_strategy_without_strategy_warn(style, alone):
    strategy = tf.distribute.MirroredStrategy(['/cpu:0'])
    with strategy.scope():
        w = style.variable(0., 'mirrored_w')
    with pytest.warns(RuntimeWarning, match=re.escape(
            "`param_vars` holds variables created in the scope of a MirroredStrategy (1 of 1: "
            "'mirrored_w'), but the TrainLoop has no strategy: it would neither split the "
            "batches over the replicas nor reduce their metrics; pass `strategy=strategy`")):
        run_loop([w])


def test_no_strategy_under_two_workers_warns_once_per_process(style, alone):
    alone.setenv('TF_CONFIG', two_workers('worker', 1))
    w = style.variable(0., 'w')
    with pytest.warns(RuntimeWarning) as record:
        lines = run_loop([w], style.updater(w, 1.))
    messages = [str(r.message) for r in record if r.category is RuntimeWarning]
    assert messages == [
        'This process is worker 1 of 2 workers (from tf_config) but the TrainLoop has no '
        'strategy: every worker trains the whole model alone, on all the data, and writes '
        'into the same folders (checkpoints, summaries, results); create a '
        '`tf.distribute.MultiWorkerMirroredStrategy()` first, build the model in its scope '
        'and pass `strategy=` to the TrainLoop (see the "Several processes" section of the '
        'distributed training guide)']
    assert lines[-1].startswith('[Step 2] epoch time')   # it still trains
    assert style.value(w) == 2.
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        run_loop([w])                             # once per process


def test_alone_or_as_evaluator_nothing_is_said(alone):
    w = tf.Variable(0.)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        run_loop([w])
        alone.setenv('TF_CONFIG', two_workers('evaluator', 0))
        run_loop([w])


SCRIPT = """
    import tensorflow as tf
    import tfsnippet as spt

    w = tf.Variable(0.)
    with spt.TrainLoop([w], max_epoch=1, show_eta=False) as loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                w.assign_add(1.)
    print('trained', float(w.numpy()))
"""


@pytest.mark.distributed
def test_a_script_without_strategy_under_the_launcher_warns_on_every_worker(tmp_path):
    script = tmp_path / 'train.py'
    script.write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in os.environ.items() if k != 'TF_CONFIG'}
    env.update(PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL='3', CUDA_VISIBLE_DEVICES='')
    proc = subprocess.run([sys.executable, str(LAUNCH_PY), '--workers', '2', str(script)],
                          env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=150)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert sorted(proc.stdout.splitlines()) == ['[worker 0] trained 2.0',
                                                '[worker 1] trained 2.0']
    for index in (0, 1):
        found = [line for line in proc.stderr.splitlines()
                 if line.startswith(f'[worker {index}]') and 'RuntimeWarning' in line]
        assert len(found) == 1, proc.stderr[-3000:]
        assert (f'This process is worker {index} of 2 workers (from tf_config) but the '
                f'TrainLoop has no strategy: every worker trains the whole model alone'
                in found[0])
