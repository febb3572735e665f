"""The best checkpoint beside the rolling ones, and the export of its weights (eager mode).

A "run" trains a one-layer Keras model whose kernel gains 1 per step (two
steps per epoch), and collects the validation loss of the table it is
given at the end of each epoch, so the kernel of the best epoch is known
by hand: ``2 * epoch``.  The tests taking ``style`` train a vector ``w``
(3 values) the same way in both TF styles (`run_vector`); the export is a
TF1 checkpoint directory in graph style.  The store-level tests (pinning, retention,
recovery, a kill at every point of a pin) need no TensorFlow.
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import keras
import numpy as np
import pytest

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint.store import INDEX_FILE, CheckpointStore
from tests.helpers import checkpoint_variable
from tests.helpers.loops import run_epochs
from tests.helpers.kill_points import KILL_POINTS, STUB_PACKAGES
from tests.scaffold.test_checkpoint_store import (LIMIT, REPO, check_clean, ckpt, index_of,
                                                  label_of, make_store, names_of, writer)

NAN = float('nan')
VALID = {1: 0.5, 2: 0.2, 3: 0.4, 4: 0.3, 5: NAN, 6: 0.7}


def new_model():
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1, use_bias=False)])
    model.layers[0].kernel.assign(np.zeros((2, 1), np.float32))
    return model


def kernel(model):
    return model.layers[0].kernel.numpy()


def run(root, valid, max_epoch, model=None, lines=None, **kwargs):
    """Train `model` (a new one by default) up to `max_epoch`; return it."""
    model = model if model is not None else new_model()
    kwargs.setdefault('checkpoint_save_objects', {'model': model})
    kwargs.setdefault('checkpoint_keep_best', True)
    with spt.TrainLoop(model.trainable_variables, max_epoch=max_epoch, checkpoint_dir=str(root),
                       print_func=(lines if lines is not None else []).append,
                       **kwargs) as loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                model.layers[0].kernel.assign_add(np.ones((2, 1), np.float32))
            if epoch in valid:
                loop.collect_metrics(valid_loss=valid[epoch])
    return model


def run_vector(style, root, valid, max_epoch, lines=None, checkpointer=None, **kwargs):
    """`run` with a vector ``w`` of `style` (3 zeros, each step adds 1) in a new run
    of the style; `checkpointer(w)` makes a component to add instead of the loop's
    own checkpoints.  Returns the final value of ``w`` and the component."""
    with style.new_run():
        w = style.variable(np.zeros(3), 'w')
        step = style.updater(w, np.ones(3))
        component = checkpointer([w]) if checkpointer is not None else None
        if component is None:
            kwargs.update(checkpoint_dir=str(root))
            kwargs.setdefault('checkpoint_keep_best', True)
        loop = spt.TrainLoop([w], max_epoch=max_epoch,
                             print_func=(lines if lines is not None else []).append, **kwargs)
        if component is not None:
            loop.add_component(component)
        run_epochs(loop, lambda s: step(), valid=valid)
        return style.value(w), component


def save_dir(root):
    return os.path.join(str(root), 'checkpoint')


def index(root):
    with open(os.path.join(save_dir(root), INDEX_FILE)) as f:
        return json.load(f)


def saved_kernel(path):
    """The kernel a checkpoint holds (the model's only variable: ``param_vars[0]``)."""
    return checkpoint_variable(path, 'variables/0')


# ------------------------------------------------------------ the loop
def test_the_best_is_kept_beyond_max_to_keep_and_recorded(style, tmp_path):
    run_vector(style, tmp_path, VALID, 6, checkpoint_epoch_freq=1, checkpoint_max_to_keep=2)
    # epoch 2 (step 4) is the best; NaN in epoch 5 never is
    assert index(tmp_path)['checkpoints'] == [ckpt(4), ckpt(10), ckpt(12)]
    assert index(tmp_path)['best'] == {'name': ckpt(4), 'metric': 'valid_loss', 'value': 0.2,
                                       'mode': 'min', 'epoch': 2, 'step': 4}
    path, record = CheckpointStore(save_dir(tmp_path)).best()
    assert path == os.path.join(save_dir(tmp_path), ckpt(4))
    assert record['value'] == 0.2 and record['epoch'] == 2
    np.testing.assert_array_equal(checkpoint_variable(path, 'w'), [4., 4., 4.])


@pytest.mark.parametrize('schedule', [{'checkpoint_epoch_freq': 1}, {}], ids=['epochs', 'none'])
def test_asynchronous_saves_pin_the_same_best(tmp_path, schedule):
    run(tmp_path / 'sync', VALID, 6, checkpoint_max_to_keep=2, **schedule)
    run(tmp_path / 'async', VALID, 6, checkpoint_max_to_keep=2, checkpoint_async=True,
        **schedule)
    assert index(tmp_path / 'async')['checkpoints'] == index(tmp_path / 'sync')['checkpoints']
    assert index(tmp_path / 'async')['best'] == index(tmp_path / 'sync')['best']
    path, record = CheckpointStore(save_dir(tmp_path / 'async')).best()
    np.testing.assert_array_equal(saved_kernel(path), np.full((2, 1), 2. * record['epoch']))


def test_without_a_schedule_an_improvement_saves_a_checkpoint(tmp_path):
    run(tmp_path, {1: 0.5, 2: 0.6, 3: 0.1}, 3, checkpoint_max_to_keep=1)
    # saved at the end of epochs 1 and 3 (improvements) and at the exit (step 6 = epoch 3's)
    assert index(tmp_path)['checkpoints'] == [ckpt(6)]
    assert index(tmp_path)['best']['name'] == ckpt(6)
    np.testing.assert_array_equal(saved_kernel(os.path.join(save_dir(tmp_path), ckpt(6))),
                                  np.full((2, 1), 6.))


def test_nan_is_never_the_best(style, tmp_path):
    run_vector(style, tmp_path, {1: NAN, 2: 0.9, 3: NAN}, 3, checkpoint_epoch_freq=1, checkpoint_max_to_keep=1)
    assert index(tmp_path)['checkpoints'] == [ckpt(4), ckpt(6)]
    assert index(tmp_path)['best']['value'] == 0.9


def test_a_resume_keeps_the_best_and_a_new_best_replaces_it(style, tmp_path):
    run_vector(style, tmp_path, VALID, 3, checkpoint_epoch_freq=1, checkpoint_max_to_keep=1)
    assert index(tmp_path)['checkpoints'] == [ckpt(4), ckpt(6)]
    lines = []
    # resumed: 0.3 in epoch 4 is worse than the pinned 0.2, so the best stays
    run_vector(style, tmp_path, VALID, 5, lines=lines, checkpoint_epoch_freq=1,
               checkpoint_max_to_keep=1)
    assert lines[0].startswith('Resume training: epoch 3, step 6, from checkpoint ')
    assert lines[0].endswith(ckpt(6))          # the newest, not the best
    assert index(tmp_path)['checkpoints'] == [ckpt(4), ckpt(10)]
    assert index(tmp_path)['best']['value'] == 0.2
    # a new best unpins the old one, which retention then removes
    run_vector(style, tmp_path, {6: 0.1}, 6, checkpoint_epoch_freq=1, checkpoint_max_to_keep=1)
    assert index(tmp_path)['checkpoints'] == [ckpt(12)]
    assert index(tmp_path)['best'] == {'name': ckpt(12), 'metric': 'valid_loss', 'value': 0.1,
                                       'mode': 'min', 'epoch': 6, 'step': 12}
    assert sorted(os.listdir(save_dir(tmp_path))) == [ckpt(12), INDEX_FILE]


def test_restore_checkpoint_false_starts_a_new_best(tmp_path):
    run(tmp_path, {1: 0.1}, 1, checkpoint_epoch_freq=1)
    run(tmp_path, {1: 0.5}, 1, restore_checkpoint=False, checkpoint_epoch_freq=1)
    assert index(tmp_path)['best']['value'] == 0.5


def test_keep_best_watches_a_metric_by_name_in_its_direction(tmp_path):
    model = new_model()
    with spt.TrainLoop(model.trainable_variables, max_epoch=3, checkpoint_dir=str(tmp_path),
                       checkpoint_keep_best='valid_acc', print_func=lambda s: None) as loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                model.layers[0].kernel.assign_add(np.ones((2, 1), np.float32))
            loop.collect_metrics(valid_acc={1: 0.5, 2: 0.9, 3: 0.7}[epoch])
    assert index(tmp_path)['best'] == {'name': ckpt(4), 'metric': 'valid_acc', 'value': 0.9,
                                       'mode': 'max', 'epoch': 2, 'step': 4}


def test_a_metric_never_collected_is_named(tmp_path):
    lines = []
    model = new_model()
    with pytest.raises(RuntimeError) as e, pytest.warns(UserWarning, match='`valid_loss`'):
        with spt.TrainLoop(model.trainable_variables, max_epoch=1, checkpoint_dir=str(tmp_path),
                           checkpoint_keep_best=True, print_func=lines.append,
                           export_best=str(tmp_path / 'best.weights.h5')) as loop:
            for _ in loop.iter_epochs():
                for _ in loop.iter_steps(range(2)):
                    pass
                loop.collect_metrics(val_loss=1.)
    assert ('`valid_loss`, which `checkpoint_keep_best` watches, was not collected during epoch '
            "1; the metrics collected were ['step_time', 'val_loss']") in lines
    assert str(e.value) == (
        f'No best checkpoint to export in `checkpoint_dir` {str(tmp_path)!r}: `valid_loss`, '
        f'which `checkpoint_keep_best` watches, has no value that counts (never collected, or '
        f"only NaN); the metrics collected were ['epoch_time', 'step_time', 'val_loss']")
    assert not (tmp_path / 'best.weights.h5').exists()
    assert os.listdir(save_dir(tmp_path)) != []     # the checkpoints are saved all the same


# ------------------------------------------------------------ export
def test_export_best_at_the_end_reads_back_into_a_fresh_model(tmp_path):
    lines = []
    target = tmp_path / 'best.weights.h5'
    model = run(tmp_path / 'run', VALID, 6, lines=lines, checkpoint_epoch_freq=1,
                checkpoint_max_to_keep=1, export_best=str(target))
    assert lines[-1] == f'Exported the best weights (valid_loss = 0.2, epoch 2, step 4) to {target}'
    np.testing.assert_array_equal(kernel(model), np.full((2, 1), 12.))   # left as it is
    fresh = new_model()
    fresh.load_weights(str(target))
    np.testing.assert_array_equal(kernel(fresh), np.full((2, 1), 4.))
    assert sorted(os.listdir(tmp_path)) == ['best.weights.h5', 'run']   # no temporary left


def export_target(style, folder, name='best'):
    """Where `export_best` writes: a Keras weights file in eager style, a TF1
    checkpoint directory in graph style."""
    return str(folder / name) if style.is_graph else str(folder / f'{name}.weights.h5')


def read_export(style, target):
    """``w`` read back from an export by `spt.warm_start`, in a new run."""
    with style.new_run():
        w = style.variable(np.zeros(3), 'w')
        assert spt.warm_start(target, [w], print_func=None).restored == ['w']
        return style.value(w).tolist()


def test_export_best_is_read_back_and_a_second_export_replaces_it(style, tmp_path):
    import tensorflow as tf
    lines = []
    target = export_target(style, tmp_path)
    final, _ = run_vector(style, tmp_path / 'run', VALID, 6, lines=lines,
                          checkpoint_max_to_keep=1, export_best=target)
    assert final.tolist() == [12.] * 3                # the variables keep their values
    assert lines[-1] == f'Exported the best weights (valid_loss = 0.2, epoch 2, step 4) to {target}'
    assert read_export(style, target) == [4.] * 3
    if style.is_graph:                                # a TF1 checkpoint of `param_vars` only
        assert [name for name, _ in tf.train.list_variables(target)] == ['w']
    run_vector(style, tmp_path / 'run', {7: 0.05}, 7, export_best=target)
    assert read_export(style, target) == [14.] * 3
    left = os.listdir(target if style.is_graph else tmp_path)
    assert not [n for n in left if n.startswith('.tmp-')]
    if style.is_graph:
        assert len([n for n in left if n.endswith('.index')]) == 1


def test_export_best_inside_a_checkpoint_dir_the_loop_creates(style, tmp_path):
    # the checkpoint guide's example, in a fresh folder: `run` does not exist yet
    target = export_target(style, tmp_path / 'run' / 'best', 'model')
    if style.is_graph:
        target = str(tmp_path / 'run' / 'best')
    run_vector(style, tmp_path / 'run', VALID, 6, export_best=target)
    assert read_export(style, target) == [4.] * 3
    with pytest.raises(ValueError, match='is in a directory that does not exist'):
        run_vector(style, tmp_path / 'other', VALID, 1,
                   export_best=export_target(style, tmp_path / 'no'))


def test_export_with_early_stopping_equals_the_restored_weights(style, tmp_path):
    target = export_target(style, tmp_path)
    final, _ = run_vector(style, tmp_path / 'run', VALID, 6, early_stopping=True,
                          export_best=target)
    assert final.tolist() == read_export(style, target) == [4.] * 3


def test_export_of_variables_by_name_is_read_back_by_warm_start(tmp_path):
    import tensorflow as tf
    w = tf.Variable(np.zeros(3, np.float32), name='w')
    with spt.TrainLoop([w], max_epoch=3, checkpoint_dir=str(tmp_path / 'run'),
                       checkpoint_keep_best=True, print_func=lambda s: None) as loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                w.assign_add(tf.ones(3))
            loop.collect_metrics(valid_loss={1: 0.3, 2: 0.1, 3: 0.2}[epoch])
    # after the loop, through the facade
    assert loop.export_best(str(tmp_path / 'w.weights.h5')) == [str(tmp_path / 'w.weights.h5')]
    np.testing.assert_array_equal(w.numpy(), [6., 6., 6.])
    fresh = tf.Variable(np.zeros(3, np.float32), name='w')
    report = spt.warm_start(str(tmp_path / 'w.weights.h5'), [fresh], print_func=None)
    assert report.restored == ['w']
    np.testing.assert_array_equal(fresh.numpy(), [4., 4., 4.])


def test_several_models_get_one_file_each(tmp_path):
    a, b = new_model(), new_model()
    with spt.TrainLoop(max_epoch=2, checkpoint_dir=str(tmp_path / 'run'),
                       checkpoint_save_objects={'a': a, 'b': b}, checkpoint_keep_best=True,
                       print_func=lambda s: None) as loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                a.layers[0].kernel.assign_add(np.ones((2, 1), np.float32))
                b.layers[0].kernel.assign_sub(np.ones((2, 1), np.float32))
            loop.collect_metrics(valid_loss={1: 0.1, 2: 0.2}[epoch])
        paths = loop.export_best(str(tmp_path / 'best.weights.h5'))
    assert paths == [str(tmp_path / 'best-a.weights.h5'), str(tmp_path / 'best-b.weights.h5')]
    fresh = new_model()
    fresh.load_weights(paths[1])
    np.testing.assert_array_equal(kernel(fresh), np.full((2, 1), -2.))


def test_export_weights_replaces_a_file_atomically(tmp_path):
    model = new_model()
    path = str(tmp_path / 'm.weights.h5')
    assert spt.export_weights(path, model) == path
    model.layers[0].kernel.assign(np.full((2, 1), 3., np.float32))
    spt.export_weights(path, model)
    fresh = new_model()
    fresh.load_weights(path)
    np.testing.assert_array_equal(kernel(fresh), np.full((2, 1), 3.))
    assert os.listdir(tmp_path) == ['m.weights.h5']


@pytest.mark.parametrize('kwargs,error,message', [
    ({'checkpoint_keep_best': 1}, TypeError,
     '`checkpoint_keep_best` must be True, False or a metric name, got 1'),
    ({'export_best': 'x.weights.h5', 'checkpoint_keep_best': False}, ValueError,
     '`export_best` needs `checkpoint_keep_best`: the weights of the best checkpoint are what '
     'it exports'),
    ({'export_best': '/no/such/dir/x.weights.h5'}, ValueError,
     "`export_best` '/no/such/dir/x.weights.h5' is in a directory that does not exist: create "
     "'/no/such/dir' first"),
    ({'export_best': 'best.h5'}, ValueError,
     "`export_best` must end in '.weights.h5' in eager mode (a Keras weights file), got "),
])
def test_argument_errors(tmp_path, kwargs, error, message):
    with pytest.raises(error) as e:
        spt.TrainLoop(checkpoint_dir=str(tmp_path), **{'checkpoint_keep_best': True, **kwargs})
    assert str(e.value).startswith(message)


def test_keep_best_needs_a_metric(tmp_path):
    with pytest.raises(ValueError, match='^`checkpoint_keep_best` needs a `metric`, or a loop '
                                         'with a `valid_metric_name`$'):
        with spt.TrainLoop(checkpoint_dir=str(tmp_path), valid_metric_name=None,
                           checkpoint_keep_best=True):
            pass


def test_export_best_errors(tmp_path):
    model = new_model()
    loop = spt.TrainLoop(model.trainable_variables, checkpoint_dir=str(tmp_path))
    with pytest.raises(RuntimeError, match='^`export_best` needs `checkpoint_keep_best=True`'):
        loop.export_best(str(tmp_path / 'x.weights.h5'))
    with pytest.raises(RuntimeError, match='^`export_best\\(\\)` needs the best checkpoint: pass '
                                           '`checkpoint_dir` and `checkpoint_keep_best=True`'):
        spt.TrainLoop().export_best(str(tmp_path / 'x.weights.h5'))
    loop = spt.TrainLoop(model.trainable_variables, checkpoint_dir=str(tmp_path),
                         checkpoint_keep_best=True)
    with pytest.raises(RuntimeError, match='^`export_best` needs the loop to have been entered$'):
        loop.export_best(str(tmp_path / 'x.weights.h5'))


# ------------------------------------------------------------ the store
def test_store_pin_best_and_retention(tmp_path):
    store = make_store(tmp_path, [(1, 'a')], max_to_keep=2)
    store.save(2, writer('b'), best={'value': 0.5})
    store.save(3, writer('c'))
    store.save(4, writer('d'))
    check_clean(tmp_path, [(ckpt(2), 'b'), (ckpt(3), 'c'), (ckpt(4), 'd')])
    assert store.best() == (str(tmp_path / ckpt(2)), {'value': 0.5})
    # pinning another unpins the old best, which is older than the 2 newest: removed
    assert store.pin_best(4, {'value': 0.25}) == str(tmp_path / ckpt(4))
    check_clean(tmp_path, [(ckpt(3), 'c'), (ckpt(4), 'd')])
    assert CheckpointStore(str(tmp_path)).best() == (str(tmp_path / ckpt(4)), {'value': 0.25})
    # recovery keeps the pin; a same-step replacement with `best` keeps it too
    store.recover()
    store.save(4, writer('D'), best={'value': 0.25})
    assert store.best() == (str(tmp_path / ckpt(4)), {'value': 0.25})
    store.save(5, writer('e'))
    store.save(6, writer('f'))
    check_clean(tmp_path, [(ckpt(4), 'D'), (ckpt(5), 'e'), (ckpt(6), 'f')])
    # replaced without `best` (a re-run of step 4 on other weights): no longer the best
    store.save(4, writer('x'))
    assert store.best() is None


def test_store_pin_best_errors(tmp_path):
    store = make_store(tmp_path, [(1, 'a')])
    with pytest.raises(ValueError, match='^`step` 2 has no checkpoint to pin in '):
        store.pin_best(2, {})
    with pytest.raises(TypeError, match='^`best` must be a JSON-serializable dict without the '
                                        'key "name", got '):
        store.pin_best(1, {'value': NAN})
    with pytest.raises(TypeError, match='^`best` must be a JSON-serializable dict'):
        store.save(2, writer('b'), best={'name': 'x'})
    assert store.best() is None and names_of(store.checkpoints()) == [ckpt(1)]


PIN_CHILD = r'''
import json, os, shutil, signal, sys, types

repo, save_dir, op, kill_at, log_path = sys.argv[1:]
''' + STUB_PACKAGES + r'''from tfsnippet.scaffold.checkpoint.store import CheckpointStore

store = CheckpointStore(save_dir, max_to_keep=1)
store.recover()
''' + KILL_POINTS + r'''

def write(directory):
    with open(os.path.join(directory, 'data.txt'), 'w') as f:
        f.write('new')
    with open(os.path.join(directory, 'extra.bin'), 'wb') as f:
        f.write(b'x' * 1000)


if op == 'save':
    store.save(4, write, best={'value': 0.1})
else:
    store.pin_best(3, {'value': 0.1})
log.write('["done", []]\n')
'''


@pytest.mark.parametrize('op', ['save', 'pin'])
def test_a_kill_at_any_point_of_a_pin_leaves_a_readable_best(tmp_path, op):
    """The old best (step 1) is unpinned and pruned by a new best: a save of step 4,
    or a pin of the existing step 3; killed at every file-system call."""
    template = tmp_path / 'template'
    store = CheckpointStore(str(template), max_to_keep=1)
    store.save(1, writer('a'), best={'value': 0.5})
    store.save(2, writer('b'))
    store.save(3, writer('c'))
    check_clean(template, [(ckpt(1), 'a'), (ckpt(3), 'c')])
    script = tmp_path / 'child.py'
    script.write_text(PIN_CHILD)

    def run(kill_at):
        directory = tmp_path / f'run-{kill_at}'
        shutil.copytree(template, directory)
        log = tmp_path / f'log-{kill_at}'
        proc = subprocess.run([sys.executable, str(script), REPO, str(directory), op,
                               str(kill_at), str(log)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=LIMIT)
        return proc, str(directory), [json.loads(x) for x in log.read_text().splitlines()]

    proc, directory, calls = run(0)
    assert proc.returncode == 0, proc.stderr
    new = ckpt(4) if op == 'save' else ckpt(3)
    assert CheckpointStore(directory).best() == (os.path.join(directory, new), {'value': 0.1})
    seen = set()
    for kill_at in range(1, len(calls)):
        proc, directory, calls = run(kill_at)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        store = CheckpointStore(directory)
        for when in ('before recovery', 'after recovery'):
            best = store.best()
            where = f'killed at {calls[-1]} (call {kill_at}), {when}'
            assert best is not None, where
            path, record = best
            # the old best, or the new one; never a pin to a missing checkpoint
            expected = ({'value': 0.5}, 'a') if path.endswith(ckpt(1)) else ({'value': 0.1},)
            assert record == expected[0], where
            assert label_of(path) in ('a', 'c', 'new'), where
            assert path in store.checkpoints(), where
            seen.add(os.path.basename(path))
            store.recover()
        assert os.path.basename(store.latest()) in (ckpt(3), ckpt(4))
        names = index_of(directory)
        assert len([n for n in names if n != os.path.basename(store.best()[0])]) <= 2
        shutil.rmtree(directory)
    assert seen == {ckpt(1), new}


def test_an_export_removes_what_a_killed_export_left_beside_it(tmp_path):
    model = new_model()
    left = tmp_path / f'.tmp-{"ab" * 16}-best.weights.h5'   # a kill before the rename
    left.write_bytes(b'partial')
    other = tmp_path / f'.tmp-{"ab" * 16}-other.weights.h5'   # another export's: kept
    other.write_bytes(b'partial')
    spt.export_weights(str(tmp_path / 'best.weights.h5'), model)
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name, 'best.weights.h5']
    fresh = new_model()
    fresh.layers[0].kernel.assign(np.ones((2, 1), np.float32))
    fresh.load_weights(str(tmp_path / 'best.weights.h5'))
    np.testing.assert_array_equal(kernel(fresh), kernel(model))
