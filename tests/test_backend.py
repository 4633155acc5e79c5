"""The one place a client's database mode is decided (``tsstore.backend.backend_for``): a
``firestore.Client`` is Native mode, a ``datastore.Client`` Datastore mode, a
``MemoryDatabase`` the in-process one; anything else is refused by name, by both stores,
before anything is asked. No emulator: a client is made without a call."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from tsstore import AsyncTimeSeriesStore, QueryShape, SeriesSpec, TimeSeriesStore
from tsstore.backend import backend_for
from tsstore.datastore_mode import DatastoreAnswers
from tsstore.errors import ConfigError, ModeError
from tsstore.local.emulator import datastore_client, emulator_client
from tsstore.memory import MemoryDatabase
from tsstore.modes import LIVE_REFUSED, DatastoreKind
from tsstore.native_mode import NativeAnswers

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
        datastore.live_collection(SPEC)
    assert str(refused.value) == LIVE_REFUSED


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
    ticks written say; live reads refused by name (no listeners yet). The answers are held to
    the emulator's by tests/test_memory.py."""
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
        with pytest.raises(ModeError, match="listeners, which the memory database does not model"):
            store.watch(limit=1)

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
