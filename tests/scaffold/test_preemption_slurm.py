"""SLURM's signal ahead of the time limit: save, requeue the job (a fake `scontrol`), resume."""

from __future__ import annotations

import os
import re
import signal
import stat
import subprocess
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.scaffold.components.preemption import Preemption

REPO = Path(__file__).resolve().parents[2]

# the training script of a SLURM job: at step 6 it tells the test it is there and waits
# for a line on stdin; the test sends the signal in between (as SLURM would)
SCRIPT = '''
import sys
import tensorflow as tf
import tfsnippet as spt

w = tf.Variable(0.)
loop = spt.TrainLoop([w], max_epoch=3, checkpoint_dir=sys.argv[1], show_eta=False,
                     checkpoint_save_objects={})
with loop:
    for epoch in loop.iter_epochs():
        for step, _ in loop.iter_steps(range(4)):
            w.assign_add(1.)
            if step == 6 and sys.argv[2] == 'first':
                print('at step 6', flush=True)
                sys.stdin.readline()            # the signal arrives while the step runs
        print('body', epoch, flush=True)
print('final', float(w.numpy()), flush=True)
'''

FAKE_SCONTROL = '''#!/bin/sh
echo "$@" >> "{log}"
exit {status}
'''


def fake_scontrol(tmp_path: Path, status: int = 0) -> Path:
    bin_dir = tmp_path / 'bin'
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / 'scontrol'
    path.write_text(FAKE_SCONTROL.format(log=tmp_path / 'scontrol.log', status=status))
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return bin_dir


def slurm_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(('SLURM_', 'TF_CONFIG'))}
    env.update(PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL='3', SLURM_JOB_ID='4242',
               PATH=f'{fake_scontrol(tmp_path)}{os.pathsep}{env.get("PATH", "")}', **extra)
    return env


def run_job(server: Any, tmp_path: Path, env: dict[str, str], mode: str,
            signum: int | None = None) -> subprocess.CompletedProcess[str]:
    """A run of the job's script, forked by `server` (the session's ``fork_server``);
    with `signum`, that signal is sent once it printed ``at step 6``."""
    (tmp_path / 'train.py').write_text(SCRIPT)
    argv = [tmp_path / 'train.py', tmp_path / 'run', mode]
    with tempfile.TemporaryFile('w+') as stderr:
        proc = server.start(argv, cwd=tmp_path, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=stderr)
        guard = threading.Timer(120, proc.kill)   # the bound on the whole run
        guard.start()
        try:
            lines = []
            if signum is not None:
                for line in proc.stdout:
                    lines.append(line)
                    if line.startswith('at step 6'):
                        break
                proc.send_signal(signum)
                proc.stdin.write('\n')
                proc.stdin.flush()
            out = ''.join(lines) + proc.stdout.read()
            code = proc.wait()
        finally:
            guard.cancel()
            proc.kill()      # (nothing, once it ended)
            proc.wait()
            proc.stdin.close()
            proc.stdout.close()
        stderr.seek(0)
        err = stderr.read()
    return subprocess.CompletedProcess([str(a) for a in argv], code, out, err)


def test_sigusr1_saves_requeues_the_job_and_the_requeued_job_resumes(tmp_path, fork_server):
    env = slurm_env(tmp_path)
    first = run_job(fork_server, tmp_path, env, 'first', signal.SIGUSR1)
    assert first.returncode == 143, first.stderr[-2000:]
    out = first.stdout.splitlines()
    assert out[:2] == ['body 1', 'at step 6']
    assert re.fullmatch(r'Preempted by SIGUSR1 at epoch 2, step 6: saved checkpoint \S+; '
                        r'requeued SLURM job 4242; exiting with status 143, the requeued job '
                        r'resumes from it', out[2]), out[2]
    assert len(out) == 3
    assert (tmp_path / 'scontrol.log').read_text() == 'requeue 4242\n'
    # SLURM starts the requeued job again, with the same job id
    second = run_job(fork_server, tmp_path, env, 'requeued')
    assert second.returncode == 0, second.stderr[-2000:]
    lines = second.stdout.splitlines()
    assert lines[0].startswith('Resume training: epoch 2, step 6, from checkpoint ')
    assert lines[1:] == ['body 2', 'body 3', 'final 12.0']
    assert (tmp_path / 'scontrol.log').read_text() == 'requeue 4242\n'


def test_sigterm_under_slurm_saves_and_exits_without_requeueing(tmp_path, fork_server):
    first = run_job(fork_server, tmp_path, slurm_env(tmp_path), 'first', signal.SIGTERM)
    assert first.returncode == 143, first.stderr[-2000:]
    assert first.stdout.splitlines()[2].endswith(
        'exiting with status 143, the next start resumes from it')
    assert not (tmp_path / 'scontrol.log').exists()


def test_a_failed_requeue_is_said_and_the_job_still_exits_143(tmp_path, fork_server):
    env = slurm_env(tmp_path, TFSNIPPET_SLURM_SIGNAL='USR2')
    fake_scontrol(tmp_path, status=1)
    first = run_job(fork_server, tmp_path, env, 'first', signal.SIGUSR2)
    assert first.returncode == 143, first.stderr[-2000:]
    line = first.stdout.splitlines()[2]
    assert 'could not requeue SLURM job 4242: `scontrol requeue 4242` exited with status 1' \
           in line
    assert line.endswith('exiting with status 143, the next start resumes from it')
    assert 'RuntimeWarning: could not requeue SLURM job 4242' in first.stderr


# ------------------------------------------------------------ in process
def test_for_cluster_picks_the_signals_of_the_cluster():
    assert Preemption.for_cluster({}).signals == [signal.SIGTERM]
    assert Preemption.for_cluster({}).requeue_signals == []
    slurm = Preemption.for_cluster({'SLURM_JOB_ID': '7'})
    assert (slurm.signals, slurm.requeue_signals) == ([signal.SIGTERM, signal.SIGUSR1],
                                                      [signal.SIGUSR1])
    other = Preemption.for_cluster({'SLURM_JOB_ID': '7', 'TFSNIPPET_SLURM_SIGNAL': 'sigusr2'})
    assert other.requeue_signals == [signal.SIGUSR2]
    with pytest.raises(ValueError, match=re.escape(
            "`TFSNIPPET_SLURM_SIGNAL` must be a signal name such as SIGUSR1, got 'NOPE'")):
        Preemption.for_cluster({'SLURM_JOB_ID': '7', 'TFSNIPPET_SLURM_SIGNAL': 'NOPE'})


def test_requeue_arguments_are_checked():
    assert Preemption(('SIGUSR1',), requeue=True).requeue_signals == [signal.SIGUSR1]
    with pytest.raises(ValueError, match=re.escape(
            "`requeue` must name signals among `signals` ['SIGTERM'], got ['SIGUSR1']")):
        Preemption(('SIGTERM',), requeue=['SIGUSR1'])
    with pytest.raises(TypeError, match='`requeue` must be True, False or a sequence'):
        Preemption(('SIGTERM',), requeue='SIGTERM')


def test_requeue_outside_slurm_warns_at_loop_entry(monkeypatch, tmp_path):
    monkeypatch.delenv('SLURM_JOB_ID', raising=False)
    w = tf.Variable(0.)
    loop = spt.TrainLoop([w], max_epoch=1, show_eta=False, print_func=lambda s: None)
    loop.add_component(Preemption(('SIGUSR1',), requeue=True))
    loop.add_component(spt.Checkpointer(str(tmp_path / 'ckpt'), preemption_signals=(),
                                        variables=[w]))
    with pytest.warns(RuntimeWarning, match=re.escape(
            '`Preemption(requeue=...)` requeues the SLURM job after SIGUSR1, but '
            '`SLURM_JOB_ID` is not set (not under SLURM): a preemption will save and exit '
            'without requeueing')):
        with loop:
            for _ in loop.iter_epochs():
                pass
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        Preemption(('SIGUSR1',))   # no requeue: nothing to say
