"""Train a small classifier on scikit-learn's digits, TF2 eager style.

The model is a Keras 3 ``Sequential`` MLP (``keras_mlp`` in ``_digits.py``:
64 pixels, ``Dense`` layers of 128 and 64 units, 10 logits); the training
step is a ``tf.function`` written by hand with ``tf.GradientTape``.
tfsnippet's ``TrainLoop`` keeps the counters, times the epochs and the
validation pass and prints one log line per epoch with an ETA.  It also

* keeps the weights of the best validation loss and stops after
  ``--patience`` epochs without a better one (early stopping);
* saves a checkpoint after every epoch, of the model *and* the optimizer, so
  that a run started again on the same ``--output-dir`` resumes;
* writes the metrics as TensorBoard scalars (``tensorboard --logdir runs``).

The data (8x8 images of handwritten digits, 1,797 of them) ships with
scikit-learn: nothing is downloaded.  Run it from the repository root::

    python examples/digits_eager.py              # 20 epochs at most, a few seconds
    python examples/digits_eager.py --help       # all flags

The final test accuracy is printed and written to ``<output-dir>/result.json``.
"""

import os
import sys

# Keep TensorFlow's start-up chatter (CPU features, missing CUDA) off the
# console unless the user asked for it.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfsnippet as spt  # noqa: E402
from _digits import (batch_signature, evaluate, finish, keras_eval_step,  # noqa: E402
                     keras_mlp, make_parser, patience_of, start)

EXAMPLE = 'digits_eager'


def main(argv=None):
    parser = make_parser(EXAMPLE, 'Train an MLP on the scikit-learn digits in TF2 eager style.')
    # flags parsed, seeds set, run folder created, data split 60/20/20
    args, (x_train, y_train), (x_valid, y_valid), (x_test, y_test) = start(parser, argv)
    # shuffled anew every epoch; its position is part of each checkpoint
    train_flow = spt.DataFlow.arrays([x_train, y_train], args.batch_size, shuffle=True,
                                     random_state=args.seed)

    model = keras_mlp()
    optimizer = keras.optimizers.Adam(learning_rate=args.lr)
    # create Adam's slot variables now, so that a checkpoint can be restored into them
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(input_signature=batch_signature())
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    eval_step = keras_eval_step(model)  # (x, y) -> (mean loss, accuracy)

    with spt.TrainLoop(model.trainable_variables,
                       max_epoch=args.epochs,
                       early_stopping=True,  # on `valid_loss`, the default validation metric
                       early_stopping_patience=patience_of(args),
                       checkpoint_dir=args.checkpoint_dir,  # run folder/checkpoints
                       checkpoint_epoch_freq=1,
                       checkpoint_max_to_keep=2,
                       checkpoint_save_objects={'model': model, 'optimizer': optimizer},
                       summary_dir=args.summary_dir) as loop:  # run folder/tensorboard
        loop.print_training_summary()
        for epoch in loop.iter_epochs():
            for step, (x, y) in loop.iter_steps(train_flow):
                loss = train_step(x, y)
                loop.collect_metrics(loss=loss)  # an eager tensor: read when printed

            with loop.timeit('valid_time'):
                valid_loss, valid_acc = evaluate(eval_step, x_valid, y_valid)
                loop.collect_metrics(valid_loss=valid_loss, valid_acc=valid_acc)
            loop.print_logs()

    # leaving the loop has put back the weights of the best validation loss;
    # print the test accuracy and write result.json
    return finish(args, loop, eval_step, x_test, y_test)


if __name__ == '__main__':
    sys.exit(main())
