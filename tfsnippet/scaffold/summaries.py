"""TensorBoard event files written from Python, in graph and eager mode.

:class:`SummaryWriter` is built on tensorboard's pure-Python event file
writer: it writes scalar summaries (read by TensorBoard as scalars, not
tensors), serialized summaries from ``session.run`` and graphs, costs about
40 µs an event and needs neither a session nor eager execution.  TF2's
``tf.summary.create_file_writer`` works in eager mode only and writes
scalars as tensors; ``tf.compat.v1.summary.FileWriter`` works in graph mode
only.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from .component import LoopComponent
from ..utils.validation import check_positive_int, check_positive_number
from .event_keys import EventKeys

__all__ = ['SummaryWriter', 'SummaryLogger', 'DEFAULT_SUMMARY_SKIP_PATTERN']

#: By default, metrics whose names end in ``time`` or ``timer`` are not written.
DEFAULT_SUMMARY_SKIP_PATTERN = re.compile(r'.*(time|timer)$')

#: The steps-per-second scalar written at the end of each epoch (TF's Supervisor name).
STEPS_PER_SEC_TAG = 'global_step/sec'

_BUFFER_LIMIT = 1024


def _as_summary_proto(summary: Any) -> summary_pb2.Summary:
    if isinstance(summary, summary_pb2.Summary):
        return summary
    if isinstance(summary, (bytes, bytearray)):
        return summary_pb2.Summary.FromString(bytes(summary))
    if isinstance(summary, np.ndarray) and summary.dtype.kind in 'SO' and summary.shape == ():
        return summary_pb2.Summary.FromString(summary.item())
    if hasattr(summary, 'SerializeToString') and type(summary).__name__ == 'Summary':
        return summary_pb2.Summary.FromString(summary.SerializeToString())
    raise TypeError(
        f'`summary` must be a Summary protocol buffer or its serialized bytes '
        f'(e.g. what `session.run` returns for a merged summary), got {summary!r}')


class SummaryWriter:
    """Writes TensorBoard event files; works in graph and eager mode.

    Args:
        logdir: The directory of the event files (created if needed).
        flush_secs: Flush the queued events at least this often.
        max_queue: Queue this many events before writing them.

    Example:
        >>> import tempfile
        >>> with SummaryWriter(tempfile.mkdtemp()) as w:
        ...     w.add_scalars({'loss': 0.5, 'acc': 0.9}, step=1)
    """

    def __init__(self, logdir: str, flush_secs: float = 10., max_queue: int = 100):
        if not isinstance(logdir, str) or not logdir:
            raise ValueError(f'`logdir` must be a directory path, got {logdir!r}')
        flush_secs = check_positive_number(flush_secs, 'flush_secs')
        max_queue = check_positive_int(max_queue, 'max_queue')
        self._writer = EventFileWriter(logdir, max_queue_size=max_queue, flush_secs=flush_secs)
        self._closed = False

    @property
    def logdir(self) -> str:
        """The directory of the event files."""
        return self._writer.get_logdir()

    def _add(self, step: int, wall_time: float | None = None, **fields: Any) -> None:
        if self._closed:
            raise RuntimeError('This SummaryWriter has been closed')
        self._writer.add_event(event_pb2.Event(
            wall_time=time.time() if wall_time is None else wall_time, step=int(step), **fields))

    def add_scalars(self, values: Mapping[str, float], step: int,
                    wall_time: float | None = None) -> None:
        """Write ``{tag: value}`` as scalar summaries at `step`."""
        summary = summary_pb2.Summary(value=[
            summary_pb2.Summary.Value(tag=tag, simple_value=float(v)) for tag, v in values.items()])
        self._add(step, wall_time, summary=summary)

    def add_summary(self, summary: Any, step: int) -> None:
        """Write a ``Summary`` proto or its serialized bytes at `step`.

        Raises:
            TypeError: `summary` is neither.
        """
        self._add(step, summary=_as_summary_proto(summary))

    def add_graph(self, graph: Any) -> None:
        """Write a ``tf.Graph`` (or ``GraphDef``) for TensorBoard's graph view."""
        graph_def = graph.as_graph_def() if hasattr(graph, 'as_graph_def') else graph
        self._add(0, graph_def=graph_def.SerializeToString())

    def flush(self) -> None:
        """Write the queued events to disk."""
        if not self._closed:
            self._writer.flush()

    def close(self) -> None:
        """Flush and close the event file; later writes raise."""
        if not self._closed:
            self._closed = True
            self._writer.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def check_summary_writer(writer: Any, arg_name: str = 'summary_writer') -> Any:
    """Accept a :class:`SummaryWriter` or an object with ``add_summary(summary, step)``."""
    if writer is None or isinstance(writer, SummaryWriter):
        return writer
    if callable(getattr(writer, 'add_summary', None)) and callable(getattr(writer, 'flush', None)):
        return writer  # e.g. tf.compat.v1.summary.FileWriter
    raise TypeError(
        f'`{arg_name}` must be a tfsnippet SummaryWriter or a writer with '
        f'`add_summary(summary, global_step)` such as tf.compat.v1.summary.FileWriter, '
        f'got {writer!r}')


class SummaryLogger(LoopComponent):
    """Writes the metrics a :class:`~tfsnippet.TrainLoop` collects as TensorBoard scalars.

    Used by ``TrainLoop(summary_dir=...)``/``TrainLoop(summary_writer=...)``.
    Values are buffered and written at the end of each epoch, every
    1024 values and when the loop exits, so eager tensors are copied to the
    host in batches rather than on every step.
    """

    def __init__(self, summary_dir: str | None = None, summary_writer: Any = None,
                 metric_prefix: str = 'metrics/', skip_pattern: Any = DEFAULT_SUMMARY_SKIP_PATTERN,
                 commit_freqs: Mapping[str, int] | None = None, graph: Any = None):
        summary_writer = check_summary_writer(summary_writer)
        if summary_dir is None and summary_writer is None:
            raise ValueError('One of `summary_dir` and `summary_writer` is required')
        if not isinstance(metric_prefix, str):
            raise TypeError(f'`summary_metric_prefix` must be a str, got {metric_prefix!r}')
        if isinstance(skip_pattern, str):
            skip_pattern = re.compile(skip_pattern)
        elif skip_pattern is not None and not isinstance(skip_pattern, re.Pattern):
            raise TypeError(
                f'`summary_skip_pattern` must be a regex, a str or None, got {skip_pattern!r}')
        freqs = {name: check_positive_int(freq, f'summary_commit_freqs[{name!r}]')
                 for name, freq in (commit_freqs or {}).items()}
        if graph is not None and not hasattr(graph, 'as_graph_def'):
            raise TypeError(f'`summary_graph` must be a tf.Graph, got {graph!r}')
        self._summary_dir = summary_dir
        self._writer = summary_writer
        self._owns_writer = False
        self._prefix = metric_prefix
        self._skip = skip_pattern
        self._freqs = freqs
        self._counters: dict[str, int] = {}
        self._graph = graph
        self._tags: dict[str, str | None] = {}   # name -> tag, or None when skipped
        self._buffer: list[tuple[int, str, Any]] = []
        self._handles: list[Any] = []
        self._epoch_start: tuple[float, int] | None = None

    @property
    def writer(self) -> Any:
        """The summary writer (``None`` until the loop is entered with `summary_dir`)."""
        return self._writer

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
            freq = self._freqs.get(name)
            if freq is not None:
                count = self._counters.get(name, 0)
                self._counters[name] = count + 1
                if count % freq:
                    continue
            buffer.append((step, tag, value))
        if len(buffer) >= _BUFFER_LIMIT:
            self.flush()

    def _on_before_epoch(self, loop: Any) -> None:
        self._epoch_start = (loop.clock(), loop.step)

    def _on_after_epoch(self, loop: Any) -> None:
        if self._epoch_start is not None:
            start, first_step = self._epoch_start
            elapsed = loop.clock() - start
            if loop.step > first_step and elapsed > 0:
                self._buffer.append((loop.step, STEPS_PER_SEC_TAG,
                                     (loop.step - first_step) / elapsed))
        self.flush()

    def add_summary(self, summary: Any, step: int) -> None:
        """Write a summary proto (or its bytes) at `step`, after the buffered values."""
        self.flush()
        self._write(_as_summary_proto(summary), step)

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
            for step, tag, value in buffer:
                if isinstance(value, tf.Tensor):
                    value = value.numpy()
                by_step.setdefault(step, {})[tag] = float(np.mean(value))
            for step, values in by_step.items():
                self._write(summary_pb2.Summary(value=[
                    summary_pb2.Summary.Value(tag=t, simple_value=v)
                    for t, v in values.items()]), step)
        if self._writer is not None:
            self._writer.flush()

    # ------------------------------------------------------------ component hooks
    def on_enter(self, loop: Any) -> None:
        if self._writer is None:
            self._writer = SummaryWriter(self._summary_dir)
            self._owns_writer = True
        if self._graph is not None:
            if isinstance(self._writer, SummaryWriter):
                self._writer.add_graph(self._graph)
            elif callable(getattr(self._writer, 'add_graph', None)):
                self._writer.add_graph(self._graph)
        events = loop.events
        self._handles = [
            events.on(EventKeys.METRICS_COLLECTED, self._on_metrics),
            events.on(EventKeys.TIME_METRICS_COLLECTED, self._on_metrics),
            events.on(EventKeys.BEFORE_EPOCH, self._on_before_epoch),
            events.on(EventKeys.AFTER_EPOCH, self._on_after_epoch),
        ]

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        for h in self._handles:
            h.remove()
        self._handles = []
        try:
            self.flush()
        finally:
            if self._owns_writer:
                self._writer.close()
                self._writer = None
                self._owns_writer = False
