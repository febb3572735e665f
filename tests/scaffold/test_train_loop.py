"""Tests of `TrainLoop` (API.md section 7; our fixes of section 15).

The tests taking ``style`` run in both TF styles, the rest in eager mode;
tests/graph/test_train_loop_graph.py has what is graph-only.

Times come from the `fake_clock` fixture, so every duration, ETA and log
line below is exact and was worked out by hand from the spec.
"""

import json
import re

import keras
import numpy as np
import pytest
import tensorflow as tf
from sklearn.datasets import load_digits

import tfsnippet as spt
from tfsnippet import EventKeys

LOOP_EVENTS = (
    EventKeys.ENTER_LOOP, EventKeys.EXIT_LOOP,
    EventKeys.BEFORE_EPOCH, EventKeys.AFTER_EPOCH,
    EventKeys.BEFORE_STEP, EventKeys.AFTER_STEP,
    EventKeys.METRICS_COLLECTED, EventKeys.TIME_METRICS_COLLECTED,
    EventKeys.METRIC_STATS_PRINTED, EventKeys.TIME_METRIC_STATS_PRINTED,
)


def record_events(loop, log, keys=LOOP_EVENTS):
    """Register one handler per key; each appends ``(KEY, epoch, step, detail)``.

    `detail` is ``None`` for ``(loop)`` events, the sorted metric names for
    ``*_COLLECTED`` and ``{name: sample count}`` for ``*_STATS_PRINTED``.
    """
    def make(key):
        def handler(lp, *payload):
            assert lp is loop
            detail = None
            if payload:
                (data,) = payload
                if key in (EventKeys.METRIC_STATS_PRINTED, EventKeys.TIME_METRIC_STATS_PRINTED):
                    detail = {name: c.counter for name, c in data.items()}
                else:
                    detail = sorted(data)
            log.append((key.name, lp.epoch, lp.step, detail))
        return handler

    for key in keys:
        loop.events.on(key, make(key))


def make_loop(lines, clock, **kwargs):
    return spt.TrainLoop(print_func=lines.append, clock=clock, **kwargs)


# ------------------------------------------------------------------ counters
def test_counters_start_at_zero_and_count_from_one_inside():
    loop = spt.TrainLoop(max_epoch=2)
    assert (loop.epoch, loop.step) == (0, 0)
    assert not loop.within_epoch and not loop.within_step
    seen = []
    with loop:
        for epoch in loop.iter_epochs():
            assert loop.within_epoch and not loop.within_step
            assert epoch == loop.epoch
            for step, batch in loop.iter_steps(['a', 'b']):
                assert loop.within_step
                assert step == loop.step
                seen.append((epoch, step, batch))
            assert not loop.within_step
        assert not loop.within_epoch
    assert seen == [(1, 1, 'a'), (1, 2, 'b'), (2, 3, 'a'), (2, 4, 'b')]
    assert (loop.epoch, loop.step) == (2, 4)


def run_and_count(loop, data):
    """Run the loop; return ``{epoch: number of steps}``."""
    counts = {}
    with loop:
        for epoch in loop.iter_epochs():
            counts[epoch] = 0
            for _ in loop.iter_steps(data):
                counts[epoch] += 1
    return counts


def test_max_step_ends_the_last_epoch_early():
    loop = spt.TrainLoop(max_step=10)
    assert run_and_count(loop, [1, 2, 3, 4]) == {1: 4, 2: 4, 3: 2}
    assert loop.step == 10


def test_max_epoch_stops_before_max_step():
    loop = spt.TrainLoop(max_step=10, max_epoch=2)
    assert run_and_count(loop, [1, 2, 3, 4]) == {1: 4, 2: 4}
    assert loop.step == 8


def test_max_epoch_alone():
    loop = spt.TrainLoop(max_epoch=3)
    assert run_and_count(loop, range(4)) == {1: 4, 2: 4, 3: 4}
    assert (loop.epoch, loop.step) == (3, 12)


def test_max_step_without_data_runs_one_epoch_of_steps():
    loop = spt.TrainLoop(max_step=10)
    steps = []
    with loop:
        for epoch in loop.iter_epochs():
            for step in loop.iter_steps():
                steps.append((epoch, step))
    assert steps == [(1, s) for s in range(1, 11)]


def test_max_step_and_max_epoch_without_data():
    loop = spt.TrainLoop(max_step=5, max_epoch=3)
    with loop:
        for epoch in loop.iter_epochs():
            assert list(loop.iter_steps()) == [1, 2, 3, 4, 5]
    assert (loop.epoch, loop.step) == (1, 5)


def test_limit_setters_take_effect_in_a_running_loop():
    loop = spt.TrainLoop(max_epoch=1)
    epochs = []
    with loop:
        for epoch in loop.iter_epochs():
            epochs.append(epoch)
            if epoch == 1:
                loop.max_epoch = None      # lifting the limit is allowed
                assert loop.max_epoch is None
            if epoch == 3:
                loop.max_epoch = 4
    assert epochs == [1, 2, 3, 4]
    assert loop.max_epoch == 4


def test_max_step_setter_accepts_none_and_numpy_ints():
    loop = spt.TrainLoop(max_step=3)
    loop.max_step = None
    assert loop.max_step is None
    loop.max_step = np.int64(7)
    assert loop.max_step == 7 and type(loop.max_step) is int
    loop.max_epoch = np.int32(2)
    assert loop.max_epoch == 2 and type(loop.max_epoch) is int
    loop.max_epoch = None
    assert loop.max_epoch is None


def test_limits_given_as_tensors_and_variables(style):
    loop = spt.TrainLoop(max_epoch=tf.constant(2),
                         max_step=style.variable(7, 'max_step', dtype='int32'))
    assert (loop.max_epoch, loop.max_step) == (2, 7)
    assert type(loop.max_epoch) is int and type(loop.max_step) is int
    assert run_and_count(loop, [1, 2, 3, 4]) == {1: 4, 2: 3}
    loop.max_epoch = tf.constant(4) + 1         # a tensor computed by TensorFlow
    assert loop.max_epoch == 5


# ---------------------------------------------------------------- iter_steps
def test_list_is_read_again_every_epoch():
    loop = spt.TrainLoop(max_epoch=3)
    batches = []
    with loop:
        for _ in loop.iter_epochs():
            batches.append([b for _, b in loop.iter_steps([10, 20])])
    assert batches == [[10, 20]] * 3


def test_generator_is_used_up_after_the_first_epoch():
    loop = spt.TrainLoop(max_epoch=3)
    batches = []
    with loop:
        for _ in loop.iter_epochs():
            batches.append([b for _, b in loop.iter_steps(x * x for x in range(3))])
    assert batches == [[0, 1, 4], [0, 1, 4], [0, 1, 4]]  # a new generator each epoch

    loop = spt.TrainLoop(max_epoch=3)
    gen = (x * x for x in range(3))
    batches = []
    with loop:
        for _ in loop.iter_epochs():
            batches.append([b for _, b in loop.iter_steps(gen)])
    assert batches == [[0, 1, 4], [], []]
    assert loop.step == 3


def test_tf_data_dataset_is_iterated_anew_every_epoch():
    dataset = tf.data.Dataset.range(3).map(lambda x: x * 10)
    loop = spt.TrainLoop(max_epoch=2)
    batches = []
    with loop:
        for _ in loop.iter_epochs():
            for step, batch in loop.iter_steps(dataset):
                assert isinstance(batch, tf.Tensor)
                batches.append((step, int(batch)))
    assert batches == [(1, 0), (2, 10), (3, 20), (4, 0), (5, 10), (6, 20)]


def test_break_does_not_make_the_next_epoch_resume_a_half_read_iterable():
    loop = spt.TrainLoop(max_epoch=2)
    batches = []
    with loop:
        for epoch in loop.iter_epochs():
            for _, batch in loop.iter_steps([1, 2, 3, 4]):
                batches.append((epoch, batch))
                if epoch == 1 and batch == 2:
                    break
    assert batches == [(1, 1), (1, 2), (2, 1), (2, 2), (2, 3), (2, 4)]
    assert loop.step == 6


def test_max_step_inside_an_epoch_does_not_fetch_an_extra_batch():
    fetched = []

    class Source:
        def __iter__(self):
            for i in range(4):
                fetched.append(i)
                yield i

    loop = spt.TrainLoop(max_step=2)
    with loop:
        for _ in loop.iter_epochs():
            assert [b for _, b in loop.iter_steps(Source())] == [0, 1]
    assert fetched == [0, 1]


def test_iterator_made_by_iter_is_closed_when_the_step_loop_is_left():
    events = []

    class Source:
        def __iter__(self):
            try:
                for i in range(10):
                    yield i
            finally:
                events.append('closed')

    loop = spt.TrainLoop(max_epoch=2, max_step=7)
    with loop:
        for epoch in loop.iter_epochs():
            for _, batch in loop.iter_steps(Source()):
                events.append((epoch, batch))
                if epoch == 1 and batch == 1:
                    break
            events.append(f'end of epoch {epoch}')
    # epoch 1: left by `break`; epoch 2: left because max_step was reached
    assert events == [(1, 0), (1, 1), 'closed', 'end of epoch 1',
                      (2, 0), (2, 1), (2, 2), (2, 3), (2, 4), 'closed', 'end of epoch 2']


def test_step_data_is_the_current_batch():
    loop = spt.TrainLoop(max_epoch=1)
    assert loop.step_data is None
    seen = []
    with loop:
        for _ in loop.iter_epochs():
            for _, batch in loop.iter_steps([('x', 1), ('y', 2)]):
                seen.append(loop.step_data)
                assert loop.step_data is batch
            assert loop.step_data is None
    assert seen == [('x', 1), ('y', 2)]


# ------------------------------------------------------------------ events
def test_event_order_of_two_epochs_of_two_steps(style, fake_clock):
    computed = style.computed(tf.identity)      # the loss from session.run in graph style
    log = []
    loop = spt.TrainLoop(max_epoch=2, clock=fake_clock,
                         print_func=lambda line: log.append(('print', loop.epoch, loop.step, None)))
    record_events(loop, log)
    with loop:
        for epoch in loop.iter_epochs():
            for step, x in loop.iter_steps([1., 2.]):
                loop.collect_metrics(loss=computed(x))
                if step % 2 == 0:
                    loop.print_logs()
            with loop.timeit('valid_time'):
                loop.collect_metrics(valid_loss=1. / epoch)
            if epoch == 1:
                loop.print_logs()

    def epoch_events(e, s):
        # steps s and s+1; a step-level print in the second one
        return [
            ('BEFORE_STEP', e, s, None),
            ('METRICS_COLLECTED', e, s, ['loss']),
            ('AFTER_STEP', e, s, None),
            ('TIME_METRICS_COLLECTED', e, s, ['step_time']),  # step ended
            ('BEFORE_STEP', e, s + 1, None),
            ('METRICS_COLLECTED', e, s + 1, ['loss']),
            ('TIME_METRICS_COLLECTED', e, s + 1, ['step_time']),  # stopped by print_logs
            ('print', e, s + 1, None),
            ('METRIC_STATS_PRINTED', e, s + 1, {'loss': 2}),
            ('TIME_METRIC_STATS_PRINTED', e, s + 1, {'step_time': 2}),
            ('AFTER_STEP', e, s + 1, None),
            ('METRICS_COLLECTED', e, s + 1, ['valid_loss']),
            ('TIME_METRICS_COLLECTED', e, s + 1, ['valid_time']),
        ]

    assert log == (
        [('ENTER_LOOP', 0, 0, None), ('BEFORE_EPOCH', 1, 0, None)]
        + epoch_events(1, 1)
        + [('TIME_METRICS_COLLECTED', 1, 2, ['epoch_time']),  # stopped by print_logs
           ('print', 1, 2, None),
           ('METRIC_STATS_PRINTED', 1, 2, {'loss': 2, 'valid_loss': 1}),
           ('TIME_METRIC_STATS_PRINTED', 1, 2,
            {'epoch_time': 1, 'step_time': 2, 'valid_time': 1}),
           ('AFTER_EPOCH', 1, 2, None),
           ('BEFORE_EPOCH', 2, 2, None)]
        + epoch_events(2, 3)
        + [('AFTER_EPOCH', 2, 4, None),
           ('TIME_METRICS_COLLECTED', 2, 4, ['epoch_time']),  # epoch ended
           ('EXIT_LOOP', 2, 4, None)]
    )


def test_automatic_timers_fire_time_metrics_collected_only(fake_clock):
    collected, timed = [], []
    loop = spt.TrainLoop(max_epoch=1, clock=fake_clock, print_func=lambda s: None)
    loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(dict(m)))
    loop.events.on(EventKeys.TIME_METRICS_COLLECTED, lambda lp, m: timed.append(dict(m)))
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([1]):
                fake_clock.advance(0.25)
            fake_clock.advance(0.5)
    assert collected == []
    assert timed == [{'step_time': 0.25}, {'epoch_time': 0.75}]


def test_after_and_exit_handlers_run_in_reverse_registration_order():
    calls = []
    loop = spt.TrainLoop(max_epoch=1)
    for name in ('first', 'second'):
        for key in (EventKeys.ENTER_LOOP, EventKeys.BEFORE_EPOCH, EventKeys.BEFORE_STEP,
                    EventKeys.AFTER_STEP, EventKeys.AFTER_EPOCH, EventKeys.EXIT_LOOP):
            loop.events.on(key, lambda lp, k=key, n=name: calls.append((k.name, n)))
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([0]):
                pass
    assert calls == [
        ('ENTER_LOOP', 'first'), ('ENTER_LOOP', 'second'),
        ('BEFORE_EPOCH', 'first'), ('BEFORE_EPOCH', 'second'),
        ('BEFORE_STEP', 'first'), ('BEFORE_STEP', 'second'),
        ('AFTER_STEP', 'second'), ('AFTER_STEP', 'first'),
        ('AFTER_EPOCH', 'second'), ('AFTER_EPOCH', 'first'),
        ('EXIT_LOOP', 'second'), ('EXIT_LOOP', 'first'),
    ]


STRUCTURE_EVENTS = (EventKeys.ENTER_LOOP, EventKeys.EXIT_LOOP,
                    EventKeys.BEFORE_EPOCH, EventKeys.AFTER_EPOCH,
                    EventKeys.BEFORE_STEP, EventKeys.AFTER_STEP,
                    EventKeys.TIME_METRICS_COLLECTED)


def test_break_out_of_the_step_loop(fake_clock):
    log = []
    loop = spt.TrainLoop(max_epoch=1, clock=fake_clock)
    record_events(loop, log, STRUCTURE_EVENTS)
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps([1, 2, 3]):
                if step == 2:
                    break
    assert log == [
        ('ENTER_LOOP', 0, 0, None),
        ('BEFORE_EPOCH', 1, 0, None),
        ('BEFORE_STEP', 1, 1, None),
        ('AFTER_STEP', 1, 1, None),
        ('TIME_METRICS_COLLECTED', 1, 1, ['step_time']),
        ('BEFORE_STEP', 1, 2, None),
        # step 2 was left by `break`: no AFTER_STEP and no step_time
        ('AFTER_EPOCH', 1, 2, None),
        ('TIME_METRICS_COLLECTED', 1, 2, ['epoch_time']),
        ('EXIT_LOOP', 1, 2, None),
    ]
    assert not loop.within_step and not loop.within_epoch


def test_break_out_of_the_epoch_loop(fake_clock):
    log = []
    loop = spt.TrainLoop(max_epoch=3, clock=fake_clock)
    record_events(loop, log, STRUCTURE_EVENTS)
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([1]):
                pass
            break
    assert log == [
        ('ENTER_LOOP', 0, 0, None),
        ('BEFORE_EPOCH', 1, 0, None),
        ('BEFORE_STEP', 1, 1, None),
        ('AFTER_STEP', 1, 1, None),
        ('TIME_METRICS_COLLECTED', 1, 1, ['step_time']),
        ('EXIT_LOOP', 1, 1, None),
    ]
    assert loop.epoch == 1 and not loop.within_epoch


@pytest.mark.parametrize('error_type', [ValueError, KeyboardInterrupt])
def test_exception_in_a_step(fake_clock, error_type):
    log = []
    loop = spt.TrainLoop(max_epoch=2, clock=fake_clock)
    record_events(loop, log, STRUCTURE_EVENTS)
    with pytest.raises(error_type, match='boom'):
        with loop:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps([1, 2, 3]):
                    if step == 2:
                        raise error_type('boom')
    assert log == [
        ('ENTER_LOOP', 0, 0, None),
        ('BEFORE_EPOCH', 1, 0, None),
        ('BEFORE_STEP', 1, 1, None),
        ('AFTER_STEP', 1, 1, None),
        ('TIME_METRICS_COLLECTED', 1, 1, ['step_time']),
        ('BEFORE_STEP', 1, 2, None),
        # no AFTER_STEP, no AFTER_EPOCH, no timers: only EXIT_LOOP
        ('EXIT_LOOP', 1, 2, None),
    ]
    assert not loop.within_step and not loop.within_epoch


def test_exception_in_a_handler_propagates_and_exit_loop_still_fires():
    log = []
    loop = spt.TrainLoop(max_epoch=1)
    record_events(loop, log, (EventKeys.EXIT_LOOP,))

    def failing(lp):
        raise RuntimeError('handler failed')

    loop.events.on(EventKeys.AFTER_STEP, failing)
    with pytest.raises(RuntimeError, match='handler failed'):
        with loop:
            for _ in loop.iter_epochs():
                for _ in loop.iter_steps([1, 2]):
                    pass
    assert log == [('EXIT_LOOP', 1, 1, None)]


def test_handler_removed_by_its_handle_no_longer_fires():
    calls = []
    loop = spt.TrainLoop(max_epoch=1)
    handle = loop.events.on(EventKeys.AFTER_STEP, lambda lp: calls.append(lp.step))
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps([1, 2, 3]):
                if step == 2:
                    handle.remove()
    assert calls == [1]


def test_unknown_event_key_fails_at_registration():
    loop = spt.TrainLoop()
    with pytest.raises(KeyError, match=re.escape("`event_key` is not allowed: 'after_stpe'")):
        loop.events.on('after_stpe', lambda lp: None)


# ----------------------------------------------------------------- printing
def test_epoch_level_log_line(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=1, show_eta=False)
    with loop:
        for _ in loop.iter_epochs():
            fake_clock.advance(0.5)
            for step, x in loop.iter_steps([0., 1., 2., 3.]):
                fake_clock.advance(0.25 * step)          # 0.25, 0.5, 0.75, 1.0
                loop.collect_metrics(x=x)
            loop.collect_metrics(y=1)
            fake_clock.advance(0.25)
            loop.print_logs()
    # epoch: 0.5 + 2.5 + 0.25 = 3.25s; steps: mean 0.625s, population std
    # 0.25 * sqrt(1.25) = 0.2795s; x: mean 1.5, std sqrt(1.25) = 1.11803
    assert lines == [
        '[Step 4] epoch time: 3.25s; step time: 0.625s (±0.2795s); x: 1.5 (±1.11803); y: 1']


def test_log_line_with_timers_only_and_no_steps(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=1, show_eta=False)
    with loop:
        for _ in loop.iter_epochs():
            with loop.timeit('y_time'):
                fake_clock.advance(2)
            with loop.timeit('x_timer'):
                fake_clock.advance(65)
            loop.print_logs()
    assert lines == ['[Step 0] epoch time: 1m 7s; x timer: 1m 5s; y time: 2s']


def test_print_logs_at_step_level_and_epoch_level(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=2, show_eta=False)
    with loop:
        for epoch in loop.iter_epochs():
            scale = 10 ** (epoch - 1)
            for step, x in loop.iter_steps([1, 2, 3]):
                fake_clock.advance(0.5)
                loop.collect_metrics(x=x * scale)
                if step % 3 != 1:          # not after the first step of an epoch
                    loop.print_logs()
            loop.print_logs()
    assert lines == [
        # step stats pile up until a step-level print, which clears them
        '[Epoch 1/2, Step 2] step time: 0.5s (±0s); x: 1.5 (±0.5)',
        '[Epoch 1/2, Step 3] step time: 0.5s; x: 3',
        # the epoch stats hold everything since the last epoch-level print
        '[Epoch 1/2, Step 3] epoch time: 1.5s; step time: 0.5s (±0s); x: 2 (±0.816497)',
        '[Epoch 2/2, Step 5] step time: 0.5s (±0s); x: 15 (±5)',
        '[Epoch 2/2, Step 6] step time: 0.5s; x: 30',
        '[Epoch 2/2, Step 6] epoch time: 1.5s; step time: 0.5s (±0s); x: 20 (±8.16497)',
    ]


def test_print_logs_with_nothing_new_prints_only_the_time(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=1, show_eta=False)
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(x=1.)
            fake_clock.advance(2)
            loop.print_logs()
            fake_clock.advance(3)
            loop.print_logs()     # the epoch timer already stopped: nothing left
    assert lines == ['[Step 0] epoch time: 2s; x: 1', '[Step 0] ']


def test_stats_printed_events_hold_only_fresh_collectors(fake_clock):
    printed = []
    loop = make_loop([], fake_clock, max_epoch=1)
    loop.events.on(EventKeys.METRIC_STATS_PRINTED,
                   lambda lp, stats: printed.append(
                       {k: (c.has_value, float(c.mean)) for k, c in stats.items()}))
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(a=1., b=2.)
            loop.print_logs()
            loop.collect_metrics(b=4.)
            loop.print_logs()
    assert printed == [{'a': (True, 1.), 'b': (True, 2.)}, {'b': (True, 4.)}]


def test_leaving_iter_epochs_clears_both_loggers(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, show_eta=False)
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([1]):
                loop.collect_metrics(x=1.)
            loop.collect_metrics(y=1.)
            break
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([1]):
                loop.collect_metrics(x=3.)
                loop.print_logs()
            loop.collect_metrics(y=5.)
            loop.print_logs()
            break
    assert lines == ['[Epoch 2, Step 2] step time: 0s; x: 3',
                     '[Epoch 2, Step 2] epoch time: 0s; step time: 0s; x: 3; y: 5']


def test_println_without_tag_works_anywhere():
    lines = []
    loop = spt.TrainLoop(print_func=lines.append)
    loop.println('before entering')
    with loop:
        loop.println('inside the with block')
    loop.println('after leaving')
    assert lines == ['before entering', 'inside the with block', 'after leaving']


@pytest.mark.parametrize('max_epoch,max_step,expected', [
    (3, None, '[Epoch 1/3, Step 1] hello'),
    (None, None, '[Epoch 1, Step 1] hello'),
    (None, 8, '[Epoch 1, Step 1/8] hello'),
    (2, 8, '[Epoch 1/2, Step 1/8] hello'),
    (1, None, '[Step 1] hello'),         # the Epoch tag is left out for max_epoch == 1
    (1, 8, '[Step 1/8] hello'),
])
def test_println_with_tag(max_epoch, max_step, expected):
    lines = []
    loop = spt.TrainLoop(max_epoch=max_epoch, max_step=max_step, print_func=lines.append)
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([1]):
                loop.println('hello', with_tag=True)  # progress is 0: no ETA yet
            break
    assert lines == [expected]


def test_eta_in_the_tag_with_max_step(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_step=8)
    durations = [1, 3, 2, 2, 1, 1, 1, 1]
    with loop:
        for _ in loop.iter_epochs():
            for step in loop.iter_steps():
                fake_clock.advance(durations[step - 1])
                if step in (2, 4):
                    loop.print_logs()
    # step 2: 4s spent for 2/8 of the steps -> ETA 4 / 0.25 * 0.75 = 12s
    # step 4: 8s spent for 4/8 of the steps -> ETA 8 / 0.5 * 0.5 = 8s
    assert lines == ['[Epoch 1, Step 2/8, ETA 12s] step time: 2s (±1s)',
                     '[Epoch 1, Step 4/8, ETA 8s] step time: 2s (±0s)']


def test_eta_with_max_epoch_appears_after_the_first_epoch(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=10)
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(5)):
                fake_clock.advance(1)
                if step % 5 == 0:
                    loop.print_logs()
            loop.print_logs()
            if epoch == 2:
                break
    # epoch 1: progress is 0 until the epoch-level print, then 1/10 after 5s:
    # ETA 5 / 0.1 * 0.9 = 45s.  Epoch 2 knows 5 steps per epoch: at step 10,
    # 10s for 10/50 -> 40s left.
    assert lines == [
        '[Epoch 1/10, Step 5] step time: 1s (±0s)',
        '[Epoch 1/10, Step 5, ETA 45s] epoch time: 5s; step time: 1s (±0s)',
        '[Epoch 2/10, Step 10, ETA 40s] step time: 1s (±0s)',
        '[Epoch 2/10, Step 10, ETA 40s] epoch time: 5s; step time: 1s (±0s)',
    ]


def test_show_eta_false_hides_the_eta(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_step=4, show_eta=False)
    with loop:
        for _ in loop.iter_epochs():
            for step in loop.iter_steps():
                fake_clock.advance(1)
                if step == 2:
                    loop.println('x', with_tag=True)
                    # the running step is not done: 2s for 1/4 -> 6s left
                    assert loop.get_eta() == 6.
    assert lines == ['[Epoch 1, Step 2/4] x']


def test_get_progress_with_max_epoch(fake_clock):
    loop = make_loop([], fake_clock, max_epoch=10)
    assert loop.get_progress() == 0.
    progress = []
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(5)):
                progress.append((step, loop.get_progress()))
                if step == 3:
                    loop.print_logs()
                    progress.append(('printed at 3', loop.get_progress()))
            progress.append(('after steps', loop.get_progress()))
            loop.print_logs()
            progress.append(('epoch printed', loop.get_progress()))
            if epoch == 2:
                break
    # epoch 1: no steps per epoch known yet, so progress counts whole epochs
    assert progress[:8] == [
        (1, 0.), (2, 0.), (3, 0.), ('printed at 3', 0.), (4, 0.), (5, 0.),
        ('after steps', 0.), ('epoch printed', 0.1)]
    # epoch 2: 5 steps per epoch, so the budget is 10 * 5 = 50 steps, and a
    # running step is not done yet: (step - 1) / 50
    assert progress[8:] == [(6, 0.1), (7, 0.12), (8, 0.14), (9, 0.16), (10, 0.18),
                            ('after steps', 0.2), ('epoch printed', 0.2)]


def test_get_progress_is_none_without_limits():
    loop = spt.TrainLoop()
    assert loop.get_progress() is None
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([1]):
                assert loop.get_progress() is None
                assert loop.get_eta() is None
            break


# --------------------------------------------------------- best valid metric
def test_best_metric_mark_on_step_level_logs(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=1, show_eta=False)
    assert loop.best_valid_metric is None
    best = []
    with loop:
        for _ in loop.iter_epochs():
            for _, v in loop.iter_steps([0.8, 0.6, 0.7]):
                fake_clock.advance(0.5)
                loop.collect_metrics(valid_loss=v)
                best.append(loop.best_valid_metric)
                loop.print_logs()
    assert lines == ['[Step 1] step time: 0.5s; valid loss: 0.8 (*)',
                     '[Step 2] step time: 0.5s; valid loss: 0.6 (*)',
                     '[Step 3] step time: 0.5s; valid loss: 0.7']
    assert best == [0.8, 0.6, 0.6]
    assert loop.best_valid_metric == 0.6


def test_best_mark_of_an_epoch_line_needs_a_new_best_since_its_last_line(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=1, show_eta=False)
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(valid_loss=0.5)
            loop.collect_metrics(valid_loss=0.9)      # not better: the epoch reached 0.5
            loop.print_logs()
            loop.collect_metrics(valid_loss=0.5)      # equal is not better
            loop.print_logs()
    assert lines == ['[Step 0] epoch time: 0s; valid loss: 0.7 (±0.2) (*)',
                     '[Step 0] valid loss: 0.5']


def test_valid_acc_is_larger_is_better(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=1, show_eta=False,
                     valid_metric_name='valid_acc')
    assert loop.valid_metric_smaller_is_better is False
    with loop:
        for _ in loop.iter_epochs():
            for _, v in loop.iter_steps([0.6, 0.8, 0.7]):
                loop.collect_metrics(valid_acc=v)
                loop.print_logs()
    assert lines == ['[Step 1] step time: 0s; valid acc: 0.6 (*)',
                     '[Step 2] step time: 0s; valid acc: 0.8 (*)',
                     '[Step 3] step time: 0s; valid acc: 0.7']
    assert loop.best_valid_metric == 0.8


def test_metrics_collected_fires_before_the_best_metric_is_updated():
    seen = []
    loop = spt.TrainLoop(max_epoch=1)
    loop.events.on(EventKeys.METRICS_COLLECTED,
                   lambda lp, m: seen.append((m['valid_loss'], lp.best_valid_metric)))
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(valid_loss=0.5)
            loop.collect_metrics(valid_loss=0.25)
    assert seen == [(0.5, None), (0.25, 0.5)]
    assert loop.best_valid_metric == 0.25


def test_leaving_iter_epochs_clears_the_best_mark(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, show_eta=False)
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(valid_loss=0.5)     # a new best, never printed
            break
        for _ in loop.iter_epochs():
            loop.collect_metrics(x=1)
            loop.print_logs()
            break
    assert lines == ['[Epoch 2, Step 0] epoch time: 0s; x: 1']
    assert loop.best_valid_metric == 0.5


@pytest.mark.parametrize('name,smaller_is_better', [
    ('valid_loss', True), ('valid_acc', False), ('valid_accuracy', False),
    ('y', True), ('acc_loss', True),
])
def test_valid_metric_direction_is_inferred_from_the_name(name, smaller_is_better):
    loop = spt.TrainLoop(valid_metric_name=name)
    assert loop.valid_metric_name == name
    assert loop.valid_metric_smaller_is_better is smaller_is_better


def test_valid_metric_direction_given_explicitly():
    loop = spt.TrainLoop(valid_metric_name='valid_acc', valid_metric_smaller_is_better=True)
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(valid_acc=0.5)
            loop.collect_metrics(valid_acc=0.9)
            loop.collect_metrics(valid_acc=0.3)
            break
    assert loop.best_valid_metric == 0.3


def test_no_valid_metric_name_turns_tracking_off(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=1, show_eta=False, valid_metric_name=None)
    assert loop.valid_metric_name is None
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(valid_loss=0.5)
            loop.print_logs()
    assert lines == ['[Step 0] epoch time: 0s; valid loss: 0.5']
    assert loop.best_valid_metric is None


# ------------------------------------------------- timeit, metric_collector
def test_timeit_records_the_block_and_nothing_when_it_raises(fake_clock):
    lines, timed = [], []
    loop = make_loop(lines, fake_clock, max_epoch=1, show_eta=False)
    loop.events.on(EventKeys.TIME_METRICS_COLLECTED, lambda lp, m: timed.append(dict(m)))
    with loop:
        for _ in loop.iter_epochs():
            with loop.timeit('eval_time'):
                fake_clock.advance(1.5)
            with pytest.raises(ValueError, match='broken'):
                with loop.timeit('broken_time'):
                    fake_clock.advance(2)
                    raise ValueError('broken')
            loop.print_logs()
    assert timed == [{'eval_time': 1.5}, {'epoch_time': 3.5}]
    assert lines == ['[Step 0] epoch time: 3.5s; eval time: 1.5s']


def test_timeit_inside_a_step_goes_to_both_loggers(fake_clock):
    lines = []
    loop = make_loop(lines, fake_clock, max_epoch=1, show_eta=False)
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([1]):
                with loop.timeit('fwd_time'):
                    fake_clock.advance(0.25)
                fake_clock.advance(0.25)
                loop.print_logs()
            loop.print_logs()
    assert lines == ['[Step 1] fwd time: 0.25s; step time: 0.5s',
                     '[Step 1] epoch time: 0.5s; fwd time: 0.25s; step time: 0.5s']


def test_metric_collector_records_the_weighted_mean(fake_clock):
    lines, collected = [], []
    loop = make_loop(lines, fake_clock, max_epoch=1, show_eta=False)
    loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(dict(m)))
    with loop:
        for _ in loop.iter_epochs():
            with loop.metric_collector('x') as c:
                c.collect(2)
                c.collect(3, weight=3)
            with pytest.raises(ValueError, match='broken'):
                with loop.metric_collector('z') as c:
                    c.collect(5)
                    raise ValueError('broken')
            with loop.metric_collector('empty'):
                pass
            loop.print_logs()
    assert collected == [{'x': 2.75}]        # (2 * 1 + 3 * 3) / 4
    assert lines == ['[Step 0] epoch time: 0s; x: 2.75']


# ------------------------------------------------------------ metric values
def test_metric_values_of_all_accepted_kinds(fake_clock):
    lines, collected = [], []
    loop = make_loop(lines, fake_clock, max_epoch=1, show_eta=False)
    loop.events.on(EventKeys.METRICS_COLLECTED, lambda lp, m: collected.append(m))
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(loss=tf.constant(1.))
            loop.collect_metrics({'loss': tf.constant([2., 3.])})
            loop.collect_metrics({'acc': np.float32(0.5)}, n=np.array([1, 2, 3]))
            loop.collect_metrics(k=np.int64(4), v=tf.Variable(6.))
            loop.collect_metrics({})
            loop.print_logs()
    # loss: samples 1, 2, 3; n: samples 1, 2, 3 -> mean 2, std sqrt(2/3)
    assert lines == ['[Step 0] epoch time: 0s; acc: 0.5; k: 4; loss: 2 (±0.816497); '
                     'n: 2 (±0.816497); v: 6']
    assert isinstance(collected[0]['loss'], tf.Tensor)     # handlers see what was given
    assert sorted(collected[2]) == ['acc', 'n']      # a dict and kwargs merge into one
    assert collected[4] == {}


def test_metrics_computed_by_tensorflow_are_printed(style, fake_clock):
    # a scalar and an array, as one session.run returns them in graph style
    compute = style.fed(lambda x: (tf.reduce_mean(x), x * 2.), [None])
    lines = []
    with spt.TrainLoop(max_epoch=1, show_eta=False, print_func=lines.append,
                       clock=fake_clock) as loop:
        for _ in loop.iter_epochs():
            for _, batch in loop.iter_steps([[1., 3.], [5., 7.]]):
                m, v = compute(batch)
                loop.collect_metrics(mean=m, doubled=v)
            loop.print_logs()
    # mean: samples 2 and 6; doubled: samples 2, 6, 10, 14 (std sqrt(20))
    assert lines == ['[Step 2] epoch time: 0s; step time: 0s (±0s); '
                     'doubled: 8 (±4.47214); mean: 4 (±2)']


def test_eager_tensor_as_validation_metric(fake_clock):
    loop = make_loop([], fake_clock, max_epoch=1)
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(valid_loss=tf.constant(0.25))
            loop.collect_metrics(valid_loss=tf.constant([0.5, 0.]))   # mean 0.25: not better
            loop.collect_metrics(valid_loss=np.array([0.125, 0.125]))
    assert loop.best_valid_metric == 0.125
    assert type(loop.best_valid_metric) is float


# ----------------------------------------------------------- summary table
def test_print_training_summary_of_keras_variables():
    model = keras.Sequential([keras.Input((4,)),
                              keras.layers.Dense(3, name='hidden'),
                              keras.layers.Dense(2, name='out')], name='net')
    lines = []
    loop = spt.TrainLoop(model.trainable_variables, print_func=lines.append)
    with loop:
        loop.print_training_summary()
    assert '\n'.join(lines) == (
        'Trainable Parameters (23 in total)\n'
        '----------------------------------\n'
        'net/hidden/kernel       (4, 3)  12\n'
        'net/hidden/bias         (3,)     3\n'
        'net/out/kernel          (3, 2)   6\n'
        'net/out/bias            (2,)     2\n'
    )


def test_print_training_summary_of_tf_variables_with_groups(style):
    params = [style.variable(np.zeros([3, 2]), 'q_net/w'),
              style.variable(np.zeros([2]), 'q_net/b'),
              style.variable(np.zeros([2, 4]), 'p_net/w'),
              style.variable(np.zeros([1]), 'beta')]
    lines = []
    loop = spt.TrainLoop(params, var_groups=['q_net', 'p_net/'], print_func=lines.append)
    assert loop.var_groups == ['q_net', 'p_net/']
    with loop:
        loop.print_training_summary()
    assert '\n'.join(lines) == (
        'Trainable Parameters (17 in total)\n'
        '==================================\n'
        'q_net/                (8 in total)\n'
        '----------------------------------\n'
        'w                        (3, 2)  6\n'
        'b                        (2,)    2\n'
        '\n'
        'p_net/                (8 in total)\n'
        '----------------------------------\n'
        'w                        (2, 4)  8\n'
        '\n'
        'Other Parameters      (1 in total)\n'
        '----------------------------------\n'
        'beta                       (1,)  1\n'
    )


def test_print_training_summary_of_a_dict_keeps_keys_and_order():
    params = {'b': tf.Variable(tf.zeros([10])), 'a': tf.Variable(tf.zeros([10, 100]))}
    lines = []
    loop = spt.TrainLoop(params, print_func=lines.append)
    assert list(loop.param_vars) == ['b', 'a']
    with loop:
        loop.print_training_summary()
    assert lines == ['Trainable Parameters (1,010 in total)\n'
                     '-------------------------------------\n'
                     'b                    (10,)         10\n'
                     'a                    (10, 100)  1,000\n']   # one record, a blank line after


def test_print_training_summary_without_variables_prints_nothing():
    lines = []
    with spt.TrainLoop(print_func=lines.append) as loop:
        loop.print_training_summary()
    assert lines == []


# ------------------------------------------------------------- state dict
def test_state_dict_round_trip_continues_the_counters(fake_clock):
    loop = make_loop([], fake_clock, max_epoch=2)
    with loop:
        for _ in loop.iter_epochs():
            for _, v in loop.iter_steps([0.5, 0.3, 0.4]):
                loop.collect_metrics(valid_loss=v)
    state = json.loads(json.dumps(loop.state_dict()))       # plain data
    assert {k: state[k] for k in ('epoch', 'step', 'best_valid_metric')} == {
        'epoch': 2, 'step': 6, 'best_valid_metric': 0.3}

    lines = []
    loop2 = make_loop(lines, fake_clock, max_epoch=4, show_eta=False)
    loop2.load_state_dict(state)
    assert (loop2.epoch, loop2.step, loop2.best_valid_metric) == (2, 6, 0.3)
    assert loop2.get_progress() == 0.5              # 6 of 4 epochs * 3 steps
    seen = []
    with loop2:
        for epoch in loop2.iter_epochs():
            for step, v in loop2.iter_steps([0.35, 0.2, 0.25]):
                seen.append((epoch, step))
                if epoch == 3:
                    loop2.collect_metrics(valid_loss=v)
                    loop2.print_logs()
    assert seen == [(3, 7), (3, 8), (3, 9), (4, 10), (4, 11), (4, 12)]
    assert lines == ['[Epoch 3/4, Step 7] step time: 0s; valid loss: 0.35',
                     '[Epoch 3/4, Step 8] step time: 0s; valid loss: 0.2 (*)',
                     '[Epoch 3/4, Step 9] step time: 0s; valid loss: 0.25']
    assert loop2.state_dict()['best_valid_metric'] == 0.2


# --------------------------------------------------------------- components
class RecordingComponent(spt.LoopComponent):
    def __init__(self, name, log):
        self.name = name
        self.log = log

    def on_enter(self, loop):
        self.log.append(f'{self.name}.on_enter')
        loop.events.on(EventKeys.AFTER_EPOCH,
                       lambda lp: self.log.append(f'{self.name}.after_epoch {lp.epoch}'))

    def on_exit(self, loop, error):
        self.log.append((f'{self.name}.on_exit', error))


def test_component_hooks_run_around_enter_and_exit_loop():
    log = []
    loop = spt.TrainLoop(max_epoch=1)
    loop.add_component(RecordingComponent('a', log))
    loop.add_component(RecordingComponent('b', log))
    loop.events.on(EventKeys.ENTER_LOOP, lambda lp: log.append('ENTER_LOOP'))
    loop.events.on(EventKeys.EXIT_LOOP, lambda lp: log.append('EXIT_LOOP'))
    with loop:
        for _ in loop.iter_epochs():
            log.append('epoch body')
    assert log == ['a.on_enter', 'b.on_enter', 'ENTER_LOOP', 'epoch body',
                   'b.after_epoch 1', 'a.after_epoch 1', 'EXIT_LOOP',
                   ('b.on_exit', None), ('a.on_exit', None)]


def test_component_on_exit_receives_the_error():
    log = []
    loop = spt.TrainLoop(max_epoch=1)
    loop.add_component(RecordingComponent('a', log))
    loop.add_component(RecordingComponent('b', log))
    loop.events.on(EventKeys.EXIT_LOOP, lambda lp: log.append('EXIT_LOOP'))
    with pytest.raises(ValueError, match='in the body') as excinfo:
        with loop:
            for _ in loop.iter_epochs():
                raise ValueError('in the body')
    error = excinfo.value
    assert log == ['a.on_enter', 'b.on_enter', 'EXIT_LOOP',
                   ('b.on_exit', error), ('a.on_exit', error)]


# ---------------------------------------------------------------- end to end
def test_end_to_end_keras_training_on_digits():
    keras.utils.set_random_seed(1)
    digits = load_digits()
    x = (digits.data[:300] / 16.).astype(np.float32)
    y = digits.target[:300].astype(np.int32)
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(300, seed=1).batch(50)

    model = keras.Sequential([keras.Input((64,)),
                              keras.layers.Dense(32, activation='relu'),
                              keras.layers.Dense(10)])
    optimizer = keras.optimizers.Adam(0.01)
    optimizer.build(model.trainable_variables)
    loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(bx, by):
        with tf.GradientTape() as tape:
            loss = loss_fn(by, model(bx, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    lines = []
    with spt.TrainLoop(model.trainable_variables, max_epoch=5, show_eta=False,
                       print_func=lines.append) as loop:
        loop.print_training_summary()
        for _ in loop.iter_epochs():
            for _, (bx, by) in loop.iter_steps(dataset):
                loop.collect_metrics(loss=train_step(bx, by))
            loop.print_logs()

    # 64 * 32 + 32 + 32 * 10 + 10 parameters
    assert lines[0].splitlines()[0].split() == ['Trainable', 'Parameters', '(2,410', 'in',
                                                'total)']
    epoch_lines = lines[1:]
    assert [line.split(']')[0] for line in epoch_lines] == [
        f'[Epoch {e}/5, Step {6 * e}' for e in range(1, 6)]
    losses = [float(re.search(r'; loss: (\S+) \(±', line).group(1)) for line in epoch_lines]
    assert losses[-1] < losses[0]
    assert loop.step == 30          # 5 epochs of 300 / 50 batches
