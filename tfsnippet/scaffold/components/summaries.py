"""The loop component that writes collected metrics as TensorBoard scalars."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from tensorboard.compat.proto import summary_pb2

from ...backend.values import ReplicaValue, to_host_values
from ...utils.events import Every
from ...storage import is_url, resolve
from ...tfops.tf_vars import variable_name
from ...utils.validation import check_positive_int
from ...tfops.var_io import read_variables
from ..event_keys import EventKeys
from ..metrics.sinks import EPOCH, EPOCH_LOG, STEP_LOG, MetricSink
from ..metrics.values import to_float
from ..summary_collector import histogram_summary
from ..summary_writer import (BUFFER_LIMIT, DEFAULT_SUMMARY_SKIP_PATTERN, STEPS_PER_SEC_TAG,
                              CommitSchedules, SummaryWriter, as_summary_proto,
                              check_skip_pattern, check_summary_dir, check_summary_writer)
from .base import LoopComponent
from .suspend import SuspendableWrites

__all__ = ['SummaryLogger', 'SUMMARY_STREAMS']

#: What a :class:`SummaryLogger` writes: every value, the means of each log
#: line, or the means of each epoch.
SUMMARY_STREAMS = ('values', 'logs', 'epochs')


class SummaryLogger(LoopComponent, MetricSink, SuspendableWrites):
    """Writes the metrics a :class:`~tfsnippet.TrainLoop` collects as TensorBoard scalars.

    Used by ``TrainLoop(summary_dir=...)``/``TrainLoop(summary_writer=...)``.
    With `histogram_freq`, histograms of the loop's `param_vars` are
    written every that many epochs (tags ``params/<name>``), in both styles.

    What it writes is its `stream`:

    * ``'values'`` (the classic stream, the default in one process): every
      collected value at its step, as the loop's metric book stored it
      (eager variables already read).  The values are buffered and written
      at the end of each epoch, every 1024 values and when the loop exits,
      so eager tensors are copied to the host in batches rather than on
      every step.
    * ``'logs'`` (the default under multi-worker training): the mean of each
      metric each time the logs are printed (``print_logs()``, step- or
      epoch-level), at the loop's step; under multi-worker training these
      are merged across the workers, so the scalars are those of the whole
      global batch.
    * ``'epochs'``: the mean of each metric over each epoch, when it ends
      (printed or not), at the loop's step.

    ``'logs'`` and ``'epochs'`` are the statistics the loop announces to
    every sink (see :mod:`tfsnippet.scaffold.metrics.sinks`): the logger is
    TensorBoard's :class:`~tfsnippet.scaffold.metrics.sinks.MetricSink`, and
    its :meth:`write_stats` writes the means it receives.

    Under a ``tf.distribute`` strategy only the chief writes (the other
    workers open no writer and write nothing).
    """

    role = 'summaries'

    def __init__(self, summary_dir: str | None = None, summary_writer: Any = None,
                 metric_prefix: str = 'metrics/', skip_pattern: Any = DEFAULT_SUMMARY_SKIP_PATTERN,
                 commit_freqs: Mapping[str, int] | None = None, graph: Any = None,
                 histogram_freq: int | None = None, stream: str | None = None):
        summary_writer = check_summary_writer(summary_writer)
        if summary_dir is None and summary_writer is None:
            raise ValueError('One of `summary_dir` and `summary_writer` is required')
        if not isinstance(metric_prefix, str):
            raise TypeError(f'`summary_metric_prefix` must be a str, got {metric_prefix!r}')
        skip_pattern = check_skip_pattern(skip_pattern)
        self._commits = CommitSchedules(commit_freqs)
        self._histogram_freq = check_positive_int(histogram_freq, 'summary_histogram_freq',
                                                  allow_none=True)
        if stream is not None and stream not in SUMMARY_STREAMS:
            raise ValueError(f'`stream` must be one of {", ".join(map(repr, SUMMARY_STREAMS))} '
                             f'or None (the default: values in one process, logs under '
                             f'multi-worker training), got {stream!r}')
        self._stream = stream
        if graph is not None and not hasattr(graph, 'as_graph_def'):
            raise TypeError(f'`summary_graph` must be a tf.Graph, got {graph!r}')
        if summary_dir is not None and is_url(summary_dir, argument='summary_dir'):
            # an unknown protocol or a missing package fails here, never a local folder
            resolve(summary_dir, argument='summary_dir')
        self._summary_dir = summary_dir
        self._writer = summary_writer
        self._owns_writer = False
        self._prefix = metric_prefix
        self._skip = skip_pattern
        self._graph = graph
        self._tags: dict[str, str | None] = {}   # name -> tag, or None when skipped
        self._buffer: list[tuple[int, str, str, Any]] = []   # (step, tag, name, value)
        self._epoch_start: tuple[float, int] | None = None
        self._silent = False   # a worker that is not the chief
        self._scopes: tuple[str, ...] = ()   # of the statistics written (not 'values')

    @property
    def writer(self) -> Any:
        """The summary writer (``None`` until the loop is entered with `summary_dir`)."""
        return self._writer

    @property
    def summary_dir(self) -> str | None:
        """The folder the summaries go to: `summary_dir`, else the given writer's
        (``None`` if it does not say)."""
        if self._summary_dir is not None:
            return self._summary_dir
        writer = self._writer
        if isinstance(writer, SummaryWriter):
            return writer.logdir
        get_logdir = getattr(writer, 'get_logdir', None)
        return str(get_logdir()) if callable(get_logdir) else None

    def _tag(self, name: str) -> str | None:
        tag = self._tags.get(name, '')
        if tag == '':
            skip = self._skip is not None and self._skip.match(name)
            tag = self._tags[name] = None if skip else self._prefix + name
        return tag

    def _on_metrics(self, loop: Any, metrics: Mapping[str, Any]) -> None:
        step = loop.step
        buffer = self._buffer
        for name, value in metrics.items():
            tag = self._tag(name)
            if tag is None:
                continue
            if self._commits.due(name):
                buffer.append((step, tag, name, value))
        if len(buffer) >= BUFFER_LIMIT:
            with self.hold(loop, 'summaries'):
                self.flush()

    @property
    def stream(self) -> str | None:
        """``'values'``, ``'logs'`` or ``'epochs'``; ``None`` (the default) until
        the loop is entered, which chooses."""
        return self._stream

    def _on_reduced(self, loop: Any, scope: str, stats: Mapping[str, Mapping[str, Any]]) -> None:
        if scope in self._scopes:
            self.write_stats(scope, loop.step, loop.epoch, stats)

    # ------------------------------------------------------------ the MetricSink
    def write_stats(self, scope: str, step: int, epoch: int,
                    stats: Mapping[str, Mapping[str, Any]]) -> None:
        """Buffer the mean of each metric as a scalar at `step` (names matching
        the skip pattern skipped, commit frequencies applied)."""
        for name, s in stats.items():
            tag = self._tag(name)
            if tag is not None and self._commits.due(name):
                self._buffer.append((step, tag, name, float(s['mean'])))

    def close(self, status: str) -> None:
        """Write what is buffered; close the writer if the logger opened it."""
        self._close_writer()

    def _on_before_epoch(self, loop: Any) -> None:
        self._epoch_start = (getattr(loop, '_clock', loop.clock)(), loop.step)

    def _on_after_epoch(self, loop: Any) -> None:
        if self._epoch_start is not None:
            start, first_step = self._epoch_start
            elapsed = getattr(loop, '_clock', loop.clock)() - start
            if loop.step > first_step and elapsed > 0:
                self._buffer.append((loop.step, STEPS_PER_SEC_TAG, STEPS_PER_SEC_TAG,
                                     (loop.step - first_step) / elapsed))
        with self.hold(loop, 'summaries'):
            self.flush()

    def add_summary(self, summary: Any, step: int) -> None:
        """Write a summary proto (or its bytes) at `step`, after the buffered values
        (nothing on a worker that is not the chief)."""
        if self._silent:
            return
        self.flush()
        self._write(as_summary_proto(summary), step)

    def _write(self, summary: summary_pb2.Summary, step: int) -> None:
        if isinstance(self._writer, SummaryWriter):
            self._writer.add_summary(summary, step)
        else:  # a foreign writer (tf.compat.v1.summary.FileWriter) takes serialized bytes
            self._writer.add_summary(summary.SerializeToString(), step)

    def flush(self) -> None:
        """Write the buffered values and flush the writer."""
        if self._buffer:
            buffer, self._buffer = self._buffer, []
            by_step: dict[int, dict[str, float]] = {}
            # scalar per-replica values: to the host in one go per device, not one by one
            scalar = [i for i, entry in enumerate(buffer) if type(entry[3]) is ReplicaValue
                      and all(getattr(p, 'shape', ()) == () for p in entry[3].parts)]
            host = dict(zip(scalar, to_host_values([buffer[i][3] for i in scalar]))
                        if scalar else ())
            for i, (step, tag, name, value) in enumerate(buffer):
                by_step.setdefault(step, {})[tag] = (
                    float(host[i]) if i in host else to_float(name, value))
            for step, values in by_step.items():
                self._write(summary_pb2.Summary(value=[
                    summary_pb2.Summary.Value(tag=t, simple_value=v)
                    for t, v in values.items()]), step)
        if self._writer is not None:
            self._writer.flush()

    # ------------------------------------------------------------ component hooks
    def on_enter(self, loop: Any) -> None:
        # suspended (a quick check): as silent as a worker that is not the chief
        self._silent = not loop.is_chief or self._writes_suspended is not None
        if self._silent:
            return
        if self._writer is None:
            assert self._summary_dir is not None   # one of the two is given
            check_summary_dir(self._summary_dir, 'summary_dir')
            self._writer = SummaryWriter(self._summary_dir)
            self._owns_writer = True
        if self._graph is not None:
            if isinstance(self._writer, SummaryWriter):
                self._writer.add_graph(self._graph)
            elif callable(getattr(self._writer, 'add_graph', None)):
                self._writer.add_graph(self._graph)
        self._commits.reset()
        stream = self._stream
        if stream is None:
            # per-print means, merged across workers, under multi-worker training
            stream = self._stream = 'logs' if loop.backend.num_workers > 1 else 'values'
        if stream == 'values':
            self.subscribe(loop, EventKeys.METRICS_COLLECTED, self._on_metrics)
            self.subscribe(loop, EventKeys.TIME_METRICS_COLLECTED, self._on_metrics)
        else:
            self._scopes = (STEP_LOG, EPOCH_LOG) if stream == 'logs' else (EPOCH,)
            self.subscribe(loop, EventKeys.METRIC_STATS_REDUCED, self._on_reduced)
        self.subscribe(loop, EventKeys.BEFORE_EPOCH, self._on_before_epoch)
        self.subscribe(loop, EventKeys.AFTER_EPOCH, self._on_after_epoch)
        if self._histogram_freq is not None:
            self.subscribe(loop, EventKeys.AFTER_EPOCH, self._write_histograms,
                           every=Every(epochs=self._histogram_freq))

    def _write_histograms(self, loop: Any) -> None:
        """Histograms of `param_vars` (one host copy of them all), as Keras's
        ``histogram_freq`` does."""
        params = loop.param_vars
        names = (list(params) if isinstance(params, dict)
                 else [variable_name(v) for v in params])
        variables = list(params.values()) if isinstance(params, dict) else list(params)
        if variables:
            self.flush()
            for name, value in zip(names, read_variables(variables)):
                self._write(histogram_summary(f'params/{name}', value), loop.step)

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        if self._silent:
            self._silent = False
            return
        self._close_writer()

    def _close_writer(self) -> None:
        try:
            self.flush()
        finally:
            if self._owns_writer:
                self._writer.close()
                self._writer = None
                self._owns_writer = False
