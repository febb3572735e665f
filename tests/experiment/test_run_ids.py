"""An Experiment given no name shares the chief's run under several workers, or refuses."""

from __future__ import annotations

import json
import os
import re
import textwrap
from pathlib import Path

import pytest

import tfsnippet as spt

REPO = Path(__file__).resolve().parents[2]
CLUSTER_VARS = ('TF_CONFIG', 'TFSNIPPET_RUN_ID', 'TFSNIPPET_NUM_WORKERS', 'TFSNIPPET_SERVICE',
                'SLURM_PROCID', 'SLURM_JOB_ID', 'SLURM_NTASKS', 'SLURM_JOB_NODELIST')


class RunConfig(spt.Config):
    lr = 0.1


def two_workers(index: int) -> str:
    return json.dumps({'cluster': {'worker': ['127.0.0.1:1', '127.0.0.1:2']},
                       'task': {'type': 'worker', 'index': index}})


@pytest.fixture
def env(monkeypatch):
    for name in CLUSTER_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize('index', [0, 1])
def test_no_name_under_two_workers_sharing_no_id_is_refused(tmp_path, env, index):
    env.setenv('TF_CONFIG', two_workers(index))
    with pytest.raises(ValueError, match=re.escape(
            f'`name` is required under several workers: this process is worker {index} of 2 '
            f'workers (from tf_config), and without a `name` each worker would make its own '
            f'run id')) as info:
        spt.Experiment(RunConfig, root=tmp_path, args=[])
    assert 'pass `name=` (the same on every worker), `--resume RUN_ID`, or set ' \
           '`TFSNIPPET_RUN_ID`' in str(info.value)
    assert spt.Experiment(RunConfig, root=tmp_path, name='job', args=[]).run_id == 'job'


def test_every_slurm_task_takes_the_job_s_run(tmp_path, env):
    env.setenv('SLURM_JOB_ID', '31337')
    env.setenv('SLURM_NTASKS', '2')
    env.setenv('SLURM_JOB_NODELIST', 'n[1-2]')
    ids = []
    for rank in ('1', '0'):
        env.setenv('SLURM_PROCID', rank)
        ids.append(spt.distributed.shared_run_id())
    assert ids == ['slurm-31337', 'slurm-31337']
    assert spt.Experiment(RunConfig, root=tmp_path, args=[]).run_id == 'slurm-31337'


def test_the_launch_s_run_id_numbers_later_unnamed_experiments(tmp_path, env):
    env.setenv('TFSNIPPET_RUN_ID', 'launch-numbered')
    env.setenv('TF_CONFIG', two_workers(1))
    ids = [spt.Experiment(RunConfig, root=tmp_path, args=[]).run_id for _ in range(3)]
    assert ids == ['launch-numbered', 'launch-numbered-2', 'launch-numbered-3']


def test_a_malformed_shared_id_is_refused(tmp_path, env):
    env.setenv('TFSNIPPET_RUN_ID', 'my run')
    with pytest.raises(ValueError, match=re.escape(
            '`TFSNIPPET_RUN_ID` must be a run id of letters, digits, ".", "_" and "-" (not '
            "starting with \".\" or \"-\"), got 'my run'")):
        spt.Experiment(RunConfig, root=tmp_path, args=[])


def test_alone_each_unnamed_experiment_is_a_new_run(tmp_path, env):
    first = spt.Experiment(RunConfig, root=tmp_path, args=[]).run_id
    second = spt.Experiment(RunConfig, root=tmp_path, args=[]).run_id
    assert first != second
    assert re.fullmatch(r'\d{8}-\d{6}-[0-9a-f]{6}', first)


SCRIPT = """
    import tfsnippet as spt

    class RunConfig(spt.Config):
        lr = 0.1

    with spt.Experiment(RunConfig, root='runs', args=[]) as exp:
        print('run', exp.run_id, 'chief', exp.is_chief)
"""


def test_a_restarted_chief_resumes_the_launch_s_run(tmp_path, fork_server):
    (tmp_path / 'script.py').write_text(textwrap.dedent(SCRIPT))
    env = {k: v for k, v in os.environ.items() if k not in CLUSTER_VARS}
    env.update(PYTHONPATH=str(REPO), TFSNIPPET_RUN_ID='20260101-000000-abcdef',
               TF_CONFIG=two_workers(0))
    outputs = []
    for _ in range(2):   # the first start, then the restart
        proc = fork_server.run([tmp_path / 'script.py'], cwd=tmp_path, env=env, timeout=120,
                               stderr_to_stdout=True)
        assert proc.returncode == 0, proc.stdout
        outputs.append(proc.stdout)
    assert 'run 20260101-000000-abcdef chief True' in outputs[0]
    assert 'Resuming' not in outputs[0]
    assert "Resuming run '20260101-000000-abcdef'" in outputs[1]
    assert sorted(os.listdir(tmp_path / 'runs' / '20260101-000000-abcdef'))
