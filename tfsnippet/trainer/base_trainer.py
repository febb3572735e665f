"""The trainer: runs a :class:`TrainLoop` for you, with scheduled hooks."""

from __future__ import annotations

import functools
import inspect
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import tensorflow as tf

from ..scaffold.event_keys import EventKeys
from ..utils.events import EventSource, Every
from ..tfops.session import ensure_variables_initialized, get_default_session_or_error
from ..tfops.tf_vars import variable_name
from ..utils.validation import check_positive_int, check_positive_number

__all__ = ['BaseTrainer', 'check_schedule']

_TRAINER_EVENT_KEYS = (
    EventKeys.BEFORE_EPOCH, EventKeys.AFTER_EPOCH, EventKeys.BEFORE_STEP, EventKeys.AFTER_STEP,
    EventKeys.STEP_EVALUATION, EventKeys.STEP_ANNEALING, EventKeys.STEP_LOGGING,
    EventKeys.EPOCH_EVALUATION, EventKeys.EPOCH_ANNEALING, EventKeys.EPOCH_LOGGING,
    EventKeys.BEFORE_EXECUTION, EventKeys.AFTER_EXECUTION,
)

_PHASE_KEYS = {
    'evaluation': (EventKeys.STEP_EVALUATION, EventKeys.EPOCH_EVALUATION),
    'annealing': (EventKeys.STEP_ANNEALING, EventKeys.EPOCH_ANNEALING),
    'logging': (EventKeys.STEP_LOGGING, EventKeys.EPOCH_LOGGING),
}


def check_schedule(epochs: Any = None, steps: Any = None, seconds: Any = None) -> Every:
    """The :class:`Every` of exactly one of `epochs`, `steps`, `seconds`.

    Raises:
        ValueError: None or several are given, or the value is not positive.
        TypeError: The value is not an int (epochs, steps) or a number (seconds).
    """
    given = [(k, v) for k, v in (('epochs', epochs), ('steps', steps), ('seconds', seconds))
             if v is not None]
    if len(given) != 1:
        raise ValueError('One and only one of `epochs`, `steps` and `seconds` should be '
                         f'specified, got {dict(given) or "none"}')
    kind, value = given[0]
    if kind == 'seconds':
        check_positive_number(value, kind)
    else:
        check_positive_int(value, kind)
    return Every(**{kind: value})


#: {a `_run_step` function: whether it takes the classic ``(session, payload)``}
_CLASSIC_RUN_STEP: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


class _Callback:
    """A zero-argument hook called by an event that passes the trainer."""

    __slots__ = ('callback',)

    def __init__(self, callback: Callable[[], Any]):
        self.callback = callback

    def __call__(self, trainer: Any) -> None:
        self.callback()

    def __repr__(self) -> str:
        return repr(self.callback)


class BaseTrainer:
    """Runs the epochs and steps of a :class:`~tfsnippet.TrainLoop` and its hooks.

    :meth:`run` must be called inside ``with loop:``.  For each epoch and
    step it fires the trainer's events (``trainer.events``), in this order::

        BEFORE_EXECUTION
        for epoch in loop.iter_epochs():            # loop.events fire first
            BEFORE_EPOCH
            for each step:
                BEFORE_STEP; the step; STEP_EVALUATION; STEP_ANNEALING; STEP_LOGGING
                AFTER_STEP
            EPOCH_EVALUATION; EPOCH_ANNEALING; EPOCH_LOGGING
            AFTER_EPOCH
        AFTER_EXECUTION                                  # on normal completion only

    Hooks registered by :meth:`log_after`, :meth:`evaluate_after` and
    :meth:`anneal_after` (or their ``*_steps``/``*_epochs`` forms) run on
    the matching phase event when their schedule is due: every N steps or
    epochs of the loop's *global* counters, or every N seconds counted from
    the start of :meth:`run` (checked after each step).  Within a step or an epoch, evaluation runs before annealing
    and annealing before logging, so a printed line already holds that
    epoch's evaluation metrics.

    Args:
        loop: The loop to run (entered by the caller).
        ensure_variables_initialized: In graph mode, initialize the global
            variables not initialized yet before training.
    """

    def __init__(self, loop: Any, ensure_variables_initialized: bool = True):
        from ..scaffold.loop.core import TrainLoop
        if not isinstance(loop, TrainLoop):
            raise TypeError(f'`loop` must be a TrainLoop, got {loop!r}')
        self._loop = loop
        self._ensure_init = bool(ensure_variables_initialized)
        self._events = EventSource(_TRAINER_EVENT_KEYS, counters=loop)
        self._running = False
        self._annealed: list[Any] = []   # the variables behind anneal_after values

    def _check_annealed_are_saved(self) -> None:
        saver = self._loop.checkpoint_saver
        if saver is None or not self._annealed:
            return
        saved = set(saver.variable_labels.values())
        missing = sorted({variable_name(v) for v in self._annealed} - saved)
        if missing:
            self._loop.notice(
                f'The trainer anneals {missing}, which the checkpoints do not hold: a resumed '
                f'run would start them again from their first value; pass them in '
                f'`checkpoint_save_objects`')

    @property
    def loop(self) -> Any:
        """The training loop."""
        return self._loop

    @property
    def events(self) -> EventSource:
        """The trainer's events (the trainer keys of :class:`EventKeys`)."""
        return self._events

    # ------------------------------------------------------------ running
    def _iter_steps(self) -> Iterator[Any]:
        """Yield one payload per step (usually from ``loop.iter_steps(data)``)."""
        raise NotImplementedError()

    def _run_step(self, payload: Any) -> None:
        """Run one training step on `payload`.

        A subclass may also define it the classic way, as
        ``_run_step(self, session, payload)``: it then receives the default
        session (``None`` in eager mode).
        """
        raise NotImplementedError()

    def _step_caller(self) -> Callable[[Any], Any]:
        """``self._run_step`` as a one-argument callable, whichever signature it has."""
        run_step = self._run_step
        func = getattr(run_step, '__func__', None)
        classic = _CLASSIC_RUN_STEP.get(func) if func is not None else None
        if classic is None:
            params = [p for p in inspect.signature(run_step).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            classic = len(params) == 2
            if func is not None:   # a method: the same answer for every trainer of its class
                _CLASSIC_RUN_STEP[func] = classic
        if classic:   # the classic `_run_step(session, payload)`
            session = None if tf.executing_eagerly() else get_default_session_or_error()
            return functools.partial(run_step, session)
        return run_step

    def run(self) -> None:
        """Train until the loop's limits (or a stop request) end it.

        Raises:
            RuntimeError: Called again while running, or (graph mode) no
                session is active.
        """
        if self._running:
            raise RuntimeError('`run()` is not re-entrant.')
        self._running = True
        try:
            events = self._events
            events.fire(EventKeys.BEFORE_EXECUTION, self)
            if not tf.executing_eagerly():
                get_default_session_or_error()
                if self._ensure_init:
                    ensure_variables_initialized()
            if not self._loop.training_summary_printed:   # the user's own call printed it
                self._loop.print_training_summary()
            self._check_annealed_are_saved()
            for phase in _PHASE_KEYS:   # seconds schedules count from here
                for key in _PHASE_KEYS[phase]:
                    for h in events.handlers(key):
                        every = getattr(h, 'every', None)
                        if every is not None:
                            every.reset(self._loop)
            run_step = self._step_caller()
            before_step = events.handlers(EventKeys.BEFORE_STEP)
            after_step = events.handlers(EventKeys.AFTER_STEP)
            step_phases = [events.handlers(k) for k in (
                EventKeys.STEP_EVALUATION, EventKeys.STEP_ANNEALING, EventKeys.STEP_LOGGING)]
            for _ in self._loop.iter_epochs():
                events.fire(EventKeys.BEFORE_EPOCH, self)
                for payload in self._iter_steps():
                    if before_step:
                        events.fire(EventKeys.BEFORE_STEP, self)
                    run_step(payload)
                    for handlers in step_phases:
                        if handlers:
                            for h in tuple(handlers):
                                h(self)
                    if after_step:
                        events.reverse_fire(EventKeys.AFTER_STEP, self)
                events.fire(EventKeys.EPOCH_EVALUATION, self)
                events.fire(EventKeys.EPOCH_ANNEALING, self)
                events.fire(EventKeys.EPOCH_LOGGING, self)
                events.reverse_fire(EventKeys.AFTER_EPOCH, self)
            events.reverse_fire(EventKeys.AFTER_EXECUTION, self)
        finally:
            self._running = False

    # ------------------------------------------------------------ hooks
    def _add_hook(self, phase: str, callback: Callable[[], Any], epochs: Any = None,
                  steps: Any = None, seconds: Any = None) -> None:
        every = check_schedule(epochs=epochs, steps=steps, seconds=seconds)
        step_key, epoch_key = _PHASE_KEYS[phase]
        self._events.on(epoch_key if every.kind == 'epochs' else step_key, _Callback(callback),
                        every=every, owner=(self, phase))

    def _remove_hooks(self, phase: str) -> int:
        count = self._events.remove_owned((self, phase))
        for key in _PHASE_KEYS[phase]:   # and any other handler of the phase's events
            count += len(self._events.handlers(key))
            self._events.clear_event_handlers(key)
        return count

    def log_after(self, epochs: int | None = None, steps: int | None = None,
                  seconds: float | None = None) -> None:
        """Print the logs (``loop.print_logs``) every N epochs, steps or seconds."""
        self._add_hook('logging', self._loop.print_logs, epochs, steps, seconds)

    def log_after_steps(self, freq: int) -> None:
        """Print the logs every `freq` steps."""
        self.log_after(steps=freq)

    def log_after_epochs(self, freq: int) -> None:
        """Print the logs every `freq` epochs."""
        self.log_after(epochs=freq)

    def remove_log_hooks(self) -> int:
        """Remove the logging hooks (and any handler of the logging events); return how many."""
        return self._remove_hooks('logging')

    @staticmethod
    def _evaluation_callback(evaluator: Any) -> Callable[[], Any]:
        run = getattr(evaluator, 'run', None)
        if callable(run):
            return run
        if callable(evaluator):
            return evaluator
        raise TypeError(f'`evaluator` must be an Evaluator or a callable, got {evaluator!r}')

    def evaluate_after(self, evaluator: Any, epochs: int | None = None, steps: int | None = None,
                       seconds: float | None = None) -> None:
        """Run `evaluator` (its ``run()``, or itself if callable) every N epochs, steps or seconds."""
        self._add_hook('evaluation', self._evaluation_callback(evaluator), epochs, steps, seconds)

    def evaluate_after_steps(self, evaluator: Any, freq: int) -> None:
        """Run `evaluator` every `freq` steps."""
        self.evaluate_after(evaluator, steps=freq)

    def evaluate_after_epochs(self, evaluator: Any, freq: int) -> None:
        """Run `evaluator` every `freq` epochs."""
        self.evaluate_after(evaluator, epochs=freq)

    def remove_evaluation_hooks(self) -> int:
        """Remove the evaluation hooks; return how many."""
        return self._remove_hooks('evaluation')

    # the classic names of the evaluation hooks
    validate_after = evaluate_after
    validate_after_steps = evaluate_after_steps
    validate_after_epochs = evaluate_after_epochs
    remove_validation_hooks = remove_evaluation_hooks

    @staticmethod
    def _annealing_callback(value: Any) -> Callable[[], Any]:
        anneal = getattr(value, 'anneal', None)
        if callable(anneal):
            return anneal
        if callable(value):
            return value
        raise TypeError(
            f'`value` must be an AnnealingVariable (or have `anneal()`) or a callable, '
            f'got {value!r}')

    def anneal_after(self, value: Any, epochs: int | None = None, steps: int | None = None,
                     seconds: float | None = None) -> None:
        """Call ``value.anneal()`` (or `value` if callable) every N epochs, steps or seconds.

        A variable annealed so must be in the loop's checkpoints for a resumed
        run to go on from its annealed value: :meth:`run` names those that are
        not (pass them in ``checkpoint_save_objects``).
        """
        self._add_hook('annealing', self._annealing_callback(value), epochs, steps, seconds)
        variable = getattr(value, 'variable', None)
        if variable is not None:
            self._annealed.append(variable)

    def anneal_after_steps(self, value: Any, freq: int) -> None:
        """Anneal `value` every `freq` steps."""
        self.anneal_after(value, steps=freq)

    def anneal_after_epochs(self, value: Any, freq: int) -> None:
        """Anneal `value` every `freq` epochs."""
        self.anneal_after(value, epochs=freq)

    def remove_annealing_hooks(self) -> int:
        """Remove the annealing hooks; return how many."""
        return self._remove_hooks('annealing')
