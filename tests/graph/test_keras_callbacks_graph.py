"""Keras callbacks in TF1-style graph code: refused (issue 19, part 1).

Keras 3 models and callbacks run eagerly only; in graph mode ``KerasCallbacks``
says so and points to the loop's own components.  What the component does is
tested in eager mode, in tests/scaffold/test_keras_callbacks.py.
"""

import keras
import pytest
import tensorflow as tf

import tfsnippet as spt


def test_keras_callbacks_are_refused_in_graph_mode(session):
    assert not tf.executing_eagerly()
    with pytest.raises(RuntimeError, match=r'KerasCallbacks needs eager execution: Keras 3 '
                                           r'callbacks and models do not run in graph mode.*'
                                           r'EarlyStopping, ReduceOnPlateau, LossGuard'):
        spt.KerasCallbacks([keras.callbacks.EarlyStopping()], model=None)
    # the loop itself is unchanged: its own early stopping works there
    w = tf.compat.v1.get_variable('w', shape=[], initializer=tf.compat.v1.zeros_initializer())
    session.run(tf.compat.v1.global_variables_initializer())
    lines = []
    with spt.TrainLoop([w], max_epoch=3, early_stopping=True, early_stopping_patience=1,
                       print_func=lines.append, show_eta=False) as loop:
        for epoch in loop.iter_epochs():
            loop.collect_metrics(valid_loss=float(epoch))
    assert loop.epoch == 2 and loop.stop_reason.startswith('`valid_loss` has not improved')
