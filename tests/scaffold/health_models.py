"""Small models trained the same way in both TF styles, for the training-health tests."""

import numpy as np
import tensorflow as tf


def regression_data(n_batches=10, batch=16, seed=0):
    """Batches ``(x, y)`` of a noiseless linear regression, and its true weights."""
    rng = np.random.RandomState(seed)
    w_true = np.asarray([1., -2., .5, 3.], dtype=np.float32)
    batches = []
    for _ in range(n_batches):
        x = rng.randn(batch, 4).astype(np.float32)
        batches.append((x, (x @ w_true).astype(np.float32)))
    return batches, w_true


def sgd_regression(style, lr=.1):
    """``(w, step)``: a weight variable and ``step(x, y) -> loss`` taking one SGD step
    (a ``tf.function`` in eager style, one ``session.run`` in graph style)."""
    w = style.variable(np.zeros(4, np.float32), 'w')

    def body(x, y):
        err = tf.linalg.matvec(x, w) - y
        loss = tf.reduce_mean(tf.square(err))
        grad = 2. * tf.linalg.matvec(x, err, transpose_a=True) / tf.cast(tf.shape(x)[0],
                                                                           tf.float32)
        with tf.control_dependencies([loss]):
            update = w.assign_sub(lr * grad)
        return loss, update

    run = style.fed(body, [None, 4], [None])
    return w, lambda x, y: float(run(x, y)[0])


def mlp_train_step(style, batch=64, n_in=64, hidden=128, n_out=10):
    """``(step, run)``: what to count FLOPs on (a ``tf.function`` or the train op) and
    ``run(x, y)`` running one SGD step of a 64-128-10 MLP with a softmax loss."""
    rng = np.random.RandomState(1)
    params = [style.variable(rng.randn(n_in, hidden) * .1, 'w1'),
              style.variable(np.zeros(hidden), 'b1'),
              style.variable(rng.randn(hidden, n_out) * .1, 'w2'),
              style.variable(np.zeros(n_out), 'b2')]

    def body(x, y):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(x @ params[0] + params[1])
            logits = h @ params[2] + params[3]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=logits))
        grads = tape.gradient(loss, params)
        return loss, tf.group([p.assign_sub(.1 * g) for p, g in zip(params, grads)])

    return _step_of(style, body, [batch, n_in], [batch])


def cnn_train_step(style, batch=32, size=16, channels=3, filters=16, n_out=10):
    """Like :func:`mlp_train_step`, for a 3x3 convolution (SAME), a ReLU and a dense layer."""
    rng = np.random.RandomState(2)
    params = [style.variable(rng.randn(3, 3, channels, filters) * .1, 'k'),
              style.variable(rng.randn(size * size * filters, n_out) * .01, 'w')]

    def body(x, y):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.nn.conv2d(x, params[0], 1, 'SAME'))
            logits = tf.reshape(h, [tf.shape(h)[0], -1]) @ params[1]
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=logits))
        grads = tape.gradient(loss, params)
        return loss, tf.group([p.assign_sub(.1 * g) for p, g in zip(params, grads)])

    return _step_of(style, body, [batch, size, size, channels], [batch])


def _step_of(style, body, x_shape, y_shape):
    if style.is_graph:
        x = tf.compat.v1.placeholder(tf.float32, x_shape)
        y = tf.compat.v1.placeholder(tf.int32, y_shape)
        loss, train = body(x, y)
        return train, lambda xs, ys: style.session.run([loss, train], {x: xs, y: ys})[0]
    step = tf.function(lambda x, y: body(x, y)[0])   # the updates run: they are stateful
    return step, lambda xs, ys: step(tf.constant(xs), tf.constant(ys)).numpy()


def mlp_flops(batch=64, n_in=64, hidden=128, n_out=10):
    """The multiply-adds of a training step, 2 FLOPs each: the forward matmuls,
    the weights' gradients, and the hidden layer's input gradient."""
    first, second = 2 * batch * n_in * hidden, 2 * batch * hidden * n_out
    return 2 * first + 3 * second


def cnn_flops(batch=32, size=16, channels=3, filters=16, n_out=10):
    conv = 2 * batch * size * size * channels * filters * 9
    dense = 2 * batch * size * size * filters * n_out
    return 2 * conv + 3 * dense
