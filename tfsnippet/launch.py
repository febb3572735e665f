"""Run a training script as a local cluster of processes: ``python -m tfsnippet.launch``.

Usage::

    python -m tfsnippet.launch --workers 2 train.py --epochs 10
    python -m tfsnippet.launch --workers 2 --ps 1 --max-restarts 3 train.py

The launcher starts one process per task, each running ``python train.py
ARGS`` with its own ``TF_CONFIG`` on loopback ports that are free (or on
``--port-base``, ``--port-base + 1``, ...).  With ``--ps 0`` (the default) the
tasks are workers 0 .. N-1, worker 0 being the chief, as
``tf.distribute.MultiWorkerMirroredStrategy`` expects.  With ``--ps M`` there
are also M parameter servers and a ``'chief'`` task, the coordinator of
``tf.distribute.experimental.ParameterServerStrategy``.  Every task runs the
same script, which finds its role with :mod:`tfsnippet.distributed`
(``task_type()``, ``is_chief()``): under parameter servers the workers and ps
start a ``tf.distribute.Server`` and wait; the chief trains.

Each line a task prints is echoed with the task's name in front
(``[worker 0] ...``; standard error stays on standard error); the launcher's
own lines go to standard error and start with ``[launch]``: one when it
starts, one per restart, and a last one saying how the run ended.  Every child gets
``PYTHONUNBUFFERED=1`` (unless already set) so that its lines arrive as they
are printed.

What ends a run:

* every task exits with status 0, or, with parameter servers, the chief
  does (the servers never exit on their own, so the launcher stops them):
  the launcher exits with 0;
* a task exits with a non-zero status: the launcher stops the others
  (``SIGTERM``, then ``SIGKILL`` after ``--grace-period`` seconds).  If
  restarts remain, it starts all tasks again, with
  ``TFSNIPPET_LAUNCH_RESTART`` set to the restart number (0 on the first
  run), and the script resumes from its latest checkpoint; otherwise the
  launcher exits with the failed task's status (128 + N for signal N);
* the launcher gets ``SIGINT`` (Ctrl+C) or ``SIGTERM``: it stops all tasks the
  same way, does not restart, and exits with 128 + the signal number.

Every task of a launch also gets ``TFSNIPPET_RUN_ID``, one id per launch
(the same after a restart; an id already in the launcher's environment is
passed on): an :class:`~tfsnippet.Experiment` given no ``name`` takes it, so
that all workers record into one run, and a restart resumes it.

Each task runs in its own process group, and the whole group is signalled,
so processes a script starts are stopped with it.

.. note::
    Free ports are found by binding port 0 and closing the socket; another
    program could take one before the tasks bind it.  On a restart, fresh
    ports are picked, unless ``--port-base`` fixes them.

On a real cluster, do not use this launcher: run the same script under the
cluster manager, which sets ``TF_CONFIG`` (Vertex AI), as a Kubernetes
Indexed Job, or with ``srun`` under SLURM (see :mod:`tfsnippet.distributed`).

This module imports nothing but the standard library.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from types import FrameType
from typing import IO, Sequence, TextIO

__all__ = ['main', 'Task', 'plan_tasks', 'tf_config_for', 'RESTART_ENV', 'RUN_ID_ENV']

RESTART_ENV = 'TFSNIPPET_LAUNCH_RESTART'
"""Variable holding the restart number (0 on the first run) in every task's environment."""

RUN_ID_ENV = 'TFSNIPPET_RUN_ID'
"""Variable holding the launch's run id in every task's environment (the same after a
restart); equal to :data:`tfsnippet.distributed.RUN_ID_ENV`."""

PROG = 'python -m tfsnippet.launch'


@dataclass(frozen=True)
class Task:
    """One process of the local cluster.

    Args:
        type: ``'chief'``, ``'worker'`` or ``'ps'``.
        index: Index among the tasks of its type.
        address: ``'host:port'`` the task's server listens on.
    """

    type: str
    index: int
    address: str

    @property
    def name(self) -> str:
        """The task's name in output prefixes and messages, e.g. ``'worker 0'``."""
        return f'{self.type} {self.index}'


def plan_tasks(workers: int, ps: int, host: str, ports: Sequence[int]) -> list[Task]:
    """Lay out the tasks: a chief (only with parameter servers), the workers, the ps.

    Args:
        workers: Number of worker tasks, at least 1.
        ps: Number of parameter servers; with any, a ``'chief'`` task is added.
        host: Host of every address.
        ports: One port per task, in the order above.

    Returns:
        The tasks, in the order of `ports`.

    Raises:
        ValueError: `ports` does not hold one port per task.
    """
    kinds = (['chief'] if ps else []) + ['worker'] * workers + ['ps'] * ps
    if len(ports) != len(kinds):
        raise ValueError(f'`ports` must hold {len(kinds)} ports (one per task), '
                         f'got {list(ports)!r}')
    shown_host = f'[{host}]' if ':' in host else host
    counters: dict[str, int] = {}
    tasks = []
    for kind, port in zip(kinds, ports):
        index = counters.get(kind, 0)
        counters[kind] = index + 1
        tasks.append(Task(kind, index, f'{shown_host}:{port}'))
    return tasks


def tf_config_for(tasks: Sequence[Task], task: Task) -> str:
    """Return the JSON `TF_CONFIG` of `task` in the cluster made of `tasks`."""
    cluster: dict[str, list[str]] = {}
    for t in tasks:
        cluster.setdefault(t.type, []).append(t.address)
    return json.dumps({'cluster': cluster, 'task': {'type': task.type, 'index': task.index}})


# ---------------------------------------------------------------------- ports
def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ':' in host else socket.AF_INET


def _free_ports(host: str, count: int) -> list[int]:
    sockets = []
    try:
        for _ in range(count):
            sock = socket.socket(_family(host), socket.SOCK_STREAM)
            sockets.append(sock)
            sock.bind((host, 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _check_ports(host: str, ports: Sequence[int]) -> None:
    for port in ports:
        with socket.socket(_family(host), socket.SOCK_STREAM) as sock:
            # Tolerate the TIME_WAIT leftovers of a previous run, not a live listener.
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as e:
                raise ValueError(
                    f'port {port} on {host} (needed by `--port-base` {ports[0]} for '
                    f'{len(ports)} tasks: {ports[0]}-{ports[-1]}) is not available: '
                    f'{e.strerror}; pick another `--port-base`, or leave it out to use '
                    f'free ports') from e


# --------------------------------------------------------------- the launcher
def _exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


def _describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f'signal {-returncode}'
        return f'was killed by {name}'
    return f'exited with status {returncode}'


def _plural(count: int, word: str) -> str:
    return f'{count} {word}{"" if count == 1 else "s"}'


class _Launcher:
    """Runs the tasks, restarts them on failure, and reports; one instance per launch."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO):
        self.args = args
        self.out, self.err = out, err
        self.write_lock = threading.Lock()
        self.events: queue.SimpleQueue[tuple[int, Task | None, int]] = queue.SimpleQueue()
        self.stop_signal: int | None = None
        self.procs: dict[Task, subprocess.Popen[bytes]] = {}
        self.threads: list[threading.Thread] = []
        self.count = args.workers + args.ps + (1 if args.ps else 0)
        self.run_id = (os.environ.get(RUN_ID_ENV, '').strip()
                       or f'{time.strftime("%Y%m%d-%H%M%S")}-{uuid.uuid4().hex[:6]}')

    # ------------------------------------------------------------ output
    def say(self, text: str) -> None:
        with self.write_lock:
            self.err.write(f'[launch] {text}\n')
            self.err.flush()

    def _pump(self, pipe: IO[bytes], prefix: str, sink: TextIO) -> None:
        with pipe:
            for raw in iter(pipe.readline, b''):
                text = raw.decode('utf-8', errors='replace')
                if not text.endswith('\n'):
                    text += '\n'
                with self.write_lock:
                    sink.write(prefix + text)
                    sink.flush()

    # --------------------------------------------------------- processes
    def _start(self, tasks: list[Task], attempt: int) -> None:
        command = [sys.executable, self.args.script, *self.args.script_args]
        for task in tasks:
            env = dict(os.environ)
            env['TF_CONFIG'] = tf_config_for(tasks, task)
            env[RESTART_ENV] = str(attempt)
            env[RUN_ID_ENV] = self.run_id
            env.setdefault('PYTHONUNBUFFERED', '1')
            proc = subprocess.Popen(command, env=env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    start_new_session=True)
            self.procs[task] = proc
            prefix = f'[{task.name}] '
            assert proc.stdout is not None and proc.stderr is not None
            for target, targs in ((self._pump, (proc.stdout, prefix, self.out)),
                                  (self._pump, (proc.stderr, prefix, self.err)),
                                  (self._wait, (proc, task, attempt))):
                thread = threading.Thread(target=target, args=targs, daemon=True)
                thread.start()
                self.threads.append(thread)

    def _wait(self, proc: subprocess.Popen[bytes], task: Task, attempt: int) -> None:
        self.events.put((attempt, task, proc.wait()))

    def _signal_all(self, signum: int) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signum)
                except ProcessLookupError:
                    pass

    def _stop_all(self) -> None:
        """SIGTERM every running task, SIGKILL those left after the grace period, reap all."""
        self._signal_all(signal.SIGTERM)
        deadline = time.monotonic() + self.args.grace_period
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0., deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        self._signal_all(signal.SIGKILL)
        for proc in self.procs.values():
            proc.wait()
        for thread in self.threads:
            thread.join(timeout=2.)
        self.procs.clear()
        self.threads.clear()

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.stop_signal is None:
            self.stop_signal = signum
        self.events.put((-1, None, signum))

    # -------------------------------------------------------------- runs
    def _ports(self, count: int) -> list[int]:
        if self.args.port_base is None:
            return _free_ports(self.args.host, count)
        ports = list(range(self.args.port_base, self.args.port_base + count))
        _check_ports(self.args.host, ports)
        return ports

    def _attempt(self, attempt: int, ports: list[int]) -> tuple[int, Task | None]:
        """Run all tasks once; return the return code and the task that failed, if any."""
        tasks = plan_tasks(self.args.workers, self.args.ps, self.args.host, ports)
        try:
            self._start(tasks, attempt)
            running = set(tasks)
            while running:
                tag, task, code = self.events.get()
                if task is None:  # the launcher got a signal; run() reports it
                    return 0, None
                if tag != attempt:
                    continue
                running.discard(task)
                if code != 0:
                    return code, task
                if task.type == 'chief':  # the coordinator is done; the servers never are
                    return 0, None
            return 0, None
        finally:
            self._stop_all()

    def first_ports(self) -> list[int]:
        """Pick the ports of the first run; a port in use fails here, before anything starts.

        Raises:
            ValueError: A port of ``--port-base`` is not available.
        """
        return self._ports(self.count)

    def run(self, ports: list[int]) -> int:
        """Run the tasks on `ports` until they succeed, restarts run out, or a signal comes."""
        args = self.args
        roles = ', '.join((['1 chief'] if args.ps else []) + [_plural(args.workers, 'worker')]
                          + ([f'{args.ps} ps'] if args.ps else []))
        self.say(f'starting {roles} on {args.host} (ports {", ".join(map(str, ports))}), '
                 f'up to {_plural(args.max_restarts, "restart")}: '
                 f'{" ".join([args.script, *args.script_args])}')
        attempt = 0
        while True:
            code, failed = self._attempt(attempt, ports)
            if self.stop_signal is not None:
                name = signal.Signals(self.stop_signal).name
                self.say(f'stopped by {name} after {_plural(attempt, "restart")}; '
                         f'exit status {128 + self.stop_signal}')
                return 128 + self.stop_signal
            if failed is None:
                self.say(f'finished: all tasks succeeded after {_plural(attempt, "restart")}')
                return 0
            status = _exit_status(code)
            if attempt >= args.max_restarts:
                self.say(f'failed: {failed.name} {_describe_exit(code)} after '
                         f'{_plural(attempt, "restart")} (no restarts left); '
                         f'exit status {status}')
                return status
            attempt += 1
            self.say(f'{failed.name} {_describe_exit(code)}; restarting all tasks '
                     f'(restart {attempt} of {args.max_restarts})')
            if args.port_base is None:
                ports = self._ports(self.count)
            else:
                try:
                    _check_ports(args.host, ports)
                except ValueError as e:
                    self.say(f'failed: cannot restart: {e}')
                    return status


# ------------------------------------------------------------------ commands
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG, description='Run a training script as a local cluster of processes, '
        'each with its TF_CONFIG, and restart them all when one fails.')
    parser.add_argument('--workers', type=int, required=True, metavar='N',
                        help='number of worker tasks (at least 1); worker 0 is the chief '
                             'unless there are parameter servers')
    parser.add_argument('--ps', type=int, default=0, metavar='M',
                        help='number of parameter servers; with any, a chief task '
                             '(the coordinator) is added (default: 0)')
    parser.add_argument('--max-restarts', type=int, default=0, metavar='R',
                        help='restart all tasks at most R times after a failure (default: 0)')
    parser.add_argument('--port-base', type=int, default=None, metavar='P',
                        help='use ports P, P+1, ... (default: free ports picked at random)')
    parser.add_argument('--host', default='127.0.0.1',
                        help='address the tasks listen on (default: 127.0.0.1)')
    parser.add_argument('--allow-non-loopback', action='store_true',
                        help='allow a --host that is not a loopback address')
    parser.add_argument('--grace-period', type=float, default=5., metavar='SECONDS',
                        help='seconds between SIGTERM and SIGKILL when stopping tasks '
                             '(default: 5)')
    parser.add_argument('script', help='the Python script every task runs')
    parser.add_argument('script_args', nargs=argparse.REMAINDER, metavar='ARGS',
                        help='arguments for the script')
    return parser


def _is_loopback(host: str) -> bool:
    if host == 'localhost':
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for option, value, low in (('--workers', args.workers, 1), ('--ps', args.ps, 0),
                               ('--max-restarts', args.max_restarts, 0)):
        if value < low:
            parser.error(f'`{option}` must be an int >= {low}, got {value}')
    if not args.grace_period > 0:
        parser.error(f'`--grace-period` must be a number above 0, got {args.grace_period}')
    if not _is_loopback(args.host) and not args.allow_non_loopback:
        parser.error(f'`--host` must be a loopback address such as 127.0.0.1, got '
                     f'{args.host!r}; pass `--allow-non-loopback` to listen on it anyway')
    count = args.workers + args.ps + (1 if args.ps else 0)
    if args.port_base is not None and not (
            1 <= args.port_base and args.port_base + count - 1 <= 65535):
        parser.error(f'`--port-base` must leave room for {count} ports in 1..65535, '
                     f'got {args.port_base}')
    if not os.path.isfile(args.script):
        parser.error(f'`script` must be a file, got {args.script!r} (no such file)')


def main(argv: Sequence[str] | None = None) -> int:
    """Run the launcher with command-line arguments `argv` (``sys.argv[1:]`` by default).

    Children's output goes to ``sys.stdout``/``sys.stderr`` as they are when
    called; ``SIGINT`` and ``SIGTERM`` handlers are installed for the call
    (when called from the main thread) and restored afterwards.

    Returns:
        The exit status: 0 when the tasks succeeded, the failed task's status,
        128 + N after signal N, or 2 for bad arguments (reported on stderr).
    """
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        _check_args(parser, args)
    except SystemExit as e:  # argparse's way to report bad arguments and --help
        return e.code if isinstance(e.code, int) else 2
    launcher = _Launcher(args, sys.stdout, sys.stderr)
    in_main_thread = threading.current_thread() is threading.main_thread()
    previous = {}
    if in_main_thread:
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, launcher._on_signal)
    try:
        try:
            ports = launcher.first_ports()
        except ValueError as e:
            parser.print_usage(sys.stderr)
            sys.stderr.write(f'{PROG}: error: {e}\n')
            return 2
        return launcher.run(ports)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


if __name__ == '__main__':
    sys.exit(main())
