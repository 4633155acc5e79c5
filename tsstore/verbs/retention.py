"""Retention as a request: deleting the ticks of a time range."""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from tsstore.analytics.rollup import Rollup
from tsstore.asks import Fields, FindDocs, ask, asked_together
from tsstore.cold.manifest import Manifest, manifest_ask
from tsstore.cold.tier import horizon_fields, horizon_name
from tsstore.cold_tier import ColdTier
from tsstore.errors import QueryError, RetentionError, RetentionWarning
from tsstore.late import COLD_TIER, PURGED, WATERMARKS, marks_ask
from tsstore.read.cost import ReadStats
from tsstore.read.engine import TickRead, sweep_cursor
from tsstore.read.plan import QueryPlan, oldest_first, plan_query
from tsstore.read.query import Query, Where, given
from tsstore.results import PurgeResult
from tsstore.spec import SeriesSpec
from tsstore.ticks import Tick
from tsstore.times import TimeLike, to_utc, utc_text
from tsstore.verbs.sealed import verify_span
from tsstore.verbs.marks import read_watermark, settle_writers, watermark_write
from tsstore.verbs.reading import count_of
from tsstore.verbs.request import Request, Seat, Send
from tsstore.verbs.writing import ProgressCallback
from tsstore.write.ops import Erase
from tsstore.write.prepare import PreparedDoc
from tsstore.write.sender import BulkSender
from tsstore.write.writer import Making, SendOptions

#: What each parameter of these verbs means (the API reference describes a parameter from
#: here unless the verb's docstring says more).
PARAMETER_HELP = {
    "before": "delete the ticks before this instant (exclusive); or give ``start`` and ``end``",
    "dry_run": "only count what would be deleted",
    "on_progress": "called with each deleted batch's size",
    "rollups": "declared roll-ups of this series whose watermarks bound the purge (one never run holds "
    "back every purge)",
    "past_rollups": "delete ticks the roll-ups have not rolled up yet too (their bars stay as they are)",
    "correct": "delete to correct the data: the deleted ticks' buckets are marked late, so the next roll-up "
    "recomputes them",
}


def purge(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    before: TimeLike | None = None,
    start: TimeLike | None = None,
    end: TimeLike | None = None,
    where: Where = None,
    dry_run: bool = False,
    on_progress: ProgressCallback | None = None,
    rollups: Iterable[Rollup] = (),
    past_rollups: bool = False,
    correct: bool = False,
) -> Request[PurgeResult]:
    """Delete the ticks before ``before`` (or in ``[start, end)``), optionally filtered by
    ``where``; ``dry_run=True`` only counts, ``on_progress`` is called with each batch's
    size. The bounds may come as a :class:`~tsstore.read.query.Query` (where, start, end).

    Retention tiers: a purge refuses to delete ticks that a roll-up of this series has not
    rolled up yet, that is at or after its watermark, and raises
    :class:`~tsstore.errors.RetentionError` saying how far it may go. The roll-ups are those
    whose watermark names this collection as their source, and ``rollups`` (declared ones; one
    that has never run holds back every purge). A purge also waits for the late ticks marked
    in its range to be folded in (run the roll-ups first). ``past_rollups=True`` deletes
    anyway. Either way the stored bars stay as they are: retention keeps the bars and drops
    the ticks.

    ``correct=True`` deletes to correct the data instead: the buckets of the deleted ticks
    are marked late (:mod:`tsstore.late`), so reads from roll-ups stop using those bars and
    the next roll-up run recomputes them without the ticks (removing bars left empty). It
    needs no watermark check. Where retention already deleted the ticks (before a roll-up's
    ``purged_before``) there is nothing left to correct and the bars stay as they are: a
    :class:`~tsstore.errors.RetentionWarning` says so.

    A series with a cold tier (``SeriesSpec(cold=...)``) is purged by whole sealed days only,
    each verified against its sealed file first (as :meth:`verify_cold` does), and writers
    told before that ticks there are gone (they refuse a late tick into a purged day); a day
    that differs, is marked or is not sealed, a bound inside a day, or ``where``, refuse the
    purge. The sealed files then answer every read of those days.

    Each shard chunk is read oldest first as one stream (ids and timestamps only, resumed
    after its last tick if it breaks off, at no shared snapshot), and its ticks are deleted
    with the writer's bulk batches at its bounded, ramped rate. A purge needs at least one
    time bound."""
    bounds = _purge_bounds(Query.of(query, given(where=where, start=start, end=end)), before)
    declared = _declared_rollups(rollups, seat.spec)
    plan = oldest_first(seat.spec, bounds.replace(columns=()))  # a bad bound is refused before any read
    documents = yield from source_rollups(seat)  # read once: checked, then told
    if correct:
        _warn_purged(documents, bounds)
    if not past_rollups and not correct:
        yield from _check_tiers(seat, documents, declared, bounds)
    if seat.spec.cold is not None and not correct:  # deletes verified sealed days only
        yield from _only_sealed(seat, plan, dry_run=dry_run)
    matched = yield from count_of(seat, plan_query(seat.spec, bounds), ReadStats(), tiers=False)  # Firestore's ticks
    if dry_run:
        return PurgeResult(matched=matched, deleted=0, dry_run=True)
    if not correct and plan.end is not None:  # retention: no late tick may land where ticks go
        yield from keep_bars_before(seat, documents, plan.end)
    # No shared snapshot: each chunk is one stream at its own time, resumed after its last
    # tick on an error, so a purge may outlast read_time's hour.
    stats = ReadStats()
    sweep = TickRead(plan, cursors=[sweep_cursor(chunk, plan, stats) for chunk in plan.chunks], sweep=True)

    sweeping = _Deleting(correct=correct, matched=matched)
    return (yield from ask(Send(sweeping, "purge", read=sweep, options=SendOptions(on_progress=on_progress))))


@dataclass(frozen=True)
class _Deleting(Making[PurgeResult]):
    """A purge's deletes, one per tick read; when it ``correct``s the data, each tells the
    roll-ups holding its tick (its bucket is marked late)."""

    correct: bool
    matched: int

    def docs(self, ticks: Iterator[Tick]) -> Iterator[PreparedDoc]:
        if self.correct:
            return (PreparedDoc(i, tick.id, Erase(tick.timestamp), 0) for i, tick in enumerate(ticks))
        return (PreparedDoc(i, tick.id, None, 0) for i, tick in enumerate(ticks))

    def result(self, sender: BulkSender) -> PurgeResult:
        return PurgeResult(matched=self.matched, deleted=sender.counts["deleted"], dry_run=False)


def _warn_purged(documents: Mapping[str, Fields], bounds: Query) -> None:
    """Warn that a correcting purge reaching before a roll-up's retention horizon cannot
    correct the bars there: their ticks are gone, and the bars stay as retention kept them."""
    try:
        start = None if bounds.start is None else to_utc(bounds.start, name="start")
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    gone = {name: data[PURGED] for name, data in documents.items() if isinstance(data.get(PURGED), dt.datetime)}
    reached = {name: at for name, at in gone.items() if start is None or start < at}
    if reached:
        names = ", ".join(f"{name!r} (before {utc_text(at)})" for name, at in sorted(reached.items()))
        warnings.warn(
            f"a correcting purge reaches where retention already deleted the ticks of roll-up(s) {names}: "
            "nothing is left there to delete, and those bars stay as they are; they cannot be corrected",
            RetentionWarning,
            stacklevel=3,
        )


def _purge_bounds(bounds: Query, before: object) -> Query:
    """A purge's range: ``before`` (everything older) or ``start``/``end``, never unbounded."""
    bounds.only(("where", "start", "end"), "purge")
    if before is not None:
        if bounds.end is not None or bounds.start is not None:
            raise QueryError("give either before (everything older) or start/end (a range), not both")
        bounds = bounds.replace(end=before)
    if bounds.start is None and bounds.end is None:
        raise QueryError("purge needs a time bound: before=, or start=/end=; refusing to delete everything")
    return bounds


def _declared_rollups(rollups: Iterable[Rollup], spec: SeriesSpec) -> tuple[Rollup, ...]:
    """The roll-ups a purge is told of: declarations of this series."""
    declared = (rollups,) if isinstance(rollups, (str, Rollup)) else tuple(rollups)
    for rollup in declared:
        if not isinstance(rollup, Rollup):
            raise QueryError(f"purge: rollups takes Rollup declarations, got {type(rollup).__name__} {rollup!r}")
        rollup.check_source(spec)
    return declared


def _check_tiers(
    seat: Seat, documents: dict[str, Fields], declared: tuple[Rollup, ...], bounds: Query
) -> Request[None]:
    """Refuse a purge past a roll-up's watermark, or over late ticks not yet folded in."""
    marks = rollup_watermarks(documents, declared)
    try:
        upto = None if bounds.end is None else to_utc(bounds.end, name="end")
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    check_retention(marks, upto)
    found = yield from asked_together([marks_ask(name, before=upto, read_time=None) for name in marks])
    check_marks({name: len(answer) for name, answer in zip(marks, found)})


def source_rollups(seat: Seat) -> Request[dict[str, Fields]]:
    """The watermark documents (by roll-up) that name this collection as their source (the
    cold tier's, which holds no bars, left out)."""
    source = seat.spec.collection
    what = f"the watermarks of the roll-ups of {source!r}"
    found = yield from ask(FindDocs(WATERMARKS, what, where=(("source", "==", source),)))
    return {doc.id: doc.data or {} for doc in found if (doc.data or {}).get(COLD_TIER) is not True}


def rollup_watermarks(
    documents: Mapping[str, Fields], declared: Sequence[Rollup] = ()
) -> dict[str, dt.datetime | None]:
    """The watermark of each roll-up of this series (``None``: declared, never run): those
    whose watermark ``documents`` name this collection as their source, and ``declared``."""
    marks: dict[str, dt.datetime | None] = {rollup.name: None for rollup in declared}
    for name, data in documents.items():
        mark = data.get("watermark")
        marks[name] = mark if isinstance(mark, dt.datetime) else None
    return marks


def keep_bars_before(seat: Seat, documents: Mapping[str, Fields], end: dt.datetime) -> Request[None]:
    """Before retention deletes ticks before ``end``: tell every roll-up of this series (in
    ``documents``, its watermark document's ``purged_before``) and wait for the writers to see
    it, so none folds a late tick into a bucket whose other ticks are going (its bar could not
    be recomputed)."""
    source = seat.spec.collection
    behind = [name for name, data in documents.items() if not _at_or_after(data.get(PURGED), end)]
    if not behind:
        return
    said = yield from asked_together(
        [watermark_write(name, {PURGED: end}, what=f"the retention horizon of roll-up {name!r}") for name in behind]
    )
    announced = max(said)
    yield from settle_writers(seat, source, announced=announced, refresh=seat.spec.late.refresh.total_seconds())


def _at_or_after(value: object, end: dt.datetime) -> bool:
    return isinstance(value, dt.datetime) and value >= end


def check_marks(late: Mapping[str, int]) -> None:
    """Refuse a purge over buckets that late ticks changed and a roll-up has not folded in."""
    behind = {name: n for name, n in late.items() if n}
    if behind:
        names = ", ".join(f"{name!r} ({n} late bucket{'' if n == 1 else 's'})" for name, n in behind.items())
        raise RetentionError(
            f"the purge range holds buckets that late ticks changed and roll-up(s) {names} have not folded in yet: "
            "run the roll-up first (tsstore rollup), or pass past_rollups=True to "
            "delete the ticks anyway",
            limit=None,
            rollups=list(behind),
        )


def check_retention(marks: Mapping[str, dt.datetime | None], end: dt.datetime | None) -> None:
    """Refuse a purge up to ``end`` (``None``: no end) that reaches past a roll-up's watermark."""
    behind = {name: mark for name, mark in marks.items() if end is None or mark is None or mark < end}
    if not behind:
        return
    known = [mark for mark in marks.values() if mark is not None]
    limit = None if len(known) < len(marks) else min(known)
    names = ", ".join(
        f"{name!r} ({'never run' if mark is None else 'watermark ' + mark.isoformat()})"
        for name, mark in behind.items()
    )
    upto = "every tick from the start on" if end is None else f"ticks up to {end.isoformat()}"
    may = "nothing may be purged until it has run" if limit is None else f"purge before {limit.isoformat()} at most"
    raise RetentionError(
        f"the purge would delete {upto}, which roll-up(s) {names} have not rolled up yet: {may}, run the roll-up "
        "first, or pass past_rollups=True to delete them anyway",
        limit=limit,
        rollups=list(behind),
    )


def _only_sealed(seat: Seat, plan: QueryPlan, *, dry_run: bool) -> Request[None]:
    """Before a purge of a series with a cold tier deletes: refuse unless its range is whole
    sealed partitions, each verified now (its ticks' count and ids equal to its sealed file's,
    unmarked). Unless a dry run, writers are told first that ticks before its end are gone
    (the cold tier's ``purged_before``: they refuse a late tick there, which only Firestore
    would hold) and waited for, so no tick lands there between the check and the deletes; a
    purge refused puts the previous ``purged_before`` back."""
    spec, tier = seat.spec, seat.spec.cold
    assert tier is not None
    collection = spec.collection
    end = _whole_partitions(collection, tier, plan)
    name = horizon_name(collection)
    held = (yield from read_watermark(seat, name)) or {}
    before = held.get(PURGED)
    told = not dry_run and not _at_or_after(before, end)
    if told:
        what = f"the purge horizon of {collection!r}'s cold tier"
        said = yield from ask(watermark_write(name, {**horizon_fields(collection, tier), PURGED: end}, what=what))
        yield from settle_writers(seat, collection, announced=said, refresh=spec.late.refresh.total_seconds())
    since = before if isinstance(before, dt.datetime) and (plan.start is None or plan.start < before) else plan.start
    checked = yield from verify_span(seat, since, end, ReadStats())  # not what an earlier purge deleted
    through = Manifest.of(collection, (yield from ask(manifest_ask(collection)))).through
    problems = [f"{label} differs from its sealed file" for label in checked.differ]
    problems += [f"{label} was changed by a late tick since it was sealed (the next seal seals it again)"
                 for label in checked.marked]  # fmt: skip
    if through is None or through < end:
        sealed = "nothing is sealed" if through is None else f"the sealed history ends at {utc_text(through)}"
        problems.append(f"{sealed}, before the purge's end {utc_text(end)} (seal first: tsstore seal)")
    if not problems:
        return
    if told:  # the ticks stay: writers may land late ticks there again
        yield from ask(watermark_write(name, {PURGED: before}, what=f"the purge horizon of {collection!r}'s cold tier"))
    raise RetentionError(
        f"a purge of {collection!r}, which has a cold tier, deletes the ticks of sealed days verified against their "
        f"files only: {'; '.join(problems)}",
        limit=through,
        rollups=(),
    )


def _whole_partitions(collection: str, tier: ColdTier, plan: QueryPlan) -> dt.datetime:
    """The end of a purge of a series with a cold tier, after refusing a range that is not
    whole partitions by time (a ``where=``, no end, a bound inside a partition)."""
    if plan.filters or plan.ranges:
        raise QueryError(
            f"a purge of {collection!r}, which has a cold tier, deletes whole sealed days; where= is not allowed "
            f"there ({', '.join(f.describe() for f in (*plan.filters, *plan.ranges))}): purge by time only"
        )
    if plan.end is None:
        raise QueryError(f"a purge of {collection!r}, which has a cold tier, deletes sealed days only: give before= "
                         "or end= (a start alone reaches days not sealed)")  # fmt: skip
    for name, at in (("start", plan.start), ("end", plan.end)):
        if at is not None and tier.start_of(at) != at:
            raise QueryError(
                f"purge {name} {utc_text(at)} falls inside a partition of {collection!r}'s cold tier, which a purge "
                f"deletes whole; give a partition's start, such as {utc_text(tier.start_of(at))}"
            )
    return plan.end