"""Late ticks and stored roll-ups: a tick written, replaced or deleted in a bucket a roll-up
has stored marks that bucket; reads from roll-ups answer it from the ticks until the next run
recomputes it. Pure: what a writer marks, refuses and tells roll-ups (its lease), with the
guard's I/O given as plain functions. On the emulator, at 3 and 40 shards and on both stores:
every stored bar equals the bar recomputed from the ticks, in every bucket, after late
ticks, replaces, corrections, history folded in however old under the default policy (in
both database modes), a tick past a declared window (counted from the roll-up's last tick,
refused only into a stored bar), writers running beside a roll-up, a writer killed between
its mark and its tick, a roll-up killed mid-run, and random interleavings of all of these
(hypothesis)."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import logging
import os
import pickle
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from typing import Any

import pandas as pd
import pytest
from google.api_core import exceptions as gexc
from google.cloud.firestore_v1.base_query import FieldFilter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli import tsstore
from tests.shared import EMULATOR_MODES, async_twin, cli_env, database_of, mode_client, oracle_bars, stored_docs
from tsstore import (
    AsyncTimeSeriesStore,
    QueryError,
    QueryShape,
    RetentionError,
    RetentionWarning,
    SeriesSpec,
    TimeSeriesStore,
    WriteError,
    shards_for,
)
from tsstore.analytics.rollup import Rollup
from tsstore.declaration import load_declaration
from tsstore.errors import REFUSED_UNSENT, SpecError
from tsstore.late import WRITERS, BarProbe, Horizon, LatePolicy, Lease, Leases, late_from, mark_id
from tsstore.logs import DB_COLLECTION, MARKS_WRITTEN, TICKS_REJECTED, fields_of
from tsstore.read.cost import ReadStats
from tsstore.times import EARLIEST, bucket_start
from tsstore.wire import database_id
from tsstore.write.marks import LateGuard, View, decide, remembered
from tsstore.write.ops import Erase, Patch
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
FAST = EMULATOR_WRITE_OPTIONS  # no ramp, no ceiling: the emulator is the tests' own
#: A lease of about four seconds: tests that wait for a killed writer's lease stay short.
QUICK = LatePolicy(window="30D", refresh="0.2s", send_timeout="1s")


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def series(shards: int = 3, collection: str = "ticks", **options: Any) -> SeriesSpec:
    return SeriesSpec(
        collection,
        shards=shards_for(shards * 500),
        shapes=[QueryShape("symbol", ("desc", "asc"))],
        key_fields=["symbol", "n"],
        measures=["volume"],
        **options,
    )


def tick(n: int, minutes: float, price: int, symbol: str = "AAA") -> dict[str, Any]:
    return {"symbol": symbol, "n": n, "timestamp": at(minutes), "price": {"micros": price}, "volume": 100 + n % 7}


def hundred() -> list[dict[str, Any]]:
    """The issue's case: 100 ticks of one symbol, one a minute from 10:00, prices 100-199."""
    return [tick(n, n, 100 + n) for n in range(100)]


BAR_COLUMNS = ["open", "high", "low", "close", "count", "volume"]


def mismatches(client: Any, store: TimeSeriesStore, rollup: Rollup, start: dt.datetime | None = None) -> list[str]:
    """Every bucket from ``start`` up to the roll-up's watermark where its stored bar differs
    from the bar of the ticks (a missing or extra bar included); empty when all are exact."""
    covered = TimeSeriesStore(client, rollup.source).rollup_coverage(rollup)  # either database mode
    assert covered is not None
    end = covered[1]
    root = rollup.root
    want = store.bars(interval=rollup.interval, by=list(rollup.by), price=root.price, volume=root.volume,
                      start=start, end=end)  # fmt: skip
    stored = TimeSeriesStore(client, rollup.spec).query_frame(direction="asc", start=start, end=end)
    have = stored.reset_index().set_index([*rollup.by, "timestamp"]).sort_index() if len(stored) else stored

    def rows(frame: Any) -> dict[Any, list[int]]:  # each bar's figures by its key (one bar per key)
        if not len(frame):
            return {}
        assert frame.index.is_unique, frame
        figures = frame[BAR_COLUMNS].itertuples(index=False)
        return {key: [int(v) for v in values] for key, values in zip(frame.index, figures)}

    ticks, bars = rows(want), rows(have)
    wrong = []
    for key in sorted(set(ticks) | set(bars)):
        a, b = ticks.get(key), bars.get(key)
        if a != b:
            wrong.append(f"{key}: ticks {a}, stored {b}")
    return wrong


class On:
    """The verbs a test runs, through the sync store or the async one (``driver``), on the
    spec given (a roll-up's: its own spec); the checks read with the sync store."""

    def __init__(self, emulator: Any, client: Any, driver: str) -> None:
        self.emulator, self.client, self.driver = emulator, client, driver

    def __call__(self, target: SeriesSpec | Rollup, verb: str, *args: Any, **kwargs: Any) -> Any:
        spec = target.spec if isinstance(target, Rollup) else target
        if self.driver == "sync":
            return getattr(TimeSeriesStore(self.client, spec, write_options=FAST), verb)(*args, **kwargs)

        async def go() -> Any:
            aclient = self.emulator.async_client(database=database_id(self.client))
            async with AsyncTimeSeriesStore(aclient, spec, write_options=FAST) as astore:
                return await getattr(astore, verb)(*args, **kwargs)

        return asyncio.run(go())


#: Each emulator case on both stores and at 3 and 40 shards (a chunk of 30 values and one of 10).
BOTH = pytest.mark.parametrize("shards,driver", [(3, "sync"), (40, "async")])


def marks(client: Any, rollup: Rollup) -> list[str]:
    return sorted(d.id for d in client.collection(f"tsstore_rollups/{rollup.name}/marks").stream())


# ------------------------------------------------------------------------------ pure


def view(*horizons: Horizon) -> View:
    return View(0.0, T0, horizons)


def test_a_late_write_shows_its_view_and_marks_as_spans_and_a_rollup_its_lag(
    spans: Any, metric_points: Callable[[], dict[tuple[str, str], Any]]
) -> None:
    """On the memory database: the writer's read of the roll-ups' horizons (``tsstore.late_view``)
    and the marks it writes before a late tick (``tsstore.marks``) are spans under the write's, the
    marks counted; a roll-up's run sets how far its watermark is behind (``tsstore.rollup.lag``)."""
    spec = series()
    minutes, _ = hourly_and_minutes(spec)
    store = TimeSeriesStore.memory(spec)
    store.write(hundred())
    ran = store.rollup(minutes)
    lag = metric_points()[("tsstore.rollup.lag", "rollup")].value
    assert ran.watermark is not None and lag >= (dt.datetime.now(UTC) - ran.watermark).total_seconds() - 60
    spans.clear()
    assert store.write([tick(500, 5.5, 999_999)]).created == 1  # into a bucket rolled up: marked first
    finished = list(spans.get_finished_spans())
    [write] = [span for span in finished if span.parent is None]
    [marks] = [span for span in finished if span.name == "tsstore.marks"]
    views = [span for span in finished if span.name == "tsstore.late_view"]
    parents = {span.context.span_id: span.parent for span in finished}

    def under_write(span: Any) -> bool:
        parent = span.parent
        while parent is not None and parent.span_id != write.context.span_id:
            parent = parents.get(parent.span_id)
        return parent is not None

    assert views and all(map(under_write, [marks, *views]))  # the marks inside the commit that needed them
    assert marks.attributes["tsstore.marks.written"] == metric_points()[("tsstore.marks.written", spec.collection)].value == 1


def test_a_write_marks_the_buckets_of_stored_rollups_it_changes_and_refuses_past_the_window() -> None:
    spec = series(late=LatePolicy(window="2h"))
    minutes, hours = Horizon("m", dt.timedelta(minutes=1), at(60)), Horizon("h", dt.timedelta(hours=1), at(60))
    never = Horizon("n", dt.timedelta(minutes=5), None)
    ops = [
        ("a", tick(1, 59.5, 1), True),  # late for both: minute 59, hour 10:00
        ("b", tick(2, 60.5, 1), True),  # on time
        ("c", None, False),  # a retention delete: no bar changes
        ("d", Erase(at(12.25)), False),  # a correction: its bucket
        ("e", Patch({"shard": "s1"}), False),  # a reshard move: content unchanged
        ("f", tick(3, -70, 1), True),  # 2h10 behind the horizon: past the window
        ("g", tick(4, 59.9, 1), False),  # a replace in an already marked minute
    ]
    decision = decide(spec, view(minutes, hours, never), ops)
    assert decision.marks == {"m": {at(59), at(12)}, "h": {at(0)}}
    assert list(decision.refused) == [5] and "late-data window of 2:00:00" in decision.refused[5]
    assert decide(series(late=LatePolicy(window=None)), view(minutes), ops[5:6]).marks == {"m": {at(-70)}}
    assert decide(spec, view(never), ops).marks == {}  # a roll-up that stored nothing needs no mark
    kept = Horizon("m", dt.timedelta(minutes=1), at(60), purged=at(30))  # retention deleted the ticks before 10:30
    purged = decide(spec, view(kept), [("h", tick(5, 29.5, 1), True), ("i", tick(6, 30.5, 1), True)])
    assert list(purged.refused) == [0] and "whose ticks retention deleted" in purged.refused[0]
    assert purged.marks == {"m": {at(30)}}


class Recorder:
    """The guard's I/O as plain functions: what it wrote, in order."""

    def __init__(self, horizons: list[Horizon], *, bars: bool = True) -> None:
        self.log: list[Any] = []
        self.horizons_now = horizons
        self.bars = bars  # whether every bucket asked about holds a bar
        self.clock = 0.0
        self.server = T0

    def put_lease(self, data: dict[str, Any]) -> dt.datetime:
        self.server += dt.timedelta(seconds=1)
        self.log.append(("lease", dict(data)))
        return self.server

    def drop_lease(self) -> None:
        self.log.append(("drop",))

    def horizons(self) -> list[Horizon]:
        self.log.append(("view",))
        return list(self.horizons_now)

    def put_marks(self, marks: Any) -> None:
        self.log.append(("marks", {k: sorted(v) for k, v in marks.items()}))

    def holds_bar(self, probe: BarProbe) -> bool:
        self.log.append(("holds", probe.rollup, probe.shards, probe.start, probe.end))
        return self.bars


def test_the_guard_leases_reads_the_view_marks_then_sends_and_says_what_is_in_flight(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="tsstore.write.marks")
    io = Recorder([Horizon("m", dt.timedelta(minutes=1), at(60))])
    guard = LateGuard(series(late=QUICK), io, clock=lambda: io.clock)
    sent: list[Any] = []

    def inner(ops: list[Any]) -> list[tuple[int, str]]:
        sent.append([op[0] for op in ops])
        io.log.append(("send",))
        return [(0, "")] * len(ops)

    send, _ = guard.guard((inner, lambda ids: {}))
    assert send([("a", tick(1, 30, 1), True), ("b", tick(2, 61, 1), True)]) == [(0, ""), (0, "")]
    assert io.log == [
        ("lease", {"source": "ticks", "lease_seconds": QUICK.lease.total_seconds()}),
        ("view",),
        ("marks", {"m": [at(30)]}),
        ("send",),
    ]
    [marked] = caplog.records
    assert (marked.levelname, fields_of(marked)) == ("DEBUG", {DB_COLLECTION: "ticks", MARKS_WRITTEN: 1})
    io.log.clear()
    send([("c", tick(3, 62, 1), True)])  # the view is fresh: no new lease, no mark
    assert io.log == [("send",)]
    io.clock = 0.3  # older than refresh: read again before sending
    io.horizons_now = [Horizon("m", dt.timedelta(minutes=1), at(70))]
    io.log.clear()
    send([("d", tick(4, 62, 1), True)])
    assert io.log == [("lease", {"source": "ticks", "lease_seconds": 4.2}), ("view",), ("marks", {"m": [at(62)]}),
                      ("send",)]  # fmt: skip
    io.log.clear()
    send([("d2", tick(9, 62.5, 1), True), ("d3", tick(10, 63.5, 1), True)])  # minute 62 is marked under this view
    assert io.log == [("marks", {"m": [at(63)]}), ("send",)]

    # a send still in flight when the view is read again: the lease says since when
    io.clock = 0.6
    inside: list[Any] = []

    def slow(ops: list[Any]) -> list[tuple[int, str]]:
        io.clock = 0.9  # the next send must read a new view
        inside.append(send([("f", tick(6, 90, 1), True)]))
        return [(0, "")] * len(ops)

    view_time = io.server + dt.timedelta(seconds=1)
    assert guard.send(slow, [("e", tick(5, 90, 1), True)]) == [(0, "")]
    leases = [entry[1] for entry in io.log if entry[0] == "lease"]
    assert leases[-1]["busy_since"] == view_time
    guard.close()
    assert io.log[-1] == ("drop",)

    horizons = [Horizon("m", dt.timedelta(minutes=1), at(60), shards=("b0",))]
    io = Recorder(horizons)
    refusing = LateGuard(series(late=LatePolicy(window="1h")), io)
    answer = refusing.send(inner, [("g", tick(7, -30, 1), True), ("h", tick(8, 61, 1), True)])
    assert answer[0][0] == REFUSED_UNSENT and "window" in answer[0][1] and answer[1] == (0, "") and sent[-1] == ["h"]
    refused = caplog.records[-1]
    assert (refused.levelname, fields_of(refused)) == ("WARNING", {DB_COLLECTION: "ticks", TICKS_REJECTED: 1})
    assert refused.getMessage().startswith("refused 1 late tick(s) unsent; the first: tsstore refused the tick at ")
    assert ("holds", "m", ("b0",), at(-30), at(-29)) in io.log  # it asked whether that bucket holds a bar
    refusing.send(inner, [("g2", tick(9, -29.5, 1), True)])  # the same bucket under the same view: not again
    assert len([entry for entry in io.log if entry[0] == "holds"]) == 1
    unlisted = Recorder([Horizon("m", dt.timedelta(minutes=1), at(60))], bars=False)  # an older watermark document
    answer = LateGuard(series(late=LatePolicy(window="1h")), unlisted).send(inner, [("g", tick(7, -30, 1), True)])
    assert answer[0][0] == REFUSED_UNSENT and not [e for e in unlisted.log if e[0] == "holds"]  # taken as held
    io = Recorder(horizons, bars=False)  # no bar there: folded in, however far behind
    answer = LateGuard(series(late=LatePolicy(window="1h")), io).send(inner, [("g", tick(7, -30, 1), True)])
    assert answer == [(0, "")] and sent[-1] == ["g"] and ("marks", {"m": [at(-30)]}) in io.log


def test_a_renewal_a_cut_holds_or_fails_stalls_no_send_while_the_view_is_good() -> None:
    """From half its refresh on, one send reads the view again while the others go on under the
    current one, which the lease names as in flight; a renewal that fails leaves its send under
    that view; only a view past its refresh makes a send wait for a new one (or fail with it)."""
    io = Recorder([Horizon("m", dt.timedelta(minutes=1), at(60))])
    guard = LateGuard(series(late=QUICK), io, clock=lambda: io.clock)
    answers: list[Any] = []

    def inner(ops: list[Any]) -> list[tuple[int, str]]:
        return [(0, "")] * len(ops)

    def send(name: str) -> None:
        answers.append(guard.send(inner, [(name, tick(1, 61, 1), True)]))

    send("a")  # the view at clock 0, written at T0 + 1 s
    first = io.server
    held, release = threading.Event(), threading.Event()
    put = io.put_lease

    def cut(data: dict[str, Any]) -> dt.datetime:
        held.set()
        release.wait(60)
        raise gexc.ServiceUnavailable("Socket closed")

    io.clock, io.put_lease = 0.15, cut  # type: ignore[method-assign]
    renewer = threading.Thread(target=send, args=("b",))
    renewer.start()
    assert held.wait(60)  # b renews ahead of the view's end
    other = threading.Thread(target=send, args=("c",))
    other.start()
    other.join(60)
    assert answers == [[(0, "")]] * 2  # c went out while b's lease write hung
    release.set()
    renewer.join(60)
    assert answers == [[(0, "")]] * 3  # the cut renewal left b under the view still good
    io.put_lease = put  # type: ignore[method-assign]
    io.clock = 0.16
    send("d")
    assert io.log[-2:] == [("lease", {"source": "ticks", "lease_seconds": 4.2, "busy_since": first}), ("view",)]
    io.clock, io.put_lease = 0.5, cut  # type: ignore[method-assign]
    with pytest.raises(gexc.ServiceUnavailable):  # that view has run out: no send goes under it
        send("e")


def test_a_declared_window_counts_from_the_last_tick_rolled_up_and_only_refuses_into_stored_bars() -> None:
    """A roll-up run to today (its horizon 90 days past its data) whose last tick was at 11:00:
    a 2-hour window counts from that tick, not the horizon; a tick past it is refused, with
    words naming tsstore, the roll-up and the window, only where the roll-up holds a bar
    (asked once per bucket); the default folds in any tick."""
    today = at(90 * 24 * 60)
    minutes = Horizon("ticks_1min", dt.timedelta(minutes=1), today, last_tick=at(60))
    spec = series(late=LatePolicy(window="2h"))
    ops = [("a", tick(1, 0.5, 1), True), ("b", tick(2, -70, 1), True), ("c", tick(3, -69.5, 1), True)]
    asked: list[dt.datetime] = []

    def holds(horizon: Horizon, bucket: dt.datetime) -> bool:
        asked.append(bucket)
        return True

    decision = decide(spec, view(minutes), ops, holds=remembered(holds))
    assert decision.marks == {"ticks_1min": {at(0)}} and sorted(decision.refused) == [1, 2]
    assert asked == [at(-70)]  # the one bucket past the window, asked once for its two ticks
    assert decision.refused[1] == (
        "tsstore refused the tick at 2026-03-02T08:50:00Z: it is 2:10:00 behind the last tick roll-up 'ticks_1min' "
        "has rolled up (2026-03-02T11:00:00Z), past 'ticks''s late-data window of 2:00:00, and that roll-up holds a "
        'bar in its bucket; declare a wider LatePolicy(window=...), or window=None ("none" in a declaration file) to '
        "fold in every late tick"
    )
    spared = decide(spec, view(minutes), ops, holds=lambda horizon, bucket: False)
    assert spared.refused == {} and spared.marks == {"ticks_1min": {at(0), at(-70)}}
    old = [("d", tick(4, -90 * 24 * 60, 1), True)]  # 90 days before the last tick
    assert decide(series(), view(minutes), old).marks == {"ticks_1min": {at(-90 * 24 * 60)}}
    assert LatePolicy().window is None


@pytest.mark.parametrize(
    ("table", "refused"),
    [
        ({"window": 7}, 'late window 7 is a number, not a duration; write a duration string such as "7D" or "7h", '
                        'or "none" to fold in every late tick'),
        ({"window": "forever"}, "late policy window 'forever' is not a duration (or is out of range); give one with "
                                "its unit such as '30 days', '5min' or 'P30D', or None (\"none\" in a declaration "
                                "file) to fold in every late tick"),
        ({"window": "10s", "refresh": "1h"}, "late policy refresh '1h' is longer than its window '10s': a writer's "
                                             "view of the roll-ups would be older than the window it enforces; give "
                                             "a refresh no longer than the window"),
    ],
)
def test_a_late_policy_that_cannot_be_meant_is_refused_naming_what_is_allowed(
    table: dict[str, Any], refused: str, tmp_path: Any
) -> None:
    """As a declaration file gives it (TOML: a number, a word, two durations)."""
    with pytest.raises(SpecError) as caught:
        late_from(table)
    assert str(caught.value) == refused
    entries = ", ".join(f"{key} = {value!r}".replace("'", '"') for key, value in table.items())
    (tmp_path / "late.toml").write_text(f'[[series]]\ncollection = "ticks"\nlate = {{ {entries} }}\n')
    with pytest.raises(SpecError, match="late"):
        load_declaration(str(tmp_path / "late.toml"))
    if "refresh" in table:
        with pytest.raises(SpecError, match="longer than its window"):
            LatePolicy(window=dt.timedelta(seconds=10), refresh="1h")


def test_a_rollup_waits_for_live_writers_behind_its_announcement_and_clears_marks_before_their_views() -> None:
    now = T0
    announced = now - dt.timedelta(seconds=2)
    fresh = Lease(now - dt.timedelta(seconds=1), 4.2, now - dt.timedelta(seconds=1))  # saw the announcement
    behind = Lease(now - dt.timedelta(seconds=3), 4.2, now - dt.timedelta(seconds=3))
    busy = Lease(now - dt.timedelta(seconds=1), 4.2, now - dt.timedelta(seconds=5))  # a send of an old view in flight
    dead = Lease(now - dt.timedelta(seconds=10), 4.2, now - dt.timedelta(seconds=10))  # killed: expired
    assert Leases.read([fresh, dead], now=now, announced=announced, refresh=0.2).waiting == 0
    verdict = Leases.read([fresh, behind, busy], now=now, announced=announced, refresh=0.2)
    assert verdict.waiting == 2 and verdict.retry_after == pytest.approx(0.2)
    assert verdict.cutoff == now - dt.timedelta(seconds=5)  # marks after the oldest live view stay
    assert Leases.read([], now=now, announced=announced, refresh=0.2).cutoff == now
    assert Leases.read([behind], now=now, announced=None, refresh=0.2).waiting == 0  # nothing announced
    assert Lease.of(now, {"busy_since": now - dt.timedelta(seconds=1), "lease_seconds": 3}).safe == now - dt.timedelta(
        seconds=1
    )


def test_bucket_and_mark_names_are_what_rules_can_compute() -> None:
    assert bucket_start(at(5.5), dt.timedelta(minutes=1)) == at(5)
    assert mark_id(at(5)) == str(int(at(5).timestamp() * 1000))


# ------------------------------------------------------------------------------ the emulator


def declaration_module(folder: Any) -> None:
    """``decl:DECLARATION`` for the command line, run in ``folder``: :func:`series` at 3
    shards and its minute roll-up."""
    (folder / "decl.py").write_text(
        f"import sys\nsys.path.insert(0, {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))!r})\n"
        "from tests.test_late import series\nfrom tsstore.analytics.rollup import Rollup\n"
        "TICKS = series(3)\nDECLARATION = [TICKS, Rollup(TICKS, interval='1min', by='symbol', volume='volume')]\n"
    )


def hourly_and_minutes(spec: SeriesSpec) -> tuple[Rollup, Rollup]:
    minutes = Rollup(spec, interval="1min", by="symbol", volume="volume")
    return minutes, Rollup(minutes, interval="1h")


#: No (3, "async"): the async store's reads run here at 40 shards (two chunks, each read as the one
#: chunk of 3 shards is), and the sync store's at both shard counts.
@pytest.mark.parametrize("shards,driver", [(3, "sync"), (40, "sync"), (40, "async")])
def test_a_late_tick_is_read_from_the_ticks_until_the_rollups_redo_its_bucket(
    tsstore_emulator: Any, shards: int, driver: str
) -> None:
    """The issue's case: 100 ticks, minute and hourly roll-ups to 12:00, one tick at 10:05:30
    with a price of 999 999 written late. Before any run, aggregates from roll-ups already
    count it (its minute and hour come from the ticks, and explain says why); the minute run
    redoes one bucket and the hourly run the hour it marked; then every bar equals the ticks'
    and no mark is left."""
    client = tsstore_emulator.client(database=f"late-{shards}-{driver}-{uuid.uuid4().hex[:12]}")
    spec = series(shards)
    minutes, hours = hourly_and_minutes(spec)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    bars = TimeSeriesStore(client, minutes.spec, write_options=FAST)
    store.write(hundred())
    assert store.rollup(minutes, until=at(120)).watermark == at(120)
    assert bars.rollup(hours, until=at(120)).watermark == at(120)
    late = tick(1000, 5.5, 999_999)
    on = On(tsstore_emulator, client, driver)
    on(spec, "write", [late])
    assert marks(client, minutes) == [mark_id(at(5))] and marks(client, hours) == []
    asked = {"max": ["price.micros"], "sum": ["volume"]}
    cost = ReadStats()
    got = on(spec, "aggregate", start=at(0), end=at(60), rollups=[hours, minutes], stats=cost, **asked)
    assert (got.count, got.max["price.micros"]) == (store.count(start=at(0), end=at(60)), 999_999) == (61, 999_999)
    assert got.sum["volume"] == sum(r["volume"] for r in [*hundred()[:60], late])
    plan = store.explain_aggregate(start=at(0), end=at(60), rollups=[hours, minutes])
    assert [(p.start, p.end, p.rollup and p.rollup.name, p.late) for p in plan.parts] == [
        (at(0), at(5), "ticks_1min", True),
        (at(5), at(6), None, True),
        (at(6), at(60), "ticks_1min", True),
    ]
    assert "late ticks marked there" in plan.describe()
    # the marks, the bars and that bucket's ticks: a probe, 2 watermarks, 2 mark queries, 59
    # minute bars, 2 ticks, and an empty chunk's minimum read at 40 shards (two chunks)
    assert cost.billed_reads <= 1 + 2 + 2 + 59 + 2 + (shards > 30), cost.describe()

    redone = on(spec, "rollup", minutes)
    assert (redone.redone, redone.replaced, redone.start) == (1, 1, at(120)), redone.describe()
    assert marks(client, minutes) == [] and marks(client, hours) == [mark_id(at(0))]
    assert on(minutes, "rollup", hours).redone == 1
    assert marks(client, hours) == []
    assert mismatches(client, store, minutes) == [] and mismatches(client, store, hours) == []
    assert store.rollup(minutes).redone == 0
    again = store.aggregate(start=at(0), end=at(60), rollups=[hours, minutes], **asked)
    assert again.sources == ("[2026-03-02T10:00:00Z, 2026-03-02T11:00:00Z) from ticks_1min_1h (1h bars)",)
    assert (again.count, again.max, again.sum) == (got.count, got.max, got.sum)
    client.close()


LAYERS_TOML = """
[[series]]
collection = "ticks"
shards = ["s0", "s1", "s2"]
key_fields = ["symbol", "n"]
measures = ["volume"]
shapes = [{ fields = ["symbol"], directions = ["desc", "asc"] }]

[[rollup]]
source = "ticks"
interval = "1min"
by = "symbol"
volume = "volume"

[[rollup]]
source = "ticks_1min"
interval = "1h"
"""


@pytest.mark.parametrize("mode", EMULATOR_MODES)
@pytest.mark.parametrize("driver", ["sync", "async"])
def test_combined_bars_answer_a_marked_bucket_from_finer_bars_or_the_ticks_at_each_layer(
    request: pytest.FixtureRequest, uses_emulator: None, mode: str, driver: str, tmp_path: Any
) -> None:
    """A late tick into a bucket both roll-ups stored: bars combined from the minute bars and
    from the hourly bars of the minute bars answer its bucket from the ticks (and the minute
    bars), not refused; once the minute roll-up redid it and marked the hour, the hourly layer
    answers that hour from the minute bars. Every time they equal pandas' bars of the ticks."""
    client = mode_client(request, mode, f"late-combine-{driver}-{uuid.uuid4().hex[:12]}")
    spec = series(3)
    minutes, hours = hourly_and_minutes(spec)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    rows = [*hundred(), tick(500, 30.25, 7, symbol="BBB"), tick(501, 70.5, 9, symbol="BBB")]
    ids = list(store.write(rows).ids)
    store.rollup(minutes, until=at(120))
    TimeSeriesStore(client, minutes.spec).rollup(hours, until=at(120))
    late = [tick(1000, 5.5, 999_999), tick(1001, 65.25, 1, symbol="BBB")]
    ids += store.write(late).ids
    rows += late

    def held(rollup: Rollup) -> list[str]:  # its marks, in either mode
        return sorted(stored_docs(client, f"tsstore_rollups/{rollup.name}/marks"))

    assert held(minutes) == [mark_id(at(5)), mark_id(at(65))]

    def combined(target: Rollup, interval: str) -> Any:
        options = {"interval": interval, "by": "symbol", "combine": True, "start": at(0), "end": at(120)}
        if driver == "sync":
            return TimeSeriesStore(client, target.spec).bars(**options)

        async def go() -> Any:
            async with async_twin(store, request) as aclient:
                return await AsyncTimeSeriesStore(aclient, target.spec).bars(**options)

        return asyncio.run(go())

    def same(got: Any, interval: str) -> None:
        want = oracle_bars(rows, tuple(ids), interval, at(0), at(120))
        assert list(got.index) == list(want.index)
        for column in BAR_COLUMNS:
            assert [int(v) for v in got[column]] == [int(v) for v in want[column]], column

    for target, interval in ((minutes, "15min"), (minutes, "1h"), (hours, "1h"), (hours, "2h")):
        same(combined(target, interval), interval)
    told = TimeSeriesStore(client, hours.spec).explain_bars(interval="1h", start=at(0), end=at(120)).describe()
    assert "[2026-03-02T10:05:00Z, 2026-03-02T10:06:00Z) from ticks (late ticks marked there" in told, told
    if driver == "sync":  # the command says the same, from the declaration file's roll-ups
        (tmp_path / "late.toml").write_text(LAYERS_TOML)
        window = ("--start", "2026-03-02T10:00:00Z", "--end", "2026-03-02T12:00:00Z", "--interval", "1h")
        common = ("--spec", "late.toml", "--collection", hours.name, "--database", database_of(store), "--combine")
        said = tsstore("bars", *common, "--explain", *window, cwd=tmp_path, env=cli_env(request, mode))
        assert said.returncode == 0 and said.stdout == told + "\n", said.stderr
        printed = tsstore("bars", *common, "--by", "symbol", "--format", "csv", *window, cwd=tmp_path,
                          env=cli_env(request, mode))  # fmt: skip
        assert printed.returncode == 0, printed.stderr
        assert [int(v) for v in pd.read_csv(io.StringIO(printed.stdout))["high"]] == [999_999, 199, 7, 9]
    store.rollup(minutes, until=at(120))  # redoes the minutes, marks the hours
    assert held(minutes) == [] and held(hours) == [mark_id(at(0)), mark_id(at(60))]
    told = TimeSeriesStore(client, hours.spec).explain_bars(interval="1h", start=at(0), end=at(120)).describe()
    assert "[2026-03-02T10:00:00Z, 2026-03-02T12:00:00Z) from ticks_1min (1min bars) (late ticks" in told, told
    same(combined(hours, "1h"), "1h")
    client.close()


@BOTH
def test_replaced_and_corrected_ticks_are_redone_past_the_window_refused_and_retention_waits(
    tsstore_emulator: Any, shards: int, driver: str, tmp_path: Any
) -> None:
    """A replaced tick (on_duplicate='replace') and a correcting delete (purge correct=True)
    mark their buckets; the run redoes them and removes a bar left without ticks; a purge for
    retention waits for marks in its range; a tick further behind the roll-up's last tick than
    the window, into a stored bar, is refused, named; a plain retention purge keeps the bars as
    they are, and a correcting purge there says it cannot correct them."""
    database = f"late-fix-{shards}-{uuid.uuid4().hex[:12]}"
    client = tsstore_emulator.client(database=database)
    spec = series(shards, on_duplicate="replace", late=LatePolicy(window="90min"))
    on = On(tsstore_emulator, client, driver)
    minutes, hours = hourly_and_minutes(spec)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    rows = hundred() + [tick(200, 20.5, 555, symbol="BBB")]
    store.write(rows)
    store.rollup(minutes, until=at(120))
    TimeSeriesStore(client, minutes.spec).rollup(hours, until=at(120))

    changed = dict(rows[10], price={"micros": 7})
    assert on(spec, "write", [changed]).replaced == 1
    with pytest.raises(RetentionError, match="late ticks changed and roll-up"):
        on(spec, "purge", before=at(30), rollups=[minutes])
    deleted = on(spec, "purge", start=at(20), end=at(21), where={"symbol": "BBB"}, correct=True)
    assert deleted.deleted == 1
    assert marks(client, minutes) == [mark_id(at(10)), mark_id(at(20))]
    with pytest.raises(WriteError, match="tsstore refused the tick at 2026-03-02T10:05:30Z: it is 1:33:30 behind "
                       "the last tick roll-up 'ticks_1min' has rolled up .2026-03-02T11:39:00Z., past 'ticks''s "
                       "late-data window of 1:30:00") as refused:
        on(spec, "write", [tick(300, 5.5, 1)])  # 1h33 behind the last tick, into a stored minute
    assert refused.value.written == 0 and store.count(start=at(5), end=at(6)) == 1
    assert refused.value.failures[0].reason.startswith("tsstore refused the tick")

    got = on(spec, "aggregate", start=at(0), end=at(60), rollups=[hours, minutes], min=["price.micros"])
    assert (got.count, got.min["price.micros"]) == (60, 7)
    hour = {"interval": "1h", "by": "symbol", "start": at(0), "end": at(60)}
    from_ticks = store.bars(price="price.micros", volume="volume", **hour)
    pd.testing.assert_frame_equal(on(minutes, "bars", combine=True, **hour), from_ticks)  # the marks from the ticks
    done = on(spec, "rollup", minutes, until=at(120))
    assert (done.redone, done.removed) == (2, 1), done.describe()
    assert "2 late bucket(s) redone" in done.describe() and "1 bar(s) left without ticks removed" in done.describe()
    on(minutes, "rollup", hours, until=at(120))
    combined = on(minutes, "bars", interval="1h", by="symbol", combine=True, start=at(0), end=at(60))
    assert list(combined["count"]) == [60] and int(combined["low"].min()) == 7  # BBB's only tick was removed
    assert mismatches(client, store, minutes) == [] and mismatches(client, store, hours) == []

    before = TimeSeriesStore(client, minutes.spec).count()
    assert on(spec, "purge", before=at(30), rollups=[minutes]).deleted == 30  # retention: bars stay
    assert TimeSeriesStore(client, minutes.spec).count() == before and marks(client, minutes) == []
    told = on(spec, "explain_aggregate", start=at(0), end=at(60), rollups=[minutes]).describe()
    assert "[2026-03-02T10:00:00Z, 2026-03-02T11:00:00Z) from ticks_1min (1min bars) (ticks before " in told
    assert "deleted by retention: bars only)" in told
    # a late tick where retention deleted the ticks could not be folded in exactly: refused
    with pytest.raises(WriteError, match="whose ticks retention deleted"):
        on(spec, "write", [tick(400, 10.5, 1)])
    with pytest.warns(RetentionWarning, match="'ticks_1min' .before 2026-03-02T10:30:00Z.: nothing is left there to "
                      "delete, and those bars stay as they are; they cannot be corrected"):
        assert on(spec, "purge", start=at(10), end=at(11), correct=True).deleted == 0
    declaration_module(tmp_path)
    said = tsstore("purge", "--spec", "decl:DECLARATION", "--database", database, "--start", at(10).isoformat(),
                   "--end", at(11).isoformat(), "--correct", "--yes", cwd=tmp_path,
                   env={"FIRESTORE_EMULATOR_HOST": tsstore_emulator.address})  # fmt: skip
    assert said.returncode == 0 and "deleted 0 tick(s)" in said.stdout, said.stderr
    assert said.stderr.count("warning: a correcting purge reaches where retention already deleted") == 1
    on(spec, "write", [tick(401, 40.5, 1)])  # after the purge: folded in as usual
    assert marks(client, minutes) == [mark_id(at(40))]
    assert on(spec, "rollup", minutes, until=at(120)).redone == 1
    assert mismatches(client, store, minutes, start=at(30)) == []  # before it: bars only, as retention keeps
    client.close()


#: The emulator cases of the late-data defaults: both stores in Native mode (3 and 40 shards),
#: and the sync store in Datastore mode (its guard asks its own calls).
MODES = pytest.mark.parametrize("mode,shards,driver", [("native", 3, "sync"), ("native", 40, "async"),
                                                       ("datastore", 3, "sync")])  # fmt: skip
DAY = 24 * 60  # minutes


def mode_client(request: Any, mode: str, name: str) -> Any:
    """A client of the emulator in ``mode`` (taken by name, so a test that asks for it lists
    ``uses_emulator`` to be marked, and a run without emulator tests that reaches it fails)."""
    if mode == "native":
        return request.getfixturevalue("emulator").client(database=name)
    return request.getfixturevalue("datastore_emulator").datastore_client(database=name)


@MODES
def test_the_default_folds_in_history_however_old_and_every_bar_stays_exact(
    request: Any, uses_emulator: None, mode: str, shards: int, driver: str
) -> None:
    """The issue's case: a day of ticks 90 days back and today's hundred, rolled up without an
    end (the horizon is now, months past the data). Under the default declaration a tick 90
    days late, a replacement of an old tick and a late cluster into an old day (into minutes
    with and without bars, and a day holding no bar at all) are all accepted and marked;
    the runs redo them and every stored bar equals the ticks' bar."""
    client = mode_client(request, mode, f"late-old-{uuid.uuid4().hex[:12]}")
    spec = series(shards, on_duplicate="replace")
    minutes, hours = hourly_and_minutes(spec)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    old = [tick(500 + n, n - 90 * DAY, 300 + n) for n in range(30)]  # 10:00-10:29, 90 days before
    store.write([*old, *hundred()])
    store.rollup(minutes)
    TimeSeriesStore(client, minutes.spec, write_options=FAST).rollup(hours)
    assert mismatches(client, store, minutes) == [] and mismatches(client, store, hours) == []
    on = On(request.getfixturevalue("emulator"), client, driver) if mode == "native" else None

    def write(rows: list[dict[str, Any]]) -> Any:
        return store.write(rows) if on is None else on(spec, "write", rows)

    assert write([tick(900, 5.5 - 90 * DAY, 999_999)]).created == 1  # 90 days behind the last tick
    assert write([dict(old[10], price={"micros": 7})]).replaced == 1  # an old tick replaced
    cluster = [tick(1000 + n, 20.25 + n - 90 * DAY, 50 + n) for n in range(20)]  # 10:20-10:39: half hold bars
    cluster += [tick(1100 + n, n - 91 * DAY, 60 + n) for n in range(5)]  # a day that holds no bar
    assert write(cluster).created == len(cluster)
    told = store.explain_aggregate(start=at(-91 * DAY), end=at(120), rollups=[hours, minutes]).describe()
    assert "late ticks marked there" in told
    assert store.rollup(minutes).redone > 0
    TimeSeriesStore(client, minutes.spec, write_options=FAST).rollup(hours)
    assert mismatches(client, store, minutes) == [] and mismatches(client, store, hours) == []
    got = store.aggregate(start=at(-92 * DAY), end=at(120), rollups=[hours, minutes], max=["price.micros"])
    assert (got.count, got.max) == (store.count(start=at(-92 * DAY), end=at(120)), {"price.micros": 999_999})
    assert got.count == 30 + 100 + 1 + len(cluster)
    client.close()


@MODES
def test_a_declared_window_counts_from_the_last_tick_rolled_up_and_spares_buckets_without_a_bar(
    request: Any, uses_emulator: None, mode: str, shards: int, driver: str
) -> None:
    """A window of an hour, the minute roll-up run up to now: a tick 28 minutes behind its last
    tick (and months behind its horizon) is folded in; one 93 minutes behind, into a stored
    minute, is refused by tsstore naming the roll-up and the window; ticks further back into
    minutes and a day holding no bar are accepted. The next run leaves every bar exact."""
    client = mode_client(request, mode, f"late-window-{uuid.uuid4().hex[:12]}")
    spec = series(shards, late=LatePolicy(window="1h"))
    minutes, _ = hourly_and_minutes(spec)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    store.write(hundred())
    store.rollup(minutes)
    on = On(request.getfixturevalue("emulator"), client, driver) if mode == "native" else None

    def write(rows: list[dict[str, Any]]) -> Any:
        return store.write(rows) if on is None else on(spec, "write", rows)

    assert write([tick(300, 70.5, 1)]).created == 1
    with pytest.raises(WriteError) as refused:
        write([tick(301, 5.5, 2)])
    failure = refused.value.failures[0]
    assert failure.reason == (
        "tsstore refused the tick at 2026-03-02T10:05:30Z: it is 1:33:30 behind the last tick roll-up 'ticks_1min' "
        "has rolled up (2026-03-02T11:39:00Z), past 'ticks''s late-data window of 1:00:00, and that roll-up holds a "
        'bar in its bucket; declare a wider LatePolicy(window=...), or window=None ("none" in a declaration file) to '
        "fold in every late tick"
    )
    assert "Firestore" not in str(refused.value) and refused.value.written == 0
    unstored = [tick(302, -30.5, 3), tick(303, -DAY, 4)]  # before the first tick, and a day earlier
    assert write(unstored).created == 2
    assert store.rollup(minutes).redone == 3
    assert mismatches(client, store, minutes) == []
    assert store.count(start=at(5), end=at(6)) == 1
    client.close()


def test_a_first_run_without_since_covers_from_the_beginning(tsstore_emulator: Any) -> None:
    """Ticks from 10:07: the minute roll-up's first run (no since) holds its bars whole from
    the earliest time, so the hourly roll-up of it claims the 10:00 hour whole, and an
    aggregate of that hour reads one hourly bar; a tick written before the oldest later is
    late like any other."""
    client = tsstore_emulator.client(database=f"late-first-{uuid.uuid4().hex[:12]}")
    spec = series(3)
    minutes, hours = hourly_and_minutes(spec)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    store.write(hundred()[7:])
    store.rollup(minutes, until=at(120))
    assert store.rollup_coverage(minutes) == (EARLIEST, at(120))
    TimeSeriesStore(client, minutes.spec).rollup(hours, until=at(120))
    assert TimeSeriesStore(client, minutes.spec).rollup_coverage(hours) == (EARLIEST, at(120))
    got = store.aggregate(start=at(0), end=at(120), rollups=[hours, minutes])
    assert got.sources == ("[2026-03-02T10:00:00Z, 2026-03-02T12:00:00Z) from ticks_1min_1h (1h bars)",)
    assert got.count == store.count() == 93
    store.write([tick(1, 1.5, 5)])  # before the oldest: marked, the ticks answer until the runs
    assert marks(client, minutes) == [mark_id(at(1))]
    assert store.aggregate(start=at(0), end=at(120), rollups=[hours, minutes]).count == 94
    store.rollup(minutes, until=at(120))
    TimeSeriesStore(client, minutes.spec).rollup(hours, until=at(120))
    assert mismatches(client, store, minutes) == [] and mismatches(client, store, hours) == []
    client.close()


@BOTH
def test_writers_beside_a_running_rollup_lose_no_tick(tsstore_emulator: Any, shards: int, driver: str) -> None:
    """Two write jobs add ticks on time and late (random minutes of the hour) while the
    minute roll-up runs again and again with a moving end; once they stop, one more run, and
    every stored bar equals the ticks'."""
    client = tsstore_emulator.client(database=f"late-race-{shards}-{uuid.uuid4().hex[:12]}")
    spec = series(shards, late=QUICK)
    on = On(tsstore_emulator, client, driver)
    minutes, _ = hourly_and_minutes(spec)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    store.write(hundred()[:10])
    stop = threading.Event()
    errors: list[BaseException] = []
    sent: list[int] = []  # the batches the writers have written, as they land

    def writer(seed: int) -> None:
        rng = random.Random(seed)
        n = 10_000 * seed
        try:
            while not stop.is_set():
                batch = [tick(n + k, rng.uniform(0, 60), rng.randrange(1, 10**6), rng.choice(["AAA", "BBB"]))
                         for k in range(rng.randrange(1, 30))]  # fmt: skip
                n += len(batch)
                on(spec, "write", batch)
                sent.append(len(batch))
                stop.wait(0.02)  # batches all through each run, not a flood that only makes every run longer
        except BaseException as exc:  # noqa: BLE001  (reported by the test)
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(seed,)) for seed in (1, 2)]
    for thread in threads:
        thread.start()
    overlapped = []  # per run: the batches that landed while it ran
    try:
        for k in range(1, 4):  # three runs, each end 20 minutes on
            before = len(sent)
            on(spec, "rollup", minutes, until=at(20 * k))
            overlapped.append(len(sent) - before)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert not errors, errors
    assert all(overlapped), overlapped  # the writers really ran beside every run
    last = store.rollup(minutes, until=at(60))
    assert marks(client, minutes) == [], last.describe()
    assert mismatches(client, store, minutes) == []
    assert store.count(start=at(0), end=at(60)) > 100
    client.close()


#: ``spec, rows`` come pickled from the test: ``series(shards, late=QUICK)`` and ``[tick(5000, 7.5, 424_242)]``
#: (so the writer imports tsstore only, not this module and pytest with it).
KILLED_WRITER = """
import asyncio, os, pickle, signal
from tsstore import AsyncTimeSeriesStore, TimeSeriesStore, WriteOptions
from tsstore.local.emulator import emulator_client

def die(ops):
    os.kill(os.getpid(), signal.SIGKILL)  # after the marks, before the tick: the worst moment

def dying(collection, *, timeout):
    return die, lambda ids: {{}}

host, (spec, rows) = os.environ["FIRESTORE_EMULATOR_HOST"], pickle.loads({pickled!r})
if {driver!r} == "sync":
    store = TimeSeriesStore(emulator_client(host, database={database!r}), spec, write_options=WriteOptions(ramp=False))
    store._writer._transport = dying
    store.write(rows)
else:
    async def main():
        client = emulator_client(host, database={database!r}, asynchronous=True)
        async with AsyncTimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) as store:
            store._writer._transport = dying
            await store.write(rows)
    asyncio.run(main())
"""


@BOTH
def test_a_writer_killed_between_its_mark_and_its_tick_and_a_rollup_killed_mid_run(
    tsstore_emulator: Any, tmp_path: Any, shards: int, driver: str
) -> None:
    """A writer SIGKILLed after its mark and before its tick leaves the mark and its lease:
    the next run redoes that bucket (unchanged) but keeps the mark while the lease may still
    send, and clears it once the lease has expired. A roll-up SIGKILLed while it writes bars
    after late ticks: the next run redoes the buckets and clears the marks; exact."""
    database = f"late-kill-{shards}-{uuid.uuid4().hex[:12]}"
    client = tsstore_emulator.client(database=database)
    spec = series(shards, late=QUICK)
    minutes, _ = hourly_and_minutes(spec)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    store.write(hundred())
    store.rollup(minutes, until=at(120))
    env = dict(os.environ, FIRESTORE_EMULATOR_HOST=tsstore_emulator.address)
    pickled = pickle.dumps((spec, [tick(5000, 7.5, 424_242)]))
    script = KILLED_WRITER.format(pickled=pickled, database=database, driver=driver)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert marks(client, minutes) == [mark_id(at(7))] and store.count(start=at(7), end=at(8)) == 1
    [lease] = client.collection(WRITERS).where(filter=FieldFilter("source", "==", "ticks")).get()  # the killed one's
    expires = lease.update_time + dt.timedelta(seconds=lease.get("lease_seconds"))
    assert lease.get("lease_seconds") == QUICK.lease.total_seconds()
    first = store.rollup(minutes, until=at(120))
    assert first.redone == 1 and marks(client, minutes) == [mark_id(at(7))]  # the lease may still send

    # While that lease runs out, on a series of its own (whose roll-up no writer's lease holds up):
    # a roll-up killed while it writes the redone bars of many late minutes.
    trades = series(shards, collection="trades", late=QUICK)
    trade_minutes, _ = hourly_and_minutes(trades)
    trade_store = TimeSeriesStore(client, trades, write_options=FAST)
    trade_store.write(hundred())
    trade_store.rollup(trade_minutes, until=at(120))
    trade_store.write([tick(6000 + k, k + 0.25, 1_000_000 + k, symbol="CCC") for k in range(100)])
    assert len(marks(client, trade_minutes)) == 100
    (tmp_path / "decl.py").write_text(  # the test's own series and roll-up, pickled: [trades, trade_minutes]
        f"import pickle\nDECLARATION = pickle.loads({pickle.dumps([trades, trade_minutes])!r})\n"
    )
    command = ["rollup", "--spec", "decl:DECLARATION", "--database", database, "--until", at(120).isoformat()]
    killed = subprocess.Popen([sys.executable, "-m", "tsstore", *command], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    deadline = time.monotonic() + 60
    written = client.collection("trades_1min").where(filter=FieldFilter("symbol", "==", "CCC")).limit(1)
    while time.monotonic() < deadline and not list(written.stream()):
        time.sleep(0.01)
    killed.send_signal(signal.SIGKILL)
    assert killed.wait(timeout=30) == -signal.SIGKILL
    assert list(written.stream()) and marks(client, trade_minutes)  # killed mid-run: bars written, marks not cleared
    # the next run: in this process (what it finds matters, not that it is a process of its own)
    finished = tsstore(*command, cwd=tmp_path, env={"FIRESTORE_EMULATOR_HOST": tsstore_emulator.address})
    assert finished.returncode == 0, finished.stderr
    assert "late bucket(s) redone" in finished.stdout
    assert marks(client, trade_minutes) == [] and mismatches(client, trade_store, trade_minutes) == []

    # back to the killed writer: once its lease has expired (and no sooner), a run clears its mark
    time.sleep(max(0.0, (expires - dt.datetime.now(UTC)).total_seconds()) + 0.2)
    assert store.rollup(minutes, until=at(120)).redone == 1 and marks(client, minutes) == []
    assert mismatches(client, store, minutes) == []
    client.close()


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("write"), st.floats(0, 59.99), st.integers(1, 10**6), st.sampled_from(["AAA", "BBB"])),
        st.tuples(st.just("rollup"), st.integers(1, 6)),
        st.tuples(st.just("rollup since"), st.integers(0, 5), st.integers(1, 6)),  # partial coverage
        st.tuples(st.just("hourly"), st.integers(1, 6)),
        st.tuples(st.just("correct"), st.integers(0, 59)),
        st.tuples(st.just("read"), st.integers(0, 59), st.integers(1, 60)),
    ),
    min_size=3,
    max_size=10,
)


#: 5 examples (8 before) of 3 to 10 random ops each, every example a database of its own on the emulator.
@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, shards=st.sampled_from([3, 40]), driver=st.sampled_from(["sync", "async"]))
def test_any_interleaving_of_writes_rollups_corrections_and_reads_reads_the_ticks_answer(
    tsstore_emulator: Any, ops: list[tuple[Any, ...]], shards: int, driver: str
) -> None:
    """Random writes (on time and late), corrections, minute runs with random ends (and random
    starts, so the minute roll-up holds only part of the hour), hourly runs of them, and reads,
    on either store at 3 or 40 shards: every aggregate from roll-ups equals the same aggregate
    of the ticks."""
    client = tsstore_emulator.client(database=f"late-any-{uuid.uuid4().hex[:12]}")
    spec = series(shards, late=QUICK)
    minutes, hours = hourly_and_minutes(spec)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    on = On(tsstore_emulator, client, driver)
    store.write(hundred()[:20])
    n = 100
    for op in ops:
        if op[0] == "write":
            n += 1
            on(spec, "write", [tick(n, op[1], op[2], op[3])])
        elif op[0] == "rollup":
            on(spec, "rollup", minutes, until=at(10 * op[1]))
        elif op[0] == "rollup since" and op[1] < op[2]:
            on(spec, "rollup", minutes, since=at(10 * op[1] + 5), until=at(10 * op[2]))
        elif op[0] == "hourly":
            on(minutes, "rollup", hours, until=at(10 * op[1]))
        elif op[0] == "correct":
            on(spec, "purge", start=at(op[1]), end=at(op[1] + 1), correct=True)
        else:
            start, end = at(op[1]), at(min(op[1] + op[2], 60))
            if start >= end:
                continue
            got = on(spec, "aggregate", start=start, end=end, rollups=[hours, minutes], sum=["volume"],
                     max=["price.micros"])  # fmt: skip
            ticks = store.query_frame(start=start, end=end, columns=["price.micros", "volume"])
            want_max = None if not len(ticks) else int(ticks["price.micros"].max())
            assert (got.count, got.sum["volume"], got.max["price.micros"]) == (
                len(ticks), int(ticks["volume"].sum()) if len(ticks) else 0, want_max
            ), (op, got.sources)
    client.close()


def test_a_rollup_of_a_rollup_claims_no_more_than_its_source_holds(tsstore_emulator: Any) -> None:
    """Minute bars from 10:30 on only: the hourly roll-up of them stores the 10:00 hour (from
    half its minutes) but does not claim it whole, so an aggregate over 10:00-12:00 reads the
    minutes and ticks there and counts every tick."""
    client = tsstore_emulator.client(database=f"late-since-{uuid.uuid4().hex[:12]}")
    spec = series(3)
    minutes, hours = hourly_and_minutes(spec)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    store.write(hundred())
    store.rollup(minutes, since=at(30), until=at(120))
    TimeSeriesStore(client, minutes.spec).rollup(hours, until=at(120))
    doc = client.collection("tsstore_rollups").document(hours.name).get().to_dict() or {}
    assert (doc["since"], doc["watermark"]) == (at(60), at(120))
    got = store.aggregate(start=at(0), end=at(120), rollups=[hours, minutes])
    assert got.count == store.count(start=at(0), end=at(120)) == 100
    assert got.sources == (
        "[2026-03-02T10:00:00Z, 2026-03-02T10:30:00Z) from ticks",
        "[2026-03-02T10:30:00Z, 2026-03-02T11:00:00Z) from ticks_1min (1min bars)",
        "[2026-03-02T11:00:00Z, 2026-03-02T12:00:00Z) from ticks_1min_1h (1h bars)",
    )
    client.close()


def test_verify_finds_bars_that_writes_outside_tsstore_left_wrong_and_repairs_them(
    tsstore_emulator: Any, tmp_path: Any
) -> None:
    """A tick written with the Firestore client itself (no mark) into a rolled-up minute, and
    a tick deleted the same way: ``verify_rollup`` names both buckets (and skips one already
    marked), bills what it reads; repaired, the next run redoes them and a new check is
    clean. ``tsstore rollup --verify`` does the same from the shell."""
    database = f"late-verify-{uuid.uuid4().hex[:12]}"
    client = tsstore_emulator.client(database=database)
    spec = series(3)
    minutes, _ = hourly_and_minutes(spec)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    store.write(hundred())
    store.rollup(minutes, until=at(120))
    assert store.verify_rollup(minutes).differ == ()
    client.collection("ticks").document("outside").set(dict(tick(900, 12.5, 5), shard="s0"))
    gone = store.query(where={"symbol": "AAA"}, start=at(40), end=at(41), limit=1)[0]
    client.collection("ticks").document(gone.id).delete()
    store.write([tick(901, 70.5, 6)])  # through tsstore: marked, left to the run
    cost = ReadStats()
    found = store.verify_rollup(minutes, stats=cost)
    assert [line.split(" ")[0] for line in found.differ] == [at(12).isoformat(), at(40).isoformat()], found.differ
    assert found.late == 1 and not found.repaired and "2 bucket(s) differ" in found.describe()
    assert cost.billed_reads >= found.ticks + found.bars == 101 + 100
    assert mismatches(client, store, minutes) != []
    fixed = store.verify_rollup(minutes, repair=True)
    assert fixed.repaired and marks(client, minutes) == sorted(mark_id(at(m)) for m in (12, 40, 70))
    assert store.rollup(minutes, until=at(120)).redone == 3
    assert mismatches(client, store, minutes) == [] and store.verify_rollup(minutes).differ == ()

    client.collection("ticks").document("outside-2").set(dict(tick(902, 15.5, 5), shard="s1"))
    declaration_module(tmp_path)
    env = {"FIRESTORE_EMULATOR_HOST": tsstore_emulator.address}
    done = tsstore("rollup", "--spec", "decl:DECLARATION", "--database", database, "--verify", "--until",
                   at(120).isoformat(), cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "1 bucket(s) differ" in done.stdout and "marked for the next run" in done.stdout
    assert "1 late bucket(s) redone" in done.stdout and mismatches(client, store, minutes) == []
    client.close()
