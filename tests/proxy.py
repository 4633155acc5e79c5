"""TCP proxies for tests and benchmarks: one that cuts a client's connections to the emulator,
and one that also puts a network's distance between them (a delay each way, with jitter, and a
bandwidth cap), below gRPC, so every call passes unchanged."""

from __future__ import annotations

import contextlib
import queue
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

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                target.sendall(data)
        except OSError:
            pass
        _shut(source, target)

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


class DistanceProxy(CuttingProxy):
    """A :class:`CuttingProxy` ``round_trip`` seconds away: each direction holds what it
    carries for half of it (plus or minus ``jitter`` seconds, never reordering bytes) and, with
    ``bandwidth`` (bytes a second, each way), for as long as sending it takes. ``round_trip``
    and ``jitter`` may be changed while connections are open."""

    def __init__(
        self, upstream: str, *, round_trip: float, jitter: float = 0.0, bandwidth: float | None = None,
        down: float = 0.0, seed: int = 0,
    ) -> None:  # fmt: skip
        self.round_trip, self.jitter, self.bandwidth = round_trip, jitter, bandwidth
        self._jitters = random.Random(seed)
        super().__init__(upstream, down=down)

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        held: queue.Queue[tuple[float, bytes] | None] = queue.Queue()
        threading.Thread(target=self._deliver, args=(held, target), daemon=True, name="proxy-deliver").start()
        due = 0.0  # when the last bytes leave: later bytes never leave before them
        try:
            while data := source.recv(65536):
                now = time.monotonic()
                spread = self._jitters.uniform(-self.jitter, self.jitter) if self.jitter else 0.0
                sending = len(data) / self.bandwidth if self.bandwidth else 0.0
                due = max(due + sending, now + max(0.0, self.round_trip / 2 + spread) + sending)
                held.put((due, data))
        except OSError:
            pass
        held.put(None)

    @staticmethod
    def _deliver(held: queue.Queue[tuple[float, bytes] | None], target: socket.socket) -> None:
        try:
            while (item := held.get()) is not None:
                due, data = item
                if (wait := due - time.monotonic()) > 0:
                    time.sleep(wait)
                target.sendall(data)
        except OSError:
            pass
        _shut(target)


def _shut(*sockets: socket.socket) -> None:
    for s in sockets:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _host_port(address: str) -> tuple[str, int]:
    host, port = address.rsplit(":", 1)
    return host, int(port)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
