"""What a trial's process runs: ``python -m tfsnippet.search.child SCRIPT [ARGS...]``.

``python -m tfsnippet.search`` starts it once per trial with the trial's
``TFSNIPPET_SEARCH_*`` variables set.  It installs the trial's run plugin
(see :func:`~tfsnippet.experiment.experiment.add_run_plugin`), so that the
script's own ``spt.Experiment`` records the trial's run under the search's
root and its first TrainLoop reports to the trial, then runs the script as
``__main__``.  Only the chief of a multi-worker trial opens the study.  A
pruned trial ends with exit status 0 and no traceback (its loop printed the
line ``Trial N pruned at epoch E, step S (METRIC = V)``).
"""

from __future__ import annotations

import os
import runpy
import sys

__all__ = ['main', 'plugin_from_env']


def plugin_from_env(environ: dict[str, str] | None = None) -> object:
    """The :class:`~tfsnippet.search.plugin.TrialPlugin` the variables describe.

    Raises:
        ValueError: A variable is missing or malformed.
    """
    from ..distributed import cluster_info
    from .core import (ENV_METRIC, ENV_PRUNER, ENV_ROOT, ENV_RUN, ENV_STORAGE, ENV_STUDY,
                       ENV_TRIAL, make_pruner, open_storage)
    from .plugin import TrialPlugin
    env = os.environ if environ is None else environ
    missing = [k for k in (ENV_STUDY, ENV_STORAGE, ENV_TRIAL, ENV_ROOT, ENV_RUN, ENV_METRIC)
               if not env.get(k)]
    if missing:
        raise ValueError(f'A trial\'s process needs the variables {missing} (set by '
                         f'`python -m tfsnippet.search`)')
    try:
        number = int(env[ENV_TRIAL])
    except ValueError:
        raise ValueError(f'`{ENV_TRIAL}` must be a trial number, got {env[ENV_TRIAL]!r}') \
            from None
    study_name, root = env[ENV_STUDY], env[ENV_ROOT]
    trial = None
    if cluster_info().is_chief:   # only the chief talks to the study
        import optuna
        storage, _ = open_storage(env[ENV_STORAGE], root, study_name)
        study = optuna.load_study(study_name=study_name, storage=storage,
                                  pruner=make_pruner(env.get(ENV_PRUNER) or None))
        study_id = storage.get_study_id_from_name(study_name)
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, number)
        trial = optuna.trial.Trial(study, trial_id)
    return TrialPlugin(trial, study_name, number, env[ENV_METRIC], root, env[ENV_RUN])


def main(argv: list[str] | None = None) -> None:
    """Run the script ``argv[0]`` with its arguments as the trial's process."""
    from ..experiment.experiment import add_run_plugin
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        raise SystemExit('usage: python -m tfsnippet.search.child SCRIPT [ARGS...]')
    from .core import TrialPruned
    add_run_plugin(plugin_from_env())
    script = os.path.abspath(args[0])
    sys.argv = [script, *args[1:]]
    sys.path.insert(0, os.path.dirname(script))
    try:
        runpy.run_path(script, run_name='__main__')
    except TrialPruned:
        # not a crash: the loop said so in one line, the run's status is 'pruned', and the
        # search reads it back and says so too; no traceback
        pass


if __name__ == '__main__':
    main()
