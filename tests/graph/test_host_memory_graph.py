"""Host memory of early stopping and asynchronous checkpoints (issue 24), graph mode.

The twin of tests/scaffold/test_host_memory.py with ``tf.compat.v1``
variables: the snapshot and the buffers of asynchronous saves are allocated
once per loop (``HostBuffers.allocations``), large variables are fetched by
pieces, and every checkpoint holds the values of its step.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint.io import CHUNK_BYTES, HostBuffers
from tfsnippet.scaffold.checkpoint.state_format import read_state

v1 = tf.compat.v1

BIG = CHUNK_BYTES // 4 * 3 // 2 + 3
VALID = {1: 3., 2: 2., 3: 1., 4: 5.}
STEPS = 3


def _find(obj, key):
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for value in obj.values():
            found = _find(value, key)
            if found is not None:
                return found
    return None


class Model:
    def __init__(self, session):
        self.session = session
        zeros = v1.zeros_initializer()
        self.w = v1.get_variable('w', shape=[BIG], initializer=zeros)
        self.b = v1.get_variable('b', shape=[2], initializer=zeros)
        self.train_op = tf.group(v1.assign_add(self.w, tf.ones([BIG])),
                                 v1.assign_add(self.b, [1., 2.]))

    def run(self, **kwargs):
        loop = spt.TrainLoop([self.w, self.b], max_epoch=4, print_func=lambda s: None,
                             show_eta=False, **kwargs)
        self.session.run(v1.global_variables_initializer())
        with loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(STEPS)):
                    self.session.run(self.train_op)
                loop.collect_metrics(valid_loss=VALID[epoch])
        return loop


@pytest.mark.parametrize('features', ['early_stopping', 'async', 'both'])
def test_buffers_allocated_once_per_loop(session, tmp_path, features):
    model = Model(session)
    kwargs = {}
    if features in ('early_stopping', 'both'):
        kwargs['early_stopping'] = True
    if features in ('async', 'both'):
        kwargs.update(checkpoint_dir=str(tmp_path), checkpoint_step_freq=1,
                      checkpoint_async=True)
    before = HostBuffers.allocations
    model.run(**kwargs)
    assert HostBuffers.allocations - before == {'early_stopping': 2, 'async': 2, 'both': 4}[
        features]
    w, b = session.run([model.w, model.b])
    expected = 12. if features == 'async' else 9.
    assert np.all(w == expected)
    np.testing.assert_array_equal(b, [expected, 2 * expected])


def test_async_checkpoints_hold_the_state_of_their_step(session, tmp_path):
    model = Model(session)
    model.run(early_stopping=True, checkpoint_dir=str(tmp_path), checkpoint_step_freq=1,
              checkpoint_async=True)
    paths = spt.CheckpointStore(os.path.join(str(tmp_path), 'checkpoint')).checkpoints()
    assert paths
    for path in paths:
        step = int(path.rsplit('-', 1)[1])
        reader = tf.train.load_checkpoint(os.path.join(path, 'variables'))
        assert np.all(reader.get_tensor('w') == step)
        np.testing.assert_array_equal(reader.get_tensor('b'), [step, 2 * step])
        snapshot = _find(read_state(path), 'snapshot')
        best_step = max((e * STEPS for e in (1, 2, 3) if e * STEPS < step), default=None)
        if best_step is None:
            assert snapshot is None
        else:
            assert np.all(snapshot[0] == best_step)
            np.testing.assert_array_equal(snapshot[1], [best_step, 2 * best_step])


def test_copy_by_pieces_and_assign(session):
    w = v1.get_variable('w', shape=[BIG], initializer=v1.zeros_initializer())
    m = v1.get_variable('m', shape=[3, 2], initializer=v1.ones_initializer())
    fill = v1.assign(w, tf.range(BIG, dtype=tf.float32))
    buffers = HostBuffers()
    buffers.prepare([w, m])
    session.run(v1.global_variables_initializer())
    session.run(fill)
    copied = buffers.copy([w, m], session)
    np.testing.assert_array_equal(copied[0], np.arange(BIG, dtype=np.float32))
    np.testing.assert_array_equal(copied[1], np.ones([3, 2]))
    copied[0][:] = 5.
    HostBuffers.assign([w, m], copied, session)
    assert np.all(session.run(w) == 5.)
    assert buffers.copy([w, m], session)[0] is copied[0]
