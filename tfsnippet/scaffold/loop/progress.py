"""The loop's counters and resume bookkeeping, as one small serialisable object."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tensorflow as tf

from ...dataflows import DataFlow, ExtraInfoDataFlow
from ...tfops.session import get_default_session_or_error
from ...tfops.tf_vars import is_variable
from ...utils.text import typed_repr
from ...utils.validation import check_positive_int
from .tfdata import DatasetPositions

__all__ = ['LoopProgress', 'check_limit', 'check_state_field']


def check_limit(name: str, value: Any) -> int | None:
    """Validate a `max_epoch`/`max_step` value; tensors and variables are evaluated."""
    if isinstance(value, tf.Tensor) or is_variable(value):
        value = (np.asarray(value) if tf.executing_eagerly()
                 else get_default_session_or_error().run(value))
        value = value.item() if isinstance(value, np.ndarray) and value.shape == () else value
    return check_positive_int(value, name, allow_none=True)


def check_state_field(state: Mapping[str, Any], name: str, kind: str, required: bool = False,
                      nullable: bool = True, within: str = '') -> None:
    """Check the field `name` of a saved state: of `kind` (``'count'``, an int
    >= 0; ``'number'``; ``'str'``; ``'list'``; ``'dict'``), or ``None`` if
    `nullable`; missing only if not `required`.  Messages call it
    ``<within>.<name>`` when `within` names the dict `state` is a field of.

    Raises:
        ValueError: The field is missing or of another type; the message names
            it and shows what it holds.
    """
    label = f'{within}.{name}' if within else name
    if name not in state:
        if required:
            raise ValueError(f'`{label}` is missing (it holds {sorted(state)})')
        return
    value = state[name]
    if value is None and nullable:
        return
    if kind == 'count':
        ok = (isinstance(value, numbers.Integral) and not isinstance(value, bool)
              and int(value) >= 0)
        expected = 'an int >= 0'
    elif kind == 'number':
        ok = isinstance(value, numbers.Real) and not isinstance(value, bool)
        expected = 'a number'
    else:
        types: dict[str, type | tuple[type, ...]] = {'str': str, 'list': (list, tuple),
                                                     'dict': dict}
        ok = isinstance(value, types[kind])
        expected = f'a {kind}'
    if not ok:
        raise ValueError(f'`{label}` must be {expected}{" or None" if nullable else ""}, '
                         f'got {typed_repr(value)}')


@dataclass
class LoopProgress:
    """Where a loop is: what the generators count and what a resume needs.

    The generators of :class:`~tfsnippet.TrainLoop` update it in place;
    :meth:`state_dict` is what a checkpoint stores of it.

    Attributes:
        epoch: Epochs begun (0 before the first).
        step: Steps begun, over all epochs (0 before the first).
        steps_per_epoch: The mean number of steps of the finished epochs.
        epoch_first_step: `step` when the current epoch began.
        epoch_resumed: Whether the current epoch continues one a checkpoint was
            taken in.
        epoch_batches: How many batches the data of the current step loop
            holds, when it knows (a list, a DataFlow), else ``None``.
        epoch_finished: Whether the latest epoch is over: its ``AFTER_EPOCH``
            fired, or its step loop ran to its end (the rest of its body
            then belongs to it; a resume starts the next epoch).  An epoch
            left through an exception or ``break`` inside its step loop is
            not over: a resume continues it.
        resume_epoch_steps: Steps already done of an epoch to continue (set
            by a resume, used by the next epoch).
        flow_states: The saved positions of the DataFlows given to
            ``iter_steps``, in order, waiting to be put back.
        datasets: The iterators of the ``tf.data.Dataset``\\ s given to
            ``iter_steps`` and their saved positions
            (:class:`~tfsnippet.scaffold.loop.tfdata.DatasetPositions`).
    """

    epoch: int = 0
    step: int = 0
    steps_per_epoch: float | None = None
    epoch_first_step: int = 0
    epoch_finished: bool = True
    epoch_resumed: bool = False
    epoch_batches: int | None = None
    resume_epoch_steps: int | None = None
    flow_states: list[Any] = field(default_factory=list)
    datasets: DatasetPositions = field(default_factory=DatasetPositions)

    #: The notice of an epoch whose step loop got no data.
    EMPTY_EPOCH = ('Epoch {epoch} got no step: the data given to `iter_steps()` is empty or '
                   'exhausted (a generator or an iterator can be iterated only once; pass a '
                   'list, a DataFlow or a function of the epoch)')

    @property
    def next_epoch(self) -> int:
        """The epoch the next iteration of ``iter_epochs`` runs: the current one
        when a resume continues it, else the one after."""
        return self.epoch if self.resume_epoch_steps is not None else self.epoch + 1

    def limit_reached(self, max_epoch: int | None, max_step: int | None) -> str | None:
        """``'max_epoch reached'``/``'max_step reached'`` when no further epoch may
        begin (an epoch to continue does not count against `max_epoch`), else ``None``."""
        if self.resume_epoch_steps is None and max_epoch is not None and self.epoch >= max_epoch:
            return 'max_epoch reached'
        if max_step is not None and self.step >= max_step:
            return 'max_step reached'
        return None

    def begin_epoch(self) -> None:
        """Count a new epoch, or continue the one a checkpoint was taken in."""
        self.epoch_resumed = self.resume_epoch_steps is not None
        if self.resume_epoch_steps is not None:
            self.epoch_first_step = self.step - self.resume_epoch_steps
        else:
            self.epoch += 1
            self.epoch_first_step = self.step
        self.epoch_finished = False
        self.datasets.begin_epoch()

    def end_epoch(self) -> None:
        """Mark the current epoch as finished and update `steps_per_epoch`."""
        self.resume_epoch_steps = None
        self.epoch_finished = True
        self.steps_per_epoch = self.step / self.epoch

    def attach(self, data: Any, flows: list[Any],
               notice: Callable[[str], Any] | None = None) -> int | None:
        """Prepare `data` for a step loop; return how many items to skip.

        A :class:`~tfsnippet.DataFlow` seen for the first time is added to
        `flows` and, if a resumed checkpoint saved its position, put back
        there (nothing to skip); other data skips the steps the interrupted
        epoch had done, and a ``tf.data.Dataset`` is reported through `notice`
        (it cannot be put back at its position: a shuffled one serves other
        batches than the interrupted epoch would have).
        """
        skip, self.resume_epoch_steps = self.resume_epoch_steps, None
        self.epoch_batches = _batch_count(data)
        if isinstance(data, DataFlow) and not any(f is data for f in flows):
            flows.append(data)
            index = len(flows) - 1
            if index < len(self.flow_states):
                state, self.flow_states[index] = self.flow_states[index], None
                if state is not None and data.is_resumable:
                    data.load_state_dict(state)
                    return None   # the flow is back at its exact position
        if skip and notice is not None and isinstance(data, tf.data.Dataset):
            notice(f'Resuming epoch {self.epoch} of a `tf.data.Dataset` after {skip} steps: '
                   f'its first {skip} batches are skipped, and if it shuffles, the rest of '
                   f'this epoch and every later epoch may differ from an uninterrupted run '
                   f'(a DataFlow resumes exactly)')
        return skip

    def open_data(self, data: Any, flows: list[Any],
                  notice: Callable[[str], Any] | None = None
                  ) -> tuple[Iterator[Any] | None, int | None]:
        """Like :meth:`attach`, and for a ``tf.data.Dataset`` its iterator
        too: ``(iterator or None, items to skip)``.

        The iterator of a Dataset is kept for the checkpoints (see
        :class:`~tfsnippet.scaffold.loop.tfdata.DatasetPositions`) and, when the
        epoch continues one a checkpoint saved it in, put back at its position
        (nothing to skip).  For other data the iterator is ``None``: the caller
        makes it.
        """
        if isinstance(data, tf.data.Dataset):
            skip, self.resume_epoch_steps = self.resume_epoch_steps, None
            self.epoch_batches = None
            return self.datasets.open(data, self.epoch, skip, notice)
        return None, self.attach(data, flows, notice)

    def fraction_done(self, max_epoch: int | None, max_step: int | None,
                      step_running: bool, epoch_running: bool) -> float | None:
        """The fraction of training done, in ``[0, 1]``, or ``None`` if unknown.

        Counted against `max_step`, and against `max_epoch` (in steps once an
        epoch has finished, in epochs before); with both, the limit reached
        first counts.  A running step or epoch does not count as done.
        """
        progress = None
        steps_done = self.step - 1 if step_running else self.step
        if max_step is not None:
            progress = steps_done / max_step
        if max_epoch is not None:
            if self.steps_per_epoch:
                by_epoch = steps_done / (max_epoch * self.steps_per_epoch)
            else:
                by_epoch = (self.epoch - 1 if epoch_running else self.epoch) / max_epoch
            progress = by_epoch if progress is None else max(progress, by_epoch)
        if progress is None:
            return None
        return min(max(progress, 0.), 1.)

    def state_dict(self, flows: list[Any]) -> dict[str, Any]:
        """The state to save; a resume from it continues an epoch that is not over."""
        in_epoch = not self.epoch_finished
        return {'epoch': self.epoch, 'step': self.step,
                'steps_per_epoch': self.steps_per_epoch,
                'epoch_steps': self.step - self.epoch_first_step if in_epoch else None,
                'dataflows': [f.state_dict() if f.is_resumable else None for f in flows],
                'datasets': self.datasets.state_dict()}

    @staticmethod
    def check_state_dict(state: Mapping[str, Any]) -> None:
        """Raise ``ValueError`` naming the field of `state` that :meth:`load_state_dict`
        cannot take (changing nothing)."""
        check_state_field(state, 'epoch', 'count', required=True, nullable=False)
        check_state_field(state, 'step', 'count', required=True, nullable=False)
        check_state_field(state, 'steps_per_epoch', 'number')
        check_state_field(state, 'epoch_steps', 'count')
        check_state_field(state, 'dataflows', 'list')
        check_state_field(state, 'datasets', 'list')

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Put back a state from :meth:`state_dict`."""
        self.epoch = int(state['epoch'])
        self.step = int(state['step'])
        spe = state.get('steps_per_epoch')
        self.steps_per_epoch = None if spe is None else float(spe)
        epoch_steps = state.get('epoch_steps')
        self.resume_epoch_steps = None if epoch_steps is None else int(epoch_steps)
        self.flow_states = list(state.get('dataflows') or ())
        self.datasets.load_state_dict(state.get('datasets'))
        self.epoch_finished = self.resume_epoch_steps is None


def _batch_count(data: Any) -> int | None:
    """The number of batches an epoch of `data` gives, if it can be known cheaply."""
    if isinstance(data, ExtraInfoDataFlow):
        n, size = data.data_length, data.batch_size
        return n // size if data.skip_incomplete else -(-n // size)
    if isinstance(data, (list, tuple, range)):
        return len(data)
    return None
