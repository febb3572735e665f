"""TensorBoard summaries of the loop (API.md section 7.8).

The tests taking ``style`` run in both TF styles; the rest in eager mode
(tests/graph/test_summaries_graph.py has what is graph-only).

The event files are read back with tensorboard's EventAccumulator and
compared as ``{tag: [(step, value), ...]}``.  The values are chosen to be
exact in float32, and the times come from the fake clock, so every number
is known by hand.
"""

import os
import re

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet import EventKeys
from tests.helpers import read_events, read_histograms, read_scalars


def x_summary(value):
    return tf.compat.v1.Summary(value=[tf.compat.v1.Summary.Value(tag='x', simple_value=value)])


def train(loop, clock, loss=lambda step: step * 0.25, add_x=True):
    """Two epochs of three 2-second steps, then a 2-second validation.

    ``loss`` is collected at every step, ``valid_loss = epoch / 2`` between
    epochs (timed as ``valid_time``), and a summary ``x = 10 * epoch`` is
    added after it.
    """
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(3)):
                clock.advance(2.)
                loop.collect_metrics(loss=loss(step))
            with loop.timeit('valid_time'):
                clock.advance(2.)
                loop.collect_metrics(valid_loss=epoch * 0.5)
            if add_x:
                loop.add_summary(x_summary(10. * epoch))
            loop.print_logs()


LOSS = [(s, s * 0.25) for s in range(1, 7)]
VALID = [(3, 0.5), (6, 1.)]
# three steps in 8 seconds (6 s of steps and 2 s of validation) per epoch
STEPS_PER_SEC = [(3, 0.375), (6, 0.375)]


def x_summaries(style):
    """``f(value)``: a summary of ``x = value`` as the style makes it: a ``Summary``
    proto in eager style, the bytes of a ``tf.compat.v1.summary`` op run in graph style."""
    if not style.is_graph:
        return x_summary
    x_in = tf.compat.v1.placeholder(tf.float32, [], name='x_in')
    tf.compat.v1.summary.scalar('x', x_in)
    merged = tf.compat.v1.summary.merge_all()
    return lambda value: style.session.run(merged, feed_dict={x_in: value})


def train_in_style(loop, style, clock):
    """`train`, with ``loss = step / 4`` and ``valid_loss = epoch / 2`` computed by
    TensorFlow and ``x = 10 * epoch`` a summary of the style (see `x_summaries`)."""
    quarter = style.computed(lambda step: step / 4.)
    summary_of = x_summaries(style)
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(3)):
                clock.advance(2.)
                loop.collect_metrics(loss=quarter(step))
            with loop.timeit('valid_time'):
                clock.advance(2.)
                loop.collect_metrics(valid_loss=quarter(2 * epoch))
            loop.add_summary(summary_of(10. * epoch))
            loop.print_logs()
    return summary_of


def test_metrics_summaries_and_steps_per_second(style, tmp_path, fake_clock):
    loop = spt.TrainLoop(max_epoch=2, summary_dir=str(tmp_path), clock=fake_clock,
                         print_func=lambda s: None)
    train_in_style(loop, style, fake_clock)
    assert read_scalars(tmp_path) == {
        'metrics/loss': LOSS,
        'metrics/valid_loss': VALID,
        'x': [(3, 10.), (6, 20.)],
        'global_step/sec': STEPS_PER_SEC,
    }


def test_summaries_are_flushed_at_the_end_of_each_epoch(tmp_path, fake_clock):
    loop = spt.TrainLoop(max_epoch=2, summary_dir=str(tmp_path), clock=fake_clock,
                         print_func=lambda s: None)
    seen_in_epoch_2 = None
    with loop:
        for epoch in loop.iter_epochs():
            if epoch == 2:
                seen_in_epoch_2 = read_scalars(tmp_path)
            for step, _ in loop.iter_steps(range(3)):
                fake_clock.advance(1.)
                loop.collect_metrics(loss=step * 0.25)
    assert seen_in_epoch_2 == {'metrics/loss': LOSS[:3], 'global_step/sec': [(3, 1.)]}
    assert read_scalars(tmp_path)['metrics/loss'] == LOSS


def test_summary_commit_freqs(style, tmp_path, fake_clock):
    loop = spt.TrainLoop(max_epoch=2, summary_dir=str(tmp_path), clock=fake_clock,
                         summary_commit_freqs={'loss': 2}, print_func=lambda s: None)
    train_in_style(loop, style, fake_clock)
    scalars = read_scalars(tmp_path)
    assert scalars['metrics/loss'] == [(1, 0.25), (3, 0.75), (5, 1.25)]
    assert scalars['metrics/valid_loss'] == VALID


@pytest.mark.parametrize('prefix', ['train/', ''])
def test_summary_metric_prefix(tmp_path, fake_clock, prefix):
    loop = spt.TrainLoop(max_epoch=2, summary_dir=str(tmp_path), clock=fake_clock,
                         summary_metric_prefix=prefix, print_func=lambda s: None)
    train(loop, fake_clock, add_x=False)
    assert read_scalars(tmp_path) == {f'{prefix}loss': LOSS, f'{prefix}valid_loss': VALID,
                                      'global_step/sec': STEPS_PER_SEC}


@pytest.mark.parametrize('pattern', ['valid_.*', re.compile('valid_.*')], ids=['str', 'regex'])
def test_summary_skip_pattern_replaces_the_default(style, tmp_path, fake_clock, pattern):
    loop = spt.TrainLoop(max_epoch=2, summary_dir=str(tmp_path), clock=fake_clock,
                         summary_skip_pattern=pattern, print_func=lambda s: None)
    train_in_style(loop, style, fake_clock)
    scalars = read_scalars(tmp_path)
    # valid_loss and valid_time are skipped; the other time metrics are written now
    assert sorted(scalars) == ['global_step/sec', 'metrics/epoch_time', 'metrics/loss',
                               'metrics/step_time', 'x']
    assert scalars['metrics/step_time'] == [(s, 2.) for s in range(1, 7)]


def test_no_skip_pattern_writes_time_metrics(tmp_path, fake_clock):
    loop = spt.TrainLoop(max_epoch=2, summary_dir=str(tmp_path), clock=fake_clock,
                         summary_skip_pattern=None, print_func=lambda s: None)
    train(loop, fake_clock, add_x=False)
    scalars = read_scalars(tmp_path)
    assert scalars['metrics/valid_time'] == [(3, 2.), (6, 2.)]
    assert scalars['metrics/step_time'] == [(s, 2.) for s in range(1, 7)]
    # epoch_time stops at the epoch-level print_logs (after the validation)
    assert scalars['metrics/epoch_time'] == [(3, 8.), (6, 8.)]
    assert scalars['metrics/valid_loss'] == VALID


def test_eager_tensors_and_arrays_as_values(tmp_path, fake_clock):
    loop = spt.TrainLoop(max_epoch=2, summary_dir=str(tmp_path), clock=fake_clock,
                         print_func=lambda s: None)
    # a tensor of two samples: its mean is written
    train(loop, fake_clock, add_x=False,
          loss=lambda step: tf.constant([step * 0.125, step * 0.375]))
    assert read_scalars(tmp_path)['metrics/loss'] == LOSS

    loop = spt.TrainLoop(max_epoch=2, summary_dir=str(tmp_path / 'np'), clock=fake_clock,
                         print_func=lambda s: None)
    train(loop, fake_clock, add_x=False, loss=lambda step: np.float32(step * 0.25))
    assert read_scalars(tmp_path / 'np')['metrics/loss'] == LOSS


def test_add_summary_proto_and_bytes(tmp_path):
    added = []
    loop = spt.TrainLoop(max_epoch=1, summary_dir=str(tmp_path), print_func=lambda s: None)
    loop.events.on(EventKeys.SUMMARY_ADDED, lambda lp, summary: added.append((lp.step, summary)))
    proto = x_summary(1.5)
    with loop:
        loop.add_summary(proto)                              # step 0
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(2)):
                loop.add_summary(x_summary(2.5 * step).SerializeToString())
    scalars = read_scalars(tmp_path)
    assert sorted(scalars) == ['global_step/sec', 'x']
    assert scalars['x'] == [(0, 1.5), (1, 2.5), (2, 5.)]
    assert added[0] == (0, proto)
    assert [step for step, _ in added] == [0, 1, 2]


def test_user_writer_is_not_closed_by_the_loop(style, tmp_path, fake_clock):
    writer = spt.SummaryWriter(str(tmp_path))
    loop = spt.TrainLoop(max_epoch=2, summary_writer=writer, clock=fake_clock,
                         print_func=lambda s: None)
    summary_of = train_in_style(loop, style, fake_clock)
    assert loop.summary_writer is writer
    writer.add_scalars({'after': 4.}, step=7)        # still writable
    writer.add_summary(summary_of(5.), 9)
    writer.close()
    assert read_scalars(tmp_path) == {
        'metrics/loss': LOSS, 'metrics/valid_loss': VALID, 'x': [(3, 10.), (6, 20.), (9, 5.)],
        'global_step/sec': STEPS_PER_SEC, 'after': [(7, 4.)]}


def test_loop_opened_writer_is_closed_on_exit(style, tmp_path, fake_clock):
    loop = spt.TrainLoop(max_epoch=1, summary_dir=str(tmp_path), clock=fake_clock,
                         print_func=lambda s: None)
    assert loop.summary_writer is None
    with loop:
        writer = loop.summary_writer
        assert isinstance(writer, spt.SummaryWriter)
        assert os.path.abspath(writer.logdir) == str(tmp_path)
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps([1]):
                loop.collect_metrics(loss=0.5)
    assert loop.summary_writer is None
    with pytest.raises(RuntimeError, match=re.escape('This SummaryWriter has been closed')):
        writer.add_scalars({'late': 1.}, step=9)
    assert read_scalars(tmp_path) == {'metrics/loss': [(1, 0.5)]}


def test_summaries_are_written_when_the_loop_exits_through_an_error(tmp_path, fake_clock):
    loop = spt.TrainLoop(max_epoch=2, summary_dir=str(tmp_path), clock=fake_clock,
                         print_func=lambda s: None)
    with pytest.raises(ValueError, match='stop here'):
        with loop:
            for _ in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(3)):
                    fake_clock.advance(1.)
                    loop.collect_metrics(loss=step * 0.25)
                    if step == 2:
                        raise ValueError('stop here')
    # the values buffered in the unfinished epoch reach the file
    assert read_scalars(tmp_path) == {'metrics/loss': LOSS[:2]}


def test_histograms_of_param_vars_every_n_epochs(style, tmp_path, fake_clock):
    w = style.variable(np.zeros([3, 4]), 'w')
    b = style.variable(np.zeros([4]), 'b')
    step = style.updater(w, np.ones([3, 4]))
    loop = spt.TrainLoop({'dense/w': w, 'dense/b': b}, max_epoch=4, summary_dir=str(tmp_path),
                         summary_histogram_freq=2, print_func=lambda s: None, clock=fake_clock)
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                step()
    assert read_histograms(tmp_path) == {'params/dense/w': [(4, 12), (8, 12)],
                                         'params/dense/b': [(4, 4), (8, 4)]}
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    ea = EventAccumulator(str(tmp_path), size_guidance={'histograms': 0})
    ea.Reload()
    last = ea.Histograms('params/dense/w')[-1].histogram_value
    assert (last.min, last.max) == (8., 8.)       # w after 4 epochs of 2 steps of +1


def test_bad_histogram_freq():
    with pytest.raises(ValueError, match=re.escape(
            '`summary_histogram_freq` must be a positive int or None, got 0')):
        spt.TrainLoop(summary_histogram_freq=0)


# ------------------------------------------------------------ classic FileWriter methods
def test_loop_summary_writer_has_the_classic_file_writer_methods(tmp_path):
    logdir = str(tmp_path / 'logs')
    with spt.TrainLoop(max_epoch=1, summary_dir=logdir) as loop:
        writer = loop.summary_writer
        assert writer.get_logdir() == logdir
        run_metadata = tf.compat.v1.RunMetadata()
        run_metadata.step_stats.dev_stats.add(device='/cpu:0')
        writer.add_run_metadata(run_metadata, 'step_5', global_step=5)
        writer.add_session_log(tf.compat.v1.SessionLog(status=tf.compat.v1.SessionLog.START),
                               global_step=7)
        writer.add_event(tf.compat.v1.Event(step=9, file_version='custom'))
        with pytest.raises(TypeError, match=re.escape(
                '`session_log` must be a SessionLog protocol buffer, got str')):
            writer.add_session_log('start')
        with pytest.raises(TypeError, match=re.escape(
                '`run_metadata` must be a RunMetadata protocol buffer, got dict')):
            writer.add_run_metadata({}, 'tag')
    events = read_events(logdir)
    tagged = [e for e in events if e.HasField('tagged_run_metadata')]
    assert [(e.step, e.tagged_run_metadata.tag) for e in tagged] == [(5, 'step_5')]
    assert tf.compat.v1.RunMetadata.FromString(
        tagged[0].tagged_run_metadata.run_metadata) == run_metadata
    logs = [e for e in events if e.HasField('session_log')]
    assert [(e.step, e.session_log.status) for e in logs] == [(7, 1)]
    assert [e.step for e in events if e.file_version == 'custom'] == [9]


def test_a_closed_writer_reopens_in_a_new_event_file(tmp_path):
    writer = spt.SummaryWriter(str(tmp_path))
    writer.add_scalars({'a': 1.}, step=1)
    writer.close()
    with pytest.raises(RuntimeError, match='This SummaryWriter has been closed'):
        writer.add_event(tf.compat.v1.Event(step=2))
    writer.reopen()
    writer.reopen()                          # no-op while open
    writer.add_scalars({'a': 2.}, step=2)
    writer.close()
    files = [n for n in os.listdir(tmp_path) if n.startswith('events.out.tfevents.')]
    assert len(files) == 2
    assert read_scalars(tmp_path) == {'a': [(1, 1.), (2, 2.)]}
