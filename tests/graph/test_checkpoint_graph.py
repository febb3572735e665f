"""What a checkpoint holds with TF1-style graph code.

In graph mode a checkpoint holds every global variable of the graph as the
list stands when the loop is entered (optimizer slots included), not only
the variables given to the loop, plus the registered objects and the loop's
state.  Saving, resuming and their failures in both styles are in
tests/scaffold/test_checkpoint.py (the tests taking ``style``).
"""

import contextlib
import warnings

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet import EventKeys
from tests.helpers import checkpoint_index as index
from tests.helpers import checkpoint_path as ckpt_path
from tests.helpers import checkpoint_variable_names as saved_names
from tests.helpers.loops import Tally

v1 = tf.compat.v1

NOT_RESTORED = ('Early-stopping variables are not restored, because an error or an '
                'interruption has occurred.')
VALID = {1: 0.5, 2: 0.25, 3: 0.375, 4: 0.3125, 5: 0.625}


class Net:
    """``w`` gains 1 per step; ``u`` is trained by Adam (slot variables too)."""

    def __init__(self, session):
        self.session = session
        self.w = v1.get_variable('w', shape=(), initializer=v1.zeros_initializer())
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


def new_loop(root, net, tally, lines):
    return spt.TrainLoop([net.w], max_epoch=5, checkpoint_dir=str(root),
                         checkpoint_epoch_freq=1, checkpoint_save_objects={'tally': tally},
                         early_stopping=True, print_func=lines.append)


def test_resume_restores_all_global_variables_objects_and_the_best(tmp_path):
    root = tmp_path / 'run'
    at_epoch_end = {}
    with new_graph() as session:
        net, tally = Net(session), Tally()
        loop = new_loop(root, net, tally, [])
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
        loop = new_loop(root, net, tally, lines)
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
