"""TensorBoard summaries of the loop with TF1-style graph code (API.md section 7.8).

Metrics come from ``session.run``; ``add_summary`` gets the serialized
bytes of ``tf.compat.v1.summary`` ops.  What both styles share is in
tests/scaffold/test_summaries.py (the tests taking ``style``); here is what
is graph-only: the graph itself and a ``tf.compat.v1`` ``FileWriter``.
"""

import tensorflow as tf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import tfsnippet as spt
from tests.helpers import read_scalars

v1 = tf.compat.v1


def accumulate(logdir):
    ea = EventAccumulator(str(logdir), size_guidance={'scalars': 0})
    ea.Reload()
    return ea


class Graph:
    """``loss = step / 4`` from a placeholder, and summary ops of a value ``x``."""

    def __init__(self, session):
        self.session = session
        self.step_in = v1.placeholder(tf.float32, [], name='step_in')
        self.loss = self.step_in / 4.
        self.x_in = v1.placeholder(tf.float32, [], name='x_in')
        self.x_summary = v1.summary.scalar('x', self.x_in)
        self.merged = v1.summary.merge_all()

    def loss_of(self, step):
        return self.session.run(self.loss, feed_dict={self.step_in: step})


LOSS = [(s, s * 0.25) for s in range(1, 7)]


def train(loop, g, clock, summary_op='merged'):
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(3)):
                clock.advance(2.)
                loop.collect_metrics(loss=g.loss_of(step))
            with loop.timeit('valid_time'):
                clock.advance(2.)
                loop.collect_metrics(valid_loss=g.loss_of(2 * epoch))
            loop.add_summary(g.session.run(getattr(g, summary_op),
                                           feed_dict={g.x_in: 10. * epoch}))


def test_summary_graph_is_written(session, graph, tmp_path, fake_clock):
    g = Graph(session)
    loop = spt.TrainLoop(max_epoch=1, summary_dir=str(tmp_path), summary_graph=graph,
                         clock=fake_clock, print_func=lambda s: None)
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps([0]):
                loop.collect_metrics(loss=g.loss_of(step))
    ea = accumulate(tmp_path)
    assert ea.Tags()['graph'] is True
    names = {node.name for node in ea.Graph().node}
    assert {'step_in', 'x_in'} <= names
    assert read_scalars(tmp_path)['metrics/loss'] == [(1, 0.25)]


def test_no_graph_without_summary_graph(session, tmp_path):
    loop = spt.TrainLoop(max_epoch=1, summary_dir=str(tmp_path), print_func=lambda s: None)
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(loss=1.)
    assert accumulate(tmp_path).Tags()['graph'] is False


def test_tf_file_writer_as_summary_writer(session, tmp_path, fake_clock):
    # TrainLoop's docstring: `summary_writer` may be a tf.compat.v1.summary.FileWriter
    g = Graph(session)
    file_writer = v1.summary.FileWriter(str(tmp_path / 'tf'))
    train(spt.TrainLoop(max_epoch=2, summary_writer=file_writer, clock=fake_clock,
                        print_func=lambda s: None), g, fake_clock)
    file_writer.add_summary(session.run(g.merged, feed_dict={g.x_in: 5.}), 9)
    file_writer.close()
    scalars = read_scalars(tmp_path / 'tf')
    assert scalars['metrics/loss'] == LOSS
    assert scalars['x'] == [(3, 10.), (6, 20.), (9, 5.)]
