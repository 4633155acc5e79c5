"""A TCP proxy for tests that must cut a client's connections to the emulator mid-stream."""

from __future__ import annotations

import socket
import threading


class CuttingProxy:
    """Forwards 127.0.0.1:<port> to ``upstream`` ("host:port"); :meth:`cut` closes every open
    connection at once (new ones are accepted again right away)."""

    def __init__(self, upstream: str) -> None:
        host, port = upstream.rsplit(":", 1)
        self._upstream = (host, int(port))
        self._server = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._server.getsockname()[1]}"
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self.cuts = 0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="proxy-accept").start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            upstream = socket.create_connection(self._upstream)
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
        """Close every open connection; returns how many sockets were closed."""
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for s in sockets:
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()
        self.cuts += 1
        return len(sockets)

    def close(self) -> None:
        self._closed = True
        self._server.close()
        self.cut()
