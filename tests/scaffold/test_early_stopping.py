"""Early stopping, the best validation metric and `request_stop`.

The tests taking ``style`` run in both TF styles (a `Model` of the style);
the rest in eager mode (in graph style the restore also runs on a finalized
graph).

API.md section 7.6, as changed by our docstrings: the best values are a
snapshot kept in memory (no early-stopping saver on disk), the restore line
reads ``Restore early-stopping parameters: from step S, where valid_loss = V``
and ``early_stopping_patience`` stops the loop.  Every step below moves the
variables by a known amount (a ``tf.function`` doing ``assign_add``), so the
value at each step, and therefore the best one, is known by hand.
"""

import re
import warnings

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet import EventKeys

NOT_RESTORED = ('Early-stopping variables are not restored, because an error or an '
                'interruption has occurred.')
NEVER_TRIGGERED = ('Early-stopping has never been triggered! The variables will keep their '
                   'latest values.')


@tf.function
def add_to(var, delta):
    var.assign_add(delta)


def make_vars():
    """``w`` gains 1 and ``b`` gains [1, 2] per step (see `train`)."""
    return tf.Variable(0., name='w'), tf.Variable([0., 0.], name='b')


def train(loop, w, b, valid, steps_per_epoch=2, raise_at=None, metric='valid_loss'):
    """Run `loop`; each step adds 1 to `w` and [1, 2] to `b`.

    After the steps of epoch ``e`` the metric ``valid[e - 1]`` is collected.
    `raise_at` is ``(step, exception)``: raised in that step, after its update.
    Returns the value of `w` seen after the epoch loop, still inside ``with``.
    """
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(steps_per_epoch)):
                add_to(w, 1.)
                add_to(b, tf.constant([1., 2.]))
                if raise_at is not None and step == raise_at[0]:
                    raise raise_at[1]
            loop.collect_metrics({metric: valid[epoch - 1]})
        latest = float(w.numpy())
    return latest


class Model:
    """``w`` gains 1 and ``b`` gains [1, 2] at each `step`; ``other`` gains 10.

    In the TF style of `style`: a ``tf.function`` per update in eager style, a
    ``session.run`` of ``assign_add`` ops in graph style.  `validate` returns the
    value given, computed by TensorFlow (``tf.identity``) as numpy.
    """

    def __init__(self, style):
        self.style = style
        self.w = style.variable(0., 'w')
        self.b = style.variable([0., 0.], 'b')
        self.other = style.variable(0., 'other')
        self.updates = [style.updater(self.w, 1.), style.updater(self.b, [1., 2.]),
                        style.updater(self.other, 10.)]
        self.validate = style.computed(tf.identity)

    def step(self):
        for update in self.updates:
            update()

    def values(self):
        return [self.style.value(v) for v in (self.w, self.b, self.other)]


def train_model(loop, model, valid, steps_per_epoch=2, raise_at=None, metric='valid_loss'):
    """`train` with a `Model`: its step runs in each step, its validation of
    ``valid[e - 1]`` is collected after epoch ``e``."""
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(steps_per_epoch)):
                model.step()
                if raise_at is not None and step == raise_at[0]:
                    raise raise_at[1]
            loop.collect_metrics({metric: model.validate(valid[epoch - 1])})
        latest = float(model.values()[0])
    return latest


def no_early_stopping_warnings(record):
    return [str(r.message) for r in record if 'Early-stopping' in str(r.message)] == []


# ------------------------------------------------------------- restore at exit
def test_best_values_are_restored_on_a_clean_exit(style):
    model = Model(style)
    if style.is_graph:
        style.graph.finalize()      # the restore adds no op to the user's graph
    lines = []
    loop = spt.TrainLoop([model.w, model.b], max_epoch=4, early_stopping=True,
                         print_func=lines.append)
    assert loop.use_early_stopping
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        latest = train_model(loop, model, valid=[0.5, 0.25, 0.375, 0.3])
    assert no_early_stopping_warnings(record)
    # inside the `with` block, after the epochs, the latest values were still there
    assert latest == 8.
    # the best valid_loss (0.25) came after epoch 2 = step 4: w = 4, b = [4, 8]
    w, b, other = model.values()
    assert w == 4.
    np.testing.assert_array_equal(b, [4., 8.])
    assert other == 80.    # not among param_vars: keeps its latest value
    assert lines == ['Restore early-stopping parameters: from step 4, where valid_loss = 0.25']
    assert loop.best_valid_metric == 0.25


def test_the_first_validation_is_a_best_and_ties_are_not():
    w, b = make_vars()
    lines = []
    loop = spt.TrainLoop([w, b], max_epoch=3, early_stopping=True, print_func=lines.append)
    train(loop, w, b, valid=[0.25, 0.25, 0.5])
    # 0.25 again at epoch 2 is not strictly smaller: the snapshot stays at step 2
    assert w.numpy() == 2.
    np.testing.assert_array_equal(b.numpy(), [2., 4.])
    assert lines == ['Restore early-stopping parameters: from step 2, where valid_loss = 0.25']


def test_dict_param_vars_and_variables_outside_param_vars():
    w, b = make_vars()
    other = tf.Variable(0., name='other')
    lines = []
    loop = spt.TrainLoop({'weight': w, 'bias': b}, max_epoch=3, early_stopping=True,
                         print_func=lines.append)
    with loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps([0]):
                add_to(w, 1.)
                add_to(b, tf.constant([1., 2.]))
                add_to(other, 10.)
            loop.collect_metrics(valid_loss=[3., 1., 2.][epoch - 1])
    assert w.numpy() == 2.
    np.testing.assert_array_equal(b.numpy(), [2., 4.])
    assert other.numpy() == 30.   # not a parameter: keeps its latest value
    assert lines == ['Restore early-stopping parameters: from step 2, where valid_loss = 1']


def test_best_of_a_step_level_validation_metric():
    w, b = make_vars()
    lines = []
    loop = spt.TrainLoop([w, b], max_epoch=2, early_stopping=True, print_func=lines.append)
    valid = {1: 0.9, 2: 0.7, 3: 0.8, 4: 0.6, 5: 0.65, 6: 0.61}
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(3)):
                add_to(w, 1.)
                loop.collect_metrics(valid_loss=valid[step])
    assert w.numpy() == 4.
    assert lines == ['Restore early-stopping parameters: from step 4, where valid_loss = 0.6']


@pytest.mark.parametrize('error', [ValueError('boom'), KeyboardInterrupt()],
                         ids=['exception', 'KeyboardInterrupt'])
def test_not_restored_when_left_through_an_exception(style, error):
    model = Model(style)
    lines = []
    loop = spt.TrainLoop([model.w, model.b], max_epoch=4, early_stopping=True,
                         print_func=lines.append)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with pytest.raises(type(error)):
            # epochs 1 and 2 validate (best 0.25 at step 4), the error comes in step 5
            train_model(loop, model, valid=[0.5, 0.25, 0.375, 0.3], raise_at=(5, error))
    w, b, _ = model.values()
    assert w == 5.
    np.testing.assert_array_equal(b, [5., 10.])
    assert not [w for w in caught if NOT_RESTORED in str(w.message)]
    assert lines == [NOT_RESTORED]       # printed once: not warned too
    assert loop.best_valid_metric == 0.25


def test_warns_when_never_triggered(style):
    model = Model(style)
    lines = []
    loop = spt.TrainLoop([model.w, model.b], max_epoch=2, early_stopping=True,
                         print_func=lines.append)
    with pytest.warns(UserWarning, match=re.escape(NEVER_TRIGGERED)):
        with loop:
            for _ in loop.iter_epochs():
                for _ in loop.iter_steps([0, 1]):
                    model.step()
                loop.collect_metrics(loss=model.validate(1.))   # not the validation metric
    assert model.values()[0] == 4.
    # after the first epoch, the names that were collected (a `val_loss` typo shows here)
    assert lines[0] == ("`valid_loss`, which early stopping watches, was not collected during "
                        "epoch 1; the metrics collected were ['loss', 'step_time']")
    assert lines[1].startswith(NEVER_TRIGGERED) and len(lines) == 2
    assert loop.best_valid_metric is None


@pytest.mark.parametrize('name,smaller_is_better', [
    ('valid_acc', None), ('valid_accuracy', None), ('score', False),
])
def test_larger_is_better_metrics(style, name, smaller_is_better):
    model = Model(style)
    lines = []
    loop = spt.TrainLoop([model.w, model.b], max_epoch=3, early_stopping=True,
                         print_func=lines.append, valid_metric_name=name,
                         valid_metric_smaller_is_better=smaller_is_better)
    assert loop.valid_metric_smaller_is_better is False
    train_model(loop, model, valid=[0.5, 0.75, 0.625], metric=name)
    assert model.values()[0] == 4.
    assert lines == [f'Restore early-stopping parameters: from step 4, where {name} = 0.75']
    assert loop.best_valid_metric == 0.75


def test_smaller_is_better_can_be_forced_for_an_acc_name():
    w, b = make_vars()
    lines = []
    loop = spt.TrainLoop([w, b], max_epoch=3, early_stopping=True, print_func=lines.append,
                         valid_metric_name='valid_acc', valid_metric_smaller_is_better=True)
    train(loop, w, b, valid=[0.5, 0.9, 0.7], metric='valid_acc')
    assert w.numpy() == 2.
    assert lines == ['Restore early-stopping parameters: from step 2, where valid_acc = 0.5']


def test_keras_variables_are_restored_through_their_value():
    model = keras.Sequential([keras.Input((3,)),
                              keras.layers.Dense(2, kernel_initializer='zeros',
                                                 bias_initializer='zeros')])
    params = model.trainable_variables
    assert all(isinstance(v, keras.Variable) and not isinstance(v, tf.Variable) for v in params)

    @tf.function
    def step():
        for v in model.trainable_variables:
            v.assign_add(tf.ones(v.shape))

    lines = []
    loop = spt.TrainLoop(params, max_epoch=3, early_stopping=True, print_func=lines.append)
    with loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps([0]):
                step()
            loop.collect_metrics(valid_loss=[0.4, 0.2, 0.3][epoch - 1])
    kernel, bias = model.layers[0].kernel, model.layers[0].bias
    np.testing.assert_array_equal(kernel.numpy(), np.full((3, 2), 2.))
    np.testing.assert_array_equal(bias.numpy(), [2., 2.])
    # the tf.Variable behind each Keras variable holds the restored value
    assert isinstance(kernel.value, tf.Variable)
    np.testing.assert_array_equal(kernel.value.numpy(), np.full((3, 2), 2.))
    # and the model computes with it: 3 inputs * 2 + 2
    np.testing.assert_array_equal(model(np.ones((1, 3), np.float32)).numpy(), [[8., 8.]])
    assert lines == ['Restore early-stopping parameters: from step 2, where valid_loss = 0.2']


# ------------------------------------------------------------------ patience
def patience_stop_reason(n):
    plural = 's' if n != 1 else ''
    return f'`valid_loss` has not improved for {n} validation{plural} (patience {n})'


def test_patience_stops_the_loop(style):
    model = Model(style)
    lines = []
    epochs = []
    loop = spt.TrainLoop([model.w, model.b], max_epoch=6, early_stopping=True,
                         early_stopping_patience=2, print_func=lines.append)
    loop.events.on(EventKeys.BEFORE_EPOCH, lambda lp: epochs.append(lp.epoch))
    with loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps([0, 1]):
                model.step()
            loop.collect_metrics(valid_loss=model.validate(
                [0.5, 0.25, 0.375, 0.3, 0.125, 0.0625][epoch - 1]))
        assert loop.stop_requested
    # epochs 3 and 4 did not improve on 0.25 (epoch 2, step 4)
    assert epochs == [1, 2, 3, 4]
    assert (loop.epoch, loop.step) == (4, 8)
    assert loop.stop_reason == patience_stop_reason(2)
    assert lines == [
        f'Training stopped at epoch 4, step 8: {patience_stop_reason(2)}',
        'Restore early-stopping parameters: from step 4, where valid_loss = 0.25',
    ]
    assert model.values()[0] == 4.


def test_an_improvement_resets_the_patience_count():
    w, b = make_vars()
    lines = []
    loop = spt.TrainLoop([w, b], max_epoch=10, early_stopping=True, early_stopping_patience=2,
                         print_func=lines.append)
    train(loop, w, b, valid=[0.5, 0.6, 0.4, 0.7, 0.8, 0.1, 0.1, 0.1, 0.1, 0.1])
    assert (loop.epoch, loop.step) == (5, 10)
    assert lines == [
        f'Training stopped at epoch 5, step 10: {patience_stop_reason(2)}',
        'Restore early-stopping parameters: from step 6, where valid_loss = 0.4',
    ]
    assert w.numpy() == 6.


def test_patience_stop_inside_an_epoch_finishes_that_step_and_epoch():
    w, b = make_vars()
    lines = []
    after_epoch = []
    loop = spt.TrainLoop([w, b], max_epoch=3, early_stopping=True, early_stopping_patience=1,
                         print_func=lines.append)
    loop.events.on(EventKeys.AFTER_EPOCH, lambda lp: after_epoch.append(lp.epoch))
    tail = []
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(4)):
                add_to(w, 1.)
                loop.collect_metrics(valid_loss=[0.5, 0.6, 0.1, 0.1][step - 1])
            tail.append(epoch)   # the rest of the epoch's body still runs
    assert (loop.epoch, loop.step) == (1, 2)
    assert tail == [1] and after_epoch == [1]
    assert lines == [
        f'Training stopped at epoch 1, step 2: {patience_stop_reason(1)}',
        'Restore early-stopping parameters: from step 1, where valid_loss = 0.5',
    ]
    assert w.numpy() == 1.


def test_without_patience_the_loop_runs_to_max_epoch():
    w, b = make_vars()
    lines = []
    loop = spt.TrainLoop([w, b], max_epoch=5, early_stopping=True, print_func=lines.append)
    train(loop, w, b, valid=[0.1, 0.2, 0.3, 0.4, 0.5])
    assert loop.stop_reason == 'max_epoch reached'
    assert not loop.stop_requested
    assert lines == ['Restore early-stopping parameters: from step 2, where valid_loss = 0.1']


# --------------------------------------------------------------- request_stop
def run_recorded(loop, steps_per_epoch, body=None):
    """Run `loop` and record what ran: steps, epoch tails and AFTER_* events."""
    seen = {'steps': [], 'tails': [], 'after_step': [], 'after_epoch': [],
            'before_epoch': [], 'exit': 0}
    loop.events.on(EventKeys.AFTER_STEP, lambda lp: seen['after_step'].append(lp.step))
    loop.events.on(EventKeys.AFTER_EPOCH, lambda lp: seen['after_epoch'].append(lp.epoch))
    loop.events.on(EventKeys.BEFORE_EPOCH, lambda lp: seen['before_epoch'].append(lp.epoch))

    def on_exit(lp):
        seen['exit'] += 1
    loop.events.on(EventKeys.EXIT_LOOP, on_exit)
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(steps_per_epoch)):
                seen['steps'].append(step)
                if body is not None:
                    body(loop, step)
            seen['tails'].append(epoch)
    return seen


def test_request_stop_from_the_body_ends_at_the_step_boundary(style):
    model = Model(style)
    lines = []
    loop = spt.TrainLoop([model.w], max_epoch=5, print_func=lines.append)

    def body(lp, step):
        model.step()
        if step == 5:
            lp.request_stop('enough')
            assert lp.stop_requested

    seen = run_recorded(loop, 3, body)
    assert seen == {'steps': [1, 2, 3, 4, 5], 'tails': [1, 2],
                    'after_step': [1, 2, 3, 4, 5], 'after_epoch': [1, 2],
                    'before_epoch': [1, 2], 'exit': 1}
    assert lines == ['Training stopped at epoch 2, step 5: enough']
    assert loop.stop_reason == 'enough'
    assert (loop.epoch, loop.step) == (2, 5)
    assert model.values()[0] == 5.


def test_request_stop_from_an_after_step_handler(style):
    model = Model(style)
    lines = []
    loop = spt.TrainLoop([model.w], max_epoch=5, print_func=lines.append)
    after_step_calls = []
    # registered first: runs after the stopping handler (AFTER_* run in reverse)
    loop.events.on(EventKeys.AFTER_STEP, lambda lp: after_step_calls.append(lp.step))
    loop.events.on(EventKeys.AFTER_STEP,
                   lambda lp: lp.request_stop('handler says stop') if lp.step == 4 else None)
    seen = run_recorded(loop, 3, lambda lp, step: model.step())
    assert seen['steps'] == [1, 2, 3, 4]
    assert seen['after_step'] == [1, 2, 3, 4]
    assert after_step_calls == [1, 2, 3, 4]   # the stopping step finished normally
    assert seen['tails'] == [1, 2] and seen['after_epoch'] == [1, 2]
    assert seen['before_epoch'] == [1, 2] and seen['exit'] == 1
    assert lines == ['Training stopped at epoch 2, step 4: handler says stop']
    assert loop.stop_reason == 'handler says stop'
    assert model.values()[0] == 4.


def test_request_stop_at_the_last_step_of_an_epoch():
    lines = []
    loop = spt.TrainLoop(max_epoch=5, print_func=lines.append)
    seen = run_recorded(loop, 3, lambda lp, step: lp.request_stop() if step == 3 else None)
    assert seen['steps'] == [1, 2, 3]
    assert seen['after_epoch'] == [1] and seen['before_epoch'] == [1]
    assert lines == ['Training stopped at epoch 1, step 3: stop requested']
    assert loop.stop_reason == 'stop requested'


def test_request_stop_between_epochs_and_early_stopping_restore():
    w, b = make_vars()
    lines = []
    loop = spt.TrainLoop([w, b], max_epoch=5, early_stopping=True, print_func=lines.append)
    with loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps([0, 1]):
                add_to(w, 1.)
            loop.collect_metrics(valid_loss=[0.3, 0.2, 0.4][epoch - 1])
            if epoch == 3:
                loop.request_stop('manual stop')
    assert lines == ['Training stopped at epoch 3, step 6: manual stop',
                     'Restore early-stopping parameters: from step 4, where valid_loss = 0.2']
    assert w.numpy() == 4.


def test_stop_reason_of_the_limits():
    loop = spt.TrainLoop(max_step=4)
    assert loop.stop_reason is None
    seen = run_recorded(loop, 3)
    assert seen['steps'] == [1, 2, 3, 4]
    assert loop.stop_reason == 'max_step reached'
    loop = spt.TrainLoop(max_epoch=2)
    run_recorded(loop, 1)
    assert loop.stop_reason == 'max_epoch reached'


# --------------------------------------------------- (*) marks and best metric
def test_star_marks_the_latest_validation_when_it_is_a_best(style, fake_clock):
    validate = style.computed(tf.identity)     # the values as a session.run returns them
    lines = []
    bests = []
    loop = spt.TrainLoop(max_epoch=1, clock=fake_clock, print_func=lines.append,
                         show_eta=False)
    assert loop.best_valid_metric is None
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(3)):
                fake_clock.advance(1.)
                loop.collect_metrics(valid_loss=validate([0.75, 0.5, 0.625][step - 1]))
                bests.append(loop.best_valid_metric)
                loop.print_logs()
            loop.collect_metrics(loss=2.)
            loop.print_logs()
    assert bests == [0.75, 0.5, 0.5]
    assert lines == [
        '[Step 1] step time: 1s; valid loss: 0.75 (*)',
        '[Step 2] step time: 1s; valid loss: 0.5 (*)',
        '[Step 3] step time: 1s; valid loss: 0.625',
        # the latest validation (0.625) was not a best, but 0.5 in this epoch was: the
        # epoch line is marked (a best anywhere in the epoch)
        '[Step 3] epoch time: 3s; step time: 1s (±0s); loss: 2; valid loss: 0.625 (±0.102062) (*)',
    ]


def test_star_is_printed_once_per_best(fake_clock):
    lines = []
    loop = spt.TrainLoop(max_epoch=3, clock=fake_clock, print_func=lines.append, show_eta=False)
    with loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps([0]):
                fake_clock.advance(2.)
            loop.collect_metrics(valid_loss=[0.5, 0.25, 0.75][epoch - 1])
            loop.print_logs()
            if epoch == 2:
                loop.collect_metrics(loss=1.)
                loop.print_logs()    # the mark was used by the previous line
    assert lines == [
        '[Epoch 1/3, Step 1] epoch time: 2s; step time: 2s; valid loss: 0.5 (*)',
        '[Epoch 2/3, Step 2] epoch time: 2s; step time: 2s; valid loss: 0.25 (*)',
        '[Epoch 2/3, Step 2] loss: 1',
        '[Epoch 3/3, Step 3] epoch time: 2s; step time: 2s; valid loss: 0.75',
    ]
    assert loop.best_valid_metric == 0.25


def test_best_valid_metric_of_numpy_and_tensor_values():
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda s: None)
    bests = []
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(3)):
                value = [np.float32(0.5), tf.constant([0.25, 0.5]), np.array([0.5, 0.75])]
                loop.collect_metrics(valid_loss=value[step - 1])
                bests.append(loop.best_valid_metric)
    # the raw value of each collection counts (an array by its mean)
    assert bests == [0.5, 0.375, 0.375]


def test_no_tracking_without_a_valid_metric_name():
    lines = []
    loop = spt.TrainLoop(max_epoch=1, valid_metric_name=None, print_func=lines.append,
                         show_eta=False)
    assert loop.valid_metric_name is None
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(valid_loss=0.5)
            loop.print_logs()
    assert loop.best_valid_metric is None
    assert not lines[0].endswith('(*)')


def test_snapshot_of_another_shape_is_refused_when_loaded():
    from tfsnippet.scaffold.components.early_stopping import EarlyStopping

    w = tf.Variable(tf.zeros([3]), name='w')
    es = EarlyStopping([w])
    with pytest.raises(ValueError, match=re.escape(
            "The early-stopping snapshot of 'w' has shape (2,), the variable (3,)")):
        es.load_state_dict({'snapshot': [np.zeros([2], np.float32)], 'step': 1,
                            'metric': .5, 'bad_validations': 0})
