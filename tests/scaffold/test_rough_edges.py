"""The rough edges a new user hit (issue 11), fixed: in both TF styles for the
tests taking ``style`` (values from TensorFlow), the rest in eager mode.
"""

import io
import logging
import re

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet import EventKeys


def test_a_keras_style_val_loss_is_named_after_the_first_epoch(style):
    w = style.variable(0., 'w')
    valid = style.computed(tf.identity)
    lines = []
    loop = spt.TrainLoop([w], max_epoch=2, early_stopping=True, print_func=lines.append,
                         show_eta=False)
    with pytest.warns(UserWarning):
        with loop:
            for _ in loop.iter_epochs():
                loop.collect_metrics(val_loss=valid(1.))
    assert lines[0] == ("`valid_loss`, which early stopping watches, was not collected during "
                        "epoch 1; the metrics collected were ['val_loss']")


def test_notices_reach_a_logging_logger_as_one_record_each(caplog):
    logger = logging.getLogger('train')
    w = tf.Variable(0.)
    loop = spt.TrainLoop({'w': w}, max_epoch=1, early_stopping=True, print_func=logger.info,
                         show_eta=False)
    with caplog.at_level(logging.INFO, logger='train'), pytest.warns(UserWarning):
        with loop:
            loop.print_training_summary()
            for _ in loop.iter_epochs():
                loop.collect_metrics(loss=1.)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith('Trainable Parameters (1 in total)')
    assert messages[0].endswith('\n')                     # the table and its blank line
    assert messages[1].startswith('`valid_loss`, which early stopping watches')
    assert messages[2].startswith('Early-stopping has never been triggered!')
    assert all(m.strip() for m in messages)               # no empty record


def test_a_metric_collected_before_the_epoch_shows_in_step_lines(style, fake_clock):
    computed = style.computed(tf.identity)
    lines = []
    loop = spt.TrainLoop(max_epoch=2, print_func=lines.append, clock=fake_clock,
                         show_eta=False)
    loop.events.on(EventKeys.BEFORE_EPOCH,
                   lambda lp: lp.collect_metrics(lr=computed(0.1 / lp.epoch)))
    with loop:
        for _ in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(4)):
                loop.collect_metrics(loss=computed(float(step)))
                if step % 2 == 0:
                    loop.print_logs()
    assert [line.split('] ')[1] for line in lines] == [
        'step time: 0s (±0s); loss: 1.5 (±0.5); lr: 0.1',
        'step time: 0s (±0s); loss: 3.5 (±0.5); lr: 0.1',
        'step time: 0s (±0s); loss: 5.5 (±0.5); lr: 0.05',
        'step time: 0s (±0s); loss: 7.5 (±0.5); lr: 0.05']


def test_final_results_after_the_epoch_loop(fake_clock):
    lines = []
    loop = spt.TrainLoop(max_epoch=1, print_func=lines.append, clock=fake_clock)
    with loop:
        for _ in loop.iter_epochs():
            loop.collect_metrics(loss=1.)
        loop.collect_results(test_acc=tf.constant(0.75), test_loss=np.float32(0.5))
        with pytest.raises(TypeError, match=re.escape(
                "Metric `test_acc` must be a number, a numeric numpy array or an eager tensor, "
                "got 'high'")):
            loop.collect_results(test_acc='high')
    assert lines[-1] == 'Results: test acc: 0.75; test loss: 0.5'
    assert loop.results == {'test_acc': 0.75, 'test_loss': 0.5}


def test_results_after_the_epoch_loop_computed_by_tensorflow(style):
    acc = style.computed(tf.identity)(0.875)    # from session.run in graph style
    lines = []
    loop = spt.TrainLoop(max_epoch=1, print_func=lines.append)
    with loop:
        for _ in loop.iter_epochs():
            pass
        loop.collect_results(test_acc=acc)
    assert lines[-1] == 'Results: test acc: 0.875'
    assert loop.results == {'test_acc': 0.875}


def test_collect_results_needs_an_entered_loop():
    loop = spt.TrainLoop(max_epoch=1)
    with pytest.raises(RuntimeError, match=re.escape(
            '`collect_results()` needs the loop entered: call it inside its `with` block, or '
            'after the block has been left (the best weights are restored then)')):
        loop.collect_results(test_acc=1.)
    assert loop.results == {}


@pytest.mark.parametrize('kwargs, error, message', [
    ({'early_stopping': 'yes'}, TypeError, "`early_stopping` must be True or False, got 'yes'"),
    ({'show_eta': 1}, TypeError, '`show_eta` must be True or False, got 1'),
    ({'summary_commit_freqs': {'loss': 0}}, ValueError,
     "`summary_commit_freqs['loss']` must be a positive int, got 0"),
    ({'summary_skip_pattern': 3}, TypeError,
     '`summary_skip_pattern` must be a regex, a str or None, got 3'),
], ids=['early-stopping-str', 'show-eta-int', 'commit-freq-without-summary-dir',
        'skip-pattern-without-summary-dir'])
def test_options_are_checked_on_their_own(kwargs, error, message):
    with pytest.raises(error, match='^' + re.escape(message) + '$'):
        spt.TrainLoop(**kwargs)


def test_messages_show_arrays_by_shape_never_whole():
    x = np.zeros([1000, 784], dtype=np.float32)
    with pytest.raises(TypeError, match='^' + re.escape(
            '`arrays` must be a list or tuple of arrays, got ndarray(shape=(1000, 784), '
            'dtype=float32)') + '$'):
        spt.DataFlow.arrays(x, 32)
    w = tf.Variable(tf.zeros([300, 10]), name='w')
    with pytest.raises(TypeError, match='^' + re.escape(
            "`param_vars` must be a list or dict of variables, got <ResourceVariable 'w:0' "
            "shape=(300, 10) dtype=float32>") + '$'):
        spt.TrainLoop(w)


def test_an_unwritable_summary_dir_is_named(tmp_path):
    blocker = tmp_path / 'file'
    blocker.write_text('not a directory')
    loop = spt.TrainLoop(max_epoch=1, summary_dir=str(blocker / 'tb'))
    with pytest.raises(ValueError, match=re.escape(
            f"`summary_dir` {str(blocker / 'tb')!r} is not a writable directory")):
        with loop:
            pass


def test_progress_bar_knows_the_length_of_a_dataflow_in_the_first_epoch():
    out = io.StringIO()
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda s: None)
    loop.add_component(spt.ProgressBar(file=out, mininterval=0, leave=True))
    flow = spt.DataFlow.arrays([np.arange(10)], batch_size=4)
    with loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(flow):
                pass
    text = out.getvalue()
    assert '1/3' in text and '3/3' in text        # known from the first step on


def test_a_scheduled_variable_is_saved_among_variables(style, tmp_path):
    w = style.variable(1., 'w')
    lr = spt.ScheduledVariable('lr', 0.5)
    if style.is_graph:
        spt.utils.ensure_variables_initialized()
    saver = spt.CheckpointSaver([w, lr], str(tmp_path))
    path = saver.save(1)
    lr.set(0.1)
    saver.restore(path)
    assert float(lr.get()) == 0.5


def test_a_symbolic_tensor_inside_a_tf_function_gets_tf2_advice():
    loop = spt.TrainLoop(max_epoch=1, print_func=lambda s: None)

    @tf.function
    def step():
        loop.collect_metrics(loss=tf.constant(1.) * 2.)

    with loop:
        for _ in loop.iter_epochs():
            with pytest.raises(TypeError, match=re.escape(
                    'inside a `tf.function`: return it from the function and collect the '
                    'result outside')):
                step()
