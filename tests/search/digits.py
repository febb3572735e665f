"""A tiny digits MLP trained by a TrainLoop (eager, no tf.function): a trial of the tests."""

import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

import tfsnippet as spt

_DATA = {}


def data():
    if not _DATA:
        x, y = load_digits(return_X_y=True)
        x = (x / 16.).astype(np.float32)
        y = y.astype(np.int64)
        order = np.random.RandomState(0).permutation(len(x))
        x, y = x[order], y[order]
        _DATA['train'] = (x[:1200], y[:1200])
        _DATA['valid'] = (x[1200:], y[1200:])
    return _DATA['train'], _DATA['valid']


class DigitsConfig(spt.Config):
    """One trial of the digits MLP."""

    class optimizer(spt.Config):
        lr = 1e-3
        beta_1 = 0.9

    hidden = 32
    batch_size = 128
    max_epoch = 3
    seed = 1


def build(config):
    """The MLP's variables, its built Adam optimizer and its loss function (call it in a
    strategy's scope to make them distributed)."""
    rng = np.random.RandomState(config.seed)
    w1 = tf.Variable(rng.normal(0, 0.1, [64, config.hidden]).astype(np.float32))
    b1 = tf.Variable(np.zeros([config.hidden], np.float32))
    w2 = tf.Variable(rng.normal(0, 0.1, [config.hidden, 10]).astype(np.float32))
    b2 = tf.Variable(np.zeros([10], np.float32))
    params = [w1, b1, w2, b2]
    opt = tf.keras.optimizers.Adam(config.optimizer.lr, beta_1=config.optimizer.beta_1)
    opt.build(params)

    def loss_of(x, y):
        logits = tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2
        return tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits))

    return params, opt, loss_of


def train(config, on_epoch=None):
    """Train the MLP; `on_epoch(loop, epoch)` is called after each epoch's print."""
    (x_train, y_train), (x_valid, y_valid) = data()
    params, opt, loss_of = build(config)

    flow = spt.DataFlow.arrays([x_train, y_train], config.batch_size, shuffle=True,
                               random_state=config.seed)
    with spt.TrainLoop(params, max_epoch=config.max_epoch, valid_metric_name='valid_loss',
                       checkpoint_save_objects={'optimizer': opt}) as loop:
        for epoch in loop.iter_epochs():
            for _, (x, y) in loop.iter_steps(flow):
                with tf.GradientTape() as tape:
                    loss = loss_of(x, y)
                opt.apply_gradients(zip(tape.gradient(loss, params), params))
                loop.collect_metrics(loss=float(loss))
            loop.collect_metrics(valid_loss=float(loss_of(x_valid, y_valid)))
            loop.print_logs()
            if on_epoch is not None:
                on_epoch(loop, epoch)
    return None
