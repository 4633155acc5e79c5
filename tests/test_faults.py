"""Faults are not overloads: what a failed call means, the pauses between attempts, and every
verb through a proxy that cuts the connections to the emulator (down 0.3 s each time): every
~1 s while writes and purges run (each cut after an answer, so a slow machine slows the cuts),
and in the middle of every read kind, giving exactly the answers and the stored set of a clean
run."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import datetime as dt
import threading
import unittest.mock
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

import grpc
import pandas as pd
import pytest
from google.api_core import exceptions as gexc
from google.cloud.firestore_v1.services.firestore.async_client import FirestoreAsyncClient
from google.cloud.firestore_v1.services.firestore.client import FirestoreClient

from tests.overload import FakeClock
from tests.proxy import CuttingProxy
from tsstore import AsyncTimeSeriesStore, FaultError, Rollup, TimeSeriesStore, WriteOptions
from tsstore.counters import ShardedCounter, increment_counters
from tsstore.demo import SPEC
from tsstore.faults import MAX_PAUSE_SECONDS, SPLIT_AFTER, Backoff, call, call_split, kind_of, status_kind
from tsstore.frames import ticks_to_frame
from tsstore.local.emulator import emulator_client
from tsstore.local.synthetic import trading_day
from tsstore.native_mode import FirestoreSide
from tsstore.read.async_engine import chunk_ticks
from tsstore.read.cost import ReadStats
from tsstore.read.cursor import encode_cursor
from tsstore.read.engine import Chunk, ChunkCursor, ChunkStream, name_stops, sweep_cursor
from tsstore.read.plan import plan_query
from tsstore.series_counters import COUNTERS_SUFFIX, RECEIPTS_SUFFIX
from tsstore.ticks import Tick, sort_key
from tsstore.write.prepare import prepare_records

FAST = WriteOptions(ramp=False)
DAY = dt.datetime(2019, 1, 2, tzinfo=dt.UTC)

# ---------------------------------------------------------------- what a failure means (no Firestore)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (gexc.ServiceUnavailable("Stream removed"), "fault"),  # a cut connection
        (gexc.ServiceUnavailable("failed to connect to all addresses"), "fault"),
        (gexc.DeadlineExceeded("Deadline Exceeded"), "fault"),
        (gexc.InternalServerError("RST_STREAM"), "fault"),
        (gexc.Unknown("None"), "fault"),
        (gexc.ResourceExhausted("Quota exceeded"), "overload"),
        (gexc.Aborted("Too much contention"), "overload"),
        (gexc.InvalidArgument("bad"), None),
        (gexc.PermissionDenied("no"), None),
        (gexc.FailedPrecondition("needs an index"), None),
        (ValueError("a bug"), None),
    ],
)
def test_what_a_failed_call_is(exc: Exception, kind: str | None) -> None:
    assert kind_of(exc) == kind


@pytest.mark.parametrize(
    ("code", "kind"),
    [(grpc.StatusCode.RESOURCE_EXHAUSTED, "overload"), (grpc.StatusCode.ABORTED, "overload")]
    + [(grpc.StatusCode.UNAVAILABLE, "overload")]  # inside an answer: the server refused it
    + [(grpc.StatusCode.DEADLINE_EXCEEDED, "fault"), (grpc.StatusCode.INTERNAL, "fault")]
    + [(grpc.StatusCode.PERMISSION_DENIED, None), (grpc.StatusCode.ALREADY_EXISTS, None), (grpc.StatusCode.OK, None)],
)
def test_what_a_refused_write_in_an_answer_is(code: grpc.StatusCode, kind: str | None) -> None:
    assert status_kind(code.value[0]) == kind


def test_backoff_pauses_grow_jittered_and_capped_within_the_budget() -> None:
    clock = FakeClock()
    for jitter in (0.0, 0.999):
        backoff = Backoff(budget=30, clock=clock, rand=lambda jitter=jitter: jitter)
        pauses = []
        while (pause := backoff.pause()) is not None:
            pauses.append(pause)
            clock.sleep(pause)
        base = [min(MAX_PAUSE_SECONDS, 0.1 * 2**i) for i in range(len(pauses))]
        assert all(b * (0.5 + jitter) == pytest.approx(p) or p == MAX_PAUSE_SECONDS for b, p in zip(base, pauses))
        assert max(pauses) <= MAX_PAUSE_SECONDS and sum(pauses) <= 30 < sum(pauses) + MAX_PAUSE_SECONDS * 1.5
    backoff = Backoff(budget=30, clock=clock, rand=lambda: 0.5)
    for _ in range(5):
        backoff.pause()
    backoff.progress()  # it got somewhere: a new streak starts at the first pause
    assert backoff.pause() == pytest.approx(0.1) and backoff.failures == 1


def test_call_retries_faults_and_overloads_and_names_what_gave_up() -> None:
    answers: Iterator[Any] = iter([gexc.ServiceUnavailable("cut"), gexc.ResourceExhausted("busy"), 42])

    def flaky() -> int:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return int(answer)

    slept: list[float] = []
    assert call(flaky, what="counting", sleep=slept.append) == 42 and len(slept) == 2
    with pytest.raises(gexc.PermissionDenied):  # trying again cannot help: raised as it is
        call(lambda: (_ for _ in ()).throw(gexc.PermissionDenied("no")), what="counting", sleep=slept.append)
    clock = FakeClock()
    with pytest.raises(FaultError, match=r"counting failed: every attempt for \d+ s failed before .*UNAVAILABLE"):
        call(
            lambda: (_ for _ in ()).throw(gexc.ServiceUnavailable("cut")),
            what="counting",
            backoff=Backoff(budget=5, clock=clock),
            sleep=clock.sleep,
        )


def test_a_chunk_read_that_keeps_failing_ends_in_a_fault_error_saying_how_far_it_got() -> None:
    clock = FakeClock()
    cursor = ChunkCursor(
        ("s0", "s1"),
        after=None,
        limit=None,
        read_time=None,
        stats=ReadStats(),
        descending=False,
        backoff=Backoff(budget=3, clock=clock),
    )
    cursor.returned(Tick("a", DAY, {}))
    with pytest.raises(FaultError, match=r"reading shard value\(s\) s0, s1 failed: .* after 1 of its ticks"):
        while True:
            clock.sleep(float(cursor.failed(gexc.ServiceUnavailable("Stream removed"))))


def test_a_merged_read_stopped_by_faults_says_how_far_it_got_and_where_to_go_on() -> None:
    plan = plan_query(spec(3), None)
    ticks = [Tick("b", DAY + dt.timedelta(seconds=2), {}), Tick("a", DAY + dt.timedelta(seconds=1), {})]

    def stops() -> Iterator[Tick]:
        yield from ticks
        raise FaultError("reading shard value(s) s0 failed: every attempt for 60 s failed")

    got: list[Tick] = []
    with pytest.raises(FaultError, match="the read stopped after 2 ticks, the last at .* pass cursor=") as caught:
        got.extend(name_stops(plan, stops(), None))
    assert got == ticks and caught.value.returned == 2
    assert caught.value.cursor == encode_cursor(plan, (ticks[-1].timestamp, "a"))


def test_a_call_that_keeps_failing_whole_is_asked_in_parts_that_answer() -> None:
    asked: list[tuple[int, ...]] = []

    def total(parts: Sequence[int]) -> int:  # answers for at most two values, like a short query
        asked.append(tuple(parts))
        if len(parts) > 2:
            raise gexc.ServiceUnavailable("Stream removed")
        return sum(parts)

    slept: list[float] = []
    answers = call_split(total, range(1, 8), what="counting", sleep=slept.append)
    assert sum(answers) == 28 and len(answers) == 4  # [1, 2], [3, 4], [5, 6], [7]
    assert asked[: SPLIT_AFTER + 1] == [tuple(range(1, 8))] * SPLIT_AFTER + [(1, 2, 3, 4)]
    assert [p for p in asked if len(p) <= 2] == [(1, 2), (3, 4), (5, 6), (7,)]
    clock = FakeClock()
    with pytest.raises(FaultError, match="counting failed"):  # not divisible: tried whole until the budget ends
        call_split(
            total,
            range(1, 8),
            what="counting",
            divisible=False,
            backoff=Backoff(budget=5, clock=clock),
            sleep=clock.sleep,
        )


def short_queries_only(ticks: dict[str, list[Tick]], opened: list[Chunk]) -> Callable[..., Iterator[Tick]]:
    """A chunk fetch over ``ticks`` (by shard value) whose query over more than one value
    always breaks off before its first tick, as a query slower than the connection stays up."""

    def fetch(chunk: Chunk, after: Any, limit: int | None, read_time: Any) -> Iterator[Tick]:
        opened.append(chunk)
        if len(chunk) > 1:
            raise gexc.ServiceUnavailable("Stream removed")
        got = sorted(ticks[chunk[0]], key=sort_key)
        got = [t for t in got if after is None or sort_key(t) > after]
        return iter(got[:limit])

    return fetch


def by_value(n: int) -> dict[str, list[Tick]]:
    return {
        f"s{v}": [Tick(f"{v}-{i}", DAY + dt.timedelta(seconds=(i * 7 + v * 3) % 50), {}) for i in range(6)]
        for v in range(n)
    }


@pytest.mark.parametrize("limit", [None, 7])
def test_a_chunk_whose_query_keeps_failing_is_read_as_halves_merged_in_order(limit: int | None) -> None:
    ticks, opened = by_value(5), []
    everything = sorted((t for ts in ticks.values() for t in ts), key=sort_key)
    stats = ReadStats()
    cursor = ChunkCursor(tuple(ticks), after=None, limit=limit, read_time=DAY, stats=stats, descending=False)
    fetch = short_queries_only(ticks, opened)
    with mock_sleep():
        got = list(ChunkStream(fetch, cursor))
    assert got == everything[:limit]
    assert opened[:SPLIT_AFTER] == [tuple(ticks)] * SPLIT_AFTER and {c for c in opened if len(c) == 1} <= {
        (v,) for v in ticks
    }
    # Each tick is billed once, by the half that returned it; the merge holds at most one
    # tick of each of the (5 single-value) streams ahead of the limit.
    assert len(got) <= stats.documents <= len(got) + (0 if limit is None else len(ticks))


def test_the_async_engine_reads_failing_chunks_as_halves_too() -> None:
    ticks, opened = by_value(4), []
    everything = sorted((t for ts in ticks.values() for t in ts), key=sort_key)
    sync_fetch = short_queries_only(ticks, opened)

    async def fetch(*args: Any) -> AsyncIterator[Tick]:
        async def ticks_of(it: Iterator[Tick]) -> AsyncIterator[Tick]:
            for tick in it:
                yield tick

        return ticks_of(sync_fetch(*args))

    async def read() -> list[Tick]:
        cursor = ChunkCursor(tuple(ticks), after=None, limit=None, read_time=DAY, stats=ReadStats(), descending=False)
        return [t async for t in chunk_ticks(fetch, cursor)]

    with mock_sleep():
        assert asyncio.run(read()) == everything


def test_halves_are_not_read_without_one_snapshot_unless_no_snapshot_is_kept() -> None:
    ticks = by_value(3)
    plan = plan_query(spec(3), None)
    clock = FakeClock()
    at_no_time = ChunkCursor(
        tuple(ticks), after=None, limit=None, read_time=None, stats=ReadStats(), descending=False,
        backoff=Backoff(budget=5, clock=clock),
    )  # fmt: skip
    with mock_sleep(clock), pytest.raises(FaultError, match="reading shard value"):
        list(ChunkStream(short_queries_only(ticks, []), at_no_time))
    with mock_sleep():  # a purge's sweep keeps no snapshot: its halves may each read at their own time
        swept = list(ChunkStream(short_queries_only(ticks, []), sweep_cursor(tuple(ticks), plan, ReadStats())))
    assert sorted(t.id for t in swept) == sorted(t.id for ts in ticks.values() for t in ts)


@contextlib.contextmanager
def mock_sleep(clock: FakeClock | None = None) -> Iterator[None]:
    """The engine's pauses pass on ``clock`` (or not at all), not on the wall."""
    with (
        unittest.mock.patch("tsstore.read.engine.time.sleep", clock.sleep if clock else lambda s: None),
        unittest.mock.patch("tsstore.read.async_engine.asyncio.sleep", _no_wait),
    ):
        yield


async def _no_wait(seconds: float) -> None:
    return None


# ---------------------------------------------------------------- every verb through cuts (emulator)


def spec(shards: int) -> Any:
    return dataclasses.replace(SPEC, collection=f"faults{shards}", shards=tuple(f"s{i}" for i in range(shards)))


@pytest.fixture
def cut(tsstore_emulator: Any, database_id: str) -> Iterator[dict[str, Any]]:
    """A client straight to the emulator (the oracle) and one through a cutting proxy."""
    proxy = CuttingProxy(tsstore_emulator.address, down=0.3)
    yield {
        "direct": tsstore_emulator.client(database=database_id),
        "proxied": emulator_client(proxy.address, database=database_id),
        "address": proxy.address,
        "database": database_id,
        "proxy": proxy,
    }
    proxy.close()


#: Channel arguments for the clients whose reads are cut: a 16 KiB flow-control window per
#: stream and no growing it (BDP probing). With gRPC's defaults the client may already hold a
#: whole chunk's stream when the cut comes, so "cut in the middle" would often cut nothing;
#: with this window the server still holds the rest, and every stream cut breaks off.
SMALL_WINDOW = (("grpc.http2.bdp_probe", 0), ("grpc.http2.lookahead_bytes", 16 * 1024))
#: Ticks the read tests write, and the page of their walk: 4 pages (the cut after the first).
READ_TICKS, WALK_PAGE = 800, 250


def stored_ids(store: TimeSeriesStore) -> list[str]:
    return sorted(t.id for t in store.query(columns=()))


def cut_every(proxy: CuttingProxy, n: int, answered: threading.Event) -> Callable[[int], None]:
    """An ``on_progress`` that cuts the connections each time ``n`` more documents are done,
    so faults hit calls in flight whatever the timing, and sets ``answered``: the proxy also
    cuts every ~1 s, but only after an answer since its last such cut (``CuttingProxy.cutting``)."""
    done = 0

    def progress(more: int) -> None:
        nonlocal done
        if (done + more) // n > done // n:
            proxy.cut()
        done += more
        answered.set()

    return progress


def test_writes_and_purges_through_cuts_store_exactly_what_a_clean_run_stores(cut: dict[str, Any]) -> None:
    # 3 000 rows: six batches of 500, each one's progress followed by a cut (and the timer
    # cuts every ~1 s). With three batches all were sometimes answered before the first cut
    # (the unpaced writer sends them at once), and no call met a fault. The timer waits for an
    # answer since its last cut: cutting on time alone, at a load of 15 on 2 cores one batch's
    # every attempt for 60 s was cut before its answer (the others' answers each cut it too),
    # and the writer, rightly, reported its 500 documents as not written.
    layout = spec(3)
    rows = list(trading_day(3000, seed=22))
    expected = sorted({d.id for d in prepare_records(layout, rows)})
    statuses: list[str] = []
    proxy: CuttingProxy = cut["proxy"]
    answered = threading.Event()
    with TimeSeriesStore(cut["proxied"], layout, write_options=FAST) as store, proxy.cutting(answered=answered):
        written = store.write(
            rows, on_status=lambda s: statuses.append(s) if s else None, on_progress=cut_every(proxy, 500, answered)
        )
    oracle = TimeSeriesStore(cut["direct"], layout)
    assert (written.count, written.created, written.present) == (3000, 3000, 0)
    assert stored_ids(oracle) == expected and oracle.count() == 3000
    assert any(s.startswith("retrying after connection faults") for s in statuses)
    # Faults are retried without lowering the pace: the status never names a throttle.
    assert not any("throttled" in s for s in statuses)
    noon = DAY.replace(hour=12)
    before = oracle.count(end=noon)
    answered.clear()
    with TimeSeriesStore(cut["proxied"], layout, write_options=FAST) as store, proxy.cutting(seed=1, answered=answered):
        purged = store.purge(before=noon, on_progress=cut_every(proxy, 500, answered))
    assert (purged.matched, purged.deleted) == (before, before) and before > 1000
    assert oracle.count() == 3000 - before and oracle.count(end=noon) == 0


def test_a_write_begun_while_the_network_is_down_waits_for_it_and_meets_no_fault(
    tsstore_emulator: Any, database_id: str
) -> None:
    # The connection is cut and new ones are refused for 0.6 s as the write starts: its lease
    # (a commit) and its batches wait for the channel to connect (gRPC's waitForReady, in
    # QUICK_RECONNECT_OPTIONS) and leave once it has, so no batch fails, pauses or is resent.
    # Before, each failed at once while the channel had no connection ("failed to connect to
    # all addresses") and paused, for longer after each failure, past the network's return.
    proxy = CuttingProxy(tsstore_emulator.address, down=0.6)
    client = emulator_client(proxy.address, database=database_id)
    rows = list(trading_day(1500, seed=23))
    statuses: list[str] = []
    try:
        with TimeSeriesStore(client, spec(3), write_options=FAST) as store:
            assert store.count() == 0  # connected
            proxy.cut()
            written = store.write(rows, on_status=lambda s: statuses.append(s) if s else None)
        refused = proxy.refused
    finally:
        proxy.close()
        client.close()
    assert refused > 0  # the channel tried to connect while the network was down
    assert (written.created, statuses) == (1500, [])
    # another client: at the server's time, not one estimated from its own answers (which
    # may be older than the proxied client's last commits)
    oracle = TimeSeriesStore(tsstore_emulator.client(database=database_id), spec(3), snapshots="read")
    assert oracle.count() == 1500


def test_a_writer_measures_the_round_trip_on_a_connection_already_set_up(
    tsstore_emulator: Any, database_id: str
) -> None:
    # The writer keeps as many batches in flight as carry its pace across the round trip. The
    # first call on a new channel also sets the connection up: through the cutting proxy on a
    # loaded machine it took 0.27 s, and the writer kept 12-15 batches of 500 in flight where
    # 4-6 carry its pace, each answered after more than the time between cuts. So it reads the
    # server's time twice, and the clock keeps the shorter call.
    probes: list[str] = []
    probe = FirestoreSide.probe

    def counted(side: FirestoreSide, layout: Any) -> None:
        probes.append(layout.collection)
        probe(side, layout)

    # a project of its own: its clock knows no round trip yet
    client = emulator_client(tsstore_emulator.address, project="pace-probe", database=database_id)
    try:
        with unittest.mock.patch.object(FirestoreSide, "probe", counted):
            TimeSeriesStore(client, spec(3), write_options=FAST).write(trading_day(10, seed=5))
            for thread in threading.enumerate():
                if thread.name == "tsstore-round-trip":
                    thread.join(30)
    finally:
        client.close()
    assert probes == [spec(3).collection] * 2


def faulty_reads(store: TimeSeriesStore, cut_now: Callable[[], object]) -> dict[str, Any]:
    """Every read kind, with the connections cut in the middle of each (``cut_now``)."""
    walk, page = [], store.query(limit=WALK_PAGE, columns=())
    while True:
        walk += [t.id for t in page]
        if page.cursor is None:
            break
        if len(walk) == WALK_PAGE:
            cut_now()  # the next page starts on a dead connection
        page = store.query(limit=WALK_PAGE, columns=(), cursor=page.cursor)
    streamed = []
    for i, tick in enumerate(store.iter_ticks(start=DAY.replace(hour=9), end=DAY.replace(hour=15))):
        if i == 300:
            cut_now()  # every chunk's stream breaks off and resumes after its last tick
        streamed.append(tick)
    cut_now()
    page50 = [(t.id, t.data) for t in store.query(where={"symbol": "AAA"}, limit=50)]
    cut_now()
    counted = store.count(start=DAY.replace(hour=10))
    cut_now()
    aggregates = store.aggregate(where={"exchange": "EXCHG1"}, sum=["volume"], avg=["volume"])
    cut_now()
    return {
        "walk": walk,
        "frame": ticks_to_frame(store.spec, streamed),
        "page": page50,
        "count": counted,
        "aggregate": aggregates,
        "frame_at_once": store.query_frame(where={"symbol": ["AAA", "BBB"]}),
    }


@pytest.mark.parametrize("shards", [3, 40])
def test_reads_through_cuts_equal_a_clean_run(cut: dict[str, Any], shards: int) -> None:
    layout = spec(shards)
    TimeSeriesStore(cut["direct"], layout, write_options=FAST).write(trading_day(READ_TICKS, seed=shards))
    proxy: CuttingProxy = cut["proxy"]
    clean = faulty_reads(TimeSeriesStore(cut["direct"], layout), lambda: None)
    proxied = emulator_client(cut["address"], database=cut["database"], channel_options=SMALL_WINDOW)
    with TimeSeriesStore(proxied, layout) as store:
        faulty = faulty_reads(store, proxy.cut)
    proxied.close()
    assert proxy.cuts == 6
    assert len(clean["walk"]) == READ_TICKS and faulty["walk"] == clean["walk"]
    assert faulty["page"] == clean["page"] and faulty["count"] == clean["count"]
    assert faulty["aggregate"] == clean["aggregate"]
    for frame in ("frame", "frame_at_once"):
        pd.testing.assert_frame_equal(faulty[frame], clean[frame])


def test_the_async_store_reads_through_cuts_too(cut: dict[str, Any]) -> None:
    layout = spec(3)
    TimeSeriesStore(cut["direct"], layout, write_options=FAST).write(trading_day(READ_TICKS, seed=9))
    clean = TimeSeriesStore(cut["direct"], layout)
    proxy: CuttingProxy = cut["proxy"]

    async def reads() -> tuple[list[Tick], int, Any]:
        client = emulator_client(
            cut["address"], database=cut["database"], asynchronous=True, channel_options=SMALL_WINDOW
        )
        store = AsyncTimeSeriesStore(client, layout)
        streamed = []
        async for tick in store.iter_ticks():
            if len(streamed) == 300:
                proxy.cut()
            streamed.append(tick)
        proxy.cut()
        counted = await store.count(where={"symbol": "AAA"})
        proxy.cut()
        return streamed, counted, await store.aggregate(sum=["volume"])

    streamed, counted, aggregates = asyncio.run(reads())
    assert [t.id for t in streamed] == [t.id for t in clean.iter_ticks()]
    assert counted == clean.count(where={"symbol": "AAA"}) and aggregates == clean.aggregate(sum=["volume"])


def test_series_counters_count_each_tick_once_through_cuts(cut: dict[str, Any]) -> None:
    """A counter increment cut off before its answer may have landed: its retry must not add
    it twice (the receipt committed with it says it landed)."""
    layout = dataclasses.replace(spec(3), count_by=("symbol",))
    rows = list(trading_day(1000, seed=4))  # two batches of 500, a cut after each (and every ~1 s)
    proxy: CuttingProxy = cut["proxy"]
    answered = threading.Event()
    with TimeSeriesStore(cut["proxied"], layout, write_options=FAST) as store, proxy.cutting(seed=2, answered=answered):
        assert store.write(rows, on_progress=cut_every(proxy, 500, answered)).created == 1000
    oracle = TimeSeriesStore(cut["direct"], layout)
    symbols = {row["symbol"] for row in rows}
    counted = {s: oracle.series_counter({"symbol": s}).value() for s in symbols}
    assert counted == {s: oracle.count(where={"symbol": s}) for s in symbols}
    assert sum(counted.values()) == 1000
    receipts = cut["direct"].collection(f"{layout.collection}{COUNTERS_SUFFIX}{RECEIPTS_SUFFIX}")
    assert list(receipts.limit(1).stream()) == []  # each receipt is deleted once it has landed


def test_an_increment_whose_receipt_exists_already_landed_and_is_not_applied_again(client: Any) -> None:
    counter = ShardedCounter(client, "faults_counts/AAA")
    counter.create(shards=2)
    increment_counters({counter: 5}, receipt="faults_receipts/r1")
    assert counter.value() == 5 and not client.document("faults_receipts/r1").get().exists
    # A retry of a commit that landed finds its receipt: it adds nothing, and cleans up.
    client.document("faults_receipts/r2").create({})
    increment_counters({counter: 7}, receipt="faults_receipts/r2")
    assert counter.value() == 5 and not client.document("faults_receipts/r2").get().exists


# ---------------------------------------------------------------- streams that break after their first message

#: The client's streaming calls tsstore makes, on the sync and the async client: RunQuery (chunk
#: reads, the writer's roll-up horizons, marks, leases, watermarks, the census' documents),
#: RunAggregationQuery (counts, aggregations, a counter's live sum), BatchGetDocuments (document
#: reads, the sender's look-ups).
STREAMS = ("run_query", "run_aggregation_query", "batch_get_documents")


def _broken(responses: Any) -> Iterator[Any]:
    yield next(iter(responses))
    raise gexc.ServiceUnavailable("the stream broke after its first message (a test's cut)")


async def _abroken(responses: Any) -> AsyncIterator[Any]:
    async for response in responses:
        yield response
        break
    raise gexc.ServiceUnavailable("the stream broke after its first message (a test's cut)")


@contextlib.contextmanager
def streams_break_after_their_first_message() -> Iterator[collections.Counter[str]]:
    """Every other stream of each kind (the first, the third, ...), on either client, yields
    its first message and then raises UNAVAILABLE, as a connection cut in the middle does; the
    attempt after a broken one goes through. Yields how many broke, by kind."""
    opened: collections.Counter[str] = collections.Counter()
    broken: collections.Counter[str] = collections.Counter()

    def breaks(kind: str) -> bool:
        opened[kind] += 1
        if opened[kind] % 2:
            broken[kind] += 1
            return True
        return False

    def sync(kind: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            responses = call(self, *args, **kwargs)
            return _broken(responses) if breaks(kind) else responses

        return patched

    def asynchronous(kind: str, call: Callable[..., Any]) -> Callable[..., Any]:
        def patched(self: Any, *args: Any, **kwargs: Any) -> Any:
            opening = call(self, *args, **kwargs)

            async def responses() -> Any:
                stream = await opening
                return _abroken(stream) if breaks(kind) else stream

            return responses()

        return patched

    with contextlib.ExitStack() as patches:
        for kind in STREAMS:
            for api, wrap in ((FirestoreClient, sync), (FirestoreAsyncClient, asynchronous)):
                patches.enter_context(unittest.mock.patch.object(api, kind, wrap(kind, getattr(api, kind))))
        yield broken


def every_stream(store: TimeSeriesStore, hours: Rollup, late: list[dict[str, Any]]) -> dict[str, Any]:
    """A write of ticks a roll-up covers (its horizons read), then every read whose calls
    stream, and a roll-up run (its writers' leases read); the answers, comparable."""
    written = store.write(late).created
    walk, page = [], store.query(limit=WALK_PAGE, columns=())
    while True:
        walk += [t.id for t in page]
        if page.cursor is None:
            break
        page = store.query(limit=WALK_PAGE, columns=(), cursor=page.cursor)
    summed, census = store.aggregate(rollups=[hours], sum=["volume"]), store.shard_census()
    return {
        "written": written,
        "walk": walk,
        "streamed": [t.id for t in store.iter_ticks(columns=())],
        "counter": store.series_counter({"symbol": "AAA"}).read(live=True).value,
        "count": store.count(where={"symbol": "AAA"}),
        "aggregate": (summed.count, summed.sum),
        "census": (census.rows, census.total, census.unnamed, census.other),
        "redone": store.rollup(hours).redone,
    }


async def aevery_stream(store: AsyncTimeSeriesStore, hours: Rollup, late: list[dict[str, Any]]) -> dict[str, Any]:
    """:func:`every_stream` on the async store."""
    written = (await store.write(late)).created
    walk, page = [], await store.query(limit=WALK_PAGE, columns=())
    while True:
        walk += [t.id for t in page]
        if page.cursor is None:
            break
        page = await store.query(limit=WALK_PAGE, columns=(), cursor=page.cursor)
    summed, census = await store.aggregate(rollups=[hours], sum=["volume"]), await store.shard_census()
    counter = await store.series_counter({"symbol": "AAA"})
    return {
        "written": written,
        "walk": walk,
        "streamed": [t.id async for t in store.iter_ticks(columns=())],
        "counter": (await counter.read(live=True)).value,
        "count": await store.count(where={"symbol": "AAA"}),
        "aggregate": (summed.count, summed.sum),
        "census": (census.rows, census.total, census.unnamed, census.other),
        "redone": (await store.rollup(hours)).redone,
    }


@pytest.mark.parametrize("driver", ["sync", "sync-public-wire", "async"])
def test_every_stream_that_breaks_after_its_first_message_is_a_fault_retried_or_resumed(
    tsstore_emulator: Any, database_id: str, driver: str
) -> None:
    """The issue's soak: a stream cut after its first message raised the client's
    ``AttributeError: 'NoneType' object has no attribute '_predicate'`` from a write to a
    series with a roll-up (the writer's horizons), and from every other query tsstore ran
    through the client's own ``get`` with ``retry=None``. Each kind of stream now breaks
    after its first message, every other time, in the middle of every verb that streams, and
    the answers are a clean run's."""
    layout = dataclasses.replace(spec(3), collection=f"broken_{driver.replace('-', '_')}", count_by=("symbol",))
    hours = Rollup(layout, interval="1h", by="symbol", volume="volume")
    client = tsstore_emulator.client(database=database_id)
    rows = list(trading_day(READ_TICKS, seed=3))
    late = rows[::40]  # 20 ticks over the day: those before noon are in hours already rolled up
    oracle = TimeSeriesStore(client, layout, write_options=FAST)
    oracle.write([row for row in rows if row not in late])
    oracle.rollup(hours, until=DAY.replace(hour=12))

    async def on_the_loop() -> dict[str, Any]:
        async with AsyncTimeSeriesStore(tsstore_emulator.async_client(database=database_id), layout,
                                        write_options=FAST) as store:  # fmt: skip
            return await aevery_stream(store, hours, late)

    with streams_break_after_their_first_message() as broken:
        if driver.startswith("sync"):
            sync_client = tsstore_emulator.client(database=database_id)
            with TimeSeriesStore(sync_client, layout, write_options=FAST, fast_wire=driver == "sync") as store:
                got = every_stream(store, hours, late)
        else:
            got = asyncio.run(on_the_loop())
    assert set(broken) == set(STREAMS), broken
    assert got["written"] == len(late) and got["redone"] > 0
    summed = oracle.aggregate(sum=["volume"])
    census = oracle.shard_census()
    assert got == {
        "written": len(late),
        "walk": [t.id for t in oracle.iter_ticks(columns=())],
        "streamed": [t.id for t in oracle.iter_ticks(columns=())],
        "counter": oracle.count(where={"symbol": "AAA"}),
        "count": oracle.count(where={"symbol": "AAA"}),
        "aggregate": (summed.count, summed.sum),
        "census": (census.rows, census.total, census.unnamed, census.other),
        "redone": got["redone"],
    }
