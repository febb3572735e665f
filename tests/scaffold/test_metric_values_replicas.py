"""Values the backend keeps per replica are read as numbers where one number is needed.

The summary writer (and every reader of a single value) goes through
``to_float``; under a strategy the metric book holds ``ReplicaValue``\\ s,
which carry a ``mean`` flag that ``np.mean`` would mistake for the method.
"""

from __future__ import annotations

import numpy as np
import pytest
import tensorflow as tf

from tfsnippet.backend import ReplicaValue
from tfsnippet.scaffold.metrics.values import to_float


@pytest.mark.parametrize('mean, factor, expected', [
    (True, 1., 2.),      # the mean of the replicas
    (False, 1., 4.),     # their sum
    (False, 2., 8.),     # a worker's share of a sum over two workers
])
def test_to_float_reduces_a_replica_value(mean, factor, expected):
    value = ReplicaValue((tf.constant(1.), tf.constant(3.)), mean, factor)
    assert to_float('loss', value) == expected


def test_to_float_takes_the_mean_of_a_replica_value_of_vectors():
    value = ReplicaValue((np.array([1., 2.]), np.array([3., 6.])), True)
    assert to_float('loss', value) == 3.
