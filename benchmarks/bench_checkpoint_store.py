"""Benchmark: what fsyncing costs a checkpoint save of a 10M-parameter model, eager.

Times ``CheckpointSaver.save`` of 10,000,000 float32 parameters (38 MiB) in
eager mode, with ``durable=True`` (every file and directory fsynced: the
default) and ``durable=False`` (the same protocol without fsync, as saves
were before checkpoints were made durable).  The two alternate, after one
warm-up save each; the figures are medians of 7 saves (1 with ``--quick``,
which also shrinks the model to 1M parameters).  The save is synchronous:
the time is what a training loop waits.

Usage: ``python benchmarks/bench_checkpoint_store.py [--quick] [--dir PATH]``.
``--dir`` puts the checkpoints on the disk to measure (default: a temporary
directory); fsync times depend on that disk far more than on the CPU.
"""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Callable

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _bench import (Row, Samples, describe_machine, format_table,  # noqa: E402
                    time_alternating, whole_call, write_rows)
from _shared import matrices, quick_parser, scratch_dir  # noqa: E402


def measure(n_params: int, repeats: int, root: str) -> dict[str, Samples]:
    """Seconds per save, ``{'durable': ..., 'not durable': ...}``, alternating.

    `n_params` is rounded down to a multiple of 10,000.
    """
    import tfsnippet as spt

    variables = matrices(n_params)   # five 2000-wide matrices
    savers = {
        'durable': spt.CheckpointSaver(variables, os.path.join(root, 'durable'), max_to_keep=2),
        'not durable': spt.CheckpointSaver(variables, os.path.join(root, 'not-durable'),
                                           max_to_keep=2, durable=False),
    }
    for saver in savers.values():            # step 0 warms up
        saver.save(0)

    def save(saver: spt.CheckpointSaver) -> Callable[[], object]:
        steps = itertools.count(1)            # each saver saves steps 1, 2, ...
        return lambda: saver.save(next(steps))

    return time_alternating({key: whole_call(save(saver)) for key, saver in savers.items()},
                            repeats)


def main() -> None:
    args = quick_parser(__doc__.splitlines()[0], '1M parameters, 1 save each',
                        dir=True).parse_args()

    n_params = 1_000_000 if args.quick else 10_000_000
    repeats = 1 if args.quick else 7
    print(describe_machine())
    with scratch_dir(args.dir) as root:
        times = measure(n_params, repeats, root)
    size = n_params * 4 / 2 ** 20
    print(f'\nCheckpointSaver.save, eager, {n_params:,} float32 parameters ({size:.1f} MiB), '
          f'median of {repeats}')
    medians = {key: samples.median * 1e3 for key, samples in times.items()}
    labels = {'durable': 'fsync on (durable=True)', 'not durable': 'fsync off (durable=False)'}
    print(format_table(('case', 'median ms', 'min ms', 'max ms'), [
        (labels[key], f'{medians[key]:.1f}', f'{samples.best * 1e3:.1f}',
         f'{max(samples.wall) * 1e3:.1f}') for key, samples in times.items()], align='lrrr'))
    result = Row(f'checkpoint save, {n_params // 1_000_000}M params, fsync', 'durable=False',
                 medians['not durable'], medians['durable'], 'ms')
    print(f'fsync adds {result.value - result.baseline_value:.1f} ms per save '
          f'({result.ratio:.2f}x)')
    write_rows(args.table_json, [result])


if __name__ == '__main__':
    main()
