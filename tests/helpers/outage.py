"""A TCP proxy on 127.0.0.1 that can take an endpoint away and bring it back.

:class:`OutageProxy` forwards every connection to a target port (the moto
server of `tests.helpers.s3`).  :meth:`OutageProxy.cut` drops the open
connections and refuses new ones (accepted, then closed at once: what a
client sees of a restarting gateway); :meth:`OutageProxy.restore` forwards
again.  Clients pointed at :attr:`OutageProxy.endpoint` thus see the store
go away and come back, while the server keeps its objects.
"""

from __future__ import annotations

import socket
import threading


class OutageProxy:
    """Forwards 127.0.0.1:`port` to 127.0.0.1:`target_port`; see the module."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind(('127.0.0.1', 0))
        self._listener.listen(64)
        self.port = self._listener.getsockname()[1]
        self._down = threading.Event()
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self.refused = 0   # connections refused while cut
        self._thread = threading.Thread(target=self._accept, daemon=True,
                                        name='outage-proxy')
        self._thread.start()

    @property
    def endpoint(self) -> str:
        return f'http://127.0.0.1:{self.port}'

    def cut(self) -> None:
        """Take the endpoint away: drop every open connection, refuse new ones."""
        self._down.set()
        with self._lock:
            sockets, self._open = list(self._open), set()
        for s in sockets:
            _close(s)

    def restore(self) -> None:
        """Bring the endpoint back."""
        self._down.clear()

    def close(self) -> None:
        self._closed.set()
        self.cut()
        _close(self._listener)

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._down.is_set():
                self.refused += 1
                _close(client)
                continue
            try:
                upstream = socket.create_connection(('127.0.0.1', self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data or self._down.is_set():
                    break
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                with self._lock:
                    self._open.discard(s)
                _close(s)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        s.close()
    except OSError:
        pass
