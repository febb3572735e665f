"""Throughput: steps and samples per second, FLOPs counted from the traced step,
the fraction of the device's peak, and memory."""

from __future__ import annotations

import functools
import resource
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import tensorflow as tf

from ...utils.text import typed_repr
from ...utils.validation import check_positive_int, check_positive_number
from ..event_keys import EventKeys
from .base import LoopComponent

if TYPE_CHECKING:  # pragma: no cover
    from ..loop.core import TrainLoop

__all__ = ['PEAK_FLOPS', 'Throughput', 'count_flops', 'device_peak_flops']

#: Dense float32 peaks (FLOP/s) of known devices, matched by a substring of the
#: device name; give ``peak_flops`` for mixed precision (tensor cores) or others.
PEAK_FLOPS: dict[str, float] = {
    'H100': 66.9e12, 'A100': 19.5e12, 'A10G': 31.2e12, 'L4': 30.3e12, 'V100': 15.7e12,
    'T4': 8.1e12, 'RTX 4090': 82.6e12, 'RTX 3090': 35.6e12, 'P100': 9.3e12,
}


def count_flops(target: Any, *args: Any, shapes: Mapping[Any, Sequence[int]] | None = None,
                **kwargs: Any) -> int:
    """The floating-point operations of one run of `target`, counted by TensorFlow's
    profiler (``model_analyzer.profile`` with ``ProfileOptionBuilder.float_operation()``)
    on its graph, once: a multiply-add counts 2.

    `target` is a ``tf.function`` (traced with `args`/`kwargs`, or reusing
    the trace of those arguments), a concrete function, a ``tf.Graph`` (all
    of it), or in graph mode an operation or tensor (a train op: what it
    depends on).  Ops of unknown shapes count nothing: in graph mode,
    `shapes` gives placeholders (or their names) a full shape
    (``{x: [64, 784]}``).

    Raises:
        TypeError: `target` is none of these.
    """
    from tensorflow.python.profiler import model_analyzer, option_builder
    if isinstance(target, tf.Graph):
        graph = target
    elif isinstance(target, (tf.Operation, tf.Tensor)) and not tf.executing_eagerly():
        op = target if isinstance(target, tf.Operation) else target.op
        graph = _pruned(op.graph, [op.name], shapes or {})
    else:
        function = target
        if callable(getattr(target, 'get_concrete_function', None)):
            function = target.get_concrete_function(*args, **kwargs)
        graph = getattr(function, 'graph', None)
        if not isinstance(graph, tf.Graph) or not callable(function):
            raise TypeError(f'`target` must be a tf.function, a concrete function, a tf.Graph, '
                            f'or (graph mode) an operation, got {typed_repr(target)}')
        # what the outputs and the updates need: a gradient nobody uses (a
        # convolution's input gradient) is traced, but never runs
        graph = _pruned(graph, [t.op.name for t in graph.outputs] +
                        [op.name for op in getattr(graph, 'control_outputs', ())], {})
    options = option_builder.ProfileOptionBuilder.float_operation()
    options['output'] = 'none'
    return int(model_analyzer.profile(graph, options=options).total_float_ops)


def _pruned(graph: tf.Graph, names: list[str], shapes: Mapping[Any, Sequence[int]]) -> tf.Graph:
    """A copy of the part of `graph` that ops `names` depend on (shapes kept; the
    placeholders named in `shapes` given those)."""
    graph_def = tf.compat.v1.graph_util.extract_sub_graph(graph.as_graph_def(add_shapes=True),
                                                          names)
    wanted = {(k if isinstance(k, str) else k.op.name).split(':')[0]: list(v)
              for k, v in shapes.items()}
    for node in graph_def.node:
        if node.op == 'Placeholder' and node.name in wanted:
            shape = tf.TensorShape(wanted[node.name]).as_proto()
            node.attr['shape'].shape.CopyFrom(shape)
            if '_output_shapes' in node.attr:
                node.attr['_output_shapes'].list.shape[0].CopyFrom(shape)
    out = tf.Graph()
    with out.as_default():
        tf.compat.v1.import_graph_def(graph_def, name='')
    return out


@functools.lru_cache(maxsize=1)
def first_gpu() -> str | None:
    """The name of this process's first GPU (``'NVIDIA A100-SXM4-40GB'``), ``''``
    when it does not say, or ``None`` without a GPU (looked up once: the devices
    of a process do not change)."""
    gpus = tf.config.list_physical_devices('GPU')
    if not gpus:
        return None
    return str(tf.config.experimental.get_device_details(gpus[0]).get('device_name', ''))


def device_peak_flops() -> float | None:
    """The float32 peak of the first GPU when its name is in :data:`PEAK_FLOPS`, else ``None``."""
    name = first_gpu()
    if name is None:
        return None
    return next((peak for key, peak in PEAK_FLOPS.items() if key in name), None)


def peak_rss_mb() -> float:
    """The process's peak resident memory, in MiB (``getrusage``)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024. * 1024.) if sys.platform == 'darwin' else peak / 1024.


class Throughput(LoopComponent):
    """Collects the speed of training at the end of each step loop: steps and
    samples per second, FLOPs per step, FLOP/s, the model FLOPs utilisation
    (MFU) and memory (Lightning's ``ThroughputMonitor``, Composer's
    ``SpeedMonitor``).

    The values are collected with ``collect_metrics`` when the step loop of
    an epoch ends, before the epoch's own log line, so that they appear in
    it, in the TensorBoard summaries and in every sink:

    * ``steps_per_sec``, ``samples_per_sec``: over the epoch's step loop on
      the loop's clock; the first step of the run (tracing, warm-up) is
      left out;
    * ``step_flops``: the FLOPs of one step, counted **once** by
      :func:`count_flops` from the traced `step` (a ``tf.function``, traced
      with the first batch as its arguments; or a graph-mode train op) or
      given as `flops`; ``flops_per_sec`` = steps/s times that;
    * ``mfu``: FLOP/s over `peak_flops` (given, or the device's from
      :data:`PEAK_FLOPS`; none on a CPU);
    * ``device_mem_mb``: the peak memory of the first GPU
      (``tf.config.experimental.get_memory_info``), when there is one;
    * ``peak_rss_mb``: the process's peak resident memory.

    Per step it does nothing with a fixed `batch_size` (the step counter
    counts), and calls ``batch_size(batch)`` with a function; no TensorFlow
    op runs per step.

    Args:
        batch_size: Samples per step: an int, or a function of the batch
            (``lambda batch: len(batch[0])``); ``None``: no samples/s.
        step: The traced step to count FLOPs from.
        flops: The FLOPs of one step, if known (instead of `step`).
        peak_flops: The device's peak FLOP/s for the MFU.

    Raises:
        TypeError/ValueError: An argument is of the wrong kind.
    """

    def __init__(self, batch_size: int | Callable[[Any], int] | None = None, *,
                 step: Any = None, flops: float | None = None,
                 peak_flops: float | None = None):
        if batch_size is not None and not callable(batch_size):
            batch_size = check_positive_int(batch_size, 'batch_size')
        if step is not None and flops is not None:
            raise ValueError('`flops` replaces counting them from `step`: give one, not both')
        self._batch_size = batch_size
        self._step = step
        self._flops = check_positive_number(flops, 'flops', allow_none=True)
        self._peak = check_positive_number(peak_flops, 'peak_flops', allow_none=True)
        self._start: tuple[float, int] | None = None
        self._samples = 0
        self._warm = False
        self.last: dict[str, float] = {}   #: the values collected last

    @property
    def step_flops(self) -> float | None:
        """The FLOPs of one step (``None`` until counted, or without `step`/`flops`)."""
        return self._flops

    def on_enter(self, loop: TrainLoop) -> None:
        self._warm = False
        self._start = None
        if self._peak is None:
            self._peak = device_peak_flops()
        self.subscribe(loop, EventKeys.BEFORE_STEPS, self._before_steps)
        self.subscribe(loop, EventKeys.AFTER_STEPS, self._after_steps)
        if callable(self._batch_size):
            self.subscribe(loop, EventKeys.AFTER_STEP, self._count_samples)

    def on_exit(self, loop: TrainLoop, error: BaseException | None) -> None:
        loop.events.remove_owned((self, 'first'))

    def _before_steps(self, loop: TrainLoop) -> None:
        self._samples = 0
        if self._warm:
            self._start = (loop.clock(), loop.step)
        elif not callable(self._batch_size):
            # the first step of the run is left out: the clock starts after it
            loop.events.on(EventKeys.AFTER_STEP, self._first_step, owner=(self, 'first'))

    def _first_step(self, loop: TrainLoop) -> None:
        loop.events.remove_owned((self, 'first'))
        self._warm_up(loop)

    def _warm_up(self, loop: TrainLoop) -> None:
        self._warm = True
        if self._flops is None and self._step is not None:
            batch = loop.step_data
            args = tuple(batch) if isinstance(batch, (tuple, list)) else (batch,)
            self._flops = float(count_flops(self._step, *args))
        self._samples = 0
        self._start = (loop.clock(), loop.step)

    def _count_samples(self, loop: TrainLoop) -> None:
        if self._start is None:   # the first step of the run: left out
            self._warm_up(loop)
            return
        self._samples += self._batch_size(loop.step_data)  # type: ignore[operator,misc]

    def _after_steps(self, loop: TrainLoop) -> None:
        if self._start is None or not loop.within_epoch:
            return
        start, first = self._start
        self._start = None
        steps, seconds = loop.step - first, loop.clock() - start
        values: dict[str, float] = {'peak_rss_mb': peak_rss_mb()}
        if steps > 0 and seconds > 0:
            rate = steps / seconds
            values['steps_per_sec'] = rate
            if self._batch_size is not None:
                samples = (self._samples if callable(self._batch_size)
                           else steps * self._batch_size)
                values['samples_per_sec'] = samples / seconds
            if self._flops is not None:
                values['step_flops'] = self._flops
                values['flops_per_sec'] = rate * self._flops
                if self._peak is not None:
                    values['mfu'] = rate * self._flops / self._peak
        if first_gpu() is not None:
            info = tf.config.experimental.get_memory_info('GPU:0')
            values['device_mem_mb'] = info['peak'] / (1024. * 1024.)
        self.last = values
        loop.collect_metrics(values)
