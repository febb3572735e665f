"""Train a small classifier on scikit-learn's digits, TF1 graph style.

The same model as ``digits_eager.py``, written the way TensorFlow 1 code is:
eager execution off, placeholders, variables from
``tf.compat.v1.get_variable``, an ``AdamOptimizer`` ``minimize`` op and
``session.run`` in the loop body.  ``tf.compat.v1.layers`` no longer exists in
TensorFlow 2.21, so the dense layers are built by hand (a matmul and a bias).

The ``TrainLoop`` does the same bookkeeping as in eager style: early stopping
on the validation loss (the best weights are put back at the end), a
checkpoint of every global variable of the graph after each epoch (Adam's
slots included; a run started again on the same ``--output-dir`` resumes),
and TensorBoard scalars plus the graph itself (``tensorboard --logdir runs``).

Run it from the repository root::

    python examples/digits_graph.py              # 20 epochs at most, a few seconds
    python examples/digits_graph.py --help       # all flags

The final test accuracy is printed and written to ``<output-dir>/result.json``.
"""

import os
import sys

# Keep TensorFlow's start-up chatter (CPU features, missing CUDA) off the
# console unless the user asked for it.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tensorflow as tf  # noqa: E402

import tfsnippet as spt  # noqa: E402
from _digits import (N_CLASSES, N_FEATURES, evaluate, finish, make_parser,  # noqa: E402
                     patience_of, start)

tf.compat.v1.disable_eager_execution()  # before any graph is built
v1 = tf.compat.v1

EXAMPLE = 'digits_graph'


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
        return dense(h, N_CLASSES, 'logits')


def main(argv=None):
    parser = make_parser(EXAMPLE, 'Train an MLP on the scikit-learn digits in TF1 graph style.')
    # flags parsed, seeds set (the default graph's too), run folder created, data split
    args, (x_train, y_train), (x_valid, y_valid), (x_test, y_test) = start(parser, argv)
    # shuffled anew every epoch, resumable mid-epoch
    train_flow = spt.DataFlow.arrays([x_train, y_train], batch_size=args.batch_size,
                                     shuffle=True, random_state=args.seed)

    # the graph: placeholders in; loss, accuracy and the train op out
    input_x = v1.placeholder(tf.float32, shape=[None, N_FEATURES], name='input_x')
    input_y = v1.placeholder(tf.int32, shape=[None], name='input_y')
    logits = build_model(input_x)
    loss = tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=input_y, logits=logits))
    accuracy = tf.reduce_mean(tf.cast(
        tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), input_y), tf.float32))
    params = spt.utils.get_variables_as_dict(
        'mlp', collection=v1.GraphKeys.TRAINABLE_VARIABLES)
    train_op = v1.train.AdamOptimizer(learning_rate=args.lr).minimize(
        loss, var_list=list(params.values()))

    def eval_batch(x, y):
        """The mean loss and the accuracy of one batch."""
        return v1.get_default_session().run(
            [loss, accuracy], feed_dict={input_x: x, input_y: y})

    with spt.utils.create_session().as_default() as session:
        spt.utils.ensure_variables_initialized()

        with spt.TrainLoop(params, max_epoch=args.epochs,
                           # keep the best `params` (by `valid_loss`), stop on a plateau
                           early_stopping=True, early_stopping_patience=patience_of(args),
                           # every global variable of the graph, after each epoch
                           checkpoint_dir=args.checkpoint_dir, checkpoint_epoch_freq=1,
                           checkpoint_max_to_keep=2,
                           # scalars, and the graph for TensorBoard's graph view
                           summary_dir=args.summary_dir, summary_graph=session.graph) as loop:
            loop.print_training_summary()
            for epoch in loop.iter_epochs():
                for step, (x, y) in loop.iter_steps(train_flow):
                    _, batch_loss = session.run([train_op, loss],
                                                feed_dict={input_x: x, input_y: y})
                    loop.collect_metrics(loss=batch_loss)

                with loop.timeit('valid_time'):
                    valid_loss, valid_acc = evaluate(eval_batch, x_valid, y_valid)
                    loop.collect_metrics(valid_loss=valid_loss, valid_acc=valid_acc)
                loop.print_logs()

        # leaving the loop has put back the weights of the best validation loss
        return finish(args, loop, eval_batch, x_test, y_test)


if __name__ == '__main__':
    sys.exit(main())
