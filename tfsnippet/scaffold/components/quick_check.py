"""Dry runs: a few training and validation steps writing nothing lasting, and a
validation before the first epoch."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ...utils.text import typed_repr
from ...utils.validation import check_positive_int
from ..event_keys import EventKeys
from .base import LoopComponent
from .suspend import SuspendableWrites

if TYPE_CHECKING:  # pragma: no cover
    from ..loop.core import TrainLoop

__all__ = ['QuickCheck', 'SanityCheck']


class QuickCheck(LoopComponent):
    """Runs `train_steps` training steps and `valid_steps` validation steps, then
    stops, writing nothing that lasts (Lightning's ``fast_dev_run``).

    Add it to check a script end to end in seconds before spending a night
    on it::

        loop.add_component(spt.QuickCheck(train_steps=2, valid_steps=2))

    * After `train_steps` steps (counted from the loop's entry) it asks the
      loop to stop: the rest of that epoch's body runs (its validation, its
      log line), then the epoch loop ends with ``Training stopped at epoch
      1, step 2: quick check: ...``.
    * A validation through tfsnippet's :class:`~tfsnippet.Evaluator`
      (a :class:`~tfsnippet.Trainer`'s validation included) evaluates only
      its first `valid_steps` batches; a validation you write yourself runs
      as written (read :attr:`valid_steps` to cut it short).
    * Every component that writes something lasting (a
      :class:`~tfsnippet.scaffold.components.suspend.SuspendableWrites`:
      the checkpointer, the TensorBoard summaries, the metric sinks and an
      Experiment's results recorder) is suspended: no checkpoint (not even
      the final one), no summary file, no row.  Those plugged in before this
      component are suspended at once (the ``TrainLoop`` keywords' are),
      the others when the loop is entered, after the checkpoint was read:
      add this component last, or a checkpointer added after it may leave
      an empty ``checkpoint/`` folder.  A checkpoint found is still resumed.
      An :class:`~tfsnippet.Experiment`'s own run folder and run row are
      the Experiment's: nothing of the loop is recorded into them, but
      they are made (run the quick check outside an Experiment, or with a
      scratch `root`, to keep the results store clean).

    Pair it with a :class:`SanityCheck` to validate before the first step.

    Args:
        train_steps: The training steps to run.
        valid_steps: The batches each validation through an Evaluator takes.

    Raises:
        ValueError: A count is not a positive int.
    """

    def __init__(self, train_steps: int = 2, valid_steps: int = 2):
        self._train_steps = check_positive_int(train_steps, 'train_steps')
        self._valid_steps = check_positive_int(valid_steps, 'valid_steps')
        self._done = 0

    def __repr__(self) -> str:
        return f'QuickCheck(train_steps={self._train_steps}, valid_steps={self._valid_steps})'

    @property
    def train_steps(self) -> int:
        """The training steps a quick check runs."""
        return self._train_steps

    @property
    def valid_steps(self) -> int:
        """The batches a validation through an Evaluator takes."""
        return self._valid_steps

    @property
    def reason(self) -> str:
        """What suspended writers and the stop say."""
        return f'quick check ({self._train_steps} training steps)'

    def _suspend(self, loop: TrainLoop) -> None:
        for writer in loop.components_of(LoopComponent):
            if isinstance(writer, SuspendableWrites):
                writer.suspend_writes(self.reason)

    def on_attach(self, loop: TrainLoop) -> None:
        self._suspend(loop)

    def on_restore(self, loop: TrainLoop) -> None:
        self._suspend(loop)   # writers added after this component

    def on_enter(self, loop: TrainLoop) -> None:
        self._done = 0
        loop.println(f'Quick check: {self._train_steps} training steps, {self._valid_steps} '
                     f'batches per validation, writing nothing that lasts')
        self.subscribe(loop, EventKeys.AFTER_STEP, self._after_step)

    def _after_step(self, loop: TrainLoop) -> None:
        self._done += 1
        if self._done >= self._train_steps:
            loop.request_stop(f'quick check: {self._done} training steps done')


class SanityCheck(LoopComponent):
    """Validates on a few batches when the loop is entered, before the first
    epoch, so that a broken validation fails in seconds, not after an epoch
    (Lightning's ``num_sanity_val_steps``).

    `validate` is an :class:`~tfsnippet.Evaluator` (its first `steps`
    batches are evaluated, and nothing is collected into the loop) or a
    function of no argument returning ``{name: value}`` (or ``None``),
    which runs as written.  The values are printed (``Sanity check:
    valid_loss 2.31 on 2 batches``); an exception leaves the loop at once,
    and a value that is NaN or infinite raises a ``RuntimeError`` naming it.
    It runs each time the loop is entered (a resumed run too).

    Args:
        validate: An Evaluator, or a function returning the metrics.
        steps: The batches an Evaluator takes.

    Raises:
        TypeError: `validate` is not callable and not an Evaluator.
        ValueError: `steps` is not a positive int.
    """

    def __init__(self, validate: Any, steps: int = 2):
        evaluate = getattr(validate, 'evaluate', None)
        if not callable(evaluate) and not callable(validate):
            raise TypeError(f'`validate` must be an Evaluator or a function returning the '
                            f'metrics, got {typed_repr(validate)}')
        self._validate = validate
        self._steps = check_positive_int(steps, 'steps')
        #: the metrics of the last sanity check
        self.last_metrics: dict[str, float] = {}

    def on_enter(self, loop: TrainLoop) -> None:
        evaluate: Callable[..., Any] | None = getattr(self._validate, 'evaluate', None)
        if callable(evaluate):
            values = evaluate(max_batches=self._steps)
            where = f' on {self._steps} batches'
        else:
            values = self._validate()
            where = ''
        if values is None:
            values = {}
        if not isinstance(values, Mapping):
            raise TypeError(f'`validate` must return a dict of metrics or None, got '
                            f'{typed_repr(values)}')
        self.last_metrics = {str(k): float(v) for k, v in values.items()}
        bad = [k for k, v in self.last_metrics.items() if not math.isfinite(v)]
        if bad:
            raise RuntimeError(f'Sanity check: the validation before the first epoch gave '
                               f'{", ".join(f"`{k}` = {self.last_metrics[k]}" for k in bad)}: '
                               f'fix the validation (or the model) before training')
        shown = ', '.join(f'{k} {v:.6g}' for k, v in self.last_metrics.items()) or 'no metric'
        loop.println(f'Sanity check: {shown}{where}')
