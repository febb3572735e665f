"""Asynchronous checkpoint saves (``checkpoint_async=True``).

The tests taking ``style`` run in both TF styles (in graph style the state
is copied with one ``session.run`` and a background thread writes it
through its own private graph and session); the rest in eager mode.

* The files of an asynchronous save are byte for byte those of a
  synchronous one, and hold the state *at the save* (variables, the loop's
  counters and DataFlow position, the objects' states), though the step
  after it changes them all while the write runs.
* A failed background write is raised at the next step boundary, naming
  ``checkpoint_dir``; the earlier checkpoints are intact.
* One save in flight: the next one waits (back-pressure, counted); leaving
  the loop, normally, through an exception and by preemption, waits for
  the last one.

A "slow disk" (the bundle writer of :mod:`tfsnippet.scaffold.checkpoint.saver`
replaced by one that sleeps before writing) makes each background write
last long enough that a loop that did not wait would be seen not waiting.
"""

import os
import re
import signal
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint import io as ckpt_io
from tfsnippet.scaffold.checkpoint import saver as saver_module
from tfsnippet.scaffold.checkpoint.store import INDEX_FILE, CheckpointStore
from tfsnippet.scaffold.components.checkpointer import TrainingPreempted
from tests.helpers import checkpoint_path as ckpt
from tests.helpers import checkpoint_state as read_state
from tests.helpers.loops import Counter

# how long a slow-disk write lasts: far longer than what the loop does meanwhile
SLOW = 0.15
STEP_RE = re.compile(r'\.tmp-checkpoint\.dat-(\d+)-')


def step_of(prefix):
    """The step of the checkpoint whose variables are written at `prefix`."""
    return int(STEP_RE.search(prefix).group(1))


@pytest.fixture
def disk(monkeypatch):
    """Controls the background bundle writes: a log, a slow disk, failures."""
    class Disk:
        slow = 0.
        fail_steps = ()
        log = []

        def write(self, prefix, names, arrays):
            step = step_of(prefix)
            self.log.append(('write begins', step, threading.current_thread().name))
            if self.slow:
                time.sleep(self.slow)          # a slow disk, not a wait for something
            if step in self.fail_steps:
                raise OSError(28, 'No space left on device')
            real_write_bundle(prefix, names, arrays)
            self.log.append(('write ends', step))

    real_write_bundle = ckpt_io.write_bundle
    disk = Disk()
    disk.log = []
    monkeypatch.setattr(saver_module, 'write_bundle', disk.write)
    return disk


class Recorder(spt.CheckpointSavableObject):
    """Its state is a list that grows each step (the same list object)."""

    def __init__(self, log=None):
        self.seen = []
        self.log = log

    def get_state(self):
        if self.log is not None:
            self.log.append(('state taken', len(self.seen)))
        return {'seen': self.seen}

    def set_state(self, state):
        self.seen = list(state['seen'])


def store_of(root):
    return CheckpointStore(os.path.join(str(root), 'checkpoint'))


def complete_steps(root):
    return [int(p.rsplit('-', 1)[1]) for p in store_of(root).checkpoints()]


def train(style, root, asynchronous, max_epoch=2, stop_at=None, **kwargs):
    """Two epochs of 5 steps over a shuffled DataFlow, in a new run of `style`; `w`
    sums the batches in order.  Returns the loop, the lines and the values of
    ``w`` and ``big``."""
    with style.new_run():
        w = style.variable(np.zeros([3], np.float32), 'w')
        big = style.variable(np.zeros([300, 200], np.float32), 'big')
        update = style.fed(lambda x, step: (w.assign(w * 0.5 + tf.reduce_sum(x, axis=0)),
                                            big.assign_add(tf.fill(big.shape, step))),
                           [None, 3], [])
        recorder = Recorder()
        flow = spt.DataFlow.arrays([np.arange(30, dtype=np.float32).reshape(10, 3)],
                                   batch_size=2, shuffle=True, random_state=7)
        lines = []
        loop = spt.TrainLoop([w, big], max_epoch=max_epoch, checkpoint_dir=str(root),
                             checkpoint_step_freq=1, checkpoint_async=asynchronous,
                             checkpoint_save_objects={'recorder': recorder},
                             print_func=lines.append, show_eta=False, **kwargs)
        with loop:
            for _ in loop.iter_epochs():
                for step, (x,) in loop.iter_steps(flow):
                    if step == stop_at:
                        raise KeyboardInterrupt()
                    update(x, float(step))
                    recorder.seen.append(step)
        return loop, lines, (style.value(w), style.value(big))


# ------------------------------------------------------------ same result
def test_async_saves_write_the_files_of_sync_saves(style, tmp_path, disk):
    disk.slow = 0.03       # the next step changes everything while the write runs
    sync_loop, _, sync_vars = train(style, tmp_path / 'sync', asynchronous=False)
    async_loop, _, async_vars = train(style, tmp_path / 'async', asynchronous=True)
    steps = list(range(1, 11))
    assert complete_steps(tmp_path / 'sync') == complete_steps(tmp_path / 'async') == steps
    for step in steps:
        a, b = ckpt(tmp_path / 'sync', step), ckpt(tmp_path / 'async', step)
        for name in ('variables.index', 'variables.data-00000-of-00001'):
            with open(os.path.join(a, name), 'rb') as fa, open(os.path.join(b, name), 'rb') as fb:
                assert fa.read() == fb.read(), (step, name)
        # the state at the save, though the list kept growing during the write
        assert read_state(b)['objects']['recorder'] == {'seen': list(range(1, step + 1))}
        big = tf.train.load_variable(os.path.join(b, 'variables'), 'big')
        np.testing.assert_array_equal(big, np.full([300, 200], step * (step + 1) / 2))
    stats = async_loop.component('checkpointer').async_stats
    assert sync_loop.component('checkpointer').async_stats is None
    assert stats.saves == stats.written == 11 and stats.failed == 0   # 10 steps + the end
    np.testing.assert_array_equal(sync_vars[0], async_vars[0])

    # both resume from step 10 with the same values, read back from disk
    resumed = []
    for name in ('sync', 'async'):
        with style.new_run():
            w = style.variable(np.ones([3], np.float32), 'w')
            big = style.variable(np.ones([300, 200], np.float32), 'big')
            lines = []
            with spt.TrainLoop([w, big], max_epoch=2, checkpoint_dir=str(tmp_path / name),
                               checkpoint_async=True, print_func=lines.append,
                               checkpoint_save_objects={'recorder': Recorder()}) as loop:
                resumed.append((loop.step, style.value(w).tolist(),
                                float(style.value(big)[0, 0])))
        assert lines[0].startswith('Resume training: epoch 2, step 10, ')
    assert resumed[0] == resumed[1] == (10, sync_vars[0].tolist(), 55.)


def test_an_async_resume_mid_epoch_continues_the_dataflow(style, tmp_path):
    _, _, reference = train(style, tmp_path / 'reference', asynchronous=True)
    with pytest.raises(KeyboardInterrupt):
        train(style, tmp_path / 'run', asynchronous=True, stop_at=8)   # in epoch 2
    assert complete_steps(tmp_path / 'run') == list(range(1, 8))
    _, lines, resumed = train(style, tmp_path / 'run', asynchronous=True)
    assert lines[0].startswith('Resume training: epoch 2, step 7, ')
    # the same batches in the same order: `w` depends on the order
    np.testing.assert_array_equal(resumed[0], reference[0])
    np.testing.assert_array_equal(resumed[1], reference[1])
    assert complete_steps(tmp_path / 'run')[-1] == 10


# ------------------------------------------------------------ errors
def test_a_failed_background_write_is_raised_at_the_next_step(style, tmp_path, disk):
    disk.fail_steps = (3,)
    seen = []
    w = Counter(style)
    loop = spt.TrainLoop([w.var], max_epoch=1, checkpoint_dir=str(tmp_path), checkpoint_step_freq=1,
                         checkpoint_async=True, print_func=lambda s: None)
    with pytest.raises(spt.CheckpointWriteError) as info:
        with loop:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(10)):
                    w.step()
                    seen.append(step)
    assert str(info.value) == (
        f'Could not write the checkpoint of step 3 into `checkpoint_dir` {str(tmp_path)!r} in '
        f'the background (is the disk full or read-only?): OSError: [Errno 28] No space left '
        f'on device; the earlier checkpoints are intact')
    assert isinstance(info.value, RuntimeError) and info.value.step == 3
    assert isinstance(info.value.__cause__, OSError)
    assert seen == [1, 2, 3, 4]           # raised at the end of step 4, the next boundary
    assert complete_steps(tmp_path) == [1, 2]
    assert sorted(os.listdir(os.path.join(str(tmp_path), 'checkpoint'))) == sorted([
        INDEX_FILE, 'checkpoint.dat-1', 'checkpoint.dat-2'])
    assert tf.train.load_variable(os.path.join(ckpt(tmp_path, 2), 'variables'), 'w') == 2.


def test_a_failed_write_is_raised_at_a_step_without_a_save(tmp_path, disk):
    disk.fail_steps = (2,)
    seen = []
    w = tf.Variable(0., name='w')
    loop = spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(tmp_path), checkpoint_step_freq=2,
                         checkpoint_async=True, print_func=lambda s: None)
    with pytest.raises(spt.CheckpointWriteError, match=re.escape(
            f'Could not write the checkpoint of step 2 into `checkpoint_dir` '
            f'{str(tmp_path)!r} in the background')):
        with loop:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(10)):
                    seen.append(step)
                    if step == 3:    # let the failed write of step 2 end first
                        for thread in threading.enumerate():
                            if thread.name == 'tfsnippet-checkpoint-2':
                                thread.join()
    assert seen == [1, 2, 3]
    assert complete_steps(tmp_path) == []


def test_a_failed_last_write_is_raised_when_the_loop_is_left(tmp_path, disk):
    disk.fail_steps = (2,)
    w = tf.Variable(0., name='w')
    loop = spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(tmp_path), checkpoint_step_freq=1,
                         checkpoint_async=True, print_func=lambda s: None)
    with pytest.raises(spt.CheckpointWriteError, match='checkpoint of step 2 into'):
        with loop:
            for _ in loop.iter_epochs():
                for _ in loop.iter_steps(range(2)):
                    w.assign_add(1.)
    assert complete_steps(tmp_path) == [1]


def test_a_failed_write_does_not_hide_the_exception_leaving_the_loop(tmp_path, disk):
    disk.fail_steps = (2,)
    disk.slow = SLOW
    w = tf.Variable(0., name='w')
    loop = spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(tmp_path), checkpoint_step_freq=1,
                         checkpoint_async=True, print_func=lambda s: None)
    with pytest.warns(RuntimeWarning, match='checkpoint of step 2 into `checkpoint_dir`'):
        with pytest.raises(ValueError, match='^the user code failed$'):
            with loop:
                for _ in loop.iter_epochs():
                    for step, _ in loop.iter_steps(range(5)):
                        if step == 3:
                            raise ValueError('the user code failed')
    assert complete_steps(tmp_path) == [1]


# ------------------------------------------------------------ waiting
def test_a_save_waits_for_the_previous_one(tmp_path, disk):
    disk.slow = SLOW
    recorder = Recorder(disk.log)
    w = tf.Variable(0., name='w')
    loop = spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(tmp_path), checkpoint_step_freq=1,
                         checkpoint_async=True, checkpoint_save_objects={'r': recorder},
                         print_func=lambda s: None)
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(3)):
                recorder.seen.append(step)
        stats = loop.component('checkpointer').async_stats
    # each state is taken after the previous write ended, in the loop's thread
    assert [entry[:2] for entry in disk.log] == [
        ('state taken', 1), ('write begins', 1), ('write ends', 1),
        ('state taken', 2), ('write begins', 2), ('write ends', 2),
        ('state taken', 3), ('write begins', 3), ('write ends', 3),
        ('state taken', 3), ('write begins', 3), ('write ends', 3)]
    assert {entry[2] for entry in disk.log if entry[0] == 'write begins'} == {
        'tfsnippet-checkpoint-1', 'tfsnippet-checkpoint-2', 'tfsnippet-checkpoint-3'}
    assert stats.saves == stats.written == 4
    assert stats.waits == 3 and stats.wait_seconds >= 3 * SLOW * 0.5
    assert stats.max_blocked_seconds >= SLOW * 0.5
    assert stats.summary().startswith('4 asynchronous checkpoint saves: the loop waited ')


def test_leaving_the_loop_waits_for_the_last_save(style, tmp_path, disk):
    disk.slow = SLOW
    w = Counter(style)
    loop = spt.TrainLoop([w.var], max_epoch=1, checkpoint_dir=str(tmp_path),
                         checkpoint_step_freq=2, checkpoint_async=True, print_func=lambda s: None)
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                w.step()
        assert complete_steps(tmp_path) == []      # the write of step 2 is under way
        w.step()        # after the step loop: the exit saves step 2 again
    assert complete_steps(tmp_path) == [2]
    assert not any(t.name.startswith('tfsnippet-checkpoint-') for t in threading.enumerate())
    assert tf.train.load_variable(os.path.join(ckpt(tmp_path, 2), 'variables'), 'w') == 3.
    stats = loop.component('checkpointer').async_stats
    assert (stats.saves, stats.written, stats.waits) == (2, 2, 1)


def test_leaving_through_an_exception_waits_for_the_last_save(tmp_path, disk):
    disk.slow = SLOW
    w = tf.Variable(0., name='w')
    loop = spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(tmp_path), checkpoint_step_freq=1,
                         checkpoint_async=True, print_func=lambda s: None)
    with pytest.raises(KeyboardInterrupt):
        with loop:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(5)):
                    w.assign_add(1.)
                    if step == 3:
                        raise KeyboardInterrupt()
    assert complete_steps(tmp_path) == [1, 2]
    w.assign(-1.)
    lines = []
    with spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(tmp_path),
                       print_func=lines.append) as loop:
        assert (loop.step, float(w.numpy())) == (2, 2.)


def test_preemption_waits_for_its_save_before_saying_so(tmp_path, disk):
    disk.slow = SLOW
    w = tf.Variable(0., name='w')
    said = []

    def say(line):
        said.append((line, complete_steps(tmp_path)))

    loop = spt.TrainLoop([w], max_epoch=2, checkpoint_dir=str(tmp_path), checkpoint_async=True,
                         print_func=say, show_eta=False)
    with pytest.raises(TrainingPreempted):
        with loop:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(4)):
                    w.assign_add(1.)
                    if step == 3:
                        os.kill(os.getpid(), signal.SIGTERM)
    line, complete = said[-1]
    assert line.startswith(f'Preempted by SIGTERM at epoch 1, step 3: saved checkpoint '
                           f'{ckpt(tmp_path, 3)}; exiting with status 143')
    assert complete == [3]                 # written when the line was printed
    assert tf.train.load_variable(os.path.join(ckpt(tmp_path, 3), 'variables'),
                                  'w') == 3.


def test_make_checkpoint_returns_the_path_and_wait_waits(tmp_path, disk):
    disk.slow = SLOW
    w = tf.Variable(5., name='w')
    with spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(tmp_path), checkpoint_async=True,
                       print_func=lambda s: None) as loop:
        path = loop.make_checkpoint()
        assert path == ckpt(tmp_path, 0)
        w.assign(6.)                       # after the copy: not in the checkpoint
        assert complete_steps(tmp_path) == []
        loop.component('checkpointer').wait()
        assert complete_steps(tmp_path) == [0]
    assert tf.train.load_variable(os.path.join(path, 'variables'), 'w') == 5.


# ------------------------------------------------------------ the saver alone
def test_an_async_saver_raises_a_failed_save_at_the_next_save(tmp_path, disk):
    disk.fail_steps = (2,)
    v = tf.Variable([1., 2.], name='v')
    saver = spt.CheckpointSaver([v], str(tmp_path), asynchronous=True)
    assert saver.asynchronous and saver.async_stats.saves == 0
    saver.save(1)
    saver.save(2)
    with pytest.raises(spt.CheckpointWriteError, match=re.escape(
            f'The asynchronous save of the checkpoint of step 2 into {str(tmp_path)!r} failed: '
            f'OSError: [Errno 28] No space left on device; the earlier checkpoints are intact')):
        saver.save(3)
    assert [os.path.basename(p) for p in saver.checkpoints()] == ['checkpoint.dat-1']
    saver.save(3)                          # raised once: the next save is taken
    saver.wait()
    assert [os.path.basename(p) for p in saver.checkpoints()] == [
        'checkpoint.dat-1', 'checkpoint.dat-3']
    stats = saver.async_stats
    assert (stats.saves, stats.written, stats.failed) == (3, 2, 1)


@pytest.mark.parametrize('make,error,message', [
    (lambda d: spt.TrainLoop(checkpoint_dir=d, checkpoint_async='yes'), TypeError,
     "`checkpoint_async` must be True or False, got 'yes'"),
    (lambda d: spt.TrainLoop(checkpoint_async=True), ValueError,
     'The `checkpoint_*` options need `checkpoint_dir`; `checkpoint_async` was given without it'),
    (lambda d: spt.TrainLoop(checkpoint_async=1), TypeError,
     '`checkpoint_async` must be True or False, got 1'),
    (lambda d: spt.CheckpointSaver([], d, asynchronous=None), TypeError,
     '`asynchronous` must be True or False, got None'),
], ids=['loop-str', 'loop-no-dir', 'loop-int', 'saver'])
def test_argument_errors(tmp_path, make, error, message):
    with pytest.raises(error, match=f'^{re.escape(message)}$'):
        make(str(tmp_path))


def test_write_bundle_checks_its_arguments(tmp_path):
    with pytest.raises(ValueError, match='^`names` and `arrays` must have the same length, '
                                         'got 2 and 1$'):
        ckpt_io.write_bundle(str(tmp_path / 'x'), ['a', 'b'], [np.zeros(2)])
    ckpt_io.write_bundle(str(tmp_path / 'x'), ['a', 's'],
                         [np.arange(3, dtype=np.int64), np.array([b'x', b'yz'], dtype=object)])
    assert tf.train.load_variable(str(tmp_path / 'x'), 'a').tolist() == [0, 1, 2]
    assert tf.train.load_variable(str(tmp_path / 'x'), 's').tolist() == [b'x', b'yz']
