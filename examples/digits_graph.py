"""Train a small classifier on scikit-learn's digits, TF1 graph style.

The same model as ``digits_eager.py``, written the way TensorFlow 1 code is:
eager execution off, placeholders, variables from
``tf.compat.v1.get_variable``, an ``AdamOptimizer`` ``minimize`` op and
``session.run`` in the loop body.  ``tf.compat.v1.layers`` no longer exists in
TensorFlow 2.21, so the dense layers are built by hand (a matmul and a bias).

Run it from the repository root::

    python examples/digits_graph.py              # 20 epochs, a few seconds
    python examples/digits_graph.py --help       # all flags

The final test accuracy is printed and written to ``<output-dir>/result.json``.
"""

import argparse
import json
import os
import sys

# Keep TensorFlow's start-up chatter (CPU features, missing CUDA) off the
# console unless the user asked for it.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from sklearn.datasets import load_digits  # noqa: E402

import tfsnippet as spt  # noqa: E402

tf.compat.v1.disable_eager_execution()  # before any graph is built
v1 = tf.compat.v1


def parse_args(argv=None):
    parser = argparse.ArgumentParser(
        description='Train an MLP on the scikit-learn digits in TF1 graph style.')
    parser.add_argument('--epochs', type=int, default=20, help='number of epochs (default: 20)')
    parser.add_argument('--batch-size', type=int, default=32,
                        help='training batch size (default: 32)')
    parser.add_argument('--lr', type=float, default=1e-3,
                        help='learning rate of Adam (default: 0.001)')
    parser.add_argument('--seed', type=int, default=1234,
                        help='seed of the data split, the shuffling and the weights')
    parser.add_argument('--output-dir', default='./runs/digits_graph/',
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


def dense(x, units, name, activation=None):
    """A fully-connected layer: ``activation(x @ kernel + bias)``."""
    with v1.variable_scope(name):
        kernel = v1.get_variable('kernel', shape=[int(x.shape[-1]), units], dtype=tf.float32,
                                 initializer=v1.glorot_uniform_initializer())
        bias = v1.get_variable('bias', shape=[units], dtype=tf.float32,
                               initializer=v1.zeros_initializer())
        out = tf.matmul(x, kernel) + bias
        return activation(out) if activation is not None else out


def build_model(x):
    """The logits of the MLP for the input batch `x`."""
    with v1.variable_scope('mlp'):
        h = dense(x, 128, 'hidden1', activation=tf.nn.relu)
        h = dense(h, 64, 'hidden2', activation=tf.nn.relu)
        return dense(h, 10, 'logits')


def main(argv=None):
    args = parse_args(argv)
    np.random.seed(args.seed)
    v1.set_random_seed(args.seed)
    os.makedirs(args.output_dir, exist_ok=True)
    (x_train, y_train), (x_valid, y_valid), (x_test, y_test) = load_data(args.seed)

    # the graph: placeholders in, loss / train op / evaluation sums out
    input_x = v1.placeholder(tf.float32, shape=[None, x_train.shape[1]], name='input_x')
    input_y = v1.placeholder(tf.int32, shape=[None], name='input_y')
    logits = build_model(input_x)
    losses = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=input_y, logits=logits)
    loss = tf.reduce_mean(losses)
    correct = tf.cast(tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), input_y),
                      tf.float32)
    loss_sum, correct_sum = tf.reduce_sum(losses), tf.reduce_sum(correct)
    params = spt.utils.get_variables_as_dict(
        'mlp', collection=v1.GraphKeys.TRAINABLE_VARIABLES)
    train_op = v1.train.AdamOptimizer(learning_rate=args.lr).minimize(
        loss, var_list=list(params.values()))

    def evaluate(session, x, y):
        """Mean loss and accuracy over all of `x`, `y`."""
        total_loss = total_correct = 0.
        for bx, by in iterate_batches(x, y, 256):
            batch_loss, batch_correct = session.run(
                [loss_sum, correct_sum], feed_dict={input_x: bx, input_y: by})
            total_loss += float(batch_loss)
            total_correct += float(batch_correct)
        return total_loss / len(x), total_correct / len(x)

    rng = np.random.RandomState(args.seed)
    with spt.utils.create_session().as_default() as session:
        spt.utils.ensure_variables_initialized()

        with spt.TrainLoop(params, max_epoch=args.epochs) as loop:
            loop.print_training_summary()
            for epoch in loop.iter_epochs():
                batches = iterate_batches(x_train, y_train, args.batch_size, rng=rng)
                for step, (x, y) in loop.iter_steps(batches):
                    _, batch_loss = session.run([train_op, loss],
                                                feed_dict={input_x: x, input_y: y})
                    loop.collect_metrics(loss=batch_loss)

                with loop.timeit('valid_time'):
                    valid_loss, valid_acc = evaluate(session, x_valid, y_valid)
                    loop.collect_metrics(valid_loss=valid_loss, valid_acc=valid_acc)
                loop.print_logs()

        _, test_acc = evaluate(session, x_test, y_test)

    print(f'test accuracy: {test_acc:.4f}')
    result_path = os.path.join(args.output_dir, 'result.json')
    with open(result_path, 'w') as f:
        json.dump({'example': 'digits_graph', 'test_accuracy': test_acc,
                   'epochs': args.epochs, 'seed': args.seed}, f, indent=2)
        f.write('\n')
    print(f'result written to {result_path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
