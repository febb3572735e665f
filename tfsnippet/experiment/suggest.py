"""The closest known name to a mistyped dotted name (config fields and options)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

__all__ = ['closest_dotted']


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
    3. the closest candidate by :func:`difflib.get_close_matches`.
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
    close = difflib.get_close_matches(name, list(candidates), n=1)
    return close[0] if close else None
