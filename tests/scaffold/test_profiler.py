"""Profiler: a TensorFlow profiler trace of a window of steps or epochs in the
summary folder, nothing outside it; the time breakdown of each epoch (shares
that add up, on a fake clock), printed and sent to summaries and sinks; the
hot path left alone; bad input.  The tests taking ``style`` run in both TF
styles (in graph style the traced steps are ``session.run`` calls).
"""

import os

import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet import EventKeys
from tfsnippet.scaffold.components.profiler import BREAKDOWN_PARTS
from tfsnippet.scaffold.components.run_recorder import MetricRecorder
from tests.helpers import FakeClock, read_scalars
from tests.helpers.profiler_trace import trace_event_counts, trace_files

SHARES = [name for name, _ in BREAKDOWN_PARTS]


def function_runs(logdir, name):
    """How many times the tf.function `name` ran in the traces under `logdir`."""
    return sum(n for event, n in trace_event_counts(logdir).items()
               if event.startswith('EagerLocalExecute: __inference_' + name))


def traced_step(style, var):
    """A step adding 1 to `var` (a ``tf.function`` in eager style, a ``session.run``
    in graph style), and ``runs(logdir)``: how many times it ran in the traces."""
    if style.is_graph:
        op = var.assign_add(1.)
        return (lambda: style.session.run(op)), (
            lambda logdir: trace_event_counts(logdir)['SessionRun'])

    @tf.function
    def train_step():
        return var.assign_add(1.)

    return train_step, lambda logdir: function_runs(logdir, 'train_step')


def test_a_step_window_is_traced_into_the_summary_folder_and_nothing_else(style, tmp_path):
    var = style.variable(0., 'w')
    train_step, runs = traced_step(style, var)
    lines, seen = [], {}
    loop = spt.TrainLoop([var], max_epoch=2, summary_dir=str(tmp_path), print_func=lines.append)
    loop.add_component(spt.Profiler(steps=(3, 4)))
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(3)):
                seen[step] = bool(trace_files(tmp_path))
                train_step()
    # nothing written before the window closed (after step 4), the trace there after
    assert seen == {1: False, 2: False, 3: False, 4: False, 5: True, 6: True}
    assert len(trace_files(tmp_path)) == 1
    assert runs(tmp_path) == 2   # steps 3 and 4 only
    assert any(f'Profiler trace of steps 3-4 written to {tmp_path}' in line for line in lines)
    assert style.value(var) == 6.


def test_an_epoch_window_into_its_own_logdir(style, tmp_path):
    train_step, runs = traced_step(style, style.variable(0., 'w'))
    loop = spt.TrainLoop([], max_epoch=3, print_func=lambda line: None)
    loop.add_component(spt.Profiler(epochs=(2, 2), logdir=str(tmp_path / 'trace')))
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                train_step()
    assert runs(tmp_path / 'trace') == 2   # epoch 2's two steps


def test_a_loop_left_inside_the_window_keeps_the_part_traced(tmp_path):
    loop = spt.TrainLoop([], max_epoch=1, summary_dir=str(tmp_path), print_func=lambda x: None)
    loop.add_component(spt.Profiler(steps=(2, 10)))
    with pytest.raises(KeyboardInterrupt):
        with loop:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(5)):
                    if step == 3:
                        raise KeyboardInterrupt
    assert len(trace_files(tmp_path)) == 1
    tf.profiler.experimental.start(str(tmp_path / 'again'))   # no trace left running
    tf.profiler.experimental.stop()


def test_outside_its_window_the_profiler_adds_no_step_handler(tmp_path):
    counts = []
    loop = spt.TrainLoop([], max_epoch=1, summary_dir=str(tmp_path), print_func=lambda x: None)
    loop.add_component(spt.Profiler(steps=(2, 2)))
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(4)):
                counts.append((len(loop.events.handlers(EventKeys.BEFORE_STEP)),
                               len(loop.events.handlers(EventKeys.AFTER_STEP))))
    # before: one cheap check; in the window: one; after it: none at all
    assert counts == [(1, 0), (0, 1), (0, 0), (0, 0)]


def test_a_window_traced_before_a_resume_is_not_traced_again(tmp_path):
    def run(max_epoch):
        loop = spt.TrainLoop([], max_epoch=max_epoch, summary_dir=str(tmp_path / 'logs'),
                             checkpoint_dir=str(tmp_path / 'ckpt'), checkpoint_epoch_freq=1,
                             print_func=lambda x: None)
        loop.add_component(spt.Profiler(steps=(1, 2)))
        with loop:
            for _ in loop.iter_epochs():
                for _ in loop.iter_steps(range(2)):
                    pass
    run(1)
    run(2)   # resumed at step 2: the window is done, nothing to trace, no error
    assert len(trace_files(tmp_path / 'logs')) == 1


def test_a_window_in_the_past_after_a_resume_is_an_error(tmp_path):
    def loop_with(profiler, max_epoch):
        loop = spt.TrainLoop([], max_epoch=max_epoch, checkpoint_dir=str(tmp_path / 'ckpt'),
                             checkpoint_epoch_freq=1, summary_dir=str(tmp_path / 'logs'),
                             print_func=lambda x: None)
        if profiler is not None:
            loop.add_component(profiler)
        return loop

    with loop_with(None, 1) as loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(3)):
                pass
    with pytest.raises(ValueError, match=r'`steps`=\(2, 5\) lies in the past: the loop '
                                         r'resumed at step 3.*steps=\(4, 7\)'):
        with loop_with(spt.Profiler(steps=(2, 5)), 2):
            pass
    with pytest.raises(ValueError, match=r'`epochs`=\(1, 1\) lies in the past'):
        with loop_with(spt.Profiler(epochs=(1, 1)), 2):
            pass


def test_a_profiler_without_a_summary_folder_is_refused():
    loop = spt.TrainLoop([], max_epoch=1, print_func=lambda x: None)
    loop.add_component(spt.Profiler(steps=(1, 2)))
    with pytest.raises(ValueError, match=r'`Profiler` writes its trace into a summary folder.*'
                                         r'`logdir=`.*`summary_dir=`'):
        with loop:
            pass
    # the breakdown alone needs no folder
    loop = spt.TrainLoop([], max_epoch=1, print_func=lambda x: None)
    loop.add_component(spt.Profiler(breakdown=True))
    with loop:
        pass


@pytest.mark.parametrize('kwargs, error, match', [
    ({'steps': (5, 3)}, ValueError, r'`steps`=\(5, 3\) ends before it starts'),
    ({'epochs': (2, 1)}, ValueError, r'`epochs`=\(2, 1\) ends before it starts'),
    ({'steps': (0, 3)}, ValueError, '`steps` must start at 1 or later'),
    ({'steps': 3}, TypeError, r'`steps` must be a pair of ints \(start, stop\), got 3'),
    ({'steps': (1., 2)}, TypeError, '`steps` must be a pair of ints'),
    ({'steps': (1, 2), 'epochs': (1, 2)}, ValueError, 'Give one of `steps` and `epochs`'),
    ({}, ValueError, '`Profiler` has nothing to do'),
    ({'breakdown': 1}, TypeError, '`breakdown` must be a bool'),
    ({'steps': (1, 2), 'logdir': 3}, TypeError, '`logdir` must be a directory path'),
])
def test_bad_input_names_the_argument(kwargs, error, match):
    with pytest.raises(error, match=match):
        spt.Profiler(**kwargs)


# ------------------------------------------------------------------ the breakdown
class Holder(spt.LoopComponent):
    """Holds the loop as a save or a summary write would: `at` is
    ``{(event, step or epoch): (cause, seconds)}`` on the fake clock."""

    def __init__(self, clock, at):
        self.clock, self.at = clock, at

    def on_enter(self, loop):
        self.subscribe(loop, EventKeys.AFTER_STEP, lambda loop: self._hold(loop, 'step',
                                                                             loop.step))
        self.subscribe(loop, EventKeys.AFTER_EPOCH, lambda loop: self._hold(loop, 'epoch',
                                                                              loop.epoch))

    def _hold(self, loop, kind, counter):
        if (kind, counter) in self.at:
            cause, seconds = self.at[(kind, counter)]
            with self.hold(loop, cause):
                self.clock.advance(seconds)


class ListSink(spt.MetricSink):
    def __init__(self):
        self.epochs = []

    def write_stats(self, scope, step, epoch, stats):
        if scope == 'epoch':
            self.epochs.append({k: v['mean'] for k, v in stats.items()})


def run_timed(loop, clock, print_epoch_line=True):
    def batches():   # 0.1 s waiting for each of 4 batches
        for i in range(4):
            clock.advance(.1)
            yield i

    times = []
    loop.events.on(EventKeys.TIME_METRICS_COLLECTED,
                   lambda loop, m: times.append(m['epoch_time']) if 'epoch_time' in m else None)
    with loop:
        for _ in loop.iter_epochs():
            clock.advance(.05)                 # before the steps
            for _ in loop.iter_steps(batches()):
                clock.advance(.5)              # the user's step
            clock.advance(1.)                  # a validation
            if print_epoch_line:
                loop.print_logs()
    return times


def test_the_breakdown_shares_add_up_to_the_epoch_time(tmp_path):
    clock = FakeClock()
    lines, sink = [], ListSink()
    loop = spt.TrainLoop([], max_epoch=2, clock=clock, print_func=lines.append, show_eta=False,
                         summary_dir=str(tmp_path))
    # a step-2 save (0.3 s), a step-3 summary write (0.2 s); an epoch-end save after epoch 1's line
    loop.add_component(Holder(clock, {('step', 2): ('checkpoint', .3),
                                      ('step', 3): ('summaries', .2),
                                      ('epoch', 1): ('checkpoint', .4)}))
    profiler = spt.Profiler(print_breakdown=True)
    loop.add_component(profiler)
    loop.add_component(MetricRecorder(sink))
    times = run_timed(loop, clock)

    first = {'time_share_data': .4, 'time_share_step': 2., 'time_share_outside': 1.05,
             'time_share_checkpoint': .3, 'time_share_summaries': .2, 'time_share_loop': 0.}
    total = sum(first.values())
    assert total == pytest.approx(3.95)
    assert times[0] == pytest.approx(total)   # the loop's own epoch time
    expected = {k: v / total for k, v in first.items()}
    assert sink.epochs[0] == pytest.approx({**sink.epochs[0], **expected})
    # epoch 2 (steps 5-8: no step holds) also holds the save made after epoch 1's line
    second = dict(first, time_share_checkpoint=.4, time_share_summaries=0.)
    total2 = sum(second.values())
    assert sink.epochs[1] == pytest.approx({**sink.epochs[1],
                                            **{k: v / total2 for k, v in second.items()}})
    for stats in sink.epochs:
        assert sum(stats[name] for name in SHARES) == pytest.approx(1.)
    assert total2 == pytest.approx(times[1] + .4)   # epoch 2's time plus the 0.4 s save

    printed = [line for line in lines if line.startswith('Time breakdown')]
    assert printed[0] == (
        'Time breakdown of epoch 1 (3.95 s): data wait 10.1% (0.4 s), user step 50.6% (2 s), '
        'outside steps 26.6% (1.05 s), checkpoint saves 7.6% (0.3 s), summaries 5.1% (0.2 s), '
        'loop bookkeeping 0.0% (0 s)')
    assert len(printed) == 2
    assert 'time share: data 10%, step 51%, outside 27%, checkpoint 8%, summaries 5%, loop 0%' \
        in [line for line in lines if '[Epoch 1/2' in line][0]
    scalars = read_scalars(tmp_path)
    assert [s for s, _ in scalars['metrics/time_share_step']] == [4, 8]


def test_without_an_epoch_line_the_breakdown_closes_with_the_epoch():
    clock = FakeClock()
    sink = ListSink()
    loop = spt.TrainLoop([], max_epoch=1, clock=clock, print_func=lambda x: None)
    loop.add_component(spt.Profiler(breakdown=True))
    loop.add_component(MetricRecorder(sink))
    run_timed(loop, clock, print_epoch_line=False)
    stats = sink.epochs[0]
    assert stats['time_share_step'] == pytest.approx(2. / 3.45)
    assert sum(stats[name] for name in SHARES) == pytest.approx(1.)


def test_a_real_checkpoint_save_holds_the_loop(style, tmp_path):
    var = style.variable(1., 'w')
    train_step, _ = traced_step(style, var)
    held = []
    loop = spt.TrainLoop([var], max_epoch=2, checkpoint_dir=str(tmp_path),
                         checkpoint_epoch_freq=1, print_func=lambda x: None)
    profiler = spt.Profiler(breakdown=True)
    loop.add_component(profiler)
    loop.events.on(EventKeys.LOOP_HELD, lambda loop, cause, secs: held.append((cause, secs)))
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                train_step()
    assert [cause for cause, _ in held] == ['checkpoint', 'checkpoint']
    assert all(secs > 0 for _, secs in held)
    # epoch 1's save comes after its report: it is in epoch 2's share
    assert profiler.last_breakdown['time_share_checkpoint'] > 0


def test_with_the_breakdown_off_no_clock_is_read_for_a_save(tmp_path):
    reads = []

    def clock():
        reads.append(1)
        return 0.

    loop = spt.TrainLoop([tf.Variable(1.)], max_epoch=1, checkpoint_dir=str(tmp_path),
                         checkpoint_epoch_freq=1, print_func=lambda x: None, clock=clock)
    with loop:
        for _ in loop.iter_epochs():
            before = len(reads)
            for _ in loop.iter_steps(range(3)):
                pass
            steps_reads = len(reads) - before
    assert steps_reads == 6   # the loop's own step timer only: two reads per step
    assert not loop.events.handlers(EventKeys.LOOP_HELD)
    assert os.listdir(tmp_path)


def test_a_trace_into_a_bucket_is_staged_then_uploaded(tmp_path, s3_bucket):
    from tfsnippet.storage import resolve

    @tf.function
    def train_step():
        return tf.constant(1.)

    url = f'{s3_bucket}/run/trace'
    lines = []
    loop = spt.TrainLoop([], max_epoch=2, print_func=lines.append)
    loop.add_component(spt.Profiler(epochs=(2, 2), logdir=url))
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                train_step()
    assert any(f'Profiler trace of epochs 2-2 written to {url}/plugins/profile' in line
               for line in lines)
    location = resolve(url)
    location.fs.get(location.path + '/', str(tmp_path / 'down'), recursive=True)
    assert function_runs(tmp_path / 'down', 'train_step') == 2   # epoch 2's two steps
    assert not os.path.exists('s3:')   # nothing written to a local folder named after it


def test_a_trace_into_a_missing_bucket_is_refused_at_entry(s3_server):
    loop = spt.TrainLoop([], max_epoch=1, print_func=lambda line: None)
    loop.add_component(spt.Profiler(steps=(1, 1), logdir='s3://no-such-bucket-here/trace'))
    with pytest.raises(ValueError, match='`logdir`'):
        with loop:
            pass
