"""The read engine: lean pages equal the brute-force answer on skewed data, and cost less.

Pure parts (the asks and the refill rule) without Firestore; pages on the emulator with
ticks written under explicit shard values, so that matches sit where uniform writing
would never put them.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import re
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cli import Ran
from tests.cli import tsstore as run_tsstore
from tests.shared import PAGES, SPEC, TICKS, brute_force
from tsstore import QueryShape, SeriesSpec, Tick, TimeSeriesStore, WriteOptions, plan_query
from tsstore.errors import ConfigError
from tsstore.local.emulator import emulator_client
from tsstore.read.cost import ReadStats, bills_index_entries, lean_asks, lean_refills, range_fields, refill_asks
from tsstore.read.cursor import decode_cursor
from tsstore.read.engine import LEAN_REFILLS
from tsstore.read.explain import explain
from tsstore.read.merge import merge_streams, take
from tsstore.ticks import sort_key
from tsstore.wire import database_id, server_clock

UTC = dt.timezone.utc


#: (fields with a range or inequality filter, order-by fields) -> the range fields Firestore's
#: Standard edition counts when it bills index entries, and whether it bills them.
BILLING = [
    ((), ("t",), (), False),  # ordered, nothing filtered: no range field
    (("t",), ("t",), ("t",), False),  # a time range, ordered by time: one
    (("volume",), ("t", "volume"), ("volume", "t"), True),  # a value range: the time order counts too
    (("t", "volume"), ("t", "volume"), ("t", "volume"), True),  # a value range inside a time range
    (("price", "volume"), ("t", "price", "volume"), ("price", "volume", "t"), True),
    ((), ("t", "__name__"), ("__name__", "t"), True),  # a __name__ order is always a range field
    (("t",), ("t", "__name__"), ("t", "__name__"), True),
]


@pytest.mark.parametrize(("filtered", "ordered", "fields", "billed"), BILLING)
def test_the_billing_rule_counts_range_fields_as_firestore_documents_them(
    filtered: tuple[str, ...], ordered: tuple[str, ...], fields: tuple[str, ...], billed: bool
) -> None:
    assert range_fields(filtered, ordered) == fields
    assert bills_index_entries(filtered, ordered) is billed


def test_only_queries_with_a_value_range_pay_index_entries_and_explain_says_so() -> None:
    """Issue 43: a plain page (a time range, the document-id tie-break left to Firestore)
    has one range field; a range condition on a value field makes two, billed at least one
    read per 1 000 entries of each chunk query."""
    ranged_shape = QueryShape(("symbol",), ranges=("volume",))
    spec = SeriesSpec("ticks", shards=[f"s{i}" for i in range(40)], shapes=[ranged_shape])
    plain = explain(plan_query(spec, start="2024-01-02T09:00:00Z", limit=100))
    assert plain.range_fields == ("timestamp",) and plain.index_reads == 0 and not plain.plan.index_billed
    assert "index entries: not billed (range fields: timestamp)" in plain.describe()
    assert (plain.snapshot_reads, plain.round_trips) == (1, 2)  # two chunks: at most one read of the time
    ranged = explain(plan_query(spec, where=[("symbol", "==", "A"), ("volume", ">=", 10)], limit=1500))
    assert ranged.range_fields == ("volume", "timestamp") and ranged.plan.index_billed
    assert ranged.index_reads == 2 * 1  # two chunk queries, each asking for fewer than 1 000 documents
    assert "index entries: billed (range fields: volume, timestamp), at least 2 read(s) a page" in ranged.describe()
    stats = ReadStats()
    for n in range(1, 2002):  # one query billed by its entries returns 2 001 documents
        stats.document_returned(first_of_query=n == 1, entry_read=n % 1000 == 1)
    assert (stats.documents, stats.index_reads, stats.billed_reads) == (2001, 3, 2000 + 3)
    assert stats.describe().endswith("2003 billed reads (3 of index entries)")


def test_lean_asks_are_the_expected_share_plus_slack() -> None:
    assert lean_asks(101, [30]) == [101]
    assert lean_asks(101, [30, 30]) == [61, 61]
    assert lean_asks(11, [10] * 6) == [3] * 6
    assert lean_asks(1001, [20, 20]) == [601, 601]
    assert sum(lean_asks(101, [1] * 30)) <= 1.3 * 101 + 2 * 30


def test_lean_refills_ask_each_chunk_its_share_of_what_it_may_miss() -> None:
    assert lean_refills([0, 5, 40], [3, 3, 3]) == [0, 4, 18]
    assert lean_refills([1, 2], [10, 20]) == [1, 2]  # never more than may be missing


def test_refill_asks_only_what_may_be_missing() -> None:
    assert refill_asks(10, [None, 4, 12, 10]) == [0, 6, 0, 0]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 40), max_size=60), min_size=2, max_size=8),
    st.integers(1, 50),
    st.booleans(),
)
def test_two_rounds_always_give_the_exact_page(chunks: list[list[int]], rows: int, descending: bool) -> None:
    # Chunks as sorted streams of (time, id); the rule against the brute-force answer.
    streams = []
    for c, times in enumerate(chunks):
        ticks = [
            Tick(f"{c}-{i}", dt.datetime(2020, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=t), {})
            for i, t in enumerate(times)
        ]
        streams.append(sorted(ticks, key=sort_key, reverse=descending))
    want = list(take(merge_streams(streams, descending=descending), rows)) if len(streams) > 1 else streams[0][:rows]
    asks = lean_asks(rows, [1] * len(streams))
    got = [s[:a] for s, a in zip(streams, asks)]
    order = {t.id: p for p, t in enumerate(merge_streams(got, descending=descending))}
    ranks = [None if len(g) < a else order[g[-1].id] + 1 for g, a in zip(got, asks)]
    for g, s, more in zip(got, streams, refill_asks(rows, ranks)):
        g.extend(s[len(g) : len(g) + more])
    assert list(take(merge_streams(got, descending=descending), rows)) == want


@pytest.mark.parametrize("direction", ["desc", "asc"])
@pytest.mark.parametrize(
    "symbols", [["HOT"], ["TWO"], ["HOT", "AAA", "TWO"], None], ids=["one-shard", "two-shards", "mixed", "all"]
)
@pytest.mark.parametrize("limit", [1, 9, 70])
def test_lean_pages_with_cursors_equal_the_brute_force_answer(
    skewed: dict[str, Any], direction: str, symbols: list[str] | None, limit: int
) -> None:
    store: TimeSeriesStore = skewed["store"]
    want = brute_force(skewed["ticks"], symbols, direction == "desc")
    where = None if symbols is None else {"symbol": symbols if len(symbols) > 1 else symbols[0]}
    chunks = len(store.plan(where=where).chunks)
    got: list[Tick] = []
    cursor = None
    pages = 0
    while True:
        page = store.query(where=where, direction=direction, limit=limit, cursor=cursor)
        pages += 1
        got.extend(page)
        stats = page.stats
        eager = chunks * (limit + 1)  # what asking every chunk for limit + 1 reads
        # The snapshot's time (several chunks), the lean round, lean refills, one exact refill.
        assert stats.documents <= eager and stats.round_trips <= (chunks > 1) + 2 + LEAN_REFILLS
        if page.cursor is None or pages == PAGES:
            break
        cursor = page.cursor
    if len(want) < PAGES * limit:
        assert [t.id for t in got] == [t.id for t in want]
    else:
        assert [t.id for t in got] == [t.id for t in want[: len(got)]]


def test_a_skewed_page_refills_once_and_reads_about_what_it_shows(skewed: dict[str, Any]) -> None:
    store: TimeSeriesStore = skewed["store"]
    page = store.query(where={"symbol": "HOT"}, limit=100)
    assert [t.id for t in page] == [t.id for t in brute_force(skewed["ticks"], ["HOT"], True)[:100]]
    stats = page.stats
    # One chunk holds everything: its lean ask, then refills until the page is exact; the
    # other chunk returns nothing. About what the page shows, never 2 x 101.
    assert stats.chunks == 2 and 1 <= stats.refills <= LEAN_REFILLS + 1
    assert 101 <= stats.documents <= 1.3 * 101 + 2 * 2
    assert stats.queries == stats.snapshot_reads + 2 + stats.refills  # at one snapshot, two chunks, the refills
    assert stats.snapshot_reads <= 1


def test_an_iteration_abandoned_early_reads_little(skewed: dict[str, Any]) -> None:
    store: TimeSeriesStore = skewed["store"]
    ticks = store.iter_ticks(limit=150)
    first = [next(ticks) for _ in range(5)]
    assert [t.id for t in first] == [t.id for t in brute_force(skewed["ticks"], None, True)[:5]]
    per_chunk = [sum(t.data["shard"] in chunk for t in skewed["ticks"]) for chunk in store.plan().chunks]
    assert sum(min(151, n) for n in per_chunk) > 1.3 * 150 + 2 * 2  # what asking each chunk for 151 would read
    assert ticks.stats.documents <= 1.3 * 150 + 2 * ticks.stats.chunks  # not 150 per chunk


def test_explain_names_the_chunk_queries_the_index_and_the_cost() -> None:
    spec = SeriesSpec.for_write_rate("ticks", writes_per_second=45_000, shapes=[QueryShape("symbol")])
    plan = plan_query(spec, where={"symbol": ["AAA", "BBB", "CCC"]}, limit=100)
    explained = explain(plan)
    assert len(explained.queries) == len(plan.chunks) == 9
    assert explained.queries[0].startswith("where shard in ['s0', 's1', ")
    assert (
        "symbol in ['AAA', 'BBB', 'CCC'] order by timestamp desc, __name__ desc limit 14 (lean)" in explained.queries[0]
    )
    assert explained.index == "ticks (shard DESC, symbol ASC, timestamp DESC)"
    assert (explained.eager_reads, explained.lean_reads, explained.snapshot_reads) == (909, 126, 1)
    assert "lean about 126" in explained.describe() and "eager 909" in explained.describe()
    unlimited = explain(plan_query(spec, start="2024-01-01T00:00:00Z"))
    assert unlimited.eager_reads is None and "every match, one streaming query per chunk" in unlimited.describe()


def test_page_stats_count_what_came_back(skewed: dict[str, Any]) -> None:
    store: TimeSeriesStore = skewed["store"]
    page = store.query(where={"symbol": ["AAA", "BBB", "CCC"]}, limit=30)
    stats = page.stats
    # Every document counted came from a chunk query; each query is billed at least once.
    assert stats.documents >= 31 and stats.documents <= stats.billed_reads <= stats.documents + stats.queries
    eager = TimeSeriesStore(store.client, SPEC, lean=False).query(where={"symbol": ["AAA", "BBB", "CCC"]}, limit=30)
    asked = plan_query(SPEC, where={"symbol": ["AAA", "BBB", "CCC"]}, limit=30)
    assert [t.id for t in eager] == [t.id for t in page]
    assert eager.cursor is not None and page.cursor is not None  # each carries its own snapshot: the positions agree
    assert decode_cursor(asked, eager.cursor) == decode_cursor(asked, page.cursor)
    assert eager.stats.documents == 4 * 31 > stats.documents  # 4 chunks of 10 shards (41+ matches each), asked 31 each
    counted = ReadStats()
    assert store.count(stats=counted) == TICKS
    # 2 chunk aggregations and the whole collection's (a count of everything checks for shard
    # values the declaration does not list), at one snapshot: 1 read each at 1 000 entries or fewer
    probes = counted.snapshot_reads
    assert (counted.chunks, counted.queries, counted.billed_reads) == (2, probes + 3, probes + 2 + 1) and probes <= 1
    # past 1 000 entries an aggregation bills a read per 1 000 begun (the data above is smaller)
    over = ReadStats()
    over.aggregation_done(1200)
    over.aggregation_done(1000)
    assert (over.queries, over.billed_reads) == (2, 2 + 1)


def test_cli_explains_and_prints_costs(tsstore_emulator: Any, tmp_path: Any) -> None:
    import os

    env = {k: v for k, v in os.environ.items() if k != "GOOGLE_CLOUD_PROJECT"}
    env["FIRESTORE_EMULATOR_HOST"] = tsstore_emulator.address
    database = f"cli-cost-{random.randrange(10**9)}"

    def tsstore(*args: str) -> Ran:
        return run_tsstore(*args, "--database", database, env={**env, "GOOGLE_CLOUD_PROJECT": None}, cwd=tmp_path)

    explained = tsstore("explain", "--where", "exchange=EXCHG1", "--where", "exchange=EXCHG2", "--limit", "20")
    assert explained.returncode == 0, explained.stderr
    assert (
        "instruments: 1 chunk query over 3 shard values, served by the index instruments (shard DESC, exchange ASC"
        in (explained.stdout)
    )
    assert "reads per page of 20: lean about 21 (first round" in explained.stdout
    series = tsstore("explain", "--where", "symbol=AAA", "--where", "symbol=BBB", "--limit", "20", "--format", "json")
    told = json.loads(series.stdout)
    assert (told["plan"], told["chunks"], told["lean_reads"], told["snapshot_reads"]) == ("series", 1, 21, 0)
    assert told["index"] == "instruments (symbol ASC, timestamp DESC)" and "shard" not in told["queries"][0]
    rows = tmp_path / "rows.csv"
    rows.write_text(
        "timestamp,symbol,exchange\n" + "".join(f"2024-01-02T09:00:{i:02d}+00:00,AAA,EXCHG1\n" for i in range(30))
    )
    assert tsstore("ingest", str(rows)).returncode == 0
    page = tsstore("query", "--limit", "5", "--stats")
    assert page.returncode == 0, page.stderr
    assert "cost: 6 documents read, 1 query, 1 round trip, 1 chunk, 6 billed reads" in page.stderr
    everything = tsstore("query", "--format", "jsonl", "--stats")
    assert len(everything.stdout.splitlines()) == 30
    assert "cost: 30 documents read, 1 query, 1 round trip, 1 chunk, 30 billed reads" in everything.stderr
    counted = tsstore("count", "--stats")
    # A command's first count of everything also counts the collection, at one snapshot (the
    # server's time, read unless the answers of the last 30 s told it), to notice shard values
    # the declaration does not list; a filtered count is one aggregation.
    cost = r"cost: 0 documents read, (2 queries, 1 round trip|3 queries, 2 round trips), 1 chunk, (2|3) billed reads"
    assert counted.stdout.strip() == "30" and re.search(cost, counted.stderr), counted.stderr
    filtered = tsstore("count", "--where", "exchange=EXCHG1", "--stats")
    on_exchg1 = sum(json.loads(line)["exchange"] == "EXCHG1" for line in everything.stdout.splitlines())
    assert int(filtered.stdout) == on_exchg1
    assert "0 documents read, 1 query, 1 round trip, 1 chunk, 1 billed read" in filtered.stderr


class _Counting:
    """A RunQuery response stream that counts the documents the server's responses hold."""

    def __init__(self, call: Any, counter: _ServerCount) -> None:
        self._call, self._counter = call, counter

    def __iter__(self) -> _Counting:
        return self

    def __next__(self) -> Any:
        response = next(self._call)
        self._counter.documents += type(response).pb(response).HasField("document")
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self._call, name)


class _ServerCount(grpc.UnaryStreamClientInterceptor):
    """Counts, on the client's own gRPC channel, the read calls sent and the documents the
    server returned: independent of tsstore's own bookkeeping."""

    def __init__(self) -> None:
        self.documents = 0
        self.calls = 0

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        call = continuation(details, request)
        if details.method.endswith(("/RunQuery", "/BatchGetDocuments")):
            self.calls += 1
            return _Counting(call, self) if details.method.endswith("/RunQuery") else call
        return call


def test_stats_equal_what_the_server_returned(
    skewed: dict[str, Any], tsstore_emulator: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = _ServerCount()
    plain = grpc.insecure_channel
    monkeypatch.setattr(grpc, "insecure_channel", lambda *a, **k: grpc.intercept_channel(plain(*a, **k), counter))
    database = database_id(skewed["store"].client)  # the same data, through a client on the counting channel
    client = tsstore_emulator.client(database=database)
    store = TimeSeriesStore(client, SPEC)
    for where, limit in (({"symbol": "HOT"}, 100), ({"symbol": ["AAA", "BBB", "TWO"]}, 30), (None, 7)):
        before_docs, before_calls = counter.documents, counter.calls
        page = store.query(where=where, limit=limit)
        assert (page.stats.documents, page.stats.queries) == (
            counter.documents - before_docs,
            counter.calls - before_calls,
        ), where
    before_docs = counter.documents
    ticks = store.iter_ticks(where={"symbol": "TWO"})
    assert len(list(ticks)) == sum(1 for t in skewed["ticks"] if t.data["symbol"] == "TWO")
    assert ticks.stats.documents == counter.documents - before_docs
    assert counter.calls >= 3 + 2 and counter.documents > 150  # the channel really was the counting one
    store.close()
    client.close()


def test_estimated_snapshots_skip_the_time_read_and_see_what_this_process_wrote(client: Any) -> None:
    """Issues 43 and 59: a store with estimated snapshots (the default) reads a page and a
    count of several chunks in one round trip once answers have told it the server's time,
    and the ticks it has just written (their commit times are bounds the clock keeps) are in
    them."""
    spec = SeriesSpec("ticks", shards=[f"s{i:02d}" for i in range(40)], key_fields=["symbol"])
    store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
    strict = TimeSeriesStore(client, spec, snapshots="read")
    base = dt.datetime(2024, 1, 2, 9, tzinfo=UTC)
    store.write([{"symbol": "AAA", "timestamp": base + dt.timedelta(seconds=n), "n": n} for n in range(300)])
    store.query(limit=5)  # a read time answered (the first page reads the server's time if none was)
    for n in range(300, 306):  # each tick written, then read at once: the newest tick is the one just written
        store.write([{"symbol": "AAA", "timestamp": base + dt.timedelta(seconds=n), "n": n}])
        page = store.query(limit=20)
        assert page.ticks[0].data["n"] == n and page.stats.snapshot_reads == 0
        assert page.stats.round_trips == 1 + (page.stats.refills > 0)
        assert [t.id for t in page] == [t.id for t in strict.query(limit=20)]
        stats = ReadStats()
        assert store.count(stats=stats) == n + 1 and (stats.snapshot_reads, stats.round_trips) == (0, 1)
    assert strict.query(limit=20).stats.snapshot_reads == 1  # the server's time, read first
    with pytest.raises(ConfigError, match="snapshots 'later' is not allowed; give 'read' or 'estimated'"):
        TimeSeriesStore(client, spec, snapshots="later")  # type: ignore[arg-type]


def test_a_walk_of_forty_shards_waits_one_round_trip_a_page(client: Any) -> None:
    """Issue 59: a walk within 1.1 round trips a page at 40 shards. The default store reads
    no server's time for it (its write's answers told the time, and each page reads at the
    snapshot the cursor carries), so a page waits one round trip, and a refill round only
    where a chunk may hide rows; the walk is every tick once, newest first."""
    spec = SeriesSpec("ticks", shards=[f"s{i:02d}" for i in range(40)], key_fields=["symbol"])
    store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
    base = dt.datetime(2024, 1, 2, 9, tzinfo=UTC)
    store.write([{"symbol": "AAA", "timestamp": base + dt.timedelta(seconds=n), "n": n} for n in range(1000)])
    seen, trips, refill_rounds, snapshot_reads, cursor = [], 0, 0, 0, None
    for _ in range(10):
        page = store.query(limit=100, cursor=cursor)
        seen += [t.data["n"] for t in page]
        trips += page.stats.round_trips
        refill_rounds += page.stats.round_trips - 1 if page.stats.refills else 0
        snapshot_reads += page.stats.snapshot_reads
        cursor = page.cursor
    assert seen == list(range(999, -1, -1)) and cursor is None
    assert snapshot_reads == 0 and trips == 10 + refill_rounds <= 11
    store.close()


def test_reads_at_a_time_given_tell_the_clock_no_time_of_arrival(client: Any, tsstore_emulator: Any) -> None:
    """Issue 59: the answer to a read at a given read time carries that time back, which is
    no time stamped on its arrival. Taken as one (as it was), pages read at a walk's snapshot
    kept the clock "knowing" a time held back at that snapshot; now such answers alone leave
    the time unknown (read again), on the fast path, the public one and counts. A project of
    its own has a clock of its own."""
    spec = SeriesSpec("ticks", shards=[f"s{i:02d}" for i in range(40)], key_fields=["symbol"])
    TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)).write(
        [{"symbol": "AAA", "timestamp": dt.datetime(2024, 1, 2, 9, tzinfo=UTC), "n": n} for n in range(10)]
    )
    given = TimeSeriesStore(client, spec).server_time()
    for fast in (True, False):
        project = f"pinned-{random.randrange(10**9)}"
        other = emulator_client(tsstore_emulator.address, project=project, database=database_id(client))
        store = TimeSeriesStore(other, spec, fast_wire=fast)
        store.query(limit=5, read_time=given)
        store.count(start=dt.datetime(2024, 1, 1, tzinfo=UTC), read_time=given)
        assert server_clock(other).now() is None and server_clock(other).at_least() is not None
        store.query(limit=5)  # a page at a snapshot: the server's time read first, stamped on arrival
        assert server_clock(other).now() is not None
        store.close()
        other.close()
