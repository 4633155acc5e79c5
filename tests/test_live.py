"""Live data on the emulator: a tail delivers every tick written after it started exactly once
(late ones marked), a watch's window ends equal to the newest ticks stored, both survive cut
connections, and close() leaves no listener thread behind. The window and tail rules are also
tested without Firestore."""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import datetime as dt
import functools
import json
import logging
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from google.api_core.exceptions import Cancelled, DeadlineExceeded, ServiceUnavailable
from google.cloud.firestore_v1 import _helpers
from google.cloud.firestore_v1.base_document import DocumentSnapshot
from google.cloud.firestore_v1.base_query import FieldFilter
from google.cloud.firestore_v1.collection import CollectionReference
from google.cloud.firestore_v1.document import DocumentReference
from google.cloud.firestore_v1.types import document as document_types
from google.cloud.firestore_v1.types import firestore as firestore_types
from google.cloud.firestore_v1.types import write as write_types
from google.cloud.firestore_v1.watch import WATCH_TARGET_ID
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cli import tsstore as run_tsstore
from tests.mutants import Backwards, bites
from tests.proxy import CuttingProxy
from tsstore import (
    ConfigError,
    LiveError,
    Query,
    QueryError,
    QueryShape,
    SeriesSpec,
    TimeSeriesStore,
    WriteOptions,
    shards_for,
    wire,
)
from tsstore.live import listen as live_listen
from tsstore.live.listen import decoder
from tsstore.live.state import TailState, WindowState
from tsstore.logs import FAULTS_RETRIED, fields_of
from tsstore.local.emulator import emulator_client
from tsstore.memory import MemoryDatabase
from tsstore.memory import Query as MemoryQuery
from tsstore.memory import listen as live_listen_memory
from tsstore.memory.database import Write
from tsstore.read.chunks import chunk_query
from tsstore.read.plan import QueryPlan, plan_query
from tsstore.ticks import Tick

UTC = dt.timezone.utc
T = dt.datetime(2026, 1, 1, tzinfo=UTC)
SPEC = SeriesSpec(
    "live",
    shards=shards_for(20_000),
    shapes=[QueryShape("symbol", ("desc", "asc")), QueryShape([], ("desc", "asc"), ranges=["n"])],
    key_fields=["symbol", "n"],
)  # 40 shards: 2 chunks; with an `in` of 2 symbols, 3 chunks
#: A value filter on the server: pairs of ticks tie on their timestamp, and the query orders them by n.
EVEN_LATER = [("n", ">=", 10), ("n", "!=", 13)]
SYMBOLS = ["AAA", "BBB", "CCC"]


def tick(i: str, seconds: float, **data: Any) -> Tick:
    return Tick(i, dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=seconds), data)


def test_the_window_merges_chunk_reports_and_says_what_entered_and_left() -> None:
    state = WindowState(2, limit=3)
    state.report(0, [tick("a", 1), tick("b", 5)], None)
    assert state.update() is None  # chunk 1 has not reported yet
    state.report(1, [tick("c", 3), tick("d", 4)], None)
    first = state.update()
    assert first is not None and [t.id for t in first.window] == ["b", "d", "c"] and len(first.entered) == 3
    state.report(0, [tick("a", 1), tick("b", 5)], None)
    assert state.update() is None  # nothing changed
    state.report(0, [tick("e", 6), tick("b", 5)], None)
    state.report(1, [tick("c", 3), tick("d", 4, v=2)], None)  # a burst on both chunks: one update
    second = state.update()
    assert second is not None and [t.id for t in second.window] == ["e", "b", "d"]
    assert {t.id for t in second.entered} == {"e", "d"} and {t.id for t in second.left} == {"c", "d"}


def test_the_tail_delivers_once_marks_late_ticks_and_forgets_behind_its_bound() -> None:
    since = dt.datetime(2026, 1, 1, tzinfo=UTC)
    state = TailState(since=since, lateness=dt.timedelta(seconds=10))
    created = since + dt.timedelta(seconds=1)
    assert state.offer(tick("old", 50), since - dt.timedelta(seconds=1)) is None  # created before since
    first = state.offer(tick("a", 100), created)
    assert first is not None and not first.late
    assert state.offer(tick("a", 100), created) is None  # reported again: not delivered again
    late = state.offer(tick("b", 95), created)
    assert late is not None and late.late and state.newest == tick("a", 100).timestamp
    assert state.bound() == tick("x", 90).timestamp
    state.offer(tick("c", 200), created)
    state.forget_before(state.bound())
    assert state.remembered == 1 and (state.delivered, state.late) == (3, 1)
    # Forgotten ids cannot be told from new ones: a stale listener reporting ticks behind the
    # forgotten horizon again (a replaced or re-listened one) delivers nothing twice.
    assert state.offer(tick("a", 100), created) is None and state.offer(tick("z", 189), created) is None
    assert state.offer(tick("y", 191), created) is not None  # late, but within the lateness


RANGED = SeriesSpec(
    "live", shards=shards_for(20_000), shapes=[QueryShape([], ("desc", "asc"), ranges=["price.micros"])]
)  # 40 shards: 2 chunks


#: Ticks (second, shard, price: few of each, so timestamps and prices tie), the window's
#: length, the filter's bound, and the order the chunks report in.
WINDOW_CASES = {
    "rows": st.lists(st.tuples(st.integers(0, 4), st.integers(0, 39), st.integers(0, 6)), max_size=60),
    "limit": st.integers(1, 12),
    "bound": st.integers(0, 4),
    "seed": st.integers(0, 2**32 - 1),
}


@settings(max_examples=200, deadline=None)
@given(**WINDOW_CASES)
def test_a_watch_window_on_a_nested_range_field_equals_brute_force(
    rows: list[tuple[int, int, int]], limit: int, bound: int, seed: int
) -> None:
    """Ticks with tied timestamps and tied prices over 40 shards, a watch on ``price.micros >=
    bound``: each chunk's listener holds the chunk's newest ``limit`` matches (the server's
    choice, by brute force) in the order tsstore's comparator gives the client (which must be
    that brute-force order itself), reporting in random rounds; the merged window ends equal
    to the newest ``limit`` matches of all, in (timestamp, price, id) order."""
    plan = plan_query(RANGED, Query(where=[("price.micros", ">=", bound)], limit=limit), direction="desc")
    docs = [
        DocumentSnapshot(DocumentReference("live", f"id{i:03d}"),
                         {"shard": f"s{shard}", "price": {"micros": price}, "timestamp": T + dt.timedelta(seconds=t)},
                         True, None, None, None)
        for i, (t, shard, price) in enumerate(rows)
    ]  # fmt: skip

    def newest(found: list[Any]) -> list[Any]:  # brute force: Firestore's order, newest first
        order = sorted(found, key=lambda d: (d.get("timestamp"), d.get("price.micros"), d.id), reverse=True)
        return order[:limit]

    matching = [d for d in docs if d.get("price.micros") >= bound]
    state = WindowState(len(plan.chunks), limit, key=plan.key)
    shuffled = random.Random(seed)
    last = None
    for round_ in range(2):  # the first round sees half the ticks, the second all of them
        seen = matching if round_ else matching[: len(matching) // 2]
        for chunk in shuffled.sample(range(len(plan.chunks)), len(plan.chunks)):
            query = chunk_query(CollectionReference("live"), plan, plan.chunks[chunk], None, limit)
            held = newest([d for d in seen if d.get("shard") in plan.chunks[chunk]])
            delivered = sorted(shuffled.sample(held, len(held)), key=functools.cmp_to_key(wire.listener_order(query)))
            assert [d.id for d in delivered] == [d.id for d in held]  # the client's order is the server's
            state.report(chunk, [decoder("timestamp", None)(d) for d in delivered], None)
        last = state.update() or last
    assert last is not None and [t.id for t in last.window] == [d.id for d in newest(matching)]


@pytest.mark.parametrize("where", ["listener", "merge"])
def test_the_window_property_fails_when_a_tie_is_broken_the_other_way(
    monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Ties on (timestamp, price) broken by document id the other way, in the client's order
    (tsstore's comparator) or in the window's merge: the property above finds the window out
    of Firestore's order."""
    if where == "listener":
        order = wire.listener_order
        monkeypatch.setattr(wire, "listener_order", lambda query: _ties_flipped(order(query)))
    else:
        key = QueryPlan.key
        monkeypatch.setattr(QueryPlan, "key", lambda self, tick: (*key(self, tick)[:-1], Backwards(tick.id)))
    assert bites(test_a_watch_window_on_a_nested_range_field_equals_brute_force, **WINDOW_CASES)


def _ties_flipped(compare: Any) -> Any:
    def flipped(first: Any, second: Any) -> int:
        key = ("timestamp", "price.micros")
        same = [first.get(k) for k in key] == [second.get(k) for k in key]
        return -compare(first, second) if same else compare(first, second)

    return flipped


class CountedSnapshot(DocumentSnapshot):
    """A document snapshot that counts how often a value is read from it."""

    reads = 0

    def get(self, field_path: str) -> Any:
        CountedSnapshot.reads += 1
        return super().get(field_path)


def test_a_listener_reads_each_documents_place_once_however_often_it_sorts() -> None:
    """The client sorts every document a listener holds at each snapshot it reports (on the
    emulator, at every write to the collection): reading a document's values at each comparison
    made a tail holding 200 documents fall ever further behind a writer at 15 a second (issue
    59). Sorted five times, 200 documents on (price, timestamp, id) are read twice each, in order."""
    plan = plan_query(RANGED, Query(where=[("price.micros", ">=", 0)]), direction="desc")
    query = chunk_query(CollectionReference("live"), plan, plan.chunks[0], None, None)
    values = [{"price": {"micros": i % 3}, "timestamp": T + dt.timedelta(seconds=i // 4)} for i in range(200)]
    docs = [CountedSnapshot(DocumentReference("live", f"id{i:03d}"), v, True, None, None, None)
            for i, v in enumerate(values)]  # fmt: skip
    compare = functools.cmp_to_key(wire.listener_order(query))
    CountedSnapshot.reads = 0
    for seed in range(5):
        held = sorted(random.Random(seed).sample(docs, len(docs)), key=compare)
        assert held == sorted(docs, key=lambda d: (d.get("timestamp"), d.get("price.micros"), d.id), reverse=True)
        CountedSnapshot.reads -= 2 * len(docs)  # the oracle's own reads
    assert CountedSnapshot.reads == 2 * len(docs)


class GivenUp:
    """A listener the client may give up on (``is_active`` false, as after a cut: CANCELLED)."""

    def __init__(self, on_snapshot: Any) -> None:
        self.report, self.is_active = on_snapshot, True

    def unsubscribe(self) -> None:
        self.is_active = False


def test_a_listener_given_up_often_but_reporting_between_is_listened_to_again(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The client gives a listener up at each cut connection: through cuts every second, a
    soak's tail raised LiveError at the fourth within a minute and stopped delivering. Only
    deaths with no report between them count towards the error. Each time is a warning."""
    caplog.set_level(logging.WARNING, logger="tsstore")
    made: list[GivenUp] = []
    listeners = live_listen.Listeners(lambda query, on_snapshot, *, ordered: made.append(GivenUp(on_snapshot))
                                      or made[-1], ordered=False)  # fmt: skip
    listeners.listen("chunk", live_listen.ChunkQuery(plan_query(SPEC, Query()), ("s0",), None))
    for _ in range(3 * live_listen.RELISTENS_PER_MINUTE):
        made[-1].report([], [], T)  # it reports, then the client gives it up
        made[-1].is_active = False
        listeners.check()
    assert listeners.relistens == len(made) - 1 == 3 * live_listen.RELISTENS_PER_MINUTE
    warned = [r for r in caplog.records if r.name == "tsstore.live.listen" and r.levelname == "WARNING"]
    assert len(warned) == listeners.relistens and all(fields_of(r) == {FAULTS_RETRIED: 1} for r in warned)
    assert warned[0].getMessage().startswith("the client gave up the listener on chunk chunk (it logged why)")
    with pytest.raises(LiveError, match="stopped 4 times within a minute"):
        for _ in range(live_listen.RELISTENS_PER_MINUTE + 1):  # no report between: final
            made[-1].is_active = False
            listeners.check()
    listeners.close()


def test_a_memory_listener_reports_a_first_snapshot_then_each_commit_that_changes_its_answer() -> None:
    """The memory database's listener on a limited query, as the client reports Firestore's: a
    first snapshot; then, in commit order and at each commit's time, a snapshot for each commit
    that changes what the query returns (a new document added, a changed one held again with
    nothing added, the window's oldest pushed out), none for a commit elsewhere or one that
    changes nothing; nothing once unsubscribed."""
    database = MemoryDatabase()
    database.commit([Write("live/a", {"n": 1})])
    reports: list[tuple[list[str], list[str], dt.datetime]] = []
    query = MemoryQuery("live", (("n", ">", 0),), (("n", True),), limit=2)
    listener = live_listen_memory.MemoryListener(database, query, lambda docs, added, read_time: reports.append(
        ([d.id for d in docs], [d.id for d in added], read_time)))  # fmt: skip
    commits = [database.commit([Write("live/b", {"n": 2})])[0],
               database.commit([Write("other/x", {"n": 9})])[0],  # another collection
               database.commit([Write("live/b", {"n": 2})])[0],  # the same again: nothing changes
               database.commit([Write("live/a", {"n": 1, "v": 1})])[0],  # a held document changes
               database.commit([Write("live/z", {"n": 0})])[0],  # no match
               database.commit([Write("live/c", {"n": 3})])[0]]  # a's place taken  # fmt: skip
    listener.unsubscribe()
    database.commit([Write("live/d", {"n": 4})])
    assert [(docs, added) for docs, added, _ in reports] == [
        (["a"], ["a"]), (["b", "a"], ["b"]), (["b", "a"], []), (["c", "b"], ["c"])]
    assert [read for *_, read in reports[1:]] == [commits[0], commits[3], commits[5]]
    assert not listener.is_active


def listen_response(kind: str, *, doc: Any = None, read_time: dt.datetime | None = None) -> Any:
    """A Listen stream's message as the emulator sends it: a target change (ADD, RESET, CURRENT,
    or NO_CHANGE with a read time: a consistent state), or ``doc``'s document in the target."""
    if doc is not None:
        fields = _helpers.encode_dict(doc.to_dict())
        document = document_types.Document(name=doc.reference._document_path, fields=fields,
                                           create_time=doc.create_time, update_time=doc.update_time)  # fmt: skip
        return firestore_types.ListenResponse(
            document_change=write_types.DocumentChange(document=document, target_ids=[WATCH_TARGET_ID])
        )
    kind_of = firestore_types.TargetChange.TargetChangeType[kind]
    targets = [] if kind == "NO_CHANGE" else [WATCH_TARGET_ID]  # a NO_CHANGE for no target: the whole stream's
    change = firestore_types.TargetChange(target_change_type=kind_of, target_ids=targets, read_time=read_time,
                                          resume_token=b"token")  # fmt: skip
    return firestore_types.ListenResponse(target_change=change)


#: What the emulator sent a listener holding ``a`` and ``b`` once ``c`` was written (each
#: seen in the soak, issue 59): after the client reopened the stream by itself (UNAVAILABLE),
#: part of the result set, a RESET, and only the rest, or a state without a commit made while
#: the stream was down, then nothing more; and on a stream not reopened (an answer racing a
#: write), documents, a RESET, and only the rest.
RESUMED = {
    "reopened-documents-before-a-reset": ["ADD", "b", "c", "RESET", "a", "CURRENT", "NO_CHANGE"],
    "reopened-a-commit-missed": ["ADD", "a", "b", "CURRENT", "NO_CHANGE"],
    "documents-before-a-reset": ["c", "RESET", "a", "b", "CURRENT", "NO_CHANGE"],
}


@pytest.mark.parametrize("sent", RESUMED.values(), ids=RESUMED.keys())
def test_a_listener_reports_what_its_query_answers_when_a_stream_starts_or_a_reset_drops(
    tsstore_emulator: Any, monkeypatch: pytest.MonkeyPatch, sent: list[str]
) -> None:
    """tsstore's listener (the client's, with its stream left unopened) fed what the emulator
    sent: its first report, and its report after each case of :data:`RESUMED`, is what the
    query answers at the report's read time (before: the first without ``b``, committed while
    the emulator sent its first state; then ``c`` never added, and ``b`` REMOVED in the first
    case. No later message brought them until the next write, which a writer's last commit
    never has)."""
    client = tsstore_emulator.client(database=f"live-resumed-{random.randrange(10**9)}")
    collection = client.collection("live")
    collection.document("a").set({"n": 1})
    monkeypatch.setattr(wire.Watch, "_init_stream", lambda self: None)  # no stream: the test sends its messages
    reports: list[tuple[list[str], list[tuple[str, str]]]] = []
    query = collection.where(filter=FieldFilter("n", ">", 0))
    watch = wire.listen(query, lambda docs, changes, read_time: reports.append(
        ([d.id for d in docs], [(c.type.name, c.document.id) for c in changes])))  # fmt: skip
    first = {d.id: d for d in collection.stream()}
    written = collection.document("b").set({"n": 2}).update_time
    for message in ["ADD", "a", "CURRENT", "NO_CHANGE"]:
        watch.on_snapshot(listen_response(message, doc=first.get(message), read_time=written))
    assert reports == [(["a", "b"], [("ADDED", "a"), ("ADDED", "b")])]
    written = collection.document("c").set({"n": 3}).update_time
    stored = {d.id: d for d in collection.stream()}
    for message in sent:
        watch.on_snapshot(listen_response(message, doc=stored.get(message), read_time=written))
    assert sorted(reports[-1][0]) == ["a", "b", "c"] and reports[-1][1] == [("ADDED", "c")]


@pytest.fixture
def live(tsstore_emulator: Any) -> Iterator[dict[str, Any]]:
    yield from on_emulator(tsstore_emulator)


def on_emulator(emulator: Any) -> Iterator[dict[str, Any]]:
    """A reading store (through a proxy that can cut its connections) and a writing one on a
    new database of ``emulator``, the reading client, and what the tests of :func:`live_on` take."""
    database = f"live-{random.randrange(10**9)}"
    proxy = CuttingProxy(emulator.address)
    client = emulator_client(proxy.address, database=database)  # the readers go through the proxy
    writer = TimeSeriesStore(emulator.client(database=database), SPEC, write_options=WriteOptions(ramp=False))
    yield {
        "store": TimeSeriesStore(client, SPEC), "writer": writer, "proxy": proxy, "client": client,
        "stored": lambda: [d.to_dict() | {"id": d.id} for d in client.collection("live").stream()],
        "async_client": lambda: emulator.async_client(database=database),
        "client_for": lambda name: emulator.client(database=f"{name}-{random.randrange(10**9)}"),
        "quiet": 1.0, "pause": 0.05,  # listeners report a write within about a second
    }  # fmt: skip
    proxy.close()


@pytest.fixture(params=[pytest.param("emulator", marks=pytest.mark.emulator), "memory"])
def live_on(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """What :func:`live` gives, on the emulator (the truth) or on a memory database, whose
    listeners must answer alike: they report each commit before the commit returns, so a
    tenth of a second without a report is quiet there and a writer need not pause (no proxy,
    no reading client)."""
    if request.param == "emulator":
        yield from on_emulator(request.getfixturevalue("emulator"))
        return
    database = MemoryDatabase()
    writer = TimeSeriesStore(database, SPEC, write_options=WriteOptions(ramp=False))
    yield {
        "store": TimeSeriesStore(database, SPEC), "writer": writer,
        "stored": lambda: [f.data | {"id": f.id} for f in database.run(MemoryQuery("live"))[0]],
        "async_client": lambda: database, "client_for": lambda name: MemoryDatabase(), "quiet": 0.1, "pause": 0.0,
    }  # fmt: skip


def write_steadily(
    writer: TimeSeriesStore, *, batches: int, per_batch: int, late_every: int, pause: float = 0.05
) -> list[dict[str, Any]]:
    """Ticks at now-ish times in small batches, ``pause`` seconds apart; every ``late_every``-th
    batch also writes one tick 20 s in the past. Returns every row with its document id."""
    rows: list[dict[str, Any]] = []
    for b in range(batches):
        now = dt.datetime.now(UTC)
        batch = [  # pairs of ticks share a timestamp: real feeds tie, and the listeners must cope
            {"symbol": random.choice(SYMBOLS), "n": len(rows) + k, "timestamp": now + dt.timedelta(microseconds=k // 2)}
            for k in range(per_batch)
        ]
        if b % late_every == late_every - 1:
            past = now - dt.timedelta(seconds=20)
            batch.append({"symbol": "AAA", "n": len(rows) + per_batch, "timestamp": past, "late": True})
        result = writer.write(batch)
        rows += [{**row, "id": i} for row, i in zip(batch, result.ids)]
        time.sleep(pause)
    return rows


def ours() -> int:
    """Threads alive, not counting the test proxy's."""
    return sum(not t.name.startswith("proxy") for t in threading.enumerate())


def drain(tail: Any, until: set[str], *, timeout: float = 60, settle: float = 1) -> list[Any]:
    """What ``tail`` delivers until every id of ``until`` came, then until it is quiet: every
    listener that replaces another has made its first report (what it re-reports is where a
    tick delivered twice would come from), and ``settle`` seconds pass with nothing more."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while not until <= {t.tick.id for t in got} and time.monotonic() < deadline:
        item = tail.next_tick(timeout=1)
        if item is not None:
            got.append(item)
    assert isinstance(tail._pending, dict)  # chunk -> when its replacement listener started
    while settle and tail._pending and time.monotonic() < deadline + 30:
        if (item := tail.next_tick(timeout=0.2)) is not None:
            got.append(item)
    while settle and (item := tail.next_tick(timeout=settle)) is not None:  # anything delivered twice shows up now
        got.append(item)
    return got


def settled_window(watch: Any, want: list[str], *, timeout: float = 60, quiet: float = 1) -> Any:
    """The watch's last update once its window is ``want`` (or ``timeout`` passed), after
    ``quiet`` seconds with no further update (a window that moved on from ``want`` would show up now)."""
    last = None
    deadline = time.monotonic() + timeout
    while (last is None or [t.id for t in last.window] != want) and time.monotonic() < deadline:
        update = watch.next_update(timeout=1)
        last = update or last
    return watch.next_update(timeout=quiet) or last


def kept(row: dict[str, Any], where: Any) -> bool:
    if isinstance(where, dict):
        return bool(row["symbol"] in where["symbol"])
    return where is None or (row["n"] >= 10 and row["n"] != 13)


@pytest.mark.parametrize(
    "where", [None, {"symbol": ["AAA", "BBB"]}, EVEN_LATER], ids=["2-chunks", "3-chunks", "value-filter"]
)
def test_tail_delivers_every_tick_written_after_it_started_exactly_once(live_on: dict[str, Any], where: Any) -> None:
    live = live_on
    store, writer = live["store"], live["writer"]
    writer.write([{"symbol": "AAA", "n": 10**6, "timestamp": dt.datetime.now(UTC)}])  # before the tail: not delivered
    chunks = len(store.plan(where=where).chunks)
    assert chunks == (3 if isinstance(where, dict) else 2)
    with store.tail(where=where, hold=20) as tail:  # a small hold: listeners move on several times
        rows = write_steadily(writer, batches=10, per_batch=10, late_every=5, pause=live["pause"])
        wanted = {r["id"] for r in rows if kept(r, where)}
        got = drain(tail, wanted, settle=live["quiet"])
        restarts = tail.restarts
    ids = [t.tick.id for t in got]
    assert len(ids) == len(set(ids)) and set(ids) == wanted  # exactly once, nothing else
    late_rows = {r["id"] for r in rows if r.get("late") and r["id"] in wanted}  # the 20-s-old ticks
    assert {t.tick.id for t in got if t.late} >= late_rows and late_rows
    assert restarts > 0


def test_watch_window_equals_the_newest_stored_ticks_once_the_writer_stops(live_on: dict[str, Any]) -> None:
    live = live_on
    store, writer = live["store"], live["writer"]
    cases = ((None, 25), ({"symbol": ["AAA", "BBB"]}, 7), (EVEN_LATER, 9))
    settled = []
    with contextlib.ExitStack() as watches:  # three watches on the same writes, each with its own oracle
        opened = [watches.enter_context(store.watch(where=where, limit=limit)) for where, limit in cases]
        write_steadily(writer, batches=6, per_batch=8, late_every=4, pause=live["pause"])
        docs = live["stored"]()  # the writer stopped
        for (where, limit), watch in zip(cases, opened):
            matching = [d for d in docs if kept(d, where)]
            in_order = (lambda d: (d["timestamp"], d["n"], d["id"])) if where == EVEN_LATER else None
            oracle = sorted(matching, key=in_order or (lambda d: (d["timestamp"], d["id"])), reverse=True)[:limit]
            settled.append((where, oracle, settled_window(watch, [d["id"] for d in oracle], quiet=live["quiet"])))
    for where, oracle, last in settled:
        assert last is not None and len(last.read_times) == len(store.plan(where=where).chunks)
        assert [t.id for t in last.window] == [d["id"] for d in oracle]


def test_a_cut_connection_loses_and_repeats_nothing(live: dict[str, Any]) -> None:
    store, writer, proxy = live["store"], live["writer"], live["proxy"]
    with store.tail() as tail:
        first = write_steadily(writer, batches=3, per_batch=10, late_every=99)
        got = drain(tail, {r["id"] for r in first}, timeout=30, settle=0)  # a repeat shows up in the second
        assert proxy.cut() > 0  # every connection of the reading client, listeners included
        second = write_steadily(writer, batches=3, per_batch=10, late_every=99)
        got += drain(tail, {r["id"] for r in first + second} - {t.tick.id for t in got}, timeout=90)
    ids = [t.tick.id for t in got]
    assert len(ids) == len(set(ids)) == len(first) + len(second)
    assert set(ids) == {r["id"] for r in first + second}


def test_a_tail_does_not_sort_what_its_listeners_hold(live: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A tail delivers from each snapshot's changes, in any order: its listeners hold every
    tick of the last ``lateness`` (30 s by default, up to ``hold`` documents), and the client
    sorts all of them at each snapshot unless the listener's order finds them all equal."""
    compared = []
    order = wire.listener_order

    def counted(query: Any) -> Any:
        compare = order(query)

        def counting(first: Any, second: Any) -> int:
            compared.append(1)
            return compare(first, second)

        return counting

    monkeypatch.setattr(wire, "listener_order", counted)
    store, writer = live["store"], live["writer"]
    with store.tail() as tail:
        rows = write_steadily(writer, batches=4, per_batch=10, late_every=2)
        got = drain(tail, {r["id"] for r in rows}, settle=0)
    assert sorted(t.tick.id for t in got) == sorted(r["id"] for r in rows) and compared == []
    with store.watch(limit=5) as watch:  # a watch's listeners still order theirs
        write_steadily(writer, batches=1, per_batch=3, late_every=99)
        assert watch.next_update(timeout=60) is not None and compared


#: The soak's cases: (shards, ticks a second, whether the readers go through a proxy cutting
#: their connections about once a second); every pair of the three dimensions once.
SOAK = [(3, 15, False), (40, 15, True), (3, 500, True), (40, 500, False)]
#: The window the soak's watch keeps.
SOAK_WINDOW = 20


def write_soak(
    writer: TimeSeriesStore, client: Any, *, rate: int, seed: int, halfway: Callable[[], object] = lambda: None
) -> list[dict[str, Any]]:
    """Ticks at ``rate`` a second for 2 s, a quarter of them on the timestamp of the tick
    before, one in twenty older than the newest written (0.2-1.2 s; 0.1-0.4 s above 15 a
    second). Up to 15 a second each tick is one ``write()``; above, five commits a second of
    a fifth of ``rate`` each, documents as the writer makes them: the emulator sends every
    listener its whole result set again at each commit, and a ``write()`` of 100 ticks is 100
    of them (4-12 s for 50 ticks with one tail open at 40 shards). Calls ``halfway`` after the
    middle write. Returns every row with its id."""
    draw = random.Random(seed)
    spec = writer.spec
    collection = client.collection(spec.collection)
    per_write, seconds, late = (1, 2.0, (0.2, 1.2)) if rate <= 15 else (rate // 5, 1.0, (0.1, 0.4))
    writes = round(rate * seconds / per_write)
    rows: list[dict[str, Any]] = []
    newest: dt.datetime | None = None
    start = time.monotonic()
    for w in range(writes):
        batch: list[dict[str, Any]] = []
        now = dt.datetime.now(UTC)
        for k in range(per_write):
            chance, before = draw.random(), (rows + batch)[-1:]
            if newest is not None and chance < 0.05:
                at = newest - dt.timedelta(seconds=draw.uniform(*late))
            elif before and chance < 0.30:
                at = before[0]["timestamp"]
            else:
                at = now + dt.timedelta(microseconds=k)
            newest = at if newest is None else max(newest, at)
            batch.append({"n": len(rows) + k, "timestamp": at})
        if per_write == 1:
            rows += [{**row, "id": i} for row, i in zip(batch, writer.write(batch).ids)]
        else:
            commit = client.batch()
            for row in batch:
                commit.set(collection.document(f"t{row['n']:06d}"), {**row, spec.shard_field: draw.choice(spec.shards)})
            for attempt in range(5):  # a loaded emulator cancels a commit now and then; it sets the same again
                try:
                    commit.commit()
                    break
                except (Cancelled, DeadlineExceeded, ServiceUnavailable):
                    if attempt == 4:
                        raise
            rows += [{**row, "id": f"t{row['n']:06d}"} for row in batch]
        if w == writes // 2:
            halfway()
        time.sleep(max(0.0, start + (w + 1) * seconds / writes - time.monotonic()))
    return rows


# The client raises a listener's end (CANCELLED at a cut) in a thread of its own; tsstore listens again.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
@pytest.mark.parametrize(
    ("shards", "rate", "cut"),
    SOAK,
    ids=[f"{s}-shards-{r}-a-s{'-cut' * c}" for s, r, c in SOAK],
)
def test_soak_tail_and_watch_deliver_every_tick_once(tsstore_emulator: Any, shards: int, rate: int, cut: bool) -> None:
    """A tail and a watch open while one writer writes ties and late ticks: the tail delivers
    every tick exactly once, the watch lets each tick enter its window at most once and ends
    on the newest stored. The waits are for a loss, not a speed: 120 s for what a listener
    delivers within a second or two (a tail whose listeners sorted all they held at each
    snapshot took up to a minute on a loaded machine, issue 59)."""
    database = f"soak-{random.randrange(10**9)}"
    spec = SeriesSpec("soak", shards=shards_for(shards * 500), key_fields=["n"])
    proxy = CuttingProxy(tsstore_emulator.address)
    address = proxy.address if cut else tsstore_emulator.address
    reader = TimeSeriesStore(emulator_client(address, database=database), spec)
    direct = tsstore_emulator.client(database=database)
    writer = TimeSeriesStore(direct, spec, write_options=WriteOptions(ramp=False))
    fast = rate > 15  # small windows for a fast writer: listeners move on within the soak
    options: dict[str, Any] = {"lateness": dt.timedelta(seconds=0.5), "hold": 100} if fast else {}
    tailed: list[str] = []
    updates: list[Any] = []
    failures: list[BaseException] = []  # what ended a follower early (a LiveError says which listener)
    stop = threading.Event()

    def follow(step: Any, into: list[Any]) -> None:
        try:
            while not stop.is_set():
                if (item := step(0.2)) is not None:
                    into.append(item)
        except Exception as exc:
            failures.append(exc)

    with reader.tail(**options) as tail, reader.watch(limit=SOAK_WINDOW) as watch:
        followers = [
            threading.Thread(target=follow, args=(lambda wait: (t := tail.next_tick(wait)) and t.tick.id, tailed)),
            threading.Thread(target=follow, args=(watch.next_update, updates)),
        ]
        for follower in followers:
            follower.start()
        with proxy.cutting(every=1.0) if cut else contextlib.nullcontext():
            # One cut halfway besides the timed ones: a writer done in 1 s can finish before the first of those.
            rows = write_soak(writer, direct, rate=rate, seed=shards * rate, halfway=proxy.cut if cut else lambda: None)
        newest = [r["id"] for r in sorted(rows, key=lambda r: (r["timestamp"], r["id"]), reverse=True)[:SOAK_WINDOW]]
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not (
            {r["id"] for r in rows} <= set(tailed) and updates and [t.id for t in updates[-1].window] == newest
        ):
            time.sleep(0.1)
        time.sleep(1)  # a tick delivered twice, or a window moving on, shows up now
        stop.set()
        for follower in followers:
            follower.join()
        restarts, cuts = tail.restarts, proxy.cuts
    proxy.close()
    ids = [r["id"] for r in rows]
    assert failures == []
    assert len(set(ids)) == len(ids) == (30 if rate == 15 else rate) and len({r["timestamp"] for r in rows}) < len(rows)
    assert sorted(tailed) == sorted(ids)  # every tick once, nothing else
    entered = [t.id for update in updates for t in update.entered]
    assert len(entered) == len(set(entered)) and [t.id for t in updates[-1].window] == newest
    assert restarts == 0 or fast  # a fast writer's tail may move on (whether it did depends on the machine's pace)
    assert cuts > 0 if cut else cuts == 0


NESTED = SeriesSpec(
    "live_nested", shards=shards_for(20_000), shapes=[QueryShape([], ("desc", "asc"), ranges=["price.micros"])]
)


def test_live_windows_on_a_nested_range_field_keep_their_order_when_timestamps_tie(live_on: dict[str, Any]) -> None:
    """The client's listener compared tied documents by ``price.micros`` as a top-level key and
    stopped (``LiveError`` after 4 restarts); a watch and a tail on that filter now hold the
    newest ticks in Firestore's order (timestamp, price, id) and deliver each tick once."""
    client = live_on["client_for"]("live-nested")
    store = TimeSeriesStore(client, NESTED, write_options=WriteOptions(ramp=False))
    where = [("price.micros", ">=", 10)]
    now = dt.datetime.now(UTC)
    rows = [{"symbol": "AAA", "price": {"micros": 10 + (7 * k) % 11}, "timestamp": now - dt.timedelta(seconds=k // 2)}
            for k in range(8)]  # fmt: skip
    ids = store.write(rows).ids
    with store.watch(where=where, limit=5) as watch, store.tail(where=where) as tail:
        later = [{**row, "timestamp": now + dt.timedelta(seconds=1)} for row in rows[:4]]  # four ticks at one time
        later_ids = store.write(later).ids
        stored = [(r["timestamp"], r["price"]["micros"], i) for r, i in zip(rows + later, ids + later_ids)]
        want = [i for *_, i in sorted(stored, reverse=True)[:5]]
        last = settled_window(watch, want, timeout=30, quiet=live_on["quiet"])
        got = drain(tail, set(later_ids), timeout=30, settle=live_on["quiet"])
    assert last is not None and [t.id for t in last.window] == want
    assert sorted(t.tick.id for t in got) == sorted(later_ids)
    if hasattr(client, "close"):  # a Firestore client (a memory database has nothing to close)
        client.close()


#: The names the client gives a listener's threads (its stream's consumer, and the one that closes it on an error).
LISTENER_THREADS = ("Thread-ConsumeBidirectionalStream", "Thread-OnRpcTerminated")


def test_close_leaves_no_listener_thread_running(live: dict[str, Any]) -> None:
    store = live["store"]
    store.count()  # the client's own channel threads exist before we look
    others = set(threading.enumerate())  # threads earlier tests of this worker left may come and go: not counted

    def listening() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t not in others and t.name.startswith(LISTENER_THREADS)]

    watch, tail = store.watch(limit=5), store.tail(where={"symbol": ["AAA", "BBB"]})
    watch.next_update(timeout=10)
    started = listening()
    watch.close()
    tail.close()
    deadline = time.monotonic() + 60  # a bound for a hang, not a speed: a loaded machine ends threads late
    while listening() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(started) >= 5 and not listening(), (started, listening())  # 2 + 3 listeners started, all gone
    assert watch.next_update(timeout=1) is None and tail.next_tick(timeout=1) is None


def test_live_verbs_refuse_what_they_do_not_take(live: dict[str, Any]) -> None:
    store = live["store"]
    with pytest.raises(QueryError, match=r"watch\(\) got unknown option\(s\) start; it takes limit, where, columns"):
        store.watch(limit=5, start=dt.datetime.now(UTC))
    with pytest.raises(TypeError, match=r"tail\(\) got unknown option\(s\) limit; it takes since, lateness"):
        store.tail(limit=5)
    with pytest.raises(QueryError, match="watch does not take start"):  # the same, given as a Query
        store.watch(Query(start=dt.datetime.now(UTC)), limit=5)
    with pytest.raises(ConfigError, match="hold 0 is not allowed"):
        store.tail(hold=0)


def test_tail_and_watch_commands(live: dict[str, Any], tsstore_emulator: Any, tmp_path: Path) -> None:
    writer = live["writer"]
    (tmp_path / "spec.toml").write_text(
        '[[series]]\ncollection = "live"\nwrites_per_second = 20000\nkey_fields = ["symbol", "n"]\n'
        'shapes = [{ fields = ["symbol"], directions = ["desc", "asc"] }]\n'
        'columns = { symbol = "string", n = "Int64", late = "boolean" }\n'  # late ticks carry `late`
    )
    database = writer.client._database
    env = dict(os.environ, FIRESTORE_EMULATOR_HOST=tsstore_emulator.address)
    base = [sys.executable, "-m", "tsstore"]
    common = ["--spec", "spec.toml", "--database", database]
    written: set[str] = set()

    def run_until_done(process: subprocess.Popen[Any], *, stop: Any = None) -> tuple[Any, Any]:
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            written.update(r["id"] for r in write_steadily(writer, batches=2, per_batch=5, late_every=2))
            if stop is not None and stop():
                process.send_signal(signal.SIGINT)  # Ctrl-C, once
                stop = None
        return process.communicate(timeout=30)

    # --max-ticks ends the tail by itself: in this process (tests/cli.py), while a thread writes.
    host = {"FIRESTORE_EMULATOR_HOST": tsstore_emulator.address}
    writing = threading.Event()

    def write_until_done() -> None:
        deadline = time.monotonic() + 120
        try:
            while not writing.is_set() and time.monotonic() < deadline:
                written.update(r["id"] for r in write_steadily(writer, batches=2, per_batch=5, late_every=2))
        finally:
            if not writing.is_set():  # the tail still waits, and will get nothing more: Ctrl-C (exit 130)
                _thread.interrupt_main()

    writes = threading.Thread(target=write_until_done, name="test-writer")
    writes.start()
    try:
        limited = run_tsstore("tail", *common, "--format", "jsonl", "--max-ticks", "10", "--where", "symbol=AAA",
                              env=host, cwd=tmp_path)  # fmt: skip
    finally:
        writing.set()
        writes.join(timeout=60)
    rows = [json.loads(line) for line in limited.stdout.splitlines()]
    assert limited.returncode == 0, limited.stderr
    assert len(rows) == 10 and all(r["symbol"] == "AAA" for r in rows) and {r["_id"] for r in rows} <= written
    assert len({r["_id"] for r in rows}) == 10
    assert f"tailed 10 tick(s), {sum(r['_late'] for r in rows)} late" in limited.stderr

    started = time.monotonic()
    stopped = subprocess.Popen(
        [*base, "tail", *common, "--format", "csv"], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    assert stopped.stdout is not None
    early: list[bytes] = []  # what it printed before the Ctrl-C

    # Ctrl-C once the header and a first row are out, or after 45 s at most (a bound for a
    # hang, within run_until_done's 60 s: on a loaded machine the start alone takes seconds)
    def printed() -> bool:
        while select.select([stopped.stdout], [], [], 0)[0] and (chunk := os.read(stopped.stdout.fileno(), 65536)):
            early.append(chunk)
        return b"".join(early).count(b"\n") >= 2 or time.monotonic() - started > 45

    rest, err_bytes = run_until_done(stopped, stop=printed)
    out, err = (b"".join(early) + rest).decode(), err_bytes.decode()
    lines = out.splitlines()
    assert stopped.returncode == 130, err  # Ctrl-C's code, after the summary
    assert lines[0].startswith("timestamp,_id,_late,") and len(lines) > 1
    assert f"tailed {len(lines) - 1} tick(s)" in err

    once = run_tsstore("watch", *common, "--limit", "5", "--once", env=host, cwd=tmp_path)  # ends by itself
    assert once.returncode == 0, once.stderr
    assert len(once.stdout.splitlines()) == 2 + 5 and "5 entered, 0 left" in once.stderr  # two header lines

    # Ctrl-C while watching (listener threads alive): exit 130, one line, no thread traceback.
    watching = subprocess.Popen(
        [*base, "watch", *common, "--limit", "3"], cwd=tmp_path, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert watching.stderr is not None
    deadline = time.monotonic() + 60
    while "entered" not in (line := watching.stderr.readline()) and line and time.monotonic() < deadline:
        pass
    watching.send_signal(signal.SIGINT)
    _, err = watching.communicate(timeout=30)
    assert watching.returncode == 130 and "interrupted: tsstore watch stopped before it finished" in err, err
    assert "Traceback" not in err


DROPS_CTRL_C = """
import signal

from tests.test_live import SPEC


class Drops:
    def __del__(self) -> None:
        signal.raise_signal(signal.SIGINT)  # Ctrl-C landing in a __del__: Python drops its KeyboardInterrupt


Drops()
"""


@pytest.mark.parametrize("command", ["tail", "watch"])
def test_a_ctrl_c_python_drops_still_stops_tail_and_watch(
    live: dict[str, Any], tsstore_emulator: Any, tmp_path: Path, command: str
) -> None:
    # Seen in CI: Ctrl-C while `tsstore tail` was still importing raised KeyboardInterrupt in
    # an import-system callback, where Python prints "Exception ignored" and goes on; the tail
    # then ran until killed. Here the Ctrl-C lands in a __del__ as the declaration loads.
    (tmp_path / "drops.py").write_text(DROPS_CTRL_C)
    env = dict(os.environ, FIRESTORE_EMULATOR_HOST=tsstore_emulator.address,
               PYTHONPATH=os.pathsep.join([str(tmp_path), str(Path(__file__).parents[1])]))  # fmt: skip
    database = live["writer"].client._database
    done = subprocess.run(
        [sys.executable, "-m", "tsstore", command, "--spec", "drops:SPEC", "--database", database],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert "Exception ignored" in done.stderr  # Python dropped it
    assert done.returncode == 130, done.stderr
    stopped = "tailed 0 tick(s), 0 late" if command == "tail" else "tsstore watch stopped before it finished"
    assert f"interrupted: {stopped}" in done.stderr


def test_a_command_a_test_interrupts_starts_with_ctrl_c_at_its_default() -> None:
    """However this run was started (a background job of a script ignores SIGINT), a command a
    test starts has Ctrl-C at its default, as from a terminal (tests/conftest.py): one that
    inherited SIGINT ignored stopped on no Ctrl-C the test sent, and the test waited out its timeout."""
    probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.SIG_IGN)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["False"], done.stderr


def test_a_ctrl_c_inside_a_deferred_step_comes_when_the_step_ends() -> None:
    # Seen in a loaded run: "tailed 7 tick(s)" over 6 printed rows. The tail blocked SIGINT in
    # its main thread while it counted and printed a row; the system then gave the Ctrl-C to
    # another thread, and Python still ran its handler in the main thread, inside the step.
    # Here a Ctrl-C is sent to the process (not a thread) while another thread runs.
    from tsstore.cli.exits import _ctrl_c_noted, _on_ctrl_c, ctrl_c_deferred

    # Python's own handler first, as a process started in a terminal has it: one started with
    # SIGINT ignored (a background job of a script, such as a CI runner's) keeps ignoring it,
    # and tsstore then leaves Ctrl-C alone.
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    done: list[int] = []
    try:
        with _ctrl_c_noted():
            assert signal.getsignal(signal.SIGINT) is _on_ctrl_c
            with pytest.raises(KeyboardInterrupt):
                with ctrl_c_deferred():
                    os.kill(os.getpid(), signal.SIGINT)
                    for step in range(20):  # the GIL taken back each time: where Python runs the handler
                        time.sleep(0.01)
                        done.append(step)
            assert len(done) == 20  # the step was not cut
            assert signal.getsignal(signal.SIGINT) is _on_ctrl_c
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    finally:
        signal.signal(signal.SIGINT, inherited)
        stop.set()
        other.join()


def test_async_watch_and_tail_run_the_same_engine(live_on: dict[str, Any]) -> None:
    from tsstore import AsyncTimeSeriesStore

    live, settle = live_on, live_on["quiet"]
    writer = live["writer"]
    astore = AsyncTimeSeriesStore(live["async_client"](), SPEC)
    with pytest.raises(QueryError, match=r"tail\(\) got unknown option\(s\) limit"):
        astore.tail(limit=3)

    async def run() -> tuple[list[Any], Any]:
        got: list[Any] = []
        await astore.server_time()  # the async client's own gRPC poller thread starts here, and stays
        threads.append(ours())
        async with astore.tail(where={"symbol": ["AAA", "BBB"]}) as tail, astore.watch(limit=6) as watch:
            assert await tail.next(timeout=0.5) is None  # starts the listeners; nothing written yet
            rows = await asyncio.to_thread(functools.partial(write_steadily, writer, pause=live["pause"]), batches=6,
                                           per_batch=6, late_every=3)  # fmt: skip
            wanted = {r["id"] for r in rows if r["symbol"] in ("AAA", "BBB")}
            async for item in tail:
                got.append(item)
                if {t.tick.id for t in got} >= wanted:
                    break
            quiet = time.monotonic() + 30  # as drain(): every replacing listener has reported, then 1 s of nothing
            while tail._live._pending and time.monotonic() < quiet:
                if (extra := await tail.next(timeout=0.2)) is not None:
                    got.append(extra)
            while (extra := await tail.next(timeout=settle)) is not None:
                got.append(extra)
            stored = await asyncio.to_thread(live["stored"])  # all written
            newest = [d["id"] for d in sorted(stored, key=lambda d: (d["timestamp"], d["id"]), reverse=True)[:6]]
            last = None
            deadline = time.monotonic() + 60
            while (last is None or [t.id for t in last.window] != newest) and time.monotonic() < deadline:
                last = await watch.next(timeout=1) or last
            last = await watch.next(timeout=settle) or last  # a window that moved on from it would show up now
        return got, (wanted, newest, last)

    threads: list[int] = []
    got, (wanted, newest, last) = asyncio.run(run())
    ids = [t.tick.id for t in got]
    assert len(ids) == len(set(ids)) and set(ids) == wanted
    deadline = time.monotonic() + 60  # a bound for a hang, not a speed
    while ours() > threads[0] and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ours() <= threads[0], [t.name for t in threading.enumerate()]  # every listener's thread is gone
    assert last is not None and [t.id for t in last.window] == newest


DYING_WATCH = """
import datetime as dt, os, sys, time
from tsstore import QueryShape, SeriesSpec, TimeSeriesStore, WriteOptions, shards_for, wire
from tsstore.live.listen import ListenWindow, LiveError, LiveWatch
from tsstore.local.emulator import emulator_client
from tsstore.read.chunks import chunk_query

# SPEC as tests/test_live.py declares it (importing that module would import pytest and hypothesis)
SPEC = SeriesSpec("live", shards=shards_for(20_000),
                  shapes=[QueryShape("symbol", ("desc", "asc")), QueryShape([], ("desc", "asc"), ranges=["n"])],
                  key_fields=["symbol", "n"])

client = emulator_client(os.environ["FIRESTORE_EMULATOR_HOST"], database=sys.argv[1])
store = TimeSeriesStore(client, SPEC, write_options=WriteOptions(ramp=False))
now = dt.datetime.now(dt.timezone.utc)
store.write([{"symbol": "AAA", "n": k, "timestamp": now} for k in range(6)])  # tied timestamps
plan = store.plan(limit=5)
# A query the server refuses (31 disjunctions: 1 shard x 31 values) stops its listener for
# good, as any error the client does not recover from does: every relisten dies too.
def refused(query, on_snapshot, *, ordered):
    native = chunk_query(store._collection, query.plan, query.chunk[:1], None, 5).where("n", "in", list(range(31)))
    return wire.listen(native, lambda docs, changes, read_time: on_snapshot(docs, [], read_time), ordered=ordered)
started = time.monotonic()
try:
    with LiveWatch(ListenWindow(plan, 5, None), refused) as watch:
        while time.monotonic() - started < 60:
            watch.next_update(timeout=1)
except LiveError as error:
    print(f"LiveError after {time.monotonic() - started:.0f} s: {error}")
    os._exit(3)  # the client's dead listener threads raise again when collected
print("no error in 60 s")
os._exit(0)
"""


def test_a_listener_that_dies_for_good_raises_live_error(tsstore_emulator: Any) -> None:
    # In a child process: the client's dead listeners raise in its own threads and again when
    # collected, which would fail whichever test ran next in this one.
    env = dict(os.environ, FIRESTORE_EMULATOR_HOST=tsstore_emulator.address)
    root = Path(__file__).resolve().parents[1]
    database = f"live-dies-{random.randrange(10**9)}"
    child = subprocess.run(
        [sys.executable, "-c", DYING_WATCH, database], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert child.returncode == 3, (child.stdout, child.stderr[-2000:])
    assert "stopped 4 times within a minute on errors the client does not recover from" in child.stdout, child.stdout


def test_a_timeout_of_zero_polls_what_has_arrived() -> None:
    """``next_update(timeout=0)`` and ``next_tick(timeout=0)`` take what the listeners have
    reported without waiting (a poll), and answer ``None`` only when nothing has arrived: on the
    memory database a write is reported before it returns."""
    spec = SeriesSpec("ticks", shards=["a", "b"], key_fields=["symbol"])
    t0 = dt.datetime(2026, 3, 2, 14, tzinfo=dt.timezone.utc)

    def rows(start: int, n: int) -> list[dict[str, Any]]:
        return [{"symbol": f"S{i}", "timestamp": t0 + dt.timedelta(seconds=i)} for i in range(start, start + n)]

    with TimeSeriesStore.memory(spec) as store:
        store.write(rows(0, 3))
        watch = store.watch(limit=5)
        tail = store.tail(since=t0)
        try:
            first = watch.next_update(timeout=0)
            assert first is not None and len(first.window) == 3
            assert watch.next_update(timeout=0) is None  # nothing new
            assert {tail.next_tick(timeout=0).tick.id for _ in range(3)} == {  # type: ignore[union-attr]
                tick.id for tick in first.window}
            assert tail.next_tick(timeout=0) is None
            store.write(rows(3, 1))
            update = watch.next_update(timeout=0)
            assert update is not None and [tick.data["symbol"] for tick in update.entered] == ["S3"]
            got = tail.next_tick(timeout=0)
            assert got is not None and got.tick.data["symbol"] == "S3"
        finally:
            watch.close()
            tail.close()


def test_a_watchs_first_update_is_given_without_waiting_for_another_report() -> None:
    """The listeners' first reports, taken while the watch was made, are its first update:
    ``next_update()`` gives it without first waiting for a report that may never come (it
    waited the liveness check, a second, before)."""
    spec = SeriesSpec("ticks", shards=["a", "b"], key_fields=["symbol"])
    t0 = dt.datetime(2026, 3, 2, 14, tzinfo=dt.timezone.utc)
    with TimeSeriesStore.memory(spec) as store:
        store.write([{"symbol": f"S{i}", "timestamp": t0 + dt.timedelta(seconds=i)} for i in range(3)])
        with store.watch(limit=5) as watch:
            waits: list[float | None] = []
            events = watch._listeners.events

            def recorded(timeout: float | None) -> Any:
                waits.append(timeout)
                return events(timeout)

            watch._listeners.events = recorded  # type: ignore[method-assign]
            first = watch.next_update()
            assert first is not None and [tick.data["symbol"] for tick in first.window] == ["S2", "S1", "S0"]
            assert waits == [0.0]
