"""Early stopping, the best validation metric and `request_stop` with TF1-style graph code.

The same features as tests/scaffold/test_early_stopping.py, with
``tf.compat.v1`` variables changed by ``session.run`` of ``assign_add`` ops.
Each test gets a fresh graph; `session` is its default session.
"""

import re
import warnings

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet import EventKeys

v1 = tf.compat.v1

NOT_RESTORED = ('Early-stopping variables are not restored, because an error or an '
                'interruption has occurred.')
NEVER_TRIGGERED = ('Early-stopping has never been triggered! The variables will keep their '
                   'latest values.')


class Model:
    """``w`` gains 1 and ``b`` gains [1, 2] each time `step` runs; ``other`` gains 10."""

    def __init__(self, session):
        self.session = session
        zeros = v1.zeros_initializer()
        self.w = v1.get_variable('w', shape=[], initializer=zeros)
        self.b = v1.get_variable('b', shape=[2], initializer=zeros)
        self.other = v1.get_variable('other', shape=[], initializer=zeros)
        self.valid = v1.placeholder(tf.float32, [], name='valid')
        self.train_op = tf.group(v1.assign_add(self.w, 1.),
                                 v1.assign_add(self.b, [1., 2.]),
                                 v1.assign_add(self.other, 10.))
        # a "validation" computed by the graph: it returns the fed value
        self.valid_out = tf.identity(self.valid)
        session.run(v1.global_variables_initializer())

    def step(self):
        self.session.run(self.train_op)

    def validate(self, value):
        return self.session.run(self.valid_out, feed_dict={self.valid: value})

    def values(self):
        return self.session.run([self.w, self.b, self.other])


def train(loop, model, valid, steps_per_epoch=2, raise_at=None, metric='valid_loss'):
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(steps_per_epoch)):
                model.step()
                if raise_at is not None and step == raise_at[0]:
                    raise raise_at[1]
            loop.collect_metrics({metric: model.validate(valid[epoch - 1])})
        latest = model.values()[0]
    return latest


def test_best_values_are_restored_on_a_clean_exit(session):
    model = Model(session)
    lines = []
    loop = spt.TrainLoop([model.w, model.b], max_epoch=4, early_stopping=True,
                         print_func=lines.append)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter('always')
        latest = train(loop, model, valid=[0.5, 0.25, 0.375, 0.3])
    assert [str(r.message) for r in record if 'Early-stopping' in str(r.message)] == []
    assert latest == 8.
    w, b, other = model.values()
    assert w == 4.
    np.testing.assert_array_equal(b, [4., 8.])
    assert other == 80.    # not among param_vars: keeps its latest value
    assert lines == ['Restore early-stopping parameters: from step 4, where valid_loss = 0.25']
    assert loop.best_valid_metric == 0.25


def test_restore_works_on_a_finalized_graph(session, graph):
    model = Model(session)
    graph.finalize()
    lines = []
    loop = spt.TrainLoop({'w': model.w, 'b': model.b}, max_epoch=3, early_stopping=True,
                         print_func=lines.append)
    train(loop, model, valid=[2., 1., 3.])
    w, b, _ = model.values()
    assert w == 4.
    np.testing.assert_array_equal(b, [4., 8.])
    assert lines == ['Restore early-stopping parameters: from step 4, where valid_loss = 1']


@pytest.mark.parametrize('error', [ValueError('boom'), KeyboardInterrupt()],
                         ids=['exception', 'KeyboardInterrupt'])
def test_not_restored_when_left_through_an_exception(session, error):
    model = Model(session)
    lines = []
    loop = spt.TrainLoop([model.w, model.b], max_epoch=4, early_stopping=True,
                         print_func=lines.append)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with pytest.raises(type(error)):
            train(loop, model, valid=[0.5, 0.25, 0.375, 0.3], raise_at=(5, error))
    w, b, _ = model.values()
    assert w == 5.
    np.testing.assert_array_equal(b, [5., 10.])
    assert not [w for w in caught if NOT_RESTORED in str(w.message)]
    assert lines == [NOT_RESTORED]       # printed once: not warned too


def test_warns_when_never_triggered(session):
    model = Model(session)
    lines = []
    loop = spt.TrainLoop([model.w], max_epoch=2, early_stopping=True, print_func=lines.append)
    with pytest.warns(UserWarning, match=re.escape(NEVER_TRIGGERED)):
        train(loop, model, valid=[0.5, 0.25], metric='test_loss')
    assert model.values()[0] == 4.
    assert lines[0] == ("`valid_loss`, which early stopping watches, was not collected during "
                        "epoch 1; the metrics collected were ['step_time', 'test_loss']")
    assert lines[1].startswith(NEVER_TRIGGERED) and len(lines) == 2
    assert loop.best_valid_metric is None


def test_valid_acc_is_larger_is_better(session):
    model = Model(session)
    lines = []
    loop = spt.TrainLoop([model.w], max_epoch=3, early_stopping=True, print_func=lines.append,
                         valid_metric_name='valid_acc')
    assert loop.valid_metric_smaller_is_better is False
    train(loop, model, valid=[0.5, 0.75, 0.625], metric='valid_acc')
    assert model.values()[0] == 4.
    assert lines == ['Restore early-stopping parameters: from step 4, where valid_acc = 0.75']
    assert loop.best_valid_metric == 0.75


def test_patience_stops_the_loop(session):
    model = Model(session)
    lines = []
    epochs = []
    loop = spt.TrainLoop([model.w], max_epoch=6, early_stopping=True, early_stopping_patience=2,
                         print_func=lines.append)
    loop.events.on(EventKeys.BEFORE_EPOCH, lambda lp: epochs.append(lp.epoch))
    train(loop, model, valid=[0.5, 0.25, 0.375, 0.3, 0.125, 0.0625])
    reason = '`valid_loss` has not improved for 2 validations (patience 2)'
    assert epochs == [1, 2, 3, 4]
    assert loop.stop_reason == reason
    assert lines == [f'Training stopped at epoch 4, step 8: {reason}',
                     'Restore early-stopping parameters: from step 4, where valid_loss = 0.25']
    assert model.values()[0] == 4.


def record(loop):
    seen = {'after_step': [], 'after_epoch': [], 'tails': [], 'steps': []}
    loop.events.on(EventKeys.AFTER_STEP, lambda lp: seen['after_step'].append(lp.step))
    loop.events.on(EventKeys.AFTER_EPOCH, lambda lp: seen['after_epoch'].append(lp.epoch))
    return seen


def test_request_stop_from_the_body(session):
    model = Model(session)
    lines = []
    loop = spt.TrainLoop([model.w], max_epoch=5, print_func=lines.append)
    seen = record(loop)
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(3)):
                model.step()
                seen['steps'].append(step)
                if step == 5:
                    loop.request_stop('enough')
            seen['tails'].append(epoch)
    assert seen == {'after_step': [1, 2, 3, 4, 5], 'after_epoch': [1, 2], 'tails': [1, 2],
                    'steps': [1, 2, 3, 4, 5]}
    assert lines == ['Training stopped at epoch 2, step 5: enough']
    assert loop.stop_reason == 'enough'
    assert model.values()[0] == 5.


def test_request_stop_from_an_after_step_handler(session):
    model = Model(session)
    lines = []
    loop = spt.TrainLoop([model.w], max_epoch=5, print_func=lines.append)
    seen = record(loop)
    loop.events.on(EventKeys.AFTER_STEP,
                   lambda lp: lp.request_stop('handler says stop') if lp.step == 4 else None)
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(3)):
                model.step()
                seen['steps'].append(step)
            seen['tails'].append(epoch)
    assert seen == {'after_step': [1, 2, 3, 4], 'after_epoch': [1, 2], 'tails': [1, 2],
                    'steps': [1, 2, 3, 4]}
    assert lines == ['Training stopped at epoch 2, step 4: handler says stop']
    assert loop.stop_reason == 'handler says stop'


def test_star_marks_and_best_valid_metric(session, fake_clock):
    model = Model(session)
    lines = []
    bests = []
    loop = spt.TrainLoop([model.w], max_epoch=1, clock=fake_clock, print_func=lines.append,
                         show_eta=False)
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(3)):
                model.step()
                fake_clock.advance(0.5)
                loop.collect_metrics(valid_loss=model.validate([0.75, 0.5, 0.625][step - 1]))
                bests.append(loop.best_valid_metric)
                loop.print_logs()
    assert bests == [0.75, 0.5, 0.5]
    assert lines == ['[Step 1] step time: 0.5s; valid loss: 0.75 (*)',
                     '[Step 2] step time: 0.5s; valid loss: 0.5 (*)',
                     '[Step 3] step time: 0.5s; valid loss: 0.625']
