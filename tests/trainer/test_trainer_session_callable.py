"""The graph `Trainer` runs its steps through TensorFlow's public
``Session.make_callable``, built once per session and fetch/feed structure
(no private Session API); a structure it cannot build is left to ``session.run``."""

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet import EventKeys

v1 = tf.compat.v1


def sum_trainer(loop, epochs_of_batches=3):
    ph = v1.placeholder(tf.float32, [None])
    total = tf.Variable(0., name='total')
    v1.get_default_session().run(total.initializer)
    batches = [(np.array([1., 2.], np.float32),)] * epochs_of_batches
    trainer = spt.Trainer(loop, total.assign_add(tf.reduce_sum(ph)).op, [ph], batches,
                          metrics={'batch_sum': tf.reduce_sum(ph)})
    return trainer, total


@pytest.fixture
def made(monkeypatch):
    """The fetch and feed structures ``Session.make_callable`` was called with."""
    calls = []
    real = v1.Session.make_callable

    def spy(self, fetches, feed_list=None, accept_options=False):
        calls.append((len(fetches), len(feed_list or ())))
        return real(self, fetches, feed_list=feed_list, accept_options=accept_options)
    monkeypatch.setattr(v1.Session, 'make_callable', spy)
    return calls


def test_the_step_callable_is_made_once_per_session(style, made):
    if not style.is_graph:
        pytest.skip('a session runs graph steps only')
    collected = []
    with spt.TrainLoop(max_epoch=2, print_func=lambda line: None) as loop:
        loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(m))
        trainer, total = sum_trainer(loop)
        trainer.run()
        assert made == [(2, 1)]     # the train op and one metric, fed one placeholder
        assert style.value(total) == 18.
        second = v1.Session(graph=style.graph)
        with second.as_default():
            second.run(total.initializer)
            loop.max_epoch = 3
            trainer.run()
            assert second.run(total) == 9.
        second.close()
    assert made == [(2, 1), (2, 1)]   # once more, for the new session
    assert collected == [{'batch_sum': 3.}] * 9


def test_a_structure_make_callable_refuses_trains_through_session_run(style, monkeypatch):
    if not style.is_graph:
        pytest.skip('a session runs graph steps only')
    refused = []

    def refuse(self, *args, **kwargs):
        refused.append(args)
        raise ValueError('not this structure')
    monkeypatch.setattr(v1.Session, 'make_callable', refuse)
    with spt.TrainLoop(max_epoch=2, print_func=lambda line: None) as loop:
        trainer, total = sum_trainer(loop)
        trainer.run()
    assert style.value(total) == 18.    # every step ran once
    assert len(refused) == 1            # tried once, then left alone
