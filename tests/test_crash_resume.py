"""Crash and resume with real processes killed by SIGKILL.

Each test writes a small training script to its temporary directory and runs
it in processes forked from one that imported TensorFlow once (a
`tests.helpers.forkserver.ForkServer`, module fixture ``server``): each run
is a process of its own, killed by a real SIGKILL.

* a run killed after it printed the marker of epoch 3 resumes from that
  epoch's checkpoint, and ends with variables bitwise equal to those of a run
  that was never interrupted;
* a run killed *inside* ``CheckpointSaver.save`` (the script wraps the
  function that writes the state file, so that the process is killed there,
  after the variables were written to the temporary directory) leaves the
  earlier checkpoints intact; the next
  start resumes from the last complete one, removes the leftovers and
  finishes, in eager and in graph mode.

The marker of epoch E is printed by an ``AFTER_EPOCH`` handler registered
before the loop is entered; handlers of ``AFTER_*`` events run in reverse
order of registration, so it runs after the loop saved that epoch's
checkpoint.  After the marker of the epoch named by ``--pause`` the script
waits for a line on stdin, so the kill lands at a known point and no test
needs to sleep.
"""

import os
import signal
import subprocess
import threading

import numpy as np
import pytest
import tensorflow as tf

from tests.helpers import checkpoint_index, checkpoint_listing, checkpoint_path

# how long a script may run before the test gives up on it (a guard, not a wait)
LIMIT = 120
STEPS_PER_EPOCH = 4
MAX_EPOCH = 6

COMMON = r'''
import argparse
import os
import signal
import sys

import numpy as np

parser = argparse.ArgumentParser()
parser.add_argument('checkpoint_dir')
parser.add_argument('output')
parser.add_argument('--kill-at-save', type=int, default=0)
parser.add_argument('--pause', type=int, default=0)
args = parser.parse_args()


KILL = {'armed': False}


def arm_the_killer():
    """Kill this process when the armed save writes its state file."""
    from tfsnippet.scaffold.checkpoint import state_format

    write = state_format.write_state_file

    def write_or_die(directory, state):
        if KILL['armed']:
            os.kill(os.getpid(), signal.SIGKILL)
        write(directory, state)

    state_format.write_state_file = write_or_die


def say(line):
    print(line, flush=True)


def data(epoch):
    """The batches of `epoch`: derived from the epoch number only."""
    rng = np.random.default_rng(1000 + epoch)
    x = rng.normal(size=(16 * STEPS_PER_EPOCH, 4)).astype(np.float32)
    y = (x @ np.array([[1.], [-2.], [0.5], [3.]], np.float32)
         + rng.normal(scale=0.1, size=(len(x), 1)).astype(np.float32))
    return [(x[i:i + 16], y[i:i + 16]) for i in range(0, len(x), 16)]


VALID_RNG = np.random.default_rng(7)
VALID_X = VALID_RNG.normal(size=(32, 4)).astype(np.float32)
VALID_Y = VALID_X @ np.array([[1.], [-2.], [0.5], [3.]], np.float32)


def make_loop(spt, params, objects):
    arm_the_killer()

    class SaveCounter(spt.CheckpointSavableObject):
        def __init__(self):
            self.saves = 0

        def get_state(self):
            self.saves += 1
            KILL['armed'] = self.saves == args.kill_at_save
            return {'saves': self.saves}

        def set_state(self, state):
            self.saves = state['saves']

    loop = spt.TrainLoop(params, max_epoch=MAX_EPOCH, checkpoint_dir=args.checkpoint_dir,
                         checkpoint_epoch_freq=1,
                         checkpoint_save_objects=dict(objects, counter=SaveCounter()),
                         early_stopping=True, print_func=say, show_eta=False)

    def epoch_done(lp):
        say(f'EPOCH DONE {lp.epoch}')
        if lp.epoch == args.pause:
            sys.stdin.readline()

    loop.events.on(spt.EventKeys.AFTER_EPOCH, epoch_done)
    return loop
'''

EAGER_SCRIPT = r'''
import keras
import tensorflow as tf

import tfsnippet as spt

tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)
keras.utils.set_random_seed(0)
tf.config.experimental.enable_op_determinism()

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(16, activation='relu'),
                          keras.layers.Dropout(0.25), keras.layers.Dense(1)])
opt = keras.optimizers.Adam(0.01)
opt.build(model.trainable_variables)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((model(x, training=True) - y) ** 2)
    opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                            model.trainable_variables))
    return loss


loop = make_loop(spt, model.trainable_variables, {'model': model, 'opt': opt})
with loop:
    for epoch in loop.iter_epochs():
        for _, (x, y) in loop.iter_steps(data(epoch)):
            loop.collect_metrics(loss=train_step(x, y))
        valid = tf.reduce_mean((model(VALID_X) - VALID_Y) ** 2)
        loop.collect_metrics(valid_loss=valid)
np.savez(args.output, *[v.numpy() for v in model.variables + opt.variables])
say('FINISHED')
'''

GRAPH_SCRIPT = r'''
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
import tfsnippet as spt

v1 = tf.compat.v1
v1.set_random_seed(0)
tf.config.experimental.enable_op_determinism()
x_in = v1.placeholder(tf.float32, [None, 4])
y_in = v1.placeholder(tf.float32, [None, 1])
init = v1.glorot_uniform_initializer(seed=1)
w1 = v1.get_variable('w1', [4, 16], initializer=init)
b1 = v1.get_variable('b1', [16], initializer=v1.zeros_initializer())
w2 = v1.get_variable('w2', [16, 1], initializer=init)
b2 = v1.get_variable('b2', [1], initializer=v1.zeros_initializer())
out = tf.matmul(tf.nn.relu(tf.matmul(x_in, w1) + b1), w2) + b2
loss = tf.reduce_mean(tf.square(out - y_in))
train_op = v1.train.AdamOptimizer(0.01).minimize(loss)
config = v1.ConfigProto(intra_op_parallelism_threads=1, inter_op_parallelism_threads=1)
with v1.Session(config=config) as session:
    session.run(v1.global_variables_initializer())
    loop = make_loop(spt, [w1, b1, w2, b2], {})
    with loop:
        for epoch in loop.iter_epochs():
            for _, (x, y) in loop.iter_steps(data(epoch)):
                _, value = session.run([train_op, loss], feed_dict={x_in: x, y_in: y})
                loop.collect_metrics(loss=value)
            loop.collect_metrics(valid_loss=session.run(
                loss, feed_dict={x_in: VALID_X, y_in: VALID_Y}))
    np.savez(args.output, *session.run(v1.global_variables()))
say('FINISHED')
'''


def write_script(directory, body):
    path = os.path.join(str(directory), 'train.py')
    with open(path, 'w') as f:
        f.write(f'STEPS_PER_EPOCH = {STEPS_PER_EPOCH}\nMAX_EPOCH = {MAX_EPOCH}\n')
        f.write(COMMON)
        f.write(body)
    return path


ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')


@pytest.fixture(scope='module')
def server(fork_server):
    """Forks each run from the session's process that imported TensorFlow (``fork_server``,
    tests/conftest.py)."""
    return fork_server


class Job:
    """One run of a script, a process forked by `server`; stdout is read by the test,
    stderr goes to a file."""

    def __init__(self, server, script, workdir, name, *options, pause=False):
        self.workdir = os.path.abspath(str(workdir))
        self.ckpt_dir = os.path.join(self.workdir, 'ckpt')
        self.output = os.path.join(self.workdir, f'{name}.npz')
        self.stderr_path = os.path.join(self.workdir, f'{name}.stderr')
        with open(self.stderr_path, 'w') as stderr:
            self.proc = server.start(
                [script, self.ckpt_dir, self.output, *map(str, options)],
                stdin=subprocess.PIPE if pause else None, stdout=subprocess.PIPE,
                stderr=stderr, env=ENV, cwd=self.workdir)
        self.lines = []
        self._guard = threading.Timer(LIMIT, self.proc.kill)
        self._guard.start()

    def read_until(self, marker):
        """Read stdout lines up to and including `marker` (or to the end)."""
        for line in self.proc.stdout:
            self.lines.append(line.rstrip('\n'))
            if self.lines[-1] == marker:
                break
        return self.lines

    def finish(self):
        """Wait for the end; return the exit code."""
        self.read_until(None)
        self.proc.wait()
        self._guard.cancel()
        self.proc.stdout.close()
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        return self.proc.returncode

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        return self.finish()

    def stderr(self):
        with open(self.stderr_path) as f:
            return f.read()[-3000:]

    def variables(self):
        with np.load(self.output) as data:
            return [data[f'arr_{i}'] for i in range(len(data.files))]


def ckpt_path(job, step):
    return checkpoint_path(job.ckpt_dir, step)


def listing(job):
    return checkpoint_listing(job.ckpt_dir)


def index(job):
    return checkpoint_index(job.ckpt_dir)


def names(*steps):
    return [f'checkpoint.dat-{s * STEPS_PER_EPOCH}' for s in steps]


def epoch_markers(lines):
    return [int(line.split()[-1]) for line in lines if line.startswith('EPOCH DONE ')]


def assert_bitwise_equal(got, want):
    assert len(got) == len(want)
    for i, (a, b) in enumerate(zip(got, want)):
        assert a.dtype == b.dtype and a.shape == b.shape, i
        assert a.tobytes() == b.tobytes(), f'variable {i} differs'


def assert_clean_run(job, rc):
    assert rc == 0, job.stderr()
    assert job.lines[-1] == 'FINISHED'


@pytest.fixture(scope='module')
def eager_script(tmp_path_factory):
    return write_script(tmp_path_factory.mktemp('eager-script'), EAGER_SCRIPT)


@pytest.fixture(scope='module')
def eager_reference(server, eager_script, tmp_path_factory):
    """An uninterrupted eager run, started once and read when first needed."""
    job = Job(server, eager_script, tmp_path_factory.mktemp('eager-reference'), 'reference')
    result = {}

    def get():
        if not result:
            rc = job.finish()
            assert_clean_run(job, rc)
            assert epoch_markers(job.lines) == list(range(1, MAX_EPOCH + 1))
            result['variables'] = job.variables()
        return result['variables']
    yield get
    if not result:
        job.finish()


def test_killed_after_epoch_3_resumes_and_matches_an_uninterrupted_run(
        server, eager_script, eager_reference, tmp_path):
    job = Job(server, eager_script, tmp_path, 'killed', '--pause', 3, pause=True)
    job.read_until('EPOCH DONE 3')
    assert job.kill() == -signal.SIGKILL, job.stderr()
    assert epoch_markers(job.lines) == [1, 2, 3]
    assert 'FINISHED' not in job.lines
    assert index(job) == names(1, 2, 3)

    resumed = Job(server, eager_script, tmp_path, 'resumed')
    rc = resumed.finish()
    assert_clean_run(resumed, rc)
    assert resumed.lines[0] == (f'Resume training: epoch 3, step {3 * STEPS_PER_EPOCH}, '
                                f'from checkpoint {ckpt_path(job, 3 * STEPS_PER_EPOCH)}')
    assert epoch_markers(resumed.lines) == [4, 5, 6]
    assert sum(line.startswith('Restore early-stopping parameters: from step ')
               for line in resumed.lines) == 1
    assert index(resumed) == names(1, 2, 3, 4, 5, 6)
    assert_bitwise_equal(resumed.variables(), eager_reference())


def check_killed_during_save(job):
    """The 3rd save was killed after writing its variables to a temporary directory."""
    rc = job.finish()
    assert rc == -signal.SIGKILL, job.stderr()
    # the marker of epoch 3 comes after its checkpoint: it was never printed
    assert epoch_markers(job.lines) == [1, 2]
    assert index(job) == names(1, 2)
    entries = listing(job)
    temporaries = [n for n in entries if n.startswith('.tmp-')]
    assert len(temporaries) == 1
    assert temporaries[0].startswith(f'.tmp-checkpoint.dat-{3 * STEPS_PER_EPOCH}-')
    tmp_files = os.listdir(os.path.join(job.ckpt_dir, 'checkpoint', temporaries[0]))
    assert 'variables.index' in tmp_files
    assert any(n.startswith('variables.data-') for n in tmp_files)
    assert sorted(set(entries) - set(temporaries)) == names(1, 2) + ['checkpoint_index.json']
    # the previous checkpoint is complete and readable
    previous = ckpt_path(job, 2 * STEPS_PER_EPOCH)
    assert {'variables.index', 'state.npz'} <= set(os.listdir(previous))
    assert tf.train.list_variables(os.path.join(previous, 'variables'))


def check_resumed_after_a_killed_save(resumed, killed):
    rc = resumed.finish()
    assert_clean_run(resumed, rc)
    assert resumed.lines[0] == (f'Resume training: epoch 2, step {2 * STEPS_PER_EPOCH}, '
                                f'from checkpoint {ckpt_path(killed, 2 * STEPS_PER_EPOCH)}')
    assert epoch_markers(resumed.lines) == [3, 4, 5, 6]
    assert [n for n in listing(resumed) if n.startswith('.tmp-')] == []
    assert index(resumed) == names(1, 2, 3, 4, 5, 6)


def test_killed_during_a_save_eager(server, eager_script, eager_reference, tmp_path):
    job = Job(server, eager_script, tmp_path, 'killed', '--kill-at-save', 3)
    check_killed_during_save(job)
    resumed = Job(server, eager_script, tmp_path, 'resumed')
    check_resumed_after_a_killed_save(resumed, job)
    assert_bitwise_equal(resumed.variables(), eager_reference())


def test_killed_during_a_save_graph(server, tmp_path):
    script = write_script(tmp_path, GRAPH_SCRIPT)
    os.makedirs(tmp_path / 'reference')
    reference = Job(server, script, tmp_path / 'reference', 'reference')
    job = Job(server, script, tmp_path, 'killed', '--kill-at-save', 3)
    check_killed_during_save(job)
    resumed = Job(server, script, tmp_path, 'resumed')
    check_resumed_after_a_killed_save(resumed, job)
    assert_clean_run(reference, reference.finish())
    assert_bitwise_equal(resumed.variables(), reference.variables())
