"""`cluster_info` builds a Kubernetes Indexed Job's cluster; `shared_run_id` names the job's run."""

from __future__ import annotations

import json
import re

import pytest

from tfsnippet.distributed import cluster_info, shared_run_id

# what the Indexed Job of docs/guide/distributed.rst gives pod 1 of 3
POD_1 = {'JOB_COMPLETION_INDEX': '1', 'HOSTNAME': 'digits-1', 'TFSNIPPET_NUM_WORKERS': '3',
         'TFSNIPPET_SERVICE': 'digits-workers'}


def pod(index: int, **changes: str | None) -> dict[str, str]:
    env = {**POD_1, 'JOB_COMPLETION_INDEX': str(index), 'HOSTNAME': f'digits-{index}',
           **changes}
    return {k: v for k, v in env.items() if v is not None}


@pytest.mark.parametrize('index', [0, 1, 2])
def test_indexed_job_pods_make_one_cluster_whose_pod_0_is_chief(index):
    info = cluster_info(pod(index))
    assert info.source == 'kubernetes'
    assert (info.task_type, info.task_index, info.num_workers, info.num_ps) == (
        'worker', index, 3, 0)
    assert info.is_chief == (index == 0)
    assert info.cluster_spec() == {'worker': [
        'digits-0.digits-workers:2222', 'digits-1.digits-workers:2222',
        'digits-2.digits-workers:2222']}
    assert json.loads(json.dumps(info.tf_config()))['task'] == {'type': 'worker', 'index': index}


def test_port_and_job_name_variables():
    info = cluster_info(pod(1, TFSNIPPET_PORT='5000', TFSNIPPET_JOB_NAME='train',
                            HOSTNAME='anything'))
    assert info.cluster_spec()['worker'][0] == 'train-0.digits-workers:5000'


def test_tf_config_wins_over_kubernetes_which_wins_over_slurm():
    tf_config = json.dumps({'cluster': {'worker': ['a:1']}, 'task': {'type': 'worker'}})
    assert cluster_info({**pod(1), 'TF_CONFIG': tf_config}).source == 'tf_config'
    slurm = {'SLURM_PROCID': '0', 'SLURM_NTASKS': '1', 'SLURM_JOB_NODELIST': 'n1'}
    assert cluster_info({**pod(1), **slurm}).source == 'kubernetes'


def test_an_indexed_job_without_the_variables_runs_alone():
    assert cluster_info({'JOB_COMPLETION_INDEX': '3', 'HOSTNAME': 'sweep-3'}).source == 'local'


@pytest.mark.parametrize('changes, message', [
    ({'JOB_COMPLETION_INDEX': None},
     '`TFSNIPPET_NUM_WORKERS` is set, so this pod is a worker of a Kubernetes Indexed Job, '
     'but `JOB_COMPLETION_INDEX` is not; run it in a Job with `completionMode: Indexed`'),
    ({'TFSNIPPET_NUM_WORKERS': None},
     '`TFSNIPPET_SERVICE` is set, so this pod is a worker of a Kubernetes Indexed Job, but '
     '`TFSNIPPET_NUM_WORKERS` is not'),
    ({'JOB_COMPLETION_INDEX': '3'},
     "`JOB_COMPLETION_INDEX` is 3 but `TFSNIPPET_NUM_WORKERS` is 3; set "
     "`TFSNIPPET_NUM_WORKERS` to the Job's `completions`"),
    ({'TFSNIPPET_NUM_WORKERS': 'two'}, "`TFSNIPPET_NUM_WORKERS` must be an int >= 1, got 'two'"),
    ({'TFSNIPPET_SERVICE': 'Digits_Workers'},
     '`TFSNIPPET_SERVICE` must be the name of a Service (lower-case letters, digits and "-"), '
     "got 'Digits_Workers'"),
    ({'TFSNIPPET_PORT': '70000'}, "`TFSNIPPET_PORT` must be an int in 1..65535, got '70000'"),
    ({'HOSTNAME': 'digits-abcde'},
     "`TFSNIPPET_JOB_NAME` is not set and `HOSTNAME` ('digits-abcde') is not `<job>-1`, the "
     "host name of pod 1 of an Indexed Job; set `TFSNIPPET_JOB_NAME` to the Job's name"),
], ids=['no-index', 'no-count', 'index-out-of-range', 'count-not-int', 'bad-service',
        'bad-port', 'hostname-not-indexed'])
def test_malformed_kubernetes_variables_name_the_variable(changes, message):
    env = {k: v for k, v in {**POD_1, **changes}.items() if v is not None}
    with pytest.raises(ValueError, match=f'^{re.escape(message)}'):
        cluster_info(env)


def test_shared_run_id_is_the_same_on_every_worker_and_after_a_restart():
    assert {shared_run_id(pod(i)) for i in range(3)} == {'k8s-digits'}
    slurm = {'SLURM_JOB_ID': '4242', 'SLURM_NTASKS': '2', 'SLURM_JOB_NODELIST': 'n[1-2]'}
    assert {shared_run_id({**slurm, 'SLURM_PROCID': str(i)}) for i in range(2)} == {
        'slurm-4242'}
    assert shared_run_id({'TFSNIPPET_RUN_ID': 'mine', **pod(2)}) == 'mine'


def test_no_shared_run_id_alone_or_from_tf_config_alone():
    assert shared_run_id({}) is None
    # a one-task SLURM job is not alone: its requeue keeps the job id, so it resumes its run
    assert shared_run_id({'SLURM_JOB_ID': '7', 'SLURM_PROCID': '0', 'SLURM_NTASKS': '1',
                          'SLURM_JOB_NODELIST': 'n1'}) == 'slurm-7'
    tf_config = json.dumps({'cluster': {'worker': ['a:1', 'b:1']}, 'task': {'type': 'worker'}})
    assert shared_run_id({'TF_CONFIG': tf_config}) is None
