"""The names of the events fired by the training loop and the trainers."""

from __future__ import annotations

import enum

__all__ = ['EventKeys']


class EventKeys(str, enum.Enum):
    """Event keys of :class:`~tfsnippet.TrainLoop` and the trainers.

    Each member is also its string value (``EventKeys.AFTER_STEP ==
    'after_step'``), so either may be passed to ``events.on(...)``.
    Handlers of the ``AFTER_*``/``EXIT_*`` events run in reverse order of
    registration.

    ================================  ==================================
    key                               handler arguments
    ================================  ==================================
    ``ENTER_LOOP`` / ``EXIT_LOOP``    ``(loop)``
    ``BEFORE_EPOCH``/``AFTER_EPOCH``  ``(loop)``
    ``BEFORE_STEP``/``AFTER_STEP``    ``(loop)``
    ``METRICS_COLLECTED``             ``(loop, {name: value})``
    ``TIME_METRICS_COLLECTED``        ``(loop, {name: seconds})``
    ``METRIC_STATS_PRINTED``          ``(loop, {name: StatisticsCollector})``
    ``TIME_METRIC_STATS_PRINTED``     ``(loop, {name: StatisticsCollector})``
    ``SUMMARY_ADDED``                 ``(loop, summary)``
    ================================  ==================================

    The remaining keys (``STEP_*``, ``EPOCH_*``, ``BEFORE_EXECUTION``,
    ``AFTER_EXECUTION``) are fired by the trainers.
    """

    __hash__ = str.__hash__  # so a member finds its plain-string dict entry

    def __str__(self) -> str:
        return self.value

    ENTER_LOOP = 'enter_loop'
    EXIT_LOOP = 'exit_loop'
    BEFORE_EPOCH = 'before_epoch'
    AFTER_EPOCH = 'after_epoch'
    BEFORE_STEP = 'before_step'
    AFTER_STEP = 'after_step'
    METRICS_COLLECTED = 'metrics_collected'
    TIME_METRICS_COLLECTED = 'time_metrics_collected'
    METRIC_STATS_PRINTED = 'metric_stats_printed'
    TIME_METRIC_STATS_PRINTED = 'time_metric_stats_printed'
    SUMMARY_ADDED = 'summary_added'
    STEP_EVALUATION = 'step_evaluation'
    STEP_ANNEALING = 'step_annealing'
    STEP_LOGGING = 'step_logging'
    EPOCH_EVALUATION = 'epoch_evaluation'
    EPOCH_ANNEALING = 'epoch_annealing'
    EPOCH_LOGGING = 'epoch_logging'
    BEFORE_EXECUTION = 'before_execution'
    AFTER_EXECUTION = 'after_execution'
