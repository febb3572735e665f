"""Train the digits classifier with ``spt.Trainer`` and a learning-rate schedule.

The model and the data are those of ``digits_eager.py``; the epochs and
steps are not written out here: ``spt.Trainer`` runs them, calling the
``tf.function`` training step on every batch of a ``DataFlow`` and
collecting the metrics it returns, and hooks do the rest after each epoch:

* ``trainer.evaluate_after_epochs(evaluator, 1)``: ``spt.Evaluator`` runs the
  validation set through an evaluation function and collects ``valid_loss``
  and ``valid_acc`` (batch means weighted by batch size);
* ``trainer.anneal_after_epochs(lr, N)``: the learning rate, an
  ``spt.AnnealingVariable`` that the Keras optimizer reads at every step,
  starts at ``--lr`` (0.003 here) and is halved every ``--lr-anneal-epochs``
  (5) epochs;
* ``trainer.log_after_epochs(1)``: one log line per epoch, which shows the
  learning rate of the epoch too.

Early stopping, checkpoints (model, optimizer and learning rate) and
TensorBoard scalars (``metrics/lr`` among them) are set up on the
``TrainLoop`` as in the other examples.  Run it from the repository root::

    python examples/digits_trainer.py            # 20 epochs at most, a few seconds
    python examples/digits_trainer.py --help     # all flags
"""

import os
import sys

# Keep TensorFlow's start-up chatter (CPU features, missing CUDA) off the
# console unless the user asked for it.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfsnippet as spt  # noqa: E402
from _digits import (EVAL_BATCH_SIZE, batch_signature, finish,  # noqa: E402
                     keras_eval_step, keras_mlp, loop_options, make_parser, positive_int,
                     start)

EXAMPLE = 'digits_trainer'


def main(argv=None):
    parser = make_parser(EXAMPLE, 'Train an MLP on the scikit-learn digits with spt.Trainer '
                                  'and an annealed learning rate.')
    parser.add_argument('--lr-anneal-epochs', type=positive_int, default=5,
                        help='halve the learning rate after every this many epochs')
    parser.set_defaults(lr=3e-3)  # a higher start, since the rate only goes down
    args, train, valid, (x_test, y_test) = start(parser, argv)
    train_flow = spt.DataFlow.arrays(train, args.batch_size, shuffle=True,
                                     random_state=args.seed)
    valid_flow = spt.DataFlow.arrays(valid, EVAL_BATCH_SIZE)

    model = keras_mlp()
    # a non-trainable tf.Variable multiplied by 0.5 at each `lr.anneal()`;
    # Keras calls it at every step to read the current rate
    lr = spt.AnnealingVariable('lr', args.lr, ratio=0.5)
    optimizer = keras.optimizers.Adam(learning_rate=lr)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer.build(model.trainable_variables)  # before a checkpoint is restored into it

    @tf.function(input_signature=batch_signature())
    def train_step(x, y):
        """One step on the batch `(x, y)`; the returned dict is collected as metrics."""
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = loss_fn(y, logits)
        optimizer.apply(tape.gradient(loss, model.trainable_variables),
                        model.trainable_variables)
        return {'loss': loss}

    eval_step = keras_eval_step(model)

    def valid_metrics(x, y):
        """The metrics of one validation batch, named as the loop expects."""
        loss, acc = eval_step(x, y)
        return {'valid_loss': loss, 'valid_acc': acc}

    # max_epoch, early stopping, checkpoint_dir and summary_dir as in digits_eager.py
    with spt.TrainLoop(model.trainable_variables, checkpoint_epoch_freq=1,
                       checkpoint_max_to_keep=2,
                       # the learning rate is not an optimizer variable: save it too
                       checkpoint_save_objects={'model': model, 'optimizer': optimizer,
                                                'lr': lr.variable},
                       **loop_options(args)) as loop:
        trainer = spt.Trainer(loop, train_step, data_flow=train_flow)
        evaluator = spt.Evaluator(loop, valid_metrics, data_flow=valid_flow,
                                  time_metric_name='valid_time')
        # the rate each epoch trains with, in its log line and in TensorBoard
        trainer.events.on(spt.EventKeys.BEFORE_EPOCH,
                          lambda trainer: loop.collect_metrics(lr=lr.get()))
        trainer.evaluate_after_epochs(evaluator, 1)
        trainer.anneal_after_epochs(lr, args.lr_anneal_epochs)
        trainer.log_after_epochs(1)
        trainer.run()  # prints the parameter table, then trains

    return finish(args, loop, eval_step, x_test, y_test)


if __name__ == '__main__':
    sys.exit(main())
