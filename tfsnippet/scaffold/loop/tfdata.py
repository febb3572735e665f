"""Where each ``tf.data.Dataset`` given to ``iter_steps`` is, saved in the loop's checkpoints.

A ``tf.data`` iterator can save its position with TensorFlow's own iterator
checkpointing (``tf.train.Checkpoint(iterator=...)``): the state of every
op of the pipeline, the random seeds of its shuffles and, unless the
pipeline asks for symbolic checkpoints, the elements its buffers hold.
:class:`DatasetPositions` keeps the iterator of each step loop and writes
its state when, and only when, a checkpoint is saved (nothing per step);
the loop's state names the files, which lie in the checkpoint directory
beside the variables (a TF checkpoint, like the variables: data, not code).

On a resume the iterator of the interrupted epoch is put back exactly, so
the batches that follow are those an uninterrupted run would have served.
A checkpoint taken between epochs holds the exhausted iterator of the last
epoch: putting it back moves the dataset's shuffle seeds on, so the next
epoch is shuffled as the uninterrupted run's (``reshuffle_each_iteration``).

A pipeline TensorFlow cannot save (a Python generator source,
``from_generator`` or ``py_function``) is reported once; resuming it
re-reads its epoch and skips the batches done.  A new iterator starts the
shuffle seeds over: in eager mode a pipeline that reshuffles each epoch
then serves other orders than an uninterrupted run, in the rest of that
epoch and in every later one (the resume notice says so).

**Graph mode** (``tf.compat.v1`` sessions): a Dataset given to
``iter_steps`` is read through an initializable iterator built once, the
first time (its next-element op and a ``tf.compat.v1.train.Saver`` of its
state are added to the graph then, so the graph must not be finalized
yet); each epoch runs its initializer and each step fetches one batch with
the default session, as numpy values to feed.  TensorFlow saves such an
iterator's state like a variable, so a resume is exact there too.  An
initializable iterator starts its shuffle seeds afresh each time it is
initialized: in graph mode every epoch is shuffled the same way (TF's
behaviour, with or without a resume).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from ...tfops.session import get_default_session_or_error

__all__ = ['DatasetPositions']


@dataclass
class _Slot:
    """The iterator of the `index`-th step loop of an epoch over a Dataset."""

    dataset: Any
    iterator: Iterator[Any]
    epoch: int
    saveable: bool = True
    reader: _GraphReader | None = None   # graph mode


class _GraphReader:
    """A Dataset read in a TF1 graph: an initializable iterator, its next-element
    op and a Saver of its state, built once (nothing is added to the graph later)."""

    def __init__(self, dataset: Any):
        v1 = tf.compat.v1
        if v1.get_default_graph().finalized:
            raise RuntimeError(
                'A `tf.data.Dataset` given to `iter_steps()` in graph mode is read through '
                'an iterator whose ops are added to the graph the first time, but the graph '
                'is finalized: call `iter_steps()` with it before finalizing the graph, or '
                'iterate it with your own ops')
        self.iterator = v1.data.make_initializable_iterator(dataset)
        self.next = self.iterator.get_next()
        self.saver = v1.train.Saver({'iterator': self.iterator}, max_to_keep=None,
                                    save_relative_paths=True)
        self.session: Any = None

    def start(self) -> None:
        """Begin an epoch in the default session."""
        self.session = get_default_session_or_error()
        self.session.run(self.iterator.initializer)

    def batches(self) -> Iterator[Any]:
        """The batches of the epoch begun, as numpy values."""
        run, fetch = self.session.run, self.next
        while True:
            try:
                batch = run(fetch)
            except tf.errors.OutOfRangeError:
                return
            yield batch

    def save(self, prefix: str) -> None:
        self.saver.save(self.session, prefix, write_meta_graph=False, write_state=False)

    def restore(self, prefix: str) -> None:
        self.saver.restore(self.session, prefix)


#: What a resume by skipping changes, in eager mode (True) and in graph mode: a
#: new iterator starts the shuffle seeds over, so a reshuffling pipeline serves
#: the orders of the epochs before this one, here and in every later epoch; a
#: graph iterator repeats a seeded shuffle's order every epoch anyway.
_SKIP_CAVEAT = {
    True: 'its shuffle seeds start over here, so if it shuffles unseeded or reshuffles '
          'each epoch (the default), the rest of this epoch and every later epoch differ '
          'from an uninterrupted run',
    False: 'if it shuffles unseeded, the rest of this epoch and every later epoch differ '
           'from an uninterrupted run (a seeded shuffle repeats its order each epoch in '
           'graph mode: those are exact)',
}


def _size_of(prefix: str) -> int:
    directory, name = os.path.split(prefix)
    return sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory)
               if f.startswith(name + '.'))


def _mib(size: int) -> str:
    return f'{size / (1 << 20):.1f} MiB'


class DatasetPositions:
    """The iterators of the ``tf.data.Dataset``\\ s given to ``iter_steps``, and
    the positions a resumed checkpoint saved of them.

    The step loops of an epoch are numbered in the order they are opened
    (usually one); the iterator of each number is kept until the same
    number opens again in a later epoch, so that a checkpoint taken between
    epochs holds the last one (what carries the shuffle seeds over).

    Args:
        large_bytes: An iterator state larger than this is reported once,
            with how to make it smaller.
    """

    #: The name of an iterator's files in the checkpoint's ``loop`` folder.
    FILE = 'iterator-{index}'

    def __init__(self, large_bytes: int = 1 << 20):
        self.large_bytes = large_bytes
        self._slots: list[_Slot | None] = []
        self._opened = 0
        self._saved: list[Any] = []
        self._files_dir: str | None = None
        self._written: dict[int, str] = {}
        self._reported: set[str] = set()
        self._notice: Callable[[str], Any] | None = None
        self._readers: dict[int, tuple[Any, _GraphReader]] = {}

    # ---------------------------------------------------------------- per epoch
    def begin_epoch(self) -> None:
        """A new epoch (or the one continued) numbers its step loops from 0."""
        self._opened = 0

    def open(self, data: tf.data.Dataset, epoch: int, skip: int | None,
             notice: Callable[[str], Any] | None) -> tuple[Iterator[Any], int | None]:
        """The iterator of an epoch's step loop over `data`, and how many
        batches are still to skip.

        `skip` is ``None`` for an epoch that begins, or the steps the
        interrupted epoch had done when it is continued: its saved iterator
        is put back (nothing to skip), or, if the checkpoint holds none, the
        data is re-read and `skip` batches are skipped (said through `notice`).
        """
        self._notice = notice
        index, self._opened = self._opened, self._opened + 1
        saved = self._saved[index] if index < len(self._saved) else None
        if saved is not None:
            self._saved[index] = None
        old = self._slots[index] if index < len(self._slots) else None
        saveable = old.saveable if old is not None and old.dataset is data else True
        reader = None
        if tf.executing_eagerly():
            iterator = iter(data)
        else:
            reader = self._reader(data)
            reader.start()
            iterator = reader.batches()
        why = 'the checkpoint holds no state of its iterator'
        continuing = skip is not None and isinstance(saved, Mapping) and \
            saved.get('epoch') == epoch
        # graph mode: each initialization starts the seeds afresh, nothing to carry over
        if isinstance(saved, Mapping) and saved.get('file') and (continuing or reader is None):
            try:
                self._read(reader or iterator, str(saved['file']))
            except (tf.errors.OpError, ValueError, AssertionError, OSError) as e:
                why = (f'its iterator could not be put back ({type(e).__name__}: '
                       f'{str(e).strip().splitlines()[0] if str(e).strip() else e})')
                if reader is not None:
                    reader.start()
                else:
                    iterator = iter(data)
            else:
                if continuing:
                    skip = None            # back at its exact position
                else:
                    # the last epoch's iterator, put back: the dataset's shuffle
                    # seeds moved on, the next iterator shuffles as it would have
                    iterator = iter(data)
        elif isinstance(saved, Mapping) and saved.get('unsaveable'):
            why = 'its iterator could not be saved'
        while len(self._slots) <= index:
            self._slots.append(None)
        self._slots[index] = _Slot(data, iterator, epoch, saveable, reader)
        if skip and notice is not None:
            notice(f'Resuming epoch {epoch} of a `tf.data.Dataset` after {skip} steps: {why}, '
                   f'so its first {skip} batches are skipped; {_SKIP_CAVEAT[reader is None]}')
        return iterator, skip

    def _reader(self, data: Any) -> _GraphReader:
        known = self._readers.get(id(data))
        if known is None or known[0] is not data:
            known = self._readers[id(data)] = (data, _GraphReader(data))
        return known[1]

    def _read(self, iterator: Any, name: str) -> None:
        if self._files_dir is None:
            raise OSError('no checkpoint folder to read it from')
        prefix = os.path.join(self._files_dir, os.path.basename(name))
        if not os.path.isfile(prefix + '.index'):
            raise OSError(f'{prefix}.index is missing')
        if isinstance(iterator, _GraphReader):
            iterator.restore(prefix)
        else:
            tf.train.Checkpoint(iterator=iterator).read(prefix).assert_consumed()

    # ---------------------------------------------------------------- save
    def writer(self) -> Callable[[str], bool] | None:
        """A function that writes the state of each live iterator into a folder
        now (``None`` when there is none): what a checkpoint save calls."""
        if not any(s is not None and s.saveable for s in self._slots):
            return None
        return self._write

    def _write(self, directory: str) -> bool:
        """Write each saveable iterator's state into `directory`; return whether any was."""
        self._written = {}
        for index, slot in enumerate(self._slots):
            if slot is None or not slot.saveable:
                continue
            prefix = os.path.join(directory, self.FILE.format(index=index))
            try:
                if slot.reader is not None:
                    slot.reader.save(prefix)
                else:
                    tf.train.Checkpoint(iterator=slot.iterator).write(prefix)
            except tf.errors.OpError as e:
                slot.saveable = False
                for name in os.listdir(directory):
                    if name.startswith(os.path.basename(prefix) + '.'):
                        os.remove(os.path.join(directory, name))
                reason = str(e).strip().splitlines()[0] if str(e).strip() else ''
                reason = reason.split('}}')[-1].split('[Op:')[0].strip().rstrip('.') or \
                    type(e).__name__
                self._report('unsaveable', f'The `tf.data.Dataset` given to `iter_steps()` '
                             f'cannot be saved in checkpoints ({reason}; a Python generator '
                             f'source, `from_generator` or `py_function`, holds state '
                             f'TensorFlow cannot save): a resume in the middle of an epoch '
                             f're-reads it and skips the batches done')
                continue
            self._written[index] = os.path.basename(prefix)
            size = _size_of(prefix)
            if size > self.large_bytes:
                self._report('large', f'The state of the `tf.data` iterator of `iter_steps()` '
                             f'takes {_mib(size)} in each checkpoint (a shuffle or prefetch '
                             f'buffer holds its elements): shuffle with a smaller buffer (a '
                             f'shuffle buffer is saved whole), and set '
                             f'`tf.data.Options().experimental_symbolic_checkpoint = True` '
                             f'(`dataset.with_options(...)`) so that prefetch, map and batch '
                             f'buffers are not saved')
        return bool(self._written)

    def _report(self, kind: str, message: str) -> None:
        if kind not in self._reported:
            self._reported.add(kind)
            if self._notice is not None:
                self._notice(message)

    def state_dict(self) -> list[dict[str, Any]]:
        """What the loop's state says of each step loop's iterator: its epoch and
        the files the last :meth:`writer` call wrote (``None``: not saved)."""
        written, self._written = self._written, {}
        return [{'epoch': s.epoch, 'file': written.get(i),
                 'unsaveable': not s.saveable} if s is not None else {}
                for i, s in enumerate(self._slots)]

    # ---------------------------------------------------------------- restore
    def load_state_dict(self, state: Sequence[Any] | None) -> None:
        """Take the positions of a saved state (put back when the loops open)."""
        self._saved = list(state or ())
        self._files_dir = None

    def use_files(self, directory: str | None) -> None:
        """Read the iterators' files from `directory` (the resumed checkpoint's)."""
        self._files_dir = directory
