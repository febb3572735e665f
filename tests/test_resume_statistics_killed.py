"""A run killed by SIGKILL inside an epoch, then resumed, records what an
uninterrupted run records: epoch lines, Keras callbacks' `logs` and the
learning rate they set, sink rows, results-store rows and final weights.

Per TF style, two processes run one script: the first trains a reference
run to its end, then starts the same run in another directory and kills
itself at step 13 (epoch 2; the last checkpoint is step 7's, inside epoch
1, whose line was printed and sent after it); the second resumes that run.
The in-process version, on a fake clock, is
tests/scaffold/test_resumed_epoch_statistics.py.
"""

import json
import os
import signal

import pytest

LIMIT = 120   # seconds a script may run before the test gives up on it (a guard)

SCRIPT = r'''
import json
import os
import signal
import sys

import numpy as np

style, root, phase = sys.argv[1:4]
import tensorflow as tf
if style == 'graph':
    tf.compat.v1.disable_eager_execution()
import tfsnippet as spt
from tfsnippet.experiment.sinks import StoreSink

STEPS, MAX_EPOCH, KILL_AT = 10, 4, 13
TRUE_W = np.array([[1.], [-2.], [0.5]], np.float32)
INIT_W = np.array([[0.3], [0.2], [-0.1]], np.float32)


def data(epoch):
    rng = np.random.default_rng(100 + epoch)
    x = rng.normal(size=(8 * STEPS, 3)).astype(np.float32)
    y = x @ TRUE_W + rng.normal(scale=0.5, size=(len(x), 1)).astype(np.float32)
    return [(x[i:i + 8], y[i:i + 8]) for i in range(0, len(x), 8)]


VALID = data(0)[0]


class Rows(spt.MetricSink):
    """Keeps the rows it holds in a file: a sink that lives across processes."""

    def __init__(self, path):
        self.path = path

    def _rows(self):
        if not os.path.exists(self.path):
            return []
        with open(self.path) as f:
            return [json.loads(line) for line in f]

    def write_stats(self, scope, step, epoch, stats):
        with open(self.path, 'a') as f:
            f.write(json.dumps([scope, step, epoch, stats]) + '\n')

    def resumed(self, step, epoch):
        kept = [r for r in self._rows()
                if (r[2] < epoch if r[0] != 'step_log' else r[1] <= step)]
        with open(self.path, 'w') as f:
            f.writelines(json.dumps(r) + '\n' for r in kept)


def record(name, item):
    with open(os.path.join(root, f'{name}.jsonl'), 'a') as f:
        f.write(json.dumps(item) + '\n')


def attempt(run, kill=False):
    lines = []

    def say(line):
        lines.append(line)
        record(f'{run}-lines-{phase}', line)

    sent = spt.MetricSink()
    sent.write_stats = lambda scope, step, epoch, stats: record(
        f'{run}-sent-{phase}', [scope, step, epoch, stats])
    store = spt.ResultsStore(os.path.join(root, 'store'))
    store_sink = StoreSink(store)
    store_sink.start(run, run, {}, {})
    sinks = spt.MetricRecorder([store_sink, Rows(os.path.join(root, f'{run}-rows.jsonl')), sent],
                               scopes=('step_log', 'epoch_log', 'epoch'))
    ckpt = os.path.join(root, f'{run}-ckpt')
    if style == 'eager':
        import keras
        model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1, use_bias=False)])
        model.set_weights([INIT_W])
        opt = keras.optimizers.SGD(0.05)
        model.compile(optimizer=opt)

        @tf.function
        def train(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean((model(x) - y) ** 2)
            opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables),
                                    model.trainable_variables))
            return loss

        def valid():
            return tf.reduce_mean((model(VALID[0]) - VALID[1]) ** 2)

        def lr():
            return float(np.asarray(opt.learning_rate))

        weights = lambda: [v.numpy() for v in model.variables + opt.variables]
        callbacks = [keras.callbacks.ReduceLROnPlateau(monitor='loss', factor=0.5, patience=1,
                                                       min_delta=0.5),
                     keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: record(
                         f'{run}-logs-{phase}', [e, dict(logs)]))]
        loop = spt.TrainLoop(model.trainable_variables, max_epoch=MAX_EPOCH, checkpoint_dir=ckpt,
                             checkpoint_step_freq=7, checkpoint_save_objects={'opt': opt},
                             print_func=say, show_eta=False)
        loop.add_component(spt.KerasCallbacks(callbacks, model=model))
    else:
        v1 = tf.compat.v1
        graph = tf.Graph()
        graph.as_default().__enter__()
        session = v1.Session(graph=graph)
        session.__enter__()
        x_in, y_in = v1.placeholder(tf.float32, [None, 3]), v1.placeholder(tf.float32, [None, 1])
        w = tf.Variable(INIT_W, name='w')
        rate = tf.Variable(0.05, name='rate')
        loss_t = tf.reduce_mean((x_in @ w - y_in) ** 2)
        train_op = v1.train.GradientDescentOptimizer(rate).minimize(loss_t)
        session.run(v1.global_variables_initializer())

        def train(x, y):
            return session.run([train_op, loss_t], {x_in: x, y_in: y})[1]

        def valid():
            return session.run(loss_t, {x_in: VALID[0], y_in: VALID[1]})

        lr = lambda: float(session.run(rate))
        weights = lambda: session.run([w, rate])
        loop = spt.TrainLoop([w, rate], max_epoch=MAX_EPOCH, checkpoint_dir=ckpt,
                             checkpoint_step_freq=7, print_func=say, show_eta=False)
        loop.add_component(spt.ReduceOnPlateau(rate, factor=0.5, patience=1, min_delta=0.2))
    loop.add_component(sinks)
    with loop:
        for epoch in loop.iter_epochs():
            loop.collect_metrics(lr=lr())
            for step, (x, y) in loop.iter_steps(data(epoch)):
                loop.collect_metrics(loss=train(x, y))
                if step % 5 == 0:
                    loop.print_logs()
                if kill and step == KILL_AT:
                    os.kill(os.getpid(), signal.SIGKILL)
            loop.collect_metrics(valid_loss=valid())
            loop.print_logs()
    np.savez(os.path.join(root, f'{run}-weights.npz'), *weights())


if phase == 'first':
    attempt('reference')
    attempt('run', kill=True)
else:
    attempt('run')
'''


def run_script(server, script, style, root, phase):
    """A run of `script`, forked by `server` (the session's ``fork_server``)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2', CUDA_VISIBLE_DEVICES='')
    return server.run([script, style, root, phase], env=env, timeout=LIMIT, cwd=root,
                      stderr_to_stdout=True)


def read(root, name):
    path = os.path.join(root, f'{name}.jsonl')
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f]


def without_times(line):
    """A printed line without its time metrics (``epoch time: 0.01s``...)."""
    return '; '.join(part for part in _parts(line) if not _is_time(part))


def _parts(line):
    tag, _, rest = line.partition('] ')
    return [tag + ']'] + rest.split('; ')


def _is_time(part):
    return part.split(':')[0].endswith((' time', ' timer'))


def stats_without_times(rows):
    """Sink rows with the mean and std of time metrics left out (their count stays)."""
    out = []
    for scope, step, epoch, stats in rows:
        out.append([scope, step, epoch, {
            name: ({'count': s['count']} if name.endswith(('time', 'timer')) else s)
            for name, s in stats.items()}])
    return out


@pytest.mark.parametrize('style', ['eager', 'graph'])
def test_a_run_killed_inside_an_epoch_resumes_recording_what_an_uninterrupted_run_does(
        style, tmp_path, fork_server):
    import numpy as np
    from tfsnippet.experiment.store import ResultsStore

    script = tmp_path / 'train.py'
    script.write_text(SCRIPT)
    first = run_script(fork_server, script, style, tmp_path, 'first')
    assert first.returncode == -signal.SIGKILL, first.stdout[-3000:]
    second = run_script(fork_server, script, style, tmp_path, 'second')
    assert second.returncode == 0, second.stdout[-3000:]

    want_lines = read(tmp_path, 'reference-lines-first')
    lines = read(tmp_path, 'run-lines-second')
    assert lines[0].startswith('Resume training: epoch 1, step 7, from checkpoint ')
    # the lines after the checkpoint: those of the uninterrupted run (steps 10 and on)
    after = [line for line in want_lines if not line.startswith('[Epoch 1/4, Step 5]')]
    assert [without_times(line) for line in lines[1:]] == \
        [without_times(line) for line in after]
    assert 'loss' in lines[2] and 'step time' in lines[2]   # the epoch line of epoch 1

    # the rows a sink holds, and the results store's, are those of one uninterrupted run
    want_rows = read(tmp_path, 'reference-rows')
    rows = read(tmp_path, 'run-rows')
    assert stats_without_times(rows) == stats_without_times(want_rows)
    keys = [tuple(r[:3]) for r in rows]
    assert len(keys) == len(set(keys))   # no epoch (nor line) twice
    sent = read(tmp_path, 'run-sent-second')
    with ResultsStore(str(tmp_path / 'store')) as store:
        stored = [[r.step, r.epoch, r.metrics] for r in store.epochs('run')]
        want_stored = [[r.step, r.epoch, r.metrics] for r in store.epochs('reference')]
        assert store.get_run('run').epoch == 4
    # the store's rows are the resumed attempt's, times included (no mix of attempts)
    assert stored == [[step, epoch, {n: dict(s) for n, s in stats.items()}]
                      for scope, step, epoch, stats in sent if scope == 'epoch']
    assert stats_without_times([['epoch'] + r for r in stored]) == \
        stats_without_times([['epoch'] + r for r in want_stored])

    if style == 'eager':   # Keras callbacks' logs and the learning rate they set
        def no_times(entries):
            return [[e, {k: v for k, v in logs.items() if not k.endswith('time')}]
                    for e, logs in entries]
        want_logs = read(tmp_path, 'reference-logs-first')
        assert no_times(read(tmp_path, 'run-logs-second')) == no_times(want_logs)
        assert len({logs['learning_rate'] for _, logs in want_logs}) > 1   # it changed

    with np.load(tmp_path / 'run-weights.npz') as got, \
            np.load(tmp_path / 'reference-weights.npz') as want:
        assert len(got.files) == len(want.files)
        for name in want.files:
            np.testing.assert_array_equal(got[name], want[name])
