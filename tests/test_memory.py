"""The memory backend (tsstore.memory) held to the emulator's answers.

One module fixture writes the same ticks to a database of the emulator (through a Native-mode
store) and to a memory database (the documents the emulator stored, sent through the memory
transport); then the same asks (chunk fetches of real plans, counts, aggregations, census asks,
document asks) are answered on both, Native mode's answers against MemoryAnswers, and compared
exactly. Pure tests without the emulator check the value order and the reads at a time.
"""

from __future__ import annotations

import datetime as dt
import functools
import random
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from google.api_core import exceptions as gexc
from google.cloud.firestore_v1.base_query import FieldFilter

from tsstore import SeriesSpec, TimeSeriesStore
from tsstore.asks import AddToDocs, CreateDoc, DeleteDoc, FindDocs, GetDoc, SetDoc, SumDocs, UpdateDoc
from tsstore.census_asks import CountAll, CountRange, CountValue, FirstValue
from tsstore.late import WATERMARKS, WRITERS, marks_path
from tsstore.memory import MemoryAnswers
from tsstore.memory.answers import MemoryHorizons
from tsstore.memory.database import MemoryDatabase, Query, Write
from tsstore.read.chunks import ChunkTicks
from tsstore.read.plan import plan_query
from tsstore.spec import QueryShape, shards_for
from tsstore.native_mode import NativeAnswers
from tsstore.verbs.reading import clock_probe
from tsstore.verbs.request import Aggregate, Count, Documents

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
#: Values of one field of every type, in Firestore's order (a missing field is never returned).
MIXED = [None, False, True, float("-inf"), -3, 1, 1.5, 2, T0, T0 + dt.timedelta(seconds=1), "", "a", "b", b"", b"a",
         [1], [1, 2], {"a": 1}, {"b": 0}]  # fmt: skip


def spec(collection: str, shards: int) -> SeriesSpec:
    both = ("desc", "asc")
    return SeriesSpec(
        collection,
        shards=shards_for(shards * 500),
        shapes=[QueryShape("symbol", both), QueryShape((), both), QueryShape("symbol", both, ranges="volume"),
                QueryShape((), both, ranges="mixed"), QueryShape("venue", both, series_rate=5.0)],  # fmt: skip
        key_fields=["symbol", "n"],
        measures=["price.micros", "volume"],
    )


def rows(n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    made = []
    for i in range(n):
        row: dict[str, Any] = {
            "symbol": rng.choice(["AAA", "BBB", "CCC", "DDD"]),
            "venue": rng.choice(["V1", "V2"]),  # a series shape's: read as one query, no shard filter
            "n": i,
            "timestamp": T0 + dt.timedelta(seconds=rng.randrange(60)),  # 1.5 to 2 ticks a second: ties
            "price": {"micros": rng.randrange(10**11, 10**12)},  # sums beyond 2**53: exact only as integers
            "volume": rng.randrange(1, 50) * 100 if i % 7 else 2.5,
            "mixed": MIXED[i % len(MIXED)],
        }
        if i % 11 == 0:
            del row["volume"]
        if i % 13 == 0:
            del row["mixed"]
        made.append(row)
    return made


class Kind:
    def __init__(self, name: str) -> None:
        self.id = name


#: Chunked reads: (shards, query options, after the k-th tick of the first chunk (None: none), limit).
READS: list[tuple[int, dict[str, Any], int | None, int | None]] = [
    (3, {}, None, None),
    (3, {"direction": "asc", "start": T0 + dt.timedelta(seconds=20), "end": T0 + dt.timedelta(seconds=70)}, 5, 9),
    (3, {"where": {"symbol": "AAA"}, "columns": ["symbol", "price.micros"]}, None, 12),
    (3, {"where": [("mixed", ">", 1)], "direction": "asc"}, None, None),
    (3, {"where": [("mixed", "!=", "a")]}, 3, 40),
    (3, {"where": [("mixed", "<", "zz"), ("mixed", ">=", "")]}, 2, None),
    (40, {"where": {"symbol": ["AAA", "CCC"]}}, None, None),
    (40, {"where": {"symbol": ["BBB", "DDD"]}, "direction": "asc"}, 4, 6),
    (40, {"where": [("symbol", "==", "BBB"), ("volume", ">=", 2000)], "direction": "asc"}, 2, None),
    (40, {"where": [("symbol", "in", ["AAA", "BBB"]), ("volume", "<", 1000)], "columns": ["volume"]}, None, None),
    (40, {"start": T0 + dt.timedelta(seconds=45)}, 1, 3),
    (40, {"where": {"venue": "V2"}, "direction": "asc"}, 7, 5),
]

#: The reads also read at the time before the later write (their first chunk).
AS_OF = (0, 1, 6, 8)

#: (shards, query options, the measure aggregated, or None for a count).
AGGREGATES: list[tuple[int, dict[str, Any], str | None]] = [
    (3, {}, None),
    (3, {"where": {"symbol": "AAA"}}, "volume"),
    (3, {"where": {"symbol": "AAA"}}, "price.micros"),
    (3, {"start": T0 + dt.timedelta(hours=5)}, "volume"),  # nothing: a sum of 0, no average
    (40, {"where": {"symbol": ["AAA", "CCC"]}}, "volume"),
    (40, {"where": [("symbol", "==", "BBB"), ("volume", ">=", 2000)]}, None),
]


def aggregation(plan: Any, chunk: tuple[str, ...], measure: str | None) -> Any:
    if measure is None:
        return Count(ChunkTicks(plan, chunk), read_time=None)
    wanted = (("sum", "s", measure), ("avg", "a", measure), ("count", "n", None))
    return Aggregate(ChunkTicks(plan, chunk, also_by=measure), wanted, read_time=None)


def census(declared: SeriesSpec) -> tuple[list[Any], list[Any]]:
    """Census asks: counts (of everything, of a value, of ranges of values) and first values."""
    values = declared.shards
    counts = [CountAll(), CountValue(values[3]), CountValue(values[5], since=T0 + dt.timedelta(seconds=30)),
              CountRange(None, values[0]), CountRange(values[0], values[9]), CountRange(values[-1], None)]  # fmt: skip
    names = [FirstValue(None, None), FirstValue(values[0], values[9]), FirstValue(None, "s1"), FirstValue("zz", None)]
    return counts, names


def ticks_of(fetched: Iterator[Any]) -> list[tuple[Any, ...]]:
    return [(t.id, t.timestamp, t.data) for t in fetched]


def docs_of(docs: list[Any]) -> list[tuple[Any, ...]]:
    return [(d.id, d.data) for d in docs]


def answered(call: Any) -> Any:
    """What ``call`` answers, a fetch's ticks read to the end."""
    got = call()
    return list(got) if isinstance(got, Iterator) else got


@pytest.fixture(scope="module")
def both(tsstore_emulator: Any) -> Iterator[dict[str, Any]]:
    """The same ticks sent to a database of the emulator and to a memory database (each
    backend's bulk send), for a spec of 3 shards and one of 40; each side's answers and its
    time before one later write (a tick moved, one deleted, one added); and ``recorded``: the
    emulator's answers to every ask of READS, AGGREGATES and the census, asked together on 8
    threads."""
    client = tsstore_emulator.client(database=f"memory-{random.randrange(10**9)}")
    memory = MemoryDatabase()
    made: dict[str, Any] = {"client": client, "memory": memory}
    for shards, n in ((3, 90), (40, 120)):
        declared = spec(f"m{shards}", shards)
        store = TimeSeriesStore(client, declared)
        native, mine = NativeAnswers(client, declared, fast=True), MemoryAnswers(memory, declared)
        values = declared.shards
        docs = [(f"t{i:03d}", {**row, "shard": values[i % len(values)]}) for i, row in enumerate(rows(n, shards))]
        for answers, kind in ((native, client.collection(declared.collection)), (mine, Kind(declared.collection))):
            send, _ = answers.transport(kind, timeout=60.0)  # each backend's bulk send
            assert send([(doc_id, data, True) for doc_id, data in docs]) == [(0, "")] * len(docs)
        probe = clock_probe(declared)
        before = {"native": native.answer(probe).read_time, "memory": mine.answer(probe).read_time}
        late = {**docs[0][1], "volume": 9900, "timestamp": T0 + dt.timedelta(seconds=30)}
        later = [(docs[0][0], late, False), (docs[1][0], None, False), ("zz-added", {**late, "n": 10**6}, True)]
        for answers, kind in ((native, client.collection(declared.collection)), (mine, Kind(declared.collection))):
            send, _ = answers.transport(kind, timeout=60.0)
            assert send(later) == [(0, "")] * 3
        made[shards] = {"spec": declared, "store": store, "native": native, "memory": mine, "before": before}
    asks: dict[Any, Any] = {}
    for i, (shards, options, after, limit) in enumerate(READS):
        side = made[shards]
        plan = plan_query(side["spec"], **options)
        fetch, chunk = side["native"].fetcher(plan), plan.chunks[0]
        for c in plan.chunks:
            asks["read", i, c] = functools.partial(fetch, c, None, None, None)
        if i in AS_OF:
            asks["before", i] = functools.partial(fetch, chunk, None, None, side["before"]["native"])
        if after is not None:
            position = plan.key(list(side["memory"].fetcher(plan)(chunk, None, None, None))[after])
            asks["after", i] = functools.partial(fetch, chunk, position, limit, None)
    for i, (shards, options, measure) in enumerate(AGGREGATES):
        plan = plan_query(made[shards]["spec"], **options)
        for c in plan.chunks:
            native = made[shards]["native"]
            asks["aggregate", i, c] = functools.partial(native.answer, aggregation(plan, c, measure))
    counts, names = census(made[40]["spec"])
    for over in counts:
        asks["count", over] = functools.partial(made[40]["native"].answer, Count(over, read_time=None))
    for over in names:
        asks["names", over] = functools.partial(made[40]["native"].answer, Documents(over, read_time=None))
    with ThreadPoolExecutor(max_workers=8) as pool:
        futures = {key: pool.submit(answered, call) for key, call in asks.items()}
        made["recorded"] = {key: future.result() for key, future in futures.items()}
    yield made
    for shards in (3, 40):
        made[shards]["store"].close()
    client.close()


@pytest.mark.parametrize("case", range(len(READS)))
def test_chunk_fetches_match(both: dict[str, Any], case: int) -> None:
    shards, options, after, limit = READS[case]
    side, recorded = both[shards], both["recorded"]
    plan = plan_query(side["spec"], **options)
    assert shards == 3 or len(plan.chunks) > 1 or plan.series
    fetch = side["memory"].fetcher(plan)
    for chunk in plan.chunks:
        whole = ticks_of(fetch(chunk, None, None, None))
        assert whole == ticks_of(recorded["read", case, chunk])
        if limit is not None:
            assert ticks_of(fetch(chunk, None, limit, None)) == whole[:limit]
    chunk = plan.chunks[0]
    whole = ticks_of(fetch(chunk, None, None, None))
    if after is not None:
        position = plan.key(list(fetch(chunk, None, None, None))[after])
        got = ticks_of(fetch(chunk, position, limit, None))
        assert got == ticks_of(recorded["after", case]) == whole[after + 1 :][:limit]
    if case in AS_OF:  # as of the time before the later write: the write unseen
        assert ticks_of(fetch(chunk, None, None, side["before"]["memory"])) == ticks_of(recorded["before", case])
    assert any(recorded["read", case, c] for c in plan.chunks)  # not all empty


def test_reads_before_a_later_write_differ(both: dict[str, Any]) -> None:
    side = both[3]
    plan = plan_query(side["spec"])
    [chunk] = plan.chunks
    fetch = side["memory"].fetcher(plan)
    then, now = ticks_of(fetch(chunk, None, None, side["before"]["memory"])), ticks_of(fetch(chunk, None, None, None))
    assert len(now) == len(then) and then != now  # one moved, one deleted, one added
    assert "zz-added" in {t[0] for t in now} - {t[0] for t in then}


@pytest.mark.parametrize("case", range(len(AGGREGATES)))
def test_counts_and_aggregates_match(both: dict[str, Any], case: int) -> None:
    shards, options, measure = AGGREGATES[case]
    plan = plan_query(both[shards]["spec"], **options)
    for chunk in plan.chunks:
        memory = both[shards]["memory"].answer(aggregation(plan, chunk, measure))
        native = both["recorded"]["aggregate", case, chunk]
        if measure is not None and native["n"] == 0:
            # The emulator answers every aggregation of nothing 0.0; Firestore (and the memory
            # backend) a count and a sum 0, an average None.
            assert (memory, native) == ({"s": 0, "a": None, "n": 0}, {"s": 0.0, "a": 0.0, "n": 0.0})
            continue
        assert memory == native and type(memory) is type(native)
        if isinstance(memory, dict):
            assert {k: type(v) for k, v in memory.items()} == {k: type(v) for k, v in native.items()}


def test_census_asks_match(both: dict[str, Any]) -> None:
    side, recorded = both[40], both["recorded"]
    counts, names = census(side["spec"])
    for over in counts:
        assert side["memory"].answer(Count(over, read_time=None)) == recorded["count", over]
    for over in names:
        assert docs_of(side["memory"].answer(Documents(over, read_time=None))) == docs_of(recorded["names", over])
    assert any(recorded["names", over] for over in names) and any(recorded["count", over] for over in counts)


def labelled(value: Any, seen: dict[dt.datetime, str]) -> Any:
    """``value`` with every time of a commit or read (not a tick's) named by its rank of first
    appearance, so two databases' answers compare: equal times equal names."""
    if isinstance(value, dt.datetime) and value > T0 + dt.timedelta(days=1):
        return seen.setdefault(value, f"t{len(seen)}")
    if isinstance(value, tuple) and hasattr(value, "__dataclass_fields__"):
        return labelled(value.__dict__, seen)
    if hasattr(value, "__dataclass_fields__"):
        return {k: labelled(v, seen) for k, v in vars(value).items()}
    if isinstance(value, dict):
        return {k: labelled(v, seen) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(labelled(v, seen) for v in value)
    return value


def test_document_asks_match(both: dict[str, Any]) -> None:
    """Every document ask, refused preconditions included, answered alike (times compared by
    which earlier time they equal)."""
    answers = {name: both[3][name] for name in ("native", "memory")}
    got: dict[str, list[Any]] = {}
    for name, side in answers.items():
        out: list[Any] = []

        def put(answer: Any) -> Any:
            out.append(answer)
            return answer

        first = put(side.answer(SetDoc("docs/a", {"x": 1, "m": {"p": 1, "q": 2}}, "set")))
        put(side.answer(SetDoc("docs/a", {"x": 1, "m": {"p": 1, "q": 2}}, "set again, the same")))
        put(side.answer(SetDoc("docs/a", {"m": {"q": 3}, "y": "z"}, "merge", merge=True)))
        put(side.answer(GetDoc("docs/a", "get")))
        stamp = SetDoc("stamps/a", {"m": {"q": 3}}, "merge, stamped", merge=True, server_time=("at",))
        put(side.answer(stamp))
        put(side.answer(GetDoc("stamps/a", "get the stamped one")))
        put(side.answer(GetDoc("docs/a", "get some", fields=("m.q", "y", "nothing"))))
        put(side.answer(GetDoc("docs/none", "get a missing one")))
        put(side.answer(CreateDoc("docs/a", {"x": 2}, "create an existing one")))
        made = put(side.answer(CreateDoc("docs/b", {"x": 2, "k": "b"}, "create")))
        put(side.answer(UpdateDoc("docs/a", {"x": 3}, first, "update, stale")))
        written = put(side.answer(UpdateDoc("docs/b", {"x": 3, "m.n": [1, 2]}, made, "update")))
        put(side.answer(DeleteDoc("docs/b", "delete, stale", written=made)))
        put(side.answer(FindDocs("docs", "find", where=(("x", ">=", 1),))))
        put(side.answer(FindDocs("docs", "find one", where=(("k", "==", "b"), ("x", "in", [3, 4])))))
        put(side.answer(DeleteDoc("docs/b", "delete", written=written)))
        put(side.answer(UpdateDoc("docs/b", {"x": 4}, written, "update a deleted one")))
        put(side.answer(DeleteDoc("docs/b", "delete a deleted one, unconditionally")))
        put(side.answer(AddToDocs((("sums/a", "n", 2), ("sums/b", "n", 5)), "add", receipt="receipts/r1")))
        put(side.answer(AddToDocs((("sums/a", "n", 2),), "add again", receipt="receipts/r1")))
        put(side.answer(AddToDocs((("sums/a", "n", 3), ("sums/c", "n", 1.5)), "add without receipt")))
        put(side.answer(FindDocs("sums", "sums")))
        put(side.answer(SumDocs("sums", "n", "sum")))
        put(side.answer(FindDocs("receipts", "receipts")))
        got[name] = out
    # A server time is the commit's time in Firestore (and here); the emulator stamps it in
    # milliseconds a few before its commit time.
    stamped = {name: out[5].data.pop("at") for name, out in got.items()}
    assert stamped["memory"] == got["memory"][4]
    assert got["native"][4] - dt.timedelta(seconds=1) < stamped["native"] <= got["native"][4]
    assert labelled(got["memory"], {}) == labelled(got["native"], {})
    mine = got["memory"]
    assert [mine[i] for i in (8, 10, 12, 16, 19)] == [None, None, False, None, False]  # refused, as Firestore refuses
    assert mine[1] == mine[0] and mine[22][0] == 11.5 and mine[7].data is None


def test_value_order_and_filters_match(both: dict[str, Any]) -> None:
    """Firestore's order of values of every type, and its filters over them, on a raw query."""
    client, memory = both["client"], both["memory"]
    for i, value in enumerate([*MIXED, None, 2.0, "a"]):
        client.collection("mixed").document(f"d{i:02d}").set({"v": value})
        memory.commit([Write(f"mixed/d{i:02d}", {"v": value})])
    client.collection("mixed").document("none").set({"w": 1})
    memory.commit([Write("mixed/none", {"w": 1})])
    cases = [((), (("v", False),)), ((), (("v", True),)), ((("v", ">", 1),), ()), ((("v", "!=", "a"),), ()),
             ((("v", "==", None),), ()), ((("v", "in", [1, "a", b"a"]),), ()), ((("v", "<", "b"),), (("v", True),)),
             ((("v", ">=", [1]),), ()), ((("v", "not-in", [2, None]),), ())]  # fmt: skip
    for filters, orders in cases:
        query = client.collection("mixed")
        for f, op, value in filters:
            query = query.where(filter=FieldFilter(f, op, value))
        for f, desc in orders:
            query = query.order_by(f, direction="DESCENDING" if desc else "ASCENDING")
        emulator = [d.id for d in query.stream()]
        assert [d.id for d in memory.run(Query("mixed", filters, orders))[0]] == emulator, (filters, orders)
    refused = [(("v", "in", list(range(6))), ("w", "in", list(range(6)))), (("v", "in", list(range(31))),),
               (("v", "not-in", list(range(11))),), (("v", "not-in", [1]), ("w", "in", [1, 2])),
               (("v", "!=", 1), ("w", "not-in", [1])), (("v", "in", []),)]  # fmt: skip
    for filters in refused:
        query = client.collection("mixed")
        for f, op, value in filters:
            query = query.where(filter=FieldFilter(f, op, value))
        with pytest.raises(gexc.InvalidArgument) as emulated:
            list(query.stream())
        with pytest.raises(gexc.InvalidArgument) as mine:
            memory.run(Query("mixed", filters))
        assert mine.value.message in emulated.value.message
    with pytest.raises(gexc.InvalidArgument, match="'array-contains' is not served"):
        memory.run(Query("mixed", (("v", "array-contains", 1),)))


# ---------------------------------------------------------------- without the emulator


class Clock:
    """A time source a test moves: microseconds since the epoch."""

    def __init__(self) -> None:
        self.us = 1_800_000_000_000_000

    def __call__(self) -> int:
        return self.us


def test_commits_are_strictly_later_and_reads_see_their_time() -> None:
    clock = Clock()
    db = MemoryDatabase(now=clock)
    [first] = db.commit([Write("c/a", {"v": 1})])
    [second] = db.commit([Write("c/a", {"v": 2})])  # the clock stood still: a microsecond later
    assert second - first == dt.timedelta(microseconds=1)
    [third] = db.commit([Write("c/a", None)])
    assert [db.get("c/a", read_time=t)[0] for t in (first - dt.timedelta(microseconds=1), third)] == [None, None]
    seen = [db.get("c/a", read_time=t)[0] for t in (first, second)]
    kept = [(f.data, f.update_time, f.create_time) for f in seen if f]
    assert kept == [({"v": 1}, first, first), ({"v": 2}, second, first)]
    [again] = db.commit([Write("c/a", {"v": 3})])
    assert db.commit([Write("c/a", {"v": 3})]) == [again]  # a write that changes nothing keeps the time
    assert db.commit([Write("c/a", {"v": 3.0})]) != [again]  # a float is not the integer
    assert db.get("c/a")[0].create_time == again  # type: ignore[union-attr]  # made anew after the delete
    assert [f.data for f in db.run(Query("c"), read_time=second)[0]] == [{"v": 2}]


def test_versions_are_kept_an_hour_and_no_read_is_ahead() -> None:
    clock = Clock()
    db = MemoryDatabase(now=clock)
    [first] = db.commit([Write("c/a", {"v": 1})])
    clock.us += 30 * 60 * 10**6
    db.commit([Write("c/a", {"v": 2})])
    assert db.get("c/a", read_time=first)[0].data == {"v": 1}  # type: ignore[union-attr]
    clock.us += 31 * 60 * 10**6
    with pytest.raises(gexc.FailedPrecondition, match="read_time"):
        db.get("c/a", read_time=first)
    with pytest.raises(gexc.InvalidArgument, match="cannot be in the future"):
        db.run(Query("c"), read_time=dt.datetime.fromtimestamp(clock.us / 1e6 + 1, UTC))
    a_read = db.get("c/a")[1]
    assert db.commit([Write("c/b", {})])[0] > a_read  # a commit after a read is later than the read


def test_a_read_at_a_time_holds_and_old_deletions_go() -> None:
    clock = Clock()
    db = MemoryDatabase(now=clock)
    db.commit([Write("c/a", {"v": 1})])
    db.commit([Write("c/a", None)])
    clock.us += 2 * 3600 * 10**6
    [made] = db.commit([Write("c/a", {"v": 2})])  # the deletion, two hours old, is dropped; the document stays
    assert db.get("c/a")[0].create_time == made  # type: ignore[union-attr]
    db.commit([Write("c/a", {"v": 3})])
    clock.us += 10
    now = dt.datetime.fromtimestamp(0, UTC) + dt.timedelta(microseconds=clock.us)
    assert db.get("c/a", read_time=now)[0].data == {"v": 3}  # type: ignore[union-attr]
    [later] = db.commit([Write("c/a", {"v": 4})])  # the clock stood still: after the read's time
    assert later > now and db.get("c/a", read_time=now)[0].data == {"v": 3}  # type: ignore[union-attr]


def test_values_are_kept_as_the_client_reads_them() -> None:
    db = MemoryDatabase()
    zone = dt.timezone(dt.timedelta(hours=2))
    kept = {"t": dt.datetime(2026, 1, 1, 12, tzinfo=zone), "naive": dt.datetime(2026, 1, 1), "tuple": (1, (2,)),
            "map": {"x": [1, {"y": b"z"}]}}  # fmt: skip
    db.commit([Write("c/a", kept)])
    kept["map"]["x"].append(2)  # nothing the caller keeps changes what is stored
    [found] = db.run(Query("c"))[0]
    assert found.data == {"t": dt.datetime(2026, 1, 1, 10, tzinfo=UTC), "naive": dt.datetime(2026, 1, 1, tzinfo=UTC),
                          "tuple": [1, [2]], "map": {"x": [1, {"y": b"z"}]}}  # fmt: skip
    assert found.data["t"].tzinfo is dt.timezone.utc


def test_sums_are_exact_integers_until_a_double_joins() -> None:
    db = MemoryDatabase()
    big = 2**53 + 1
    db.commit([Write("c/a", {"v": big}), Write("c/b", {"v": 1}), Write("c/c", {"v": "no number"})])
    wanted = [("sum", "s", "v"), ("avg", "a", "v"), ("count", "n", None)]
    assert db.aggregate(Query("c"), wanted)[0] == {"s": big + 1, "a": (big + 1) / 2, "n": 3}
    db.commit([Write("c/d", {"v": 0.5})])
    total = db.aggregate(Query("c"), wanted)[0]["s"]
    assert isinstance(total, float)
    assert db.aggregate(Query("empty"), wanted)[0] == {"s": 0, "a": None, "n": 0}


def test_a_writers_side_keeps_leases_horizons_and_marks() -> None:
    """The late guard's questions answered on the memory database (the series counters:
    tests/test_backend.py)."""
    db = MemoryDatabase()
    declared = spec("ticks", 3)
    side = MemoryAnswers(db, declared).side
    horizons = MemoryHorizons(db, "ticks")
    leased = horizons.put_lease({"busy_since": T0})
    [lease] = db.run(Query(WRITERS))[0]
    assert lease.update_time == leased and side.clock().now() is not None
    bucket = T0 + dt.timedelta(hours=1)
    db.commit([Write(f"{WATERMARKS}/bars", {"source": "ticks", "interval_seconds": 60, "watermark": bucket,
                                            "shards": ["s0"]}),  # fmt: skip
               Write(f"{WATERMARKS}/other", {"source": "elsewhere", "interval_seconds": 60}),
               Write("bars/b1", {"shard": "s0", "timestamp": T0})])  # fmt: skip
    [horizon] = horizons.horizons()
    assert (horizon.name, horizon.horizon, horizon.shards) == ("bars", bucket, ("s0",))
    probe = horizon.probe(T0, shard_field="shard", timestamp_field="timestamp")
    assert probe is not None and horizons.holds_bar(probe)
    later = horizon.probe(bucket, shard_field="shard", timestamp_field="timestamp")
    assert later is not None and not horizons.holds_bar(later)
    horizons.put_marks({"bars": [T0, bucket]})
    assert [f.data["bucket"] for f in db.run(Query(marks_path("bars")))[0]] == [T0, bucket]
    horizons.drop_lease()
    assert db.run(Query(WRITERS))[0] == [] and side.late_guard(declared) is not None
