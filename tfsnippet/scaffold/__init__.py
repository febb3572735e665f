"""The training loop and what it is made of: events, metric logs, early stopping,
checkpoints, TensorBoard summaries and variable tables."""

from .checkpoint import (CheckpointError, CheckpointMismatchError, CheckpointSavableObject,
                         CheckpointSaver, CheckpointStore, CheckpointWriteError, KeepBest,
                         KeepEveryNth, KeepLatest, SaveAtEnd, SaveEvery, UntrustedCheckpointError,
                         WarmStartReport, convert_legacy_checkpoints, export_weights,
                         warm_start)
from .components import (Checkpointer, EarlyStopping, ExportBest, LoopComponent, LossGuard,
                         LossGuardError, MultiTaskMetrics, Preemption, ProgressBar,
                         ReduceOnPlateau, SummaryLogger, TrainingPreempted, WarmStart)
from .components.keras_callbacks import KerasCallbacks
from .components import LearningRateMonitor, MixedPrecision, Profiler, WeightAverage
from .components import LearningRateFinder
from .components.run_recorder import MetricRecorder
from .event_keys import EventKeys
from .loop import TrainLoop
from .metrics import DefaultMetricFormatter, MetricFormatter, MetricLogger
from .metrics.sinks import MetricSink, MultiSink, chief_only
from .scheduled_var import AnnealingVariable, ScheduledVariable
from .summary_collector import (GraphKeys, SummaryCollector, add_histogram, add_summary,
                                default_summary_collector, histogram_summary, write_histogram)
from .summary_table import summarize_variables
from .summary_writer import SummaryWriter

__all__ = ['CheckpointError', 'CheckpointMismatchError', 'CheckpointSavableObject', 'Checkpointer', 'CheckpointSaver',
           'LoopComponent', 'EarlyStopping', 'EventKeys', 'DefaultMetricFormatter',
           'MetricFormatter', 'MetricLogger', 'AnnealingVariable', 'ScheduledVariable',
           'SummaryLogger', 'SummaryWriter', 'summarize_variables', 'TrainLoop', 'LossGuard',
           'LossGuardError', 'ProgressBar', 'ReduceOnPlateau', 'GraphKeys', 'SummaryCollector',
           'add_histogram', 'add_summary', 'default_summary_collector', 'histogram_summary',
           'write_histogram', 'CheckpointStore', 'WarmStartReport', 'warm_start', 'WarmStart',
           'export_weights', 'CheckpointWriteError', 'KeepBest', 'KeepEveryNth', 'KeepLatest',
           'SaveAtEnd', 'SaveEvery', 'UntrustedCheckpointError', 'convert_legacy_checkpoints',
           'ExportBest', 'Preemption', 'TrainingPreempted', 'MetricRecorder', 'MetricSink',
           'MultiSink', 'chief_only', 'MultiTaskMetrics',
           'MixedPrecision', 'Profiler', 'LearningRateMonitor', 'WeightAverage',
           'LearningRateFinder']
__all__ += ['KerasCallbacks']

from .components import (QuickCheck, SanityCheck, SuspendableWrites, Throughput, TimeBudget,
                         count_flops)

__all__ += ['QuickCheck', 'SanityCheck', 'SuspendableWrites', 'Throughput', 'TimeBudget',
            'count_flops']
