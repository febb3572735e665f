"""Values computed from the loop's state each time they are read."""

from __future__ import annotations

import math
from typing import Any

__all__ = ['DynamicValue', 'AnnealingScalar']


class DynamicValue:
    """A value whose :meth:`get` is computed when it is read (e.g. in a feed dict)."""

    def get(self) -> Any:
        """The current value."""
        raise NotImplementedError()


class AnnealingScalar(DynamicValue):
    """``initial_value * ratio ** floor((counter - 1) / freq)``, clipped.

    The counter is ``loop.epoch`` (with `epochs`) or ``loop.step`` (with
    `steps`), so the value changes after every `freq` epochs or steps.

    Args:
        loop: Anything with ``epoch`` and ``step`` attributes (a TrainLoop).
        initial_value: The value during the first `freq` epochs/steps.
        ratio: The factor applied every `freq` epochs/steps.
        epochs: Anneal every this many epochs...
        steps: ...or every this many steps (exactly one of the two).
        min_value: Lower bound.
        max_value: Upper bound.

    Example:
        >>> class Loop: epoch, step = 3, 0
        >>> AnnealingScalar(Loop, 1., .5, epochs=1).get()
        0.25
    """

    def __init__(self, loop: Any, initial_value: float, ratio: float, epochs: int | None = None,
                 steps: int | None = None, min_value: float | None = None,
                 max_value: float | None = None):
        initial_value = float(initial_value)
        ratio = float(ratio)
        if min_value is not None and initial_value < min_value:
            raise ValueError(f'`initial_value` must >= `min_value`: initial_value '
                             f'{initial_value} vs min_value {min_value}')
        if min_value is not None and max_value is not None and min_value > max_value:
            raise ValueError(f'`min_value` must <= `max_value`: min_value {min_value} vs '
                             f'max_value {max_value}')
        if max_value is not None and initial_value > max_value:
            raise ValueError(f'`initial_value` must <= `max_value`: initial_value '
                             f'{initial_value} vs max_value {max_value}')
        if (epochs is None) == (steps is None):
            raise ValueError('One and only one of `epochs` and `steps` should be specified.')
        for name, value in (('epochs', epochs), ('steps', steps)):
            if value is not None and (type(value) is not int or value < 1):
                raise ValueError(f'`{name}` must be positive: {value!r}')
        self._loop = loop
        self._initial_value = initial_value
        self._ratio = ratio
        self._attr = 'epoch' if epochs is not None else 'step'
        self._freq = epochs if epochs is not None else steps
        self._min_value = min_value
        self._max_value = max_value
        self._cache: tuple[int, float] | None = None

    def get(self) -> float:
        counter = getattr(self._loop, self._attr)
        if self._cache is None or self._cache[0] != counter:
            value = self._initial_value * self._ratio ** math.floor(
                max(counter - 1, 0) / self._freq)
            if self._max_value is not None:
                value = min(value, self._max_value)
            if self._min_value is not None:
                value = max(value, self._min_value)
            self._cache = (counter, value)
        return self._cache[1]
