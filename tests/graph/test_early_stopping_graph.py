"""Early stopping, the best validation metric and `request_stop` with TF1-style graph code.

What both styles share is in tests/scaffold/test_early_stopping.py (the tests
taking ``style``); here is what is graph-only or written for graph code alone:
``tf.compat.v1`` variables changed by ``session.run`` of ``assign_add`` ops,
and a finalized graph.  Each test gets a fresh graph; `session` is its default
session.
"""

import numpy as np
import tensorflow as tf

import tfsnippet as spt

v1 = tf.compat.v1


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
