"""Bounded retries of an object store's transient errors.

An endpoint that goes away for a few seconds (a restarting gateway, a
dropped connection, a throttled request) is not a reason to lose a run.
:func:`call_with_retry` calls an operation again after a growing pause
(``base_delay``, doubled each time, at most ``max_delay``) as long as its
error is *transient* (:func:`is_transient`: a refused, reset or timed-out
connection, or a throttling answer) and the total pause stays within
``budget`` seconds.  Each retry is said in the log (the ``tfsnippet.storage``
logger).  When the budget is spent, :class:`StoreOutageError` names the
store, the operation and the last error.

Errors that another attempt cannot fix (a missing object, refused
credentials, a failed precondition) are raised at once, unchanged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

__all__ = ['StoreOutageError', 'RetryPolicy', 'call_with_retry', 'is_transient']

logger = logging.getLogger('tfsnippet.storage')

#: Class names (anywhere in an error's MRO or cause chain) of the transient
#: errors of botocore, aiohttp, urllib3, requests and the standard library.
_TRANSIENT_NAMES = frozenset({
    'EndpointConnectionError', 'ConnectionClosedError', 'ConnectTimeoutError',
    'ReadTimeoutError', 'ConnectionError', 'ProxyConnectionError',
    'ClientConnectorError', 'ClientOSError', 'ServerDisconnectedError',
    'ClientPayloadError', 'ServerTimeoutError', 'IncompleteRead',
    'ProtocolError', 'ResponseStreamingError', 'TimeoutError',
})
#: Words of a store's answer that mean "try again later".
_TRANSIENT_WORDS = ('slowdown', 'slow down', 'throttl', 'serviceunavailable',
                    'service unavailable', 'internalerror', 'requesttimeout',
                    'connection reset', 'connection refused', 'broken pipe')


class StoreOutageError(RuntimeError):
    """A store stayed unreachable through every retry of an operation.

    Attributes:
        store: The store's URL.
        operation: What was being done (``'put'``, ``'list'``, ...).
    """

    def __init__(self, message: str, store: str, operation: str):
        super().__init__(message)
        self.store = store
        self.operation = operation


def is_transient(error: BaseException) -> bool:
    """Whether another attempt may succeed where `error` failed."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (FileNotFoundError, PermissionError, FileExistsError)):
            return False
        if isinstance(current, (ConnectionError, TimeoutError)):
            return True
        if any(k.__name__ in _TRANSIENT_NAMES for k in type(current).__mro__):
            return True
        text = str(current).lower()
        if 'precondition' in text or 'pre-condition' in text:
            return False
        if any(word in text for word in _TRANSIENT_WORDS):
            return True
        current = current.__cause__ or current.__context__
    return False


class RetryPolicy:
    """How long transient errors are retried.

    Args:
        budget: The total pause, in seconds, spent on retries of one
            operation before :class:`StoreOutageError` (0: no retry).
        base_delay: The first pause, in seconds; doubled for each retry.
        max_delay: The longest single pause.
        sleep: The pause function (a fake one in tests).

    Raises:
        ValueError: A negative `budget`, or a delay that is not positive.
    """

    def __init__(self, budget: float = 4.0, base_delay: float = 0.25, max_delay: float = 2.0,
                 sleep: Callable[[float], Any] = time.sleep):
        if not budget >= 0:
            raise ValueError(f'`budget` must be a number of seconds >= 0, got {budget!r}')
        if not (base_delay > 0 and max_delay > 0):
            raise ValueError(f'`base_delay` and `max_delay` must be > 0 seconds, got '
                             f'{base_delay!r} and {max_delay!r}')
        self.budget = float(budget)
        self.base_delay = float(base_delay)
        self.max_delay = float(max_delay)
        self.sleep = sleep

    def delays(self) -> list[float]:
        """The pauses before each retry; their sum is at most `budget`."""
        out: list[float] = []
        delay, left = self.base_delay, self.budget
        while left > 1e-9:
            step = min(delay, self.max_delay, left)
            out.append(step)
            left -= step
            delay *= 2
        return out


DEFAULT_POLICY = RetryPolicy()


def call_with_retry(store: str, operation: str, fn: Callable[..., Any], *args: Any,
                    policy: RetryPolicy | None = None, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)``, retried on transient errors (see the module).

    Raises:
        StoreOutageError: A transient error lasted through every retry.
        Exception: What `fn` raised, when it is not transient.
    """
    policy = policy or DEFAULT_POLICY
    delays = policy.delays()
    attempt = 0
    while True:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            if not is_transient(e):
                raise
            if attempt >= len(delays):
                raise StoreOutageError(
                    f'The store {store!r} did not answer the {operation} of '
                    f'{attempt + 1} attempts over {sum(delays):.1f} s: '
                    f'{type(e).__name__}: {e}', store, operation) from e
            logger.warning('The store %r failed a %s (%s: %s); retry %d of %d in %.2f s',
                           store, operation, type(e).__name__, e, attempt + 1, len(delays),
                           delays[attempt])
            policy.sleep(delays[attempt])
            attempt += 1
