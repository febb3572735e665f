"""Named decisions that every worker takes alike, agreed at the loop's sync points."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..utils.validation import short_repr
from .base import Backend

__all__ = ['Decisions']

_RULES = ('any', 'chief')


class Decisions:
    """The decisions of a training loop that every worker must take at the same step.

    A decision (stop, preemption, the chief's clock, anything a component
    adds) is registered once under a name, with the function that reads
    this worker's input and the function that applies the agreed value.
    :meth:`sync` agrees on all of them with **one** all-reduce of the
    backend (:meth:`vector` and :meth:`apply` let the loop fold them into
    an all-reduce it makes anyway, the print of an epoch), and then applies
    each agreed value, in registration order, on every worker.

    Two rules combine the workers' inputs:

    * ``'any'``: the agreed value is 1.0 if the input is true on at least
      one worker, else 0.0 (a stop or preemption flag);
    * ``'chief'``: the agreed value is the chief's input (its clock).

    With one worker (a :class:`~tfsnippet.backend.LocalBackend`, or a
    strategy of one process) the inputs are the agreed values: nothing is
    communicated, and the loop holds no sync point at all (see
    :attr:`immediate`).

    A decision taken on one worker (a signal received) is announced with
    :meth:`request`: with one worker the `schedule` given by the loop then
    arranges one :meth:`sync` at the next step or epoch boundary; under
    multi-worker training the next sync point takes it.

    Args:
        backend: The backend whose all-reduce carries the decisions.
        schedule: Arranges one :meth:`sync` at the next step or epoch boundary.

    Example:
        >>> from tfsnippet.backend import Decisions, LocalBackend
        >>> decisions = Decisions(LocalBackend())
        >>> seen = []
        >>> decisions.register('stop', read=lambda: True, apply=seen.append)
        >>> decisions.sync()
        >>> seen
        [1.0]
    """

    def __init__(self, backend: Backend, schedule: Callable[[], Any] | None = None):
        if not isinstance(backend, Backend):
            raise TypeError(f'`backend` must be a Backend, got {short_repr(backend)}')
        if schedule is not None and not callable(schedule):
            raise TypeError(f'`schedule` must be callable or None, got {short_repr(schedule)}')
        self._backend = backend
        self._schedule = schedule
        self._names: list[str] = []
        self._rules: list[str] = []
        self._reads: list[Callable[[], Any]] = []
        self._applies: list[Callable[[float], Any]] = []

    @property
    def backend(self) -> Backend:
        """The backend whose all-reduce carries the decisions."""
        return self._backend

    @property
    def immediate(self) -> bool:
        """Whether this worker decides alone (one worker): a decision then takes
        effect at once, without waiting for a sync point."""
        return self._backend.num_workers == 1

    @property
    def names(self) -> tuple[str, ...]:
        """The registered decisions, in registration (and application) order."""
        return tuple(self._names)

    def register(self, name: str, read: Callable[[], Any], apply: Callable[[float], Any],
                 rule: str = 'any') -> None:
        """Register decision `name`.

        Every worker must register the same decisions in the same order
        (a component does it when it is entered, which happens at the same
        point everywhere).

        Args:
            name: The decision's name, unique.
            read: Returns this worker's input (a bool for ``'any'``, a
                number for ``'chief'``).
            apply: Receives the agreed value (a float) at each sync point.
            rule: ``'any'`` or ``'chief'`` (see the class documentation).

        Raises:
            TypeError: `name` is not a str, or `read`/`apply` not callable.
            ValueError: `name` is registered already, or `rule` is unknown.
        """
        if not isinstance(name, str) or not name:
            raise TypeError(f'`name` must be a non-empty str, got {short_repr(name)}')
        if name in self._names:
            raise ValueError(f'The decision {name!r} is registered already; the decisions '
                             f'are {self._names}')
        if rule not in _RULES:
            raise ValueError(f'`rule` must be one of {_RULES}, got {short_repr(rule)}')
        for arg, func in (('read', read), ('apply', apply)):
            if not callable(func):
                raise TypeError(f'`{arg}` must be callable, got {short_repr(func)}')
        self._names.append(name)
        self._rules.append(rule)
        self._reads.append(read)
        self._applies.append(apply)

    def request(self) -> None:
        """Say that this worker's input of a decision changed and should be acted on.

        With one worker, :meth:`sync` runs at the next step or epoch
        boundary (through `schedule`; at once without one); under
        multi-worker training it waits for the loop's next sync point.
        """
        if self.immediate:
            if self._schedule is None:
                self.sync()
            else:
                self._schedule()

    def vector(self) -> np.ndarray:
        """This worker's inputs, one float64 per decision, ready to be summed
        over the workers (a ``'chief'`` input is 0 on the other workers)."""
        chief = self._backend.is_chief
        out = np.zeros([len(self._names)], dtype=np.float64)
        for i, (rule, read) in enumerate(zip(self._rules, self._reads)):
            if rule == 'any':
                out[i] = 1. if read() else 0.
            elif chief:
                out[i] = float(read())
        return out

    def apply(self, total: np.ndarray) -> None:
        """Apply the sum over the workers of their :meth:`vector`\\ s.

        Raises:
            ValueError: `total` does not hold one value per decision.
        """
        total = np.asarray(total, dtype=np.float64)
        if total.shape != (len(self._names),):
            raise ValueError(f'`total` must hold one value per decision ({len(self._names)}), '
                             f'got shape {total.shape}')
        for rule, apply, value in zip(self._rules, tuple(self._applies), total.tolist()):
            apply((1. if value > 0. else 0.) if rule == 'any' else value)

    def sync(self) -> None:
        """Agree on every decision (one all-reduce; none with one worker) and apply them."""
        self.apply(self._backend.all_reduce_sum(self.vector()))
