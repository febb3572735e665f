"""Two workers whose `checkpoint_dir` is on S3 (moto on 127.0.0.1), one killed and restarted.

``examples/digits_distributed.py`` under the local launcher, twice at once:
an uninterrupted run with its checkpoints on local disk, and a run with
``--checkpoint-dir s3://...`` whose worker 1 kills itself with ``SIGKILL``
after step 50 of its first run.  The launcher restarts both workers; they
resume from the step-40 checkpoint read from the bucket, and the run ends
with bitwise the weights of the uninterrupted one.  The bucket then holds
committed checkpoints only (no prefix without its commit marker).
"""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from tests.distributed.test_scenarios import (CHECKPOINT_STEPS, EXAMPLE, KILL_AT_STEP,
                                              STEPS_PER_EPOCH, Run, launch, weights)
from tfsnippet.scaffold.checkpoint.object_store import ObjectCheckpointStore
from tfsnippet.scaffold.checkpoint.store import INDEX_FILE, MARKER_FILE
from tfsnippet.storage import resolve

pytest.importorskip('sklearn', reason='the example needs scikit-learn (`pip install ".[test]"`)')
pytestmark = pytest.mark.distributed

EPOCHS = 2
COMMON = ['--epochs', str(EPOCHS), '--patience', '0', '--seed', '42',
          '--strategy', 'multiworker', '--checkpoint-steps', str(CHECKPOINT_STEPS)]


def test_two_workers_resume_from_s3_after_a_kill(tmp_path, s3_bucket):
    url = f'{s3_bucket}/digits'
    killed = Run(launch(2, '--max-restarts', 1, '--grace-period', 2, EXAMPLE, *COMMON,
                        '--kill-worker-at-step', KILL_AT_STEP, '--checkpoint-dir', url,
                        '--output-dir', tmp_path / 'killed'))
    plain = Run(launch(2, EXAMPLE, *COMMON, '--output-dir', tmp_path / 'plain'))
    try:
        killed.wait()
        plain.wait()
    finally:
        killed.kill()
        plain.kill()
    launcher = [line for line in killed.err.splitlines() if line.startswith('[launch]')]
    assert launcher[-1] == '[launch] finished: all tasks succeeded after 1 restart', \
        killed.report()
    resumed = [line for line in killed.lines('worker 0') if line.startswith('Resume training')]
    step = KILL_AT_STEP // CHECKPOINT_STEPS * CHECKPOINT_STEPS
    assert resumed == [f'Resume training: epoch 2, step {step}, from checkpoint '
                       f'{url}/checkpoint/checkpoint.dat-{step}'], killed.report()
    result = json.loads((tmp_path / 'killed' / 'result.json').read_text())
    assert result['steps_run'] == EPOCHS * STEPS_PER_EPOCH
    assert not (tmp_path / 'killed' / 'checkpoints').exists()
    for got, expected in zip(weights(tmp_path / 'killed'), weights(tmp_path / 'plain')):
        np.testing.assert_array_equal(got, expected)   # bitwise

    store = ObjectCheckpointStore(f'{url}/checkpoint')
    assert store.latest() == f'{url}/checkpoint/checkpoint.dat-{EPOCHS * STEPS_PER_EPOCH}'
    location = resolve(store.save_dir)
    keys = [k[len(location.path) + 1:] for k in location.fs.find(location.path)]
    prefixes = {k.split('/')[0] for k in keys} - {INDEX_FILE}
    assert prefixes and all(f'{p}/{MARKER_FILE}' in keys for p in prefixes)
    assert all(re.fullmatch(r'checkpoint\.dat-\d+\.[0-9a-f]{32}', p) for p in prefixes)
