"""Trainers over a step: a graph ``train_op`` or an eager step function."""

from __future__ import annotations

import operator
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from .base_trainer import BaseTrainer
from .feed_dict import merge_feed_dict
from .step_runner import StepRunner, is_graph_fetch

__all__ = ['Trainer', 'LossTrainer', 'is_graph_fetch']


_SECOND = operator.itemgetter(1)


class Trainer(BaseTrainer):
    """Trains with one step per batch of `data_flow`, in either TensorFlow style.

    **Graph style**: `train_op` is a graph op (``optimizer.minimize(loss)``)
    and `inputs` the placeholders the arrays of each batch are fed to; each
    step runs ``session.run([train_op] + metrics + summaries)`` and collects
    the metrics.  `summaries` run only when the loop has a summary writer.

    **Eager style**: `train_op` is a step function, typically a
    ``tf.function``, called as ``train_op(*batch, **resolve_feed_dict(feed_dict))``;
    it returns a dict of metrics, a single value (named ``loss``) or
    ``None``.  The metrics are collected as they are, tensors included, so no
    step waits for the device: they are read when the logs are printed.

    Args:
        loop: The :class:`~tfsnippet.TrainLoop`; it needs `max_epoch` or `max_step`.
        train_op: A graph op, or a step function.
        inputs: Graph style: the placeholders, one per array of a batch.
        data_flow: The batches: a DataFlow or any iterable.
        feed_dict: Extra feeds (graph) or keyword arguments (eager); values
            may be ScheduledVariables, DynamicValues or callables.
        metrics: Graph style: ``{name: tensor}`` to run and collect each step.
        summaries: Graph style: summary tensor(s) to run and write.
        ensure_variables_initialized: See :class:`BaseTrainer`.

    Raises:
        TypeError: `train_op` is neither an op nor callable.
        ValueError: The loop has no limit, `data_flow` is missing, `inputs`
            are given with a step function or missing in graph style, or
            their number does not match the batches of `data_flow`.
    """

    def __init__(self, loop: Any, train_op: Any, inputs: Sequence[Any] | None = None,
                 data_flow: Any = None, feed_dict: Mapping | None = None,
                 metrics: Mapping[str, Any] | None = None, summaries: Any = None,
                 ensure_variables_initialized: bool = True):
        super().__init__(loop, ensure_variables_initialized=ensure_variables_initialized)
        if loop.max_epoch is None and loop.max_step is None:
            raise ValueError('At least one of `max_epoch`, `max_step` should be configured '
                             'for `loop`.')
        if data_flow is None:
            raise ValueError('`data_flow` is required: the batches to train on')
        if not hasattr(data_flow, '__iter__'):
            raise TypeError(f'`data_flow` must be iterable, got {data_flow!r}')
        self._runner = StepRunner(train_op, metrics, inputs, data_flow, feed_dict,
                                  default_name='loss', op_arg='train_op')
        if summaries is not None and not isinstance(summaries, (list, tuple)):
            summaries = [summaries]
        if summaries and not self._runner.graph:
            raise ValueError('`summaries` is for a graph `train_op`; a step function '
                             'writes its own')
        self._data_flow = data_flow
        self._summaries = list(summaries or ())

    @property
    def train_op(self) -> Any:
        """The graph op or step function."""
        return self._runner.op

    @property
    def inputs(self) -> tuple | None:
        """The placeholders (graph style), or ``None``."""
        return self._runner.inputs

    @property
    def data_flow(self) -> Any:
        """The batches."""
        return self._data_flow

    @property
    def feed_dict(self) -> dict:
        """The extra feeds (graph) or keyword arguments (eager)."""
        return self._runner.feed_dict

    @property
    def metrics(self) -> dict:
        """Graph style: ``{name: tensor}`` run each step."""
        return self._runner.fetches

    @property
    def summaries(self) -> list:
        """Graph style: the summary tensors run each step when there is a writer."""
        return self._summaries

    def _iter_steps(self) -> Iterator[Any]:
        # the batches of ``(step, batch)``, without a generator frame of its own per step
        return map(_SECOND, self._loop.iter_steps(self._data_flow))

    def _step_caller(self) -> Callable[[Any], Any]:
        runner = self._runner
        if runner.graph or runner.feed_dict or type(self)._run_step is not Trainer._run_step:
            return super()._step_caller()
        # an eager step with only the batch to pass: what `_run_step` does, in one frame
        fn, collect, as_metrics = runner.op, self._loop.collect_metrics, runner.as_metrics

        def run_step(batch: Any) -> None:
            out = fn(*batch)
            if type(out) is dict:
                if out:
                    collect(out)   # read, not kept: the values are stored one by one
            elif out is not None:
                metrics = as_metrics(out)
                if metrics:
                    collect(metrics)
        return run_step

    def _run_step(self, batch: Any) -> None:
        loop = self._loop
        summaries = self._summaries if self._summaries and loop.summary_writer is not None else ()
        metrics, summary_values = self._runner.run(batch, extra_fetches=summaries)
        if metrics:
            loop.collect_metrics(metrics)
        for summary in summary_values:
            loop.add_summary(summary)


class LossTrainer(Trainer):
    """Deprecated: ``Trainer(..., metrics={metric_name: loss})``."""

    def __init__(self, loop: Any, loss: Any, train_op: Any, inputs: Sequence[Any],
                 data_flow: Any, feed_dict: Mapping | None = None, metric_name: str = 'loss'):
        warnings.warn('Class `LossTrainer` is deprecated; use :class:`Trainer` instead.',
                      DeprecationWarning, stacklevel=2)
        super().__init__(loop, train_op, inputs, data_flow, feed_dict=feed_dict,
                         metrics={metric_name: loss})

    @property
    def loss(self) -> Any:
        """The loss tensor."""
        return next(iter(self._runner.fetches.values()))

    @property
    def metric_name(self) -> str:
        """The name of the loss metric."""
        return next(iter(self._runner.fetches))

    def run(self, feed_dict: Mapping | None = None) -> None:
        """Run; a `feed_dict` given here is merged in for this run only."""
        if feed_dict is None:
            return super().run()
        old = self._runner.feed_dict
        self._runner.feed_dict = merge_feed_dict(old, feed_dict)
        try:
            super().run()
        finally:
            self._runner.feed_dict = old
