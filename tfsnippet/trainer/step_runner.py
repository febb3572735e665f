"""One step on one batch, shared by the trainer and the evaluator, in either TensorFlow style."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
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


_NO_EXTRA: tuple[Any, ...] = ()   # the results of no extra fetches
class _SessionPath:
    """``session.run(fetches, {inputs: batch})`` without re-reading its arguments each step.

    ``Session.run`` interprets its fetches and checks and converts each fed
    value on every call, about 140 µs of Python a step on a CPU.  When the
    fetches and placeholders stay the same, that work is done once here:
    TensorFlow's public ``Session.make_callable`` builds a callable of this
    fetch and feed structure once per session, and a batch goes to it when
    each array already has its placeholder's dtype and a compatible shape
    (what ``Session.run`` would check, and would then feed unchanged).  Any
    other batch, another kind of session, or a structure the callable cannot
    be built for is left to ``session.run``, so values, errors and messages
    stay its own (a closed session: the callable raises ``session.run``'s
    error).
    """

    __slots__ = ('inputs', 'fetches', 'dtypes', 'shapes', 'seen', 'session', 'call')

    def __init__(self, inputs: tuple[Any, ...], fetches: list[Any]):
        self.inputs = inputs
        self.fetches = fetches
        self.dtypes = tuple(np.dtype(t.dtype.as_numpy_dtype) for t in inputs)
        self.shapes = tuple(None if t.shape.rank is None else tuple(t.shape.as_list())
                            for t in inputs)
        self.seen: list[tuple[int, ...] | None] = [None] * len(inputs)  # last shape that fit
        self.session: Any = None
        self.call: Callable[..., list[Any]] | None = None   # None: session.run serves

    @staticmethod
    def usable(inputs: tuple[Any, ...], fetches: list[Any]) -> bool:
        """Whether the fast path may serve these placeholders and fetches."""
        if not inputs:
            return False
        try:
            fed = {t.ref() for t in inputs}
            graph = inputs[0].graph
            if any(t.graph is not graph or not graph.is_feedable(t) for t in inputs):
                return False
            # a fetched placeholder returns the fed value: leave that to session.run
            return not any(isinstance(f, tf.Tensor) and f.ref() in fed for f in fetches)
        except (AttributeError, TypeError, ValueError):
            return False

    def _fits(self, batch: Sequence[Any]) -> bool:
        seen, dtypes, shapes = self.seen, self.dtypes, self.shapes
        for i, value in enumerate(batch):
            if type(value) is not np.ndarray or value.dtype != dtypes[i]:
                return False
            shape = value.shape
            if shape != seen[i]:
                expected = shapes[i]
                if expected is not None and (len(expected) != len(shape) or any(
                        d is not None and d != n for d, n in zip(expected, shape))):
                    return False
                seen[i] = shape
        return True

    def _bind(self, session: Any) -> None:
        """Build the callable of the fetches and feeds for `session` (once per session);
        none for another kind of session or when TensorFlow refuses the structure."""
        self.session, self.call = session, None
        if type(session).run is not tf.compat.v1.Session.run or \
                session.graph is not self.inputs[0].graph:
            return
        try:
            self.call = session.make_callable(self.fetches, feed_list=list(self.inputs))
        except Exception:   # noqa: BLE001 - session.run then says what is wrong
            self.call = None

    def run(self, session: Any, batch: Sequence[Any]) -> list[Any] | None:
        """The results of the fetches, or ``None`` when ``session.run`` must serve this step."""
        if len(batch) != len(self.inputs) or not self._fits(batch):
            return None
        if session is not self.session:
            self._bind(session)
        call = self.call
        return None if call is None else call(*batch)


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
        self._start = len(self._fetch_list) - len(self._names)   # where the metrics begin
        # {extra fetches: the fast path of session.run}, built on first use
        self._paths: dict[tuple[Any, ...], _SessionPath | None] = {}

    def _session_path(self, extra_fetches: tuple[Any, ...]) -> _SessionPath | None:
        fetches = self._fetch_list + list(extra_fetches)
        inputs = self.inputs or ()
        path = _SessionPath(inputs, fetches) if _SessionPath.usable(inputs, fetches) else None
        self._paths[extra_fetches] = path
        return path

    def run(self, batch: Sequence[Any], feed_dict: Mapping[Any, Any] | None = None,
            extra_fetches: Sequence[Any] = ()) -> tuple[dict[str, Any] | None, Sequence[Any]]:
        """Run one step on `batch`; return ``(metrics or None, results of extra_fetches)``."""
        if self.graph:
            session = get_default_session_or_error()
            results = None
            if not (self.feed_dict or feed_dict):   # the common case: only the batch is fed
                extra = tuple(extra_fetches)
                path = self._paths[extra] if extra in self._paths else \
                    self._session_path(extra)
                if path is not None:
                    results = path.run(session, batch)
            if results is None:
                inputs = self.inputs or ()
                if self.feed_dict or feed_dict or len(batch) != len(inputs):
                    feed = batch_feed_dict(inputs, batch, self.feed_dict, feed_dict)
                else:
                    feed = dict(zip(inputs, batch))
                results = session.run(self._fetch_list + list(extra_fetches), feed_dict=feed)
            names, start = self._names, self._start
            metrics = dict(zip(names, results[start:start + len(names)]))
            return metrics, results[len(self._fetch_list):]
        fn: Callable[..., Any] = self.op
        if self.feed_dict or feed_dict:
            out = fn(*batch, **resolve_feed_dict(merge_feed_dict(self.feed_dict, feed_dict),
                                                 inplace=True))
        else:
            out = fn(*batch)
        if type(out) is dict:   # the common case, without the check of an abstract class
            return dict(out), _NO_EXTRA
        return self.as_metrics(out), _NO_EXTRA

    def as_metrics(self, out: Any) -> dict[str, Any] | None:
        """The metrics of what an eager step returned: a copy of a dict, a single
        value named `default_name`, or ``None``."""
        if out is None:
            return None
        if not isinstance(out, Mapping):
            return {self.default_name: out}
        return dict(out)
