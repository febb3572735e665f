"""The component of multi-task training: per-task best values, one combined validation metric."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...utils.validation import short_repr
from ..metrics.monitor import Monitor
from .base import LoopComponent

__all__ = ['MultiTaskMetrics']


def _mean(values: Mapping[str, float]) -> float:
    return sum(values.values()) / len(values)


class MultiTaskMetrics(LoopComponent):
    """Tracks each task's validation metric and collects their combination.

    The loop body collects each task's metrics under names prefixed by the
    task, ``<task>/loss`` while training and ``<task>/valid_loss`` when it
    validates, with :meth:`~tfsnippet.TrainLoop.collect_metrics` as any
    other metric: they are printed in the log lines, written by every
    sink (TensorBoard, results store, MLflow...) and, under a strategy,
    merged across replicas and workers like any metric.

    This component watches ``<task>/<metric>`` of every task.  It keeps
    each task's best value (:attr:`best`, :attr:`best_step`, in the
    checkpoints) and, once every task has given a value since the last
    combination, collects their combination as `metric` itself (by
    default ``valid_loss``, the loop's validation metric): the mean of the
    tasks' values, or ``combine({task: value})``.  So the loop's best value
    and best checkpoint, :class:`~tfsnippet.EarlyStopping`,
    :class:`~tfsnippet.ReduceOnPlateau` and the sinks' best values follow
    the combined metric as they would any metric (to follow one task
    instead, give them its metric: ``metric='digit/valid_loss'``).

    When the loop is left, a line gives each task's best value.

    Args:
        tasks: The task names (or a :class:`~tfsnippet.dataflows.MultiTaskFlow`,
            whose tasks are taken).
        metric: The combined metric's name; each task's is ``<task>/<metric>``.
        combine: ``combine({task: value}) -> float``; default: the mean.
        mode: ``'min'``, ``'max'`` or ``'auto'`` (from `metric`) for the
            tasks' best values.
        name: Tells two components apart in checkpoints (the state key is
            ``multitask[<metric>]`` otherwise).

    Raises:
        TypeError: `tasks` holds no str names, `combine` is not callable,
            `metric` or `name` is not a str.
        ValueError: `tasks` is empty or repeats a name; a bad `mode`.

    Example::

        tasks = spt.MultiTaskMetrics(['digit', 'coarse'])
        with spt.TrainLoop(max_epoch=10, early_stopping=True) as loop:
            loop.add_component(tasks)
            ...
            loop.collect_metrics({'digit/valid_loss': v1, 'coarse/valid_loss': v2})
            # -> valid_loss = (v1 + v2) / 2, which early stopping watches
    """

    def __init__(self, tasks: Iterable[str] | Any, metric: str = 'valid_loss',
                 combine: Callable[[dict[str, float]], float] | None = None,
                 mode: str = 'auto', name: str | None = None):
        names = getattr(tasks, 'task_names', tasks)
        if isinstance(names, str) or not isinstance(names, Iterable):
            raise TypeError(f'`tasks` must be a list of task names or a MultiTaskFlow, '
                            f'got {short_repr(tasks)}')
        names = tuple(names)
        if not names:
            raise ValueError('`tasks` must name at least one task, got none')
        for n in names:
            if not isinstance(n, str) or not n:
                raise TypeError(f'The task names must be non-empty str, got {n!r}')
        if len(set(names)) != len(names):
            raise ValueError(f'`tasks` repeats a name: {list(names)}')
        if not isinstance(metric, str) or not metric:
            raise TypeError(f'`metric` must be a metric name, got {short_repr(metric)}')
        if combine is not None and not callable(combine):
            raise TypeError(f'`combine` must be callable or None, got {short_repr(combine)}')
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f'`name` must be a non-empty str or None, got {short_repr(name)}')
        self._tasks = names
        self._metric = metric
        self._combine = combine or _mean
        self._name = name
        self._monitors = {t: Monitor(f'{t}/{metric}', mode) for t in names}
        self._best_step: dict[str, int | None] = dict.fromkeys(names)
        self._pending: dict[str, float] = {}
        self._unwatch: list[Callable[[], None]] = []

    # ------------------------------------------------------------ properties
    @property
    def tasks(self) -> tuple[str, ...]:
        """The task names."""
        return self._tasks

    @property
    def metric(self) -> str:
        """The combined metric's name."""
        return self._metric

    def task_metric(self, task: str) -> str:
        """The name of `task`'s metric, ``<task>/<metric>``."""
        if task not in self._monitors:
            raise ValueError(f'`task` must be one of {list(self._tasks)}, got {task!r}')
        return self._monitors[task].name

    @property
    def best(self) -> dict[str, float | None]:
        """``{task: its best value so far}`` (``None`` before its first value)."""
        return {t: m.best for t, m in self._monitors.items()}

    @property
    def best_step(self) -> dict[str, int | None]:
        """``{task: the loop step of its best value}``."""
        return dict(self._best_step)

    @property
    def state_key(self) -> str:
        return self._name or f'multitask[{self._metric}]'

    # ------------------------------------------------------------ hooks
    def on_enter(self, loop: Any) -> None:
        for task, monitor in self._monitors.items():
            self._unwatch.append(loop.watch_metric(
                monitor.name, lambda value, task=task: self._on_value(loop, task, value)))
            self.expect_metric(loop, monitor.name, 'MultiTaskMetrics')

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        for unwatch in self._unwatch:
            unwatch()
        self._unwatch = []
        seen = [(t, m) for t, m in self._monitors.items() if m.best is not None]
        if seen:
            loop.println('Best per task: ' + '; '.join(
                f'{m.name} {m.best:.6g} (step {self._best_step[t]})' for t, m in seen))

    def _on_value(self, loop: Any, task: str, value: float) -> None:
        if self._monitors[task].update(value):
            self._best_step[task] = loop.step
        self._pending[task] = value
        if len(self._pending) == len(self._tasks):
            values, self._pending = self._pending, {}
            combined = self._combine(dict(values))
            try:
                combined = float(combined)
            except (TypeError, ValueError):
                raise TypeError(f'`combine` must return a number, got '
                                f'{short_repr(combined)}') from None
            if math.isnan(combined) and not any(math.isnan(v) for v in values.values()):
                loop.notice(f'`combine` gave NaN for `{self._metric}` from {values}')
            loop.collect_metrics({self._metric: combined})

    # ------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        return {'best': {t: m.state_dict() for t, m in self._monitors.items()},
                'best_step': dict(self._best_step), 'pending': dict(self._pending)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        for task, monitor in self._monitors.items():
            saved = state.get('best', {}).get(task)
            if saved is not None:
                monitor.load_state_dict(saved)
            step = state.get('best_step', {}).get(task)
            self._best_step[task] = None if step is None else int(step)
        self._pending = {t: float(v) for t, v in state.get('pending', {}).items()
                         if t in self._monitors}
