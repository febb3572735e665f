"""Plain-text tables for the console: aligned columns, titles and horizontal rules."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from .validation import check_positive_int

__all__ = ['ConsoleTable', 'print_as_table']

_ALIGNMENTS = {'<': '<', 'l': '<', '^': '^', 'c': '^', '>': '>', 'r': '>'}

# row kinds, in the order they are kept
_ROW, _TITLE, _RULE, _SKIP = 'row', 'title', 'rule', 'skip'


class ConsoleTable:
    """Lay out rows of text in aligned columns.

    Rows are added in order: full rows (:meth:`add_row`), titles spanning
    the table (:meth:`add_title`), horizontal rules (:meth:`add_hr`) and
    blank separator lines (:meth:`add_skip`).  :meth:`format` pads each
    column to its widest cell; rules span the whole table, which is as wide
    as the columns or the widest title, whichever is more (a wider title
    widens the column `expand_col`).  Trailing spaces are stripped.

    Args:
        col_count: The number of columns.
        col_space: The number of spaces between two columns.
        col_align: One alignment per column: ``'<'``/``'l'`` (left, the
            default), ``'^'``/``'c'`` (centre) or ``'>'``/``'r'`` (right).
        expand_col: The column that absorbs the extra width of a wide title.

    Example:
        >>> t = ConsoleTable(2, col_space=1, col_align='<>')
        >>> t.add_title('Hyper-parameters')
        >>> t.add_hr('=')
        >>> t.add_row(['lr', 0.001])
        >>> t.add_row(['batch_size', 64])
        >>> print(t.format())
        Hyper-parameters
        ================
        lr         0.001
        batch_size    64
    """

    def __init__(self, col_count: int, col_space: int = 3, col_align: Iterable[str] | None = None,
                 expand_col: int = 0):
        col_count = check_positive_int(col_count, 'col_count')
        col_space = check_positive_int(col_space, 'col_space')
        if col_align is None:
            align = ['<'] * col_count
        else:
            given = list(col_align)
            if len(given) != col_count:
                raise ValueError(
                    f'`col_align` must hold one alignment per column ({col_count}), '
                    f'got {col_align!r}')
            bad = [a for a in given if a not in _ALIGNMENTS]
            if bad:
                raise ValueError(
                    f"`col_align` entries must be one of '<', '^', '>', 'l', 'c', 'r', "
                    f"got {bad[0]!r}")
            align = [_ALIGNMENTS[a] for a in given]
        if type(expand_col) is not int or not 0 <= expand_col < col_count:
            raise ValueError(
                f'`expand_col` must be a column index in [0, {col_count}), got {expand_col!r}')
        self._col_count = col_count
        self._col_space = col_space
        self._col_align = align
        self._expand_col = expand_col
        self._rows: list[tuple[str, Any]] = []

    @property
    def col_count(self) -> int:
        """The number of columns."""
        return self._col_count

    def add_row(self, columns: Iterable[Any]) -> None:
        """Add a row; each cell is ``str(value)``.

        Raises:
            ValueError: The row does not have `col_count` cells.
        """
        cells = [str(c) for c in columns]
        if len(cells) != self._col_count:
            raise ValueError(
                f'`columns` must hold {self._col_count} cells, got {len(cells)}: {cells!r}')
        self._rows.append((_ROW, cells))

    def add_title(self, title: Any, right_title: Any = None) -> None:
        """Add a line of text that spans the table.

        Args:
            title: The text, at the left.
            right_title: Optional text at the right end of the same line (the
                table is widened to keep at least one space between the two).

        Example:
            >>> t = ConsoleTable(2)
            >>> t.add_title('Epoch 3', '12.5s')
            >>> t.add_row(['loss', 0.25])
            >>> print(t.format())
            Epoch 3 12.5s
            loss     0.25
        """
        right = None if right_title is None else str(right_title)
        self._rows.append((_TITLE, (str(title), right)))

    def add_hr(self, c: str = '-') -> None:
        """Add a horizontal rule drawn with the one character `c`."""
        if not isinstance(c, str) or len(c) != 1:
            raise ValueError(f'`c` must be one character, got {c!r}')
        self._rows.append((_RULE, c))

    def add_skip(self) -> None:
        """Add a blank line (left out at the top, and right after a rule or another blank)."""
        self._rows.append((_SKIP, None))

    def add_key_values(self, key_values: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
                       sort_keys: bool = False) -> None:
        """Add a blank line, then one ``key  value`` row per item (two-column tables).

        Raises:
            TypeError: The table does not have 2 columns.
        """
        if self._col_count != 2:
            raise TypeError(
                f'`add_key_values()` needs a table of 2 columns, this one has {self._col_count}')
        items = list(key_values.items() if isinstance(key_values, Mapping) else key_values)
        if sort_keys:
            items.sort(key=lambda kv: kv[0])
        self.add_skip()
        for key, value in items:
            self.add_row([key, value])

    add_dict = add_key_values

    def format(self) -> str:
        """The table as text, lines joined by ``'\\n'``."""
        widths = [0] * self._col_count
        title_width = 0
        for kind, content in self._rows:
            if kind == _ROW:
                widths = [max(w, len(c)) for w, c in zip(widths, content)]
            elif kind == _TITLE:
                left, right = content
                # as classic: at least one space between the two parts
                width = len(left) if right is None else len(left) + 1 + len(right)
                title_width = max(title_width, width)
        table_width = sum(widths) + self._col_space * (self._col_count - 1)
        if title_width > table_width:
            widths[self._expand_col] += title_width - table_width
            table_width = title_width

        gap = ' ' * self._col_space
        lines: list[str] = []
        previous = None
        for kind, content in self._rows:
            if kind == _ROW:
                cells = (f'{c:{a}{w}}' for c, a, w in zip(content, self._col_align, widths))
                lines.append(gap.join(cells).rstrip())
            elif kind == _TITLE:
                left, right = content
                if right is None:
                    lines.append(left)
                else:
                    lines.append(left + right.rjust(table_width - len(left)))
            elif kind == _RULE:
                lines.append(content * table_width)
            elif previous not in (None, _RULE, _SKIP):
                lines.append('')
            previous = kind
        return '\n'.join(lines)

    def __str__(self) -> str:
        return self.format()


def print_as_table(title: Any, key_values: Mapping[Any, Any] | Iterable[tuple[Any, Any]],
                   hr: str = '=', print_func: Callable[[str], Any] = print) -> None:
    """Print `key_values` as a two-column table under `title` and a rule of `hr`.

    Example:
        >>> print_as_table('Config', {'max_epoch': 10, 'lr': 0.1})
        Config
        ===============
        max_epoch   10
        lr          0.1
    """
    table = ConsoleTable(2)
    table.add_title(title)
    table.add_hr(hr)
    table.add_key_values(key_values)
    print_func(table.format())
