"""Reading a flow in a background thread, some batches ahead of the consumer."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

from ..utils.concepts import AutoInitAndCloseable
from ..utils.validation import check_positive_int
from .base import DataFlow

__all__ = ['ThreadingFlow']

_END = object()          # end of an epoch
_POLL_SECONDS = 0.05     # how often a blocked worker looks for a stop request


class _Failure:
    """An exception raised by the source, on its way to the consumer."""

    def __init__(self, error: BaseException):
        self.error = error


class ThreadingFlow(DataFlow, AutoInitAndCloseable):
    """Iterates `source` in a background thread, up to `prefetch` batches ahead.

    The worker thread starts with the first iteration (or ``init()``/``with
    flow:``) and reads one epoch of the source each time the consumer starts
    an epoch, so per-epoch work of the source (shuffling) happens in the
    epoch it belongs to.

    * An exception raised by the source is raised again in the consumer,
      at the batch where it happened.
    * Leaving an epoch early (``break``, an exception) stops the worker's
      reading of that epoch within one batch; the next iteration starts a new
      epoch.
    * :meth:`close` (or leaving ``with flow:``) stops and joins the thread;
      iterating again starts a new one.
    * The position (:meth:`state_dict`) is the consumer's, not the worker's:
      batches read ahead but not consumed are served again after a resume.

    Args:
        source: The flow to read.
        prefetch: How many batches the worker may read ahead (at least 1).

    Raises:
        ValueError: `prefetch` is not a positive int.
    """

    def __init__(self, source: DataFlow, prefetch: int):
        if not isinstance(source, DataFlow):
            raise TypeError(f'`source` must be a DataFlow, got {source!r}')
        prefetch = check_positive_int(prefetch, 'prefetch')
        self._source = source
        self._prefetch = prefetch
        self._thread: threading.Thread | None = None
        self._requests: queue.Queue = queue.Queue()
        self._batches: queue.Queue = queue.Queue(maxsize=prefetch)
        self._idle = threading.Event()
        self._idle.set()
        self._wanted_epoch = -1     # the epoch the consumer reads; others are abandoned
        self._epoch_counter = 0
        self._epoch_start: dict | None = None
        self._served = 0
        self._in_epoch = False

    @property
    def source(self) -> DataFlow:
        """The flow read by the worker."""
        return self._source

    @property
    def prefetch_num(self) -> int:
        """How many batches the worker may read ahead."""
        return self._prefetch

    # ------------------------------------------------------------ worker
    def _put(self, epoch: int, item: Any) -> bool:
        """Queue `item`; give up (False) if the epoch is abandoned meanwhile."""
        while True:
            if self._wanted_epoch != epoch:
                return False
            try:
                self._batches.put((epoch, item), timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue

    def _work(self) -> None:
        while True:
            epoch = self._requests.get()
            if epoch is None:
                return
            try:
                iterator = iter(self._source)
                try:
                    for batch in iterator:
                        if not self._put(epoch, batch):
                            break
                    else:
                        self._put(epoch, _END)
                finally:
                    close = getattr(iterator, 'close', None)
                    if close is not None:
                        close()
            except BaseException as e:  # handed to the consumer, which raises it
                self._put(epoch, _Failure(e))
            finally:
                self._idle.set()

    def _init(self) -> None:
        self._idle.set()
        self._thread = threading.Thread(target=self._work, name='ThreadingFlow', daemon=True)
        self._thread.start()

    def _close(self) -> None:
        self._wanted_epoch = -1
        self._requests.put(None)
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._drain()
        self._requests = queue.Queue()

    def _drain(self) -> None:
        while True:
            try:
                self._batches.get_nowait()
            except queue.Empty:
                return

    # ------------------------------------------------------------ consumer
    def _minibatch_iterator(self) -> Iterator[tuple]:
        self.init()
        self._idle.wait()   # the previous epoch's reading has stopped
        self._drain()
        start = self._source.state_dict() if self._source.is_resumable else None
        epoch = self._epoch_counter
        self._epoch_counter += 1
        self._wanted_epoch = epoch
        self._idle.clear()
        self._requests.put(epoch)
        self._epoch_start = start
        self._served = 0
        self._in_epoch = True
        try:
            while True:
                try:
                    got_epoch, item = self._batches.get(timeout=_POLL_SECONDS)
                except queue.Empty:
                    if self._thread is None or not self._thread.is_alive():
                        raise RuntimeError(
                            'The ThreadingFlow was closed in the middle of an epoch') from None
                    continue
                if got_epoch != epoch:
                    continue
                if item is _END:
                    return
                if isinstance(item, _Failure):
                    error = item.error
                    if hasattr(error, 'add_note'):
                        error.add_note('(raised by the source of a ThreadingFlow, in its '
                                       'worker thread)')
                    raise error
                self._served += 1
                yield item
        finally:
            self._in_epoch = False
            self._wanted_epoch = -1
            self._idle.wait()
            self._drain()

    # ------------------------------------------------------------ state
    @property
    def is_resumable(self) -> bool:
        return self._source.is_resumable

    def state_dict(self) -> dict[str, Any]:
        if self._in_epoch and self._epoch_start is not None:
            return {'start': self._epoch_start['start'],
                    'served': self._epoch_start['served'] + self._served}
        return self._source.state_dict()   # the worker is idle between epochs

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self._is_iterating:
            raise RuntimeError('`load_state_dict()` cannot be called while the flow is iterated')
        self._idle.wait()
        self._source.load_state_dict(state)
