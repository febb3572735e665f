"""Typed experiment configs, filled in layers from defaults, config files and the command line.

The package is layered: :mod:`.fields` (a field's type, checking and reading
its values), :mod:`.schema` (config classes, dicts of values), :mod:`.files`
(reading config files) and :mod:`.cli` (command-line options).  The public
names are all reachable from here.
"""

from .cli import parse_config, register_config_arguments
from .files import load_config_file
from .schema import (Config, ConfigField, all_paths, config_from_dict, config_to_dict,
                     get_config_defaults, is_config_class, is_config_instance)

__all__ = [
    'Config', 'ConfigField', 'config_from_dict', 'config_to_dict', 'get_config_defaults',
    'load_config_file', 'parse_config', 'register_config_arguments',
    'all_paths', 'is_config_class', 'is_config_instance',
]
