"""The search space: the config fields a search varies and the values each may take."""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping, Sequence
from typing import Any, Union

from ..experiment.config.fields import check_value
from ..experiment.config.schema import is_config_class, schema_of
from ..utils.text import close_matches_hint, typed_repr

__all__ = ['Int', 'Float', 'Categorical', 'Dimension', 'check_space', 'describe_space',
           'parse_space_arg', 'override_args']


def _check_number(value: Any, arg: str, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or (
            kind is int and not isinstance(value, numbers.Integral)):
        raise TypeError(f'`{arg}` must be {"an int" if kind is int else "a real number"}, '
                        f'got {typed_repr(value)}')
    if not math.isfinite(value):
        raise ValueError(f'`{arg}` must be finite, got {value!r}')
    return kind(value)


class Int:
    """Integers from `low` to `high` (both included): Optuna's ``suggest_int``.

    Args:
        low, high: The bounds, ``low <= high``.
        step: The spacing of the values (1; not with `log`).
        log: Sample on a log scale (``low >= 1``).

    Raises:
        TypeError, ValueError: A bound or the step is not an int, or out of range.
    """

    kind = int

    def __init__(self, low: int, high: int, *, step: int = 1, log: bool = False) -> None:
        self.low = _check_number(low, 'low', int)
        self.high = _check_number(high, 'high', int)
        self.step = _check_number(step, 'step', int)
        if not isinstance(log, bool):
            raise TypeError(f'`log` must be True or False, got {typed_repr(log)}')
        self.log = log
        if self.low > self.high:
            raise ValueError(f'`low` must be <= `high`, got low={low!r}, high={high!r}')
        if self.step < 1:
            raise ValueError(f'`step` must be >= 1, got {step!r}')
        if log and (self.low < 1 or self.step != 1):
            raise ValueError(f'`log=True` needs `low` >= 1 and `step` 1, got low={low!r}, '
                             f'step={step!r}')

    def suggest(self, trial: Any, name: str) -> int:
        """The value `trial` suggests for field `name`."""
        return int(trial.suggest_int(name, self.low, self.high, step=self.step, log=self.log))

    def values(self) -> list[int]:
        """The values checked against the config field: the bounds."""
        return [self.low, self.high]

    def describe(self) -> dict[str, Any]:
        """Plain data naming this dimension (kept with the study)."""
        return {'type': 'int', 'low': self.low, 'high': self.high, 'step': self.step,
                'log': self.log}

    def __repr__(self) -> str:
        return f'Int({self.low}, {self.high}{f", step={self.step}" if self.step != 1 else ""}' \
               f'{", log=True" if self.log else ""})'


class Float:
    """Real numbers from `low` to `high`: Optuna's ``suggest_float``.

    Args:
        low, high: The bounds, ``low <= high``.
        step: The spacing of the values, or ``None`` (continuous; not with `log`).
        log: Sample on a log scale (``low > 0``).

    Raises:
        TypeError, ValueError: A bound or the step is not a number, or out of range.
    """

    kind = float

    def __init__(self, low: float, high: float, *, step: float | None = None,
                 log: bool = False) -> None:
        self.low = _check_number(low, 'low', float)
        self.high = _check_number(high, 'high', float)
        self.step = None if step is None else _check_number(step, 'step', float)
        if not isinstance(log, bool):
            raise TypeError(f'`log` must be True or False, got {typed_repr(log)}')
        self.log = log
        if self.low > self.high:
            raise ValueError(f'`low` must be <= `high`, got low={low!r}, high={high!r}')
        if self.step is not None and self.step <= 0:
            raise ValueError(f'`step` must be > 0 or None, got {step!r}')
        if log and (self.low <= 0 or self.step is not None):
            raise ValueError(f'`log=True` needs `low` > 0 and no `step`, got low={low!r}, '
                             f'step={step!r}')

    def suggest(self, trial: Any, name: str) -> float:
        """The value `trial` suggests for field `name`."""
        return float(trial.suggest_float(name, self.low, self.high, step=self.step,
                                         log=self.log))

    def values(self) -> list[float]:
        """The values checked against the config field: the bounds."""
        return [self.low, self.high]

    def describe(self) -> dict[str, Any]:
        """Plain data naming this dimension (kept with the study)."""
        return {'type': 'float', 'low': self.low, 'high': self.high, 'step': self.step,
                'log': self.log}

    def __repr__(self) -> str:
        return f'Float({self.low!r}, {self.high!r}' \
               f'{f", step={self.step!r}" if self.step is not None else ""}' \
               f'{", log=True" if self.log else ""})'


class Categorical:
    """One of `choices` (None, bool, int, float or str): Optuna's ``suggest_categorical``.

    Raises:
        TypeError: `choices` is not a list of such values.
        ValueError: `choices` is empty or repeats a value.
    """

    def __init__(self, choices: Sequence[Any]) -> None:
        if isinstance(choices, (str, bytes)) or not isinstance(choices, Sequence):
            raise TypeError(f'`choices` must be a list of values, got {typed_repr(choices)}')
        for choice in choices:
            if choice is not None and not isinstance(choice, (bool, int, float, str)):
                raise TypeError(f'`choices` must hold None, bool, int, float or str, got '
                                f'{typed_repr(choice)}')
        if not choices:
            raise ValueError('`choices` must not be empty')
        if len({(type(c), c) for c in choices}) != len(choices):
            raise ValueError(f'`choices` must not repeat a value, got {list(choices)!r}')
        self.choices = list(choices)

    def suggest(self, trial: Any, name: str) -> Any:
        """The value `trial` suggests for field `name`."""
        return trial.suggest_categorical(name, self.choices)

    def values(self) -> list[Any]:
        """The values checked against the config field: every choice."""
        return list(self.choices)

    def describe(self) -> dict[str, Any]:
        """Plain data naming this dimension (kept with the study)."""
        return {'type': 'categorical', 'choices': list(self.choices)}

    def __repr__(self) -> str:
        return f'Categorical({self.choices!r})'


Dimension = Union[Int, Float, Categorical]
_DIMENSIONS = (Int, Float, Categorical)


def check_space(space: Any, config_class: Any = None) -> dict[str, Dimension]:
    """`space` checked: a dict of dotted config field names to :class:`Int`,
    :class:`Float` or :class:`Categorical`; with `config_class`, each name must
    be a field of it (not a section) that takes every value of its dimension.

    Raises:
        TypeError: `space` is not such a dict, or a value does not fit its field.
        ValueError: `space` is empty, or names no field of `config_class`.
    """
    if not isinstance(space, Mapping):
        raise TypeError(f'`space` must be a dict of field names to spt.search.Int, Float or '
                        f'Categorical, got {typed_repr(space)}')
    if not space:
        raise ValueError('`space` must name at least one config field, got {}')
    out: dict[str, Dimension] = {}
    for name, dim in space.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f'`space` keys must be dotted field names, got {typed_repr(name)}')
        if not isinstance(dim, _DIMENSIONS):
            raise TypeError(f'`space[{name!r}]` must be spt.search.Int, Float or Categorical, '
                            f'got {typed_repr(dim)}')
        out[name] = dim
    if config_class is not None:
        for name, dim in out.items():
            _check_field(config_class, name, dim)
    return out


def _check_field(cls: Any, name: str, dim: Dimension) -> None:
    if not is_config_class(cls):
        raise TypeError(f'`config_class` must be a Config subclass or a dataclass, got '
                        f'{typed_repr(cls)}')
    section, path = cls, ''
    parts = name.split('.')
    for i, part in enumerate(parts):
        fields = schema_of(section)
        field = fields.get(part)
        path = f'{path}.{part}' if path else part
        if field is None:
            where = f'the section `{path.rpartition(".")[0]}`' if i else \
                f'the config {getattr(cls, "__name__", cls)}'
            raise ValueError(f'`space` names the field {name!r}, which {where} does not have'
                             f'{close_matches_hint(part, list(fields))}')
        if i < len(parts) - 1:
            if field.section is None:
                raise ValueError(f'`space` names the field {name!r}, but `{path}` is not a '
                                 f'section')
            section = field.section
        elif field.section is not None:
            raise ValueError(f'`space` names {name!r}, a section: name one of its fields '
                             f'({", ".join(f"{name}.{f}" for f in schema_of(field.section))})')
        else:
            for value in dim.values():
                try:
                    check_value(field, value, f'space[{name!r}]')
                except (TypeError, ValueError) as e:
                    raise TypeError(f'{e} (the field `{name}` is {field.expected()}; the '
                                    f'search space gives {dim!r})') from None


def describe_space(space: Mapping[str, Dimension]) -> dict[str, Any]:
    """Plain data naming every dimension of `space` (what a study keeps)."""
    return {name: dim.describe() for name, dim in sorted(space.items())}


def parse_space_arg(text: str) -> tuple[str, Dimension]:
    """One ``--space`` option of ``python -m tfsnippet.search``: ``NAME=int:LOW:HIGH[:log]``,
    ``NAME=float:LOW:HIGH[:log]`` or ``NAME=categorical:A,B,C``.

    Categorical values read as int, then float, then ``true``/``false``/``none``,
    else as text.

    Raises:
        ValueError: `text` is not of that form.
    """
    form = 'NAME=int:LOW:HIGH[:log], NAME=float:LOW:HIGH[:log] or NAME=categorical:A,B,C'
    name, eq, rest = text.partition('=')
    kind, _, spec = rest.partition(':')
    name, kind = name.strip(), kind.strip().lower()
    if not eq or not name or not spec:
        raise ValueError(f'`--space` must be {form}, got {text!r}')
    try:
        if kind in ('int', 'float'):
            parts = spec.split(':')
            log = parts[2:] == ['log']
            if len(parts) not in (2, 3) or (len(parts) == 3 and not log):
                raise ValueError(f'`--space` must be {form}, got {text!r}')
            if kind == 'int':
                return name, Int(int(parts[0]), int(parts[1]), log=log)
            return name, Float(float(parts[0]), float(parts[1]), log=log)
        if kind == 'categorical':
            return name, Categorical([_read_choice(c.strip()) for c in spec.split(',')])
    except (TypeError, ValueError) as e:
        if str(e).startswith('`--space`'):
            raise
        raise ValueError(f'`--space` must be {form}, got {text!r} ({e})') from None
    raise ValueError(f'`--space` must be {form}, got {text!r} (unknown kind {kind!r})')


def _read_choice(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    lowered = text.lower()
    if lowered in ('true', 'false'):
        return lowered == 'true'
    return None if lowered == 'none' else text


def override_args(params: Mapping[str, Any]) -> list[str]:
    """The command-line options that set `params`: ``['--lr', '0.01', ...]``."""
    out = []
    for name, value in params.items():
        if isinstance(value, bool):
            text = 'true' if value else 'false'
        elif value is None:
            text = 'none'
        else:
            text = repr(value) if isinstance(value, float) else str(value)
        out += [f'--{name}', text]
    return out
