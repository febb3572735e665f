"""The crash-safe on-disk protocol of ``CheckpointStore``, and crashes of real processes.

* Store level: the index, retention, same-step replacement, and recovery of
  each state a killed save can leave (built by hand from real saves).
* Every kill point: a child process (no TensorFlow) saves once and
  SIGKILLs itself at the N-th call of ``os.mkdir/rename/replace/remove/
  unlink/rmdir/fsync``, ``shutil.rmtree`` or between the two files it
  writes, for every N (but those right after an fsync, which leave what
  the kill before it leaves); the next start must see the newest complete
  checkpoint, before and after recovery, and no incomplete checkpoint
  directory.
* Durability: the order of fsyncs and renames of a save.
* TensorFlow: a training script killed inside pruning and between the two
  renames of a same-step replacement, eager and graph; the next start
  resumes from the newest complete checkpoint.

The kills are injected by the child scripts, which replace ``os``/``shutil``
functions in their own process; the library has no test-only branch.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint.store import INDEX_FILE, MARKER_FILE, CheckpointStore
from tests.helpers import checkpoint_variable
from tests.helpers.kill_points import KILL_POINTS, STUB_PACKAGES

REPO = str(Path(__file__).resolve().parents[2])
# how long a child process may run before the test gives up on it (a guard, not a wait)
LIMIT = 120
FILES = {'data.txt', 'extra.bin', MARKER_FILE}


def writer(label):
    """A ``write`` callable: ``data.txt`` holds `label`."""
    def write(directory):
        with open(os.path.join(directory, 'data.txt'), 'w') as f:
            f.write(label)
        with open(os.path.join(directory, 'extra.bin'), 'wb') as f:
            f.write(b'x' * 1000)
    return write


def label_of(path):
    with open(os.path.join(path, 'data.txt')) as f:
        return f.read()


def index_of(save_dir):
    with open(os.path.join(str(save_dir), INDEX_FILE)) as f:
        return json.load(f)['checkpoints']


def names_of(paths):
    return [os.path.basename(p) for p in paths]


def ckpt(step):
    return f'checkpoint.dat-{step}'


def make_store(save_dir, saves, max_to_keep=None):
    """A store of `save_dir` after ``[(step, label), ...]`` were saved in order."""
    store = CheckpointStore(str(save_dir), max_to_keep=max_to_keep)
    for step, label in saves:
        store.save(step, writer(label))
    return store


def check_clean(save_dir, expected):
    """`save_dir` holds exactly the checkpoints ``[(name, label), ...]``, oldest first."""
    names = [n for n, _ in expected]
    assert sorted(os.listdir(save_dir)) == sorted(names + [INDEX_FILE])
    assert index_of(save_dir) == names
    for name, label in expected:
        path = os.path.join(str(save_dir), name)
        assert set(os.listdir(path)) == FILES, name
        assert label_of(path) == label


# ------------------------------------------------------------------ basics
def test_save_lists_and_indexes_the_checkpoints(tmp_path):
    save_dir = tmp_path / 'ckpt'
    store = CheckpointStore(str(save_dir))
    assert store.checkpoints() == [] and store.latest() is None
    assert not save_dir.exists()                    # created on the first save
    path = store.save(5, writer('five'))
    assert path == str(save_dir / ckpt(5)) == store.path_of(5)
    store.save(np.int64(7), writer('seven'))
    assert names_of(store.checkpoints()) == [ckpt(5), ckpt(7)]
    assert store.latest() == str(save_dir / ckpt(7))
    check_clean(save_dir, [(ckpt(5), 'five'), (ckpt(7), 'seven')])
    # a new store on the folder sees the same
    assert CheckpointStore(str(save_dir)).checkpoints() == store.checkpoints()


def test_max_to_keep_keeps_the_newest(tmp_path):
    store = make_store(tmp_path, [(1, 'a'), (2, 'b'), (3, 'c')], max_to_keep=2)
    check_clean(tmp_path, [(ckpt(2), 'b'), (ckpt(3), 'c')])
    # a store with a smaller limit prunes on its next save, not before
    small = CheckpointStore(str(tmp_path), max_to_keep=1)
    small.recover()
    assert names_of(small.checkpoints()) == [ckpt(2), ckpt(3)]
    small.save(4, writer('d'))
    check_clean(tmp_path, [(ckpt(4), 'd')])
    assert names_of(store.checkpoints()) == [ckpt(4)]


def test_a_save_of_the_same_step_replaces_it_and_becomes_the_newest(tmp_path):
    store = make_store(tmp_path, [(4, 'a'), (6, 'b')])
    store.save(4, writer('A'))
    check_clean(tmp_path, [(ckpt(6), 'b'), (ckpt(4), 'A')])
    store.save(4, writer('AA'))
    check_clean(tmp_path, [(ckpt(6), 'b'), (ckpt(4), 'AA')])


def test_a_failed_write_leaves_the_folder_as_it_was(tmp_path):
    store = make_store(tmp_path, [(1, 'a')])
    before = sorted(os.listdir(tmp_path))

    def fail(directory):
        writer('half')(directory)
        raise OSError('disk full')

    with pytest.raises(OSError, match='^disk full$'):
        store.save(2, fail)
    with pytest.raises(OSError, match='^disk full$'):
        store.save(1, fail)                      # a replacement, too
    assert sorted(os.listdir(tmp_path)) == before
    check_clean(tmp_path, [(ckpt(1), 'a')])


def test_a_failed_rename_into_place_puts_the_replaced_checkpoint_back(tmp_path, monkeypatch):
    store = make_store(tmp_path, [(1, 'a'), (2, 'b')])
    real_rename = os.rename

    def rename(src, dst):
        if os.path.basename(str(src)).startswith('.tmp-'):
            raise PermissionError('rename refused')
        return real_rename(src, dst)

    monkeypatch.setattr(os, 'rename', rename)
    with pytest.raises(PermissionError, match='^rename refused$'):
        store.save(1, writer('A'))
    monkeypatch.undo()
    check_clean(tmp_path, [(ckpt(1), 'a'), (ckpt(2), 'b')])


def test_write_must_not_create_the_marker(tmp_path):
    store = make_store(tmp_path, [(1, 'a')])

    def sneaky(directory):
        with open(os.path.join(directory, MARKER_FILE), 'w') as f:
            f.write('{}')

    with pytest.raises(RuntimeError, match=re.escape(
            f"`write` must not create '{MARKER_FILE}': the store writes it; got one in "
            f"'{tmp_path}{os.sep}.tmp-checkpoint.dat-2-")):
        store.save(2, sneaky)
    check_clean(tmp_path, [(ckpt(1), 'a')])


@pytest.mark.parametrize('kwargs,error,message', [
    ({'save_dir': 3}, TypeError, '`save_dir` must be a directory path, got 3'),
    ({'save_dir': ''}, TypeError, "`save_dir` must be a directory path, got ''"),
    ({'filename': 'a/b'}, ValueError,
     "`filename` must be a plain file name not starting with \".\", got 'a/b'"),
    ({'filename': '.hidden'}, ValueError,
     "`filename` must be a plain file name not starting with \".\", got '.hidden'"),
    ({'filename': ''}, ValueError,
     "`filename` must be a plain file name not starting with \".\", got ''"),
    ({'max_to_keep': 0}, ValueError, '`max_to_keep` must be a positive int or None, got 0'),
    ({'max_to_keep': 1.5}, TypeError, '`max_to_keep` must be a positive int or None, got 1.5'),
    ({'durable': 1}, TypeError, '`durable` must be True or False, got 1'),
], ids=['dir-type', 'dir-empty', 'filename-sep', 'filename-dot', 'filename-empty',
        'keep-zero', 'keep-float', 'durable'])
def test_constructor_errors(tmp_path, kwargs, error, message):
    kwargs = dict({'save_dir': str(tmp_path)}, **kwargs)
    with pytest.raises(error, match=f'^{re.escape(message)}$'):
        CheckpointStore(**kwargs)


@pytest.mark.parametrize('step,write,error,message', [
    (-1, writer('x'), ValueError, '`step` must be an int >= 0, got -1'),
    (1.0, writer('x'), TypeError, '`step` must be an int >= 0, got 1.0'),
    (True, writer('x'), TypeError, '`step` must be an int >= 0, got True'),
    ('3', writer('x'), TypeError, "`step` must be an int >= 0, got '3'"),
    (1, 'data', TypeError, "`write` must be a callable taking a directory path, got 'data'"),
], ids=['negative', 'float', 'bool', 'str', 'write'])
def test_save_argument_errors(tmp_path, step, write, error, message):
    store = CheckpointStore(str(tmp_path / 'ckpt'))
    with pytest.raises(error, match=f'^{re.escape(message)}$'):
        store.save(step, write)
    assert not (tmp_path / 'ckpt').exists()


# ---------------------------------------------------------------- recovery
def test_recover_removes_unfinished_writes(tmp_path):
    make_store(tmp_path, [(1, 'a'), (2, 'b')])
    partial = tmp_path / '.tmp-checkpoint.dat-3-0123456789abcdef0123456789abcdef'
    partial.mkdir()
    (partial / 'data.txt').write_text('c')           # complete-looking, still temporary
    (tmp_path / '.tmp-0123456789abcdef.json').write_text('{"checkpoints": [')
    store = CheckpointStore(str(tmp_path))
    assert names_of(store.checkpoints()) == [ckpt(1), ckpt(2)]
    store.recover()
    check_clean(tmp_path, [(ckpt(1), 'a'), (ckpt(2), 'b')])


def test_recover_removes_a_half_deleted_checkpoint(tmp_path):
    make_store(tmp_path, [(1, 'a'), (2, 'b'), (3, 'c')], max_to_keep=2)
    # a kill inside the deletion of a pruned checkpoint: it had been renamed first
    doomed = tmp_path / '.doomed-checkpoint.dat-1-0123456789abcdef0123456789abcdef'
    doomed.mkdir()
    (doomed / 'extra.bin').write_bytes(b'x')
    store = CheckpointStore(str(tmp_path), max_to_keep=2)
    assert names_of(store.checkpoints()) == [ckpt(2), ckpt(3)]
    store.recover()
    check_clean(tmp_path, [(ckpt(2), 'b'), (ckpt(3), 'c')])


def test_a_pruning_leftover_never_counts_and_is_removed(tmp_path):
    # the state of a save killed after writing the index, before renaming the
    # checkpoint it prunes: that one is complete, unlisted, and must not count
    store = make_store(tmp_path, [(1, 'a'), (2, 'b')], max_to_keep=2)
    shutil.copytree(tmp_path / ckpt(1), tmp_path.parent / 'copy')
    store.save(3, writer('c'))
    shutil.copytree(tmp_path.parent / 'copy', tmp_path / ckpt(1))
    assert index_of(tmp_path) == [ckpt(2), ckpt(3)]
    fresh = CheckpointStore(str(tmp_path), max_to_keep=2)
    assert names_of(fresh.checkpoints()) == [ckpt(2), ckpt(3)]
    assert label_of(fresh.latest()) == 'c'
    fresh.recover()
    check_clean(tmp_path, [(ckpt(2), 'b'), (ckpt(3), 'c')])


def test_a_checkpoint_renamed_into_place_after_the_index_is_the_newest(tmp_path):
    # the state of a save killed after its rename, before the index was written
    store = make_store(tmp_path, [(4, 'a'), (6, 'b')], max_to_keep=2)
    old_index = (tmp_path / INDEX_FILE).read_bytes()
    store.save(2, writer('c'))
    (tmp_path / INDEX_FILE).write_bytes(old_index)
    fresh = CheckpointStore(str(tmp_path), max_to_keep=2)
    # the step is lower, the order of saves decides; step 4 was pruned already
    assert names_of(fresh.checkpoints()) == [ckpt(6), ckpt(2)]
    assert label_of(fresh.latest()) == 'c'
    fresh.recover()
    check_clean(tmp_path, [(ckpt(6), 'b'), (ckpt(2), 'c')])


def test_a_displaced_checkpoint_is_put_back(tmp_path):
    # the state of a save of step 2 killed between its two renames: the old
    # checkpoint is only under its displaced name, the new one is temporary
    make_store(tmp_path, [(1, 'a'), (2, 'b'), (3, 'c')])
    displaced = tmp_path / '.displaced-checkpoint.dat-2-0123456789abcdef0123456789abcdef'
    os.rename(tmp_path / ckpt(2), displaced)
    new = tmp_path / '.tmp-checkpoint.dat-2-fedcba9876543210fedcba9876543210'
    new.mkdir()
    writer('B')(str(new))
    store = CheckpointStore(str(tmp_path))
    assert store.checkpoints() == [str(tmp_path / ckpt(1)), str(displaced),
                                   str(tmp_path / ckpt(3))]
    assert label_of(store.latest()) == 'c'
    store.recover()
    check_clean(tmp_path, [(ckpt(1), 'a'), (ckpt(2), 'b'), (ckpt(3), 'c')])


def test_a_displaced_checkpoint_replaced_before_the_kill_is_removed(tmp_path):
    # the state of a save of step 2 killed after its second rename, before
    # the index: the new checkpoint is the newest, the displaced one outdated
    store = make_store(tmp_path, [(1, 'a'), (2, 'b'), (3, 'c')])
    old_index = (tmp_path / INDEX_FILE).read_bytes()
    shutil.copytree(tmp_path / ckpt(2), tmp_path / '.displaced-checkpoint.dat-2-'
                    '0123456789abcdef0123456789abcdef')
    store.save(2, writer('B'))
    (tmp_path / INDEX_FILE).write_bytes(old_index)
    fresh = CheckpointStore(str(tmp_path))
    assert names_of(fresh.checkpoints()) == [ckpt(1), ckpt(3), ckpt(2)]
    assert label_of(fresh.latest()) == 'B'
    fresh.recover()
    check_clean(tmp_path, [(ckpt(1), 'a'), (ckpt(3), 'c'), (ckpt(2), 'B')])


def test_reading_never_changes_the_folder(tmp_path):
    make_store(tmp_path, [(1, 'a'), (2, 'b')])
    os.rename(tmp_path / ckpt(2), tmp_path / '.displaced-checkpoint.dat-2-'
              '0123456789abcdef0123456789abcdef')
    (tmp_path / '.doomed-checkpoint.dat-9-0123456789abcdef0123456789abcdef').mkdir()
    (tmp_path / '.tmp-checkpoint.dat-3-0123456789abcdef0123456789abcdef').mkdir()
    before = sorted(os.listdir(tmp_path))
    store = CheckpointStore(str(tmp_path))
    assert len(store.checkpoints()) == 2 and store.latest() is not None
    assert sorted(os.listdir(tmp_path)) == before


def test_the_first_save_of_a_store_recovers_first(tmp_path):
    make_store(tmp_path, [(1, 'a'), (2, 'b')])
    os.rename(tmp_path / ckpt(2), tmp_path / '.displaced-checkpoint.dat-2-'
              '0123456789abcdef0123456789abcdef')
    (tmp_path / '.tmp-checkpoint.dat-3-0123456789abcdef0123456789abcdef').mkdir()
    CheckpointStore(str(tmp_path)).save(3, writer('c'))
    check_clean(tmp_path, [(ckpt(1), 'a'), (ckpt(2), 'b'), (ckpt(3), 'c')])


def test_recovery_does_not_prune(tmp_path):
    # killed after the rename of a third checkpoint: three complete ones, keep 2
    store = make_store(tmp_path, [(1, 'a'), (2, 'b')], max_to_keep=2)
    old_index = (tmp_path / INDEX_FILE).read_bytes()
    shutil.copytree(tmp_path / ckpt(1), tmp_path.parent / 'one')
    store.save(3, writer('c'))
    (tmp_path / INDEX_FILE).write_bytes(old_index)
    shutil.copytree(tmp_path.parent / 'one', tmp_path / ckpt(1))
    fresh = CheckpointStore(str(tmp_path), max_to_keep=2)
    fresh.recover()
    # the older ones stay until a newer checkpoint exists: a start may need them
    check_clean(tmp_path, [(ckpt(1), 'a'), (ckpt(2), 'b'), (ckpt(3), 'c')])
    fresh.save(4, writer('d'))
    check_clean(tmp_path, [(ckpt(3), 'c'), (ckpt(4), 'd')])


def test_a_lost_index_is_rebuilt_in_the_order_of_the_saves(tmp_path):
    make_store(tmp_path, [(4, 'a'), (6, 'b'), (2, 'c')])
    os.remove(tmp_path / INDEX_FILE)
    store = CheckpointStore(str(tmp_path))
    assert names_of(store.checkpoints()) == [ckpt(4), ckpt(6), ckpt(2)]
    store.recover()
    check_clean(tmp_path, [(ckpt(4), 'a'), (ckpt(6), 'b'), (ckpt(2), 'c')])


def test_a_folder_of_an_older_version_is_read_as_before(tmp_path):
    # no markers, an index without "seq": listed ones first, then the others
    for step in (1, 2, 3):
        (tmp_path / ckpt(step)).mkdir()
        writer(str(step))(str(tmp_path / ckpt(step)))
    (tmp_path / INDEX_FILE).write_text(json.dumps({'checkpoints': [ckpt(2), ckpt(1)]}))
    store = CheckpointStore(str(tmp_path))
    assert names_of(store.checkpoints()) == [ckpt(2), ckpt(1), ckpt(3)]
    store.save(4, writer('4'))
    assert names_of(store.checkpoints()) == [ckpt(2), ckpt(1), ckpt(3), ckpt(4)]
    assert index_of(tmp_path) == [ckpt(2), ckpt(1), ckpt(3), ckpt(4)]


# ---------------------------------------------------------------- durability
def traced_save(monkeypatch, store, step, label):
    """Save, recording ``('fsync', path)``, ``('rename'|'replace', src, dst)`` in order."""
    trace = []
    real = {name: getattr(os, name) for name in ('fsync', 'rename', 'replace')}

    def fsync(fd):
        trace.append(('fsync', os.readlink(f'/proc/self/fd/{fd}')))
        return real['fsync'](fd)

    def rename(src, dst):
        trace.append(('rename', str(src), str(dst)))
        return real['rename'](src, dst)

    def replace(src, dst):
        trace.append(('replace', str(src), str(dst)))
        return real['replace'](src, dst)

    with monkeypatch.context() as m:
        m.setattr(os, 'fsync', fsync)
        m.setattr(os, 'rename', rename)
        m.setattr(os, 'replace', replace)
        store.save(step, writer(label))
    return trace


def position(trace, predicate, after=-1):
    """Index of the first event after `after` that matches."""
    for i in range(after + 1, len(trace)):
        if predicate(trace[i]):
            return i
    raise AssertionError(f'no such event after {after} in {trace}')


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='reads /proc/self/fd')
@pytest.mark.parametrize('replace', [False, True], ids=['new-step', 'same-step'])
def test_every_step_is_durable_before_the_next(tmp_path, monkeypatch, replace):
    save_dir = str(tmp_path)
    store = make_store(save_dir, [(1, 'a'), (2, 'b')], max_to_keep=2)
    trace = traced_save(monkeypatch, store, 2 if replace else 3, 'c')
    final = os.path.join(save_dir, ckpt(2 if replace else 3))
    is_dir_sync = ('fsync', save_dir).__eq__

    commit = position(trace, lambda e: e[0] == 'rename' and e[2] == final)
    tmp = trace[commit][1]
    assert os.path.basename(tmp).startswith('.tmp-')
    # every file of the checkpoint, then its directory, before the rename
    synced = [e[1] for e in trace[:commit] if e[0] == 'fsync']
    assert {os.path.join(tmp, n) for n in FILES} <= set(synced)
    assert synced.index(tmp) > max(synced.index(os.path.join(tmp, n)) for n in FILES)
    if replace:
        # the old one was moved aside, durably, before the new one came in
        aside = position(trace, lambda e: e[0] == 'rename' and e[1] == final)
        assert position(trace, is_dir_sync, aside) < commit
    # the rename is durable before the index changes
    publish = position(trace, lambda e: e[0] == 'replace')
    assert trace[publish][2] == os.path.join(save_dir, INDEX_FILE)
    assert position(trace, is_dir_sync, commit) < publish
    assert ('fsync', trace[publish][1]) in trace[commit:publish]
    # the index is durable before anything is removed
    doom = position(trace, lambda e: e[0] == 'rename', publish)
    assert position(trace, is_dir_sync, publish) < doom
    assert os.path.basename(trace[doom][2]).startswith('.doomed-')
    assert trace[-1] == ('fsync', save_dir)       # the dooming renames, before deleting
    expected = [(ckpt(1), 'a'), (ckpt(2), 'c')] if replace else [(ckpt(2), 'b'), (ckpt(3), 'c')]
    check_clean(save_dir, expected)


@pytest.mark.skipif(not sys.platform.startswith('linux'), reason='reads /proc/self/fd')
def test_durable_false_never_fsyncs(tmp_path, monkeypatch):
    make_store(str(tmp_path), [(1, 'a'), (2, 'b')])
    store = CheckpointStore(str(tmp_path), max_to_keep=2, durable=False)
    trace = traced_save(monkeypatch, store, 3, 'c')
    assert [e for e in trace if e[0] == 'fsync'] == []
    assert [e[0] for e in trace] == ['rename', 'replace', 'rename']
    check_clean(tmp_path, [(ckpt(2), 'b'), (ckpt(3), 'c')])


# --------------------------------------------------- a kill at every point
STORE_CHILD = r'''
import json
import os
import shutil
import signal
import sys
import types

repo, save_dir, step, label, max_to_keep, kill_at, log_path = sys.argv[1:]
# the package's __init__ files import TensorFlow; the store needs none of them
''' + STUB_PACKAGES + r'''from tfsnippet.scaffold.checkpoint.store import CheckpointStore

assert 'tensorflow' not in sys.modules
store = CheckpointStore(save_dir, max_to_keep=None if max_to_keep == 'None' else int(max_to_keep))
store.recover()
''' + KILL_POINTS + r'''

def write(directory):
    with open(os.path.join(directory, 'data.txt'), 'w') as f:
        f.write(label)
    point('write', [directory])
    with open(os.path.join(directory, 'extra.bin'), 'wb') as f:
        f.write(b'x' * 1000)


store.save(int(step), write)
log.write('["done", []]\n')
'''

SCENARIOS = {
    'first-save': ([], None, (1, 'one')),
    'prune': ([(1, 'a'), (2, 'b')], 2, (3, 'c')),
    'replace-newest': ([(1, 'a'), (2, 'b')], None, (2, 'B')),
    'replace-and-prune': ([(1, 'a'), (2, 'b'), (3, 'c')], 2, (2, 'B')),
}


@pytest.mark.parametrize('scenario', list(SCENARIOS))
def test_a_kill_at_any_point_of_a_save_leaves_the_newest_complete_checkpoint(
        tmp_path, scenario):
    setup, max_to_keep, (step, label) = SCENARIOS[scenario]
    script = tmp_path / 'child.py'
    script.write_text(STORE_CHILD)
    template = tmp_path / 'template'
    make_store(template, setup)
    template.mkdir(exist_ok=True)
    before = [(n, label_of(template / n)) for n in names_of(CheckpointStore(
        str(template)).checkpoints())]
    new = ckpt(step)

    def run(kill_at):
        save_dir = tmp_path / f'run-{kill_at}'
        shutil.copytree(template, save_dir)
        log = tmp_path / f'log-{kill_at}'
        proc = subprocess.run(
            [sys.executable, str(script), REPO, str(save_dir), str(step), label,
             str(max_to_keep), str(kill_at), str(log)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=LIMIT)
        calls = [json.loads(line) for line in log.read_text().splitlines()]
        return proc, str(save_dir), calls

    proc, save_dir, calls = run(0)
    assert proc.returncode == 0, proc.stderr
    assert calls[-1] == ['done', []]
    after = [(n, label_of(os.path.join(save_dir, n))) for n in index_of(save_dir)]
    assert after[-1] == (new, label)
    # a kill right after an fsync leaves what a kill right before it leaves
    points = [n for n in range(1, len(calls)) if n == 1 or calls[n - 2][0] != 'fsync']
    outcomes = set()
    for kill_at in points:
        proc, save_dir, calls = run(kill_at)
        assert proc.returncode == -signal.SIGKILL, proc.stderr
        assert len(calls) == kill_at
        done = calls[:-1]                       # the last call was killed before it ran
        final = os.path.join(save_dir, new)
        committed = any(c[0] == 'rename' and c[1][1] == final for c in done)
        indexed = any(c[0] == 'replace' and os.path.basename(c[1][1]) == INDEX_FILE
                      for c in done)
        if indexed:
            expected, outcome = after, 'indexed'
        elif committed:
            expected = [e for e in before if e[0] != new] + [(new, label)]
            outcome = 'committed'
        else:
            expected, outcome = before, 'not committed'
        outcomes.add(outcome)
        where = f'killed at {calls[-1]} (call {kill_at}): {outcome}'
        # the next start: its read-only view first, then after recovery
        store = CheckpointStore(save_dir)
        assert [label_of(p) for p in store.checkpoints()] == [lb for _, lb in expected], where
        if expected:
            assert label_of(store.latest()) == expected[-1][1], where
        store.recover()
        assert names_of(store.checkpoints()) == [n for n, _ in expected], where
        if expected:
            check_clean(save_dir, expected)
        else:
            assert os.listdir(save_dir) == [], where
        shutil.rmtree(save_dir)
    assert outcomes == {'not committed', 'committed', 'indexed'}


# --------------------------------------------------------- with TensorFlow
TF_CHILD = r'''
import argparse
import os
import shutil
import signal

parser = argparse.ArgumentParser()
parser.add_argument('checkpoint_dir')
parser.add_argument('--steps', type=int, default=0)
parser.add_argument('--max-to-keep', type=int, default=None)
parser.add_argument('--fresh', action='store_true', help='start afresh from w = 100')
parser.add_argument('--graph', action='store_true')
parser.add_argument('--kill', default='', help='e.g. os.rename:4: SIGKILL at its 4th call')
args = parser.parse_args()

import tensorflow as tf

if args.graph:
    tf.compat.v1.disable_eager_execution()
import tfsnippet as spt

v1 = tf.compat.v1


def say(line):
    print(line, flush=True)


if args.kill:
    target, count = args.kill.split(':')
    module = {'os': os, 'shutil': shutil}[target.split('.')[0]]
    name = target.split('.')[1]
    original = getattr(module, name)
    calls = []

    def killer(*a, **kw):
        calls.append(a)
        if len(calls) == int(count):
            os.kill(os.getpid(), signal.SIGKILL)
        return original(*a, **kw)
    setattr(module, name, killer)

initial = 100. if args.fresh else 0.
if args.graph:
    w = v1.get_variable('w', initializer=initial)
    add = v1.assign_add(w, 1.)
    session = v1.Session()
    session.__enter__()
    session.run(v1.global_variables_initializer())
    value = lambda: float(session.run(w))
    step = lambda: session.run(add)
else:
    w = tf.Variable(initial, name='w')
    value = lambda: float(w.numpy())
    step = lambda: w.assign_add(1.)

loop = spt.TrainLoop([w], max_epoch=1, checkpoint_dir=args.checkpoint_dir,
                     checkpoint_epoch_freq=None, checkpoint_step_freq=1,
                     checkpoint_max_to_keep=args.max_to_keep,
                     restore_checkpoint=not args.fresh, print_func=say)
with loop:
    say(f'ENTERED step={loop.step} w={value()}')
    if args.steps:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(args.steps)):
                step()
say('FINISHED')
'''


def run_tf_child(server, tmp_path, root, *options):
    """A run of the TensorFlow script, forked by `server` (the session's ``fork_server``)."""
    script = tmp_path / 'train.py'
    script.write_text(TF_CHILD)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')
    return server.run([script, root, *options], cwd=tmp_path, env=env, timeout=LIMIT)


def resume_here(root):
    """The next start, in this process: ``(printed lines, step, w)``."""
    w, lines = tf.Variable(-1., name='w'), []
    with spt.TrainLoop([w], checkpoint_dir=str(root), checkpoint_step_freq=1,
                       checkpoint_max_to_keep=2, print_func=lines.append) as loop:
        step = loop.step
    return lines, step, float(w.numpy())


def saved_w(path):
    return float(checkpoint_variable(path, 'w'))


def folder(root):
    return sorted(os.listdir(os.path.join(str(root), 'checkpoint')))


def resumed_line(root, step):
    path = os.path.join(str(root), 'checkpoint', ckpt(step))
    return f'Resume training: epoch 1, step {step}, from checkpoint {path}'


@pytest.mark.parametrize('kill,leftover', [
    ('os.rename:4', ckpt(1)),           # before the pruned checkpoint is renamed
    ('os.unlink:2', '.doomed-'),        # inside its deletion: one file is gone
], ids=['before-rename', 'inside-rmtree'])
def test_killed_while_pruning_resumes_from_the_newest_eager(tmp_path, kill, leftover,
                                                           fork_server):
    root = tmp_path / 'run'
    proc = run_tf_child(fork_server, tmp_path, root, '--steps', 3, '--max-to-keep', 2,
                        '--kill', kill)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert 'ENTERED step=0 w=0.0' in proc.stdout and 'FINISHED' not in proc.stdout
    # killed in the third save, after its index was written
    assert index_of(root / 'checkpoint') == [ckpt(2), ckpt(3)]
    entries = folder(root)
    assert [n for n in entries if n.startswith(leftover)] != [], entries
    assert ckpt(3) in entries

    lines, step, w = resume_here(root)
    assert lines == [resumed_line(root, 3)]
    assert (step, w) == (3, 3.)
    assert folder(root) == [ckpt(2), ckpt(3), INDEX_FILE]


@pytest.fixture(scope='module')
def three_checkpoints(tmp_path_factory):
    """A run that saved steps 1, 2, 3 (``w`` = the step), made in this process."""
    root = tmp_path_factory.mktemp('three') / 'run'
    w = tf.Variable(0., name='w')
    with spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(root), checkpoint_step_freq=1,
                       print_func=lambda s: None) as loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(3)):
                w.assign_add(1.)
    assert index_of(root / 'checkpoint') == [ckpt(1), ckpt(2), ckpt(3)]
    return root


def test_killed_between_the_renames_of_a_same_step_save_keeps_the_old_one(
        tmp_path, three_checkpoints, fork_server):
    root = tmp_path / 'run'
    shutil.copytree(three_checkpoints, root)
    # a fresh run (w from 100) saves step 1 again: killed before its rename into place
    proc = run_tf_child(fork_server, tmp_path, root, '--steps', 1, '--fresh',
                        '--kill', 'os.rename:2')
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert 'ENTERED step=0 w=100.0' in proc.stdout
    entries = folder(root)
    assert ckpt(1) not in entries
    assert len([n for n in entries if n.startswith('.displaced-checkpoint.dat-1-')]) == 1
    assert len([n for n in entries if n.startswith('.tmp-checkpoint.dat-1-')]) == 1

    lines, step, w = resume_here(root)
    assert lines == [resumed_line(root, 3)]
    assert (step, w) == (3, 3.)
    assert folder(root) == [ckpt(1), ckpt(2), ckpt(3), INDEX_FILE]
    assert saved_w(os.path.join(str(root), 'checkpoint', ckpt(1))) == 1.
    assert index_of(root / 'checkpoint') == [ckpt(1), ckpt(2), ckpt(3)]


def test_killed_after_the_rename_of_a_same_step_save_resumes_from_it(
        tmp_path, three_checkpoints, fork_server):
    root = tmp_path / 'run'
    shutil.copytree(three_checkpoints, root)
    # committed: killed when about to write the index
    proc = run_tf_child(fork_server, tmp_path, root, '--steps', 1, '--fresh',
                        '--kill', 'os.replace:1')
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert index_of(root / 'checkpoint') == [ckpt(1), ckpt(2), ckpt(3)]
    assert saved_w(os.path.join(str(root), 'checkpoint', ckpt(1))) == 101.

    lines, step, w = resume_here(root)
    assert lines == [resumed_line(root, 1)]
    assert (step, w) == (1, 101.)
    assert folder(root) == [ckpt(1), ckpt(2), ckpt(3), INDEX_FILE]
    assert index_of(root / 'checkpoint') == [ckpt(2), ckpt(3), ckpt(1)]


def test_killed_while_pruning_resumes_from_the_newest_graph(tmp_path, fork_server):
    root = tmp_path / 'run'
    proc = run_tf_child(fork_server, tmp_path, root, '--graph', '--steps', 3, '--max-to-keep', 2,
                        '--kill', 'os.rename:4')
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    assert 'ENTERED step=0 w=0.0' in proc.stdout
    assert index_of(root / 'checkpoint') == [ckpt(2), ckpt(3)]
    assert folder(root) == [ckpt(1), ckpt(2), ckpt(3), INDEX_FILE]   # 1: a leftover

    proc = run_tf_child(fork_server, tmp_path, root, '--graph', '--max-to-keep', 2)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == [resumed_line(root, 3), 'ENTERED step=3 w=3.0',
                                        'FINISHED']
    assert folder(root) == [ckpt(2), ckpt(3), INDEX_FILE]


# ------------------------------------------------------------ CheckpointSaver
def test_saver_passes_durable_and_uses_the_store(tmp_path):
    v = tf.Variable(1., name='v')
    saver = spt.CheckpointSaver([v], str(tmp_path), max_to_keep=3, durable=False)
    assert saver.store.durable is False and saver.store.max_to_keep == 3
    path = saver.save(2)
    assert set(os.listdir(path)) >= {'variables.index', 'state.npz', MARKER_FILE}
    assert saver.store.latest() == path == saver.latest_checkpoint()


@pytest.mark.parametrize('call', ['save', 'restore', 'restore_latest'])
def test_saver_session_must_be_none_in_eager_mode(tmp_path, call):
    v = tf.Variable(1., name='v')
    saver = spt.CheckpointSaver([v], str(tmp_path))
    path = saver.save(1)
    v.assign(5.)
    args = {'save': (2,), 'restore': (path,), 'restore_latest': ()}[call]
    with pytest.raises(ValueError, match=re.escape(
            '`session` must be None in eager mode (there is no session), got \'sess\'')):
        getattr(saver, call)(*args, session='sess')
    assert saver.checkpoints() == [path] and v.numpy() == 5.


def test_saver_step_errors(tmp_path):
    saver = spt.CheckpointSaver([tf.Variable(1., name='v')], str(tmp_path))
    with pytest.raises(ValueError, match='^' + re.escape(
            '`global_step` must be an int >= 0, got -3') + '$'):
        saver.save(-3)
    with pytest.raises(TypeError, match='^' + re.escape(
            '`global_step` must be an int >= 0, got 2.5') + '$'):
        saver.save(2.5)
    assert saver.checkpoints() == []
