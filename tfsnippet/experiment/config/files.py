"""Config files: reading a JSON or YAML file into a nested dict of values."""

from __future__ import annotations

import importlib
import json
import os
from typing import Any

from ...utils.text import short_repr

__all__ = ['load_config_file']


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
        raise TypeError(f'`path` must be a str or os.PathLike, got {short_repr(path)}')
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
                        f'values, got {short_repr(data)}')
    return data
