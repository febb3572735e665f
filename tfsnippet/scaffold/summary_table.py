"""The parameter table printed by ``TrainLoop.print_training_summary()``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import natsort

from ..tfops.tf_vars import normalize_variables, variable_name, variable_shape

__all__ = ['summarize_variables']


def _size(shape: tuple[int | None, ...]) -> int | None:
    n = 1
    for d in shape:
        if d is None:
            return None
        n *= d
    return n


class _Table:
    """One titled table of ``(name, shape, size)`` rows."""

    def __init__(self, title: str, rows: list[tuple[str, tuple, int | None]]):
        self.title = title
        self.rows = [(name, repr(shape), '?' if size is None else f'{size:,}')
                     for name, shape, size in rows]
        self.total = f'({sum(s for _, _, s in rows if s is not None):,} in total)'
        self.shape_w = max((len(r[1]) for r in self.rows), default=0)
        self.size_w = max((len(r[2]) for r in self.rows), default=0)
        name_w = max((len(r[0]) for r in self.rows), default=0)
        self.min_width = max(len(title) + 1 + len(self.total),
                             name_w + 2 + self.shape_w + 2 + self.size_w)

    def lines(self, width: int) -> list[str]:
        name_w = width - 4 - self.shape_w - self.size_w
        out = [self.title + self.total.rjust(width - len(self.title)), '-' * width]
        for name, shape, size in self.rows:
            out.append(f'{name.ljust(name_w)}  {shape.ljust(self.shape_w)}  '
                       f'{size.rjust(self.size_w)}')
        return out


def summarize_variables(variables: Sequence[Any] | Mapping[str, Any],
                        title: str = 'Variables Summary',
                        other_variables_title: str = 'Other Variables',
                        groups: Sequence[str] | None = None,
                        sort_by_names: bool = False) -> str:
    """Format a table of variables with their shapes and sizes.

    Args:
        variables: A list of variables (named by their Keras ``path``, or
            ``name`` without ``:0``) or a dict ``{name: variable}``.
        title: The title of the table.
        other_variables_title: With `groups`, the title of the table of the
            variables that match no group.
        groups: Name prefixes; each gets a table of its own (``'q_net'`` and
            ``'q_net/'`` both mean the ``q_net/`` scope), with the prefix
            removed from the row names.
        sort_by_names: Sort rows by natural order of names (``layer2``
            before ``layer10``) instead of keeping the input order.

    Returns:
        The table as text, or ``''`` when there are no variables.

    Example:
        >>> import tensorflow as tf
        >>> print(summarize_variables({'w': tf.Variable(tf.zeros([3, 2])),
        ...                            'b': tf.Variable(tf.zeros([2]))}))
        Variables Summary (8 in total)
        ------------------------------
        w                    (3, 2)  6
        b                    (2,)    2
    """
    variables = normalize_variables(variables, 'variables')
    if isinstance(variables, dict):
        items = list(variables.items())
    else:
        items = [(variable_name(v), v) for v in variables]
    if not items:
        return ''
    rows = []
    for name, var in items:
        shape = variable_shape(var)
        rows.append((name, shape, _size(shape)))
    if sort_by_names:
        rows = natsort.natsorted(rows, key=lambda r: r[0])

    prefixes = []
    for g in groups or ():
        if g:
            g = g if g.endswith('/') else g + '/'
            if g not in prefixes:
                prefixes.append(g)
    grouped: dict[str, list] = {g: [] for g in prefixes}
    others = []
    for row in rows:
        for g in prefixes:
            if row[0].startswith(g):
                grouped[g].append((row[0][len(g):],) + row[1:])
                break
        else:
            others.append(row)

    if len(others) == len(rows):
        table = _Table(title, rows)
        return '\n'.join(table.lines(table.min_width))

    tables = [_Table(g, grouped[g]) for g in prefixes if grouped[g]]
    if others:
        tables.append(_Table(other_variables_title, others))
    overall = _Table(title, rows)
    width = max([len(title) + 1 + len(overall.total)] + [t.min_width for t in tables])
    lines = [title + overall.total.rjust(width - len(title)), '=' * width]
    for i, t in enumerate(tables):
        if i:
            lines.append('')
        lines.extend(t.lines(width))
    return '\n'.join(lines)
