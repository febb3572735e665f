"""A real S3 API on the loopback interface: moto in server mode.

:class:`MotoServer` starts ``python -m moto.server`` on a free port of
127.0.0.1 and points every S3 client of this process, and of the processes it
starts, at it the standard way (``AWS_ENDPOINT_URL`` and fake credentials in
``os.environ``).  The ``s3_server`` fixture (tests/conftest.py) holds one for
the whole session; ``s3_bucket`` gives each test a bucket of its own.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

__all__ = ['MotoServer', 'S3_ENV']

#: What a client needs besides the endpoint: fake credentials and a region.
S3_ENV = {'AWS_ACCESS_KEY_ID': 'testing', 'AWS_SECRET_ACCESS_KEY': 'testing',
          'AWS_DEFAULT_REGION': 'us-east-1', 'AWS_EC2_METADATA_DISABLED': 'true'}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(('127.0.0.1', 0))
        return sock.getsockname()[1]


class MotoServer:
    """One moto server process on 127.0.0.1, started by :meth:`start`.

    `env` is added to the server's environment (e.g.
    ``INITIAL_NO_AUTH_ACTION_COUNT='0'``: every request is authenticated, and
    the fake credentials are refused).
    """

    def __init__(self, start_timeout: float = 30.0, env: dict[str, str] | None = None):
        self.port = _free_port()
        self.server_env = dict(env or {})
        self.endpoint = f'http://127.0.0.1:{self.port}'
        self.start_timeout = start_timeout
        self._process: subprocess.Popen | None = None
        self._saved_env: dict[str, str | None] = {}

    def start(self) -> MotoServer:
        self._process = subprocess.Popen(
            [sys.executable, '-m', 'moto.server', '-H', '127.0.0.1', '-p', str(self.port)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            env={**os.environ, **self.server_env})
        deadline = time.monotonic() + self.start_timeout
        while True:
            try:
                urllib.request.urlopen(self.endpoint + '/', timeout=1).close()
                break
            except urllib.error.HTTPError:   # it answers (refusing, with authentication on)
                break
            except (urllib.error.URLError, ConnectionError, OSError):
                if self._process.poll() is not None:
                    raise RuntimeError(f'moto server exited with {self._process.returncode}')
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f'moto server did not answer on {self.endpoint} '
                                       f'within {self.start_timeout} s')
                time.sleep(0.1)
        for key, value in {**S3_ENV, 'AWS_ENDPOINT_URL': self.endpoint}.items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        return self

    def stop(self) -> None:
        for key, value in self._saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        self._saved_env.clear()
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._process = None

    def new_bucket(self) -> str:
        """Create a bucket with a fresh name; return its ``s3://`` URL."""
        import s3fs
        name = f'test-{uuid.uuid4().hex[:12]}'
        s3fs.S3FileSystem(skip_instance_cache=True).mkdir(name)
        return f's3://{name}'
