"""One step on one batch, shared by the trainer and the evaluator, in either TensorFlow style."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from ..dataflows import ExtraInfoDataFlow
from ..tfops.session import get_default_session_or_error
from ..tfops.tensor_wrapper import TensorWrapper
from .feed_dict import batch_feed_dict, merge_feed_dict, resolve_feed_dict

__all__ = ['StepRunner', 'is_graph_fetch', 'check_inputs_match']


def is_graph_fetch(obj: Any) -> bool:
    """Whether `obj` is something ``session.run`` fetches (a graph op, tensor or variable)."""
    if isinstance(obj, tf.Operation):
        return True
    if isinstance(obj, (tf.Tensor, tf.Variable)):
        return not hasattr(obj, 'numpy') or not tf.executing_eagerly()
    return False


def check_inputs_match(inputs: Sequence[Any], data_flow: Any, arg_name: str = 'inputs') -> None:
    """Fail early when a DataFlow knows its arity and `inputs` do not match it."""
    if isinstance(data_flow, ExtraInfoDataFlow) and data_flow.array_count != len(inputs):
        raise ValueError(
            f'`{arg_name}` has {len(inputs)} placeholders but the batches of `data_flow` '
            f'hold {data_flow.array_count} arrays')


class StepRunner:
    """Runs one step on a batch and returns its metrics, in either style.

    **Graph style**: ``session.run([op] + fetches + extra, feed_dict)``, the
    batch's arrays fed to `inputs`, the extra feeds resolved each step; the
    results of `fetches` are the metrics.  **Eager style**: ``fn(*batch,
    **feeds)``; a dict it returns is the metrics, a single value is named
    `default_name`, ``None`` is no metrics.  The checks of the arguments are
    the same for :class:`~tfsnippet.Trainer` and :class:`~tfsnippet.Evaluator`.

    Args:
        op: Graph style: the op to run before the fetches (``None`` for an
            evaluation that only fetches).  Eager style: the step function.
        fetches: Graph style: ``{name: tensor}`` (numbers become constants;
            a :class:`~tfsnippet.utils.TensorWrapper` such as an
            ``AnnealingVariable`` is fetched as its tensor).
        inputs: Graph style: the placeholders, one per array of a batch.
        data_flow: The batches (to check the number of `inputs` early).
        feed_dict: Extra feeds (graph) or keyword arguments (eager).
        default_name: The name of a single value an eager step returns.
        op_arg: The name of `op` in error messages.
        graph: Whether the step is graph style (default: whether `op` is a
            graph fetch).
        graph_desc, fn_desc: What the two styles are called in error messages.

    Raises:
        ValueError: `inputs` are missing in graph style or given in eager
            style, their number does not match `data_flow`, or graph
            fetches are given with a step function.
        TypeError: A fetch is neither a graph tensor nor a number.
    """

    def __init__(self, op: Any, fetches: Mapping[str, Any] | None, inputs: Sequence[Any] | None,
                 data_flow: Any, feed_dict: Mapping[Any, Any] | None, default_name: str,
                 op_arg: str = 'train_op', graph: bool | None = None,
                 graph_desc: str = 'a graph `train_op`', fn_desc: str = 'a step function'):
        if feed_dict is not None and not isinstance(feed_dict, Mapping):
            raise TypeError(f'`feed_dict` must be a dict, got {feed_dict!r}')
        self.graph = is_graph_fetch(op) if graph is None else graph
        self.op = op
        self.default_name = default_name
        self.feed_dict: dict[Any, Any] = dict(feed_dict or {})
        self.fetches: dict[str, Any] = {}
        self.inputs: tuple[Any, ...] | None = None
        if self.graph:
            for name, t in (fetches or {}).items():
                if not isinstance(name, str):
                    raise TypeError(f'`metrics` keys must be str, got {name!r}')
                if (isinstance(t, (int, float)) and not isinstance(t, bool) and
                        not tf.executing_eagerly()):
                    t = tf.constant(float(t))   # a constant metric, as the classic one took
                elif isinstance(t, TensorWrapper) and not tf.executing_eagerly():
                    pass   # e.g. an AnnealingVariable: `session.run` fetches its tensor
                elif not is_graph_fetch(t):
                    raise TypeError(f'`metrics[{name!r}]` must be a graph tensor (or pass a '
                                    f'function of the batch in eager mode), got {t!r}')
                self.fetches[name] = t
            if inputs is None:
                raise ValueError(f'`inputs` is required with {graph_desc}: the '
                                 f'placeholders to feed each batch to')
            self.inputs = tuple(inputs)
            check_inputs_match(self.inputs, data_flow)
        else:
            if not callable(op):
                raise TypeError(
                    f'`{op_arg}` must be a graph op/tensor to run with `session.run`, or a '
                    f'step function (e.g. a tf.function) called with each batch, got {op!r}')
            if inputs is not None:
                raise ValueError(f'`inputs` is for {graph_desc}; {fn_desc} receives the '
                                 f'arrays of each batch as its arguments')
            if fetches:
                raise ValueError(f'`metrics` is for {graph_desc}; {fn_desc} returns its '
                                 f'metrics')
        self._names = list(self.fetches)
        self._fetch_list = ([] if op is None or not self.graph else [op]) + \
            [self.fetches[n] for n in self._names]

    def run(self, batch: Sequence[Any], feed_dict: Mapping[Any, Any] | None = None,
            extra_fetches: Sequence[Any] = ()) -> tuple[dict[str, Any] | None, list[Any]]:
        """Run one step on `batch`; return ``(metrics or None, results of extra_fetches)``."""
        if self.graph:
            inputs = self.inputs or ()
            if self.feed_dict or feed_dict or len(batch) != len(inputs):
                feed = batch_feed_dict(inputs, batch, self.feed_dict, feed_dict)
            else:   # the common case: the batch's arrays and nothing to resolve
                feed = dict(zip(inputs, batch))
            results = get_default_session_or_error().run(
                self._fetch_list + list(extra_fetches), feed_dict=feed)
            start = len(self._fetch_list) - len(self._names)
            metrics = dict(zip(self._names, results[start:start + len(self._names)]))
            return metrics, results[len(self._fetch_list):]
        fn: Callable[..., Any] = self.op
        if self.feed_dict or feed_dict:
            out = fn(*batch, **resolve_feed_dict(merge_feed_dict(self.feed_dict, feed_dict),
                                                 inplace=True))
        else:
            out = fn(*batch)
        if out is None:
            return None, []
        if not isinstance(out, Mapping):
            return {self.default_name: out}, []
        return dict(out), []
