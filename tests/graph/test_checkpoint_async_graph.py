"""Asynchronous checkpoint saves (``checkpoint_async=True``) in graph mode.

The state is copied with one ``session.run`` of the variables; a background
thread writes the same files a synchronous save writes (through its own
private graph and session), so restoring works unchanged.  A failed write
is raised at the next step boundary, naming ``checkpoint_dir``; leaving the
loop waits for the last save.
"""

import os
import re
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint import io as ckpt_io
from tfsnippet.scaffold.checkpoint import saver as saver_module
from tfsnippet.scaffold.checkpoint.store import CheckpointStore
from tests.helpers import checkpoint_path as ckpt

v1 = tf.compat.v1
SLOW = 0.15
STEP_RE = re.compile(r'\.tmp-checkpoint\.dat-(\d+)-')


@pytest.fixture
def disk(monkeypatch):
    """A slow or failing disk for the background bundle writes."""
    class Disk:
        slow = 0.
        fail_steps = ()

        def write(self, prefix, names, arrays):
            if self.slow:
                time.sleep(self.slow)          # a slow disk, not a wait for something
            if int(STEP_RE.search(prefix).group(1)) in self.fail_steps:
                raise OSError(28, 'No space left on device')
            real_write_bundle(prefix, names, arrays)

    real_write_bundle = ckpt_io.write_bundle
    disk = Disk()
    monkeypatch.setattr(saver_module, 'write_bundle', disk.write)
    return disk


def complete_steps(root):
    store = CheckpointStore(os.path.join(str(root), 'checkpoint'))
    return [int(p.rsplit('-', 1)[1]) for p in store.checkpoints()]


def build():
    """`w` sums the batches it is fed, halving first; `big` adds the step."""
    x = v1.placeholder(tf.float32, [None, 3])
    step_in = v1.placeholder(tf.float32, [])
    w = v1.get_variable('w', initializer=np.zeros([3], np.float32))
    big = v1.get_variable('big', initializer=np.zeros([300, 200], np.float32))
    train_op = tf.group(v1.assign(w, w * 0.5 + tf.reduce_sum(x, axis=0)),
                        v1.assign_add(big, tf.fill([300, 200], step_in)))
    return x, step_in, w, big, train_op


def train(graph, root, asynchronous, stop_at=None):
    with graph.as_default():
        x_in, step_in, w, big, train_op = build()
        session = v1.Session(graph=graph)
        with session.as_default():
            session.run(v1.global_variables_initializer())
            flow = spt.DataFlow.arrays([np.arange(30, dtype=np.float32).reshape(10, 3)],
                                       batch_size=2, shuffle=True, random_state=7)
            lines = []
            loop = spt.TrainLoop([w, big], max_epoch=2, checkpoint_dir=str(root),
                                 checkpoint_step_freq=1, checkpoint_async=asynchronous,
                                 print_func=lines.append, show_eta=False)
            with loop:
                for _ in loop.iter_epochs():
                    for step, (x,) in loop.iter_steps(flow):
                        if step == stop_at:
                            raise KeyboardInterrupt()
                        session.run(train_op, feed_dict={x_in: x, step_in: float(step)})
            return loop, lines, session.run([w, big])


def test_async_saves_write_the_files_of_sync_saves_and_resume(tmp_path):
    train(tf.Graph(), tmp_path / 'sync', asynchronous=False)
    _, _, reference = train(tf.Graph(), tmp_path / 'async', asynchronous=True)
    assert complete_steps(tmp_path / 'sync') == complete_steps(tmp_path / 'async') == list(
        range(1, 11))
    for step in range(1, 11):
        a, b = ckpt(tmp_path / 'sync', step), ckpt(tmp_path / 'async', step)
        for name in ('variables.index', 'variables.data-00000-of-00001', 'state.npz'):
            with open(os.path.join(a, name), 'rb') as fa, open(os.path.join(b, name), 'rb') as fb:
                assert fa.read() == fb.read(), (step, name)
        big = tf.train.load_variable(os.path.join(b, 'variables'), 'big')
        np.testing.assert_array_equal(big, np.full([300, 200], step * (step + 1) / 2))

    # killed (KeyboardInterrupt) in epoch 2, resumed: the same values as one run
    with pytest.raises(KeyboardInterrupt):
        train(tf.Graph(), tmp_path / 'run', asynchronous=True, stop_at=8)
    assert complete_steps(tmp_path / 'run') == list(range(1, 8))
    _, lines, resumed = train(tf.Graph(), tmp_path / 'run', asynchronous=True)
    assert lines[0].startswith('Resume training: epoch 2, step 7, ')
    np.testing.assert_array_equal(resumed[0], reference[0])
    np.testing.assert_array_equal(resumed[1], reference[1])


def test_a_failed_background_write_is_raised_at_the_next_step(graph, session, tmp_path, disk):
    disk.fail_steps = (3,)
    w = v1.get_variable('w', initializer=0.)
    add = v1.assign_add(w, 1.)
    session.run(w.initializer)
    seen = []
    loop = spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(tmp_path), checkpoint_step_freq=1,
                         checkpoint_async=True, print_func=lambda s: None)
    with pytest.raises(spt.CheckpointWriteError) as info:
        with loop:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(10)):
                    session.run(add)
                    seen.append(step)
    assert str(info.value) == (
        f'Could not write the checkpoint of step 3 into `checkpoint_dir` {str(tmp_path)!r} in '
        f'the background (is the disk full or read-only?): OSError: [Errno 28] No space left '
        f'on device; the earlier checkpoints are intact')
    assert seen == [1, 2, 3, 4]
    assert complete_steps(tmp_path) == [1, 2]
    assert not [n for n in os.listdir(os.path.join(str(tmp_path), 'checkpoint'))
                if n.startswith('.')]
    assert tf.train.load_variable(os.path.join(ckpt(tmp_path, 2), 'variables'), 'w') == 2.


def test_leaving_the_loop_waits_for_the_last_save(graph, session, tmp_path, disk):
    disk.slow = SLOW
    w = v1.get_variable('w', initializer=0.)
    add = v1.assign_add(w, 1.)
    session.run(w.initializer)
    loop = spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(tmp_path), checkpoint_step_freq=2,
                         checkpoint_async=True, print_func=lambda s: None)
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                session.run(add)
        assert complete_steps(tmp_path) == []      # the write of step 2 is under way
        session.run(add)        # after the step loop: the exit saves step 2 again
    assert complete_steps(tmp_path) == [2]
    assert not any(t.name.startswith('tfsnippet-checkpoint-') for t in threading.enumerate())
    assert tf.train.load_variable(os.path.join(ckpt(tmp_path, 2), 'variables'), 'w') == 3.
    stats = loop.component('checkpointer').async_stats
    assert (stats.saves, stats.written, stats.waits) == (2, 2, 1)
