"""Keep policies: the k best checkpoints kept beside the latest N (eager mode), and
the store's pins surviving a kill at any point of a pin.

A run trains a one-layer Keras model whose kernel gains 1 per step (two
steps per epoch) and collects the validation loss of the table it is given
at the end of each epoch: the kernel saved at the end of epoch ``e`` is
``2 * e``, so every checkpoint kept can be read back and checked by hand.
"""

import json
import os
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint.policies import (KeepBest, KeepEveryNth, KeepLatest,
                                                    SaveAtEnd, SaveEvery)
from tfsnippet.scaffold.checkpoint.store import CheckpointStore
from tests.helpers import checkpoint_variable
from tests.scaffold.test_checkpoint_best import (NAN, index, new_model, run_vector, save_dir,
                                                 saved_kernel)
from tests.scaffold.test_checkpoint_store import (LIMIT, REPO, check_clean, ckpt, label_of,
                                                  writer)
from tests.helpers.kill_points import KILL_POINTS, STUB_PACKAGES

# improves (1, 2), worsens (3), improves on the 2nd best (4), NaN (5), worsens (6)
VALID = {1: 0.5, 2: 0.2, 3: 0.4, 4: 0.3, 5: NAN, 6: 0.7}


def run(root, valid, max_epoch, model=None, lines=None, keep=None, **kwargs):
    """Train with a Checkpointer added by hand (save every epoch); return the model."""
    model = model if model is not None else new_model()
    checkpointer = spt.Checkpointer(
        str(root), save=[SaveEvery(epochs=1), SaveAtEnd()], save_objects={'model': model},
        variables=model.trainable_variables,
        keep=keep if keep is not None else [KeepLatest(2), KeepBest(k=2, metric='valid_loss')],
        **kwargs)
    loop = spt.TrainLoop(model.trainable_variables, max_epoch=max_epoch,
                         print_func=(lines if lines is not None else []).append)
    loop.add_component(checkpointer)
    with loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                model.layers[0].kernel.assign_add(np.ones((2, 1), np.float32))
            if epoch in valid:
                loop.collect_metrics(valid_loss=valid[epoch])
    return checkpointer


def kept(root):
    """``{step: kernel value}`` of every checkpoint on disk, read back."""
    names = sorted(n for n in os.listdir(save_dir(root)) if n.startswith('checkpoint.dat-'))
    return {int(n.split('-')[1]): float(saved_kernel(os.path.join(save_dir(root), n))[0, 0])
            for n in names}


def kept_vector(root):
    """``{step: w[0]}`` of every checkpoint of `run_vector` on disk, read back."""
    names = sorted(n for n in os.listdir(save_dir(root)) if n.startswith('checkpoint.dat-'))
    return {int(n.split('-')[1]): float(checkpoint_variable(os.path.join(save_dir(root), n),
                                                            'w')[0]) for n in names}


def checkpointer_of(root):
    """Saves every epoch and at the end; keeps the latest 2 and the 2 best."""
    return lambda variables: spt.Checkpointer(
        str(root), save=[SaveEvery(epochs=1), SaveAtEnd()], variables=variables,
        keep=[KeepLatest(2), KeepBest(k=2, metric='valid_loss')])


def test_the_k_best_and_the_latest_n_are_kept_and_read_back(style, tmp_path):
    _, checkpointer = run_vector(style, tmp_path, VALID, 6, checkpointer=checkpointer_of(tmp_path))
    # the 2 best: epoch 2 (0.2, step 4) and epoch 4 (0.3, step 8); the 2 latest: 10, 12
    assert kept_vector(tmp_path) == {4: 4., 8: 8., 10: 10., 12: 12.}
    assert index(tmp_path)['checkpoints'] == [ckpt(4), ckpt(8), ckpt(10), ckpt(12)]
    pins = [(os.path.basename(path), record['value'], record['epoch'])
            for path, record in checkpointer.best_checkpoints()]
    assert pins == [(ckpt(4), 0.2, 2), (ckpt(8), 0.3, 4)]
    assert checkpointer.best_checkpoint()[1]['value'] == 0.2
    assert index(tmp_path)['best']['name'] == ckpt(4)   # what older versions read


def test_the_k_best_survive_a_resume_and_are_replaced_by_better(style, tmp_path):
    run_vector(style, tmp_path, VALID, 6, checkpointer=checkpointer_of(tmp_path))
    lines = []
    _, checkpointer = run_vector(style, tmp_path, {7: 0.25, 8: 0.1}, 8, lines=lines,
                                 checkpointer=checkpointer_of(tmp_path))
    assert lines[0].startswith('Resume training: epoch 6, step 12, from checkpoint ')
    # epoch 7 (0.25) pushes out step 8 (0.3); epoch 8 (0.1) pushes out step 14 (0.25)
    assert kept_vector(tmp_path) == {4: 4., 14: 14., 16: 16.}
    assert [(os.path.basename(p), r['value']) for p, r in checkpointer.best_checkpoints()] == \
        [(ckpt(16), 0.1), (ckpt(4), 0.2)]
    np.testing.assert_array_equal(
        checkpoint_variable(checkpointer.best_checkpoint()[0], 'w'), [16., 16., 16.])


def test_a_value_that_enters_the_k_best_is_saved_without_a_schedule(tmp_path):
    model = new_model()
    checkpointer = spt.Checkpointer(str(tmp_path), save=[], save_objects={'model': model},
                                    variables=model.trainable_variables,
                                    keep=[KeepBest(k=2)], preemption_signals=())
    loop = spt.TrainLoop(model.trainable_variables, max_epoch=4, print_func=[].append)
    loop.add_component(checkpointer)
    with loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                model.layers[0].kernel.assign_add(np.ones((2, 1), np.float32))
            loop.collect_metrics(valid_loss={1: 0.5, 2: 0.6, 3: 0.4, 4: 0.9}[epoch])
    # epochs 1, 2 (the 2 best so far) and 3 were saved; 2 fell out; 4 never entered
    assert kept(tmp_path) == {2: 2., 6: 6.}


def test_keep_every_nth_keeps_a_trail(tmp_path):
    run(tmp_path, {}, 6, keep=[KeepLatest(1), KeepEveryNth(8)])
    assert kept(tmp_path) == {8: 8., 12: 12.}


@pytest.mark.parametrize('kwargs, error, message', [
    ({'keep': [KeepBest(2), KeepBest(1)]}, ValueError, '`keep` may hold one KeepBest'),
    ({'keep': [KeepBest(2)], 'keep_best': True}, ValueError,
     '`checkpoint_keep_best` is a shortcut for `KeepBest(k=1)`'),
    ({'keep': 3}, TypeError, '`keep` must be a list of keep policies'),
    ({'save': ['epoch']}, TypeError, '`save` must be a list of save policies'),
    ({'save': [], 'epoch_freq': 1}, ValueError, '`save` replaces `epoch_freq`'),
])
def test_policy_errors(tmp_path, kwargs, error, message):
    with pytest.raises(error, match=f'^{message}'.replace('(', r'\(').replace(')', r'\)')):
        spt.Checkpointer(str(tmp_path), **kwargs)


def test_policy_argument_errors():
    with pytest.raises(ValueError, match='^`SaveEvery` takes one of'):
        SaveEvery(epochs=1, steps=2)
    with pytest.raises(ValueError, match="^`mode` must be 'min', 'max' or 'auto', got 'up'"):
        KeepBest(2, mode='up')
    with pytest.raises(ValueError):
        KeepLatest(0)


# ------------------------------------------------------------ the store
def test_store_keeps_the_k_best_pins_ranked(tmp_path):
    store = CheckpointStore(str(tmp_path), keep=[KeepLatest(1), KeepBest(k=2)])
    for step, value in [(1, 0.5), (2, 0.3), (3, 0.4)]:
        store.save(step, writer(str(step)), best={'metric': 'loss', 'value': value,
                                                  'mode': 'min'})
    check_clean(tmp_path, [(ckpt(2), '2'), (ckpt(3), '3')])   # step 1 fell out of the 2 best
    assert [(os.path.basename(p), r['value']) for p, r in store.pinned()] == \
        [(ckpt(2), 0.3), (ckpt(3), 0.4)]
    store.save(4, writer('4'))
    check_clean(tmp_path, [(ckpt(2), '2'), (ckpt(3), '3'), (ckpt(4), '4')])
    with pytest.raises(TypeError, match='^`best` must hold a number `value` and a `mode`'):
        store.pin_best(4, {'metric': 'loss', 'value': 0.1})


PIN_CHILD = r'''
import json, os, shutil, signal, sys, types

repo, save_dir, op, kill_at, log_path = sys.argv[1:]
''' + STUB_PACKAGES + r'''from tfsnippet.scaffold.checkpoint.policies import KeepBest, KeepLatest
from tfsnippet.scaffold.checkpoint.store import CheckpointStore

store = CheckpointStore(save_dir, keep=[KeepLatest(1), KeepBest(k=2)])
store.recover()
''' + KILL_POINTS + r'''

def write(directory):
    with open(os.path.join(directory, 'data.txt'), 'w') as f:
        f.write('new')


best = {'metric': 'loss', 'value': 0.1, 'mode': 'min'}
if op == 'save':
    store.save(4, write, best=best)
else:
    store.pin_best(3, best)
log.write('["done", []]\n')
'''


@pytest.mark.parametrize('op', ['save', 'pin'])
def test_a_kill_at_any_point_of_a_pin_leaves_the_old_or_the_new_k_best(tmp_path, op):
    """Steps 1 (0.5) and 2 (0.3) are the 2 best; a new best (a save of step 4, or a
    pin of the existing step 3) pushes step 1 out, which is then pruned.  Killed at
    every file-system call, the index names the old pins or the new ones, all present."""
    template = tmp_path / 'template'
    store = CheckpointStore(str(template), keep=[KeepLatest(1), KeepBest(k=2)])
    store.save(1, writer('a'), best={'metric': 'loss', 'value': 0.5, 'mode': 'min'})
    store.save(2, writer('b'), best={'metric': 'loss', 'value': 0.3, 'mode': 'min'})
    store.save(3, writer('c'))
    check_clean(template, [(ckpt(1), 'a'), (ckpt(2), 'b'), (ckpt(3), 'c')])
    script = tmp_path / 'child.py'
    script.write_text(PIN_CHILD)
    new = ckpt(4) if op == 'save' else ckpt(3)
    old_pins, new_pins = [ckpt(2), ckpt(1)], [new, ckpt(2)]

    def run_child(kill_at):
        directory = tmp_path / f'run-{kill_at}'
        shutil.copytree(template, directory)
        log = tmp_path / f'log-{kill_at}'
        proc = subprocess.run([sys.executable, str(script), REPO, str(directory), op,
                               str(kill_at), str(log)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, timeout=LIMIT)
        return proc, str(directory), [json.loads(x) for x in log.read_text().splitlines()]

    proc, directory, calls = run_child(0)
    assert proc.returncode == 0, proc.stderr
    assert [os.path.basename(p) for p, _ in CheckpointStore(directory).pinned()] == new_pins
    seen = set()
    for kill_at in range(1, len(calls)):
        proc, directory, calls = run_child(kill_at)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        store = CheckpointStore(directory)
        for when in ('before recovery', 'after recovery'):
            where = f'killed at {calls[-1]} (call {kill_at}), {when}'
            pinned = store.pinned()
            names = [os.path.basename(p) for p, _ in pinned]
            assert names in (old_pins, new_pins), where
            for path, record in pinned:
                assert path in store.checkpoints(), where
                assert label_of(path) in ('a', 'b', 'c', 'new'), where
            seen.add(tuple(names))
            store.recover()
        with open(os.path.join(directory, 'checkpoint_index.json')) as f:
            on_disk = json.load(f)
        assert [p['name'] for p in on_disk['pins']] == names
        shutil.rmtree(directory)
    assert seen == {tuple(old_pins), tuple(new_pins)}


def test_an_index_of_an_older_version_keeps_its_one_best(tmp_path):
    store = CheckpointStore(str(tmp_path), keep=[KeepLatest(1), KeepBest(k=2)])
    store.save(1, writer('a'), best={'metric': 'loss', 'value': 0.5, 'mode': 'min'})
    store.save(2, writer('b'))
    path = tmp_path / 'checkpoint_index.json'
    data = json.loads(path.read_text())
    del data['pins']   # what an older version wrote: "best" only
    path.write_text(json.dumps(data))
    assert [(os.path.basename(p), r['value']) for p, r in store.pinned()] == [(ckpt(1), 0.5)]
    store.save(3, writer('c'), best={'metric': 'loss', 'value': 0.7, 'mode': 'min'})
    assert [(os.path.basename(p), r['value']) for p, r in store.pinned()] == \
        [(ckpt(1), 0.5), (ckpt(3), 0.7)]
    check_clean(tmp_path, [(ckpt(1), 'a'), (ckpt(3), 'c')])
    assert json.loads(path.read_text())['best']['name'] == ckpt(1)


def test_the_classic_keywords_are_components_and_policies(tmp_path):
    model = new_model()
    loop = spt.TrainLoop(model.trainable_variables, checkpoint_dir=str(tmp_path),
                         checkpoint_epoch_freq=2, checkpoint_secs=60., checkpoint_max_to_keep=3,
                         checkpoint_keep_best=True,
                         export_best=str(tmp_path / 'best.weights.h5'))
    assert [c.role for c in loop.components] == ['export', 'preemption', 'checkpointer']
    checkpointer = loop.component('checkpointer')
    assert repr(checkpointer.save_policies) == \
        '[SaveEvery(epochs=2), SaveEvery(seconds=60.0), SaveAtEnd()]'
    assert repr(checkpointer.keep_policies) == \
        "[KeepLatest(3), KeepBest(k=1, metric=None, mode='auto')]"
    # attached when added: the best monitor watches the loop's metric in its direction
    assert (checkpointer.best_monitor.name, checkpointer.best_monitor.mode) == \
        ('valid_loss', 'min')


def test_a_checkpointer_added_inside_the_block_is_refused(tmp_path):
    with spt.TrainLoop([], max_epoch=1) as loop:
        with pytest.raises(RuntimeError, match='^A Checkpointer must be added before the loop '
                                               'is entered'):
            loop.add_component(spt.Checkpointer(str(tmp_path), preemption_signals=()))
