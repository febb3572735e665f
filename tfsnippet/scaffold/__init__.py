"""The training loop and what it is made of: events, metric logs, variable tables."""

from .event_keys import EventKeys
from .logging_ import DefaultMetricFormatter, MetricFormatter, MetricLogger
from .summary_table import summarize_variables
from .train_loop_ import LoopComponent, TrainLoop

__all__ = ['EventKeys', 'DefaultMetricFormatter', 'MetricFormatter', 'MetricLogger',
           'summarize_variables', 'LoopComponent', 'TrainLoop']
