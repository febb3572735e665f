"""`cluster_info` reads TF_CONFIG, then SLURM, then defaults to a lone process."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tfsnippet import distributed
from tfsnippet.distributed import ClusterInfo, cluster_info, expand_hostlist

PACKAGE_DIR = Path(distributed.__file__).resolve().parent.parent


def tf_config(cluster: object, task: object = None, **extra: object) -> dict[str, str]:
    config: dict[str, object] = {'cluster': cluster, **extra}
    if task is not None:
        config['task'] = task
    return {'TF_CONFIG': json.dumps(config)}


WORKERS = {'worker': ['h0:2222', 'h1:2222', 'h2:2222']}
FULL = {'chief': ['c:1'], 'worker': ['w0:1', 'w1:1'], 'ps': ['p0:1', 'p1:1', 'p2:1']}


# ------------------------------------------------------------------ TF_CONFIG
@pytest.mark.parametrize('cluster, task, expected', [
    # (task_type, task_index, num_workers, num_ps, is_chief, worker_rank)
    (WORKERS, {'type': 'worker', 'index': 0}, ('worker', 0, 3, 0, True, 0)),
    (WORKERS, {'type': 'worker', 'index': 2}, ('worker', 2, 3, 0, False, 2)),
    (FULL, {'type': 'chief', 'index': 0}, ('chief', 0, 3, 3, True, 0)),
    (FULL, {'type': 'worker', 'index': 0}, ('worker', 0, 3, 3, False, 1)),
    (FULL, {'type': 'worker', 'index': 1}, ('worker', 1, 3, 3, False, 2)),
    (FULL, {'type': 'ps', 'index': 2}, ('ps', 2, 3, 3, False, None)),
    (FULL, {'type': 'evaluator', 'index': 0}, ('evaluator', 0, 3, 3, False, None)),
    ({'worker': ['w:1'], 'ps': ['p:1']}, {'type': 'ps', 'index': 0},
     ('ps', 0, 1, 1, False, None)),
    (FULL, {'type': 'chief'}, ('chief', 0, 3, 3, True, 0)),  # index defaults to 0
], ids=['worker0-chief', 'worker2', 'chief', 'worker0-under-chief', 'worker1-under-chief',
        'ps', 'evaluator-outside-cluster', 'ps-never-chief', 'index-defaults-to-0'])
def test_tf_config_roles(cluster, task, expected):
    info = cluster_info(tf_config(cluster, task))
    assert (info.task_type, info.task_index, info.num_workers, info.num_ps, info.is_chief,
            info.worker_rank) == expected
    assert info.source == 'tf_config'
    assert info.cluster_spec() == cluster


def test_tf_config_extra_keys_are_ignored_and_round_trip():
    env = tf_config(FULL, {'type': 'worker', 'index': 1}, environment='cloud', job={'x': 1})
    info = cluster_info(env)
    assert info.tf_config() == {'cluster': FULL, 'task': {'type': 'worker', 'index': 1}}
    assert cluster_info({'TF_CONFIG': json.dumps(info.tf_config())}) == info


def test_empty_task_lists_are_dropped():
    info = cluster_info(tf_config({'worker': ['w:1'], 'ps': []}, {'type': 'worker'}))
    assert info.cluster_spec() == {'worker': ['w:1']} and info.num_ps == 0


@pytest.mark.parametrize('raw', ['', '   ', '{}', '{"cluster": {}}'])
def test_tf_config_without_a_cluster_counts_as_unset(raw):
    assert cluster_info({'TF_CONFIG': raw}).source == 'local'
    slurm = dict(SLURM_4_TASKS, TF_CONFIG=raw)
    assert cluster_info(slurm).source == 'slurm'


@pytest.mark.parametrize('env, message', [
    ({'TF_CONFIG': '{"cluster": '},
     "`TF_CONFIG` must be a JSON object, got '{\"cluster\": ' (Expecting value at character 12)"),
    ({'TF_CONFIG': '[1, 2]'}, '`TF_CONFIG` must be a JSON object, got [1, 2]'),
    (tf_config(None, {'type': 'worker'}),
     "`TF_CONFIG['cluster']` is missing; expected a non-empty object of task type to a list "
     "of 'host:port' strings"),
    (tf_config(['h:1'], {'type': 'worker'}),
     "`TF_CONFIG['cluster']` must be a non-empty object of task type to a list of "
     "'host:port' strings, got ['h:1']"),
    (tf_config({'master': ['h:1']}, {'type': 'worker'}),
     "`TF_CONFIG['cluster']` has task type 'master'; expected only "
     "['chief', 'worker', 'ps', 'evaluator']"),
    (tf_config({'worker': 'h:1'}, {'type': 'worker'}),
     "`TF_CONFIG['cluster']['worker']` must be a list of 'host:port' strings, got 'h:1'"),
    (tf_config({'worker': ['h:1', 'h2']}, {'type': 'worker'}),
     "`TF_CONFIG['cluster']['worker'][1]` must be a 'host:port' string, got 'h2'"),
    (tf_config({'worker': ['h:70000']}, {'type': 'worker'}),
     "`TF_CONFIG['cluster']['worker'][0]` must be a 'host:port' string, got 'h:70000'"),
    (tf_config({'ps': [7]}, {'type': 'ps'}),
     "`TF_CONFIG['cluster']['ps'][0]` must be a 'host:port' string, got 7"),
    (tf_config({'worker': ['h:1'], 'ps': ['h:1']}, {'type': 'worker'}),
     "`TF_CONFIG['cluster']` gives 'h:1' to both worker 0 and ps 0; every task needs its own"),
    (tf_config({'chief': ['a:1', 'b:1']}, {'type': 'chief'}),
     "`TF_CONFIG['cluster']['chief']` must have 1 entry, got ['a:1', 'b:1']"),
    (tf_config({'worker': []}, {'type': 'worker'}),
     "`TF_CONFIG['cluster']` lists no tasks, got {'worker': []}"),
    (tf_config(WORKERS),
     "`TF_CONFIG['task']` is missing; expected {\"type\": <one of chief, worker, ps, "
     "evaluator>, \"index\": <int>}"),
    (tf_config(WORKERS, 'worker'),
     "`TF_CONFIG['task']` must be an object, got 'worker'; expected {\"type\": <one of "
     "chief, worker, ps, evaluator>, \"index\": <int>}"),
    (tf_config(WORKERS, {'index': 0}),
     "`TF_CONFIG['task']['type']` must be one of ['chief', 'worker', 'ps', 'evaluator'], "
     "got None"),
    (tf_config(WORKERS, {'type': 'master', 'index': 0}),
     "`TF_CONFIG['task']['type']` must be one of ['chief', 'worker', 'ps', 'evaluator'], "
     "got 'master'"),
    (tf_config(WORKERS, {'type': 'ps', 'index': 0}),
     "`TF_CONFIG['task']['type']` is 'ps' but `TF_CONFIG['cluster']` has no 'ps' tasks "
     "(it has 'worker')"),
    (tf_config(WORKERS, {'type': 'worker', 'index': '1'}),
     "`TF_CONFIG['task']['index']` must be an int >= 0, got '1'"),
    (tf_config(WORKERS, {'type': 'worker', 'index': True}),
     "`TF_CONFIG['task']['index']` must be an int >= 0, got True"),
    (tf_config(WORKERS, {'type': 'worker', 'index': -1}),
     "`TF_CONFIG['task']['index']` must be an int >= 0, got -1"),
    (tf_config(WORKERS, {'type': 'worker', 'index': 3}),
     "`TF_CONFIG['task']['index']` is 3 but `TF_CONFIG['cluster']['worker']` has 3 entries"),
    (tf_config({'chief': ['c:1']}, {'type': 'chief', 'index': 1}),
     "`TF_CONFIG['task']['index']` is 1 but `TF_CONFIG['cluster']['chief']` has 1 entry"),
], ids=['not-json', 'not-object', 'cluster-missing', 'cluster-not-object', 'unknown-type',
        'entries-not-list', 'address-without-port', 'port-out-of-range', 'address-not-str',
        'duplicate-address', 'two-chiefs', 'no-tasks', 'task-missing', 'task-not-object',
        'type-missing', 'type-unknown', 'type-not-in-cluster', 'index-str', 'index-bool',
        'index-negative', 'index-out-of-range', 'chief-index'])
def test_malformed_tf_config_names_the_key(env, message):
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        cluster_info(env)


def test_long_values_are_shortened_in_messages():
    env = tf_config({'worker': ['x' * 200]}, {'type': 'worker'})
    with pytest.raises(ValueError) as excinfo:
        cluster_info(env)
    assert str(excinfo.value) == ("`TF_CONFIG['cluster']['worker'][0]` must be a 'host:port' "
                                  "string, got '" + 'x' * 75 + "...'")   # the closing quote kept


# ---------------------------------------------------------------------- SLURM
SLURM_4_TASKS = {'SLURM_PROCID': '0', 'SLURM_NTASKS': '4', 'SLURM_JOB_NODELIST': 'gpu[07-08]',
                 'SLURM_TASKS_PER_NODE': '2(x2)'}


@pytest.mark.parametrize('procid, is_chief', [('0', True), ('3', False)])
def test_slurm_lays_tasks_out_over_nodes_in_order(procid, is_chief):
    info = cluster_info(dict(SLURM_4_TASKS, SLURM_PROCID=procid))
    assert info == ClusterInfo(
        task_type='worker', task_index=int(procid), num_workers=4, num_ps=0,
        is_chief=is_chief, source='slurm',
        cluster={'worker': ['gpu07:8888', 'gpu07:8889', 'gpu08:8888', 'gpu08:8889']})


def test_slurm_step_variables_win_over_job_variables():
    env = dict(SLURM_4_TASKS, SLURM_PROCID='1', SLURM_STEP_NUM_TASKS='3',
               SLURM_STEP_NODELIST='a[1-2],b', SLURM_STEP_TASKS_PER_NODE='1(x3)',
               SLURMD_NODENAME='a2')
    info = cluster_info(env, slurm_port=40000)
    assert info.cluster_spec() == {'worker': ['a1:40000', 'a2:40000', 'b:40000']}
    assert (info.task_index, info.num_workers) == (1, 3)


def test_slurm_without_tasks_per_node_splits_evenly():
    env = {'SLURM_PROCID': '2', 'SLURM_NTASKS': '4', 'SLURM_JOB_NODELIST': 'n[1-2]'}
    assert cluster_info(env).cluster_spec() == {
        'worker': ['n1:8888', 'n1:8889', 'n2:8888', 'n2:8889']}


def test_tf_config_wins_over_slurm():
    env = dict(SLURM_4_TASKS, **tf_config(WORKERS, {'type': 'worker', 'index': 1}))
    assert cluster_info(env).source == 'tf_config'


@pytest.mark.parametrize('changes, message', [
    ({'SLURM_PROCID': 'x'}, "`SLURM_PROCID` must be an int >= 0, got 'x'"),
    ({'SLURM_PROCID': '4'}, '`SLURM_PROCID` is 4 but `SLURM_NTASKS` is 4'),
    ({'SLURM_NTASKS': '0'}, "`SLURM_NTASKS` must be an int >= 1, got '0'"),
    ({'SLURM_NTASKS': None},
     '`SLURM_PROCID` is set but `SLURM_STEP_NUM_TASKS` (or `SLURM_NTASKS`) is not; start the '
     'tasks with `srun`, or unset `SLURM_PROCID`'),
    ({'SLURM_JOB_NODELIST': None},
     '`SLURM_PROCID` is set but `SLURM_STEP_NODELIST` (or `SLURM_JOB_NODELIST`) is not; '
     'start the tasks with `srun`, or unset `SLURM_PROCID`'),
    ({'SLURM_JOB_NODELIST': 'gpu[07-08'},
     "`SLURM_JOB_NODELIST` is not a valid hostlist: unbalanced brackets in 'gpu[07-08'"),
    ({'SLURM_TASKS_PER_NODE': '2(x3)'},
     "`SLURM_TASKS_PER_NODE` is '2(x3)' (6 tasks on 3 nodes) but `SLURM_NTASKS` is 4 and "
     "`SLURM_JOB_NODELIST` has 2 nodes"),
    ({'SLURM_TASKS_PER_NODE': 'two'}, "`SLURM_TASKS_PER_NODE` must look like '2(x3),1', "
                                      "got 'two'"),
    ({'SLURM_TASKS_PER_NODE': None, 'SLURM_NTASKS': '3'},
     '`SLURM_NTASKS` is 3, which does not split evenly over the 2 nodes of '
     '`SLURM_JOB_NODELIST`; set `SLURM_TASKS_PER_NODE`'),
    ({'SLURM_PROCID': '1', 'SLURMD_NODENAME': 'gpu08'},
     "`SLURM_PROCID` 1 belongs on node 'gpu07' when tasks fill the nodes in order, but "
     "`SLURMD_NODENAME` is 'gpu08'; run `srun --distribution=block`"),
], ids=['procid-not-int', 'procid-out-of-range', 'ntasks-zero', 'ntasks-missing',
        'nodelist-missing', 'nodelist-malformed', 'tasks-per-node-mismatch',
        'tasks-per-node-malformed', 'uneven-split', 'not-block-distribution'])
def test_malformed_slurm_names_the_variable(changes, message):
    env = {k: v for k, v in {**SLURM_4_TASKS, **changes}.items() if v is not None}
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        cluster_info(env)


@pytest.mark.parametrize('port', [0, 65536, '8888', True])
def test_slurm_port_is_checked(port):
    with pytest.raises(ValueError, match=re.escape(
            f'`slurm_port` must be an int in 1..65535, got {port!r}')):
        cluster_info({}, slurm_port=port)


@pytest.mark.parametrize('hostlist, hosts', [
    ('n1', ['n1']),
    ('node[01-03,07]', ['node01', 'node02', 'node03', 'node07']),
    ('a[1-2],b, c[09-10]', ['a1', 'a2', 'b', 'c09', 'c10']),
    ('r[1-2]n[1-2]', ['r1n1', 'r1n2', 'r2n1', 'r2n2']),
    ('n[8-10]-ib', ['n8-ib', 'n9-ib', 'n10-ib']),
    ('n[1,1]', ['n1', 'n1']),
])
def test_expand_hostlist(hostlist, hosts):
    assert expand_hostlist(hostlist) == hosts


@pytest.mark.parametrize('hostlist, message', [
    ('', "`hostlist` must be a non-empty string, got ''"),
    ('n[1-2', "unbalanced brackets in 'n[1-2'"),
    ('n1]', "unbalanced brackets in 'n1]'"),
    ('n[[1]]', "unbalanced brackets in 'n[[1]]'"),
    ('a,,b', "empty host name in 'a,,b'"),
    ('n[3-1]', "range '3-1' in 'n[3-1]' goes down"),
    ('n[a-b]', "'a-b' in 'n[a-b]' is not a number or a range like 1-3"),
])
def test_expand_hostlist_refuses_malformed_lists(hostlist, message):
    with pytest.raises(ValueError, match=f'^{re.escape(message)}$'):
        expand_hostlist(hostlist)


# ---------------------------------------------------------------- local + API
def test_alone_this_process_is_the_chief_and_only_worker():
    info = cluster_info({'PATH': '/bin'})
    assert info == ClusterInfo(task_type='chief', task_index=0, num_workers=1, num_ps=0,
                               is_chief=True, cluster={}, source='local')
    assert info.worker_rank == 0 and info.tf_config() == {}


def test_helpers_read_the_process_environment(monkeypatch):
    for name in list(SLURM_4_TASKS) + ['TF_CONFIG', 'SLURM_STEP_NUM_TASKS']:
        monkeypatch.delenv(name, raising=False)
    assert (distributed.task_type(), distributed.task_index(), distributed.num_workers(),
            distributed.is_chief()) == ('chief', 0, 1, True)
    monkeypatch.setenv('TF_CONFIG', json.dumps({'cluster': FULL,
                                                'task': {'type': 'worker', 'index': 1}}))
    assert (distributed.task_type(), distributed.task_index(), distributed.num_workers(),
            distributed.is_chief()) == ('worker', 1, 3, False)
    assert cluster_info() == cluster_info({'TF_CONFIG': os.environ['TF_CONFIG']})


def test_cluster_info_is_read_only():
    info = cluster_info(tf_config(WORKERS, {'type': 'worker', 'index': 0}))
    with pytest.raises(dataclasses.FrozenInstanceError):
        info.task_index = 1  # type: ignore[misc]
    with pytest.raises(TypeError):
        info.cluster['worker'] = ['x:1']  # type: ignore[index]
    spec = info.cluster_spec()
    spec['worker'].append('x:1')
    assert len(info.cluster['worker']) == 3


def test_cluster_resolver_hands_the_cluster_to_tensorflow():
    info = cluster_info(tf_config(FULL, {'type': 'worker', 'index': 1}))
    resolver = info.cluster_resolver()
    assert resolver.cluster_spec().as_dict() == FULL
    assert (resolver.task_type, resolver.task_id, resolver.rpc_layer) == ('worker', 1, 'grpc')
    alone = cluster_info({}).cluster_resolver()
    assert alone.cluster_spec().as_dict() == {}


@pytest.mark.parametrize('module', ['tfsnippet.distributed.cluster', 'tfsnippet.launch'])
def test_module_does_not_import_tensorflow(module):
    # They may import the TensorFlow-free `tfsnippet.utils`, nothing heavier.
    code = (f'import sys, {module}\n'
            'print(sorted(m for m in sys.modules if m.split(".")[0] in '
            '("tensorflow", "numpy")))\n')
    proc = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True,
                          timeout=60, cwd=str(PACKAGE_DIR.parent),
                          env={**os.environ, 'PYTHONPATH': str(PACKAGE_DIR.parent)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == '[]'
