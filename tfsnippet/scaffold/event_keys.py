"""The names of the events fired by the training loop and the trainers."""

from __future__ import annotations

import enum

__all__ = ['EventKeys', 'LOOP_EVENT_KEYS']


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
    ``METRIC_STATS_REDUCED``          ``(loop, scope, {name: {'mean', 'std', 'count'}})``
    ``SUMMARY_ADDED``                 ``(loop, summary)``
    ``BEFORE_STEPS``/``AFTER_STEPS``  ``(loop)``
    ``LOGS_PRINTING``                 ``(loop)``
    ``LOOP_HELD``                     ``(loop, cause, seconds)``
    ================================  ==================================

    The remaining keys (``STEP_*``, ``EPOCH_*``, ``BEFORE_EXECUTION``,
    ``AFTER_EXECUTION``) are fired by the trainers.

    A :class:`~tfsnippet.TrainLoop` fires its events in this order::

        ENTER_LOOP(loop)                          # entering `with`
        for epoch in loop.iter_epochs():
            BEFORE_EPOCH(loop)
            BEFORE_STEPS(loop)         # the step loop opens, before the first batch
            for step in loop.iter_steps(data):
                BEFORE_STEP(loop)
                ...   # collect_metrics -> METRICS_COLLECTED(loop, metrics)
                      # timeit -> TIME_METRICS_COLLECTED(loop, metrics)
                      # print_logs -> METRIC_STATS_PRINTED(loop, stats),
                      #               TIME_METRIC_STATS_PRINTED(loop, stats),
                      #               METRIC_STATS_REDUCED(loop, 'step_log', stats)
                AFTER_STEP(loop)       # then `step_time` is recorded
            AFTER_STEPS(loop)          # the step loop closes (also on break/exception)
            AFTER_EPOCH(loop)          # then `epoch_time` is recorded, and
                                       # METRIC_STATS_REDUCED(loop, 'epoch', stats)
        EXIT_LOOP(loop)                           # leaving `with`

    What fires when the loop does not end normally:

    * ``break`` out of a step or epoch loop, or an exception in its body:
      that step's ``AFTER_STEP`` (and the epoch's ``AFTER_EPOCH``) do not fire
      and its time is not recorded.  Leaving ``iter_epochs`` clears the
      metric book.
    * ``loop.request_stop()`` (from the body or a handler): the current step
      finishes (``AFTER_STEP`` fires), ``iter_steps`` yields no more steps in
      this epoch, the epoch's body runs on and ``AFTER_EPOCH`` fires, then
      ``iter_epochs`` ends and the loop prints why it stopped.
    * ``EXIT_LOOP`` always fires when the ``with`` block is left, also
      through an exception (``KeyboardInterrupt`` included).

    ``METRIC_STATS_REDUCED`` announces every reduction of the metric book
    once, with plain statistics (see :mod:`tfsnippet.scaffold.metrics.sinks`):
    each ``print_logs()`` line (scope ``'step_log'`` or ``'epoch_log'``) and
    the end of each epoch (scope ``'epoch'``: that epoch's statistics,
    printed or not; an epoch cut short by ``break`` or an exception only
    if it printed its epoch-level line).
    Under multi-worker training they are merged across the workers by the
    collective of ``print_logs()`` (an epoch that prints no line announces
    the process's own statistics).

    ``LOGS_PRINTING`` fires at the start of each ``print_logs()``, after its
    timer stopped and before the statistics are taken: a component that
    reads a value only when a line is printed (a loss scale) collects it
    there.  ``LOOP_HELD`` is fired by components that hold the loop up
    (``cause`` ``'checkpoint'`` for a save, ``'summaries'`` for a write),
    with the seconds it took, and only while someone listens (see
    :meth:`~tfsnippet.LoopComponent.hold`); the step-loop and print events
    never fire per step.

    ``loop.events.on(key, handler, every=Every(steps=N))`` (or
    ``epochs=``/``seconds=``) calls a handler only when its schedule is due.
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
    METRIC_STATS_REDUCED = 'metric_stats_reduced'
    SUMMARY_ADDED = 'summary_added'
    BEFORE_STEPS = 'before_steps'
    AFTER_STEPS = 'after_steps'
    LOGS_PRINTING = 'logs_printing'
    LOOP_HELD = 'loop_held'
    STEP_EVALUATION = 'step_evaluation'
    STEP_ANNEALING = 'step_annealing'
    STEP_LOGGING = 'step_logging'
    EPOCH_EVALUATION = 'epoch_evaluation'
    EPOCH_ANNEALING = 'epoch_annealing'
    EPOCH_LOGGING = 'epoch_logging'
    BEFORE_EXECUTION = 'before_execution'
    AFTER_EXECUTION = 'after_execution'


#: The events a :class:`~tfsnippet.TrainLoop` fires (the others are the trainers').
LOOP_EVENT_KEYS = (
    EventKeys.ENTER_LOOP, EventKeys.EXIT_LOOP, EventKeys.BEFORE_EPOCH, EventKeys.AFTER_EPOCH,
    EventKeys.BEFORE_STEP, EventKeys.AFTER_STEP, EventKeys.METRICS_COLLECTED,
    EventKeys.TIME_METRICS_COLLECTED, EventKeys.METRIC_STATS_PRINTED,
    EventKeys.TIME_METRIC_STATS_PRINTED, EventKeys.SUMMARY_ADDED,
    EventKeys.METRIC_STATS_REDUCED, EventKeys.BEFORE_STEPS, EventKeys.AFTER_STEPS,
    EventKeys.LOGS_PRINTING, EventKeys.LOOP_HELD,
)
