"""Graph-mode tests: each runs in a fresh ``tf.Graph`` with a default session."""

import pytest
import tensorflow as tf


@pytest.fixture(autouse=True)
def graph():
    g = tf.Graph()
    with g.as_default():
        yield g


@pytest.fixture
def session(graph):
    sess = tf.compat.v1.Session(graph=graph)
    with sess.as_default():
        yield sess
    sess.close()
