"""Bad inputs to the data flows: one test each, with the exception type and its message.

The texts follow API.md sections 12 and 16 where ours keeps them, and our
rewording (argument in backticks, the value that arrived) where it adds to them.
"""

import re

import numpy as np
import pytest

from tfsnippet.dataflows import ArrayFlow, DataFlow, DataMapper, SeqFlow, SlidingWindow


def seq(n=4, batch_size=2, **kwargs):
    return DataFlow.seq(0, n, batch_size=batch_size, **kwargs)


# ------------------------------------------------------------------ ArrayFlow
def test_arrays_of_different_lengths():
    with pytest.raises(ValueError, match=re.escape(
            '`arrays` must have the same data length, got lengths [3, 4]')):
        DataFlow.arrays([np.arange(3), np.arange(4)], 2)


def test_empty_array_list():
    with pytest.raises(ValueError, match=re.escape('`arrays` must not be empty.')):
        DataFlow.arrays([], 2)


def test_non_array_entry():
    with pytest.raises(TypeError, match=re.escape(
            '`arrays[1]` must be a numpy-like array, got [1, 2, 3]')):
        DataFlow.arrays([np.arange(3), [1, 2, 3]], 2)


def test_zero_dimensional_array():
    with pytest.raises(ValueError, match=re.escape(
            '`arrays[0]` must be at least 1-d, got shape ()')):
        ArrayFlow([np.array(5)], 2)


def test_zero_batch_size():
    with pytest.raises(ValueError, match=re.escape('`batch_size` must be a positive int, got 0')):
        DataFlow.arrays([np.arange(3)], 0)


def test_negative_batch_size():
    with pytest.raises(ValueError, match=re.escape(
            '`batch_size` must be a positive int, got -1')):
        DataFlow.arrays([np.arange(3)], -1)


def test_float_batch_size():
    with pytest.raises(TypeError, match=re.escape(
            '`batch_size` must be a positive int, got 2.0')):
        DataFlow.arrays([np.arange(3)], 2.0)


def test_bool_batch_size():
    with pytest.raises(TypeError, match=re.escape(
            '`batch_size` must be a positive int, got True')):
        DataFlow.arrays([np.arange(3)], True)


def test_non_positive_batch_size_of_seq():
    with pytest.raises(ValueError, match=re.escape('`batch_size` must be a positive int, got 0')):
        DataFlow.seq(0, 5, batch_size=0)


def test_skip_incomplete_with_fewer_rows_than_a_batch_is_an_empty_flow():
    # classic: an empty flow, not an error
    flow = DataFlow.arrays([np.arange(3)], 5, skip_incomplete=True)
    assert list(flow) == [] and list(flow) == []
    assert list(DataFlow.arrays([np.arange(4)], 5, shuffle=True, skip_incomplete=True,
                                random_state=1)) == []


def test_seq_flow_without_batch_size():
    with pytest.raises(ValueError, match=re.escape('`batch_size` is required.')):
        SeqFlow(0, 10)


@pytest.mark.parametrize('random_state', [1.5, 'seed'])
def test_bad_random_state_type(random_state):
    with pytest.raises(TypeError, match=re.escape(
            f'`random_state` must be None, an int seed, a numpy RandomState or Generator, '
            f'got {random_state!r}')):
        DataFlow.arrays([np.arange(3)], 2, shuffle=True, random_state=random_state)


# ------------------------------------------------------------------- position
def test_load_state_dict_while_iterating():
    flow = seq(6)
    it = iter(flow)
    next(it)
    state = flow.state_dict()
    with pytest.raises(RuntimeError, match=re.escape(
            '`load_state_dict()` cannot be called while the flow is iterated')):
        flow.load_state_dict(state)
    # the running epoch is not disturbed
    assert next(it)[0].tolist() == [2, 3]
    it.close()


def test_load_state_dict_of_a_mapped_flow_while_iterating():
    flow = seq(6).map(lambda a: (a,))
    it = iter(flow)
    next(it)
    with pytest.raises(RuntimeError, match=re.escape(
            '`load_state_dict()` cannot be called while the flow is iterated')):
        flow.load_state_dict({'start': None, 'served': 0})
    it.close()


def test_load_state_dict_of_a_threaded_flow_while_iterating():
    with seq(6).threaded(1) as flow:
        it = iter(flow)
        next(it)
        with pytest.raises(RuntimeError, match=re.escape(
                '`load_state_dict()` cannot be called while the flow is iterated')):
            flow.load_state_dict({'start': None, 'served': 0})
        it.close()


def test_load_a_shuffled_position_into_an_unshuffled_flow():
    state = seq(shuffle=True, random_state=1).state_dict()
    with pytest.raises(ValueError, match=re.escape(
            'The saved position is of a flow that was shuffled')):
        seq().load_state_dict(state)


def test_load_a_negative_served_count():
    with pytest.raises(ValueError, match=re.escape(
            '`state["served"]` must be a non-negative int, got -1')):
        seq().load_state_dict({'start': None, 'served': -1})


# ------------------------------------------------------- derived flows
def test_mapper_returning_a_non_tuple():
    flow = seq().map(lambda a: a)     # accepted here: the output is checked lazily
    with pytest.raises(TypeError, match=re.escape(
            'The output of the mapper `<lambda>` is expected to be a tuple or a list, '
            'but got a ndarray.')):
        next(iter(flow))


def test_mapper_returning_the_wrong_arity_with_array_indices():
    flow = DataFlow.arrays([np.arange(3), np.arange(3)], 2).map(
        lambda a, b: (a,), array_indices=[0, 1])
    with pytest.raises(ValueError, match=re.escape(
            'The number of output arrays of the mapper is required to match the inputs, '
            'since `array_indices` is specified: outputs 1 != inputs 2.')):
        next(iter(flow))


def test_select_with_a_non_int_index():
    with pytest.raises(TypeError, match=re.escape('`indices` must be ints, got 0.5')):
        seq().select([0, 0.5])


def test_gather_of_nothing():
    with pytest.raises(ValueError, match=re.escape(
            'At least one flow must be specified: `flows` is empty.')):
        DataFlow.gather([])


def test_gather_of_a_non_flow():
    with pytest.raises(TypeError, match=re.escape('`flows[1]` must be a DataFlow, got 123')):
        DataFlow.gather([seq(), 123])


def test_non_positive_prefetch():
    with pytest.raises(ValueError, match=re.escape('`prefetch` must be a positive int, got 0')):
        seq().threaded(0)


def test_negative_prefetch():
    with pytest.raises(ValueError, match=re.escape('`prefetch` must be a positive int, got -1')):
        seq().threaded(-1)


def test_position_of_an_iterator_factory_flow():
    flow = DataFlow.iterator_factory(lambda: [(np.arange(2),)])
    with pytest.raises(NotImplementedError, match=re.escape(
            'IteratorFactoryFlow cannot save its position')):
        flow.state_dict()


# ------------------------------------------------------------- data mappers
class ReturnsAnArray(DataMapper):
    def _transform(self, x):
        return x


def test_data_mapper_returning_a_non_tuple():
    with pytest.raises(TypeError, match=re.escape(
            'The output of ReturnsAnArray is neither a tuple, nor a list: got a ndarray.')):
        ReturnsAnArray()(np.arange(3))


@pytest.mark.parametrize('window_size', [0, 14, 2.5])
def test_sliding_window_with_a_bad_window_size(window_size):
    with pytest.raises(ValueError, match=re.escape(
            f'`window_size` must be an int in [1, 13], got {window_size!r}')):
        SlidingWindow(np.arange(13), window_size)
