"""A process that imported TensorFlow once and forks a fresh process per script run.

Crash tests kill real training processes with SIGKILL; each used to start a new
Python that imported TensorFlow again (seconds of CPU each).  A
:class:`ForkServer` imports the heavy modules once, runs no TensorFlow op, and
for each :meth:`ForkServer.start` forks a child that runs the script as
``__main__`` with the given arguments, working directory, environment and
stdio: a process of its own, with its own pid, killed, waited for and read
like one started by ``subprocess.Popen`` (:class:`Forked`).  A script that
wants graph mode calls ``tf.compat.v1.disable_eager_execution()`` first, as
in a fresh process (the server ran no op, so eager mode was never entered).

The server talks over a ``SOCK_SEQPACKET`` socket pair: a request carries the
child's stdin, stdout and stderr file descriptors (``SCM_RIGHTS``); the answers
are the child's pid, and its wait status when it ends.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading

SERVER = r'''
import importlib, io, json, os, runpy, select, signal, socket, sys, traceback

sock = socket.socket(fileno=int(sys.argv[1]))
for name in sys.argv[2:]:
    importlib.import_module(name)
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.set_wakeup_fd(wake_w)
signal.signal(signal.SIGCHLD, lambda *a: None)
sock.send(b'{"ready": true}')


def child(request, fds):
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds + [wake_r, wake_w, sock.fileno()]:
            os.close(fd)
        signal.set_wakeup_fd(-1)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        sys.stdin = open(0, 'r', closefd=False)
        sys.stdout = open(1, 'w', closefd=False)
        sys.stderr = open(2, 'w', closefd=False)
        os.chdir(request['cwd'])
        os.environ.clear()
        os.environ.update(request['env'])
        sys.argv = list(request['argv'])
        sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
        runpy.run_path(sys.argv[0], run_name='__main__')
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
        os._exit(code)


running = set()
while True:
    ready, _, _ = select.select([sock, wake_r], [], [])
    if wake_r in ready:
        os.read(wake_r, 4096)
    while running:
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            break
        running.discard(pid)
        sock.send(json.dumps({'pid': pid, 'status': status}).encode())
    if sock in ready:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 1 << 16, 3)
        except InterruptedError:
            continue
        if not data:
            break
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            child(request, fds)
        for fd in fds:
            os.close(fd)
        running.add(pid)
        sock.send(json.dumps({'started': request['id'], 'pid': pid}).encode())
'''


class ForkServer:
    """Imports `modules` once in a server process; :meth:`start` forks a script's run."""

    def __init__(self, modules=('numpy', 'tensorflow'), env=None):
        self._sock, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.proc = subprocess.Popen(
            [sys.executable, '-c', SERVER, str(theirs.fileno()), *modules],
            pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL, env=env)
        theirs.close()
        self._lock = threading.Lock()
        self._status = {}
        self._started = {}
        self._ids = iter(range(1 << 30))
        self._read()        # {"ready": true}, or the server died importing

    def _read(self):
        data = self._sock.recv(1 << 16)
        if not data:
            raise RuntimeError(f'the fork server exited (code {self.proc.wait()})')
        message = json.loads(data)
        if 'status' in message:
            self._status[message['pid']] = message['status']
        elif 'started' in message:
            self._started[message['started']] = message['pid']
        return message

    def start(self, argv, *, cwd, env, stdin=None, stdout=None, stderr=None):
        """Fork a run of ``argv[0]`` (a script) with ``argv[1:]``: a :class:`Forked`.

        `stdin`, `stdout` and `stderr` are open files (or ``None``: /dev/null); use
        ``subprocess.PIPE`` for stdin or stdout to get a pipe, as ``Forked.stdin`` /
        ``Forked.stdout`` (text)."""
        ends, ours = [], {}
        with open(os.devnull, 'r+b') as null:
            for name, given, writable in (('stdin', stdin, False), ('stdout', stdout, True),
                                          ('stderr', stderr, True)):
                if given is subprocess.PIPE:
                    r, w = os.pipe()
                    child_end, our_end = (w, r) if writable else (r, w)
                    ours[name] = os.fdopen(our_end, 'r' if writable else 'w')
                    ends.append(child_end)
                else:
                    ends.append(os.dup((given or null).fileno()))
            request_id = next(self._ids)
            try:
                with self._lock:
                    socket.send_fds(self._sock, [json.dumps({
                        'id': request_id, 'argv': [str(a) for a in argv], 'cwd': str(cwd),
                        'env': dict(env)}).encode()], ends)
                    while request_id not in self._started:
                        self._read()
            finally:
                for fd in ends:
                    os.close(fd)
        return Forked(self, self._started.pop(request_id), **ours)

    def run(self, argv, *, cwd, env, timeout, stderr_to_stdout=False):
        """Fork a run of ``argv[0]`` with ``argv[1:]`` and wait for its end, as
        ``subprocess.run(..., stdin=DEVNULL, capture_output=True, text=True)`` would:
        a ``subprocess.CompletedProcess`` (stderr in stdout with `stderr_to_stdout`).
        Killed after `timeout` seconds: ``subprocess.TimeoutExpired`` then."""
        import tempfile
        with tempfile.TemporaryFile('w+') as out, tempfile.TemporaryFile('w+') as err:
            proc = self.start(argv, cwd=cwd, env=env, stdout=out,
                              stderr=out if stderr_to_stdout else err)
            timed_out = []

            def kill():
                timed_out.append(True)
                proc.kill()

            guard = threading.Timer(timeout, kill)
            guard.start()
            try:
                code = proc.wait()
            finally:
                guard.cancel()
            texts = []
            for f in (out, err):
                f.seek(0)
                texts.append(f.read())
        if timed_out:
            raise subprocess.TimeoutExpired([str(a) for a in argv], timeout, texts[0], texts[1])
        return subprocess.CompletedProcess([str(a) for a in argv], code, texts[0],
                                           None if stderr_to_stdout else texts[1])

    def wait(self, pid):
        """The wait status of `pid` (a child of the server), once it ended."""
        with self._lock:
            while pid not in self._status:
                self._read()
            return self._status.pop(pid)

    def close(self):
        """End the server (it holds nothing to save: no exit work is waited for)."""
        self._sock.close()
        self.proc.kill()
        self.proc.wait()


class Forked:
    """A run started by :meth:`ForkServer.start`; ``Popen``'s ``pid``, ``stdin``,
    ``stdout``, ``kill``, ``send_signal``, ``wait`` and ``returncode`` (negative: the
    signal that ended it)."""

    def __init__(self, server, pid, stdin=None, stdout=None):
        self._server, self.pid, self.stdin, self.stdout = server, pid, stdin, stdout
        self.returncode = None

    def send_signal(self, sig):
        if self.returncode is None:
            os.kill(self.pid, sig)

    def kill(self):
        self.send_signal(signal.SIGKILL)

    def wait(self):
        if self.returncode is None:
            self.returncode = os.waitstatus_to_exitcode(self._server.wait(self.pid))
        return self.returncode
