"""Series shapes and value filters (issue 26) on the emulator, against a brute-force oracle.

One data set per database mode (Native, and Datastore mode, whose reads must give Native
mode's answers: :mod:`tsstore.dswire.kinds`) and shard layout (3 and 40 shard values), written
once per module: ticks under
explicit shard values, a value field (``volume``) holding integers, doubles (equal ones:
``100`` and ``100.0``), NaN, strings, booleans, null or nothing, and deliberate groups of
ticks with one timestamp spread over both shard chunks, some with equal volumes (so only
the document id orders them). The oracle sorts and filters what was written in Python, by
Firestore's rules written out here (not tsstore's): (timestamp, range fields sorted, id);
a range condition only matches values of its bound's type, ``!=`` every value but null.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import itertools
import math
import operator
import random
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import pytest

from tests.shared import async_twin, mode_client, stored_ids
from tsstore import CursorError, QueryShape, SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.aio import AsyncTimeSeriesStore
from tsstore.pytest_plugin import unique_database_id
from tsstore.read.cost import ReadStats
from tsstore.read.plan import UNSHARDED

UTC = dt.timezone.utc
T0 = dt.datetime(2025, 6, 2, 14, 30, tzinfo=UTC)
SECONDS = 100  # random ticks fall on whole seconds: ~3 per second, ties among them too
RANDOM_TICKS = 150
MISSING = object()  # the tick has no volume field at all
NAN = float("nan")
VOLUMES: list[Any] = [
    *[10, 100, 100.0, 1000, 1000.0, 2500, 5000, 20000, 3.5, 10000.5, -7] * 3,
    "big", "Abc", "zz", True, False, None, NAN, MISSING,
]  # fmt: skip
# Each tie group: one timestamp, these volumes, spread over shard values in both chunks.
TIE_GROUPS = 8
TIE_VOLUMES: list[Any] = [5000, 2500, 5000, 20000, 2500.0, "big", 5000]
LATE_TICKS = 12  # written after the snapshot the read_time test reads at

SPEC_SHAPES = [
    QueryShape(["symbol"], ["desc", "asc"], series_rate=50),
    QueryShape(["symbol"], ["desc", "asc"], ranges=["volume"], series_rate=50),
    QueryShape(["exchange"], ["desc", "asc"], ranges=["volume"]),
    QueryShape(["exchange"], ["desc", "asc"], ranges=["volume", "price.micros"]),  # kept sorted: price.micros first
    QueryShape([], ["desc", "asc"], ranges=["volume"]),
]

X1_BIG: list[tuple[str, str, Any]] = [("exchange", "==", "X1"), ("volume", ">=", 1000)]
ALL_TIES = {"by-id", "by-value", "by-type"}
# where, page size, the kinds of timestamp ties pages are made to end inside (see tie_cuts)
RANGE_CASES: dict[str, tuple[list[tuple[str, str, Any]], int, set[str]]] = {
    "exchange-volume>=1000": (X1_BIG, 40, {"by-id", "by-value"}),
    "exchange-in-two-bounds": (
        [("exchange", "in", ["X1", "X2"]), ("volume", ">", 100), ("volume", "<=", 20000)],
        60,
        {"by-value"},
    ),
    "ne-mixed-types": ([("volume", "!=", 100)], 90, ALL_TIES),
    "string-range": ([("volume", ">=", "b")], 5, set()),
    "two-range-fields": (
        [("exchange", "==", "X1"), ("price.micros", "<", 30000), ("volume", "!=", 5000)],
        35,
        ALL_TIES,
    ),
    "series-with-range": ([("symbol", "==", "HOT"), ("volume", "<", 5000)], 20, {"by-value"}),
}
BOTH_WAYS = ["exchange-volume>=1000", "ne-mixed-types", "two-range-fields", "series-with-range"]


# ------------------------------------------------------------------------------ the oracle


@dataclass(frozen=True)
class Rec:
    """A tick as written: its id (from the write's result), timestamp and fields."""

    id: str
    timestamp: dt.datetime
    data: dict[str, Any]


def value_at(data: dict[str, Any], path: str) -> Any:
    value: Any = data
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return MISSING
        value = value[part]
    return value


def kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def rank(value: Any) -> tuple[Any, ...]:
    """Firestore's order of values: null, booleans, NaN, numbers by value, strings by UTF-8."""
    k = kind(value)
    if k == "null":
        return (0,)
    if k == "bool":
        return (1, value)
    if k == "number":
        return (2,) if math.isnan(value) else (3, value)
    if k == "str":
        return (5, value.encode())
    raise TypeError(f"no rank for {value!r}")


RANGE_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def matches(data: dict[str, Any], field: str, op: str, bound: Any) -> bool:
    value = value_at(data, field)
    if op == "==":
        return value is not MISSING and kind(value) == kind(bound) and value == bound
    if op == "in":
        return any(matches(data, field, "==", b) for b in bound)
    if value is MISSING or value is None:
        return False  # range and != conditions only match documents holding a non-null value
    if op == "!=":
        return not (kind(value) == kind(bound) and value == bound)  # 100.0 equals 100; NaN equals nothing
    if kind(value) != kind(bound) or (kind(value) == "number" and math.isnan(value)):
        return False
    return RANGE_OPS[op](value, bound)


def oracle(
    recs: Sequence[Rec],
    where: Sequence[tuple[str, str, Any]] | dict[str, Any] = (),
    *,
    direction: str = "desc",
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
) -> list[Rec]:
    """Every match of the query, in its order: (timestamp, range fields sorted, id)."""
    triples = (
        [(f, "in" if isinstance(v, list) else "==", v) for f, v in where.items()] if isinstance(where, dict) else where
    )
    ranged = sorted({f for f, op, _ in triples if op not in ("==", "in")})
    kept = [
        r
        for r in recs
        if all(matches(r.data, f, op, v) for f, op, v in triples)
        and (start is None or r.timestamp >= start)
        and (end is None or r.timestamp < end)
    ]
    return sorted(
        kept,
        key=lambda r: (r.timestamp, *(rank(value_at(r.data, f)) for f in ranged), r.id),
        reverse=direction == "desc",
    )


def ids(ticks: Any) -> list[str]:
    return [t.id for t in ticks]


# ------------------------------------------------------------------------------ the data


def spec_for(shards: Sequence[str]) -> SeriesSpec:
    return SeriesSpec(
        "quotes", shards=shards, key_fields=["symbol", "n"], measures=["volume", "price.micros"], shapes=SPEC_SHAPES
    )


def tie_time(group: int) -> dt.datetime:
    return T0 + dt.timedelta(seconds=10 * group + 3, milliseconds=250)


def make_rows(shards: Sequence[str]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(26)
    rows: list[dict[str, Any]] = []
    for n in range(RANDOM_TICKS):
        row: dict[str, Any] = {
            "symbol": "HOT" if rng.random() < 0.55 else rng.choice("ABCD"),
            "exchange": rng.choice(["X1", "X2"]),
            "n": n,
            "timestamp": T0 + dt.timedelta(seconds=rng.randrange(SECONDS)),
            "shard": rng.choice(shards),
        }
        volume = rng.choice(VOLUMES)
        if volume is not MISSING:
            row["volume"] = volume
        if n % 13:  # every 13th tick has no price: range filters on it and its sums skip it
            row["price"] = {"micros": rng.randrange(1, 50) * 1000}
        rows.append(row)
    for g in range(TIE_GROUPS):
        for j, volume in enumerate(TIE_VOLUMES):
            rows.append(
                {
                    "symbol": "HOT" if g % 2 == 0 else "A",
                    "exchange": "X1",
                    "n": 1000 + 10 * g + j,
                    "timestamp": tie_time(g),
                    "shard": shards[(13 * j + g) % len(shards)],  # 40 shard values: both chunks
                    "volume": volume,
                    "price": {"micros": 1000 * (1 + j % 3)},  # equal prices: the volume decides
                }
            )
    late = [
        {
            "symbol": "HOT",
            "exchange": "X1",
            "n": 2000 + i,
            "timestamp": T0 + dt.timedelta(seconds=rng.randrange(SECONDS), milliseconds=500),
            "shard": rng.choice(shards),
            "volume": 5000,
            "price": {"micros": 7000},
        }
        for i in range(LATE_TICKS)
    ]
    return rows, late


def records(rows: Sequence[dict[str, Any]], written_ids: Sequence[str]) -> list[Rec]:
    assert len(written_ids) == len(rows) == len(set(written_ids))
    return [Rec(i, r["timestamp"], {k: v for k, v in r.items() if k != "timestamp"}) for r, i in zip(rows, written_ids)]


@dataclass
class Data:
    store: TimeSeriesStore
    recs: list[Rec]  # everything written
    before: list[Rec]  # what was written before `snapshot`
    snapshot: dt.datetime
    database: str


#: Both modes at 3 and 40 shard values: every test of the module runs on each (the whole
#: module took 8.7 s at -n 2 with Datastore mode at 3 only, 12.2 s with all four).
LAYOUTS = [("native", 3), ("native", 40), ("datastore", 3), ("datastore", 40)]


@pytest.fixture(scope="module", params=LAYOUTS, ids=[f"{m}-{n}-shards" for m, n in LAYOUTS])
def data(request: pytest.FixtureRequest, uses_emulator: None) -> Iterator[Data]:
    mode, count = request.param
    shards = [f"s{i:02d}" for i in range(count)]
    database = unique_database_id(f"series-ranges-{count}")
    client = mode_client(request, mode, database)
    spec = spec_for(shards)
    # page_size 60: reads of more than 60 ticks stream, one cursor per chunk
    store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False), page_size=60)
    rows, late = make_rows(shards)
    first = store.write(rows)
    snapshot = store.server_time()
    second = store.write(late)
    assert first.created == len(rows) and second.created == len(late)
    before = records(rows, first.ids)
    recs = before + records(late, second.ids)
    assert len(stored_ids(client, spec.collection)) == len(recs)
    # The data is what the tests need: a series longer than a page of 100, and value ties.
    assert len(oracle(recs, {"symbol": "HOT"})) > 101
    tied = oracle(recs, X1_BIG)
    same_time = [(a, b) for a, b in zip(tied, tied[1:]) if a.timestamp == b.timestamp]
    assert any(rank(a.data["volume"]) == rank(b.data["volume"]) for a, b in same_time)  # the id decides
    assert any(rank(a.data["volume"]) != rank(b.data["volume"]) for a, b in same_time)  # the volume decides
    chunks = store.plan(where=X1_BIG).chunks
    assert len(chunks) == (2 if len(shards) == 40 else 1)
    for g in range(TIE_GROUPS):  # each tie group spreads over every chunk
        group = {r.data["shard"] for r in recs if r.timestamp == tie_time(g)}
        assert all(group & set(chunk) for chunk in chunks)
    yield Data(store, recs, before, snapshot, database)
    store.close()
    client.close()


def follow(
    store: TimeSeriesStore,
    sizes: int | Sequence[int],
    check: Callable[[Any, int, int], None] | None = None,
    **query: Any,
) -> list[str]:
    """Every page of the query followed with its cursors to the end, the i-th page of
    ``sizes[i]`` ticks (the last size repeated); ``check(page, limit, shown)`` sees each
    page, its limit and how many ticks the pages before it showed."""
    sizes = [sizes] if isinstance(sizes, int) else list(sizes)
    got: list[str] = []
    cursor = None
    for n in itertools.count():
        limit = sizes[min(n, len(sizes) - 1)]
        page = store.query(limit=limit, cursor=cursor, **query)
        assert len(page) <= limit and (page.cursor is None or len(page) == limit)
        if check is not None:
            check(page, limit, len(got))
        got.extend(ids(page))
        if page.cursor is None:
            break
        cursor = page.cursor
    return got


# ------------------------------------------------------------------------------ series shapes


@pytest.mark.parametrize("direction", ["desc", "asc"])
def test_series_pages_follow_cursors_to_the_end_one_query_each(data: Data, direction: str) -> None:
    where = {"symbol": "HOT"}
    want = ids(oracle(data.recs, where, direction=direction))
    plan = data.store.plan(where=where, direction=direction)
    assert plan.series and plan.chunks == (UNSHARDED,) == ((),)

    def one_query(page: Any, limit: int, shown: int) -> None:  # one query, limit + 1 or what is left
        assert (page.stats.queries, page.stats.chunks) == (1, 1)
        assert page.stats.documents == page.stats.billed_reads == min(limit + 1, len(want) - shown)

    assert follow(data.store, 40, one_query, where=where, direction=direction) == want


def test_a_series_page_of_100_reads_101_documents_in_one_query(data: Data) -> None:
    page = data.store.query(where={"symbol": "HOT"}, limit=100)
    assert ids(page) == ids(oracle(data.recs, {"symbol": "HOT"})[:100]) and page.cursor is not None
    stats = page.stats
    assert (stats.documents, stats.queries, stats.billed_reads, stats.chunks) == (101, 1, 101, 1)


@pytest.mark.parametrize("direction", ["desc", "asc"])
def test_series_time_ranges_page_with_cursors(data: Data, direction: str) -> None:
    start, end = T0 + dt.timedelta(seconds=20), tie_time(6)  # end is exclusive: tie group 6 (HOT) left out
    want = ids(oracle(data.recs, {"symbol": "HOT"}, direction=direction, start=start, end=end))
    assert 20 < len(want) < len(oracle(data.recs, {"symbol": "HOT"}))

    def one_query(page: Any, limit: int, shown: int) -> None:
        assert page.stats.queries == 1

    got = follow(data.store, 20, one_query, where={"symbol": "HOT"}, direction=direction, start=start, end=end)
    assert got == want


@pytest.mark.parametrize("direction", ["desc", "asc"])
def test_a_series_shape_with_in_is_one_query_without_a_shard_filter(data: Data, direction: str) -> None:
    where = {"symbol": ["A", "C"]}
    plan = data.store.plan(where=where, direction=direction)
    assert plan.series and plan.chunks == ((),)
    want = ids(oracle(data.recs, where, direction=direction))

    def one_query(page: Any, limit: int, shown: int) -> None:
        assert page.stats.queries == 1 and page.stats.documents == min(limit + 1, len(want) - shown)

    assert follow(data.store, 25, one_query, where=where, direction=direction) == want


def test_series_streams_and_frames_equal_the_oracle(data: Data) -> None:
    store = data.store
    want = oracle(data.recs, {"symbol": "HOT"}, direction="asc")
    stream = store.iter_ticks(where={"symbol": "HOT"}, direction="asc")
    assert ids(stream) == ids(want)
    assert (stream.stats.queries, stream.stats.documents, stream.stats.chunks) == (1, len(want), 1)
    start, end = T0 + dt.timedelta(seconds=5), T0 + dt.timedelta(seconds=71)
    ranged = oracle(data.recs, {"symbol": "HOT"}, start=start, end=end)
    frame = store.query_frame(where={"symbol": "HOT"}, start=start, end=end)
    assert list(frame["n"]) == [r.data["n"] for r in ranged]
    assert list(frame.index) == [r.timestamp for r in ranged] and str(frame.index.tz) == "UTC"
    frames = list(store.stream_frames(where={"symbol": "HOT"}, direction="asc", rows=25))
    assert [len(f) for f in frames[:-1]] == [25] * (len(frames) - 1)
    assert [n for f in frames for n in f["n"]] == [r.data["n"] for r in want]


def newest(
    recs: Sequence[Rec], symbol: str, where: Sequence[tuple[str, str, Any]] = (), before: Any = None
) -> Rec | None:
    found = oracle(recs, [("symbol", "==", symbol), *where], end=before)
    return found[0] if found else None


def test_latest_sends_one_limit_1_query_per_series(data: Data) -> None:
    store = data.store
    values = ["HOT", "A", "ZZZ", "C"]  # ZZZ was never written
    stats = ReadStats()
    frame = store.latest(by="symbol", values=values, stats=stats)
    assert list(frame.index) == values
    for symbol in values:
        want = newest(data.recs, symbol)
        if want is None:
            assert pd.isna(frame.loc[symbol, "timestamp"]) and pd.isna(frame.loc[symbol, "n"])
        else:
            assert (frame.loc[symbol, "timestamp"], frame.loc[symbol, "n"]) == (want.timestamp, want.data["n"])
    # one limit-1 query per series (ZZZ's finds nothing, billed 1), at one snapshot
    probes = stats.snapshot_reads
    assert (stats.queries, stats.documents, stats.billed_reads) == (len(values) + probes, 3, len(values) + probes)
    assert probes <= 1
    alone = ReadStats()
    frame = store.latest(by="symbol", values=["A"], stats=alone)
    assert frame.loc["A", "n"] == newest(data.recs, "A").data["n"]  # type: ignore[union-attr]
    assert (alone.queries, alone.documents, alone.billed_reads, alone.chunks) == (1, 1, 1, 1)


def test_latest_before_a_tie_takes_the_query_order(data: Data) -> None:
    store = data.store
    before = tie_time(6) + dt.timedelta(milliseconds=1)  # HOT's newest are tie group 6: 7 ticks at once
    plain = newest(data.recs, "HOT", before=before)
    assert plain is not None and plain.timestamp == tie_time(6)
    stats = ReadStats()
    frame = store.latest(by="symbol", values=["HOT"], before=before, stats=stats)
    assert frame.loc["HOT", "n"] == plain.data["n"] and stats.queries == 1  # the greatest id
    # On the series shape with a range: newest by (timestamp, volume, id); three 5000s tie
    ranged = [("volume", "<", 10000)]
    want = newest(data.recs, "HOT", ranged, before=before)
    assert want is not None and want.timestamp == tie_time(6) and want.data["volume"] == 5000
    stats = ReadStats()
    frame = store.latest(by="symbol", values=["HOT", "B"], where=ranged, before=before, stats=stats)
    assert frame.loc["HOT", "n"] == want.data["n"]
    assert frame.loc["B", "n"] == newest(data.recs, "B", ranged, before=before).data["n"]  # type: ignore[union-attr]
    assert stats.queries == 2 + stats.snapshot_reads <= 3  # one per series, at one snapshot
    # A sharded shape with a range: each chunk's newest, and the newest of those by (timestamp,
    # volume, id). Each tie group spreads over both chunks at 40 shard values: for `!=`, a tie
    # group where the newest by (timestamp, id) of the chunks' newest is another tick.
    ne = [("volume", "!=", 100)]  # in each tie group the string is newest, above 20000
    chunks = store.plan(where=[("exchange", "==", "X1"), *ne]).chunks

    def by_time_and_id(before: dt.datetime) -> Rec:
        ins = [[r for r in data.recs if r.data["shard"] in chunk] for chunk in chunks]
        firsts = [found[0] for recs in ins if (found := oracle(recs, [("exchange", "==", "X1"), *ne], end=before))]
        return max(firsts, key=lambda r: (r.timestamp, r.id))

    befores = [tie_time(g) + dt.timedelta(milliseconds=1) for g in range(TIE_GROUPS)]
    telling = [b for b in befores if by_time_and_id(b) != oracle(data.recs, [("exchange", "==", "X1"), *ne], end=b)[0]]
    assert bool(telling) == (len(chunks) > 1)
    before = (telling or befores[5:])[0]
    for where in ([("volume", "<", 10000)], ne):
        stats = ReadStats()
        frame = store.latest(by="exchange", values=["X1", "X2"], where=where, before=before, stats=stats)
        for exchange in ("X1", "X2"):
            found = oracle(data.recs, [("exchange", "==", exchange), *where], end=before)
            assert found and frame.loc[exchange, "n"] == found[0].data["n"], (where, exchange)
        per_exchange = len(store.plan(where=[("exchange", "==", "X1"), *where]).chunks)
        # one per exchange and chunk, and the server's time unless recent answers told it
        assert stats.queries == 2 * per_exchange + stats.snapshot_reads and stats.snapshot_reads <= 1


# ------------------------------------------------------------------------------ value filters


def tie_cuts(want: Sequence[Rec], fields: Sequence[str]) -> dict[str, int]:
    """Where a page may end inside a timestamp tie (the first such place of each kind): where
    the next tick differs only by id, where a range field's value orders it, and where that
    value is of another type (a number before a string, a boolean before a number)."""
    cuts: dict[str, int] = {}
    for k, (a, b) in enumerate(zip(want, want[1:]), 1):
        if a.timestamp != b.timestamp:
            continue
        va, vb = [value_at(a.data, f) for f in fields], [value_at(b.data, f) for f in fields]
        if [rank(v) for v in va] == [rank(v) for v in vb]:
            cuts.setdefault("by-id", k)
        elif any(kind(x) != kind(y) for x, y in zip(va, vb)):
            cuts.setdefault("by-type", k)
        else:
            cuts.setdefault("by-value", k)
    return cuts


#: Each case both ways, two one way; in Datastore mode the walk that reads every kind of variant
#: (a `!=` over mixed types; the product of two range fields runs in its streams): the suite's time.
DATASTORE_PAGED = {("ne-mixed-types", "asc")}
PAGED = [
    *((case, direction) for case in BOTH_WAYS for direction in ("desc", "asc")),
    ("exchange-in-two-bounds", "asc"),  # three chunks at 40 shard values (15 each with the `in` of 2)
    ("string-range", "desc"),
]


@pytest.mark.parametrize(
    ("data", "case", "direction"),
    [(layout, case, direction) for layout in LAYOUTS for case, direction in PAGED
     if layout[0] == "native" or (case, direction) in DATASTORE_PAGED],
    indirect=["data"],
    ids=[f"{m}-{n}-shards-{case}-{direction}" for m, n in LAYOUTS for case, direction in PAGED
         if m == "native" or (case, direction) in DATASTORE_PAGED],
)  # fmt: skip
def test_value_filtered_pages_follow_cursors_to_the_end(data: Data, case: str, direction: str) -> None:
    where, limit, ties = RANGE_CASES[case]
    want = oracle(data.recs, where, direction=direction)
    plan = data.store.plan(where=where, direction=direction)
    # The first pages end inside timestamp ties, each continued by its cursor alone; then
    # pages of `limit` to the end.
    cuts = tie_cuts(want, plan.order_fields)
    assert ties <= cuts.keys(), cuts
    ends = sorted({cuts[kind] for kind in ties})
    sizes = [b - a for a, b in zip([0, *ends], ends)] + [limit]
    assert len(want) > ends[-1] + limit if ends else len(want) > 2 * limit  # several pages of `limit` after

    def check(page: Any, size: int, shown: int) -> None:
        if plan.series:
            assert page.stats.queries == 1 and page.stats.documents == min(size + 1, len(want) - shown)

    assert follow(data.store, sizes, check, where=where, direction=direction) == ids(want)
    assert plan.series == (case == "series-with-range")


def test_value_filtered_streams_and_frames_equal_the_oracle(data: Data) -> None:
    store = data.store
    ne = RANGE_CASES["ne-mixed-types"][0]
    want = oracle(data.recs, ne, direction="asc")
    frame = store.query_frame(where=ne, direction="asc")
    assert list(frame["n"]) == [r.data["n"] for r in want]
    assert list(frame.index) == [r.timestamp for r in want]
    frames = list(store.stream_frames(where=ne, direction="asc", rows=40))
    assert [n for f in frames for n in f["n"]] == [r.data["n"] for r in want]
    two = RANGE_CASES["two-range-fields"][0]
    assert ids(store.iter_ticks(where=two)) == ids(oracle(data.recs, two))
    # a limit above the store's page size streams each chunk and stops after 70
    assert ids(store.iter_ticks(where=ne, limit=70)) == ids(oracle(data.recs, ne)[:70])


def test_count_and_aggregates_under_a_range_filter(data: Data) -> None:
    store = data.store
    chunks = len(store.plan(where=X1_BIG).chunks)
    hits = oracle(data.recs, X1_BIG)
    stats = ReadStats()
    assert store.count(where=X1_BIG, stats=stats) == len(hits)
    assert stats.queries == chunks + stats.snapshot_reads  # one count per chunk, at one snapshot if several
    assert stats.snapshot_reads <= (chunks > 1)
    stats = ReadStats()
    got = store.aggregate(where=X1_BIG, sum=["volume", "price.micros"], avg=["volume", "price.micros"], stats=stats)
    volumes = [r.data["volume"] for r in hits]
    prices = [r.data["price"]["micros"] for r in hits if "price" in r.data]
    assert got.count == len(hits) and len(prices) < len(hits)  # some ticks have no price
    assert got.sum["volume"] == pytest.approx(sum(volumes), rel=1e-12)
    assert got.avg["volume"] == pytest.approx(sum(volumes) / len(volumes), rel=1e-12)
    assert got.sum["price.micros"] == sum(prices) and isinstance(got.sum["price.micros"], int)
    assert got.avg["price.micros"] == pytest.approx(sum(prices) / len(prices), rel=1e-12)
    assert stats.queries == chunks * 3 + stats.snapshot_reads and stats.documents == 0
    # a measure other than the range field, under a != over mixed types
    ne = RANGE_CASES["ne-mixed-types"][0]
    hits = oracle(data.recs, ne)
    prices = [r.data["price"]["micros"] for r in hits if "price" in r.data]
    got = store.aggregate(where=ne, sum=["price.micros"], avg=["price.micros"])
    assert (got.count, got.sum["price.micros"]) == (len(hits), sum(prices))
    assert got.avg["price.micros"] == pytest.approx(sum(prices) / len(prices), rel=1e-12)


def test_a_count_with_only_range_conditions_counts_only_its_matches(data: Data) -> None:
    store = data.store
    ne = RANGE_CASES["ne-mixed-types"][0]
    chunks = len(store.plan(where=ne).chunks)
    stats = ReadStats()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        counted = store.count(where=ne, stats=stats)
    assert counted == len(oracle(data.recs, ne))
    assert stats.queries == chunks + stats.snapshot_reads  # no count of the whole collection
    assert stats.snapshot_reads <= (chunks > 1)


def test_bars_under_a_range_filter_equal_the_oracle(data: Data) -> None:
    interval = dt.timedelta(seconds=10)
    stats = ReadStats()
    frame = data.store.bars(
        interval="10s", by="symbol", price="price.micros", volume="volume", where=X1_BIG, stats=stats
    )
    bars: dict[tuple[str, dt.datetime], dict[str, Any]] = {}
    for r in oracle(data.recs, X1_BIG, direction="asc"):  # oldest first: open is the first in query order
        if "price" not in r.data:
            continue  # a tick without a price makes no bar
        price, volume = r.data["price"]["micros"], r.data["volume"]
        start = T0.replace(second=0) + (r.timestamp - T0.replace(second=0)) // interval * interval
        bar = bars.get((r.data["symbol"], start))
        if bar is None:
            bars[(r.data["symbol"], start)] = {
                "open": price,
                "high": price,
                "low": price,
                "close": price,
                "count": 1,
                "volume": volume,
            }
        else:
            bar.update(close=price, high=max(bar["high"], price), low=min(bar["low"], price), count=bar["count"] + 1)
            bar["volume"] += volume
    got = {
        (symbol, start.to_pydatetime()): {k: row[k] for k in ("open", "high", "low", "close", "count", "volume")}
        for (symbol, start), row in frame.iterrows()
    }
    assert got.keys() == bars.keys() and len(got) > 10
    for key, bar in bars.items():
        assert got[key] == pytest.approx(bar), key
    assert stats.documents == len(oracle(data.recs, X1_BIG))


# ------------------------------------------------------------------------------ cursors and snapshots


def test_a_cursor_of_one_range_query_is_refused_by_another(data: Data) -> None:
    store = data.store
    page = store.query(where=X1_BIG, limit=5)
    assert page.cursor is not None
    for other in (
        [("exchange", "==", "X1"), ("volume", ">=", 2500)],  # another bound
        [("exchange", "==", "X1"), ("volume", ">", 1000)],  # another operator
        [("exchange", "==", "X2"), ("volume", ">=", 1000)],  # another equality value
    ):
        with pytest.raises(CursorError, match="different query"):
            store.query(where=other, limit=5, cursor=page.cursor)
    with pytest.raises(CursorError, match="different query"):
        store.query(where=X1_BIG, limit=5, cursor=page.cursor, direction="asc")
    series = store.query(where={"symbol": "HOT"}, limit=5)
    assert series.cursor is not None
    with pytest.raises(CursorError, match="different query"):  # the series shape's cursor on its ranged twin
        store.query(where=[("symbol", "==", "HOT"), ("volume", "<", 5000)], limit=5, cursor=series.cursor)
    assert ids(store.query(where=X1_BIG, limit=5, cursor=page.cursor)) == ids(oracle(data.recs, X1_BIG)[5:10])


def test_a_read_time_snapshot_reads_the_same_on_both_plans(data: Data) -> None:
    store, at = data.store, data.snapshot
    for where in ({"symbol": "HOT"}, X1_BIG):
        then, now = oracle(data.before, where), oracle(data.recs, where)
        assert len(now) == len(then) + LATE_TICKS  # every late tick matches both
        assert ids(store.iter_ticks(where=where, read_time=at)) == ids(then)
        assert follow(store, 80, where=where, read_time=at) == ids(then)
        assert ids(store.iter_ticks(where=where)) == ids(now)
        assert store.count(where=where, read_time=at) == len(then)


# ------------------------------------------------------------------------------ the async store


def test_the_async_store_pages_and_latest_equal_the_oracle(data: Data, request: pytest.FixtureRequest) -> None:
    series = {"symbol": "HOT"}

    async def run() -> tuple[list[Any], list[Any], Any, ReadStats]:
        async with async_twin(data.store, request) as client:
            astore = AsyncTimeSeriesStore(client, data.store.spec)
            pages: list[Any] = []
            ranged: list[Any] = []
            for out, where, limit, direction in ((pages, series, 30, "asc"), (ranged, X1_BIG, 13, "desc")):
                cursor = None
                for _ in range(2):
                    page = await astore.query(where=where, limit=limit, direction=direction, cursor=cursor)
                    out.append(page)
                    cursor = page.cursor
            stats = ReadStats()
            latest = await astore.latest(by="symbol", values=["HOT", "ZZZ"], stats=stats)
            return pages, ranged, latest, stats

    pages, ranged, latest, stats = asyncio.run(run())
    assert [t for p in pages for t in ids(p)] == ids(oracle(data.recs, series, direction="asc")[:60])
    assert all(p.stats.queries == 1 and p.stats.documents == 31 for p in pages)
    assert [t for p in ranged for t in ids(p)] == ids(oracle(data.recs, X1_BIG)[:26])
    sync = data.store.query(where=X1_BIG, limit=13, cursor=ranged[0].cursor)
    assert ids(sync) == ids(ranged[1]) and sync.cursor == ranged[1].cursor  # the same cursors
    assert latest.loc["HOT", "n"] == newest(data.recs, "HOT").data["n"]  # type: ignore[union-attr]
    assert pd.isna(latest.loc["ZZZ", "timestamp"]) and stats.queries == 2 + stats.snapshot_reads <= 3
