"""Profiler in TF1 graph code: the ops ``session.run`` runs inside the window are
traced by the same profiler (and none outside it); the time breakdown of a
loop of ``session.run`` steps on a fake clock, with a real checkpoint save.

The eager twins are in tests/scaffold/test_profiler.py.
"""

import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet import EventKeys
from tfsnippet.scaffold.components.profiler import BREAKDOWN_PARTS
from tests.helpers import FakeClock
from tests.helpers.profiler_trace import trace_event_counts, trace_files

v1 = tf.compat.v1


def test_the_session_runs_of_the_window_are_traced(session, tmp_path):
    w = v1.get_variable('w', shape=[], initializer=v1.zeros_initializer())
    op = v1.assign_add(w, 1.)
    session.run(w.initializer)
    loop = spt.TrainLoop([w], max_epoch=2, summary_dir=str(tmp_path), print_func=lambda x: None)
    loop.add_component(spt.Profiler(steps=(2, 4)))
    seen = {}
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(3)):
                seen[step] = bool(trace_files(tmp_path))
                session.run(op)
    assert [s for s, written in seen.items() if written] == [5, 6]
    assert trace_event_counts(tmp_path)['SessionRun'] == 3   # steps 2, 3 and 4
    assert session.run(w) == 6.


def test_an_epoch_window_and_a_window_ending_before_it_starts(session, tmp_path):
    x = v1.placeholder(tf.float32, [])
    y = x * 2.
    loop = spt.TrainLoop([], max_epoch=3, print_func=lambda line: None)
    loop.add_component(spt.Profiler(epochs=(3, 3), logdir=str(tmp_path)))
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                session.run(y, {x: 1.})
    assert trace_event_counts(tmp_path)['SessionRun'] == 2
    with pytest.raises(ValueError, match=r'`epochs`=\(3, 2\) ends before it starts'):
        spt.Profiler(epochs=(3, 2))


def test_the_breakdown_of_session_run_steps_adds_up(session, tmp_path):
    clock = FakeClock()
    w = v1.get_variable('w', shape=[], initializer=v1.zeros_initializer())
    op = v1.assign_add(w, 1.)
    session.run(w.initializer)
    held = []
    loop = spt.TrainLoop([w], max_epoch=2, clock=clock, print_func=lambda x: None,
                         checkpoint_dir=str(tmp_path), checkpoint_epoch_freq=1)
    profiler = spt.Profiler(breakdown=True)
    loop.add_component(profiler)
    loop.events.on(EventKeys.LOOP_HELD, lambda loop, cause, secs: held.append(cause))
    breakdowns = []
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(4)):
                session.run(op)
                clock.advance(.25)
            clock.advance(1.)
            loop.print_logs()
            breakdowns.append(dict(profiler.last_breakdown))
    for b in breakdowns:
        assert b['seconds'] == pytest.approx(2.)
        assert b['time_share_step'] == pytest.approx(.5)
        assert b['time_share_outside'] == pytest.approx(.5)
        assert sum(b[name] for name, _ in BREAKDOWN_PARTS) == pytest.approx(1.)
    assert held == ['checkpoint', 'checkpoint']   # the epoch saves, timed
