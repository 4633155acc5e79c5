"""Serving the console: uvicorn on a socket bound to loopback (another address only when the
caller says so), in this thread until Ctrl-C or SIGTERM, or in a background thread for tests
and benchmarks."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import re
import secrets
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

import uvicorn

from tsstore.console.app import Console, make_app
from tsstore.errors import TsstoreError, UsageError


def new_token() -> str:
    """A random token for the console's address (as notebook servers make one)."""
    return secrets.token_urlsafe(24)


def bind(host: str, port: int, *, allow_remote: bool) -> socket.socket:
    """A listening socket on ``host:port`` (``port`` 0: a free one); anything but a loopback
    address is refused unless ``allow_remote``."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
        with_port = re.fullmatch(r"\[?([^\[\]]*?)\]?:(\d+)", host)
        if with_port:
            raise UsageError(f"--host {host}: give the address alone and the port with --port (--host "
                             f"{with_port[1]} --port {with_port[2]})") from None  # fmt: skip
    if not loopback and not allow_remote:
        raise UsageError(
            f"--host {host}: the console binds to 127.0.0.1 only, since whoever reaches it with the token reads the "
            "database; give --allow-remote to serve on another address"
        )
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:  # a right address, taken now: a runtime failure
            raise TsstoreError(f"cannot serve the console on {host}:{port}: {exc.strerror}; stop what serves "
                               "there, or give another --port (0: any free one)") from None  # fmt: skip
        raise UsageError(f"cannot serve the console on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    return sock


@dataclass
class Serving:
    """A console being served: its address (with the token) and how to stop it."""

    url: str
    server: _Server
    sock: socket.socket
    thread: threading.Thread | None = None

    def stop(self) -> None:
        self.server.stopping.set()
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=10)
        self.sock.close()


class _Server(uvicorn.Server):
    """uvicorn's server, which tells the console's live streams to end as soon as it is told to
    stop (else it would cancel them mid-stream after its grace period, and log their
    tracebacks), and keeps the signal that stopped it for the caller to end with."""

    def __init__(self, config: uvicorn.Config, stopping: threading.Event) -> None:
        super().__init__(config)
        self.stopping = stopping
        self.signals: list[int] = []

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.signals.append(sig)
        self.stopping.set()
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """SIGINT and SIGTERM stop the server while it runs (in the main thread only, where
        Python handles signals); unlike uvicorn's own, the signal is not raised again after."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        before = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)


def _server(console: Console, sock: socket.socket, named: str | None) -> tuple[_Server, str]:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    app = make_app(console, hosts=(host, named or host), port=port)
    config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    return _Server(config, console.stopping), f"http://{shown}:{port}/?token={console.token}"


def serve_forever(console: Console, sock: socket.socket, *, announce: object = print,
                  host: str | None = None) -> int | None:  # fmt: skip
    """Serve until SIGINT (Ctrl-C) or SIGTERM; returns the signal that stopped it (``None``:
    stopped otherwise). ``host``: the name ``sock`` was bound to, which the page may be
    reached by besides loopback's names and the socket's address."""
    server, url = _server(console, sock, host)
    announce(url)  # type: ignore[operator]
    server.run(sockets=[sock])
    return server.signals[0] if server.signals else None


def serve_in_thread(console: Console, sock: socket.socket, *, host: str | None = None) -> Serving:
    """Serve from a background thread; returns once the server takes requests."""
    server, url = _server(console, sock, host)  # off the main thread, uvicorn leaves the signals alone
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="tsstore-console", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    return Serving(url, server, sock, thread)
