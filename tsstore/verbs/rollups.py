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

from tsstore.analytics.bars import Bar, BarBuilder, bar_start, iter_bars, stored_bar
from tsstore.analytics.covered import join_spans
from tsstore.analytics.rollup import Rollup, RollupResult, VerifyResult
from tsstore.asks import ask
from tsstore.errors import QueryError, RetentionWarning
from tsstore.late import PURGED, Horizon
from tsstore.read.cost import ReadStats
from tsstore.read.engine import TickRead
from tsstore.read.plan import QueryPlan, oldest_first
from tsstore.read.query import Query
from tsstore.spec import Direction
from tsstore.ticks import Tick
from tsstore.times import bucket_ceil, to_utc
from tsstore.verbs.bars import bars_plan
from tsstore.verbs.marks import (
    announce,
    clear_marks,
    put_marks,
    read_marks,
    read_watermark,
    settle_writers,
    watermark_write,
)
from tsstore.verbs.reading import probe, query, read, server_time
from tsstore.verbs.request import Collect, Feed, Request, Seat, Send
from tsstore.verbs.writing import ProgressCallback
from tsstore.write.ops import Erase
from tsstore.write.prepare import PreparedDoc, prepare_records
from tsstore.write.sender import BulkSender

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


def rollup(
    seat: Seat,
    rollup: Rollup,
    *,
    since: object = None,
    until: object = None,
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
    spec = seat.spec
    rollup.check_source(spec)
    mine = yield from read_watermark(seat, rollup.name)
    watermark = rollup.check_watermark(mine)
    now = yield from server_time(seat)
    try:
        stop = None if until is None else to_utc(until, name="until")
        start = to_utc(since, name="since") if since is not None else watermark
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    if since is not None and stop is not None and start is not None and start >= stop:
        raise QueryError(f"since {start.isoformat()} is not before until {stop.isoformat()}")
    limit = now if stop is None else min(now, stop)
    first_whole: dt.datetime | None = None  # a roll-up of a roll-up: its first bar its source holds whole
    if rollup.finer is not None:  # bars of bars: only what the finer roll-up has written
        finer = rollup.finer
        finer_doc = yield from read_watermark(seat, finer.name)
        written = finer.check_watermark(finer_doc)
        if written is None:  # the finer roll-up has not run: nothing of it to combine yet
            return RollupResult(None, None, watermark=watermark)
        limit = min(limit, written)
        span = finer.coverage(finer_doc)
        if span is not None:
            first_whole = bucket_ceil(span[0], rollup.interval)
    end = bar_start(limit, rollup.interval)
    if start is None:
        oldest = yield from query(seat, direction=Direction.ASC, limit=1, columns=())
        start = oldest[0].timestamp if len(oldest) else None
    fresh = start is not None and bar_start(start, rollup.interval) < end  # a range to roll up
    if start is not None:
        start = bar_start(start, rollup.interval)
    held = Horizon.of(rollup.name, mine) if mine else None  # as writers see it: watermark or announced end
    announced = (mine or {}).get("announced")
    if fresh:
        if held is None or held.horizon is None or end > held.horizon:  # writers must mark ticks before ``end``
            identity = rollup.watermark_document(end)
            del identity["watermark"]
            announced = yield from announce(seat, rollup.name, identity, end)
        kept = rollup.source.expire_after
        if kept is not None and start is not None and start < now - kept:  # the TTL may have deleted some ticks
            warnings.warn(
                f"roll-up {rollup.name!r} starts at {start.isoformat()}, before {(now - kept).isoformat()}: ticks "
                f"older than {spec.collection!r}'s expire_after ({kept}) may be deleted by their TTL already, and "
                "those bars short of them; run the roll-up more often than the ticks expire",
                RetentionWarning,
                stacklevel=2,
            )
    cutoff = yield from settle_writers(
        seat, spec.collection, announced=announced if fresh and isinstance(announced, dt.datetime) else None,
        refresh=spec.late.refresh.total_seconds(),
    )  # fmt: skip
    cost = ReadStats()
    snapshot = yield from probe(seat, cost)
    upto = end if fresh else watermark
    marks = [] if upto is None else (yield from read_marks(seat, rollup.name, before=upto, read_time=snapshot))
    late = [m for m in marks if not fresh or (start is not None and m.bucket < start)]
    purged = (mine or {}).get(PURGED)
    if isinstance(purged, dt.datetime):  # their ticks are gone: the bars stay, the marks go
        late = [m for m in late if m.bucket >= purged]
    if not fresh and not marks:
        return RollupResult(None, None, watermark=watermark)
    # Recomputed over stored bars: the late buckets, and a re-run's range below the watermark.
    late_spans = join_spans((m.bucket, m.bucket + rollup.interval) for m in late)  # one read per run of buckets
    redo = list(late_spans)
    if fresh and watermark is not None and start is not None and start < watermark:
        redo.append((start, min(end, watermark)))
    combine = None if rollup.finer is None else rollup.finer.interval  # the stored bars' length
    price = "close" if combine else rollup.price

    def bars_over(begin: dt.datetime, stop: dt.datetime) -> tuple[QueryPlan, BarBuilder]:
        plan, making, _ = bars_plan(
            seat, Query(start=begin, end=stop, read_time=snapshot), interval=rollup.interval, by=rollup.by,
            price=price, volume=rollup.volume, combine=combine,
        )  # fmt: skip
        return plan, making

    redone: list[Bar] = []
    for begin, stop in late_spans:
        plan, making = bars_over(begin, stop)
        ticks = yield Collect((yield from read(seat, plan, cost)))
        redone.extend(iter_bars(making, ticks))
    stale: list[tuple[str, dt.datetime]] = []  # stored bars of the recomputed spans
    for begin, stop in redo:
        bars_read = oldest_first(rollup.spec, Query(start=begin, end=stop, columns=(), read_time=snapshot))
        found = yield Collect((yield from read(seat, bars_read, ReadStats())))  # not what ``ticks`` counts
        stale.extend((bar.id, bar.timestamp) for bar in found)
    policy = rollup.spec.on_duplicate
    builder: BarBuilder | None = None
    reading: TickRead | None = None
    if fresh and start is not None:
        plan, builder = bars_over(start, end)
        reading = yield from read(seat, plan, cost)

    def bars_of(ticks: Iterator[Tick]) -> Iterator[PreparedDoc]:
        def counted() -> Iterator[Tick]:
            for n, tick in enumerate(ticks, 1):
                yield tick
                if on_progress is not None and n % 1000 == 0:
                    on_progress(1000)

        made = iter(redone) if builder is None else itertools.chain(redone, iter_bars(builder, counted()))
        kept: set[str] = set()
        for doc in prepare_records(rollup.spec, rollup.records(made), on_duplicate=policy):
            kept.add(doc.id)
            yield doc
        emptied = [(doc_id, at) for doc_id, at in stale if doc_id not in kept]
        for n, (doc_id, at) in enumerate(emptied):  # bars left without ticks (the coarser roll-ups are told)
            yield PreparedDoc(len(kept) + n, doc_id, Erase(at), 0)

    def so_far(sender: BulkSender) -> RollupResult:  # also what Ctrl-C reports as done
        counts = sender.counts
        return RollupResult(
            start if fresh else None, end if fresh else None, ticks=cost.documents,
            bars=sender.written - counts["deleted"],
            created=counts["created"], replaced=counts["replaced"], present=counts["present"],
            skipped=0 if builder is None else builder.skipped, watermark=watermark, read="bars" if combine else "ticks",
            redone=len(late), removed=counts["deleted"],
        )  # fmt: skip

    done: RollupResult = yield Send(bars_of, so_far, "roll-up", read=reading, spec=rollup.spec,
                                    options={"on_duplicate": policy})  # fmt: skip
    if on_progress is not None:
        on_progress(cost.documents % 1000)
    yield from clear_marks(seat, rollup.name, marks, cutoff=cutoff)
    mark = watermark
    if fresh and start is not None:
        mark = end if watermark is None else max(end, watermark)
        begin = start if first_whole is None else max(start, first_whole)
        since_now = rollup.covered_since(mine, begin, end) if begin < end else (mine or {}).get("since")
        document = rollup.watermark_document(mark, since_now if isinstance(since_now, dt.datetime) else None)
        yield from ask(watermark_write(rollup.name, document, what=f"the watermark of roll-up {rollup.name!r}"))
    return dataclasses.replace(done, ticks=cost.documents, watermark=mark)


def verify_rollup(
    seat: Seat,
    rollup: Rollup,
    *,
    since: object = None,
    until: object = None,
    repair: bool = False,
    stats: ReadStats | None = None,
) -> Request[VerifyResult]:
    """Compare ``rollup``'s stored bars with the bars of their ticks over ``[since, until)``
    (default: the span its watermark document says is whole), bucket by bucket, at one
    snapshot: for writes tsstore did not see (a client outside the generated rules, other
    code). Buckets already marked late are left to the next run. ``repair=True`` marks each
    bucket that differs, so reads stop using it at once and the next run recomputes it.
    Billed: every tick and bar of the range (``stats``)."""
    spec = seat.spec
    rollup.check_source(spec)
    if not isinstance(repair, bool):
        raise QueryError(f"repair takes True or False, got {repair!r}")
    mine = yield from read_watermark(seat, rollup.name)
    watermark = rollup.check_watermark(mine)
    if watermark is None:
        raise QueryError(f"roll-up {rollup.name!r} has not run yet: nothing stored to verify; run it first")
    span = rollup.coverage(mine)
    try:
        start = to_utc(since, name="since") if since is not None else (span[0] if span else None)
        end = min(watermark, to_utc(until, name="until")) if until is not None else watermark
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    if start is None:
        raise QueryError(f"roll-up {rollup.name!r} does not say where its bars begin; give since=")
    start = bar_start(start, rollup.interval)
    if start >= end:
        raise QueryError(f"since {start.isoformat()} is not before {end.isoformat()}: nothing to verify")
    cost = stats if stats is not None else ReadStats()
    snapshot = yield from probe(seat, cost)
    combine = None if rollup.finer is None else rollup.finer.interval
    plan, builder, _ = bars_plan(
        seat, Query(start=start, end=end, read_time=snapshot), interval=rollup.interval, by=rollup.by,
        price="close" if combine else rollup.price, volume=rollup.volume, combine=combine,
    )  # fmt: skip
    made: dict[tuple[object, dt.datetime], Bar] = {}
    ticks = yield from read(seat, plan, cost)

    def take(tick: Tick) -> None:
        for bar in builder.add(tick):
            made[(bar.key, bar.start)] = bar

    yield Feed(ticks, take)
    for bar in builder.rest():
        made[(bar.key, bar.start)] = bar
    ticks_read = cost.documents
    kept: dict[tuple[object, dt.datetime], Bar] = {}
    by = [f.split(".") for f in rollup.by]
    bars_read = yield from read(seat, oldest_first(rollup.spec, Query(start=start, end=end, read_time=snapshot)), cost)

    def keep(tick: Tick) -> None:
        bar = stored_bar(tick, by)
        if bar is not None:
            kept[(bar.key, bar.start)] = bar

    yield Feed(bars_read, keep)
    late = {m.bucket for m in (yield from read_marks(seat, rollup.name, before=end, read_time=snapshot))}
    differ: dict[dt.datetime, str] = {}
    for key in sorted(set(made) | set(kept), key=lambda k: (k[1], repr(k[0]))):
        bucket = key[1]
        if bucket in late or bucket in differ:
            continue
        why = _difference(made.get(key), kept.get(key))
        if why:
            differ[bucket] = f"{bucket.isoformat()} {key[0]!r}: {why}"
    if repair and differ:
        yield from put_marks(seat, rollup.name, sorted(differ))
    return VerifyResult(
        start, end, bars=len(kept), ticks=ticks_read, read="bars" if combine else "ticks",
        differ=tuple(differ.values()), late=len({k[1] for k in set(made) | set(kept)} & late),
        billed_reads=cost.billed_reads, repaired=repair and bool(differ),
    )  # fmt: skip


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
