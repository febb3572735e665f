"""`ObjectCheckpointStore` on a real S3 API (moto on 127.0.0.1): layout, a save
interrupted before each of its object-store operations, pruning that stays in
its own prefix, the conditional index write, and `open_store`'s choice."""

import json
import os

import pytest

from tfsnippet.scaffold.checkpoint.object_store import (ObjectCheckpointStore,
                                                        StoreConflictError, open_store)
from tfsnippet.scaffold.checkpoint.store import INDEX_FILE, MARKER_FILE, CheckpointStore
from tfsnippet.storage import resolve


class Interrupted(Exception):
    """Stands for a process killed before an object-store operation."""


class Watched(ObjectCheckpointStore):
    """Records each object-store operation; raises `Interrupted` before call `stop_at`."""

    def __init__(self, *args, stop_at=0, **kwargs):
        super().__init__(*args, **kwargs)
        self.ops = []
        self.stop_at = stop_at
        self.before = {}     # op name -> callable run before the first such operation

    def _call(self, op, target, fn, *args, **kwargs):
        self.ops.append((op, target))
        if len(self.ops) == self.stop_at:
            raise Interrupted(op, target)
        hook = self.before.pop(op, None)
        if hook is not None:
            hook()
        return fn(*args, **kwargs)


def writer(payload):
    def write(directory):
        with open(os.path.join(directory, 'weights.bin'), 'wb') as f:
            f.write(payload)
        os.mkdir(os.path.join(directory, 'nested'))
        with open(os.path.join(directory, 'nested', 'state.json'), 'w') as f:
            json.dump({'payload': payload.decode()}, f)
    return write


def read_back(store, path):
    with store.local_copy(path) as local:
        with open(os.path.join(local, 'weights.bin'), 'rb') as f:
            weights = f.read()
        with open(os.path.join(local, 'nested', 'state.json')) as f:
            state = json.load(f)
    assert state == {'payload': weights.decode()}
    return weights


def objects(location):
    root = location.path + '/'
    return sorted(k[len(root):] for k in location.fs.find(location.path))


def tops(location):
    return sorted({k.split('/')[0] for k in objects(location)})


def test_layout_prune_and_read_back(s3_bucket):
    url = f'{s3_bucket}/run/checkpoint'
    store = open_store(url, max_to_keep=2)
    assert isinstance(store, ObjectCheckpointStore) and store.save_dir == url
    for step in (1, 2, 3):
        assert store.save(step, writer(f'w{step}'.encode())) == f'{url}/checkpoint.dat-{step}'
    assert store.checkpoints() == [f'{url}/checkpoint.dat-2', f'{url}/checkpoint.dat-3']
    assert [read_back(store, p) for p in store.checkpoints()] == [b'w2', b'w3']
    # a save of the same step goes under a fresh prefix and supersedes the old one
    store.save(3, writer(b'w3b'))
    assert read_back(store, store.latest()) == b'w3b'
    location = resolve(url)
    names = tops(location)
    assert names[-1] == INDEX_FILE and len(names) == 3
    assert [n.rsplit('.', 1)[0] for n in names[:2]] == ['checkpoint.dat-2', 'checkpoint.dat-3']
    for prefix in names[:2]:
        assert sorted(k.split('/', 1)[1] for k in objects(location) if k.startswith(prefix)) \
            == [MARKER_FILE, 'nested/state.json', 'weights.bin']
    index = json.loads(location.fs.cat(location.join(INDEX_FILE).path))
    assert index['checkpoints'] == ['checkpoint.dat-2', 'checkpoint.dat-3']
    assert index['prefixes'] == {n.rsplit('.', 1)[0]: n for n in names[:2]}
    # pins move with the index; the pinned one outlives max_to_keep
    store.pin_best(2, {'metric': 'loss', 'value': 0.5})
    store.save(4, writer(b'w4'))
    fresh = ObjectCheckpointStore(url, max_to_keep=2)
    assert fresh.checkpoints() == [f'{url}/checkpoint.dat-{s}' for s in (2, 3, 4)]
    assert fresh.best() == (f'{url}/checkpoint.dat-2', {'metric': 'loss', 'value': 0.5})


def test_open_store_keeps_local_paths_local(tmp_path):
    store = open_store(str(tmp_path / 'ck'))
    assert type(store) is CheckpointStore
    store.save(1, writer(b'x'))
    with store.local_copy(store.latest()) as local:
        assert local == str(tmp_path / 'ck' / 'checkpoint.dat-1')


def save_ops(url):
    """The object-store operations of the second save of a store (after one save)."""
    store = Watched(url, max_to_keep=1)
    store.save(1, writer(b'w1'))
    store.ops.clear()
    store.save(2, writer(b'w2'))
    return list(store.ops)


def test_a_save_interrupted_before_each_operation_leaves_a_committed_checkpoint(s3_bucket):
    """Before each operation of a save that prunes: the next start sees the old or the
    new checkpoint (the new one once its marker is uploaded), reads it whole, and
    recovery leaves nothing unreadable behind."""
    ops = save_ops(f'{s3_bucket}/probe')
    names = [op for op, _ in ops]
    assert names == ['list', 'read', 'read', 'put', 'put', 'commit', 'index', 'unmark', 'delete']
    for n in range(1, len(ops) + 1):
        url = f'{s3_bucket}/cut-{n}'
        first = Watched(url, max_to_keep=1)
        first.save(1, writer(b'w1'))
        first.ops.clear()
        first.stop_at = n
        with pytest.raises(Interrupted):
            first.save(2, writer(b'w2'))
        done = names[:n - 1]          # the operations that ran
        restart = ObjectCheckpointStore(url, max_to_keep=1)
        expected = [b'w1'] if 'commit' not in done else \
            [b'w1', b'w2'] if 'index' not in done else [b'w2']
        assert [read_back(restart, p) for p in restart.checkpoints()] == expected, ops[n - 1]
        restart.recover()
        location = resolve(url)
        prefixes = [t for t in tops(location) if t != INDEX_FILE]
        # every prefix left is committed and counted: nothing unreadable remains
        assert len(prefixes) == len(expected), (ops[n - 1], prefixes)
        assert all(f'{p}/{MARKER_FILE}' in objects(location) for p in prefixes)
        restart.save(3, writer(b'w3'))
        assert [read_back(restart, p) for p in restart.checkpoints()] == [b'w3']
        assert len(tops(location)) == 2


def test_runs_sharing_a_bucket_never_touch_each_other(s3_bucket):
    a = Watched(f'{s3_bucket}/run1/checkpoint', max_to_keep=1)
    b = ObjectCheckpointStore(f'{s3_bucket}/run10/checkpoint', max_to_keep=1)
    b.save(1, writer(b'b1'))
    stray = resolve(f'{s3_bucket}/run1/notes.txt')   # not the store's: left alone
    stray.fs.pipe_file(stray.path, b'mine')
    a.stop_at = 4                     # an upload of run1's save never finishes
    with pytest.raises(Interrupted):
        a.save(1, writer(b'a1'))
    a.stop_at = 0
    for step in (2, 3):
        a.save(step, writer(f'a{step}'.encode()))
        b.save(step, writer(f'b{step}'.encode()))
    # run1's recovery and pruning removed run1's leftovers only
    assert [read_back(a, p) for p in a.checkpoints()] == [b'a3']
    assert [read_back(b, p) for p in b.checkpoints()] == [b'b3']
    assert stray.fs.cat(stray.path) == b'mine'
    assert [t.split('.')[0] for t in tops(resolve(f'{s3_bucket}/run10/checkpoint'))] == \
        ['checkpoint', 'checkpoint_index']


def test_a_second_writer_of_one_folder_fails_instead_of_losing_an_update(s3_bucket):
    url = f'{s3_bucket}/shared/checkpoint'
    first = Watched(url)
    second = ObjectCheckpointStore(url)
    first.save(1, writer(b'x1'))
    # the other process writes the index after `first` read it, before `first` writes it
    first.before['index'] = lambda: second.save(5, writer(b'y5'))
    with pytest.raises(StoreConflictError, match='two writers share one checkpoint folder'):
        first.save(2, writer(b'x2'))
    # the other writer's index stands (it counted the checkpoint committed before it)
    listed = json.loads(resolve(url).fs.cat(resolve(url).join(INDEX_FILE).path))
    assert listed['checkpoints'] == ['checkpoint.dat-1', 'checkpoint.dat-2', 'checkpoint.dat-5']


def test_memory_store_without_conditional_writes():
    store = open_store('memory://tfsnippet-tests/store/checkpoint', max_to_keep=1)
    store.recover()
    for step in (1, 2):
        store.save(step, writer(f'm{step}'.encode()))
    assert [read_back(store, p) for p in store.checkpoints()] == [b'm2']
    resolve(store.save_dir).fs.rm(resolve(store.save_dir).path, recursive=True)


def test_a_checkpoint_whose_file_is_damaged_is_refused_on_download(s3_bucket):
    url = f'{s3_bucket}/damaged/checkpoint'
    store = ObjectCheckpointStore(url)
    store.save(1, writer(b'good'))
    location = resolve(url)
    prefix = tops(location)[0]
    location.fs.pipe_file(location.join(prefix, 'weights.bin').path, b'truncated!')
    with pytest.raises(FileNotFoundError, match='is damaged'):
        with store.local_copy(store.latest()):
            pass
