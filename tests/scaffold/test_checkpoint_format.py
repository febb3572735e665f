"""A checkpoint is data, never code (the tests taking ``style`` in both TF styles,
the rest in eager mode; tests/graph/test_checkpoint_format_graph.py has what
is graph-only).

* every file of a checkpoint tfsnippet writes is data: no pickle stream, and
  ``state.npz`` reads with ``numpy.load(allow_pickle=False)``;
* every kind of state round-trips exactly, with its types: counters,
  DataFlow positions with ``RandomState`` and ``Generator`` states, early
  stopping, ReduceOnPlateau, user objects, asynchronous saves;
* a state that is not plain data is refused at the save, naming the object
  and the path, and nothing is written;
* a legacy ``state.pkl`` whose payload writes a marker file is neither run
  nor silently passed over by a resume or ``warm_start``, unless the user
  trusts it (``TFSNIPPET_TRUST_PICKLE=1`` or ``trust_pickle=True``); the
  converter rewrites it into the current format.
"""

import copy
import math
import os
import pickle
import re
import zipfile

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint import (CheckpointError, UntrustedCheckpointError,
                                           convert_legacy_checkpoints)
from tfsnippet.scaffold.checkpoint import state_format
from tfsnippet.scaffold.checkpoint.__main__ import main as checkpoint_cli
from tfsnippet.scaffold.checkpoint.state_format import decode_state, encode_state, read_state
from tests.helpers import Style
from tests.helpers.loops import Counter

EAGER = Style('eager')

TRUST_ENV = 'TFSNIPPET_TRUST_PICKLE'


# ---------------------------------------------------------------- helpers
def write_marker(path):
    """What the malicious payload runs: it leaves `path` behind."""
    with open(path, 'w') as f:
        f.write('the pickle ran')


class Payload:
    """Unpickled, it writes a marker file (what an attacker's os.system would do)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return write_marker, (self.marker,)


def make_legacy(checkpoint, marker):
    """Turn a checkpoint into one of an earlier tfsnippet: its real state, pickled,
    with a payload that writes `marker` when the pickle is loaded."""
    saved = read_state(checkpoint)
    legacy = {'format': 1, 'step': saved['step'], 'variables': saved['variables'],
              'objects': saved['objects'], 'payload': Payload(marker)}
    with open(os.path.join(checkpoint, 'state.pkl'), 'wb') as f:
        pickle.dump(legacy, f)
    os.remove(os.path.join(checkpoint, 'state.npz'))


def same(a, b, path='state'):
    """`a` and `b` are equal and of the same types all the way down (arrays: dtype,
    shape, memory order and bytes; floats: bit patterns, so NaN and -0.0 count)."""
    assert type(a) is type(b), f'{path}: {type(a).__name__} vs {type(b).__name__}'
    if isinstance(a, dict):
        assert list(a) == list(b), path
        for key in a:
            same(a[key], b[key], f'{path}[{key!r}]')
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f'{path}[{i}]')
    elif isinstance(a, np.ndarray):
        assert (a.dtype, a.shape, np.isfortran(a)) == (b.dtype, b.shape, np.isfortran(b)), path
        assert a.tobytes() == b.tobytes(), path
    elif isinstance(a, np.generic):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), path
    elif isinstance(a, float):
        assert a.hex() == b.hex() or (math.isnan(a) and math.isnan(b)), path
    else:
        assert a == b, path


def round_trip(objects):
    encoded = encode_state(7, {'v': 'dense/kernel'}, objects)
    saved = decode_state(encoded.to_bytes())
    assert (saved['step'], saved['variables']) == (7, {'v': 'dense/kernel'})
    return saved['objects']


def checkpoint_files(root):
    for directory, _, files in os.walk(str(root)):
        for name in files:
            yield os.path.join(directory, name)


def assert_no_pickle(root):
    files = list(checkpoint_files(root))
    assert any(f.endswith('state.npz') for f in files)
    for path in files:
        with open(path, 'rb') as f:
            assert f.read(1) != b'\x80', f'{path} is a pickle stream'
        if path.endswith('state.npz'):
            with np.load(path, allow_pickle=False) as npz:   # every member reads without pickle
                for name in npz.files:
                    assert npz[name].dtype != object


class Recorder(spt.CheckpointSavableObject):
    def __init__(self):
        self.seen = []

    def get_state(self):
        return {'seen': list(self.seen), 'last': self.seen[-1] if self.seen else None}

    def set_state(self, state):
        self.seen = list(state['seen'])


def shuffled_flow(kind):
    """A shuffled flow whose position holds a RandomState's or a Generator's state."""
    x = np.arange(40, dtype=np.float32)
    rng = 3 if kind == 'RandomState' else np.random.default_rng(11)
    return spt.DataFlow.arrays([x], batch_size=4, shuffle=True, random_state=rng)


VALID = [0.5, 0.75, 0.25]


def run_loop(root, flow, lines, max_epoch=3, checkpoint_at=None, style=EAGER, **kwargs):
    """Train `max_epoch` epochs of 10 steps with early stopping, ReduceOnPlateau, a
    LossGuard and a user object, in a new run of `style`; at step `checkpoint_at`
    make a checkpoint and take the states of that moment.  Returns ``(w, what was
    taken)``, ``w`` the final value of the variable that gains 1 per step."""
    with style.new_run():
        w, lr, recorder = Counter(style), style.variable(1., 'lr'), Recorder()
        objects = {'recorder': recorder}
        if not style.is_graph:          # in graph style every global variable is saved
            objects['lr'] = lr
        loop = spt.TrainLoop([w.var], max_epoch=max_epoch, checkpoint_dir=str(root),
                             checkpoint_epoch_freq=1, early_stopping=True,
                             checkpoint_save_objects=objects, show_eta=False,
                             print_func=lines.append, **kwargs)
        loop.add_component(spt.ReduceOnPlateau(lr, factor=.5, patience=1))
        loop.add_component(spt.LossGuard('loss', action='stop'))
        taken = {}
        with loop:
            for epoch in loop.iter_epochs():
                for _, (a,) in loop.iter_steps(flow):
                    recorder.seen.append(float(a.sum()))
                    w.step()
                    loop.collect_metrics(loss=float(a.mean()))
                    if loop.step == checkpoint_at:
                        taken['path'] = loop.make_checkpoint()
                        # a copy: the early-stopping snapshot is a host buffer written in place
                        taken['loop'] = copy.deepcopy(loop.state_dict())
                        taken['recorder'] = recorder.get_state()
                loop.collect_metrics(valid_loss=VALID[epoch - 1])
        taken['lr'] = float(style.value(lr))
        taken['seen'] = list(recorder.seen)
        return w.value(), taken


# ---------------------------------------------------------------- the format
def test_every_kind_of_plain_value_round_trips_exactly():
    rs = np.random.RandomState(5)
    rs.normal()   # has_gauss = 1
    state = {
        'ints': [0, -1, 2 ** 70, -(2 ** 64) - 3, True, False],
        'floats': [0.1, -0.0, 1e308, 5e-324, float('nan'), float('inf'), -float('inf')],
        'text': ['', 'naïve ✓', '$dollar', '{"json": 1}'],
        'none': None,
        'nested': {'$$train_loop': {'$array': 1, '$tuple': [2]}, '': [[], {}, ()]},
        'tuple': (1, 'a', (2.5, None), [3]),
        'numpy scalars': [np.float32(1.5), np.int64(-3), np.bool_(True), np.float16(0.1),
                          np.uint8(255), np.str_('s')],
        'arrays': [np.arange(6, dtype=np.int32).reshape(2, 3), np.zeros([0, 4], np.float64),
                   np.asfortranarray(np.arange(12.).reshape(3, 4)), np.array(2.5),
                   np.array([True, False]), np.array(['ab', 'c']), np.arange(10)[::3],
                   np.array([1 + 2j], np.complex64)],
        'random state': rs.get_state(legacy=False),
        'generators': [np.random.Generator(bg(9)).bit_generator.state
                       for bg in (np.random.PCG64, np.random.MT19937, np.random.Philox,
                                  np.random.SFC64, np.random.PCG64DXSM)],
    }
    got = round_trip({'obj': state, '$$train_loop': {'loop': {'step': 3}}})
    same(got, {'obj': state, '$$train_loop': {'loop': {'step': 3}}})
    # the states put back make the same numbers
    rs2 = np.random.RandomState()
    rs2.set_state(got['obj']['random state'])
    assert rs2.normal() == rs.normal()
    gen = np.random.Generator(np.random.Philox())
    gen.bit_generator.state = got['obj']['generators'][2]
    assert gen.random() == np.random.Generator(np.random.Philox(9)).random()


def test_arrays_are_copied_at_encoding():
    a = np.zeros(3)
    data = encode_state(1, {}, {'obj': {'a': a}}).to_bytes()
    a[:] = 5.
    assert decode_state(data)['objects']['obj']['a'].tolist() == [0., 0., 0.]


def test_the_file_is_an_npz_with_a_json_structure(tmp_path):
    state_format.write_state_file(str(tmp_path), encode_state(
        4, {'w': 'w'}, {'obj': {'a': np.arange(3), 'n': 1}}))
    with np.load(str(tmp_path / 'state.npz'), allow_pickle=False) as npz:
        assert sorted(npz.files) == ['__state__', 'a0']
        import json
        structure = json.loads(npz['__state__'].tobytes())
        assert npz['a0'].tolist() == [0, 1, 2]
    assert structure == {'format': 'tfsnippet-checkpoint-state', 'version': 2, 'step': 4,
                         'variables': {'w': 'w'},
                         'objects': {'obj': {'a': {'$array': 0}, 'n': 1}}}


@pytest.mark.parametrize('state,where', [
    ({'s': {1, 2}}, "state['s'] is a set"),
    ({'deep': [{'x': [0, b'raw']}]}, "state['deep'][0]['x'][1] is a bytes"),
    ({'k': {3: 'three'}}, "state['k'] has the key 3, a int (keys must be str)"),
    ({'o': np.array([object()], dtype=object)}, "state['o'] is an array of object dtype"),
    ({'m': np.ma.masked_array([1, 2])}, "state['m'] is an array subclass MaskedArray"),
    ({'t': (1, Payload('x'))}, "state['t'][1] is a test_checkpoint_format.Payload"),
])
def test_a_state_that_is_not_plain_data_is_refused(state, where):
    with pytest.raises(TypeError) as info:
        encode_state(1, {}, {'first': {'ok': 1}, 'user/obj': state})
    message = str(info.value)
    assert message.startswith("The checkpoint state of 'user/obj' is not plain data: ")
    assert where in message.replace('tests.scaffold.', '')
    assert 'A checkpoint state may hold only None, bool, int, float, str' in message


def edited(old, new):
    """A state file whose JSON structure has `old` replaced by `new`."""
    def damage(encoded):
        return state_format.EncodedState(encoded.structure.replace(old, new),
                                         encoded.arrays).to_bytes()
    return damage


@pytest.mark.parametrize('damage,reason', [
    (lambda encoded: encoded.to_bytes()[:40], 'Cannot read the checkpoint state '),
    (lambda encoded: encoded.to_bytes()[:-30] + b'x' * 30, 'Cannot read the checkpoint state '),
    (edited(b'"version":2', b'"version":9'), 'its format version 9 is newer than this '
                                             'tfsnippet reads (2): upgrade tfsnippet'),
    (edited(b'"$array":0', b'"$array":5'), 'it refers to an array 5 that it does not hold'),
    (edited(b'"a":{', b'"a":{"$what":1,'), "it holds an unknown marker '$what'"),
    (edited(b'tfsnippet-checkpoint-state', b'something-else'), 'its structure is not a'),
], ids=['truncated', 'crc', 'newer', 'array', 'marker', 'format'])
def test_a_damaged_or_newer_state_file_is_a_checkpoint_error(damage, reason):
    encoded = encode_state(1, {}, {'obj': {'a': np.zeros(2)}})
    with pytest.raises(CheckpointError, match=re.escape(reason)):
        decode_state(damage(encoded))


def test_an_npz_holding_a_pickled_array_is_not_loaded(tmp_path):
    """A state.npz crafted with an object array (a pickle inside): refused, not run."""
    marker = tmp_path / 'marker'
    path = tmp_path / 'state.npz'
    with zipfile.ZipFile(str(path), 'w') as zf:
        with zf.open('__state__.npy', 'w') as f:
            np.lib.format.write_array(f, np.frombuffer(
                b'{"format":"tfsnippet-checkpoint-state","version":2,"step":1,'
                b'"variables":{},"objects":{"o":{"$array":0}}}', np.uint8))
        with zf.open('a0.npy', 'w') as f:
            np.lib.format.write_array(f, np.array([Payload(marker)], dtype=object),
                                      allow_pickle=True)
    with pytest.raises(CheckpointError, match="its member 'a0' holds pickled objects, which a "
                                              "state never holds \\(not loaded\\)$"):
        read_state(str(tmp_path))
    assert not marker.exists()


# ---------------------------------------------------------------- in the loop
@pytest.mark.parametrize('asynchronous', [False, True], ids=['sync', 'async'])
@pytest.mark.parametrize('kind', ['RandomState', 'Generator'])
def test_the_loop_state_round_trips_exactly_and_no_file_is_a_pickle(style, tmp_path, kind,
                                                                     asynchronous, fake_clock):
    # a fake clock: the epoch's elapsed time is part of the state, and must not tick
    # between the save and the copy taken after it
    _, taken = run_loop(tmp_path, shuffled_flow(kind), [], checkpoint_at=13, style=style,
                        checkpoint_async=asynchronous, clock=fake_clock)
    saved = read_state(taken['path'])['objects']
    loop_state = taken['loop']
    # what the loop holds inside epoch 2: a flow position with its generator's state,
    # early stopping with its snapshot, ReduceOnPlateau's monitor
    assert loop_state['dataflows'][0]['served'] == 3
    start = loop_state['dataflows'][0]['start']
    assert start['bit_generator'] == ('MT19937' if kind == 'RandomState' else 'PCG64')
    components = loop_state['components']
    assert any(c.get('snapshot') is not None for c in components.values())
    assert any('cooling' in c for c in components.values())
    same(saved['$$train_loop']['loop'], loop_state)
    same(saved['recorder'], taken['recorder'])
    assert_no_pickle(tmp_path)


@pytest.mark.parametrize('kind', ['RandomState', 'Generator'])
def test_a_resume_from_the_new_format_continues_exactly(style, tmp_path, kind):
    lines = []
    want_w, want = run_loop(tmp_path / 'whole', shuffled_flow(kind), lines, style=style)
    run_loop(tmp_path / 'cut', shuffled_flow(kind), [], max_epoch=2, style=style)
    lines = []
    got_w, got = run_loop(tmp_path / 'cut', shuffled_flow(kind), lines, style=style)
    assert lines[0].startswith('Resume training: epoch 2, step 20, from checkpoint ')
    assert (got_w, got['lr'], got['seen']) == (want_w, want['lr'], want['seen'])


def test_a_refused_state_writes_nothing(tmp_path):
    class Odd(spt.CheckpointSavableObject):
        def get_state(self):
            return {'fine': [1, 2], 'seen': {'a', 'b'}}

        def set_state(self, state):
            pass

    w = tf.Variable(0., name='w')
    saver = spt.CheckpointSaver([w], str(tmp_path / 'ckpt'), objects={'odd': Odd()})
    with pytest.raises(TypeError, match=re.escape(
            "The checkpoint state of 'odd' is not plain data: state['seen'] is a set")):
        saver.save(1)
    assert saver.checkpoints() == []
    assert not os.path.exists(tmp_path / 'ckpt') or not [
        n for n in os.listdir(tmp_path / 'ckpt') if n.startswith('checkpoint.dat')]


# ---------------------------------------------------------------- legacy checkpoints
def legacy_run(tmp_path, style=EAGER):
    """Two epochs saved, the newest checkpoint (step 20) turned into a malicious legacy one."""
    run_loop(tmp_path, shuffled_flow('RandomState'), [], max_epoch=2, style=style)
    marker = tmp_path / 'marker'
    make_legacy(str(tmp_path / 'checkpoint' / 'checkpoint.dat-20'), marker)
    return marker


def test_resume_neither_runs_nor_skips_an_untrusted_legacy_checkpoint(style, tmp_path,
                                                                      monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    marker = legacy_run(tmp_path, style)
    lines = []
    with pytest.raises(UntrustedCheckpointError) as info:
        run_loop(tmp_path, shuffled_flow('RandomState'), lines, style=style)
    message = str(info.value)
    assert 'checkpoint.dat-20' in message and 'it was not read' in message
    assert f'{TRUST_ENV}=1' in message
    assert 'python -m tfsnippet.scaffold.checkpoint convert' in message
    assert not marker.exists()
    assert not any(line.startswith('Resume training') for line in lines)   # not step 10 either


def test_resume_reads_a_legacy_checkpoint_with_the_trust_switch(style, tmp_path, monkeypatch):
    marker = legacy_run(tmp_path, style)
    want_w, want = run_loop(tmp_path / 'whole', shuffled_flow('RandomState'), [], style=style)
    monkeypatch.setenv(TRUST_ENV, '1')
    lines = []
    got_w, got = run_loop(tmp_path, shuffled_flow('RandomState'), lines, style=style)
    assert marker.exists()   # trusted: the pickle was loaded, payload and all
    assert lines[0] == (f'Resume training: epoch 2, step 20, from checkpoint '
                        f'{tmp_path / "checkpoint" / "checkpoint.dat-20"}')
    assert (got_w, got['lr'], got['seen']) == (want_w, want['lr'], want['seen'])
    assert not os.path.exists(tmp_path / 'checkpoint' / 'checkpoint.dat-20' / 'state.npz')
    assert_no_pickle(tmp_path / 'checkpoint' / 'checkpoint.dat-30')   # new saves: data


def test_warm_start_neither_runs_nor_skips_an_untrusted_legacy_checkpoint(style, tmp_path,
                                                                          monkeypatch):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    marker = legacy_run(tmp_path, style)
    target = style.variable(-1., 'w')
    for source in (tmp_path, tmp_path / 'checkpoint' / 'checkpoint.dat-20',
                   tmp_path / 'checkpoint' / 'checkpoint.dat-20' / 'variables.index'):
        with pytest.raises(UntrustedCheckpointError, match=re.escape(
                f'`trust_pickle=True` (spt.warm_start, CheckpointSaver.restore)')):
            spt.warm_start(str(source), [target], print_func=None)
    assert not marker.exists()
    assert style.value(target) == -1.

    report = spt.warm_start(str(tmp_path), [target], print_func=None, trust_pickle=True)
    assert report.restored == ['w'] and style.value(target) == 20.
    assert marker.exists()


def test_convert_rewrites_legacy_checkpoints(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv(TRUST_ENV, raising=False)
    marker = legacy_run(tmp_path)
    legacy = tmp_path / 'checkpoint' / 'checkpoint.dat-20'
    trusted = read_state(str(legacy), trust_pickle=True)
    os.remove(marker)

    assert checkpoint_cli(['convert', str(tmp_path)]) == 0
    assert capsys.readouterr().out == f'converted {legacy}\n1 legacy checkpoint converted\n'
    assert 'state.npz' in os.listdir(legacy) and 'state.pkl' not in os.listdir(legacy)
    assert_no_pickle(tmp_path / 'checkpoint')
    converted = read_state(str(legacy))
    same(converted['objects'], trusted['objects'])
    assert convert_legacy_checkpoints(str(tmp_path)) == []   # nothing left to convert

    lines = []
    want_w, _ = run_loop(tmp_path / 'whole', shuffled_flow('RandomState'), [])
    got_w, _ = run_loop(tmp_path, shuffled_flow('RandomState'), lines)
    assert lines[0].startswith('Resume training: epoch 2, step 20, from checkpoint ')
    assert got_w == want_w


def test_convert_names_a_legacy_state_that_is_not_plain_data(tmp_path, capsys):
    directory = tmp_path / 'checkpoint.dat-1'
    directory.mkdir()
    with open(str(directory / 'state.pkl'), 'wb') as f:
        pickle.dump({'format': 1, 'step': 1, 'variables': {}, 'objects': {'o': {'s': {1}}}}, f)
    assert checkpoint_cli(['convert', str(tmp_path)]) == 1
    assert capsys.readouterr().err == (
        f"error: Cannot convert the checkpoint {str(directory)!r}: The checkpoint state of 'o' "
        f"is not plain data: state['s'] is a set. A checkpoint state may hold only None, "
        f"bool, int, float, str, lists, tuples, dicts with str keys, numpy arrays and numpy "
        f"scalars (not of object dtype)\n")
    assert os.listdir(directory) == ['state.pkl']   # left as it was


def test_large_arrays_are_streamed_into_the_file_and_read_back(tmp_path):
    big = np.arange(300_000, dtype=np.float64).reshape(3000, 100)   # 2.4 MB: streamed
    state = {'snapshot': [big, np.asfortranarray(big[:, :7])], 'n': np.int32(4)}
    encoded = encode_state(3, {}, {'obj': state})
    state_format.write_state_file(str(tmp_path), encoded)
    same(read_state(str(tmp_path))['objects']['obj'], state)
    same(decode_state(encoded.to_bytes())['objects']['obj'], state)
