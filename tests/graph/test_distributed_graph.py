"""A TrainLoop under a tf.distribute strategy with TF1-style graph code.

The job runs in a child process (tests/distributed/scripts/mirrored_graph_loop.py),
where the CPU is split into two logical devices before TensorFlow sets up its
devices: ``tf.compat.v1`` variables made in ``MirroredStrategy.scope()``, the
global batch fed to placeholders and shared among the replicas with
``replica_slice``, the step run with ``session.run``.  Strategies of a cluster
are refused at loop entry.
"""

import re

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.backend import replica_slice
from tests.distributed.scripts._run import run_child

v1 = tf.compat.v1
LINE = re.compile(r'^\[Epoch (\d)/3, Step (\d+)\] .*; loss: ([\d.e-]+) .*; n ok: ([\d.]+)')


def numbers(lines):
    """(epoch, step, loss, n ok) of each epoch line."""
    out = []
    for line in lines:
        m = LINE.match(line)
        if m:
            out.append((int(m[1]), int(m[2]), float(m[3]), float(m[4])))
    return out


@pytest.fixture(scope='module')
def trained(tmp_path_factory):
    return run_child('mirrored_graph_loop.py', 'train', str(tmp_path_factory.mktemp('graph')),
                     timeout=120, retry_crash=True)


def test_mirrored_graph_job_trains_like_one_device(trained):
    assert trained['variable_type'] == 'MirroredVariable'
    assert trained['backend'] == ['DistributedBackend', True, 1, 2]
    assert trained['is_chief'] is True
    got, single = numbers(trained['lines']), numbers(trained['single_lines'])
    assert [g[:2] for g in got] == [(1, 4), (2, 8), (3, 12)]
    for g, s in zip(got, single):   # the losses and counts of session.run, as printed
        np.testing.assert_allclose(g[2:], s[2:], rtol=1e-4)
    assert got[2][2] < got[0][2]
    for w, s in zip(trained['weights'], trained['single_weights']):
        np.testing.assert_allclose(w, s, rtol=1e-5, atol=1e-6)
    # an odd batch is shared unevenly among the replicas: each row counted once
    got_loss, expected = trained['odd_batch']
    assert got_loss == pytest.approx(expected, rel=1e-5)


def test_symbolic_per_replica_metric_is_refused_with_what_to_do(trained):
    kind, message = trained['symbolic_metric_error']
    assert kind == 'TypeError'
    assert 'Metric `loss` is a per-replica value of graph tensors' in message
    assert 'session.run(strategy.reduce(' in message


def test_early_stopping_restores_every_copy(trained):
    lines = trained['es_lines']
    assert lines[-1] == 'Restore early-stopping parameters: from step 8, where valid_loss = 0.2'
    assert trained['es_weights'] == trained['es_epoch_weights']['2']
    assert trained['es_weights'] != trained['es_epoch_weights']['3']
    assert trained['es_copies'] == [trained['es_weights']] * 2


def test_checkpoint_resumed_mid_epoch_in_a_new_graph(trained):
    np.testing.assert_allclose(trained['fresh_weights'][0], [.1, .1, .1])
    lines = trained['resumed_lines']
    assert lines[0].startswith('Resume training: epoch 2, step 6, from checkpoint ')
    assert [n[:2] for n in numbers(lines)] == [(2, 8), (3, 12)]
    # the same weights (and momentum) as the uninterrupted run, on both devices
    assert trained['resumed_weights'] == trained['full_weights']
    assert trained['resumed_copies'] == [trained['full_weights']] * 2
    assert trained['interrupted_weights'] != trained['full_weights']


def test_keras3_layer_in_the_scope_of_a_graph(trained):
    # Keras 3 makes its variables in graph mode too (their `assign` does nothing there:
    # train them in eager mode)
    assert trained['keras_layer'] == ['Variable', 'Variable']


def test_multi_worker_strategy_is_refused_in_graph_mode():
    result = run_child('mirrored_graph_loop.py', 'mwms', timeout=60, retry_crash=True)
    kind, message = result['error']
    assert kind == 'RuntimeError'
    assert message.startswith('A TrainLoop under a MultiWorkerMirroredStrategy of 2 workers '
                              'cannot run in graph mode')
    assert 'run the loop in eager mode' in message
    assert result['lines'] == []


def test_parameter_server_strategy_is_refused_in_a_graph():
    result = run_child('mirrored_graph_loop.py', 'ps', timeout=60, retry_crash=True)
    kind, message = result['error']
    assert kind == 'RuntimeError'
    assert message.startswith('A TrainLoop under a ParameterServerStrategy cannot run in '
                              'graph mode')
    assert 'coordinator.schedule(' in message


def test_replica_slice_outside_strategy_run_is_refused(session):
    strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
    with strategy.scope():
        with pytest.raises(RuntimeError, match='inside the replica function of '
                                               '`strategy.run'):
            replica_slice(v1.placeholder(tf.float32, [None]))
    with pytest.raises(TypeError, match='needs at least one tensor'):
        replica_slice()


def test_one_device_strategy_loop_in_graph_mode(session):
    # one device: the loop runs under the strategy in the test's own graph
    strategy = tf.distribute.OneDeviceStrategy('/cpu:0')
    with strategy.scope():
        w = v1.get_variable('w', shape=[], initializer=v1.zeros_initializer())
    x = v1.placeholder(tf.float32, [None])
    total = strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(
        lambda x: tf.reduce_sum(replica_slice(x)) + w.assign_add(1.) * 0., args=(x,)),
        axis=None)
    session.run(v1.global_variables_initializer())
    lines = []
    with spt.TrainLoop([w], strategy=strategy, max_epoch=2, print_func=lines.append,
                       show_eta=False) as loop:
        assert loop.backend.num_replicas == 1 and loop.is_chief
        for _ in loop.iter_epochs():
            for _, (bx,) in loop.iter_steps(spt.DataFlow.arrays([np.arange(4.)], 2)):
                loop.collect_metrics(total=session.run(total, {x: bx}))
            loop.print_logs()
    assert [re.sub(r'.*total: ', '', line) for line in lines] == ['3 (±2)'] * 2
    assert session.run(w) == 4.
