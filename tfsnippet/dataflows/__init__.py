"""Mini-batch data flows: fast, reproducible and resumable (pure numpy, no TensorFlow)."""

from .array_flow import ArrayFlow, SeqFlow
from .base import DataFlow, ExtraInfoDataFlow
from .data_mappers import DataMapper, SlidingWindow
from .mapper_flow import GatherFlow, IteratorFactoryFlow, MapperFlow
from .multi_flow import MultiTaskFlow
from .sharding import ShardedFlow, replica_slice, shard_flow, split_batch
from .threading_flow import ThreadingFlow

__all__ = ['ArrayFlow', 'SeqFlow', 'DataFlow', 'ExtraInfoDataFlow', 'DataMapper',
           'SlidingWindow', 'GatherFlow', 'IteratorFactoryFlow', 'MapperFlow', 'ThreadingFlow',
           'ShardedFlow', 'shard_flow', 'split_batch', 'replica_slice', 'MultiTaskFlow']
