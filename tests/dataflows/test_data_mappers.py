"""DataMapper and SlidingWindow (API.md 12.9)."""

import numpy as np

from tfsnippet.dataflows import DataFlow, DataMapper, SlidingWindow


class AddAndNegate(DataMapper):
    def _transform(self, x, y):
        return [x + y, -x]       # a list is accepted and becomes a tuple


def test_data_mapper_returns_a_tuple():
    out = AddAndNegate()(np.array([1, 2]), np.array([10, 20]))
    assert type(out) is tuple
    assert [a.tolist() for a in out] == [[11, 22], [-1, -2]]


def test_data_mapper_in_a_flow():
    flow = DataFlow.arrays([np.arange(3), np.arange(3) * 10], 2).map(AddAndNegate())
    assert [[a.tolist() for a in b] for b in flow] == [[[0, 11], [0, -1]], [[22], [-2]]]


def test_sliding_window_call():
    data = np.arange(13) * 10
    window = SlidingWindow(data, 3)
    assert window.data_array is data
    assert window.window_size == 3
    out = window(np.array([0, 5, 10]))
    assert type(out) is tuple and len(out) == 1
    assert out[0].tolist() == [[0, 10, 20], [50, 60, 70], [100, 110, 120]]


def test_sliding_window_of_rows():
    data = np.arange(12).reshape(6, 2)
    out, = SlidingWindow(data, 2)(np.array([1, 4]))
    assert out.shape == (2, 2, 2)
    assert out.tolist() == [[[2, 3], [4, 5]], [[8, 9], [10, 11]]]


def test_sliding_window_as_flow():
    flow = SlidingWindow(np.arange(13), 3).as_flow(batch_size=4)
    batches = [b[0].tolist() for b in flow]
    assert len(batches) == 3
    assert batches[0] == [[0, 1, 2], [1, 2, 3], [2, 3, 4], [3, 4, 5]]
    assert batches[1] == [[4, 5, 6], [5, 6, 7], [6, 7, 8], [7, 8, 9]]
    assert batches[2] == [[8, 9, 10], [9, 10, 11], [10, 11, 12]]


def test_sliding_window_as_flow_skip_incomplete():
    flow = SlidingWindow(np.arange(13), 3).as_flow(batch_size=4, skip_incomplete=True)
    assert [b[0][:, 0].tolist() for b in flow] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_window_as_long_as_the_data():
    flow = SlidingWindow(np.arange(4), 4).as_flow(batch_size=2)
    assert [b[0].tolist() for b in flow] == [[[0, 1, 2, 3]]]


def test_sliding_window_as_shuffled_flow():
    data = np.arange(13)
    flow = SlidingWindow(data, 3).as_flow(batch_size=4, shuffle=True, random_state=5)
    rng = np.random.RandomState(5)
    for _ in range(2):
        starts = rng.permutation(11)
        batches = [b[0] for b in flow]
        assert [len(b) for b in batches] == [4, 4, 3]
        windows = np.concatenate(batches)
        np.testing.assert_array_equal(windows[:, 0], starts)
        np.testing.assert_array_equal(windows, starts[:, None] + np.arange(3))
