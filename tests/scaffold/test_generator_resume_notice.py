"""What the notice of a resume by skipping says of a ``tf.data`` pipeline whose
iterator cannot be saved (a ``from_generator`` source), and that it is true.

In eager mode a new iterator starts the shuffle seeds over: a reshuffling
pipeline resumed by skipping serves other orders than an uninterrupted run,
in the rest of the resumed epoch and in every later one.  In graph mode a
seeded shuffle repeats its order each epoch, so the resume is exact there.
"""

import warnings

import numpy as np
import tensorflow as tf

import tfsnippet as spt

ROWS, BATCH, MAX_EPOCH = 20, 4, 3
STEPS = ROWS // BATCH


def generated():
    def rows():
        yield from range(ROWS)
    # a buffer smaller than the data: the generator's state is part of the iterator's
    return tf.data.Dataset.from_generator(
        rows, output_signature=tf.TensorSpec((), tf.int64)).shuffle(8, seed=3).batch(BATCH)


def run(style, root, lines, stop_at=None, seen=None):
    """Train over a new pipeline (in a new graph and session in graph style, as a
    new process would); return the rows of each step."""
    seen = [] if seen is None else seen

    def train():
        dataset = generated()
        with spt.TrainLoop(max_epoch=MAX_EPOCH, checkpoint_dir=str(root), show_eta=False,
                           checkpoint_step_freq=1, print_func=lines.append) as loop:
            for _ in loop.iter_epochs():
                for step, batch in loop.iter_steps(dataset):
                    seen.append(np.asarray(batch).tolist())
                    if step == stop_at:
                        raise KeyboardInterrupt()

    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        if style.is_graph:
            with tf.Graph().as_default(), tf.compat.v1.Session().as_default():
                train()
        else:
            train()
    return seen


def test_a_skipping_resume_says_which_epochs_differ_and_they_do(style, tmp_path):
    reference = run(style, tmp_path / 'reference', [])
    first = []
    try:
        run(style, tmp_path / 'run', [], stop_at=STEPS + 3, seen=first)
    except KeyboardInterrupt:
        pass
    lines = []
    resumed = first[:STEPS + 2] + run(style, tmp_path / 'run', lines)
    notices = [line for line in lines if line.startswith('Resuming epoch')]
    head = ('Resuming epoch 2 of a `tf.data.Dataset` after 2 steps: its iterator could not '
            'be saved, so its first 2 batches are skipped; ')
    epochs = [[resumed[e * STEPS:(e + 1) * STEPS], reference[e * STEPS:(e + 1) * STEPS]]
              for e in range(MAX_EPOCH)]
    if style.is_graph:
        assert notices == [head + (
            'if it shuffles unseeded, the rest of this epoch and every later epoch differ '
            'from an uninterrupted run (a seeded shuffle repeats its order each epoch in '
            'graph mode: those are exact)')]
        assert resumed == reference                 # seeded: exact, as said
    else:
        assert notices == [head + (
            'its shuffle seeds start over here, so if it shuffles unseeded or reshuffles '
            'each epoch (the default), the rest of this epoch and every later epoch differ '
            'from an uninterrupted run')]
        # what it says is true: the epochs after the resume differ too
        assert epochs[0][0] == epochs[0][1]
        assert epochs[1][0] != epochs[1][1]
        assert epochs[2][0] != epochs[2][1]
        assert epochs[2][0] == epochs[1][1]         # epoch 3 is served epoch 2's order
