"""The plug-in interface of the training loop."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ...utils.events import EventHandle, Every
from ..event_keys import EventKeys

if TYPE_CHECKING:  # pragma: no cover
    from ..loop.core import TrainLoop

__all__ = ['LoopComponent']


class LoopComponent:
    """A feature that plugs into a :class:`~tfsnippet.TrainLoop`.

    Early stopping, checkpoints, TensorBoard summaries, the loss guard,
    reduce-on-plateau and the progress bar are components; your own can be
    added with :meth:`TrainLoop.add_component`.  Its hooks run in this order:

    * :meth:`on_attach`, when it is added to the loop: build what depends on
      the loop (a :class:`~tfsnippet.Monitor` of its validation metric...),
      so that a state the loop restores has a home;
    * :meth:`on_restore`, in registration order, when the ``with`` block is
      entered, after the loop restored its checkpoint (which gave each
      component its state through :meth:`load_state_dict`), before any
      component's :meth:`on_enter`: where a warm start puts back weights;
    * :meth:`on_enter`, in registration order, after every ``on_restore``
      and before ``ENTER_LOOP`` fires: subscribe to events here, with
      :meth:`subscribe` (its handlers are removed when the loop is left);
    * :meth:`on_valid_metric`, each time the loop's validation metric is
      collected, after ``best_valid_metric`` is updated;
    * :meth:`on_exit`, in reverse registration order, when the ``with``
      block is left (also through an exception), after ``EXIT_LOOP`` fired.

    A component with persistent state returns a non-empty :attr:`state_key`
    and implements :meth:`state_dict`/:meth:`load_state_dict`; the loop's
    checkpoints carry that state under the key.  Stateful built-in
    components derive their key from their configuration and take a
    ``name=`` argument to tell two of the same configuration apart; two
    components of one loop may not share a key.
    """

    #: What the loop's facades (``make_checkpoint``, ``summary_writer``...)
    #: look a component up by; empty for none.
    role: str = ''

    @property
    def state_key(self) -> str:
        """The key of this component's state in checkpoints; empty for no state."""
        return ''

    def subscribe(self, loop: TrainLoop, key: Any, handler: Callable[..., Any],
                  every: Every | int | dict[str, Any] | None = None) -> EventHandle:
        """``loop.events.on(key, handler, every=every)``, removed when the loop is left."""
        return loop.events.on(key, handler, every=every, owner=self)

    @staticmethod
    @contextlib.contextmanager
    def hold(loop: TrainLoop, cause: str) -> Iterator[None]:
        """Time the block as the loop held up by `cause` (``'checkpoint'``,
        ``'summaries'``...): ``LOOP_HELD(loop, cause, seconds)`` fires after it
        (also when it raises), read with the loop's clock only while a handler
        listens (a time breakdown), so it costs nothing otherwise."""
        handlers = loop.events.handlers(EventKeys.LOOP_HELD)
        if not handlers:
            yield
            return
        clock = loop.clock
        start = clock()
        try:
            yield
        finally:
            loop.events.fire(EventKeys.LOOP_HELD, loop, cause, clock() - start)

    def expect_metric(self, loop: TrainLoop, name: str, who: str) -> None:
        """Say, through the loop's :meth:`~TrainLoop.notice`, when metric `name`
        (what `who` watches) has not been collected by the end of the first
        epoch, listing the names that were (``val_loss`` vs ``valid_loss``)."""
        def check(loop: TrainLoop) -> None:
            loop.events.remove_owned((self, 'expect', name))
            book = loop.metric_book
            if not book.seen(name):
                loop.notice(f'`{name}`, which {who} watches, was not collected during epoch '
                            f'{loop.epoch}; the metrics collected were {book.names()}')
        loop.events.on(EventKeys.AFTER_EPOCH, check, owner=(self, 'expect', name))

    def on_attach(self, loop: TrainLoop) -> None:
        """Called when the component is added to `loop` (before its state may arrive)."""

    def on_restore(self, loop: TrainLoop) -> None:
        """Called first when `loop` is entered, after the loop restored its checkpoint."""

    def on_enter(self, loop: TrainLoop) -> None:
        """Called when `loop` is entered."""

    def on_valid_metric(self, loop: TrainLoop, value: float, improved: bool) -> None:
        """Called when the validation metric `value` is collected."""

    def on_exit(self, loop: TrainLoop, error: BaseException | None) -> None:
        """Called when `loop` is left; `error` is the exception leaving it, if any."""

    def on_results(self, loop: TrainLoop, results: dict[str, float]) -> None:
        """Called with the final results collected after `loop` has been left
        (those collected inside its ``with`` block are in ``loop.results``
        when :meth:`on_exit` is called); raising refuses them."""

    def state_dict(self) -> dict[str, Any]:
        """The persistent state as plain data."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back a state from :meth:`state_dict`."""
