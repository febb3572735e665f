"""One call that seeds every random generator a training run draws from."""

from __future__ import annotations

import os
import random

import numpy as np
import tensorflow as tf

from ..utils.text import short_repr

__all__ = ['seed_everything']


def seed_everything(seed: int, deterministic: bool = False,
                    worker_index: int | None = None) -> int:
    """Seed Python's ``random``, NumPy's global generator, TensorFlow's global
    seed and Keras', so that a rerun draws the same numbers; return `seed`.

    tfsnippet's own random state follows: a :class:`~tfsnippet.DataFlow`
    (``arrays(..., shuffle=True)``) and a multi-task flow's drawing of tasks
    given no ``random_state`` take their seed from NumPy's global generator
    when they are made, so call this first.

    Under a strategy every worker must shuffle the data alike (each takes its
    rows of the same global batch), so the data's seed (Python and NumPy) is
    `seed` on every worker; give `worker_index` (the task index) to make the
    TensorFlow and Keras seed ``seed + worker_index``, so that the workers'
    random ops (dropout, noise) differ.

    Args:
        seed: A non-negative int.
        deterministic: Also make TensorFlow's ops deterministic
            (``tf.config.experimental.enable_op_determinism()``, slower on
            GPUs): with it two runs of the same program on the same machine
            train bitwise-equal weights.  It cannot be undone in the process.
        worker_index: The worker's index under a strategy (see above).

    Raises:
        TypeError: `seed` or `worker_index` is not an int.
        ValueError: `seed` or `worker_index` is negative.
    """
    for name, value in (('seed', seed), ('worker_index', worker_index)):
        if value is None and name == 'worker_index':
            continue
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f'`{name}` must be an int, got {short_repr(value)}')
        if value < 0:
            raise ValueError(f'`{name}` must be non-negative, got {value}')
    seed = int(seed)
    tf_seed = seed + int(worker_index or 0)
    os.environ['PYTHONHASHSEED'] = str(seed)   # for the child processes this one starts
    random.seed(seed)
    np.random.seed(seed % 2 ** 32)
    try:
        import keras
        keras.utils.set_random_seed(tf_seed)   # Python, NumPy, TF and Keras' seed generator
        random.seed(seed)
        np.random.seed(seed % 2 ** 32)
    except ImportError:  # pragma: no cover
        pass
    tf.random.set_seed(tf_seed)
    if deterministic:
        tf.config.experimental.enable_op_determinism()
    return seed
