"""Asynchronous checkpoint saves in training processes killed by SIGKILL.

The child script trains for ``--steps`` steps over a shuffled DataFlow with
``checkpoint_async=True``, saving every step: ``w`` folds each batch into
an order-dependent hash (so a resume that serves other batches, or the same
ones in another order, ends elsewhere) and every element of ``big`` (1 MiB)
adds the step number.  It prints ``STEP k`` after the loop handed the save
of step k to its background writer (an ``AFTER_STEP`` handler registered
before the loop is entered runs after the loop's own), so the save of step
k - 1 was complete by then: one save is in flight at a time.  Each run is a
process forked from one that imported TensorFlow once (module fixture
``server``, `tests.helpers.forkserver.ForkServer`).

* Killed inside the background write of a chosen step (by a replaced
  ``os.fsync``, in the writer's thread, after the files were written and
  before any is fsynced), eager and graph: the next start resumes from the
  step before and ends as an uninterrupted run would.
* Killed at random instants, four times over 100 asynchronous saves (the
  first time inside a write for sure, as above, then right after the child
  handed the save of a random step to the writer):
  every start resumes from the newest complete checkpoint in the folder,
  which is never older than the last save known complete, with the values
  and DataFlow position of that step; the final result is that of an
  uninterrupted run (computed here by iterating the same DataFlow).
"""

import os
import signal
import subprocess
import threading

import numpy as np
import pytest

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint.store import INDEX_FILE, CheckpointStore

# how long a child may run before the test gives up on it (a guard, not a wait)
LIMIT = 120
MODULUS = 1000003

CHILD = r'''
import argparse
import os
import signal
import threading

parser = argparse.ArgumentParser()
parser.add_argument('checkpoint_dir')
parser.add_argument('--steps', type=int, required=True)
parser.add_argument('--graph', action='store_true')
parser.add_argument('--kill-in-write', type=int, default=0,
                    help='SIGKILL at the first fsync of the background write of this step')
args = parser.parse_args()

import numpy as np
import tensorflow as tf

if args.graph:
    tf.compat.v1.disable_eager_execution()
import tfsnippet as spt

v1 = tf.compat.v1


def say(line):
    print(line, flush=True)


if args.kill_in_write:
    real_fsync = os.fsync
    writer_thread = f'tfsnippet-checkpoint-{args.kill_in_write}'

    def fsync(fd):
        if threading.current_thread().name == writer_thread:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_fsync(fd)
    os.fsync = fsync

flow = spt.DataFlow.arrays([np.arange(40, dtype=np.int64)], batch_size=3, shuffle=True,
                           random_state=11)
if args.graph:
    x_in = v1.placeholder(tf.int64, [None])
    step_in = v1.placeholder(tf.float32, [])
    w = v1.get_variable('w', initializer=np.int64(0))
    big = v1.get_variable('big', initializer=np.zeros([512, 512], np.float32))
    train_op = tf.group(v1.assign(w, (w * 31 + tf.reduce_sum(x_in)) % MODULUS),
                        v1.assign_add(big, tf.fill([512, 512], step_in)))
    session = v1.Session()
    session.__enter__()
    session.run(v1.global_variables_initializer())
    values = lambda: tuple(session.run([w, big[0, 0]]))
    train_step = lambda step, x: session.run(train_op, {x_in: x, step_in: float(step)})
else:
    w = tf.Variable(np.int64(0), name='w')
    big = tf.Variable(np.zeros([512, 512], np.float32), name='big')

    def train_step(step, x):
        w.assign((w * 31 + int(x.sum())) % MODULUS)
        big.assign_add(tf.fill(big.shape, float(step)))

    values = lambda: (w.numpy(), big.numpy()[0, 0])

loop = spt.TrainLoop([w, big], max_step=args.steps, checkpoint_dir=args.checkpoint_dir,
                     checkpoint_step_freq=1, checkpoint_max_to_keep=3,
                     checkpoint_async=True, print_func=say, show_eta=False)
loop.events.on(spt.EventKeys.AFTER_STEP, lambda lp: say(f'STEP {lp.step}'))
with loop:
    w_value, big_value = values()
    say(f'ENTERED step={loop.step} w={int(w_value)} big={float(big_value)}')
    for _ in loop.iter_epochs():
        for step, (x,) in loop.iter_steps(flow):
            train_step(step, x)
w_value, big_value = values()
say(f'FINISHED w={int(w_value)} big={float(big_value)}')
'''


def reference(steps):
    """``w`` after each number of steps of an uninterrupted run (index 0: the start)."""
    flow = spt.DataFlow.arrays([np.arange(40, dtype=np.int64)], batch_size=3, shuffle=True,
                               random_state=11)
    out = [0]
    while len(out) <= steps:
        for (x,) in flow:
            out.append((out[-1] * 31 + int(x.sum())) % MODULUS)
            if len(out) > steps:
                break
    return out


def entered_line(w, step):
    return f'ENTERED step={step} w={w[step]} big={float(step * (step + 1) // 2)}'


def finished_line(w, steps):
    return f'FINISHED w={w[steps]} big={float(steps * (steps + 1) // 2)}'


ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', CUDA_VISIBLE_DEVICES='')


@pytest.fixture(scope='module')
def server(fork_server):
    """Forks each run from the session's process that imported TensorFlow (``fork_server``,
    tests/conftest.py)."""
    return fork_server


class Child:
    """One run of the script, a process forked by `server`; stdout is read line by line,
    stderr goes to a file."""

    def __init__(self, server, tmp_path, root, *options):
        script = tmp_path / 'train.py'
        if not script.exists():
            script.write_text(f'MODULUS = {MODULUS}\n' + CHILD)
        self.stderr_path = str(tmp_path / 'child.stderr')
        with open(self.stderr_path, 'w') as stderr:
            self.proc = server.start([script, root, *options], stdout=subprocess.PIPE,
                                     stderr=stderr, env=ENV, cwd=tmp_path)
        self.lines = []
        self._guard = threading.Timer(LIMIT, self.proc.kill)
        self._guard.start()

    def read_until(self, predicate):
        for line in self.proc.stdout:
            self.lines.append(line.rstrip('\n'))
            if predicate(self.lines[-1]):
                break
        return self.lines

    def finish(self):
        self.read_until(lambda line: False)
        self.proc.wait()
        self._guard.cancel()
        self.proc.stdout.close()
        return self.proc.returncode

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        return self.finish()

    def stderr(self):
        with open(self.stderr_path) as f:
            return f.read()[-3000:]

    def steps(self):
        return [int(line.split()[1]) for line in self.lines if line.startswith('STEP ')]


def newest_complete(root):
    """The step of the newest complete checkpoint, as a start would see it (or 0)."""
    latest = CheckpointStore(os.path.join(str(root), 'checkpoint')).latest()
    return 0 if latest is None else int(latest.rsplit('-', 1)[1])


def resume_line(root, step):
    path = os.path.join(str(root), 'checkpoint', f'checkpoint.dat-{step}')
    return f'Resume training: epoch {(step - 1) // 14 + 1}, step {step}, from checkpoint {path}'


def check_killed_in_write(child, root, w, step):
    """`child` was killed at the first fsync of the background write of `step`."""
    assert child.finish() == -signal.SIGKILL, child.stderr()
    assert child.steps()[-1] in (step - 1, step)      # the write of `step` began
    entries = os.listdir(os.path.join(str(root), 'checkpoint'))
    unfinished = [n for n in entries if n.startswith(f'.tmp-checkpoint.dat-{step}-')]
    assert len(unfinished) == 1, entries
    assert {'variables.index', 'state.npz'} <= set(
        os.listdir(os.path.join(str(root), 'checkpoint', unfinished[0])))
    assert sorted(set(entries) - set(unfinished)) == sorted(
        [INDEX_FILE] + [f'checkpoint.dat-{s}' for s in range(step - 3, step)])
    assert newest_complete(root) == step - 1


def test_killed_inside_an_async_write_resumes_from_the_save_before_graph(server, tmp_path):
    root, steps = tmp_path / 'run', 20
    w = reference(steps)
    child = Child(server, tmp_path, root, '--steps', steps, '--kill-in-write', 5, '--graph')
    check_killed_in_write(child, root, w, 5)
    assert child.lines[0] == entered_line(w, 0)
    assert child.steps()[:4] == [1, 2, 3, 4]

    resumed = Child(server, tmp_path, root, '--steps', steps, '--graph')
    assert resumed.finish() == 0, resumed.stderr()
    assert resumed.lines[:2] == [resume_line(root, 4), entered_line(w, 4)]
    assert resumed.steps() == list(range(5, steps + 1))
    assert resumed.lines[-1] == finished_line(w, steps)
    assert sorted(os.listdir(os.path.join(str(root), 'checkpoint'))) == sorted(
        [INDEX_FILE] + [f'checkpoint.dat-{s}' for s in (18, 19, 20)])


def test_random_kills_over_100_async_saves_resume_from_the_newest_complete(server, tmp_path):
    """Eager.  The first kill lands inside a background write for sure (``--kill-in-write``),
    the next three right after the child handed a save of a random step to the writer."""
    root, steps = tmp_path / 'run', 100
    w = reference(steps)
    rng = np.random.default_rng(2026)
    first = int(rng.integers(5, 15))
    start, saves, kills = 0, 0, 0
    while True:
        options = ['--kill-in-write', first] if kills == 0 else []
        child = Child(server, tmp_path, root, '--steps', steps, *options)
        if start:
            assert child.read_until(lambda line: True) == [resume_line(root, start)], \
                child.stderr()
        child.read_until(lambda line: line.startswith('ENTERED '))
        assert child.lines[-1] == entered_line(w, start), child.stderr()
        if kills == 0:
            check_killed_in_write(child, root, w, first)
        elif kills < 4:
            target = min(start + int(rng.integers(15, 30)), steps - 1)
            child.read_until(lambda line: line == f'STEP {target}')
            assert child.kill() == -signal.SIGKILL, child.stderr()
        else:
            assert child.finish() == 0, child.stderr()
        done = child.steps()
        assert done == list(range(start + 1, start + 1 + len(done)))
        saves += len(done)
        if child.proc.returncode == 0:
            assert child.lines[-1] == finished_line(w, steps)
            break
        kills += 1
        newest = newest_complete(root)
        # the save before the last one handed over was complete; nothing newer is lost
        assert done[-1] - 1 <= newest <= done[-1] + 1, (done[-1], newest)
        start = newest
    assert kills == 4 and saves >= 100
