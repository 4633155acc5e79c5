"""The store against the real Firestore emulator: writes, fan-out queries, paging, frames."""

from __future__ import annotations

import datetime as dt
import random
import threading
import uuid
from typing import Any

import pandas as pd
import pytest
from google.cloud import firestore

from tests.shared import MEMORY, MODES, mode_client, stored_ids
from tests.shared import NATIVE as NATIVE_MODE
from tsstore.memory import MemoryDatabase, Query
from tsstore import (
    ConfigError,
    CursorError,
    QueryError,
    QueryShape,
    RecordError,
    SeriesSpec,
    SnapshotExpiredError,
    Tick,
    TimeSeriesStore,
    WriteOptions,
)
from tsstore.local.synthetic import INSTRUMENTS, SEED_INSTRUMENTS, trading_day
from tsstore.ticks import sort_key
from tsstore.times import plain_datetime

UTC = dt.timezone.utc
FAST = WriteOptions(ramp=False, max_ops_per_second=50_000)
BOTH = ("desc", "asc")
TICKS, MILLISECONDS, PAGE_SIZE = 360, 60, 150  # the module's shared data set (see `big`)


def seed_spec(collection: str) -> SeriesSpec:
    return SeriesSpec(collection, shapes=["instrumentType", "exchange", "price.currency"])


def get(data: dict[str, Any], path: str) -> Any:
    for part in path.split("."):
        data = data.get(part) if isinstance(data, dict) else None  # type: ignore[assignment]
    return data


def test_seed_scenario(client: firestore.Client, collection_name: str) -> None:
    """Seed 004: three instruments, three 'newest 5' queries, exactly the expected documents."""
    store = TimeSeriesStore(client, seed_spec(collection_name))
    result = store.write(SEED_INSTRUMENTS)
    assert result.count == 3 and len(set(result.ids)) == 3
    expected = {
        "instrumentType": ("commonstock", ["BBB", "AAA"]),
        "exchange": ("EXCHG1", ["AAA", "Index1 ETF"]),
        "price.currency": ("USD", ["AAA", "Index1 ETF"]),
    }
    by_symbol = {r["symbol"]: r for r in SEED_INSTRUMENTS}
    for field, (value, symbols) in expected.items():
        page = store.query(where=[(field, "==", value)], limit=5)
        assert [t.data["symbol"] for t in page] == symbols
        assert page.cursor is None
        for t in page:
            stored = dict(t.data)
            assert stored.pop("shard") in ("x", "y", "z")
            assert stored == by_symbol[t.data["symbol"]]  # written unaltered
    # every document carries a shard from the spec, and raw Firestore sees the same 3 documents
    raw = list(client.collection(collection_name).stream())
    assert sorted(d.id for d in raw) == sorted(result.ids)
    assert {d.get("shard") for d in raw} <= {"x", "y", "z"}


def stored_ticks(client: Any, kind: str) -> list[Tick]:
    """Every tick of ``kind`` read back through the client's own public API, whichever mode it
    speaks: the oracle's data, decoded by the client rather than by tsstore."""
    if isinstance(client, firestore.Client):
        return [Tick(doc.id, doc.get("timestamp"), doc.to_dict() or {}) for doc in client.collection(kind).stream()]
    if isinstance(client, MemoryDatabase):
        return [Tick(f.id, plain_datetime(f.data["timestamp"]), f.data) for f in client.run(Query(kind))[0]]

    def plain(value: Any) -> Any:  # the public client's Entity and nanosecond times, as plain values
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, dt.datetime):
            return plain_datetime(value)
        return [plain(v) for v in value] if isinstance(value, list) else value

    return [Tick(e.key.name, plain(e["timestamp"]), plain(e)) for e in client.query(kind=kind).fetch()]


#: What the engine decides alike on every mode (iteration, frames, cursors refused, snapshots
#: named): Native mode and the memory database only, for the suite's time.
NATIVE = pytest.mark.parametrize("big", [NATIVE_MODE, MEMORY], indirect=True)


@pytest.fixture(scope="module", params=MODES)
def big(request: pytest.FixtureRequest, uses_emulator: None) -> dict[str, Any]:
    """360 ticks over 40 shards (two chunks), written once for the module's tests, in each
    database mode (:data:`tests.shared.MODES`)."""
    mode = request.param
    client = mode_client(request, mode, f"big-{uuid.uuid4().hex[:12]}")
    spec = SeriesSpec(
        "ticks",
        shards=[f"s{i:02d}" for i in range(40)],
        shapes=[QueryShape(f, BOTH) for f in (("symbol",), ("exchange",), ("exchange", "instrumentType"))],
        key_fields=["symbol"],
        columns={"symbol": "string", "price.currency": "string", "price.micros": "Int64"},
    )
    # page_size 150: a limit of up to 150 is one lean page, a larger one (or none) streams
    store = TimeSeriesStore(client, spec, write_options=FAST, page_size=PAGE_SIZE)
    # 360 ticks of 6 instruments squeezed into 60 distinct milliseconds, so equal
    # timestamps are common (6 per millisecond) while (symbol, timestamp) stays unique.
    # (The emulator scans the collection once per `in` value of every chunk query, so every
    # read here costs in proportion to the collection: it is kept just big enough for the
    # pages, chunks and ties the tests need.)
    rows = []
    base = dt.datetime(2019, 1, 2, 9, tzinfo=UTC)
    for i in range(TICKS):
        symbol, exchange, currency, kind, micros = INSTRUMENTS[i // MILLISECONDS]
        rows.append(
            {
                "symbol": symbol,
                "exchange": exchange,
                "instrumentType": kind,
                "price": {"currency": currency, "micros": micros + i},
                "timestamp": base + dt.timedelta(milliseconds=(i * 7919) % MILLISECONDS),
            }
        )
    result = store.write(rows)
    stored = stored_ticks(client, "ticks")
    assert len(stored) == len(rows) == result.count
    yield {"store": store, "ticks": stored, "spec": spec, "mode": mode}
    store.close()
    client.close()


def oracle(
    ticks: list[Tick], where: dict[str, Any], start: Any, end: Any, descending: bool, limit: int | None
) -> list[Tick]:
    def ok(t: Tick) -> bool:
        for f, v in where.items():
            if isinstance(v, list) and get(t.data, f) not in v:
                return False
            if not isinstance(v, list) and get(t.data, f) != v:
                return False
        return (start is None or t.timestamp >= start) and (end is None or t.timestamp < end)

    got = sorted(filter(ok, ticks), key=sort_key, reverse=descending)
    return got if limit is None else got[:limit]


def test_big_plan_has_two_chunks(big: dict[str, Any]) -> None:
    plan = big["store"].plan()
    assert [len(c) for c in plan.chunks] == [20, 20]
    assert len(big["ticks"]) == TICKS == 360
    assert len({t.timestamp for t in big["ticks"]}) == MILLISECONDS == 60  # many ties


def test_random_queries_equal_the_oracle(big: dict[str, Any]) -> None:
    store, ticks = big["store"], big["ticks"]
    rng = random.Random(5)
    symbols = sorted({t.data["symbol"] for t in ticks})
    exchanges = sorted({t.data["exchange"] for t in ticks})
    base = dt.datetime(2019, 1, 2, 9, tzinfo=UTC)
    for _ in range(8 if big["mode"] == "datastore" else 20):  # Datastore mode: fewer (the suite's time)
        kind = rng.randrange(4)
        where: dict[str, Any] = {}
        if kind == 1:
            where = {"symbol": rng.sample(symbols, rng.randint(1, 4))}
        elif kind == 2:
            where = {"exchange": rng.choice(exchanges)}
        elif kind == 3:
            where = {"exchange": rng.sample(exchanges, 2), "instrumentType": "commonstock"}
        half = MILLISECONDS // 2
        start = base + dt.timedelta(milliseconds=rng.randrange(half)) if rng.random() < 0.5 else None
        end = base + dt.timedelta(milliseconds=rng.randrange(half, MILLISECONDS)) if rng.random() < 0.5 else None
        descending = rng.random() < 0.5
        # lean pages (up to PAGE_SIZE), a limited stream (above it, more than every tick), no limit
        limit = rng.choice([None, 1, 7, 100, PAGE_SIZE, PAGE_SIZE, 3 * PAGE_SIZE])
        page = store.query(where=where, start=start, end=end, direction="desc" if descending else "asc", limit=limit)
        expected = oracle(ticks, where, start, end, descending, limit)
        assert [(t.id, t.timestamp) for t in page] == [(t.id, t.timestamp) for t in expected], (
            where,
            start,
            end,
            limit,
        )
        assert [t.data for t in page] == [t.data for t in expected]


class CountedWire:
    """A Datastore client's own generated API, passed through, counting what each RunQuery and
    Lookup returned: what Datastore mode bills (each entity read; one read for a query that
    returned none; each key looked up)."""

    def __init__(self, api: Any) -> None:
        self._api, self.billed, self._lock = api, 0, threading.Lock()  # the reader threads count together

    def run_query(self, **kwargs: Any) -> Any:
        response = self._api.run_query(**kwargs)
        with self._lock:
            self.billed += max(1, len(response.batch.entity_results))
        return response

    def lookup(self, **kwargs: Any) -> Any:
        response = self._api.lookup(**kwargs)
        with self._lock:
            self.billed += len(response.found) + len(response.missing)
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api, name)


@pytest.mark.parametrize(("direction", "where"), [("desc", {}), ("asc", {"exchange": "EXCHG1"})])
def test_paging_returns_every_document_once_in_order(
    big: dict[str, Any], direction: str, where: dict[str, Any]
) -> None:
    """Every tick once, in order, pages ending inside ties; in Datastore mode each page billed
    (counted on the wire) what its rounds bill in Native mode (ReadStats) and at most one read
    more per query: a chunk continued after a position first asks for the ticks tied with it."""
    store, ticks = big["store"], big["ticks"]
    seen: list[Tick] = []
    cursor = None
    pages = 0
    calls = store._backend.calls if big["mode"] == "datastore" else None
    wire = CountedWire(calls.api) if calls is not None else None
    if calls is not None:
        calls.api = wire
    while True:
        before = wire.billed if wire is not None else 0
        page = store.query(where=where, direction=direction, limit=PAGE, cursor=cursor)
        if wire is not None:
            billed = wire.billed - before
            assert page.stats.billed_reads <= billed <= page.stats.billed_reads + page.stats.queries, page.stats
        seen.extend(page)
        pages += 1
        if page.cursor is None:
            break
        assert len(page) == PAGE
        cursor = page.cursor
    if calls is not None:
        calls.api = wire._api  # type: ignore[union-attr]
    expected = oracle(ticks, where, None, None, direction == "desc", None)
    assert [t.id for t in seen] == [t.id for t in expected]
    assert len({t.id for t in seen}) == len(seen)
    assert pages == -(-len(expected) // PAGE)
    assert any(seen[k - 1].timestamp == seen[k].timestamp for k in range(PAGE, len(seen), PAGE))  # a page ends in a tie


PAGE = 107  # 6 ticks share each millisecond, so page boundaries fall inside ties


@NATIVE
def test_iter_ticks_reads_all_pages_lazily(big: dict[str, Any]) -> None:
    store, ticks = big["store"], big["ticks"]
    got = list(store.iter_ticks(direction="asc"))  # ~180 ticks per chunk, more than page_size: streamed
    assert [t.id for t in got] == [t.id for t in oracle(ticks, {}, None, None, False, None)]


@pytest.mark.parametrize("big", ["native"], indirect=True)  # Datastore mode has one path: the raw one
def test_fast_decoder_matches_public_client_path(big: dict[str, Any], emulator: Any) -> None:
    client = big["store"].client
    public = TimeSeriesStore(client, big["spec"], fast_wire=False)
    args = {"where": {"symbol": ["AAA", "BBB"]}, "limit": 70}  # a lean page, of 120 matches
    assert big["store"].query(**args).ticks == public.query(**args).ticks
    public.close()


@NATIVE
def test_frames_leave_the_shard_out_unless_the_columns_name_it(big: dict[str, Any]) -> None:
    store = big["store"]
    assert "shard" not in store.query_frame(limit=5).columns
    assert "shard" not in next(iter(store.stream_frames(rows=100, limit=120))).columns
    asked = store.query_frame(limit=5, columns=["shard", "symbol"])
    assert asked["shard"].str.match(r"s\d\d").all() and list(asked.columns)[-1] == "shard"
    assert "shard" in next(iter(store.stream_frames(rows=100, limit=120, columns=["shard"]))).columns


def test_projection_returns_only_the_asked_columns(big: dict[str, Any]) -> None:
    page = big["store"].query(limit=20, columns=["price.micros"])
    assert all(set(t.data) == {"timestamp", "price"} and set(t.data["price"]) == {"micros"} for t in page)
    frame = big["store"].query_frame(limit=20, columns=["price.micros"])
    assert list(frame.columns) == ["price.micros"] and str(frame["price.micros"].dtype) == "Int64"
    assert frame["price.micros"].notna().all() and len(frame) == 20


@NATIVE
def test_frames_match_ticks_and_stream_in_bounded_pieces(big: dict[str, Any]) -> None:
    store = big["store"]
    frame = store.query_frame(where={"exchange": "EXCHG1"}, direction="asc")
    ticks = list(store.iter_ticks(where={"exchange": "EXCHG1"}, direction="asc"))
    assert len(frame) == len(ticks)
    assert list(frame.index) == [t.timestamp for t in ticks]
    assert frame["price.micros"].tolist() == [t.data["price"]["micros"] for t in ticks]
    parts = list(store.stream_frames(where={"exchange": "EXCHG1"}, direction="asc", rows=70))
    assert len(parts) > 1
    assert [len(p) for p in parts[:-1]] == [70] * (len(parts) - 1)
    pd.testing.assert_frame_equal(pd.concat(parts), frame)


@NATIVE
def test_cursor_misuse_is_refused(big: dict[str, Any]) -> None:
    page = big["store"].query(where={"exchange": "EXCHG1"}, limit=5)
    with pytest.raises(CursorError):
        big["store"].query(where={"exchange": "EXCHG2"}, limit=5, cursor=page.cursor)


def test_rewriting_keyed_ticks_does_not_duplicate(client: firestore.Client, collection_name: str) -> None:
    spec = SeriesSpec(collection_name, key_fields=["symbol"])
    store = TimeSeriesStore(client, spec, write_options=FAST)
    rows = list(trading_day(120, seed=3))  # one batch, as 300 were
    first = store.write(rows)
    second = store.write(rows)  # a retry of the whole batch
    assert first.ids == second.ids
    assert len(list(client.collection(collection_name).select([]).stream())) == 120


def test_dataframe_write_round_trip(client: firestore.Client, collection_name: str) -> None:
    spec = SeriesSpec(collection_name, key_fields=["symbol"], columns={"symbol": "string", "price.micros": "Int64"})
    store = TimeSeriesStore(client, spec, write_options=FAST)
    rows = list(trading_day(50, seed=4))
    store.write(rows)
    frame = store.query_frame(direction="asc")
    other = TimeSeriesStore(
        client, SeriesSpec(collection_name + "-copy", key_fields=["symbol"], columns=spec.columns), write_options=FAST
    )
    other.write(frame)
    pd.testing.assert_frame_equal(other.query_frame(direction="asc"), frame)


def test_bad_record_stops_the_write_after_flushing_earlier_ones(client: firestore.Client, collection_name: str) -> None:
    store = TimeSeriesStore(client, SeriesSpec(collection_name, key_fields=["symbol"]), write_options=FAST)
    rows = list(trading_day(10, seed=1))
    rows[6] = dict(rows[6], timestamp=dt.datetime(2019, 1, 2, 9))  # naive
    with pytest.raises(RecordError, match=r"record 6: .*naive") as info:
        store.write(rows)
    assert info.value.index == 6
    assert len(list(client.collection(collection_name).stream())) == 6  # the six before it landed


def test_read_time_gives_one_consistent_snapshot(client: firestore.Client, collection_name: str) -> None:
    spec = SeriesSpec(collection_name, shards=[f"s{i}" for i in range(35)], key_fields=["symbol"])
    store = TimeSeriesStore(client, spec, write_options=FAST)
    rows = list(trading_day(200, seed=9))
    store.write(rows[:100])
    snapshot = store.server_time()
    store.write(rows[100:])
    assert len(store.query(read_time=snapshot)) == 100
    assert len(store.query()) == 200


def test_undeclared_shape_is_refused_before_any_rpc(client: firestore.Client, collection_name: str) -> None:
    store = TimeSeriesStore(client, seed_spec(collection_name))
    with pytest.raises(QueryError, match=r"query shape \[exchange, instrumentType\] is not declared"):
        store.query(where={"exchange": "EXCHG1", "instrumentType": "etf"})


def test_deepest_nesting_firestore_takes_is_written(client: firestore.Client, collection_name: str) -> None:
    deep: dict[str, Any] = {"v": 1}
    for _ in range(19):
        deep = {"d": deep}  # 20 nested maps: the most Firestore stores
    store = TimeSeriesStore(client, SeriesSpec(collection_name), write_options=FAST)
    [doc_id] = store.write([{"timestamp": dt.datetime(2024, 1, 1, tzinfo=UTC), "deep": deep}]).ids
    assert client.collection(collection_name).document(doc_id).get().get("deep") == deep


def test_bad_options_name_the_value(client: firestore.Client, collection_name: str) -> None:
    spec = SeriesSpec(collection_name)
    with pytest.raises(ConfigError, match=r"max_ops_per_second 0 is not allowed; give a positive integer"):
        WriteOptions(max_ops_per_second=0)
    with pytest.raises(ConfigError, match=r"page_size 0 is not allowed"):
        TimeSeriesStore(client, spec, page_size=0)
    with pytest.raises(ConfigError, match=r"spec must be a SeriesSpec, got str"):
        TimeSeriesStore(client, "instruments")  # type: ignore[arg-type]
    store = TimeSeriesStore(client, spec)
    with pytest.raises(QueryError, match=r"rows 0 is not allowed"):
        store.stream_frames(rows=0)
    with pytest.raises(
        ConfigError, match=r"naive='local': timezone policy 'local' is not allowed; use 'error', 'utc' or an IANA zone"
    ):
        store.write([{"timestamp": dt.datetime(2024, 1, 1, tzinfo=UTC)}], naive="local")  # type: ignore[arg-type]
    assert list(client.collection(collection_name).stream()) == []


@NATIVE
def test_a_read_past_the_kept_snapshot_says_how_far_it_got(big: dict[str, Any]) -> None:
    store = big["store"]
    # The emulator refuses a read_time over 7 days old (production: 1 hour without PITR).
    too_old = store.server_time() - dt.timedelta(days=8)
    with pytest.raises(
        SnapshotExpiredError, match="outlived the snapshot Firestore keeps .* before its first tick"
    ) as info:
        list(store.iter_ticks(read_time=too_old))
    assert info.value.returned == 0 and info.value.cursor is None


@NATIVE
def test_an_expired_snapshot_mid_read_names_the_position_to_continue_from(big: dict[str, Any]) -> None:
    from google.api_core import exceptions as gexc

    from tsstore.read.engine import name_stops

    store, ticks = big["store"], big["ticks"]
    plan = store.plan(direction="asc")
    ordered = list(store.iter_ticks(direction="asc"))

    def expires_after(n: int) -> Any:
        yield from ordered[:n]
        raise gexc.FailedPrecondition("The requested 'read_time' is too old.")

    with pytest.raises(SnapshotExpiredError, match="after 250 ticks, the last at") as info:
        list(name_stops(plan, expires_after(250), store.server_time()))
    assert info.value.returned == 250
    rest = list(store.iter_ticks(direction="asc", cursor=info.value.cursor))
    assert [t.id for t in ordered[:250] + rest] == [t.id for t in ordered]  # the cursor continues exactly
    assert len(ordered) == len(ticks)


def test_a_datastore_mode_write_keeps_each_tick_once_across_retries_and_overlaps(tsstore_datastore_client: Any) -> None:
    """Datastore mode's commits are atomic: a batch holding one existing tick fails as a whole
    (ALREADY_EXISTS), and the sender sorts it out by lookup: the new ticks are created, the
    old ones found present, none stored twice."""
    spec = SeriesSpec("k", key_fields=["symbol"], shards=["a", "b", "c"])
    store = TimeSeriesStore(tsstore_datastore_client, spec, write_options=FAST)
    rows = list(trading_day(1200, seed=3))
    first = store.write(rows[::2])
    second = store.write(rows)  # every batch mixes stored and new ticks
    assert (first.created, first.present) == (600, 0)
    assert (second.created, second.present, second.count) == (600, 600, 1200)
    assert sorted(stored_ids(tsstore_datastore_client, "k")) == sorted(second.ids) and len(set(second.ids)) == 1200
    assert store.count() == 1200
