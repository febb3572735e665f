"""Several named flows drawn as one (``DataFlow.tasks``, multi-task training).

Expected batches are written out by hand from the rules of the docstring
(together / alternate / weighted; an epoch of 'shortest', 'longest' or N
steps).  Resume tests compare an interrupted run plus a run on new flows
made the same way, resumed from the saved position, with one uninterrupted
run.  The weighted test derives its tolerance from the binomial spread.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from tfsnippet.dataflows import DataFlow, MultiTaskFlow


def flows(shuffle=False):
    """Task 'a': 4 rows in 2 batches; task 'b': 6 rows in 3 batches."""
    return {'a': DataFlow.arrays([np.arange(4)], 2, shuffle=shuffle, random_state=1),
            'b': DataFlow.arrays([np.arange(10, 16)], 2, shuffle=shuffle, random_state=2)}


def lists(batch):
    return {k: v[0].tolist() for k, v in batch.items()}


def epochs(flow, n=2):
    return [[lists(b) for b in flow] for _ in range(n)]


A0, A1 = [0, 1], [2, 3]
B0, B1, B2 = [10, 11], [12, 13], [14, 15]


# ----------------------------------------------------------------- modes and epochs
def test_together_shortest_ends_with_the_shortest_flow_and_restarts_every_flow():
    flow = DataFlow.tasks(flows())
    assert isinstance(flow, MultiTaskFlow) and flow.task_names == ('a', 'b')
    assert epochs(flow) == [[{'a': A0, 'b': B0}, {'a': A1, 'b': B1}]] * 2


def test_together_longest_restarts_a_flow_that_ends_early():
    flow = DataFlow.tasks(flows(), epoch='longest')
    assert epochs(flow) == [[{'a': A0, 'b': B0}, {'a': A1, 'b': B1},
                             {'a': A0, 'b': B2}]] * 2


def test_together_fixed_steps_go_on_where_each_flow_was():
    flow = DataFlow.tasks(flows(), epoch=4)
    assert epochs(flow) == [
        [{'a': A0, 'b': B0}, {'a': A1, 'b': B1}, {'a': A0, 'b': B2}, {'a': A1, 'b': B0}],
        [{'a': A0, 'b': B1}, {'a': A1, 'b': B2}, {'a': A0, 'b': B0}, {'a': A1, 'b': B1}]]


def test_alternate_takes_the_tasks_in_turn():
    assert epochs(DataFlow.tasks(flows(), mode='alternate')) == [
        [{'a': A0}, {'b': B0}, {'a': A1}, {'b': B1}]] * 2
    assert epochs(DataFlow.tasks(flows(), mode='alternate', epoch='longest'), 1) == [
        [{'a': A0}, {'b': B0}, {'a': A1}, {'b': B1}, {'a': A0}, {'b': B2}, {'a': A1}]]
    assert epochs(DataFlow.tasks(flows(), mode='alternate', epoch=3)) == [
        [{'a': A0}, {'b': B0}, {'a': A1}], [{'b': B1}, {'a': A0}, {'b': B2}]]


def test_weighted_draws_are_seeded():
    def draws(seed):
        flow = DataFlow.tasks(flows(), mode='weighted', weights=[1, 1], epoch=40,
                              random_state=seed)
        return [list(b)[0] for b in flow]

    assert draws(3) == draws(3)
    assert draws(3) != draws(4)
    # a task of weight 0 is never drawn; the weights are normalised
    flow = DataFlow.tasks(flows(), mode='weighted', weights={'a': 0, 'b': 2}, epoch=20,
                          random_state=0)
    assert flow.weights == {'a': 0., 'b': 1.}
    assert [list(b) for b in flow] == [['b']] * 20


@pytest.mark.parametrize('weights', [{'a': 1, 'b': 3}, {'a': 5, 'b': 2, 'c': 3}])
def test_weighted_draws_follow_the_weights_over_a_long_run(weights):
    steps = 20000
    tasks = {name: DataFlow.arrays([np.arange(8)], 2) for name in weights}
    flow = DataFlow.tasks(tasks, mode='weighted', weights=weights, epoch=steps,
                          random_state=12345)
    counts = dict.fromkeys(weights, 0)
    for batch in flow:
        (name,) = batch
        counts[name] += 1
    total = sum(weights.values())
    for name, w in weights.items():
        p = w / total
        spread = math.sqrt(steps * p * (1 - p))        # the binomial standard deviation
        assert abs(counts[name] - steps * p) < 4 * spread, (name, counts)


# ----------------------------------------------------------------- resume
RUNS = [('together', 'shortest'), ('together', 'longest'), ('together', 5),
        ('alternate', 'shortest'), ('alternate', 'longest'), ('alternate', 3),
        ('weighted', 'shortest'), ('weighted', 'longest'), ('weighted', 7)]


def make(mode, epoch):
    weights = {'a': 1, 'b': 2} if mode == 'weighted' else None
    return DataFlow.tasks(flows(shuffle=True), mode=mode, epoch=epoch, weights=weights,
                          random_state=7)


@pytest.mark.parametrize('mode,epoch', RUNS)
@pytest.mark.parametrize('stop', [1, 3, 5])
def test_an_interrupted_epoch_resumes_exactly(mode, epoch, stop):
    whole = make(mode, epoch)
    expected = [[lists(b) for b in whole] for _ in range(3)]
    flat = [(e, b) for e, batches in enumerate(expected) for b in batches]
    assert len(flat) > stop
    # the first run: stop after `stop` batches, keep the position
    first, flow, position = [], make(mode, epoch), None
    for e in range(3):
        for b in flow:
            first.append((e, lists(b)))
            if len(first) == stop:
                position = flow.state_dict()
                break
        if position is not None:
            break
    # the second run: new flows made the same way, the position put back
    epoch_index = first[-1][0]
    flow = make(mode, epoch)
    flow.load_state_dict(position)
    assert flow.state_dict() == position
    second = [(epoch_index, lists(b)) for b in flow]
    second += [(e, lists(b)) for e in range(epoch_index + 1, 3) for b in flow]
    assert first + second == flat


def test_a_position_between_epochs_of_fixed_steps_keeps_each_flow_where_it_was():
    flow = make('together', 5)
    whole = epochs(make('together', 5), 2)
    assert [lists(b) for b in flow] == whole[0]
    position = flow.state_dict()
    assert position['served'] == 0 and position['flows']['a']['served'] == 1
    other = make('together', 5)
    other.load_state_dict(position)
    assert [lists(b) for b in other] == whole[1]


def test_leaving_an_epoch_early_begins_the_next_one_afresh():
    flow = DataFlow.tasks(flows(), epoch=4)
    for b in flow:
        break
    assert [lists(b) for b in flow][:2] == [{'a': A0, 'b': B0}, {'a': A1, 'b': B1}]


def test_the_position_is_plain_data_with_one_position_per_flow():
    flow = make('weighted', 'longest')
    it = iter(flow)
    next(it)
    state = flow.state_dict()
    assert set(state) == {'served', 'turn', 'ended', 'rng', 'flows'}
    assert set(state['flows']) == {'a', 'b'} and state['served'] == 1
    assert flow.is_resumable
    factory = DataFlow.iterator_factory(lambda: [(np.zeros(1),)])
    assert not DataFlow.tasks({'a': factory}).is_resumable


def test_map_flows_keeps_the_tasks_mode_and_drawing():
    flow = make('weighted', 9)
    mapped = flow.map_flows(lambda name, f: f.map(lambda x: (x * 10,)))
    assert (mapped.task_names, mapped.mode, mapped.epoch_rule) == (flow.task_names, 'weighted', 9)
    got = [{k: (v[0] // 10).tolist() for k, v in b.items()} for b in mapped]
    assert got == [lists(b) for b in make('weighted', 9)]


# ----------------------------------------------------------------- errors
def test_bad_arguments_name_the_argument():
    with pytest.raises(TypeError, match='`flows` must be a dict'):
        DataFlow.tasks([DataFlow.seq(0, 4, batch_size=2)])
    with pytest.raises(ValueError, match='at least one task'):
        DataFlow.tasks({})
    with pytest.raises(TypeError, match=r"`flows\['a'\]` must be a DataFlow"):
        DataFlow.tasks({'a': [1, 2]})
    with pytest.raises(ValueError, match="`mode` must be 'together'"):
        DataFlow.tasks(flows(), mode='mixed')
    with pytest.raises(ValueError, match="`epoch` must be 'shortest'"):
        DataFlow.tasks(flows(), epoch='all')
    with pytest.raises(ValueError, match='must be positive, got 0'):
        DataFlow.tasks(flows(), epoch=0)
    with pytest.raises(ValueError, match="`weights` is required with mode='weighted'"):
        DataFlow.tasks(flows(), mode='weighted')
    with pytest.raises(ValueError, match="`weights` is only for mode='weighted'"):
        DataFlow.tasks(flows(), weights=[1, 2])
    with pytest.raises(ValueError, match=r"must name the tasks \['a', 'b'\], got \['a', 'c'\]"):
        DataFlow.tasks(flows(), mode='weighted', weights={'a': 1, 'c': 1})
    with pytest.raises(ValueError, match='must hold 2 numbers'):
        DataFlow.tasks(flows(), mode='weighted', weights=[1])
    with pytest.raises(ValueError, match="weight of task 'b' must be a finite number >= 0"):
        DataFlow.tasks(flows(), mode='weighted', weights=[1, -1])
    with pytest.raises(ValueError, match='positive sum'):
        DataFlow.tasks(flows(), mode='weighted', weights=[0, 0])


def test_a_bad_position_is_refused():
    flow = make('together', 'shortest')
    with pytest.raises(TypeError, match='position of a MultiTaskFlow'):
        flow.load_state_dict({'start': None, 'served': 0})
    state = make('together', 'shortest').state_dict()
    with pytest.raises(ValueError, match=r"of the tasks \['a'\], this flow has \['a', 'b'\]"):
        flow.load_state_dict({**state, 'flows': {'a': state['flows']['a']}})
    with pytest.raises(ValueError, match="mode was 'weighted'"):
        flow.load_state_dict(make('weighted', 3).state_dict())


def test_a_flow_with_no_batch_is_an_error_when_restarted():
    empty = DataFlow.arrays([np.arange(1)], 2, skip_incomplete=True)
    flow = DataFlow.tasks({'a': DataFlow.seq(0, 4, batch_size=2), 'e': empty},
                          epoch='longest')
    with pytest.raises(ValueError, match="task 'e' gave no batch"):
        list(flow)
