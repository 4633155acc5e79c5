"""The local store: one background Firestore emulator whose data survives restarts.

``tsstore emulator start`` spawns a small detached supervisor process (``python -m
tsstore.local.supervisor serve``) that runs the emulator bound to loopback with a data folder,
writes a state file once the emulator is ready, and on SIGTERM saves every database the
CLI has used into the folder before stopping it. ``stop`` sends that SIGTERM to the
supervisor's own PID; ``status`` reads the state file and checks that the process lives
and the emulator answers.

Where: ``$TSSTORE_HOME`` or ``~/.local/share/tsstore`` (``$XDG_DATA_HOME/tsstore``) holds
``emulator.json`` (the state), ``databases.json`` (databases to keep), ``emulator.log``
and ``emulator-data/``. One emulator serves one database mode: the local store in Datastore
mode is a second one, with the same files in the folder's ``datastore/``.

The supervisor stops the store when its emulator's process ends, not when the emulator is
slow to answer: on a loaded machine (load 15 on 2 cores) a JVM can be kept from answering
``GET /`` for seconds, and a supervisor that took a 2-second silence for death stopped a
store an ingest was writing to (measured: a JVM paused for 4 s was stopped as "stopped
unexpectedly"). A command that uses the store watches it (:func:`gone`) and ends when it
stops, rather than retrying a refused connection for minutes.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsstore.errors import EmulatorError, RulesError
from tsstore.local.emulator import DEFAULT_PROJECT, Mode, load_rules, start_emulator

STATE_FILE = "emulator.json"
DATABASES_FILE = "databases.json"
DATA_DIR = "emulator-data"
LOG_FILE = "emulator.log"
#: How the store's process ends on a rules file it cannot take (a usage error, as the CLI's 2).
USAGE_EXIT = 2
#: How the supervisor's records read in its log; an error's line starts with ``ERROR: ``, which
#: :func:`_log_since` looks for.
LOG_FORMAT = "%(asctime)s %(levelname)s: %(message)s"
_ERROR = "ERROR: "

log = logging.getLogger(__name__)


def home(mode: Mode = "native") -> Path:
    """The folder of the local store in ``mode`` (read from the environment when called)."""
    explicit = os.environ.get("TSSTORE_HOME")
    if explicit:
        folder = Path(explicit).expanduser()
    else:
        folder = Path(os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")) / "tsstore"
    return folder / "datastore" if mode == "datastore" else folder


@dataclass(frozen=True)
class LocalStore:
    """A running local store, as its state file describes it."""

    pid: int
    address: str
    data_dir: Path
    project: str
    rules: Path | None = None
    rules_warnings: tuple[str, ...] = ()
    #: Where ``rules`` apply: "every project" (given at start) or "project <id>" (loaded later).
    rules_scope: str = ""
    #: The database mode it runs.
    mode: Mode = "native"
    #: The emulator's own process (the JVM), which the supervisor started.
    emulator_pid: int | None = None

    @property
    def url(self) -> str:
        return f"http://{self.address}/"

    @property
    def log(self) -> Path:
        """The supervisor's log (the emulator's start and stop, and why it stopped)."""
        return self.data_dir.parent / LOG_FILE


#: How long :func:`status` waits for a store whose processes live to answer ``GET /``: a loaded
#: machine can keep the JVM from answering for seconds, and a store taken for stopped then
#: would be started a second time on the same data.
ANSWER_WAIT_SECONDS = 15.0


def status(folder: Path | None = None, *, mode: Mode = "native") -> LocalStore | None:
    """The running local store in ``mode``, or ``None`` (a stale state file is ignored)."""
    folder = folder or home(mode)
    store = _recorded(folder)
    if store is None or gone(store, folder):
        return None
    deadline = time.monotonic() + ANSWER_WAIT_SECONDS
    while not _answers(store.url):
        if time.monotonic() > deadline or gone(store, folder):
            return None
        time.sleep(0.2)
    return store


def gone(store: LocalStore, folder: Path | None = None) -> str | None:
    """Why ``store`` has stopped (its state file gone or another's, its supervisor's or its
    emulator's process ended, its port refusing connections), or ``None`` while it runs. A
    few milliseconds, no HTTP call: a store too busy to answer is not gone."""
    folder = folder or home(store.mode)
    recorded = _recorded(folder)
    if recorded is None or recorded.pid != store.pid:
        return f"its state file {folder / STATE_FILE} is gone (the store was stopped)"
    if not _alive(store.pid):
        return f"its supervisor (pid {store.pid}) has ended"
    if store.emulator_pid is not None and not _alive(store.emulator_pid):
        return f"its emulator (pid {store.emulator_pid}) has ended"
    host, _, port = store.address.rpartition(":")
    try:
        socket.create_connection((host, int(port)), timeout=2.0).close()
    except ConnectionRefusedError:
        return f"nothing listens on its port {port} any more"
    except OSError:
        pass  # too slow to accept (a loaded machine): not a sign it is gone
    return None


def _recorded(folder: Path) -> LocalStore | None:
    """The store the state file in ``folder`` describes (``None``: none, or unreadable)."""
    try:
        state = json.loads((folder / STATE_FILE).read_text())
        rules = Path(state["rules"]) if state.get("rules") else None
        warned = tuple(str(w) for w in state.get("rules_warnings", ()))
        store = LocalStore(
            int(state["pid"]),
            str(state["address"]),
            Path(state["data_dir"]),
            str(state["project"]),
            rules,
            warned,
            str(state.get("rules_scope", "")),
            "datastore" if state.get("mode") == "datastore" else "native",
            int(state["emulator_pid"]) if state.get("emulator_pid") is not None else None,
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return store


def start(folder: Path | None = None, *, timeout: float = 90.0, rules: Path | None = None,
          mode: Mode = "native") -> tuple[LocalStore, bool]:  # fmt: skip
    """Start the local store in ``mode`` in the background unless it runs; returns it and
    whether it was started now.

    ``rules`` is a ``firestore.rules`` file the store enforces on web and mobile requests
    (:func:`~tsstore.local.emulator.start_emulator`). Given to a store that already runs, it
    replaces the rules of the store's project (the one the CLI and tools pointed at it by
    ``FIRESTORE_EMULATOR_HOST`` use); other projects keep those the store started with."""
    if mode == "datastore" and rules is not None:
        raise RulesError("security rules are Native mode's: the local store in Datastore mode takes no rules file")
    folder = folder or home(mode)
    folder.mkdir(parents=True, exist_ok=True)
    # One starter at a time: two commands starting the store at once must not spawn two.
    with open(folder / "start.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        return _start_locked(folder, timeout, rules, mode)


def _start_locked(folder: Path, timeout: float, rules: Path | None, mode: Mode) -> tuple[LocalStore, bool]:
    running = status(folder, mode=mode)
    if running is not None:
        if rules is None:
            return running, False
        path = rules.expanduser().resolve()
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise RulesError(f"cannot read the rules file {str(rules)!r}: {exc}") from None
        warned = load_rules(running.url.rstrip("/"), text, project=running.project, name=path.name)
        scope = f"project {running.project}"
        _update_state(folder, rules=str(path), rules_warnings=warned, rules_scope=scope)
        return dataclasses.replace(running, rules=path, rules_warnings=tuple(warned), rules_scope=scope), False
    (folder / STATE_FILE).unlink(missing_ok=True)
    log = open(folder / LOG_FILE, "ab")
    log_start = log.tell()
    extra = ["--rules", str(rules.expanduser().resolve())] if rules is not None else []
    extra += ["--mode", mode]
    process = subprocess.Popen(
        [sys.executable, "-m", "tsstore.local.supervisor", "serve", str(folder), *extra],
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
            said = _log_since(folder / LOG_FILE, log_start)
            if process.returncode == USAGE_EXIT and said:  # the rules file given: the store's own words
                raise RulesError(said)
            raise EmulatorError(
                f"the local store did not start (exit {process.returncode}); see {folder / LOG_FILE}"
                + (f": {said}" if said else "")
            )
        running = status(folder, mode=mode)
        if running is not None and running.pid == process.pid:
            return running, True
        time.sleep(0.1)
    process.terminate()
    raise EmulatorError(f"the local store did not become ready within {timeout:.0f} s; see {folder / LOG_FILE}")


def stop(folder: Path | None = None, *, timeout: float = 120.0, mode: Mode = "native") -> LocalStore | None:
    """Stop the local store in ``mode`` (saving its data first); ``None`` if it was not running."""
    folder = folder or home(mode)
    running = status(folder, mode=mode)
    if running is None:
        return None
    os.kill(running.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(running.pid):
        time.sleep(0.1)
    if _alive(running.pid):
        raise EmulatorError(f"the local store (pid {running.pid}) did not stop within {timeout:.0f} s")
    return running


def remember_database(database: str, folder: Path | None = None, *, mode: Mode = "native") -> None:
    """Note that the CLI used ``database`` of the local store in ``mode``, so a stop saves it."""
    folder = folder or home(mode)
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


def _log_since(path: Path, offset: int) -> str:
    """What the supervisor wrote to its log from ``offset`` on: the error it stopped with."""
    try:
        with open(path, "rb") as log:
            log.seek(offset)
            said = log.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return said[said.rfind(_ERROR) + len(_ERROR) :].strip()[-2000:] if _ERROR in said else ""


def _write_state(folder: Path, state: dict[str, Any]) -> None:
    tmp = folder / (STATE_FILE + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(state, indent=2))
    os.replace(tmp, folder / STATE_FILE)


def _update_state(folder: Path, **changes: Any) -> None:
    state = json.loads((folder / STATE_FILE).read_text())
    _write_state(folder, {**state, **changes})


def _serve(folder: Path, rules: Path | None = None, mode: Mode = "native") -> None:
    data_dir = folder / DATA_DIR
    try:
        emulator = start_emulator(
            data_dir=data_dir, max_heap=os.environ.get("TSSTORE_EMULATOR_HEAP", "4g"), rules=rules, mode=mode
        )
    except EmulatorError as exc:
        log.error("%s", exc)
        raise SystemExit(USAGE_EXIT if isinstance(exc, RulesError) else 1) from None
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    state: dict[str, Any] = {
        "pid": os.getpid(),
        "address": emulator.address,
        "data_dir": str(data_dir),
        "project": DEFAULT_PROJECT,
        "emulator_pid": emulator.pid,
        "rules": str(emulator.rules) if emulator.rules else None,
        "rules_warnings": list(emulator.rules_warnings),
        "rules_scope": "every project",
        "mode": mode,
    }
    _write_state(folder, state)
    log.info("local store ready at %s, data in %s", emulator.address, data_dir)
    try:
        while not done.wait(1.0):
            if not emulator.alive():  # not "answers": a loaded machine may keep it silent for seconds
                log.error("the emulator (pid %d) stopped unexpectedly", emulator.pid)
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
            log.info("local store stopped")


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
    parser.add_argument("--rules", type=Path, default=None)
    parser.add_argument("--mode", choices=["native", "datastore"], default="native")
    args = parser.parse_args(argv)
    # The supervisor is a program of its own: its records (and the library's, from WARNING on)
    # go to its standard output, which is the local store's log.
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    logging.getLogger("tsstore").addHandler(handler)
    logging.getLogger("tsstore").setLevel(logging.WARNING)
    log.setLevel(logging.INFO)
    _serve(args.folder, args.rules, args.mode)


if __name__ == "__main__":
    # ``python -m`` runs a second copy of this module as __main__ (the package imported the first):
    # run the first, whose records are tsstore.local.supervisor's, not __main__'s.
    from tsstore.local.supervisor import main as serve

    serve()
