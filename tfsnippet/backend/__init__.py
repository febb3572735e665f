"""Backends of the training loop, chosen once when it is entered: ``resolve_backend(strategy)``.

:class:`Backend` is the protocol; :class:`LocalBackend` is the backend
without a strategy (the null object), :class:`DistributedBackend` that of a
``tf.distribute`` strategy.  :mod:`~tfsnippet.backend.values` holds the
kinds of metric values a backend keeps, :class:`Decisions` the named
decisions agreed across workers.
"""

from __future__ import annotations

from ..dataflows.sharding import replica_slice
from .base import Backend
from .decisions import Decisions
from .distributed import DistributedBackend, backend_for, resolve_backend
from .local import LocalBackend
from .reduction import AgreedLayout, CrossWorkerReducer
from .values import (PendingValue, RemoteMetricValue, ReplicaValue, is_distributed_value,
                     per_replica_error, to_host_values)

__all__ = ['Backend', 'LocalBackend', 'DistributedBackend', 'Decisions', 'backend_for',
           'resolve_backend', 'PendingValue', 'ReplicaValue', 'RemoteMetricValue',
           'is_distributed_value', 'per_replica_error', 'CrossWorkerReducer', 'AgreedLayout',
           'to_host_values', 'replica_slice']
