"""The loop's restore: what a :class:`~tfsnippet.TrainLoop` does on entering, before any component.

:func:`restore_loop` runs when the ``with`` block is entered, after the
backend is chosen and before any component's ``on_restore``/``on_enter``:

1. the loop's checkpoint source (its :class:`~tfsnippet.Checkpointer`, if
   any) prepares its saver and cleans up after a killed save;
2. the newest readable checkpoint of the store (or the one asked for) puts
   back the variables and the objects' states;
3. under multi-worker training, every worker checks that it resumed the
   chief's checkpoint (one broadcast and one ``agree_any``, the same two
   collectives on every worker, checkpoint or not);
4. the loop's own state is loaded (counters, validation monitor, stop
   reason, where each DataFlow is, where the ``tf.data`` iterators' saved
   states are), and each component receives its state under its ``state_key``;
5. the source is told where the run resumed (``restored_from``, the pins
   of the best checkpoints), and the loop says ``Resume training: ...``.

Components are attached when added (:meth:`~tfsnippet.TrainLoop.add_component`),
so a state arriving here has a home.

On disk the loop's state stays where every checkpoint written so far has
it: among the objects' states under
:data:`~tfsnippet.scaffold.checkpoint.saver.LOOP_STATE_KEY` (``'$$train_loop'``),
so that old checkpoints keep resuming; it is no longer a user object.
"""

from __future__ import annotations

from typing import Any

from .saver import LOOP_STATE_KEY
from .state_format import CheckpointMismatchError

__all__ = ['restore_loop']


def restore_loop(loop: Any) -> str | None:
    """Restore `loop` from its checkpoint source; return the checkpoint's path or ``None``.

    The source is the loop's component of role ``'checkpointer'``, which
    provides ``open_saver(loop)`` (its :class:`~.saver.CheckpointSaver`,
    built with the loop's state), ``restore_from`` (``True``: the newest,
    ``False``: none, or a path) and ``restored(loop, path)``.

    Raises:
        ~tfsnippet.scaffold.checkpoint.CheckpointMismatchError: The checkpoint
            does not match the variables (a one-line message: what differs, in
            short, and how to start afresh).
        RuntimeError: The workers resumed from different checkpoints.
        KeyError: The checkpoint lacks the loop's state.
    """
    source = loop.component('checkpointer')
    if source is None:
        return None
    saver = source.open_saver(loop)
    wanted = source.restore_from
    restored: tuple[str, dict[str, Any]] | None = None
    try:
        if wanted is True:
            restored = saver.restore_latest(ignore_non_exist=True)
        elif wanted is not False:
            restored = (wanted, saver.restore(wanted))
    except CheckpointMismatchError as e:
        raise CheckpointMismatchError(
            e.path, e.missing, e.unexpected, e.mismatched,
            advice='The model changed since the checkpoint was saved: to start afresh, pass '
                   '`restore_checkpoint=False` or use a new `checkpoint_dir` (and `warm_start=` '
                   'to reuse the matching weights)') from None
    loop_state = None
    if restored is not None:
        saved = restored[1].get(LOOP_STATE_KEY)
        if not isinstance(saved, dict) or 'loop' not in saved:
            raise KeyError(f'The loop state ({LOOP_STATE_KEY!r}) is not found in the '
                           f'checkpoint: {restored[0]}')
        loop_state = saved['loop']
    _agree(loop, None if loop_state is None else int(loop_state['step']), source)
    path = None if restored is None else restored[0]
    if loop_state is not None:
        loop.load_state_dict(loop_state)
        if path is not None:   # where the tf.data iterators' states are
            loop.progress.datasets.use_files(saver.loop_files_of(path))
    source.restored(loop, path)
    if path is not None:
        loop.println(f'Resume training: epoch {loop.epoch}, step {loop.step}, '
                     f'from checkpoint {path}')
    return path


def _agree(loop: Any, step: int | None, source: Any) -> None:
    """Every worker must go on from the chief's checkpoint (two all-reduces under
    multi-worker training; nothing to agree on with one worker)."""
    backend = loop.backend
    mine = -1. if step is None else float(step)
    chief = backend.broadcast_from_chief(mine)
    if backend.agree_any(chief != mine):
        def desc(value: float) -> str:
            return 'no checkpoint' if value < 0 else f'the checkpoint of step {int(value)}'
        raise RuntimeError(
            f'The workers resumed from different checkpoints (this worker, '
            f'{backend.worker_index}: {desc(mine)}; the chief: {desc(chief)}): every '
            f'worker must read the same `checkpoint_dir` {source.checkpoint_dir!r}, a '
            f'directory they share')
