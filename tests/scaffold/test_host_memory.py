"""Host memory of early stopping and asynchronous checkpoints (issue 24).

The tests taking ``style`` run in both TF styles (a `Model` of the style).

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
    """``w`` (large) gains 1 and ``b`` gains [1, 2] per step, in `style`'s way."""

    def __init__(self, style):
        self.style = style
        self.w = style.variable(np.zeros([BIG], np.float32), 'w')
        self.b = style.variable(np.zeros([2], np.float32), 'b')
        self.updates = [style.updater(self.w, np.ones([BIG], np.float32)),
                        style.updater(self.b, [1., 2.])]

    def step(self):
        for update in self.updates:
            update()

    def run(self, **kwargs):
        with spt.TrainLoop([self.w, self.b], max_epoch=4, print_func=lambda s: None,
                           show_eta=False, **kwargs) as loop:
            for epoch in loop.iter_epochs():
                for _ in loop.iter_steps(range(STEPS)):
                    self.step()
                loop.collect_metrics(valid_loss=VALID[epoch])
        return loop

    def values(self):
        return self.style.value(self.w), self.style.value(self.b)


def _check_restored_best(model):
    w, b = model.values()
    assert w.shape == (BIG,) and np.all(w == 9.)      # the end of epoch 3, the best
    np.testing.assert_array_equal(b, [9., 18.])


@pytest.mark.parametrize('features', ['early_stopping', 'async', 'both'])
def test_buffers_allocated_once_per_loop(style, tmp_path, features):
    model = Model(style)
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
        np.testing.assert_array_equal(b, [12., 24.])


def test_async_checkpoints_hold_the_state_of_their_step(style, tmp_path):
    """The reused buffers and the lent snapshot: every checkpoint holds its step's values."""
    model = Model(style)
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
        b_key = next(k for k, shape in names.items() if shape == [2])
        np.testing.assert_array_equal(reader.get_tensor(b_key), [step, 2 * step])
        state = read_state(path)
        snapshot = _find(state, 'snapshot')
        # a step save comes before the validation at the end of its epoch
        best_step = max((e * STEPS for e in (1, 2, 3) if e * STEPS < step), default=None)
        if best_step is None:
            assert snapshot is None
        else:
            assert np.all(snapshot[0] == best_step)
            np.testing.assert_array_equal(snapshot[1], [best_step, 2 * best_step])


def test_resume_adopts_the_saved_snapshot(style, tmp_path):
    """A resumed run keeps the snapshot it loads, restores it, and allocates nothing more
    for it than a fresh run."""
    model = Model(style)
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
    with style.new_run():
        model2 = Model(style)
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


def test_copy_and_assign_by_pieces(style):
    var = style.variable(np.arange(BIG, dtype=np.float32), 'w')
    matrix = style.variable(np.ones([3, 2], np.float32), 'm')
    scalar = style.variable(0., 's')
    variables = [var, matrix, scalar]
    buffers = HostBuffers()
    if style.is_graph:
        buffers.prepare(variables)        # the ops reading `var` by pieces
    copied = buffers.copy(variables, style.session)
    np.testing.assert_array_equal(copied[0], np.arange(BIG, dtype=np.float32))
    np.testing.assert_array_equal(copied[1], np.ones([3, 2]))
    assert copied[2] == 0.
    copied[0][:] = 5.
    values = [copied[0], np.full([3, 2], 2., np.float32), np.float32(7.)]
    HostBuffers.assign(variables, values, style.session)
    assert np.all(style.value(var) == 5.)
    np.testing.assert_array_equal(style.value(matrix), values[1])
    assert style.value(scalar) == 7.
    assert buffers.copy(variables, style.session)[0] is copied[0]   # written in place
    with pytest.raises(ValueError, match='2 values given for 3 variables'):
        HostBuffers.assign(variables, values[:2], style.session)