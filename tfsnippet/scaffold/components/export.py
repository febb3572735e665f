"""The loop component that exports the best checkpoint's weights when training ends."""

from __future__ import annotations

import os
from typing import Any

import tensorflow as tf

from ...storage import is_url
from ..checkpoint.export import WEIGHTS_SUFFIX, check_export_path, is_keras_model, write_export
from .base import LoopComponent

__all__ = ['ExportBest', 'export_best_weights']


class ExportBest(LoopComponent):
    """Writes the weights of the best pinned checkpoint to `path` when the loop is left.

    Only when the loop is left normally (not through an exception or a
    preemption), after the checkpointer's final save, on the chief; see
    :meth:`~tfsnippet.Checkpointer.export_best` for what `path` receives.
    ``TrainLoop(export_best=path)`` adds one; add it before the
    :class:`~tfsnippet.Checkpointer` (components exit in reverse order), whose
    `keep_best` (or ``KeepBest`` policy) pins the best.

    Args:
        path: Eager mode: a ``.weights.h5`` file; graph mode: a directory;
            either may be an object-store URL (``s3://...``), uploaded once
            written (see :mod:`tfsnippet.scaffold.checkpoint.export`).
        checkpointer: The checkpointer whose best is exported (default: the loop's).

    Raises:
        ValueError: The directory of `path` does not exist, or `path` does not
            suit the TF style.
    """

    role = 'export'

    def __init__(self, path: str | os.PathLike[str], checkpointer: Any = None):
        # the loop creates its checkpointer's `checkpoint_dir`: the export may go into it
        created = None if checkpointer is None else checkpointer.checkpoint_dir
        self._path = check_export_path(path, 'export_best', created_dir=created)
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


def export_best_weights(checkpointer: Any, loop: Any, path: str | os.PathLike[str]) -> list[str]:
    """Write the weights of `checkpointer`'s best pinned checkpoint to `path`; return the
    paths written (what :meth:`~tfsnippet.Checkpointer.export_best` does)."""
    if checkpointer.keep_best is None:
        raise RuntimeError('`export_best` needs `checkpoint_keep_best=True` (or a metric '
                           'name): the weights of the best checkpoint are what it exports')
    saver = checkpointer.best_saver
    if saver is None:
        raise RuntimeError('`export_best` needs the loop to have been entered')
    path = check_export_path(path, 'path', created_dir=checkpointer.checkpoint_dir)
    if not is_url(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)   # within `checkpoint_dir`
    saver.wait()   # a save in flight may carry a new pin, or prune the old one
    recorded = saver.store.best()
    if recorded is None:
        monitor = checkpointer.best_monitor
        name = monitor.name if monitor is not None else '?'
        raise RuntimeError(
            f'No best checkpoint to export in `checkpoint_dir` {checkpointer.checkpoint_dir!r}: '
            f'`{name}`, which `checkpoint_keep_best` watches, has no value that counts (never '
            f'collected, or only NaN); the metrics collected were '
            f'{loop.metric_book.names()}')
    values = saver.saved_values(recorded[0])
    written = []
    for target_path, targets in _export_targets(checkpointer, path):
        write_export(target_path, targets, values)
        written.append(target_path)
    return written


def _export_targets(checkpointer: Any, path: str) -> list[tuple[str, Any]]:
    variables = checkpointer.variables
    if not tf.executing_eagerly():
        return [(path, variables or tf.compat.v1.trainable_variables())]
    models = [(key, obj) for key, obj in checkpointer.save_objects.items()
              if is_keras_model(obj)]
    if len(models) == 1:
        return [(path, models[0][1])]
    if models:
        stem = path[:-len(WEIGHTS_SUFFIX)]
        return [(f'{stem}-{key}{WEIGHTS_SUFFIX}', model) for key, model in models]
    if not variables:
        raise RuntimeError('`export_best` has nothing to export: pass `param_vars` or a '
                           'Keras model in `checkpoint_save_objects`')
    return [(path, variables)]
