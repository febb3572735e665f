"""A warm start from a run folder reads its best checkpoint when one is pinned
(``checkpoint_keep_best``), else its newest, and the first line printed says which."""

import os

import pytest

import tfsnippet as spt
from tfsnippet.scaffold.checkpoint.warm_start import warm_start

VALID = [0.3, 0.1, 0.5, 0.4]   # valid_loss after each epoch: the best is epoch 2


def train(style, root, **kwargs):
    """Four epochs of two steps, each adding 1 to `w`; returns the last value of `w`."""
    w = style.variable(0., 'w')
    step = style.updater(w, 1.)
    with spt.TrainLoop([w], max_epoch=len(VALID), checkpoint_dir=str(root),
                       checkpoint_epoch_freq=1, print_func=lambda line: None,
                       **kwargs) as loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                step()
            loop.collect_metrics({'valid_loss': VALID[epoch - 1]})
    return float(style.value(w))


def checkpoint(root, step):
    return os.path.join(str(root), 'checkpoint', f'checkpoint.dat-{step}')


@pytest.mark.parametrize('given', ['run folder', 'checkpoint folder'])
def test_the_best_checkpoint_of_a_run_is_read_when_one_is_pinned(style, tmp_path, given):
    assert train(style, tmp_path / 'run', checkpoint_keep_best=True) == 8.
    source = tmp_path / 'run' if given == 'run folder' else tmp_path / 'run' / 'checkpoint'
    fresh = style.variable(0., 'fresh')
    lines = []
    report = warm_start(source, {'w': fresh}, print_func=lines.append)
    assert float(style.value(fresh)) == 4.          # the value at the end of epoch 2
    assert report.source == checkpoint(tmp_path / 'run', 4)
    assert report.chosen == 'the best: valid_loss = 0.1, epoch 2, step 4'
    assert lines[0].split('\n')[0] == (
        f"Warm start from tfsnippet checkpoint {checkpoint(tmp_path / 'run', 4)!r} "
        f"(the best: valid_loss = 0.1, epoch 2, step 4)")


def test_the_loop_warm_starts_from_the_best_of_another_run(style, tmp_path):
    train(style, tmp_path / 'run', checkpoint_keep_best=True)
    fresh = style.variable(0., 'fresh')
    lines = []
    with spt.TrainLoop([fresh], max_epoch=1, checkpoint_dir=str(tmp_path / 'next'),
                       warm_start={'source': str(tmp_path / 'run'), 'targets': {'w': fresh}},
                       print_func=lines.append):
        assert float(style.value(fresh)) == 4.
    assert lines[0].startswith(
        f"Warm start from tfsnippet checkpoint {checkpoint(tmp_path / 'run', 4)!r} (the best")


def test_without_a_pinned_best_the_newest_is_read_and_said(style, tmp_path):
    assert train(style, tmp_path / 'run') == 8.
    fresh = style.variable(0., 'fresh')
    report = warm_start(tmp_path / 'run', {'w': fresh}, print_func=None)
    assert float(style.value(fresh)) == 8.
    assert (report.source, report.chosen) == (checkpoint(tmp_path / 'run', 8),
                                              'the newest: no best is pinned')
    # a checkpoint given itself is that one, nothing said
    report = warm_start(checkpoint(tmp_path / 'run', 6), {'w': fresh}, print_func=None)
    assert (float(style.value(fresh)), report.chosen) == (6., '')
