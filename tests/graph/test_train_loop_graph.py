"""`TrainLoop` with TF1-style graph code (eager execution disabled).

Each test gets a fresh graph (tests/graph/conftest.py); `session` is a
default ``tf.compat.v1.Session`` on it.
"""

import re

import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_digits

import tfsnippet as spt

v1 = tf.compat.v1


def digits(start, stop):
    data = load_digits()
    x = (data.data[start:stop] / 16.).astype(np.float32)
    y = data.target[start:stop].astype(np.int32)
    return x, y


def build_mlp(optimizer):
    """Placeholders, a one-hidden-layer net from `get_variable`, loss, accuracy and train op."""
    x = v1.placeholder(tf.float32, [None, 64], name='x')
    y = v1.placeholder(tf.int32, [None], name='y')
    init = v1.glorot_uniform_initializer(seed=1)
    with v1.variable_scope('net'):
        w1 = v1.get_variable('hidden/kernel', [64, 32], initializer=init)
        b1 = v1.get_variable('hidden/bias', [32], initializer=v1.zeros_initializer())
        w2 = v1.get_variable('out/kernel', [32, 10], initializer=init)
        b2 = v1.get_variable('out/bias', [10], initializer=v1.zeros_initializer())
    logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
    acc = tf.reduce_mean(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), y),
                                 tf.float32))
    train_op = optimizer.minimize(loss)
    return x, y, loss, acc, train_op, [w1, b1, w2, b2]


@pytest.mark.parametrize('make_optimizer', [
    lambda: v1.train.GradientDescentOptimizer(0.5),
    lambda: v1.train.AdamOptimizer(0.01),
], ids=['sgd', 'adam'])
def test_graph_mode_training_on_digits(session, make_optimizer):
    train_x, train_y = digits(0, 300)
    valid_x, valid_y = digits(300, 400)
    x, y, loss, acc, train_op, params = build_mlp(make_optimizer())
    session.run(v1.global_variables_initializer())
    batches = [(train_x[i:i + 50], train_y[i:i + 50]) for i in range(0, 300, 50)]

    lines = []
    with spt.TrainLoop(params, max_epoch=5, show_eta=False, print_func=lines.append) as loop:
        loop.print_training_summary()
        for _ in loop.iter_epochs():
            for _, (bx, by) in loop.iter_steps(batches):
                _, batch_loss, batch_acc = session.run([train_op, loss, acc],
                                                       feed_dict={x: bx, y: by})
                assert isinstance(batch_loss, np.float32)
                loop.collect_metrics(loss=batch_loss, acc=batch_acc)
            valid_loss = session.run(loss, feed_dict={x: valid_x, y: valid_y})
            loop.collect_metrics(valid_loss=valid_loss)
            loop.print_logs()

    # 64 * 32 + 32 + 32 * 10 + 10 parameters
    assert lines[0].splitlines()[0].split() == ['Trainable', 'Parameters', '(2,410', 'in',
                                                'total)']
    assert lines[0].splitlines()[2].split() == ['net/hidden/kernel', '(64,', '32)', '2,048']
    assert lines[0].endswith('\n')      # the table and its blank line: one record
    epoch_lines = lines[1:]
    assert [line.split(']')[0] for line in epoch_lines] == [
        f'[Epoch {e}/5, Step {6 * e}' for e in range(1, 6)]
    assert epoch_lines[0].endswith(' (*)')          # the first validation loss is a best
    losses = [float(re.search(r'; loss: (\S+) \(±', line).group(1)) for line in epoch_lines]
    valid_losses = [float(re.search(r'; valid loss: ([^ ;]+)', line).group(1))
                    for line in epoch_lines]
    assert losses[-1] < losses[0]
    assert valid_losses[-1] < valid_losses[0]
    assert loop.best_valid_metric == pytest.approx(min(valid_losses), rel=1e-5)
    assert loop.step == 30


def test_limit_tensor_without_a_session():
    with pytest.raises(RuntimeError, match=re.escape('No session is active')):
        spt.TrainLoop(max_epoch=tf.constant(2))


def test_collect_metrics_with_a_symbolic_tensor(session):
    loss = tf.constant(1.5, name='loss')
    with spt.TrainLoop(max_epoch=1) as loop:
        for _ in loop.iter_epochs():
            with pytest.raises(TypeError, match=(
                    re.escape('Metric `loss` is a symbolic graph tensor') + '.*'
                    + re.escape('evaluate it with `session.run` and pass the result instead'))):
                loop.collect_metrics(loss=loss)
            loop.collect_metrics(loss=session.run(loss))       # what the message advises


def test_collect_metrics_with_a_graph_variable(session):
    var = v1.get_variable('v', initializer=tf.constant(2.))
    session.run(var.initializer)
    with spt.TrainLoop(max_epoch=1) as loop:
        for _ in loop.iter_epochs():
            with pytest.raises(TypeError, match=(
                    re.escape('Metric `v` is a graph variable') + '.*'
                    + re.escape('evaluate it with `session.run`'))):
                loop.collect_metrics(v=var)
