"""Benchmark: the loop-state part of a checkpoint save, pickle (before) against state.npz.

A typical eager loop is run into its second epoch: a shuffled DataFlow
(its position holds a ``RandomState``'s state), early stopping (its
snapshot holds the values of a 64-128-10 MLP, 9,610 parameters),
ReduceOnPlateau and a LossGuard.  Its state, as the checkpointer saves it,
is then encoded and written into a file (no variables: the TensorFlow
bundle is the same for both) in turn by

* **pickle**: what tfsnippet did before, ``pickle.dump`` of the state into
  ``state.pkl`` (highest protocol);
* **state.npz**: :func:`~tfsnippet.scaffold.checkpoint.state_format.encode_state`
  (every value checked to be plain data, JSON structure, ``.npy`` arrays)
  and :func:`~tfsnippet.scaffold.checkpoint.state_format.write_state_file`.

Both alternate, 50 saves per timed run; the figures are medians over the
runs, in microseconds per save, for "encode + write" and for the encoding
alone (into memory).  The target: the new format is not slower (ratio at
most 1.0 for encode + write).

Usage: ``python benchmarks/bench_state_format.py [--quick] [--dir PATH]``.
"""

from __future__ import annotations

import os
import pickle
import sys
from typing import Any

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _bench import (Row, describe_machine, format_table, met_text,  # noqa: E402
                    time_alternating, whole_call, write_rows)
from _shared import quick_parser, scratch_dir  # noqa: E402

CALLS = 50   # saves per timed run


def loop_state(root: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    """``(step, variable labels, objects)`` of a typical loop in its second epoch."""
    import keras
    import numpy as np
    import tensorflow as tf

    import tfsnippet as spt
    from tfsnippet.scaffold.checkpoint.saver import LOOP_STATE_KEY

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((64,)), keras.layers.Dense(128),
                              keras.layers.Dense(10)])
    lr = tf.Variable(0.01, name='lr')
    x = np.random.RandomState(0).normal(size=(1000, 64)).astype(np.float32)
    flow = spt.DataFlow.arrays([x], batch_size=50, shuffle=True, random_state=1)
    loop = spt.TrainLoop(model.trainable_variables, max_epoch=2, early_stopping=True,
                         checkpoint_dir=root, print_func=lambda line: None, show_eta=False)
    loop.add_component(spt.ReduceOnPlateau(lr, factor=.5, patience=2))
    loop.add_component(spt.LossGuard('loss', action='stop'))
    taken: dict[str, Any] = {}
    with loop:
        for epoch in loop.iter_epochs():
            for _, (batch,) in loop.iter_steps(flow):
                loop.collect_metrics(loss=float(batch.mean()))
                if epoch == 2 and not taken:
                    taken['state'] = loop.state_dict()
                    taken['step'] = loop.step
            loop.collect_metrics(valid_loss=1. / epoch)
    labels = {f'variables/{i}': v.path for i, v in enumerate(model.trainable_variables)}
    return taken['step'], labels, {LOOP_STATE_KEY: {'loop': taken['state']}}


def main() -> None:
    args = quick_parser(__doc__.splitlines()[0], '1 round instead of 41', dir=True).parse_args()
    repeats = 1 if args.quick else 41
    print(describe_machine())

    from tfsnippet.scaffold.checkpoint import state_format

    with scratch_dir(args.dir) as root:
        step, labels, objects = loop_state(os.path.join(root, 'loop'))
        target = os.path.join(root, 'save')
        os.makedirs(target)
        pickle_path = os.path.join(target, 'state.pkl')

        def old_write() -> None:
            for _ in range(CALLS):
                with open(pickle_path, 'wb') as f:
                    pickle.dump({'format': 1, 'step': step, 'variables': labels,
                                 'objects': objects}, f, protocol=pickle.HIGHEST_PROTOCOL)

        def new_write() -> None:
            for _ in range(CALLS):
                state_format.write_state_file(
                    target, state_format.encode_state(step, labels, objects))

        def old_encode() -> None:
            for _ in range(CALLS):
                pickle.dumps({'format': 1, 'step': step, 'variables': labels,
                              'objects': objects}, protocol=pickle.HIGHEST_PROTOCOL)

        def new_encode() -> None:
            for _ in range(CALLS):
                state_format.encode_state(step, labels, objects).to_bytes()

        times = time_alternating({'pickle write': whole_call(old_write),
                                  'npz write': whole_call(new_write),
                                  'pickle encode': whole_call(old_encode),
                                  'npz encode': whole_call(new_encode)}, repeats)
        sizes = (os.path.getsize(pickle_path),
                 os.path.getsize(os.path.join(target, state_format.STATE_FILE)))
    us = {key: samples.median / CALLS * 1e6 for key, samples in times.items()}
    print(f'\nLoop state of a typical loop (DataFlow position with a RandomState, early '
          f'stopping with the snapshot of a 9,610-parameter MLP, ReduceOnPlateau, LossGuard); '
          f'median of {repeats} runs of {CALLS} saves; files: pickle {sizes[0]:,} bytes, '
          f'state.npz {sizes[1]:,} bytes')
    rows = []
    table = []
    for part in ('write', 'encode'):
        old, new = us[f'pickle {part}'], us[f'npz {part}']
        what = 'encode + write a file' if part == 'write' else 'encode into memory'
        row = Row(f'loop state of a save, {what}', 'pickle', old, new, 'µs/save',
                  *(('<= 1.0x', new <= old) if part == 'write' else ()))
        rows.append(row)
        table.append((what, f'{old:.1f}', f'{new:.1f}', f'{row.ratio:.3f}', met_text(row.met)))
    print(format_table(('part of the save', 'pickle µs', 'state.npz µs', 'ratio', 'met'),
                       table, align='lrrrl'))
    write_rows(args.table_json, rows)


if __name__ == '__main__':
    main()
