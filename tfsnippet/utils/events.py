"""A small, allow-listed event source with removable handler handles."""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from typing import Any

__all__ = ['EventSource', 'EventHandle']


def event_key_str(key: Any) -> str:
    """Return the plain string an event key is stored under.

    String enums (such as :class:`tfsnippet.EventKeys`) are stored by their
    value, anything else by ``str(key)``.
    """
    if isinstance(key, enum.Enum):
        return str(key.value)
    return str(key)


class EventHandle:
    """What :meth:`EventSource.on` returns: removes the handler again.

    It works as a context manager too, so a handler can live for one block::

        with events.on('after_step', handler):
            ...
    """

    __slots__ = ('_source', '_key', '_handler', '_removed')

    def __init__(self, source: EventSource, key: str, handler: Callable[..., Any]):
        self._source = source
        self._key = key
        self._handler = handler
        self._removed = False

    @property
    def removed(self) -> bool:
        """Whether :meth:`remove` has already taken the handler off."""
        return self._removed

    def remove(self) -> None:
        """Unregister the handler; a second call does nothing."""
        if not self._removed:
            self._removed = True
            # the handlers may have been cleared meanwhile: then there is nothing to do
            if self._handler in self._source._handlers.get(self._key, ()):
                self._source.off(self._key, self._handler)

    def __enter__(self) -> EventHandle:
        return self

    def __exit__(self, exc_type, exc_value, tb) -> None:
        self.remove()


class EventSource:
    """Holds event handlers by key and calls them when an event is fired.

    Args:
        allowed_event_keys: If given, only these keys may be used; a typo
            then fails at :meth:`on` instead of silently never firing.

    Handlers of one key are called in registration order by :meth:`fire`
    and in reverse registration order by :meth:`reverse_fire` (used for the
    "after"/exit events, so that the handler registered first sees the
    others' effects last, like nested ``with`` blocks).  A handler that
    raises stops the event: later handlers are not called and the exception
    propagates to whoever fired it.
    """

    __slots__ = ('_allowed', '_handlers')

    def __init__(self, allowed_event_keys: Iterable[Any] | None = None):
        if allowed_event_keys is not None:
            allowed = tuple(event_key_str(k) for k in allowed_event_keys)
            self._allowed = frozenset(allowed)
            self._handlers: dict[str, list[Callable[..., Any]]] = {k: [] for k in allowed}
        else:
            self._allowed = None
            self._handlers = {}

    def _key(self, key: Any) -> str:
        k = event_key_str(key)
        if self._allowed is not None and k not in self._allowed:
            raise KeyError(
                f'`event_key` is not allowed: {k!r}; expected one of '
                f'{sorted(self._allowed)}')
        return k

    @property
    def allowed_event_keys(self) -> frozenset[str] | None:
        """The keys this source accepts, or ``None`` for any key."""
        return self._allowed

    def on(self, key: Any, handler: Callable[..., Any]) -> EventHandle:
        """Register `handler` for `key` and return a handle that removes it.

        Registering the same handler twice makes it run twice.

        Raises:
            KeyError: `key` is not among the allowed keys.
            TypeError: `handler` is not callable.
        """
        k = self._key(key)
        if not callable(handler):
            raise TypeError(f'`handler` must be callable, got {handler!r}')
        self._handlers.setdefault(k, []).append(handler)
        return EventHandle(self, k, handler)

    def off(self, key: Any, handler: Callable[..., Any]) -> None:
        """Unregister the first registration of `handler` for `key`.

        Raises:
            ValueError: `handler` is not registered for `key`.
        """
        k = self._key(key)
        handlers = self._handlers.get(k, [])
        try:
            handlers.remove(handler)
        except ValueError:
            raise ValueError(
                f'`handler` is not a registered event handler of event '
                f'`{k}`: {handler!r}') from None

    def _handler_list(self, key: Any) -> list[Callable[..., Any]]:
        """The live list of handlers of `key` (for hot loops that check it inline)."""
        k = self._key(key)
        handlers = self._handlers.get(k)
        if handlers is None:
            handlers = self._handlers[k] = []
        return handlers

    def has_handlers(self, key: Any) -> bool:
        """Whether any handler is registered for `key`."""
        return bool(self._handlers.get(self._key(key)))

    def fire(self, key: Any, *args: Any, **kwargs: Any) -> None:
        """Call the handlers of `key` in registration order."""
        handlers = self._handlers.get(key)
        if handlers is None:
            handlers = self._handlers.get(self._key(key), ())
        if handlers:
            for h in tuple(handlers):
                h(*args, **kwargs)

    def reverse_fire(self, key: Any, *args: Any, **kwargs: Any) -> None:
        """Call the handlers of `key` in reverse registration order."""
        handlers = self._handlers.get(key)
        if handlers is None:
            handlers = self._handlers.get(self._key(key), ())
        if handlers:
            for h in tuple(reversed(handlers)):
                h(*args, **kwargs)

    def clear_event_handlers(self, key: Any = None) -> None:
        """Remove the handlers of `key`, or of every key when `key` is None."""
        if key is None:
            for handlers in self._handlers.values():
                handlers.clear()
        else:
            handlers = self._handlers.get(event_key_str(key))
            if handlers is not None:
                handlers.clear()
