"""Serving the console: uvicorn on a socket bound to loopback (another address only when the
caller says so), in this thread until Ctrl-C or in a background thread for tests and
benchmarks."""

from __future__ import annotations

import ipaddress
import secrets
import socket
import threading
import time
from dataclasses import dataclass

import uvicorn

from tsstore.console.app import Console, make_app
from tsstore.errors import UsageError


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
        raise UsageError(f"cannot serve the console on {host}:{port}: {exc.strerror}") from None
    sock.listen(128)
    return sock


@dataclass
class Serving:
    """A console being served: its address (with the token) and how to stop it."""

    url: str
    server: uvicorn.Server
    sock: socket.socket
    thread: threading.Thread | None = None

    def stop(self) -> None:
        self.server.should_exit = True
        if self.thread is not None:
            self.thread.join(timeout=10)
        self.sock.close()


def _server(console: Console, sock: socket.socket) -> tuple[uvicorn.Server, str]:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    config = uvicorn.Config(make_app(console), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
    return uvicorn.Server(config), f"http://{shown}:{port}/?token={console.token}"


def serve_forever(console: Console, sock: socket.socket, *, announce: object = print) -> None:
    """Serve until Ctrl-C (uvicorn stops on SIGINT and SIGTERM)."""
    server, url = _server(console, sock)
    announce(url)  # type: ignore[operator]
    server.run(sockets=[sock])


def serve_in_thread(console: Console, sock: socket.socket) -> Serving:
    """Serve from a background thread; returns once the server takes requests."""
    server, url = _server(console, sock)  # off the main thread, uvicorn leaves the signals alone
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="tsstore-console", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.02)
    return Serving(url, server, sock, thread)
