"""TCP proxies for tests and benchmarks: one that cuts a client's connections to the emulator,
and one that also puts a network's distance between them (a delay each way, with jitter, and a
bandwidth cap), below gRPC, so every call passes unchanged. :class:`ProxyProcess` runs a
distance proxy in a process of its own, as a network is outside the client's: a proxy in the
client's process takes turns with the client's threads for the interpreter (through one 0 ms
away, the writer of bench/distance.py kept 0.87 of its direct rate, measured)."""

from __future__ import annotations

import argparse
import contextlib
import queue
import random
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path


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
            for made in (client, upstream):  # as gRPC's own sockets: no Nagle wait on small writes
                made.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
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
    def cutting(
        self, *, every: float = 1.0, seed: int = 0, answered: threading.Event | None = None
    ) -> Iterator[CuttingProxy]:
        """Cut every ``every`` seconds (each pause drawn from 0.5–1.5 × ``every``) while the
        block runs. With ``answered`` (an event the test sets when a call gets its answer), a
        cut also waits until it is set and clears it: the client gets at least one answer
        between two timed cuts, however slowly a loaded machine runs it. Without that, a
        client that needs more than the pause for its call (a 500-document batch at a load of
        15 on 2 cores) is cut on every attempt and rightly gives up after its fault budget."""
        stop = threading.Event()
        pauses = random.Random(seed)

        def run() -> None:
            while not stop.wait(every * (0.5 + pauses.random())):
                if answered is not None:
                    while not answered.wait(0.1):
                        if stop.is_set():
                            return
                    answered.clear()
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


class ProxyProcess:
    """A :class:`DistanceProxy` in a process of its own (``python -m tests.proxy``), told what
    to do over its standard input: :meth:`cutting` and :meth:`close` as the proxy's own."""

    def __init__(
        self, upstream: str, *, round_trip: float, jitter: float = 0.0, down: float = 0.0, seed: int = 0
    ) -> None:
        command = [sys.executable, "-m", "tests.proxy", upstream, f"--round-trip={round_trip}", f"--jitter={jitter}",
                   f"--down={down}", f"--seed={seed}"]  # fmt: skip
        self.cuts = 0  #: connections cut so far (told when a cutting block ends)
        self._process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                         cwd=Path(__file__).resolve().parents[1])  # fmt: skip
        self.address = self._said()

    def _said(self, line: str | None = None) -> str:
        assert self._process.stdin is not None and self._process.stdout is not None
        if line is not None:
            self._process.stdin.write(line + "\n")
            self._process.stdin.flush()
        answer = self._process.stdout.readline().strip()
        if not answer:
            raise RuntimeError(f"the proxy process ended (exit {self._process.wait()})")
        return answer

    @contextlib.contextmanager
    def cutting(self, *, every: float = 1.0, seed: int = 0) -> Iterator[ProxyProcess]:
        """Cut every ~``every`` seconds while the block runs (:meth:`CuttingProxy.cutting`)."""
        self._said(f"cutting {every} {seed}")
        try:
            yield self
        finally:
            self.cuts = int(self._said("stop").split()[1])

    def close(self) -> None:
        """Stop the proxy and its process."""
        if self._process.poll() is None:
            self._said("close")
            self._process.wait(timeout=30)
        for pipe in (self._process.stdin, self._process.stdout):
            if pipe is not None:
                pipe.close()


def main() -> None:
    """``python -m tests.proxy UPSTREAM``: print the proxy's address, then act on each line of
    input (``cutting EVERY SEED``, ``stop``, ``close``), answering ``ok`` and the cuts so far to each."""
    parser = argparse.ArgumentParser()
    parser.add_argument("upstream")
    for name in ("--round-trip", "--jitter", "--down"):
        parser.add_argument(name, type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    proxy = DistanceProxy(args.upstream, round_trip=args.round_trip, jitter=args.jitter, down=args.down, seed=args.seed)
    print(proxy.address, flush=True)
    cuts: contextlib.ExitStack | None = None
    for line in sys.stdin:
        word, *rest = line.split()
        if word == "cutting":
            cuts = contextlib.ExitStack()
            cuts.enter_context(proxy.cutting(every=float(rest[0]), seed=int(rest[1])))
        elif word == "stop" and cuts is not None:
            cuts.close()
            cuts = None
        print(f"ok {proxy.cuts}", flush=True)
        if word == "close":
            break
    if cuts is not None:
        cuts.close()
    proxy.close()


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


if __name__ == "__main__":
    main()
