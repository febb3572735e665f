"""Benchmark: what a ``tf.data`` iterator adds to a checkpoint, symbolic checkpoints off and on.

A loop given a ``tf.data.Dataset`` saves its iterator's state in each
checkpoint (``loop/iterator-0.*``, see :mod:`tfsnippet.scaffold.loop.tfdata`).
This script builds three pipelines over sklearn's ``load_digits`` (1797 rows
of 64 float32 pixels and an int64 label), batches of 64, ``prefetch(2)``:

* **rows shuffled**: ``from_tensor_slices((x, y)).shuffle(1797)``: the
  shuffle buffer holds whole rows;
* **indices shuffled**: ``range(1797).shuffle(1797).batch(64)`` then a
  ``map`` that gathers the rows: the buffer holds int64 indices;
* **not shuffled**: ``from_tensor_slices((x, y))``.

each with ``tf.data.Options().experimental_symbolic_checkpoint`` off and on.
Each iterator is taken 10 batches into its epoch; then a ``CheckpointSaver``
saves the iterator through the loop's path (staged, moved into the
checkpoint, fsynced, as a ``TrainLoop`` does) and, for reference, the same
save without a dataset.  The contestants alternate; the figures are medians
of 15 saves (1 with ``--quick``).  The size is that of the iterator's files.

Usage: ``python benchmarks/bench_tfdata_checkpoint.py [--quick] [--dir PATH]``.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable
from typing import Any

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from _bench import (Row, describe_machine, format_table, time_alternating,  # noqa: E402
                    whole_call, write_rows)
from _shared import quick_parser, scratch_dir  # noqa: E402

BATCH = 64


def pipelines(symbolic: bool) -> dict[str, Any]:
    """The three digits pipelines, with symbolic checkpoints on or off."""
    import numpy as np
    import tensorflow as tf
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = digits.data.astype(np.float32)
    y = digits.target.astype(np.int64)
    n = len(x)
    xs, ys = tf.constant(x), tf.constant(y)
    out = {
        'rows shuffled': tf.data.Dataset.from_tensor_slices((x, y)).shuffle(n, seed=1).batch(
            BATCH),
        'indices shuffled': tf.data.Dataset.range(n).shuffle(n, seed=1).batch(BATCH).map(
            lambda i: (tf.gather(xs, i), tf.gather(ys, i))),
        'not shuffled': tf.data.Dataset.from_tensor_slices((x, y)).batch(BATCH),
    }
    options = tf.data.Options()
    options.experimental_symbolic_checkpoint = symbolic
    return {name: ds.prefetch(2).with_options(options) for name, ds in out.items()}


def saver_of(root: str, dataset: Any) -> tuple[Any, Any]:
    """A saver that writes `dataset`'s iterator (10 batches in) with each checkpoint,
    and the positions object (``None`` dataset: a saver without one)."""
    import tfsnippet as spt
    from tfsnippet.scaffold.loop.tfdata import DatasetPositions

    positions = DatasetPositions(large_bytes=1 << 40)
    if dataset is not None:
        iterator, _ = positions.open(dataset, 1, None, None)
        for _ in range(10):
            next(iterator)
    saver = spt.CheckpointSaver(
        [], root, max_to_keep=2, loop_files=positions.writer,
        loop_state=lambda: {'datasets': positions.state_dict()})
    return saver, positions


def measure(repeats: int, root: str) -> tuple[dict[str, Any], dict[str, int]]:
    """Seconds per save of each case, and the size of each case's iterator files."""
    savers: dict[str, Any] = {'no dataset': saver_of(os.path.join(root, 'none'), None)[0]}
    for symbolic in (False, True):
        for name, ds in pipelines(symbolic).items():
            key = f'{name}, symbolic {"on" if symbolic else "off"}'
            savers[key] = saver_of(os.path.join(root, key.replace(' ', '_').replace(',', '')),
                                   ds)[0]
    sizes = {}
    for key, saver in savers.items():
        path = saver.save(0)                  # warms up, and gives the size
        loop_dir = os.path.join(path, 'loop')
        sizes[key] = sum(os.path.getsize(os.path.join(loop_dir, f))
                         for f in os.listdir(loop_dir)) if os.path.isdir(loop_dir) else 0

    def save(saver: Any) -> Callable[[], object]:
        steps = itertools.count(1)
        return lambda: saver.save(next(steps))

    times = time_alternating({key: whole_call(save(s)) for key, s in savers.items()}, repeats)
    return times, sizes


def main() -> None:
    args = quick_parser(__doc__.splitlines()[0], '1 save of each case', dir=True).parse_args()
    repeats = 1 if args.quick else 15
    print(describe_machine())
    with scratch_dir(args.dir) as root:
        times, sizes = measure(repeats, root)
    print(f'\nCheckpoint of a digits tf.data iterator 10 batches into an epoch '
          f'(batches of {BATCH}, prefetch 2), median of {repeats} saves')
    base = times['no dataset'].median * 1e3
    print(format_table(('case', 'iterator KiB', 'save ms', 'added ms'), [
        (key, f'{sizes[key] / 1024:.1f}', f'{s.median * 1e3:.2f}',
         f'{s.median * 1e3 - base:.2f}') for key, s in times.items()], align='lrrr'))
    rows = []
    for name in ('rows shuffled', 'indices shuffled', 'not shuffled'):
        off, on = times[f'{name}, symbolic off'], times[f'{name}, symbolic on']
        rows.append(Row(f'tf.data checkpoint, digits {name}', 'symbolic off',
                        off.median * 1e3, on.median * 1e3, 'ms'))
    write_rows(args.table_json, rows)


if __name__ == '__main__':
    main()
