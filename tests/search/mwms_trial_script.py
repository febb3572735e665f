"""An spt.Experiment script that trains under MultiWorkerMirroredStrategy: the trial of
the command-line test with ``--workers 2`` (each trial a two-worker job)."""

import numpy as np
import tensorflow as tf

import tfsnippet as spt
from tests.search.digits import DigitsConfig, data

strategy = tf.distribute.MultiWorkerMirroredStrategy()

with spt.Experiment(DigitsConfig) as exp:
    config = exp.config
    (x_train, y_train), (x_valid, y_valid) = data()
    rng = np.random.RandomState(config.seed)
    with strategy.scope():
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

    def replica_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_of(x, y)
        grads = tape.gradient(loss, params)
        opt.apply_gradients(zip(grads, params))
        return loss

    @tf.function
    def step(x, y):
        return strategy.run(replica_step, args=(x, y))

    flow = spt.DataFlow.arrays([x_train, y_train], config.batch_size, shuffle=True,
                               random_state=config.seed, skip_incomplete=True)
    with spt.TrainLoop(params, max_epoch=config.max_epoch, valid_metric_name='valid_loss',
                       strategy=strategy) as loop:
        for epoch in loop.iter_epochs():
            for _, (x, y) in loop.iter_steps(flow):
                loop.collect_metrics(loss=step(x, y))
            loop.collect_metrics(valid_loss=float(loss_of(x_valid, y_valid)))
            loop.print_logs()
