"""What the digits examples share: flags, data, the Keras model, evaluation, results.

Each example script imports this module (it sits next to them, and Python
puts a script's own folder first on ``sys.path``).  The training code itself,
the part each example is about, stays in the scripts.

The run folder of an example (``--output-dir``, ``./runs/<example>/`` by
default) holds::

    checkpoints/    the TrainLoop's checkpoints (``checkpoint_dir``)
    tensorboard/    TensorBoard event files (``summary_dir``)
    result.json     the test accuracy and a few figures of the run
"""

import argparse
import json
import os

import keras
import numpy as np
import tensorflow as tf
from sklearn.datasets import load_digits

#: The number of features (8x8 pixels) and of classes of the digits data.
N_FEATURES, N_CLASSES = 64, 10

#: Batch size of the evaluation passes (they need no gradients: one big batch).
EVAL_BATCH_SIZE = 256


# ------------------------------------------------------------------ flags
def positive_int(text):
    """An argparse type: an int of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be at least 1, got {value}')
    return value


def make_parser(example, description, epochs=20):
    """The flags every example takes; an example may add its own before :func:`start`."""
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.set_defaults(example=example)
    parser.add_argument('--epochs', '--max-epoch', type=positive_int, default=epochs,
                        help='maximum number of epochs')
    parser.add_argument('--batch-size', type=positive_int, default=32,
                        help='training batch size')
    parser.add_argument('--lr', type=float, default=1e-3, help="Adam's learning rate")
    parser.add_argument('--seed', type=int, default=1234,
                        help='seed of the data split, the shuffling and the weights')
    parser.add_argument('--patience', type=int, default=5,
                        help='stop after this many epochs without a better validation loss '
                             '(0: train all epochs; the best weights are restored either way)')
    parser.add_argument('--output-dir', default=os.path.join('.', 'runs', example),
                        help='the run folder: checkpoints/, tensorboard/ and result.json '
                             '(a run started again on the same folder resumes)')
    return parser


def start(parser, argv=None, create_output_dir=True):
    """Parse the flags, seed everything, create the run folder and load the data.

    With `create_output_dir` false the run folder is not created (by the
    processes of a distributed job that write nothing).

    The seed goes to Python's, numpy's and TensorFlow's generators (in graph
    mode to the default graph).  ``args.checkpoint_dir`` and
    ``args.summary_dir`` are set to the ``checkpoints/`` and ``tensorboard/``
    folders of the run folder.

    Returns:
        ``(args, (x_train, y_train), (x_valid, y_valid), (x_test, y_test))``.
    """
    args = parser.parse_args(argv)
    if not args.lr > 0:
        parser.error('--lr must be positive')
    if args.patience < 0:
        parser.error('--patience must be 0 (off) or more')
    keras.utils.set_random_seed(args.seed)
    if create_output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
    args.checkpoint_dir = os.path.join(args.output_dir, 'checkpoints')
    args.summary_dir = os.path.join(args.output_dir, 'tensorboard')
    return (args, *load_data(args.seed))


def patience_of(args):
    """``early_stopping_patience`` for the loop: ``None`` when ``--patience 0``."""
    return args.patience or None


def loop_options(args):
    """The ``TrainLoop`` options that ``digits_eager.py`` spells out, for the others."""
    return {'max_epoch': args.epochs,
            'early_stopping': True,  # on `valid_loss`, the default validation metric
            'early_stopping_patience': patience_of(args),
            'checkpoint_dir': args.checkpoint_dir,
            'summary_dir': args.summary_dir}


# ------------------------------------------------------------------- data
def load_data(seed):
    """Split the 1,797 digits into train (60%), validation (20%) and test (20%).

    Returns ``((x_train, y_train), (x_valid, y_valid), (x_test, y_test))``:
    float32 pixels scaled to [0, 1] and int32 labels.
    """
    x, y = load_digits(return_X_y=True)
    x = (x / 16.).astype(np.float32)  # pixel values are 0..16
    y = y.astype(np.int32)
    order = np.random.RandomState(seed).permutation(len(x))
    n_test = n_valid = len(x) // 5
    test, valid, train = np.split(order, [n_test, n_test + n_valid])
    return (x[train], y[train]), (x[valid], y[valid]), (x[test], y[test])


def evaluate(batch_fn, x, y):
    """The mean loss and accuracy over all of `x`, `y`.

    `batch_fn(bx, by)` returns the mean loss and the accuracy of one batch
    (numbers or scalar tensors); the batch means are weighted by batch size.
    """
    total_loss = total_correct = 0.
    for start in range(0, len(x), EVAL_BATCH_SIZE):
        bx, by = x[start:start + EVAL_BATCH_SIZE], y[start:start + EVAL_BATCH_SIZE]
        loss, acc = batch_fn(bx, by)
        total_loss += float(loss) * len(bx)
        total_correct += float(acc) * len(bx)
    return total_loss / len(x), total_correct / len(x)


# ----------------------------------------------------- the Keras 3 model
def keras_mlp():
    """The MLP of the eager examples: 64 pixels -> 128 -> 64 -> 10 logits."""
    return keras.Sequential([
        keras.Input(shape=(N_FEATURES,)),
        keras.layers.Dense(128, activation='relu', name='hidden1'),
        keras.layers.Dense(64, activation='relu', name='hidden2'),
        keras.layers.Dense(N_CLASSES, name='logits'),
    ], name='mlp')


def batch_signature():
    """The ``input_signature`` of ``tf.function`` steps taking an ``(x, y)`` batch.

    A fixed signature lets the last, smaller batch of an epoch reuse the
    traced graph instead of tracing a new one.
    """
    return [tf.TensorSpec([None, N_FEATURES], tf.float32), tf.TensorSpec([None], tf.int32)]


def keras_train_step(model, optimizer):
    """A ``tf.function`` training `model` by `optimizer` on a batch ``(x, y)``,
    returning its mean loss (the step ``digits_eager.py`` writes out)."""
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(input_signature=batch_signature())
    def train_step(x, y):
        variables = model.trainable_variables
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss

    return train_step


def keras_eval_step(model):
    """A ``tf.function`` of a batch ``(x, y)`` returning its mean loss and accuracy."""

    @tf.function(input_signature=batch_signature())
    def eval_step(x, y):
        logits = model(x, training=False)
        loss = keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
        hits = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), y)
        return tf.reduce_mean(loss), tf.reduce_mean(tf.cast(hits, tf.float32))

    return eval_step


# ---------------------------------------------------------------- results
def finish(args, loop, batch_fn, x_test, y_test, extra=None):
    """Evaluate on the test set, print the accuracy and write ``result.json``.

    `loop` is the finished TrainLoop (the epochs and steps it ran and its best
    validation loss go into the file too); `batch_fn` is as for
    :func:`evaluate`; `extra` holds more entries for the file.  Returns 0,
    the exit status.
    """
    _, test_acc = evaluate(batch_fn, x_test, y_test)
    print(f'test accuracy: {test_acc:.4f}')
    result = {'example': args.example, 'test_accuracy': test_acc, 'epochs': args.epochs,
              'seed': args.seed, 'epochs_run': loop.epoch, 'steps_run': loop.step,
              'best_valid_loss': loop.best_valid_metric, **(extra or {})}
    path = os.path.join(args.output_dir, 'result.json')
    with open(path, 'w') as f:
        json.dump(result, f, indent=2)
        f.write('\n')
    print(f'result written to {path}')
    return 0
