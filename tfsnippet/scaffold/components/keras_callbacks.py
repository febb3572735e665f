"""The loop component that runs Keras callbacks inside a :class:`~tfsnippet.TrainLoop`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from ...utils.text import short_repr
from ..checkpoint.saver import CheckpointSavableObject
from ..event_keys import EventKeys
from ..metrics.sinks import EPOCH_LOG, plain_stats
from ..metrics.values import to_float
from .base import LoopComponent

__all__ = ['KerasCallbacks']

#: The batch methods of ``keras.callbacks.Callback``: a callback that overrides
#: none of them is never called per step.
_BEGIN_METHODS = ('on_batch_begin', 'on_train_batch_begin')
_END_METHODS = ('on_batch_end', 'on_train_batch_end')

#: The attributes of Keras's callbacks that the loop's checkpoints keep, by the name
#: of the Keras class (those ``on_train_begin`` resets, which a resumed run must have
#: back); a subclass keeps those of the Keras class it extends.
_STATE_ATTRS = {
    'EarlyStopping': ('wait', 'stopped_epoch', 'best', 'best_weights', 'best_epoch'),
    'ReduceLROnPlateau': ('wait', 'cooldown_counter', 'best'),
    'ModelCheckpoint': ('best',),
}

#: Keras's callbacks that write files: on a worker other than the chief they are not run.
_FILE_WRITERS = ('CSVLogger', 'ModelCheckpoint')

#: Callbacks that need ``model.optimizer`` (they read or set its learning rate).
_NEED_OPTIMIZER = ('ReduceLROnPlateau', 'LearningRateScheduler')


def _keras() -> Any:
    import keras
    return keras


def _is_a(callback: Any, class_names: Sequence[str]) -> bool:
    """Whether `callback` is an instance of one of Keras's callbacks `class_names`
    (a subclass of yours included)."""
    callbacks = _keras().callbacks
    return isinstance(callback, tuple(getattr(callbacks, name) for name in class_names))


def _state_attrs(callback: Any) -> tuple[str, ...]:
    """The attributes of `callback` the checkpoints keep (those of the Keras class it is
    or extends; none for another callback)."""
    callbacks = _keras().callbacks
    for name, attrs in _STATE_ATTRS.items():
        if isinstance(callback, getattr(callbacks, name)):
            return attrs
    return ()


def _refusal(callback: Any) -> str | None:
    """Why `callback` cannot run outside ``fit``, or None."""
    callbacks = _keras().callbacks
    if isinstance(callback, callbacks.BackupAndRestore):
        return ('`BackupAndRestore` needs the internals of `Model.fit`; the loop resumes '
                'by itself: give it `checkpoint_dir=` (its checkpoints keep the variables, '
                'the counters and the components\' states, these callbacks\' included)')
    if isinstance(callback, callbacks.TensorBoard):
        return ("Keras's `TensorBoard` callback needs the internals of `Model.fit`; the "
                'loop writes TensorBoard summaries itself: give it `summary_dir=` (or add a '
                '`SummaryLogger` component)')
    return None


def _overrides(callback: Any, names: Sequence[str]) -> bool:
    """Whether `callback` has its own version of one of the methods `names`
    (in its class, or set on the object as ``LambdaCallback`` does)."""
    base = _keras().callbacks.Callback
    own = vars(callback)
    cls = type(callback)
    return any(name in own or getattr(cls, name) is not getattr(base, name) for name in names)


def _plain(value: Any) -> Any:
    """A Keras callback's attribute as plain checkpoint data (floats, arrays, lists of them)."""
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str, np.ndarray, np.generic)):
        return value
    if isinstance(value, tf.Tensor) or hasattr(value, 'numpy'):
        return np.asarray(value.numpy())
    return np.asarray(value)


class KerasCallbacks(LoopComponent):
    """Runs Keras callbacks (``keras.callbacks.Callback``) in a loop whose step
    you write, as ``Model.fit`` runs them::

        callbacks = [keras.callbacks.ReduceLROnPlateau(patience=2),
                     keras.callbacks.CSVLogger('log.csv')]
        loop.add_component(spt.KerasCallbacks(callbacks, model=model))

    * ``set_model(model)`` and ``set_params`` when the loop is entered, then
      ``on_train_begin``; ``on_train_end`` when its ``with`` block is left
      normally (not through an exception, as ``fit`` does not either).
    * ``on_epoch_begin(epoch)`` before each epoch and ``on_epoch_end(epoch,
      logs)`` when it closes, `epoch` counted from 0 as Keras does (the
      loop's epoch minus one).  `logs` holds the epoch's statistics, the
      means its epoch line prints (time metrics included), each under its
      collected name, and every ``valid_X`` also as Keras's ``val_X``; one
      dict goes through the callbacks in order, so what one adds (the
      ``learning_rate`` of ``ReduceLROnPlateau``) the next one sees.
    * ``on_train_batch_begin/end(batch, logs)`` around each step, `batch`
      counted from 0 in the epoch and `logs` the values the step collected
      (their means, as floats: a device sync) -- only when one of the
      callbacks overrides a batch method (``TerminateOnNaN`` does): with
      none, nothing runs per step.
    * ``model.stop_training = True``, set by a callback (``EarlyStopping``,
      ``TerminateOnNaN``), stops the loop at the end of that step or epoch
      (:meth:`TrainLoop.request_stop`), which prints the callback as the
      reason.

    Keras's ``ReduceLROnPlateau`` and ``LearningRateScheduler`` read and set
    ``model.optimizer.learning_rate``: compile the model with the optimizer
    your step uses (``model.compile(optimizer=optimizer)``, no loss needed).
    ``BackupAndRestore`` and Keras's ``TensorBoard`` callback need the
    internals of ``fit`` and are refused: the loop's own checkpoints
    (``checkpoint_dir=``) and summaries (``summary_dir=``) do their work.

    **Resuming**: the loop's checkpoints keep the state of
    ``EarlyStopping`` (wait, best, best epoch, best weights, stopped epoch),
    ``ReduceLROnPlateau`` (wait, cooldown, best) and ``ModelCheckpoint``
    (best), and of any subclass of them, put back after ``on_train_begin``.
    A callback of yours keeps its own state when it is also a
    :class:`~tfsnippet.CheckpointSavableObject`
    (``class MyCallback(keras.callbacks.Callback, spt.CheckpointSavableObject)``):
    ``get_state()`` is saved with each checkpoint and ``set_state(state)``
    called on a resume, after ``on_train_begin`` (and after the Keras
    attributes above, for a subclass of one of those callbacks).  Other
    callbacks start afresh on a resume (a ``CSVLogger`` continues its file
    with ``append=True``; ``LearningRateScheduler`` needs no state, it is
    given the epoch).

    .. versionchanged:: 0.3
        Callbacks are recognised by class, not by class name: a subclass
        of ``EarlyStopping`` or ``ReduceLROnPlateau`` keeps its state across
        a resume (it restarted from scratch), a subclass of ``CSVLogger`` or
        ``ModelCheckpoint`` runs on the chief only.

    **Under a strategy** the callbacks run on every worker, with the
    statistics merged across the workers when the epoch line was printed
    (``print_logs()`` at the end of the epoch: without it each worker has
    its own), so every worker takes the same decisions.  The callbacks that
    write files, ``CSVLogger``, ``ModelCheckpoint`` and those in
    `chief_only`, run only on the chief.

    Keras 3 callbacks work with eager code only: in graph mode (TF1 style)
    the component is refused.

    Args:
        callbacks: The ``keras.callbacks.Callback`` objects, in calling order.
        model: The ``keras.Model`` the callbacks are given (``set_model``).
        chief_only: Callbacks among `callbacks` that, like ``CSVLogger``,
            must run on the chief only (a callback of yours that writes files).
        name: Tells two such components of one loop apart in checkpoints.

    Raises:
        TypeError: `callbacks` is not a list of Keras callbacks, or `model`
            not a ``keras.Model``.
        ValueError: A callback that needs ``fit`` (``BackupAndRestore``,
            ``TensorBoard``), one that needs ``model.optimizer`` with a
            model that has none, or `chief_only` holding an object not in
            `callbacks`.
        RuntimeError: Not executing eagerly (graph mode).
    """

    role = 'keras_callbacks'

    def __init__(self, callbacks: Sequence[Any], model: Any, *,
                 chief_only: Sequence[Any] = (), name: str | None = None):
        keras = _keras()
        if not tf.executing_eagerly():
            raise RuntimeError(
                'KerasCallbacks needs eager execution: Keras 3 callbacks and models do not run '
                'in graph mode (TF1 style, `tf.compat.v1.disable_eager_execution()`); use the '
                "loop's own components there (EarlyStopping, ReduceOnPlateau, LossGuard, "
                'checkpoint_dir=, summary_dir=)')
        if isinstance(callbacks, (str, bytes)) or not isinstance(callbacks, Sequence):
            raise TypeError(f'`callbacks` must be a list of keras.callbacks.Callback, got '
                            f'{short_repr(callbacks)}')
        callbacks = list(callbacks)
        for i, cb in enumerate(callbacks):
            if not isinstance(cb, keras.callbacks.Callback):
                raise TypeError(f'`callbacks[{i}]` must be a keras.callbacks.Callback, got '
                                f'{short_repr(cb)}')
            reason = _refusal(cb)
            if reason is not None:
                raise ValueError(f'`callbacks[{i}]`: {reason}')
        if not isinstance(model, keras.Model):
            raise TypeError(f'`model` must be a keras.Model, got {short_repr(model)}')
        for i, cb in enumerate(callbacks):
            if _is_a(cb, _NEED_OPTIMIZER) and getattr(model, 'optimizer', None) is None:
                raise ValueError(
                    f'`model` has no optimizer, which `callbacks[{i}]` ({type(cb).__name__}) '
                    f'sets the learning rate of: compile the model with the optimizer of '
                    f'your step, `model.compile(optimizer=optimizer)`')
        if isinstance(chief_only, (str, bytes)) or not isinstance(chief_only, Sequence):
            raise TypeError(f'`chief_only` must be a list of callbacks, got '
                            f'{short_repr(chief_only)}')
        for cb in chief_only:
            if not any(cb is c for c in callbacks):
                raise ValueError(f'`chief_only` must hold callbacks of `callbacks`, got '
                                f'{short_repr(cb)}')
        if name is not None and (not isinstance(name, str) or not name):
            raise TypeError(f'`name` must be a non-empty str or None, got {name!r}')
        self._callbacks = callbacks
        self._model = model
        self._chief_only = [cb for cb in callbacks
                            if _is_a(cb, _FILE_WRITERS) or
                            any(cb is c for c in chief_only)]
        self._name = name
        self._per_step = any(_overrides(cb, _BEGIN_METHODS + _END_METHODS) for cb in callbacks)
        self._active: list[Any] = []
        self._idle: list[Any] = []   # the chief-only callbacks on another worker
        self._begin: list[Any] = []
        self._end: list[Any] = []
        self._pending_state: list[Any] | None = None
        self._step_values: dict[str, Any] = {}
        self._last_logs: dict[str, Any] = {}
        self._printed: dict[str, float] = {}

    # ------------------------------------------------------------ properties
    @property
    def state_key(self) -> str:
        return self._name or 'keras_callbacks'

    @property
    def callbacks(self) -> list[Any]:
        """The callbacks, in calling order."""
        return list(self._callbacks)

    @property
    def model(self) -> Any:
        """The model the callbacks are given."""
        return self._model

    @property
    def per_step(self) -> bool:
        """Whether a callback overrides a batch method (so the component runs each step)."""
        return self._per_step

    # ------------------------------------------------------------ hooks
    def on_enter(self, loop: Any) -> None:
        chief = loop.is_chief
        self._active = [cb for cb in self._callbacks
                        if chief or not any(cb is c for c in self._chief_only)]
        self._idle = [cb for cb in self._callbacks if not any(cb is c for c in self._active)]
        self._begin = [cb for cb in self._active if _overrides(cb, _BEGIN_METHODS)]
        self._end = [cb for cb in self._active if _overrides(cb, _END_METHODS)]
        model = self._model
        model.stop_training = False
        params = {'verbose': 0, 'epochs': loop.max_epoch, 'steps': None}
        for cb in self._active:
            cb.set_model(model)
            cb.set_params(params)
        for cb in self._active:
            cb.on_train_begin({})
        if self._pending_state is not None:
            self._apply_state(self._pending_state)
            self._pending_state = None
        self.subscribe(loop, EventKeys.BEFORE_EPOCH, self._before_epoch)
        self.subscribe(loop, EventKeys.METRIC_STATS_REDUCED, self._line_printed)
        self.subscribe(loop, EventKeys.AFTER_EPOCH, self._after_epoch)
        if self._begin:
            self.subscribe(loop, EventKeys.BEFORE_STEP, self._before_step)
        if self._end:
            self.subscribe(loop, EventKeys.METRICS_COLLECTED, self._metrics_collected)
            self.subscribe(loop, EventKeys.AFTER_STEP, self._after_step)

    def on_exit(self, loop: Any, error: BaseException | None) -> None:
        if error is None:
            logs = dict(self._last_logs)
            for cb in self._active:
                cb.on_train_end(logs)
        self._active, self._begin, self._end = [], [], []

    def _before_epoch(self, loop: Any) -> None:
        self._printed = {}
        epoch = loop.epoch - 1
        for cb in self._active:
            cb.on_epoch_begin(epoch, {})

    def _line_printed(self, loop: Any, scope: str, stats: dict[str, dict[str, Any]]) -> None:
        if scope == EPOCH_LOG:   # an epoch line (merged across workers): the epoch's logs
            self._printed.update((name, s['mean']) for name, s in stats.items())

    def _after_epoch(self, loop: Any) -> None:
        # before the checkpointer's handler (registered earlier, so called later): a
        # checkpoint of this epoch holds the callbacks' state after its `on_epoch_end`
        printed, self._printed = self._printed, {}
        unprinted = plain_stats(loop.metric_book.epoch_so_far())   # this worker's own
        logs = {**{name: s['mean'] for name, s in unprinted.items()}, **printed}
        for name in list(logs):
            if name.startswith('valid_'):
                logs.setdefault('val_' + name[len('valid_'):], logs[name])
        epoch = loop.epoch - 1
        stopper = None
        for cb in self._active:   # as `fit`: every callback sees the epoch, stop or not
            cb.on_epoch_end(epoch, logs)
            if stopper is None and getattr(self._model, 'stop_training', False):
                stopper = cb
        self._last_logs = logs
        self._check_stop(loop, stopper)

    def _before_step(self, loop: Any) -> None:
        batch = loop.step - loop.progress.epoch_first_step - 1   # a resumed epoch's too
        for cb in self._begin:
            cb.on_train_batch_begin(batch, {})

    def _metrics_collected(self, loop: Any, metrics: dict[str, Any]) -> None:
        if loop.within_step:
            self._step_values.update(metrics)

    def _after_step(self, loop: Any) -> None:
        values, self._step_values = self._step_values, {}
        logs = {name: to_float(name, value) for name, value in values.items()}
        batch = loop.step - loop.progress.epoch_first_step - 1   # a resumed epoch's too
        stopper = None
        for cb in self._end:
            cb.on_train_batch_end(batch, logs)
            if stopper is None and getattr(self._model, 'stop_training', False):
                stopper = cb
        self._check_stop(loop, stopper)

    def _check_stop(self, loop: Any, callback: Any) -> bool:
        """Stop the loop if ``model.stop_training`` is set; whether it is."""
        if not getattr(self._model, 'stop_training', False):
            return False
        if not loop.stop_requested:
            who = f'the Keras callback {type(callback).__name__}' if callback is not None \
                else 'a Keras callback'
            loop.request_stop(f'{who} set `model.stop_training`')
        return True

    # ------------------------------------------------------------ state
    def state_dict(self) -> dict[str, Any]:
        states: list[Any] = []
        for i, cb in enumerate(self._callbacks):
            state = {a: _plain(getattr(cb, a)) for a in _state_attrs(cb) if hasattr(cb, a)}
            item = {'class': type(cb).__name__, 'state': state}
            # (a callback idle on this worker has no state: only the chief writes it)
            if isinstance(cb, CheckpointSavableObject) and \
                    not any(cb is c for c in self._idle):
                own = cb.get_state()
                if not isinstance(own, dict):
                    raise TypeError(f'`callbacks[{i}]` ({type(cb).__name__}).get_state() must '
                                    f'return a dict of plain data, got {short_repr(own)}')
                item['own'] = own
            states.append(item)
        return {'callbacks': states}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        saved = state.get('callbacks')
        if not isinstance(saved, list) or len(saved) != len(self._callbacks):
            raise ValueError(
                f'The checkpoint holds the state of {len(saved or [])} Keras callbacks, but '
                f'`callbacks` has {len(self._callbacks)}')
        for i, (item, cb) in enumerate(zip(saved, self._callbacks)):
            if item['class'] != type(cb).__name__:
                raise ValueError(f'The checkpoint holds the state of a {item["class"]} for '
                                 f'`callbacks[{i}]`, which is a {type(cb).__name__}')
        if self._active:   # entered: on_train_begin has run
            self._apply_state(saved)
        else:
            self._pending_state = saved

    def _apply_state(self, saved: list[Any]) -> None:
        for item, cb in zip(saved, self._callbacks):
            for attr, value in item['state'].items():
                if attr == 'best_weights' and value is not None:
                    value = list(value)
                setattr(cb, attr, value)
            # a checkpoint of an earlier version, or of a callback not savable then, has none
            if 'own' in item and isinstance(cb, CheckpointSavableObject):
                cb.set_state(item['own'])
