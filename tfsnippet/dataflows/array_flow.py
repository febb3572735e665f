"""Mini-batches of numpy arrays, optionally shuffled, resumable mid-epoch."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from ..utils.validation import check_positive_int, short_repr

from .base import ExtraInfoDataFlow

__all__ = ['ArrayFlow', 'SeqFlow', 'make_random_state']


def make_random_state(random_state: Any) -> np.random.RandomState | np.random.Generator:
    """A numpy random generator from `random_state`.

    ``None`` draws a seed from numpy's global generator (so ``np.random.seed``
    makes it reproducible); an int is a seed; a ``RandomState`` or
    ``Generator`` is used as it is.
    """
    if random_state is None:
        return np.random.RandomState(np.random.randint(0xffffffff))
    if isinstance(random_state, (np.random.RandomState, np.random.Generator)):
        return random_state
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return np.random.RandomState(int(random_state))
    raise TypeError(
        f'`random_state` must be None, an int seed, a numpy RandomState or Generator, '
        f'got {random_state!r}')


def _get_rng_state(rng: np.random.RandomState | np.random.Generator) -> Mapping[str, Any]:
    if isinstance(rng, np.random.Generator):
        return rng.bit_generator.state
    return rng.get_state(legacy=False)


def _set_rng_state(rng: np.random.RandomState | np.random.Generator,
                   state: dict[str, Any]) -> None:
    if isinstance(rng, np.random.Generator):
        rng.bit_generator.state = state
    else:
        rng.set_state(state)


def check_position(state: Any) -> None:
    """Check that `state` is a position ``{'start': ..., 'served': n}``."""
    if not isinstance(state, dict):
        raise TypeError(f'A flow position must be a dict, got {state!r}')
    missing = [k for k in ('start', 'served') if k not in state]
    if missing:
        raise KeyError(f'The flow position lacks the keys {missing}: got {sorted(state)}')


def _is_legacy_sharded_start(start: Any) -> bool:
    """Whether `start` is that of a position saved by a ``ShardedFlow`` of tfsnippet
    before the order of the global batches became the one flow's order
    (``{'epoch': e, 'seed': s}``, the order drawn from ``default_rng([s, e])``)."""
    return isinstance(start, dict) and set(start) == {'epoch', 'seed'}


def upgrade_position(state: dict[str, Any]) -> dict[str, Any]:
    """`state` (a checked position) in today's form, or a clear error.

    A position saved by a ``ShardedFlow`` of an earlier version (its
    ``'start'`` is ``{'epoch': e, 'seed': s}``) is accepted when it is not
    shuffled (the order of rows is the same today); a shuffled one is
    refused, since the rest of its run would train on other batches than the
    run it continues.

    Raises:
        ValueError: A shuffled position of the earlier sharded format.
    """
    start = state['start']
    if not _is_legacy_sharded_start(start):
        return state
    if start['seed'] is None:
        return {**state, 'start': None}
    raise ValueError(
        f'The saved position (`start` {short_repr(start)}) was written by the sharded flow of '
        f'an earlier tfsnippet, which shuffled each epoch with another order of rows than '
        f'this version (one order for every topology, that of `DataFlow.arrays(..., '
        f'random_state=...)` alone): resuming would silently train the rest of the run on '
        f'other batches. Finish that run with the tfsnippet version that started it, or start '
        f'it afresh (`restore_checkpoint=False`, or a new `checkpoint_dir`)')


class ArrayFlow(ExtraInfoDataFlow):
    """Mini-batches of rows of several arrays of the same length.

    Each batch is a tuple holding ``batch_size`` rows of each array (the last
    one smaller, unless `skip_incomplete`).  Without shuffling the arrays of
    a batch are read-only views of the source; with shuffling they are fresh
    copies (writable: changing them changes nothing else).

    Args:
        arrays: Numpy arrays (anything with ``shape`` and fancy indexing) of
            the same length along their first axis.
        batch_size: Rows per batch.
        shuffle: Draw a new order of the rows at the start of each epoch.
        skip_incomplete: Drop a last batch smaller than `batch_size`.
        random_state: Seed (int), ``np.random.RandomState`` or
            ``np.random.Generator`` for shuffling; ``None`` seeds from numpy's
            global generator.  The same seed gives the same batches in the
            same order in every process.

    Raises:
        ValueError: `arrays` is empty, holds arrays of different lengths or
            0-d arrays; `batch_size` is not positive.
        TypeError: An entry of `arrays` is not array-like, or `random_state`
            has the wrong type.

    With `skip_incomplete` and fewer rows than `batch_size` the flow is empty,
    as in the classic version (a loop then says that the epoch got no step).
    """

    def __init__(self, arrays: Sequence[np.ndarray], batch_size: int, shuffle: bool = False,
                 skip_incomplete: bool = False, random_state: Any = None):
        arrays = tuple(arrays) if isinstance(arrays, (list, tuple)) else arrays
        if not isinstance(arrays, tuple):
            raise TypeError(f'`arrays` must be a list or tuple of arrays, got {short_repr(arrays)}')
        if not arrays:
            raise ValueError('`arrays` must not be empty.')
        for i, a in enumerate(arrays):
            if not hasattr(a, 'shape') or not hasattr(a, '__getitem__'):
                raise TypeError(f'`arrays[{i}]` must be a numpy-like array, got {short_repr(a)}')
            if len(a.shape) < 1:
                raise ValueError(f'`arrays[{i}]` must be at least 1-d, got shape {a.shape}')
        lengths = [int(a.shape[0]) for a in arrays]
        if len(set(lengths)) != 1:
            raise ValueError(f'`arrays` must have the same data length, got lengths {lengths}')
        batch_size = check_positive_int(batch_size, 'batch_size')
        length = lengths[0]
        super().__init__(
            array_count=len(arrays), data_length=length,
            data_shapes=tuple(tuple(int(d) for d in a.shape[1:]) for a in arrays),
            batch_size=batch_size, skip_incomplete=bool(skip_incomplete),
            is_shuffled=bool(shuffle))
        self._arrays = arrays
        self._seed: int | None = (
            int(random_state) if isinstance(random_state, (int, np.integer))
            and not isinstance(random_state, bool) else None)
        rng = make_random_state(random_state) if (shuffle or random_state is not None) else None
        self._rng = rng if shuffle else None
        self._resume: dict | None = None
        # the rng state the running epoch began with
        self._epoch_rng_state: Mapping[str, Any] | None = None
        self._served = 0                            # batches served in the running epoch
        self._rows = 0                              # rows served in the running epoch
        self._in_epoch = False

    @property
    def the_arrays(self) -> tuple:
        """The source arrays, as given."""
        return self._arrays

    @property
    def seed(self) -> int | None:
        """The int `random_state` this flow was made with (``None`` if it was
        given none, a ``RandomState`` or a ``Generator``)."""
        return self._seed

    def copy(self, skip_incomplete: bool | None = None) -> ArrayFlow:
        """A flow over the same arrays that serves, from now on, the batches this
        one would serve.

        It has the same batch size and shuffling, a copy of this flow's random
        generator, and its position (the rest of a running epoch, or a position
        loaded and not yet used).  The two then go on independently.

        Args:
            skip_incomplete: Whether the copy drops a last, smaller batch
                (``None``: as this flow); the order of the rows is the same either way.

        Example:
            >>> import numpy as np
            >>> flow = ArrayFlow([np.arange(6)], 4, shuffle=True, random_state=0)
            >>> twin = flow.copy(skip_incomplete=True)
            >>> [b[0].tolist() for b in flow][:1] == [b[0].tolist() for b in twin]
            True
        """
        twin = ArrayFlow(self._arrays, self._batch_size, shuffle=self._is_shuffled,
                         skip_incomplete=(self._skip_incomplete if skip_incomplete is None
                                          else bool(skip_incomplete)),
                         random_state=copy.deepcopy(self._rng))
        twin._seed = self._seed
        if self._resume is not None or self._in_epoch:
            twin._resume = dict(self.state_dict())
        return twin

    def upcoming_order(self, epochs_ahead: int = 0) -> np.ndarray:
        """The order of the rows of an epoch to come, without moving this flow.

        Args:
            epochs_ahead: 0 for the next epoch this flow starts (the one a
                loaded position resumes, if any), 1 for the one after, ...

        Returns:
            The row indices in the order their batches are served
            (``np.arange(data_length)`` when not shuffled).
        """
        if type(epochs_ahead) is not int or epochs_ahead < 0:
            raise ValueError(f'`epochs_ahead` must be a non-negative int, '
                             f'got {short_repr(epochs_ahead)}')
        if self._rng is None:
            return np.arange(self._data_length)
        rng = copy.deepcopy(self._rng)
        start = self._resume['start'] if self._resume is not None else None
        if start is not None:
            _set_rng_state(rng, start)
        order = rng.permutation(self._data_length)
        for _ in range(epochs_ahead):
            order = rng.permutation(self._data_length)
        return order

    @property
    def is_resumable(self) -> bool:
        return True

    def state_dict(self) -> dict[str, Any]:
        """The position: ``{'start', 'served', 'rows', 'length'}``, the random state the
        epoch began with, its batches and rows served, and the data length.

        A flow of another batch size continues from the same row (so a resumed
        job may change its batch size); one of another length refuses the
        position.
        """
        if self._resume is not None:
            return dict(self._resume)
        if self._in_epoch:
            return {'start': self._epoch_rng_state, 'served': self._served, 'rows': self._rows,
                    'length': self._data_length}
        return {'start': _get_rng_state(self._rng) if self._rng is not None else None,
                'served': 0, 'rows': 0, 'length': self._data_length}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self._is_iterating:
            raise RuntimeError('`load_state_dict()` cannot be called while the flow is iterated')
        check_position(state)
        state = upgrade_position(state)
        served = state['served']
        if type(served) is not int or served < 0:
            raise ValueError(f'`state["served"]` must be a non-negative int, got {served!r}')
        if (state['start'] is None) != (self._rng is None):
            raise ValueError('The saved position is of a flow that was '
                             + ('not ' if state['start'] is None else '') + 'shuffled')
        if self._rng is not None:
            saved = state['start'].get('bit_generator') if isinstance(state['start'], dict) \
                else None
            own = _get_rng_state(self._rng)['bit_generator']
            if saved != own:
                raise ValueError(
                    f'The saved position is of a flow shuffled by the {saved!r} bit generator, '
                    f'this one shuffles with {own!r}: its order of rows would differ; make the '
                    f'flow with the same kind of `random_state` (an int seed, a RandomState or '
                    f'a Generator of that bit generator), or start afresh '
                    f'(`restore_checkpoint=False`)')
        length = state.get('length', self._data_length)
        if length != self._data_length:
            raise ValueError(
                f'The saved position is of a flow of {length} rows, this one has '
                f'{self._data_length}: resume with the same data, or start afresh '
                f'(`restore_checkpoint=False`)')
        rows = state.get('rows', served * self._batch_size)
        self._resume = {'start': state['start'], 'served': served, 'rows': rows,
                        'length': length}

    def _minibatch_iterator(self) -> Iterator[tuple]:
        rng = self._rng
        skip = skip_rows = 0
        if self._resume is not None:
            resume, self._resume = self._resume, None
            skip, skip_rows = resume['served'], resume['rows']
            if rng is not None:
                _set_rng_state(rng, resume['start'])
        order = None
        if rng is not None:
            self._epoch_rng_state = _get_rng_state(rng)
            order = rng.permutation(self._data_length)
        n, bs = self._data_length, self._batch_size
        stop = n - (n - skip_rows) % bs if self._skip_incomplete else n
        arrays = self._arrays
        self._served = skip
        self._rows = skip_rows
        self._in_epoch = True
        try:
            # the per-batch path: C-level indexing of every array; views of the
            # source are made read-only, shuffled batches are fresh copies
            if order is None:
                for start in range(skip_rows, stop, bs):
                    batch = tuple(map(itemgetter(slice(start, start + bs)), arrays))
                    for a in batch:
                        a.setflags(write=False)
                    self._served += 1
                    self._rows = start + bs
                    yield batch
            else:
                for start in range(skip_rows, stop, bs):
                    batch = tuple(map(itemgetter(order[start:start + bs]), arrays))
                    self._served += 1
                    self._rows = start + bs
                    yield batch
        finally:
            self._in_epoch = False


class SeqFlow(ArrayFlow):
    """Mini-batches of ``np.arange(start, stop, step, dtype=dtype)``.

    Raises:
        ValueError: `batch_size` is missing (see also :class:`ArrayFlow`).
    """

    def __init__(self, start: int, stop: int, step: int = 1, batch_size: int | None = None,
                 shuffle: bool = False, skip_incomplete: bool = False, dtype: Any = np.int32,
                 random_state: Any = None):
        if batch_size is None:
            raise ValueError('`batch_size` is required.')
        super().__init__([np.arange(start, stop, step, dtype=dtype)], batch_size,
                         shuffle=shuffle, skip_incomplete=skip_incomplete,
                         random_state=random_state)
        self._start, self._stop, self._step = start, stop, step

    @property
    def start(self) -> int:
        """The first number."""
        return self._start

    @property
    def stop(self) -> int:
        """The end of the range (not included)."""
        return self._stop

    @property
    def step(self) -> int:
        """The step between numbers."""
        return self._step
