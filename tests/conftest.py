"""Shared fixtures: one real Firestore emulator per test session, one database per test.

The emulator is never skipped: if it cannot start, every test that needs it errors with the
:class:`tsstore.errors.EmulatorError` message (which says what to install or what went wrong).
Named databases need no creation on the emulator, so a fresh database id per test isolates
tests from each other far more cheaply than deleting documents between them. The fixtures
come from the plugin tsstore ships (``tsstore.pytest_plugin``), so users get the same.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.gcs import GcsServer, free_port
from tests.proxy import CuttingProxy
from tsstore.local import supervisor
from tsstore.pytest_plugin import unique_database_id

if TYPE_CHECKING:
    from google.cloud import firestore

    from tsstore.local.emulator import EmulatorAt

# What the fixtures use of the client, pandas (tests.shared) and the stores is imported where
# they use it: every process of a run loads this file, xdist's controller too, which starts its
# workers only once it has (importing them here took it 1.2 s, measured, for nothing it runs;
# the workers import them as they collect the tests).

VALIDATOR = Path(__file__).parent / "firebase" / "validate.js"

# Bytecode caches on, for the processes the suite starts (xdist's workers, the pytest runs and
# commands of the docs and tests): with PYTHONDONTWRITEBYTECODE set, as some machines and
# containers set it, every pytest process rewrote the asserts of tsstore's and hypothesis'
# 180 modules again (collecting took 10.3 s instead of 4.1 s, measured).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def pytest_configure(config: pytest.Config) -> None:
    # The commands the tests interrupt start as from a terminal, with Ctrl-C at Python's own
    # handler, however this run was started: a run started with SIGINT ignored (a background job
    # of a script) passed that on, tsstore then leaves Ctrl-C alone as it should, and each test
    # that interrupts a command waited out its timeout and failed (test_live's three: 60 + 60 +
    # 95 s). Its own Ctrl-C is that of a run started in a terminal too.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line(
        "markers",
        "emulator: needs the Firestore emulator (a JVM); given to every test that uses the emulator fixture, and "
        "set by hand on those that start one themselves. `pytest -m 'not emulator'` runs the rest.",
    )
    config.addinivalue_line(
        "markers",
        "memory: a case on the memory database (the `memory` mode of tests.shared.MODES): never marked emulator, "
        "even when its test lists `uses_emulator` for its emulator modes.",
    )


#: The fixtures that start (or share) an emulator, and ``uses_emulator``: a fixture that takes
#: its emulator by ``request.getfixturevalue`` (one per database mode) lists it to be marked;
#: a case of the memory mode (marked ``memory`` by its parameter) is not marked by it.
EMULATOR_FIXTURES = {"tsstore_emulator", "tsstore_datastore_emulator"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if EMULATOR_FIXTURES & names or ("uses_emulator" in names and item.get_closest_marker("memory") is None):
            item.add_marker(pytest.mark.emulator)


def no_emulator_deselected(request: pytest.FixtureRequest) -> None:
    """A run that deselects the emulator tests (``-m "not emulator"``) and still reaches an
    emulator fails, naming the fixture: a test took it without the marker."""
    if "not emulator" in str(request.config.getoption("markexpr") or ""):
        pytest.fail(f"{request.fixturename} was set up in a run without emulator tests: the test that took it "
                    "needs the emulator marker (take the fixture by name or list `uses_emulator`)", pytrace=False)


@pytest.fixture(scope="session")
def local_store_folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A new folder name for each test's local stores, under one folder of the session's: none
    is made (a command that starts a store makes its folder). ``mktemp`` for each test read
    the whole temporary folder to number the next one, quadratic in the tests a worker runs
    (0.46 CPU-s for a worker's 800 tests of the lane, measured; 0.002 s now)."""
    base = tmp_path_factory.mktemp("tsstore-homes")
    return (base / str(n) for n in itertools.count())


@pytest.fixture(autouse=True)
def own_local_stores(local_store_folders: Iterator[Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test's local stores (``tsstore emulator start``, or a command without an emulator
    variable, which starts one) live in a folder of its own, never in ``~/.local/share/tsstore``:
    a command run with ``--mode datastore`` and only ``FIRESTORE_EMULATOR_HOST`` set once
    started a store there and left it running. A store still running when the test ends is
    stopped, and the test errors naming it: a test leaves no process behind."""
    folder = next(local_store_folders)
    monkeypatch.setenv("TSSTORE_HOME", str(folder / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(folder / "data"))  # for a command run with TSSTORE_HOME unset
    yield
    left = []
    for base in (folder / "home", folder / "data" / "tsstore"):
        for mode, place in (("native", base), ("datastore", base / "datastore")):
            if (place / supervisor.STATE_FILE).exists() and (store := supervisor.stop(place, mode=mode)) is not None:
                from tsstore.faults import mode_name

                left.append(f"{mode_name(mode)} (pid {store.pid}, {place})")
    if left:
        pytest.fail(f"the test left its local store running, now stopped: {', '.join(left)}", pytrace=False)


@pytest.fixture(scope="session")
def uses_emulator() -> None:
    """Listed by a fixture that takes its emulator by ``request.getfixturevalue``: the test is
    then marked ``emulator`` (nothing else)."""


class GcsAt:
    """fake-gcs-server (Cloud Storage's JSON API) at ``url``, its answers naming ``proxy``
    (a :class:`~tests.proxy.CuttingProxy` in front of it), so a resumable upload's later
    requests go through the proxy, whichever address the client started at."""

    def __init__(self, url: str, proxy: CuttingProxy) -> None:
        self.url, self.proxy = url, proxy


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[GcsAt]:
    """The session's fake-gcs-server (once per xdist worker, started by the first test that
    takes it, stopped by its PID), behind a cutting proxy that does not cut until told."""
    for attempt in range(5):  # the port chosen is free when chosen, and may be taken before the server binds it
        port = free_port()
        proxy = CuttingProxy(f"127.0.0.1:{port}", down=0.3)
        try:
            server = GcsServer(port=port, external=f"http://{proxy.address}")
        except RuntimeError as exc:
            proxy.close()
            if "address already in use" not in str(exc) or attempt == 4:
                raise
            continue
        break
    try:
        yield GcsAt(server.url, proxy)
    finally:
        server.stop()
        proxy.close()


@pytest.fixture
def gcs_bucket(gcs_server: GcsAt, monkeypatch: pytest.MonkeyPatch) -> str:
    """A new, empty bucket on the session's fake-gcs-server, whose address the test's
    ``STORAGE_EMULATOR_HOST`` names (the commands it runs inherit it)."""
    from google.cloud import storage

    monkeypatch.setenv("STORAGE_EMULATOR_HOST", gcs_server.url)
    name = f"tsstore-{random.getrandbits(64):016x}"
    storage.Client().create_bucket(name)
    return name


# tsstore's own tests use the fixtures the package ships to users (tsstore.pytest_plugin),
# under shorter names.


@pytest.fixture(scope="session")
def tsstore_emulator(tsstore_emulator: EmulatorAt, request: pytest.FixtureRequest) -> EmulatorAt:
    """The plugin's emulator, refused in a run without emulator tests however a test reached it
    (``request.getfixturevalue`` too, which no marker sees)."""
    no_emulator_deselected(request)
    return tsstore_emulator


@pytest.fixture(scope="session")
def tsstore_datastore_emulator(tsstore_datastore_emulator: EmulatorAt, request: pytest.FixtureRequest) -> EmulatorAt:
    """The plugin's emulator in Datastore mode, refused as :func:`tsstore_emulator` is."""
    no_emulator_deselected(request)
    return tsstore_datastore_emulator


@pytest.fixture(scope="session")
def emulator(tsstore_emulator: EmulatorAt) -> EmulatorAt:
    """The session's emulator (the plugin's ``tsstore_emulator``, which guards the lane)."""
    return tsstore_emulator


@pytest.fixture(scope="session")
def datastore_emulator(tsstore_datastore_emulator: EmulatorAt) -> EmulatorAt:
    """The session's emulator in Datastore mode (the plugin's ``tsstore_datastore_emulator``)."""
    return tsstore_datastore_emulator


@pytest.fixture
def client(tsstore_client: firestore.Client) -> firestore.Client:
    """A client on this test's own database (the plugin's ``tsstore_client``)."""
    return tsstore_client


@pytest.fixture
def otel_providers() -> Iterator[dict[str, Any]]:
    """The SDK providers a test gives tsstore (``tsstore.telemetry.configure``), the global ones
    left alone so that no other test records anything; tsstore is back on them afterwards."""
    from tsstore import telemetry

    providers: dict[str, Any] = {}
    yield providers
    telemetry.configure()


@pytest.fixture
def spans(otel_providers: dict[str, Any]) -> Any:
    """tsstore's spans, recorded into an ``InMemorySpanExporter`` by an SDK tracer provider of the test's own."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tsstore import telemetry

    exporter = InMemorySpanExporter()
    provider = otel_providers["tracer_provider"] = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    telemetry.configure(**otel_providers)
    return exporter


@pytest.fixture
def metric_points(otel_providers: dict[str, Any]) -> Callable[[], dict[tuple[str, str], Any]]:
    """tsstore's metrics read by an SDK meter provider of the test's own: a function giving each
    data point by (instrument name, its ``db.operation.name`` or ``db.collection.name``)."""
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from tsstore import telemetry

    reader = InMemoryMetricReader()
    otel_providers["meter_provider"] = MeterProvider(metric_readers=[reader])
    telemetry.configure(**otel_providers)

    def points() -> dict[tuple[str, str], Any]:
        data = reader.get_metrics_data()
        return {
            (metric.name, str(point.attributes.get("db.operation.name", point.attributes.get("db.collection.name")))): point
            for resource in (data.resource_metrics if data is not None else [])
            for scope in resource.scope_metrics
            for metric in scope.metrics
            for point in metric.data.data_points
        }

    return points


@pytest.fixture
def database_id(request: pytest.FixtureRequest) -> str:
    """A database id unique to this test."""
    return unique_database_id(request.node.name)


@pytest.fixture
def collection_name(tsstore_collection: str) -> str:
    """A collection name unique to this test (the plugin's ``tsstore_collection``)."""
    return tsstore_collection


class FirebaseTools:
    """firebase-tools' own validation of index files and firebase.json: one node process that
    answers each check (loading the CLI's modules takes 0.6 CPU-s, once per test process)."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(["node", str(VALIDATOR), "serve"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)  # fmt: skip

    def validate(self, kind: str, path: Path) -> dict[str, Any]:
        """``{"ok": True, ...}`` or ``{"ok": False, "error": the CLI's message}``."""
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(f"{kind}\t{path}\n")
        self.process.stdin.flush()
        answer = self.process.stdout.readline()
        assert answer, f"the validator ended (exit {self.process.poll()})"
        result: dict[str, Any] = json.loads(answer)
        return result

    def close(self) -> None:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        self.process.stdout.close()


@pytest.fixture(scope="session")
def firebase_tools() -> Iterator[FirebaseTools]:
    """firebase-tools installed by the README's test command (npm install --prefix tests/firebase)."""
    module = VALIDATOR.parent / "node_modules" / "firebase-tools" / "package.json"
    if not module.exists():
        pytest.fail(f"firebase-tools is not installed: run `npm install --prefix {VALIDATOR.parent} --ignore-scripts` (see README)")
    assert (
        json.loads(module.read_text())["version"]
        == json.loads((VALIDATOR.parent / "package.json").read_text())["dependencies"]["firebase-tools"]
    )
    tools = FirebaseTools()
    yield tools
    tools.close()


#: The skewed ticks (``tests/shared.py``) written to a database of the module's own: HOT in one
#: shard, TWO in two, the rest anywhere; ``{"store": its store, "ticks": every tick read back}``.
@pytest.fixture(scope="module")
def skewed(tsstore_emulator: Any) -> Iterator[dict[str, Any]]:
    from tests.shared import MILLISECONDS, SPEC, TICKS, skewed_rows
    from tsstore import TimeSeriesStore, WriteOptions

    client = tsstore_emulator.client(database=f"skew-{random.randrange(10**9)}")
    store = TimeSeriesStore(client, SPEC, write_options=WriteOptions(ramp=False), page_size=500)
    rows = skewed_rows()
    store.write(rows)
    ticks = list(store.iter_ticks())
    assert len(ticks) == TICKS and len({t.timestamp for t in ticks}) <= MILLISECONDS  # ~6 ticks share each ms
    assert sum(t.data["symbol"] == "HOT" for t in ticks) > 101  # more than a page of 100 and its extra one
    yield {"store": store, "ticks": ticks}
    store.close()
    client.close()
