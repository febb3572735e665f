"""Tests of `StatisticsCollector` (API.md section 13.2)."""

import re

import numpy as np
import pytest

from tfsnippet.utils import StatisticsCollector


def test_new_collector_is_empty():
    c = StatisticsCollector()
    assert c.shape == ()
    assert not c.has_value
    assert c.counter == 0
    assert c.weight_sum == 0.
    assert float(c.mean) == 0.
    assert float(c.square) == 0.
    assert float(c.var) == 0.
    assert float(c.stddev) == 0.


def test_scalar_batch_statistics():
    # mean (2+1+7+6)/4 = 4, E[X^2] (4+1+49+36)/4 = 22.5, var 22.5 - 16 = 6.5
    c = StatisticsCollector()
    c.collect([2, 1, 7, 6])
    assert c.has_value
    assert c.counter == 4
    assert c.weight_sum == 4.
    np.testing.assert_allclose(c.mean, 4.)
    np.testing.assert_allclose(c.square, 22.5)
    np.testing.assert_allclose(c.var, 6.5)
    np.testing.assert_allclose(c.stddev, np.sqrt(6.5))


def test_scalars_one_by_one_equal_one_batch():
    c = StatisticsCollector()
    for v in [2, 1, 7, 6]:
        c.collect(v)
    assert c.counter == 4
    np.testing.assert_allclose(c.mean, 4.)
    np.testing.assert_allclose(c.square, 22.5)
    np.testing.assert_allclose(c.var, 6.5)


def test_weighted_statistics():
    # mean (2*1 + 1*3 + 7*6) / 10 = 4.7, E[X^2] (4*1 + 1*3 + 49*6) / 10 = 30.1
    c = StatisticsCollector()
    c.collect([2, 1, 7], weight=[1, 3, 6])
    assert c.counter == 3
    assert c.weight_sum == 10.
    np.testing.assert_allclose(c.mean, 4.7)
    np.testing.assert_allclose(c.square, 30.1)
    np.testing.assert_allclose(c.var, 30.1 - 4.7 ** 2)


def test_weighted_statistics_collected_in_pieces():
    c = StatisticsCollector()
    c.collect(2, weight=1)
    c.collect([1, 7], weight=[3, 6])
    assert c.counter == 3
    assert c.weight_sum == 10.
    np.testing.assert_allclose(c.mean, 4.7)
    np.testing.assert_allclose(c.square, 30.1)


def test_scalar_weight_broadcasts_over_the_batch():
    c = StatisticsCollector()
    c.collect([1, 3], weight=2.)
    c.collect([10], weight=1.)
    # mean (2 + 6 + 10) / 5 = 3.6
    assert c.weight_sum == 5.
    assert c.counter == 3
    np.testing.assert_allclose(c.mean, 3.6)


def test_empty_values_are_ignored():
    c = StatisticsCollector()
    c.collect([])
    assert not c.has_value
    c.collect([3.])
    c.collect(np.zeros([0]))
    assert c.counter == 1
    np.testing.assert_allclose(c.mean, 3.)


def test_empty_weight_counts_as_one():
    c = StatisticsCollector()
    c.collect([1., 5.], weight=[])
    assert c.weight_sum == 2.
    np.testing.assert_allclose(c.mean, 3.)


def test_var_is_clamped_at_zero_for_equal_values():
    # E[X^2] - E[X]^2 of equal values can round to a tiny negative number;
    # var must come out as 0 and stddev must not be NaN.
    c = StatisticsCollector()
    c.collect([1.8619300588033616] * 3, weight=[.3, .3, .4])
    assert float(c.var) == 0.
    assert float(c.stddev) == 0.


def test_vector_samples_statistics_are_element_wise():
    c = StatisticsCollector(shape=[3])
    assert c.shape == (3,)
    c.collect([[1., 2., 3.], [3., 6., 9.]])
    c.collect([5., 10., 15.])  # one more sample
    assert c.counter == 3
    np.testing.assert_allclose(c.mean, [3., 6., 9.])
    np.testing.assert_allclose(c.var, [8. / 3, 32. / 3, 24.])


def test_matrix_samples_with_two_batch_dimensions():
    c = StatisticsCollector(shape=(2,))
    values = np.arange(12, dtype=np.float64).reshape([3, 2, 2])  # batch (3, 2), sample (2,)
    c.collect(values)
    assert c.counter == 6
    np.testing.assert_allclose(c.mean, values.reshape([-1, 2]).mean(axis=0))
    np.testing.assert_allclose(c.var, values.reshape([-1, 2]).var(axis=0))


def test_shape_mismatch_raises():
    c = StatisticsCollector(shape=(3, 2))
    with pytest.raises(ValueError,
                       match='^' + re.escape('Shape mismatch: (3,) not ending with (3, 2)') + '$'):
        c.collect(np.zeros([3]))
    assert not c.has_value


def test_shape_mismatch_of_trailing_dimension_raises():
    c = StatisticsCollector(shape=(3,))
    with pytest.raises(ValueError,
                       match='^' + re.escape('Shape mismatch: (4, 2) not ending with (3,)') + '$'):
        c.collect(np.zeros([4, 2]))


def test_reset_forgets_everything():
    c = StatisticsCollector()
    c.collect([1., 2., 3.], weight=2.)
    c.reset()
    assert not c.has_value
    assert c.counter == 0
    assert c.weight_sum == 0.
    assert float(c.mean) == 0.
    assert float(c.square) == 0.
    c.collect([10.])
    np.testing.assert_allclose(c.mean, 10.)
    assert c.counter == 1


@pytest.mark.parametrize('size', [1, 29, 64, 65, 1000])
def test_unit_scalars_fast_path_matches_numpy_on_both_sides_of_the_python_sum_limit(size):
    # the metric book's path: a flat float64 array, each element a sample of weight 1
    # (summed by Python up to 64 elements, by numpy above)
    values = np.random.default_rng(size).normal(3., 2., size)
    c = StatisticsCollector()
    c._collect_unit_scalars(values[:size // 2])
    c._collect_unit_scalars(values[size // 2:])
    assert c.counter == size and c.weight_sum == size
    assert float(c.mean) == pytest.approx(np.mean(values), rel=1e-12)
    assert float(c.var) == pytest.approx(np.var(values), rel=1e-9, abs=1e-12)
