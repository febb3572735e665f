"""`Trainer`, `Evaluator` and the training components with eager TF2 / Keras 3 code.

The tests taking ``style`` run in both TF styles (`make_trainer` and
`make_evaluator` build the trainer of each style);
tests/graph/test_trainer_graph.py has what is graph-only (feeds, sessions).

The spec is API.md sections 3, 8, 9, 10 and 11, the docstrings of
`BaseTrainer` and `TrainLoop`, and the docstrings of the components.  Every
expected value below is worked out by hand; time comes from `fake_clock`.
"""

import io
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_digits

import tfsnippet as spt
import tfsnippet.scaffold.metrics.values as logging_module
from tfsnippet import EventKeys
from tfsnippet.trainer import (GradientAccumulator, LossGuard, LossGuardError, ProgressBar,
                               ReduceOnPlateau, clip_gradients)
from tests.helpers.loops import make_evaluator, make_trainer

LOOP_KEYS = (
    EventKeys.ENTER_LOOP, EventKeys.EXIT_LOOP, EventKeys.BEFORE_EPOCH, EventKeys.AFTER_EPOCH,
    EventKeys.BEFORE_STEP, EventKeys.AFTER_STEP, EventKeys.METRICS_COLLECTED,
    EventKeys.TIME_METRICS_COLLECTED, EventKeys.METRIC_STATS_PRINTED,
    EventKeys.TIME_METRIC_STATS_PRINTED, EventKeys.SUMMARY_ADDED,
)
TRAINER_KEYS = (
    EventKeys.BEFORE_EXECUTION, EventKeys.AFTER_EXECUTION, EventKeys.BEFORE_EPOCH,
    EventKeys.AFTER_EPOCH, EventKeys.BEFORE_STEP, EventKeys.AFTER_STEP,
    EventKeys.STEP_EVALUATION, EventKeys.STEP_ANNEALING, EventKeys.STEP_LOGGING,
    EventKeys.EPOCH_EVALUATION, EventKeys.EPOCH_ANNEALING, EventKeys.EPOCH_LOGGING,
)
EVALUATOR_KEYS = (EventKeys.BEFORE_EXECUTION, EventKeys.AFTER_EXECUTION)


def record(events, prefix, keys, log):
    """Append ``('<prefix>:<KEY>', detail)`` to `log` each time one of `keys` fires.

    `detail` is ``None`` for plain events, the sorted names of a metrics dict,
    or ``{name: sample count}`` for the ``*_STATS_PRINTED`` events.
    """
    def make(key):
        def handler(_, *payload):
            detail = None
            if payload:
                (data,) = payload
                if key in (EventKeys.METRIC_STATS_PRINTED, EventKeys.TIME_METRIC_STATS_PRINTED):
                    detail = {name: c.counter for name, c in data.items() if c.has_value}
                elif key == EventKeys.SUMMARY_ADDED:
                    detail = 'summary'
                else:
                    detail = sorted(data)
            log.append((f'{prefix}:{key.name}', detail))
        return handler

    for key in keys:
        events.on(key, make(key))


def digits(stop=300):
    data = load_digits()
    return (data.data[:stop] / 16.).astype(np.float32), data.target[:stop].astype(np.int32)


def make_loop(lines, clock, **kwargs):
    kwargs.setdefault('show_eta', False)
    return spt.TrainLoop(print_func=lines.append, clock=clock, **kwargs)


def scalar_batches(values):
    """One batch per value: a tuple holding a 1-element float32 array."""
    return [(np.array([v], dtype=np.float32),) for v in values]


def tag_of(line):
    return line.split(']')[0] + ']'


# ------------------------------------------------------------ training works
def test_eager_step_function_trains_a_keras_model_on_digits():
    keras.utils.set_random_seed(1)
    x, y = digits()
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(32, activation='relu'),
                              keras.layers.Dense(10)])
    optimizer = keras.optimizers.Adam(0.01)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(bx, by):
        with tf.GradientTape() as tape:
            logits = model(bx, training=True)
            loss = loss_fn(by, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), by),
                                     tf.float32))
        return {'loss': loss, 'acc': acc}

    lines = []
    flow = spt.DataFlow.arrays([x, y], batch_size=50)
    with spt.TrainLoop(model.trainable_variables, max_epoch=5, show_eta=False,
                       print_func=lines.append) as loop:
        trainer = spt.Trainer(loop, train_step, data_flow=flow)
        trainer.log_after_epochs(1)
        trainer.run()

    # the summary table of 64*32 + 32 + 32*10 + 10 = 2,410 parameters, then an empty line
    assert lines[0].splitlines()[0].split()[:4] == ['Trainable', 'Parameters', '(2,410', 'in']
    assert lines[0].endswith('\n')
    epoch_lines = lines[1:]
    assert [tag_of(line) for line in epoch_lines] == [
        f'[Epoch {e}/5, Step {6 * e}]' for e in range(1, 6)]
    losses = [float(re.search(r'; loss: (\S+) \(±', line).group(1)) for line in epoch_lines]
    accs = [float(re.search(r'; acc: (\S+) \(±', line).group(1)) for line in epoch_lines]
    assert losses[-1] < losses[0] * 0.5
    assert all(b < a for a, b in zip(losses, losses[1:]))
    assert accs[-1] > accs[0]
    assert optimizer.iterations.numpy() == 30
    assert loop.stop_reason == 'max_epoch reached'


# ------------------------------------------------------------ event order
def test_full_event_sequence_of_two_epochs_of_two_steps(style, tmp_path, fake_clock):
    """loop.events, trainer.events and evaluator.events, with the printed lines, in one
    list; in graph style the trainer also runs a summary op at each step."""
    log = []
    summaries = []
    loop = spt.TrainLoop(max_epoch=2, show_eta=False, clock=fake_clock,
                         summary_dir=str(tmp_path) if style.is_graph else None,
                         print_func=lambda line: log.append(('PRINT', tag_of(line))))

    def step(x):
        if style.is_graph:   # filled before make_trainer passes the list on
            summaries.append(tf.compat.v1.summary.scalar('x', tf.reduce_sum(x)))
        return {'loss': tf.reduce_sum(x)}

    trainer = make_trainer(style, loop, scalar_batches([1., 2.]), step,
                           **({'summaries': summaries} if style.is_graph else {}))
    evaluator = make_evaluator(style, loop, scalar_batches([0.]),
                               lambda x: tf.reduce_mean(x) * 0. + 3.,
                               time_metric_name='valid_time')
    record(loop.events, 'L', LOOP_KEYS, log)
    record(trainer.events, 'T', TRAINER_KEYS, log)
    record(evaluator.events, 'E', EVALUATOR_KEYS, log)
    # hooks are registered after the recorders, so they show up after their event
    trainer.evaluate_after_steps(lambda: log.append(('HOOK:step-eval', loop.step)), 2)
    trainer.evaluate_after_epochs(evaluator, 1)
    trainer.anneal_after_epochs(lambda: log.append(('HOOK:anneal', loop.epoch)), 1)
    trainer.log_after_epochs(1)

    with loop:
        trainer.run()

    def one_step(step):
        out = [('L:BEFORE_STEP', None), ('T:BEFORE_STEP', None),
               ('L:METRICS_COLLECTED', ['loss'])]
        if style.is_graph:
            out.append(('L:SUMMARY_ADDED', 'summary'))
        out.append(('T:STEP_EVALUATION', None))
        if step % 2 == 0:
            out.append(('HOOK:step-eval', step))
        out += [('T:STEP_ANNEALING', None), ('T:STEP_LOGGING', None),
                ('T:AFTER_STEP', None), ('L:AFTER_STEP', None),
                ('L:TIME_METRICS_COLLECTED', ['step_time'])]
        return out

    def one_epoch(epoch):
        return ([('L:BEFORE_EPOCH', None), ('T:BEFORE_EPOCH', None)]
                + one_step(2 * epoch - 1) + one_step(2 * epoch)
                + [('T:EPOCH_EVALUATION', None),
                   ('E:BEFORE_EXECUTION', None),
                   ('L:METRICS_COLLECTED', ['valid_loss']),
                   ('E:AFTER_EXECUTION', None),
                   ('L:TIME_METRICS_COLLECTED', ['valid_time']),
                   ('T:EPOCH_ANNEALING', None),
                   ('HOOK:anneal', epoch),
                   ('T:EPOCH_LOGGING', None),
                   ('L:TIME_METRICS_COLLECTED', ['epoch_time']),
                   ('PRINT', f'[Epoch {epoch}/2, Step {2 * epoch}]'),
                   ('L:METRIC_STATS_PRINTED', {'loss': 2, 'valid_loss': 1}),
                   ('L:TIME_METRIC_STATS_PRINTED', {'epoch_time': 1, 'step_time': 2,
                                                    'valid_time': 1}),
                   ('T:AFTER_EPOCH', None), ('L:AFTER_EPOCH', None)])

    expected = ([('L:ENTER_LOOP', None), ('T:BEFORE_EXECUTION', None)]
                + one_epoch(1) + one_epoch(2)
                + [('T:AFTER_EXECUTION', None), ('L:EXIT_LOOP', None)])
    assert log == expected


def test_trainer_events_alone_match_the_documented_order(style):
    """API.md section 11 (test): the trainer's own events for 2 epochs x 2 steps."""
    log = []
    loop = spt.TrainLoop(max_epoch=2, print_func=lambda line: None)
    trainer = make_trainer(style, loop, scalar_batches([1., 2.]), lambda x: {})
    record(trainer.events, 'T', TRAINER_KEYS, log)
    with loop:
        trainer.run()
    names = [name[2:] for name, _ in log]
    step = ['BEFORE_STEP', 'STEP_EVALUATION', 'STEP_ANNEALING', 'STEP_LOGGING', 'AFTER_STEP']
    epoch = (['BEFORE_EPOCH'] + step * 2 +
             ['EPOCH_EVALUATION', 'EPOCH_ANNEALING', 'EPOCH_LOGGING', 'AFTER_EPOCH'])
    assert names == ['BEFORE_EXECUTION'] + epoch * 2 + ['AFTER_EXECUTION']


def test_after_handlers_run_in_reverse_registration_order():
    log = []
    loop = spt.TrainLoop(max_step=1, print_func=lambda line: None)
    trainer = spt.Trainer(loop, lambda x: None, data_flow=scalar_batches([1.]))
    for key in (EventKeys.AFTER_STEP, EventKeys.AFTER_EPOCH, EventKeys.AFTER_EXECUTION,
                EventKeys.BEFORE_STEP):
        for i in (1, 2):
            trainer.events.on(key, lambda t, key=key, i=i: log.append((key.name, i)))
    with loop:
        trainer.run()
    assert log == [('BEFORE_STEP', 1), ('BEFORE_STEP', 2), ('AFTER_STEP', 2), ('AFTER_STEP', 1),
                   ('AFTER_EPOCH', 2), ('AFTER_EPOCH', 1),
                   ('AFTER_EXECUTION', 2), ('AFTER_EXECUTION', 1)]


def test_after_execution_is_not_fired_when_a_step_raises():
    log = []
    loop = spt.TrainLoop(max_epoch=2, print_func=lambda line: None)
    failures = [True]

    def step(x):
        if loop.step == 2 and failures:
            failures.pop()
            raise ZeroDivisionError('boom')
        return {'loss': tf.reduce_sum(x)}

    trainer = spt.Trainer(loop, step, data_flow=scalar_batches([1., 2., 3.]))
    record(trainer.events, 'T', (EventKeys.BEFORE_EXECUTION, EventKeys.AFTER_EXECUTION,
                                 EventKeys.AFTER_STEP, EventKeys.AFTER_EPOCH), log)
    with loop:
        with pytest.raises(ZeroDivisionError, match='boom'):
            trainer.run()
        # only step 1 completed; the failing step fired neither AFTER_STEP nor AFTER_EPOCH
        assert log == [('T:BEFORE_EXECUTION', None), ('T:AFTER_STEP', None)]
        assert (loop.epoch, loop.step) == (1, 2)
        # the trainer is not left "running": a second run() works and completes
        log.clear()
        trainer.run()
    assert log[0] == ('T:BEFORE_EXECUTION', None)
    assert log[-1] == ('T:AFTER_EXECUTION', None)
    assert loop.epoch == 2


def test_run_is_not_reentrant():
    loop = spt.TrainLoop(max_step=3, print_func=lambda line: None)
    trainer = spt.Trainer(loop, lambda x: None, data_flow=scalar_batches([1., 2., 3.]))
    trainer.evaluate_after_steps(trainer.run, 2)
    with loop:
        with pytest.raises(RuntimeError, match=re.escape('`run()` is not re-entrant.')):
            trainer.run()
        assert loop.step == 2


# ------------------------------------------------------------ hooks and schedules
def test_step_hooks_of_each_kind_fire_on_the_global_step(style, fake_clock):
    lines, calls = [], []
    loop = make_loop(lines, fake_clock, max_epoch=2)

    class Annealed:
        def anneal(self):
            calls.append(('anneal', loop.step))

    class Evaluated:
        def run(self):
            calls.append(('evaluate', loop.step))

    trainer = make_trainer(style, loop, scalar_batches([1., 2., 3., 4., 5.]),
                           lambda x: {'loss': tf.reduce_sum(x)})
    trainer.evaluate_after_steps(Evaluated(), 3)
    trainer.anneal_after_steps(Annealed(), 4)
    trainer.log_after_steps(2)
    trainer.evaluate_after(lambda: calls.append(('plain', loop.step)), steps=5)
    with loop:
        trainer.run()
    assert [s for k, s in calls if k == 'evaluate'] == [3, 6, 9]
    assert [s for k, s in calls if k == 'anneal'] == [4, 8]
    assert [s for k, s in calls if k == 'plain'] == [5, 10]
    # step 6 is the first of epoch 2: the schedule follows the global step
    assert [tag_of(line) for line in lines] == [
        '[Epoch 1/2, Step 2]', '[Epoch 1/2, Step 4]',
        '[Epoch 2/2, Step 6]', '[Epoch 2/2, Step 8]', '[Epoch 2/2, Step 10]']
    # a step-level print shows the steps since the previous print: loss 3+4 at step 4
    assert lines[1].endswith('loss: 3.5 (±0.5)')


def test_epoch_hooks_of_each_kind(style, fake_clock):
    lines, calls = [], []
    loop = make_loop(lines, fake_clock, max_epoch=4)
    trainer = make_trainer(style, loop, scalar_batches([1., 3.]),
                           lambda x: {'loss': tf.reduce_sum(x)})
    trainer.evaluate_after_epochs(lambda: calls.append(('evaluate', loop.epoch)), 2)
    trainer.anneal_after(lambda: calls.append(('anneal', loop.epoch)), epochs=3)
    trainer.log_after(epochs=2)
    with loop:
        trainer.run()
    assert calls == [('evaluate', 2), ('anneal', 3), ('evaluate', 4)]
    # epoch statistics pile up until an epoch-level print: 4 values at each print
    assert [tag_of(line) for line in lines] == ['[Epoch 2/4, Step 4]', '[Epoch 4/4, Step 8]']
    assert all(line.endswith('loss: 2 (±1)') for line in lines)


def test_phases_run_evaluation_then_annealing_then_logging():
    order = []
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda line: order.append('log'))
    trainer = spt.Trainer(loop, lambda x: None, data_flow=scalar_batches([1.]))
    # registered in the reverse of the order they run
    trainer.log_after_epochs(1)
    trainer.anneal_after_epochs(lambda: order.append('anneal'), 1)
    trainer.evaluate_after_epochs(lambda: order.append('evaluate'), 1)
    trainer.log_after_steps(1)
    trainer.anneal_after_steps(lambda: order.append('anneal'), 1)
    trainer.evaluate_after_steps(lambda: order.append('evaluate'), 1)
    with loop:
        trainer.run()
    assert order == ['evaluate', 'anneal', 'log'] * 2


def test_hooks_of_one_event_run_in_registration_order():
    order = []
    loop = spt.TrainLoop(max_step=1, print_func=lambda line: None)
    trainer = spt.Trainer(loop, lambda x: None, data_flow=scalar_batches([1.]))
    for i in range(3):
        trainer.evaluate_after_steps(lambda i=i: order.append(i), 1)
    with loop:
        trainer.run()
    assert order == [0, 1, 2]


def test_global_counter_semantics_after_a_resume_at_epoch_7(fake_clock):
    calls = []
    loop = make_loop([], fake_clock, max_epoch=10)
    loop.load_state_dict({'epoch': 7, 'step': 14, 'best_valid_metric': None})
    trainer = spt.Trainer(loop, lambda x: None, data_flow=scalar_batches([1., 2.]))
    trainer.evaluate_after_epochs(lambda: calls.append(('epochs', loop.epoch)), 5)
    trainer.evaluate_after_steps(lambda: calls.append(('steps', loop.step)), 5)
    with loop:
        trainer.run()
    # epochs 8..10 and steps 15..20 run; the freq-5 hooks fire at epoch 10, steps 15 and 20
    assert calls == [('steps', 15), ('steps', 20), ('epochs', 10)]


def test_freq_5_hook_fired_at_steps_1_to_5_7_and_10_calls_twice():
    """API.md 9.1 (test), with the step counter set through `load_state_dict`."""
    calls = []
    loop = spt.TrainLoop(max_step=100, print_func=lambda line: None)
    trainer = spt.Trainer(loop, lambda x: None, data_flow=scalar_batches([1.]))
    trainer.evaluate_after_steps(lambda: calls.append(loop.step), 5)
    for step in (1, 2, 3, 4, 5, 7, 10):
        loop.load_state_dict({'epoch': 1, 'step': step, 'best_valid_metric': None})
        trainer.events.fire(EventKeys.STEP_EVALUATION, trainer)
    assert calls == [5, 10]


def test_hook_wrapper_repr():
    """API.md 9.1 (test): ``"<callback repr>:<step|epoch>:<freq>"``."""
    class Callback:
        def __call__(self):
            pass

        def __repr__(self):
            return 'my-callback'

    loop = spt.TrainLoop(max_step=1)
    trainer = spt.Trainer(loop, lambda x: None, data_flow=scalar_batches([1.]))
    trainer.evaluate_after_steps(Callback(), 5)
    trainer.anneal_after_epochs(Callback(), 3)
    (step_hook,) = trainer.events.handlers(EventKeys.STEP_EVALUATION)
    (epoch_hook,) = trainer.events.handlers(EventKeys.EPOCH_ANNEALING)
    assert repr(step_hook) == 'my-callback:step:5'
    assert repr(epoch_hook) == 'my-callback:epoch:3'


def test_seconds_hooks_are_checked_after_each_step_with_the_loop_clock(style, fake_clock):
    lines, calls = [], []
    loop = make_loop(lines, fake_clock, max_step=8)
    trainer = make_trainer(style, loop, scalar_batches(range(8)), lambda x: {})
    # step 1 takes no time, each later step 4 seconds
    trainer.events.on(EventKeys.BEFORE_STEP,
                      lambda t: fake_clock.advance(4. if loop.step > 1 else 0.))
    trainer.evaluate_after(lambda: calls.append(('evaluate', loop.step)), seconds=10)
    trainer.anneal_after(lambda: calls.append(('anneal', loop.step)), seconds=7.5)
    trainer.log_after(seconds=12)
    with loop:
        trainer.run()
    # the clock reads 0, 4, 8, ..., 28 s after step 1 ends at steps 1..8
    assert [s for k, s in calls if k == 'evaluate'] == [4, 7]       # at 12 s, then 24 s
    assert [s for k, s in calls if k == 'anneal'] == [3, 5, 7]      # at 8 s, 16 s, 24 s
    assert [tag_of(line) for line in lines] == ['[Epoch 1, Step 4/8]', '[Epoch 1, Step 7/8]']


def test_remove_hooks_returns_the_counts():
    calls = []
    loop = spt.TrainLoop(max_epoch=1, print_func=calls.append)
    trainer = spt.Trainer(loop, lambda x: None, data_flow=scalar_batches([1., 2.]))
    trainer.log_after_steps(1)
    trainer.log_after_epochs(1)
    trainer.evaluate_after_steps(lambda: calls.append('evaluate'), 1)
    trainer.validate_after_epochs(lambda: calls.append('validate'), 1)
    trainer.validate_after(lambda: calls.append('validate'), steps=1)
    trainer.validate_after_steps(lambda: calls.append('validate'), 1)
    for _ in range(3):
        trainer.anneal_after_epochs(lambda: calls.append('anneal'), 1)

    assert trainer.remove_log_hooks() == 2
    assert trainer.remove_log_hooks() == 0
    assert trainer.remove_validation_hooks() == 4
    assert trainer.remove_evaluation_hooks() == 0
    assert trainer.remove_annealing_hooks() == 3
    assert trainer.remove_annealing_hooks() == 0
    with loop:
        trainer.run()
    assert calls == []


# ------------------------------------------------------------ step function I/O
def test_feed_dict_values_are_resolved_each_step_into_keyword_arguments():
    seen = []
    loop = spt.TrainLoop(max_epoch=2, print_func=lambda line: None)
    counter = iter(range(100))

    class Epoch(spt.DynamicValue):
        def get(self):
            return loop.epoch * 10

    sv = spt.ScheduledVariable('feed_sv', 2.5)

    def step(x, scale, epoch_x10, sv_value, call_no, const):
        seen.append((loop.step, float(x[0]), scale, epoch_x10, float(sv_value), call_no, const))
        if loop.step == 2:
            sv.set(4.)

    trainer = spt.Trainer(
        loop, step, data_flow=scalar_batches([1., 2., 3.]),
        feed_dict={'scale': spt.AnnealingScalar(loop, 1., .5, steps=2), 'epoch_x10': Epoch(),
                   'sv_value': sv, 'call_no': lambda: next(counter), 'const': 'c'})
    with loop:
        trainer.run()
    assert seen == [
        (1, 1., 1., 10, 2.5, 0, 'c'),
        (2, 2., 1., 10, 2.5, 1, 'c'),
        (3, 3., .5, 10, 4., 2, 'c'),
        (4, 1., .5, 20, 4., 3, 'c'),
        (5, 2., .25, 20, 4., 4, 'c'),
        (6, 3., .25, 20, 4., 5, 'c'),
    ]
    # the trainer keeps its own copy of the dict, with the unresolved values
    assert isinstance(trainer.feed_dict['scale'], spt.AnnealingScalar)


def test_a_single_returned_tensor_is_the_metric_loss():
    lines, collected = [], []
    loop = spt.TrainLoop(max_epoch=1, show_eta=False, print_func=lines.append)
    loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(sorted(m)))

    @tf.function
    def step(x):
        return tf.reduce_sum(x) * 2.

    trainer = spt.Trainer(loop, step, data_flow=scalar_batches([1., 2.]))
    trainer.log_after_epochs(1)
    with loop:
        trainer.run()
    assert collected == [['loss'], ['loss']]
    assert lines[-1].endswith('loss: 3 (±1)')


def test_a_step_returning_none_collects_no_metric():
    collected = []
    loop = spt.TrainLoop(max_epoch=2, print_func=lambda line: None)
    loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(m))
    calls = []
    trainer = spt.Trainer(loop, lambda x: calls.append(float(x[0])),   # returns None
                          data_flow=scalar_batches([1., 2.]))
    with loop:
        trainer.run()
    assert calls == [1., 2., 1., 2.]
    assert collected == []


def test_a_returned_mapping_is_collected_and_an_empty_dict_collects_nothing():
    import types
    lines, collected = [], []
    loop = spt.TrainLoop(max_epoch=1, show_eta=False, print_func=lines.append)
    loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(dict(m)))
    returns = iter([types.MappingProxyType({'loss': 2.}), {}, {'loss': 4., 'acc': 0.5}])
    trainer = spt.Trainer(loop, lambda x: next(returns), data_flow=scalar_batches([1., 2., 3.]))
    trainer.log_after_epochs(1)
    with loop:
        trainer.run()
    assert collected == [{'loss': 2.}, {'loss': 4., 'acc': 0.5}]
    assert lines[-1].endswith('acc: 0.5; loss: 3 (±1)')


def test_an_eager_trainer_subclass_runs_its_own_run_step():
    class Doubling(spt.Trainer):
        def _run_step(self, batch):
            self.loop.collect_metrics(loss=2. * float(self.train_op(*batch)))

    lines = []
    loop = spt.TrainLoop(max_epoch=1, show_eta=False, print_func=lines.append)
    trainer = Doubling(loop, lambda x: x[0], data_flow=scalar_batches([1., 2.]))
    trainer.log_after_epochs(1)
    with loop:
        trainer.run()
    assert lines[-1].endswith('loss: 3 (±1)')


def test_eager_metrics_are_copied_to_the_host_only_when_the_logs_print(monkeypatch):
    """The per-step cost of a metric is a list append; tensors reach `_reduce` at print time."""
    reduced = []
    original = logging_module._reduce

    def counting_reduce(name, values):
        reduced.append((name, len(values),
                        sum(isinstance(v, tf.Tensor) for v in values)))
        return original(name, values)

    monkeypatch.setattr(logging_module, '_reduce', counting_reduce)

    calls_seen_by_steps = []
    loop = spt.TrainLoop(max_epoch=3, print_func=lambda line: None)

    @tf.function
    def train_step(x):
        return {'loss': tf.reduce_sum(x), 'acc': tf.reduce_mean(x)}

    def step(x):
        calls_seen_by_steps.append(len(reduced))
        return train_step(x)

    trainer = spt.Trainer(loop, step, data_flow=scalar_batches([1., 2., 3., 4., 5.]))
    trainer.log_after_epochs(1)
    with loop:
        trainer.run()

    # 15 steps, but only 4 reductions per epoch: the metrics named in each printed line
    assert calls_seen_by_steps == [0] * 5 + [4] * 5 + [8] * 5
    assert len(reduced) == 12
    for epoch in range(3):
        chunk = reduced[4 * epoch:4 * epoch + 4]
        assert sorted(chunk) == [('acc', 5, 5), ('epoch_time', 1, 0),
                                 ('loss', 5, 5), ('step_time', 5, 0)]


# ------------------------------------------------------------ Evaluator
def test_evaluator_weights_batches_by_their_length(style, fake_clock):
    """API.md 10 (test): batches [0..3] and [4, 5] of a mean: 2.5, or 3.0 unweighted."""
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=1)
    batches = [(np.arange(4, dtype=np.float32),), (np.arange(4, 6, dtype=np.float32),)]

    def metrics(x):
        return {'mean': tf.reduce_mean(x), 'valid_loss': tf.reduce_max(x)}

    weighted = make_evaluator(style, loop, batches, metrics)
    unweighted = make_evaluator(style, loop, batches, metrics, batch_weight_func=None,
                                time_metric_name='flat_time')
    for evaluator in (weighted, unweighted):     # each run takes 3 seconds
        evaluator.events.on(EventKeys.BEFORE_EXECUTION, lambda e: fake_clock.advance(3.))
    assert weighted.batch_weight_func is spt.auto_batch_weight
    assert spt.auto_batch_weight(np.zeros([4, 3]), np.zeros(5)) == 4.
    with loop:
        for _ in loop.iter_epochs():
            weighted.run()
            unweighted.run()
            loop.print_logs()
    assert weighted.last_metrics_dict == {'mean': 2.5, 'valid_loss': pytest.approx(11 / 3)}
    assert unweighted.last_metrics_dict == {'mean': 3., 'valid_loss': 4.}
    # both runs took 3 seconds (the epoch 6); each metric was collected twice; the
    # first validation loss (11/3) was a new best in this epoch, so the line has ` (*)`
    assert lines == ['[Step 0] epoch time: 6s; eval time: 3s; flat time: 3s; '
                     'mean: 2.75 (±0.25); valid loss: 3.83333 (±0.166667) (*)']


def test_evaluator_with_a_scalar_metric_function_and_per_run_feed_dict(fake_clock):
    loop = make_loop([], fake_clock, max_epoch=1, valid_metric_name='valid_acc')
    seen = []

    def metrics(x, scale, shift):
        seen.append((scale, shift))
        return tf.reduce_mean(x) * scale + shift

    evaluator = spt.Evaluator(loop, metrics, data_flow=scalar_batches([1., 3.]),
                              feed_dict={'scale': 1., 'shift': 0.})
    before_after = []
    evaluator.events.on(EventKeys.BEFORE_EXECUTION,
                        lambda e: before_after.append(('before', dict(e.last_metrics_dict))))
    evaluator.events.on(EventKeys.AFTER_EXECUTION,
                        lambda e: before_after.append(('after', dict(e.last_metrics_dict))))
    with loop:
        for _ in loop.iter_epochs():
            evaluator.run()
            evaluator.run(feed_dict={'scale': 2.})
    assert seen == [(1., 0.), (1., 0.), (2., 0.), (2., 0.)]
    assert before_after == [('before', {}), ('after', {'valid_acc': 2.}),
                            ('before', {'valid_acc': 2.}), ('after', {'valid_acc': 4.})]
    assert loop.best_valid_metric == 4.    # `acc` is larger-is-better
    assert evaluator.feed_dict == {'scale': 1., 'shift': 0.}


def test_evaluator_on_an_empty_flow_keeps_the_last_metrics(fake_clock):
    collected = []
    loop = make_loop([], fake_clock, max_epoch=2)
    loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(dict(m)))
    flows = {1: scalar_batches([5.]), 2: []}
    evaluator = spt.Evaluator(loop, lambda x: tf.reduce_sum(x),
                              data_flow=spt.DataFlow.iterator_factory(lambda: flows[loop.epoch]),
                              time_metric_name=None)
    with loop:
        for _ in loop.iter_epochs():
            evaluator.run()
    assert collected == [{'valid_loss': 5.}]
    assert evaluator.last_metrics_dict == {'valid_loss': 5.}


def test_evaluator_hook_marks_new_best_lines(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=4)
    valid_losses = {1: 3., 2: 2., 3: 2.5, 4: 1.}
    trainer = spt.Trainer(loop, lambda x: None, data_flow=scalar_batches([1.]))
    evaluator = spt.Evaluator(loop, lambda x: tf.constant(valid_losses[loop.epoch]),
                              data_flow=scalar_batches([0.]))
    trainer.evaluate_after_epochs(evaluator, 1)
    trainer.log_after_epochs(1)
    with loop:
        trainer.run()
    assert [line.endswith(' (*)') for line in lines] == [True, True, False, True]
    assert [re.search(r'valid loss: (\S+)', line).group(1) for line in lines] == [
        '3', '2', '2.5', '1']
    assert loop.best_valid_metric == 1.
    assert evaluator.last_metrics_dict == {'valid_loss': 1.}


def test_evaluator_rejects_non_scalar_metric_values(style, fake_clock):
    loop = make_loop([], fake_clock, max_epoch=1)
    # of unknown rank in graph style: checked on the values
    evaluator = make_evaluator(style, loop, [(np.zeros(3),)], lambda x: {'v': x * 2.},
                               shape=None)
    with loop:
        for _ in loop.iter_epochs():
            with pytest.raises(ValueError, match=re.escape('Metric is not a scalar')):
                evaluator.run()


# ------------------------------------------------------------ scheduled learning rates
def test_annealing_variable_is_a_keras_learning_rate_read_at_every_step(fake_clock):
    lr = spt.AnnealingVariable('lr_keras', .1, .5, min_value=.02)
    w = tf.Variable(1., name='w')
    optimizer = keras.optimizers.SGD(learning_rate=lr)
    optimizer.build([w])

    @tf.function
    def step(x):
        with tf.GradientTape() as tape:
            loss = w * tf.reduce_sum(x)          # d loss / d w = sum(x) = 1
        optimizer.apply_gradients([(tape.gradient(loss, w), w)])
        return {'lr': tf.identity(optimizer.learning_rate)}

    seen = []
    loop = make_loop([], fake_clock, max_epoch=3)
    loop.events.on(EventKeys.METRICS_COLLECTED,
                   lambda lp, m: seen.append(round(float(m['lr'].numpy()), 6)))
    trainer = spt.Trainer(loop, step, data_flow=scalar_batches([1., 1.]))
    trainer.anneal_after_epochs(lr, 1)
    with loop:
        trainer.run()
    assert seen == [.1, .1, .05, .05, .025, .025]
    assert w.numpy() == pytest.approx(1. - .35)
    assert lr.get() == pytest.approx(.02)       # .0125 raised to the minimum
    # `set` works the same way
    lr.set(.5)
    assert float(optimizer.learning_rate.numpy()) == .5


def test_scheduled_variable_anneal_values():
    """API.md 3: ratio .5 with min .5 goes 1 -> .5 -> .5; min raises the initial value."""
    v = spt.AnnealingVariable('anneal_table', 1., .5, min_value=.5)
    assert v.get() == 1.
    assert v.anneal() == .5
    assert v.anneal() == .5
    assert spt.AnnealingVariable('anneal_raised', 1., .5, min_value=2.).get() == 2.
    k = spt.AnnealingVariable('anneal_int', 123., 1., dtype=tf.int32)
    assert k.get() == 123 and k.get().dtype == np.int32


# ------------------------------------------------------------ ReduceOnPlateau
def test_reduce_on_plateau_scales_after_patience_bad_validations(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=9)
    lr = spt.ScheduledVariable('plateau_lr', 1.)
    valid = [1., .9, .95, .97, .98, .99, .85, .9, .91]
    seen_lr = []
    trainer = spt.Trainer(loop, lambda x: seen_lr.append(float(lr.get())),
                          data_flow=scalar_batches([0.]))
    evaluator = spt.Evaluator(loop, lambda x: tf.constant(valid[loop.epoch - 1]),
                              data_flow=scalar_batches([0.]), time_metric_name=None)
    trainer.evaluate_after_epochs(evaluator, 1)
    with loop:
        loop.add_component(ReduceOnPlateau(lr, factor=.5, patience=2, min_value=.3))
        trainer.run()
    # epochs 3, 4 do not improve -> 0.5 at epoch 4; 5, 6 -> 0.25 clipped to 0.3 at epoch 6;
    # 7 is a new best; 8, 9 do not improve -> 0.3 * 0.5 is below the minimum: no change
    assert seen_lr == pytest.approx([1., 1., 1., 1., .5, .5, .3, .3, .3])
    assert lr.get() == pytest.approx(.3)
    # one line per reduction that changed the value (none at epoch 9: 0.3 stays 0.3)
    assert [re.search(r'from (\S+) to (\S+):', line).groups() for line in lines] == [
        ('1', '0.5'), ('0.5', '0.3')]
    assert lines[0].startswith('[Epoch 4/9, Step 4] Reduce the learning rate from 1 to 0.5')
    assert lines[1].startswith('[Epoch 6/9, Step 6] Reduce the learning rate from 0.5 to 0.3')
    assert all('`valid_loss`' in line for line in lines)


def test_reduce_on_plateau_of_a_scheduled_variable_from_collected_metrics(style):
    lr = spt.ScheduledVariable('plateau_lr', .4)
    if style.is_graph:
        spt.utils.ensure_variables_initialized()
    lines = []
    valid = {1: 1., 2: 2., 3: 2., 4: .5}
    with spt.TrainLoop(max_epoch=4, show_eta=False, print_func=lines.append) as loop:
        loop.add_component(ReduceOnPlateau(lr, factor=.5, patience=1))
        for epoch in loop.iter_epochs():
            loop.collect_metrics(valid_loss=valid[epoch])
    assert lr.get() == pytest.approx(.1)
    assert [tag_of(line) for line in lines] == ['[Epoch 2/4, Step 0]', '[Epoch 3/4, Step 0]']


def test_reduce_on_plateau_on_a_keras_optimizer_learning_rate(fake_clock):
    optimizer = keras.optimizers.SGD(learning_rate=.8)
    optimizer.build([tf.Variable(0.)])
    loop = make_loop([], fake_clock, max_epoch=3, valid_metric_name='valid_acc')
    plateau = ReduceOnPlateau(optimizer.learning_rate, factor=.25, patience=1)
    loop.add_component(plateau)
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(valid_acc=.5)      # never improves after epoch 1
    assert float(optimizer.learning_rate.numpy()) == pytest.approx(.8 * .25 * .25)


# ------------------------------------------------------------ LossGuard
def nan_at(loop, steps, values=None):
    """A step returning NaN at `steps`, else ``values[step - 1]`` (or 1)."""
    def step(x):
        if loop.step in steps:
            return tf.constant(float('nan'))
        return tf.constant(1. if values is None else values[loop.step - 1])
    return step


def test_loss_guard_raises_on_nan(style, fake_clock):
    loop = make_loop([], fake_clock, max_epoch=2)
    loop.add_component(LossGuard())
    # log(-1) is NaN: the loss of step 2
    trainer = make_trainer(style, loop, scalar_batches([1., -1.]),
                           lambda x: {'loss': tf.reduce_sum(tf.math.log(x))})
    after = []
    trainer.events.on(EventKeys.AFTER_EXECUTION, after.append)
    with loop:
        with pytest.raises(LossGuardError,
                           match=re.escape('`loss` is nan at epoch 1, step 2')):
            trainer.run()
    assert after == []


def test_loss_guard_stops_the_loop(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=5)
    loop.add_component(LossGuard(action='stop'))
    trainer = spt.Trainer(loop, nan_at(loop, {3}), data_flow=scalar_batches([0., 0.]))
    after = []
    trainer.events.on(EventKeys.AFTER_EXECUTION, after.append)
    with loop:
        trainer.run()
    assert (loop.epoch, loop.step) == (2, 3)
    assert loop.stop_reason == '`loss` is nan at epoch 2, step 3'
    assert lines[-1] == 'Training stopped at epoch 2, step 3: `loss` is nan at epoch 2, step 3'
    assert after == [trainer]       # a stop request is a normal completion


def test_loss_guard_threshold(fake_clock):
    loop = make_loop([], fake_clock, max_epoch=1)
    loop.add_component(LossGuard(threshold=4.))
    trainer = spt.Trainer(loop, nan_at(loop, set(), values=[1., 4., 5., 0.]),
                          data_flow=scalar_batches([0.] * 4))
    with loop:
        with pytest.raises(LossGuardError, match=re.escape(
                '`loss` is 5, above the threshold 4 at epoch 1, step 3')):
            trainer.run()


def test_loss_guard_checks_every_nth_value_only(fake_clock):
    loop = make_loop([], fake_clock, max_epoch=1)
    loop.add_component(LossGuard(every=2))
    # values 1, 3, 5 are checked: the NaNs of steps 2 and 4 pass unseen
    trainer = spt.Trainer(loop, nan_at(loop, {2, 4, 5}), data_flow=scalar_batches([0.] * 6))
    with loop:
        with pytest.raises(LossGuardError, match=re.escape('`loss` is nan at epoch 1, step 5')):
            trainer.run()


def test_loss_guard_watches_a_named_metric_of_a_dict(fake_clock):
    loop = make_loop([], fake_clock, max_epoch=1)
    loop.add_component(LossGuard(metric='nll', threshold=10.))
    values = iter([1., 20.])
    trainer = spt.Trainer(loop, lambda x: {'loss': tf.constant(float('inf')),
                                           'nll': tf.constant(next(values))},
                          data_flow=scalar_batches([0., 0.]))
    with loop:
        with pytest.raises(LossGuardError, match=re.escape(
                '`nll` is 20, above the threshold 10 at epoch 1, step 2')):
            trainer.run()


# ------------------------------------------------------------ ProgressBar
def test_progress_bar_keeps_printed_lines_in_order_and_leaves_print_func_alone(style,
                                                                               fake_clock):
    lines = []
    bar_file = io.StringIO()
    loop = make_loop(lines, fake_clock, max_epoch=2)
    loop.add_component(ProgressBar(file=bar_file, mininterval=0))
    trainer = make_trainer(style, loop, scalar_batches([1., 2., 3.]),
                           lambda x: {'loss': tf.reduce_sum(x)})
    trainer.log_after_steps(2)
    trainer.log_after_epochs(1)
    with loop:
        inside = loop.print_func
        trainer.run()
    assert inside == lines.append     # the bar wraps the console's output instead
    assert loop.print_func == lines.append
    assert [tag_of(line) for line in lines] == [
        '[Epoch 1/2, Step 2]', '[Epoch 1/2, Step 3]', '[Epoch 2/2, Step 4]',
        '[Epoch 2/2, Step 6]', '[Epoch 2/2, Step 6]']
    text = bar_file.getvalue()
    assert 'Epoch 1/2' in text and 'Epoch 2/2' in text
    assert '3/3' in text            # the second epoch's bar knows the epoch length
    assert not any('Epoch 1/2:' in line for line in lines)


# ------------------------------------------------------------ gradients
@pytest.mark.parametrize('clip_norm', [None, .5])
def test_gradient_accumulator_applies_the_mean_of_each_pair(clip_norm):
    rng = np.random.RandomState(3)
    targets = rng.normal(size=(6, 4)).astype(np.float32)
    init = rng.normal(size=4).astype(np.float32)

    def loss_of(w, t):
        return tf.reduce_sum((w - t) ** 2 * tf.range(1., 5.))

    w = tf.Variable(init)
    optimizer = keras.optimizers.Adam(.1)
    optimizer.build([w])
    acc = GradientAccumulator([w], num_batches=2, clip_norm=clip_norm)

    @tf.function
    def step(t):
        with tf.GradientTape() as tape:
            loss = loss_of(w, t)
        acc.apply(optimizer, tape.gradient(loss, [w]))
        return {'loss': loss}

    loop = spt.TrainLoop(max_epoch=1, print_func=lambda line: None)
    trainer = spt.Trainer(loop, step, data_flow=[(t,) for t in targets])
    with loop:
        trainer.run()
    assert int(optimizer.iterations.numpy()) == 3

    # by hand: gradients of both batches of a pair at the same weights, their mean applied
    ref = tf.Variable(init)
    ref_optimizer = keras.optimizers.Adam(.1)
    ref_optimizer.build([ref])
    for i in range(0, 6, 2):
        grads = []
        for t in targets[i:i + 2]:
            grads.append(2. * (ref.numpy() - t) * np.arange(1., 5.))
        mean = (grads[0] + grads[1]) / 2.
        if clip_norm is not None:
            norm = np.sqrt(np.sum(mean ** 2))
            mean = mean * min(1., clip_norm / norm)
        ref_optimizer.apply_gradients([(tf.constant(mean, tf.float32), ref)])
    np.testing.assert_allclose(w.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)
    assert not np.allclose(w.numpy(), init)


def test_gradient_accumulator_with_one_batch_applies_every_step():
    w = tf.Variable([1., 2.])
    optimizer = keras.optimizers.SGD(.5)
    optimizer.build([w])
    acc = GradientAccumulator([w], num_batches=1)

    @tf.function
    def step():
        return acc.apply(optimizer, [tf.constant([1., -2.])])

    assert bool(step()) and bool(step())
    np.testing.assert_allclose(w.numpy(), [0., 4.])
    assert int(optimizer.iterations.numpy()) == 2


def test_clip_gradients_by_global_norm_and_by_value(style):
    value = style.value
    grads = [tf.constant([3., 4.]), None, tf.constant([0., 12.])]     # global norm 13
    by_norm = clip_gradients(grads, clip_norm=6.5)
    np.testing.assert_allclose(value(by_norm[0]), [1.5, 2.])
    assert by_norm[1] is None
    np.testing.assert_allclose(value(by_norm[2]), [0., 6.])
    # a norm already below the limit is kept
    kept = clip_gradients(grads, clip_norm=20.)
    np.testing.assert_allclose(value(kept[2]), [0., 12.])

    by_value = clip_gradients(grads, clip_value=3.5)
    np.testing.assert_allclose(value(by_value[0]), [3., 3.5])
    np.testing.assert_allclose(value(by_value[2]), [0., 3.5])
    # both: the norm first, then the value
    both = tf.function(lambda a, b: clip_gradients([a, b], clip_norm=6.5, clip_value=1.8))(
        grads[0], grads[2])
    np.testing.assert_allclose(value(both[0]), [1.5, 1.8])
    np.testing.assert_allclose(value(both[1]), [0., 1.8])


def test_run_prints_the_parameter_table_once_after_the_users_own_call(style, fake_clock):
    w = style.variable([1., 2.], 'w')
    for user_prints in (True, False):
        lines = []
        with make_loop(lines, fake_clock, param_vars=[w], max_epoch=1) as loop:
            if user_prints:
                loop.print_training_summary()
            make_trainer(style, loop, scalar_batches([1.]),
                         lambda x: {'loss': tf.reduce_sum(x)}).run()
        tables = [line for line in lines if line.startswith('Trainable Parameters')]
        assert len(tables) == 1, lines
        assert lines[0].startswith('Trainable Parameters')


def test_an_annealed_learning_rate_logged_as_a_metric(fake_clock):
    # the eager twin of the graph `metrics={'lr': lr}`: the step function returns it
    lr = spt.AnnealingVariable('lr', .04, .5)
    lines = []
    with make_loop(lines, fake_clock, max_epoch=3) as loop:
        trainer = spt.Trainer(loop, lambda x: {'loss': x, 'lr': lr},
                              data_flow=scalar_batches([1., 2.]))
        trainer.anneal_after(lr, epochs=1)
        trainer.log_after_epochs(freq=1)
        trainer.run()
    epoch_lines = [line for line in lines if line.startswith('[Epoch')]
    assert [re.search(r'lr: ([^ ;]+)', line).group(1) for line in epoch_lines] == \
        ['0.04', '0.02', '0.01']
