"""Small lifecycle concepts: init-once objects, use-once objects and contexts."""

from __future__ import annotations

from types import TracebackType
from typing import Any, TypeVar

__all__ = ['AutoInitAndCloseable', 'Disposable', 'NoReentrantContext', 'DisposableContext']

_SelfT = TypeVar('_SelfT', bound='AutoInitAndCloseable')


class AutoInitAndCloseable:
    """An object initialized lazily, at most once until it is closed.

    Subclasses implement :meth:`_init` and :meth:`_close`.  :meth:`init`
    runs ``_init()`` only if the object is not initialized yet; :meth:`close`
    runs ``_close()`` only if it is, and leaves the object uninitialized even
    when ``_close()`` raises.  ``with obj:`` calls :meth:`init` and
    :meth:`close` (no reference counting: the inner ``with`` closes it).
    """

    _initialized = False

    def _init(self) -> None:
        raise NotImplementedError()

    def _close(self) -> None:
        raise NotImplementedError()

    def init(self) -> None:
        """Initialize the object, unless it is already initialized."""
        if not self._initialized:
            self._init()
            self._initialized = True

    def close(self) -> None:
        """Close the object, if it is initialized."""
        if self._initialized:
            try:
                self._close()
            finally:
                self._initialized = False

    def __enter__(self: _SelfT) -> _SelfT:
        self.init()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                 exc_tb: TracebackType | None) -> None:
        self.close()


class Disposable:
    """An object that may be used only once.

    Subclasses call :meth:`_check_usage_and_set_used` where the one use
    begins.
    """

    _already_used = False

    def _check_usage_and_set_used(self) -> None:
        if self._already_used:
            raise RuntimeError(f'Disposable object cannot be used twice: {self!r}.')
        self._already_used = True


class NoReentrantContext:
    """A context manager that refuses to be entered while it is entered.

    Subclasses implement :meth:`_enter` (its result is what ``with`` binds)
    and :meth:`_exit`.  ``_exit`` runs only if ``_enter`` succeeded; a truthy
    result of ``_exit`` suppresses the exception, as with ``__exit__``.
    """

    _is_entered = False

    def _enter(self) -> Any:
        raise NotImplementedError()

    def _exit(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
              exc_tb: TracebackType | None) -> bool | None:
        raise NotImplementedError()

    @property
    def _is_in_context(self) -> bool:
        return self._is_entered

    def _require_entered(self) -> None:
        if not self._is_entered:
            raise RuntimeError(
                f'{self!r} must be entered first: call this inside its `with` block')

    def __enter__(self) -> Any:
        if self._is_entered:
            raise RuntimeError(f'Context is not reentrant: {self!r}.')
        ret = self._enter()
        self._is_entered = True
        return ret

    def __exit__(self, exc_type: type[BaseException] | None, exc_val: BaseException | None,
                 exc_tb: TracebackType | None) -> bool | None:
        if self._is_entered:
            try:
                return self._exit(exc_type, exc_val, exc_tb)
            finally:
                self._is_entered = False
        return None


class DisposableContext(NoReentrantContext):
    """A :class:`NoReentrantContext` that can be entered only once in all."""

    _has_entered = False

    def __enter__(self) -> Any:
        if self._has_entered:
            raise RuntimeError(
                f'A disposable context cannot be entered twice: {self!r}.')
        ret = super().__enter__()
        self._has_entered = True
        return ret
