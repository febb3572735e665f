"""The trial side of a search: the loop component that reports to the trial and
prunes (and, from :mod:`tfsnippet.search.plugin`, the run plugin that makes an
Experiment the trial's run)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..scaffold.components.base import LoopComponent
from ..scaffold.event_keys import EventKeys
from ..scaffold.metrics.sinks import EPOCH
from ..utils.text import typed_repr
from .core import TrialPruned
from .plugin import TrialPlugin

__all__ = ['TrialReporter', 'TrialPlugin']


class TrialReporter(LoopComponent):
    """Reports a loop's metric to an Optuna trial each epoch, and prunes the trial.

    A :class:`~tfsnippet.TrainLoop` made inside a trial's
    :class:`~tfsnippet.Experiment` gets one with no extra code.  At the
    close of each epoch (the statistics the loop announces then, merged
    across workers; nothing per step), the mean of `metric` is reported as
    the trial's intermediate value at step ``loop.epoch``, and the pruner
    is asked.  When it says prune, the loop saves a checkpoint (if it has a
    checkpointer), says so, and raises :class:`~tfsnippet.search.TrialPruned`
    out of the epoch loop: the run ends with status ``'pruned'`` and Optuna
    records the trial as pruned.

    Under a strategy of several workers only the chief talks to the study
    (`trial` is ``None`` on the others); its decision is the ``'prune'``
    decision of ``loop.decisions`` (rule ``'chief'``), agreed at the loop's
    next sync point (``sync_steps`` steps into the next epoch, or its end),
    where every worker saves and raises at the same step.

    Args:
        trial: The Optuna trial (``None`` on a worker that is not the chief).
        metric: The metric to report (an epoch metric, such as ``'valid_loss'``).
    """

    role = 'trial_reporter'

    def __init__(self, trial: Any, metric: str) -> None:
        if not isinstance(metric, str) or not metric:
            raise TypeError(f'`metric` must be a metric name, got {typed_repr(metric)}')
        self._trial = trial
        self._metric = metric
        self._wanted = False
        self._pruned = False
        self._last: float | None = None

    @property
    def metric(self) -> str:
        """The metric reported."""
        return self._metric

    @property
    def pruned(self) -> bool:
        """Whether the trial was pruned (the loop raised ``TrialPruned``)."""
        return self._pruned

    def on_enter(self, loop: Any) -> None:
        self._wanted = self._pruned = False
        self.subscribe(loop, EventKeys.METRIC_STATS_REDUCED, self._on_reduced)
        loop.decisions.register('prune', read=lambda: self._wanted,
                                apply=lambda agreed: self._on_agreed(loop, agreed), rule='chief')
        self.expect_metric(loop, self._metric, 'the search')

    def _on_reduced(self, loop: Any, scope: str, stats: Mapping[str, Mapping[str, Any]]) -> None:
        if scope != EPOCH or self._wanted:
            return
        entry = stats.get(self._metric)
        if entry is None or entry.get('mean') is None:
            return
        value = float(entry['mean'])
        self._last = value
        if self._trial is not None and loop.is_chief:
            self._trial.report(value, loop.epoch)
            self._wanted = bool(self._trial.should_prune())
        if self._wanted and loop.decisions.immediate:
            self._prune(loop)

    def _on_agreed(self, loop: Any, agreed: float) -> None:
        if agreed and not self._pruned:
            self._prune(loop)

    def _prune(self, loop: Any) -> None:
        self._pruned = True
        checkpointer = loop.component('checkpointer')
        saved = f'; saved checkpoint {checkpointer.save_now(loop)}' if checkpointer else ''
        number = getattr(self._trial, 'number', None)
        value = '' if self._last is None or math.isnan(self._last) else \
            f' ({self._metric} = {self._last:.6g})'
        loop.println(f'Trial {"" if number is None else f"{number} "}pruned at epoch '
                     f'{loop.epoch}, step {loop.step}{value}{saved}')
        raise TrialPruned(f'pruned at epoch {loop.epoch}{value}')

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        self._wanted = False
