"""Keras callbacks inside a TrainLoop: ``spt.KerasCallbacks`` (issue 19, part 1).

Each callback Keras ships that makes sense outside ``fit`` is run twice on
the same data, model seed and optimizer: by ``Model.fit`` and by a
``TrainLoop`` whose step is written by hand (plain SGD on a linear model,
batches of 16 taken in order), and what each run shows a user (learning-rate
traces, the stop epoch, restored weights, CSV columns, files) is compared.
The validation target differs from the training one, so ``val_loss`` falls,
then rises: plateaus and early stops happen within a few epochs.

Keras 3 callbacks need eager execution; the graph twin
(tests/graph/test_keras_callbacks_graph.py) checks that graph mode is refused.
"""

import csv
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

import tfsnippet as spt
from tfsnippet import EventKeys
from tfsnippet.scaffold.loop import core as loop_core
from tfsnippet.scaffold.loop.distribution import LoopDistribution

from .test_loop_strategy import FakeTwoWorkerBackend

RNG = np.random.RandomState(0)
X = RNG.normal(size=(64, 3)).astype('float32')
Y = (X @ np.array([[1.], [-2.], [.5]])).astype('float32')
XV = RNG.normal(size=(32, 3)).astype('float32')
YV = (XV @ np.array([[1.], [0.], [0.]])).astype('float32')
BATCHES = [(X[i:i + 16], Y[i:i + 16]) for i in range(0, 64, 16)]
STOPPED = 'Training stopped at epoch {epoch}, step {step}: the Keras callback {name} set ' \
          '`model.stop_training`'


def make_model(lr=0.05):
    keras.utils.set_random_seed(1)
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    model.compile(optimizer=keras.optimizers.SGD(lr), loss='mse', jit_compile=False)
    return model


def run_fit(model, callbacks, epochs, x=X):
    return model.fit(x, Y, batch_size=16, epochs=epochs, shuffle=False, verbose=0,
                     validation_data=(XV, YV), callbacks=callbacks)


def run_loop(model, callbacks, epochs, lines=None, batches=BATCHES, **loop_kwargs):
    """The same training as `run_fit`, by a TrainLoop; returns the loop."""
    opt = model.optimizer

    def step(xb, yb):
        with tf.GradientTape() as tape:
            loss = keras.ops.mean(keras.ops.square(yb - model(xb, training=True)))
        grads = tape.gradient(loss, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        return float(loss)

    loop = spt.TrainLoop(max_epoch=epochs, print_func=(lines if lines is not None else []).append,
                         show_eta=False, **loop_kwargs)
    loop.add_component(spt.KerasCallbacks(callbacks, model=model))
    with loop:
        for _ in loop.iter_epochs():
            for _, (xb, yb) in loop.iter_steps(batches):
                loop.collect_metrics(loss=step(xb, yb))
            loop.collect_metrics(valid_loss=float(keras.ops.mean(keras.ops.square(YV - model(XV)))))
            loop.print_logs()
    return loop


def lr_recorder(model, trace):
    return keras.callbacks.LambdaCallback(
        on_epoch_begin=lambda epoch, logs: trace.append(float(model.optimizer.learning_rate)))


# ------------------------------------------------------------------ against fit
def test_reduce_lr_on_plateau_gives_fit_s_learning_rate_trace():
    traces = []
    for runner in (run_fit, run_loop):
        model, trace = make_model(), []
        plateau = keras.callbacks.ReduceLROnPlateau(monitor='val_loss', factor=.5, patience=1,
                                                    cooldown=1, min_delta=0.01)
        runner(model, [plateau, lr_recorder(model, trace)], 8)
        traces.append(trace)
    assert traces[0] == traces[1]
    assert len(set(traces[0])) >= 3   # it did reduce, more than once


def test_early_stopping_stops_at_fit_s_epoch_and_restores_the_best_weights():
    results = []
    for runner in (run_fit, run_loop):
        model, epochs, lines = make_model(), [], []
        stopper = keras.callbacks.EarlyStopping(monitor='val_loss', patience=2,
                                                restore_best_weights=True)
        counter = keras.callbacks.LambdaCallback(on_epoch_end=lambda e, logs: epochs.append(e))
        if runner is run_fit:
            runner(model, [stopper, counter], 20)
        else:
            run_loop(model, [stopper, counter], 20, lines=lines)
        results.append((epochs, stopper.stopped_epoch, stopper.best_epoch,
                        [w.copy() for w in model.get_weights()], lines))
    (fit_epochs, fit_stop, fit_best, fit_w, _), (epochs, stop, best, w, lines) = results
    assert epochs == fit_epochs and 0 < stop == fit_stop < 19 and best == fit_best
    for a, b in zip(w, fit_w):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    assert STOPPED.format(epoch=stop + 1, step=4 * (stop + 1), name='EarlyStopping') in lines


def test_csv_logger_writes_fit_s_columns_and_the_loop_s_own(tmp_path):
    rows = {}
    for runner in (run_fit, run_loop):
        path = str(tmp_path / f'{runner.__name__}.csv')
        runner(make_model(), [keras.callbacks.CSVLogger(path)], 3)
        with open(path, newline='') as f:
            rows[runner] = list(csv.DictReader(f))
    fit_rows, loop_rows = rows[run_fit], rows[run_loop]
    # the loop's logs have every column of fit's, plus its own names
    assert set(loop_rows[0]) == set(fit_rows[0]) | {'valid_loss', 'epoch_time', 'step_time'}
    assert len(loop_rows) == len(fit_rows) == 3
    for a, b in zip(loop_rows, fit_rows):
        assert a['epoch'] == b['epoch']
        for column in ('loss', 'val_loss'):
            np.testing.assert_allclose(float(a[column]), float(b[column]), rtol=1e-5)
        assert a['valid_loss'] == a['val_loss']


def test_terminate_on_nan_stops_after_fit_s_step():
    x = X.copy()
    x[37] = np.nan   # the third batch of the first epoch
    counts = []
    lines = []
    for runner in ('fit', 'loop'):
        model, seen = make_model(), []
        callbacks = [keras.callbacks.TerminateOnNaN(),
                     keras.callbacks.LambdaCallback(
                         on_train_batch_end=lambda b, logs: seen.append(b))]
        if runner == 'fit':
            run_fit(model, callbacks, 3, x=x)
        else:
            batches = [(x[i:i + 16], Y[i:i + 16]) for i in range(0, 64, 16)]
            run_loop(model, callbacks, 3, lines=lines, batches=batches)
        counts.append(seen)
    assert counts[0] == counts[1] == [0, 1, 2]
    assert STOPPED.format(epoch=1, step=3, name='TerminateOnNaN') in lines


def test_learning_rate_scheduler_gives_fit_s_trace():
    traces = []
    for runner in (run_fit, run_loop):
        model, trace = make_model(), []
        schedule = keras.callbacks.LearningRateScheduler(lambda epoch, lr: 0.1 * 0.5 ** epoch)
        runner(model, [schedule, lr_recorder(model, trace)], 4)
        traces.append(trace)
    assert traces[0] == traces[1]
    np.testing.assert_allclose(traces[1], [0.1, 0.05, 0.025, 0.0125])


def test_model_checkpoint_saves_fit_s_files(tmp_path):
    saved = {}
    for runner in (run_fit, run_loop):
        folder = tmp_path / runner.__name__
        folder.mkdir()
        model = make_model()
        every = keras.callbacks.ModelCheckpoint(str(folder / 'w{epoch:02d}.weights.h5'),
                                                save_weights_only=True)
        best = keras.callbacks.ModelCheckpoint(str(folder / 'best.keras'), monitor='val_loss',
                                               save_best_only=True)
        runner(model, [every, best], 4)
        saved[runner] = sorted(os.listdir(folder))
        reloaded = keras.models.load_model(str(folder / 'best.keras'))
        saved[runner, 'best'] = reloaded.get_weights()
    assert saved[run_loop] == saved[run_fit] == ['best.keras'] + [
        f'w{e:02d}.weights.h5' for e in range(1, 5)]
    for a, b in zip(saved[run_loop, 'best'], saved[run_fit, 'best']):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_lambda_callback_is_called_in_fit_s_order():
    calls = {}
    for runner in (run_fit, run_loop):
        seen = []
        callback = keras.callbacks.LambdaCallback(
            on_train_begin=lambda logs: seen.append('train_begin'),
            on_epoch_begin=lambda e, logs: seen.append(('epoch_begin', e)),
            on_epoch_end=lambda e, logs: seen.append(('epoch_end', e, 'val_loss' in logs)),
            on_train_end=lambda logs: seen.append('train_end'))
        runner(make_model(), [callback], 2)
        calls[runner] = seen
    assert calls[run_loop] == calls[run_fit] == [
        'train_begin', ('epoch_begin', 0), ('epoch_end', 0, True), ('epoch_begin', 1),
        ('epoch_end', 1, True), 'train_end']


# ------------------------------------------------------------------ per step, or not
class EpochOnly(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.logs = []

    def on_epoch_end(self, epoch, logs=None):
        self.logs.append((epoch, dict(logs)))


class BatchEnd(keras.callbacks.Callback):
    def __init__(self, stop_at=None):
        super().__init__()
        self.batches = []
        self.stop_at = stop_at

    def on_train_batch_end(self, batch, logs=None):
        self.batches.append((batch, dict(logs)))
        if batch == self.stop_at:
            self.model.stop_training = True


def counting_loop(callbacks, max_epoch=2, steps=5, lines=None, **kwargs):
    """A loop of no-op steps collecting ``loss = step``; ``valid_loss`` per epoch."""
    model = make_model()
    component = spt.KerasCallbacks(callbacks, model=model)
    loop = spt.TrainLoop(max_epoch=max_epoch, print_func=(lines if lines is not None
                                                           else []).append, **kwargs)
    loop.add_component(component)
    per_step = {}
    with loop:
        for epoch in loop.iter_epochs():
            for step, _ in loop.iter_steps(range(steps)):
                loop.collect_metrics(loss=float(step))
            loop.collect_metrics(valid_loss=10. - epoch)
            loop.print_logs()
        per_step = {key: len(loop.events.handlers(key))
                    for key in (EventKeys.BEFORE_STEP, EventKeys.AFTER_STEP,
                                EventKeys.METRICS_COLLECTED)}
    return loop, component, per_step


def test_a_callback_without_batch_methods_adds_no_per_step_call(monkeypatch):
    calls = []
    for name in ('on_batch_begin', 'on_batch_end', 'on_train_batch_begin',
                 'on_train_batch_end'):
        monkeypatch.setattr(keras.callbacks.Callback, name,
                            lambda self, batch, logs=None, name=name: calls.append(name))
    callback = EpochOnly()
    _, component, per_step = counting_loop([callback])
    assert calls == [] and not component.per_step
    assert per_step == {EventKeys.BEFORE_STEP: 0, EventKeys.AFTER_STEP: 0,
                        EventKeys.METRICS_COLLECTED: 0}
    # the epoch logs: the epoch line's means, `valid_loss` also as `val_loss`
    assert [e for e, _ in callback.logs] == [0, 1]
    logs = callback.logs[1][1]
    assert logs['loss'] == 8. and logs['valid_loss'] == logs['val_loss'] == 8.
    assert {'epoch_time', 'step_time'} <= set(logs)


def test_a_batch_method_gets_each_step_s_values_and_can_stop_the_loop():
    callback = BatchEnd(stop_at=2)
    lines = []
    loop, component, per_step = counting_loop([callback, EpochOnly()], max_epoch=3,
                                              lines=lines, show_eta=False)
    assert component.per_step
    assert callback.batches == [(0, {'loss': 1.}), (1, {'loss': 2.}), (2, {'loss': 3.})]
    assert loop.step == 3 and loop.epoch == 1
    assert STOPPED.format(epoch=1, step=3, name='BatchEnd') in lines
    assert per_step[EventKeys.AFTER_STEP] == 1

    callback = BatchEnd()
    begin = keras.callbacks.LambdaCallback(
        on_train_batch_begin=lambda batch, logs: begun.append(batch))
    begun = []
    counting_loop([callback, begin], max_epoch=2, steps=3)
    assert [b for b, _ in callback.batches] == begun == [0, 1, 2, 0, 1, 2]


def test_a_user_subclass_stopping_at_epoch_end_stops_the_loop():
    class StopAfterSecond(EpochOnly):
        def on_epoch_end(self, epoch, logs=None):
            super().on_epoch_end(epoch, logs)
            if epoch == 1:
                self.model.stop_training = True

    lines = []
    callback, later = StopAfterSecond(), EpochOnly()
    loop, _, _ = counting_loop([callback, later], max_epoch=5, lines=lines, show_eta=False)
    assert loop.epoch == 2 and len(later.logs) == 2   # the one after still saw epoch 2
    assert lines[-1] == STOPPED.format(epoch=2, step=10, name='StopAfterSecond')


# ------------------------------------------------------------------ resuming
def valid_loop(callbacks, model, root, max_epoch, values, lines=None, save_optimizer=False):
    """Epochs of two empty steps, collecting ``valid_loss = values[epoch - 1]``, the
    model's kernel set to the epoch (no line printed: the logs are the epoch's own
    statistics), a checkpoint at the end of each epoch (with the optimizer if asked)."""
    objects = None
    if save_optimizer:
        model.optimizer.build(model.trainable_variables)
        objects = {'optimizer': model.optimizer}
    loop = spt.TrainLoop(max_epoch=max_epoch, checkpoint_dir=str(root), checkpoint_epoch_freq=1,
                         print_func=(lines if lines is not None else []).append, show_eta=False,
                         checkpoint_save_objects=objects)
    loop.add_component(spt.KerasCallbacks(callbacks, model=model))
    with loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(2)):
                pass
            model.layers[0].kernel.assign(np.full((3, 1), float(epoch)))
            loop.collect_metrics(valid_loss=values[epoch - 1])
    return loop


VALID = [5., 4., 3., 3.5, 3.6, 3.7, 3.8, 3.9, 4.0, 4.1]


def test_early_stopping_state_resumes_with_the_loop(tmp_path):
    model = make_model()
    whole = keras.callbacks.EarlyStopping(patience=3, restore_best_weights=True)
    valid_loop([whole], model, tmp_path / 'whole', 10, VALID)
    np.testing.assert_array_equal(model.layers[0].kernel.numpy(), np.full((3, 1), 3.))

    first = keras.callbacks.EarlyStopping(patience=3, restore_best_weights=True)
    valid_loop([first], model, tmp_path / 'cut', 4, VALID)
    assert (first.wait, first.best) == (1, 3.)
    resumed = keras.callbacks.EarlyStopping(patience=3, restore_best_weights=True)
    lines = []
    loop = valid_loop([resumed], make_model(), tmp_path / 'cut', 10, VALID, lines)
    assert (resumed.wait, resumed.best, resumed.best_epoch, resumed.stopped_epoch) == \
        (whole.wait, whole.best, whole.best_epoch, whole.stopped_epoch) == (3, 3., 2, 5)
    assert loop.epoch == 6
    assert STOPPED.format(epoch=6, step=12, name='EarlyStopping') in lines
    # the best weights (epoch 3's kernel) came back from the checkpoint
    np.testing.assert_array_equal(resumed.model.layers[0].kernel.numpy(), np.full((3, 1), 3.))


def test_reduce_lr_on_plateau_state_resumes_with_the_loop(tmp_path):
    def trace_of(root, cut):
        model = make_model(lr=1.)
        trace = []
        plateau = keras.callbacks.ReduceLROnPlateau(factor=.5, patience=2, cooldown=1)
        recorder = keras.callbacks.LambdaCallback(
            on_epoch_end=lambda e, logs: trace.append(float(model.optimizer.learning_rate)))
        if cut:
            valid_loop([plateau, recorder], model, root, cut, VALID, save_optimizer=True)
            state = (plateau.wait, plateau.cooldown_counter, plateau.best)
            # as a new process: new objects, the learning rate back from the checkpoint
            model = make_model(lr=1.)
            plateau = keras.callbacks.ReduceLROnPlateau(factor=.5, patience=2, cooldown=1)
            recorder = keras.callbacks.LambdaCallback(
                on_epoch_begin=lambda e, logs: state_seen.append(
                    (plateau.wait, plateau.cooldown_counter, plateau.best)),
                on_epoch_end=lambda e, logs: trace.append(float(model.optimizer.learning_rate)))
            state_seen = []
            valid_loop([plateau, recorder], model, root, 10, VALID, save_optimizer=True)
            assert state_seen[0] == state
        else:
            valid_loop([plateau, recorder], model, root, 10, VALID)
        return trace

    whole = trace_of(tmp_path / 'whole', None)
    assert whole == [1., 1., 1., 1., .5, .5, .25, .25, .125, .125]
    assert trace_of(tmp_path / 'cut', 5) == whole


# ------------------------------------------------------------------ under a strategy
def test_non_chief_worker_runs_the_callbacks_but_not_the_file_writers(tmp_path, monkeypatch):
    def fake_worker(index):
        def attach(loop, strategy, coordinator, clock, on_stop):
            return LoopDistribution(loop, FakeTwoWorkerBackend(index), clock, on_stop)
        monkeypatch.setattr(loop_core, 'attach_distribution', attach)

    for index in (1, 0):
        fake_worker(index)
        path = tmp_path / f'worker{index}.csv'
        own = EpochOnly()
        writer = EpochOnly()   # a user's callback that writes: chief only
        model = make_model()
        loop = spt.TrainLoop(max_epoch=2, print_func=[].append)
        loop.add_component(spt.KerasCallbacks(
            [keras.callbacks.CSVLogger(str(path)), own, writer], model=model,
            chief_only=[writer]))
        with loop:
            assert loop.is_chief == (index == 0)
            for epoch in loop.iter_epochs():
                for step, _ in loop.iter_steps(range(3)):
                    loop.collect_metrics(loss=float(step))
                loop.collect_metrics(valid_loss=1. / epoch)
                loop.print_logs()
        # every worker: the (merged) epoch statistics
        assert [(e, logs['loss'], logs['val_loss']) for e, logs in own.logs] == \
            [(0, 2., 1.), (1, 5., .5)]
        if index == 1:
            assert not path.exists() and writer.logs == []
        else:
            assert path.exists() and len(writer.logs) == 2


# ------------------------------------------------------------------ bad input
def test_bad_input_is_refused_naming_the_argument():
    model = make_model()
    with pytest.raises(TypeError, match=r"`callbacks\[1\]` must be a keras.callbacks.Callback, "
                                        r"got 'not a callback'"):
        spt.KerasCallbacks([keras.callbacks.TerminateOnNaN(), 'not a callback'], model=model)
    with pytest.raises(TypeError, match=r'`callbacks` must be a list of keras.callbacks.Callback'):
        spt.KerasCallbacks(keras.callbacks.TerminateOnNaN(), model=model)
    with pytest.raises(TypeError, match=r'`model` must be a keras.Model, got 3'):
        spt.KerasCallbacks([], model=3)
    with pytest.raises(ValueError, match=r"`callbacks\[0\]`: `BackupAndRestore` needs the "
                                         r"internals of `Model.fit`.*`checkpoint_dir=`"):
        spt.KerasCallbacks([keras.callbacks.BackupAndRestore('/tmp/never')], model=model)
    with pytest.raises(ValueError, match=r"`callbacks\[0\]`: Keras's `TensorBoard` callback "
                                         r"needs the internals.*`summary_dir=`"):
        spt.KerasCallbacks([keras.callbacks.TensorBoard('/tmp/never')], model=model)
    bare = keras.Sequential([keras.Input((3,)), keras.layers.Dense(1)])
    with pytest.raises(ValueError, match=r'`model` has no optimizer, which `callbacks\[0\]` '
                                         r'\(ReduceLROnPlateau\).*model.compile\(optimizer='):
        spt.KerasCallbacks([keras.callbacks.ReduceLROnPlateau()], model=bare)
    with pytest.raises(ValueError, match=r'`chief_only` must hold callbacks of `callbacks`'):
        spt.KerasCallbacks([], model=model, chief_only=[EpochOnly()])


def test_a_checkpoint_of_other_callbacks_is_refused(tmp_path):
    model = make_model()
    valid_loop([keras.callbacks.EarlyStopping()], model, tmp_path, 2, VALID)
    with pytest.raises(ValueError, match=r'holds the state of a EarlyStopping for '
                                         r'`callbacks\[0\]`, which is a ReduceLROnPlateau'):
        valid_loop([keras.callbacks.ReduceLROnPlateau()], model, tmp_path, 4, VALID)
