"""Run ``examples/digits_distributed.py`` with a run folder of this task's own.

The test passes a base folder as the first argument; each task trains with
``--output-dir <base>/<task type><task index>``, as if every worker had a
disk of its own, so the test sees which tasks wrote files.  The rest of the
arguments go to the example.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / 'examples'
sys.path.insert(0, str(EXAMPLES))

from tfsnippet import distributed  # noqa: E402  (no TensorFlow imported yet)

base, *rest = sys.argv[1:]
folder = os.path.join(base, f'{distributed.task_type()}{distributed.task_index()}')

import digits_distributed  # noqa: E402

sys.exit(digits_distributed.main([*rest, '--output-dir', folder]))
