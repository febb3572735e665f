"""Benchmark: early-stopping snapshots and checkpoint saves of a 10M-parameter model.

Prints, for eager mode (Keras 3 model) and graph mode (tf.compat.v1
variables, in a child process):

* the time of one early-stopping snapshot (``EarlyStopping.take_snapshot``)
  against a plain numpy copy of the same bytes (target: at most 2x);
* the time a checkpoint save holds the training loop
  (``TrainLoop.make_checkpoint``, with and without early stopping, whose
  snapshot travels in the checkpoint) against ``tf.train.Checkpoint.write``
  of the same variables.

Usage: ``python benchmarks/bench_state.py [--quick] [--style all|eager|graph]``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import Any

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _bench import (Row, describe_machine, format_table, met_text,  # noqa: E402
                    time_alternating, whole_call, write_rows)
from _shared import run_child  # noqa: E402


def _median_ms(fn: Callable[[], Any], repeats: int) -> float:
    """The median wall time of `repeats` calls of `fn`, in ms."""
    return time_alternating({'fn': whole_call(fn)}, repeats)['fn'].median * 1e3


def _model_variables(style: str, n_params: int) -> tuple[list[Any], Any]:
    """Variables of a dense MLP with about `n_params` parameters."""
    import tensorflow as tf
    width = 2000 if n_params >= 10_000_000 else 500
    n_in = max(1, (n_params - width * width - width * 500) // width)
    shapes = [(n_in, width), (width,), (width, width), (width,), (width, 500), (500,)]
    if style == 'eager':
        import keras
        model = keras.Sequential([keras.Input((n_in,)), keras.layers.Dense(width),
                                  keras.layers.Dense(width), keras.layers.Dense(500)])
        return model.trainable_variables, model
    variables = [tf.compat.v1.get_variable(f'v{i}', shape=s,
                                           initializer=tf.compat.v1.random_normal_initializer())
                 for i, s in enumerate(shapes)]
    return variables, None


def run_style(style: str, quick: bool) -> dict[str, float]:
    import numpy as np
    import tensorflow as tf

    import tfsnippet as spt
    from tfsnippet.tfops.tf_vars import as_tf_variable
    from tfsnippet.tfops.var_io import read_variables

    if style == 'graph':
        tf.compat.v1.disable_eager_execution()
    n_params = 1_000_000 if quick else 10_000_000
    repeats = 1 if quick else 7
    variables, model = _model_variables(style, n_params)
    total = sum(int(np.prod(v.shape)) for v in variables)
    sess = None
    if style == 'graph':
        sess = tf.compat.v1.Session()
        sess.__enter__()
        sess.run(tf.compat.v1.global_variables_initializer())
    results: dict[str, float] = {'params': total}

    # --- snapshot vs numpy copy
    host = read_variables(variables)
    es = spt.EarlyStopping(variables)

    class _Loop:
        step = 1
        best_valid_metric = 0.

    results['numpy_copy_ms'] = _median_ms(lambda: [np.copy(a) for a in host], repeats)
    results['snapshot_ms'] = _median_ms(lambda: es.take_snapshot(_Loop), repeats)
    results['restore_ms'] = _median_ms(es.restore, repeats)

    # --- checkpoint save vs tf.train.Checkpoint.write
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = tf.train.Checkpoint(
            **{f'v{i}': as_tf_variable(v) for i, v in enumerate(variables)})
        results['tf_checkpoint_write_ms'] = _median_ms(
            lambda: ckpt.write(os.path.join(tmp, 'tfckpt', 'x')), repeats)
        for early_stopping in (False, True):
            loop = spt.TrainLoop(variables, checkpoint_dir=os.path.join(tmp, f'es{early_stopping}'),
                                 checkpoint_max_to_keep=2, early_stopping=early_stopping,
                                 print_func=lambda s: None)
            with loop:
                if early_stopping:
                    for _ in loop.iter_epochs():
                        loop.collect_metrics(valid_loss=1.)
                        break
                save_ms = _median_ms(loop.make_checkpoint, repeats)
                loop.request_stop()
            results['save_with_snapshot_ms' if early_stopping else 'save_ms'] = save_ms
    if sess is not None:
        sess.__exit__(None, None, None)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--quick', action='store_true', help='1M parameters, 1 repeat')
    parser.add_argument('--style', choices=['all', 'eager', 'graph'], default='all')
    parser.add_argument('--json', action='store_true', help=argparse.SUPPRESS)
    parser.add_argument('--table-json', metavar='PATH', help='also write the rows as JSON')
    args = parser.parse_args()

    if args.json:  # child process: one style, machine-readable
        print(json.dumps(run_style(args.style, args.quick)))
        return
    styles = ['eager', 'graph'] if args.style == 'all' else [args.style]
    print(describe_machine())
    rows: list[tuple[str, float, float, float | None]] = []
    for style in styles:
        argv = ['--json', '--style', style] + (['--quick'] if args.quick else [])
        out = run_child(__file__, argv, graph=style == 'graph')
        r = json.loads(out.strip().splitlines()[-1])
        print(f'{style}: {r["params"]:,} parameters')
        rows.append((f'{style}: early-stopping snapshot', r['numpy_copy_ms'], r['snapshot_ms'],
                     2.))
        rows.append((f'{style}: early-stopping restore', r['numpy_copy_ms'], r['restore_ms'],
                     None))
        rows.append((f'{style}: checkpoint save (loop state)', r['tf_checkpoint_write_ms'],
                     r['save_ms'], None))
        rows.append((f'{style}: checkpoint save (+ snapshot)', r['tf_checkpoint_write_ms'],
                     r['save_with_snapshot_ms'], None))
    print()
    results, table = [], []
    for case, base, ours, target in rows:
        r = Row(case, 'np.copy' if 'early-stopping' in case else 'tf.train.Checkpoint.write',
                base, ours, 'ms', '' if target is None else f'ratio <= {target:g}',
                None if target is None else ours / base <= target)
        results.append(r)
        table.append((case, f'{base:.2f}', f'{ours:.2f}', f'{r.ratio:.2f}',
                      '' if target is None else f'<={target:g}', met_text(r.met)))
    print(format_table(('case', 'baseline ms', 'tfsnippet ms', 'ratio', 'target', 'met'),
                       table, align='lrrrrr'))
    print('baselines: snapshot/restore vs np.copy of the same arrays; saves vs '
          'tf.train.Checkpoint.write of the same variables')
    write_rows(args.table_json, results)


if __name__ == '__main__':
    main()
