"""Training processes killed by SIGKILL before an object-store operation of a save.

The child script trains for ``--steps`` steps over a shuffled DataFlow with
`checkpoint_dir` on S3 (the session's moto server, reached through
``AWS_ENDPOINT_URL``), saving every step and keeping two checkpoints: ``w``
folds each batch into an order-dependent hash, so a resume that serves other
batches, or the same ones in another order, ends elsewhere.  The environment
variable ``TFSNIPPET_TEST_KILL=STEP:OP`` makes the script wrap the store's one
seam for object-store calls (``ObjectCheckpointStore._call``) and SIGKILL
itself before the first operation ``OP`` of the save of step ``STEP``: in the
loop's thread for synchronous saves, in the background writer's for
asynchronous ones.

Two chains of kills, eager with synchronous saves and graph with asynchronous
ones (each child is forked from the session's process that imported TensorFlow,
``fork_server`` in tests/conftest.py), over the operations the
protocol turns on (every operation of a save is interrupted in-process by
tests/storage/test_object_store.py):

* ``put`` (the first upload) and ``commit`` (the marker): the save is lost,
  the next start resumes from the step before;
* ``index`` (the conditional index write): the checkpoint is committed but
  unlisted, the next start resumes from it;
* ``unmark`` and ``delete`` (pruning): the new checkpoint is listed, the pruned
  one half-deleted or whole but unlisted.

After each kill, every checkpoint a reader counts downloads whole; every start
resumes from the newest committed checkpoint with ``w`` of that step, and the
last one ends with ``w`` of an uninterrupted run and nothing but the two kept
checkpoints and the index in the bucket.
"""

import os
import signal
import subprocess
import tempfile
import threading

import numpy as np
import pytest

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint.object_store import ObjectCheckpointStore
from tfsnippet.scaffold.checkpoint.state_format import has_state
from tfsnippet.scaffold.checkpoint.store import INDEX_FILE
from tfsnippet.storage import resolve

# how long a child may run before the test gives up on it (a guard, not a wait)
LIMIT = 120
MODULUS = 1000003
STEPS = 14

CHILD = r'''
import argparse
import os
import signal

parser = argparse.ArgumentParser()
parser.add_argument('checkpoint_dir')
parser.add_argument('--steps', type=int, required=True)
parser.add_argument('--graph', action='store_true')
parser.add_argument('--async', dest='asynchronous', action='store_true')
args = parser.parse_args()

import numpy as np
import tensorflow as tf

if args.graph:
    tf.compat.v1.disable_eager_execution()
import tfsnippet as spt
from tfsnippet.scaffold.checkpoint.object_store import ObjectCheckpointStore

v1 = tf.compat.v1


def say(line):
    print(line, flush=True)


kill = os.environ.get('TFSNIPPET_TEST_KILL')
if kill:
    kill_step, kill_op = int(kill.split(':')[0]), kill.split(':')[1]
    saving = {'step': None}
    real_save, real_call = ObjectCheckpointStore.save, ObjectCheckpointStore._call

    def save(self, step, write, best=None):
        saving['step'] = step
        return real_save(self, step, write, best)

    def call(self, op, target, fn, *a, **kw):
        if saving['step'] == kill_step and op == kill_op:
            os.kill(os.getpid(), signal.SIGKILL)
        return real_call(self, op, target, fn, *a, **kw)

    ObjectCheckpointStore.save, ObjectCheckpointStore._call = save, call

flow = spt.DataFlow.arrays([np.arange(40, dtype=np.int64)], batch_size=3, shuffle=True,
                           random_state=11)
if args.graph:
    x_in = v1.placeholder(tf.int64, [None])
    w = v1.get_variable('w', initializer=np.int64(0))
    train_op = v1.assign(w, (w * 31 + tf.reduce_sum(x_in)) % MODULUS)
    session = v1.Session()
    session.__enter__()
    session.run(v1.global_variables_initializer())
    value = lambda: int(session.run(w))
    train_step = lambda x: session.run(train_op, {x_in: x})
else:
    w = tf.Variable(np.int64(0), name='w')

    def train_step(x):
        w.assign((w * 31 + int(x.sum())) % MODULUS)

    value = lambda: int(w.numpy())

loop = spt.TrainLoop([w], max_step=args.steps, checkpoint_dir=args.checkpoint_dir,
                     checkpoint_step_freq=1, checkpoint_max_to_keep=2,
                     checkpoint_async=args.asynchronous, print_func=say, show_eta=False)
with loop:
    say(f'ENTERED step={loop.step} w={value()}')
    for _ in loop.iter_epochs():
        for step, (x,) in loop.iter_steps(flow):
            train_step(x)
say(f'FINISHED w={value()}')
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


def run_child(server, tmp_path, url, options, kill=None):
    """A run of the script forked by `server`: its exit code, stdout lines, end of stderr."""
    script = tmp_path / 'train.py'
    if not script.exists():
        script.write_text(f'MODULUS = {MODULUS}\n' + CHILD)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', CUDA_VISIBLE_DEVICES='')
    env.pop('TFSNIPPET_TEST_KILL', None)
    if kill is not None:
        env['TFSNIPPET_TEST_KILL'] = f'{kill[0]}:{kill[1]}'
    with tempfile.TemporaryFile('w+') as stderr:
        proc = server.start([script, url, '--steps', STEPS, *options], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=stderr)
        guard = threading.Timer(LIMIT, proc.kill)
        guard.start()
        try:
            out = proc.stdout.read()
            proc.stdout.close()
            code = proc.wait()
        finally:
            guard.cancel()
        stderr.seek(0)
        err = stderr.read()
    return code, out.splitlines(), err[-3000:]


def counted(url):
    """The steps of the checkpoints a reader counts, each checked to download whole."""
    store = ObjectCheckpointStore(f'{url}/checkpoint')
    steps = []
    for path in store.checkpoints():
        with store.local_copy(path) as local:
            assert has_state(local), path
        steps.append(int(path.rsplit('-', 1)[1]))
    return steps


# (TF style and save mode, the kills in order: (step, operation))
CHAINS = {
    'eager-sync': ([], [(3, 'put'), (6, 'index'), (10, 'unmark')]),
    'graph-async': (['--graph', '--async'], [(4, 'commit'), (7, 'index'), (10, 'delete')]),
}
# the newest committed checkpoint after a kill before each operation of the save of s
SURVIVOR = {'put': -1, 'commit': -1, 'index': 0, 'unmark': 0, 'delete': 0}


@pytest.mark.parametrize('chain', list(CHAINS))
def test_killed_before_object_store_operations_resumes_from_the_newest_commit(
        tmp_path, s3_bucket, fork_server, chain):
    options, kills = CHAINS[chain]
    url = f'{s3_bucket}/run'
    w = reference(STEPS)
    start = 0
    for step, op in kills + [(None, None)]:
        code, lines, err = run_child(fork_server, tmp_path, url, options,
                                     None if step is None else (step, op))
        if start:
            assert lines[0] == (f'Resume training: epoch 1, step {start}, from checkpoint '
                                f'{url}/checkpoint/checkpoint.dat-{start}'), err
        assert lines[bool(start)] == f'ENTERED step={start} w={w[start]}', err
        if step is None:
            assert code == 0, err
            assert lines[-1] == f'FINISHED w={w[STEPS]}'
            break
        assert code == -signal.SIGKILL, err
        newest = step + SURVIVOR[op]
        steps = counted(url)
        assert steps[-1] == newest, (chain, step, op, steps)
        start = newest
    assert counted(url) == [STEPS - 1, STEPS]
    location = resolve(f'{url}/checkpoint')
    left = sorted({k[len(location.path) + 1:].split('/')[0]
                   for k in location.fs.find(location.path)})
    assert [n.split('.')[1] if n != INDEX_FILE else n for n in left] == \
        ['dat-13', 'dat-14', INDEX_FILE]
