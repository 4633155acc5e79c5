"""A TCP proxy for tests and benchmarks that must cut a client's connections to the emulator."""

from __future__ import annotations

import contextlib
import random
import socket
import threading
import time
from collections.abc import Iterator


class CuttingProxy:
    """Forwards 127.0.0.1:<port> to ``upstream`` ("host:port"). :meth:`cut` closes every open
    connection at once; for ``down`` seconds after a cut, new connections are closed as soon
    as they are accepted (the network is down), then accepted again. :meth:`cutting` cuts
    every ~``every`` seconds while its block runs."""

    def __init__(self, upstream: str, *, down: float = 0.0) -> None:
        self._upstream = _host_port(upstream)
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._server.getsockname()[1]}"
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._down = down
        self._down_until = 0.0
        self.cuts = 0
        self.refused = 0  # connections closed at once while down
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if self._closed:
                _close(client)
                return
            if time.monotonic() < self._down_until:
                self.refused += 1
                _close(client)
                continue
            try:
                upstream = socket.create_connection(self._upstream)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True, name="proxy-pump").start()

    @staticmethod
    def _pump(source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        for s in (source, target):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self) -> int:
        """Close every open connection (and refuse new ones for ``down`` seconds); returns
        how many sockets were closed."""
        self._down_until = time.monotonic() + self._down
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            _close(s)
        self.cuts += 1
        return len(sockets)

    @contextlib.contextmanager
    def cutting(self, *, every: float = 1.0, seed: int = 0) -> Iterator[CuttingProxy]:
        """Cut every ``every`` seconds (each pause drawn from 0.5–1.5 × ``every``) while the
        block runs."""
        stop = threading.Event()
        pauses = random.Random(seed)

        def run() -> None:
            while not stop.wait(every * (0.5 + pauses.random())):
                self.cut()

        cutter = threading.Thread(target=run, daemon=True, name="proxy-cutter")
        cutter.start()
        try:
            yield self
        finally:
            stop.set()
            cutter.join()
            self._down_until = 0.0

    def close(self) -> None:
        """Stop for good: nothing gets through afterwards."""
        self._closed = True
        # A thread blocked in accept() keeps the socket listening until that call returns: one
        # connection of our own wakes it, and it then sees that the proxy is closed.
        with contextlib.suppress(OSError), socket.create_connection(_host_port(self.address), timeout=1.0):
            pass
        self._server.close()
        self.cut()


def _host_port(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
