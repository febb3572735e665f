"""Train the digits MLP on one device, several devices, or several processes: one script.

``--strategy`` picks where the training runs; the training code below is
the same for all four:

* ``none``: one device, TensorFlow's default strategy;
* ``mirrored``: ``MirroredStrategy``, one process with ``--replicas``
  devices (the GPUs; without any, the CPU split into that many logical
  devices);
* ``multiworker``: ``MultiWorkerMirroredStrategy``, one process per worker,
  each with its ``TF_CONFIG``;
* ``ps``: ``ParameterServerStrategy``: the chief (the coordinator) runs the
  loop and schedules the steps on the workers, the variables live on the
  parameter servers.

The multi-process ones run through tfsnippet's local launcher, which starts
the processes on loopback ports with their ``TF_CONFIG`` (on a real cluster,
the cluster manager sets ``TF_CONFIG`` instead).  From the repository root::

    python examples/digits_distributed.py --strategy none
    python examples/digits_distributed.py --strategy mirrored --replicas 2
    python -m tfsnippet.launch --workers 2 examples/digits_distributed.py --strategy multiworker
    python -m tfsnippet.launch --workers 2 --ps 1 examples/digits_distributed.py --strategy ps

``--batch-size`` is the global batch size: with 2 workers of 2 replicas
each, every replica trains on a quarter of it, and the loss is averaged over
the whole global batch, so the weights follow the same path as in one process
with that batch size.  Only the chief prints the log lines and writes the run
folder (checkpoints, TensorBoard, ``result.json`` and ``weights.npz``); a run
started again on the same ``--output-dir`` resumes on every worker.  With
``--max-restarts 1`` the launcher restarts all processes when one dies, and
they resume from the latest checkpoint; ``--kill-worker-at-step K`` shows it
(worker 1 kills itself with ``SIGKILL`` after step K, in the first run only)::

    python -m tfsnippet.launch --workers 2 --max-restarts 1 examples/digits_distributed.py \\
        --strategy multiworker --checkpoint-steps 20 --kill-worker-at-step 50

On a cluster whose workers share no disk, ``--checkpoint-dir`` puts the
checkpoints on object storage (``s3://bucket/run1``, ``pip install
"tfsnippet[s3]"``; ``gs://`` with ``tfsnippet[gcs]``), where a restarted
job finds them.
"""

import os
import signal
import sys

# Keep TensorFlow's start-up chatter (CPU features, missing CUDA) off the
# console unless the user asked for it.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfsnippet as spt  # noqa: E402
from _digits import (evaluate, finish, keras_eval_step, keras_mlp, make_parser,  # noqa: E402
                     patience_of, positive_int, start)

EXAMPLE = 'digits_distributed'
STRATEGIES = ('none', 'mirrored', 'multiworker', 'ps')


# ------------------------------------------------- where the training runs
def make_strategy(args):
    """The strategy of ``--strategy``, and the coordinator of ``ps`` (else None).

    Under ``ps`` a worker or parameter-server task does not train: it serves
    the coordinator until the launcher (or the cluster manager) stops it, so
    this function never returns there.
    """
    if args.strategy == 'none':
        return tf.distribute.get_strategy(), None   # the default strategy: one device
    if args.strategy == 'mirrored':
        gpus = tf.config.list_physical_devices('GPU')   # (the logical ones would be fixed)
        devices = [f'/gpu:{i}' for i in range(min(len(gpus), args.replicas))]
        if not devices:   # no GPU: split the CPU into --replicas logical devices
            cpu = tf.config.list_physical_devices('CPU')[0]
            tf.config.set_logical_device_configuration(
                cpu, [tf.config.LogicalDeviceConfiguration()] * args.replicas)
            devices = [f'/cpu:{i}' for i in range(args.replicas)]
        return tf.distribute.MirroredStrategy(devices), None
    cluster = spt.distributed.cluster_info()   # TF_CONFIG (or Kubernetes, SLURM)
    if args.strategy == 'multiworker':
        # TensorFlow reads TF_CONFIG itself; under Kubernetes or SLURM, hand it the resolver
        resolver = (cluster.cluster_resolver() if cluster.source in ('kubernetes', 'slurm')
                    else None)
        return tf.distribute.MultiWorkerMirroredStrategy(cluster_resolver=resolver), None
    if cluster.task_type in ('worker', 'ps'):   # --strategy ps: serve the coordinator
        server = tf.distribute.Server(cluster.cluster_spec(), job_name=cluster.task_type,
                                      task_index=cluster.task_index, protocol='grpc',
                                      start=True)
        server.join()   # never returns
    strategy = tf.distribute.experimental.ParameterServerStrategy(cluster.cluster_resolver())
    return strategy, tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)


def main(argv=None):
    parser = make_parser(EXAMPLE, 'Train an MLP on the scikit-learn digits on one device, '
                                  'several devices or several processes.')
    parser.add_argument('--strategy', choices=STRATEGIES, default='none',
                        help='where to train: see the module documentation')
    parser.add_argument('--replicas', type=positive_int, default=2,
                        help='--strategy mirrored: number of devices (logical CPUs on a '
                             'machine without GPU)')
    parser.add_argument('--checkpoint-steps', type=positive_int, default=None,
                        help='also save a checkpoint after every this many steps')
    parser.add_argument('--checkpoint-dir', dest='checkpoint_url', default=None, metavar='URL',
                        help='the checkpoints there instead of the run folder (a path, '
                             'or an object-store URL such as s3://bucket/run1)')
    parser.add_argument('--kill-worker-at-step', type=positive_int, default=None, metavar='K',
                        help='worker 1 kills itself with SIGKILL after step K, in the '
                             "launcher's first run only (shows the restart)")
    args = parser.parse_args(argv)
    # the strategy first: its devices must be set up before TensorFlow runs anything
    strategy, coordinator = make_strategy(args)
    # flags, seeds, run folder, data split 60/20/20; bitwise the same numbers every run
    # (only the chief creates the run folder)
    args, (x_train, y_train), (x_valid, y_valid), (x_test, y_test) = start(
        parser, argv, create_output_dir=spt.distributed.is_chief())
    if args.checkpoint_url is not None:
        args.checkpoint_dir = args.checkpoint_url
    tf.config.experimental.enable_op_determinism()
    global_batch = args.batch_size

    # ---- the training code, the same for every strategy ----
    with strategy.scope():   # the model and the optimizer are the strategy's variables
        model = keras_mlp()
        optimizer = keras.optimizers.Adam(learning_rate=args.lr)
        optimizer.build(model.trainable_variables)   # its slots too, before strategy.run

    def replica_step(x, y):
        """One replica's part of a step: its slice of the global batch."""
        with tf.GradientTape() as tape:
            per_example = keras.losses.sparse_categorical_crossentropy(
                y, model(x, training=True), from_logits=True)
            # summed over the replicas' gradients: the mean over the global batch
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
        variables = model.trainable_variables
        optimizer.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return tf.reduce_mean(per_example)   # this replica's mean loss, for the logs

    @tf.function
    def train_step(x, y):
        return strategy.run(replica_step, args=(x, y))

    eval_step = keras_eval_step(model)   # the whole validation set, on every worker
    # global batches, the same order on every worker; under a strategy the loop
    # gives each worker its slice and each replica its part; the last, smaller
    # batch of an epoch is dropped (it could not be split evenly)
    train_flow = spt.DataFlow.arrays([x_train, y_train], global_batch, shuffle=True,
                                     skip_incomplete=True, random_state=args.seed)
    crash_at = args.kill_worker_at_step if _first_run_of_worker_1() else None

    with spt.TrainLoop(model.trainable_variables,
                       strategy=strategy,   # None would take the strategy in scope
                       coordinator=coordinator,   # only for ps
                       max_epoch=args.epochs,
                       early_stopping=True,
                       early_stopping_patience=patience_of(args),
                       checkpoint_dir=args.checkpoint_dir,   # written by the chief only
                       checkpoint_epoch_freq=1,
                       checkpoint_step_freq=args.checkpoint_steps,
                       checkpoint_max_to_keep=3,
                       checkpoint_save_objects={'model': model, 'optimizer': optimizer},
                       summary_dir=args.summary_dir) as loop:
        loop.print_training_summary()
        for epoch in loop.iter_epochs():
            for step, (x, y) in loop.iter_steps(train_flow):
                if coordinator is not None:   # ps: the step runs on a free worker
                    loss = coordinator.schedule(train_step, args=(x, y))
                else:
                    loss = train_step(x, y)
                loop.collect_metrics(loss=loss)   # per replica: averaged when printed
                if step == crash_at:
                    os.kill(os.getpid(), signal.SIGKILL)

            # under ps the step loop ends once the scheduled steps are done
            with loop.timeit('valid_time'):
                valid_loss, valid_acc = evaluate(eval_step, x_valid, y_valid)
                loop.collect_metrics(valid_loss=valid_loss, valid_acc=valid_acc)
            loop.print_logs()

    # the best weights are back; the chief evaluates them and writes the results
    if not loop.is_chief:
        return 0
    np.savez(os.path.join(args.output_dir, 'weights.npz'),
             *[np.asarray(w) for w in model.get_weights()])
    return finish(args, loop, eval_step, x_test, y_test,
                  extra={'strategy': args.strategy, 'replicas': strategy.num_replicas_in_sync})


def _first_run_of_worker_1():
    """Whether this is worker 1 (the chief's peer) in the launcher's first run."""
    return (os.environ.get('TFSNIPPET_LAUNCH_RESTART') == '0'
            and spt.distributed.task_type() == 'worker'
            and spt.distributed.task_index() == 1)


if __name__ == '__main__':
    sys.exit(main())
