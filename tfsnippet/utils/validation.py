"""Checks of argument values shared by the whole package: one rule, one message."""

from __future__ import annotations

from typing import Any, Literal, overload

import numpy as np

from .text import short_repr

__all__ = ['check_positive_int', 'check_positive_number', 'check_bool', 'short_repr']


def check_bool(value: Any, name: str) -> bool:
    """Return `value` if it is ``True`` or ``False``.

    Raises:
        TypeError: Anything else (``'yes'``, ``1``...).
    """
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f'`{name}` must be True or False, got {short_repr(value)}')
    return bool(value)


@overload
def check_positive_int(value: Any, name: str, allow_none: Literal[False] = ...) -> int: ...


@overload
def check_positive_int(value: Any, name: str, allow_none: bool) -> int | None: ...


def check_positive_int(value: Any, name: str, allow_none: bool = False) -> int | None:
    """Return `value` as an int if it is a positive int (``None`` too if allowed).

    Raises:
        TypeError: `value` is not an int (a bool is not one).
        ValueError: `value` is below 1.
    """
    if value is None and allow_none:
        return None
    if isinstance(value, np.integer):
        value = int(value)
    rule = f'`{name}` must be a positive int{" or None" if allow_none else ""}, got {short_repr(value)}'
    if type(value) is not int:
        raise TypeError(rule)
    if value < 1:
        raise ValueError(rule)
    return value


@overload
def check_positive_number(value: Any, name: str, allow_none: Literal[False] = ...) -> float: ...


@overload
def check_positive_number(value: Any, name: str, allow_none: bool) -> float | None: ...


def check_positive_number(value: Any, name: str, allow_none: bool = False) -> float | None:
    """Return `value` as a float if it is a number above 0 (``None`` too if allowed).

    Raises:
        TypeError: `value` is not a number (a bool is not one).
        ValueError: `value` is not above 0 (or is NaN).
    """
    if value is None and allow_none:
        return None
    rule = (f'`{name}` must be a positive number{" or None" if allow_none else ""}, '
            f'got {short_repr(value)}')
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(rule)
    if not value > 0:
        raise ValueError(rule)
    return float(value)
