"""The leaf fields of experiment configs: their types, and how values are checked and read.

The bottom layer of :mod:`tfsnippet.experiment.config`: a :class:`FieldSpec`
describes one field, :func:`check_value` validates a Python value for it
and :func:`parse_text` reads one from a command-line string.  Nothing here
knows about config classes (that is :mod:`.schema`).
"""

from __future__ import annotations

import dataclasses
import json
import numbers
from collections.abc import Iterable
from typing import Any

from ...utils.text import short_repr

__all__ = ['FieldKind', 'FieldSpec', 'MISSING', 'SCALAR_TYPES', 'ARTICLE', 'SUPPORTED_TYPES',
           'join_path', 'scalar_base', 'common_base', 'as_scalar', 'check_value', 'parse_text']

SCALAR_TYPES: tuple[type, ...] = (bool, int, float, str)
ARTICLE = {bool: 'a bool', int: 'an int', float: 'a float', str: 'a str'}
_TRUE_WORDS = ('true', 'yes', '1', 'on')
_FALSE_WORDS = ('false', 'no', '0', 'off')
_NONE_WORDS = ('none', 'null')
SUPPORTED_TYPES = ('bool, int, float, str, list[X] of one of those, Literal[...], '
                   'Optional[X] / X | None of those, or a nested config class')


class _Missing:
    """The marker of "no value" (a field without a default), distinct from ``None``."""

    def __repr__(self) -> str:
        return '<missing>'


MISSING: Any = _Missing()


# ----------------------------------------------------------------- field specs
@dataclasses.dataclass(frozen=True)
class FieldKind:
    """The value type of a leaf field: a scalar type, or a list of one."""

    base: type
    is_list: bool = False

    def __str__(self) -> str:
        return f'list[{self.base.__name__}]' if self.is_list else self.base.__name__

    def phrase(self) -> str:
        return f'a list of {self.base.__name__}s' if self.is_list else ARTICLE[self.base]


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """Everything the module knows about one field of a config class.

    A leaf has a `kind`; a section has the config class it holds in `section`,
    and its `default` is a dict of values (or missing: the section class's
    own defaults apply).
    """

    name: str
    kind: FieldKind | None = None
    section: type | None = None
    default: Any = MISSING
    description: str | None = None
    nullable: bool = False
    choices: tuple[Any, ...] | None = None

    def expected(self) -> str:
        assert self.kind is not None
        if self.choices is not None:
            text = 'one of ' + ', '.join(repr(c) for c in self.choices)
        else:
            text = self.kind.phrase()
        return text + (' or None' if self.nullable else '')

    def type_name(self) -> str:
        return f'{self.kind}' + (' or None' if self.nullable else '')


def join_path(path: str, name: str) -> str:
    return f'{path}.{name}' if path else name


def scalar_base(value: Any) -> type | None:
    """The scalar type `value` belongs to (bool before int), or None."""
    for base in SCALAR_TYPES:
        if isinstance(value, base):
            return base
    return None


def common_base(values: Iterable[Any]) -> type | None:
    """The one scalar type of all `values` (ints with floats make floats), or None."""
    bases = {scalar_base(value) for value in values}
    if bases == {int, float}:
        return float
    return bases.pop() if len(bases) == 1 else None


# ------------------------------------------------------------------ validation
def as_scalar(base: type, value: Any) -> Any:
    """`value` converted to `base` if it is one (ints count as floats), else `MISSING`."""
    if base is bool:
        return value if isinstance(value, bool) else MISSING
    if isinstance(value, bool):
        return MISSING
    if base is int:
        return int(value) if isinstance(value, numbers.Integral) else MISSING
    if base is float:
        return float(value) if isinstance(value, numbers.Real) else MISSING
    return value if isinstance(value, str) else MISSING


def check_value(field: FieldSpec, value: Any, path: str) -> Any:
    """Validate a Python value for leaf `field`; return it in canonical form.

    Raises:
        TypeError: `value` has the wrong type.
        ValueError: `value` is not one of the field's choices.
    """
    kind = field.kind
    assert kind is not None
    if value is None:
        if field.nullable:
            return None
        raise TypeError(f'`{path}` must be {field.expected()}, got None')
    if kind.is_list:
        if not isinstance(value, (list, tuple)):
            raise TypeError(f'`{path}` must be {field.expected()}, got {short_repr(value)}')
        items = []
        for i, item in enumerate(value):
            checked = as_scalar(kind.base, item)
            if checked is MISSING:
                raise TypeError(f'`{path}[{i}]` must be {ARTICLE[kind.base]}, '
                                f'got {short_repr(item)}')
            items.append(checked)
        return items
    checked = as_scalar(kind.base, value)
    if checked is MISSING:
        raise TypeError(f'`{path}` must be {field.expected()}, got {short_repr(value)}')
    if field.choices is not None and checked not in field.choices:
        raise ValueError(f'`{path}` must be {field.expected()}, got {short_repr(value)}')
    return checked


def _parse_scalar_text(base: type, text: str) -> Any:
    """`text` read as a `base` value, or `MISSING` if it does not read as one."""
    if base is str:
        return text
    word = text.strip()
    if base is bool:
        if word.lower() in _TRUE_WORDS:
            return True
        return False if word.lower() in _FALSE_WORDS else MISSING
    try:
        return base(word)
    except ValueError:
        return MISSING


def parse_text(field: FieldSpec, text: str) -> Any:
    """Read a command-line string as a value of leaf `field`.

    Raises:
        ValueError: `text` does not read as a valid value; the message says what
            was expected (the caller adds which option it was).
    """
    kind = field.kind
    assert kind is not None
    if field.nullable and text.strip().lower() in _NONE_WORDS:
        return None
    if kind.is_list:
        stripped = text.strip()
        if stripped.startswith('['):
            try:
                items = json.loads(stripped)
            except json.JSONDecodeError as e:
                raise ValueError(f'expected {field.expected()}, got {short_repr(text)} '
                                 f'(not valid JSON: {e.msg})') from e
            values = [as_scalar(kind.base, item) for item in items]
        else:
            items = [piece.strip() for piece in stripped.split(',')] if stripped else []
            values = [_parse_scalar_text(kind.base, item) for item in items]
        for item, value in zip(items, values):
            if value is MISSING:
                raise ValueError(f'expected {field.expected()}, got {short_repr(text)} '
                                 f'({short_repr(item)} is not {ARTICLE[kind.base]})')
        return values
    value = _parse_scalar_text(kind.base, text)
    if value is MISSING or (field.choices is not None and value not in field.choices):
        raise ValueError(f'expected {field.expected()}, got {short_repr(text)}')
    return value
