"""Early stopping, the best validation metric and `request_stop` with TF1-style graph code.

What both styles share is in tests/scaffold/test_early_stopping.py (the tests
taking ``style``); here is what is graph-only: the restore on a finalized graph.  Each test gets
a fresh graph; `session` is its default session.
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


def train(loop, model, valid):
    with loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                model.step()
            loop.collect_metrics(valid_loss=model.validate(valid[epoch - 1]))


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
