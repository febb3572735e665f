"""The classic shortcuts of the training loop onto its feature components."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..event_keys import EventKeys

__all__ = ['FeatureFacades']


class FeatureFacades:
    """``make_checkpoint``, ``add_summary``, ``summary_writer``... of
    :class:`~tfsnippet.TrainLoop`: each finds the component that does the
    work by its :attr:`~tfsnippet.LoopComponent.role`."""

    _events: Any

    if TYPE_CHECKING:  # provided by TrainLoop and DisposableContext
        def component(self, role: str) -> Any: ...

        def _require_entered(self) -> None: ...

        @property
        def step(self) -> int: ...

    @property
    def use_early_stopping(self) -> bool:
        """Whether an early-stopping component is plugged in."""
        return self.component('early_stopping') is not None

    @property
    def summary_writer(self) -> Any:
        """The summary writer, or ``None`` (a loop-opened one exists while entered)."""
        summaries = self.component('summaries')
        return summaries.writer if summaries is not None else None

    @property
    def checkpoint_saver(self) -> Any:
        """The checkpoint saver of `checkpoint_dir` while entered, else ``None``."""
        checkpointer = self.component('checkpointer')
        return checkpointer.saver if checkpointer is not None else None

    def _feature(self, role: str, what: str, how: str) -> Any:
        component = self.component(role)
        if component is None:
            raise RuntimeError(f'{what}: pass {how} to TrainLoop')
        self._require_entered()
        return component

    def make_checkpoint(self) -> str:
        """Save a checkpoint at the current step now and return its path (with
        ``checkpoint_async=True``: the path it has once written in the background)."""
        return self._feature('checkpointer', 'Checkpoint directory is not configured',
                             '`checkpoint_dir`').save(self)

    def export_best(self, path: str) -> list[str]:
        """Write the weights of the best checkpoint (``checkpoint_keep_best``) to
        `path` for serving, inside the ``with`` block or after it; return the
        paths written (see :meth:`Checkpointer.export_best
        <tfsnippet.scaffold.components.checkpointer.Checkpointer.export_best>`)."""
        checkpointer = self.component('checkpointer')
        if checkpointer is None:
            raise RuntimeError('`export_best()` needs the best checkpoint: pass '
                               '`checkpoint_dir` and `checkpoint_keep_best=True` to TrainLoop')
        return checkpointer.export_best(self, path)

    def add_summary(self, summary: Any) -> None:
        """Write a ``Summary`` proto or its bytes (from ``session.run``) at the loop's step."""
        self._feature('summaries', '`add_summary()` needs a summary writer',
                      '`summary_dir` or `summary_writer`').add_summary(summary, self.step)
        self._events.fire(EventKeys.SUMMARY_ADDED, self, summary)
