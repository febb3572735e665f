"""Subclasses of Keras's callbacks, and callbacks of a user's own, keep their state
across a resume of the loop (``spt.KerasCallbacks`` matches callbacks by class).

Keras 3 callbacks run eagerly only (``KerasCallbacks`` refuses graph mode), so
these tests have no graph twin.
"""

import keras
import numpy as np
import pytest

import tfsnippet as spt
from tfsnippet.scaffold.loop import core as loop_core
from tfsnippet.scaffold.loop.distribution import LoopDistribution

from .test_keras_callbacks import STOPPED, VALID, make_model, valid_loop
from .test_loop_strategy import FakeTwoWorkerBackend


class MyEarlyStopping(keras.callbacks.EarlyStopping):
    pass


class MyPlateau(keras.callbacks.ReduceLROnPlateau):
    pass


class CountEpochs(keras.callbacks.Callback, spt.CheckpointSavableObject):
    """A user's callback whose state (what `on_train_begin` resets) is saved."""

    def on_train_begin(self, logs=None):
        self.seen = []

    def on_epoch_end(self, epoch, logs=None):
        self.seen.append([epoch, float(logs['valid_loss'])])

    def get_state(self):
        return {'seen': self.seen}

    def set_state(self, state):
        self.seen = [list(item) for item in state['seen']]


def test_an_early_stopping_subclass_resumes_with_its_state(tmp_path):
    first = MyEarlyStopping(patience=3, restore_best_weights=True)
    valid_loop([first], make_model(), tmp_path, 4, VALID)
    assert (first.wait, first.best, first.best_epoch) == (1, 3., 2)

    resumed, lines = MyEarlyStopping(patience=3, restore_best_weights=True), []
    loop = valid_loop([resumed], make_model(), tmp_path, 10, VALID, lines)
    # as the uninterrupted EarlyStopping: stops at epoch 6, best epoch 3's weights back
    assert (resumed.wait, resumed.best, resumed.best_epoch, resumed.stopped_epoch) == \
        (3, 3., 2, 5)
    assert loop.epoch == 6
    assert STOPPED.format(epoch=6, step=12, name='MyEarlyStopping') in lines
    np.testing.assert_array_equal(resumed.model.layers[0].kernel.numpy(), np.full((3, 1), 3.))


def test_a_reduce_lr_on_plateau_subclass_resumes_with_its_state(tmp_path):
    def peeking(plateau, seen):
        return keras.callbacks.LambdaCallback(on_epoch_begin=lambda e, logs: seen.append(
            (plateau.wait, plateau.cooldown_counter, plateau.best)))

    first = MyPlateau(factor=.5, patience=2, cooldown=1)
    valid_loop([first, peeking(first, [])], make_model(lr=1.), tmp_path, 5, VALID,
               save_optimizer=True)
    saved = (first.wait, first.cooldown_counter, first.best)
    assert saved == (0, 1, 3.)        # lowered at epoch 5: cooling down

    resumed, seen = MyPlateau(factor=.5, patience=2, cooldown=1), []
    peek = peeking(resumed, seen)
    model = make_model(lr=1.)
    valid_loop([resumed, peek], model, tmp_path, 10, VALID, save_optimizer=True)
    assert seen[0] == saved
    # the uninterrupted trace: lowered at epochs 5, 7 and 9
    assert float(model.optimizer.learning_rate) == .125


def test_a_users_savable_callback_resumes_with_its_state(tmp_path):
    whole = CountEpochs()
    valid_loop([whole], make_model(), tmp_path / 'whole', 6, VALID)

    first = CountEpochs()
    valid_loop([first], make_model(), tmp_path / 'cut', 3, VALID)
    resumed = CountEpochs()
    valid_loop([resumed], make_model(), tmp_path / 'cut', 6, VALID)
    assert resumed.seen == whole.seen == [[e, VALID[e]] for e in range(6)]


def test_a_callback_whose_state_is_not_a_dict_is_refused(tmp_path):
    class Bad(CountEpochs):
        def get_state(self):
            return self.seen

    with pytest.raises(TypeError, match=r'^`callbacks\[0\]` \(Bad\)\.get_state\(\) must return '
                                        r'a dict of plain data, got \[\[0, 5\.0\]\]$'):
        valid_loop([Bad()], make_model(), tmp_path, 2, VALID)


def test_a_plateau_subclass_needs_the_model_s_optimizer():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    with pytest.raises(ValueError, match=r'`callbacks\[0\]` \(MyPlateau\) sets the learning '
                                         r'rate of'):
        spt.KerasCallbacks([MyPlateau()], model=model)


def test_a_savable_chief_only_callback_is_not_asked_its_state_on_another_worker(
        tmp_path, monkeypatch):
    def attach(loop, strategy, coordinator, clock, on_stop):
        return LoopDistribution(loop, FakeTwoWorkerBackend(1), clock, on_stop)
    monkeypatch.setattr(loop_core, 'attach_distribution', attach)

    counter, model = CountEpochs(), make_model()   # idle on worker 1: never began training
    loop = spt.TrainLoop(max_epoch=2, checkpoint_dir=str(tmp_path), checkpoint_epoch_freq=1,
                         print_func=[].append)
    loop.add_component(spt.KerasCallbacks([counter], model=model, chief_only=[counter]))
    with loop:   # each epoch's save reads the states (only the chief writes)
        for _ in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                pass
            loop.collect_metrics(valid_loss=1.)
    assert loop.epoch == 2 and not hasattr(counter, 'seen')
