"""One description of the machine, printed at the top of every benchmark."""

from __future__ import annotations

import os
import platform


def cpu_model() -> str:
    """The CPU's model name, from /proc/cpuinfo where there is one."""
    try:
        with open('/proc/cpuinfo', encoding='utf-8') as f:
            for line in f:
                if line.lower().startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or 'unknown'


def core_count() -> str:
    """The number of cores, and how many this process may use if fewer."""
    total = os.cpu_count()
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = total
    return f'{total}' if usable == total else f'{total} ({usable} usable by this process)'


def load_average() -> str:
    """The 1/5/15-minute load averages."""
    try:
        return ', '.join(f'{x:.2f}' for x in os.getloadavg())
    except OSError:
        return 'unknown'


def describe_machine() -> str:
    """Python, TensorFlow, Keras and numpy versions, CPU, cores, GPUs and load, as text."""
    import numpy as np
    import tensorflow as tf
    try:
        import keras
        keras_version = keras.__version__
    except ImportError:
        keras_version = 'not installed'
    gpus = tf.config.list_physical_devices('GPU')
    return '\n'.join([
        f'  Python      {platform.python_version()} ({platform.python_implementation()})',
        f'  TensorFlow  {tf.__version__}   Keras {keras_version}   numpy {np.__version__}',
        f'  CPU         {cpu_model()}, {core_count()} cores; {len(gpus)} GPU(s)',
        f'  load avg    {load_average()} (1/5/15 min) at start',
    ])


def write_rows(path: str | None, rows: list[dict]) -> None:
    """Write a benchmark's result rows as JSON for ``run_all.py`` (no-op without a path).

    Each row: ``case``, ``baseline`` (its name), ``baseline_value``, ``value``,
    ``unit``, ``ratio`` (value / baseline_value), ``target`` (text, may be
    empty) and ``met`` (True/False, or None without a target).
    """
    if path:
        import json
        with open(path, 'w', encoding='utf-8') as f:
            json.dump(rows, f)


def row(case: str, baseline: str, baseline_value: float, value: float, unit: str,
        target: str = '', met: bool | None = None) -> dict:
    """One result row (see :func:`write_rows`)."""
    return {'case': case, 'baseline': baseline, 'baseline_value': baseline_value,
            'value': value, 'unit': unit, 'ratio': value / baseline_value if baseline_value
            else float('inf'), 'target': target, 'met': met}
