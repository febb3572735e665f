"""Checkpoints and resume with TF1-style graph code.

In graph mode a checkpoint holds every global variable of the graph as the
list stands when the loop is entered (optimizer slots included), plus the
registered objects and the loop's state.  Each "run" below builds its own
graph and session, the way a new process would.
"""

import contextlib
import json
import os
import re
import warnings

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet import EventKeys
from tests.helpers import checkpoint_index as index
from tests.helpers import checkpoint_listing as listing
from tests.helpers import checkpoint_path as ckpt_path
from tests.helpers import checkpoint_variable_names as saved_names

v1 = tf.compat.v1

SKIPPED = 'Skipping a checkpoint that cannot be read: '
NOT_RESTORED = ('Early-stopping variables are not restored, because an error or an '
                'interruption has occurred.')
VALID = {1: 0.5, 2: 0.25, 3: 0.375, 4: 0.3125, 5: 0.625}


class Tally(spt.CheckpointSavableObject):
    def __init__(self):
        self.seen = []
        self.fail = False

    def get_state(self):
        if self.fail:
            raise RuntimeError('cannot get the state')
        return {'seen': list(self.seen)}

    def set_state(self, state):
        self.seen = list(state['seen'])


class Net:
    """``w`` gains 1 per step; ``u`` is trained by Adam (slot variables too)."""

    def __init__(self, session, w_shape=()):
        self.session = session
        self.w = v1.get_variable('w', shape=w_shape, initializer=v1.zeros_initializer())
        self.u = v1.get_variable('u', shape=[3], initializer=v1.constant_initializer(1.))
        self.x = v1.placeholder(tf.float32, [3], name='x')
        loss = tf.reduce_sum(tf.square(self.u - self.x))
        with v1.variable_scope('train'):
            adam = v1.train.AdamOptimizer(0.1).minimize(loss, var_list=[self.u])
        self.train_op = tf.group(adam, v1.assign_add(self.w, tf.ones_like(self.w)))
        session.run(v1.global_variables_initializer())

    def step(self, step):
        self.session.run(self.train_op, feed_dict={self.x: [step, -step, 0.5 * step]})

    def w_value(self):
        return self.session.run(self.w)

    def all_values(self):
        """``{name: value}`` of every global variable."""
        gvars = v1.global_variables()
        return dict(zip([v.name for v in gvars], self.session.run(gvars)))


@contextlib.contextmanager
def new_graph():
    graph = tf.Graph()
    with graph.as_default(), v1.Session(graph=graph) as session:
        yield session


def new_loop(root, net, tally, lines, **kwargs):
    options = dict(max_epoch=3, checkpoint_dir=str(root), checkpoint_epoch_freq=1,
                   checkpoint_save_objects={'tally': tally}, print_func=lines.append)
    options.update(kwargs)
    return spt.TrainLoop([net.w], **options)


def run(loop, net, tally, steps_per_epoch=2, stop_at=None):
    epochs = []
    with loop:
        for epoch in loop.iter_epochs():
            epochs.append(epoch)
            for step, _ in loop.iter_steps(range(steps_per_epoch)):
                if step == stop_at:
                    raise KeyboardInterrupt()
                net.step(step)
                tally.seen.append(step)
            loop.collect_metrics(valid_loss=VALID.get(epoch, 1.))
    return epochs


def run_once(root, max_epoch=3, **kwargs):
    """A complete first run in its own graph."""
    with new_graph() as session:
        net, tally = Net(session), Tally()
        run(new_loop(root, net, tally, [], max_epoch=max_epoch, **kwargs), net, tally)


# ------------------------------------------------------------ CheckpointSaver
def test_saver_save_mutate_restore(session, tmp_path):
    a = v1.get_variable('a', initializer=[1., 2.])
    b = v1.get_variable('parent/b', initializer=3)
    value = v1.placeholder(tf.float32, [2])
    assign = tf.group(v1.assign(a, value), v1.assign(b, tf.cast(value[0], tf.int32)))
    session.run(v1.global_variables_initializer())
    tally = Tally()
    tally.seen = [1]
    saver = spt.CheckpointSaver([a, b], str(tmp_path), objects={'tally': tally})
    path1 = saver.save(1)
    assert path1 == os.path.join(str(tmp_path), 'checkpoint.dat-1')
    assert saved_names(path1) == ['a', 'parent/b']

    session.run(assign, feed_dict={value: [10., 20.]})
    tally.seen = [1, 2]
    path2 = saver.save(2)
    session.run(assign, feed_dict={value: [-1., -1.]})
    tally.seen = []

    assert saver.restore(path1) == {'tally': {'seen': [1]}}
    a_value, b_value = session.run([a, b])
    np.testing.assert_array_equal(a_value, [1., 2.])
    assert b_value == 3 and tally.seen == [1]

    other = spt.CheckpointSaver([a, b], str(tmp_path), objects={'tally': tally})
    assert other.latest_checkpoint() == path2
    assert other.restore_latest()[0] == path2
    a_value, b_value = session.run([a, b])
    np.testing.assert_array_equal(a_value, [10., 20.])
    assert b_value == 10 and tally.seen == [1, 2]


# ------------------------------------------------------------------ resume
def test_resume_restores_all_global_variables_objects_and_the_best(tmp_path):
    root = tmp_path / 'run'
    at_epoch_end = {}
    with new_graph() as session:
        net, tally = Net(session), Tally()
        loop = new_loop(root, net, tally, [], max_epoch=5, early_stopping=True)
        # created after the loop, before entering it: saved too
        late = v1.get_variable('late', initializer=7.)
        session.run(late.initializer)
        # registered before entering: runs after the loop's own saving handler
        loop.events.on(EventKeys.AFTER_EPOCH,
                       lambda lp: at_epoch_end.__setitem__(lp.epoch, net.all_values()))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            with pytest.raises(KeyboardInterrupt):
                with loop:
                    # too late to be saved
                    session.run(v1.get_variable('after_enter', initializer=1.).initializer)
                    for epoch in loop.iter_epochs():
                        for step, _ in loop.iter_steps(range(2)):
                            if step == 7:
                                raise KeyboardInterrupt()
                            net.step(step)
                            tally.seen.append(step)
                        loop.collect_metrics(valid_loss=VALID[epoch])
    assert not [w for w in caught if NOT_RESTORED in str(w.message)]   # printed only
    assert index(root) == ['checkpoint.dat-2', 'checkpoint.dat-4', 'checkpoint.dat-6']
    names = saved_names(ckpt_path(root, 6))
    assert 'late' in names and 'after_enter' not in names
    assert {'w', 'u', 'train/beta1_power', 'train/beta2_power', 'train/u/Adam',
            'train/u/Adam_1'} <= set(names)

    lines = []
    with new_graph() as session:
        net, tally = Net(session), Tally()
        late = v1.get_variable('late', initializer=0.)
        session.run([late.initializer, v1.assign(net.w, -100.)])
        loop = new_loop(root, net, tally, lines, max_epoch=5, early_stopping=True)
        epochs = []
        with loop:
            assert lines == [f'Resume training: epoch 3, step 6, from checkpoint '
                             f'{ckpt_path(root, 6)}']
            assert (loop.epoch, loop.step, loop.best_valid_metric) == (3, 6, 0.25)
            assert tally.seen == [1, 2, 3, 4, 5, 6]
            values = net.all_values()
            assert at_epoch_end[3].pop('after_enter:0') == 1.
            assert sorted(values) == sorted(at_epoch_end[3])
            for name, value in at_epoch_end[3].items():
                np.testing.assert_array_equal(values[name], value, err_msg=name)
            assert values['w:0'] == 6. and values['late:0'] == 7.
            for epoch in loop.iter_epochs():
                epochs.append(epoch)
                for step, _ in loop.iter_steps(range(2)):
                    net.step(step)
                    tally.seen.append(step)
                loop.collect_metrics(valid_loss=VALID[epoch])
            assert net.w_value() == 10.
        assert epochs == [4, 5]
        # the best of run 1 (0.25 after epoch 2, step 4) comes back at the end of run 2
        assert net.w_value() == 4.
    assert lines[1:] == ['Restore early-stopping parameters: from step 4, where valid_loss = 0.25']


def test_restore_checkpoint_false_starts_afresh_but_still_saves(tmp_path):
    run_once(tmp_path)
    lines = []
    with new_graph() as session:
        net, tally = Net(session), Tally()
        loop = new_loop(tmp_path, net, tally, lines, max_epoch=1, restore_checkpoint=False)
        assert run(loop, net, tally) == [1]
        assert net.w_value() == 2. and tally.seen == [1, 2]
    assert lines == []
    assert index(tmp_path) == ['checkpoint.dat-4', 'checkpoint.dat-6', 'checkpoint.dat-2']
    assert tf.train.load_variable(os.path.join(ckpt_path(tmp_path, 2), 'variables'), 'u')[0] \
        != 1.   # it holds the trained values of the new run


def test_restore_checkpoint_from_an_older_path(tmp_path):
    run_once(tmp_path, early_stopping=True)
    lines = []
    with new_graph() as session:
        net, tally = Net(session), Tally()
        loop = new_loop(tmp_path, net, tally, lines, max_epoch=3, early_stopping=True,
                        restore_checkpoint=ckpt_path(tmp_path, 2))
        with loop:
            assert (loop.epoch, loop.step, loop.best_valid_metric) == (1, 2, 0.5)
            assert net.w_value() == 2. and tally.seen == [1, 2]
        assert lines == [f'Resume training: epoch 1, step 2, from checkpoint '
                         f'{ckpt_path(tmp_path, 2)}',
                         'Restore early-stopping parameters: from step 2, where valid_loss = 0.5']


def test_max_to_keep_and_epoch_freq(tmp_path):
    run_once(tmp_path, max_epoch=4, checkpoint_max_to_keep=2)
    assert listing(tmp_path) == ['checkpoint.dat-6', 'checkpoint.dat-8', 'checkpoint_index.json']
    run_once(tmp_path / 'freq', max_epoch=8, checkpoint_epoch_freq=2)
    assert index(tmp_path / 'freq') == [f'checkpoint.dat-{s}' for s in (4, 8, 12, 16)]


def test_step_freq_and_secs(tmp_path, fake_clock):
    run_once(tmp_path / 'steps', max_epoch=2, checkpoint_epoch_freq=None, checkpoint_step_freq=3)
    # step 3, then the final state when the loop is left
    assert index(tmp_path / 'steps') == ['checkpoint.dat-3', 'checkpoint.dat-4']

    with new_graph() as session:
        net = Net(session)
        loop = new_loop(tmp_path / 'secs', net, Tally(), [], max_epoch=2,
                        checkpoint_epoch_freq=None, checkpoint_secs=5, clock=fake_clock)
        with loop:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(3)):
                    net.step(step)
                    fake_clock.advance(2.)   # 2, 4, 6 (save), 2, 4, 6 (save)
    assert index(tmp_path / 'secs') == ['checkpoint.dat-3', 'checkpoint.dat-6']


def test_make_checkpoint_returns_the_path(tmp_path):
    with new_graph() as session:
        net, tally = Net(session), Tally()
        with new_loop(tmp_path, net, tally, [], checkpoint_epoch_freq=None) as loop:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(2)):
                    net.step(step)
                    if step == 3:
                        path = loop.make_checkpoint()
    assert path == ckpt_path(tmp_path, 3)
    assert tf.train.load_variable(os.path.join(path, 'variables'), 'w') == 3.
    assert index(tmp_path) == ['checkpoint.dat-3', 'checkpoint.dat-6']   # and the final one


# ----------------------------------------------------------------- failures
def damage_truncate_data(path):
    for n in os.listdir(path):
        if n.startswith('variables.data-'):
            with open(os.path.join(path, n), 'r+b') as f:
                f.truncate(0)


def damage_corrupt_state(path):
    with open(os.path.join(path, 'state.npz'), 'wb') as f:
        f.write(b'garbage')


@pytest.mark.parametrize('damage', [damage_truncate_data, damage_corrupt_state],
                         ids=['truncate_data', 'corrupt_state'])
def test_damaged_newest_checkpoint_falls_back(tmp_path, damage):
    run_once(tmp_path, max_epoch=2)
    damage(ckpt_path(tmp_path, 4))
    lines = []
    with new_graph() as session:
        net, tally = Net(session), Tally()
        with pytest.warns(RuntimeWarning, match=re.escape(SKIPPED)):
            with new_loop(tmp_path, net, tally, lines) as loop:
                assert (loop.epoch, loop.step) == (1, 2)
        assert net.w_value() == 2. and tally.seen == [1, 2]
    assert lines == [f'Resume training: epoch 1, step 2, from checkpoint '
                     f'{ckpt_path(tmp_path, 2)}']


@pytest.mark.parametrize('w_shape,extra,problem', [
    ([2], False, "shapes differ: ['w: (2,) vs saved ()']"),
    ((), True, "missing from the checkpoint: ['extra']"),
], ids=['shape', 'missing'])
def test_checkpoint_of_other_variables_is_an_error(tmp_path, w_shape, extra, problem):
    run_once(tmp_path, max_epoch=1)
    with new_graph() as session:
        net = Net(session, w_shape=w_shape)
        if extra:
            session.run(v1.get_variable('extra', initializer=0.).initializer)
        loop = new_loop(tmp_path, net, Tally(), [])
        message = (f'The checkpoint {ckpt_path(tmp_path, 2)!r} does not match the '
                   f'variables: {problem}')
        with pytest.raises(ValueError, match=re.escape(message)):
            with loop:
                pass
        np.testing.assert_array_equal(net.w_value(), np.zeros(w_shape))


def test_leftover_temporaries_are_removed_on_enter(tmp_path):
    run_once(tmp_path, max_epoch=1)
    stale = tmp_path / 'checkpoint' / '.tmp-checkpoint.dat-4-00ff'
    stale.mkdir()
    (stale / 'state.npz').write_bytes(b'half')
    with new_graph() as session:
        net = Net(session)
        with new_loop(tmp_path, net, Tally(), []):
            assert listing(tmp_path) == ['checkpoint.dat-2', 'checkpoint_index.json']


def test_failed_save_leaves_the_previous_checkpoints(tmp_path):
    with new_graph() as session:
        net, tally = Net(session), Tally()
        loop = new_loop(tmp_path, net, tally, [], max_epoch=4)
        loop.events.on(EventKeys.BEFORE_EPOCH,
                       lambda lp: setattr(tally, 'fail', lp.epoch == 3))
        with pytest.raises(RuntimeError, match=re.escape('cannot get the state')):
            run(loop, net, tally)
    assert listing(tmp_path) == ['checkpoint.dat-2', 'checkpoint.dat-4', 'checkpoint_index.json']
    assert index(tmp_path) == ['checkpoint.dat-2', 'checkpoint.dat-4']
    lines = []
    with new_graph() as session:
        net, tally = Net(session), Tally()
        with new_loop(tmp_path, net, tally, lines):
            assert net.w_value() == 4. and tally.seen == [1, 2, 3, 4]
    assert lines == [f'Resume training: epoch 2, step 4, from checkpoint '
                     f'{ckpt_path(tmp_path, 4)}']
