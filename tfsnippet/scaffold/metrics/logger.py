"""A metric logger outside any loop: statistics as one log line, optionally TensorBoard."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf
from tensorboard.compat.proto import summary_pb2

from ...tfops.session import get_default_session_or_error
from ...utils.statistics import StatisticsCollector
from ..summary_writer import CommitSchedules, SummaryWriter, check_summary_writer
from .book import MetricBook
from .console import DefaultMetricFormatter, MetricFormatter, format_metric_stats
from .values import to_float

__all__ = ['MetricLogger']


class MetricLogger:
    """Collects metric values and formats their statistics as one log line.

    Each value counts as one sample; each element of an array counts as one
    equally weighted sample.  Values are kept in a :class:`MetricBook` and
    reduced lazily, so collecting is a cheap append and eager tensors are
    copied to the host only when the statistics are read (:attr:`metrics`,
    :meth:`format_logs`).

    With a `summary_writer`, each :meth:`collect_metrics` call also writes
    the mean of each value as a TensorBoard scalar ``summary_metric_prefix +
    name`` at its `global_step` (names matching `summary_skip_pattern` are
    not written; ``summary_commit_freqs={name: N}`` writes values 1, 1+N,
    1+2N...), as the classic logger did.

    Args:
        summary_writer: A :class:`SummaryWriter` or a
            ``tf.compat.v1.summary.FileWriter``; ``None`` writes nothing.
        summary_metric_prefix: Prefix of the scalar tags.
        summary_skip_pattern: A regex (or str) of names not to write.
        summary_commit_freqs: ``{name: N}``: write every N-th value only.
        formatter: Orders and formats the metrics; a
            :class:`DefaultMetricFormatter` by default.

    Example:
        >>> logger = MetricLogger()
        >>> logger.collect_metrics({'loss': 0.8, 'step_time': 0.5})
        >>> logger.collect_metrics({'loss': 0.6})
        >>> logger.format_logs()
        'step time: 0.5s; loss: 0.7 (±0.1)'

    .. versionchanged:: 0.3
       The classic summary arguments are back; `formatter` is a keyword
       argument (it was the first positional one in 0.2).
    """

    def __init__(self, summary_writer: Any = None, summary_metric_prefix: str = '',
                 summary_skip_pattern: str | re.Pattern[str] | None = None,
                 summary_commit_freqs: Mapping[str, int] | None = None,
                 formatter: MetricFormatter | None = None):
        if isinstance(summary_writer, MetricFormatter) and formatter is None:
            formatter, summary_writer = summary_writer, None   # the 0.2 positional form
        self._writer = check_summary_writer(summary_writer)
        if not isinstance(summary_metric_prefix, str):
            raise TypeError(f'`summary_metric_prefix` must be a str, got '
                            f'{summary_metric_prefix!r}')
        if isinstance(summary_skip_pattern, str):
            summary_skip_pattern = re.compile(summary_skip_pattern)
        elif summary_skip_pattern is not None and not isinstance(summary_skip_pattern,
                                                                 re.Pattern):
            raise TypeError(f'`summary_skip_pattern` must be a regex, a str or None, got '
                            f'{summary_skip_pattern!r}')
        if formatter is not None and not isinstance(formatter, MetricFormatter):
            raise TypeError(f'`formatter` must be a MetricFormatter, got {formatter!r}')
        self._prefix = summary_metric_prefix
        self._skip = summary_skip_pattern
        self._commits = CommitSchedules(summary_commit_freqs)
        self._formatter = formatter if formatter is not None else DefaultMetricFormatter()
        self._book = MetricBook()

    @property
    def formatter(self) -> MetricFormatter:
        """The metric formatter."""
        return self._formatter

    @property
    def summary_writer(self) -> Any:
        """The summary writer, or ``None``."""
        return self._writer

    def collect_metrics(self, metrics: Mapping[str, Any], global_step: Any = None) -> None:
        """Add the values of `metrics` (``{name: value}``); with a summary writer,
        write them at `global_step` (an int, or a tensor or variable, read now).

        Raises:
            TypeError: `metrics` is not a mapping, or a value is not numeric.
            ValueError: There is a summary writer but no `global_step`.
        """
        if not isinstance(metrics, Mapping):
            raise TypeError(f'`metrics` should be a dict, got {metrics!r}')
        stored = self._book.collect(metrics, within_step=False)
        self._book.compact()
        if self._writer is not None:
            self._write(stored, global_step)

    def _write(self, stored: Mapping[str, Any], global_step: Any) -> None:
        if global_step is None:
            raise ValueError('`global_step` is required when the logger has a summary writer')
        if isinstance(global_step, (tf.Tensor, tf.Variable)):
            global_step = (global_step.numpy() if tf.executing_eagerly()
                           else get_default_session_or_error().run(global_step))
        values = []
        for name, value in stored.items():
            if self._skip is not None and self._skip.match(name):
                continue
            if not self._commits.due(name):
                continue
            values.append(summary_pb2.Summary.Value(tag=self._prefix + name,
                                                    simple_value=to_float(name, value)))
        if values:
            summary = summary_pb2.Summary(value=values)
            if isinstance(self._writer, SummaryWriter):
                self._writer.add_summary(summary, int(np.asarray(global_step)))
            else:
                self._writer.add_summary(summary.SerializeToString(), int(np.asarray(global_step)))

    @property
    def metrics(self) -> dict[str, StatisticsCollector]:
        """``{name: StatisticsCollector}`` of every metric collected since the last clear."""
        return self._book.epoch_stats()

    def clear(self) -> None:
        """Forget all metrics (their names too) and restart the commit counters."""
        self._book.clear(forget_names=True)
        self._commits.reset()

    def format_logs(self) -> str:
        """Return ``'name: mean (±stddev); ...'`` over the collected metrics.

        Underscores in names read as spaces; the ``(±...)`` part appears only
        for metrics with more than one sample.  Nothing collected gives ``''``.
        """
        return format_metric_stats(self.metrics, self._formatter)
