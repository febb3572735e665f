"""A ``tf.data.Dataset`` given to ``iter_steps`` resumes exactly (issue 19, part 4), eager mode.

Every test runs a loop over a shuffled dataset that reshuffles each epoch,
interrupts it, resumes it with a new loop (and a new dataset object, as a new
process would build), and compares the element ids each step saw with those of
one uninterrupted run.  The killed-process twin is in tests/test_crash_resume.py;
the tests taking ``style`` run in both TF styles; the graph-only iterator (an
initializable one, saved by a ``Saver``) is in tests/graph/test_tfdata_resume_graph.py.
"""

import contextlib
import os

import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tests.helpers import checkpoint_path
from tests.test_crash_resume import Job, server  # noqa: F401 (a module fixture)

STEPS = 5          # batches per epoch
MAX_EPOCH = 3


def shuffled(symbolic=False):
    ds = tf.data.Dataset.range(4 * STEPS).shuffle(4 * STEPS, seed=3,
                                                  reshuffle_each_iteration=True).batch(4)
    if symbolic:
        options = tf.data.Options()
        options.experimental_symbolic_checkpoint = True
        ds = ds.with_options(options)
    return ds


def run(root, lines=None, data=shuffled, stop_at=None, seen=None, style=None, **kwargs):
    """Train over `data()` (a new dataset object per loop); return the ids of each step.
    `style`: in a new run of that style (eager without one)."""
    seen = [] if seen is None else seen
    options = dict(max_epoch=MAX_EPOCH, checkpoint_dir=str(root), show_eta=False,
                   print_func=(lines if lines is not None else []).append)
    options.update(kwargs)
    with style.new_run() if style is not None else contextlib.nullcontext():
        dataset = data()
        with spt.TrainLoop(**options) as loop:
            for epoch in loop.iter_epochs():
                for step, batch in loop.iter_steps(dataset):
                    assert isinstance(batch, (np.ndarray, tf.Tensor))  # fetched in graph style
                    seen.append(np.asarray(batch).tolist())
                    if step == stop_at:
                        raise KeyboardInterrupt()
    return seen


@pytest.fixture(scope='module')
def uninterrupted(tmp_path_factory):
    ids = run(tmp_path_factory.mktemp('reference'), checkpoint_step_freq=1)
    assert len(ids) == STEPS * MAX_EPOCH
    # the dataset reshuffles: epochs differ, so a resume at the wrong seed shows
    assert len({str(ids[e * STEPS:(e + 1) * STEPS]) for e in range(MAX_EPOCH)}) == MAX_EPOCH
    return ids


@pytest.mark.parametrize('symbolic', [False, True])
def test_interrupted_mid_epoch_resumes_the_same_batches(tmp_path, uninterrupted, symbolic):
    def data():
        return shuffled(symbolic)
    first = []
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, data=data, stop_at=8, seen=first, checkpoint_step_freq=1)
    lines = []
    rest = run(tmp_path, lines, data=data, checkpoint_step_freq=1)
    # step 8 was interrupted before its checkpoint: the resume repeats it, then goes on
    assert lines[0] == (f'Resume training: epoch 2, step 7, from checkpoint '
                        f'{checkpoint_path(tmp_path, 7)}')
    assert not any('skipped' in line for line in lines)
    assert first[:7] + rest == uninterrupted
    assert os.listdir(os.path.join(checkpoint_path(tmp_path, 7), 'loop')) and \
        sorted(os.listdir(os.path.join(checkpoint_path(tmp_path, 7), 'loop'))) == \
        ['iterator-0.data-00000-of-00001', 'iterator-0.index']


def test_a_checkpoint_between_epochs_carries_the_shuffle_seed_over(tmp_path, uninterrupted):
    first = []
    with pytest.raises(KeyboardInterrupt):   # in epoch 3, after the checkpoint of epoch 2
        run(tmp_path, stop_at=2 * STEPS + 2, seen=first, checkpoint_epoch_freq=1)
    lines = []
    rest = run(tmp_path, lines, checkpoint_epoch_freq=1)
    assert lines[0].startswith(f'Resume training: epoch 2, step {2 * STEPS}, ')
    # a new dataset object starts its seeds afresh: epoch 3 is shuffled as epoch 3 anyway
    assert rest == uninterrupted[2 * STEPS:]


def test_the_same_dataset_object_resumed_in_process(tmp_path, uninterrupted):
    dataset = shuffled()     # iterated twice by the first loop, once more by the second
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, data=lambda: dataset, stop_at=STEPS + 3, checkpoint_step_freq=1)
    rest = run(tmp_path, data=lambda: dataset, checkpoint_step_freq=1)
    assert rest == uninterrupted[STEPS + 2:]


def test_asynchronous_checkpoints_hold_the_position_of_their_step(tmp_path, uninterrupted):
    first = []
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, stop_at=12, seen=first, checkpoint_step_freq=1, checkpoint_async=True)
    rest = run(tmp_path, checkpoint_step_freq=1, checkpoint_async=True)
    assert first[:11] + rest == uninterrupted
    assert not [n for n in os.listdir(tmp_path / 'checkpoint') if n.startswith('.tmp-')]


def test_a_large_iterator_state_is_reported_once_with_how_to_shrink_it(tmp_path):
    rows = 4096
    x = np.arange(rows * 64, dtype=np.float32).reshape(rows, 64)

    def data():   # the shuffle buffer holds 4096 rows of 64 floats: over 1 MiB
        return tf.data.Dataset.from_tensor_slices(x).shuffle(rows, seed=1).batch(512)

    lines = []
    with pytest.warns(UserWarning, match='takes [0-9.]+ MiB in each checkpoint'):
        run(tmp_path, lines, data=data, max_epoch=1, checkpoint_step_freq=2)
    reports = [line for line in lines if 'in each checkpoint' in line]
    assert len(reports) == 1
    assert reports[0].startswith('The state of the `tf.data` iterator of `iter_steps()` takes ')
    assert 'experimental_symbolic_checkpoint = True' in reports[0]
    assert 'smaller buffer' in reports[0]
    # a small pipeline says nothing
    small = []
    run(tmp_path / 'small', small, checkpoint_step_freq=1)
    assert not any('in each checkpoint' in line for line in small)


def generated():
    def rows():
        yield from range(4 * STEPS)
    return tf.data.Dataset.from_generator(
        rows, output_signature=tf.TensorSpec((), tf.int64)).batch(4)


def test_a_generator_pipeline_is_reported_and_resumes_by_skipping(style, tmp_path):
    with pytest.warns(UserWarning, match='cannot be saved in checkpoints'):
        reference = run(tmp_path / 'reference', data=generated, checkpoint_step_freq=1,
                        style=style)
    lines = []
    first = []
    with pytest.warns(UserWarning, match='cannot be saved in checkpoints'):
        with pytest.raises(KeyboardInterrupt):
            run(tmp_path, lines, data=generated, stop_at=8, seen=first, checkpoint_step_freq=1,
                style=style)
    reports = [line for line in lines if 'cannot be saved in checkpoints' in line]
    assert len(reports) == 1            # once, though every step saved a checkpoint
    assert reports[0].startswith('The `tf.data.Dataset` given to `iter_steps()` cannot be '
                                 'saved in checkpoints (')
    if not style.is_graph:   # graph style names TF's error less precisely
        assert '(PyFunc is stateful; ' in reports[0]
    assert 'from_generator' in reports[0]
    # the checkpoints are written all the same, without the iterator
    assert not os.path.exists(os.path.join(checkpoint_path(tmp_path, 7), 'loop'))
    lines = []
    with pytest.warns(UserWarning) as warned:
        rest = run(tmp_path, lines, data=generated, checkpoint_step_freq=1, style=style)
    assert [str(w.message)[:60] for w in warned] == [
        'Resuming epoch 2 of a `tf.data.Dataset` after 2 steps: its i',
        'The `tf.data.Dataset` given to `iter_steps()` cannot be save']
    assert lines[1] == ('Resuming epoch 2 of a `tf.data.Dataset` after 2 steps: its iterator '
                        'could not be saved, so its first 2 batches are skipped; ' + (
                            'if it shuffles unseeded, the rest of this epoch and every later '
                            'epoch differ from an uninterrupted run (a seeded shuffle repeats '
                            'its order each epoch in graph mode: those are exact)'
                            if style.is_graph else
                            'its shuffle seeds start over here, so if it shuffles unseeded or '
                            'reshuffles each epoch (the default), the rest of this epoch and '
                            'every later epoch differ from an uninterrupted run'))
    assert first[:7] + rest == reference      # an ordered source: skipping is exact


def test_a_checkpoint_without_the_iterator_falls_back_to_skipping(tmp_path, uninterrupted):
    first = []
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, stop_at=8, seen=first, checkpoint_step_freq=1)
    # the iterator's files are lost (copied without them, say)
    loop_dir = os.path.join(checkpoint_path(tmp_path, 7), 'loop')
    for name in os.listdir(loop_dir):
        os.remove(os.path.join(loop_dir, name))
    lines = []
    with pytest.warns(UserWarning, match='Resuming epoch 2'):
        rest = run(tmp_path, lines, checkpoint_step_freq=1)
    assert lines[1].startswith('Resuming epoch 2 of a `tf.data.Dataset` after 2 steps: its '
                               'iterator could not be put back (OSError: ')
    assert len(first[:7] + rest) == len(uninterrupted)


def test_a_failed_save_leaves_the_previous_checkpoint_and_no_staged_files(tmp_path, monkeypatch):
    from tfsnippet.scaffold.checkpoint import state_format

    first = []
    calls = {'n': 0}
    write = state_format.write_state_file

    def fail_at_the_third(directory, state):
        calls['n'] += 1
        if calls['n'] == 3:
            raise OSError('disk full')
        write(directory, state)

    monkeypatch.setattr(state_format, 'write_state_file', fail_at_the_third)
    with pytest.raises(RuntimeError, match='disk full'):
        run(tmp_path, stop_at=None, seen=first, checkpoint_step_freq=1)
    monkeypatch.undo()
    entries = os.listdir(tmp_path / 'checkpoint')
    assert sorted(n for n in entries if n.startswith('checkpoint.dat-')) == \
        ['checkpoint.dat-1', 'checkpoint.dat-2']
    assert not [n for n in entries if n.startswith('.tmp-')]
    lines = []
    rest = run(tmp_path, lines, checkpoint_step_freq=1)
    assert lines[0].startswith('Resume training: epoch 1, step 2, ')
    assert first[:2] + rest == run(tmp_path / 'reference', checkpoint_step_freq=1)


# --------------------------------------------------------------- killed processes
KILLED_SCRIPT = r'''
import argparse
import os
import signal
import sys

parser = argparse.ArgumentParser()
parser.add_argument('checkpoint_dir')
parser.add_argument('output')
parser.add_argument('--pause', type=int, default=0)
parser.add_argument('--kill-at-staged', type=int, default=0)
args = parser.parse_args()

import tensorflow as tf

import tfsnippet as spt

if args.kill_at_staged:
    # die when the K-th save moves the staged iterator files into its checkpoint
    rename, moves = os.rename, []

    def rename_or_die(src, dst, *more, **kwargs):
        if os.path.basename(str(src)).startswith('.tmp-loop-'):
            moves.append(src)
            if len(moves) == args.kill_at_staged:
                os.kill(os.getpid(), signal.SIGKILL)
        return rename(src, dst, *more, **kwargs)

    os.rename = rename_or_die


def say(line):
    print(line, flush=True)


dataset = tf.data.Dataset.range(20).shuffle(20, seed=3, reshuffle_each_iteration=True).batch(4)
loop = spt.TrainLoop(max_epoch=3, checkpoint_dir=args.checkpoint_dir, checkpoint_step_freq=1,
                     print_func=say, show_eta=False)


def after_step(lp):   # registered first: runs after the checkpoint of the step
    if lp.step == args.pause:
        say('PAUSED')
        sys.stdin.readline()


loop.events.on(spt.EventKeys.AFTER_STEP, after_step)
with loop:
    for epoch in loop.iter_epochs():
        for step, batch in loop.iter_steps(dataset):
            say(f'IDS {step} {batch.numpy().tolist()}')
say('FINISHED')
'''


def ids_of(lines):
    return {int(line.split()[1]): line.split(' ', 2)[2] for line in lines
            if line.startswith('IDS ')}


@pytest.fixture(scope='module')
def killed_script(tmp_path_factory):
    path = tmp_path_factory.mktemp('tfdata-script') / 'train.py'
    path.write_text(KILLED_SCRIPT)
    return str(path)


@pytest.fixture(scope='module')
def killed_reference(server, killed_script, tmp_path_factory):
    job = Job(server, killed_script, tmp_path_factory.mktemp('tfdata-reference'), 'reference')
    assert job.finish() == 0, job.stderr()
    ids = ids_of(job.lines)
    assert sorted(ids) == list(range(1, 16))
    return ids


def test_a_killed_process_resumes_the_same_batches(server, killed_script, killed_reference,
                                                   tmp_path):
    job = Job(server, killed_script, tmp_path, 'killed', '--pause', 8, pause=True)
    job.read_until('PAUSED')
    assert job.kill() == -9, job.stderr()
    before = ids_of(job.lines)
    assert sorted(before) == list(range(1, 9))
    resumed = Job(server, killed_script, tmp_path, 'resumed')
    assert resumed.finish() == 0, resumed.stderr()
    assert resumed.lines[0].startswith('Resume training: epoch 2, step 8, ')
    after = ids_of(resumed.lines)
    assert sorted(after) == list(range(9, 16))
    assert {**before, **after} == killed_reference


def test_a_process_killed_while_saving_the_iterator_resumes_the_save_before(
        server, killed_script, killed_reference, tmp_path):
    job = Job(server, killed_script, tmp_path, 'killed', '--kill-at-staged', 5)
    assert job.finish() == -9, job.stderr()
    assert sorted(ids_of(job.lines)) == list(range(1, 6))
    entries = os.listdir(tmp_path / 'ckpt' / 'checkpoint')
    assert sorted(n for n in entries if n.startswith('checkpoint.dat-')) == \
        [f'checkpoint.dat-{s}' for s in range(1, 5)]
    assert any(n.startswith('.tmp-loop-') for n in entries)   # what the killed save left
    resumed = Job(server, killed_script, tmp_path, 'resumed')
    assert resumed.finish() == 0, resumed.stderr()
    assert resumed.lines[0].startswith('Resume training: epoch 1, step 4, ')
    after = ids_of(resumed.lines)
    assert sorted(after) == list(range(5, 16))
    assert after == {s: killed_reference[s] for s in range(5, 16)}
    assert not [n for n in os.listdir(tmp_path / 'ckpt' / 'checkpoint') if n.startswith('.tmp-')]


def test_the_iterator_is_written_at_checkpoints_only_and_named_by_the_state(
        tmp_path, monkeypatch):
    from tfsnippet.scaffold.checkpoint import state_format
    from tfsnippet.scaffold.checkpoint.saver import LOOP_STATE_KEY

    writes = []
    write = tf.train.Checkpoint.write

    def counted(self, *args, **kwargs):
        writes.append(args[0] if args else kwargs.get('file_prefix'))
        return write(self, *args, **kwargs)

    monkeypatch.setattr(tf.train.Checkpoint, 'write', counted)
    run(tmp_path, checkpoint_epoch_freq=1)       # 15 steps, one save per epoch
    assert len(writes) == MAX_EPOCH
    state = state_format.read_state(checkpoint_path(tmp_path, MAX_EPOCH * STEPS))
    assert state['objects'][LOOP_STATE_KEY]['loop']['datasets'] == [
        {'epoch': MAX_EPOCH, 'file': 'iterator-0', 'unsaveable': False}]


def test_checkpoints_on_a_bucket_resume_the_same_batches(s3_bucket, uninterrupted):
    url = f'{s3_bucket}/run/checkpoint'
    first = []
    with pytest.raises(KeyboardInterrupt):
        run(url, stop_at=8, seen=first, checkpoint_step_freq=1, checkpoint_max_to_keep=2)
    lines = []
    rest = run(url, lines, checkpoint_step_freq=1, checkpoint_max_to_keep=2)
    assert lines[0] == (f'Resume training: epoch 2, step 7, from checkpoint '
                        f'{url}/checkpoint/checkpoint.dat-7')
    assert not any('skipped' in line or 'skipping' in line for line in lines), lines
    assert first[:7] + rest == uninterrupted
