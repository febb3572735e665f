"""Resumes that never skip or repeat work (issue 10): what is graph-only.

A SIGTERM in a graph-mode script, a warm start from a TF1 ``Saver``
checkpoint and a ``tf.random.Generator`` whose state is a graph variable;
the rest runs in both styles in tests/scaffold/test_resume_semantics.py.
"""

import os
import subprocess
import sys

import pytest
import tensorflow as tf

import tfsnippet as spt

v1 = tf.compat.v1


def make_job(session):
    w = v1.get_variable('w', shape=[], initializer=v1.zeros_initializer())
    step_op = v1.assign_add(w, 1.)
    session.run(v1.global_variables_initializer())
    return w, step_op


SCRIPT = '''
import os, signal, sys
import tensorflow as tf
import tfsnippet as spt
tf.compat.v1.disable_eager_execution()
v1 = tf.compat.v1
w = v1.get_variable('w', shape=[], initializer=v1.zeros_initializer())
step_op = v1.assign_add(w, 1.)
with v1.Session() as session:
    session.run(v1.global_variables_initializer())
    loop = spt.TrainLoop(max_epoch=3, checkpoint_dir=sys.argv[1], show_eta=False)
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(4)):
                session.run(step_op)
                if sys.argv[2] == 'kill' and step == 6:
                    os.kill(os.getpid(), signal.SIGTERM)
            print('body', epoch, flush=True)
    print('final', session.run(w), flush=True)
'''


def test_sigterm_in_graph_mode(tmp_path):
    script = tmp_path / 'train.py'
    script.write_text(SCRIPT)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
    env.pop('TFSNIPPET_TEST_GRAPH_MODE', None)
    cmd = [sys.executable, str(script), str(tmp_path / 'run')]
    first = subprocess.run(cmd + ['kill'], capture_output=True, text=True, timeout=120, env=env)
    assert first.returncode == 143, first.stderr[-2000:]
    assert first.stdout.splitlines()[1].startswith('Preempted by SIGTERM at epoch 2, step 6')
    second = subprocess.run(cmd + ['resume'], capture_output=True, text=True, timeout=120,
                            env=env)
    assert second.returncode == 0, second.stderr[-2000:]
    assert second.stdout.splitlines()[1:] == ['body 2', 'body 3', 'final 12.0']


def test_warm_start_from_a_tf1_saver_checkpoint(session, tmp_path):
    with tf.Graph().as_default() as g, v1.Session(graph=g) as other:
        old = v1.get_variable('old/w', initializer=tf.constant(5.))
        other.run(v1.global_variables_initializer())
        prefix = v1.train.Saver([old]).save(other, str(tmp_path / 'tf1' / 'model'))
    w, step_op = make_job(session)
    lines = []
    loop = spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(tmp_path / 'run'),
                         print_func=lines.append, show_eta=False,
                         warm_start={'source': prefix, 'mapping': {'^w$': 'old/w'},
                                     'targets': [w]})
    with loop:
        assert session.run(w) == 5.
        for _ in loop.iter_epochs():
            session.run(step_op)
    assert session.run(w) == 6.


def _dropout_job(tmp_path, interrupt_at=None):
    """A graph whose step adds a random dropout mask drawn from a tf.random.Generator."""
    with tf.Graph().as_default(), v1.Session() as session:
        gen = tf.random.Generator.from_seed(7)       # its state is a graph variable
        w = v1.get_variable('w', initializer=tf.zeros([16]))
        step_op = v1.assign_add(w, tf.cast(gen.uniform([16]) < 0.5, tf.float32))
        session.run(v1.global_variables_initializer())
        loop = spt.TrainLoop(max_epoch=3, checkpoint_dir=str(tmp_path), checkpoint_step_freq=1,
                             print_func=lambda s: None)
        with loop:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(4)):
                    session.run(step_op)
                    if step == interrupt_at:
                        raise KeyboardInterrupt()
        return session.run(w)


def test_a_random_generator_dropout_resumes_bitwise_in_graph_mode(tmp_path):
    uninterrupted = _dropout_job(tmp_path / 'once')
    with pytest.raises(KeyboardInterrupt):
        _dropout_job(tmp_path / 'twice', interrupt_at=6)
    resumed = _dropout_job(tmp_path / 'twice')
    assert resumed.tobytes() == uninterrupted.tobytes()
    assert 0 < uninterrupted.sum() < 16 * 12          # the masks were random
