"""The local store: one background Firestore emulator whose data survives restarts.

``tsstore emulator start`` spawns a small detached supervisor process (``python -m
tsstore.local.supervisor serve``) that runs the emulator bound to loopback with a data folder,
writes a state file once the emulator is ready, and on SIGTERM saves every database the
CLI has used into the folder before stopping it. ``stop`` sends that SIGTERM to the
supervisor's own PID; ``status`` reads the state file and checks that the process lives
and the emulator answers.

Where: ``$TSSTORE_HOME`` or ``~/.local/share/tsstore`` (``$XDG_DATA_HOME/tsstore``) holds
``emulator.json`` (the state), ``databases.json`` (databases to keep), ``emulator.log``
and ``emulator-data/``.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsstore.errors import EmulatorError
from tsstore.local.emulator import DEFAULT_PROJECT, start_emulator

STATE_FILE = "emulator.json"
DATABASES_FILE = "databases.json"
DATA_DIR = "emulator-data"
LOG_FILE = "emulator.log"


def home() -> Path:
    """The local store's folder (read from the environment when called)."""
    explicit = os.environ.get("TSSTORE_HOME")
    if explicit:
        return Path(explicit).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "tsstore"


@dataclass(frozen=True)
class LocalStore:
    """A running local store, as its state file describes it."""

    pid: int
    address: str
    data_dir: Path
    project: str

    @property
    def url(self) -> str:
        return f"http://{self.address}/"


def status(folder: Path | None = None) -> LocalStore | None:
    """The running local store, or ``None`` (a stale state file is ignored)."""
    folder = folder or home()
    try:
        state = json.loads((folder / STATE_FILE).read_text())
        store = LocalStore(int(state["pid"]), str(state["address"]), Path(state["data_dir"]), str(state["project"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not _alive(store.pid) or not _answers(store.url):
        return None
    return store


def start(folder: Path | None = None, *, timeout: float = 90.0) -> tuple[LocalStore, bool]:
    """Start the local store in the background unless it runs; returns it and whether it was
    started now."""
    folder = folder or home()
    folder.mkdir(parents=True, exist_ok=True)
    # One starter at a time: two commands starting the store at once must not spawn two.
    with open(folder / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _start_locked(folder, timeout)


def _start_locked(folder: Path, timeout: float) -> tuple[LocalStore, bool]:
    running = status(folder)
    if running is not None:
        return running, False
    (folder / STATE_FILE).unlink(missing_ok=True)
    log = open(folder / LOG_FILE, "ab")
    process = subprocess.Popen(
        [sys.executable, "-m", "tsstore.local.supervisor", "serve", str(folder)],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=log,
        start_new_session=True,  # detached: survives the command that started it
        close_fds=True,
    )
    log.close()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise EmulatorError(f"the local store did not start (exit {process.returncode}); see {folder / LOG_FILE}")
        running = status(folder)
        if running is not None and running.pid == process.pid:
            return running, True
        time.sleep(0.1)
    process.terminate()
    raise EmulatorError(f"the local store did not become ready within {timeout:.0f} s; see {folder / LOG_FILE}")


def stop(folder: Path | None = None, *, timeout: float = 120.0) -> LocalStore | None:
    """Stop the local store (saving its data first); ``None`` if it was not running."""
    folder = folder or home()
    running = status(folder)
    if running is None:
        return None
    os.kill(running.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(running.pid):
        time.sleep(0.1)
    if _alive(running.pid):
        raise EmulatorError(f"the local store (pid {running.pid}) did not stop within {timeout:.0f} s")
    return running


def remember_database(database: str, folder: Path | None = None) -> None:
    """Note that the CLI used ``database``, so a stop saves it."""
    folder = folder or home()
    path = folder / DATABASES_FILE
    with open(folder / "databases.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent commands must not drop each other's entry
        try:
            known = set(json.loads(path.read_text()))
        except (OSError, ValueError):
            known = set()
        if database not in known:
            known.add(database)
            tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(sorted(known)))
            os.replace(tmp, path)


def _serve(folder: Path) -> None:
    data_dir = folder / DATA_DIR
    emulator = start_emulator(data_dir=data_dir, max_heap=os.environ.get("TSSTORE_EMULATOR_HEAP", "4g"))
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    state: dict[str, Any] = {
        "pid": os.getpid(),
        "address": emulator.address,
        "data_dir": str(data_dir),
        "project": DEFAULT_PROJECT,
        "emulator_pid": emulator.pid,
    }
    tmp = folder / (STATE_FILE + ".tmp")
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, folder / STATE_FILE)
    print(f"local store ready at {emulator.address}, data in {data_dir}", flush=True)
    try:
        while not done.wait(1.0):
            if not emulator.is_running():
                print("the emulator stopped unexpectedly", flush=True)
                break
    finally:
        try:
            databases = json.loads((folder / DATABASES_FILE).read_text())
        except (OSError, ValueError):
            databases = []
        # "(default)" always: tools pointed at the store by FIRESTORE_EMULATOR_HOST use it
        # without telling us.
        for database in {"(default)", *databases}:
            emulator.persist(project=DEFAULT_PROJECT, database=database)
        try:
            emulator.stop(timeout=30.0)
        finally:
            try:  # only our own state: a racing second supervisor may have written its own
                if json.loads((folder / STATE_FILE).read_text()).get("pid") == os.getpid():
                    (folder / STATE_FILE).unlink()
            except (OSError, ValueError):
                pass
            print("local store stopped", flush=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (exited, not yet reaped by its parent) is not alive for our purposes.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split(") ", 1)[1][:1] != "Z"
    except OSError:
        return True


def _answers(url: str) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(url, timeout=2) as response:
            return bool(response.read().strip() == b"Ok")
    except OSError:
        return False


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tsstore.local.supervisor")
    parser.add_argument("command", choices=["serve"])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    _serve(args.folder)


if __name__ == "__main__":
    main()
