"""Interrupt a training run and resume it where it stopped, with the same result.

The model and the data are those of ``digits_eager.py``.  What this example
adds:

* a checkpoint every ``--checkpoint-steps`` steps (``checkpoint_step_freq``),
  so that also a checkpoint taken in the middle of an epoch can be resumed:
  it holds the model, Adam's state, the loop's counters, its early-stopping
  snapshot and the position of the shuffled ``DataFlow`` in its epoch;
* a run stopped by Ctrl+C (or by ``--interrupt-at-step K``, which raises
  ``KeyboardInterrupt`` inside the loop after step K, as Ctrl+C would) exits
  with status 130; started again on the same ``--output-dir``, the loop says
  ``Resume training: ...`` and goes on from the last checkpoint;
* seeds everywhere and ``tf.config.experimental.enable_op_determinism()``, so
  that an interrupted and resumed run ends with exactly the result (the same
  ``result.json``) of a run that was never interrupted.

Run it from the repository root::

    python examples/digits_resume.py --interrupt-at-step 300    # stops after step 300
    python examples/digits_resume.py                            # resumes at step 250

The second command must not repeat ``--interrupt-at-step 300``: the resumed
run passes step 300 again and would stop there again.
"""

import os
import sys

# Keep TensorFlow's start-up chatter (CPU features, missing CUDA) off the
# console unless the user asked for it.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import keras  # noqa: E402
import tensorflow as tf  # noqa: E402

import tfsnippet as spt  # noqa: E402
from _digits import (evaluate, finish, keras_eval_step, keras_train_step,  # noqa: E402
                     keras_mlp, loop_options, make_parser, positive_int, start)

EXAMPLE = 'digits_resume'


def main(argv=None):
    parser = make_parser(EXAMPLE, 'Train an MLP on the scikit-learn digits with checkpoints '
                                  'every few steps; a run started again resumes.')
    parser.add_argument('--checkpoint-steps', type=positive_int, default=50,
                        help='save a checkpoint after every this many steps')
    parser.add_argument('--interrupt-at-step', type=positive_int, default=None, metavar='K',
                        help='raise KeyboardInterrupt after step K, as if Ctrl+C was pressed')
    # the same numbers in every run: the seeds (`start` passes --seed to
    # keras.utils.set_random_seed) and TensorFlow ops that give bitwise the
    # same results each time
    args, (x_train, y_train), (x_valid, y_valid), (x_test, y_test) = start(parser, argv)
    tf.config.experimental.enable_op_determinism()

    model = keras_mlp()
    optimizer = keras.optimizers.Adam(learning_rate=args.lr)
    optimizer.build(model.trainable_variables)  # its slots must exist to be restored
    train_step = keras_train_step(model, optimizer)

    eval_step = keras_eval_step(model)

    # a seeded shuffle; its position inside the epoch is saved with each checkpoint
    train_flow = spt.DataFlow.arrays([x_train, y_train], args.batch_size, shuffle=True,
                                     random_state=args.seed)
    # max_epoch, early stopping, checkpoint_dir and summary_dir as in digits_eager.py
    loop = spt.TrainLoop(model.trainable_variables,
                         checkpoint_step_freq=args.checkpoint_steps,
                         checkpoint_max_to_keep=3,
                         checkpoint_save_objects={'model': model, 'optimizer': optimizer},
                         **loop_options(args))
    try:
        with loop:  # resumes from the latest checkpoint in checkpoint_dir, if any
            loop.print_training_summary()
            for epoch in loop.iter_epochs():
                # after a resume, the first epoch continues where the checkpoint was taken
                for step, (x, y) in loop.iter_steps(train_flow):
                    loop.collect_metrics(loss=train_step(x, y))
                    if step == args.interrupt_at_step:
                        raise KeyboardInterrupt(f'--interrupt-at-step {step}')

                with loop.timeit('valid_time'):
                    loss, acc = evaluate(eval_step, x_valid, y_valid)
                    loop.collect_metrics(valid_loss=loss, valid_acc=acc)
                loop.print_logs()
    except KeyboardInterrupt:
        # The loop has been left without saving: the last checkpoint is the
        # one of the latest multiple of --checkpoint-steps.
        print(f'Interrupted at epoch {loop.epoch}, step {loop.step}.  Run again with '
              f'--output-dir {args.output_dir} (and no --interrupt-at-step) to resume from '
              f'the last checkpoint (one every {args.checkpoint_steps} steps).')
        return 130  # the exit status of a process stopped by Ctrl+C

    return finish(args, loop, eval_step, x_test, y_test)


if __name__ == '__main__':
    sys.exit(main())
