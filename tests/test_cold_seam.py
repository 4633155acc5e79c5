"""Reads across the seam: a series whose older days are sealed answers every read as
Firestore alone answers it (the same series declared without a cold tier reads Firestore
only: the oracle), on 3 and 40 shards, in both database modes, with a marked day (read from
Firestore, holding a tick written after the seal) between sealed ones; and the sealed part
costs no billed read. The cut of a range into stretches is checked without Firestore."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from tests.conftest import unique_database_id
from tests.shared import MEMORY, MODES, NATIVE, T0, database_of, delete_doc, mode_client, put_doc, stored_doc, stored_ids
from tests.shared import ticks
from tests.shared import spec as shared_spec
from tsstore import (
    AsyncTimeSeriesStore,
    Query,
    QueryError,
    QueryShape,
    RetentionError,
    RetiredShard,
    SeriesSpec,
    TimeSeriesStore,
    WriteError,
    WriteOptions,
)
from tsstore.cold.manifest import Entry, Manifest
from tsstore.cold.seam import Stretch, stretches
from tsstore.cold.tier import horizon_name
from tsstore.cold_tier import ColdTier
from tsstore.late import mark_id, marks_path
from tsstore.read.cost import ReadStats

UTC = dt.timezone.utc
DAY = dt.timedelta(days=1)
D0 = T0.replace(hour=0)  # 2026-03-02: days D0 .. D0+3 hold ticks; D0+4 holds none
DAYS = [D0 + n * DAY for n in range(6)]


# ---------------------------------------------------------------------------- stretches, without Firestore


def _entry(day: dt.datetime) -> Entry:
    return Entry(1, 1, "0", day, day + DAY, day, day, day, f"t/date={day.date()}/part-1.parquet", 1, 9)


def test_a_range_is_cut_where_sealed_marked_and_hot_days_meet() -> None:
    manifest = Manifest("t")
    for day in (DAYS[0], DAYS[1], DAYS[3]):  # DAYS[2] held no tick when sealed
        manifest = manifest.with_entry(_entry(day))
    e0, e1, e3 = (manifest.entries[str(d.date())] for d in (DAYS[0], DAYS[1], DAYS[3]))
    whole = stretches(manifest, set(), start=None, end=None, partition=DAY)
    assert whole == [Stretch(DAYS[0], DAYS[2], (e0, e1)), Stretch(DAYS[3], DAYS[4], (e3,)), Stretch(DAYS[4], None)]
    noon = DAYS[1] + dt.timedelta(hours=12)
    marked = stretches(manifest, {DAYS[1], DAYS[2]}, start=noon, end=DAYS[5], partition=DAY)
    assert marked == [Stretch(noon, DAYS[3]), Stretch(DAYS[3], DAYS[4], (e3,)), Stretch(DAYS[4], DAYS[5])]
    assert stretches(manifest, set(), start=DAYS[4], end=None, partition=DAY) == [Stretch(DAYS[4], None)]
    assert stretches(Manifest("t"), set(), start=None, end=DAYS[1], partition=DAY) == [Stretch(None, DAYS[1])]
    assert stretches(manifest, set(), start=DAYS[2], end=DAYS[3], partition=DAY) == []  # empty when sealed
    assert stretches(manifest, set(), start=DAYS[1], end=DAYS[1], partition=DAY) == []


# ---------------------------------------------------------------------------- on the emulator


def _rows() -> list[dict[str, Any]]:
    rows = ticks(120, seed=11)
    return [{**row, "timestamp": row["timestamp"] - dt.timedelta(hours=9) + (row["n"] % 4) * DAY
             + dt.timedelta(hours=row["n"] % 24)} for row in rows]  # fmt: skip


class Seam:
    """One series written over four days, the first three sealed and the second marked with a
    tick written after the seal: ``cold`` reads it with its tier, ``hot`` (the same series
    declared without one) reads Firestore alone."""

    def __init__(self, client: Any, spec: SeriesSpec, mode: str) -> None:
        self.client, self.spec, self.mode = client, spec, mode
        self.cold = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False), page_size=7)
        self.hot = TimeSeriesStore(client, dataclasses.replace(spec, cold=None), page_size=7)

    def close(self) -> None:
        self.cold.close()
        self.hot.close()
        self.client.close()


#: Each seam written: ``(mode, shards)``, with its mode's mark (the memory database's at 3 shards
#: only: two chunks are merged by the same code whatever answers them).
WORLDS = [pytest.param((m.values[0], shards), marks=m.marks, id=f"{m.values[0]}-{shards}") for m in MODES
          for shards in (3, 40) if (m.values[0], shards) != ("memory", 40)]  # fmt: skip


@pytest.fixture(scope="module", params=WORLDS)
def seam(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, uses_emulator: None
) -> Iterator[Seam]:
    mode, shards = request.param  # uses_emulator: each test of it is marked (a run without the emulator leaves it out)
    client = mode_client(request, mode, unique_database_id(f"seam-{mode}-{shards}"))
    collection = f"seam{shards}"
    plain = shared_spec(collection, shards)
    ranged = QueryShape("exchange", ("desc", "asc"), ranges=["volume"])
    spec = dataclasses.replace(plain, shapes=(*plain.shapes, ranged), cold=ColdTier(tmp_path_factory.mktemp("lake")))
    world = Seam(client, spec, mode)
    world.cold.write(_rows())
    sealed = world.cold.seal(until=DAYS[3])
    assert [p.label for p in sealed.sealed] == ["2026-03-02", "2026-03-03", "2026-03-04"]
    late = {"symbol": "AAA", "exchange": "X1", "n": 9_999, "timestamp": DAYS[1] + dt.timedelta(hours=5),
            "price": {"micros": 123}, "volume": 700}  # fmt: skip
    put_doc(client, f"{marks_path(horizon_name(collection))}/{mark_id(DAYS[1])}",
            {"bucket": DAYS[1], "nonce": uuid.uuid4().hex})  # fmt: skip
    world.cold.write([late])
    yield world
    world.close()


H = dt.timedelta(hours=1)
#: Reads whose ranges start, end and lie across the seam (sealed days 0-2, day 1 marked, day
#: 3 hot), each with a filter, a value range, a projection or none, in both orders; each also
#: walked in pages (``limit``: a page of 5 to 11, or 40, longer than the store's page size of 7).
CASES = [
    ({"direction": "asc"}, 11),
    ({"direction": "desc", "where": {"symbol": "AAA"}}, 40),
    ({"start": DAYS[0] + 7 * H, "end": DAYS[3] + 5 * H, "direction": "desc"}, 9),
    ({"start": DAYS[0] + 7 * H, "end": DAYS[3] + 5 * H, "where": [("exchange", "==", "X1"), ("volume", ">=", 2500)],
      "direction": "asc"}, 5),
    ({"start": DAYS[1] + 2 * H, "where": {"symbol": ["BBB", "CCC"]}, "columns": ["price"], "direction": "asc"}, 40),
    ({"end": DAYS[2] + 13 * H, "where": [("exchange", "==", "X2"), ("volume", "<", 2000)], "direction": "desc"}, 5),
    ({"start": DAYS[2], "end": DAYS[3], "direction": "desc", "columns": ["volume"]}, 5),
]  # fmt: skip


#: The cases read on 40 shards too (its two chunks per read cost the emulator twice; the cases
#: there: the whole range in pages, value ranges across the seam, an ``in`` with a projection).
ON_40 = (0, 3, 4)


@pytest.mark.parametrize(
    ("seam", "asked", "limit"),
    [pytest.param(world.values[0], asked, limit, marks=world.marks, id=f"{world.id}-{n}") for world in WORLDS
     for n, (asked, limit) in enumerate(CASES) if world.values[0][1] == 3 or n in ON_40],
    indirect=["seam"],
)  # fmt: skip
def test_every_read_across_the_seam_is_firestores(seam: Seam, asked: dict[str, Any], limit: int) -> None:
    want = seam.hot.query(**asked).ticks
    got = seam.cold.query(**asked)
    assert [t.id for t in got.ticks] == [t.id for t in want]
    assert list(got.ticks) == list(want)
    assert [t.id for t in seam.cold.iter_ticks(**asked)] == [t.id for t in want]
    pd.testing.assert_frame_equal(seam.cold.query_frame(**asked), seam.hot.query_frame(**asked))
    assert seam.cold.query_table(**asked).equals(seam.hot.query_table(**asked))
    _pages_agree(seam, asked, [t.id for t in want], limit=limit)
    counted = {k: v for k, v in asked.items() if k in ("where", "start", "end")}
    assert seam.cold.count(**counted) == seam.hot.count(**counted) == len(want)


def _pages_agree(seam: Seam, asked: dict[str, Any], want: list[str], *, limit: int) -> None:
    """Walked in pages of ``limit``, the cold store gives Firestore's order cut every ``limit``
    ticks (so its cursors stand where Firestore's would), and a cursor only while more follow."""
    cursor: str | None = None
    pages: list[list[str]] = []
    while True:
        page = seam.cold.query(**asked, limit=limit, cursor=cursor)
        pages.append([t.id for t in page.ticks])
        cursor = page.cursor
        if cursor is None:
            break
    assert pages == [want[at : at + limit] for at in range(0, max(len(want), 1), limit)]


@pytest.mark.parametrize("before", [None, DAYS[2] + 3 * H, DAYS[1] + 4 * H])
def test_the_newest_tick_of_each_series_is_firestores(seam: Seam, before: dt.datetime | None) -> None:
    asked: dict[str, Any] = {"by": "symbol", "values": ["AAA", "BBB", "ZZZ"], "before": before}
    pd.testing.assert_frame_equal(seam.cold.latest(**asked), seam.hot.latest(**asked))
    asked["where"] = {"exchange": "X2"}
    pd.testing.assert_frame_equal(seam.cold.latest(**asked), seam.hot.latest(**asked))


def test_aggregates_bars_and_asof_joins_across_the_seam_are_firestores(seam: Seam) -> None:
    differ = []
    for bounds in ({}, {"start": DAYS[0] + 7 * H, "end": DAYS[3] + 5 * H}, {"where": {"symbol": "BBB"}}):
        asked = {**bounds, "sum": ["volume", "price.micros"], "avg": ["volume"]}
        differ += [f"aggregate {bounds}"] if seam.cold.aggregate(**asked) != seam.hot.aggregate(**asked) else []
    barred = {"interval": "6h", "by": "symbol", "price": "price.micros", "volume": "volume",
              "start": DAYS[0] + 3 * H, "end": DAYS[3] + 9 * H}  # fmt: skip
    differ += [] if seam.cold.bars(**barred).equals(seam.hot.bars(**barred)) else ["bars"]
    left = Query(where={"symbol": "AAA"}, start=DAYS[0], end=DAYS[3] + 6 * H)
    right = Query(where={"symbol": "AAA"}, start=DAYS[0] - DAY, end=DAYS[3] + 6 * H, columns=["volume"])
    joined = {"by": "symbol", "tolerance": "3h", "ids": True}
    differ += [] if seam.cold.asof(left, right, **joined).equals(seam.hot.asof(left, right, **joined)) else ["asof"]
    assert differ == []


def test_the_sealed_part_costs_no_billed_read(seam: Seam) -> None:
    told = seam.cold.explain(start=DAYS[2], end=DAYS[3]).describe()
    assert "sealed, unmarked partitions of the range are read from their Parquet objects (no billed read)" in told
    assert "cold tier" not in seam.hot.explain(start=DAYS[2], end=DAYS[3]).describe()
    sealed = seam.cold.query(start=DAYS[2], end=DAYS[3], direction="asc")
    plain = seam.hot.query(start=DAYS[2], end=DAYS[3], direction="asc")
    assert len(sealed.ticks) == len(plain.ticks) > 0
    stats: ReadStats = sealed.stats
    assert (stats.objects, stats.documents) == (1, 1)  # the sealed day's object; the manifest
    assert stats.billed_reads <= 3  # the manifest, the marks, at most one read of the server's time
    assert plain.stats.billed_reads >= len(plain.ticks)


def test_the_async_store_reads_across_the_seam_alike(request: pytest.FixtureRequest, seam: Seam) -> None:
    bounds = {"start": DAYS[0] + 7 * H, "end": DAYS[3] + 5 * H}

    async def both() -> tuple[list[str], list[str], list[Any]]:
        native = seam.mode == "native"  # Datastore mode has no asyncio client: the async store takes the sync one
        client = request.getfixturevalue("emulator").async_client(database=database_of(seam.cold)) if native else seam.client
        async with AsyncTimeSeriesStore(client, seam.spec, page_size=7) as store:
            page = await store.query(**bounds, direction="asc", limit=50)
            streamed = [t.id async for t in store.iter_ticks(**bounds, direction="asc")]
            rest = [await store.count(**bounds), await store.query_frame(**bounds),
                    [len(b) async for b in store.stream_batches(**bounds, rows=16)],
                    await store.latest(by="symbol", values=["AAA", "CCC"], before=DAYS[2]),
                    await store.aggregate(**bounds, sum=["volume"])]  # fmt: skip
        return [t.id for t in page.ticks], streamed, rest

    paged, streamed, rest = asyncio.run(both())
    want = [t.id for t in seam.hot.query(**bounds, direction="asc").ticks]
    assert (paged, streamed) == (want[:50], want)
    counted, frame, batches, newest, summed = rest
    assert (counted, sum(batches), max(batches)) == (len(want), len(want), 16)
    pd.testing.assert_frame_equal(frame, seam.hot.query_frame(**bounds))
    pd.testing.assert_frame_equal(newest, seam.hot.latest(by="symbol", values=["AAA", "CCC"], before=DAYS[2]))
    assert summed == seam.hot.aggregate(**bounds, sum=["volume"])


@pytest.mark.parametrize("mode", [NATIVE, MEMORY])
def test_a_reshard_marks_the_sealed_days_it_moves_and_reads_keep_each_ticks_new_shard(
    request: pytest.FixtureRequest, uses_emulator: None, mode: str, collection_name: str, tmp_path: Path
) -> None:
    client = mode_client(request, mode, unique_database_id("reshard-sealed"))
    before = SeriesSpec(collection_name, shards=["a", "b"], cold=ColdTier(tmp_path / "lake"), key_fields=["n"])
    rows = [{"n": n, "timestamp": DAYS[n % 3] + n * dt.timedelta(minutes=7)} for n in range(60)]
    with TimeSeriesStore(client, before, write_options=WriteOptions(ramp=False)) as store:
        store.write(rows)
        store.seal(until=DAYS[2])  # days 0 and 1 sealed; day 2 hot
    after = dataclasses.replace(before, shards=("c",), retired=(RetiredShard("a"), RetiredShard("b")))
    with TimeSeriesStore(client, after, write_options=WriteOptions(ramp=False)) as store:
        assert store.reshard().moved == 60
        marks = stored_ids(client, marks_path(horizon_name(collection_name)))
        assert sorted(marks) == [mark_id(DAYS[0]), mark_id(DAYS[1])]  # the sealed days only; no roll-up's
        assert {t.data["shard"] for t in store.query().ticks} == {"c"}  # marked: from Firestore
        assert [p.label for p in store.seal(until=DAYS[2]).resealed] == ["2026-03-02", "2026-03-03"]
        sealed = store.query(end=DAYS[2])
        assert sealed.stats.objects == 2 and {t.data["shard"] for t in sealed.ticks} == {"c"}
    client.close()


# ---------------------------------------------------------------------------- a purge of verified sealed days


@pytest.mark.parametrize("mode", MODES)
def test_a_purge_deletes_only_verified_sealed_days_and_reads_lose_no_tick(
    request: pytest.FixtureRequest, uses_emulator: None, mode: str, collection_name: str, tmp_path: Path
) -> None:
    client = mode_client(request, mode, unique_database_id(f"purge-sealed-{mode}"))
    spec = shared_spec(collection_name, 3, cold=ColdTier(tmp_path / "lake"))
    store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
    hot = TimeSeriesStore(client, dataclasses.replace(spec, cold=None))
    store.write(_rows())
    store.seal(until=DAYS[3])
    with pytest.raises(QueryError, match="falls inside a partition of .*'s cold tier, which a purge deletes whole; "
                                         "give a partition's start, such as 2026-03-03T00:00:00Z"):  # fmt: skip
        store.purge(before=DAYS[1] + 12 * H)
    with pytest.raises(QueryError, match="deletes whole sealed days; where= is not allowed there .symbol == 'AAA'."):
        store.purge(before=DAYS[1], where={"symbol": "AAA"})
    with pytest.raises(RetentionError, match="the sealed history ends at 2026-03-05T00:00:00Z, before the purge's end "
                                             "2026-03-06T00:00:00Z .seal first"):  # fmt: skip
        store.purge(before=DAYS[4])
    gone = hot.query(start=DAYS[1], end=DAYS[2], limit=1).ticks[0]  # deleted behind tsstore's back: day 1 differs
    delete_doc(client, f"{collection_name}/{gone.id}")
    with pytest.raises(RetentionError, match="2026-03-03 differs from its sealed file"):
        store.purge(before=DAYS[2])
    assert stored_doc(client, f"tsstore_rollups/{horizon_name(collection_name)}")["purged_before"] is None  # put back
    store.write([{**_rows()[0], "n": 10_001, "timestamp": DAYS[1] + 3 * H}])  # a late tick: day 1 marked, then resealed
    assert [p.label for p in store.seal(until=DAYS[3]).resealed] == ["2026-03-03"]
    kept, counted = store.query_frame(), store.count()
    in_firestore = hot.count(end=DAYS[2])
    assert in_firestore > 0 and store.purge(before=DAYS[2], dry_run=True).matched == in_firestore
    assert store.purge(before=DAYS[2]).deleted == in_firestore
    assert hot.count(end=DAYS[2]) == 0  # Firestore holds the purged days no more; the sealed files answer for them
    pd.testing.assert_frame_equal(store.query_frame(), kept)
    assert store.count() == counted and store.count(end=DAYS[2]) == in_firestore
    with pytest.raises(WriteError, match="falls in a sealed day of .* whose ticks a purge deleted from Firestore "
                                         r".before 2026-03-04T00:00:00Z.: its sealed file is the only copy"):  # fmt: skip
        store.write([{**_rows()[1], "n": 10_002, "timestamp": DAYS[0] + 5 * H}])
    checked = store.verify_cold()
    assert (checked.verified, checked.differ, checked.purged_before) == (("2026-03-04",), (), DAYS[2])
    assert "before 2026-03-04T00:00:00Z purged from Firestore (the sealed files are the only copy)" in checked.describe()
    store.close()
    hot.close()
    client.close()
