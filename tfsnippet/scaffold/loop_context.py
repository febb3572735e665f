"""Loop context providers: what plugs into every TrainLoop made while it is open.

An :class:`~tfsnippet.Experiment` is one: while its ``with`` block is open,
each :class:`~tfsnippet.TrainLoop` made gets the components it offers (its
recorder) and, for the first loop made without a ``checkpoint_dir``, the run
directory to checkpoint into.  The scaffold knows only this small protocol,
so it needs nothing from the experiment package; the provider pushes
itself here when entered and removes itself when left.

A loop takes the innermost provider pushed by its own thread, else the
innermost of all: two Experiments open at once in two threads (the trials
of a threaded hyperparameter search) each reach only the loops of their
own thread.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:  # pragma: no cover
    from .components.base import LoopComponent

__all__ = ['LoopContextProvider', 'push_loop_context', 'remove_loop_context',
           'current_loop_context']


@runtime_checkable
class LoopContextProvider(Protocol):
    """What offers loops their context (an open :class:`~tfsnippet.Experiment`)."""

    def claim_checkpoint_dir(self, take: bool = True) -> str | None:
        """The checkpoint directory for a loop made without one, or ``None``;
        ``take=False`` only tells it (the loop may still fail to be made)."""

    def loop_components(self) -> list[LoopComponent]:
        """The components to add to a loop made now (new ones for each loop)."""


_lock = threading.Lock()
_providers: list[tuple[int, Any]] = []   # (pushing thread, provider), innermost last


def _check(provider: Any) -> None:
    missing = [m for m in ('claim_checkpoint_dir', 'loop_components')
               if not callable(getattr(provider, m, None))]
    if missing:
        raise TypeError(f'`provider` must be a LoopContextProvider (with claim_checkpoint_dir '
                        f'and loop_components), got {type(provider).__name__}, which lacks '
                        f'{", ".join(missing)}')


def push_loop_context(provider: Any) -> None:
    """Make `provider` the innermost context of the loops made from now on.

    Raises:
        TypeError: `provider` lacks a method of :class:`LoopContextProvider`.
    """
    _check(provider)
    with _lock:
        _providers.append((threading.get_ident(), provider))


def remove_loop_context(provider: Any) -> None:
    """Remove `provider` (wherever it is in the stack; nothing if it is not there)."""
    with _lock:
        for i in range(len(_providers) - 1, -1, -1):
            if _providers[i][1] is provider:
                del _providers[i]
                break


def current_loop_context() -> Any:
    """The innermost provider pushed by this thread and not removed, else the
    innermost pushed by any thread, or ``None``."""
    me = threading.get_ident()
    with _lock:
        for thread, provider in reversed(_providers):
            if thread == me:
                return provider
        return _providers[-1][1] if _providers else None
