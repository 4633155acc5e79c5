"""The one place a client's database mode is decided (``tsstore.databases.mode_of``, which
``tsstore.backend.backend_for`` and the counters take it from): a ``firestore.Client`` is
Native mode, a ``datastore.Client`` Datastore mode, a ``MemoryDatabase`` the in-process one;
anything else is refused by name, by both stores and a counter, before anything is asked. No
emulator (a client is made without a call), except where a counter on the memory database is
held to the same counter on the emulator, in both modes."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import inspect
import threading
from collections.abc import Generator
from typing import Any
from pathlib import Path

import pytest
from google.api_core.exceptions import ResourceExhausted, ServiceUnavailable
from google.auth.credentials import AnonymousCredentials
from google.cloud import firestore

from tests.conftest import unique_database_id
from tests.shared import MODES, mode_client
from tsstore import AsyncTimeSeriesStore, QueryShape, SeriesSpec, TimeSeriesStore
from tsstore.asks import AddToDocs, DocAsk, GetDoc
from tsstore.backend import InThreads, abackend_for, backend_for
from tsstore.beam.target import Target
from tsstore.counters import AsyncCounter, CounterValue, ShardedCounter, SyncCounter
from tsstore.databases import document_answers, mode_of
from tsstore.datastore_mode import DatastoreAnswers
from tsstore.errors import ConfigError, CounterError, FaultError, ModeError, StateError
from tsstore.local.emulator import datastore_client, emulator_client
from tsstore.memory import MemoryDatabase
from tsstore.memory.answers import answer_document
from tsstore.databases import DatastoreKind
from tsstore.datastore_mode import LIVE_REFUSED
from tsstore.native_mode import AsyncNativeAnswers, NativeAnswers

SPEC = SeriesSpec("ticks")
NOT_A_CLIENT = (r"client builtins\.dict is not allowed; give a google\.cloud\.firestore\.Client \(Native mode\), a "
                r"google\.cloud\.datastore\.Client \(Datastore mode\) or a tsstore\.memory\.MemoryDatabase")


def test_each_client_gets_its_databases_backend_and_collections() -> None:
    native = backend_for(emulator_client("127.0.0.1:1"), SPEC)
    assert isinstance(native, NativeAnswers)
    assert native.collection(SPEC).id == "ticks" and native.collection(SeriesSpec("bars")).id == "bars"
    datastore = backend_for(datastore_client("127.0.0.1:1"), SPEC)
    assert isinstance(datastore, DatastoreAnswers)
    assert datastore.collection(SeriesSpec("bars")) == DatastoreKind("bars")
    with pytest.raises(ModeError) as refused:  # no listeners in Datastore mode, said before any read
        datastore.listener()
    assert str(refused.value) == LIVE_REFUSED


def test_each_store_gets_its_backend_and_the_other_kind_of_client_is_refused_by_name() -> None:
    """The async store's backend: Native mode's own on an ``AsyncClient``; a database without an
    asyncio client through its sync backend in worker threads. The choice refuses a client of the
    other store, naming the store that takes it."""
    asynchronous = firestore.AsyncClient(project="p", credentials=AnonymousCredentials())
    native = abackend_for(asynchronous, SPEC, concurrency=2)
    assert isinstance(native, AsyncNativeAnswers) and native.collection(SPEC).id == "ticks"
    for client in (datastore_client("127.0.0.1:1"), MemoryDatabase()):
        threaded = abackend_for(client, SPEC, concurrency=2)
        assert isinstance(threaded, InThreads) and threaded.collection(SPEC) == DatastoreKind("ticks")
        threaded.close()
    with pytest.raises(ConfigError, match="^TimeSeriesStore takes a firestore.Client; for an AsyncClient use Async"):
        backend_for(asynchronous, SPEC)
    with pytest.raises(ConfigError, match="^AsyncTimeSeriesStore takes a firestore.AsyncClient; for a Client use "):
        abackend_for(emulator_client("127.0.0.1:1"), SPEC, concurrency=2)
    with pytest.raises(ConfigError, match=NOT_A_CLIENT):
        abackend_for({}, SPEC, concurrency=2)


def test_a_database_without_an_asyncio_client_is_called_on_threads_of_its_own() -> None:
    """The async store on the memory database calls it in worker threads of its backend's, not
    the event loop's: a purge's job holds the loop's only worker thread while it takes the ticks
    it deletes from the loop, which reads them on the backend's threads (on the loop's own, the
    read would wait for the job, and the job for the read, for ever)."""
    from concurrent.futures import ThreadPoolExecutor

    t0 = dt.datetime(2026, 3, 2, 14, tzinfo=dt.timezone.utc)
    database = MemoryDatabase()
    with TimeSeriesStore.memory(SPEC, database=database) as store:
        store.write([{"timestamp": t0 + dt.timedelta(seconds=i), "v": i} for i in range(30)])

    running: list[tuple[asyncio.AbstractEventLoop, asyncio.Task[Any] | None]] = []

    async def purge() -> int:
        running.append((asyncio.get_running_loop(), asyncio.current_task()))
        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
        async with AsyncTimeSeriesStore.memory(SPEC, database=database) as astore:
            return (await astore.purge(before=t0 + dt.timedelta(seconds=20))).deleted

    deleted: list[int] = []
    runner = threading.Thread(target=lambda: deleted.append(asyncio.run(purge())), daemon=True)
    runner.start()
    runner.join(120)  # a guard against waiting for ever, not a timing: the purge takes milliseconds
    if runner.is_alive():  # the read and the job wait on each other: cancelled, so that the run ends
        loop, task = running[0]
        assert task is not None
        loop.call_soon_threadsafe(task.cancel)
        runner.join()
    assert deleted == [20]


def test_the_mode_is_decided_once_for_stores_counters_and_pipelines() -> None:
    """Every client's mode comes from ``mode_of``: the stores' backends, a counter's document
    answers and a pipeline's target all take it from there, and refuse what it refuses."""
    native, datastore, memory = emulator_client("127.0.0.1:1"), datastore_client("127.0.0.1:1"), MemoryDatabase()
    asynchronous = firestore.AsyncClient(project="p", credentials=AnonymousCredentials())
    modes = [mode_of(c) for c in (native, datastore, memory, asynchronous)]
    assert modes == ["native", "datastore", "memory", "native"]
    assert Target.of(datastore).mode == "datastore" and Target.of(native).mode == "native"
    with pytest.raises(ConfigError, match="is a memory database, which a pipeline's workers cannot reach"):
        Target.of(memory)
    with pytest.raises(ConfigError, match=NOT_A_CLIENT):
        ShardedCounter({}, "counters/likes")
    with pytest.raises(ConfigError, match="a counter takes a sync client"):
        document_answers(asynchronous)


def test_a_datastore_kind_refuses_a_firestore_query_by_name_and_nothing_else() -> None:
    kind = DatastoreKind("ticks")
    with pytest.raises(ModeError, match=r"^kind 'ticks' is in Datastore mode, which takes no Firestore query; "):
        kind.where("shard", "in", ["a"])
    with pytest.raises(ModeError, match=r"^kind 'ticks' is in Datastore mode, which takes no Firestore query; "):
        kind.order_by("timestamp")
    assert not hasattr(kind, "select") and kind.id == "ticks"  # an attribute it has not is just missing


def test_a_client_of_no_known_database_is_refused_by_name_by_both_stores() -> None:
    with pytest.raises(ConfigError, match=NOT_A_CLIENT):
        backend_for({}, SPEC)
    with pytest.raises(ConfigError, match=NOT_A_CLIENT):
        TimeSeriesStore({}, SPEC)  # type: ignore[arg-type]

    async def made() -> None:
        AsyncTimeSeriesStore({}, SPEC)  # type: ignore[arg-type]

    with pytest.raises(ConfigError, match=NOT_A_CLIENT):
        asyncio.run(made())


def test_a_store_on_a_memory_database_answers_every_read_without_java() -> None:
    """Both stores on a :class:`~tsstore.memory.MemoryDatabase` (the backend ``backend_for``
    gives it): a write, then pages, a count, a sum and the newest tick of each series, as the
    ticks written say, and a watch of the newest. The answers are held to the emulator's by
    tests/test_memory.py (and the live reads' by tests/test_live.py)."""
    spec = SeriesSpec("ticks", shards=["a", "b", "c"], key_fields=["symbol"], shapes=[QueryShape("symbol", ("desc", "asc"))],
                      measures=["volume"])  # fmt: skip
    t0 = dt.datetime(2026, 3, 2, 14, tzinfo=dt.timezone.utc)
    rows = [{"symbol": "AB"[i % 2], "timestamp": t0 + dt.timedelta(seconds=i), "volume": i} for i in range(40)]
    database = MemoryDatabase()
    with TimeSeriesStore(database, spec, page_size=7) as store:
        assert store.write(rows).created == 40
        paged, cursor = [], None
        while True:
            page = store.query(where={"symbol": "A"}, limit=6, cursor=cursor, direction="asc")
            paged += [t.data["volume"] for t in page.ticks]
            if (cursor := page.cursor) is None:
                break
        assert paged == list(range(0, 40, 2))
        assert store.count(where={"symbol": "B"}) == 20
        assert store.aggregate(sum=["volume"]).sum == {"volume": sum(range(40))}
        newest = store.latest(by="symbol", values=["A", "B"])
        assert newest["volume"].tolist() == [38, 39]
        with store.watch(limit=1) as watch:
            first = watch.next_update(timeout=1)
        assert first is not None and [t.data["volume"] for t in first.window] == [39]

    async def counted() -> tuple[int, list[int]]:
        async with AsyncTimeSeriesStore(database, spec) as astore:  # type: ignore[arg-type]
            page = await astore.query(limit=3)
            return await astore.count(), [t.data["volume"] for t in page.ticks]

    assert asyncio.run(counted()) == (40, [39, 38, 37])


def test_the_series_counters_a_write_keeps_run_on_the_memory_database() -> None:
    """A series declared with ``count_by`` counts its written ticks on the memory database as
    on Firestore: once each, a rewrite of the same ids counting nothing."""
    spec = SeriesSpec("trades", key_fields=["symbol"], count_by=["symbol"])
    t0 = dt.datetime(2026, 3, 2, 14, tzinfo=dt.timezone.utc)
    rows = [{"id": f"t{i}", "symbol": "AB"[i % 3 == 0], "timestamp": t0 + dt.timedelta(seconds=i)} for i in range(30)]
    with TimeSeriesStore(MemoryDatabase(), spec) as store:
        store.write(rows)
        store.write(rows)  # the same ids again: present, not counted again
        counted = {s: store.series_counter({"symbol": s}).value() for s in "AB"}
    assert counted == {"A": 20, "B": 10}


def counter_story(counter: ShardedCounter) -> list[object]:
    """What a counter's verbs answer, one after another, from creating it to a refused shrink
    (the times left out: they are the database's)."""
    seen: list[object] = []
    for step in (
        lambda: counter.read(),
        lambda: counter.create(shards=3),
        lambda: counter.create(shards=9),  # idempotent: the existing count stands
        lambda: counter.increment(4),
        lambda: counter.increment(-1),
        lambda: counter.increment_many([1, 2, 3, 0, -2]),
        lambda: counter.value(),
        lambda: counter.read().live,  # no roll-up stored yet: the live sum
        lambda: counter.rollup().value,
        lambda: counter.read(),
        lambda: counter.grow(shards=5),
        lambda: counter.shards(),
        lambda: counter.grow(shards=2),
        lambda: counter.increment(10**19),
    ):
        try:
            got = step()
        except (StateError, CounterError) as exc:
            got = f"{type(exc).__name__}: {exc}"
        seen.append((got.value, got.live) if isinstance(got, CounterValue) else got)
    return seen


STORY = [
    "StateError: counter 'counters/likes' does not exist; create it first",
    3, 3, None, None, 4, 7, True, 7, (7, False), 5, 5,
    "CounterError: counter 'counters/likes' has 5 shards; shrinking to 2 is not supported (counts on removed shards "
    "would be lost)",
    "CounterError: increment 10000000000000000000 does not fit Firestore's 64-bit integers "
    "(-9223372036854775808 to 9223372036854775807)",
]


@pytest.mark.parametrize("mode", MODES)
def test_a_counter_on_the_memory_database_answers_as_on_the_emulator(
    mode: str, request: pytest.FixtureRequest, uses_emulator: None
) -> None:
    """``ShardedCounter(client, path)`` on a MemoryDatabase: every verb answers what the same
    counter answers on the emulator (each mode), refusals in the same words."""
    assert counter_story(ShardedCounter(MemoryDatabase(), "counters/likes")) == STORY
    client = mode_client(request, mode, unique_database_id(request.node.name))
    with contextlib.closing(client):
        assert counter_story(ShardedCounter(client, "counters/likes")) == STORY


def test_concurrent_increments_on_the_memory_database_count_exactly() -> None:
    counter = ShardedCounter(MemoryDatabase(), "counters/hits")
    counter.create(shards=4)
    threads = [threading.Thread(target=lambda: [counter.increment() for _ in range(50)]) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert counter.value() == 400 and counter.rollup().value == 400


def test_the_async_stores_series_counter_is_the_counter_awaited() -> None:
    """The async store's ``series_counter`` on a memory database: an :class:`AsyncCounter`,
    whose methods are :class:`ShardedCounter`'s, each a coroutine, answering what the sync
    store's counter answers on the same database."""
    spec = SeriesSpec("trades", key_fields=["symbol"], count_by=["symbol"], counter_shards=3)
    t0 = dt.datetime(2026, 3, 2, 14, tzinfo=dt.timezone.utc)
    rows = [{"id": f"t{i}", "symbol": "AB"[i % 2], "timestamp": t0 + dt.timedelta(seconds=i)} for i in range(10)]
    database = MemoryDatabase()

    async def counted() -> tuple[int, int, int, int]:
        async with AsyncTimeSeriesStore(database, spec) as astore:  # type: ignore[arg-type]
            await astore.write(rows)
            counter = await astore.series_counter({"symbol": "A"})
            assert isinstance(counter, AsyncCounter)
            await counter.increment_many([2, 3])
            rolled = await counter.rollup()
            return await counter.value(), rolled.value, await counter.shards(), (await counter.read()).value

    assert asyncio.run(counted()) == (10, 10, 3, 10)
    with TimeSeriesStore(database, spec) as store:
        assert store.series_counter({"symbol": "A"}).value() == 10
    public = {name for name, _ in inspect.getmembers(ShardedCounter, inspect.isfunction) if name[0] != "_"}
    awaited = {name for name, _ in inspect.getmembers(AsyncCounter, inspect.iscoroutinefunction) if name[0] != "_"}
    assert public == awaited == {"create", "shards", "increment", "increment_many", "value", "rollup", "read", "grow"}
    # Each store's signature says which counter it gives (what mypy and the API reference read).
    assert inspect.signature(TimeSeriesStore.series_counter).return_annotation is SyncCounter
    assert inspect.signature(AsyncTimeSeriesStore.series_counter).return_annotation is AsyncCounter


def test_an_async_counters_asks_are_tried_again_as_the_sync_counters_are() -> None:
    """An :class:`AsyncCounter` answers through the same attempts as a :class:`ShardedCounter`:
    a refused (overloaded) lone increment is sent again and counts once, one cut off before its
    answer is not (it may have landed) and says so; a read cut off is simply read again."""
    database = MemoryDatabase()
    trouble: list[tuple[type, Exception]] = []

    async def answer(ask: DocAsk) -> object:
        if trouble and isinstance(ask, trouble[0][0]):
            _, failure = trouble.pop(0)
            if isinstance(failure, ServiceUnavailable) and isinstance(ask, AddToDocs):
                answer_document(database, ask)  # this one lands, and its answer is lost
            raise failure
        return answer_document(database, ask)

    async def story() -> tuple[int, int, int]:
        counter = AsyncCounter("counters/lone", answer=answer)
        await counter.create(shards=2)
        trouble.append((AddToDocs, ResourceExhausted("busy")))
        await counter.increment(3)  # refused once, then sent again
        trouble.append((GetDoc, ServiceUnavailable("connection reset")))
        live, shards = (await counter.read(live=True)).value, await counter.shards()  # the read is tried again
        trouble.append((AddToDocs, ServiceUnavailable("connection reset")))
        cut = r"^adding 2 to counter 'counters/lone': the call was cut off \(UNAVAILABLE: connection reset\) and may"
        with pytest.raises(FaultError, match=cut + " or may not have landed"):
            await counter.increment(2)
        assert not trouble
        return live, shards, await counter.value()

    assert asyncio.run(story()) == (3, 2, 5)  # the cut increment had landed: counted once, not twice



def test_a_file_ingested_into_a_memory_database_is_its_own_target(tmp_path: Path) -> None:
    """ingest_file on a memory database: every row written (its summary equals a count), and
    its checkpoint names that database, so a new database never resumes an earlier one's run
    (the checkpoint of an interrupted ingest beside the file would otherwise skip its rows)."""
    from tsstore.databases import location_of
    from tsstore.ingest import default_checkpoint, ingest_file

    spec = SeriesSpec("quotes", key_fields=["symbol"], columns={"symbol": "string", "price": "Float64"})
    source = tmp_path / "quotes.csv"
    rows = "".join(f"S{i % 3},2024-01-02T10:00:{i:02d}Z,{i}.5\n" for i in range(40))
    source.write_text("symbol,timestamp,price\n" + rows)
    first, second = MemoryDatabase(), MemoryDatabase()
    assert location_of(first) != location_of(second) and location_of(first)[0] == "memory"
    for database in (first, second):
        with TimeSeriesStore.memory(spec, database=database) as store:
            summary = ingest_file(store, source)
            assert summary.written == store.count() == 40
    paths = {default_checkpoint(source, {"project": p, "database": d, "collection": "quotes"})
             for p, d in (location_of(first), location_of(second))}  # fmt: skip
    assert len(paths) == 2


def test_a_database_ask_is_tried_again_and_a_failing_count_asked_in_parts_on_both_sides() -> None:
    """``answered`` and ``aanswered`` (each store's one case for what its database answers): a
    count at a snapshot that keeps failing reaches the backend as asks over parts of its chunk's
    shard values, one answer per part; a census count has no parts and is asked whole, and so is
    a document ask."""
    from tsstore.backend import aanswered, answered
    from tsstore.census_asks import CountAll
    from tsstore.read.chunks import ChunkTicks
    from tsstore.read.plan import plan_query
    from tsstore.verbs.request import Count

    spec = SeriesSpec("ticks", shards=[f"s{i}" for i in range(5)])
    plan = plan_query(spec)
    [chunk] = plan.chunks
    t0 = dt.datetime(2026, 3, 2, 14, tzinfo=dt.timezone.utc)

    class Flaky:
        """Fails its first two calls as an overloaded server does, then answers a count with the
        shard values it was asked over (the census's: its name) and a document ask with its path."""

        def __init__(self) -> None:
            self.asked: list[Any] = []

        def answer(self, ask: Any) -> Any:
            self.asked.append(ask)
            if len(self.asked) <= 2:
                raise ServiceUnavailable("overloaded")
            if isinstance(ask, Count):
                return ask.over.chunk if isinstance(ask.over, ChunkTicks) else type(ask.over).__name__
            return ask.path

    class Awaited:
        def __init__(self, flaky: Flaky) -> None:
            self.flaky = flaky

        async def answer(self, ask: Any) -> Any:
            return self.flaky.answer(ask)

    count, census = Count(ChunkTicks(plan, chunk), read_time=t0), Count(CountAll(), read_time=t0)
    parts = [Count(ChunkTicks(plan, part), read_time=t0) for part in (chunk[:3], chunk[3:])]
    cases = [(count, [chunk[:3], chunk[3:]], [count, count, *parts]), (census, ["CountAll"], [census] * 3),
             (GetDoc("a/b", "a get"), "a/b", [GetDoc("a/b", "a get")] * 3)]  # fmt: skip
    for ask, answer, asked in cases:
        sync, looped = Flaky(), Flaky()
        assert answered(sync, ask) == asyncio.run(aanswered(Awaited(looped), ask)) == answer  # type: ignore[arg-type]
        assert sync.asked == looped.asked == asked


def test_an_ask_no_store_answers_is_refused_by_name_by_both_stores() -> None:
    """A request yielding an ask of a kind no store answers (a counter's own commit, which
    counters run themselves) gets a TypeError naming it and the kinds a request may yield."""
    from tsstore.asks import SumDocs
    from tsstore.verbs.request import answer

    stray = SumDocs("counters/x/shards", "count", what="summing")

    def request() -> Generator[Any, Any, None]:
        yield stray

    with TimeSeriesStore.memory(SeriesSpec("ticks")) as store:
        with pytest.raises(TypeError, match=r"no store answers SumDocs\(.*may yield are Count, Aggregate, .*ListenTail"):
            answer(request(), store._answer)

    async def asked() -> None:
        async with AsyncTimeSeriesStore.memory(SeriesSpec("ticks")) as astore:
            await astore._run(request())

    with pytest.raises(TypeError, match=r"no store answers SumDocs"):
        asyncio.run(asked())
