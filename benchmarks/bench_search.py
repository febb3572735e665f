#!/usr/bin/env python
"""What does ``spt.Search`` add per trial to a bare Optuna study with the same storage?

Both run trials whose training does nothing, one at a time, on Optuna's
journal file storage (a new study in a temporary directory for each run):

* **bare Optuna**: ``study.optimize(objective, n_trials)``, the objective
  suggesting one float and returning a constant;
* **spt.Search**: ``search.optimize(train, n_trials)``, ``train(config)``
  returning the same constant: each trial is an Experiment run (its
  directory, ``config.json``, ``run.json``, its row in the results store,
  the console copy and the HParams file), its value read back from the
  store;
* **spt.Search, lean Experiments**: the same with
  ``experiment_kwargs={'tee': False, 'hparams': False}``;
* **Optuna + an Experiment by hand**: the bare study whose objective opens
  the same lean Experiment itself and records the value, as a user would
  without ``spt.Search``: the baseline of the search's own cost (its trial
  attribute, plugin, reporter and the value read back), apart from what an
  Experiment run costs anyway.  Its Experiments each ask git (a ``git
  status`` process), as any run outside ``shared_git_state()``; the
  search's trials share one answer, so "its own cost" can be negative.

The figures are the differences in ms per trial, best of the repeats
(contestants alternate, so a change of load hits all alike): against bare
Optuna (everything a trial-as-a-run costs), and against Optuna with an
Experiment by hand (the search's own cost); target: at most 10 ms per trial
with the journal storage.  On a disk where an ``fsync`` takes milliseconds,
the Experiment's durable record (``config.json``, ``run.json``,
``result.json``, the store) dominates the first.  It is a benchmark, not a
test: it exits 0 whether or not the target is met.

Usage: ``python benchmarks/bench_search.py [--quick] [--table-json PATH]``.
"""

from __future__ import annotations

import itertools
import os
import sys
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from _bench import (Row, Stopwatch, describe_machine, format_table,  # noqa: E402
                    load_average, met_text, time_alternating, write_rows)
from _shared import BenchConfig, lean_experiment, quick_parser, scratch_dir  # noqa: E402

import optuna  # noqa: E402

import tfsnippet as spt  # noqa: E402

TARGET_MS = 10.0
VALUE = 0.5
SIZES = {'full': {'trials': 40, 'repeats': 5}, 'quick': {'trials': 2, 'repeats': 1}}


def main() -> None:
    args = quick_parser(__doc__.splitlines()[0], '2 trials, 1 run each').parse_args()
    size = SIZES['quick' if args.quick else 'full']
    n_trials, repeats = size['trials'], size['repeats']
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(describe_machine(tensorflow=False, extra={'optuna': optuna.__version__}))
    print(f'{n_trials} trials per run, {repeats} runs each, journal file storage')
    counter = itertools.count()

    with scratch_dir() as tmp:
        def bare(watch: Stopwatch) -> None:
            from optuna.storages.journal import JournalFileBackend
            path = os.path.join(tmp, f'bare-{next(counter)}.optuna-journal')
            storage = optuna.storages.JournalStorage(JournalFileBackend(path))
            study = optuna.create_study(storage=storage, study_name='bare')

            def objective(trial: Any) -> float:
                trial.suggest_float('lr', 1e-4, 1e-1, log=True)
                return VALUE

            with watch:
                study.optimize(objective, n_trials=n_trials)

        def search(kwargs: dict[str, Any]) -> Any:
            def run(watch: Stopwatch) -> None:
                root = os.path.join(tmp, f'search-{next(counter)}')
                s = spt.Search(BenchConfig, {'lr': spt.search.Float(1e-4, 1e-1, log=True)},
                               metric='valid_loss', root=root, study='bench',
                               experiment_kwargs=kwargs)
                saved = sys.stdout
                sys.stdout = open(os.devnull, 'w')   # the search's line per trial
                try:
                    with watch:
                        s.optimize(lambda config: VALUE, n_trials=n_trials)
                finally:
                    sys.stdout.close()
                    sys.stdout = saved
                if len(spt.results.query(root)) != n_trials:
                    raise RuntimeError(f'{root} does not hold {n_trials} runs')
            return run

        def by_hand(watch: Stopwatch) -> None:
            from optuna.storages.journal import JournalFileBackend
            root = os.path.join(tmp, f'hand-{next(counter)}')
            os.makedirs(root)
            storage = optuna.storages.JournalStorage(
                JournalFileBackend(os.path.join(root, 'hand.optuna-journal')))
            study = optuna.create_study(storage=storage, study_name='hand')

            def objective(trial: Any) -> float:
                lr = trial.suggest_float('lr', 1e-4, 1e-1, log=True)
                with lean_experiment(root, f'hand-{trial.number}', ['--lr', repr(lr)]) as exp:
                    exp.results.update(valid_loss=VALUE)
                return VALUE

            with watch:
                study.optimize(objective, n_trials=n_trials)

        contestants = {'bare': bare, 'hand': by_hand, 'search': search({}),
                       'lean': search({'tee': False, 'hparams': False})}
        for run in contestants.values():   # warm up: first imports, first files
            run(Stopwatch())
        samples = time_alternating(contestants, repeats)

    per_trial = {name: s.scaled(1e3 / n_trials) for name, s in samples.items()}
    base = per_trial['bare'].best
    hand = per_trial['hand'].best
    table = [('bare Optuna study', f'{base:.2f}', f'{per_trial["bare"].median:.2f}', '', '',
              '', ''),
             ('Optuna + a lean Experiment by hand', f'{hand:.2f}',
              f'{per_trial["hand"].median:.2f}', f'{hand - base:+.2f}', '', '', '')]
    rows = []
    for name, label, against, against_label in (
            ('search', 'spt.Search (default Experiments)', base, 'a bare Optuna study'),
            ('lean', 'spt.Search (tee=False, hparams=False)', base, 'a bare Optuna study'),
            ('lean', 'spt.Search (tee=False, hparams=False), its own cost', hand,
             'Optuna + the same Experiment by hand')):
        best = per_trial[name].best
        diff = best - against
        met = diff <= TARGET_MS
        table.append((label, f'{best:.2f}', f'{per_trial[name].median:.2f}', f'{diff:+.2f}',
                      'hand' if against == hand else 'bare', f'≤ {TARGET_MS:g}', met_text(met)))
        rows.append(Row(f'hyperparameter search, per trial: {label}',
                        f'{against_label}, same journal storage', against, best, 'ms/trial',
                        f'diff ≤ {TARGET_MS:g} ms/trial', met))
    print()
    print(f'Summary (ms per trial whose training does nothing; best and median of {repeats} '
          f'runs of {n_trials} trials)')
    print(format_table(('case', 'best ms/trial', 'median ms/trial', 'difference ms/trial',
                        'against', 'target', 'met'), table, align='lrrrlll'))
    print(f'\nload avg    {load_average()} (1/5/15 min) at end')
    write_rows(args.table_json, rows)


if __name__ == '__main__':
    main()
