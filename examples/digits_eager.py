"""Train a small classifier on scikit-learn's digits, TF2 eager style.

The model is a Keras 3 ``Sequential`` of ``Dense`` layers; the training step
is a ``tf.function`` written by hand with ``tf.GradientTape``.  tfsnippet's
``TrainLoop`` keeps the counters, times the epochs and the validation pass,
and prints one log line per epoch with an ETA.  The data (8x8 images of
handwritten digits, 1,797 of them) ships with scikit-learn: nothing is
downloaded.

Run it from the repository root::

    python examples/digits_eager.py              # 20 epochs, a few seconds
    python examples/digits_eager.py --help       # all flags

The final test accuracy is printed and written to ``<output-dir>/result.json``.
"""

import argparse
import json
import os
import sys

# Keep TensorFlow's start-up chatter (CPU features, missing CUDA) off the
# console unless the user asked for it.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import tfsnippet as spt  # noqa: E402


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Train an MLP on the scikit-learn digits in TF2 eager style.')
    parser.add_argument('--epochs', type=int, default=20, help='number of epochs (default: 20)')
    parser.add_argument('--batch-size', type=int, default=32,
                        help='training batch size (default: 32)')
    parser.add_argument('--lr', type=float, default=1e-3,
                        help='learning rate of Adam (default: 0.001)')
    parser.add_argument('--seed', type=int, default=1234,
                        help='seed of the data split, the shuffling and the weights')
    parser.add_argument('--output-dir', default='./runs/digits_eager/',
                        help='where result.json goes (created if missing)')
    args = parser.parse_args(argv)
    if args.epochs < 1:
        parser.error('--epochs must be at least 1')
    if args.batch_size < 1:
        parser.error('--batch-size must be at least 1')
    return args


def load_data(seed):
    """Split the 1,797 digits into train (60%), validation (20%) and test (20%)."""
    x, y = load_digits(return_X_y=True)
    x = (x / 16.).astype(np.float32)  # pixel values are 0..16
    y = y.astype(np.int32)
    order = np.random.RandomState(seed).permutation(len(x))
    n_test = n_valid = len(x) // 5
    test, valid, train = np.split(order, [n_test, n_test + n_valid])
    return (x[train], y[train]), (x[valid], y[valid]), (x[test], y[test])


def iterate_batches(x, y, batch_size, rng=None):
    """Yield ``(x, y)`` batches; shuffled first when `rng` is given."""
    indices = np.arange(len(x)) if rng is None else rng.permutation(len(x))
    for start in range(0, len(x), batch_size):
        batch = indices[start:start + batch_size]
        yield x[batch], y[batch]


def main(argv=None):
    args = parse_args(argv)
    keras.utils.set_random_seed(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    (x_train, y_train), (x_valid, y_valid), (x_test, y_test) = load_data(args.seed)

    model = keras.Sequential([
        keras.Input(shape=(x_train.shape[1],)),
        keras.layers.Dense(128, activation='relu', name='hidden1'),
        keras.layers.Dense(64, activation='relu', name='hidden2'),
        keras.layers.Dense(10, name='logits'),
    ], name='mlp')
    optimizer = keras.optimizers.Adam(learning_rate=args.lr)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    # A fixed signature: the last, smaller batch of an epoch reuses the same
    # graph instead of tracing a new one.
    signature = [tf.TensorSpec([None, x_train.shape[1]], tf.float32),
                 tf.TensorSpec([None], tf.int32)]

    @tf.function(input_signature=signature)
    def train_step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function(input_signature=signature)
    def eval_step(x, y):
        logits = model(x, training=False)
        losses = keras.losses.sparse_categorical_crossentropy(y, logits, from_logits=True)
        correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), y),
                          tf.float32)
        return tf.reduce_sum(losses), tf.reduce_sum(correct)

    def evaluate(x, y):
        """Mean loss and accuracy over all of `x`, `y`."""
        total_loss = total_correct = 0.
        for bx, by in iterate_batches(x, y, 256):
            loss_sum, correct_sum = eval_step(bx, by)
            total_loss += float(loss_sum)
            total_correct += float(correct_sum)
        return total_loss / len(x), total_correct / len(x)

    rng = np.random.RandomState(args.seed)
    with spt.TrainLoop(model.trainable_variables, max_epoch=args.epochs) as loop:
        loop.print_training_summary()
        for epoch in loop.iter_epochs():
            batches = iterate_batches(x_train, y_train, args.batch_size, rng=rng)
            for step, (x, y) in loop.iter_steps(batches):
                loss = train_step(x, y)
                loop.collect_metrics(loss=loss)  # an eager tensor: read when printed

            with loop.timeit('valid_time'):
                valid_loss, valid_acc = evaluate(x_valid, y_valid)
                loop.collect_metrics(valid_loss=valid_loss, valid_acc=valid_acc)
            loop.print_logs()

    _, test_acc = evaluate(x_test, y_test)
    print(f'test accuracy: {test_acc:.4f}')
    result_path = os.path.join(args.output_dir, 'result.json')
    with open(result_path, 'w') as f:
        json.dump({'example': 'digits_eager', 'test_accuracy': test_acc,
                   'epochs': args.epochs, 'seed': args.seed}, f, indent=2)
        f.write('\n')
    print(f'result written to {result_path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
