"""`Trainer`, `Evaluator` and the trainer components with TF1-style graph code.

Eager execution is disabled in this process (tests/conftest.py); each test
gets a fresh graph, and `session` is a default ``tf.compat.v1.Session`` on it.
The spec is API.md sections 3, 8, 9, 10 and 11.  Expected values are worked
out by hand.
"""

import re

import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_digits

import tfsnippet as spt
from tfsnippet import EventKeys
from tfsnippet.trainer import GradientAccumulator
from tests.helpers import read_scalars

v1 = tf.compat.v1

TRAINER_KEYS = (
    EventKeys.BEFORE_EXECUTION, EventKeys.AFTER_EXECUTION, EventKeys.BEFORE_EPOCH,
    EventKeys.AFTER_EPOCH, EventKeys.BEFORE_STEP, EventKeys.AFTER_STEP,
    EventKeys.STEP_EVALUATION, EventKeys.STEP_ANNEALING, EventKeys.STEP_LOGGING,
    EventKeys.EPOCH_EVALUATION, EventKeys.EPOCH_ANNEALING, EventKeys.EPOCH_LOGGING,
)


def record(events, prefix, keys, log):
    """Append ``('<prefix>:<KEY>', detail)`` to `log` each time one of `keys` fires."""
    def make(key):
        def handler(_, *payload):
            detail = None
            if payload:
                (data,) = payload
                detail = sorted(data)
            log.append((f'{prefix}:{key.name}', detail))
        return handler

    for key in keys:
        events.on(key, make(key))


def tag_of(line):
    return line.split(']')[0] + ']'


def vector_batches(*vectors):
    return [(np.asarray(v, dtype=np.float32),) for v in vectors]


# ------------------------------------------------------------ training works
def test_graph_trainer_trains_digits_with_an_annealed_learning_rate(session):
    data = load_digits()
    x_train = (data.data[:300] / 16.).astype(np.float32)
    y_train = data.target[:300].astype(np.int32)
    x = v1.placeholder(tf.float32, [None, 64], name='x')
    y = v1.placeholder(tf.int32, [None], name='y')
    init = v1.glorot_uniform_initializer(seed=1)
    with v1.variable_scope('net'):
        w1 = v1.get_variable('w1', [64, 32], initializer=init)
        b1 = v1.get_variable('b1', [32], initializer=v1.zeros_initializer())
        w2 = v1.get_variable('w2', [32, 10], initializer=init)
        b2 = v1.get_variable('b2', [10], initializer=v1.zeros_initializer())
    logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), y),
                                 tf.float32))
    lr = spt.AnnealingVariable('lr', .5, .8)
    train_op = v1.train.GradientDescentOptimizer(learning_rate=lr).minimize(loss)

    lines = []
    flow = spt.DataFlow.arrays([x_train, y_train], batch_size=50, shuffle=True,
                               random_state=np.random.RandomState(0))
    with spt.TrainLoop([w1, b1, w2, b2], max_epoch=5, show_eta=False,
                       print_func=lines.append) as loop:
        trainer = spt.Trainer(loop, train_op, [x, y], flow, metrics={'loss': loss, 'acc': acc})
        trainer.anneal_after_epochs(lr, 1)
        trainer.log_after_epochs(1)
        trainer.run()          # initializes all the variables itself

    assert lines[0].splitlines()[0].split()[:4] == ['Trainable', 'Parameters', '(2,410', 'in']
    epoch_lines = lines[1:]
    assert [tag_of(line) for line in epoch_lines] == [
        f'[Epoch {e}/5, Step {6 * e}]' for e in range(1, 6)]
    losses = [float(re.search(r'; loss: (\S+) \(±', line).group(1)) for line in epoch_lines]
    assert losses[-1] < losses[0] * 0.5
    assert lr.get() == pytest.approx(.5 * .8 ** 5)


def test_annealing_variable_is_a_v1_optimizer_learning_rate(session):
    """The lr converts to a tensor reading the variable, so each anneal changes the step size."""
    ph = v1.placeholder(tf.float32, [None])
    w = v1.get_variable('w', initializer=1.)
    loss = w * tf.reduce_sum(ph)                       # d loss / d w = sum(batch) = 1
    lr = spt.AnnealingVariable('lr', .1, .5)
    train_op = v1.train.GradientDescentOptimizer(learning_rate=lr).minimize(loss)
    values = []
    with spt.TrainLoop([w], max_epoch=3, print_func=lambda line: None) as loop:
        trainer = spt.Trainer(loop, train_op, [ph], vector_batches([1.], [.5, .5]))
        trainer.anneal_after_epochs(lr, 1)
        trainer.events.on(EventKeys.AFTER_STEP, lambda t: values.append(session.run(w)))
        trainer.run()
    steps = -np.diff([1.] + values)
    np.testing.assert_allclose(steps, [.1, .1, .05, .05, .025, .025], rtol=1e-5)
    assert lr.get() == pytest.approx(.0125)
    # set() takes effect at the next session.run as well
    lr.set(1.)
    session.run(train_op, feed_dict={ph: [1.]})
    assert session.run(w) == pytest.approx(1. - .35 - 1.)


# ------------------------------------------------------------ Trainer
def test_trainer_collects_the_metrics_of_each_session_run(session):
    """API.md 9.2 (test): ``{'loss_x': reduce_sum(ph)}`` over the batch [10..14] is 60."""
    ph = v1.placeholder(tf.float32, [None])
    collected = []
    with spt.TrainLoop(max_step=1, print_func=lambda line: None) as loop:
        loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(m))
        trainer = spt.Trainer(loop, tf.no_op(), [ph], [(np.arange(10, 15),)],
                              metrics={'loss_x': tf.reduce_sum(ph)})
        assert trainer.inputs == (ph,)
        trainer.run()
    assert collected == [{'loss_x': 60.}]
    assert isinstance(collected[0]['loss_x'], np.float32)


def _sum_trainer(loop, ph, batches, **metrics):
    """A trainer adding each batch's sum to ``total`` (returned), with the sum as a metric."""
    total = v1.get_variable('total', [], initializer=v1.zeros_initializer())
    train_op = v1.assign_add(total, tf.reduce_sum(ph))
    return spt.Trainer(loop, train_op, [ph], batches,
                       metrics={'batch_sum': tf.reduce_sum(ph), **metrics}), total


@pytest.mark.parametrize('batch, dtype', [
    (np.array([1., 2., 3.], dtype=np.float32), np.float32),   # the placeholder's own dtype
    (np.array([1., 2., 3.], dtype=np.float64), np.float32),   # converted by session.run
    ([1., 2., 3.], np.float32),                               # a list
    (np.array([[1., 2., 3.]], dtype=np.float32), np.float32),  # a rank the placeholder takes
])
def test_every_kind_of_batch_gives_the_same_values(session, batch, dtype):
    """Fed arrays of the placeholder's dtype take a shorter way to the session than
    other values (left to session.run): both give the same metrics and updates."""
    ph = v1.placeholder(tf.float32, [None] if np.ndim(batch) == 1 else [None, 3])
    collected = []
    with spt.TrainLoop(max_epoch=2, print_func=lambda line: None) as loop:
        loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(m))
        trainer, total = _sum_trainer(loop, ph, [(batch,), (batch,)])
        trainer.run()
    assert collected == [{'batch_sum': 6.}] * 4
    assert session.run(total) == 24.


def test_a_batch_of_the_wrong_shape_fails_as_session_run_says(session):
    ph = v1.placeholder(tf.float32, [None, 2])
    good = np.ones((4, 2), np.float32)
    with spt.TrainLoop(max_epoch=1, print_func=lambda line: None) as loop:
        trainer, total = _sum_trainer(loop, ph, [(good,), (np.ones((4, 3), np.float32),)])
        with pytest.raises(ValueError, match=re.escape(
                "Cannot feed value of shape (4, 3) for Tensor Placeholder:0, which has "
                "shape (None, 2)")):
            trainer.run()
    assert session.run(total) == 8.   # the first step ran


def test_a_fetched_placeholder_returns_the_fed_batch(session):
    ph = v1.placeholder(tf.float32, [])
    collected = []
    with spt.TrainLoop(max_epoch=1, print_func=lambda line: None) as loop:
        loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(m))
        trainer, _ = _sum_trainer(loop, ph, [(np.float32(2.),), (np.float32(5.),)], fed=ph)
        trainer.run()
    assert collected == [{'batch_sum': 2., 'fed': 2.}, {'batch_sum': 5., 'fed': 5.}]


def test_a_trainer_runs_again_in_a_new_session_and_not_in_a_closed_one(graph):
    ph = v1.placeholder(tf.float32, [None])
    batches = [(np.array([1., 2.], np.float32),)]
    with spt.TrainLoop(max_epoch=3, print_func=lambda line: None) as loop:
        trainer, total = _sum_trainer(loop, ph, batches)
        loop.max_epoch = 1
        first = v1.Session(graph=graph)
        with first.as_default():
            trainer.run()
            assert first.run(total) == 3.
        first.close()
        loop.max_epoch = 2
        with first.as_default(), pytest.raises(RuntimeError,
                                               match='Attempted to use a closed Session'):
            trainer.run()
        second = v1.Session(graph=graph)
        with second.as_default():
            trainer.run()   # initializes `total` in this session, then trains one epoch
            assert second.run(total) == 3.
        second.close()


def test_an_op_error_of_a_step_names_the_failing_op(session):
    ph = v1.placeholder(tf.float32, [None])
    checked = tf.debugging.check_numerics(tf.reduce_sum(ph), 'the batch sum', name='guard')
    with spt.TrainLoop(max_epoch=1, print_func=lambda line: None) as loop:
        trainer = spt.Trainer(loop, checked.op, [ph],
                              [(np.array([1.], np.float32),), (np.array([np.nan], np.float32),)],
                              metrics={'s': checked})
        with pytest.raises(tf.errors.InvalidArgumentError,
                           match=r"(?s)the batch sum : Tensor had NaN values.*'guard'"):
            trainer.run()
        assert loop.step == 2


def test_trainer_feed_dict_values_are_resolved_each_step(session):
    x = v1.placeholder(tf.float32, [None])
    scale = v1.placeholder(tf.float32, [])
    shift = v1.placeholder(tf.float32, [])
    bias = v1.placeholder(tf.float32, [])
    sv = spt.ScheduledVariable('bias_value', 100.)
    collected = []
    with spt.TrainLoop(max_epoch=2, print_func=lambda line: None) as loop:
        loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(m['v']))
        trainer = spt.Trainer(
            loop, tf.no_op(), [x], vector_batches([1.], [2.]),
            feed_dict={scale: spt.AnnealingScalar(loop, 1., .5, steps=1),
                       shift: lambda: 10. * loop.epoch, bias: sv},
            metrics={'v': tf.reduce_sum(x) * scale + shift + bias})
        # changed through an epoch hook: read again at the next step
        trainer.anneal_after_epochs(lambda: sv.set(200.), 1)
        trainer.run()
    # steps 1..4: scale 1, .5, .25, .125; shift 10, 10, 20, 20; bias 100, 100, 200, 200
    assert collected == pytest.approx([111., 111., 220.25, 220.25])


def test_summaries_run_only_with_a_summary_writer(session, tmp_path):
    ph = v1.placeholder(tf.float32, [None])
    counter = v1.get_variable('summary_runs', initializer=0, dtype=tf.int32, trainable=False)
    summary = v1.summary.scalar('runs', tf.cast(counter.assign_add(1), tf.float32))
    data = vector_batches([1.], [2.])
    added = []

    with spt.TrainLoop(max_epoch=2, print_func=lambda line: None) as loop:
        loop.events.on(EventKeys.SUMMARY_ADDED, lambda lp, s: added.append(lp.step))
        trainer = spt.Trainer(loop, tf.no_op(), [ph], data, summaries=summary,
                              metrics={'loss': tf.reduce_sum(ph)})
        assert trainer.summaries == [summary]
        trainer.run()
    assert session.run(counter) == 0          # never run without a writer
    assert added == []

    with spt.TrainLoop(max_epoch=2, summary_dir=str(tmp_path),
                       print_func=lambda line: None) as loop:
        loop.events.on(EventKeys.SUMMARY_ADDED, lambda lp, s: added.append(lp.step))
        trainer = spt.Trainer(loop, tf.no_op(), [ph], data, summaries=[summary],
                              metrics={'loss': tf.reduce_sum(ph)})
        trainer.run()
    assert session.run(counter) == 4
    assert added == [1, 2, 3, 4]
    scalars = read_scalars(tmp_path, ndigits=6)
    assert scalars['runs'] == [(1, 1.), (2, 2.), (3, 3.), (4, 4.)]
    assert scalars['metrics/loss'] == [(1, 1.), (2, 2.), (3, 1.), (4, 2.)]


def test_trainer_checks_the_batch_arity_of_a_plain_iterable(session):
    ph = v1.placeholder(tf.float32, [None])
    with spt.TrainLoop(max_step=1, print_func=lambda line: None) as loop:
        trainer = spt.Trainer(loop, tf.no_op(), [ph], [(np.zeros(2), np.zeros(2))])
        with pytest.raises(ValueError, match=re.escape(
                '`inputs` has 1 placeholders but a batch of `data_flow` holds 2 arrays')):
            trainer.run()


def test_trainer_and_evaluator_check_the_arity_of_a_dataflow_at_construction(session):
    ph = v1.placeholder(tf.float32, [None])
    flow = spt.DataFlow.arrays([np.zeros(4), np.zeros(4)], batch_size=2)
    for make in (lambda loop: spt.Trainer(loop, tf.no_op(), [ph], flow),
                 lambda loop: spt.Evaluator(loop, tf.reduce_mean(ph), [ph], flow)):
        with pytest.raises(ValueError, match=re.escape(
                '`inputs` has 1 placeholders but the batches of `data_flow` hold 2 arrays')):
            make(spt.TrainLoop(max_step=1))


def test_run_without_a_session_fails_after_before_execution():
    ph = v1.placeholder(tf.float32, [None])
    log = []
    with spt.TrainLoop(max_step=1, print_func=lambda line: None) as loop:
        trainer = spt.Trainer(loop, tf.no_op(), [ph], vector_batches([1.]))
        record(trainer.events, 'T', TRAINER_KEYS, log)
        with pytest.raises(RuntimeError, match=re.escape('No session is active')):
            trainer.run()
    assert log == [('T:BEFORE_EXECUTION', None)]
    assert loop.step == 0


def test_run_initializes_all_uninitialized_global_variables_only(session):
    ph = v1.placeholder(tf.float32, [None])
    w = v1.get_variable('w', initializer=1.)
    other = v1.get_variable('not_a_param', initializer=5.)       # not in param_vars
    session.run(w.initializer)
    session.run(w.assign(7.))
    collected = []
    with spt.TrainLoop([w], max_step=1, print_func=lambda line: None) as loop:
        loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(m))
        trainer = spt.Trainer(loop, tf.no_op(), [ph], vector_batches([1.]),
                              metrics={'w': w + 0., 'other': other + 0.})
        trainer.run()
    # `w` kept its assigned value; `other` got its initial value
    assert collected == [{'w': 7., 'other': 5.}]


def test_run_without_initialization_fails_on_uninitialized_variables(session):
    ph = v1.placeholder(tf.float32, [None])
    other = v1.get_variable('uninitialized', initializer=5.)
    with spt.TrainLoop(max_step=1, print_func=lambda line: None) as loop:
        trainer = spt.Trainer(loop, tf.no_op(), [ph], vector_batches([1.]),
                              metrics={'other': other + 0.}, ensure_variables_initialized=False)
        with pytest.raises(tf.errors.FailedPreconditionError):
            trainer.run()
    assert spt.utils.get_uninitialized_variables([other]) == [other]


# ------------------------------------------------------------ Evaluator
def test_evaluator_single_tensor_metric_and_per_run_feed_dict(session, fake_clock):
    ph = v1.placeholder(tf.float32, [None])
    shift = v1.placeholder(tf.float32, [])
    times = []
    lines = []
    loop = spt.TrainLoop(max_epoch=1, show_eta=False, clock=fake_clock, print_func=lines.append)
    loop.events.on(EventKeys.TIME_METRICS_COLLECTED, lambda lp, m: times.append(dict(m)))
    evaluator = spt.Evaluator(loop, tf.reduce_mean(ph) + shift, [ph], vector_batches([1., 3.]),
                              feed_dict={shift: 0.}, time_metric_name='test_time')
    evaluator.events.on(EventKeys.BEFORE_EXECUTION, lambda e: fake_clock.advance(2.))
    assert list(evaluator.metrics) == ['valid_loss']
    with loop:
        for _ in loop.iter_epochs():
            evaluator.run()
            assert evaluator.last_metrics_dict == {'valid_loss': 2.}
            evaluator.run(feed_dict={shift: 10.})
            assert evaluator.last_metrics_dict == {'valid_loss': 12.}
            loop.print_logs()
    assert times == [{'test_time': 2.}, {'test_time': 2.}, {'epoch_time': 4.}]
    assert loop.best_valid_metric == 2.
    assert lines == ['[Step 0] epoch time: 4s; test time: 2s (±0s); valid loss: 7 (±5) (*)']


def test_evaluator_rejects_a_non_scalar_tensor(session):
    ph = v1.placeholder(tf.float32, [None])
    loop = spt.TrainLoop(max_epoch=1)
    with pytest.raises(ValueError, match=re.escape("Metric is not a scalar tensor: 'v' is ")):
        spt.Evaluator(loop, {'v': ph * 2.}, [ph], vector_batches([1.]))


def test_evaluator_requires_inputs_with_graph_metrics(session):
    ph = v1.placeholder(tf.float32, [None])
    with pytest.raises(ValueError, match=re.escape(
            '`inputs` is required with graph metrics: the placeholders to feed each batch '
            'to')):
        spt.Evaluator(spt.TrainLoop(max_epoch=1), tf.reduce_mean(ph), data_flow=[])


# ------------------------------------------------------------ deprecated classes
def test_loss_trainer_is_deprecated_and_run_feed_dict_is_for_one_run(session):
    ph = v1.placeholder(tf.float32, [None])
    scale = v1.placeholder(tf.float32, [])
    loss = tf.reduce_sum(ph) * scale
    collected = []
    with spt.TrainLoop(max_epoch=2, print_func=lambda line: None) as loop:
        loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(m))
        with pytest.warns(DeprecationWarning, match=re.escape(
                'Class `LossTrainer` is deprecated; use :class:`Trainer` instead.')):
            trainer = spt.LossTrainer(loop, loss, tf.no_op(), [ph], vector_batches([2.]),
                                      feed_dict={scale: 1.}, metric_name='nll')
        assert trainer.loss is loss
        assert trainer.metric_name == 'nll'
        assert trainer.metrics == {'nll': loss}
        trainer.run(feed_dict={scale: 3.})
        assert trainer.feed_dict == {scale: 1.}
    assert collected == [{'nll': 6.}, {'nll': 6.}]


def test_loss_trainer_restores_its_feed_dict_after_an_error(session):
    ph = v1.placeholder(tf.float32, [None])
    scale = v1.placeholder(tf.float32, [])
    with spt.TrainLoop(max_epoch=1, print_func=lambda line: None) as loop:
        with pytest.warns(DeprecationWarning):
            trainer = spt.LossTrainer(loop, tf.reduce_sum(ph) * scale, tf.no_op(), [ph],
                                      vector_batches([2.]), feed_dict={scale: 1.})
        assert trainer.metric_name == 'loss'

        def fail(t):
            raise KeyError('stop here')

        trainer.events.on(EventKeys.AFTER_STEP, fail)
        with pytest.raises(KeyError, match='stop here'):
            trainer.run(feed_dict={scale: 3.})
        assert trainer.feed_dict == {scale: 1.}


def test_validator_is_deprecated_and_timed_as_valid_time(session):
    ph = v1.placeholder(tf.float32, [None])
    times = []
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda line: None)
    loop.events.on(EventKeys.TIME_METRICS_COLLECTED, lambda lp, m: times.append(sorted(m)))
    with pytest.warns(DeprecationWarning, match=re.escape(
            'Class `Validator` is deprecated; use :class:`Evaluator` instead.')):
        validator = spt.Validator(loop, tf.reduce_mean(ph), [ph], vector_batches([1.]))
    assert validator.time_metric_name == 'valid_time'
    assert isinstance(validator, spt.Evaluator)
    with loop:
        for _ in loop.iter_epochs():
            validator.run()
    assert times == [['valid_time'], ['epoch_time']]
    assert validator.last_metrics_dict == {'valid_loss': 1.}


# ------------------------------------------------------------ gradients
@pytest.mark.parametrize('optimizer_name', ['sgd', 'momentum'])
def test_gradient_accumulator_op_with_a_v1_optimizer(session, optimizer_name):
    rng = np.random.RandomState(5)
    targets = rng.normal(size=(6, 4)).astype(np.float32)
    init = rng.normal(size=4).astype(np.float32)
    weights = np.arange(1., 5., dtype=np.float32)
    t = v1.placeholder(tf.float32, [4])
    w = v1.get_variable('w', initializer=init)
    loss = tf.reduce_sum((w - t) ** 2 * weights)
    if optimizer_name == 'sgd':
        optimizer = v1.train.GradientDescentOptimizer(.1)
    else:
        optimizer = v1.train.MomentumOptimizer(.1, .9)
    acc = GradientAccumulator([w], num_batches=2)
    op = acc.apply(optimizer, tf.gradients(loss, [w]))
    updated = []
    with spt.TrainLoop([w], max_epoch=1, print_func=lambda line: None) as loop:
        trainer = spt.Trainer(loop, op, [t], [(row,) for row in targets],
                              metrics={'loss': loss})
        trainer.events.on(EventKeys.AFTER_STEP, lambda tr: updated.append(session.run(w)))
        trainer.run()

    # by hand: both gradients of a pair at the same weights, their mean applied once
    ref = init.astype(np.float64)
    velocity = np.zeros(4)
    expected = []
    for i in range(0, 6, 2):
        grads = [2. * (ref - target) * weights for target in targets[i:i + 2]]
        mean = (grads[0] + grads[1]) / 2.
        expected.append(ref.copy())            # unchanged after the first of the pair
        if optimizer_name == 'sgd':
            ref = ref - .1 * mean
        else:
            velocity = .9 * velocity + mean
            ref = ref - .1 * velocity
        expected.append(ref.copy())
    np.testing.assert_allclose(np.array(updated), np.array(expected), rtol=1e-5, atol=1e-6)
