"""Configs on the command line: an option per field, config files, misspelt options.

The top layer of :mod:`tfsnippet.experiment.config`: :func:`register_config_arguments`
adds the options of a config to an ``argparse`` parser, and :func:`parse_config`
parses them in one call.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import inspect
import re
from collections.abc import Mapping, Sequence
from typing import Any, Union

from ...utils.text import closest_dotted, short_repr
from .fields import MISSING, FieldSpec, parse_text
from .files import load_config_file
from .schema import (build, config_to_dict, defaults_of, is_config_class, is_config_instance,
                     leaves, missing_paths, normalize, schema_of, unknown_listing)

__all__ = ['register_config_arguments', 'parse_config']

_NEGATIVE_NUMBER = re.compile(r'^-\d+$|^-\d*\.\d+$')


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

    def __init__(self, field: FieldSpec) -> None:
        self._field = field

    def __call__(self, text: str) -> Any:
        try:
            return parse_text(self._field, text)
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
            overlay = normalize(self._class, data, '', unknown, 'the file')
        except (TypeError, ValueError) as e:
            raise argparse.ArgumentError(self, f'{values}: {e}') from e
        if unknown:
            raise argparse.ArgumentError(
                self, f'{values}: {self._class.__name__} has no field '
                      f'{unknown_listing(self._class, unknown)}')
        for path, value in leaves(overlay):
            if not hasattr(namespace, '.'.join(self._prefix + path)):
                self._sink.set(path, value)
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])


def class_summary(cls: type) -> str | None:
    """The first paragraph of the docstring `cls` itself has (not inherited, not generated)."""
    doc = cls.__dict__.get('__doc__')
    if not doc or (dataclasses.is_dataclass(cls) and doc.startswith(f'{cls.__name__}(')):
        return None
    return inspect.cleandoc(doc).split('\n\n')[0]


def _help_text(field: FieldSpec, shown: Any) -> str:
    default = 'required' if shown is MISSING else f'default: {shown!r}'
    text = f'({field.type_name()}; {default})'
    if field.description:
        text = f'{field.description} {text}'
    return text.replace('%', '%%')


def _metavar(field: FieldSpec) -> str:
    assert field.kind is not None
    if field.choices is not None:
        return '{' + ','.join(str(c) for c in field.choices) + '}'
    name = field.kind.base.__name__.upper()
    return f'{name},...' if field.kind.is_list else name


def _check_prefix(prefix: Any) -> tuple[str, ...]:
    if prefix is None:
        return ()
    if not isinstance(prefix, str):
        raise TypeError(f'`prefix` must be a str or None, got {short_repr(prefix)}')
    if not re.fullmatch(r'[A-Za-z_][\w-]*(\.[A-Za-z_][\w-]*)*', prefix):
        raise ValueError('`prefix` must be dotted names such as "model" or "exp.model", '
                         f'got {short_repr(prefix)}')
    return tuple(prefix.split('.'))


def _add_arguments(cls: type, parser: argparse.ArgumentParser, prefix: tuple[str, ...],
                   sink: _Sink, shown: Mapping[str, Any],
                   file_option: str | None) -> list[str]:
    """Add an option per leaf field of `cls` (and `file_option`); return the option strings."""
    options: list[str] = []

    def visit(cls: type, path: tuple[str, ...], shown: Mapping[str, Any],
              container: Any) -> None:
        for name, field in schema_of(cls).items():
            sub = path + (name,)
            dest = '.'.join(prefix + sub)
            if field.section is not None:
                group = parser.add_argument_group(dest, class_summary(field.section))
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
                help=_help_text(field, shown.get(name, MISSING)), sink=sink, path=sub,
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
    if not is_config_instance(config):
        hint = '; pass an instance, or use parse_config() for a class' \
            if is_config_class(config) else ''
        raise TypeError(f'`config` must be a Config or dataclass instance, '
                        f'got {short_repr(config)}{hint}')
    if not isinstance(parser, argparse.ArgumentParser):
        raise TypeError(f'`parser` must be an argparse.ArgumentParser, got {short_repr(parser)}')
    _check_file_option(file_option)
    _add_arguments(type(config), parser, _check_prefix(prefix), _InstanceSink(config),
                   config_to_dict(config), file_option)


def _check_file_option(file_option: Any) -> None:
    if file_option is None:
        return
    if not isinstance(file_option, str):
        raise TypeError(f'`file_option` must be a str or None, got {short_repr(file_option)}')
    if not re.fullmatch(r'--[A-Za-z][\w.-]*', file_option):
        raise ValueError(f'`file_option` must be a long option such as "--config", '
                         f'got {short_repr(file_option)}')


def _unrecognized_message(extras: Sequence[str], options: Sequence[str]) -> str:
    flagged = [e for e in extras if e.startswith('-') and e not in ('-', '--')
               and not _NEGATIVE_NUMBER.match(e)]
    if not flagged:
        return f'unrecognized arguments: {" ".join(extras)}'
    parts = []
    for extra in flagged:
        name = extra.split('=', 1)[0]
        close = closest_dotted(name, options)   # `--lr` suggests `--optimizer.lr`
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
    if is_config_class(config_or_class):
        cls, instance = config_or_class, None
        seed = defaults_of(cls)
    elif is_config_instance(config_or_class):
        cls, instance = type(config_or_class), config_or_class
        seed = config_to_dict(instance)
    else:
        raise TypeError('`config_or_class` must be a Config subclass, a dataclass, or an '
                        f'instance of one, got {short_repr(config_or_class)}')
    if parser is None:
        parser = argparse.ArgumentParser(description=class_summary(cls), allow_abbrev=False)
    elif not isinstance(parser, argparse.ArgumentParser):
        raise TypeError(f'`parser` must be an argparse.ArgumentParser or None, '
                        f'got {short_repr(parser)}')
    sink = _DictSink(copy.deepcopy(seed))
    options = _add_arguments(cls, parser, (), sink, seed, '--config')
    _, extras = parser.parse_known_args(None if argv is None else list(argv))
    if extras:
        parser.error(_unrecognized_message(extras, options))
    missing = missing_paths(cls, sink.values, '')
    if missing:
        parser.error(f'no value for {", ".join("--" + p for p in missing)}: give '
                     f'{"it" if len(missing) == 1 else "them"} on the command line or in a '
                     '--config file')
    if instance is None:
        return build(cls, sink.values)
    for path, value in leaves(sink.values):
        _InstanceSink(instance).set(path, value)
    return instance
