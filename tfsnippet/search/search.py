"""``spt.Search``: a hyperparameter search whose trials are Experiment runs of the user's loop."""

from __future__ import annotations

import numbers
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import optuna

from ..experiment.config import is_config_class
from ..experiment.experiment import Experiment, add_run_plugin, remove_run_plugin
from ..experiment.run_files import shared_git_state
from ..experiment.store import ResultsStore, RunRow
from ..utils.status import PREEMPTED_EXIT_CODE
from ..utils.text import typed_repr
from .core import (TrialJob, TrialPruned, TrialRunner, check_definition,
                   local_root, missing_metric_error, open_storage, open_study, run_id_of,
                   seeded_sampler, trial_value)
from .space import check_space, override_args

__all__ = ['Search']


class Search:
    """A hyperparameter search on Optuna whose trials are :class:`~tfsnippet.Experiment` runs.

    ::

        search = spt.Search(SweepConfig,
                            space={'lr': spt.search.Float(1e-4, 1e-1, log=True),
                                   'optimizer.beta_1': spt.search.Float(0.8, 0.99),
                                   'batch_size': spt.search.Categorical([32, 64, 128])},
                            metric='valid_loss', direction='minimize', root='runs',
                            study='lr-sweep')
        best = search.optimize(train, n_trials=20, n_jobs=2)   # train(config) runs a TrainLoop

    Each trial is a run ``<root>/<study>-tNNNN`` (see
    :func:`~tfsnippet.search.core.run_id_of`): an Experiment of
    `config_class` given the suggested values as command-line overrides
    (``--lr 0.003``), with ``trial.study`` and ``trial.number`` among the
    config recorded in the results store.  ``train(config)`` builds and
    runs its loop; the first :class:`~tfsnippet.TrainLoop` it makes reports
    `metric` to the trial at the end of each epoch and is pruned as the
    pruner says (see :class:`~tfsnippet.search.trial.TrialReporter`): it
    saves, the run ends ``'pruned'``, Optuna records the trial as pruned.
    The trial's value is what ``train`` returns when that is a number (then
    recorded as the run's final result `metric`), else the run's final
    result `metric`, else its best `metric`, else the last epoch's mean.

    **The study** lives in `storage`: by default Optuna's journal file
    ``<root>/<study>.optuna-journal`` (safe for several processes on one
    machine).  The search's definition (metric, direction, space) is kept
    as a user attribute of the study; a study of the same name with
    another definition is refused, naming the difference.

    **Continuing**: `n_trials` counts every trial of the study (finished,
    pruned and failed ones included), so running the same search again
    continues it: finished trials are not repeated, and a trial left
    running by a process that is gone (killed, or preempted: its
    ``TrainingPreempted`` leaves the trial running and stops the search,
    which raises it once the other trials are done) is resumed first, as
    the same Optuna trial and the same run, from the run's checkpoint.

    **Threads**: with `n_jobs` > 1 the trials run in threads of this process
    (TensorFlow releases the interpreter lock while it computes); each
    thread's loops record into its own trial.  Their Experiments do not copy
    the console into ``console.log`` (``tee=False``, unless
    `experiment_kwargs` says otherwise): the process has one stdout.  For
    process-per-trial runs use ``python -m tfsnippet.search``.

    Args:
        config_class: The config class of a run (a :class:`~tfsnippet.Config`
            subclass or a dataclass).
        space: ``{dotted field name: spt.search.Int | Float | Categorical}``.
        metric: The metric to optimize (an epoch metric, or a final result).
        direction: ``'minimize'`` or ``'maximize'``.
        root: The directory of the runs, of their results store and of the
            default study journal.
        study: The study's name.
        storage: ``None`` (the journal file), an Optuna storage URL
            (``'postgresql://...'``), a journal file path, or an Optuna storage.
        sampler: An Optuna sampler (Optuna's default, TPE, when ``None``).
        seed: The seed of a TPE sampler (instead of `sampler`): it is seeded
            with `seed` + the number of trials the study has, so that a
            continued study draws new points, reproducibly.  (A `sampler`
            seeded by you draws the same points each time the search runs.)
        pruner: An Optuna pruner (Optuna's default, ``MedianPruner``, when ``None``).
        args: Command-line options given to every trial before its overrides.
        experiment_kwargs: More keyword arguments of each trial's Experiment
            (``mlflow=``, ``hparams=``...).

    Raises:
        TypeError: An argument has the wrong type, or a value of `space` does
            not fit its config field.
        ValueError: `space` names a field `config_class` does not have, or
            the study exists with another definition.
    """

    def __init__(self, config_class: Any, space: Mapping[str, Any], metric: str,
                 direction: str = 'minimize', root: str | os.PathLike[str] = 'runs',
                 study: str = 'search', *, storage: Any = None, sampler: Any = None,
                 seed: int | None = None, pruner: Any = None, args: Sequence[str] = (),
                 experiment_kwargs: Mapping[str, Any] | None = None) -> None:
        if not is_config_class(config_class):
            raise TypeError(f'`config_class` must be a Config subclass or a dataclass, got '
                            f'{typed_repr(config_class)}')
        self._space = check_space(space, config_class)
        check_definition(metric, direction)
        if not isinstance(study, str) or not study:
            raise TypeError(f'`study` must be a non-empty str, got {typed_repr(study)}')
        if not isinstance(root, (str, os.PathLike)) or not os.fspath(root):
            raise TypeError(f'`root` must be a directory path, got {typed_repr(root)}')
        root = local_root(root)
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            raise TypeError(f'`args` must be a list of str, got {typed_repr(args)}')
        if experiment_kwargs is not None and not isinstance(experiment_kwargs, Mapping):
            raise TypeError(f'`experiment_kwargs` must be a dict, got '
                            f'{typed_repr(experiment_kwargs)}')
        taken = {'root', 'name', 'args'} & set(experiment_kwargs or ())
        if taken:
            raise ValueError(f'`experiment_kwargs` must not set {sorted(taken)}: the search '
                             f'sets them')
        self._config_class = config_class
        self._metric = metric
        self._direction = direction
        self._root = root
        self._args = list(args)
        self._experiment_kwargs = dict(experiment_kwargs or {})
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f'`seed` must be an int, got {typed_repr(seed)}')
        if seed is not None and sampler is not None:
            raise ValueError(f'Give `sampler` or `seed`, not both: `seed` seeds a TPE sampler, '
                             f'got sampler={typed_repr(sampler)}')
        self._storage, self._storage_spec = open_storage(storage, self._root, study)
        if seed is not None:
            sampler = seeded_sampler(seed, self._storage, study)
        self._study = open_study(study, self._storage, metric, direction, self._space,
                                 sampler=sampler, pruner=pruner)

    @property
    def study(self) -> optuna.Study:
        """The Optuna study."""
        return self._study

    @property
    def root(self) -> str:
        """The directory of the runs (absolute)."""
        return self._root

    @property
    def metric(self) -> str:
        """The metric optimized."""
        return self._metric

    @property
    def storage(self) -> str | None:
        """The study's journal file or storage URL (``None`` for a storage object)."""
        return self._storage_spec

    def optimize(self, train: Callable[[Any], Any], n_trials: int, n_jobs: int = 1,
                 catch: tuple[type[BaseException], ...] = ()) -> RunRow:
        """Run the study until it has `n_trials` trials, and return the best run's row.

        Args:
            train: ``train(config)``: builds and runs a TrainLoop for `config`;
                it may return the trial's value.
            n_trials: How many trials the study has in all, when this returns.
            n_jobs: How many trials run at once (threads).
            catch: The exceptions out of `train` that fail their trial only;
                any other fails it and stops the search (raised once the
                running trials are done).

        Raises:
            TrainingPreempted: A trial was preempted: it is left running, to
                be resumed by the next call.
            RuntimeError: A run recorded no `metric`.
        """
        if not callable(train):
            raise TypeError(f'`train` must be callable, got {typed_repr(train)}')
        for arg, value in (('n_trials', n_trials), ('n_jobs', n_jobs)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f'`{arg}` must be an int >= 1, got {typed_repr(value)}')
        if not isinstance(catch, tuple) or not all(
                isinstance(c, type) and issubclass(c, BaseException) for c in catch):
            raise TypeError(f'`catch` must be a tuple of exception classes, got '
                            f'{typed_repr(catch)}')
        kwargs = dict(self._experiment_kwargs)
        if n_jobs > 1:
            kwargs.setdefault('tee', False)
        runner = TrialRunner(self._study, self._storage, self._root, print, self._metric)

        def run_one(job: TrialJob) -> tuple[str, Any]:
            return self._run_trial(job, train, kwargs, catch)

        with shared_git_state():   # the trials all run the code this process imported
            runner.run(n_trials, n_jobs, run_one, self._suggest)
        return self.best_row()

    def _suggest(self, trial: optuna.Trial) -> dict[str, Any]:
        return {name: dim.suggest(trial, name) for name, dim in self._space.items()}

    def _run_trial(self, job: TrialJob, train: Callable[[Any], Any], kwargs: dict[str, Any],
                   catch: tuple[type[BaseException], ...]) -> tuple[str, Any]:
        from .plugin import TrialPlugin
        trial = job.trial
        params = {name: trial.params[name] for name in self._space}
        plugin = TrialPlugin(trial, self._study.study_name, job.number, self._metric,
                             self._root, job.run_id)
        add_run_plugin(plugin)
        try:
            with Experiment(self._config_class, self._root, name=job.run_id,
                            args=[*self._args, *override_args(params)], **kwargs) as exp:
                value = train(exp.config)
                if isinstance(value, numbers.Real) and not isinstance(value, bool):
                    exp.results.update({self._metric: float(value)})
                # the loop's recorder has written its epochs and best values, the
                # results are written at once: the row is read from the open store
                row = exp.store.get_run(job.run_id) if exp.store is not None else None
        except TrialPruned:
            return 'pruned', None
        except SystemExit as e:   # TrainingPreempted: exit status 143
            if e.code == PREEMPTED_EXIT_CODE:
                return 'preempted', e
            return 'error', e
        except catch as e:
            return 'failed', e
        finally:
            remove_run_plugin(plugin)
        if row is None:   # the run was resumed and recorded nothing: read what it has
            with ResultsStore(self._root) as store:
                row = store.get_run(job.run_id)
        value = trial_value(row, self._metric)
        if value is None:
            return 'error', missing_metric_error(row, self._metric)
        return 'complete', value

    def best_row(self) -> RunRow:
        """The row of the best trial's run in the results store (``study.best_trial``'s).

        Raises:
            ValueError: No trial of the study is complete yet.
        """
        best = self._study.best_trial
        with ResultsStore(self._root) as store:
            return store.get_run(run_id_of(self._study.study_name, best.number))

    def __repr__(self) -> str:
        return (f'Search({getattr(self._config_class, "__name__", self._config_class)}, '
                f'study={self._study.study_name!r}, metric={self._metric!r}, '
                f'root={self._root!r})')
