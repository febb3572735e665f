"""Staging folders left in the temporary directory by a killed process (their
writer's pid in their name) are removed at the next start; those of a running
process, and folders of other names, stay."""

import os
import subprocess
import sys
import tempfile

import pytest

from tfsnippet.scaffold.checkpoint.object_store import ObjectCheckpointStore
from tfsnippet.storage.staging import clean_stale_staging, staging_prefix

CHILD = """
import os, sys, tempfile
sys.path.insert(0, {root!r})
from tfsnippet.storage.staging import staging_prefix
for kind, label in (('staging', None), ('run', 'exp-2024-01')):
    path = tempfile.mkdtemp(prefix=staging_prefix(kind, label))
    open(os.path.join(path, 'console.log'), 'w').write('half written')
    print(path, flush=True)
os.kill(os.getpid(), 9)
"""


def killed_child_folders(tmp_path):
    """Two staging folders of a child process killed with SIGKILL (so it removed none)."""
    env = dict(os.environ, TMPDIR=str(tmp_path))
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    proc = subprocess.run([sys.executable, '-c', CHILD.format(root=root)], env=env,
                          stdout=subprocess.PIPE, text=True, timeout=60, check=False)
    assert proc.returncode == -9
    return proc.stdout.split()


@pytest.mark.skipif(os.name == 'nt', reason='SIGKILL')
def test_a_killed_process_staging_is_cleaned_at_the_next_start(tmp_path, monkeypatch):
    dead = killed_child_folders(tmp_path)
    assert [os.path.basename(p).split('-pid')[0] for p in dead] == [
        'tfsnippet-staging', 'tfsnippet-run-exp-2024-01']
    assert all(os.path.isdir(p) for p in dead)
    monkeypatch.setattr(tempfile, 'tempdir', str(tmp_path))
    mine = tempfile.mkdtemp(prefix=staging_prefix('staging'))   # this process runs
    other = tmp_path / 'tfsnippet-staging-abc123'                  # an older name: kept
    other.mkdir()
    unrelated = tmp_path / 'tfsnippet-profile-pid1-x'              # not a staging kind
    unrelated.mkdir()

    # the next start: opening a store on a bucket cleans up
    ObjectCheckpointStore('memory://stale-staging/run/checkpoint')
    assert sorted(os.listdir(tmp_path)) == sorted(
        [os.path.basename(mine), other.name, unrelated.name])
    assert clean_stale_staging(str(tmp_path)) == []


def test_staging_prefix_names_the_pid_and_refuses_unknown_kinds():
    assert staging_prefix('run', 'r1') == f'tfsnippet-run-r1-pid{os.getpid()}-'
    with pytest.raises(ValueError, match=r"`kind` must be one of \('run', 'staging'\), got 'tmp'"):
        staging_prefix('tmp')
