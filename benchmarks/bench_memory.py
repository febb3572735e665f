"""Benchmark: the host memory (peak RSS) each loop feature costs, in copies of the parameters.

One float32 variable of 25M elements (95 MiB; 250,000 with ``--quick``) is
trained for 3 epochs of 6 steps by a cheap step (``assign_add`` of a second
variable of the same shape, so no step allocates a tensor; in graph mode a
local variable, which checkpoints leave out) in a
``TrainLoop`` with one feature set:

* ``bare``: no feature (the reference);
* ``early_stopping=True`` (the validation metric improves every epoch, so
  each epoch takes a snapshot and the end restores it);
* synchronous checkpoints every 2 steps;
* ``checkpoint_async=True``, every 2 steps;
* both early stopping and asynchronous checkpoints.

Each feature set runs in its own child process, eager, and again in a child
with eager execution disabled (graph mode, ``tf.compat.v1`` session); with
``--quick`` in the smoke run (``_shared.run_quick``) they share one process
per mode.  The
child builds the variables, runs one step, resets the kernel's peak-RSS
counter (``/proc/self/clear_refs``; where it cannot, the peak since the
start is used, ``resource.getrusage``'s ``ru_maxrss``) and reads the RSS
(``VmRSS``), runs the loop, and reads the peak (``VmHWM``).  The figure is
``(peak - RSS before) of the feature set - (the same of the bare loop)``
divided by the bytes of the parameters: how many extra host copies of them
the feature holds at its worst moment.

Targets (issue 24): early stopping <= 1.2, asynchronous checkpoints <= 1.2,
synchronous checkpoints <= 0.3, both <= 2.4.

Usage: ``python benchmarks/bench_memory.py [--quick] [--dir PATH]
[--table-json PATH]``.
"""

from __future__ import annotations

import json
import os
import resource
import sys
from typing import Any

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from _bench import Row, describe_machine, format_table, load_average, write_rows  # noqa: E402
from _shared import quick_parser, run_child, scratch_dir  # noqa: E402

EPOCHS = 3
STEPS_PER_EPOCH = 6
SAVE_EVERY = 2

#: ``{feature set: (label, early stopping?, checkpoints: None, 'sync' or 'async')}``
FEATURES: dict[str, tuple[str, bool, str | None]] = {
    'bare': ('bare loop', False, None),
    'early_stopping': ('early_stopping=True', True, None),
    'sync': (f'sync checkpoints every {SAVE_EVERY} steps', False, 'sync'),
    'async': ('checkpoint_async=True', False, 'async'),
    'both': ('early stopping + async checkpoints', True, 'async'),
}

#: The most extra copies each feature set may hold (issue 24).
TARGETS = {'early_stopping': 1.2, 'sync': 0.3, 'async': 1.2, 'both': 2.4}


def _status_kib(field: str) -> int | None:
    try:
        with open('/proc/self/status', encoding='ascii') as f:
            for line in f:
                if line.startswith(field + ':'):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS counter of this process (Linux >= 4.0)."""
    try:
        with open('/proc/self/clear_refs', 'w', encoding='ascii') as f:
            f.write('5')
        return True
    except OSError:
        return False


def child(feature: str, n_params: int, root: str) -> None:
    """In a child process: run the loop with `feature`; print JSON with the peak-RSS rise."""
    import tensorflow as tf

    graph = os.environ.get('BENCH_MEMORY_GRAPH') == '1'
    if graph:
        tf.compat.v1.disable_eager_execution()
    import tfsnippet as spt

    _, early_stopping, checkpoints = FEATURES[feature]
    kwargs: dict[str, Any] = {}
    if checkpoints is not None:
        kwargs = dict(checkpoint_dir=os.path.join(root, f'{feature}-{int(graph)}'),
                      checkpoint_step_freq=SAVE_EVERY, checkpoint_max_to_keep=2,
                      checkpoint_async=checkpoints == 'async')
    if early_stopping:
        kwargs['early_stopping'] = True

    session = None
    if graph:
        v1 = tf.compat.v1
        param = v1.get_variable('param', shape=[n_params], dtype=tf.float32,
                                initializer=v1.zeros_initializer())
        # a local variable: graph-mode checkpoints save the global ones
        delta = v1.get_variable('delta', shape=[n_params], dtype=tf.float32,
                                initializer=v1.constant_initializer(1e-3), trainable=False,
                                collections=[v1.GraphKeys.LOCAL_VARIABLES])
        train_op = param.assign_add(delta, read_value=False)
        session = v1.Session()
        session.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
        session.__enter__()

        def step() -> None:
            session.run(train_op)
    else:
        param = tf.Variable(tf.zeros([n_params]), name='param')
        delta = tf.Variable(tf.fill([n_params], 1e-3), name='delta', trainable=False)

        def step() -> None:
            param.assign_add(delta, read_value=False)

    step()                      # warm-up
    loop = spt.TrainLoop([param], max_epoch=EPOCHS, print_func=lambda s: None,
                         show_eta=False, **kwargs)
    reset = _reset_peak()
    before_kib = _status_kib('VmRSS') if reset else 0
    with loop:
        for epoch in loop.iter_epochs():
            for _ in loop.iter_steps(range(STEPS_PER_EPOCH)):
                step()
                loop.collect_metrics(loss=1.)
            loop.collect_metrics(valid_loss=float(EPOCHS - epoch))   # a new best every epoch
    peak_kib = _status_kib('VmHWM') if reset else None
    if peak_kib is None:
        peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({'rise_kib': peak_kib - (before_kib or 0), 'reset': reset,
                      'before_kib': before_kib, 'peak_kib': peak_kib}))
    if session is not None:
        session.__exit__(None, None, None)


def measure_feature(feature: str, n_params: int, root: str, graph: bool) -> dict[str, Any]:
    """The JSON of `child` run in a child process (`_shared.run_child`)."""
    out = run_child(__file__, ['--child', feature, str(n_params), root], graph=graph,
                    env={'BENCH_MEMORY_GRAPH': '1' if graph else '0'})
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == '--child':
        child(sys.argv[2], int(sys.argv[3]), sys.argv[4])
        return
    args = quick_parser(__doc__.splitlines()[0], '250,000 parameters', dir=True).parse_args()

    n_params = 250_000 if args.quick else 25_000_000
    mib = n_params * 4 / 2 ** 20
    print(describe_machine())
    results: dict[tuple[str, bool], dict[str, Any]] = {}
    with scratch_dir(args.dir) as root:
        for graph in (False, True):
            for feature in FEATURES:
                results[feature, graph] = measure_feature(feature, n_params, root, graph)

    def copies(feature: str, graph: bool) -> float:
        rise = results[feature, graph]['rise_kib'] - results['bare', graph]['rise_kib']
        return rise * 1024 / (n_params * 4)

    print(f'\nPeak host memory (RSS) over the bare loop, in copies of the parameters '
          f'({n_params:,} float32 = {mib:.1f} MiB; {EPOCHS} epochs of {STEPS_PER_EPOCH} '
          f'steps)')
    table = []
    for feature, (label, _, _) in FEATURES.items():
        eager_rise = results[feature, False]['rise_kib'] / 1024
        graph_rise = results[feature, True]['rise_kib'] / 1024
        if feature == 'bare':
            table.append((label, f'({eager_rise:.1f} MiB)', f'({graph_rise:.1f} MiB)', ''))
            continue
        table.append((label, f'{copies(feature, False):.2f}', f'{copies(feature, True):.2f}',
                      f'<= {TARGETS[feature]}'))
    print(format_table(('feature', 'eager', 'graph', 'target'), table, align='lrrr'))
    if not all(r['reset'] for r in results.values()):
        print('(the peak counter could not be reset: peaks since the start of each child)')
    print(f'\nload avg at the end: {load_average()} (1/5/15 min)')

    rows = []
    for feature, target in TARGETS.items():
        label = FEATURES[feature][0]
        for graph in (False, True):
            value = copies(feature, graph)
            rows.append(Row(f'host memory, {label} [{"graph" if graph else "eager"}]',
                            'bare loop', 0., value, 'copies', f'<= {target}',
                            value <= target))
    write_rows(args.table_json, rows)


if __name__ == '__main__':
    main()
