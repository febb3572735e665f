"""TensorBoard event files written from Python, in graph and eager mode.

:class:`SummaryWriter` is built on tensorboard's pure-Python event file
writer: it writes scalar summaries (read by TensorBoard as scalars, not
tensors), serialized summaries from ``session.run`` and graphs, costs about
40 µs an event and needs neither a session nor eager execution.  TF2's
``tf.summary.create_file_writer`` works in eager mode only and writes
scalars as tensors; ``tf.compat.v1.summary.FileWriter`` works in graph mode
only.

A `logdir` that is an object-store URL (``s3://bucket/logs``, ``gs://...``;
see :func:`tfsnippet.storage.resolve`) is written into a local staging
folder, and a background thread uploads each event file whole (an object
store cannot append) at every flush, every `flush_secs`, and at close, so
the loop never waits for the network.  TensorBoard reads the uploaded files
as they are; a run killed between two uploads loses at most the events of
those seconds.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from ..storage import Location, check_bucket, is_url, resolve
from ..utils.events import NO_COUNTERS, Every
from ..utils.validation import check_positive_int, check_positive_number

__all__ = ['SummaryWriter', 'DEFAULT_SUMMARY_SKIP_PATTERN']

#: By default, metrics whose names end in ``time`` or ``timer`` are not written.
DEFAULT_SUMMARY_SKIP_PATTERN = re.compile(r'.*(time|timer)$')

#: The steps-per-second scalar written at the end of each epoch (TF's Supervisor name).
STEPS_PER_SEC_TAG = 'global_step/sec'

BUFFER_LIMIT = 1024


def as_summary_proto(summary: Any) -> summary_pb2.Summary:
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


def _as_proto(value: Any, proto_type: Any, arg_name: str) -> Any:
    """`value` (a protocol buffer of the same name, from TensorFlow or
    tensorboard) as a `proto_type`."""
    if isinstance(value, proto_type):
        return value
    if type(value).__name__ == proto_type.__name__ and hasattr(value, 'SerializeToString'):
        return proto_type.FromString(value.SerializeToString())
    raise TypeError(
        f'`{arg_name}` must be a {proto_type.__name__} protocol buffer, got '
        f'{type(value).__name__}')


class _Uploader:
    """Uploads the files of a local staging folder to a URL, whole, from a
    background thread: when asked (:meth:`request`), every `interval` seconds,
    and a last time at :meth:`close`.  A file is uploaded again only when its
    size changed.  An upload error is warned about once; later uploads go on."""

    def __init__(self, local_dir: str, location: Location, interval: float) -> None:
        self._local = local_dir
        self._location = location
        self._interval = interval
        self._sizes: dict[str, int] = {}
        self._wake = threading.Event()
        self._stopping = False
        self._warned = False
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f'tfsnippet-summary-upload-{location.url}')
        self._thread.start()

    def request(self) -> None:
        """Upload what changed soon (returns at once)."""
        self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(self._interval)
            self._wake.clear()
            stopping = self._stopping
            self.upload_changed()
            if stopping:
                return

    def upload_changed(self) -> None:
        try:
            names = sorted(os.listdir(self._local))
        except OSError:
            return
        for name in names:
            path = os.path.join(self._local, name)
            try:
                size = os.path.getsize(path)
                if self._sizes.get(name) == size:
                    continue
                self._location.fs.put_file(path, self._location.join(name).path)
                self._sizes[name] = size
            except Exception as e:  # noqa: BLE001 - a failed upload never stops training
                if not self._warned:
                    self._warned = True
                    warnings.warn(f'Could not upload the event file {name!r} to '
                                  f'{self._location.url}: {e} (retried at the next flush)',
                                  RuntimeWarning, stacklevel=2)

    def close(self) -> None:
        """Upload what changed a last time, and stop the thread."""
        self._stopping = True
        self._wake.set()
        self._thread.join()


class SummaryWriter:
    """Writes TensorBoard event files; works in graph and eager mode.

    Args:
        logdir: The directory of the event files (created if needed), or an
            object-store URL (event files are staged locally and uploaded in
            the background, see the module's description).
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
        self._remote: Location | None = None
        if is_url(logdir, argument='logdir'):
            self._remote = resolve(logdir, argument='logdir')
        self._options = (logdir, max_queue, flush_secs)
        self._uploader: _Uploader | None = None
        self._staging = ''
        self._writer = self._open()
        self._closed = False

    def _open(self) -> EventFileWriter:
        logdir, max_queue, flush_secs = self._options
        if self._remote is None:
            return EventFileWriter(logdir, max_queue_size=max_queue, flush_secs=flush_secs)
        self._staging = tempfile.mkdtemp(prefix='tfsnippet-summaries-')
        self._uploader = _Uploader(self._staging, self._remote, flush_secs)
        return EventFileWriter(self._staging, max_queue_size=max_queue, flush_secs=flush_secs)

    @property
    def logdir(self) -> str:
        """The directory of the event files (the URL for an object store)."""
        if self._remote is not None:
            return self._remote.url
        return self._writer.get_logdir()

    def _add(self, step: int, wall_time: float | None = None, **fields: Any) -> None:
        self._check_open()
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
        self._add(step, summary=as_summary_proto(summary))

    def add_graph(self, graph: Any) -> None:
        """Write a ``tf.Graph`` (or ``GraphDef``) for TensorBoard's graph view."""
        graph_def = graph.as_graph_def() if hasattr(graph, 'as_graph_def') else graph
        self._add(0, graph_def=graph_def.SerializeToString())

    # ------------------------------------------------------------ classic FileWriter methods
    def get_logdir(self) -> str:
        """The directory of the event files (the classic name of :attr:`logdir`)."""
        return self.logdir

    def add_event(self, event: Any) -> None:
        """Write an ``Event`` protocol buffer (TensorFlow's or tensorboard's) as it is.

        Raises:
            TypeError: `event` is not an ``Event``.
        """
        self._check_open()
        self._writer.add_event(_as_proto(event, event_pb2.Event, 'event'))

    def add_run_metadata(self, run_metadata: Any, tag: str,
                         global_step: int | None = None) -> None:
        """Write the ``RunMetadata`` of a ``session.run`` (step statistics for
        TensorBoard's graph view) under `tag`.

        Raises:
            TypeError: `run_metadata` is not a ``RunMetadata`` or `tag` not a str.
        """
        if not isinstance(tag, str):
            raise TypeError(f'`tag` must be a str, got {tag!r}')
        if type(run_metadata).__name__ != 'RunMetadata' or not hasattr(
                run_metadata, 'SerializeToString'):
            raise TypeError(
                f'`run_metadata` must be a RunMetadata protocol buffer, got '
                f'{type(run_metadata).__name__}')
        tagged = event_pb2.TaggedRunMetadata(
            tag=tag, run_metadata=run_metadata.SerializeToString())
        self._add(0 if global_step is None else global_step, tagged_run_metadata=tagged)

    def add_session_log(self, session_log: Any, global_step: int | None = None) -> None:
        """Write a ``SessionLog`` (e.g. ``SessionLog(status=SessionLog.START)``, which
        tells TensorBoard that a restarted job discards the events after `global_step`).

        Raises:
            TypeError: `session_log` is not a ``SessionLog``.
        """
        self._add(0 if global_step is None else global_step,
                  session_log=_as_proto(session_log, event_pb2.SessionLog, 'session_log'))

    def reopen(self) -> None:
        """Open a new event file in the same directory after :meth:`close` (no-op
        while open), as ``tf.compat.v1.summary.FileWriter.reopen`` does."""
        if self._closed:
            self._writer = self._open()
            self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError('This SummaryWriter has been closed')

    def flush(self) -> None:
        """Write the queued events to disk (for a URL: and upload them, in the background)."""
        if not self._closed:
            self._writer.flush()
            if self._uploader is not None:
                self._uploader.request()

    def close(self) -> None:
        """Flush and close the event file (for a URL: upload it, and wait for that);
        later writes raise."""
        if not self._closed:
            self._closed = True
            self._writer.close()
            if self._uploader is not None:
                self._uploader.close()
                self._uploader = None
                shutil.rmtree(self._staging, ignore_errors=True)

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def check_summary_dir(summary_dir: str, arg_name: str = 'summary_dir') -> None:
    """Check that event files can be written to `summary_dir`: a local folder
    (made if needed) or an object-store URL whose bucket exists.

    Raises:
        ValueError: The folder cannot be written, the URL's protocol is
            unknown, or its bucket does not exist or refuses the credentials.
        ~tfsnippet.storage.StorageUnavailableError: The URL's package is not installed.
    """
    from ..utils.files import check_writable_dir
    if is_url(summary_dir, argument=arg_name):
        check_bucket(resolve(summary_dir, argument=arg_name), arg_name)
    else:
        check_writable_dir(summary_dir, arg_name)


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


def check_commit_freqs(freqs: Mapping[str, int] | None) -> dict[str, int]:
    """Check ``summary_commit_freqs``: ``{metric name: positive int}``."""
    if freqs is None:
        return {}
    if not isinstance(freqs, Mapping):
        raise TypeError(f'`summary_commit_freqs` must be a dict {{metric name: N}}, got {freqs!r}')
    return {name: check_positive_int(freq, f'summary_commit_freqs[{name!r}]')
            for name, freq in freqs.items()}


def check_skip_pattern(pattern: Any) -> re.Pattern[str] | None:
    """Check ``summary_skip_pattern``: a regex, a str (compiled) or ``None``."""
    if isinstance(pattern, str):
        try:
            return re.compile(pattern)
        except re.error as e:
            raise ValueError(f'`summary_skip_pattern` is not a valid regex: {pattern!r} '
                             f'({e})') from e
    if pattern is not None and not isinstance(pattern, re.Pattern):
        raise TypeError(f'`summary_skip_pattern` must be a regex, a str or None, got '
                        f'{pattern!r}')
    return pattern


class CommitSchedules:
    """``summary_commit_freqs`` at work: whether the next value of a metric is written.

    Values number 1, 1+N, 1+2N... of a metric with frequency N are written;
    metrics without a frequency, all of them.
    """

    def __init__(self, freqs: Mapping[str, int] | None):
        self._freqs = check_commit_freqs(freqs)
        self._schedules: dict[str, Every] = {}

    def due(self, name: str) -> bool:
        """Whether this value of metric `name` is to be written (it is counted)."""
        freq = self._freqs.get(name)
        if freq is None:
            return True
        schedule = self._schedules.get(name)
        if schedule is None:
            schedule = self._schedules[name] = Every(calls=freq)
        return schedule.due(NO_COUNTERS)

    def reset(self) -> None:
        """Count every metric from its first value again."""
        self._schedules.clear()
