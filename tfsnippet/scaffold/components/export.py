"""The loop component that exports the best checkpoint's weights when training ends."""

from __future__ import annotations

import os
from typing import Any

from ..checkpoint.export import check_export_path
from .base import LoopComponent

__all__ = ['ExportBest']


class ExportBest(LoopComponent):
    """Writes the weights of the best pinned checkpoint to `path` when the loop is left.

    Only when the loop is left normally (not through an exception or a
    preemption), after the checkpointer's final save, on the chief; see
    :meth:`~tfsnippet.Checkpointer.export_best` for what `path` receives.
    ``TrainLoop(export_best=path)`` adds one; add it before the
    :class:`~tfsnippet.Checkpointer` (components exit in reverse order), whose
    `keep_best` (or ``KeepBest`` policy) pins the best.

    Args:
        path: Eager mode: a ``.weights.h5`` file; graph mode: a directory.
        checkpointer: The checkpointer whose best is exported (default: the loop's).

    Raises:
        ValueError: The directory of `path` does not exist, or `path` does not
            suit the TF style.
    """

    role = 'export'

    def __init__(self, path: str | os.PathLike[str], checkpointer: Any = None):
        self._path = check_export_path(path, 'export_best')
        self._checkpointer = checkpointer
        self.exported: list[str] = []   # the paths written when the loop was last left

    @property
    def path(self) -> str:
        """Where the weights go."""
        return self._path

    def on_enter(self, loop: Any) -> None:
        self.exported = []
        if (self._checkpointer or loop.component('checkpointer')) is None:
            raise RuntimeError('`ExportBest` exports the best checkpoint of a Checkpointer: '
                               'the loop has none (pass `checkpoint_dir`)')

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        checkpointer = self._checkpointer or loop.component('checkpointer')
        if (error is not None or checkpointer is None or not checkpointer.finished or
                checkpointer.preempted_by is not None or not loop.is_chief):
            return
        self.exported = checkpointer.export_best(loop, self._path)
        best = checkpointer.best_checkpoint()
        assert best is not None
        loop.println(f'Exported the best weights ({best[1]["metric"]} = '
                     f'{best[1]["value"]:.6g}, epoch {best[1]["epoch"]}, step '
                     f'{best[1]["step"]}) to {", ".join(self.exported)}')
