"""Two tasks at once on scikit-learn's digits: the digit, and whether it is below 5.

A shared trunk (64 pixels -> 128 -> 64) with one head per task: ``digit``
(10 classes) and ``coarse`` (2 classes: ``digit < 5``).  Each task has its own
data flow (here the same training images, with its own labels, batch size
and shuffling), and ``spt.DataFlow.tasks`` draws them as one:

* ``--mode together``: one batch of each task at every step;
* ``--mode alternate`` (the default): the tasks in turn;
* ``--mode weighted``: a task drawn at each step with ``--weights``.

An epoch is ``'longest'``: it ends when both flows have ended once (the
coarse task's flow, of bigger batches, is restarted meanwhile).  Each task's
batch trains the trunk and its own head.

The loop collects ``digit/loss`` and ``coarse/loss`` at every step, and a
validation of both tasks after every epoch (and every ``--valid-steps``
steps, with an ``every=`` schedule) as ``digit/valid_loss``,
``coarse/valid_loss`` and their accuracies.  ``spt.MultiTaskMetrics``
keeps each task's best validation loss and collects their mean as
``valid_loss``, which early stopping, the learning-rate halving
(``spt.ReduceOnPlateau``) and the best checkpoint watch.

The same job is written in both TF styles (``--style eager``, a Keras 3 trunk
and ``tf.function`` steps; ``--style graph``, ``tf.compat.v1`` placeholders,
variables and ``session.run``), each with its own run folder
(``./runs/multitask_digits_eager/``, ``./runs/multitask_digits_graph/``): a
run started again resumes its style's checkpoints.  An ``--output-dir`` holding
the checkpoints of another model (the other style's) is refused in one line
saying how to start fresh.  Run it from the repository root::

    python examples/multitask_digits.py                       # eager, 20 epochs at most
    python examples/multitask_digits.py --style graph --mode together --valid-steps 20

The test accuracy of each task is printed and written to
``<output-dir>/result.json``.
"""

import argparse
import contextlib
import json
import os
import sys

# Keep TensorFlow's start-up chatter off the console unless the user asked for it.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfsnippet as spt  # noqa: E402
from _digits import (N_CLASSES, N_FEATURES, evaluate, make_parser, patience_of,  # noqa: E402
                     start)

EXAMPLE = 'multitask_digits'
TASKS = {'digit': N_CLASSES, 'coarse': 2}   # task -> number of classes
STYLES = ['eager', 'graph']


def coarse_labels(y):
    """The coarse task's labels: 1 for a digit below 5, else 0."""
    return (y < 5).astype(np.int32)


def parse(argv):
    parser = make_parser(EXAMPLE, 'Train one trunk with two heads on the digits.')
    parser.add_argument('--style', choices=STYLES, default='eager',
                        help='TF2 eager code or TF1 graph code')
    # each style its own run folder: the two models' checkpoints differ
    style_only = argparse.ArgumentParser(add_help=False)
    style_only.add_argument('--style', choices=STYLES, default='eager')
    style = style_only.parse_known_args(argv)[0].style
    parser.set_defaults(output_dir=os.path.join('.', 'runs', f'{EXAMPLE}_{style}'))
    parser.add_argument('--mode', choices=['together', 'alternate', 'weighted'],
                        default='alternate', help='how the tasks are drawn')
    parser.add_argument('--weights', default='2,1',
                        help='--mode weighted: the weights of digit,coarse')
    parser.add_argument('--valid-steps', type=int, default=0,
                        help='also validate every this many steps (0: after each epoch only)')
    return parser


# ------------------------------------------------------------------ eager style
def eager_model(lr):
    """``(train_steps, eval_steps, variables, lr variable)``, a Keras trunk and heads."""
    import keras
    trunk = keras.Sequential([keras.Input((N_FEATURES,)),
                              keras.layers.Dense(128, activation='relu', name='hidden1'),
                              keras.layers.Dense(64, activation='relu', name='hidden2')],
                             name='trunk')
    heads = {t: keras.Sequential([keras.Input((64,)), keras.layers.Dense(n, name='logits')],
                                 name=t) for t, n in TASKS.items()}
    optimizer = keras.optimizers.Adam(lr)
    signature = [tf.TensorSpec([None, N_FEATURES], tf.float32), tf.TensorSpec([None], tf.int32)]

    def train_step_of(head):
        variables = trunk.trainable_variables + head.trainable_variables

        @tf.function(input_signature=signature)
        def train_step(x, y):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=y, logits=head(trunk(x, training=True), training=True)))
            optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
            return loss
        return train_step

    def eval_step_of(head):
        @tf.function(input_signature=signature)
        def eval_step(x, y):
            logits = head(trunk(x))
            loss = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
            hits = tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), y)
            return tf.reduce_mean(loss), tf.reduce_mean(tf.cast(hits, tf.float32))
        return eval_step

    optimizer.build(trunk.trainable_variables +
                    [v for h in heads.values() for v in h.trainable_variables])
    variables = trunk.trainable_variables + [v for h in heads.values()
                                             for v in h.trainable_variables]
    train = {t: train_step_of(h) for t, h in heads.items()}
    evals = {t: eval_step_of(h) for t, h in heads.items()}
    return train, evals, variables, optimizer.learning_rate, {'optimizer': optimizer}


# ------------------------------------------------------------------ graph style
def graph_model(lr):
    """The same in TF1 style: placeholders, ``get_variable`` layers, ``session.run``."""
    v1 = tf.compat.v1

    def dense(x, units, name, activation=None):
        with v1.variable_scope(name):
            kernel = v1.get_variable('kernel', [int(x.shape[-1]), units],
                                     initializer=v1.glorot_uniform_initializer())
            bias = v1.get_variable('bias', [units], initializer=v1.zeros_initializer())
            out = tf.matmul(x, kernel) + bias
            return activation(out) if activation is not None else out

    x_in = v1.placeholder(tf.float32, [None, N_FEATURES], name='x')
    y_in = v1.placeholder(tf.int32, [None], name='y')
    with v1.variable_scope('trunk'):
        h = dense(dense(x_in, 128, 'hidden1', tf.nn.relu), 64, 'hidden2', tf.nn.relu)
    lr_var = v1.get_variable('lr', initializer=float(lr), trainable=False)
    optimizer = v1.train.AdamOptimizer(lr_var)
    train, evals = {}, {}
    for task, n in TASKS.items():
        logits = dense(h, n, f'{task}_head')
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y_in, logits=logits))
        acc = tf.reduce_mean(tf.cast(
            tf.equal(tf.argmax(logits, axis=-1, output_type=tf.int32), y_in), tf.float32))
        train_op = optimizer.minimize(loss)

        def train_step(x, y, ops=(train_op, loss)):
            return v1.get_default_session().run(ops, feed_dict={x_in: x, y_in: y})[1]

        def eval_step(x, y, ops=(loss, acc)):
            return v1.get_default_session().run(ops, feed_dict={x_in: x, y_in: y})

        train[task], evals[task] = train_step, eval_step
    variables = v1.trainable_variables()
    return train, evals, variables, lr_var, {}


# ------------------------------------------------------------------ the job
def main(argv=None):
    if parse(argv).parse_args(argv).style == 'graph':
        tf.compat.v1.disable_eager_execution()   # before any graph is built
    # flags parsed, seeds set, run folder created, data split
    args, (x_train, y_train), (x_valid, y_valid), (x_test, y_test) = start(parse(argv), argv)
    labels = {'digit': lambda y: y, 'coarse': coarse_labels}
    # each task its own flow: its labels, its batch size, its shuffling
    flows = {'digit': spt.DataFlow.arrays([x_train, y_train], args.batch_size, shuffle=True,
                                          random_state=args.seed),
             'coarse': spt.DataFlow.arrays([x_train, coarse_labels(y_train)],
                                           2 * args.batch_size, shuffle=True,
                                           random_state=args.seed + 1)}
    weights = [float(w) for w in args.weights.split(',')] if args.mode == 'weighted' else None
    flow = spt.DataFlow.tasks(flows, mode=args.mode, weights=weights, epoch='longest',
                              random_state=args.seed)

    build = eager_model if args.style == 'eager' else graph_model
    train, evals, variables, lr, save_objects = build(args.lr)

    def validate(loop):
        """Both tasks on the validation set: their losses and accuracies."""
        with loop.timeit('valid_time'):
            metrics = {}
            for task, eval_step in evals.items():
                loss, acc = evaluate(eval_step, x_valid, labels[task](y_valid))
                metrics[f'{task}/valid_loss'], metrics[f'{task}/valid_acc'] = loss, acc
            loop.collect_metrics(metrics)   # -> valid_loss, the mean of the two

    with contextlib.ExitStack() as stack:
        if args.style == 'graph':
            stack.enter_context(spt.utils.create_session().as_default())
            spt.utils.ensure_variables_initialized()
        tasks = spt.MultiTaskMetrics(flow)     # combines <task>/valid_loss into valid_loss
        loop = spt.TrainLoop(variables, max_epoch=args.epochs, early_stopping=True,
                             early_stopping_patience=patience_of(args),
                             checkpoint_dir=args.checkpoint_dir, checkpoint_epoch_freq=1,
                             checkpoint_max_to_keep=2, checkpoint_save_objects=save_objects,
                             summary_dir=args.summary_dir)
        loop.add_component(tasks)
        loop.add_component(spt.ReduceOnPlateau(lr, factor=.5, patience=2))
        try:
            with loop:
                loop.print_training_summary()
                if args.valid_steps:   # validate every N steps as well
                    loop.events.on(spt.EventKeys.AFTER_STEP, validate,
                                   every=spt.utils.Every(steps=args.valid_steps))
                for _ in loop.iter_epochs():
                    for _, batch in loop.iter_steps(flow):
                        for task, (x, y) in batch.items():
                            loop.collect_metrics({f'{task}/loss': train[task](x, y)})
                    validate(loop)
                    loop.print_logs()
        except spt.CheckpointMismatchError:   # raised on entering, before any step
            print(f'{EXAMPLE}.py: error: {args.output_dir} holds the checkpoints of another '
                  f'model, not of this --style {args.style} one: to start fresh, pass another '
                  f'--output-dir or delete {args.checkpoint_dir}', file=sys.stderr)
            return 2
        # the weights of the best combined valid_loss are back: test each task
        result = {'example': EXAMPLE, 'style': args.style, 'mode': args.mode,
                  'epochs_run': loop.epoch, 'steps_run': loop.step,
                  'best_valid_loss': loop.best_valid_metric, 'best_task_valid_loss': tasks.best}
        for task, eval_step in evals.items():
            _, acc = evaluate(eval_step, x_test, labels[task](y_test))
            print(f'{task} test accuracy: {acc:.4f}')
            result[f'{task}_test_accuracy'] = acc
    path = os.path.join(args.output_dir, 'result.json')
    with open(path, 'w') as f:
        json.dump(result, f, indent=2)
        f.write('\n')
    print(f'result written to {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
