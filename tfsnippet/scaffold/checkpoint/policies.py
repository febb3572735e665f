"""When to save a checkpoint (save policies) and which checkpoints to keep (keep policies).

A :class:`~tfsnippet.Checkpointer` takes a list of each:

* **save policies** say *when*: :class:`SaveEvery` (every N epochs, steps or
  seconds) and :class:`SaveAtEnd` (when the loop is left normally).  Saving
  on improvement comes with a :class:`KeepBest` policy (a checkpoint that
  enters the k best is saved if it was not), saving on preemption with the
  :class:`~tfsnippet.scaffold.components.preemption.Preemption` component.
* **keep policies** say *what stays on disk*; they live in the
  :class:`~tfsnippet.CheckpointStore`, which applies them after each save
  and each pin: :class:`KeepLatest` (the N newest), :class:`KeepBest` (the
  k best by a monitored metric, pinned in the store's index) and
  :class:`KeepEveryNth` (the checkpoints of steps that are multiples of N).
  A checkpoint stays when any policy keeps it; the newest always stays.
  Without any keep policy every checkpoint stays.

Example::

    spt.Checkpointer('./run', save=[SaveEvery(epochs=1)],
                     keep=[KeepLatest(3), KeepBest(k=2, metric='valid_loss')])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...utils.validation import check_positive_int, check_positive_number

__all__ = ['KeepPolicy', 'KeepLatest', 'KeepBest', 'KeepEveryNth', 'SavePolicy', 'SaveEvery',
           'SaveAtEnd', 'check_keep_policies', 'check_save_policies', 'Retention']


class KeepPolicy:
    """What a :class:`~tfsnippet.CheckpointStore` keeps: a base class."""

    def keeps(self, names: Sequence[str], steps: Sequence[int],
              pinned: set[str]) -> set[str]:
        """The names among `names` (oldest first, of checkpoints of `steps`)
        that this policy keeps; `pinned` are the names pinned in the index."""
        raise NotImplementedError()


class KeepLatest(KeepPolicy):
    """Keep the `n` newest checkpoints."""

    def __init__(self, n: int):
        self.n = check_positive_int(n, 'n')

    def keeps(self, names: Sequence[str], steps: Sequence[int],
              pinned: set[str]) -> set[str]:
        return set(names[-self.n:])

    def __repr__(self) -> str:
        return f'KeepLatest({self.n})'


class KeepEveryNth(KeepPolicy):
    """Keep the checkpoints whose step is a multiple of `n` (a long-term trail)."""

    def __init__(self, n: int):
        self.n = check_positive_int(n, 'n')

    def keeps(self, names: Sequence[str], steps: Sequence[int],
              pinned: set[str]) -> set[str]:
        return {name for name, step in zip(names, steps) if step % self.n == 0}

    def __repr__(self) -> str:
        return f'KeepEveryNth({self.n})'


class KeepBest(KeepPolicy):
    """Keep the `k` best checkpoints by `metric`.

    Args:
        k: How many to keep.
        metric: The metric name; ``None`` (in a
            :class:`~tfsnippet.Checkpointer`): the loop's validation metric.
        mode: ``'min'``, ``'max'`` or ``'auto'`` (from the metric's name, see
            :class:`~tfsnippet.Monitor`; the loop's direction for its
            validation metric).  NaN never counts.

    The k best are pinned in the store's index (each with the metric's name,
    value, mode, epoch and step); the best of them is
    :meth:`~tfsnippet.CheckpointStore.best`.  A value enters the k best
    when fewer than k are pinned or when it beats the worst of them.
    """

    def __init__(self, k: int = 1, metric: str | None = None, mode: str = 'auto'):
        self.k = check_positive_int(k, 'k')
        if metric is not None and (not isinstance(metric, str) or not metric):
            raise TypeError(f'`metric` must be a metric name or None, got {metric!r}')
        if mode not in ('min', 'max', 'auto'):
            raise ValueError(f"`mode` must be 'min', 'max' or 'auto', got {mode!r}")
        self.metric = metric
        self.mode = mode

    def keeps(self, names: Sequence[str], steps: Sequence[int],
              pinned: set[str]) -> set[str]:
        return set(names) & pinned

    def __repr__(self) -> str:
        return f'KeepBest(k={self.k}, metric={self.metric!r}, mode={self.mode!r})'


def rank_pins(pins: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """The `k` best of `pins` (records with ``value`` and ``mode``), best first;
    a later record wins a tie against an earlier one only by being listed first."""
    def key(pin: dict[str, Any]) -> float:
        value = pin.get('value')
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            return math.inf
        return float(value) if pin.get('mode', 'min') == 'min' else -float(value)
    return sorted(pins, key=key)[:k]


def enters_best(pins: Sequence[dict[str, Any]], value: float, mode: str, k: int) -> bool:
    """Whether `value` enters the `k` best of `pins` (strictly better than the worst
    when `k` are pinned)."""
    if math.isnan(value):
        return False
    if len(pins) < k:
        return True
    worst = rank_pins(list(pins), k)[-1].get('value')
    if not isinstance(worst, (int, float)) or math.isnan(worst):
        return True
    return value < worst if mode == 'min' else value > worst


def check_keep_policies(keep: Any, arg_name: str = 'keep') -> list[KeepPolicy]:
    """`keep` as a list of keep policies, at most one :class:`KeepBest`."""
    if keep is None:
        return []
    if isinstance(keep, KeepPolicy):
        keep = [keep]
    if not isinstance(keep, (list, tuple)) or not all(isinstance(p, KeepPolicy) for p in keep):
        raise TypeError(f'`{arg_name}` must be a list of keep policies (KeepLatest, KeepBest, '
                        f'KeepEveryNth), got {keep!r}')
    if sum(isinstance(p, KeepBest) for p in keep) > 1:
        raise ValueError(f'`{arg_name}` may hold one KeepBest, got {keep!r}')
    return list(keep)


class Retention:
    """What a checkpoint store keeps, whichever store it is (a local folder or a bucket).

    Args:
        max_to_keep: Keep this many newest checkpoints (``None``: all); it
            becomes a :class:`KeepLatest` among the policies.
        keep: Keep policies (one or a list).

    Raises:
        TypeError, ValueError: `max_to_keep` is not a positive int or None,
            or `keep` holds something other than keep policies.
    """

    def __init__(self, max_to_keep: int | None = None,
                 keep: KeepPolicy | list[KeepPolicy] | None = None):
        self.max_to_keep = check_positive_int(max_to_keep, 'max_to_keep', allow_none=True)
        self.policies = check_keep_policies(keep)
        if self.max_to_keep is not None:
            self.policies.append(KeepLatest(self.max_to_keep))
        #: How many checkpoints a pin keeps pinned (the ``k`` of a KeepBest, else 1).
        self.best_k = next((p.k for p in self.policies if isinstance(p, KeepBest)), 1)

    def add_pin(self, pins: list[dict[str, Any]], pin: dict[str, Any]) -> list[dict[str, Any]]:
        """`pins` with `pin` added: the new one alone (one best, or another metric),
        else the `best_k` best of them.

        Raises:
            TypeError: Ranking is needed and `pin` lacks a number ``value`` or a
                ``mode`` of ``'min'`` or ``'max'``.
        """
        others = [p for p in pins if p['name'] != pin['name'] and
                  p.get('metric') == pin.get('metric')]
        if self.best_k == 1 or not others:
            return [pin]
        value = pin.get('value')
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or
                pin.get('mode') not in ('min', 'max')):
            raise TypeError(f'`best` must hold a number `value` and a `mode` of "min" or "max" '
                            f'to rank it among the {self.best_k} best, got {pin!r}')
        return rank_pins([pin] + others, self.best_k)

    def split(self, names: list[str], steps: list[int],
              pins: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
        """``(removed, kept)`` of `names` (oldest first, of the given `steps`): what
        any policy keeps, the pinned checkpoints and the newest stay."""
        if not self.policies or not names:
            return [], names
        pinned = {p['name'] for p in pins}
        kept = {names[-1]} | pinned
        for policy in self.policies:
            kept |= policy.keeps(names, steps, pinned)
        return [n for n in names if n not in kept], [n for n in names if n in kept]


class SavePolicy:
    """When a :class:`~tfsnippet.Checkpointer` saves: a base class."""


class SaveEvery(SavePolicy):
    """Save after every `epochs` epochs, every `steps` steps, or at the end of the
    first step `seconds` seconds after the last save (one of the three)."""

    def __init__(self, epochs: int | None = None, steps: int | None = None,
                 seconds: float | None = None):
        given = [v for v in (epochs, steps, seconds) if v is not None]
        if len(given) != 1:
            raise ValueError(f'`SaveEvery` takes one of `epochs`, `steps` and `seconds`, got '
                             f'epochs={epochs!r}, steps={steps!r}, seconds={seconds!r}')
        self.epochs = check_positive_int(epochs, 'epochs', allow_none=True)
        self.steps = check_positive_int(steps, 'steps', allow_none=True)
        self.seconds = check_positive_number(seconds, 'seconds', allow_none=True)

    def __repr__(self) -> str:
        kind, value = next((k, v) for k, v in (('epochs', self.epochs), ('steps', self.steps),
                                               ('seconds', self.seconds)) if v is not None)
        return f'SaveEvery({kind}={value!r})'


class SaveAtEnd(SavePolicy):
    """Save when the loop is left normally (a re-run of a finished job redoes nothing)."""

    def __repr__(self) -> str:
        return 'SaveAtEnd()'


def check_save_policies(save: Any, arg_name: str = 'save') -> list[SavePolicy]:
    """`save` as a list of save policies."""
    if isinstance(save, SavePolicy):
        save = [save]
    if not isinstance(save, (list, tuple)) or not all(isinstance(p, SavePolicy) for p in save):
        raise TypeError(f'`{arg_name}` must be a list of save policies (SaveEvery, SaveAtEnd), '
                        f'got {save!r}')
    return list(save)
