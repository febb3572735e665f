"""Histogram and other summaries added from model code: graph ops to merge, or eager writes.

In **graph mode** (``tf.compat.v1``), :func:`add_histogram` and
:func:`add_summary` build summary ops and hand them to the current
:class:`SummaryCollector` (:func:`default_summary_collector`), which keeps
a list of them for one merged ``session.run`` and also adds them to graph
collections (``tf.compat.v1.GraphKeys.SUMMARIES`` for the default
collector)::

    collector = spt.SummaryCollector()
    with collector.as_default():
        spt.add_histogram(hidden)           # tag: hidden's name
    merged = collector.merge_summary()
    ...
    loop.add_summary(session.run(merged, feed_dict=...))

In **eager mode** there is nothing to collect: :func:`add_histogram`
computes the histogram now and writes it through a summary writer (a
:class:`~tfsnippet.scaffold.SummaryWriter`, e.g. ``loop.summary_writer``)
at the given step::

    spt.add_histogram('weights', w, step=loop.step, writer=loop.summary_writer)

(Inside ``tf.function`` use ``tf.summary.histogram`` with a
``tf.summary`` writer instead.)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import tensorflow as tf
from tensorboard.compat.proto import summary_pb2

from ..settings_ import settings
from ..utils.contexts import ContextStack
from ..tfops.tensor_wrapper import TensorWrapper
from ..tfops.tf_vars import is_variable, variable_name
from ..utils.validation import check_positive_int
from .summary_writer import SummaryWriter, check_summary_writer

__all__ = ['GraphKeys', 'SummaryCollector', 'default_summary_collector', 'add_summary',
           'add_histogram', 'histogram_summary', 'write_histogram']

v1 = tf.compat.v1


class GraphKeys:
    """Graph collection names of tfsnippet (graph mode)."""

    #: Histograms added automatically when ``settings.auto_histogram`` is on.
    AUTO_HISTOGRAM = 'TFSNIPPET_AUTO_HISTOGRAM'


# ---------------------------------------------------------------- eager histograms
def _host_values(values: Any, arg_name: str) -> np.ndarray:
    if isinstance(values, TensorWrapper):
        values = tf.convert_to_tensor(values)
    arr = np.asarray(values)
    if arr.dtype.kind not in 'biuf':
        raise TypeError(f'`{arg_name}` must hold numbers, got {type(values).__name__} '
                        f'of dtype {arr.dtype}')
    return arr.astype(np.float64).reshape(-1)


def histogram_summary(tag: str, values: Any, bucket_count: int = 30) -> summary_pb2.Summary:
    """A ``Summary`` proto holding the histogram of `values` under `tag`.

    The histogram has `bucket_count` equal-width buckets between the
    smallest and the largest value (one bucket if they are equal), and the
    count, sum and sum of squares of the values, as TensorBoard's
    histogram and distribution dashboards expect.

    Args:
        tag: The summary tag.
        values: A numpy array, a list, an eager tensor or a variable (any
            shape; bools count as 0 and 1).
        bucket_count: The number of buckets.

    Raises:
        TypeError: `values` is not numeric, or `bucket_count` not an int.
        ValueError: `tag` is empty, `bucket_count` below 1, or `values` holds NaN or infinity (TensorFlow's histogram op
            refuses them too).

    Example:
        >>> from tfsnippet.scaffold.summary_collector import histogram_summary
        >>> s = histogram_summary('w', [1., 2., 2., 4.], bucket_count=3)
        >>> h = s.value[0].histo
        >>> h.num, h.min, h.max, list(h.bucket)
        (4.0, 1.0, 4.0, [1.0, 2.0, 1.0])
    """
    if not isinstance(tag, str) or not tag:
        raise ValueError(f'`tag` must be a non-empty str, got {tag!r}')
    check_positive_int(bucket_count, 'bucket_count')
    arr = _host_values(values, 'values')
    histo = summary_pb2.HistogramProto(num=arr.size)
    if arr.size:
        if not np.isfinite(arr).all():
            raise ValueError(
                f'`values` of histogram {tag!r} holds NaN or infinity; the histogram '
                f'needs finite values')
        low, high = float(arr.min()), float(arr.max())
        if low == high:
            counts, limits = np.array([arr.size]), np.array([high])
        else:
            counts, edges = np.histogram(arr, bins=bucket_count, range=(low, high))
            limits = edges[1:]
        histo.min, histo.max = low, high
        histo.sum = float(arr.sum())
        histo.sum_squares = float(np.dot(arr, arr))
        histo.bucket_limit.extend(limits.tolist())
        histo.bucket.extend(counts.astype(np.float64).tolist())
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, histo=histo)])


def _as_step(step: Any) -> int:
    if isinstance(step, (tf.Tensor, tf.Variable)) or is_variable(step):
        step = np.asarray(step)
        if step.shape == ():
            step = step.item()
    if isinstance(step, np.integer):
        step = int(step)
    rule = f'`step` must be a non-negative int (or an eager scalar tensor), got {step!r}'
    if type(step) is not int:
        raise TypeError(rule)
    if step < 0:
        raise ValueError(rule)
    return step


def write_histogram(writer: Any, tag: str, values: Any, step: Any,
                    bucket_count: int = 30) -> summary_pb2.Summary:
    """Write the histogram of `values` to `writer` at `step`, and return it.

    Args:
        writer: A :class:`~tfsnippet.scaffold.SummaryWriter`, or a writer with
            ``add_summary(serialized_summary, step)`` and ``flush()``.
        tag, values, bucket_count: As for :func:`histogram_summary`.
        step: The global step: an int, or an eager scalar tensor or variable
            (e.g. ``optimizer.iterations``).

    Raises:
        TypeError: `writer` or `step` is of the wrong type, or `values` is
            not numeric.
        ValueError: `step` is negative, or `values` holds NaN or infinity.
    """
    if writer is None:
        raise TypeError('`writer` must be a summary writer, got None')
    check_summary_writer(writer, 'writer')
    step = _as_step(step)
    summary = histogram_summary(tag, values, bucket_count=bucket_count)
    if isinstance(writer, SummaryWriter):
        writer.add_summary(summary, step)
    else:  # e.g. tf.compat.v1.summary.FileWriter, which takes serialized bytes
        writer.add_summary(summary.SerializeToString(), step)
    return summary


# ---------------------------------------------------------------- the collector
def _default_summary_name(original: Any, tensor: Any, strip_scope: bool) -> str:
    if is_variable(original):
        name = variable_name(original)
    else:
        try:
            name = tensor.name
        except AttributeError as e:   # an eager tensor has no name
            raise ValueError(
                f'`summary_name` is required for a tensor without a name, got '
                f'{type(original).__name__}') from e
        name = name.replace(':', '_')
        if name.endswith('_0'):
            name = name[:-2]
    if strip_scope:
        name = name.rsplit('/', 1)[-1]
    return name


def _check_collections(collections: Any, arg_name: str) -> tuple[str, ...] | None:
    if collections is None:
        return None
    if isinstance(collections, str):
        raise TypeError(
            f'`{arg_name}` must be a list of collection names, not a str: got {collections!r}')
    collections = tuple(collections)
    for c in collections:
        if not isinstance(c, str):
            raise TypeError(f'`{arg_name}` must hold collection names (str), got {c!r}')
    return collections


def _in_eager_function() -> bool:
    return tf.inside_function() and v1.executing_eagerly_outside_functions()


class SummaryCollector:
    """Collects graph-mode summary ops for one merged ``session.run``; writes eager histograms.

    Args:
        collections: Graph collections each collected summary is also added
            to (none by default).
        no_add_to_collections: Never add summaries to any collection, not
            even those given to :meth:`add_summary`.
        writer: Eager mode: the writer :meth:`add_histogram` writes to when
            it is given no `writer` (a :class:`~tfsnippet.scaffold.SummaryWriter`).

    Example (graph mode)::

        collector = SummaryCollector()
        with collector.as_default():
            spt.add_histogram(logits)
        merged = collector.merge_summary()
    """

    def __init__(self, collections: Iterable[str] | None = None,
                 no_add_to_collections: bool = False, writer: Any = None):
        self._collections = _check_collections(collections, 'collections') or ()
        self._no_add_to_collections = bool(no_add_to_collections)
        self._writer = check_summary_writer(writer, 'writer')
        self._summary_list: list[Any] = []

    @property
    def collections(self) -> tuple[str, ...]:
        """The graph collections collected summaries also go to."""
        return self._collections

    @property
    def summary_list(self) -> list[Any]:
        """The summary ops collected so far (a copy)."""
        return list(self._summary_list)

    @property
    def writer(self) -> Any:
        """The default writer of eager :meth:`add_histogram`, or ``None``."""
        return self._writer

    def add_summary(self, summary: Any, collections: Iterable[str] | None = None) -> Any:
        """Collect a summary op (graph mode) and add it to graph collections.

        Args:
            summary: A summary op, e.g. of ``tf.compat.v1.summary.scalar(...,
                collections=[])``.
            collections: Add it to these collections instead of
                :attr:`collections` (``[]`` adds it nowhere).

        Returns:
            `summary`.

        Raises:
            RuntimeError: Called in eager mode, where summaries are written
                at once (``writer.add_summary(summary, step)``), not collected.
        """
        if tf.executing_eagerly():
            raise RuntimeError(
                '`add_summary()` collects graph-mode summary ops; in eager mode write the '
                'summary at once with `writer.add_summary(summary, step)`')
        checked = _check_collections(collections, 'collections')
        self._summary_list.append(summary)
        if not self._no_add_to_collections:
            graph = getattr(summary, 'graph', None) or v1.get_default_graph()
            for c in self._collections if checked is None else checked:
                graph.add_to_collection(c, summary)
        return summary

    def add_histogram(self, tensor: Any, summary_name: Any = None, strip_scope: bool = False,
                      collections: Iterable[str] | None = None, name: str | None = None, *,
                      step: Any = None, writer: Any = None) -> Any:
        """Add the histogram of `tensor`.

        The tag is `summary_name`, by default the tensor's (or variable's)
        name without ``:0`` (``'dense/kernel:0'`` gives ``'dense/kernel'``),
        and only its last part with `strip_scope` (``'kernel'``).  The tag
        is used exactly: enclosing name scopes do not prefix it.  The TF2
        argument order, ``add_histogram('kernel', w, ...)``, works too.

        *Graph mode*: builds a histogram summary op, collects it like
        :meth:`add_summary` and returns it; `step` and `writer` must not be
        given.  *Eager mode*: writes the histogram to `writer` (default:
        :attr:`writer`) at `step` with :func:`write_histogram` and returns
        the ``Summary`` proto; `collections` and `name` do not apply.

        Args:
            tensor: A tensor, variable or :class:`~tfsnippet.ScheduledVariable`.
            summary_name: The tag (required for an eager tensor, which has
                no name).
            strip_scope: Keep only the last part of the default tag.
            collections: Graph mode: as for :meth:`add_summary`.
            name: Graph mode: the name scope of the op.
            step: Eager mode: the global step to write at (required).
            writer: Eager mode: the writer.

        Raises:
            ValueError: `step`/`writer` given in graph mode; in eager mode no
                writer or no `step`, or a nameless tensor without `summary_name`.
            RuntimeError: Called inside a ``tf.function`` of an eager program.
        """
        if isinstance(tensor, str) and summary_name is not None and \
                not isinstance(summary_name, str):
            tensor, summary_name = summary_name, tensor   # add_histogram(tag, tensor)
        if summary_name is not None and (not isinstance(summary_name, str) or not summary_name):
            raise ValueError(f'`summary_name` must be a non-empty str or None, got '
                             f'{summary_name!r}')
        if _in_eager_function():
            raise RuntimeError(
                '`add_histogram()` cannot run inside a tf.function: use '
                '`tf.summary.histogram(name, data, step)` with a `tf.summary` writer there')
        if tf.executing_eagerly():
            return self._write_histogram(tensor, summary_name, strip_scope, step, writer)
        if step is not None or writer is not None:
            raise ValueError(
                '`step` and `writer` are for eager mode; in graph mode run the summary op '
                '(e.g. `collector.merge_summary()`) and pass the result to `loop.add_summary`')
        original = tensor
        tensor = tf.convert_to_tensor(tensor)
        if summary_name is None:
            summary_name = _default_summary_name(original, tensor, strip_scope)
        with v1.name_scope(name, 'add_histogram', [tensor]):
            values = tf.cast(tensor, tf.float32) if tensor.dtype == tf.bool else tensor
            summary = tf.raw_ops.HistogramSummary(tag=summary_name, values=values)
        return self.add_summary(summary, collections)

    def _write_histogram(self, tensor: Any, summary_name: str | None, strip_scope: bool,
                         step: Any, writer: Any) -> summary_pb2.Summary:
        writer = self._writer if writer is None else writer
        if writer is None:
            raise ValueError(
                'Eager `add_histogram()` writes at once and needs a writer: pass '
                '`writer=loop.summary_writer` (or a SummaryWriter), or give the '
                'SummaryCollector one')
        if step is None:
            raise ValueError('Eager `add_histogram()` needs the `step` to write at, '
                             'e.g. `step=loop.step`')
        if summary_name is None:
            summary_name = _default_summary_name(tensor, tensor, strip_scope)
        return write_histogram(writer, summary_name, tensor, step)

    def merge_summary(self) -> Any:
        """One op running every collected summary, or ``None`` if there is none (graph mode)."""
        if not self._summary_list:
            return None
        return v1.summary.merge(self._summary_list)

    @contextmanager
    def as_default(self, auto_histogram: bool | None = None) -> Iterator[SummaryCollector]:
        """Make this the collector of :func:`add_summary`/:func:`add_histogram` in the block.

        Args:
            auto_histogram: If not ``None``, the value of
                ``settings.auto_histogram`` within the block.  (The settings
                are global, so this shows in other threads too.)

        Yields:
            This collector.
        """
        _collector_stack.push(self)
        try:
            if auto_histogram is None:
                yield self
            else:
                with settings.scoped(auto_histogram=auto_histogram):
                    yield self
        finally:
            _collector_stack.pop()


# each thread's bottom collector adds to the SUMMARIES collection, as TF's own ops do
_collector_stack: ContextStack[SummaryCollector] = ContextStack(
    initial_factory=lambda: SummaryCollector(collections=[v1.GraphKeys.SUMMARIES]))


def default_summary_collector() -> SummaryCollector:
    """The collector innermost :meth:`SummaryCollector.as_default` made current.

    Outside any, each thread has a collector that adds summaries to
    ``tf.compat.v1.GraphKeys.SUMMARIES`` (so ``tf.compat.v1.summary.merge_all()``
    includes them).
    """
    collector = _collector_stack.top()
    assert collector is not None   # the stack has an initial item
    return collector


def add_summary(summary: Any, collections: Iterable[str] | None = None) -> Any:
    """:meth:`SummaryCollector.add_summary` of :func:`default_summary_collector`."""
    return default_summary_collector().add_summary(summary, collections=collections)


def add_histogram(tensor: Any, summary_name: Any = None, strip_scope: bool = False,
                  collections: Iterable[str] | None = None, name: str | None = None, *,
                  step: Any = None, writer: Any = None) -> Any:
    """:meth:`SummaryCollector.add_histogram` of :func:`default_summary_collector`."""
    return default_summary_collector().add_histogram(
        tensor, summary_name, strip_scope=strip_scope, collections=collections, name=name,
        step=step, writer=writer)
