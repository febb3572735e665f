"""The classic shortcuts of the training loop onto its feature components.

Each is a method (or property) of :class:`~tfsnippet.TrainLoop`: it finds
the component that does the work by its
:attr:`~tfsnippet.LoopComponent.role`, through the loop's public API.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..event_keys import EventKeys

if TYPE_CHECKING:  # pragma: no cover
    from .core import TrainLoop

__all__ = ['use_early_stopping', 'summary_writer', 'checkpoint_saver', 'make_checkpoint',
           'export_best', 'add_summary']


def use_early_stopping(loop: TrainLoop) -> bool:
    """Whether an early-stopping component is plugged in."""
    return loop.component('early_stopping') is not None


def summary_writer(loop: TrainLoop) -> Any:
    """The summary writer, or ``None`` (a loop-opened one exists while entered)."""
    summaries = loop.component('summaries')
    return summaries.writer if summaries is not None else None


def checkpoint_saver(loop: TrainLoop) -> Any:
    """The checkpoint saver of `checkpoint_dir` while entered, else ``None``."""
    checkpointer = loop.component('checkpointer')
    return checkpointer.saver if checkpointer is not None else None


def _feature(loop: TrainLoop, role: str, what: str, how: str) -> Any:
    component = loop.component(role)
    if component is None:
        raise RuntimeError(f'{what}: pass {how} to TrainLoop')
    loop._require_entered()
    return component


def make_checkpoint(loop: TrainLoop) -> str:
    """Save a checkpoint at the current step now and return its path (with
    ``checkpoint_async=True``: the path it has once written in the background)."""
    return _feature(loop, 'checkpointer', 'Checkpoint directory is not configured',
                    '`checkpoint_dir`').save(loop)


def export_best(loop: TrainLoop, path: str) -> list[str]:
    """Write the weights of the best checkpoint (``checkpoint_keep_best``) to
    `path` for serving, inside the ``with`` block or after it; return the
    paths written (see :meth:`Checkpointer.export_best
    <tfsnippet.scaffold.components.checkpointer.Checkpointer.export_best>`)."""
    checkpointer = loop.component('checkpointer')
    if checkpointer is None:
        raise RuntimeError('`export_best()` needs the best checkpoint: pass '
                           '`checkpoint_dir` and `checkpoint_keep_best=True` to TrainLoop')
    return checkpointer.export_best(loop, path)


def add_summary(loop: TrainLoop, summary: Any) -> None:
    """Write a ``Summary`` proto or its bytes (from ``session.run``) at the loop's step."""
    _feature(loop, 'summaries', '`add_summary()` needs a summary writer',
             '`summary_dir` or `summary_writer`').add_summary(summary, loop.step)
    loop.events.fire(EventKeys.SUMMARY_ADDED, loop, summary)
