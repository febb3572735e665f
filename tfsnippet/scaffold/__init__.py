"""The training loop and what it is made of: events, metric logs, early stopping,
checkpoints, TensorBoard summaries and variable tables."""

from .checkpoint import CheckpointError, CheckpointSavableObject, Checkpointer, CheckpointSaver
from .component import LoopComponent
from .early_stopping import EarlyStopping
from .event_keys import EventKeys
from .logging_ import DefaultMetricFormatter, MetricFormatter, MetricLogger
from .scheduled_var import AnnealingVariable, ScheduledVariable
from .summaries import SummaryLogger, SummaryWriter
from .summary_table import summarize_variables
from .train_loop_ import TrainLoop

__all__ = ['CheckpointError', 'CheckpointSavableObject', 'Checkpointer', 'CheckpointSaver',
           'LoopComponent', 'EarlyStopping', 'EventKeys', 'DefaultMetricFormatter',
           'MetricFormatter', 'MetricLogger', 'AnnealingVariable', 'ScheduledVariable', 'SummaryLogger', 'SummaryWriter',
           'summarize_variables', 'TrainLoop']
