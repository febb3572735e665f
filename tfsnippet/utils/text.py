"""Text for messages: short reprs of values and "did you mean" suggestions.

One home for the wording every error message of the package shares.  The
module imports neither NumPy nor TensorFlow, so that the TensorFlow-free
parts (``tfsnippet.experiment``, ``tfsnippet.distributed``, the launcher)
use it without slowing their start.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from difflib import get_close_matches
from typing import Any

__all__ = ['short_repr', 'typed_repr', 'close_matches', 'close_matches_hint', 'did_you_mean',
           'closest_dotted']

#: How close a word must be to be suggested (``difflib``'s ratio, 0 to 1).
SUGGESTION_CUTOFF = 0.6


def short_repr(value: Any, limit: int = 80, *, with_type: bool = False) -> str:
    """A repr for error messages: arrays and tensors by type, shape and dtype,
    anything else cut to `limit` characters.

    Args:
        value: What arrived.
        limit: The longest repr shown; a longer one keeps its start, ``...``
            and its last character (the closing quote or bracket).
        with_type: Follow the repr with the type's name in brackets, as in
            ``[1] (list)``, where the repr alone could mislead (``'1'``
            and ``1``).  Arrays and tensors name their type anyway.

    Example:
        >>> short_repr(np.zeros([1000, 10]))
        'ndarray(shape=(1000, 10), dtype=float64)'
        >>> short_repr(tf.Variable(tf.zeros([100, 3]), name='w'))
        "<ResourceVariable 'w:0' shape=(100, 3) dtype=float32>"
        >>> short_repr('x' * 100)[-12:]
        "xxxxxxxx...'"
        >>> short_repr([1], with_type=True)
        '[1] (list)'
    """
    shape, dtype = getattr(value, 'shape', None), getattr(value, 'dtype', None)
    if shape is not None and dtype is not None and not _is_numpy_scalar(value):
        try:
            shape = tuple(shape)
        except TypeError:   # an unknown rank
            shape = None
        dtype = getattr(dtype, 'name', dtype)
        kind = type(value).__name__
        label = getattr(value, 'path', None)   # a Keras variable's path
        if label is None and 'Variable' in kind:
            label = getattr(value, 'name', None)
        if kind == 'ndarray':
            return f'ndarray(shape={shape}, dtype={dtype})'
        named = '' if label is None else f' {label!r}'
        return f'<{kind}{named} shape={shape} dtype={dtype}>'
    text = repr(value)
    if len(text) > limit:
        text = text[:limit - 4] + '...' + text[-1]
    return f'{text} ({type(value).__name__})' if with_type else text


def typed_repr(value: Any, limit: int = 80) -> str:
    """:func:`short_repr` followed by the type's name: ``'1' (str)``, ``[1] (list)``.

    For messages about values read from files or databases, where ``'1'``
    and ``1`` would otherwise look alike.

    Example:
        >>> typed_repr('1'), typed_repr(1.5)
        ("'1' (str)", '1.5 (float)')
    """
    return short_repr(value, limit, with_type=True)


def _is_numpy_scalar(value: Any) -> bool:
    # Without NumPy imported, nothing can be a NumPy scalar: no need to import it.
    np = sys.modules.get('numpy')
    return np is not None and isinstance(value, np.generic)


def close_matches(word: str, choices: Iterable[str], n: int = 5) -> list[str]:
    """The at most `n` `choices` closest to `word`, closest first (none if none is close).

    Example:
        >>> close_matches('max_epochs', ['max_epoch', 'max_step', 'lr'])
        ['max_epoch', 'max_step']
    """
    return get_close_matches(word, list(choices), n=n, cutoff=SUGGESTION_CUTOFF)


def close_matches_hint(word: str, choices: Iterable[str]) -> str:
    """``'; close matches: a, b'`` to end a message about an unknown `word`, or ``''``.

    Example:
        >>> close_matches_hint('los', ['loss', 'acc'])
        '; close matches: loss'
        >>> close_matches_hint('xyz', ['loss', 'acc'])
        ''
    """
    close = close_matches(word, choices)
    return f'; close matches: {", ".join(close)}' if close else ''


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``' (did you mean `best`?)'`` with the one choice closest to `word`, or ``''``.

    Example:
        >>> '`--lr_rate`' + did_you_mean('--lr_rate', ['--lr', '--max_epoch'])
        '`--lr_rate` (did you mean `--lr`?)'
    """
    close = close_matches(word, choices, n=1)
    return f' (did you mean `{close[0]}`?)' if close else ''


def _initials(word: str) -> str:
    """``'learning_rate'`` -> ``'lr'`` (the first letter of each ``_``-separated part)."""
    parts = [p for p in word.replace('-', '_').split('_') if p]
    return ''.join(p[0] for p in parts) if len(parts) > 1 else ''


def closest_dotted(name: str, candidates: Sequence[str]) -> str | None:
    """The candidate `name` most likely meant, or ``None`` if none is close.

    Names are dotted paths (``optimizer.lr``), with the same leading dashes
    as the candidates when they are options (``--optimizer.lr``).  In order:

    1. a candidate whose last part is `name`'s last part, in another section
       (``--lr`` -> ``--optimizer.lr``), the one of the same section first;
    2. in `name`'s section, a last part that abbreviates `name`'s, or that
       `name`'s abbreviates (``optimizer.learning_rate`` -> ``optimizer.lr``);
    3. the closest candidate by ``difflib.get_close_matches``.
    """
    stripped = name.lstrip('-')
    dashes = name[:len(name) - len(stripped)]
    parent, _, leaf = stripped.rpartition('.')
    split = []
    for c in candidates:
        c_stripped = c.lstrip('-')
        c_parent, _, c_leaf = c_stripped.rpartition('.')
        split.append((c, c_parent, c_leaf, c[:len(c) - len(c_stripped)] == dashes))
    same_leaf = [s for s in split if s[2] == leaf and s[3] and s[0] != name]
    if same_leaf:
        same_leaf.sort(key=lambda s: (s[1] != parent, len(s[0])))
        return same_leaf[0][0]
    for c, c_parent, c_leaf, same_dashes in split:
        if same_dashes and c_parent == parent and leaf and c_leaf and (
                _initials(leaf) == c_leaf or _initials(c_leaf) == leaf):
            return c
    close = get_close_matches(name, list(candidates), n=1)
    return close[0] if close else None
