"""Host memory of early stopping and asynchronous checkpoints (issue 24), eager.

The early-stopping snapshot and the buffers of asynchronous saves are host
buffers allocated once per loop (counted by ``HostBuffers.allocations``),
not once per improvement or per save; the checkpoints still hold the values
of their step, and the snapshot saved with them is the one of that moment.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint.io import CHUNK_BYTES, HostBuffers, freeze_state
from tfsnippet.scaffold.checkpoint.state_format import decode_state, encode_state, read_state

BIG = CHUNK_BYTES // 4 * 3 // 2 + 3   # float32 elements: more than one piece, not a multiple
VALID = {1: 3., 2: 2., 3: 1., 4: 5.}    # improves at epochs 1-3, not 4
STEPS = 3


def _find(obj, key):
    """The first value of `key` in nested dicts."""
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for value in obj.values():
            found = _find(value, key)
            if found is not None:
                return found
    return None


class Model:
    """``w`` (large) gains 1 and ``b`` gains [1, 2] per step."""

    def __init__(self):
        self.w = tf.Variable(tf.zeros([BIG]), name='w')
        self.b = tf.Variable(tf.zeros([2]), name='b')
        self.ones = tf.ones([BIG])

    def step(self):
        self.w.assign_add(self.ones)
        self.b.assign_add([1., 2.])

    def run(self, **kwargs):
        with spt.TrainLoop([self.w, self.b], max_epoch=4, print_func=lambda s: None,
                           show_eta=False, **kwargs) as loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(STEPS)):
                    self.step()
                loop.collect_metrics(valid_loss=VALID[epoch])
        return loop

    def values(self):
        return self.w.numpy(), self.b.numpy()


def _check_restored_best(model):
    w, b = model.values()
    assert w.shape == (BIG,) and np.all(w == 9.)      # the end of epoch 3, the best
    np.testing.assert_array_equal(b, [9., 18.])


@pytest.mark.parametrize('features', ['early_stopping', 'async', 'both'])
def test_buffers_allocated_once_per_loop(tmp_path, features):
    model = Model()
    kwargs = {}
    if features in ('early_stopping', 'both'):
        kwargs['early_stopping'] = True
    if features in ('async', 'both'):
        kwargs.update(checkpoint_dir=str(tmp_path), checkpoint_step_freq=1,
                      checkpoint_async=True)
    before = HostBuffers.allocations
    model.run(**kwargs)
    # one buffer per variable and feature: not per improvement (3) nor per save (12+)
    per_feature = {'early_stopping': 2, 'async': 2, 'both': 4}[features]
    assert HostBuffers.allocations - before == per_feature
    if features != 'async':
        _check_restored_best(model)
    else:
        w, b = model.values()
        assert np.all(w == 12.)


def test_async_checkpoints_hold_the_state_of_their_step(tmp_path):
    """The reused buffers and the lent snapshot: every checkpoint holds its step's values."""
    model = Model()
    model.run(early_stopping=True, checkpoint_dir=str(tmp_path), checkpoint_step_freq=1,
              checkpoint_async=True)
    _check_restored_best(model)
    store = spt.CheckpointStore(os.path.join(str(tmp_path), 'checkpoint'))
    paths = store.checkpoints()
    assert paths
    for path in paths:
        step = int(path.rsplit('-', 1)[1])
        prefix = os.path.join(path, 'variables')
        reader = tf.train.load_checkpoint(prefix)
        names = dict(tf.train.list_variables(prefix))
        w_key = next(k for k, shape in names.items() if shape == [BIG])
        assert np.all(reader.get_tensor(w_key) == step)
        state = read_state(path)
        snapshot = _find(state, 'snapshot')
        # a step save comes before the validation at the end of its epoch
        best_step = max((e * STEPS for e in (1, 2, 3) if e * STEPS < step), default=None)
        if best_step is None:
            assert snapshot is None
        else:
            assert np.all(snapshot[0] == best_step)
            np.testing.assert_array_equal(snapshot[1], [best_step, 2 * best_step])


def test_resume_adopts_the_saved_snapshot(tmp_path):
    """A resumed run keeps the snapshot it loads, restores it, and allocates nothing more
    for it than a fresh run."""
    model = Model()
    kwargs = dict(early_stopping=True, checkpoint_dir=str(tmp_path), checkpoint_step_freq=1)
    with pytest.raises(KeyboardInterrupt):
        with spt.TrainLoop([model.w, model.b], max_epoch=4, print_func=lambda s: None,
                           show_eta=False, **kwargs) as loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(STEPS)):
                    model.step()
                loop.collect_metrics(valid_loss=VALID[epoch])
                if epoch == 3:
                    raise KeyboardInterrupt()
    model2 = Model()
    before = HostBuffers.allocations
    model2.run(**kwargs)
    assert HostBuffers.allocations - before <= 2
    _check_restored_best(model2)


def test_freeze_state_lends_host_buffers_and_copies_the_rest():
    var = tf.Variable(tf.fill([BIG], 2.))
    buffers = HostBuffers()
    snapshot = buffers.copy([var])
    other = np.arange(3.)
    frozen = freeze_state(encode_state(1, {}, {'x': {'snapshot': snapshot, 'other': other}}))
    assert frozen.lent == 1              # the host buffer, not the other array
    other[:] = -1.                       # an ordinary array was copied at the freeze
    state = decode_state(frozen.encoded.to_bytes())['objects']['x']
    assert np.all(state['snapshot'][0] == 2.)
    np.testing.assert_array_equal(state['other'], [0., 1., 2.])
    frozen.release()
    assert frozen.lent == 0
    var.assign_add(tf.ones([BIG]))
    again = buffers.copy([var])           # given back: written in place, not reallocated
    assert again[0] is snapshot[0] and np.all(again[0] == 3.)


def test_assign_writes_in_place_by_pieces():
    var = tf.Variable(tf.zeros([BIG]))
    matrix = tf.Variable(tf.zeros([3, 2]))
    scalar = tf.Variable(0.)
    values = [np.arange(BIG, dtype=np.float32), np.ones([3, 2], np.float32),
              np.float32(7.)]
    HostBuffers.assign([var, matrix, scalar], values)
    np.testing.assert_array_equal(var.numpy(), values[0])
    np.testing.assert_array_equal(matrix.numpy(), values[1])
    assert scalar.numpy() == 7.
    with pytest.raises(ValueError, match='2 values given for 3 variables'):
        HostBuffers.assign([var, matrix, scalar], values[:2])
