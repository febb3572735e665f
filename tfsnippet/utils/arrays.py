"""Numpy helpers of classic scripts: mini-batch slices and a two-way split of data arrays."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from .rng import make_random_state
from .validation import check_positive_int

__all__ = ['minibatch_slices_iterator', 'split_numpy_arrays', 'split_numpy_array']


def minibatch_slices_iterator(length: int, batch_size: int,
                              skip_incomplete: bool = False) -> Iterator[slice]:
    """Yield ``slice(start, stop, 1)`` for each mini-batch of ``range(length)``.

    Args:
        length: The number of items (0 yields nothing).
        batch_size: The number of items in each mini-batch.
        skip_incomplete: Leave out a last batch smaller than `batch_size`.

    Raises:
        TypeError: `length` or `batch_size` is not an int.
        ValueError: `length` is negative, or `batch_size` is below 1.

    Example:
        >>> list(minibatch_slices_iterator(5, 2))
        [slice(0, 2, 1), slice(2, 4, 1), slice(4, 5, 1)]
        >>> list(minibatch_slices_iterator(5, 2, skip_incomplete=True))
        [slice(0, 2, 1), slice(2, 4, 1)]
    """
    if isinstance(length, np.integer):
        length = int(length)
    if type(length) is not int:
        raise TypeError(f'`length` must be a non-negative int, got {length!r}')
    if length < 0:
        raise ValueError(f'`length` must be a non-negative int, got {length!r}')
    batch_size = check_positive_int(batch_size, 'batch_size')
    stop = length - length % batch_size if skip_incomplete else length
    # a generator expression: the checks above run at the call, not at the first batch
    return (slice(start, min(start + batch_size, length), 1)
            for start in range(0, stop, batch_size))


def _check_one_of(portion: Any, size: Any) -> None:
    if (portion is None) == (size is None):
        raise ValueError(
            f'Pass exactly one of `portion` and `size`, got portion={portion!r}, size={size!r}')


def _second_part_size(count: int, portion: Any, size: Any) -> int:
    if size is not None:
        if isinstance(size, np.integer):
            size = int(size)
        if type(size) is not int:
            raise TypeError(f'`size` must be an int, got {size!r}')
        # clamped, as in the classic version: a size past either end puts all
        # the data on that side
        return min(max(size, 0), count)
    if isinstance(portion, bool) or not isinstance(portion, (int, float, np.integer, np.floating)):
        raise TypeError(f'`portion` must be a number in [0, 1], got {portion!r}')
    if not 0. <= portion <= 1.:
        raise ValueError(f'`portion` must be a number in [0, 1], got {portion!r}')
    # the nearest integer, halves rounded up
    return int(np.floor(portion * count + .5))


def split_numpy_arrays(arrays: Iterable[Any], portion: float | None = None,
                       size: int | None = None, shuffle: bool = True,
                       random_state: Any = None) -> tuple[tuple[np.ndarray, ...],
                                                          tuple[np.ndarray, ...]]:
    """Split arrays of the same length into two parts, e.g. train and validation data.

    The second part holds `size` items, or ``portion * length`` rounded to
    the nearest integer (halves up); the first holds the rest.  The same
    items go to the same part of every array.

    Args:
        arrays: The arrays (anything ``np.asarray`` accepts), all of the same length.
        portion: The fraction of the items in the second part, in ``[0, 1]``.
        size: Or the number of items in the second part; a size above the
            data length puts everything in the second part, one below 0
            nothing (as in the classic version).
        shuffle: Draw the items of the second part at random (the order is
            shuffled too); otherwise it is the last items.
        random_state: For shuffling: an int seed, a numpy ``RandomState`` or
            ``Generator``, or ``None`` for a seed from numpy's global generator.

    Returns:
        ``(first_part, second_part)``, each a tuple with one array per input
        array.  No arrays give ``((), ())``.

    Raises:
        ValueError: Both or neither of `portion` and `size`, a value out of
            range, or arrays of different lengths.
        TypeError: `portion`, `size` or `random_state` has the wrong type.

    Example:
        >>> import numpy as np
        >>> (x1, y1), (x2, y2) = split_numpy_arrays(
        ...     [np.arange(5), np.arange(5) * 10], size=2, shuffle=False)
        >>> x1.tolist(), y1.tolist(), x2.tolist(), y2.tolist()
        ([0, 1, 2], [0, 10, 20], [3, 4], [30, 40])
    """
    _check_one_of(portion, size)
    arrays = tuple(np.asarray(a) for a in arrays)
    if not arrays:
        return (), ()
    lengths = [len(a) for a in arrays]
    if len(set(lengths)) > 1:
        raise ValueError(f'`arrays` must all have the same length, got lengths {lengths}')
    count = lengths[0]
    second = _second_part_size(count, portion, size)
    if shuffle:
        indices = make_random_state(random_state).permutation(count)
        arrays = tuple(a[indices] for a in arrays)
    cut = count - second
    return tuple(a[:cut] for a in arrays), tuple(a[cut:] for a in arrays)


def split_numpy_array(array: Any, portion: float | None = None, size: int | None = None,
                      shuffle: bool = True,
                      random_state: Any = None) -> tuple[np.ndarray, np.ndarray]:
    """Split one array into two parts; see :func:`split_numpy_arrays`.

    .. versionchanged:: 0.3
        Takes `random_state` too (the classic version always drew a new seed).

    Example:
        >>> a, b = split_numpy_array(np.arange(4), portion=.25, shuffle=False)
        >>> a.tolist(), b.tolist()
        ([0, 1, 2], [3])
    """
    (first,), (second,) = split_numpy_arrays(
        [array], portion=portion, size=size, shuffle=shuffle, random_state=random_state)
    return first, second
