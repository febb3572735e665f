"""The components collaborator of the training loop, and the state it saves of them."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from ...utils.misc import warn_user
from ..components.base import LoopComponent

if TYPE_CHECKING:  # pragma: no cover
    from .core import TrainLoop

__all__ = ['LoopComponents']

C = TypeVar('C', bound=LoopComponent)


class LoopComponents:
    """The components plugged into a :class:`~tfsnippet.TrainLoop`, in
    registration order, and their part of the loop's ``state_dict``.

    Args:
        loop: The loop they are plugged into.
    """

    def __init__(self, loop: TrainLoop):
        self._loop = loop
        self._items: list[LoopComponent] = []

    def __iter__(self) -> Iterator[LoopComponent]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def as_tuple(self) -> tuple[LoopComponent, ...]:
        """The components, in registration order."""
        return tuple(self._items)

    def by_role(self, role: str) -> Any:
        """The first component with this `role`, or ``None``."""
        return next((c for c in self._items if c.role == role), None)

    def of_type(self, kind: type[C]) -> list[C]:
        """The components that are instances of `kind`, in registration order."""
        return [c for c in self._items if isinstance(c, kind)]

    def add(self, component: LoopComponent, entered: bool) -> None:
        """Plug `component` in (checked by the loop); enter it at once if `entered`.

        Raises:
            TypeError: `component` is not a :class:`LoopComponent`.
            ValueError: It is added twice, or another has the same `state_key`.
        """
        if not isinstance(component, LoopComponent):
            raise TypeError(f'`component` must be a LoopComponent, got {component!r}')
        key = component.state_key
        for other in self._items:
            if other is component:
                raise ValueError(f'`component` {component!r} has been added already')
            if key and other.state_key == key:
                raise ValueError(
                    f'Two components have the state key {key!r}: {other!r} and {component!r}; '
                    f'pass `name=` to one of them so their checkpoint states are kept apart')
        component.on_attach(self._loop)   # its monitors built: a restored state has a home
        self._items.append(component)
        if entered:
            component.on_enter(self._loop)

    def enter(self, entered: list[LoopComponent]) -> None:
        """Restore, then enter, every component (the loop is entered), adding
        each to `entered` before entering it (those to exit if something fails)."""
        loop = self._loop
        for c in self._items:
            c.on_restore(loop)
        for c in self._items:
            entered.append(c)
            c.on_enter(loop)

    def exit(self, components: list[LoopComponent] | None,
             error: BaseException | None) -> None:
        """Exit `components` (all by default), in reverse order.

        Every component exits, whatever another raises (the checkpointer must
        still wait for its last save); the first error is raised, unless the
        loop is left through one of its own, which it does not replace.
        """
        loop = self._loop
        first: BaseException | None = None
        for c in reversed(self._items if components is None else components):
            try:
                c.on_exit(loop, error)
            except BaseException as e:
                if first is None and (error is None or not isinstance(e, Exception)):
                    first = e
                else:
                    warn_user(f'{type(c).__name__} failed to exit the loop: '
                              f'{type(e).__name__}: {e}', RuntimeWarning)
            finally:
                loop.events.remove_owned(c)
        if first is not None:
            raise first

    def state_dict(self) -> dict[str, Any]:
        """``{state_key: state}`` of the components that have a state key."""
        return {c.state_key: c.state_dict() for c in self._items if c.state_key}

    def load_state_dict(self, saved: Mapping[str, Any]) -> None:
        """Hand each component its part of `saved`, if there is one."""
        for c in self._items:
            if c.state_key and c.state_key in saved:
                c.load_state_dict(saved[c.state_key])
