"""The asyncio store on the emulator: the sync store's oracle, the same answers and cursors,
and many queries on one event loop without a thread each."""

from __future__ import annotations

import asyncio
import datetime as dt
import random
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from tests.shared import PAGES, SPEC, brute_force
from tsstore import ConfigError, ModeError, SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.aio import AsyncTimeSeriesStore
from tsstore.ticks import Tick

UTC = dt.timezone.utc


@pytest.fixture
def astore(skewed: dict[str, Any], tsstore_emulator: Any) -> Iterator[AsyncTimeSeriesStore]:
    database = skewed["store"].client._database
    yield AsyncTimeSeriesStore(tsstore_emulator.async_client(database=database), SPEC, page_size=500)


@pytest.mark.parametrize(
    ("symbols", "direction"),
    [(["HOT"], "desc"), (["HOT", "AAA", "TWO"], "desc"), (["HOT", "AAA", "TWO"], "asc"), (None, "desc")],
    # The direction only reaches the plan and the page rounds the async store shares with the
    # sync one (test_lean_pages_... runs every shape both ways); ascending is kept for the
    # mixed shape, where the async rounds run the most chunk queries at once.
    ids=["one-shard-desc", "mixed-desc", "mixed-asc", "all-desc"],
)
@pytest.mark.parametrize("limit", [1, 70])
def test_async_pages_equal_the_oracle_and_the_sync_pages(
    skewed: dict[str, Any], astore: AsyncTimeSeriesStore, direction: str, symbols: list[str] | None, limit: int
) -> None:
    store: TimeSeriesStore = skewed["store"]
    want = brute_force(skewed["ticks"], symbols, direction == "desc")
    where = None if symbols is None else {"symbol": symbols if len(symbols) > 1 else symbols[0]}

    async def pages() -> list[tuple[list[str], str | None]]:
        out, cursor = [], None
        for _ in range(PAGES):
            page = await astore.query(where=where, direction=direction, limit=limit, cursor=cursor)
            out.append(([t.id for t in page], page.cursor))
            if page.cursor is None:
                break
            cursor = page.cursor
        return out

    got = asyncio.run(pages())
    ids = [i for page_ids, _ in got for i in page_ids]
    assert ids == [t.id for t in want[: len(ids)]] and ids
    # The stores' cursors are one format: the sync store resumes from the async store's first
    # cursor and gives the async store's second page and cursor (the sync store's own walks
    # are test_read_engine's).
    if len(got) > 1:
        page = store.query(where=where, direction=direction, limit=limit, cursor=got[0][1])
        assert ([t.id for t in page], page.cursor) == got[1]


def test_async_streams_frames_and_counts_equal_the_oracle(skewed: dict[str, Any], astore: AsyncTimeSeriesStore) -> None:
    want = brute_force(skewed["ticks"], ["AAA", "TWO"], False)

    async def run() -> tuple[list[Tick], Any, list[Any], int, Any]:
        stream = astore.iter_ticks(where={"symbol": ["AAA", "TWO"]}, direction="asc")
        ticks = [t async for t in stream]
        frame = await astore.query_frame(where={"symbol": ["AAA", "TWO"]}, direction="asc")
        frames = [f async for f in astore.stream_frames(where={"symbol": ["AAA", "TWO"]}, direction="asc", rows=100)]
        return ticks, frame, frames, await astore.count(where={"symbol": ["AAA", "TWO"]}), stream.stats

    ticks, frame, frames, counted, stats = asyncio.run(run())
    assert [t.id for t in ticks] == [t.id for t in want]
    assert len(frame) == counted == len(want) and [len(f) for f in frames][:-1] == [100] * (len(frames) - 1)
    assert sum(len(f) for f in frames) == len(want) and str(frame.index.tz) == "UTC"
    assert stats.documents == len(want) and stats.chunks == len(astore.plan(where={"symbol": ["AAA", "TWO"]}).chunks)


def test_twenty_concurrent_async_queries_share_one_loop_without_a_thread_each(
    skewed: dict[str, Any], astore: AsyncTimeSeriesStore
) -> None:
    symbols = ["AAA", "BBB", "CCC"]  # spread evenly: the skewed plans are the oracle tests' work
    wheres = [{"symbol": random.Random(i).sample(symbols, 2)} for i in range(20)]
    threads: list[int] = []

    async def run() -> list[Any]:
        async def watch() -> None:
            while True:  # every 5 ms: a thread per query would live far longer than that
                threads.append(threading.active_count())
                await asyncio.sleep(0.005)

        watcher = asyncio.create_task(watch())
        pages = await asyncio.gather(*(astore.query(where=w, limit=20) for w in wheres))
        watcher.cancel()
        return pages

    before = threading.active_count()
    pages = asyncio.run(run())
    assert len(threads) > 20 and max(threads) - before < 10  # gRPC's few threads, not one per query
    for where, page in zip(wheres, pages):
        assert [t.id for t in page] == [t.id for t in brute_force(skewed["ticks"], where["symbol"], True)[:20]]


def test_a_gate_of_one_query_still_merges_every_chunk_and_serves_concurrent_callers(
    skewed: dict[str, Any], tsstore_emulator: Any
) -> None:
    store: TimeSeriesStore = skewed["store"]
    client = tsstore_emulator.async_client(database=store.client._database)
    gated = AsyncTimeSeriesStore(client, SPEC, page_size=50, max_concurrency=1)
    where = {"symbol": ["AAA", "TWO", "HOT"]}  # 4 chunks: the merge holds 4 streams open at once
    want = brute_force(skewed["ticks"], ["AAA", "TWO", "HOT"], True)

    async def run() -> tuple[list[Tick], list[Any]]:
        streamed = [t async for t in gated.iter_ticks(where=where, limit=len(want))]  # above page_size: streams
        pages = await asyncio.gather(*(gated.query(where=where, limit=5 + i) for i in range(6)))
        return streamed, pages

    streamed, pages = asyncio.run(asyncio.wait_for(run(), timeout=120))
    assert len(gated.plan(where=where).chunks) == 4
    assert [t.id for t in streamed] == [t.id for t in want]
    assert [[t.id for t in page] for page in pages] == [[t.id for t in want[: 5 + i]] for i in range(6)]
    with pytest.raises(ConfigError, match="max_concurrency must be at least 1, got 0"):
        AsyncTimeSeriesStore(client, SPEC, max_concurrency=0)


def test_async_write_and_purge_account_like_the_sync_store(tsstore_emulator: Any) -> None:
    spec = SeriesSpec("aw", shards=["a", "b", "c"], key_fields=["symbol"])
    database = f"aio-{random.randrange(10**9)}"
    astore = AsyncTimeSeriesStore(
        tsstore_emulator.async_client(database=database), spec, write_options=WriteOptions(ramp=False)
    )
    base = dt.datetime(2024, 3, 1, tzinfo=UTC)
    rows = [{"symbol": f"S{i % 7}", "timestamp": base + dt.timedelta(seconds=i), "v": i} for i in range(600)]

    async def run() -> tuple[Any, Any, int, Any, int]:
        first = await astore.write(rows)
        again = await astore.write(rows[:100])  # a re-run stores nothing twice
        counted = await astore.count()
        purged = await astore.purge(before=base + dt.timedelta(seconds=250))
        return first, again, counted, purged, await astore.count()

    first, again, counted, purged, left = asyncio.run(run())
    assert (first.count, first.created, len(set(first.ids))) == (600, 600, 600)
    assert (again.created, again.present) == (0, 100) and counted == 600
    assert (purged.matched, purged.deleted, left) == (250, 250, 350)
    sync = TimeSeriesStore(tsstore_emulator.client(database=database), spec)
    assert sync.count() == 350 and sync.query(limit=1, direction="asc")[0].data["v"] == 250


def test_async_series_counters_count_what_the_async_writer_created(tsstore_emulator: Any) -> None:
    database = f"c-{random.Random().randrange(10**9)}"
    spec = SeriesSpec("c", key_fields=["symbol"], count_by=["symbol"], counter_shards=4)
    base = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)
    rows = [{"symbol": "AB"[i % 2], "timestamp": base + dt.timedelta(seconds=i), "v": i} for i in range(60)]

    async def run() -> tuple[Any, Any, int, int]:
        astore = AsyncTimeSeriesStore(
            tsstore_emulator.async_client(database=database), spec, write_options=WriteOptions(ramp=False)
        )
        first = await astore.write(rows)
        again = await astore.write(rows[:10])  # present already: counted nothing
        counter = await astore.series_counter({"symbol": "A"})
        with pytest.raises(ConfigError, match="must name exactly the count_by fields"):
            await astore.series_counter({"exchange": "X"})
        return first, again, await counter.value(), await astore.count()

    first, again, a_count, total = asyncio.run(run())
    assert (first.created, again.present, total) == (60, 10, 60)
    assert a_count == 30
    sync = TimeSeriesStore(tsstore_emulator.client(database=database), spec)
    assert sync.series_counter({"symbol": "B"}).value() == 30  # the same counters, read by the sync store


def test_the_async_store_in_datastore_mode_answers_as_the_sync_store(datastore_emulator: Any) -> None:
    """Datastore mode has no asyncio client: the async store answers each ask with the sync
    store in a worker thread. Its writes, pages and cursors, streams, frames, counts, bars,
    counters and purge equal the sync store's on the same data; live reads are refused."""
    database = f"aio-ds-{random.randrange(10**9)}"
    spec = SeriesSpec("ad", shards=[f"s{i}" for i in range(6)], key_fields=["symbol"], count_by=["symbol"],
                      shapes=["symbol"], measures=["v"], counter_shards=3)  # fmt: skip
    base = dt.datetime(2024, 3, 1, tzinfo=UTC)
    rows = [{"symbol": f"S{i % 3}", "timestamp": base + dt.timedelta(seconds=i // 2), "v": i} for i in range(900)]
    client = datastore_emulator.datastore_client(database=database)
    sync = TimeSeriesStore(client, spec)

    async def run() -> dict[str, Any]:
        async with AsyncTimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False), page_size=200) as astore:
            got: dict[str, Any] = {"write": await astore.write(rows), "again": await astore.write(rows[:50])}
            pages, cursor = [], None
            while True:
                page = await astore.query(where={"symbol": "S1"}, limit=70, cursor=cursor)
                pages.append([t.id for t in page])
                if page.cursor is None:
                    break
                cursor = page.cursor
            got["pages"] = pages
            got["streamed"] = [t.id async for t in astore.iter_ticks(start=base, direction="asc")]
            got["both"] = await asyncio.gather(astore.count(where={"symbol": "S0"}), astore.count())
            got["frame"] = await astore.query_frame(where={"symbol": "S2"})
            got["bars"] = await astore.bars(interval="1min", price="v", start=base, end=base + dt.timedelta(minutes=8))
            got["counted"] = await (await astore.series_counter({"symbol": "S0"})).value()
            minutes = {"start": base, "end": base + dt.timedelta(minutes=8)}
            got["sync"] = (sync.query_frame(where={"symbol": "S2"}), sync.bars(interval="1min", price="v", **minutes))
            with pytest.raises(ModeError, match="real-time listeners"):
                astore.watch(limit=3)
            got["purged"] = await astore.purge(before=base + dt.timedelta(seconds=100))
            return got

    got = asyncio.run(run())
    assert (got["write"].created, got["again"].present) == (900, 50)
    # the oracle: each row's position (timestamp, id) as Native orders it, from the rows and the written ids
    order = sorted(zip(got["write"].ids, rows), key=lambda pair: (pair[1]["timestamp"], pair[0]))
    s1 = [i for i, row in reversed(order) if row["symbol"] == "S1"]
    assert got["pages"] == [s1[k : k + 70] for k in range(0, 300, 70)]
    assert got["streamed"] == [i for i, _ in order[:100]] + [i for i, _ in order[100:]] and got["both"] == [300, 900]
    assert got["frame"].equals(got["sync"][0]) and len(got["frame"]) == 300
    assert got["bars"].equals(got["sync"][1])
    assert got["counted"] == 300 and len(got["bars"]) > 0
    assert got["purged"].deleted == 200 and sync.count() == 700
    client.close()
