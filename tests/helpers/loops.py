"""The small models, steps and loops the tests train, in either TF style.

A `Counter` is the model most loop tests need: a variable that gains a known
amount at each step, so that every value a test expects (after a resume, an
early-stopping restore, ...) is known by hand.  `run_epochs` is the loop those
tests run: each step calls the given steps with the step number, each epoch
may collect a validation metric, and a `KeyboardInterrupt` can cut a step.
Both take a `Style` (tests/helpers/styles.py), so one test body runs in both
TF styles.  Unlike the rest of `tests.helpers`, this module imports tfsnippet:
import it from ``tests.helpers.loops``.
"""

import threading

import tfsnippet as spt


class Counter:
    """A float32 variable `var` named `name` that gains `delta` at each `step`.

    The update is a ``tf.function`` call in eager style and a ``session.run``
    of one ``assign_add`` op in graph style (`Style.updater`).
    """

    def __init__(self, style, initial=0., name='w', delta=1.):
        self.style = style
        self.var = style.variable(initial, name)
        self.update = style.updater(self.var, delta)

    def step(self, step=None):
        """One update; `step` (the loop's step number) is ignored."""
        self.update()

    def value(self):
        return self.style.value(self.var)


class Tally(spt.CheckpointSavableObject):
    """A checkpoint-savable object that remembers the steps it was given.

    `fail`: ``'raise'`` makes `get_state` raise a RuntimeError; ``'not_plain'``
    makes it return a state holding a lock (not plain data).
    """

    def __init__(self):
        self.seen = []
        self.fail = None

    def record(self, step):
        self.seen.append(step)

    def get_state(self):
        if self.fail == 'raise':
            raise RuntimeError('cannot get the state')
        if self.fail == 'not_plain':
            return {'seen': list(self.seen), 'lock': threading.Lock()}
        return {'seen': list(self.seen)}

    def set_state(self, state):
        self.seen = list(state['seen'])


def run_epochs(loop, *steps, steps_per_epoch=2, valid=None, metric='valid_loss',
               stop_at=None, epochs=None):
    """Run `loop` (entering it) and return the epochs run.

    Each step calls every one of `steps` with the step number.  After epoch
    ``e`` the metric `metric` is collected with the value ``valid[e]`` when
    `valid` (a mapping) has one.  `stop_at`: a KeyboardInterrupt at the start
    of that step.  `epochs`: a list to append the epochs to (returned).
    """
    epochs = [] if epochs is None else epochs
    with loop:
        for epoch in loop.iter_epochs():
            epochs.append(epoch)
            for step, _ in loop.iter_steps(range(steps_per_epoch)):
                if step == stop_at:
                    raise KeyboardInterrupt()
                for fn in steps:
                    fn(step)
            if valid is not None and epoch in valid:
                loop.collect_metrics({metric: valid[epoch]})
    return epochs


def make_trainer(style, loop, batches, metrics, **kwargs):
    """A `Trainer` of `loop` over `batches` (tuples of one float32 vector) whose
    step computes the dict ``metrics(x)`` of each batch ``x``.

    In graph style ``x`` is a ``[None]`` placeholder fed with each batch and the
    metrics are fetched beside a no-op train op; in eager style ``metrics`` is
    the step function.
    """
    import tensorflow as tf
    if style.is_graph:
        x = tf.compat.v1.placeholder(tf.float32, [None])
        return spt.Trainer(loop, tf.no_op(), [x], batches, metrics=metrics(x), **kwargs)
    return spt.Trainer(loop, metrics, data_flow=batches, **kwargs)


def make_evaluator(style, loop, batches, metrics, shape=(None,), **kwargs):
    """An `Evaluator` of `loop` over `batches` computing ``metrics(x)`` (a dict or
    one tensor) for each batch ``x``: through a placeholder of `shape` (None: of
    unknown rank) in graph style, as the metric function in eager style."""
    import tensorflow as tf
    if style.is_graph:
        x = tf.compat.v1.placeholder(tf.float32, None if shape is None else list(shape))
        return spt.Evaluator(loop, metrics(x), [x], batches, **kwargs)
    return spt.Evaluator(loop, metrics, data_flow=batches, **kwargs)
