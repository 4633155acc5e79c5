"""A pytest plugin for testing your own code on the real Firestore emulator, or without Java on
the memory database.

Installed with tsstore (entry point ``pytest11``), so its fixtures are available in any
test suite without a conftest:

- ``tsstore_emulator`` (session): a running emulator, started once, stopped at the end;
  never skipped: if it cannot start, tests error with the reason (what to install). With
  pytest-xdist, each worker starts its own, or, with the ini option
  ``tsstore_share_emulator = true``, the controller starts one for the whole run and every
  worker reaches it (:class:`~tsstore.local.emulator.EmulatorAt`): one JVM instead of one per
  worker, and the emulator's warm-up paid once. With the ini option ``tsstore_emulator_host
  = HOST:PORT`` (``-o tsstore_emulator_host=$FIRESTORE_EMULATOR_HOST``) the run starts none
  and uses the emulator already there (``firebase emulators:exec``, a CI service): an
  :class:`~tsstore.local.emulator.EmulatorAt`, left running at the end.
- ``tsstore_client``: a ``google.cloud.firestore.Client`` on a database of its own, so
  tests never see each other's documents (the emulator needs no database creation).
- ``tsstore_datastore_emulator`` and ``tsstore_datastore_client``: the same for Firestore in
  Datastore mode (an emulator of its own, started when a test first asks, or shared among
  workers with ``tsstore_share_datastore_emulator = true``; a ``google.cloud.datastore.Client``,
  with ``pip install 'tsstore[datastore]'``).
- ``tsstore_collection``: a collection name unique to the test.
- ``tsstore_memory``: a :class:`~tsstore.memory.MemoryDatabase` of the test's own, for tests
  without Java, and ``tsstore_memory_store``, which makes a store of any declared series on it
  in one line (``tsstore_memory_store(spec)``), closed after the test.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import pytest

from tsstore.errors import EmulatorError
from tsstore.limits import DATABASE_ID_PATTERN
from tsstore.local.emulator import Emulator, EmulatorAt, Mode, start_emulator

if TYPE_CHECKING:  # a plugin every pytest run loads: the client and the stores are imported when a test asks
    from google.cloud import firestore

    from tsstore.memory import MemoryDatabase
    from tsstore.spec import SeriesSpec
    from tsstore.store import TimeSeriesStore

_DATABASE_ID = re.compile(DATABASE_ID_PATTERN)
#: The ini option that shares one emulator among pytest-xdist's workers.
SHARE_OPTION = "tsstore_share_emulator"
#: The ini option that also shares one emulator in Datastore mode (a second JVM: only for runs
#: whose tests use ``tsstore_datastore_emulator``).
SHARE_DATASTORE_OPTION = "tsstore_share_datastore_emulator"
#: The ini option that names an emulator already running, which the run uses instead of starting one.
HOST_OPTION = "tsstore_emulator_host"
#: What the controller hands each worker (``workerinput``), per mode: the shared emulator's
#: address, or why it could not start.
_SHARED: dict[Mode, tuple[str, str]] = {
    "native": ("tsstore_emulator", "tsstore_emulator_error"),
    "datastore": ("tsstore_datastore_emulator", "tsstore_datastore_emulator_error"),
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        SHARE_OPTION,
        "with pytest-xdist: start one Firestore emulator in the controller for every worker "
        "(instead of one per worker)",
        type="bool",
        default=False,
    )
    parser.addini(
        SHARE_DATASTORE_OPTION,
        "with pytest-xdist: also start one Firestore emulator in Datastore mode in the controller for every worker "
        "(without it, each worker that asks for one starts its own)",
        type="bool",
        default=False,
    )
    parser.addini(
        HOST_OPTION,
        "HOST:PORT of a Firestore emulator already running (as FIRESTORE_EMULATOR_HOST names it): the run uses it "
        "and starts none",
        default="",
    )


def running_emulator(address: str) -> EmulatorAt:
    """The emulator at ``address`` (``host:port``, or ``http://host:port/``) that a run was told
    to use, once it answers in Native mode (the mode of ``tsstore_emulator``'s clients)."""
    given = address.strip()
    bare = given.removeprefix("http://").rstrip("/")
    host, _, port = bare.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    if not host or not port.isdigit() or "/" in bare or (":" in host and not bracketed):
        raise EmulatorError(
            f"{HOST_OPTION} = {address!r} is not HOST:PORT (e.g. 127.0.0.1:8080, or [::1]:8080), the form "
            "FIRESTORE_EMULATOR_HOST takes"
        )
    running = EmulatorAt.of(bare)
    if not running.answers():
        raise EmulatorError(
            f"{HOST_OPTION} = {address!r}: no Firestore emulator answers there; start one (tsstore emulator "
            f"start, firebase emulators:start) or leave {HOST_OPTION} out to have the run start its own"
        )
    if running.served_mode() == "datastore":
        raise EmulatorError(
            f"{HOST_OPTION} = {address!r}: that emulator runs Firestore in Datastore mode, and "
            f"tsstore_emulator's clients are firestore.Client (Native mode); name an emulator in Native mode "
            f"(tsstore emulator start, or gcloud emulators firestore start without --database-mode), or leave "
            f"{HOST_OPTION} out (tsstore_datastore_emulator starts its own in Datastore mode)"
        )
    return running


class _SharedEmulator:
    """The controller's side of a shared emulator: started when xdist sets up its first worker
    (only runs with workers start one), stopped when the run ends. Started in the thread that
    runs the session, not one of its own: the emulator dies with the thread that started it
    (``PR_SET_PDEATHSIG`` follows the thread, so a starter thread that ends takes the JVM)."""

    def __init__(self, mode: Mode) -> None:
        self.mode = mode
        self.emulator: Emulator | None = None
        self.error: str | None = None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: object) -> None:
        if self.emulator is None and self.error is None:
            try:
                self.emulator = start_emulator(mode=self.mode)
            except EmulatorError as exc:
                self.error = str(exc)
        given: dict[str, object] = node.workerinput  # type: ignore[attr-defined]
        address, error = _SHARED[self.mode]
        given[address] = self.emulator.address if self.emulator is not None else None
        given[error] = self.error

    def pytest_unconfigure(self) -> None:
        if self.emulator is not None:
            self.emulator.stop()


def pytest_configure(config: pytest.Config) -> None:
    controller = not hasattr(config, "workerinput")
    shared = config.getini(SHARE_OPTION) and not config.getini(HOST_OPTION)  # (an emulator already there is shared)
    if controller and shared and config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_SharedEmulator("native"), "tsstore-shared-emulator")
    if controller and config.getini(SHARE_DATASTORE_OPTION) and config.pluginmanager.hasplugin("xdist"):
        config.pluginmanager.register(_SharedEmulator("datastore"), "tsstore-shared-datastore-emulator")


def unique_database_id(hint: str = "t") -> str:
    """A database id no other test uses, readable in emulator logs (``t-<test name>-<random>``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", hint.lower()).strip("-")[:40].rstrip("-") or "t"
    database = f"t-{slug}-{uuid.uuid4().hex[:8]}"
    assert _DATABASE_ID.fullmatch(database), database
    return database


@pytest.fixture(scope="session")
def tsstore_emulator(request: pytest.FixtureRequest) -> Iterator[EmulatorAt]:
    """The session's Firestore emulator; stopped (its JVM gone) when the session ends. A
    worker given the run's shared emulator reaches that one (the controller stops it)."""
    address = str(request.config.getini(HOST_OPTION) or "")
    if address:
        yield running_emulator(address)
        return
    yield from _session_emulator(request, "native")


@pytest.fixture(scope="session")
def tsstore_datastore_emulator(request: pytest.FixtureRequest) -> Iterator[EmulatorAt]:
    """The session's emulator in Datastore mode (a JVM of its own: one emulator serves one
    mode), shared among workers as ``tsstore_emulator`` is."""
    yield from _session_emulator(request, "datastore")


def _session_emulator(request: pytest.FixtureRequest, mode: Mode) -> Iterator[EmulatorAt]:
    given: dict[str, object] = getattr(request.config, "workerinput", {})
    address, error = _SHARED[mode]
    if address in given:
        if given[address] is None:
            raise EmulatorError(str(given[error]))
        yield EmulatorAt.of(str(given[address]), mode=mode)
        return
    running = start_emulator(mode=mode)
    try:
        yield running
    finally:
        running.stop()


@pytest.fixture
def tsstore_client(tsstore_emulator: EmulatorAt, request: pytest.FixtureRequest) -> Iterator[firestore.Client]:
    """A client on a database of this test's own, closed afterwards."""
    yield from _closed_after(tsstore_emulator.client(database=unique_database_id(request.node.name)))


@pytest.fixture
def tsstore_datastore_client(tsstore_datastore_emulator: EmulatorAt, request: pytest.FixtureRequest) -> Iterator[Any]:
    """A ``google.cloud.datastore.Client`` on a database of this test's own, closed afterwards."""
    database = unique_database_id(request.node.name)
    yield from _closed_after(tsstore_datastore_emulator.datastore_client(database=database))


class _Closable(Protocol):
    def close(self) -> None: ...


C = TypeVar("C", bound=_Closable)


def _closed_after(client: C) -> Iterator[C]:
    """``client``, for a fixture to yield, closed once the test is done with it."""
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def tsstore_collection() -> str:
    """A collection name unique to this test."""
    return f"ticks-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def tsstore_memory() -> MemoryDatabase:
    """A memory database of this test's own (empty: no other test sees its documents)."""
    from tsstore.memory import MemoryDatabase

    return MemoryDatabase()


@pytest.fixture
def tsstore_memory_store(tsstore_memory: MemoryDatabase) -> Iterator[Callable[..., TimeSeriesStore]]:
    """Makes the store of a series on this test's ``tsstore_memory``:
    ``tsstore_memory_store(spec, **options)`` is :meth:`TimeSeriesStore.memory
    <tsstore.store.TimeSeriesStore.memory>` on it; each store made is closed after the test."""
    from tsstore.store import TimeSeriesStore

    made: list[TimeSeriesStore] = []

    def store_of(spec: SeriesSpec, **options: Any) -> TimeSeriesStore:
        made.append(TimeSeriesStore.memory(spec, database=tsstore_memory, **options))
        return made[-1]

    try:
        yield store_of
    finally:
        for store in made:
            store.close()
