"""Classic graph scripts run unchanged (issue 11): the API used the way a TF1 tfsnippet script does.

Each test is a small training script in the ``tf.compat.v1`` spelling:
placeholders, a ``tf.compat.v1.train`` optimizer whose learning rate is a
ScheduledVariable, ``session.run([train_op, lr])``, ``spt.TrainLoop`` with
``iter_epochs()``/``iter_steps()``, ``collect_metrics``, ``print_logs``,
``spt.Trainer``/``spt.Evaluator`` hooks, histogram summaries, and the small
``spt.utils`` helpers.  Results are checked by what a user sees: the log
lines, the values fetched, and the event files.
"""

import os
import re

import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import tfsnippet as spt

v1 = tf.compat.v1

# the classic names these scripts reach through `spt` and `spt.utils`
CLASSIC_NAMES = {
    spt: ['settings', 'GraphKeys', 'SummaryCollector', 'default_summary_collector',
          'add_summary', 'add_histogram'],
    spt.utils: ['minibatch_slices_iterator', 'split_numpy_arrays', 'split_numpy_array',
                'generate_random_seed', 'TemporaryDirectory', 'makedirs', 'maybe_close',
                'ContextStack', 'camel_to_underscore', 'iter_files', 'deprecated',
                'ConsoleTable', 'print_as_table', 'TensorWrapper',
                'register_tensor_wrapper_class'],
}


def test_the_classic_names_are_exported():
    missing = [f'{module.__name__}.{name}' for module, names in CLASSIC_NAMES.items()
               for name in names if not hasattr(module, name)]
    assert missing == []


TRUE_W = np.array([1., -2., .5], dtype=np.float32)


def regression_data(n, seed):
    rng = np.random.RandomState(seed)
    xs = rng.normal(size=(n, 3)).astype(np.float32)
    return xs, (xs @ TRUE_W).astype(np.float32)


def build_regression():
    """Placeholders, a linear model and its loss, as a classic script builds them."""
    x = v1.placeholder(tf.float32, [None, 3], name='x')
    y = v1.placeholder(tf.float32, [None], name='y')
    with v1.variable_scope('model'):
        w = v1.get_variable('w', shape=[3], initializer=v1.zeros_initializer())
    pred = tf.reduce_sum(x * w, axis=-1)
    loss = tf.reduce_mean(tf.square(pred - y))
    return x, y, w, loss


def metric_of(line, name):
    return float(re.search(rf'\b{name}: ([^ ;]+)', line).group(1))


def tag_of(line):
    return line[:line.index(']') + 1]


# ------------------------------------------------------------ hand-written loop
def test_hand_written_loop_with_an_annealed_learning_rate():
    x, y, w, loss = build_regression()
    lr = spt.AnnealingVariable('learning_rate', .1, .5, min_value=.02)
    train_op = v1.train.AdamOptimizer(lr).minimize(loss)
    xs, ys = regression_data(60, seed=0)
    flow = spt.DataFlow.arrays([xs, ys], batch_size=20, shuffle=True,
                               random_state=np.random.RandomState(1))
    lines, lr_fetched = [], []

    with spt.utils.create_session() as session:
        spt.utils.ensure_variables_initialized()
        with spt.TrainLoop([w], max_epoch=4, show_eta=False, print_func=lines.append) as loop:
            for epoch in loop.iter_epochs():
                for step, (batch_x, batch_y) in loop.iter_steps(flow):
                    _, batch_loss, lr_value = session.run(
                        [train_op, loss, lr], feed_dict={x: batch_x, y: batch_y})
                    lr_fetched.append(lr_value)
                    loop.collect_metrics(loss=batch_loss)
                loop.collect_metrics(lr=lr)
                loop.print_logs()
                lr.anneal()
        final_lr = lr.get()

    assert lr_fetched == pytest.approx([.1] * 3 + [.05] * 3 + [.025] * 3 + [.02] * 3)
    assert final_lr == pytest.approx(.02)
    epoch_lines = [line for line in lines if line.startswith('[Epoch')]
    assert [tag_of(line) for line in epoch_lines] == [
        f'[Epoch {e}/4, Step {3 * e}]' for e in range(1, 5)]
    assert [metric_of(line, 'lr') for line in epoch_lines] == \
        pytest.approx([.1, .05, .025, .02])
    losses = [metric_of(line, 'loss') for line in epoch_lines]
    assert losses[-1] < losses[0]


def test_scheduled_variables_in_the_graph_of_a_classic_script():
    """``loss * beta`` and ``lr * 2`` are graph tensors that follow the variables."""
    x, y, w, loss = build_regression()
    beta = spt.ScheduledVariable('beta', 1.)
    lr = spt.AnnealingVariable('lr', .2, .5)
    weighted_loss = loss * beta
    half_lr = lr / 2
    train_op = v1.train.GradientDescentOptimizer(learning_rate=lr).minimize(weighted_loss)
    xs, ys = regression_data(8, seed=2)
    feed = {x: xs, y: ys}
    with spt.utils.create_session() as session:
        spt.utils.ensure_variables_initialized()
        first = session.run([loss, weighted_loss, half_lr], feed_dict=feed)
        beta.set(3.)
        lr.anneal()
        second = session.run([loss, weighted_loss, half_lr], feed_dict=feed)
        session.run(train_op, feed_dict=feed)
    assert first[1] == pytest.approx(first[0]) and first[2] == pytest.approx(.1)
    assert second[1] == pytest.approx(3. * second[0]) and second[2] == pytest.approx(.05)


# ------------------------------------------------------------ Trainer and Evaluator
def test_trainer_with_anneal_evaluate_and_log_hooks():
    x, y, w, loss = build_regression()
    lr = spt.AnnealingVariable('learning_rate', .05, .5)
    train_op = v1.train.AdamOptimizer(lr).minimize(loss)
    train_x, train_y = regression_data(40, seed=3)
    valid_x, valid_y = regression_data(20, seed=4)
    train_flow = spt.DataFlow.arrays([train_x, train_y], batch_size=10, shuffle=True,
                                     random_state=np.random.RandomState(5))
    valid_flow = spt.DataFlow.arrays([valid_x, valid_y], batch_size=20)
    lines, last_valid = [], {}

    with spt.utils.create_session():
        spt.utils.ensure_variables_initialized()
        with spt.TrainLoop([w], max_epoch=3, show_eta=False, print_func=lines.append) as loop:
            trainer = spt.Trainer(loop, train_op, [x, y], train_flow, metrics={'loss': loss})
            evaluator = spt.Evaluator(loop, metrics={'valid_loss': loss}, inputs=[x, y],
                                      data_flow=valid_flow, time_metric_name='valid_time')
            trainer.anneal_after(lr, epochs=1)
            trainer.evaluate_after_epochs(evaluator, freq=1)
            trainer.log_after_epochs(freq=1)
            trainer.events.on(spt.EventKeys.BEFORE_EPOCH,
                              lambda t: loop.collect_metrics(lr=lr))
            evaluator.events.on(spt.EventKeys.AFTER_EXECUTION,
                                lambda e: last_valid.update(e.last_metrics_dict))
            trainer.run()
        final_lr = lr.get()

    epoch_lines = [line for line in lines if line.startswith('[Epoch')]
    assert [tag_of(line) for line in epoch_lines] == [
        f'[Epoch {e}/3, Step {4 * e}]' for e in range(1, 4)]
    assert [metric_of(line, 'lr') for line in epoch_lines] == pytest.approx([.05, .025, .0125])
    assert final_lr == pytest.approx(.00625)
    valid_losses = [metric_of(line, 'valid loss') for line in epoch_lines]
    assert valid_losses[-1] < valid_losses[0]
    assert last_valid['valid_loss'] == pytest.approx(valid_losses[-1], rel=1e-4)


# ------------------------------------------------------------ histograms and utils
def read_tags(logdir):
    ea = EventAccumulator(str(logdir), size_guidance={'histograms': 0, 'scalars': 0})
    ea.Reload()
    return {kind: sorted(ea.Tags()[kind]) for kind in ('histograms', 'scalars')}, ea


def test_histograms_of_a_summary_collector_run_by_the_trainer(tmp_path):
    x, y, w, loss = build_regression()
    lr = spt.ScheduledVariable('lr', .05)
    train_op = v1.train.AdamOptimizer(lr).minimize(loss)
    collector = spt.SummaryCollector()
    with collector.as_default(auto_histogram=True):
        assert spt.settings.auto_histogram
        spt.add_histogram(w)
        spt.add_histogram(tf.reduce_sum(x * w, axis=-1, name='pred'), strip_scope=True)
    assert not spt.settings.auto_histogram
    xs, ys = regression_data(20, seed=6)
    flow = spt.DataFlow.arrays([xs, ys], batch_size=10)

    with spt.utils.create_session():
        spt.utils.ensure_variables_initialized()
        with spt.TrainLoop([w], max_epoch=2, summary_dir=str(tmp_path),
                           print_func=lambda line: None) as loop:
            trainer = spt.Trainer(loop, train_op, [x, y], flow, metrics={'loss': loss},
                                  summaries=collector.merge_summary())
            trainer.run()

    tags, ea = read_tags(tmp_path)
    assert tags['histograms'] == ['model/w', 'pred']
    assert [e.step for e in ea.Histograms('model/w')] == [1, 2, 3, 4]
    assert all(e.histogram_value.num == 3 for e in ea.Histograms('model/w'))
    assert all(e.histogram_value.num == 10 for e in ea.Histograms('pred'))
    assert 'metrics/loss' in tags['scalars']


def test_a_script_using_the_small_utils(capsys):
    utils = spt.utils
    np.random.seed(utils.generate_random_seed() % 1000)
    xs, ys = regression_data(50, seed=7)
    (train_x, train_y), (valid_x, valid_y) = utils.split_numpy_arrays(
        [xs, ys], portion=.2, random_state=np.random.RandomState(8))
    assert (len(train_x), len(valid_x)) == (40, 10)
    utils.print_as_table('Data', [('train', len(train_x)), ('valid', len(valid_x))])
    assert capsys.readouterr().out == 'Data\n==========\ntrain   40\nvalid   10\n'

    x, y, w, loss = build_regression()
    train_op = v1.train.GradientDescentOptimizer(.1).minimize(loss)

    @utils.deprecated('use `evaluate` instead.')
    def old_evaluate(session):
        return session.run(loss, feed_dict={x: valid_x, y: valid_y})

    with utils.TemporaryDirectory() as tmpdir:
        logdir = os.path.join(tmpdir, 'logs', utils.camel_to_underscore('LinearModel'))
        utils.makedirs(logdir)
        with utils.create_session() as session:
            utils.ensure_variables_initialized()
            before = session.run(loss, feed_dict={x: valid_x, y: valid_y})
            with spt.TrainLoop([w], max_epoch=3, summary_dir=logdir,
                               print_func=lambda line: None) as loop:
                for _ in loop.iter_epochs():
                    slices = utils.minibatch_slices_iterator(len(train_x), 16)
                    with utils.maybe_close((train_x[s], train_y[s]) for s in slices) as batches:
                        for _, (batch_x, batch_y) in loop.iter_steps(batches):
                            _, batch_loss = session.run(
                                [train_op, loss], feed_dict={x: batch_x, y: batch_y})
                            loop.collect_metrics(loss=batch_loss)
                    assert batches.gi_frame is None            # closed
            with pytest.warns(DeprecationWarning,
                              match='Function `old_evaluate` is deprecated; use `evaluate`'):
                after = old_evaluate(session)
            assert loop.step == 9                  # ceil(40 / 16) steps in each of 3 epochs
        files = list(utils.iter_files(tmpdir))
    assert after < before
    assert len(files) == 1 and files[0].startswith('logs/linear_model/events.out.tfevents.')


def test_a_classic_tensor_wrapper_subclass(session):
    class Scaled(spt.utils.TensorWrapper):
        def __init__(self, tensor, scale):
            self._tensor = tensor
            self.scale = scale

        @property
        def tensor(self):
            return self._tensor * self.scale

    spt.utils.register_tensor_wrapper_class(Scaled)
    ph = v1.placeholder(tf.float32, [2])
    s = Scaled(ph, 3.)
    total = tf.reduce_sum(s) + s[0]
    assert session.run([s, total], feed_dict={ph: [1., 2.]})[1] == 12.
    np.testing.assert_array_equal(session.run(s, feed_dict={ph: [1., 2.]}), [3., 6.])


# ------------------------------------------------------------ classic extension points
def test_a_classic_trainer_subclass_gets_the_session_in_run_step():
    x, y, w, loss = build_regression()
    train_op = v1.train.GradientDescentOptimizer(0.1).minimize(loss)
    xs, ys = regression_data(64, 0)

    class MyTrainer(spt.BaseTrainer):
        """The classic way: `_run_step(session, payload)`."""

        def __init__(self, loop, flow):
            super().__init__(loop)
            self.flow = flow
            self.sessions = []

        def _iter_steps(self):
            for _, batch in self.loop.iter_steps(self.flow):
                yield batch

        def _run_step(self, session, payload):
            self.sessions.append(session)
            _, value = session.run([train_op, loss], feed_dict={x: payload[0], y: payload[1]})
            self.loop.collect_metrics(loss=value)

    with spt.utils.create_session().as_default() as session:
        session.run(v1.global_variables_initializer())
        loop = spt.TrainLoop([w], max_epoch=3, print_func=lambda s: None)
        trainer = MyTrainer(loop, spt.DataFlow.arrays([xs, ys], 16))
        with loop:
            trainer.run()
        assert len(trainer.sessions) == 12 and all(s is session for s in trainer.sessions)
        assert session.run(loss, feed_dict={x: xs, y: ys}) < 0.5


def test_an_evaluator_of_a_constant_metric():
    x, y, w, loss = build_regression()
    xs, ys = regression_data(10, 1)
    lines = []
    with spt.utils.create_session().as_default() as session:
        session.run(v1.global_variables_initializer())
        loop = spt.TrainLoop([w], max_epoch=1, print_func=lines.append, show_eta=False)
        evaluator = spt.Evaluator(loop, 12, [x, y], spt.DataFlow.arrays([xs, ys], 5),
                                  time_metric_name=None)
        with loop:
            for _ in loop.iter_epochs():
                evaluator.run()
                loop.print_logs()
    assert evaluator.last_metrics_dict == {'valid_loss': 12.0}
    assert lines[0].endswith('valid loss: 12 (*)')



# ------------------------------------------------------------ issue 22: classic scripts that broke
def test_trainer_logs_an_annealed_learning_rate_as_a_metric():
    x, y, w, loss = build_regression()
    lr = spt.AnnealingVariable('learning_rate', .04, .5)
    train_op = v1.train.GradientDescentOptimizer(lr).minimize(loss)
    xs, ys = regression_data(20, seed=6)
    flow = spt.DataFlow.arrays([xs, ys], batch_size=10)
    lines = []
    with spt.utils.create_session():
        spt.utils.ensure_variables_initialized()
        with spt.TrainLoop([w], max_epoch=3, show_eta=False, print_func=lines.append) as loop:
            trainer = spt.Trainer(loop, train_op, [x, y], flow,
                                  metrics={'loss': loss, 'lr': lr})
            trainer.anneal_after(lr, epochs=1)
            trainer.log_after_epochs(freq=1)
            trainer.run()
    epoch_lines = [line for line in lines if line.startswith('[Epoch')]
    assert [metric_of(line, 'lr') for line in epoch_lines] == pytest.approx([.04, .02, .01])


def test_checkpoint_saver_of_a_classic_script(tmp_path, session):
    x = v1.get_variable('x', initializer=1.)
    y = v1.get_variable('y', initializer=2.)
    saver = spt.CheckpointSaver([x, y], str(tmp_path), save_meta=False)
    assert saver.save_meta is False
    assert isinstance(saver.saver, v1.train.Saver)
    session.run(v1.global_variables_initializer())
    saver.save(0)
    session.run(v1.assign(x, 5.))
    # a saver of fewer variables restores its subset, as the classic one and TF's Saver do
    path, _ = spt.CheckpointSaver([x], str(tmp_path)).restore_latest()
    assert path.endswith('checkpoint.dat-0') and session.run(x) == 1.
    session.run(v1.assign(x, 5.))
    with pytest.raises(ValueError, match=re.escape(
            "in the checkpoint but not among the variables to restore: ['y']")):
        spt.CheckpointSaver([x], str(tmp_path), strict=True).restore_latest()
    assert session.run(x) == 5.


def test_tensor_wrapper_attribute_assignment_reaches_the_tensor(session):
    class OfTensor(spt.utils.TensorWrapper):
        def __init__(self, tensor):
            self._self_tensor = tensor

        @property
        def tensor(self):
            return self._self_tensor

    t = tf.constant(3.)
    w = OfTensor(t)
    w.abc = 123
    assert t.abc == 123 and w.abc == 123
    del w.abc
    assert not hasattr(t, 'abc')
    w._self_note = 'own'
    assert not hasattr(t, '_self_note') and w._self_note == 'own'
    assert session.run(w * 2.) == 6.


def test_summary_writer_keeps_the_run_metadata_of_a_session_run(tmp_path, session):
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2
    a = v1.get_variable('a', initializer=2.)
    session.run(a.initializer)
    logdir = str(tmp_path / 'logs')
    with spt.TrainLoop([a], max_epoch=1, summary_dir=logdir, print_func=lambda s: None) as loop:
        run_metadata = v1.RunMetadata()
        session.run(a * 3., options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE),
                    run_metadata=run_metadata)
        loop.summary_writer.add_run_metadata(run_metadata, 'step_1', global_step=1)
        loop.summary_writer.add_session_log(v1.SessionLog(status=v1.SessionLog.START), 1)
        assert loop.summary_writer.get_logdir() == logdir
    events = [event_pb2.Event.FromString(r)
              for name in sorted(os.listdir(logdir))
              for r in RawEventFileLoader(os.path.join(logdir, name)).Load()]
    tagged = [e.tagged_run_metadata for e in events if e.HasField('tagged_run_metadata')]
    assert [m.tag for m in tagged] == ['step_1']
    assert v1.RunMetadata.FromString(tagged[0].run_metadata).step_stats.dev_stats
    assert [e.session_log.status for e in events if e.HasField('session_log')] == [1]
