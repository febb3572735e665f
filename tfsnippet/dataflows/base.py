"""The DataFlow base class: mini-batch iteration with factories and transforms."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:   # imported where used: threading_flow imports this module
    from .multi_flow import MultiTaskFlow
    from .threading_flow import ThreadingFlow

__all__ = ['DataFlow', 'ExtraInfoDataFlow']


class DataFlow:
    """A source of mini-batches, each a tuple of numpy arrays.

    Iterating a flow (``for batch in flow``) runs one epoch.  A flow cannot
    be iterated twice at the same time.  Subclasses implement
    :meth:`_minibatch_iterator`.

    Flows built on arrays (:meth:`arrays`, :meth:`seq` and the flows made
    from them by :meth:`map`, :meth:`select`, :meth:`threaded` and
    :meth:`gather`) are *resumable*: :meth:`state_dict` returns their
    position as plain data, ``{'start': ..., 'served': n}`` (what the
    current epoch started from, e.g. the random state it was shuffled with,
    and the number of its batches already served) and
    :meth:`load_state_dict` puts it back, so that the next iteration serves
    exactly the batches the saved epoch had not served yet.  A
    :class:`~tfsnippet.TrainLoop` whose ``iter_steps`` is given a resumable
    flow stores this position in its checkpoints.

    Example:
        >>> import numpy as np
        >>> x, y = np.arange(10), np.arange(10) * 2
        >>> flow = DataFlow.arrays([x, y], batch_size=4)
        >>> [bx.tolist() for bx, by in flow]
        [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    """

    _is_iterating = False
    _implicit_iterator: Iterator[tuple] | None = None
    _current_batch: tuple | None = None

    # ------------------------------------------------------------ iteration
    def _minibatch_iterator(self) -> Iterator[tuple]:
        """Yield the batches of one epoch."""
        raise NotImplementedError()

    def __iter__(self) -> Iterator[tuple]:
        if self._is_iterating:
            raise RuntimeError(f'{type(self).__name__}.__iter__ is not reentrant.')
        return self._iterate()

    def _iterate(self) -> Iterator[tuple]:
        if self._is_iterating:
            raise RuntimeError(f'{type(self).__name__}.__iter__ is not reentrant.')
        self._is_iterating = True
        try:
            yield from self._minibatch_iterator()
        finally:
            self._is_iterating = False

    @property
    def current_batch(self) -> tuple | None:
        """The batch last returned by :meth:`next_batch` (``None`` before and after an epoch)."""
        return self._current_batch

    def next_batch(self) -> tuple:
        """Return the next batch of the implicit iteration.

        At the end of an epoch this raises ``StopIteration`` once; the next
        call starts a new epoch.
        """
        if self._implicit_iterator is None:
            self._implicit_iterator = iter(self)
        try:
            self._current_batch = next(self._implicit_iterator)
        except StopIteration:
            self._implicit_iterator = None
            self._current_batch = None
            raise
        return self._current_batch

    # ------------------------------------------------------------ state
    @property
    def is_resumable(self) -> bool:
        """Whether :meth:`state_dict` / :meth:`load_state_dict` are supported."""
        return False

    def state_dict(self) -> dict[str, Any]:
        """The position of this flow as plain data (see the class documentation)."""
        raise NotImplementedError(f'{type(self).__name__} cannot save its position')

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back a position from :meth:`state_dict`; the next iteration resumes there."""
        raise NotImplementedError(f'{type(self).__name__} cannot restore a position')

    # ------------------------------------------------------------ conversions
    def get_arrays(self) -> tuple[np.ndarray, ...]:
        """Run one epoch and concatenate its batches into a tuple of arrays.

        Raises:
            ValueError: The flow yields no batch.
        """
        batches = list(self)
        if not batches:
            raise ValueError(f'{self!r} is empty, cannot convert to arrays')
        return tuple(np.concatenate(parts, axis=0) for parts in zip(*batches))

    def to_arrays_flow(self, batch_size: int, shuffle: bool = False,
                       skip_incomplete: bool = False, random_state: Any = None) -> DataFlow:
        """An :class:`~tfsnippet.dataflows.ArrayFlow` over :meth:`get_arrays`."""
        from .array_flow import ArrayFlow
        return ArrayFlow(self.get_arrays(), batch_size, shuffle=shuffle,
                         skip_incomplete=skip_incomplete, random_state=random_state)

    # ------------------------------------------------------------ transforms
    def map(self, mapper: Callable[..., Sequence[np.ndarray]],
            array_indices: int | Iterable[int] | None = None) -> DataFlow:
        """A flow whose batches are ``mapper(*batch)`` (or of the arrays at `array_indices`)."""
        from .mapper_flow import MapperFlow
        return MapperFlow(self, mapper, array_indices=array_indices)

    def select(self, indices: Sequence[int]) -> DataFlow:
        """A flow whose batches hold the arrays at `indices`, in that order."""
        indices = tuple(indices)
        for i in indices:
            if type(i) is not int:
                raise TypeError(f'`indices` must be ints, got {i!r}')

        def pick(*arrays: np.ndarray) -> tuple:
            return tuple(arrays[i] for i in indices)

        return self.map(pick)

    def threaded(self, prefetch: int) -> ThreadingFlow:
        """A flow that reads this one in a background thread, `prefetch` batches ahead."""
        from .threading_flow import ThreadingFlow
        return ThreadingFlow(self, prefetch)

    # ------------------------------------------------------------ factories
    @staticmethod
    def arrays(arrays: Sequence[np.ndarray], batch_size: int, shuffle: bool = False,
               skip_incomplete: bool = False, random_state: Any = None) -> DataFlow:
        """Mini-batches of `arrays` (see :class:`~tfsnippet.dataflows.ArrayFlow`)."""
        from .array_flow import ArrayFlow
        return ArrayFlow(arrays, batch_size, shuffle=shuffle, skip_incomplete=skip_incomplete,
                         random_state=random_state)

    @staticmethod
    def seq(start: int, stop: int, step: int = 1, batch_size: int | None = None,
            shuffle: bool = False, skip_incomplete: bool = False, dtype: Any = np.int32,
            random_state: Any = None) -> DataFlow:
        """Mini-batches of ``np.arange(start, stop, step)`` (see :class:`SeqFlow`)."""
        from .array_flow import SeqFlow
        return SeqFlow(start, stop, step, batch_size=batch_size, shuffle=shuffle,
                       skip_incomplete=skip_incomplete, dtype=dtype, random_state=random_state)

    @staticmethod
    def gather(flows: Sequence[DataFlow]) -> DataFlow:
        """Zip several flows; each batch joins their arrays (see :class:`GatherFlow`)."""
        from .mapper_flow import GatherFlow
        return GatherFlow(flows)

    @staticmethod
    def tasks(flows: Mapping[str, DataFlow], mode: str = 'together',
              weights: Mapping[str, float] | Sequence[float] | None = None,
              epoch: str | int = 'shortest', random_state: Any = None) -> MultiTaskFlow:
        """Several named flows as one, for multi-task training; each batch is
        ``{task: batch}`` (see :class:`~tfsnippet.dataflows.MultiTaskFlow`)."""
        from .multi_flow import MultiTaskFlow
        return MultiTaskFlow(flows, mode=mode, weights=weights, epoch=epoch,
                             random_state=random_state)

    @staticmethod
    def iterator_factory(factory: Callable[[], Iterable[tuple]]) -> DataFlow:
        """A flow that iterates ``factory()`` anew in each epoch."""
        from .mapper_flow import IteratorFactoryFlow
        return IteratorFactoryFlow(factory)


class ExtraInfoDataFlow(DataFlow):
    """A flow that knows its size: array count, data length, shapes, batching."""

    def __init__(self, array_count: int, data_length: int, data_shapes: tuple[tuple[int, ...], ...],
                 batch_size: int, skip_incomplete: bool, is_shuffled: bool):
        self._array_count = array_count
        self._data_length = data_length
        self._data_shapes = data_shapes
        self._batch_size = batch_size
        self._skip_incomplete = skip_incomplete
        self._is_shuffled = is_shuffled

    @property
    def array_count(self) -> int:
        """The number of arrays in each batch."""
        return self._array_count

    @property
    def data_length(self) -> int:
        """The number of rows of the data."""
        return self._data_length

    @property
    def data_shapes(self) -> tuple[tuple[int, ...], ...]:
        """The shape of one row of each array (no batch dimension)."""
        return self._data_shapes

    @property
    def batch_size(self) -> int:
        """The size of a full batch."""
        return self._batch_size

    @property
    def skip_incomplete(self) -> bool:
        """Whether a last, smaller batch is dropped."""
        return self._skip_incomplete

    @property
    def is_shuffled(self) -> bool:
        """Whether the rows are shuffled each epoch."""
        return self._is_shuffled
