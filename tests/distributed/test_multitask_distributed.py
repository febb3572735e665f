"""Multi-task training under MirroredStrategy (scripts/mirrored_multitask.py, a child
process on two logical CPUs): the tasks' flows are split among the replicas, the
per-task statistics are merged, and a mid-epoch resume continues exactly."""

from __future__ import annotations

import numpy as np
import pytest

from tests.distributed.scripts._run import run_child

pytestmark = pytest.mark.distributed


@pytest.fixture(scope='module')
def mirrored(tmp_path_factory):
    return run_child('mirrored_multitask.py', str(tmp_path_factory.mktemp('multitask')),
                     timeout=180.)


def test_two_replicas_print_and_train_as_one_device(mirrored):
    # the same batches of each task, in turn
    assert mirrored['two_seen'] == mirrored['one_seen']
    assert [t for t, _ in mirrored['one_seen']][:4] == ['up', 'down', 'up', 'down']
    # the merged per-task statistics are those of one device (mean and spread)
    assert mirrored['two_lines'] == mirrored['one_lines']
    assert 'down/loss: ' in mirrored['two_lines'][-2] and 'up/loss: ' in mirrored['two_lines'][-2]
    assert 'valid loss: 1.75' in mirrored['two_lines'][-2]     # (1 / 2 + 3) / 2
    assert mirrored['two_best'] == {'up': 0.5, 'down': 3.}
    for a, b in zip(mirrored['two_weights'], mirrored['one_weights']):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_two_replicas_resume_shuffled_tasks_mid_epoch_exactly(mirrored):
    assert mirrored['resumed_lines'][0].startswith('Resume training: epoch ')
    full, resumed = mirrored['full_seen'], mirrored['resumed_seen']
    assert resumed == full[-len(resumed):] and len(resumed) < len(full) - 6
    assert mirrored['resumed_weights'] == mirrored['full_weights']
