"""TrainLoop with DataFlows and other data (API.md 7.4 and 12, as changed by our
docs): in eager mode, and in both TF styles for the tests taking ``style``.

``iter_steps(data)`` takes ``iter(data)`` anew in each epoch, so an epoch
left early is not resumed by the next one (quirk Q5 fixed).  A checkpoint
taken inside an epoch stores the position of each DataFlow given to
``iter_steps``; a loop resumed from it continues that epoch with exactly the
batches not served yet (for other iterables, it skips as many items as the
interrupted epoch consumed).  Each resume test compares the steps seen by an
interrupted run plus its resumed run with those of an uninterrupted run.
"""

import threading

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers import saved_loop_state

ROWS, BATCH = 23, 4          # 6 batches per epoch: 4, 4, 4, 4, 4, 3
STOP_AT = 9                  # the 3rd step of epoch 2


def split(rows, batch_size):
    return [rows[i:i + batch_size] for i in range(0, len(rows), batch_size)]


def as_lists(batch):
    if isinstance(batch, tuple):
        return tuple(np.asarray(a).tolist() for a in batch)
    return batch


def train(data, max_epoch=3, max_step=None, stop_at=None, break_at=None, seen=None,
          **loop_options):
    """Run a loop over `data`; return ``[(epoch, step, batch as lists)]`` (also
    appended to `seen`, which keeps them when the run is interrupted).

    `stop_at`: raise KeyboardInterrupt at the start of that step (before it is
    recorded); `break_at`: leave the step loop after recording that step.
    """
    seen = [] if seen is None else seen
    with spt.TrainLoop(max_epoch=max_epoch, max_step=max_step, print_func=lambda s: None,
                       **loop_options) as loop:
        for epoch in loop.iter_epochs():
            for step, batch in loop.iter_steps(data):
                if step == stop_at:
                    raise KeyboardInterrupt()
                seen.append((epoch, step, as_lists(batch)))
                if step == break_at:
                    break
    return seen


def checkpointed(root):
    return dict(checkpoint_dir=str(root), checkpoint_step_freq=1)


def shuffled_flow(seed=7):
    x = np.arange(ROWS)
    return spt.DataFlow.arrays([x, x * 10], BATCH, shuffle=True, random_state=seed)


def expected_shuffled(seed=7, epochs=3):
    """``[(epoch, step, batch)]`` of `shuffled_flow(seed)`, from the permutations alone."""
    rng = np.random.RandomState(seed)
    out, step = [], 0
    for epoch in range(1, epochs + 1):
        for rows in split(rng.permutation(ROWS).tolist(), BATCH):
            step += 1
            out.append((epoch, step, (rows, [10 * r for r in rows])))
    return out


# ----------------------------------------------------------- batches per epoch
def test_batches_seen_per_epoch():
    flow = spt.DataFlow.arrays([np.arange(12)], 5)
    assert train(flow, max_epoch=3) == [
        (e, 3 * (e - 1) + i + 1, (b,))
        for e in (1, 2, 3)
        for i, b in enumerate([[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]])]


def test_shuffled_flow_draws_a_new_permutation_each_epoch():
    assert train(shuffled_flow(), max_epoch=3) == expected_shuffled()


def test_a_list_is_iterated_anew_each_epoch():
    assert train(['a', 'b'], max_epoch=2) == [(1, 1, 'a'), (1, 2, 'b'), (2, 3, 'a'),
                                               (2, 4, 'b')]


def test_break_then_the_next_epoch_is_a_fresh_epoch():
    flow = spt.DataFlow.arrays([np.arange(12)], 5)
    assert train(flow, max_epoch=2, break_at=1) == [
        (1, 1, ([0, 1, 2, 3, 4],)),
        (2, 2, ([0, 1, 2, 3, 4],)), (2, 3, ([5, 6, 7, 8, 9],)), (2, 4, ([10, 11],))]


def test_break_in_a_shuffled_epoch_then_a_fresh_permutation():
    expected = expected_shuffled(epochs=2)
    seen = train(shuffled_flow(), max_epoch=2, break_at=2)
    assert seen[:2] == expected[:2]
    # epoch 2 is the second permutation, complete, with steps numbered on from 3
    assert seen[2:] == [(2, step - 4, batch) for (_, step, batch) in expected[6:]]


def test_max_step_in_the_middle_of_an_epoch():
    flow = spt.DataFlow.arrays([np.arange(12)], 5)
    with spt.TrainLoop(max_step=4, print_func=lambda s: None) as loop:
        seen = []
        for epoch in loop.iter_epochs():
            for step, batch in loop.iter_steps(flow):
                seen.append((epoch, step, batch[0].tolist()))
        assert (loop.epoch, loop.step) == (2, 4)
    assert seen == [(1, 1, [0, 1, 2, 3, 4]), (1, 2, [5, 6, 7, 8, 9]), (1, 3, [10, 11]),
                    (2, 4, [0, 1, 2, 3, 4])]
    # the flow itself is not left half-way: its next epoch is complete
    assert [b[0].tolist() for b in flow] == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]


def test_a_flow_with_fewer_rows_than_a_skipped_incomplete_batch_is_empty():
    lines = []
    flow = spt.DataFlow.arrays([np.arange(4)], 5, skip_incomplete=True)
    assert list(flow) == []
    steps = []
    with pytest.warns(UserWarning, match='Epoch 1 got no step'), spt.TrainLoop(
            [], max_epoch=1, show_eta=False, print_func=lines.append) as loop:
        for _ in loop.iter_epochs():
            steps.extend(loop.iter_steps(flow))
    assert steps == []
    assert any(line.startswith('Epoch 1 got no step') for line in lines)


def test_threaded_flow_in_a_loop():
    before = threading.active_count()
    flow = shuffled_flow().threaded(2)
    with flow:
        assert train(flow, max_epoch=3) == expected_shuffled()
    assert threading.active_count() == before


# --------------------------------------------------------------- tf.data
def test_tf_data_dataset_passed_straight_to_iter_steps():
    x = np.arange(12)
    dataset = tf.data.Dataset.from_tensor_slices((x, x * 2)).batch(5)
    seen = []
    with spt.TrainLoop(max_epoch=2, print_func=lambda s: None) as loop:
        for epoch in loop.iter_epochs():
            for step, (bx, by) in loop.iter_steps(dataset):
                assert isinstance(bx, tf.Tensor) and isinstance(by, tf.Tensor)
                seen.append((epoch, step, bx.numpy().tolist(), by.numpy().tolist()))
        assert (loop.epoch, loop.step) == (2, 6)
    batches = [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9], [10, 11]]
    assert seen == [(e, 3 * (e - 1) + i + 1, b, [2 * v for v in b])
                    for e in (1, 2) for i, b in enumerate(batches)]


# ----------------------------------------------------------------- resume
def run_twice(root, make_data, max_epoch=3, stop_at=STOP_AT):
    """``(run 1, run 2)``: the steps seen by a run interrupted at `stop_at` and by
    a second run, on new data made the same way, resumed from its checkpoints."""
    runs = []
    for stop in (stop_at, None):
        seen = []
        data = make_data()
        try:
            if stop is None:
                train(data, max_epoch=max_epoch, seen=seen, **checkpointed(root))
            else:
                with pytest.raises(KeyboardInterrupt):
                    train(data, max_epoch=max_epoch, stop_at=stop, seen=seen,
                          **checkpointed(root))
        finally:
            if hasattr(data, 'close'):
                data.close()
        runs.append(seen)
    return runs


def test_resume_a_shuffled_flow_mid_epoch(tmp_path):
    first, second = run_twice(tmp_path, shuffled_flow)
    assert len(first) == STOP_AT - 1
    assert second[0][:2] == (2, STOP_AT)
    assert first + second == expected_shuffled()
    assert train(shuffled_flow(), max_epoch=3) == expected_shuffled()


def train_w(style, root=None, stop_at=None, seen=None):
    """3 epochs over `shuffled_flow()` in a new run of `style`, each batch ``x``
    setting ``w = w / 2 + mean(x)`` (so ``w`` depends on the batches' order), as
    `train` records them in `seen`.  Returns the final ``w``."""
    with style.new_run():
        w = style.variable(0., 'w')
        update = style.fed(lambda x: w.assign(w / 2. + tf.reduce_mean(x)), [None])
        options = checkpointed(root) if root is not None else {}
        flow = shuffled_flow()
        with spt.TrainLoop([w], max_epoch=3, print_func=lambda s: None, **options) as loop:
            for epoch in loop.iter_epochs():
                for step, (bx, by) in loop.iter_steps(flow):
                    if step == stop_at:
                        raise KeyboardInterrupt()
                    update(bx)
                    seen.append((epoch, step, as_lists((bx, by))))
        return style.value(w)


def test_a_model_resumed_mid_epoch_ends_with_the_weights_of_one_run(style, tmp_path):
    full, first, second = [], [], []
    expected_w = train_w(style, seen=full)
    assert full == expected_shuffled()
    with pytest.raises(KeyboardInterrupt):
        train_w(style, tmp_path, stop_at=STOP_AT, seen=first)
    resumed_w = train_w(style, tmp_path, seen=second)
    assert len(first) == STOP_AT - 1
    assert second[0][:2] == (2, STOP_AT)
    assert first + second == full
    assert resumed_w == expected_w


def test_checkpoint_holds_the_flow_position(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        train(shuffled_flow(), stop_at=STOP_AT, **checkpointed(tmp_path))
    state = saved_loop_state(tmp_path, STOP_AT - 1)
    assert (state['epoch'], state['step'], state['epoch_steps']) == (2, 8, 2)
    flows = state['dataflows']
    assert len(flows) == 1 and set(flows[0]) == {'start', 'served', 'rows', 'length'}
    assert flows[0]['served'] == 2
    # the stored position, put into another flow, serves the rest of epoch 2
    other = shuffled_flow(seed=1000)
    other.load_state_dict(flows[0])
    rest = [(e, s, b) for (e, s, b) in expected_shuffled() if e == 2][2:]
    assert [as_lists(b) for b in other] == [b for (_, _, b) in rest]
    # the checkpoint after step 6 was taken before epoch 1 ended: all 6 served
    state = saved_loop_state(tmp_path, 6)
    assert (state['epoch'], state['epoch_steps'], state['dataflows'][0]['served']) == (1, 6, 6)


def test_resume_a_threaded_mapped_flow_mid_epoch(tmp_path):
    before = threading.active_count()

    def make():
        return shuffled_flow().map(lambda x, y: (x + y, x)).threaded(3)

    expected = [(e, s, (
        [x + y for x, y in zip(*b)], b[0])) for (e, s, b) in expected_shuffled()]
    first, second = run_twice(tmp_path, make)
    assert first + second == expected
    assert threading.active_count() == before
    assert saved_loop_state(tmp_path, STOP_AT - 1)['dataflows'][0]['served'] == 2


def test_resume_a_plain_list_skips_what_was_consumed(tmp_path):
    items = ['a', 'b', 'c', 'd', 'e']      # 5 steps per epoch: step 7 is the 2nd of epoch 2
    first, second = run_twice(tmp_path, lambda: list(items), stop_at=7)
    assert first == [(1, 1, 'a'), (1, 2, 'b'), (1, 3, 'c'), (1, 4, 'd'), (1, 5, 'e'),
                     (2, 6, 'a')]
    assert second == [(2, 7, 'b'), (2, 8, 'c'), (2, 9, 'd'), (2, 10, 'e')] + [
        (3, 10 + i, v) for i, v in enumerate(items, 1)]
    state = saved_loop_state(tmp_path, 6)
    assert (state['epoch_steps'], state['dataflows']) == (1, [])


def test_resume_a_non_resumable_flow_skips_what_was_consumed(tmp_path):
    def make():
        return spt.DataFlow.iterator_factory(lambda: [(np.array([i]),) for i in range(4)])

    first, second = run_twice(tmp_path, make, max_epoch=2, stop_at=6)
    assert first + second == [(e, 4 * (e - 1) + i + 1, ([i],))
                              for e in (1, 2) for i in range(4)]
    assert saved_loop_state(tmp_path, 5)['dataflows'] == [None]


def test_resume_at_an_epoch_boundary(tmp_path):
    # interrupted at the first step of epoch 2: the last checkpoint is after step 6
    first, second = run_twice(tmp_path, shuffled_flow, stop_at=7)
    assert len(first) == 6
    assert first + second == expected_shuffled()
