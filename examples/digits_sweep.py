"""A learning-rate sweep: typed config, three runs, one preempted and resumed, then the query.

The model and the data are those of ``digits_eager.py``.  What this example
adds:

* a typed config, ``SweepConfig``, with a nested ``optimizer`` section; each
  run reads it from the command line (``--optimizer.lr 0.003``,
  ``--max_epoch 10``, ``--help`` lists every field) through ``spt.Experiment``,
  which makes the run directory ``<root>/<run>/`` (config, command line,
  versions, console copy, checkpoints, ``result.json``) and records the run,
  its epochs, best validation loss and test accuracy in the results store
  ``<root>/results.sqlite``;
* the sweep: started without ``run``, the script starts itself once per
  learning rate (``--lrs``), all at once, each as
  ``digits_sweep.py run --root ROOT --name lr-0.001 --optimizer.lr 0.001 ...``;
* preemption: the middle run is sent ``SIGTERM`` after its first epoch (as
  a cluster scheduler would), saves a checkpoint and exits with status 143,
  marked ``preempted``; the sweep then resumes it with ``--resume lr-0.001``
  and it finishes from where it stopped;
* the results: ``spt.results.query(root, where=..., order_by=...)`` lists
  the runs, best first; ``python -m tfsnippet.results ROOT compare ...``
  prints the config fields that differ and the metrics side by side; with
  matplotlib installed, ``<root>/valid_loss.png`` plots the validation
  curves;
* with ``--mlflow URI`` (``pip install "tfsnippet[mlflow]"``) every run is
  also mirrored to the MLflow experiment ``digits_sweep``, and the sweep
  ends with ``mlflow.search_runs``.

Run it from the repository root::

    python examples/digits_sweep.py --root runs/sweep
    python examples/digits_sweep.py --root runs/sweep --mlflow sqlite:///runs/sweep/mlflow.db
    python -m tfsnippet.results runs/sweep list             # later, from a shell
    python examples/digits_sweep.py run --root runs/sweep --name lr-0.01 --optimizer.lr 0.01

The last line adds one more run to the same root by hand.
"""

import argparse
import os
import signal
import subprocess
import sys

# Keep TensorFlow's start-up chatter (CPU features, missing CUDA) off the
# console unless the user asked for it.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import tfsnippet as spt  # noqa: E402  (does not import TensorFlow: the sweep stays light)
from tfsnippet.utils import PREEMPTED_EXIT_CODE  # noqa: E402  (128 + SIGTERM: a preempted run)

EXAMPLE = 'digits_sweep'
MLFLOW_EXPERIMENT = 'digits_sweep'


class SweepConfig(spt.Config):
    """Train an MLP on the scikit-learn digits: one run of the sweep."""

    class optimizer(spt.Config):
        """Adam's settings."""

        lr = spt.ConfigField(float, 1e-3, 'the learning rate')
        beta_1 = spt.ConfigField(float, 0.9, 'the decay of the first moment estimates')

    max_epoch = spt.ConfigField(int, 10, 'the most epochs to train')
    batch_size = spt.ConfigField(int, 32, 'training batch size')
    patience = spt.ConfigField(int, 5, 'stop after this many epochs without a better '
                                       'valid_loss', nullable=True)
    seed = spt.ConfigField(int, 1234, 'seed of the data split, the shuffling and the weights')


def run_name(lr):
    return f'lr-{lr:g}'


# ------------------------------------------------------------------ one run
def train(argv):
    """``digits_sweep.py run``: train one run; the config options go to the Experiment."""
    parser = argparse.ArgumentParser(prog=f'{EXAMPLE}.py run', add_help=False)
    parser.add_argument('--root', default=os.path.join('runs', EXAMPLE))
    parser.add_argument('--name', default=None)
    parser.add_argument('--mlflow', default=None, metavar='URI')
    parser.add_argument('--preempt-after-epoch', type=int, default=None, metavar='K')
    args, config_args = parser.parse_known_args(argv)

    import keras
    from _digits import evaluate, keras_eval_step, keras_mlp, keras_train_step, load_data

    mlflow = None
    if args.mlflow:
        mlflow = spt.MlflowMirror(args.mlflow, MLFLOW_EXPERIMENT)
    # parses --optimizer.lr etc. (and --help, --resume RUN); on resume, the saved config
    with spt.Experiment(SweepConfig, args.root, name=args.name, args=config_args,
                        mlflow=mlflow) as exp:
        config = exp.config
        keras.utils.set_random_seed(config.seed)
        (x_train, y_train), (x_valid, y_valid), (x_test, y_test) = load_data(config.seed)
        model = keras_mlp()
        optimizer = keras.optimizers.Adam(learning_rate=config.optimizer.lr,
                                          beta_1=config.optimizer.beta_1)
        optimizer.build(model.trainable_variables)   # its slots must exist to be restored
        train_step = keras_train_step(model, optimizer)

        eval_step = keras_eval_step(model)
        train_flow = spt.DataFlow.arrays([x_train, y_train], config.batch_size, shuffle=True,
                                         random_state=config.seed)
        # inside the Experiment the loop checkpoints into the run directory (so
        # that the run resumes) and its epochs go to the results store
        with spt.TrainLoop(model.trainable_variables, max_epoch=config.max_epoch,
                           early_stopping=True, early_stopping_patience=config.patience,
                           checkpoint_save_objects={'model': model,
                                                    'optimizer': optimizer}) as loop:
            for epoch in loop.iter_epochs():
                for _, (x, y) in loop.iter_steps(train_flow):
                    loop.collect_metrics(loss=train_step(x, y))
                with loop.timeit('valid_time'):
                    valid_loss, valid_acc = evaluate(eval_step, x_valid, y_valid)
                    loop.collect_metrics(valid_loss=valid_loss, valid_acc=valid_acc)
                loop.print_logs()
                if epoch == args.preempt_after_epoch:
                    # what a scheduler does; the loop saves at the end of this
                    # epoch and exits with status 143
                    os.kill(os.getpid(), signal.SIGTERM)

        _, test_acc = evaluate(eval_step, x_test, y_test)   # the best weights, restored
        print(f'test accuracy: {test_acc:.4f}')
        exp.results.update(test_acc=test_acc)
    return 0


# ----------------------------------------------------------------- the sweep
def sweep(argv):
    parser = argparse.ArgumentParser(
        description='Train one run per learning rate (all at once), preempt the middle one '
                    'after its first epoch and resume it, then compare the runs.',
        epilog=f'"{EXAMPLE}.py run --help" lists the config options of one run.',
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument('--root', default=os.path.join('runs', EXAMPLE),
                        help='the directory of the runs and of their results store')
    parser.add_argument('--lrs', default='0.0003,0.001,0.003',
                        help='the learning rates, comma-separated: one run each')
    parser.add_argument('--epochs', type=int, default=10, help='max_epoch of every run')
    parser.add_argument('--mlflow', default=None, metavar='URI',
                        help='also mirror the runs to this MLflow tracking URI')
    args = parser.parse_args(argv)
    lrs = [float(text) for text in args.lrs.split(',')]
    names = [run_name(lr) for lr in lrs]
    preempted = names[len(names) // 2]
    script = os.path.abspath(__file__)

    def command(*extra):
        cmd = [sys.executable, script, 'run', '--root', args.root, *extra]
        return cmd + (['--mlflow', args.mlflow] if args.mlflow else [])

    def wait(name, proc, expected):
        out, _ = proc.communicate()
        print(f'{name}: exit status {proc.returncode}')
        if proc.returncode != expected:
            print(out[-3000:])
            raise SystemExit(f'{name} exited with status {proc.returncode}, not {expected}')

    # 1. every learning rate at once; the middle one is preempted after epoch 1
    procs = {}
    for name, lr in zip(names, lrs):
        extra = ['--preempt-after-epoch', '1'] if name == preempted else []
        procs[name] = subprocess.Popen(
            command('--name', name, '--optimizer.lr', repr(lr), '--max_epoch', str(args.epochs),
                    *extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for name, proc in procs.items():
        wait(name, proc, PREEMPTED_EXIT_CODE if name == preempted else 0)
    row = spt.results.query(args.root, where=f"run_id = '{preempted}'")[0]
    print(f'{preempted} is {row.status} at epoch {row.epoch}; resuming it')

    # 2. resume it: its saved config, its checkpoint
    proc = subprocess.Popen(command('--resume', preempted), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    wait(f'{preempted} (resumed)', proc, 0)

    # 3. the query: this sweep's completed runs, best validation loss first
    rows = spt.results.query(args.root, where="status = 'completed' and test_acc > 0",
                             order_by='best.valid_loss')
    rows = [r for r in rows if r.run_id in names]
    print(f'\nspt.results.query({args.root!r}, where="status = \'completed\' and '
          f'test_acc > 0", order_by="best.valid_loss"):')
    from tfsnippet.results.cli import format_table, main as results_main
    for line in format_table(
            ['run', 'optimizer.lr', 'epochs', 'best valid_loss', 'test_acc'],
            [[r.run_id, r.config['optimizer']['lr'], r.epoch, f"{r.best['valid_loss']:.4f}",
              f"{r.metrics['test_acc']:.4f}"] for r in rows]):
        print(f'  {line}')
    print(f'best: {rows[0].run_id}')

    # 4. the comparison table, as `python -m tfsnippet.results ROOT compare ...` prints it
    print(f'\npython -m tfsnippet.results {args.root} compare {" ".join(names)}')
    results_main([args.root, 'compare', *names])

    # 5. the validation curves
    plot_curves(args.root, names)
    if args.mlflow:
        show_mlflow(args.mlflow)
    return 0


def plot_curves(root, names):
    """``<root>/valid_loss.png``: valid_loss by epoch of each run (needs matplotlib)."""
    try:
        import matplotlib
    except ImportError:
        print('\n(matplotlib is not installed: no plot)')
        return
    matplotlib.use('Agg')   # files only, no window
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, ax = plt.subplots(figsize=(6, 4))
    with spt.ResultsStore(root, create=False) as store:
        for name in names:
            epochs = store.epochs(name)
            ax.plot([e.epoch for e in epochs], [e.metrics['valid_loss']['mean'] for e in epochs],
                    marker='o', label=name)
    ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    ax.set_xlabel('epoch')
    ax.set_ylabel('valid_loss')
    ax.set_title('digits MLP: validation loss by learning rate')
    ax.legend()
    path = os.path.join(root, 'valid_loss.png')
    fig.savefig(path, dpi=100, bbox_inches='tight')
    plt.close(fig)
    print(f'\nvalidation curves plotted in {path}')


def show_mlflow(uri):
    """The same runs, from MLflow."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    runs = mlflow.search_runs(experiment_names=[MLFLOW_EXPERIMENT],
                              filter_string="attributes.status = 'FINISHED'",
                              order_by=['metrics.best_valid_loss ASC'], output_format='list')
    print(f'\nmlflow.search_runs (MLflow experiment {MLFLOW_EXPERIMENT!r} at {uri}):')
    for run in runs:
        print(f"  {run.info.run_name}: params.`optimizer.lr` = "
              f"{run.data.params['optimizer.lr']}, best_valid_loss = "
              f"{run.data.metrics['best_valid_loss']:.4f}, test_acc = "
              f"{run.data.metrics['test_acc']:.4f}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ['run']:
        return train(argv[1:])
    return sweep(argv)


if __name__ == '__main__':
    sys.exit(main())
