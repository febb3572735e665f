"""The run plugin of a trial: it makes an Experiment the trial's run.

Apart from :mod:`tfsnippet.search.trial` (the loop's side), so that a trial's
process imports no TensorFlow before its script does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .trial import TrialReporter

__all__ = ['TrialPlugin']


class TrialPlugin:
    """Makes the :class:`~tfsnippet.Experiment` made in its thread the run of a trial
    (see :func:`~tfsnippet.experiment.experiment.add_run_plugin`): it records under
    `root` as `run_id`, with ``trial.study`` and ``trial.number`` among its recorded
    config, and its first TrainLoop gets a :class:`~tfsnippet.search.trial.TrialReporter`.

    Args:
        trial: The Optuna trial (``None`` on a worker that is not the chief).
        study: The study's name.
        number: The trial's number.
        metric: The metric reported.
        root: The root of the runs.
        run_id: The trial's run id.
    """

    def __init__(self, trial: Any, study: str, number: int, metric: str, root: str,
                 run_id: str) -> None:
        self.trial = trial
        self.study = study
        self.number = number
        self.metric = metric
        self.root = root
        self.run_id = run_id
        self.reporter: TrialReporter | None = None

    def place(self, root: Any, name: Any) -> tuple[str, str]:
        return self.root, self.run_id

    def tags(self) -> dict[str, Any]:
        return {'trial': {'study': self.study, 'number': self.number}}

    def loop_components(self, experiment: Any) -> list[Any]:
        from .trial import TrialReporter   # the loop's side, imported with the first loop
        if self.reporter is not None:   # the first loop of the run is the trial's
            return []
        self.reporter = TrialReporter(self.trial, self.metric)
        return [self.reporter]
