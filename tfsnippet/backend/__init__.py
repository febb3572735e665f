"""Backends of the training loop, chosen once when it is entered: ``backend_for(strategy)``."""

from __future__ import annotations

from .distributed import (DistributedBackend, PendingValue, RemoteMetricValue, ReplicaValue,
                          backend_for, is_distributed_value, per_replica_error,
                          replica_slice, to_host_values)
from .reduction import CrossWorkerReducer

__all__ = ['DistributedBackend', 'backend_for', 'PendingValue', 'ReplicaValue',
           'RemoteMetricValue', 'is_distributed_value', 'per_replica_error',
           'CrossWorkerReducer', 'to_host_values', 'replica_slice']
