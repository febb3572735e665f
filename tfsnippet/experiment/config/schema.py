"""Config classes: :class:`Config`, :class:`ConfigField`, and configs to and from dicts.

The middle layer of :mod:`tfsnippet.experiment.config`: it reads the fields
of a :class:`Config` subclass or a dataclass (their schema), validates
nested dicts against it and builds config instances.  The command line
(:mod:`.cli`) and config files (:mod:`.files`) build on it.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import types
import typing
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeVar, Union

from ...utils.text import closest_dotted, short_repr
from .fields import (ARTICLE, MISSING, SCALAR_TYPES, SUPPORTED_TYPES, FieldKind, FieldSpec,
                     as_scalar, check_value, common_base, join_path, scalar_base)

__all__ = [
    'Config', 'ConfigField', 'config_from_dict', 'config_to_dict', 'get_config_defaults',
    'is_config_class', 'is_config_instance', 'field_from_hint', 'schema_of', 'defaults_of',
    'all_paths', 'missing_paths', 'unknown_listing', 'normalize', 'merge', 'leaves', 'build',
]

_T = TypeVar('_T')
_ConfigT = TypeVar('_ConfigT', bound='Config')

def is_config_class(obj: Any) -> bool:
    return isinstance(obj, type) and (issubclass(obj, Config) or dataclasses.is_dataclass(obj))


def is_config_instance(obj: Any) -> bool:
    return isinstance(obj, Config) or (
        dataclasses.is_dataclass(obj) and not isinstance(obj, type))


def field_from_hint(name: str, hint: Any, what: str) -> FieldSpec:
    """Translate the type hint `hint` of field `name` into a field spec (no default yet)."""
    nullable = False
    given = hint
    origin = typing.get_origin(hint)
    if origin is Union or origin is types.UnionType:
        args = typing.get_args(hint)
        rest = [a for a in args if a is not type(None)]
        nullable = len(rest) < len(args)
        if len(rest) != 1:
            raise TypeError(f'{what} must be {SUPPORTED_TYPES}, got {short_repr(given)}')
        hint = rest[0]
        origin = typing.get_origin(hint)
    if origin is Literal:
        choices = typing.get_args(hint)
        base = common_base(choices)
        if base is not None and base is not float:
            return FieldSpec(name, kind=FieldKind(base), nullable=nullable, choices=tuple(choices))
    elif origin is list:
        args = typing.get_args(hint)
        if len(args) == 1 and args[0] in SCALAR_TYPES:
            return FieldSpec(name, kind=FieldKind(args[0], is_list=True), nullable=nullable)
    elif hint in SCALAR_TYPES:
        return FieldSpec(name, kind=FieldKind(hint), nullable=nullable)
    elif is_config_class(hint) and not nullable:
        return FieldSpec(name, section=hint)
    raise TypeError(f'{what} must be {SUPPORTED_TYPES}, got {short_repr(given)}')


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
        spec = field_from_hint('', type, '`type`')
        if spec.section is not None:
            raise TypeError('`type` must not be a config class: put a nested section on the '
                            f'class directly, not in a ConfigField (got {short_repr(type)})')
        assert spec.kind is not None
        if description is not None and not isinstance(description, str):
            raise TypeError(f'`description` must be a str or None, got {short_repr(description)}')
        nullable = bool(nullable) or spec.nullable
        if choices is not None:
            if spec.choices is not None:
                raise ValueError('`choices` must not be given when `type` is a Literal, '
                                 f'which already lists them: got {short_repr(choices)}')
            if spec.kind.is_list:
                raise TypeError(f'`choices` only applies to scalar types, got type '
                                f'{spec.kind} with choices {short_repr(choices)}')
            if isinstance(choices, (str, bytes)) or not isinstance(choices, Iterable):
                raise TypeError(f'`choices` must be a list of values, got {short_repr(choices)}')
            checked = []
            for choice in choices:
                value = as_scalar(spec.kind.base, choice)
                if value is MISSING:
                    raise TypeError(f'every item of `choices` must be '
                                    f'{ARTICLE[spec.kind.base]}, got {short_repr(choice)}')
                checked.append(value)
            if not checked:
                raise ValueError('`choices` must not be empty, got an empty list')
            spec = dataclasses.replace(spec, choices=tuple(checked))
        spec = dataclasses.replace(spec, nullable=nullable, description=description)
        if default is None and not nullable:
            raise ValueError('`default` is None, but `nullable` is False: give a default '
                             'value or pass `nullable=True`')
        self._spec = dataclasses.replace(spec, default=check_value(spec, default, 'default'))
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

    def _field(self, name: str) -> FieldSpec:
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
    values = defaults_of(section) if default is MISSING else default
    missing = missing_paths(section, values, '')
    if missing:
        raise TypeError(f'section `{where}` needs a default for every field, but '
                        f'{section.__name__} has none for {_listing(missing)}')


def _config_class_fields(cls: type[Config]) -> dict[str, FieldSpec]:
    """The fields of Config subclass `cls`, in definition order, bases first."""
    fields: dict[str, FieldSpec] = {}
    for base in reversed(cls.__bases__):
        if issubclass(base, Config):
            fields.update(base._config_fields_)
    annotations: dict[str, Any] = cls.__dict__.get('__annotations__', {})
    hints = _type_hints(cls) if annotations else {}
    names = list(cls.__dict__) + [n for n in annotations if n not in cls.__dict__]
    for name in names:
        if name.startswith('_'):
            continue
        value = cls.__dict__.get(name, MISSING)
        where = f'{cls.__name__}.{name}'
        if isinstance(value, ConfigField):
            field = value._field(name)
        elif name in annotations:
            if typing.get_origin(hints[name]) is ClassVar:
                continue
            field = field_from_hint(name, hints[name], f'the type of `{where}`')
            field = _with_default(field, value, where)
        elif is_config_class(value) or is_config_instance(value):
            section = value if isinstance(value, type) else type(value)
            field = _with_default(FieldSpec(name, section=section),
                                  MISSING if isinstance(value, type) else value, where)
        elif callable(value) or hasattr(type(value), '__get__'):
            continue   # methods, properties, helper classes: not fields
        elif name in fields:
            inherited = fields[name]
            if inherited.section is not None:
                raise TypeError(f'`{where}` must be a {inherited.section.__name__} class or '
                                f'instance (it overrides a section), got {short_repr(value)}')
            field = dataclasses.replace(inherited, default=check_value(inherited, value, where))
        else:
            field = _infer_field(name, value, where)
        if name in _RESERVED:
            raise TypeError(f'`{where}` cannot be a field: `{name}` is a method of Config; '
                            'rename the field')
        fields[name] = field
    return fields


def _with_default(field: FieldSpec, value: Any, where: str, complete: bool = True) -> FieldSpec:
    """`field` with default `value` (validated).

    A section may leave out its default (its class's defaults then apply), and
    with `complete` those defaults must cover every field, as a Config builds
    its sections when it is created.
    """
    if field.section is not None:
        if value is MISSING or value is field.section:
            default = MISSING
        elif isinstance(value, field.section):
            default = config_to_dict(value)
        else:
            raise TypeError(f'`{where}` must default to an instance of '
                            f'{field.section.__name__}, got {short_repr(value)}')
        if complete:
            _check_section_complete(field.section, default, where)
        return dataclasses.replace(field, default=default)
    if value is MISSING:
        raise TypeError(f'`{where}` needs a default value: every field of a Config has one '
                        '(use a dataclass for fields that must be given)')
    return dataclasses.replace(field, default=check_value(field, value, where))


def _infer_field(name: str, value: Any, where: str) -> FieldSpec:
    """A leaf field whose type is read off its plain default `value`."""
    base = scalar_base(value)
    if base is not None:
        return FieldSpec(name, kind=FieldKind(base), default=as_scalar(base, value))
    if isinstance(value, (list, tuple)):
        item_base = common_base(value)
        if item_base is not None:
            field = FieldSpec(name, kind=FieldKind(item_base, is_list=True))
            return dataclasses.replace(field, default=check_value(field, value, where))
        raise TypeError(f'cannot infer the item type of `{where}` from {short_repr(value)}: '
                        'declare it as ConfigField(list[int], default=...) or similar')
    if value is None:
        raise TypeError(f'cannot infer the type of `{where}` from its default None: declare it '
                        'as ConfigField(<type>, nullable=True)')
    raise TypeError(f'`{where}` must default to a bool, int, float, str or a list of one of '
                    f'those, got {short_repr(value)}')


@functools.cache
def _dataclass_fields(cls: Any) -> dict[str, FieldSpec]:
    """The fields of dataclass `cls` (those its ``__init__`` takes), from its type hints."""
    hints = _type_hints(cls)
    fields: dict[str, FieldSpec] = {}
    for item in dataclasses.fields(cls):
        if not item.init:
            continue
        where = f'{cls.__name__}.{item.name}'
        field = field_from_hint(item.name, hints[item.name], f'the type of `{where}`')
        description = item.metadata.get('description', item.metadata.get('help'))
        field = dataclasses.replace(field, description=description)
        if item.default is not dataclasses.MISSING:
            default = item.default
        elif item.default_factory is not dataclasses.MISSING:
            default = item.default_factory()
        else:
            default = MISSING
        if field.section is not None or default is not MISSING:
            field = _with_default(field, default, where, complete=False)
        fields[item.name] = field
    return fields


def schema_of(cls: Any) -> dict[str, FieldSpec]:
    if issubclass(cls, Config):
        return cls._config_fields_
    return _dataclass_fields(cls)


# ------------------------------------------------------------ nested value dicts
def defaults_of(cls: type) -> dict[str, Any]:
    """The nested dict of default values of config class `cls` (fields without one left out)."""
    out: dict[str, Any] = {}
    for name, field in schema_of(cls).items():
        if field.section is not None:
            out[name] = (defaults_of(field.section) if field.default is MISSING
                         else copy.deepcopy(field.default))
        elif field.default is not MISSING:
            out[name] = copy.deepcopy(field.default)
    return out


def all_paths(cls: type, path: str = '') -> list[str]:
    out = []
    for name, field in schema_of(cls).items():
        out.append(join_path(path, name))
        if field.section is not None:
            out.extend(all_paths(field.section, join_path(path, name)))
    return out


def missing_paths(cls: type, values: Mapping[str, Any], path: str) -> list[str]:
    """The paths of the fields (or whole sections) of `cls` that `values` leaves out."""
    out = []
    for name, field in schema_of(cls).items():
        if name not in values:
            out.append(join_path(path, name))
        elif field.section is not None:
            out.extend(missing_paths(field.section, values[name], join_path(path, name)))
    return out


def _listing(paths: Sequence[str]) -> str:
    return ', '.join(f'`{p}`' for p in paths)


def unknown_listing(cls: type, unknown: Sequence[str], path: str = '') -> str:
    """The `unknown` paths, each with the closest field of `cls` (at `path`) when one is close."""
    candidates = [join_path(path, p) for p in all_paths(cls)]
    parts = []
    for path in unknown:
        close = closest_dotted(path, candidates)   # a field of another section first
        parts.append(f'`{path}` (did you mean `{close}`?)' if close else f'`{path}`')
    return ', '.join(parts)


def normalize(cls: type, data: Any, path: str, unknown: list[str], root: str) -> dict[str, Any]:
    """Validate the (partial) nested mapping `data` against `cls`.

    Returns the validated values; appends the paths of keys `cls` does not
    have to `unknown`.

    Raises:
        TypeError: `data` or a section of it is not a mapping, or a value has
            the wrong type.
        ValueError: A value is not one of its field's choices.
    """
    if isinstance(data, cls) and is_config_instance(data):
        data = config_to_dict(data)
    if not isinstance(data, Mapping):
        what = f'`{path}`' if path else root
        raise TypeError(f'{what} must be a mapping of field names to values, '
                        f'got {short_repr(data)}')
    schema = schema_of(cls)
    out: dict[str, Any] = {}
    for key, value in data.items():
        sub = join_path(path, str(key))
        field = schema.get(key) if isinstance(key, str) else None
        if field is None:
            unknown.append(sub)
        elif field.section is not None:
            out[key] = normalize(field.section, value, sub, unknown, root)
        else:
            out[key] = check_value(field, value, sub)
    return out


def merge(base: Mapping[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overlay.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def leaves(values: Mapping[str, Any],
           path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    for key, value in values.items():
        if isinstance(value, dict):
            yield from leaves(value, path + (key,))
        else:
            yield path + (key,), value


def build(cls: type, values: Mapping[str, Any]) -> Any:
    """An instance of `cls` from the complete, validated nested dict `values`."""
    kwargs = {}
    for name, field in schema_of(cls).items():
        value = values[name]
        kwargs[name] = build(field.section, value) if field.section is not None else value
    return cls(**kwargs)


def _section_value(field: FieldSpec, value: Any, path: str) -> Any:
    """The instance to store in section `field` when `value` is assigned to it."""
    assert field.section is not None
    if isinstance(value, field.section):
        return value
    if isinstance(value, Mapping):
        unknown: list[str] = []
        overlay = normalize(field.section, value, path, unknown, f'`{path}`')
        if unknown:
            raise ValueError(f'{field.section.__name__} has no field '
                             f'{unknown_listing(field.section, unknown, path)}')
        base = defaults_of(field.section) if field.default is MISSING else field.default
        return build(field.section, merge(base, overlay))
    raise TypeError(f'`{path}` must be an instance of {field.section.__name__} or a mapping, '
                    f'got {short_repr(value)}')


def _adopt(config: Any, path: str) -> None:
    """Tell Config `config` (and its sections) where it sits, for error messages."""
    if isinstance(config, Config):
        object.__setattr__(config, '_config_path_', path)
        for name, field in config._config_fields_.items():
            if field.section is not None:
                _adopt(config.__dict__[name], join_path(path, name))


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

    _config_fields_: ClassVar[dict[str, FieldSpec]] = {}
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
                            f'{unknown_listing(type(self), unknown)}')
        for name, field in fields.items():
            if name in values:
                setattr(self, name, values[name])
            elif field.section is not None:
                section = build(field.section, defaults_of(field.section)
                                if field.default is MISSING else field.default)
                _adopt(section, name)
                object.__setattr__(self, name, section)
            else:
                object.__setattr__(self, name, copy.deepcopy(field.default))

    def __setattr__(self, name: str, value: Any) -> None:
        if name.startswith('_'):
            object.__setattr__(self, name, value)
            return
        field = self._config_fields_.get(name)
        path = join_path(self._config_path_, name)
        if field is None:
            raise AttributeError(f'{type(self).__name__} has no field '
                                 f'{unknown_listing(type(self), [name])}')
        if field.section is not None:
            value = _section_value(field, value, path)
            _adopt(value, path)
        else:
            value = check_value(field, value, path)
        object.__setattr__(self, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._config_fields_:
            raise AttributeError(f'`{join_path(self._config_path_, name)}` is a config field and '
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
    if not is_config_instance(config):
        raise TypeError(f'`config` must be a Config or dataclass instance, '
                        f'got {short_repr(config)}')
    out: dict[str, Any] = {}
    for name, field in schema_of(type(config)).items():
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
    if not is_config_class(cls):
        raise TypeError(f'`cls` must be a Config subclass or a dataclass, got {short_repr(cls)}')
    unknown: list[str] = []
    values = normalize(cls, data, '', unknown, '`data`')
    if strict:
        missing = missing_paths(cls, values, '')
        if unknown or missing:
            parts = []
            if unknown:
                parts.append(f'unknown key{"s" if len(unknown) > 1 else ""} '
                             f'{unknown_listing(cls, unknown)}')
            if missing:
                parts.append(f'missing key{"s" if len(missing) > 1 else ""} {_listing(missing)}')
            raise ValueError(f'`data` does not match {cls.__name__}: {"; ".join(parts)}. Pass '
                             '`strict=False` to drop unknown keys and use defaults for missing '
                             'ones.')
    values = merge(defaults_of(cls), values)
    missing = missing_paths(cls, values, '')
    if missing:
        raise ValueError(f'`data` has no value for {_listing(missing)} of {cls.__name__}, '
                         'which has no default')
    return typing.cast(_T, build(cls, values))


def get_config_defaults(config: Any) -> dict[str, Any]:
    """The default values of a config class (or of an instance's class) as a nested dict.

    Fields without a default (possible in dataclasses) are left out.

    Raises:
        TypeError: `config` is neither a config class nor a config instance.
    """
    if is_config_instance(config):
        config = type(config)
    if not is_config_class(config):
        raise TypeError('`config` must be a Config subclass, a dataclass, or an instance of '
                        f'one, got {short_repr(config)}')
    return defaults_of(config)
