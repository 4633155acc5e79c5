"""The verbs' decisions, taken by their requests with every ask answered by the test: no
Firestore, no emulator (see tests/scripted.py)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import warnings
from typing import Any

import pytest

from tests.scripted import doc, documents, run, seat
from tsstore.analytics.rollup import Rollup
from tsstore.asks import FindDocs, GetDoc, KnownTime, SetDoc
from tsstore.census_asks import CountAll
from tsstore.errors import QueryError, RetentionError, StateError, UndeclaredShardsWarning
from tsstore.read.chunks import ChunkTicks
from tsstore.read.cost import ReadStats
from tsstore.read.cursor import cursor_snapshot
from tsstore.read.query import Query
from tsstore.spec import SeriesSpec
from tsstore.ticks import Tick
from tsstore.verbs import aggregates, asof, bars, reading, retention, rollups
from tsstore.verbs.request import Checks, Collect, Count, Feed, Send

UTC = dt.timezone.utc
SPEC = SeriesSpec("ticks", shards=("s0", "s1"))
MINUTES = Rollup(SPEC, interval="1min")
HOURS = Rollup(MINUTES, interval="1h")


def at(hhmmss: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2026-01-02T{hhmmss}+00:00")


def watermark_doc(rollup: Rollup, mark: dt.datetime, since: dt.datetime | None = None) -> dict[str, Any]:
    return rollup.watermark_document(mark, since)


def purge_answers(mark: dt.datetime | None, marked: int = 0) -> dict[type, Any]:
    """The watermark documents naming ``ticks`` as their source, and ``marked`` late marks."""
    held = [] if mark is None else [doc(f"tsstore_rollups/{MINUTES.name}", watermark_doc(MINUTES, mark))]

    def find(ask: FindDocs) -> list[Any]:
        if ask.collection == "tsstore_rollups":
            return held
        return [doc(f"{ask.collection}/{n}", {"bucket": at("09:00:00")}, at=at("09:30:00")) for n in range(marked)]

    return {FindDocs: find}


def test_a_purge_past_a_rollups_watermark_is_refused_with_how_far_it_may_go() -> None:
    with pytest.raises(RetentionError) as refused:
        run(retention.purge(seat(SPEC), before=at("11:00:00")), purge_answers(at("10:00:00")))
    assert refused.value.limit == at("10:00:00") and list(refused.value.rollups) == [MINUTES.name]
    assert "purge before 2026-01-02T10:00:00+00:00 at most" in str(refused.value)


def test_a_declared_rollup_never_run_holds_back_every_purge() -> None:
    with pytest.raises(RetentionError) as refused:
        run(retention.purge(seat(SPEC), before=at("09:00:00"), rollups=[MINUTES]), purge_answers(None))
    assert refused.value.limit is None and "never run" in str(refused.value)


def test_a_purge_before_the_watermark_asks_for_the_late_marks_in_its_range_and_waits_for_them() -> None:
    with pytest.raises(RetentionError, match="late ticks changed") as refused:
        run(retention.purge(seat(SPEC), before=at("09:30:00")), purge_answers(at("10:00:00"), marked=2))
    assert list(refused.value.rollups) == [MINUTES.name]
    ran = run(retention.purge(seat(SPEC), before=at("09:30:00")), purge_answers(at("10:00:00")), until=Count)
    rollups_read, marks_read = ran.of(FindDocs)
    assert rollups_read.collection == "tsstore_rollups" and rollups_read.where == (("source", "==", "ticks"),)
    assert marks_read.collection == f"tsstore_rollups/{MINUTES.name}/marks"
    assert marks_read.where == (("bucket", "<", at("09:30:00")),)  # the marks of the purge's range only
    assert isinstance(ran.stopped_at, Count)  # checked: it goes on to count what it deletes


def rollup_answers(now: dt.datetime, held: dict[str, dict[str, Any]]) -> dict[type, Any]:
    """A database at ``now`` holding the ``held`` documents, no writer alive and no mark."""
    return {
        GetDoc: documents(held, now=now),
        FindDocs: lambda ask: [],
        SetDoc: lambda ask: now,
        Collect: lambda ask: [],  # no stored bar where a run reaches back below its watermark
    }


#: (since, until, the stored watermark, the server's time) -> the range the run reads.
RANGES = [
    (None, None, "10:00:00", "10:37:20", ("10:00:00", "10:37:00")),  # from the watermark to now, aligned down
    ("09:30:30", None, "10:00:00", "10:37:20", ("09:30:00", "10:37:00")),  # since, aligned down, reaches back
    ("09:30:30", "10:15:30", None, "10:37:20", ("09:30:00", "10:15:00")),  # until, aligned down
    (None, "11:00:00", "10:00:00", "10:37:20", ("10:00:00", "10:37:00")),  # an until in the future: now
]


@pytest.mark.parametrize(("since", "until", "mark", "now", "expected"), RANGES)
def test_a_rollups_range_comes_from_since_until_its_watermark_and_the_servers_time(
    since: str | None, until: str | None, mark: str | None, now: str, expected: tuple[str, str]
) -> None:
    held = {} if mark is None else {f"tsstore_rollups/{MINUTES.name}": watermark_doc(MINUTES, at(mark))}
    request = rollups.rollup(seat(SPEC), MINUTES, since=since and at(since), until=until and at(until))
    ran = run(request, rollup_answers(at(now), held), until=Send)
    send = ran.stopped_at
    assert send.read.plan.start == at(expected[0]) and send.read.plan.end == at(expected[1])
    [announced] = [a for a in ran.of(SetDoc) if a.path == f"tsstore_rollups/{MINUTES.name}"]
    assert announced.data["closing"] == at(expected[1]) and announced.server_time == ("announced",)
    assert announced.merge


def test_a_rollup_with_nothing_closed_since_its_watermark_reads_nothing() -> None:
    held = {f"tsstore_rollups/{MINUTES.name}": watermark_doc(MINUTES, at("10:37:00"))}
    ran = run(rollups.rollup(seat(SPEC), MINUTES), rollup_answers(at("10:37:50"), held))
    assert ran.result.start is None and ran.result.watermark == at("10:37:00")
    assert not ran.of(Send) and not ran.of(SetDoc)


def test_a_rollup_of_a_rollup_starts_where_the_finer_one_holds_whole_bars_and_stops_at_its_watermark() -> None:
    """Issue 40, item 1, at the request: an hourly roll-up of a minute roll-up run from 06:30
    does not claim the hour of 06:00."""
    held = {f"tsstore_rollups/{MINUTES.name}": watermark_doc(MINUTES, at("08:10:00"), since=at("06:30:00"))}
    ran = run(rollups.rollup(seat(MINUTES.spec), HOURS, since=at("06:00:00")), rollup_answers(at("09:00:00"), held),
              until=Send)  # fmt: skip
    assert ran.stopped_at.read.plan.end == at("08:00:00")  # the finer watermark, aligned down
    [written] = [a for a in ran.asked if isinstance(a, SetDoc) and a.path == f"tsstore_rollups/{HOURS.name}"]
    assert written.data["closing"] == at("08:00:00")


def test_a_rollup_since_after_until_is_refused_before_any_read() -> None:
    with pytest.raises(QueryError, match="is not before until"):
        run(rollups.rollup(seat(SPEC), MINUTES, since=at("10:00:00"), until=at("09:00:00")),
            rollup_answers(at("11:00:00"), {}))  # fmt: skip


def count_answers(per_chunk: list[int], everything: int) -> dict[type, Any]:
    """Each chunk's count (as the driver answers: one count per query it sent), the whole
    collection's, and the server's time."""

    def counted(ask: Count) -> list[int]:
        if isinstance(ask.over, CountAll):
            return [everything]
        return per_chunk

    return {Count: counted, GetDoc: documents({}, now=at("12:00:00"))}


def test_estimated_snapshots_read_the_servers_time_only_when_no_answer_brought_one_lately() -> None:
    """Issue 43: one round trip per answer. With ``snapshots="estimated"`` a count of two
    chunks at the time the clock estimates sends its counts at once; with no time known it
    reads the server's first (one read and one round trip more, billed). By default the
    server's time is always read, and the clock is not asked."""
    spec = SeriesSpec("ticks", shards=[f"s{i}" for i in range(40)])
    for known, probes in ((at("11:59:58"), 0), (None, 1)):
        stats = ReadStats()
        answers = {**count_answers([5], 10), KnownTime: lambda ask, known=known: known}
        ran = run(reading.count(seat(spec, snapshots="estimated"), start=at("09:00:00"), stats=stats), answers)
        assert ran.result == 10 and len(ran.of(GetDoc)) == probes and len(ran.of(KnownTime)) == 1
        assert {c.read_time for c in ran.of(Count)} == {known or at("12:00:00")}  # one snapshot for both
        assert (stats.round_trips, stats.queries, stats.billed_reads) == (1 + probes, 2 + probes, 2 + probes)
        assert stats.snapshot_reads == probes
    ran = run(reading.count(seat(spec), start=at("09:00:00")), count_answers([5], 10))
    assert len(ran.of(GetDoc)) == 1 and not ran.of(KnownTime)


def test_a_walk_of_pages_reads_at_its_first_pages_snapshot_while_the_server_keeps_it() -> None:
    """Issue 43: one snapshot for a whole walk. A page of several chunks reads the server's
    time and its cursor carries it; the next page reads at it without a read of its own,
    unless the clock knows no server time (a pause) or the snapshot is near Firestore's hour.
    A page of one query reads at no snapshot, and its cursor carries none."""
    spec = SeriesSpec("ticks", shards=[f"s{i}" for i in range(40)])  # two chunks
    ticks = [Tick(f"t{i}", at("09:00:00") - dt.timedelta(seconds=i), {}) for i in range(3)]

    def page(cursor: str | None, *, server: str, known: dt.datetime | None, on: SeriesSpec = spec) -> Any:
        answers = {Collect: lambda ask: ticks, GetDoc: documents({}, now=at(server)), KnownTime: lambda ask: known}
        return run(reading.query(seat(on), limit=2, cursor=cursor), answers)

    first = page(None, server="12:00:00", known=None)
    cursor = first.result.cursor
    assert len(first.of(GetDoc)) == 1 and not first.of(KnownTime) and cursor_snapshot(cursor) == at("12:00:00")
    for known, reads in ((at("12:00:20"), 0), (at("12:49:59"), 0), (at("12:50:01"), 1), (None, 1)):
        ran = page(cursor, server="13:00:00", known=known)
        assert len(ran.of(GetDoc)) == ran.result.stats.snapshot_reads == reads, known
        assert cursor_snapshot(ran.result.cursor) == at("13:00:00" if reads else "12:00:00")
    one = SeriesSpec("ticks", shards=("s0", "s1"))
    first = page(None, server="12:00:00", known=None, on=one)
    assert not first.of(GetDoc) and cursor_snapshot(first.result.cursor) is None
    second = page(first.result.cursor, server="12:00:00", known=at("12:00:00"), on=one)
    assert not second.of(GetDoc) and not second.of(KnownTime)


def test_a_count_of_everything_warns_of_documents_under_undeclared_shard_values() -> None:
    spec = SeriesSpec("ticks", shards=[f"s{i}" for i in range(40)])  # two chunks
    with pytest.warns(UndeclaredShardsWarning, match="holds 13 documents but its declared shard values only 10"):
        ran = run(reading.count(seat(spec)), count_answers([5], 13))
    assert ran.result == 10
    counts = ran.of(Count)
    assert [type(c.over) for c in counts] == [ChunkTicks, ChunkTicks, CountAll]
    assert {c.read_time for c in counts} == {at("12:00:00")}  # one snapshot for the three
    assert [c.over.chunk for c in counts[:2]] == [spec.shards[:20], spec.shards[20:]]  # balanced, each within 30


def test_a_count_of_everything_is_one_query_of_one_chunk_once_the_store_found_no_undeclared_values() -> None:
    """Issue 59: ``count()`` without a filter in one billed read where it can be. A store's
    first count of everything also counts the whole collection (a second query, so a
    snapshot for both); while that finds nothing undeclared, the counts after it are the
    chunk's one query (no snapshot: one query) until UNDECLARED_CHECK_EVERY has passed. A
    store that found some checks, and warns, at every count of everything."""
    spec = SeriesSpec("ticks", shards=["s0", "s1", "s2"])  # one chunk
    now = [0.0]
    healthy = dataclasses.replace(seat(spec, snapshots="estimated"), checks=Checks(local=lambda: now[0]))
    answers = {**count_answers([2500], 2500), KnownTime: lambda ask: at("12:00:00")}
    for passed, whole in ((0.0, True), (1.0, False), (599.0, False), (2.0, True), (1.0, False)):
        now[0] += passed
        stats = ReadStats()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            ran = run(reading.count(healthy, stats=stats), answers)
        assert ran.result == 2500 and (CountAll in [type(c.over) for c in ran.of(Count)]) == whole, now
        if not whole:  # one query, not waited for a snapshot: one round trip, its 3 reads (2 500 entries)
            assert (stats.queries, stats.round_trips, stats.billed_reads) == (1, 1, 3)
            assert not ran.of(KnownTime) and not ran.of(GetDoc) and {c.read_time for c in ran.of(Count)} == {None}
    forgetful = seat(spec, snapshots="estimated")
    for _ in range(2):
        with pytest.warns(UndeclaredShardsWarning, match="holds 13 documents but its declared shard values only 10"):
            assert run(reading.count(forgetful), {**count_answers([10], 13), KnownTime: lambda ask: None}).result == 10


def test_a_count_of_a_range_asks_no_whole_collection_and_bills_each_query_sent() -> None:
    stats = ReadStats()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ran = run(reading.count(seat(SPEC), start=at("09:00:00"), stats=stats), count_answers([1500, 700], 0))
    assert ran.result == 2200  # one chunk, answered in two halves: their counts add up
    assert [type(c.over) for c in ran.of(Count)] == [ChunkTicks]
    assert stats.queries == 2 and stats.billed_reads == 2 + 1  # 1 500 entries: 2 reads; 700: 1


#: An as-of join's direction and tolerance -> the right side's range for a left side of [10:00, 11:00).
JOIN_RANGES = [
    ("backward", "5s", ("09:59:55", "11:00:00")),  # a match at most 5 s before: nothing after the left's end
    ("forward", "5s", ("10:00:00", "11:00:05")),  # at most 5 s after: nothing before the left's start
    ("nearest", "5s", ("09:59:55", "11:00:05")),
    ("backward", None, (None, "11:00:00")),  # no tolerance: a match may be any time before
    ("forward", None, ("10:00:00", None)),
]


@pytest.mark.parametrize(("direction", "tolerance", "right"), JOIN_RANGES)
def test_an_asof_join_reads_of_the_right_side_only_what_can_match(
    direction: str, tolerance: str | None, right: tuple[str | None, str | None]
) -> None:
    left = Query(start=at("10:00:00"), end=at("11:00:00"))
    request = asof.asof_read(seat(SPEC), left, None, right_spec=None, by="symbol", direction=direction,
                             tolerance=tolerance, allow_exact_matches=True, prefix="right", ids=False,
                             stats=ReadStats())  # fmt: skip
    ran = run(request, {GetDoc: documents({}, now=at("12:00:00"))})
    join = ran.result
    assert (join.left.plan.start, join.left.plan.end) == (at("10:00:00"), at("11:00:00"))
    assert (join.right.plan.start, join.right.plan.end) == tuple(None if t is None else at(t) for t in right)
    assert join.left.plan.query.read_time == join.right.plan.query.read_time == at("12:00:00")  # one snapshot
    assert len(ran.of(GetDoc)) == 1


def test_a_covered_aggregate_reads_whole_bars_where_the_rollup_holds_them_and_ticks_at_the_edges() -> None:
    held = {f"tsstore_rollups/{MINUTES.name}": watermark_doc(MINUTES, at("10:30:00"), since=at("09:00:00"))}
    answers = {GetDoc: documents(held, now=at("12:00:00")), FindDocs: lambda ask: [], Feed: lambda ask: None}
    ran = run(aggregates.aggregate(seat(SPEC), start=at("09:58:30"), end=at("10:31:10"), rollups=[MINUTES]), answers)
    parts = [(feed.read.plan.spec.collection, feed.read.plan.start, feed.read.plan.end) for feed in ran.of(Feed)]
    assert sorted(parts, key=lambda part: part[1]) == [
        ("ticks", at("09:58:30"), at("09:59:00")),  # up to the first whole minute: ticks
        (MINUTES.name, at("09:59:00"), at("10:30:00")),  # whole minutes the roll-up holds: its bars
        ("ticks", at("10:30:00"), at("10:31:10")),  # past its watermark: ticks
    ]
    assert {feed.read.plan.query.read_time for feed in ran.of(Feed)} == {at("12:00:00")}  # one snapshot
    assert [a.collection for a in ran.of(FindDocs)] == [f"tsstore_rollups/{MINUTES.name}/marks"]  # its late buckets
    assert ran.result.count == 0  # nothing fed: nothing counted


def test_combined_bars_read_the_marks_of_each_layer_in_one_round_trip_and_end_at_the_watermark() -> None:
    """Hourly bars from the hourly roll-up of the minute roll-up: its record (one round trip),
    then the marks of both layers asked with the minute roll-up's record (its declaration names
    every layer); then the bars, up to the watermark when no end is given."""
    held = {f"tsstore_rollups/{HOURS.name}": watermark_doc(HOURS, at("10:00:00"), since=at("06:00:00")),
            f"tsstore_rollups/{MINUTES.name}": watermark_doc(MINUTES, at("10:30:00"), since=at("06:00"))}  # fmt: skip
    answers = {GetDoc: documents(held, now=at("12:00:00")), FindDocs: lambda ask: [], Feed: lambda ask: None}
    ran = run(bars.bars(seat(HOURS.spec), interval="1h", combine=True, start=at("07:00:00")), answers)
    named = [[getattr(a, "path", None) or getattr(a, "collection", None) or type(a).__name__ for a in round_]
             for round_ in ran.rounds]  # fmt: skip
    assert named == [
        [f"tsstore_rollups/{HOURS.name}"],
        [f"tsstore_rollups/{HOURS.name}/marks", f"tsstore_rollups/{MINUTES.name}/marks",
         f"tsstore_rollups/{MINUTES.name}"],
        ["Feed"],
    ]
    [feed] = ran.of(Feed)
    assert (feed.read.plan.start, feed.read.plan.end) == (at("07:00:00"), at("10:00:00"))  # its watermark
    with pytest.raises(StateError, match=r"^end 2026-01-02T11:00:00Z is after the watermark of roll-up 'ticks_1min_1h"):
        run(bars.bars(seat(HOURS.spec), interval="1h", combine=True, end=at("11:00:00")), answers)


def marked_at(name: str, *buckets: dt.datetime) -> Any:
    """Answers for :class:`FindDocs`: the marks of roll-up ``name`` for ``buckets``, none of
    any other."""
    return lambda ask: [doc(f"{ask.collection}/{b:%H%M}", {"bucket": b}, at=at("11:00:00")) for b in buckets
                        if ask.collection == f"tsstore_rollups/{name}/marks"]  # fmt: skip


def test_combined_bars_read_a_marked_hour_from_the_minute_bars_all_at_one_snapshot() -> None:
    """Hourly bars from the hourly roll-up, its 09:00 bar marked: its record, then the marks
    of both layers with the minute roll-up's record (one round trip), the snapshot, then the
    hours before it from the hourly bars and the marked hour from the minute bars, at the
    snapshot; with no mark, one read and no snapshot."""
    held = {f"tsstore_rollups/{r.name}": watermark_doc(r, at("12:00:00"), since=at("06:00:00")) for r in (HOURS, MINUTES)}
    answers = {GetDoc: documents(held, now=at("12:30:00")), FindDocs: marked_at(HOURS.name, at("09:00:00")),
               Feed: lambda ask: None}  # fmt: skip
    window = {"interval": "1h", "combine": True, "start": at("07:00:00"), "end": at("10:00:00")}
    ran = run(bars.bars(seat(HOURS.spec), **window), answers)
    named = [sorted(getattr(a, "path", None) or getattr(a, "collection", None) or "?" for a in round_)
             for round_ in ran.rounds[:2]]  # fmt: skip
    assert named == [[f"tsstore_rollups/{HOURS.name}"],
                     [f"tsstore_rollups/{MINUTES.name}", f"tsstore_rollups/{MINUTES.name}/marks",
                      f"tsstore_rollups/{HOURS.name}/marks"]]  # fmt: skip
    reads = [(f.read.plan.spec.collection, f.read.plan.start, f.read.plan.end, f.read.plan.query.read_time)
             for f in ran.of(Feed)]  # fmt: skip
    assert reads == [(HOURS.name, at("07:00:00"), at("09:00:00"), at("12:30:00")),
                     (MINUTES.name, at("09:00:00"), at("10:00:00"), at("12:30:00"))]  # fmt: skip
    plain = run(bars.bars(seat(HOURS.spec), **window), {**answers, FindDocs: lambda ask: []})
    assert [(f.read.plan.start, f.read.plan.query.read_time) for f in plain.of(Feed)] == [(at("07:00:00"), None)]


def test_combined_bars_refuse_a_finer_bar_of_a_marked_bucket_that_an_edge_would_split() -> None:
    """Kathmandu's days start at 18:15Z, inside a 30-minute bar: a marked two-hour bucket read
    from the 30-minute bars is refused at the first one holding the edge, as a stored bar of
    the store's own would be, not summed into one day."""
    halves = Rollup(SPEC, interval="30min")
    twos = Rollup(halves, interval="2h")
    end = dt.datetime(2026, 1, 3, tzinfo=UTC)
    held = {f"tsstore_rollups/{r.name}": watermark_doc(r, end, since=at("00:00:00")) for r in (halves, twos)}
    stored = {"open": 1, "high": 1, "low": 1, "close": 1, "count": 1, "sum": 1, "m2": 0.0}

    def feed(ask: Feed) -> None:
        if ask.read.plan.spec.collection == halves.name:
            ask.sink.add(Tick("b", at("18:00:00"), stored))

    answers = {GetDoc: documents(held, now=end), FindDocs: marked_at(twos.name, at("18:00:00")), Feed: feed}
    with pytest.raises(QueryError) as split:
        run(bars.bars(seat(twos.spec), interval="1D", tz="Asia/Kathmandu", combine=True, start=at("16:00:00"),
                      end=at("20:00:00")), answers)  # fmt: skip
    assert str(split.value).startswith(
        "cannot combine 30min bars (aligned on the UTC epoch) into 1D buckets in Asia/Kathmandu: the stored bar "
        "2026-01-02T18:00:00Z–2026-01-02T18:30:00Z holds the edge 2026-01-02T18:15:00Z"
    )


def test_a_usage_error_is_what_a_command_answers_with_exit_2() -> None:
    """One class says "the caller asked for what cannot be" (the CLI's exit 2, decided in one
    place); a bad record, what is stored and failures are not it."""
    from tsstore import errors
    from tsstore.cli.exits import USAGE, failure_of

    usage = [errors.SpecError, errors.ConfigError, errors.QueryError, errors.CounterError, errors.OptionError,
             errors.CursorError]  # fmt: skip
    others = [errors.StateError, errors.SchemaError, errors.EmulatorError, errors.LiveError]
    for kind in usage:
        assert issubclass(kind, errors.UsageError) and issubclass(kind, ValueError), kind
    for made in [*(kind("no") for kind in usage[:4]), errors.OptionError("query", ["limt"], ["limit"])]:
        failure = failure_of(made)
        assert failure is not None and failure.exit_code == USAGE, made
    for kind in others:
        assert not issubclass(kind, errors.UsageError), kind
        failure = failure_of(kind("no"))
        assert failure is not None and failure.exit_code != USAGE, kind
