import tensorflow as tf


def test_graph_process_runs_without_eager_execution(session):
    assert not tf.executing_eagerly()
    x = tf.compat.v1.placeholder(tf.float32, [])
    assert session.run(x * 2., feed_dict={x: 3.}) == 6.
