"""`tests.helpers.forkserver`: a script run forked from a prepared process behaves like
one started by ``subprocess.Popen`` (arguments, folder, environment, stdio, exit
status, SIGKILL)."""

import json
import os
import signal
import subprocess

import pytest

from tests.helpers.forkserver import ForkServer

SCRIPT = r'''
import json
import os
import sys

print(json.dumps({'argv': sys.argv[1:], 'cwd': os.getcwd(), 'name': __name__,
                  'answer': os.environ.get('ANSWER'),
                  'preloaded': 'decimal' in sys.modules}), flush=True)
print('to stderr', file=sys.stderr, flush=True)
line = sys.stdin.readline()
if line.strip() == 'wait':
    sys.stdin.readline()
    sys.exit(0)
sys.exit(int(line or 0))
'''


@pytest.fixture(scope='module')
def server():
    forks = ForkServer(('decimal',), env=dict(os.environ))
    yield forks
    forks.close()


@pytest.fixture
def script(tmp_path):
    path = tmp_path / 'child.py'
    path.write_text(SCRIPT)
    return path


def test_a_forked_run_gets_its_arguments_folder_environment_and_stdio(server, script, tmp_path):
    with open(tmp_path / 'err.txt', 'w') as err:
        run = server.start([script, 'a', 3], cwd=tmp_path, env={'ANSWER': '42'},
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    assert run.pid != os.getpid() and run.pid != server.proc.pid
    seen = json.loads(run.stdout.readline())
    assert seen == {'argv': ['a', '3'], 'cwd': str(tmp_path), 'name': '__main__',
                    'answer': '42', 'preloaded': True}
    run.stdin.write('7\n')
    run.stdin.close()
    assert run.wait() == 7
    assert (tmp_path / 'err.txt').read_text() == 'to stderr\n'


def test_runs_are_separate_processes_and_a_sigkill_ends_only_its_own(server, script, tmp_path):
    waiting = server.start([script], cwd=tmp_path, env={}, stdin=subprocess.PIPE,
                           stdout=subprocess.PIPE)
    other = server.start([script], cwd=tmp_path, env={}, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE)
    assert waiting.pid != other.pid
    for run in (waiting, other):
        assert run.stdout.readline()
        run.stdin.write('wait\n')
        run.stdin.flush()
    waiting.kill()
    assert waiting.wait() == -signal.SIGKILL
    other.stdin.close()           # its second readline gets an end of file: exit 0
    assert other.wait() == 0
    quiet = server.start([script], cwd=tmp_path, env={})   # stdio: /dev/null
    assert quiet.wait() == 0 and quiet.stdout is None
