"""A checkpoint is data, never code: the graph-mode twins of
tests/scaffold/test_checkpoint_format.py.

Each "run" builds its own graph and session, as a new process would.  A
legacy ``state.pkl`` whose payload writes a marker file is neither run nor
silently passed over by a resume or ``warm_start`` unless trusted; no file of
a checkpoint tfsnippet writes is a pickle stream; the loop's state (a
shuffled flow's position, early stopping, ReduceOnPlateau, user objects)
round-trips exactly, in synchronous and asynchronous saves.
"""

import contextlib
import copy
import os
import re

import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint import UntrustedCheckpointError
from tfsnippet.scaffold.checkpoint.state_format import read_state

from ..scaffold.test_checkpoint_format import (TRUST_ENV, Recorder, assert_no_pickle,
                                               make_legacy, same, shuffled_flow)

v1 = tf.compat.v1
VALID = [0.5, 0.75, 0.25]


@contextlib.contextmanager
def new_graph():
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph) as session:
        yield session


def run_loop(root, lines, max_epoch=3, checkpoint_at=None, kind='RandomState', **kwargs):
    """Train `max_epoch` epochs of 10 steps in a graph of its own (``w`` gains the
    batch mean), with early stopping, ReduceOnPlateau, a LossGuard and a user
    object; at step `checkpoint_at` make a checkpoint and take the states then."""
    taken = {}
    with new_graph() as session:
        w = v1.get_variable('w', shape=(), initializer=v1.zeros_initializer())
        lr = v1.get_variable('lr', initializer=1.)
        x = v1.placeholder(tf.float32, [None])
        step_op = v1.assign_add(w, tf.reduce_mean(x))
        session.run(v1.global_variables_initializer())
        recorder = Recorder()
        loop = spt.TrainLoop([w], max_epoch=max_epoch, checkpoint_dir=str(root),
                             checkpoint_epoch_freq=1, early_stopping=True,
                             checkpoint_save_objects={'recorder': recorder}, show_eta=False,
                             print_func=lines.append, **kwargs)
        loop.add_component(spt.ReduceOnPlateau(lr, factor=.5, patience=1))
        loop.add_component(spt.LossGuard('loss', action='stop'))
        flow = shuffled_flow(kind)
        with loop:
            for epoch in loop.iter_epochs():
                for _, (a,) in loop.iter_steps(flow):
                    recorder.seen.append(float(a.sum()))
                    session.run(step_op, feed_dict={x: a})
                    loop.collect_metrics(loss=float(a.mean()))
                    if loop.step == checkpoint_at:
                        taken['path'] = loop.make_checkpoint()
                        # a copy: the early-stopping snapshot is a host buffer written in place
                        taken['loop'] = copy.deepcopy(loop.state_dict())
                        taken['recorder'] = recorder.get_state()
                loop.collect_metrics(valid_loss=VALID[epoch - 1])
        taken['w'], taken['lr'] = session.run([w, lr])
        taken['seen'] = list(recorder.seen)
    return taken


@pytest.mark.parametrize('asynchronous', [False, True], ids=['sync', 'async'])
@pytest.mark.parametrize('kind', ['RandomState', 'Generator'])
def test_the_loop_state_round_trips_exactly_and_no_file_is_a_pickle(tmp_path, kind,
                                                                     asynchronous):
    taken = run_loop(tmp_path, [], checkpoint_at=13, kind=kind, checkpoint_async=asynchronous)
    saved = read_state(taken['path'])
    loop_state = taken['loop']
    assert loop_state['dataflows'][0]['served'] == 3
    assert any(c.get('snapshot') is not None for c in loop_state['components'].values())
    same(saved['objects']['$$train_loop']['loop'], loop_state)
    same(saved['objects']['recorder'], taken['recorder'])
    assert sorted(saved['variables']) == ['lr', 'w']
    assert_no_pickle(tmp_path)


def test_a_resume_from_the_new_format_continues_exactly(tmp_path):
    want = run_loop(tmp_path / 'whole', [])
    run_loop(tmp_path / 'cut', [], max_epoch=2)
    lines = []
    got = run_loop(tmp_path / 'cut', lines)
    assert lines[0].startswith('Resume training: epoch 2, step 20, from checkpoint ')
    assert (got['w'], got['lr'], got['seen']) == (want['w'], want['lr'], want['seen'])


def legacy_run(tmp_path):
    """Two epochs saved, the newest checkpoint (step 20) turned into a malicious legacy one."""
    run_loop(tmp_path, [], max_epoch=2)
    marker = tmp_path / 'marker'
    make_legacy(str(tmp_path / 'checkpoint' / 'checkpoint.dat-20'), marker)
    return marker


def test_resume_neither_runs_nor_skips_an_untrusted_legacy_checkpoint(tmp_path, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    marker = legacy_run(tmp_path)
    lines = []
    with pytest.raises(UntrustedCheckpointError, match=re.escape(f'{TRUST_ENV}=1')):
        run_loop(tmp_path, lines)
    assert not marker.exists()
    assert not any(line.startswith('Resume training') for line in lines)


def test_resume_reads_a_legacy_checkpoint_with_the_trust_switch(tmp_path, monkeypatch):
    marker = legacy_run(tmp_path)
    want = run_loop(tmp_path / 'whole', [])
    monkeypatch.setenv(TRUST_ENV, '1')
    lines = []
    got = run_loop(tmp_path, lines)
    assert marker.exists()
    assert lines[0] == (f'Resume training: epoch 2, step 20, from checkpoint '
                        f'{tmp_path / "checkpoint" / "checkpoint.dat-20"}')
    assert (got['w'], got['lr'], got['seen']) == (want['w'], want['lr'], want['seen'])


def test_saver_restore_reads_a_legacy_checkpoint_only_when_trusted(tmp_path, monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    marker = legacy_run(tmp_path)
    path = str(tmp_path / 'checkpoint' / 'checkpoint.dat-20')
    with new_graph() as session:
        w = v1.get_variable('w', shape=(), initializer=v1.constant_initializer(-1.))
        lr = v1.get_variable('lr', initializer=-1.)
        session.run(v1.global_variables_initializer())
        saver = spt.CheckpointSaver([w, lr], str(tmp_path / 'checkpoint'))
        with pytest.raises(UntrustedCheckpointError, match=re.escape('`trust_pickle=True`')):
            saver.restore(path)
        with pytest.raises(UntrustedCheckpointError):
            saver.restore_latest()
        assert not marker.exists()
        assert session.run([w, lr]) == [-1., -1.]
        objects = saver.restore(path, trust_pickle=True)
        assert marker.exists()
        saved = tf.train.load_checkpoint(os.path.join(path, 'variables'))
        assert session.run([w, lr]) == [saved.get_tensor('w'), saved.get_tensor('lr')]
        assert session.run(w) != -1.
        assert sorted(objects) == ['$$train_loop', 'recorder']


def test_warm_start_neither_runs_nor_skips_an_untrusted_legacy_checkpoint(tmp_path,
                                                                          monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    marker = legacy_run(tmp_path)
    with new_graph() as session:
        target = v1.get_variable('w', shape=(), initializer=v1.constant_initializer(-1.))
        session.run(v1.global_variables_initializer())
        with pytest.raises(UntrustedCheckpointError, match=re.escape(f'{TRUST_ENV}=1')):
            spt.warm_start(str(tmp_path), [target], print_func=None)
        assert not marker.exists()
        assert session.run(target) == -1.
        report = spt.warm_start(str(tmp_path), [target], print_func=None, trust_pickle=True)
        saved = tf.train.load_checkpoint(
            str(tmp_path / 'checkpoint' / 'checkpoint.dat-20' / 'variables'))
        assert report.restored == ['w'] and session.run(target) == saved.get_tensor('w')
        assert marker.exists()
