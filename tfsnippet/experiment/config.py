"""Typed experiment configs, filled in layers from defaults, config files and the command line."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import functools
import importlib
import inspect
import json
import numbers
import os
import re
import reprlib
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeVar, Union

from .suggest import closest_dotted   # issue 22: the suggestions for unknown names

__all__ = [
    'Config', 'ConfigField', 'config_from_dict', 'config_to_dict', 'get_config_defaults',
    'load_config_file', 'parse_config', 'register_config_arguments',
]

_T = TypeVar('_T')
_ConfigT = TypeVar('_ConfigT', bound='Config')

_SCALAR_TYPES: tuple[type, ...] = (bool, int, float, str)
_ARTICLE = {bool: 'a bool', int: 'an int', float: 'a float', str: 'a str'}
_TRUE_WORDS = ('true', 'yes', '1', 'on')
_FALSE_WORDS = ('false', 'no', '0', 'off')
_NONE_WORDS = ('none', 'null')
_SUPPORTED = ('bool, int, float, str, list[X] of one of those, Literal[...], '
              'Optional[X] / X | None of those, or a nested config class')
_NEGATIVE_NUMBER = re.compile(r'^-\d+$|^-\d*\.\d+$')

_short = reprlib.Repr()
_short.maxstring = 60
_short.maxother = 60


def _brief(value: Any) -> str:
    """A short repr of `value`, for error messages."""
    return _short.repr(value)


class _Missing:
    """The marker of "no value" (a field without a default), distinct from ``None``."""

    def __repr__(self) -> str:
        return '<missing>'


_MISSING: Any = _Missing()


# ----------------------------------------------------------------- field specs
@dataclasses.dataclass(frozen=True)
class _Kind:
    """The value type of a leaf field: a scalar type, or a list of one."""

    base: type
    is_list: bool = False

    def __str__(self) -> str:
        return f'list[{self.base.__name__}]' if self.is_list else self.base.__name__

    def phrase(self) -> str:
        return f'a list of {self.base.__name__}s' if self.is_list else _ARTICLE[self.base]


@dataclasses.dataclass(frozen=True)
class _Field:
    """Everything the module knows about one field of a config class.

    A leaf has a `kind`; a section has the config class it holds in `section`,
    and its `default` is a dict of values (or missing: the section class's
    own defaults apply).
    """

    name: str
    kind: _Kind | None = None
    section: type | None = None
    default: Any = _MISSING
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


def _join(path: str, name: str) -> str:
    return f'{path}.{name}' if path else name


def _is_config_class(obj: Any) -> bool:
    return isinstance(obj, type) and (issubclass(obj, Config) or dataclasses.is_dataclass(obj))


def _is_config_instance(obj: Any) -> bool:
    return isinstance(obj, Config) or (
        dataclasses.is_dataclass(obj) and not isinstance(obj, type))


def _field_from_hint(name: str, hint: Any, what: str) -> _Field:
    """Translate the type hint `hint` of field `name` into a field spec (no default yet)."""
    nullable = False
    given = hint
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        args = typing.get_args(hint)
        rest = [a for a in args if a is not type(None)]
        nullable = len(rest) < len(args)
        if len(rest) != 1:
            raise TypeError(f'{what} must be {_SUPPORTED}, got {_brief(given)}')
        hint = rest[0]
        origin = typing.get_origin(hint)
    if origin is Literal:
        choices = typing.get_args(hint)
        base = _common_base(choices)
        if base is not None and base is not float:
            return _Field(name, kind=_Kind(base), nullable=nullable, choices=tuple(choices))
    elif origin is list:
        args = typing.get_args(hint)
        if len(args) == 1 and args[0] in _SCALAR_TYPES:
            return _Field(name, kind=_Kind(args[0], is_list=True), nullable=nullable)
    elif hint in _SCALAR_TYPES:
        return _Field(name, kind=_Kind(hint), nullable=nullable)
    elif _is_config_class(hint) and not nullable:
        return _Field(name, section=hint)
    raise TypeError(f'{what} must be {_SUPPORTED}, got {_brief(given)}')


def _scalar_base(value: Any) -> type | None:
    """The scalar type `value` belongs to (bool before int), or None."""
    for base in _SCALAR_TYPES:
        if isinstance(value, base):
            return base
    return None


def _common_base(values: Iterable[Any]) -> type | None:
    """The one scalar type of all `values` (ints with floats make floats), or None."""
    bases = {_scalar_base(value) for value in values}
    if bases == {int, float}:
        return float
    return bases.pop() if len(bases) == 1 else None


# ------------------------------------------------------------------ validation
def _as_scalar(base: type, value: Any) -> Any:
    """`value` converted to `base` if it is one (ints count as floats), else `_MISSING`."""
    if base is bool:
        return value if isinstance(value, bool) else _MISSING
    if isinstance(value, bool):
        return _MISSING
    if base is int:
        return int(value) if isinstance(value, numbers.Integral) else _MISSING
    if base is float:
        return float(value) if isinstance(value, numbers.Real) else _MISSING
    return value if isinstance(value, str) else _MISSING


def _check_value(field: _Field, value: Any, path: str) -> Any:
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
            raise TypeError(f'`{path}` must be {field.expected()}, got {_brief(value)}')
        items = []
        for i, item in enumerate(value):
            checked = _as_scalar(kind.base, item)
            if checked is _MISSING:
                raise TypeError(f'`{path}[{i}]` must be {_ARTICLE[kind.base]}, '
                                f'got {_brief(item)}')
            items.append(checked)
        return items
    checked = _as_scalar(kind.base, value)
    if checked is _MISSING:
        raise TypeError(f'`{path}` must be {field.expected()}, got {_brief(value)}')
    if field.choices is not None and checked not in field.choices:
        raise ValueError(f'`{path}` must be {field.expected()}, got {_brief(value)}')
    return checked


def _parse_scalar_text(base: type, text: str) -> Any:
    """`text` read as a `base` value, or `_MISSING` if it does not read as one."""
    if base is str:
        return text
    word = text.strip()
    if base is bool:
        if word.lower() in _TRUE_WORDS:
            return True
        return False if word.lower() in _FALSE_WORDS else _MISSING
    try:
        return base(word)
    except ValueError:
        return _MISSING


def _parse_text(field: _Field, text: str) -> Any:
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
                raise ValueError(f'expected {field.expected()}, got {_brief(text)} '
                                 f'(not valid JSON: {e.msg})') from e
            values = [_as_scalar(kind.base, item) for item in items]
        else:
            items = [piece.strip() for piece in stripped.split(',')] if stripped else []
            values = [_parse_scalar_text(kind.base, item) for item in items]
        for item, value in zip(items, values):
            if value is _MISSING:
                raise ValueError(f'expected {field.expected()}, got {_brief(text)} '
                                 f'({_brief(item)} is not {_ARTICLE[kind.base]})')
        return values
    value = _parse_scalar_text(kind.base, text)
    if value is _MISSING or (field.choices is not None and value not in field.choices):
        raise ValueError(f'expected {field.expected()}, got {_brief(text)}')
    return value


# ------------------------------------------------------------------- ConfigField
class ConfigField:
    """Declares a field of a :class:`Config` with its type, default, help text and choices.

    A plain class attribute (``max_epoch = 10``) is enough for most fields; use a
    ``ConfigField`` when the type cannot be read off the default (``None``, an
    empty list), or to add a description or a set of choices.

    Args:
        type: ``bool``, ``int``, ``float``, ``str``, ``list[X]`` of one of those,
            ``Literal[...]`` (its values become the choices), or any of these
            ``| None`` (which makes the field nullable).
        default: The default value.  It may be left out (``None``) only when the
            field is nullable.
        description: The help text shown by ``--help``.
        nullable: Whether ``None`` is a valid value.
        choices: The only values the field may take (scalar types only).

    Raises:
        TypeError: `type` is not supported, or `default`, `choices` or
            `description` has the wrong type.
        ValueError: `default` is ``None`` for a field that is not nullable,
            `default` is not one of `choices`, or `choices` is empty.

    Example:

        >>> from tfsnippet.experiment import Config, ConfigField
        >>> class ModelConfig(Config):
        ...     activation = ConfigField(str, default='relu', choices=['relu', 'tanh'],
        ...                              description='Hidden-layer activation.')
        ...     dropout = ConfigField(float, nullable=True)
        >>> ModelConfig()
        ModelConfig(activation='relu', dropout=None)
    """

    def __init__(self, type: Any, default: Any = None, description: str | None = None,
                 nullable: bool = False, choices: Iterable[Any] | None = None) -> None:
        spec = _field_from_hint('', type, '`type`')
        if spec.section is not None:
            raise TypeError('`type` must not be a config class: put a nested section on the '
                            f'class directly, not in a ConfigField (got {_brief(type)})')
        assert spec.kind is not None
        if description is not None and not isinstance(description, str):
            raise TypeError(f'`description` must be a str or None, got {_brief(description)}')
        nullable = bool(nullable) or spec.nullable
        if choices is not None:
            if spec.choices is not None:
                raise ValueError('`choices` must not be given when `type` is a Literal, '
                                 f'which already lists them: got {_brief(choices)}')
            if spec.kind.is_list:
                raise TypeError(f'`choices` only applies to scalar types, got type '
                                f'{spec.kind} with choices {_brief(choices)}')
            if isinstance(choices, (str, bytes)) or not isinstance(choices, Iterable):
                raise TypeError(f'`choices` must be a list of values, got {_brief(choices)}')
            checked = []
            for choice in choices:
                value = _as_scalar(spec.kind.base, choice)
                if value is _MISSING:
                    raise TypeError(f'every item of `choices` must be '
                                    f'{_ARTICLE[spec.kind.base]}, got {_brief(choice)}')
                checked.append(value)
            if not checked:
                raise ValueError('`choices` must not be empty, got an empty list')
            spec = dataclasses.replace(spec, choices=tuple(checked))
        spec = dataclasses.replace(spec, nullable=nullable, description=description)
        if default is None and not nullable:
            raise ValueError('`default` is None, but `nullable` is False: give a default '
                             'value or pass `nullable=True`')
        self._spec = dataclasses.replace(spec, default=_check_value(spec, default, 'default'))
        self._type = type

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        # Instances always hold their own value, so this only runs for class
        # access; typed as Any so that type checkers accept `config.field`.
        return self

    @property
    def type(self) -> Any:
        """The declared type."""
        return self._type

    @property
    def default_value(self) -> Any:
        """The default value (lists are copied for each config instance)."""
        return self._spec.default

    @property
    def description(self) -> str | None:
        """The help text, or ``None``."""
        return self._spec.description

    @property
    def nullable(self) -> bool:
        """Whether ``None`` is a valid value."""
        return self._spec.nullable

    @property
    def choices(self) -> tuple[Any, ...] | None:
        """The valid values, or ``None`` when any value of the type is valid."""
        return self._spec.choices

    def _field(self, name: str) -> _Field:
        return dataclasses.replace(self._spec, name=name)

    def __repr__(self) -> str:
        parts = [self._spec.type_name() if self._spec.choices is None else
                 str(self._spec.kind), f'default={self._spec.default!r}']
        if self._spec.nullable:
            parts.append('nullable=True')
        if self._spec.choices is not None:
            parts.append(f'choices={list(self._spec.choices)!r}')
        if self._spec.description is not None:
            parts.append(f'description={self._spec.description!r}')
        return f'ConfigField({", ".join(parts)})'


# ---------------------------------------------------------------- class schemas
def _type_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except NameError as e:
        raise TypeError(f'cannot resolve the type hints of {cls.__qualname__}: {e}; define it '
                        'at module level, or import the names its annotations use') from e


def _check_section_complete(section: type, default: Any, where: str) -> None:
    values = _defaults(section) if default is _MISSING else default
    missing = _missing_paths(section, values, '')
    if missing:
        raise TypeError(f'section `{where}` needs a default for every field, but '
                        f'{section.__name__} has none for {_listing(missing)}')


def _config_class_fields(cls: type[Config]) -> dict[str, _Field]:
    """The fields of Config subclass `cls`, in definition order, bases first."""
    fields: dict[str, _Field] = {}
    for base in reversed(cls.__bases__):
        if issubclass(base, Config):
            fields.update(base._config_fields_)
    annotations: dict[str, Any] = cls.__dict__.get('__annotations__', {})
    hints = _type_hints(cls) if annotations else {}
    names = list(cls.__dict__) + [n for n in annotations if n not in cls.__dict__]
    for name in names:
        if name.startswith('_'):
            continue
        value = cls.__dict__.get(name, _MISSING)
        where = f'{cls.__name__}.{name}'
        if isinstance(value, ConfigField):
            field = value._field(name)
        elif name in annotations:
            if typing.get_origin(hints[name]) is ClassVar:
                continue
            field = _field_from_hint(name, hints[name], f'the type of `{where}`')
            field = _with_default(field, value, where)
        elif _is_config_class(value) or _is_config_instance(value):
            section = value if isinstance(value, type) else type(value)
            field = _with_default(_Field(name, section=section),
                                  _MISSING if isinstance(value, type) else value, where)
        elif callable(value) or hasattr(type(value), '__get__'):
            continue   # methods, properties, helper classes: not fields
        elif name in fields:
            inherited = fields[name]
            if inherited.section is not None:
                raise TypeError(f'`{where}` must be a {inherited.section.__name__} class or '
                                f'instance (it overrides a section), got {_brief(value)}')
            field = dataclasses.replace(inherited, default=_check_value(inherited, value, where))
        else:
            field = _infer_field(name, value, where)
        if name in _RESERVED:
            raise TypeError(f'`{where}` cannot be a field: `{name}` is a method of Config; '
                            'rename the field')
        fields[name] = field
    return fields


def _with_default(field: _Field, value: Any, where: str, complete: bool = True) -> _Field:
    """`field` with default `value` (validated).

    A section may leave out its default (its class's defaults then apply), and
    with `complete` those defaults must cover every field, as a Config builds
    its sections when it is created.
    """
    if field.section is not None:
        if value is _MISSING or value is field.section:
            default = _MISSING
        elif isinstance(value, field.section):
            default = config_to_dict(value)
        else:
            raise TypeError(f'`{where}` must default to an instance of '
                            f'{field.section.__name__}, got {_brief(value)}')
        if complete:
            _check_section_complete(field.section, default, where)
        return dataclasses.replace(field, default=default)
    if value is _MISSING:
        raise TypeError(f'`{where}` needs a default value: every field of a Config has one '
                        '(use a dataclass for fields that must be given)')
    return dataclasses.replace(field, default=_check_value(field, value, where))


def _infer_field(name: str, value: Any, where: str) -> _Field:
    """A leaf field whose type is read off its plain default `value`."""
    base = _scalar_base(value)
    if base is not None:
        return _Field(name, kind=_Kind(base), default=_as_scalar(base, value))
    if isinstance(value, (list, tuple)):
        item_base = _common_base(value)
        if item_base is not None:
            field = _Field(name, kind=_Kind(item_base, is_list=True))
            return dataclasses.replace(field, default=_check_value(field, value, where))
        raise TypeError(f'cannot infer the item type of `{where}` from {_brief(value)}: declare '
                        'it as ConfigField(list[int], default=...) or similar')
    if value is None:
        raise TypeError(f'cannot infer the type of `{where}` from its default None: declare it '
                        'as ConfigField(<type>, nullable=True)')
    raise TypeError(f'`{where}` must default to a bool, int, float, str or a list of one of '
                    f'those, got {_brief(value)}')


@functools.cache
def _dataclass_fields(cls: Any) -> dict[str, _Field]:
    """The fields of dataclass `cls` (those its ``__init__`` takes), from its type hints."""
    hints = _type_hints(cls)
    fields: dict[str, _Field] = {}
    for item in dataclasses.fields(cls):
        if not item.init:
            continue
        where = f'{cls.__name__}.{item.name}'
        field = _field_from_hint(item.name, hints[item.name], f'the type of `{where}`')
        description = item.metadata.get('description', item.metadata.get('help'))
        field = dataclasses.replace(field, description=description)
        if item.default is not dataclasses.MISSING:
            default = item.default
        elif item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        else:
            default = _MISSING
        if field.section is not None or default is not _MISSING:
            field = _with_default(field, default, where, complete=False)
        fields[item.name] = field
    return fields


def _schema(cls: Any) -> dict[str, _Field]:
    if issubclass(cls, Config):
        return cls._config_fields_
    return _dataclass_fields(cls)


# ------------------------------------------------------------ nested value dicts
def _defaults(cls: type) -> dict[str, Any]:
    """The nested dict of default values of config class `cls` (fields without one left out)."""
    out: dict[str, Any] = {}
    for name, field in _schema(cls).items():
        if field.section is not None:
            out[name] = (_defaults(field.section) if field.default is _MISSING
                         else copy.deepcopy(field.default))
        elif field.default is not _MISSING:
            out[name] = copy.deepcopy(field.default)
    return out


def _all_paths(cls: type, path: str = '') -> list[str]:
    out = []
    for name, field in _schema(cls).items():
        out.append(_join(path, name))
        if field.section is not None:
            out.extend(_all_paths(field.section, _join(path, name)))
    return out


def _missing_paths(cls: type, values: Mapping[str, Any], path: str) -> list[str]:
    """The paths of the fields (or whole sections) of `cls` that `values` leaves out."""
    out = []
    for name, field in _schema(cls).items():
        if name not in values:
            out.append(_join(path, name))
        elif field.section is not None:
            out.extend(_missing_paths(field.section, values[name], _join(path, name)))
    return out


def _listing(paths: Sequence[str]) -> str:
    return ', '.join(f'`{p}`' for p in paths)


def _unknown_listing(cls: type, unknown: Sequence[str], path: str = '') -> str:
    """The `unknown` paths, each with the closest field of `cls` (at `path`) when one is close."""
    candidates = [_join(path, p) for p in _all_paths(cls)]
    parts = []
    for path in unknown:
        # issue 22: a same-named field of another section, or an abbreviation, first
        close = closest_dotted(path, candidates)
        parts.append(f'`{path}` (did you mean `{close}`?)' if close else f'`{path}`')
    return ', '.join(parts)


def _normalize(cls: type, data: Any, path: str, unknown: list[str], root: str) -> dict[str, Any]:
    """Validate the (partial) nested mapping `data` against `cls`.

    Returns the validated values; appends the paths of keys `cls` does not
    have to `unknown`.

    Raises:
        TypeError: `data` or a section of it is not a mapping, or a value has
            the wrong type.
        ValueError: A value is not one of its field's choices.
    """
    if isinstance(data, cls) and _is_config_instance(data):
        data = config_to_dict(data)
    if not isinstance(data, Mapping):
        what = f'`{path}`' if path else root
        raise TypeError(f'{what} must be a mapping of field names to values, '
                        f'got {_brief(data)}')
    schema = _schema(cls)
    out: dict[str, Any] = {}
    for key, value in data.items():
        sub = _join(path, str(key))
        field = schema.get(key) if isinstance(key, str) else None
        if field is None:
            unknown.append(sub)
        elif field.section is not None:
            out[key] = _normalize(field.section, value, sub, unknown, root)
        else:
            out[key] = _check_value(field, value, sub)
    return out


def _merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _leaves(values: Mapping[str, Any],
            path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for key, value in values.items():
        if isinstance(value, dict):
            yield from _leaves(value, path + (key,))
        else:
            yield path + (key,), value


def _build(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of `cls` from the complete, validated nested dict `values`."""
    kwargs = {}
    for name, field in _schema(cls).items():
        value = values[name]
        kwargs[name] = _build(field.section, value) if field.section is not None else value
    return cls(**kwargs)


def _section_value(field: _Field, value: Any, path: str) -> Any:
    """The instance to store in section `field` when `value` is assigned to it."""
    assert field.section is not None
    if isinstance(value, field.section):
        return value
    if isinstance(value, Mapping):
        unknown: list[str] = []
        overlay = _normalize(field.section, value, path, unknown, f'`{path}`')
        if unknown:
            raise ValueError(f'{field.section.__name__} has no field '
                             f'{_unknown_listing(field.section, unknown, path)}')
        base = _defaults(field.section) if field.default is _MISSING else field.default
        return _build(field.section, _merge(base, overlay))
    raise TypeError(f'`{path}` must be an instance of {field.section.__name__} or a mapping, '
                    f'got {_brief(value)}')


def _adopt(config: Any, path: str) -> None:
    """Tell Config `config` (and its sections) where it sits, for error messages."""
    if isinstance(config, Config):
        object.__setattr__(config, '_config_path_', path)
        for name, field in config._config_fields_.items():
            if field.section is not None:
                _adopt(config.__dict__[name], _join(path, name))


# ---------------------------------------------------------------------- Config
class Config:
    """Base class of experiment configs whose fields are class attributes.

    Each public class attribute is a field: a plain default (its type is read
    off the value, so write ``1.0`` for a float), an annotated default
    (``lr: float = 1``), a :class:`ConfigField`, or a nested config class (a
    :class:`Config` subclass or a dataclass), which becomes a *section*.
    Methods, properties and names starting with ``_`` are not fields.
    Subclasses inherit fields, and may give them new defaults.

    Every assignment is validated: a value of the wrong type raises
    ``TypeError``, a value outside the field's choices raises ``ValueError``,
    and a name that is not a field raises ``AttributeError``; the messages
    name the field by its dotted path.  Ints are accepted for float fields (and
    stored as floats), tuples for list fields; bools are not ints.

    Plain ``@dataclass`` classes are accepted wherever a ``Config`` is (their
    type hints are the field types, ``Literal[...]`` gives choices and
    ``field(metadata={'description': ...})`` the help text), but their
    assignments are not validated.

    Args:
        **values: Values for some fields, overriding the defaults; a section
            takes an instance of its class or a mapping.

    Raises:
        TypeError: A keyword is not a field, or a value has the wrong type.
        ValueError: A value is not one of its field's choices.

    Example:

        >>> from tfsnippet.experiment import Config, ConfigField
        >>> class TrainConfig(Config):
        ...     max_epoch = 10
        ...     lr = ConfigField(float, default=1e-3, description='Learning rate.')
        ...     class optimizer(Config):
        ...         name = ConfigField(str, default='adam', choices=['adam', 'sgd'])
        >>> config = TrainConfig(max_epoch=20)
        >>> config.optimizer.name = 'sgd'
        >>> config
        TrainConfig(max_epoch=20, lr=0.001, optimizer=optimizer(name='sgd'))
        >>> config.to_dict()
        {'max_epoch': 20, 'lr': 0.001, 'optimizer': {'name': 'sgd'}}
        >>> config.optimizer.name = 'rmsprop'
        Traceback (most recent call last):
          ...
        ValueError: `optimizer.name` must be one of 'adam', 'sgd', got 'rmsprop'
    """

    _config_fields_: ClassVar[dict[str, _Field]] = {}
    _config_path_: str

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._config_fields_ = _config_class_fields(cls)

    def __init__(self, **values: Any) -> None:
        object.__setattr__(self, '_config_path_', '')
        fields = self._config_fields_
        unknown = [name for name in values if name not in fields]
        if unknown:
            raise TypeError(f'{type(self).__name__}() has no field '
                            f'{_unknown_listing(type(self), unknown)}')
        for name, field in fields.items():
            if name in values:
                setattr(self, name, values[name])
            elif field.section is not None:
                section = _build(field.section, _defaults(field.section)
                                 if field.default is _MISSING else field.default)
                _adopt(section, name)
                object.__setattr__(self, name, section)
            else:
                object.__setattr__(self, name, copy.deepcopy(field.default))

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith('_'):
            object.__setattr__(self, name, value)
            return
        field = self._config_fields_.get(name)
        path = _join(self._config_path_, name)
        if field is None:
            raise AttributeError(f'{type(self).__name__} has no field '
                                 f'{_unknown_listing(type(self), [name])}')
        if field.section is not None:
            value = _section_value(field, value, path)
            _adopt(value, path)
        else:
            value = _check_value(field, value, path)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._config_fields_:
            raise AttributeError(f'`{_join(self._config_path_, name)}` is a config field and '
                                 'cannot be deleted; assign a value to it instead')
        object.__delattr__(self, name)

    def to_dict(self) -> dict[str, Any]:
        """The values as a nested dict (sections become dicts); see :func:`config_to_dict`."""
        return config_to_dict(self)

    @classmethod
    def from_dict(cls: type[_ConfigT], data: Mapping[str, Any],
                  strict: bool = True) -> _ConfigT:
        """An instance from a nested dict; see :func:`config_from_dict`."""
        return config_from_dict(cls, data, strict=strict)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.to_dict() == config_to_dict(other)

    __hash__ = None  # type: ignore[assignment]   # mutable

    def __repr__(self) -> str:
        inner = ', '.join(f'{name}={self.__dict__[name]!r}' for name in self._config_fields_)
        return f'{type(self).__name__}({inner})'


_RESERVED = frozenset(name for name in vars(Config) if not name.startswith('_'))


# --------------------------------------------------------------- dict helpers
def config_to_dict(config: Any) -> dict[str, Any]:
    """The values of `config` (a :class:`Config` or dataclass instance) as a nested dict.

    Sections become dicts, and lists are copied, so the result can be changed
    or saved as JSON without touching `config`.

    Raises:
        TypeError: `config` is not a Config or dataclass instance.
    """
    if not _is_config_instance(config):
        raise TypeError(f'`config` must be a Config or dataclass instance, got {_brief(config)}')
    out: dict[str, Any] = {}
    for name, field in _schema(type(config)).items():
        value = getattr(config, name)
        out[name] = (config_to_dict(value) if field.section is not None
                     else copy.deepcopy(value))
    return out


def config_from_dict(cls: type[_T], data: Mapping[str, Any], strict: bool = True) -> _T:
    """Rebuild a config of class `cls` from a nested dict, such as a saved one.

    Args:
        cls: A :class:`Config` subclass or a dataclass.
        data: The values, as :func:`config_to_dict` returns them.
        strict: If true, `data` must hold exactly the fields of `cls`: a config
            saved before the class gained or lost a field is refused, with the
            keys that differ.  If false, unknown keys are dropped and missing
            ones take their defaults.

    Returns:
        The config.

    Raises:
        TypeError: `cls` is not a config class, `data` (or a section of it) is
            not a mapping, or a value has the wrong type.
        ValueError: The keys do not match `cls` (`strict`), a field without a
            default has no value, or a value is not one of its choices.

    Example:

        >>> from tfsnippet.experiment import Config, config_from_dict
        >>> class RunConfig(Config):
        ...     max_epoch = 10
        ...     lr = 0.1
        >>> config_from_dict(RunConfig, {'max_epoch': 3, 'lr': 0.5})
        RunConfig(max_epoch=3, lr=0.5)
        >>> config_from_dict(RunConfig, {'max_epoch': 3, 'momentum': 0.9})
        Traceback (most recent call last):
          ...
        ValueError: `data` does not match RunConfig: unknown key `momentum`; missing key `lr`. \
Pass `strict=False` to drop unknown keys and use defaults for missing ones.
        >>> config_from_dict(RunConfig, {'max_epoch': 3, 'momentum': 0.9}, strict=False)
        RunConfig(max_epoch=3, lr=0.1)
    """
    if not _is_config_class(cls):
        raise TypeError(f'`cls` must be a Config subclass or a dataclass, got {_brief(cls)}')
    unknown: list[str] = []
    values = _normalize(cls, data, '', unknown, '`data`')
    if strict:
        missing = _missing_paths(cls, values, '')
        if unknown or missing:
            parts = []
            if unknown:
                parts.append(f'unknown key{"s" if len(unknown) > 1 else ""} '
                             f'{_unknown_listing(cls, unknown)}')
            if missing:
                parts.append(f'missing key{"s" if len(missing) > 1 else ""} {_listing(missing)}')
            raise ValueError(f'`data` does not match {cls.__name__}: {"; ".join(parts)}. Pass '
                             '`strict=False` to drop unknown keys and use defaults for missing '
                             'ones.')
    values = _merge(_defaults(cls), values)
    missing = _missing_paths(cls, values, '')
    if missing:
        raise ValueError(f'`data` has no value for {_listing(missing)} of {cls.__name__}, '
                         'which has no default')
    return typing.cast(_T, _build(cls, values))


def get_config_defaults(config: Any) -> dict[str, Any]:
    """The default values of a config class (or of an instance's class) as a nested dict.

    Fields without a default (possible in dataclasses) are left out.

    Raises:
        TypeError: `config` is neither a config class nor a config instance.
    """
    if _is_config_instance(config):
        config = type(config)
    if not _is_config_class(config):
        raise TypeError('`config` must be a Config subclass, a dataclass, or an instance of '
                        f'one, got {_brief(config)}')
    return _defaults(config)


def load_config_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a config file: JSON (``.json``), or YAML (``.yaml``/``.yml``) if PyYAML is installed.

    The file must hold a mapping of field names to values, with sections as
    nested mappings, as :func:`config_to_dict` returns them.  An empty YAML
    file reads as an empty mapping.

    Returns:
        The mapping, not yet checked against any config class.

    Raises:
        TypeError: `path` is not a path, or the file does not hold a mapping.
        ValueError: The extension is not one of the above, or the file does
            not parse.
        RuntimeError: The file is YAML and PyYAML is not installed.
        OSError: The file cannot be read.
    """
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f'`path` must be a str or os.PathLike, got {_brief(path)}')
    name = os.fspath(path)
    extension = os.path.splitext(name)[1].lower()
    if extension not in ('.json', '.yaml', '.yml'):
        raise ValueError(f'`path` must name a .json, .yaml or .yml file, got {name!r}')
    yaml = None
    if extension != '.json':
        try:
            yaml = importlib.import_module('yaml')
        except ImportError as e:
            raise RuntimeError(f'reading {name!r} needs PyYAML, which is not installed: '
                               'run `pip install pyyaml`, or use a .json file') from e
    with open(name, encoding='utf-8') as f:
        text = f.read()
    if yaml is None:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f'config file {name!r} is not valid JSON: {e}') from e
    else:
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise ValueError(f'config file {name!r} is not valid YAML: {e}') from e
        data = {} if data is None else data
    if not isinstance(data, dict):
        raise TypeError(f'config file {name!r} must hold a mapping of field names to '
                        f'values, got {_brief(data)}')
    return data


# --------------------------------------------------------------------- argparse
class _InstanceSink:
    """Writes parsed values into a config instance."""

    def __init__(self, config: Any) -> None:
        self._config = config

    def set(self, path: Sequence[str], value: Any) -> None:
        target = self._config
        for name in path[:-1]:
            target = getattr(target, name)
        setattr(target, path[-1], value)


class _DictSink:
    """Writes parsed values into a nested dict."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values

    def set(self, path: Sequence[str], value: Any) -> None:
        target = self.values
        for name in path[:-1]:
            target = target.setdefault(name, {})
        target[path[-1]] = value


_Sink = Union[_InstanceSink, _DictSink]


class _TextReader:
    """The argparse `type` of a field option: reads and validates the string."""

    def __init__(self, field: _Field) -> None:
        self._field = field

    def __call__(self, text: str) -> Any:
        try:
            return _parse_text(self._field, text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(str(e)) from e


class _FieldAction(argparse.Action):
    """Stores a field option's value in the config, and marks it as given on the command line."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, sink: _Sink,
                 path: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self._sink = sink
        self._path = path

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        self._sink.set(self._path, values)
        setattr(namespace, self.dest, values)


class _FileAction(argparse.Action):
    """Applies a config file, except for the fields already given on the command line."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, config_class: type,
                 sink: _Sink, prefix: tuple[str, ...], **kwargs: Any) -> None:
        super().__init__(option_strings, dest, **kwargs)
        self._class = config_class
        self._sink = sink
        self._prefix = prefix

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        try:
            data = load_config_file(values)
        except (OSError, TypeError, ValueError, RuntimeError) as e:
            raise argparse.ArgumentError(self, str(e)) from e
        unknown: list[str] = []
        try:
            overlay = _normalize(self._class, data, '', unknown, 'the file')
        except (TypeError, ValueError) as e:
            raise argparse.ArgumentError(self, f'{values}: {e}') from e
        if unknown:
            raise argparse.ArgumentError(
                self, f'{values}: {self._class.__name__} has no field '
                      f'{_unknown_listing(self._class, unknown)}')
        for path, value in _leaves(overlay):
            if not hasattr(namespace, '.'.join(self._prefix + path)):
                self._sink.set(path, value)
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])


def _class_summary(cls: type) -> str | None:
    """The first paragraph of the docstring `cls` itself has (not inherited, not generated)."""
    doc = cls.__dict__.get('__doc__')
    if not doc or (dataclasses.is_dataclass(cls) and doc.startswith(f'{cls.__name__}(')):
        return None
    return inspect.cleandoc(doc).split('\n\n')[0]


def _help_text(field: _Field, shown: Any) -> str:
    default = 'required' if shown is _MISSING else f'default: {shown!r}'
    text = f'({field.type_name()}; {default})'
    if field.description:
        text = f'{field.description} {text}'
    return text.replace('%', '%%')


def _metavar(field: _Field) -> str:
    assert field.kind is not None
    if field.choices is not None:
        return '{' + ','.join(str(c) for c in field.choices) + '}'
    name = field.kind.base.__name__.upper()
    return f'{name},...' if field.kind.is_list else name


def _check_prefix(prefix: Any) -> tuple[str, ...]:
    if prefix is None:
        return ()
    if not isinstance(prefix, str):
        raise TypeError(f'`prefix` must be a str or None, got {_brief(prefix)}')
    if not re.fullmatch(r'[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*', prefix):
        raise ValueError('`prefix` must be dotted names such as "model" or "exp.model", '
                         f'got {_brief(prefix)}')
    return tuple(prefix.split('.'))


def _add_arguments(cls: type, parser: argparse.ArgumentParser, prefix: tuple[str, ...],
                   sink: _Sink, shown: Mapping[str, Any],
                   file_option: str | None) -> list[str]:
    """Add an option per leaf field of `cls` (and `file_option`); return the option strings."""
    options: list[str] = []

    def visit(cls: type, path: tuple[str, ...], shown: Mapping[str, Any],
              container: Any) -> None:
        for name, field in _schema(cls).items():
            sub = path + (name,)
            dest = '.'.join(prefix + sub)
            if field.section is not None:
                group = parser.add_argument_group(dest, _class_summary(field.section))
                visit(field.section, sub, shown.get(name, {}), group)
                continue
            assert field.kind is not None
            extra: dict[str, Any] = {}
            if field.kind.base is bool and not field.kind.is_list:
                extra = {'nargs': '?', 'const': True}
            option = f'--{dest}'
            container.add_argument(
                option, action=_FieldAction, dest=dest, default=argparse.SUPPRESS,
                type=_TextReader(field), metavar=_metavar(field),
                help=_help_text(field, shown.get(name, _MISSING)), sink=sink, path=sub,
                **extra)
            options.append(option)

    top = parser.add_argument_group('.'.join(prefix)) if prefix else parser
    visit(cls, (), shown, top)
    if file_option in options:
        raise ValueError(f'field `{file_option[2:]}` of {cls.__name__} clashes with the '
                         f'config-file option {file_option}: rename the field, or call '
                         'register_config_arguments() with another `file_option`')
    if file_option is not None:
        parser.add_argument(
            file_option, action=_FileAction, metavar='FILE', config_class=cls, sink=sink,
            prefix=prefix, help='Read config values from a .json file (or .yaml, with PyYAML); '
                                'repeat to layer several, later files winning.  Command-line '
                                'options win over files.')
        options.append(file_option)
    return options


def register_config_arguments(config: Any, parser: argparse.ArgumentParser,
                              prefix: str | None = None, *,
                              file_option: str | None = None) -> None:
    """Add a command-line option per field of `config`, which parsing then updates.

    Each field gets ``--name`` (``--section.name`` in a section, with
    ``prefix.`` in front if `prefix` is given), and ``--help`` lists its type,
    current value and description, sections as groups.  Values are read as:

    * bool: ``true/false``, ``yes/no``, ``1/0``, ``on/off`` (any case), or the
      bare option for true;
    * int, float, str: as written;
    * lists: a JSON list (``[1, 2]``) or comma-separated items (``1,2``);
    * ``none`` or ``null`` gives ``None`` when the field is nullable.

    Bad values make the parser exit with a usage message (exit code 2).  With
    `file_option` (say ``'--config'``), that option reads a config file (see
    :func:`load_config_file`) into `config`; fields given on the command line
    keep their command-line values whatever the order of the options.

    Use :func:`parse_config` to parse in one call, with suggestions for
    misspelt options.

    .. note::
       A bool option takes an optional value, so a positional argument right
       after a bare ``--flag`` is read as the flag's value: write
       ``--flag true`` (or put the flag last) when the parser has positionals.

    Args:
        config: A :class:`Config` or dataclass instance.
        parser: The parser to add the options to.
        prefix: Dotted names put in front of every option (and its ``dest``).
        file_option: The option that reads a config file, or ``None`` for none.

    Raises:
        TypeError: `config` is not a config instance (a class is refused: use
            :func:`parse_config`), `parser` is not an ArgumentParser, or
            `prefix` or `file_option` is not a str.
        ValueError: `prefix` or `file_option` is malformed.

    Example:

        >>> import argparse
        >>> from tfsnippet.experiment import Config, register_config_arguments
        >>> class RunConfig(Config):
        ...     max_epoch = 10
        ...     shuffle = True
        >>> config = RunConfig()
        >>> parser = argparse.ArgumentParser()
        >>> register_config_arguments(config, parser)
        >>> _ = parser.parse_args(['--max_epoch', '20', '--shuffle', 'no'])
        >>> config
        RunConfig(max_epoch=20, shuffle=False)
    """
    if not _is_config_instance(config):
        hint = '; pass an instance, or use parse_config() for a class' \
            if _is_config_class(config) else ''
        raise TypeError(f'`config` must be a Config or dataclass instance, '
                        f'got {_brief(config)}{hint}')
    if not isinstance(parser, argparse.ArgumentParser):
        raise TypeError(f'`parser` must be an argparse.ArgumentParser, got {_brief(parser)}')
    _check_file_option(file_option)
    _add_arguments(type(config), parser, _check_prefix(prefix), _InstanceSink(config),
                   config_to_dict(config), file_option)


def _check_file_option(file_option: Any) -> None:
    if file_option is None:
        return
    if not isinstance(file_option, str):
        raise TypeError(f'`file_option` must be a str or None, got {_brief(file_option)}')
    if not re.fullmatch(r'--[A-Za-z][\w.-]*', file_option):
        raise ValueError(f'`file_option` must be a long option such as "--config", '
                         f'got {_brief(file_option)}')


def _unrecognized_message(extras: Sequence[str], options: Sequence[str]) -> str:
    flagged = [e for e in extras if e.startswith('-') and e not in ('-', '--')
               and not _NEGATIVE_NUMBER.match(e)]
    if not flagged:
        return f'unrecognized arguments: {" ".join(extras)}'
    parts = []
    for extra in flagged:
        name = extra.split('=', 1)[0]
        # issue 22: `--lr` suggests `--optimizer.lr` (see closest_dotted)
        close = closest_dotted(name, options)
        parts.append(f'`{name}` (did you mean `{close}`?)' if close else f'`{name}`')
    return f'unrecognized option{"s" if len(parts) > 1 else ""}: {", ".join(parts)}'


def parse_config(config_or_class: Any, argv: Sequence[str] | None = None,
                 parser: argparse.ArgumentParser | None = None) -> Any:
    """Fill a config from its defaults, then ``--config FILE``, then command-line options.

    The layers apply in that order, the last winning: the defaults of the
    class (or the current values of an instance), each ``--config`` file in
    turn (JSON, or YAML with PyYAML installed), then the field options of
    :func:`register_config_arguments`, wherever they stand on the command
    line.  Any error (an unknown option, with the closest field option
    suggested; a bad value; a bad file; a dataclass field without default that
    no layer gave) goes to ``parser.error``, which prints usage and exits with
    code 2.

    Args:
        config_or_class: A :class:`Config` subclass or dataclass (a new
            instance is returned), or an instance (updated in place only when
            parsing succeeds, and returned).
        argv: The arguments, ``sys.argv[1:]`` by default.
        parser: The parser to add the options to, for your own ``prog`` or
            description; a new one by default.  Options of your own are
            parsed but not returned: to read them, use
            :func:`register_config_arguments` and ``parse_args`` instead.

    Returns:
        The filled config.

    Raises:
        TypeError: `config_or_class` is not a config class or instance, or
            `parser` is not an ArgumentParser.
        SystemExit: Parsing failed (code 2), or ``--help`` was given (code 0).

    Example:

        >>> from tfsnippet.experiment import Config, parse_config
        >>> class RunConfig(Config):
        ...     max_epoch = 10
        ...     lr = 0.1
        >>> parse_config(RunConfig, ['--lr', '0.5'])
        RunConfig(max_epoch=10, lr=0.5)
    """
    if _is_config_class(config_or_class):
        cls, instance = config_or_class, None
        seed = _defaults(cls)
    elif _is_config_instance(config_or_class):
        cls, instance = type(config_or_class), config_or_class
        seed = config_to_dict(instance)
    else:
        raise TypeError('`config_or_class` must be a Config subclass, a dataclass, or an '
                        f'instance of one, got {_brief(config_or_class)}')
    if parser is None:
        parser = argparse.ArgumentParser(description=_class_summary(cls), allow_abbrev=False)
    elif not isinstance(parser, argparse.ArgumentParser):
        raise TypeError(f'`parser` must be an argparse.ArgumentParser or None, '
                        f'got {_brief(parser)}')
    sink = _DictSink(copy.deepcopy(seed))
    options = _add_arguments(cls, parser, (), sink, seed, '--config')
    _, extras = parser.parse_known_args(None if argv is None else list(argv))
    if extras:
        parser.error(_unrecognized_message(extras, options))
    missing = _missing_paths(cls, sink.values, '')
    if missing:
        parser.error(f'no value for {", ".join("--" + p for p in missing)}: give '
                     f'{"it" if len(missing) == 1 else "them"} on the command line or in a '
                     '--config file')
    if instance is None:
        return _build(cls, sink.values)
    for path, value in _leaves(sink.values):
        _InstanceSink(instance).set(path, value)
    return instance
