"""`python -m tfsnippet.launch` runs a script as a local cluster, stops it, and restarts it.

The child scripts are plain Python written to `tmp_path`; they read their
`TF_CONFIG` and coordinate through marker files in the directory passed as
their first argument.  A task that "runs forever" sleeps 60 s: a test whose
launcher fails to stop it takes that long and fails its time check.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tfsnippet import launch

LAUNCH_PY = str(Path(launch.__file__).resolve())
QUICK = 30.  # seconds: far below a child's 60 s sleep, far above a normal run here

PRELUDE = '''\
import json, os, signal, sys, time
from pathlib import Path

TASK = json.loads(os.environ['TF_CONFIG'])['task']
NAME = f"{TASK['type']}{TASK['index']}"
RESTART = int(os.environ['TFSNIPPET_LAUNCH_RESTART'])
DIR = Path(sys.argv[1])


def mark(name):
    (DIR / name).write_text('')


def wait_for(*names):
    deadline = time.monotonic() + 30
    while not all((DIR / n).exists() for n in names):
        if time.monotonic() > deadline:
            sys.exit(f'{NAME}: timed out waiting for {names}')
        time.sleep(0.01)


def on_sigterm(signum, frame):
    print(f'{NAME} got SIGTERM', flush=True)
    sys.exit(0)

'''


def script(tmp_path: Path, body: str) -> list[str]:
    """Write a child script; return the launcher's trailing arguments to run it."""
    path = tmp_path / 'child.py'
    path.write_text(PRELUDE + textwrap.dedent(body))
    return [str(path), str(tmp_path)]


def run_main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str, float]:
    start = time.monotonic()
    status = launch.main(argv)
    elapsed = time.monotonic() - start
    out, err = capsys.readouterr()
    return status, out, err, elapsed


def run_launcher(argv: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    """Run the launcher as a program; past `timeout`, SIGTERM it so that it stops its tasks."""
    # It imports only the standard library, so it starts without TensorFlow.
    proc = subprocess.Popen([sys.executable, LAUNCH_PY, *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        try:
            out, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
        pytest.fail(f'the launcher ran over {timeout} s:\n{out[-2000:]}\n{err[-3000:]}')
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def by_prefix(text: str) -> dict[str, list[str]]:
    lines: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = re.fullmatch(r'\[(\w+ \d+|launch)\] (.*)', line)
        assert match, f'line without a prefix: {line!r}'
        lines.setdefault(match.group(1), []).append(match.group(2))
    return lines


# ------------------------------------------------------------ output, config
def test_each_task_gets_its_tf_config_and_a_prefix_on_its_output(tmp_path, capsys,
                                                                  monkeypatch):
    monkeypatch.delenv('PYTHONUNBUFFERED', raising=False)
    argv = script(tmp_path, '''
        print(os.environ['TF_CONFIG'])
        print(f'restart={RESTART} unbuffered={os.environ["PYTHONUNBUFFERED"]} '
              f'args={sys.argv[2:]}')
        sys.stdout.write('no newline at the end')
        print(f'{NAME} on stderr', file=sys.stderr)
    ''')
    status, out, err, _ = run_main(['--workers', '3', *argv, '--workers', '7'], capsys)
    assert status == 0
    stdout, stderr = by_prefix(out), by_prefix(err)
    assert set(stdout) == {'worker 0', 'worker 1', 'worker 2'}
    configs = {name: json.loads(lines[0]) for name, lines in stdout.items()}
    for name, lines in stdout.items():
        assert lines[1:] == ["restart=0 unbuffered=1 args=['--workers', '7']",
                             'no newline at the end']
        assert stderr[name] == [f'{name.replace(" ", "")} on stderr']
        assert f"{configs[name]['task']['type']} {configs[name]['task']['index']}" == name
    clusters = [c['cluster'] for c in configs.values()]
    assert all(c == clusters[0] for c in clusters) and list(clusters[0]) == ['worker']
    addresses = clusters[0]['worker']
    assert len(set(addresses)) == 3
    assert all(re.fullmatch(r'127\.0\.0\.1:\d+', a) for a in addresses)
    ports = ', '.join(a.split(':')[1] for a in addresses)
    assert stderr['launch'] == [
        f'starting 3 workers on 127.0.0.1 (ports {ports}), up to 0 restarts: '
        f'{argv[0]} {argv[1]} --workers 7',
        'finished: all tasks succeeded after 0 restarts']


def test_parameter_servers_add_a_chief_and_are_stopped_when_it_succeeds(tmp_path, capsys):
    argv = script(tmp_path, '''
        print(os.environ['TF_CONFIG'])
        if TASK['type'] == 'chief':
            wait_for('worker0', 'worker1', 'ps0')
            sys.exit(0)
        signal.signal(signal.SIGTERM, on_sigterm)
        mark(NAME)
        time.sleep(60)  # a tf.distribute.Server that never exits on its own
    ''')
    status, out, err, elapsed = run_main(['--workers', '2', '--ps', '1', *argv], capsys)
    assert (status, elapsed < QUICK) == (0, True)
    stdout = by_prefix(out)
    assert set(stdout) == {'chief 0', 'worker 0', 'worker 1', 'ps 0'}
    config = json.loads(stdout['worker 1'][0])
    assert [len(config['cluster'][k]) for k in ('chief', 'worker', 'ps')] == [1, 2, 1]
    assert config['task'] == {'type': 'worker', 'index': 1}
    for name in ('worker 0', 'worker 1', 'ps 0'):
        assert stdout[name][1:] == [f'{name.replace(" ", "")} got SIGTERM']
    assert by_prefix(err)['launch'][0].startswith('starting 1 chief, 2 workers, 1 ps on ')


def test_port_base_fixes_the_ports(tmp_path, capsys):
    with socket.socket() as sock:
        sock.bind(('127.0.0.1', 0))
        port = sock.getsockname()[1]
    argv = script(tmp_path, 'print(os.environ["TF_CONFIG"])\n')
    status, out, _, _ = run_main(['--workers', '1', '--port-base', str(port), *argv], capsys)
    assert status == 0
    config = json.loads(by_prefix(out)['worker 0'][0])
    assert config['cluster'] == {'worker': [f'127.0.0.1:{port}']}


# ------------------------------------------------------------ failure, restart
def test_a_failing_worker_stops_the_others_and_sets_the_exit_status(tmp_path, capsys):
    argv = script(tmp_path, '''
        if NAME == 'worker1':
            wait_for('worker0', 'worker2')
            sys.exit(3)
        signal.signal(signal.SIGTERM, on_sigterm)
        mark(NAME)
        time.sleep(60)
    ''')
    status, out, err, elapsed = run_main(['--workers', '3', *argv], capsys)
    assert (status, elapsed < QUICK) == (3, True)
    assert by_prefix(out) == {'worker 0': ['worker0 got SIGTERM'],
                              'worker 2': ['worker2 got SIGTERM']}
    assert by_prefix(err)['launch'][-1] == (
        'failed: worker 1 exited with status 3 after 0 restarts (no restarts left); '
        'exit status 3')


def test_a_task_ignoring_sigterm_is_killed_after_the_grace_period(tmp_path, capsys):
    argv = script(tmp_path, '''
        if NAME == 'worker1':
            wait_for('worker0')
            os.kill(os.getpid(), signal.SIGKILL)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        mark(NAME)
        time.sleep(60)
    ''')
    status, out, err, elapsed = run_main(
        ['--workers', '2', '--grace-period', '0.5', *argv], capsys)
    assert (status, elapsed < QUICK) == (137, True)
    assert by_prefix(err)['launch'][-1] == (
        'failed: worker 1 was killed by SIGKILL after 0 restarts (no restarts left); '
        'exit status 137')


def test_restart_runs_all_tasks_again_after_a_failure(tmp_path, capsys):
    argv = script(tmp_path, '''
        with open(DIR / f'{NAME}.log', 'a') as f:
            f.write(f'{RESTART}\\n')
        with open(DIR / 'run_ids.log', 'a') as f:
            f.write(os.environ['TFSNIPPET_RUN_ID'] + '\\n')
        if NAME == 'worker1' and RESTART == 0:
            wait_for('worker0-started')
            sys.exit(5)
        mark('worker0-started')
        if RESTART == 0:
            time.sleep(60)
        print(f'resumed at restart {RESTART}')
    ''')
    status, out, err, elapsed = run_main(['--workers', '2', '--max-restarts', '2', *argv],
                                         capsys)
    assert (status, elapsed < QUICK) == (0, True)
    assert by_prefix(out) == {'worker 0': ['resumed at restart 1'],
                              'worker 1': ['resumed at restart 1']}
    assert (tmp_path / 'worker0.log').read_text() == '0\n1\n'
    assert (tmp_path / 'worker1.log').read_text() == '0\n1\n'
    # one run id for the launch: every worker, before and after the restart
    run_ids = (tmp_path / 'run_ids.log').read_text().split()
    assert len(run_ids) == 4 and len(set(run_ids)) == 1
    assert re.fullmatch(r'\d{8}-\d{6}-[0-9a-f]{6}', run_ids[0])
    assert by_prefix(err)['launch'][1:] == [
        'worker 1 exited with status 5; restarting all tasks (restart 1 of 2)',
        'finished: all tasks succeeded after 1 restart']


def test_a_run_id_in_the_environment_is_passed_on(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv('TFSNIPPET_RUN_ID', 'digits-7')
    argv = script(tmp_path, '''
        print(os.environ['TFSNIPPET_RUN_ID'])
    ''')
    status, out, _, _ = run_main(['--workers', '2', *argv], capsys)
    assert status == 0
    assert by_prefix(out) == {'worker 0': ['digits-7'], 'worker 1': ['digits-7']}


def test_restarts_run_out(tmp_path, capsys):
    argv = script(tmp_path, '''
        with open(DIR / f'{NAME}.log', 'a') as f:
            f.write(f'{RESTART}\\n')
        sys.exit(7)
    ''')
    status, _, err, elapsed = run_main(['--workers', '1', '--max-restarts', '2', *argv],
                                       capsys)
    assert (status, elapsed < QUICK) == (7, True)
    assert (tmp_path / 'worker0.log').read_text() == '0\n1\n2\n'
    assert by_prefix(err)['launch'][1:] == [
        'worker 0 exited with status 7; restarting all tasks (restart 1 of 2)',
        'worker 0 exited with status 7; restarting all tasks (restart 2 of 2)',
        'failed: worker 0 exited with status 7 after 2 restarts (no restarts left); '
        'exit status 7']


@pytest.mark.parametrize('signum', [signal.SIGTERM, signal.SIGINT], ids=['SIGTERM', 'SIGINT'])
def test_a_signal_to_the_launcher_stops_every_task(tmp_path, signum):
    argv = script(tmp_path, f'''
        signal.signal(signal.SIGTERM, on_sigterm)
        mark(NAME)
        if NAME == 'worker1':
            wait_for('worker0')
            os.kill(os.getppid(), {int(signum)})  # the launcher
        time.sleep(60)
    ''')
    proc = run_launcher(['--workers', '2', '--max-restarts', '3', *argv], timeout=QUICK)
    assert proc.returncode == 128 + signum, proc.stderr
    assert by_prefix(proc.stdout) == {'worker 0': ['worker0 got SIGTERM'],
                                      'worker 1': ['worker1 got SIGTERM']}
    assert by_prefix(proc.stderr)['launch'][-1] == (
        f'stopped by {signum.name} after 0 restarts; exit status {128 + signum}')


# ------------------------------------------------------------------ bad input
def test_zero_workers_is_refused(tmp_path, capsys):
    argv = script(tmp_path, 'mark("ran")\n')
    status, out, err, _ = run_main(['--workers', '0', *argv], capsys)
    assert (status, out) == (2, '')
    assert err.endswith('error: `--workers` must be an int >= 1, got 0\n')
    assert not (tmp_path / 'ran').exists()


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path, capsys):
    argv = script(tmp_path, 'mark(NAME)\n')
    with socket.socket() as busy:
        busy.bind(('127.0.0.1', 0))
        busy.listen()
        port = busy.getsockname()[1]
        status, out, err, _ = run_main(['--workers', '2', '--port-base', str(port), *argv],
                                       capsys)
    assert (status, out) == (2, '')
    assert err.endswith(
        f'error: port {port} on 127.0.0.1 (needed by `--port-base` {port} for 2 tasks: '
        f'{port}-{port + 1}) is not available: Address already in use; pick another '
        f'`--port-base`, or leave it out to use free ports\n')
    assert list(tmp_path.glob('worker*')) == []


@pytest.mark.parametrize('args, message', [
    (['--workers', '1', '--ps', '-1'], '`--ps` must be an int >= 0, got -1'),
    (['--workers', '1', '--max-restarts', '-2'], '`--max-restarts` must be an int >= 0, got -2'),
    (['--workers', '1', '--grace-period', '0'], '`--grace-period` must be a number above 0, '
                                                 'got 0.0'),
    (['--workers', '1', '--host', '10.1.2.3'],
     "`--host` must be a loopback address such as 127.0.0.1, got '10.1.2.3'; pass "
     "`--allow-non-loopback` to listen on it anyway"),
    (['--workers', '2', '--port-base', '65535'],
     '`--port-base` must leave room for 2 ports in 1..65535, got 65535'),
])
def test_bad_options_are_refused(tmp_path, capsys, args, message):
    argv = script(tmp_path, 'mark("ran")\n')
    status, _, err, _ = run_main([*args, *argv], capsys)
    assert status == 2 and err.endswith(f'error: {message}\n')
    assert not (tmp_path / 'ran').exists()


def test_a_missing_script_is_refused(tmp_path, capsys):
    missing = str(tmp_path / 'nope.py')
    status, _, err, _ = run_main(['--workers', '1', missing], capsys)
    assert status == 2
    assert err.endswith(f'error: `script` must be a file, got {missing!r} (no such file)\n')


def test_plan_tasks_checks_the_port_count():
    with pytest.raises(ValueError, match=re.escape(
            '`ports` must hold 4 ports (one per task), got [1, 2]')):
        launch.plan_tasks(2, 1, '127.0.0.1', [1, 2])
    assert [t.address for t in launch.plan_tasks(1, 0, '::1', [5])] == ['[::1]:5']


# --------------------------------------------------------------- TensorFlow
MWMS_SCRIPT = '''\
import tensorflow as tf
from tfsnippet import distributed

info = distributed.cluster_info()
strategy = tf.distribute.MultiWorkerMirroredStrategy()


@tf.function
def step():
    context = tf.distribute.get_replica_context()
    return context.all_reduce('sum', tf.constant(float(info.task_index + 1)))


total = strategy.experimental_local_results(strategy.run(step))[0]
print(f'replicas={strategy.num_replicas_in_sync} sum={float(total)} chief={info.is_chief}')
'''


def test_two_multi_worker_mirrored_workers_all_reduce(tmp_path, monkeypatch):
    """A real 2-process MultiWorkerMirroredStrategy on loopback (about 15 s here)."""
    monkeypatch.setenv('TF_CPP_MIN_LOG_LEVEL', '2')
    monkeypatch.setenv('CUDA_VISIBLE_DEVICES', '')
    path = tmp_path / 'mwms.py'
    path.write_text(MWMS_SCRIPT)
    proc = run_launcher(['--workers', '2', str(path)], timeout=90)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert by_prefix(proc.stdout) == {'worker 0': ['replicas=2 sum=3.0 chief=True'],
                     'worker 1': ['replicas=2 sum=3.0 chief=False']}
