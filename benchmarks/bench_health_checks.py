#!/usr/bin/env python
"""What do the training-health components cost per step when attached and idle?

The rows of issue 35, items 4-7: ``QuickCheck`` (its step counter, with a
limit never reached), ``SanityCheck`` (nothing per step), ``TimeBudget``
(one clock reading per step, a budget never reached), ``LossGuard`` with
the spike rule (a sorted window kept per check; the plain guard's row, a
watcher of each collected loss, is shown for reference), ``Throughput``
(nothing per step with a fixed batch size; a call of the batch-size
function with one).  Each is timed against its own bare runs of the same
no-op loop, alternating in this process, with the method of
``bench_components.py`` (whose :func:`measure` this script uses); target
at most 1 µs per step.

It is a benchmark, not a test: it prints figures and exits 0 whether or not
the targets are met.  Usage::

    python benchmarks/bench_health_checks.py [--quick] [--table-json PATH]
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _bench import finish, quick_arguments  # noqa: E402
from bench_components import Case, idle_report  # noqa: E402

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')


def quick_check() -> Sequence[Any]:
    import tfsnippet as spt
    return [spt.QuickCheck(train_steps=10 ** 9)]


def sanity_check() -> Sequence[Any]:
    import tfsnippet as spt
    return [spt.SanityCheck(lambda: {'valid_loss': 1.})]


def time_budget() -> Sequence[Any]:
    import tfsnippet as spt
    return [spt.TimeBudget(seconds=10 ** 9)]


def loss_guard_plain() -> Sequence[Any]:
    import tfsnippet as spt
    return [spt.LossGuard(action='stop')]


def loss_guard_spike() -> Sequence[Any]:
    import tfsnippet as spt
    return [spt.LossGuard(spike=10., window=20, action='stop')]


def throughput_fixed() -> Sequence[Any]:
    import tfsnippet as spt
    return [spt.Throughput(batch_size=64, flops=2.68e6)]


def throughput_function() -> Sequence[Any]:
    import tfsnippet as spt
    return [spt.Throughput(batch_size=lambda batch: 64, flops=2.68e6)]


#: The rows, in table order.
CASES: list[Case] = [
    Case('QuickCheck, limit not reached (a step counter)', quick_check),
    Case('SanityCheck (before the first epoch only)', sanity_check),
    Case('TimeBudget, budget not reached (a clock reading)', time_budget),
    Case('LossGuard() (reference: a check of each collected loss)', loss_guard_plain,
         target_us=None),
    Case('LossGuard(spike=10, window=20) (+ a sorted window per check)', loss_guard_spike),
    Case('Throughput(batch_size=64)', throughput_fixed),
    Case('Throughput(batch_size=<function>) (a call per step, by design)',
         throughput_function, target_us=None),
]


def handler_costs(calls: int) -> list[tuple[str, float]]:
    """What each component adds to one event, µs per call (best of 5 rounds of
    `calls`), over the same event of a bare loop: ``AFTER_STEP`` fired, or one
    ``collect_metrics(loss=...)`` inside an epoch.  Steadier than the loop's
    difference on a loaded machine."""
    import timeit

    import tfsnippet as spt

    def cost(components: Sequence[Any], what: str) -> float:
        loop = spt.TrainLoop(max_epoch=1, print_func=lambda s: None)
        for component in components:
            loop.add_component(component)
        with loop:
            for _ in loop.iter_epochs():
                if what == 'step':
                    fire, key = loop.events.fire, spt.EventKeys.AFTER_STEP
                    return min(timeit.repeat(lambda f=fire, k=key: f(k, loop), number=calls,
                                             repeat=5)) / calls * 1e6
                collect = loop.collect_metrics
                return min(timeit.repeat(lambda c=collect: c(loss=1.), number=calls,
                                         repeat=5)) / calls * 1e6
        raise AssertionError('no epoch ran')

    bare_step, bare_metric = cost([], 'step'), cost([], 'metric')
    return [
        ('TimeBudget, after each step', cost(time_budget(), 'step') - bare_step),
        ('QuickCheck, after each step', cost(quick_check(), 'step') - bare_step),
        ('LossGuard(spike=10, window=20), each loss', cost(loss_guard_spike(), 'metric')
         - bare_metric),
        ('LossGuard(), each loss', cost(loss_guard_plain(), 'metric') - bare_metric),
    ]


def main() -> int:
    args = quick_arguments(__doc__)
    rows = idle_report('Training-health components attached but idle: cost per step over a '
                       'bare TrainLoop', CASES, args.quick)
    print('\nWhat each adds to one event over a bare loop (µs per call)')
    for name, cost in handler_costs(2_000 if args.quick else 200_000):
        print(f'  {name:45s} {cost:.3f}')
    return finish(rows, args.table_json)


if __name__ == '__main__':
    sys.exit(main())
