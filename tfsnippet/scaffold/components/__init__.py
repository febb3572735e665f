"""The loop's features, each a :class:`LoopComponent`: early stopping, checkpoints,
summaries, loss guard, reduce-on-plateau, the progress bar, mixed precision, the
learning-rate monitor and the profiler."""

from .base import LoopComponent
from .checkpointer import Checkpointer
from .early_stopping import EarlyStopping
from .export import ExportBest
from .keras_callbacks import KerasCallbacks
from .loss_guard import LossGuard, LossGuardError
from .lr_monitor import LearningRateMonitor
from .multitask import MultiTaskMetrics
from .mixed_precision import MixedPrecision
from .preemption import Preemption, TrainingPreempted
from .profiler import Profiler
from .progress_bar import ProgressBar
from .reduce_on_plateau import ReduceOnPlateau
from .run_recorder import RunRecorder
from .summaries import SummaryLogger
from .warm_start import WarmStart
from .weight_average import WeightAverage
from .lr_finder import LearningRateFinder

__all__ = ['LoopComponent', 'Checkpointer', 'EarlyStopping', 'LossGuard', 'LossGuardError',
           'ProgressBar', 'ReduceOnPlateau', 'RunRecorder', 'SummaryLogger', 'WarmStart',
           'ExportBest', 'Preemption', 'TrainingPreempted', 'MultiTaskMetrics',
           'MixedPrecision', 'Profiler', 'LearningRateMonitor']
__all__ += ['KerasCallbacks', 'WeightAverage', 'LearningRateFinder']

from .quick_check import QuickCheck, SanityCheck
from .suspend import SuspendableWrites
from .throughput import Throughput, count_flops
from .time_budget import TimeBudget

__all__ += ['QuickCheck', 'SanityCheck', 'SuspendableWrites', 'Throughput', 'count_flops',
            'TimeBudget']
