"""Stored roll-ups as requests: a run (the bars of every closed interval, the late buckets
first) and a check of the stored bars against their ticks. The arithmetic is
:mod:`tsstore.analytics.bars` and :mod:`tsstore.analytics.rollup`; the late-tick protocol's
roll-up side is :mod:`tsstore.verbs.marks`."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

from tsstore.analytics.bars import Bar, BarBuilder, bar_start, iter_bars, stored_bar
from tsstore.analytics.covered import join_spans
from tsstore.analytics.rollup import Rollup, RollupResult, RollupWindow, VerifyResult, rollup_of, rollup_window
from tsstore.asks import Fields, ask
from tsstore.errors import QueryError, RetentionWarning, StateError
from tsstore.late import LAST_TICK, PURGED, Horizon, Mark
from tsstore.read.cost import ReadStats
from tsstore.read.plan import QueryPlan, oldest_first
from tsstore.read.query import Query
from tsstore.spec import Direction
from tsstore.ticks import Tick
from tsstore.times import TimeLike, to_utc
from tsstore.verbs.bars import FedBars, bars_plan
from tsstore.verbs.marks import (
    announce,
    clear_marks,
    put_marks,
    read_marks,
    read_watermark,
    settle_writers,
    watermark_write,
)
from tsstore.verbs.reading import query, read, server_time, snapshot_now
from tsstore.verbs.request import Collect, Feed, Request, Seat, Send
from tsstore.verbs.writing import ProgressCallback
from tsstore.write.ops import Erase
from tsstore.write.prepare import PreparedDoc, prepare_records
from tsstore.write.sender import BulkSender
from tsstore.write.writer import Making, SendOptions

#: What each parameter of these verbs means (the API reference describes a parameter from
#: here unless the verb's docstring says more).
PARAMETER_HELP = {
    "rollup": "the roll-up, declared on this store's series",
    "since": "the first instant to compute (aligned down to the interval); ``None``: from the stored "
    "watermark, else the oldest tick",
    "until": "the instant to stop at (aligned down); ``None``: now, so an open interval is left for later",
    "on_progress": "called with the number of ticks read as they stream",
    "repair": "mark each bucket whose stored bar differs, so reads stop using it and the next run recomputes it",
}

#: Bars by (series key, bar start).
Bars = dict[tuple[object, dt.datetime], Bar]


def rollup(
    seat: Seat,
    rollup: Rollup,
    *,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    on_progress: ProgressCallback | None = None,
) -> Request[RollupResult]:
    """Compute and store the bars of ``rollup`` (declared on this store's series) for
    every closed interval: from ``since`` (aligned down to the interval), else from the
    stored watermark, else from the oldest tick; up to ``until`` or now, aligned down, so
    an interval still open is left for a later run. Bars are written through the writer
    with the roll-up spec's identity, replacing a stored bar that changed: a re-run stores
    nothing twice. The watermark advances only once every bar is written, so an interrupted
    run is repeated whole by the next. ``on_progress`` gets the number of ticks read as they
    stream.

    Late ticks: every bucket before the watermark that a write changed since (a *mark*, see
    :mod:`tsstore.late`) is recomputed from its ticks first, bars left without ticks are
    deleted, and the marks folded in are cleared (``redone`` in the result). Before reading
    a new range the run announces its end and waits for the writers still deciding with an
    older view (at most their lease, ``spec.late.lease``), so no tick lands unmarked behind
    it."""
    rollup = rollup_of(rollup, seat.spec, verb="rollup")
    since_at, until_at = _since_until(since, until)
    if since_at is not None and until_at is not None and since_at >= until_at:
        raise QueryError(f"since {since_at.isoformat()} is not before until {until_at.isoformat()}")
    mine = yield from read_watermark(seat, rollup.name)
    watermark = rollup.check_watermark(mine)
    now = yield from server_time(seat)
    window = yield from _window(seat, rollup, now=now, since=since_at, until=until_at, watermark=watermark)
    if window is None:  # the finer roll-up has not run: nothing to combine
        return RollupResult(None, None, watermark=watermark, waiting_for=rollup.source.collection)
    cutoff = yield from _hold_writers(seat, rollup, mine, window, now)
    cost = ReadStats()
    snapshot = yield from snapshot_now(seat, cost)
    upto = window.end if window.fresh else watermark
    marks = [] if upto is None else (yield from read_marks(seat, rollup.name, before=upto, read_time=snapshot))
    if not window.fresh and not marks:
        return RollupResult(None, None, watermark=watermark)
    late = _late_buckets(marks, window, (mine or {}).get(PURGED))
    redone, stale = yield from _redo(seat, rollup, late, window, watermark, snapshot, cost)
    builder, reading = None, None
    if window.fresh and window.start is not None:
        plan, builder = _bars_over(seat, rollup, window.start, window.end, snapshot)
        reading = yield from read(seat, plan, cost)
    made = _Made(rollup, redone, stale, builder, on_progress, window, watermark, cost, len(late))
    options = SendOptions(on_duplicate=rollup.spec.on_duplicate)
    done: RollupResult = yield from ask(Send(made, "roll-up", read=reading, spec=rollup.spec, options=options))
    if on_progress is not None:
        on_progress(cost.documents % 1000)
    yield from clear_marks(seat, rollup.name, marks, cutoff=cutoff)
    document = window.watermark_after(rollup, mine, watermark)
    if document is not None:
        document.update(_last_tick(mine, made.latest))
        yield from ask(watermark_write(rollup.name, document, what=f"the watermark of roll-up {rollup.name!r}"))
    return dataclasses.replace(
        done, ticks=cost.documents, watermark=watermark if document is None else document["watermark"]
    )


def _last_tick(stored: Fields | None, latest: list[dt.datetime]) -> dict[str, dt.datetime]:
    """The watermark document's last tick after a run whose bars' last tick is ``latest``
    (one time, or none): the later of it and the stored one, which never moves back."""
    held = (stored or {}).get(LAST_TICK)
    times = [*latest, *([held] if isinstance(held, dt.datetime) else [])]
    return {LAST_TICK: max(times)} if times else {}


def _since_until(since: object, until: object) -> tuple[dt.datetime | None, dt.datetime | None]:
    """A run's ``since`` and ``until`` as UTC times (``None`` stays ``None``)."""
    try:
        return (None if since is None else to_utc(since, name="since"),
                None if until is None else to_utc(until, name="until"))  # fmt: skip
    except ValueError as exc:
        raise QueryError(str(exc)) from None


def _window(
    seat: Seat,
    rollup: Rollup,
    *,
    now: dt.datetime,
    since: dt.datetime | None,
    until: dt.datetime | None,
    watermark: dt.datetime | None,
) -> Request[RollupWindow | None]:
    """The window of this run (:func:`~tsstore.analytics.rollup.rollup_window`), with what it
    needs read: the finer roll-up's watermark document, the oldest tick when neither
    ``since`` nor a watermark says where to start."""
    finer = None if rollup.finer is None else (yield from read_watermark(seat, rollup.finer.name))
    if rollup.finer is not None and rollup.finer.check_watermark(finer) is None:
        return None
    oldest = None
    if since is None and watermark is None:
        first = yield from query(seat, direction=Direction.ASC, limit=1, columns=())
        oldest = first[0].timestamp if len(first) else None
    return rollup_window(rollup, now=now, since=since, until=until, watermark=watermark, finer=finer, oldest=oldest)


def _hold_writers(
    seat: Seat, rollup: Rollup, mine: Fields | None, window: RollupWindow, now: dt.datetime
) -> Request[dt.datetime]:
    """Before a new range is read: announce its end unless the writers already hold it (a
    writer marks the ticks it writes before a roll-up's horizon), warn when its start is older
    than the ticks' TTL, and wait for the writers deciding with an older view. Answers the
    cutoff of the marks this run may clear."""
    announced = (mine or {}).get("announced")
    if window.fresh and window.start is not None:
        held = Horizon.of(rollup.name, mine) if mine else None  # as writers see it: watermark or announced end
        if held is None or held.horizon is None or window.end > held.horizon:
            identity = rollup.watermark_document(window.end)
            del identity["watermark"]
            announced = yield from announce(seat, rollup.name, identity, window.end)
        kept = rollup.source.expire_after
        if kept is not None and window.start < now - kept:  # the TTL may have deleted some ticks
            warnings.warn(
                f"roll-up {rollup.name!r} starts at {window.start.isoformat()}, before {(now - kept).isoformat()}: "
                f"ticks older than {seat.spec.collection!r}'s expire_after ({kept}) may be deleted by their TTL "
                "already, and those bars short of them; run the roll-up more often than the ticks expire",
                RetentionWarning,
                stacklevel=3,
            )
    waited = announced if window.fresh and isinstance(announced, dt.datetime) else None
    return (yield from settle_writers(seat, seat.spec.collection, announced=waited,
                                      refresh=seat.spec.late.refresh.total_seconds()))  # fmt: skip


def _late_buckets(marks: list[Mark], window: RollupWindow, purged: object) -> list[Mark]:
    """The marked buckets a run recomputes: those before its new range (a fresh run reads the
    range itself), none before the purge horizon (their ticks are gone: the bars stay)."""
    late = [m for m in marks if not window.fresh or (window.start is not None and m.bucket < window.start)]
    return [m for m in late if m.bucket >= purged] if isinstance(purged, dt.datetime) else late


def _bars_over(
    seat: Seat, rollup: Rollup, begin: dt.datetime, end: dt.datetime, snapshot: dt.datetime
) -> tuple[QueryPlan, BarBuilder]:
    """The read and the bar builder of ``rollup``'s bars over ``[begin, end)`` at ``snapshot``."""
    combine = None if rollup.finer is None else rollup.finer.interval  # the stored bars' length
    plan, making, _ = bars_plan(
        seat, Query(start=begin, end=end, read_time=snapshot), interval=rollup.interval, by=rollup.by,
        price="close" if combine else rollup.price, volume=rollup.volume, combine=combine,
    )  # fmt: skip
    return plan, making


def _redo(
    seat: Seat,
    rollup: Rollup,
    late: list[Mark],
    window: RollupWindow,
    watermark: dt.datetime | None,
    snapshot: dt.datetime,
    cost: ReadStats,
) -> Request[tuple[list[Bar], list[tuple[str, dt.datetime]]]]:
    """The bars of the late buckets (one read per run of buckets), and the stored bars of
    every span recomputed below the watermark (``(id, bar start)``: those left without a tick
    are deleted)."""
    late_spans = join_spans((m.bucket, m.bucket + rollup.interval) for m in late)
    redo = list(late_spans)
    if window.fresh and watermark is not None and window.start is not None and window.start < watermark:
        redo.append((window.start, min(window.end, watermark)))  # a re-run's range below the watermark
    redone: list[Bar] = []
    for begin, end in late_spans:
        plan, making = _bars_over(seat, rollup, begin, end, snapshot)
        ticks = yield from ask(Collect((yield from read(seat, plan, cost))))
        redone.extend(iter_bars(making, ticks))
    stale: list[tuple[str, dt.datetime]] = []
    for begin, end in redo:
        bars_read = oldest_first(rollup.spec, Query(start=begin, end=end, columns=(), read_time=snapshot))
        found = yield from ask(Collect((yield from read(seat, bars_read, ReadStats()))))  # not what ``ticks`` counts
        stale.extend((bar.id, bar.timestamp) for bar in found)
    return redone, stale


@dataclass(frozen=True)
class _Made(Making[RollupResult]):
    """What a run sends: the redone bars, then the bars of its new range as its ticks stream
    (``builder``), then deletions of the stale bars no bar replaced; and what it reports."""

    rollup: Rollup
    redone: list[Bar]
    stale: list[tuple[str, dt.datetime]]
    builder: BarBuilder | None
    on_progress: ProgressCallback | None
    window: RollupWindow
    watermark: dt.datetime | None
    cost: ReadStats
    marked: int  # late buckets folded in
    #: The time of the last tick in the bars sent so far (empty before the first).
    latest: list[dt.datetime] = field(default_factory=list)

    def docs(self, ticks: Iterator[Tick]) -> Iterator[PreparedDoc]:
        new = () if self.builder is None else iter_bars(self.builder, self._counted(ticks))
        kept: set[str] = set()
        bars = self._noted(itertools.chain(self.redone, new))
        for doc in prepare_records(self.rollup.spec, self.rollup.records(bars),
                                   on_duplicate=self.rollup.spec.on_duplicate):  # fmt: skip
            kept.add(doc.id)
            yield doc
        emptied = [(doc_id, at) for doc_id, at in self.stale if doc_id not in kept]
        for n, (doc_id, at) in enumerate(emptied):  # bars left without ticks (the coarser roll-ups are told)
            yield PreparedDoc(len(kept) + n, doc_id, Erase(at), 0)

    def _noted(self, bars: Iterator[Bar]) -> Iterator[Bar]:
        for bar in bars:
            at = bar.close_at or bar.start  # a stored bar from before tsstore kept close_at: its start
            if not self.latest or at > self.latest[0]:
                self.latest[:] = [at]
            yield bar

    def _counted(self, ticks: Iterator[Tick]) -> Iterator[Tick]:
        for n, tick in enumerate(ticks, 1):
            yield tick
            if self.on_progress is not None and n % 1000 == 0:
                self.on_progress(1000)

    def result(self, sender: BulkSender) -> RollupResult:
        """What the run did so far (also what Ctrl-C reports as done)."""
        counts, window = sender.counts, self.window
        return RollupResult(
            window.start if window.fresh else None, window.end if window.fresh else None, ticks=self.cost.documents,
            bars=sender.written - counts["deleted"], created=counts["created"], replaced=counts["replaced"],
            present=counts["present"], skipped=0 if self.builder is None else self.builder.skipped,
            watermark=self.watermark, read="ticks" if self.rollup.finer is None else "bars", redone=self.marked,
            removed=counts["deleted"],
        )  # fmt: skip


def rollup_coverage(seat: Seat, rollup: Rollup) -> Request[tuple[dt.datetime, dt.datetime] | None]:
    """``(since, watermark)``: the span over which every bar of ``rollup`` is stored and true
    (as its watermark document says), or ``None`` before its first run. Bars combined from it
    over a range inside that span equal bars from the ticks; late ticks inside it are marked
    until the next run. One document read."""
    rollup = rollup_of(rollup, seat.spec, verb="rollup_coverage")
    return rollup.coverage((yield from read_watermark(seat, rollup.name)))


def verify_rollup(
    seat: Seat,
    rollup: Rollup,
    *,
    since: TimeLike | None = None,
    until: TimeLike | None = None,
    repair: bool = False,
    stats: ReadStats | None = None,
) -> Request[VerifyResult]:
    """Compare ``rollup``'s stored bars with the bars of their ticks over ``[since, until)``
    (default: the span its watermark document says is whole), bucket by bucket, at one
    snapshot: for writes tsstore did not see (a client outside the generated rules, other
    code). Buckets already marked late are left to the next run. ``repair=True`` marks each
    bucket that differs, so reads stop using it at once and the next run recomputes it.
    Billed: every tick and bar of the range (``stats``)."""
    rollup = rollup_of(rollup, seat.spec, verb="verify_rollup")
    if not isinstance(repair, bool):
        raise QueryError(f"repair takes True or False, got {repair!r}")
    mine = yield from read_watermark(seat, rollup.name)
    start, end = _verified_range(rollup, mine, *_since_until(since, until))
    cost = stats if stats is not None else ReadStats()
    snapshot = yield from snapshot_now(seat, cost)
    plan, builder = _bars_over(seat, rollup, start, end, snapshot)
    fed = FedBars(builder)
    yield from ask(Feed((yield from read(seat, plan, cost)), fed))
    made: Bars = {(bar.key, bar.start): bar for bar in fed.finished()}
    ticks_read = cost.documents
    stored = _StoredBars([f.split(".") for f in rollup.by])
    bars_read = oldest_first(rollup.spec, Query(start=start, end=end, read_time=snapshot))
    yield from ask(Feed((yield from read(seat, bars_read, cost)), stored))
    kept = stored.bars
    late = {m.bucket for m in (yield from read_marks(seat, rollup.name, before=end, read_time=snapshot))}
    differ = _differences(made, kept, late)
    if repair and differ:
        yield from put_marks(seat, rollup.name, sorted(differ))
    return VerifyResult(
        start, end, bars=len(kept), ticks=ticks_read, read="ticks" if rollup.finer is None else "bars",
        differ=tuple(differ.values()), late=len({k[1] for k in set(made) | set(kept)} & late),
        billed_reads=cost.billed_reads, repaired=repair and bool(differ),
    )  # fmt: skip


@dataclass(frozen=True)
class _StoredBars:
    """A :class:`~tsstore.verbs.request.Feed`'s sink: the stored bars read, by (series, bar
    start); ``by``: the series fields' paths."""

    by: list[list[str]]
    bars: Bars = field(default_factory=dict)

    def add(self, tick: Tick) -> None:
        bar = stored_bar(tick, self.by)
        if bar is not None:
            self.bars[(bar.key, bar.start)] = bar


def _verified_range(
    rollup: Rollup, stored: Fields | None, since: dt.datetime | None, until: dt.datetime | None
) -> tuple[dt.datetime, dt.datetime]:
    """What a check covers: from ``since`` (else where the stored span begins), aligned down,
    to ``until`` or the watermark, whichever is earlier."""
    watermark = rollup.check_watermark(stored)
    if watermark is None:
        raise StateError(f"roll-up {rollup.name!r} has not run yet: nothing stored to verify; run it first")
    span = rollup.coverage(stored)
    start = since if since is not None else (span[0] if span else None)
    if start is None:
        raise QueryError(f"roll-up {rollup.name!r} does not say where its bars begin; give since=")
    start, end = bar_start(start, rollup.interval), watermark if until is None else min(watermark, until)
    if start >= end and end == watermark:  # the roll-up has not reached since yet
        raise StateError(f"since {start.isoformat()} is not before the watermark of roll-up {rollup.name!r} "
                         f"({watermark.isoformat()}): nothing rolled up there to verify yet; run it first")
    if start >= end:
        raise QueryError(f"since {start.isoformat()} is not before {end.isoformat()}: nothing to verify")
    return start, end


def _differences(made: Bars, kept: Bars, late: set[dt.datetime]) -> dict[dt.datetime, str]:
    """Per bucket (not marked late), the first series whose stored bar differs from the bar
    of its ticks, and how."""
    differ: dict[dt.datetime, str] = {}
    for key in sorted(set(made) | set(kept), key=lambda k: (k[1], repr(k[0]))):
        bucket = key[1]
        if bucket in late or bucket in differ:
            continue
        why = _difference(made.get(key), kept.get(key))
        if why:
            differ[bucket] = f"{bucket.isoformat()} {key[0]!r}: {why}"
    return differ


def _difference(made: Bar | None, kept: Bar | None) -> str:
    """What differs between the bar of the ticks and the stored one ("" when nothing does)."""
    if made is None or kept is None:
        return "stored, but no tick is there" if made is None else "ticks, but no bar is stored"
    fields = ("open", "high", "low", "close", "count", "volume", "sum", "open_at", "close_at")
    wrong = [f"{f} {getattr(kept, f)!r} (ticks: {getattr(made, f)!r})" for f in fields
             if getattr(made, f) != getattr(kept, f)]  # fmt: skip
    if made.m2 is not None and kept.m2 is not None and abs(made.m2 - kept.m2) > 1e-9 * max(abs(made.m2), 1.0):
        wrong.append(f"m2 {kept.m2!r} (ticks: {made.m2!r})")
    return ", ".join(wrong)
