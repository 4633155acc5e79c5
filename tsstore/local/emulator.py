"""Start, reach, reset and stop a local Cloud Firestore emulator owned by this process.

Why this module exists rather than ``gcloud emulators firestore start`` in a shell:

* gcloud runs python -> bash -> java, and SIGTERM to the gcloud PID leaves the JVM serving,
  so a killed test run leaves orphan emulators behind. We start the JVM ourselves, in its own
  process group (so one ``killpg`` reaches everything it spawns) and with
  ``PR_SET_PDEATHSIG`` so the kernel sends it SIGTERM when we die, even by SIGKILL.
* "Something answers on the port" is not "our emulator is up": on a taken port our JVM exits
  with ``java.net.BindException`` while the *other* emulator happily answers ``Ok``. Ready
  therefore means: the log says ``Dev App Server is now running.``, ``GET /`` answers ``Ok``
  and our own process is still alive.
* Running the jar directly starts in ~1 s instead of ~1.8 s, and ~0.5 s with an AppCDS
  archive, which matters for a test suite and for a CLI that starts one per command.

Nothing here reads the environment at import time; everything is looked up when called.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import functools
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, get_args

from tsstore.errors import EmulatorError, RulesError

if TYPE_CHECKING:  # importing google.cloud.firestore costs ~0.5 s; only client() needs it
    from google.cloud import firestore

__all__ = ["Emulator", "EmulatorAt", "find_emulator_command", "free_port", "load_rules", "start_emulator"]

JAR_ENV = "TSSTORE_EMULATOR_JAR"
"""Environment variable naming the emulator jar explicitly (read at call time only)."""

MAIN_CLASS = "com.google.cloud.datastore.emulator.firestore.CloudFirestore"
JAR_RELATIVE = Path("platform/cloud-firestore-emulator/cloud-firestore-emulator.jar")
WELL_KNOWN_SDK_ROOTS = (Path("/usr/lib/google-cloud-sdk"), Path("/usr/share/google-cloud-sdk"))

# -Duser.language=en: log lines we match on (and show in errors) are English whatever the locale.
# -Xmx2g: tests write tens of thousands of documents; the emulator keeps everything on the heap
# (~0.6-0.9 GiB at 20 000 docs) and never gives memory back after a reset. With a small heap
# the client only sees ``Unknown: None`` when the JVM runs out.
# The Tier4 thresholds: the optimizing compiler (C2) only for code 30 times hotter than its
# defaults ask (15 000 invocations, 140 000 loop iterations), so it compiles the emulator's
# query scans and little else; the JVM's defaults spend more CPU compiling than the
# compiled code saves over minutes of use (see start_emulator for the figures).
# No -XX:TieredStopAtLevel=1 (no C2 at all): it makes heavy queries ~2x slower once warm.
# -XX:+UseSerialGC: one collector thread instead of G1's concurrent ones, which on a small
# machine spend CPU the emulator's answers need (see start_emulator for the figures).
JVM_FLAGS = (
    "-Duser.language=en",
    "-Xmx2g",
    "-XX:+UseSerialGC",
    "-XX:Tier4InvocationThreshold=150000",
    "-XX:Tier4MinInvocationThreshold=20000",
    "-XX:Tier4CompileThreshold=450000",
    "-XX:Tier4BackEdgeThreshold=1200000",
)

READY_LINE = "Dev App Server is now running."
#: The database modes an emulator runs (one per emulator), and the jar's flag for the second.
Mode = Literal["native", "datastore"]
DATASTORE_MODE_FLAG = "--database-mode=datastore-mode"
BIND_MARKERS = ("BindException", "Address already in use")
DEFAULT_PROJECT = "tsstore-local"
DEFAULT_DATABASE = "(default)"
LOG_TAIL_LINES = 20
BIND_RETRIES = 3
EXPORT_NAME = "tsstore"
"""Name of each export under ``data_dir/<project>/<database>/`` (see :func:`start_emulator`)."""

INSTALL_HINT = (
    "install it with `apt-get install google-cloud-cli-firestore-emulator openjdk-17-jre-headless` "
    "(Debian/Ubuntu with Google's apt repository) or `gcloud components install cloud-firestore-emulator` "
    f"(plus a Java 17+ runtime), or point {JAR_ENV} at cloud-firestore-emulator.jar"
)

_PR_SET_PDEATHSIG = 1

# Serialises our temporary changes of FIRESTORE_EMULATOR_HOST in Emulator.client().
_ENV_LOCK = threading.Lock()

# Every emulator still running, so interpreter exit stops them cleanly (PDEATHSIG is the
# backstop for abnormal exits; a clean stop also finishes a CDS archive and saves data_dir).
# Strong references on purpose: an emulator nobody holds any more still runs and must stop.
_LIVE: set[Emulator] = set()


# --------------------------------------------------------------------------- locating


@dataclass(frozen=True)
class _Located:
    """What find_emulator_command found: the jar and java, or only the gcloud wrapper."""

    kind: Literal["java", "gcloud"]
    java: str | None
    jar: Path | None
    gcloud: str | None

    def base_command(self) -> list[str]:
        if self.kind == "java":
            assert self.java is not None and self.jar is not None
            return [self.java, *JVM_FLAGS, "-cp", str(self.jar), MAIN_CLASS, "start"]
        assert self.gcloud is not None
        return [self.gcloud, "emulators", "firestore", "start"]


def _find_java() -> str | None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return shutil.which("java")


@functools.lru_cache(maxsize=8)
def _gcloud_sdk_root(gcloud: str) -> Path | None:
    """Ask gcloud where its SDK lives; cached because it costs ~1.6 s (gcloud is python)."""
    try:
        out = subprocess.run(
            [gcloud, "info", "--format=value(installation.sdk_root)"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    root = out.stdout.strip()
    return Path(root) if out.returncode == 0 and root else None


def _candidate_jars(gcloud: str | None) -> Iterator[Path]:
    explicit = os.environ.get(JAR_ENV)
    if explicit:
        yield Path(explicit).expanduser()
    if gcloud:
        # <sdk_root>/bin/gcloud is the usual layout: this answers what `gcloud info` would,
        # without its 1.6 s. `gcloud info` is still asked below if the guess has no jar.
        yield Path(os.path.realpath(gcloud)).parent.parent / JAR_RELATIVE
        root = None
        if not any((r / JAR_RELATIVE).is_file() for r in WELL_KNOWN_SDK_ROOTS):
            root = _gcloud_sdk_root(gcloud)
        if root is not None:
            yield root / JAR_RELATIVE
    for root in WELL_KNOWN_SDK_ROOTS:
        yield root / JAR_RELATIVE


def _locate() -> _Located:
    gcloud = shutil.which("gcloud")
    explicit = os.environ.get(JAR_ENV)
    if explicit and not Path(explicit).expanduser().is_file():
        # An explicit setting that points nowhere is a mistake worth reporting, not skipping.
        raise EmulatorError(f"{JAR_ENV}={explicit!r} is not a file; unset it or {INSTALL_HINT}")
    jar = next((p for p in _candidate_jars(gcloud) if p.is_file()), None)
    if jar is not None:
        java = _find_java()
        if java is None:
            raise EmulatorError(
                f"found the Firestore emulator jar at {jar} but no `java` on PATH (nor in $JAVA_HOME/bin); "
                "install a Java 17+ runtime, e.g. `apt-get install openjdk-17-jre-headless`"
            )
        return _Located("java", java, jar, gcloud)
    if gcloud is not None:
        # Last resort only. Running the jar ourselves is preferred because the gcloud wrapper
        # (python -> bash -> java) leaves the JVM running when it gets SIGTERM, and it is
        # ~0.7 s slower to start. We still put it in its own process group and kill the group.
        return _Located("gcloud", None, None, gcloud)
    raise EmulatorError(f"the Cloud Firestore emulator was not found; {INSTALL_HINT}")


def find_emulator_command() -> list[str]:
    """The command that starts the emulator, without host/port arguments.

    Looks, in order, at ``$TSSTORE_EMULATOR_JAR``, the SDK that the ``gcloud`` on ``PATH``
    belongs to (``gcloud info``'s ``installation.sdk_root``), ``/usr/lib/google-cloud-sdk`` and
    ``/usr/share/google-cloud-sdk`` for ``platform/cloud-firestore-emulator/cloud-firestore-emulator.jar``,
    and runs it with ``java`` (``$JAVA_HOME/bin/java`` or ``PATH``). Only when no jar exists
    but ``gcloud`` does, it falls back to ``gcloud emulators firestore start``.

    Raises :class:`EmulatorError` naming what to install when nothing is found, when the jar
    exists but no java does, or when ``$TSSTORE_EMULATOR_JAR`` names a missing file.
    """
    return _locate().base_command()


def datastore_client(
    address: str, *, project: str = DEFAULT_PROJECT, database: str = DEFAULT_DATABASE, namespace: str | None = None
) -> Any:
    """A ``google.cloud.datastore.Client`` on the Datastore-mode emulator at ``address``
    (:meth:`EmulatorAt.datastore_client`); ``(default)`` is the default database."""
    from google.auth.credentials import AnonymousCredentials

    try:
        from google.api_core.client_options import ClientOptions
        from google.cloud import datastore
    except ImportError as exc:
        raise EmulatorError(
            "Datastore mode needs google-cloud-datastore: pip install 'tsstore[datastore]'"
        ) from exc
    named = {"project": project, "database": "" if database == DEFAULT_DATABASE else database, "namespace": namespace}
    # With DATASTORE_EMULATOR_HOST set (a local Beam run sets it for its connector), the
    # client takes that address and refuses explicit credentials.
    env = os.environ.get("DATASTORE_EMULATOR_HOST")
    if env is not None and env != address:
        raise EmulatorError(f"DATASTORE_EMULATOR_HOST is {env!r}, not the emulator asked for ({address}): unset it")
    client: Any = (
        datastore.Client(**named)  # type: ignore[no-untyped-call]
        if env is not None
        else datastore.Client(**named, credentials=AnonymousCredentials(),  # type: ignore[no-untyped-call]
                              client_options=ClientOptions(api_endpoint=f"http://{address}"))
    )  # fmt: skip
    return client


def emulator_client(
    address: str,
    *,
    project: str = DEFAULT_PROJECT,
    database: str = DEFAULT_DATABASE,
    asynchronous: bool = False,
    channel_options: Sequence[tuple[str, Any]] = (),
) -> Any:
    """A client for the emulator at ``address`` (a ``firestore.AsyncClient`` if
    ``asynchronous``; see :meth:`Emulator.client` for why the environment variable is set
    only around the constructor); ``channel_options``: more gRPC channel arguments (as
    :func:`tsstore.wire.quick_reconnects` takes them)."""
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import firestore

    from tsstore.wire import quick_reconnects  # (with the client: not for starting an emulator)

    kind = firestore.AsyncClient if asynchronous else firestore.Client
    with _ENV_LOCK:
        previous = os.environ.get("FIRESTORE_EMULATOR_HOST")
        os.environ["FIRESTORE_EMULATOR_HOST"] = address
        try:
            client = kind(project=project, database=database, credentials=AnonymousCredentials())
        finally:
            if previous is None:
                os.environ.pop("FIRESTORE_EMULATOR_HOST", None)
            else:
                os.environ["FIRESTORE_EMULATOR_HOST"] = previous
    return quick_reconnects(client, options=channel_options)


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free on ``host`` a moment ago.

    Another process can take it before the emulator binds it; :func:`start_emulator` detects
    that (our JVM exits with ``BindException``) and retries with a new port.
    """
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


# --------------------------------------------------------------------------- CDS archive


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tsstore"


def _cds_archive(java: str, jar: Path) -> Path | None:
    """Where the AppCDS archive for this java + jar lives, or None when no cache dir is usable.

    The name carries a hash of both binaries' identities so an upgraded JDK or emulator gets a
    new archive instead of a stale one (a stale one would only warn and be ignored, but would
    also silently lose the speed-up forever).
    """
    try:
        java_real = Path(os.path.realpath(java))
        parts = []
        for path in (java_real, jar, java_real.parent.parent / "lib" / "modules"):
            with contextlib.suppress(OSError):
                st = path.stat()
                parts.append(f"{path}:{st.st_size}:{st.st_mtime_ns}")
        key = hashlib.sha256("|".join([*parts, *JVM_FLAGS]).encode()).hexdigest()[:16]
        directory = _cache_dir()
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK):
            return None
        # The JVM writes a temporary dump only in the second or two while it exits, so one older
        # than ten minutes was orphaned (its emulator was killed or its parent died first).
        for orphan in directory.glob("firestore-emulator-*.tmp"):
            with contextlib.suppress(OSError):
                if time.time() - orphan.stat().st_mtime > 600:
                    orphan.unlink()
        return directory / f"firestore-emulator-{key}.jsa"
    except OSError:
        return None


# --------------------------------------------------------------------------- process plumbing


def _die_with_parent_hook() -> Callable[[], None]:
    """A preexec_fn that makes the child get SIGTERM when its parent goes away.

    Built in the parent: the child, between fork and exec, should do as little as possible
    (``ctypes.util.find_library`` would even spawn processes), so ``prctl`` is looked up here,
    from the symbols already loaded (``CDLL(None)``), and the child only calls it.
    PR_SET_PDEATHSIG fires when the *thread* that forked exits, so start emulators from a
    thread that lives as long as you need them (the main thread, a pytest fixture: fine).
    """
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent = os.getpid()

    def hook() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return hook


_NO_PROXY_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http(method: str, url: str, *, body: object | None = None, timeout: float = 5.0) -> tuple[int, str]:
    """One HTTP call to the emulator, never through a proxy from the environment.

    JSON bodies need ``Content-Type: application/json``: without it the emulator's
    ``:export``/``:import`` routes answer 404.
    """
    data = None if body is None else json.dumps(body).encode()
    headers = {} if body is None else {"Content-Type": "application/json"}
    request = urllib.request.Request(url, data=data, method=method, headers=headers)
    try:
        with _NO_PROXY_OPENER.open(request, timeout=timeout) as response:
            return int(response.status), response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode("utf-8", "replace")


def load_rules(url: str, source: str, *, project: str = DEFAULT_PROJECT, name: str = "firestore.rules") -> list[str]:
    """Replace the security rules of ``project`` on the emulator at ``url`` with ``source``
    (``PUT /emulator/v1/projects/P:securityRules``), which then applies them to every
    request of that project that is not the server's. Returns the compiler's warnings, each
    ``name:line:column: text``; raises :class:`EmulatorError` listing its errors, and then the
    project keeps the rules it had."""
    quoted = urllib.parse.quote(project, safe="")
    body = {"rules": {"files": [{"name": name, "content": source}]}}
    try:
        status, text = _http("PUT", f"{url}/emulator/v1/projects/{quoted}:securityRules", body=body, timeout=30.0)
    except OSError as exc:
        raise EmulatorError(f"could not load rules {name} into the emulator at {url}: {exc}") from exc
    try:
        answer = json.loads(text) if text.strip() else {}
    except ValueError:
        answer = {}
    issues = [_rules_issue(name, issue) for issue in answer.get("issues", [])]
    errors = [text for severity, text in issues if severity != "WARNING"]
    if status != 200 or errors:
        said = answer.get("error", {}).get("message") if isinstance(answer.get("error"), dict) else None
        # A file that does not parse: "Error compiling rules:\nL1:1 mismatched input ..."
        found = re.findall(r"^L(\d+):(\d+) (.*)$", str(said or ""), flags=re.M)
        detail = "\n".join([*errors, *(f"{name}:{line}:{column}: {what}" for line, column, what in found)])
        detail = detail or f"HTTP {status}: {text.strip()[:500]}"
        raise RulesError(f"the emulator refused the rules in {name}:\n{detail}")
    return [text for severity, text in issues if severity == "WARNING"]


def _rules_issue(name: str, issue: dict[str, Any]) -> tuple[str, str]:
    where = issue.get("sourcePosition", {})
    return str(issue.get("severity", "ERROR")), f"{name}:{where.get('line', '?')}:{where.get('column', '?')}: " + str(
        issue.get("description", issue)
    )


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _key_lines(text: str, limit: int = 3) -> str:
    """The first few exception/error lines: a stack trace's tail alone does not say what broke."""
    found: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("at ") or stripped in found:
            continue
        if any(word in stripped for word in ("Exception", "Error", "SEVERE")):
            found.append(stripped)
            if len(found) == limit:
                break
    return "\n".join(found)


def _read_log(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


# --------------------------------------------------------------------------- the emulator


class EmulatorAt:
    """A Firestore emulator at ``host:port``, whoever started it: clients on it, its rules,
    its reset. :class:`Emulator` is one this process started and owns; an ``EmulatorAt`` is
    how another process reaches it (the pytest plugin's workers, for one the run shares).
    """

    def __init__(self, host: str, port: int, mode: Mode = "native") -> None:
        self.host = host
        self.port = port
        #: The database mode it runs (``"native"`` or ``"datastore"``).
        self.mode: Mode = mode

    @classmethod
    def of(cls, address: str, *, mode: Mode = "native") -> EmulatorAt:
        """The emulator at ``address`` (``host:port``, as ``FIRESTORE_EMULATOR_HOST`` takes it),
        running ``mode``."""
        host, _, port = address.rpartition(":")
        return cls(host.strip("[]"), int(port), mode)

    @property
    def address(self) -> str:
        """``host:port``, the value ``FIRESTORE_EMULATOR_HOST`` takes for this emulator."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        """Base URL of the emulator's HTTP endpoints (reset, import/export, ``/``)."""
        return f"http://{self.address}"

    def __repr__(self) -> str:
        return f"<EmulatorAt {self.address}>"

    def client(self, *, project: str = DEFAULT_PROJECT, database: str = DEFAULT_DATABASE) -> firestore.Client:
        """A new ``google.cloud.firestore.Client`` talking to this emulator.

        google-cloud-firestore has no constructor argument for an emulator: ``BaseClient.__init__``
        reads ``FIRESTORE_EMULATOR_HOST`` once (base_client.py, ``self._emulator_host = os.getenv(...)``)
        and later builds an insecure channel to that address. Setting the variable for the whole
        process would send every other client there too, and would be wrong with two emulators.
        So we set it only around the constructor, under a module lock so our own concurrent
        calls cannot interleave, and restore the previous value (or absence) afterwards.
        Credentials are anonymous: the emulator ignores them and this avoids any ADC lookup.
        (Code in another thread that reads the variable at that very instant could see our
        value; the lock only orders calls of this method.)

        Make a new client after an emulator restart: an old one took ~49 s to reconnect.
        The caller closes it (``client.close()``).
        """
        client: firestore.Client = emulator_client(self.address, project=project, database=database)
        return client

    def datastore_client(
        self, *, project: str = DEFAULT_PROJECT, database: str = DEFAULT_DATABASE, namespace: str | None = None
    ) -> Any:
        """A new ``google.cloud.datastore.Client`` on this emulator, which must run in Datastore
        mode (``start_emulator(mode="datastore")``): anonymous credentials and the emulator's
        address as the API endpoint (an ``http://`` endpoint makes the client use a plain
        channel), so ``DATASTORE_EMULATOR_HOST`` is neither read nor set. Needs
        ``pip install 'tsstore[datastore]'``."""
        return datastore_client(self.address, project=project, database=database, namespace=namespace)

    def async_client(
        self, *, project: str = DEFAULT_PROJECT, database: str = DEFAULT_DATABASE
    ) -> firestore.AsyncClient:
        """A new ``google.cloud.firestore.AsyncClient`` talking to this emulator (as :meth:`client`)."""
        client: firestore.AsyncClient = emulator_client(
            self.address, project=project, database=database, asynchronous=True
        )
        return client

    def reset(self, *, project: str | None = None, database: str = DEFAULT_DATABASE) -> None:
        """Delete documents: all of them (``project=None``), or one project's one database.

        ``POST /reset`` wipes every project and database in ~5 ms. The per-database form,
        ``DELETE /emulator/v1/projects/{project}/databases/{database}/documents``, takes
        7-25 ms when small and ~3 s at 100 000 documents. Neither gives the JVM's memory back.
        """
        if project is None:
            method, url = "POST", f"{self.url}/reset"
        else:
            quoted_project = urllib.parse.quote(project, safe="")
            quoted_database = urllib.parse.quote(database, safe="()")
            path = f"/emulator/v1/projects/{quoted_project}/databases/{quoted_database}/documents"
            method, url = "DELETE", self.url + path
        try:
            status, text = _http(method, url, timeout=120.0)
        except OSError as exc:
            raise EmulatorError(f"reset of the emulator at {self.address} failed: {exc}") from exc
        if status != 200:
            raise EmulatorError(
                f"reset of the emulator at {self.address} failed: {method} {url} -> {status} {text.strip()}"
            )

    def load_rules(self, source: str, *, project: str = DEFAULT_PROJECT, name: str = "firestore.rules") -> list[str]:
        """Apply the security rules ``source`` to the web and mobile requests of ``project``
        (see :func:`load_rules`); the server client is never subject to them."""
        return load_rules(self.url, source, project=project, name=name)

    def served_mode(self) -> Mode | None:
        """The database mode the emulator runs (``None``: it does not answer), asked over its
        REST API by reading a document that does not exist: Native mode answers 404, Datastore
        mode refuses the call as another mode's."""
        from tsstore.faults import refusing_mode  # not at import: it imports the Google API core

        url = f"{self.url}/v1/projects/{DEFAULT_PROJECT}/databases/(default)/documents/tsstore/mode"
        try:
            _, text = _http("GET", url, timeout=10.0)
        except OSError:
            return None
        return refusing_mode(text) or "native"

    def answers(self) -> bool:
        """The emulator answers ``GET /`` with ``Ok``."""
        try:
            status, text = _http("GET", self.url + "/", timeout=2.0)
        except OSError:
            return False
        return status == 200 and text.strip() == "Ok"


class Emulator(EmulatorAt):
    """A running Firestore emulator that this process started and owns.

    Made by :func:`start_emulator`; use it as a context manager or call :meth:`stop`.
    """

    def __init__(
        self,
        *,
        process: subprocess.Popen[bytes],
        host: str,
        port: int,
        command: list[str],
        log_path: Path,
        data_dir: Path | None = None,
        cds_pending: tuple[Path, Path] | None = None,
        wrapper: bool = False,
    ) -> None:
        super().__init__(host, port)
        self.command = command
        self._process = process
        self._log_path = log_path
        self._data_dir = data_dir
        self._cds_pending = cds_pending  # (temporary file the JVM dumps into, final archive path)
        self._persist: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self._stopped = False
        self._final_tail = ""
        self._wrapper = wrapper  # gcloud fallback: the JVM is a grandchild in our group
        self._rules: Path | None = None
        #: What the rules compiler warned of in the file given to :func:`start_emulator`.
        self.rules_warnings: tuple[str, ...] = ()
        _LIVE.add(self)

    # -- identity

    @property
    def pid(self) -> int:
        """PID of the process we started (the JVM itself, unless the gcloud fallback is used)."""
        return self._process.pid

    @property
    def log_path(self) -> Path:
        """The file the emulator's stdout and stderr go to (removed by a clean :meth:`stop`)."""
        return self._log_path

    @property
    def data_dir(self) -> Path | None:
        """Where databases are saved on :meth:`stop` and restored at start, if anywhere."""
        return self._data_dir

    @property
    def rules(self) -> Path | None:
        """The rules file the emulator enforces on every project, if one was given."""
        return self._rules

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of the emulator's output (kept in memory after stop)."""
        if self._stopped:
            return _tail(self._final_tail, lines)
        return _tail(_read_log(self._log_path), lines)

    def __repr__(self) -> str:
        state = "running" if self._process.poll() is None else f"exited rc={self._process.returncode}"
        return f"<Emulator {self.address} pid={self.pid} {state}>"

    # -- use

    def client(self, *, project: str = DEFAULT_PROJECT, database: str = DEFAULT_DATABASE) -> firestore.Client:
        """A new client on this emulator (:meth:`EmulatorAt.client`); with a ``data_dir``, its
        database is saved on :meth:`stop`."""
        client = super().client(project=project, database=database)
        if self._data_dir is not None:
            self.persist(project=project, database=database)
        return client

    def async_client(
        self, *, project: str = DEFAULT_PROJECT, database: str = DEFAULT_DATABASE
    ) -> firestore.AsyncClient:
        """A new asyncio client on this emulator (as :meth:`client`)."""
        client = super().async_client(project=project, database=database)
        if self._data_dir is not None:
            self.persist(project=project, database=database)
        return client

    def datastore_client(
        self, *, project: str = DEFAULT_PROJECT, database: str = DEFAULT_DATABASE, namespace: str | None = None
    ) -> Any:
        """A new ``datastore.Client`` on this emulator in Datastore mode (as :meth:`client`)."""
        client = super().datastore_client(project=project, database=database, namespace=namespace)
        if self._data_dir is not None:
            self.persist(project=project, database=database)
        return client

    def persist(self, *, project: str, database: str = DEFAULT_DATABASE) -> None:
        """Also save this database to ``data_dir`` on :meth:`stop`.

        Databases that :meth:`client` handed out a client for, and those restored at start,
        are saved already; call this for ones only other processes write to (the emulator
        cannot list its databases). Without ``data_dir`` this does nothing.
        """
        with self._lock:
            self._persist.add((project, database))

    def is_running(self) -> bool:
        """Our process is alive and the emulator answers ``GET /`` with ``Ok``."""
        return self.alive() and self.answers()

    def alive(self) -> bool:
        """Our process has not ended (whether or not it answers now: a loaded machine can keep
        it from answering for seconds)."""
        return self._process.poll() is None

    # -- data_dir

    def _database_dir(self, project: str, database: str) -> Path:
        assert self._data_dir is not None
        return self._data_dir / project / database

    def _database_name(self, project: str, database: str) -> str:
        """The database's name in the export and import routes: in Datastore mode the default
        database's id is empty (the emulator refuses ``(default)`` there)."""
        named = "" if self.mode == "datastore" and database == DEFAULT_DATABASE else database
        return f"projects/{project}/databases/{named}"

    def _restore(self, *, deadline: float) -> None:
        """Import every export found under ``data_dir/<project>/<database>/``."""
        assert self._data_dir is not None
        for meta in sorted(self._data_dir.glob(f"*/*/{EXPORT_NAME}/{EXPORT_NAME}.overall_export_metadata")):
            database = meta.parent.parent.name
            project = meta.parent.parent.parent.name
            if "." in database or "." in project:  # leftovers of an interrupted save
                continue
            body = {"database": self._database_name(project, database), "export_directory": str(meta)}
            url = f"{self.url}/emulator/v1/projects/{urllib.parse.quote(project, safe='')}:import"
            status, text = _http("POST", url, body=body, timeout=max(5.0, deadline - time.monotonic()))
            if status != 200:
                raise EmulatorError(f"could not restore {project}/{database} from {meta}: {status} {text.strip()}")
            self.persist(project=project, database=database)

    def _save(self, *, timeout: float) -> None:
        """Export each persisted database into a fresh directory, then swap it into place.

        The swap keeps the previous export intact if the emulator dies mid-export.
        """
        assert self._data_dir is not None
        with self._lock:
            targets = sorted(self._persist)
        for project, database in targets:
            final = self._database_dir(project, database)
            partial = final.with_name(f"{database}.partial-{os.getpid()}")
            shutil.rmtree(partial, ignore_errors=True)
            partial.mkdir(parents=True)  # the emulator refuses a directory that does not exist
            body = {
                "database": self._database_name(project, database),
                "export_directory": str(partial),
                "export_name": EXPORT_NAME,
            }
            url = f"{self.url}/emulator/v1/projects/{urllib.parse.quote(project, safe='')}:export"
            status, text = _http("POST", url, body=body, timeout=timeout)
            if status != 200:
                shutil.rmtree(partial, ignore_errors=True)
                raise EmulatorError(f"could not save {project}/{database} to {final}: {status} {text.strip()}")
            old = final.with_name(f"{database}.old-{os.getpid()}")
            if final.exists():
                final.rename(old)
            partial.rename(final)
            shutil.rmtree(old, ignore_errors=True)

    # -- stopping

    def stop(self, *, timeout: float = 10.0) -> None:
        """Save ``data_dir`` (if any), then SIGTERM our process group, SIGKILL after ``timeout``.

        Idempotent. Signals go only to the process group of the PID we started (never by
        name), and never after we have reaped it. SIGTERM stops the JVM in ~0.4 s.
        Raises :class:`EmulatorError` if saving ``data_dir`` failed (the emulator is stopped
        anyway).
        """
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        save_error: BaseException | None = None
        try:
            if self._data_dir is not None and self._process.poll() is None:
                try:
                    self._save(timeout=max(timeout, 60.0))
                except (OSError, EmulatorError) as exc:
                    save_error = exc
        finally:
            self._terminate(timeout)
            _LIVE.discard(self)
        if save_error is not None:
            raise EmulatorError(
                f"emulator {self.address} stopped, but data_dir was not saved: {save_error}"
            ) from save_error

    def _terminate(self, timeout: float) -> None:
        pgid = self._process.pid  # start_new_session=True: the child leads its own group
        if self._process.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGTERM)
            try:
                self._process.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pgid, signal.SIGKILL)
                self._process.wait()
        if self._wrapper:
            # The gcloud wrapper is gone, but its java grandchild may not be (it ignores the
            # wrapper's death). While it lives, the group id cannot have been reused.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pgid, signal.SIGKILL)
        self._finish_cds()
        self._final_tail = _tail(_read_log(self._log_path), 200)
        with contextlib.suppress(OSError):
            self._log_path.unlink()

    def _finish_cds(self) -> None:
        """Move a freshly dumped CDS archive into place, or drop a partial one."""
        if self._cds_pending is None:
            return
        temporary, final = self._cds_pending
        self._cds_pending = None
        clean_exit = self._process.returncode in (0, 143, -signal.SIGTERM)
        try:
            if clean_exit and temporary.is_file() and temporary.stat().st_size > 0:
                os.replace(temporary, final)
            else:
                temporary.unlink(missing_ok=True)
        except OSError:
            pass

    def __enter__(self) -> Emulator:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


@atexit.register
def _stop_all_at_exit() -> None:
    for emulator in list(_LIVE):
        with contextlib.suppress(Exception):
            emulator.stop()


# --------------------------------------------------------------------------- starting


class _StartFailure(Exception):
    def __init__(self, message: str, *, bind: bool) -> None:
        super().__init__(message)
        self.bind = bind


def _wait_ready(process: subprocess.Popen[bytes], log_path: Path, url: str, deadline: float) -> None:
    """Return once ready (see module docstring); raise _StartFailure otherwise."""
    while True:
        rc = process.poll()
        text = _read_log(log_path)
        bind = any(marker in text for marker in BIND_MARKERS)
        if rc is not None or bind:
            reason = "the port is already in use" if bind else f"the emulator exited with status {rc}"
            if "UnsupportedClassVersionError" in text:
                reason += " (this java is too old for the emulator: install Java 17+)"
            raise _StartFailure(reason, bind=bind)
        if READY_LINE in text:
            try:
                status, body = _http("GET", url + "/", timeout=2.0)
            except OSError:
                status, body = 0, ""
            # Alive *after* the Ok: a dying JVM must not pass on another process's answer.
            if status == 200 and body.strip() == "Ok" and process.poll() is None:
                return
        if time.monotonic() > deadline:
            raise _StartFailure("the emulator was not ready in time", bind=False)
        time.sleep(0.05)


def _spawn(command: list[str], log_path: Path) -> subprocess.Popen[bytes]:
    # The log is a file, not a pipe: nobody has to drain it, so a chatty JVM can never block.
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # own process group: killpg reaches all of it, Ctrl-C does not
            preexec_fn=_die_with_parent_hook(),
            close_fds=True,
        )


#: The project whose rules :func:`start_emulator` compiles a rules file in (the jar applies the
#: file to every project; this one only receives the copy that is checked).
RULES_CHECK_PROJECT = "tsstore-rules-check"


def _read_rules(rules: str | os.PathLike[str] | None) -> tuple[Path | None, str | None]:
    if rules is None:
        return None, None
    path = Path(rules).expanduser().resolve()
    try:
        return path, path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RulesError(f"cannot read the rules file {str(rules)!r}: {exc}") from None


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def start_emulator(
    *,
    host: str = "127.0.0.1",
    port: int | None = None,
    timeout: float = 60.0,
    data_dir: str | os.PathLike[str] | None = None,
    cds: bool = True,
    max_heap: str | None = None,
    rules: str | os.PathLike[str] | None = None,
    mode: Mode = "native",
) -> Emulator:
    """Start an emulator owned by this process and return once it is ready.

    ``mode``: ``"native"`` (Firestore in Native mode: ``firestore.Client``) or ``"datastore"``
    (Firestore in Datastore mode: ``google.cloud.datastore.Client``,
    :meth:`EmulatorAt.datastore_client`). One emulator serves one mode: it refuses the other
    mode's calls ("Database mode not set to ..."), so a program that uses both starts two.

    ``rules`` names a ``firestore.rules`` file the emulator enforces on every project and
    database for requests that are not the server's (web and mobile clients over REST or
    their SDKs; anonymous, or signed in with an unsigned ID token). Without it the emulator
    allows everything. The file is compiled once the emulator is up: a file that does not
    compile raises :class:`EmulatorError` with the compiler's errors (the emulator itself
    would quietly deny every request), and its warnings are in :attr:`Emulator.rules_warnings`.

    ``port=None`` picks a free port, and picks another (up to 3 times) if someone takes it
    first. An explicit ``port`` that is taken raises :class:`EmulatorError` at once: another
    emulator may be answering there, but it is not ours.

    ``data_dir`` keeps databases across stop/start: at start every export found under
    ``data_dir/<project>/<database>/`` is imported into that project and database; on
    :meth:`Emulator.stop` each database that :meth:`Emulator.client` was called for (or that
    was restored, or named with :meth:`Emulator.persist`) is exported back. Data is saved
    only by ``stop()`` (a context manager exit or interpreter exit calls it), not when the
    process is killed.

    Why not the jar's own ``--import-data``/``--export-on-exit`` (measured, emulator 1.19.9):

    * ``--export-on-exit`` runs only on a graceful ``POST /shutdown``; after SIGTERM the JVM
      exits (rc 143) without writing anything.
    * Even after ``/shutdown`` it fails as soon as the ``(default)`` database was used:
      it builds the name ``projects/P/databases/`` (empty id) and logs
      ``SEVERE: Failed during export ... has invalid trailing "/"``, aborting the loop.
    * All databases are exported to one ``firestore_export_<seconds>`` folder, so a second
      database overwrites the first.
    * ``--import-data`` must name the ``*.overall_export_metadata`` file (a directory makes
      the JVM exit), takes one export only, and loads it into that database id of *every*
      project.

    The HTTP routes ``POST /emulator/v1/projects/P:export`` (body ``database``,
    ``export_directory`` that must exist, ``export_name``) and ``...:import`` (``database``,
    ``export_directory`` = the metadata file) work per project and database, for
    ``(default)`` and named ones alike, so those are what we use.

    ``cds`` uses (and on the first start, creates) an AppCDS archive of the emulator's classes
    under ``~/.cache/tsstore/`` (``$XDG_CACHE_HOME`` respected), which halves start-up. The
    archive is written when the first emulator stops, keyed by the java and jar it was made
    for; a missing, unwritable or unusable archive just means a plain start.

    The JVM leaves all but the hottest code to the quick compiler (the Tier4 thresholds of
    :data:`JVM_FLAGS`, 30 times the defaults). With the JVM's defaults, over tsstore's own
    test suite the optimizing compiler took 65 of the emulator's 120 CPU-seconds (measured per
    JVM thread). With the raised thresholds, on its query-heavy files the emulator used 42-47
    CPU-seconds instead of 54-66 and the files ran in 45-48 s instead of 51-59 s; four tests
    that start local stores ran in 24.9 s instead of 29.6 s (medians of 3). The quick compiler
    alone (``-XX:TieredStopAtLevel=1``) made them slower (70 s, 81 CPU-seconds: each query
    about twice as slow). The serial collector instead of G1: three of the suite's
    emulator-heavy files (late data, coverage, analytics; one process, no xdist) took 85 and 87
    CPU-seconds in all instead of 97 and 103, run alternately on a loaded 2-core machine.

    On failure raises :class:`EmulatorError` with the command line, the first error lines and
    the last lines of the emulator's output.
    """
    if mode not in get_args(Mode):
        raise EmulatorError(f"mode {mode!r} is not one the emulator runs; give 'native' or 'datastore'")
    if mode == "datastore" and rules is not None:
        raise RulesError("security rules are Native mode's: a Datastore-mode emulator takes no rules file")
    located = _locate()
    rules_path, rules_text = _read_rules(rules)
    data_path = _data_path(data_dir)
    deadline = time.monotonic() + timeout
    use_cds = cds and located.kind == "java"
    attempts = BIND_RETRIES + 1 if port is None else 1
    last_error = ""
    for attempt in range(attempts + 1):  # +1: one retry without CDS if the archive is suspect
        chosen = free_port(host) if port is None else port
        command, archive, cds_pending = _start_command(located, host, chosen, max_heap=max_heap, rules=rules_path,
                                                       cds=use_cds, attempt=attempt)  # fmt: skip
        if mode == "datastore":
            command.append(DATASTORE_MODE_FLAG)
        process, log_path = _spawned(command, chosen)
        try:
            _wait_ready(process, log_path, f"http://{host if ':' not in host else f'[{host}]'}:{chosen}", deadline)
        except _StartFailure as failure:
            last_error = _failed_start(process, log_path, cds_pending, failure, f"{host}:{chosen}", command)
            if failure.bind and port is None and attempt < BIND_RETRIES:
                continue  # someone took the free port between free_port() and the bind
            if use_cds and archive is not None and not failure.bind and time.monotonic() < deadline:
                use_cds = False  # never let an archive break start-up: drop it, try plain
                if cds_pending is None:
                    archive.unlink(missing_ok=True)
                continue
            raise EmulatorError(last_error) from None
        emulator = Emulator(process=process, host=host, port=chosen, command=command, log_path=log_path,
                            data_dir=data_path, cds_pending=cds_pending, wrapper=located.kind == "gcloud")  # fmt: skip
        emulator.mode = mode
        return _made_ready(emulator, rules_path, rules_text, deadline)
    raise EmulatorError(last_error)


def _data_path(data_dir: str | os.PathLike[str] | None) -> Path | None:
    """Where an emulator keeps its databases across stop and start (made if missing), or ``None``."""
    if data_dir is None:
        return None
    path = Path(data_dir).expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _spawned(command: list[str], port: int) -> tuple[subprocess.Popen[bytes], Path]:
    """The emulator's process started by ``command``, and the file its output goes to."""
    fd, log_name = tempfile.mkstemp(prefix=f"tsstore-emulator-{port}-", suffix=".log")
    os.close(fd)
    log_path = Path(log_name)
    try:
        return _spawn(command, log_path), log_path
    except OSError as exc:
        raise EmulatorError(f"could not run {subprocess.list2cmdline(command)}: {exc}") from exc


def _start_command(
    located: _Located, host: str, port: int, *, max_heap: str | None, rules: Path | None, cds: bool, attempt: int
) -> tuple[list[str], Path | None, tuple[Path, Path] | None]:
    """The command that starts an emulator on ``host:port``, with the CDS archive it uses
    (``None``: none) and, on a machine's first start, where the JVM writes it and where
    :meth:`Emulator.stop` moves it."""
    command = located.base_command()
    if max_heap is not None and located.kind == "java":
        # The emulator keeps every document on the heap (~3.6 GiB at 200 000 ticks).
        command = [f"-Xmx{max_heap}" if part.startswith("-Xmx") else part for part in command]
    command += [f"--host={host}", f"--port={port}"] if located.kind == "java" else [f"--host-port={host}:{port}"]
    if rules is not None:
        command.append(f"--rules={rules}")
    if located.kind != "java":
        return command, None, None
    cds_pending: tuple[Path, Path] | None = None
    archive = _cds_archive(located.java, located.jar) if cds and located.java and located.jar else None
    if archive is not None:
        # -Xshare:auto (the default) makes a missing/unmappable archive a no-op, and a stale
        # one only a warning; a failed start with it is retried once without it.
        if archive.is_file() and archive.stat().st_size > 0:
            flags = ["-Xshare:auto", f"-XX:SharedArchiveFile={archive}"]
        else:
            # First start on this machine: the JVM dumps the classes it loaded when it
            # exits on SIGTERM; stop() moves the file into place (atomic, so parallel
            # first starts each write their own temporary file and the last one wins).
            temporary = archive.with_name(f"{archive.name}.{os.getpid()}-{threading.get_ident()}-{attempt}.tmp")
            flags = ["-Xshare:auto", f"-XX:ArchiveClassesAtExit={temporary}"]
            cds_pending = (temporary, archive)
        command = [command[0], *flags, *command[1:]]
    # A JVM crash (e.g. SIGBUS on a truncated CDS archive) writes hs_err_pid*.log into the
    # working directory; keep that out of the user's project.
    error_file = Path(tempfile.gettempdir()) / "tsstore-emulator-hs_err_pid%p.log"
    return [command[0], f"-XX:ErrorFile={error_file}", *command[1:]], archive, cds_pending


def _failed_start(
    process: subprocess.Popen[bytes],
    log_path: Path,
    cds_pending: tuple[Path, Path] | None,
    failure: _StartFailure,
    where: str,
    command: list[str],
) -> str:
    """Clean up after a start that failed (the process group, the half-written archive, the
    log, a crash report) and say why, with the command, the first errors and the log's tail."""
    _kill_group(process)
    if cds_pending is not None:
        cds_pending[0].unlink(missing_ok=True)
    text = _read_log(log_path)
    log_path.unlink(missing_ok=True)
    # The crash report's gist is in the log tail; don't leave one file per failed start.
    Path(tempfile.gettempdir(), f"tsstore-emulator-hs_err_pid{process.pid}.log").unlink(missing_ok=True)
    key = _key_lines(text)
    return (
        f"could not start the Firestore emulator on {where}: {failure}\n"
        f"command: {subprocess.list2cmdline(command)}\n"
        + (f"first errors in its output:\n{key}\n" if key else "")
        + f"last {LOG_TAIL_LINES} lines of its output:\n{_tail(text)}"
    )


def _made_ready(emulator: Emulator, rules_path: Path | None, rules_text: str | None, deadline: float) -> Emulator:
    """A started emulator with its rules compiled (a file that does not compile stops it and
    says why) and its ``data_dir`` restored (or stopped, saving nothing, when it cannot be)."""
    if rules_path is not None and rules_text is not None:
        try:  # the jar takes any file; compiling it once tells a broken one from a strict one
            warned = load_rules(emulator.url, rules_text, project=RULES_CHECK_PROJECT, name=rules_path.name)
        except EmulatorError as exc:
            emulator.stop()
            raise type(exc)(f"{exc}\n(from {rules_path})") from None
        emulator._rules = rules_path
        emulator.rules_warnings = tuple(warned)
    data_path = emulator._data_dir
    if data_path is not None:
        try:
            emulator._restore(deadline=deadline)
        except (OSError, EmulatorError) as exc:
            emulator._data_dir = None  # do not overwrite what we could not load
            emulator.stop()
            raise EmulatorError(f"could not restore data_dir {data_path}: {exc}") from exc
    return emulator
