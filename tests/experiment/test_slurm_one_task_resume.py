"""A requeued one-task SLURM job (the common one-GPU ``sbatch --requeue``) resumes
its unnamed Experiment's run: the run id is ``slurm-<SLURM_JOB_ID>`` for one
task as for several."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path
from typing import Any


import tfsnippet as spt

REPO = Path(__file__).resolve().parents[2]

# the job's script: an unnamed Experiment, a loop in it; the first start gets SLURM's
# signal ahead of the time limit during epoch 2 (sent by the script to itself)
SCRIPT = '''
import os
import signal
import tensorflow as tf
import tfsnippet as spt

class RunConfig(spt.Config):
    max_epoch = 3

with spt.Experiment(RunConfig, root='runs', args=[], hparams=False) as exp:
    print('run', exp.run_id, 'resumed', exp.resumed, flush=True)
    w = tf.Variable(0.)
    loop = spt.TrainLoop([w], max_epoch=exp.config.max_epoch, show_eta=False,
                         checkpoint_save_objects={})
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(4)):
                w.assign_add(1.)
                if step == 6 and 'SLURM_RESTART_COUNT' not in os.environ:
                    os.kill(os.getpid(), signal.SIGUSR1)
            print('body', epoch, flush=True)
    print('final', float(w.numpy()), flush=True)
'''


def job_env(tmp_path: Path) -> dict[str, str]:
    """A one-task SLURM job's environment, with a fake `scontrol` that logs its arguments."""
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir(exist_ok=True)
    scontrol = bin_dir / 'scontrol'
    scontrol.write_text(f'#!/bin/sh\necho "$@" >> "{tmp_path / "scontrol.log"}"\n')
    scontrol.chmod(scontrol.stat().st_mode | stat.S_IXUSR)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(('SLURM_', 'TF_CONFIG', 'TFSNIPPET_'))}
    env.update(PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL='3',
               TFSNIPPET_CACHE_DIR=str(tmp_path / 'cache'),
               PATH=f'{bin_dir}{os.pathsep}{env.get("PATH", "")}',
               SLURM_JOB_ID='4242', SLURM_NTASKS='1')
    return env


def start(server: Any, tmp_path: Path, env: dict[str, str]
          ) -> subprocess.CompletedProcess[str]:
    """A run of the training script, forked by `server` (the session's ``fork_server``)."""
    (tmp_path / 'train.py').write_text(SCRIPT)
    return server.run([tmp_path / 'train.py'], cwd=tmp_path, env=env, timeout=180)


def status(tmp_path: Path) -> str:
    return json.loads((tmp_path / 'runs' / 'slurm-4242' / 'run.json').read_text())['status']


def test_a_requeued_one_task_job_continues_its_run(tmp_path, fork_server):
    env = job_env(tmp_path)   # the batch script runs the training itself (no srun)
    first = start(fork_server, tmp_path, env)
    assert first.returncode == 143, first.stderr[-3000:]
    lines = first.stdout.splitlines()
    assert lines[0] == 'run slurm-4242 resumed False'
    assert 'requeued SLURM job 4242' in lines[-1] and 'the requeued job resumes' in lines[-1]
    assert (tmp_path / 'scontrol.log').read_text() == 'requeue 4242\n'
    assert status(tmp_path) == 'preempted'

    # SLURM starts the requeued job again: the same job id, a restart count
    second = start(fork_server, tmp_path, dict(env, SLURM_RESTART_COUNT='1'))
    assert second.returncode == 0, second.stderr[-3000:]
    lines = second.stdout.splitlines()
    assert lines[0].startswith("Resuming run 'slurm-4242' in ")
    assert lines[1] == 'run slurm-4242 resumed True'
    assert lines[2].startswith('Resume training: epoch 2, step 6, from checkpoint ')
    assert lines[3:] == ['body 2', 'body 3', 'final 12.0']
    assert sorted(os.listdir(tmp_path / 'runs')) == ['results.sqlite', 'slurm-4242']
    assert status(tmp_path) == 'completed'


def test_the_shared_id_of_one_task_jobs(monkeypatch):
    for name in [n for n in os.environ if n.startswith(('SLURM_', 'TFSNIPPET_', 'TF_CONFIG'))]:
        monkeypatch.delenv(name)
    assert spt.distributed.shared_run_id({}) is None
    assert spt.distributed.shared_run_id({'SLURM_JOB_ID': '7', 'SLURM_NTASKS': '1'}) == \
        'slurm-7'
    assert spt.distributed.shared_run_id({
        'SLURM_JOB_ID': '7', 'SLURM_PROCID': '0', 'SLURM_NTASKS': '1',
        'SLURM_JOB_NODELIST': 'n1'}) == 'slurm-7'
    # a named run, or the launcher's id, comes first
    assert spt.distributed.shared_run_id({'SLURM_JOB_ID': '7',
                                          'TFSNIPPET_RUN_ID': 'mine'}) == 'mine'
