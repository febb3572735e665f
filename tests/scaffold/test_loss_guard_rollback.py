"""``LossGuard(action='rollback')``: back to the newest checkpoint on a NaN or a spike,
skipping the batches in between; and the spike rule.

The tests taking ``style`` run in both TF styles with one body.
"""

import numpy as np
import pytest

import tfsnippet as spt
from tests.scaffold.health_models import regression_data, sgd_regression


def train(style, ckpt, bad_steps=(), scale=np.nan, guard=None, epochs=4, lines=None):
    """Train the regression for `epochs` epochs of 10 batches, saving every 5 steps,
    with the inputs of `bad_steps` multiplied by `scale`; return the final weights."""
    batches, _ = regression_data()
    w, step = sgd_regression(style, lr=.05)
    loop = spt.TrainLoop([w], max_epoch=epochs, checkpoint_dir=str(ckpt),
                         checkpoint_step_freq=5, show_eta=False,
                         print_func=(lines.append if lines is not None else lambda s: None))
    if guard is not None:
        loop.add_component(guard)
    with loop:
        for _ in loop.iter_epochs():
            for n, (x, y) in loop.iter_steps(batches):
                if n in bad_steps:
                    x = x * scale
                loop.collect_metrics(loss=step(x, y))
        return style.value(w)


def test_a_nan_rolls_back_skips_and_finishes_like_a_clean_run(style, tmp_path):
    clean = train(style, tmp_path / 'clean')
    lines = []
    guard = spt.LossGuard(action='rollback', max_rollbacks=2)
    with style.new_run():
        rolled = train(style, tmp_path / 'nan', bad_steps=(13,), guard=guard, lines=lines)
    assert np.all(np.isfinite(rolled))
    np.testing.assert_allclose(rolled, clean, atol=2e-2)
    assert [(r['step'], r['restored_step'], r['skipped']) for r in guard.rollbacks] == \
        [(13, 10, 3)]
    said = [line for line in lines if line.startswith('Loss guard')]
    assert said == [(f'Loss guard: `loss` is nan at epoch 2, step 13: rolled back to the '
                    f'checkpoint of step 10 ({guard.rollbacks[0]["path"]}), skipping the '
                    f'batches of steps 11-13, rollback 1 of 2')]


def test_the_rollbacks_are_saved_and_the_guard_gives_up_after_max_rollbacks(style, tmp_path):
    guard = spt.LossGuard(action='rollback', max_rollbacks=2)
    with pytest.raises(spt.LossGuardError,
                       match=r'^`loss` is nan at epoch 3, step 23, after 2 rollbacks \(the '
                             r'most `max_rollbacks` allows\): giving up'):
        train(style, tmp_path / 'ckpt', bad_steps=(13, 17, 23), guard=guard)
    assert [r['restored_step'] for r in guard.rollbacks] == [10, 15]
    # the count survives a resume: the next NaN gives up at once
    again = spt.LossGuard(action='rollback', max_rollbacks=2)
    with style.new_run(), pytest.raises(spt.LossGuardError, match='after 2 rollbacks'):
        train(style, tmp_path / 'ckpt', bad_steps=(23,), guard=again)
    assert len(again.rollbacks) == 2


def test_a_spike_above_the_running_median_rolls_back(style, tmp_path):
    lines = []
    guard = spt.LossGuard(action='rollback', spike=10., window=5)
    w = train(style, tmp_path / 'ckpt', bad_steps=(27,), scale=1000., guard=guard,
              lines=lines)
    assert [r['step'] for r in guard.rollbacks] == [27]
    assert 'a spike above 10 times the median' in guard.rollbacks[0]['problem']
    assert np.all(np.abs(w) < 10)


def test_the_spike_rule_alone():
    """Judged once the window is full, against the median of the values that passed."""
    guard = spt.LossGuard(spike=3., window=3, action='stop')
    loop = spt.TrainLoop(max_step=20, print_func=lambda s: None)
    loop.add_component(guard)
    values = [5., 1., 1., 2.9, 100., 3.1, 2.]   # 100 > 3 x median(1, 2.9, ...)
    with loop:
        for _ in loop.iter_epochs():
            for n in loop.iter_steps():
                loop.collect_metrics(loss=values[n - 1])
    assert loop.step == 5
    assert loop.stop_reason == ('`loss` is 100, a spike above 3 times the median 1 of the '
                                'last 3 values at epoch 1, step 5')


def test_rollback_needs_a_checkpointer_and_a_checkpoint(tmp_path):
    loop = spt.TrainLoop(max_step=3, print_func=lambda s: None)
    loop.add_component(spt.LossGuard(action='rollback'))
    with pytest.raises(RuntimeError, match="the loop has no Checkpointer"), loop:
        pass
    loop = spt.TrainLoop(max_step=3, checkpoint_dir=str(tmp_path), print_func=lambda s: None)
    loop.add_component(spt.LossGuard(action='rollback'))
    with pytest.raises(spt.LossGuardError, match='no checkpoint to roll back to yet'), loop:
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps():
                loop.collect_metrics(loss=float('nan'))
    with pytest.raises(ValueError, match=r'`spike` must be a number above 1'):
        spt.LossGuard(spike=1.)
    with pytest.raises(ValueError, match=r"`action` must be 'raise', 'stop' or 'rollback'"):
        spt.LossGuard(action='skip')
