"""Experiment tooling: typed configs, runs and their results, a results store, an MLflow mirror."""

from .config import (Config, ConfigField, config_from_dict, config_to_dict, get_config_defaults,
                     load_config_file, parse_config, register_config_arguments)
from .experiment import Experiment, RunResults, current_experiment
from .mlflow_mirror import MlflowMirror
from .sinks import RunSink, StoreSink
from .store import EpochRow, ResultsStore, RunRow

__all__ = [
    'Config', 'ConfigField', 'config_from_dict', 'config_to_dict', 'get_config_defaults',
    'load_config_file', 'parse_config', 'register_config_arguments', 'ResultsStore', 'RunRow',
    'EpochRow', 'Experiment', 'RunResults', 'current_experiment', 'RunSink', 'StoreSink',
    'SinkError', 'MlflowMirror',
]


def __getattr__(name: str) -> object:
    # SinkError lives with the sinks of the scaffold (imported when first asked for)
    if name == 'SinkError':
        from ..scaffold.metrics.sinks import SinkError
        return SinkError
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
