"""Reads across the seam, as requests: a read of a series with a cold tier takes its sealed
partitions from Parquet and the rest from Firestore, all at one read time, so it answers as
Firestore alone would.

At the read's snapshot the manifest (which objects hold which sealed partitions) and the
cold tier's late-tick marks are read together (two billed reads, one round trip); the range
is cut into stretches (:func:`~tsstore.cold.seam.stretches`), and each stretch read from its
tier in the plan's order: one :class:`~tsstore.read.engine.TickRead` per Firestore stretch
(its plan the query's, narrowed to the stretch), one :class:`~tsstore.read.cold.ColdRead`
per run of sealed partitions. A range that starts in the partition of today (by the
server's time as the clock knows it) cannot meet a sealed partition and is read as before.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Sequence
from typing import TypeVar

from tsstore.analytics.aggregate import Number
from tsstore.asks import Asking, GetDoc, KnownTime, ask, asked_with
from tsstore.cold.manifest import Manifest, manifest_path
from tsstore.cold.seam import Stretch, stretches
from tsstore.cold.tier import horizon_name
from tsstore.late import marks_ask, marks_of
from tsstore.cold.objects import GetObject
from tsstore.read.chunks import ChunkTicks
from tsstore.read.cold import ColdRead, TieredRead, cold_aggregates, count_rows, present
from tsstore.read.cost import ReadStats
from tsstore.read.engine import PageRounds, TickRead, chunk_cursors
from tsstore.read.plan import QueryPlan
from tsstore.ticks import Position, Tick
from tsstore.verbs.request import Aggregate, Collect, Count, Request, Seat, billed, billed_aggregates

T = TypeVar("T")


def seam_of(seat: Seat, plan: QueryPlan, snapshot: dt.datetime, stats: ReadStats) -> Request[list[Stretch] | None]:
    """The stretches of ``plan``'s range at ``snapshot``, oldest first; ``None`` when every
    tick of it is read from Firestore (no cold tier, nothing sealed in it, or a range after
    anything that can be sealed)."""
    tier = plan.spec.cold  # the plan's series: a covered read also reads a roll-up's bars
    if tier is None:
        return None
    if plan.start is not None:
        now = yield from ask(KnownTime())
        if now is not None and plan.start >= tier.start_of(now):  # a sealed partition has ended by now
            return None
    collection = plan.spec.collection
    since = None if plan.start is None else tier.start_of(plan.start)
    [doc], [found] = yield from asked_with(
        [GetDoc(manifest_path(collection), f"reading the cold tier manifest of {collection!r}", read_time=snapshot)],
        [marks_ask(horizon_name(collection), since=since, before=plan.end, read_time=snapshot)],
    )
    stats.query_done(1)
    stats.query_done(len(found))
    stats.waited()
    cut = stretches(Manifest.of(collection, doc), {mark.bucket for mark in marks_of(found)},
                    start=plan.start, end=plan.end, partition=tier.partition)  # fmt: skip
    return None if len(cut) == 1 and not cut[0].cold and (cut[0].start, cut[0].end) == (plan.start, plan.end) else cut


def within(plan: QueryPlan, stretch: Stretch) -> QueryPlan:
    """``plan`` with its range narrowed to ``stretch``'s."""
    return dataclasses.replace(plan, start=stretch.start, end=stretch.end)


def in_order(plan: QueryPlan, cut: list[Stretch], after: Position | None) -> list[Stretch]:
    """The stretches in ``plan``'s order, without those wholly before position ``after``."""
    ordered = cut[::-1] if plan.descending else cut
    if after is None:
        return ordered
    at: dt.datetime = after[0]
    if plan.descending:
        return [s for s in ordered if s.start is None or s.start <= at]
    return [s for s in ordered if s.end is None or s.end > at]


def tiered_read(
    seat: Seat,
    plan: QueryPlan,
    cut: list[Stretch],
    *,
    after: Position | None,
    snapshot: dt.datetime,
    stats: ReadStats,
) -> TieredRead:
    """The read of ``plan`` over the stretches ``cut``, every Firestore stretch at
    ``snapshot``; a ``limit`` up to the store's page size reads each Firestore stretch as
    one lean page."""
    parts: list[TickRead | ColdRead] = []
    for stretch in in_order(plan, cut, after):
        part = within(plan, stretch)
        if stretch.entries is not None:
            parts.append(ColdRead(part, tuple(e.object for e in stretch.entries), after, plan.limit, stats))
        elif plan.limit is not None and plan.limit <= seat.page_size:
            rounds = PageRounds(part, rows=plan.limit, after=after, read_time=snapshot, stats=stats, lean=seat.lean)
            parts.append(TickRead(part, rounds=rounds))
        else:
            parts.append(TickRead(part, cursors=chunk_cursors(part, after, snapshot, stats), read_time=snapshot))
    return TieredRead(plan, tuple(parts), plan.limit)


def tiered_page(
    seat: Seat,
    plan: QueryPlan,
    cut: list[Stretch],
    *,
    after: Position | None,
    rows: int,
    snapshot: dt.datetime,
    stats: ReadStats,
) -> Request[list[Tick]]:
    """Up to ``rows`` ticks of ``plan`` after ``after`` over the stretches ``cut``, each
    stretch asked for what the ones before it left to fill (a Firestore stretch as a lean
    page at ``snapshot``): no stretch is read once the page is full."""
    ticks: list[Tick] = []
    for stretch in in_order(plan, cut, after):
        part, need = within(plan, stretch), rows - len(ticks)
        if stretch.entries is not None:
            read: TickRead | ColdRead = ColdRead(part, tuple(e.object for e in stretch.entries), after, need, stats)
        else:
            read = TickRead(part, rounds=PageRounds(part, rows=need, after=after, read_time=snapshot, stats=stats,
                                                    lean=seat.lean))  # fmt: skip
        ticks += yield from ask(Collect(read))
        if len(ticks) >= rows:
            break
    return ticks


def tiered_count(
    seat: Seat, plan: QueryPlan, cut: list[Stretch], *, snapshot: dt.datetime, stats: ReadStats
) -> Request[int]:
    """How many ticks of ``plan`` the stretches ``cut`` hold: a ``count()`` per chunk of each
    Firestore stretch at ``snapshot`` and the matching rows of each sealed object, all asked
    together."""
    def counts(part: QueryPlan) -> list[Count]:
        return [Count(ChunkTicks(part, chunk), snapshot) for chunk in part.chunks]

    total = 0
    for answer in (yield from _asked_together(plan, cut, counts, stats)):
        total += count_rows(answer.plan, answer.data, stats) if isinstance(answer, _Sealed) else billed([answer], stats)[0]
    return total


#: What an aggregation asks of each chunk: the measure its query is also ordered by (or
#: ``None``) and its ``(kind, alias, field)`` aggregations.
Requests = Sequence[tuple[str | None, Sequence[tuple[str, str, str | None]]]]


def tiered_aggregates(
    seat: Seat, plan: QueryPlan, cut: list[Stretch], requests: Requests, *, snapshot: dt.datetime, stats: ReadStats
) -> Request[list[dict[str, Number | None]]]:
    """The answers of ``requests`` over the stretches ``cut``: from Firestore, one aggregation
    query per request and chunk of each Firestore stretch at ``snapshot`` (each billed by
    what it counted); from each sealed object, the same answers computed from its rows."""
    def aggregations(part: QueryPlan) -> list[Aggregate]:
        return [Aggregate(ChunkTicks(part, chunk, m), tuple(wanted), snapshot)
                for chunk in part.chunks for m, wanted in requests]  # fmt: skip

    out: list[dict[str, Number | None]] = []
    for answer in (yield from _asked_together(plan, cut, aggregations, stats)):
        if isinstance(answer, _Sealed):
            out += cold_aggregates(answer.plan, answer.data, requests, stats)
        else:
            out += billed_aggregates([answer], stats)
    return out


@dataclasses.dataclass(frozen=True)
class _Sealed:
    """A sealed object's bytes (``data``) and the plan narrowed to its stretch."""

    plan: QueryPlan
    data: bytes


def _asked_together(
    plan: QueryPlan, cut: list[Stretch], firestore: Callable[[QueryPlan], Sequence[Asking[T]]], stats: ReadStats
) -> Request[list[T | _Sealed]]:
    """What ``firestore`` asks of each Firestore stretch of ``cut`` (its plan ``plan``
    narrowed to the stretch) and the bytes of each sealed object, all asked together: the
    answers in the stretches' order, Firestore's as they are, each object's as :class:`_Sealed`."""
    hot: list[Asking[T]] = []
    gets: list[GetObject] = []
    order: list[QueryPlan | None] = []  # per answer: None for Firestore's, else the plan of the object's stretch
    for stretch in cut:
        part = within(plan, stretch)
        if stretch.entries is None:
            made = firestore(part)
            hot += made
            order += [None] * len(made)
        else:
            gets += [GetObject(e.object, f"reading {e.object} from the cold tier") for e in stretch.entries]
            order += [part] * len(stretch.entries)
    answers, objects = yield from asked_with(hot, gets)
    stats.waited()
    hot_answers, cold_answers = iter(answers), iter(zip(gets, objects))
    out: list[T | _Sealed] = []
    for part_of in order:
        if part_of is None:
            out.append(next(hot_answers))
        else:
            get, data = next(cold_answers)
            out.append(_Sealed(part_of, present(get.name, data)))
    return out
