"""tfsnippet: a training-loop toolkit for TensorFlow 2.x, in graph and eager style.

``import tfsnippet as spt``; then ``with spt.TrainLoop(...) as loop:``.

The package loads its parts on first use: ``import tfsnippet`` alone does
not import TensorFlow, so that ``python -m tfsnippet.launch`` and
``python -m tfsnippet.results`` start at once; ``spt.TrainLoop`` (any
name below) imports what it needs.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = '0.3.0.dev0'

#: The subpackages, reachable as ``spt.<name>``.
_SUBPACKAGES = ('backend', 'dataflows', 'distributed', 'experiment', 'results', 'scaffold',
                'search', 'tfops', 'trainer', 'utils')

#: ``spt.<name>`` -> the subpackage that defines it.
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(['DataFlow', 'DataMapper', 'SlidingWindow'], 'dataflows'),
    **dict.fromkeys(['Config', 'ConfigField', 'config_from_dict', 'config_to_dict',
                     'get_config_defaults', 'load_config_file', 'parse_config',
                     'register_config_arguments', 'ResultsStore', 'RunRow', 'EpochRow',
                     'Experiment', 'RunSink', 'MlflowMirror', 'RunResults', 'StoreSink',
                     'SinkError', 'current_experiment'],
                    'experiment'),
    **dict.fromkeys(['CheckpointError', 'CheckpointMismatchError', 'CheckpointSavableObject',
                     'Checkpointer', 'CheckpointSaver', 'LoopComponent', 'EarlyStopping',
                     'EventKeys', 'DefaultMetricFormatter', 'MetricFormatter', 'MetricLogger',
                     'AnnealingVariable', 'ScheduledVariable', 'SummaryLogger', 'SummaryWriter',
                     'summarize_variables', 'TrainLoop', 'LossGuard', 'LossGuardError',
                     'ProgressBar', 'ReduceOnPlateau', 'GraphKeys', 'SummaryCollector',
                     'add_histogram', 'add_summary', 'default_summary_collector',
                     'histogram_summary', 'write_histogram', 'CheckpointStore',
                     'WarmStartReport', 'warm_start', 'WarmStart', 'export_weights',
                     'CheckpointWriteError', 'KeepBest', 'KeepEveryNth', 'KeepLatest',
                     'SaveAtEnd', 'SaveEvery', 'UntrustedCheckpointError',
                     'convert_legacy_checkpoints', 'ExportBest', 'Preemption',
                     'TrainingPreempted', 'MetricRecorder', 'MetricSink', 'MultiSink',
                     'chief_only', 'MultiTaskMetrics', 'MixedPrecision', 'Profiler',
                     'LearningRateMonitor', 'WeightAverage', 'LearningRateFinder'],
                    'scaffold'),
    'seed_everything': 'tfops',
    'KerasCallbacks': 'scaffold',
    **dict.fromkeys(['QuickCheck', 'SanityCheck', 'SuspendableWrites', 'Throughput',
                     'TimeBudget', 'count_flops'], 'scaffold'),
    'settings': 'settings_',
    'Search': 'search',   # imports Optuna (`pip install "tfsnippet[optuna]"`) when first used
    **dict.fromkeys(['BaseTrainer', 'AnnealingScalar', 'DynamicValue', 'Evaluator',
                     'Validator', 'auto_batch_weight', 'merge_feed_dict', 'resolve_feed_dict',
                     'GradientAccumulator', 'clip_gradients', 'LossTrainer', 'Trainer'],
                    'trainer'),
}

__all__ = ['__version__', *_SUBPACKAGES, *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _SUBPACKAGES:
        return importlib.import_module(f'.{name}', __name__)
    package = _EXPORTS.get(name)
    if package is None:
        raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(f'.{package}', __name__), name)
    globals()[name] = value   # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # what type checkers and IDEs see
    from . import (backend, dataflows, distributed, experiment, results,  # noqa: F401
                   scaffold, search, tfops, trainer, utils)
    from .dataflows import DataFlow, DataMapper, SlidingWindow  # noqa: F401
    from .experiment import *  # noqa: F401,F403
    from .scaffold import *  # noqa: F401,F403
    from .search import Search  # noqa: F401
    from .tfops import seed_everything  # noqa: F401
    from .settings_ import settings  # noqa: F401
    from .trainer import *  # noqa: F401,F403
