"""Resumes that never skip or repeat work (issue 10), in eager mode.

Every test runs a job, resumes it, and compares what each epoch's body saw
with what one uninterrupted run would have seen.  The tests taking
``style`` also train a `Counter` in both TF styles, resumed in a new run of
the style; tests/graph/test_resume_semantics_graph.py has what is graph-only.
"""

import os
import pathlib
import re
import signal
import textwrap

import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers.loops import Counter


class Journal(spt.CheckpointSavableObject):
    """Records ``(epoch, step)`` of each step and ``('body', epoch)`` of each epoch's body."""

    def __init__(self):
        self.entries = []

    def get_state(self):
        return {'entries': list(self.entries)}

    def set_state(self, state):
        self.entries = list(state['entries'])


def new_loop(root, journal, lines=None, **kwargs):
    options = dict(max_epoch=3, checkpoint_dir=str(root), print_func=(lines if lines is not None else []).append,
                   checkpoint_save_objects={'journal': journal}, show_eta=False)
    options.update(kwargs)
    return spt.TrainLoop(**options)


UNINTERRUPTED = [(1, 1), (1, 2), (1, 3), ('body', 1), (2, 4), (2, 5), (2, 6), ('body', 2),
                 (3, 7), (3, 8), (3, 9), ('body', 3)]


def run(loop, journal, data=range(3), after_steps=None, interrupt_at=None, train=None):
    """`train`: called at each step (a `Counter`'s step, say)."""
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(data):
                if train is not None:
                    train()
                journal.entries.append((epoch, step))
                if interrupt_at == step:
                    raise KeyboardInterrupt()
            journal.entries.append(('body', epoch))
            if after_steps is not None:
                after_steps(loop, epoch)


def test_make_checkpoint_after_the_step_loop_resumes_at_the_next_epoch(style, tmp_path):
    journal, w = Journal(), Counter(style)

    def checkpoint_at_2(loop, epoch):
        if epoch == 2:
            loop.make_checkpoint()
            raise KeyboardInterrupt()    # killed right after the classic `make_checkpoint()`

    with pytest.raises(KeyboardInterrupt):
        run(new_loop(tmp_path, journal, param_vars=[w.var]), journal, after_steps=checkpoint_at_2,
            train=w.step)
    with style.new_run():
        resumed, lines, w2 = Journal(), [], Counter(style, -100.)
        run(new_loop(tmp_path, resumed, lines, param_vars=[w2.var]), resumed, train=w2.step)
        assert w2.value() == 9.
    assert lines[0].startswith('Resume training: epoch 2, step 6')
    assert resumed.entries == UNINTERRUPTED      # epoch 2's body did not run twice


def test_a_checkpoint_inside_the_step_loop_continues_that_epoch(tmp_path):
    journal = Journal()
    with pytest.raises(KeyboardInterrupt):
        run(new_loop(tmp_path, journal, checkpoint_step_freq=1), journal, interrupt_at=5)
    resumed = Journal()
    run(new_loop(tmp_path, resumed, checkpoint_step_freq=1), resumed)
    # step 5's checkpoint was not taken (the interrupt came first): resumes after step 4
    assert resumed.entries == UNINTERRUPTED


def test_saving_after_a_keyboard_interrupt_outside_the_epoch_loop_continues_the_epoch(style,
                                                                                     tmp_path):
    journal, w = Journal(), Counter(style)
    loop = new_loop(tmp_path, journal, param_vars=[w.var])
    with loop:
        try:
            for epoch in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(3)):
                    w.step()
                    journal.entries.append((epoch, step))
                    if step == 4:
                        raise KeyboardInterrupt()
                journal.entries.append(('body', epoch))
        except KeyboardInterrupt:
            loop.make_checkpoint()          # the interrupted epoch 2 is not over
    with style.new_run():
        resumed, w2 = Journal(), Counter(style)
        run(new_loop(tmp_path, resumed, param_vars=[w2.var]), resumed, train=w2.step)
        assert w2.value() == 9.
    assert resumed.entries == UNINTERRUPTED


def test_a_checkpoint_is_written_when_training_ends_and_a_rerun_redoes_nothing(tmp_path):
    journal, lines = Journal(), []
    run(new_loop(tmp_path, journal, max_epoch=None, max_step=8, checkpoint_step_freq=5), journal)
    saved = sorted(os.listdir(tmp_path / 'checkpoint'))
    assert 'checkpoint.dat-5' in saved and 'checkpoint.dat-8' in saved
    again = Journal()
    run(new_loop(tmp_path, again, lines, max_epoch=None, max_step=8), again)
    assert again.entries == journal.entries          # restored, nothing new ran
    assert lines == [f'Resume training: epoch 3, step 8, from checkpoint '
                     f'{tmp_path / "checkpoint" / "checkpoint.dat-8"}',
                     'Training has already finished at epoch 3, step 8: max_step reached']


def test_an_exhausted_one_shot_iterable_is_reported_through_print_func():
    lines = []
    loop = spt.TrainLoop(max_epoch=2, print_func=lines.append)
    data = iter(range(3))
    with pytest.warns(UserWarning, match='Epoch 2 got no step'):
        with loop:
            for _ in loop.iter_epochs():
                for _ in loop.iter_steps(data):
                    pass
    assert lines[0].startswith('Epoch 2 got no step: the data given to `iter_steps()` is '
                               'empty or exhausted')


def test_a_changed_model_names_the_variables_and_the_way_out(tmp_path):
    w = tf.Variable(0., name='w')
    run(new_loop(tmp_path, Journal(), param_vars=[w], max_epoch=1), Journal())
    w2 = tf.Variable([0., 0.], name='w')
    with pytest.raises(ValueError, match=re.escape('shapes differ')) as e:
        with new_loop(tmp_path, Journal(), param_vars=[w2]):
            pass
    assert 'pass `restore_checkpoint=False` or use a new `checkpoint_dir`' in str(e.value)


def test_a_classic_saver_directory_is_refused(tmp_path):
    save_dir = tmp_path / 'checkpoint'
    save_dir.mkdir()
    (save_dir / 'checkpoint').write_text('model_checkpoint_path: "checkpoint.dat-10"\n')
    (save_dir / 'checkpoint.dat-10.index').write_bytes(b'')
    with pytest.raises(ValueError, match=re.escape(
            'holds checkpoints of the classic tfsnippet (a `tf.train.Saver` directory)')):
        with new_loop(tmp_path, Journal()):
            pass


def test_a_failed_write_names_checkpoint_dir_and_keeps_the_earlier_checkpoint(tmp_path,
                                                                          monkeypatch):
    journal = Journal()
    loop = new_loop(tmp_path, journal, checkpoint_step_freq=2)

    def full_disk(*args, **kwargs):
        raise OSError(28, 'No space left on device')

    with pytest.raises(RuntimeError, match=re.escape(
            f"Could not write a checkpoint into `checkpoint_dir` {str(tmp_path)!r} (is the "
            f"disk full or read-only?): OSError: [Errno 28] No space left on device")):
        def fill_the_disk(lp, epoch):
            monkeypatch.setattr(loop.checkpoint_saver, 'save', full_disk)
        run(loop, journal, after_steps=fill_the_disk)
    assert sorted(os.listdir(tmp_path / 'checkpoint')) == [
        'checkpoint.dat-2', 'checkpoint_index.json']


def test_bad_preemption_signals():
    with pytest.raises(ValueError, match=re.escape(
            "`preemption_signals` must hold signal names or numbers such as 'SIGTERM', "
            "got 'SIGNOPE'")):
        spt.Checkpointer('/tmp/x', preemption_signals=['SIGNOPE'])


@pytest.mark.parametrize('arg', ['signals', 'requeue'])
def test_bad_preemption_component_signals_name_the_argument(arg):
    kwargs = {'signals': ['SIGNOPE']} if arg == 'signals' else \
        {'signals': ['SIGTERM'], 'requeue': ['SIGNOPE']}
    with pytest.raises(ValueError, match=re.escape(
            f"`{arg}` must hold signal names or numbers such as 'SIGTERM', got 'SIGNOPE'")):
        spt.Preemption(**kwargs)


# ------------------------------------------------------------ preemption
PREEMPTED_SCRIPT = '''
import os, signal, sys
import tensorflow as tf
import tfsnippet as spt
from tests.helpers.loops import Counter

root, mode = sys.argv[1], sys.argv[2]
w = tf.Variable(0.)
loop = spt.TrainLoop([w], max_epoch=3, checkpoint_dir=root, show_eta=False,
                     checkpoint_save_objects={{}})
with loop:
    for epoch in loop.iter_epochs():
        for step, _ in loop.iter_steps(range(4)):
            w.assign_add(1.)
            if mode == 'kill' and step == 6:
                os.kill(os.getpid(), signal.SIGTERM)   # as a cluster manager would
        print('body', epoch, flush=True)
print('final', float(w.numpy()), flush=True)
'''


REPO = str(pathlib.Path(__file__).resolve().parents[2])   # the script imports tests.helpers


def run_script(server, tmp_path, mode):
    """A run of the script, forked by `server` (the session's ``fork_server``)."""
    script = tmp_path / 'train.py'
    script.write_text(textwrap.dedent(PREEMPTED_SCRIPT.format()))
    return server.run([script, tmp_path / 'run', mode], cwd=tmp_path, timeout=120,
                      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', PYTHONPATH=REPO))


def test_sigterm_saves_at_the_step_boundary_exits_143_and_resumes_there(tmp_path, fork_server):
    first = run_script(fork_server, tmp_path, 'kill')
    assert first.returncode == 143, first.stderr[-2000:]
    out = first.stdout.splitlines()
    assert out[0] == 'body 1'
    assert out[1].startswith('Preempted by SIGTERM at epoch 2, step 6: saved checkpoint ')
    assert out[1].endswith('exiting with status 143, the next start resumes from it')
    assert len(out) == 2                         # epoch 2's body did not run
    second = run_script(fork_server, tmp_path, 'resume')
    assert second.returncode == 0, second.stderr[-2000:]
    lines = second.stdout.splitlines()
    assert lines[0].startswith('Resume training: epoch 2, step 6, from checkpoint ')
    assert lines[1:] == ['body 2', 'body 3', 'final 12.0']


# ------------------------------------------------------------ warm start
def test_warm_start_applies_only_when_nothing_is_resumed(tmp_path):
    pretrained = tf.Variable([1., 2.], name='encoder/w')
    saver = spt.CheckpointSaver([pretrained], str(tmp_path / 'pretrained'))
    source = saver.save(7)
    w = tf.Variable([0., 0.], name='w')
    lines = []
    loop = spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(tmp_path / 'run'),
                         print_func=lines.append, show_eta=False,
                         warm_start={'source': source, 'mapping': {'^w$': 'encoder/w'}})
    with loop:
        assert w.numpy().tolist() == [1., 2.]
        for _ in loop.iter_epochs():
            w.assign_add([10., 10.])
    assert any('restored' in line for line in lines)
    # the second start resumes its own checkpoint: the warm start is not applied
    lines2 = []
    loop2 = spt.TrainLoop([w], max_epoch=2, checkpoint_dir=str(tmp_path / 'run'),
                          print_func=lines2.append,
                          warm_start={'source': source, 'mapping': {'^w$': 'encoder/w'}})
    w.assign([-1., -1.])
    with loop2:
        assert w.numpy().tolist() == [11., 12.]
    assert lines2[0].startswith('Resume training: epoch 1, step 0')


def test_warm_start_with_a_function_and_bad_specs(tmp_path):
    called = []
    loop = spt.TrainLoop(max_epoch=1, warm_start=lambda lp: called.append(lp.epoch),
                         print_func=lambda s: None)
    with loop:
        pass
    assert called == [0]
    with pytest.raises(ValueError, match=re.escape("`warm_start` as a dict needs a `source`")):
        spt.TrainLoop(warm_start={'mapping': {}})
    with pytest.raises(ValueError, match=re.escape("`warm_start` has unknown keys ['map']")):
        spt.TrainLoop(warm_start={'source': 'x', 'map': {}})
    with pytest.raises(TypeError, match=re.escape('`warm_start` must be a checkpoint path')):
        spt.TrainLoop(warm_start=3)


def test_a_tf_data_dataset_resumed_mid_epoch_continues_exactly(tmp_path):
    # its iterator's state is in the checkpoint (tests/scaffold/test_tfdata_resume.py
    # has the shuffled, reshuffled and unsaveable pipelines)
    data = tf.data.Dataset.range(4).shuffle(4, seed=1)
    journal = Journal()
    with pytest.raises(KeyboardInterrupt):
        run(new_loop(tmp_path, journal, checkpoint_step_freq=1), journal, data=data,
            interrupt_at=3)
    lines, resumed = [], Journal()
    run(new_loop(tmp_path, resumed, lines, checkpoint_step_freq=1), resumed, data=data)
    assert not any('Resuming epoch' in line for line in lines)
    assert [e for e in resumed.entries if e[0] == 1] == [(1, 1), (1, 2), (1, 3), (1, 4)]


def test_an_annealed_variable_missing_from_checkpoints_is_named(tmp_path):
    w = tf.Variable(0., name='w')
    lr = spt.AnnealingVariable('lr', 1., .5)
    lines = []
    loop = spt.TrainLoop([w], max_epoch=1, checkpoint_dir=str(tmp_path), print_func=lines.append)
    trainer = spt.Trainer(loop, lambda x: None, data_flow=[(1.,)])
    trainer.anneal_after_epochs(lr, 1)
    with pytest.warns(UserWarning, match=re.escape("The trainer anneals ['lr']")):
        with loop:
            trainer.run()
    assert any(line.startswith("The trainer anneals ['lr'], which the checkpoints do not hold")
               for line in lines)
    # listed in checkpoint_save_objects: nothing to say, and a resume goes on from 0.5
    lines2 = []
    loop2 = spt.TrainLoop([w], max_epoch=2, checkpoint_dir=str(tmp_path / 'ok'),
                          checkpoint_save_objects={'lr': lr.variable}, print_func=lines2.append)
    trainer2 = spt.Trainer(loop2, lambda x: None, data_flow=[(1.,)])
    trainer2.anneal_after_epochs(lr, 1)
    with loop2:
        trainer2.run()
    assert not any('anneals' in line for line in lines2)
