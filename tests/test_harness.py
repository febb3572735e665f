import tensorflow as tf


def test_main_process_runs_eagerly():
    assert tf.executing_eagerly()
