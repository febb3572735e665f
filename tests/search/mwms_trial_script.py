"""An spt.Experiment script that trains under MultiWorkerMirroredStrategy: the trial of
the command-line test with ``--workers 2`` (each trial a two-worker job)."""

import tensorflow as tf

import tfsnippet as spt
from tests.search.digits import DigitsConfig, build, data

strategy = tf.distribute.MultiWorkerMirroredStrategy()

with spt.Experiment(DigitsConfig) as exp:
    config = exp.config
    (x_train, y_train), (x_valid, y_valid) = data()
    with strategy.scope():
        params, opt, loss_of = build(config)

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
