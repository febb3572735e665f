"""Evaluation over a data flow: weighted means of metrics, in either TensorFlow style."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from ..backend.values import is_distributed_value
from ..scaffold.components.quick_check import QuickCheck
from ..scaffold.event_keys import EventKeys
from ..utils.events import EventSource
from .step_runner import StepRunner, is_graph_fetch

__all__ = ['Evaluator', 'Validator', 'auto_batch_weight']


def auto_batch_weight(*batch_arrays: Any) -> float:
    """The weight of a batch: the length of its first array (``1.`` if it has none).

    Example:
        >>> auto_batch_weight(np.arange(7), np.arange(5))
        7.0
    """
    try:
        return float(len(batch_arrays[0]))
    except (IndexError, TypeError):
        return 1.


class Evaluator:
    """Computes metrics over `data_flow` and collects their weighted means into the loop.

    **Graph style**: `metrics` is a scalar tensor (named after the loop's
    ``valid_metric_name``) or ``{name: scalar tensor}``, run with the batch
    fed to `inputs`.  **Eager style**: `metrics` is a function called as
    ``metrics(*batch)`` that returns a scalar or ``{name: scalar}``;
    tensors are read once, after the last batch.

    :meth:`run` (inside an epoch of the loop) fires ``BEFORE_EXECUTION``,
    evaluates every batch, sets :attr:`last_metrics_dict`, passes it to
    ``loop.collect_metrics`` (which may set a new best validation metric),
    fires ``AFTER_EXECUTION``, and records the time it took as
    `time_metric_name`.

    Args:
        loop: The :class:`~tfsnippet.TrainLoop`.
        metrics: See above.
        inputs: Graph style: the placeholders of the batch arrays.
        data_flow: The evaluation batches.
        feed_dict: Extra feeds (graph) or keyword arguments (eager).
        time_metric_name: The name of the time metric (``None``: not timed).
        batch_weight_func: ``f(*batch) -> weight`` of each batch in the mean
            (default: its length); ``None`` weighs all batches equally.

    Raises:
        ValueError: `metrics` is empty or (graph) holds a non-scalar tensor.
        TypeError: `metrics` is neither tensors nor a callable.
    """

    def __init__(self, loop: Any, metrics: Any, inputs: Sequence[Any] | None = None,
                 data_flow: Any = None, feed_dict: Mapping | None = None,
                 time_metric_name: str | None = 'eval_time',
                 batch_weight_func: Callable[..., float] | None = auto_batch_weight):
        from ..scaffold.loop.core import TrainLoop
        if not isinstance(loop, TrainLoop):
            raise TypeError(f'`loop` must be a TrainLoop, got {loop!r}')
        if metrics is None or (isinstance(metrics, Mapping) and not metrics):
            raise ValueError('`metrics` is required: a scalar tensor, a dict of them, or a '
                             'function of the batch returning the metrics')
        if data_flow is None or not hasattr(data_flow, '__iter__'):
            raise ValueError(f'`data_flow` must be an iterable of batches, got {data_flow!r}')
        if time_metric_name is not None and (not isinstance(time_metric_name, str) or
                                             not time_metric_name):
            raise TypeError(f'`time_metric_name` must be a metric name or None, got '
                            f'{time_metric_name!r}')
        if batch_weight_func is not None and not callable(batch_weight_func):
            raise TypeError(f'`batch_weight_func` must be callable or None, got '
                            f'{batch_weight_func!r}')
        graph = not (callable(metrics) and not is_graph_fetch(metrics))
        default_name = loop.valid_metric_name or 'valid_loss'
        if graph and not isinstance(metrics, Mapping):
            metrics = {default_name: metrics}
        self._runner = StepRunner(None if graph else metrics, metrics if graph else None,
                                  inputs, data_flow, feed_dict, default_name=default_name,
                                  op_arg='metrics', graph=graph, graph_desc='graph metrics',
                                  fn_desc='a metrics function')
        for name, t in self._runner.fetches.items():
            if t.shape.rank is not None and t.shape.rank != 0:
                raise ValueError(f'Metric is not a scalar tensor: {name!r} is {t!r}')
        self._loop = loop
        self._data_flow = data_flow
        self._time_metric_name = time_metric_name
        self._batch_weight_func = batch_weight_func
        self._events = EventSource((EventKeys.BEFORE_EXECUTION, EventKeys.AFTER_EXECUTION))
        self._last_metrics_dict: dict[str, float] = {}

    @property
    def loop(self) -> Any:
        """The training loop."""
        return self._loop

    @property
    def events(self) -> EventSource:
        """``BEFORE_EXECUTION`` / ``AFTER_EXECUTION`` of each :meth:`run`."""
        return self._events

    @property
    def metrics(self) -> Any:
        """``{name: tensor}`` (graph) or the metrics function (eager)."""
        return self._runner.fetches if self._runner.graph else self._runner.op

    @property
    def inputs(self) -> list | None:
        """The placeholders (graph style)."""
        return None if self._runner.inputs is None else list(self._runner.inputs)

    @property
    def data_flow(self) -> Any:
        """The evaluation batches."""
        return self._data_flow

    @property
    def feed_dict(self) -> dict:
        """The extra feeds or keyword arguments."""
        return self._runner.feed_dict

    @property
    def time_metric_name(self) -> str | None:
        """The name of the time metric."""
        return self._time_metric_name

    @property
    def batch_weight_func(self) -> Callable[..., float] | None:
        """The batch weight function."""
        return self._batch_weight_func

    @property
    def last_metrics_dict(self) -> dict[str, float]:
        """The metrics of the last run that saw a batch."""
        return self._last_metrics_dict

    def run(self, feed_dict: Mapping | None = None) -> None:
        """Evaluate all batches and collect the weighted means into the loop.

        Raises:
            ValueError: A metric of a batch is not a scalar.
        """
        if self._time_metric_name is not None:
            with self._loop.timeit(self._time_metric_name):
                self._run(feed_dict)
        else:
            self._run(feed_dict)

    def _run(self, feed_dict: Mapping | None) -> None:
        self._events.fire(EventKeys.BEFORE_EXECUTION, self)
        limit = None
        for check in self._loop.components_of(QuickCheck):   # a quick check: a few batches
            limit = check.valid_steps if limit is None else min(limit, check.valid_steps)
        result = self.evaluate(feed_dict, max_batches=limit)
        if result:
            self._last_metrics_dict = result
            self._loop.collect_metrics(result)
        self._events.reverse_fire(EventKeys.AFTER_EXECUTION, self)

    def evaluate(self, feed_dict: Mapping | None = None,
                 max_batches: int | None = None) -> dict[str, float]:
        """The weighted means of the metrics over the batches (the first
        `max_batches` of them, if given), collected nowhere and firing no
        event (``{}`` when there was no batch); what :meth:`run` collects and
        what a :class:`~tfsnippet.SanityCheck` checks.

        Raises:
            ValueError: A metric of a batch is not a scalar.
        """
        values: dict[str, list[Any]] = {}
        weights: list[float] = []
        batches = (self._data_flow if max_batches is None
                   else itertools.islice(self._data_flow, max_batches))
        for batch in batches:
            out, _ = self._runner.run(batch, feed_dict)
            if out is None:
                raise ValueError('The metrics function returned None for a batch; it must '
                                 'return a scalar or a dict of scalars')
            weights.append(1. if self._batch_weight_func is None
                           else float(self._batch_weight_func(*batch)))
            for name, value in out.items():
                values.setdefault(name, []).append(value)
        result: dict[str, float] = {}
        if weights:
            for name, items in values.items():
                if len(items) != len(weights):
                    raise ValueError(f'Metric {name!r} was not returned for every batch')
                backend = self._loop.backend
                if any(is_distributed_value(v) for v in items):
                    # per-replica (or remote) values: reduced across replicas, one host copy
                    items = list(backend.to_host_values(
                        [backend.normalize_metric(name, v) for v in items]))
                arr = [np.asarray(v.numpy() if isinstance(v, tf.Tensor) else v) for v in items]
                for a in arr:
                    if a.shape != ():
                        raise ValueError(f'Metric is not a scalar: {name!r} has value {a!r}')
                result[name] = float(np.average(np.asarray(arr, dtype=np.float64),
                                                weights=weights))
        return result


class Validator(Evaluator):
    """Deprecated: an :class:`Evaluator` timed as ``valid_time``."""

    def __init__(self, *args: Any, **kwargs: Any):
        warnings.warn('Class `Validator` is deprecated; use :class:`Evaluator` instead.',
                      DeprecationWarning, stacklevel=2)
        kwargs.setdefault('time_metric_name', 'valid_time')
        super().__init__(*args, **kwargs)
