"""Benchmark: recording an epoch of 100 steps, MLflow per step against tfsnippet per epoch.

Each contestant records the same training epochs (100 steps with a ``loss``
each, 10 with ``--quick``, then ``valid_loss`` and ``valid_acc``) into a store of its own in a
temporary directory; they take turns, epoch by epoch, and the table shows
the median epoch as µs per training step:

* **MLflow, log_metric per step** (the baseline): ``MlflowClient.log_metric``
  for the loss at every step and for the two validation metrics, into a
  local SQLite tracking store, as MLflow's own examples log;
* **MLflow, asynchronous log_metric per step**: the same with
  ``synchronous=False`` (MLflow queues the values and a thread of its own
  writes them), waiting at the end of the epoch until they are written
  (``RunOperations.wait()``), so that the epoch is stored when its time is
  taken;
* **results store, per epoch**: ``ResultsStore.log_epoch_metrics`` once per
  epoch with the mean, std and count of the three metrics (what a
  ``TrainLoop`` inside an ``Experiment`` records: the metric book has
  already reduced the steps, a cost ``bench_train_loop.py`` measures);
* **MlflowMirror, per epoch**: ``MlflowMirror.log_epoch`` once per epoch with
  the three means, one ``log_batch`` request to the same kind of MLflow store.

Without MLflow installed the script says so and measures nothing.

Usage: ``python benchmarks/bench_mlflow.py [--quick] [--epochs N] [--table-json PATH]``
(``--quick``: 1 epoch of 10 steps each, after the warm-up one: a smoke run).
"""

from __future__ import annotations

import argparse
import logging
import os
import sqlite3
import sys
import tempfile
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from _bench import (Row, Stopwatch, describe_machine, format_table,  # noqa: E402
                    load_average, time_alternating, write_rows)

from tfsnippet.experiment.store import ResultsStore  # noqa: E402

STEPS = 100          # steps an epoch (QUICK_STEPS with --quick)
QUICK_STEPS = 10


def epoch_values(epoch: int, steps: int) -> tuple[list[float], float, float]:
    """The `steps` losses, the validation loss and accuracy of an epoch (made up)."""
    losses = [1. / (epoch + 1) + 0.001 * (s % 7) for s in range(steps)]
    return losses, 0.9 / (epoch + 1), 1. - 0.5 / (epoch + 1)


def mean_std(values: list[float]) -> dict[str, Any]:
    mean = sum(values) / len(values)
    var = sum((v - mean) ** 2 for v in values) / len(values)
    return {'mean': mean, 'std': var ** 0.5, 'count': len(values)}


def contestants(root: str, mlflow: Any, steps: int) -> dict[str, Callable[[Stopwatch], None]]:
    """``{name: run}``: each call of a run records its next epoch of `steps`, timed."""
    from tfsnippet.experiment.mlflow_mirror import MlflowMirror

    uri = f'sqlite:///{os.path.join(root, "mlflow.db")}'
    client = mlflow.MlflowClient(uri)
    experiment_id = client.create_experiment('bench')
    sync_run = client.create_run(experiment_id, run_name='per-step').info.run_id
    async_run = client.create_run(experiment_id, run_name='per-step-async').info.run_id
    mirror = MlflowMirror(uri, 'bench')
    mirror.start('mirror', 'mirror', {'optimizer': {'lr': 0.001}}, {})
    store = ResultsStore(os.path.join(root, 'results'))
    store.start_run('store', 'store', {'optimizer': {'lr': 0.001}})
    epochs = {name: 0 for name in ('sync', 'async', 'store', 'mirror')}

    def next_epoch(name: str) -> tuple[int, list[float], float, float]:
        epochs[name] += 1
        return (epochs[name], *epoch_values(epochs[name], steps))

    def mlflow_per_step(watch: Stopwatch, run_id: str, synchronous: bool) -> None:
        epoch, losses, valid_loss, valid_acc = next_epoch('sync' if synchronous else 'async')
        first = (epoch - 1) * steps
        with watch:
            pending = [client.log_metric(run_id, 'loss', loss, step=first + i + 1,
                                         synchronous=synchronous)
                       for i, loss in enumerate(losses)]
            step = first + steps
            pending.append(client.log_metric(run_id, 'valid_loss', valid_loss, step=step,
                                             synchronous=synchronous))
            pending.append(client.log_metric(run_id, 'valid_acc', valid_acc, step=step,
                                             synchronous=synchronous))
            if not synchronous:
                for operation in pending:
                    operation.wait()

    def store_per_epoch(watch: Stopwatch) -> None:
        epoch, losses, valid_loss, valid_acc = next_epoch('store')
        with watch:
            store.log_epoch_metrics('store', step=epoch * steps, epoch=epoch, metrics={
                'loss': mean_std(losses), 'valid_loss': valid_loss, 'valid_acc': valid_acc})

    def mirror_per_epoch(watch: Stopwatch) -> None:
        epoch, losses, valid_loss, valid_acc = next_epoch('mirror')
        with watch:
            mirror.log_epoch(step=epoch * steps, epoch=epoch, metrics={
                'loss': sum(losses) / len(losses), 'valid_loss': valid_loss,
                'valid_acc': valid_acc})

    return {
        'MLflow log_metric per step': lambda w: mlflow_per_step(w, sync_run, True),
        'MLflow log_metric per step, async': lambda w: mlflow_per_step(w, async_run, False),
        'results store, per epoch': store_per_epoch,
        'MlflowMirror, per epoch': mirror_per_epoch,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true',
                        help=f'1 epoch of {QUICK_STEPS} steps each (a smoke run)')
    parser.add_argument('--epochs', type=int, default=None,
                        help='epochs recorded by each contestant (default 15)')
    parser.add_argument('--table-json', metavar='PATH', help='also write the rows as JSON')
    args = parser.parse_args()
    epochs = args.epochs or (1 if args.quick else 15)
    steps = QUICK_STEPS if args.quick else STEPS

    try:
        import mlflow
    except ImportError:
        print('MLflow is not installed (pip install "tfsnippet[mlflow]"): nothing measured')
        write_rows(args.table_json, [])
        return
    logging.getLogger('mlflow').setLevel(logging.WARNING)   # no migration chatter

    print(describe_machine(tensorflow=False, extra={'MLflow': mlflow.__version__,
                                                    'SQLite': sqlite3.sqlite_version}))
    print(f'{epochs} epoch(s) of {steps} steps per contestant, taking turns epoch by epoch')
    with tempfile.TemporaryDirectory() as root:
        runs = contestants(root, mlflow, steps)
        for run in runs.values():     # warm-up: first writes create tables, caches
            run(Stopwatch())
        samples = time_alternating(runs, epochs)

    per_step = {name: s.scaled(1e6 / steps) for name, s in samples.items()}
    baseline_name = 'MLflow log_metric per step'
    baseline = per_step[baseline_name].median
    table = [(name, f'{s.median:,.1f}', f'{s.cpu_median:,.1f}', f'{s.median / baseline:.4f}')
             for name, s in per_step.items()]
    print(f'\nSummary (µs per training step, median epoch of {steps} steps)')
    print(format_table(('case', 'µs/step', 'cpu µs/step', 'ratio to per-step MLflow'),
                       table, align='lrrr'))
    print(f'\nload avg    {load_average()} (1/5/15 min) at end')
    rows = [Row(f'record an epoch of {steps} steps: {name}', f'{baseline_name} (SQLite)',
                baseline, per_step[name].median, 'µs/step')
            for name in per_step if name != baseline_name]
    write_rows(args.table_json, rows)


if __name__ == '__main__':
    main()
