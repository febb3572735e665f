"""Several named flows drawn as one: the data of multi-task training."""

from __future__ import annotations

import copy
from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ..utils.validation import short_repr
from .array_flow import _get_rng_state, _set_rng_state, make_random_state
from .base import DataFlow

__all__ = ['MultiTaskFlow']

_MODES = ('together', 'alternate', 'weighted')
_EPOCHS = ('shortest', 'longest')


class MultiTaskFlow(DataFlow):
    """Batches of several named flows (one per task), drawn together, in turn or by weights.

    Each batch is a dict ``{task: batch of that task's flow}``:

    * ``mode='together'``: one batch of every task at each step (the dict
      holds every task);
    * ``mode='alternate'``: one task per step, in the order of `flows`
      (``a, b, a, b, ...``);
    * ``mode='weighted'``: one task per step, drawn at random with the
      probabilities `weights` (normalised), from `random_state`.

    Each task's flow is read as an endless stream of its epochs: a flow
    that ends starts its next epoch when it is needed again.  What an epoch
    of this flow is, for flows of different lengths, is `epoch`:

    * ``'shortest'`` (the default): the epoch ends when a task's flow
      ends (the shortest one, drawn together); the other flows are left
      where they are and begin a fresh epoch in the next one (so rows at
      the end of a longer unshuffled flow are never served);
    * ``'longest'``: the epoch ends when every task's flow has ended at
      least once (a flow's end is seen when its next batch is asked for);
      a flow that ends before is restarted (its rows are then served more
      than once an epoch), and is begun afresh in the next one;
    * an int ``N``: every epoch is ``N`` steps; each flow goes on where it
      was in the next epoch (restarting when it ends), so every row is
      served equally often over a long run.

    The position (:meth:`state_dict`) holds the position of each task's
    flow, under its name, and the state of the task drawing, so a
    :class:`~tfsnippet.TrainLoop` resumed mid-epoch serves exactly the
    batches an uninterrupted run would have served; the flow is resumable
    when every task's flow is.  Under a ``tf.distribute`` strategy the loop
    shards each task's flow like any other flow given to ``iter_steps``
    (:meth:`map_flows`); give an int `random_state` with
    ``mode='weighted'`` on several workers, or the loop draws one seed on
    the chief for every worker.

    Args:
        flows: ``{task name: DataFlow}``, at least one; the order is the
            order of ``'alternate'``.
        mode: ``'together'``, ``'alternate'`` or ``'weighted'``.
        weights: With ``'weighted'`` only: ``{task: weight}`` or a sequence
            in the order of `flows`, non-negative numbers with a positive sum.
        epoch: ``'shortest'``, ``'longest'`` or a positive int (steps).
        random_state: Seed (int), ``np.random.RandomState`` or
            ``Generator`` of the weighted drawing (``None``: one seeded from
            numpy's global generator).

    Raises:
        TypeError: `flows` is not a dict of DataFlows with str names, or an
            argument has the wrong type.
        ValueError: `flows` is empty; a bad `mode` or `epoch`; `weights`
            missing, given without ``'weighted'``, naming other tasks, or
            not non-negative with a positive sum.

    Example:
        >>> import numpy as np
        >>> a = DataFlow.arrays([np.arange(4)], batch_size=2)
        >>> b = DataFlow.arrays([np.arange(10, 16)], batch_size=2)
        >>> flow = DataFlow.tasks({'a': a, 'b': b}, mode='alternate', epoch='longest')
        >>> [{k: v[0].tolist() for k, v in batch.items()} for batch in flow]
        ... # doctest: +NORMALIZE_WHITESPACE
        [{'a': [0, 1]}, {'b': [10, 11]}, {'a': [2, 3]}, {'b': [12, 13]},
         {'a': [0, 1]}, {'b': [14, 15]}, {'a': [2, 3]}]
    """

    def __init__(self, flows: Mapping[str, DataFlow], mode: str = 'together',
                 weights: Mapping[str, float] | Sequence[float] | None = None,
                 epoch: str | int = 'shortest', random_state: Any = None):
        if not isinstance(flows, Mapping):
            raise TypeError(f'`flows` must be a dict {{task name: DataFlow}}, '
                            f'got {short_repr(flows)}')
        if not flows:
            raise ValueError('`flows` must hold at least one task, got an empty dict')
        for name, flow in flows.items():
            if not isinstance(name, str) or not name:
                raise TypeError(f'The task names of `flows` must be non-empty str, '
                                f'got {name!r}')
            if not isinstance(flow, DataFlow):
                raise TypeError(f'`flows[{name!r}]` must be a DataFlow, got {short_repr(flow)}')
        if mode not in _MODES:
            raise ValueError(f"`mode` must be 'together', 'alternate' or 'weighted', "
                             f"got {mode!r}")
        if isinstance(epoch, (int, np.integer)) and not isinstance(epoch, bool):
            if epoch <= 0:
                raise ValueError(f'`epoch` as a number of steps must be positive, got {epoch}')
            epoch = int(epoch)
        elif epoch not in _EPOCHS:
            raise ValueError(f"`epoch` must be 'shortest', 'longest' or a positive int "
                             f"(steps), got {short_repr(epoch)}")
        self._flows: dict[str, DataFlow] = dict(flows)
        self._names: tuple[str, ...] = tuple(self._flows)
        self._mode = mode
        self._epoch_rule: str | int = epoch
        self._weights = self._check_weights(weights)
        cumulative = np.cumsum(self._weights) if self._weights is not None else None
        self._cumulative: list[float] = ([] if cumulative is None
                                         else [float(c) for c in cumulative / cumulative[-1]])
        self._rng = make_random_state(random_state) if mode == 'weighted' else None
        self._iters: dict[str, Iterator[tuple] | None] = dict.fromkeys(self._names)
        self._served = 0                      # steps served in the running epoch
        self._turn = 0                        # the next task of 'alternate'
        self._ended: list[str] = []           # tasks whose flow ended in this epoch
        self._resume: dict[str, Any] | None = None
        self._pending: set[str] = set()       # tasks given a position, not drawn since

    def _check_weights(self, weights: Any) -> list[float] | None:
        if self._mode != 'weighted':
            if weights is not None:
                raise ValueError(f"`weights` is only for mode='weighted', got "
                                 f"{short_repr(weights)} with mode={self._mode!r}")
            return None
        if weights is None:
            raise ValueError("`weights` is required with mode='weighted': give "
                             "{task: weight} for the tasks " + repr(list(self._names)))
        if isinstance(weights, Mapping):
            unknown = sorted(set(weights) - set(self._names))
            missing = [n for n in self._names if n not in weights]
            if unknown or missing:
                raise ValueError(f'`weights` must name the tasks {list(self._names)}, '
                                 f'got {sorted(weights)}')
            values = [weights[n] for n in self._names]
        elif isinstance(weights, (list, tuple, np.ndarray)):
            values = list(weights)
            if len(values) != len(self._names):
                raise ValueError(f'`weights` must hold {len(self._names)} numbers (one per '
                                 f'task), got {len(values)}')
        else:
            raise TypeError(f'`weights` must be a dict {{task: weight}} or a sequence, '
                            f'got {short_repr(weights)}')
        out = []
        for name, w in zip(self._names, values):
            if isinstance(w, bool) or not isinstance(w, (int, float, np.integer, np.floating)):
                raise TypeError(f'The weight of task {name!r} must be a number, '
                                f'got {short_repr(w)}')
            if not w >= 0 or not np.isfinite(w):
                raise ValueError(f'The weight of task {name!r} must be a finite number >= 0, '
                                 f'got {w!r}')
            out.append(float(w))
        if not sum(out) > 0:
            raise ValueError(f'`weights` must have a positive sum, got {out}')
        return out

    # ------------------------------------------------------------ properties
    @property
    def flows(self) -> dict[str, DataFlow]:
        """``{task: flow}``, in the order given."""
        return dict(self._flows)

    @property
    def task_names(self) -> tuple[str, ...]:
        """The task names, in the order given."""
        return self._names

    @property
    def mode(self) -> str:
        """``'together'``, ``'alternate'`` or ``'weighted'``."""
        return self._mode

    @property
    def epoch_rule(self) -> str | int:
        """``'shortest'``, ``'longest'`` or the number of steps of an epoch."""
        return self._epoch_rule

    @property
    def weights(self) -> dict[str, float] | None:
        """The normalised weights of ``'weighted'`` (``None`` in the other modes)."""
        if self._weights is None:
            return None
        total = sum(self._weights)
        return {n: w / total for n, w in zip(self._names, self._weights)}

    def map_flows(self, fn: Callable[[str, DataFlow], DataFlow],
                  random_state: Any = None) -> MultiTaskFlow:
        """A flow of the same tasks, mode and epoch over ``fn(task, flow)`` of each flow.

        The loop uses it to shard each task's flow under a strategy.  The new
        flow draws its tasks from `random_state` if given, else from a copy
        of this flow's drawing state (so both draw the same tasks).
        """
        if not callable(fn):
            raise TypeError(f'`fn` must be callable, got {short_repr(fn)}')
        if random_state is None and self._rng is not None:
            random_state = copy.deepcopy(self._rng)
        flows = {name: fn(name, flow) for name, flow in self._flows.items()}
        return MultiTaskFlow(flows, mode=self._mode,
                             weights=None if self._weights is None else list(self._weights),
                             epoch=self._epoch_rule, random_state=random_state)

    # ------------------------------------------------------------ position
    @property
    def is_resumable(self) -> bool:
        return all(f.is_resumable for f in self._flows.values())

    def state_dict(self) -> dict[str, Any]:
        """The position: ``{'served', 'turn', 'ended', 'rng', 'flows'}``: steps served
        in the running epoch, the next task of ``'alternate'``, the tasks whose
        flow ended in it, the state of the weighted drawing (``None`` in the
        other modes) and ``{task: position of its flow}``."""
        if self._resume is not None:
            return {**self._resume, 'flows': dict(self._resume['flows']),
                    'ended': list(self._resume['ended'])}
        rng = None if self._rng is None else dict(_get_rng_state(self._rng))
        served, turn, ended = (self._served, self._turn, list(self._ended)) \
            if self._is_iterating else (0, self._turn, [])
        return {'served': served, 'turn': turn, 'ended': ended, 'rng': rng,
                'flows': {name: flow.state_dict() for name, flow in self._flows.items()}}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Resume at a position of :meth:`state_dict`.

        Raises:
            RuntimeError: The flow is being iterated.
            TypeError: `state` is not a position of a multi-task flow.
            ValueError: The position is of other tasks, or of another mode.
        """
        if self._is_iterating:
            raise RuntimeError('`load_state_dict()` cannot be called while the flow is iterated')
        keys = ('served', 'turn', 'ended', 'rng', 'flows')
        if not isinstance(state, dict) or any(k not in state for k in keys):
            raise TypeError(f'`state` must be the position of a MultiTaskFlow, a dict with '
                            f'the keys {list(keys)}, got {short_repr(state)}')
        flows = state['flows']
        if not isinstance(flows, dict) or sorted(flows) != sorted(self._names):
            got = sorted(flows) if isinstance(flows, dict) else short_repr(flows)
            raise ValueError(f'The saved position is of the tasks {got}, this flow has '
                             f'{sorted(self._names)}: resume with the same tasks')
        if (state['rng'] is None) != (self._rng is None):
            raise ValueError(f"The saved position is of a flow whose mode was "
                             f"{'not ' if state['rng'] is None else ''}'weighted', this one's "
                             f"is {self._mode!r}")
        served, turn = state['served'], state['turn']
        for key, value in (('served', served), ('turn', turn)):
            if type(value) is not int or value < 0:
                raise ValueError(f'`state[{key!r}]` must be a non-negative int, got {value!r}')
        ended = list(state['ended'])
        if any(n not in self._names for n in ended):
            raise ValueError(f'`state["ended"]` names unknown tasks: {ended}')
        self._resume = {'served': served, 'turn': turn, 'ended': ended, 'rng': state['rng'],
                        'flows': dict(flows)}

    # ------------------------------------------------------------ batches
    def _close(self, name: str) -> None:
        it = self._iters[name]
        self._iters[name] = None
        close = getattr(it, 'close', None)
        if close is not None:
            close()

    def _close_all(self) -> None:
        for name in self._names:
            self._close(name)
        # a flow given a position that was not drawn since is left the way a
        # running flow is left: its epoch begun (the position used) and closed
        pending, self._pending = self._pending, set()
        for name in self._names:
            if name in pending:
                it = iter(self._flows[name])
                try:
                    next(it)
                except StopIteration:
                    pass
                close = getattr(it, 'close', None)
                if close is not None:
                    close()

    def _next(self, name: str, restarted: bool = False) -> tuple | None:
        """The next batch of task `name`, ``None`` when this epoch must end there."""
        it = self._iters[name]
        fresh = it is None
        if it is None:
            it = self._iters[name] = iter(self._flows[name])
            self._pending.discard(name)
        try:
            return next(it)
        except StopIteration:
            self._iters[name] = None
        if fresh and restarted:
            raise ValueError(f'The flow of task {name!r} gave no batch in a whole epoch: '
                             f'every task needs data')
        rule = self._epoch_rule
        if name not in self._ended:
            self._ended.append(name)
        if rule == 'shortest' or (rule == 'longest' and len(self._ended) == len(self._names)):
            return None
        return self._next(name, True)   # restart it

    def _minibatch_iterator(self) -> Iterator[Any]:
        if self._resume is not None:
            resume, self._resume = self._resume, None
            self._close_all()
            for name, position in resume['flows'].items():
                if position is not None:
                    self._flows[name].load_state_dict(position)
                    self._pending.add(name)
            if self._rng is not None:
                _set_rng_state(self._rng, resume['rng'])
            served, self._turn, self._ended = resume['served'], resume['turn'], resume['ended']
        else:
            served, self._ended = 0, []
        rule, names, mode = self._epoch_rule, self._names, self._mode
        steps = rule if isinstance(rule, int) else None
        finished = False
        self._served = served
        try:
            while steps is None or self._served < steps:
                if mode == 'together':
                    batch = {}
                    for name in names:
                        b = self._next(name)
                        if b is None:
                            break
                        batch[name] = b
                    else:
                        self._served += 1
                        yield batch
                        continue
                    break
                if mode == 'alternate':
                    name = names[self._turn % len(names)]
                    self._turn = (self._turn + 1) % len(names)
                else:
                    assert self._rng is not None
                    name = names[bisect_right(self._cumulative, self._rng.random())]
                b = self._next(name)
                if b is None:
                    break
                self._served += 1
                yield {name: b}
            finished = True
        finally:
            # an epoch that ends by its rule keeps a fixed-steps flow where it is;
            # otherwise (its end by 'shortest'/'longest', or the iteration left
            # early) each task's flow begins afresh next time
            if not finished or steps is None:
                self._close_all()
            if steps is None:
                self._turn = 0
            self._served = 0
