"""Checkpoints and resume (API.md sections 4 and 7.7, as changed by our docs).

A checkpoint is the directory ``<checkpoint_dir>/checkpoint/checkpoint.dat-<step>/``
(``variables.*`` in TF's format plus ``state.npz``), listed oldest first in
``checkpoint_index.json``.  Each test saves, changes the values, restores
and compares; values are chosen so that every expected number is known by
hand (each step adds 1 to ``w``, a `Counter`).  The tests taking ``style``
run in both TF styles; a later run is built in `Style.new_run` (a new graph
and session in graph style, as a new process would).  What is graph-only is
in tests/graph/test_checkpoint_graph.py.
"""

import os
import re
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers import checkpoint_index as index
from tests.helpers import checkpoint_listing as listing
from tests.helpers import checkpoint_path as ckpt_path
from tests.helpers import checkpoint_variable as saved_value
from tests.helpers.loops import Counter, Tally, run_epochs

SKIPPED = 'Skipping a checkpoint that cannot be read: '
NOT_RESTORED = ('Early-stopping variables are not restored, because an error or an '
                'interruption has occurred.')
# the validation loss collected at the end of each epoch
VALID = {1: 0.5, 2: 0.2, 3: 0.4, 4: 0.3, 5: 0.6, 6: 0.7}


def new_loop(root, w, tally, lines, **kwargs):
    options = dict(max_epoch=3, checkpoint_dir=str(root), checkpoint_epoch_freq=1,
                   checkpoint_save_objects={'tally': tally}, print_func=lines.append)
    options.update(kwargs)
    return spt.TrainLoop([w.var], **options)


def run(loop, w, tally, steps_per_epoch=2, stop_at=None, valid=VALID, epochs=None):
    """Each step adds 1 to `w` and is recorded by `tally`; each epoch ends with
    ``valid_loss = valid[epoch]`` (1 if not given).  Returns the epochs run."""
    return run_epochs(loop, w.step, tally.record, steps_per_epoch=steps_per_epoch,
                      valid={e: valid.get(e, 1.) for e in range(1, 20)}, stop_at=stop_at,
                      epochs=epochs)


# ------------------------------------------------------------ CheckpointSaver
def test_saver_save_mutate_restore(style, tmp_path):
    a = style.variable([1., 2.], 'a')
    b = style.variable(3, 'parent/b', dtype='int32')
    tally = Tally()
    tally.seen = [1]
    save_dir = str(tmp_path / 'saves')
    saver = spt.CheckpointSaver([a, b], save_dir, objects={'tally': tally})
    assert saver.save_dir == save_dir
    assert saver.latest_checkpoint() is None
    assert not os.path.exists(save_dir)          # created on the first save

    path1 = saver.save(1)
    assert path1 == os.path.join(save_dir, 'checkpoint.dat-1')
    assert {'variables.index', 'state.npz'} <= set(os.listdir(path1))
    # list items are saved under their name without ':0'
    assert dict(tf.train.list_variables(os.path.join(path1, 'variables'))) == {
        'a': [2], 'parent/b': []}

    style.assign(a, [10., 20.])
    style.assign(b, 30)
    tally.seen = [1, 2]
    path2 = saver.save(2)
    style.assign(a, [-1., -1.])
    style.assign(b, -1)
    tally.seen = ['changed']

    states = saver.restore(path1)
    np.testing.assert_array_equal(style.value(a), [1., 2.])
    assert style.value(b) == 3
    assert tally.seen == [1]
    assert states == {'tally': {'seen': [1]}}

    # a fresh saver on the same directory sees both, newest last
    other = spt.CheckpointSaver([a, b], save_dir, objects={'tally': tally})
    assert other.latest_checkpoint() == path2
    assert other.checkpoints() == [path1, path2]
    assert other.restore_latest() == (path2, {'tally': {'seen': [1, 2]}})
    np.testing.assert_array_equal(style.value(a), [10., 20.])
    assert style.value(b) == 30
    assert tally.seen == [1, 2]


def test_saver_with_dict_keys_and_max_to_keep(tmp_path):
    v = tf.Variable(0., name='v')
    saver = spt.CheckpointSaver({'my/key': v}, str(tmp_path), max_to_keep=2)
    for step in (1, 2, 3):
        v.assign(float(step))
        saver.save(step)
    assert saver.checkpoints() == [os.path.join(str(tmp_path), 'checkpoint.dat-2'),
                                   os.path.join(str(tmp_path), 'checkpoint.dat-3')]
    assert sorted(os.listdir(tmp_path)) == ['checkpoint.dat-2', 'checkpoint.dat-3',
                                            'checkpoint_index.json']
    assert saved_value(os.path.join(str(tmp_path), 'checkpoint.dat-2'), 'my/key') == 2.


def test_saver_restore_latest_without_checkpoints(tmp_path):
    saver = spt.CheckpointSaver([tf.Variable(0.)], str(tmp_path / 'none'))
    assert saver.restore_latest(ignore_non_exist=True) is None
    with pytest.raises(OSError, match=re.escape('No checkpoint file is found')):
        saver.restore_latest()


def test_saver_missing_object_state(tmp_path):
    v = tf.Variable(0., name='v')
    path = spt.CheckpointSaver([v], str(tmp_path)).save(5)
    saver = spt.CheckpointSaver([v], str(tmp_path), objects={'tally': Tally()})
    with pytest.raises(KeyError, match=re.escape(f"Objects ['tally'] not found in the "
                                                 f"checkpoint: {path}")):
        saver.restore(path)


# ------------------------------------------------------------------ resume
def test_resume_continues_counters_values_objects_and_the_best_snapshot(style, tmp_path):
    root = tmp_path / 'run'
    w, tally, lines = Counter(style), Tally(), []
    loop = new_loop(root, w, tally, lines, max_epoch=5, early_stopping=True)
    # run 1: saves after epochs 1-3 (steps 2, 4, 6), then is interrupted in step 7
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with pytest.raises(KeyboardInterrupt):
            run(loop, w, tally, stop_at=7)
    assert not [w for w in caught if NOT_RESTORED in str(w.message)]
    assert lines == [NOT_RESTORED]     # printed once: not warned too
    assert listing(root) == ['checkpoint.dat-2', 'checkpoint.dat-4', 'checkpoint.dat-6',
                             'checkpoint_index.json']
    assert index(root) == ['checkpoint.dat-2', 'checkpoint.dat-4', 'checkpoint.dat-6']

    # run 2: new objects, as in a new process
    with style.new_run():
        w2, tally2, lines2 = Counter(style, -100.), Tally(), []
        loop2 = new_loop(root, w2, tally2, lines2, max_epoch=5, early_stopping=True)
        epochs = []
        with loop2:
            assert lines2 == [f'Resume training: epoch 3, step 6, from checkpoint '
                              f'{ckpt_path(root, 6)}']
            assert (loop2.epoch, loop2.step) == (3, 6)
            assert w2.value() == 6.
            assert tally2.seen == [1, 2, 3, 4, 5, 6]
            assert loop2.best_valid_metric == 0.2
            for epoch in loop2.iter_epochs():
                epochs.append(epoch)
                for step, _ in loop2.iter_steps(range(2)):
                    w2.step()
                    tally2.seen.append(step)
                loop2.collect_metrics(valid_loss=VALID[epoch])   # 0.3, 0.6: no new best
            assert w2.value() == 10.
        assert epochs == [4, 5]
        assert tally2.seen == list(range(1, 11))
        # the best of run 1 (step 4, w = 4) is restored at the end of run 2
        assert w2.value() == 4.
    assert lines2[1:] == ['Restore early-stopping parameters: from step 4, where valid_loss = 0.2']
    assert index(root) == [f'checkpoint.dat-{s}' for s in (2, 4, 6, 8, 10)]


def test_resumed_patience_count(style, tmp_path):
    root = tmp_path / 'run'
    w, tally, lines = Counter(style), Tally(), []
    run(new_loop(root, w, tally, lines, early_stopping=True, early_stopping_patience=2),
        w, tally)
    # epoch 3 (0.4) was one validation without improvement on 0.2
    with style.new_run():
        w2, tally2, lines2 = Counter(style), Tally(), []
        loop = new_loop(root, w2, tally2, lines2, max_epoch=6, early_stopping=True,
                        early_stopping_patience=2)
        assert run(loop, w2, tally2) == [4]   # epoch 4 (0.3) is the second one
        assert w2.value() == 4.
    reason = '`valid_loss` has not improved for 2 validations (patience 2)'
    assert lines2 == [
        f'Resume training: epoch 3, step 6, from checkpoint {ckpt_path(root, 6)}',
        f'Training stopped at epoch 4, step 8: {reason}',
        'Restore early-stopping parameters: from step 4, where valid_loss = 0.2',
    ]
    assert loop.stop_reason == reason


def test_restore_checkpoint_false_starts_afresh_but_still_saves(style, tmp_path):
    root = tmp_path / 'run'
    w, tally = Counter(style), Tally()
    run(new_loop(root, w, tally, []), w, tally)
    assert index(root) == ['checkpoint.dat-2', 'checkpoint.dat-4', 'checkpoint.dat-6']

    with style.new_run():
        w2, tally2, lines2 = Counter(style, 100.), Tally(), []
        loop = new_loop(root, w2, tally2, lines2, max_epoch=1, restore_checkpoint=False)
        with loop:
            assert (loop.epoch, loop.step) == (0, 0)
            assert w2.value() == 100. and tally2.seen == []
            assert loop.best_valid_metric is None
        run(new_loop(root, w2, tally2, lines2, max_epoch=1, restore_checkpoint=False), w2,
            tally2)
        assert lines2 == []
        assert (w2.value(), tally2.seen) == (102., [1, 2])
    # its checkpoint after epoch 1 replaced the old step-2 one and is the newest
    assert saved_value(ckpt_path(root, 2), 'w') == 102.
    assert index(root) == ['checkpoint.dat-4', 'checkpoint.dat-6', 'checkpoint.dat-2']
    with style.new_run():
        w3, tally3, lines3 = Counter(style), Tally(), []
        with new_loop(root, w3, tally3, lines3):
            pass
        assert lines3 == [f'Resume training: epoch 1, step 2, from checkpoint '
                          f'{ckpt_path(root, 2)}']
        assert (w3.value(), tally3.seen) == (102., [1, 2])


def test_restore_checkpoint_from_an_older_path_with_early_stopping(style, tmp_path):
    root = tmp_path / 'run'
    w, tally = Counter(style), Tally()
    run(new_loop(root, w, tally, [], early_stopping=True), w, tally)

    with style.new_run():
        w2, tally2, lines2 = Counter(style), Tally(), []
        loop = new_loop(root, w2, tally2, lines2, early_stopping=True,
                        restore_checkpoint=ckpt_path(root, 2))
        epochs = []
        with loop:
            assert lines2 == [f'Resume training: epoch 1, step 2, from checkpoint '
                              f'{ckpt_path(root, 2)}']
            assert (w2.value(), tally2.seen) == (2., [1, 2])
            assert loop.best_valid_metric == 0.5
            for epoch in loop.iter_epochs():
                epochs.append(epoch)
                for step, _ in loop.iter_steps(range(2)):
                    w2.step()
                    tally2.seen.append(step)
                loop.collect_metrics(valid_loss={2: 0.45, 3: 0.1}[epoch])
        assert epochs == [2, 3]
        assert w2.value() == 6.       # best 0.1 at step 6
    assert lines2[1:] == ['Restore early-stopping parameters: from step 6, where valid_loss = 0.1']
    assert saved_value(ckpt_path(root, 4), 'w') == 4.
    assert index(root) == ['checkpoint.dat-2', 'checkpoint.dat-4', 'checkpoint.dat-6']


# ---------------------------------------------------------------- schedules
def test_checkpoint_epoch_freq(style, tmp_path):
    w, tally = Counter(style), Tally()
    run(new_loop(tmp_path, w, tally, [], max_epoch=8, checkpoint_epoch_freq=2), w, tally)
    assert index(tmp_path) == [f'checkpoint.dat-{s}' for s in (4, 8, 12, 16)]
    assert [saved_value(ckpt_path(tmp_path, s), 'w') for s in (4, 8, 12, 16)] == [4, 8, 12, 16]


def test_checkpoint_max_to_keep_keeps_the_newest(style, tmp_path):
    w, tally = Counter(style), Tally()
    run(new_loop(tmp_path, w, tally, [], max_epoch=4, checkpoint_max_to_keep=2), w, tally)
    assert listing(tmp_path) == ['checkpoint.dat-6', 'checkpoint.dat-8', 'checkpoint_index.json']
    assert index(tmp_path) == ['checkpoint.dat-6', 'checkpoint.dat-8']
    # a resumed run counts the checkpoints of the earlier one
    lines = []
    run(new_loop(tmp_path, w, tally, lines, max_epoch=5, checkpoint_max_to_keep=2), w, tally)
    assert lines == [f'Resume training: epoch 4, step 8, from checkpoint '
                     f'{ckpt_path(tmp_path, 8)}']
    assert listing(tmp_path) == ['checkpoint.dat-10', 'checkpoint.dat-8',
                                 'checkpoint_index.json']
    assert index(tmp_path) == ['checkpoint.dat-8', 'checkpoint.dat-10']


def test_checkpoint_step_freq_and_resume_inside_an_epoch(style, tmp_path):
    w, tally = Counter(style), Tally()
    loop = new_loop(tmp_path, w, tally, [], checkpoint_epoch_freq=None, checkpoint_step_freq=1)
    with pytest.raises(KeyboardInterrupt):
        run(loop, w, tally, steps_per_epoch=4, stop_at=4)
    assert index(tmp_path) == ['checkpoint.dat-1', 'checkpoint.dat-2', 'checkpoint.dat-3']

    # the resumed run continues epoch 1 after the 3 batches it had consumed
    with style.new_run():
        w2, tally2, lines = Counter(style), Tally(), []
        loop = new_loop(tmp_path, w2, tally2, lines, max_epoch=2, checkpoint_epoch_freq=None,
                        checkpoint_step_freq=3)
        seen = []
        with loop:
            assert (loop.epoch, loop.step) == (1, 3)
            for epoch in loop.iter_epochs():
                for step, batch in loop.iter_steps(['a', 'b', 'c', 'd']):
                    seen.append((epoch, step, batch))
                    w2.step()
        assert w2.value() == 3. + 5.
    assert lines == [f'Resume training: epoch 1, step 3, from checkpoint '
                     f'{ckpt_path(tmp_path, 3)}']
    assert seen == [(1, 4, 'd'), (2, 5, 'a'), (2, 6, 'b'), (2, 7, 'c'), (2, 8, 'd')]
    assert tally2.seen == [1, 2, 3]
    assert index(tmp_path)[-1] == 'checkpoint.dat-8'   # the final state, saved at exit
    assert saved_value(ckpt_path(tmp_path, 6), 'w') == 6.


def test_checkpoint_step_freq_with_epoch_freq(style, tmp_path):
    w, tally = Counter(style), Tally()
    run(new_loop(tmp_path, w, tally, [], max_epoch=2, checkpoint_step_freq=3), w, tally,
        steps_per_epoch=4)
    assert index(tmp_path) == [f'checkpoint.dat-{s}' for s in (3, 4, 6, 8)]


def test_checkpoint_secs_with_a_fake_clock(style, tmp_path, fake_clock):
    w, tally = Counter(style), Tally()
    loop = new_loop(tmp_path, w, tally, [], max_epoch=2, checkpoint_epoch_freq=None,
                    checkpoint_secs=10, clock=fake_clock)
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(4)):
                fake_clock.advance(3.)     # steps end at +3, +6, +9, +12, ...
                w.step()
    # 12 s after entering (step 4) and 12 s after that save (step 8)
    assert index(tmp_path) == ['checkpoint.dat-4', 'checkpoint.dat-8']


def test_make_checkpoint_resets_the_checkpoint_secs_timer(style, tmp_path, fake_clock):
    w, tally = Counter(style), Tally()
    loop = new_loop(tmp_path, w, tally, [], max_epoch=1, checkpoint_epoch_freq=None,
                    checkpoint_secs=10, clock=fake_clock)
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(6)):
                fake_clock.advance(4.)
                w.step()
                if step == 2:
                    assert loop.make_checkpoint() == ckpt_path(tmp_path, 2)
    # saves at step 2 (make_checkpoint, t = 8) then at step 5 (t = 20), not at 3, and
    # the final state when the loop is left
    assert index(tmp_path) == ['checkpoint.dat-2', 'checkpoint.dat-5', 'checkpoint.dat-6']


def test_make_checkpoint_returns_the_path(style, tmp_path):
    w, tally = Counter(style, 5.), Tally()
    loop = new_loop(tmp_path, w, tally, [], checkpoint_epoch_freq=None)
    with loop:
        # before any epoch: at step 0
        path0 = loop.make_checkpoint()
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(2)):
                w.step()
                tally.seen.append(step)
                if step == 3:
                    path3 = loop.make_checkpoint()
    assert path0 == ckpt_path(tmp_path, 0)
    assert path3 == ckpt_path(tmp_path, 3)
    assert os.path.isdir(path3)
    assert saved_value(path0, 'w') == 5. and saved_value(path3, 'w') == 8.
    assert index(tmp_path) == ['checkpoint.dat-0', 'checkpoint.dat-3', 'checkpoint.dat-6']
    with style.new_run():
        w2, tally2, lines = Counter(style), Tally(), []
        with new_loop(tmp_path, w2, tally2, lines, restore_checkpoint=path3) as loop2:
            assert (loop2.epoch, loop2.step) == (2, 3)
        assert (w2.value(), tally2.seen) == (8., [1, 2, 3])


# ------------------------------------------------------------- Keras objects
def test_keras_model_with_dropout_and_optimizer(tmp_path):
    keras.utils.set_random_seed(3)
    model = keras.Sequential([keras.Input((4,)),
                              keras.layers.Dense(8, name='d1'),
                              keras.layers.Dropout(0.5, name='drop'),
                              keras.layers.Dense(1, name='d2')], name='net')
    opt = keras.optimizers.Adam(0.01, name='adam')
    opt.build(model.trainable_variables)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(16, 4)).astype(np.float32)
    y = rng.normal(size=(16, 1)).astype(np.float32)

    @tf.function
    def train_step(bx, by):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean((model(bx, training=True) - by) ** 2)
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    def snapshot():
        return ([np.array(v.numpy()) for v in model.variables],
                [np.array(v.numpy()) for v in opt.variables])

    seed_state = [v for v in model.variables if 'seed_generator' in v.path]
    assert len(seed_state) == 1
    initial_seed = np.array(seed_state[0].numpy())
    objects = {'model': model, 'opt': opt}
    with spt.TrainLoop(model.trainable_variables, max_epoch=2, checkpoint_dir=str(tmp_path),
                       checkpoint_epoch_freq=1, checkpoint_save_objects=objects,
                       print_func=lambda s: None) as loop:
        for _ in loop.iter_epochs():
            for _, (bx, by) in loop.iter_steps([(x[:8], y[:8]), (x[8:], y[8:])]):
                loop.collect_metrics(loss=train_step(bx, by))
    model_values, opt_values = snapshot()
    assert int(opt.iterations.numpy()) == 4
    # the dropout's random state moved: it is worth checking that it comes back
    assert not np.array_equal(seed_state[0].numpy(), initial_seed)

    for v in model.variables + opt.variables:
        v.assign(tf.zeros(v.shape, v.dtype))
    lines = []
    with spt.TrainLoop(model.trainable_variables, max_epoch=2, checkpoint_dir=str(tmp_path),
                       checkpoint_save_objects=objects, print_func=lines.append):
        pass
    assert lines == [f'Resume training: epoch 2, step 4, from checkpoint '
                     f'{ckpt_path(tmp_path, 4)}']
    restored_model, restored_opt = snapshot()
    assert len(restored_model) == 5 and len(restored_opt) == 10
    for want, got in zip(model_values + opt_values, restored_model + restored_opt):
        np.testing.assert_array_equal(got, want)



def test_keras_model_rebuilt_in_the_same_process_resumes(tmp_path):
    # Keras names a second model's layers `dense_1`, `seed_generator_1`...: a
    # notebook that rebuilds its model before resuming must still match.
    def build():
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4),
                                  keras.layers.Dropout(0.5), keras.layers.Dense(1)])
        opt = keras.optimizers.SGD(0.1)
        opt.build(model.trainable_variables)
        return model, opt

    model, opt = build()
    for i, v in enumerate(model.variables):
        v.assign(tf.fill(v.shape, tf.cast(i + 1, v.dtype)))
    with spt.TrainLoop(model.trainable_variables, checkpoint_dir=str(tmp_path),
                       checkpoint_save_objects={'model': model, 'opt': opt}) as loop:
        loop.make_checkpoint()
    saved = [np.array(v.numpy()) for v in model.variables]

    model2, opt2 = build()
    assert [v.path for v in model2.variables] != [v.path for v in model.variables]
    with spt.TrainLoop(model2.trainable_variables, checkpoint_dir=str(tmp_path),
                       checkpoint_save_objects={'model': model2, 'opt': opt2},
                       print_func=lambda s: None):
        pass
    for want, v in zip(saved, model2.variables):
        np.testing.assert_array_equal(v.numpy(), want)


def test_tf_module_and_single_variable_objects(tmp_path):
    class Scale(tf.Module):
        def __init__(self):
            super().__init__(name='scale')
            self.factor = tf.Variable(2., name='factor')

    module, extra = Scale(), tf.Variable([1, 2], name='extra')
    w = tf.Variable(0., name='w')
    stray = tf.Variable(9., name='stray')    # registered nowhere: not saved
    objects = {'module': module, 'extra': extra}
    with spt.TrainLoop([w], checkpoint_dir=str(tmp_path),
                       checkpoint_save_objects=objects) as loop:
        path = loop.make_checkpoint()
    module.factor.assign(-1.)
    extra.assign([0, 0])
    with spt.TrainLoop([w], checkpoint_dir=str(tmp_path), checkpoint_save_objects=objects,
                       print_func=lambda s: None):
        assert module.factor.numpy() == 2.
        np.testing.assert_array_equal(extra.numpy(), [1, 2])
    assert saved_value(path, 'extra').tolist() == [1, 2]
    # a container's variables are keyed by position: Keras names are not stable
    assert sorted(n for n, _ in tf.train.list_variables(os.path.join(path, 'variables'))) == [
        'extra', 'module/0', 'w']
    assert stray.numpy() == 9.


# ----------------------------------------------------------------- failures
def damage_truncate_data(path):
    (data,) = [n for n in os.listdir(path) if n.startswith('variables.data-')]
    with open(os.path.join(path, data), 'r+b') as f:
        f.truncate(0)


def damage_remove_data(path):
    for n in os.listdir(path):
        if n.startswith('variables.data-'):
            os.remove(os.path.join(path, n))


def damage_remove_index(path):
    os.remove(os.path.join(path, 'variables.index'))


def damage_corrupt_state(path):
    with open(os.path.join(path, 'state.npz'), 'wb') as f:
        f.write(b'PK\x03\x04not a zip')


def damage_truncate_state(path):
    with open(os.path.join(path, 'state.npz'), 'r+b') as f:
        f.truncate(10)


def damage_remove_state(path):
    os.remove(os.path.join(path, 'state.npz'))


@pytest.mark.parametrize('damage', [
    damage_truncate_data, damage_remove_data, damage_remove_index, damage_corrupt_state,
    damage_truncate_state, damage_remove_state,
], ids=lambda f: f.__name__[len('damage_'):])
def test_damaged_newest_checkpoint_falls_back_to_the_previous_one(style, tmp_path, damage):
    w, tally = Counter(style), Tally()
    run(new_loop(tmp_path, w, tally, [], max_epoch=2), w, tally)
    damage(ckpt_path(tmp_path, 4))

    with style.new_run(), pytest.warns(RuntimeWarning, match=re.escape(SKIPPED)) as record:
        w2, tally2, lines = Counter(style), Tally(), []
        with new_loop(tmp_path, w2, tally2, lines) as loop:
            assert (loop.epoch, loop.step) == (1, 2)
        w2_value = w2.value()
    messages = [str(r.message) for r in record if str(r.message).startswith(SKIPPED)]
    assert len(messages) == 1 and ckpt_path(tmp_path, 4) in messages[0]
    assert lines == [f'Resume training: epoch 1, step 2, from checkpoint '
                     f'{ckpt_path(tmp_path, 2)}']
    assert (w2_value, tally2.seen) == (2., [1, 2])


@pytest.mark.parametrize('make_vars,problem', [
    ([('w', [7., 7.]), ('v', 7.)], "shapes differ: ['w: (2,) vs saved ()']"),
    ([('w', 7.), ('v', 7.), ('new', 7.)], "missing from the checkpoint: ['new']"),
    ([('w', 7.)], "in the checkpoint but not among the variables to restore: ['v']"),
], ids=['shape', 'missing', 'unexpected'])
def test_checkpoint_of_other_variables_is_an_error(style, tmp_path, make_vars, problem):
    w, v = style.variable(1., 'w'), style.variable(2., 'v')
    with spt.TrainLoop([w, v], checkpoint_dir=str(tmp_path)) as loop:
        loop.make_checkpoint()
    with style.new_run():
        variables = [style.variable(value, name) for name, value in make_vars]
        loop = spt.TrainLoop(variables, max_epoch=1, checkpoint_dir=str(tmp_path))
        ran = []
        message = (f'The checkpoint {ckpt_path(tmp_path, 0)!r} does not match the variables: '
                   f'{problem}')
        with pytest.raises(ValueError, match=re.escape(message)):
            with loop:
                ran.append(True)
        assert ran == []
        for (_, value), var in zip(make_vars, variables):    # nothing was restored
            np.testing.assert_array_equal(style.value(var), value)


def test_leftover_temporaries_are_removed_on_enter(style, tmp_path):
    w, tally = Counter(style), Tally()
    run(new_loop(tmp_path, w, tally, [], max_epoch=1), w, tally)
    folder = tmp_path / 'checkpoint'
    # what a save killed half-way leaves: a temporary checkpoint and index
    stale = folder / '.tmp-checkpoint.dat-4-0123456789abcdef'
    stale.mkdir()
    (stale / 'variables.index').write_bytes(b'partial')
    (folder / '.tmp-0123456789abcdef.json').write_text('{"checkpoints": [')
    assert listing(tmp_path) == ['.tmp-0123456789abcdef.json',
                                 '.tmp-checkpoint.dat-4-0123456789abcdef',
                                 'checkpoint.dat-2', 'checkpoint_index.json']
    lines = []
    with new_loop(tmp_path, w, tally, lines):
        assert listing(tmp_path) == ['checkpoint.dat-2', 'checkpoint_index.json']
    assert lines[0] == f'Resume training: epoch 1, step 2, from checkpoint {ckpt_path(tmp_path, 2)}'


@pytest.mark.parametrize('fail,error,message', [
    ('raise', RuntimeError, 'cannot get the state'),
    ('not_plain', TypeError, "The checkpoint state of 'tally' is not plain data: "
                             "state['lock'] is a _thread.lock"),
])
def test_failed_save_leaves_the_previous_checkpoints(style, tmp_path, fail, error, message):
    w, tally = Counter(style), Tally()
    loop = new_loop(tmp_path, w, tally, [], max_epoch=5)
    loop.events.on(spt.EventKeys.BEFORE_EPOCH,
                   lambda lp: setattr(tally, 'fail', fail) if lp.epoch == 3 else None)
    with pytest.raises(error, match=re.escape(message)):
        run(loop, w, tally)
    assert (loop.epoch, loop.step) == (3, 6)
    assert listing(tmp_path) == ['checkpoint.dat-2', 'checkpoint.dat-4', 'checkpoint_index.json']
    assert index(tmp_path) == ['checkpoint.dat-2', 'checkpoint.dat-4']

    with style.new_run():
        w2, tally2, lines = Counter(style), Tally(), []
        with new_loop(tmp_path, w2, tally2, lines):
            pass
        assert (w2.value(), tally2.seen) == (4., [1, 2, 3, 4])
    assert lines == [f'Resume training: epoch 2, step 4, from checkpoint '
                     f'{ckpt_path(tmp_path, 4)}']


def test_lost_index_is_rebuilt_from_the_directories(style, tmp_path):
    w, tally = Counter(style), Tally()
    run(new_loop(tmp_path, w, tally, [], max_epoch=2), w, tally)
    os.remove(tmp_path / 'checkpoint' / 'checkpoint_index.json')
    with style.new_run():
        w2, lines = Counter(style), []
        with new_loop(tmp_path, w2, Tally(), lines):
            pass
        assert w2.value() == 4.
    assert lines == [f'Resume training: epoch 2, step 4, from checkpoint '
                     f'{ckpt_path(tmp_path, 4)}']
