"""Aggregates as requests: count, sum and average computed by Firestore per shard chunk at one
snapshot, or answered from stored roll-ups where they cover the range (the arithmetic is
:mod:`tsstore.analytics.aggregate`'s and :mod:`tsstore.analytics.covered`'s)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Unpack

from tsstore.analytics import PARAMETER_HELP as PARAMETER_HELP  # the analytics verbs' words, one glossary
from tsstore.analytics.aggregate import Aggregates, AggregateSelection, field_names
from tsstore.analytics.bars import STORED_MOMENTS
from tsstore.analytics.covered import CoveredPlan, CoveredSelection, Total
from tsstore.analytics.covered import Part as CoveredPart
from tsstore.analytics.rollup import BAR_FIELDS, Rollup
from tsstore.asks import Doc, FindDocs, ask, asked_together
from tsstore.errors import QueryError
from tsstore.late import PURGED, marks_ask, marks_of
from tsstore.read.chunks import ChunkTicks
from tsstore.read.cost import ReadStats
from tsstore.read.plan import QueryPlan, oldest_first
from tsstore.read.query import Query, RangeOptions
from tsstore.ticks import Tick
from tsstore.verbs.marks import watermark_ask
from tsstore.verbs.reading import COUNT_OPTIONS, read_tiers, snapshot_now, snapshot_of
from tsstore.verbs.seam import seam_of, tiered_aggregates
from tsstore.verbs.request import Aggregate, Feed, Request, Seat, billed_aggregates


def aggregate(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    count: bool = True,
    sum: Iterable[str] = (),
    avg: Iterable[str] = (),
    min: Iterable[str] = (),
    max: Iterable[str] = (),
    std: Iterable[str] = (),
    rollups: Iterable[Rollup] | None = None,
    stats: ReadStats | None = None,
    **options: Unpack[RangeOptions],
) -> Request[Aggregates]:
    """The count of the ticks that match (``where``, ``start``, ``end``, ``read_time``),
    and the sum and average of numeric fields over them, computed by Firestore:
    ``store.aggregate(where={"symbol": "AAA"}, sum=["volume"], avg=["price.micros"])``.
    ``sum`` and ``avg`` take the spec's measures. Per chunk, one ``count()`` request and one
    request per measure (its count, ``sum()`` and ``avg()``), all concurrent at one
    snapshot, combined exactly (see :mod:`tsstore.analytics.aggregate`); each billed one read
    per 1 000 ticks it scans.

    With ``rollups`` (roll-ups of this series, e.g. ``[BARS_1H, BARS_1MIN]``), the range is
    answered from their stored bars where they cover it and from the ticks only at the edges
    and past their watermarks (``explain_aggregate`` says which part comes from where, and
    so does the result's ``sources``); the ``min``, ``max`` and ``std`` of the price come
    from there too, which Firestore cannot aggregate. ``count`` then counts the ticks with a
    price, as the bars do; see :mod:`tsstore.analytics.covered`."""
    bounds = Query.of(query, options)
    bounds.only(COUNT_OPTIONS, "aggregate")
    cost = stats if stats is not None else ReadStats()
    if rollups is not None:
        asked = {"sum": sum, "avg": avg, "min": min, "max": max, "std": std}
        selection, plan = covered_selection(seat, bounds, rollups, count=count, asked=asked)
        return (yield from covered_aggregate(seat, selection, plan, cost))
    kinds = (("min", min), ("max", max), ("std", std))
    spread = [f"{kind}={list(fields)!r}" for kind, fields in kinds if tuple(fields)]
    if spread:
        raise QueryError(
            f"aggregate: {', '.join(spread)} come from stored roll-ups (Firestore aggregates only count, sum and avg): "
            "give rollups=[...] of this series"
        )
    plan = oldest_first(seat.spec, bounds)  # the direction the measures' indexes are declared in
    checked = AggregateSelection.checked(seat.spec, count=count, sum=sum, avg=avg)

    overs = [(ChunkTicks(plan, chunk, m), tuple(asks)) for chunk in plan.chunks for m, asks in checked.requests()]
    cost.chunks = len(plan.chunks)
    snapshot = yield from snapshot_of(seat, plan, cost, parts=len(overs) + bool(seat.spec.cold))  # and the manifest
    cut = None if snapshot is None else (yield from seam_of(seat, plan, snapshot, cost))
    if cut is not None and snapshot is not None:  # sealed partitions aggregated from their objects
        requests = checked.requests()
        return checked.combine((yield from tiered_aggregates(seat, plan, cut, requests, snapshot=snapshot, stats=cost)))
    cost.waited()
    answers = yield from asked_together([Aggregate(over, asks, snapshot) for over, asks in overs])
    return checked.combine(billed_aggregates(answers, cost))


def explain_aggregate(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    rollups: Iterable[Rollup],
    stats: ReadStats | None = None,
    **options: Unpack[RangeOptions],
) -> Request[CoveredPlan]:
    """Which part of the range ``aggregate(..., rollups=...)`` would answer from which
    roll-up's bars, and which from the ticks (``print(store.explain_aggregate(...).describe())``):
    reads the roll-ups' watermark documents (a read each), nothing else."""
    bounds = Query.of(query, options)
    bounds.only(COUNT_OPTIONS, "explain_aggregate")
    selection, plan = covered_selection(seat, bounds, rollups, count=True, asked={})
    cost = stats if stats is not None else ReadStats()
    parts = yield from covered_parts(seat, selection, plan, bounds.read_time, cost)
    return CoveredPlan(seat.spec.collection, tuple(parts))


def covered_selection(
    seat: Seat, bounds: Query, rollups: Iterable[Rollup], *, count: bool, asked: Mapping[str, Iterable[str]]
) -> tuple[CoveredSelection, QueryPlan]:
    """The aggregate from roll-ups, checked, and the plan of its range on the ticks."""
    if isinstance(rollups, Rollup):
        rollups = [rollups]
    elif isinstance(rollups, (str, bytes)) or not isinstance(rollups, Iterable):
        raise QueryError(
            f"rollups={rollups!r} is not allowed; give the Rollup declarations of this series (e.g. [BARS_1H])"
        )
    fields = {kind: field_names(names, kind) for kind, names in asked.items()}
    plan = oldest_first(seat.spec, bounds)
    return CoveredSelection.checked(seat.spec, rollups, plan.filters, count=count, asked=fields), plan


def covered_parts(
    seat: Seat, selection: CoveredSelection, plan: QueryPlan, snapshot: dt.datetime | None, cost: ReadStats
) -> Request[list[CoveredPart]]:
    """The parts of ``plan``'s range, from the roll-ups' watermark documents and the marks of
    late ticks in the range, at ``snapshot``."""
    stored = yield from asked_together([watermark_ask(rollup.name, read_time=snapshot) for rollup in selection.rollups])
    for _ in stored:
        cost.query_done(1)
    documents = [doc.data for doc in stored]
    spans = [r.coverage(doc) for r, doc in zip(selection.rollups, documents)]
    gone = [d.get(PURGED) for r, d in zip(selection.rollups, documents) if d and r.finer is None]
    purged = max((g for g in gone if isinstance(g, dt.datetime)), default=None)
    layers = selection.layers
    found = yield from asked_together(layer_marks(layers, plan, snapshot))
    return selection.parts_of(plan.start, plan.end, spans, marked(layers, found, cost), purged)


def layer_marks(layers: Sequence[Rollup], plan: QueryPlan, snapshot: dt.datetime | None) -> list[FindDocs]:
    """The asks for the marks of each of ``layers`` whose bars overlap ``plan``'s range, at
    ``snapshot``; :func:`marked` reads their answers."""
    return [
        marks_ask(layer.name, since=plan.start and plan.start - layer.interval, before=plan.end, read_time=snapshot)
        for layer in layers
    ]


def marked(layers: Sequence[Rollup], found: Sequence[Sequence[Doc]], cost: ReadStats) -> dict[str, list[dt.datetime]]:
    """The marked buckets of each of ``layers`` (by name), from the answers of
    :func:`layer_marks`, each mark counted as a read."""
    marks = {}
    for layer, answer in zip(layers, found):
        buckets = marks_of(answer)
        cost.query_done(len(buckets))
        marks[layer.name] = [mark.bucket for mark in buckets]
    return marks


def covered_aggregate(seat: Seat, selection: CoveredSelection, plan: QueryPlan, cost: ReadStats) -> Request[Aggregates]:
    """Each part read (bars or ticks) at one snapshot and folded into one bar."""
    bounds = plan.query
    snapshot = bounds.read_time
    if snapshot is None:
        snapshot = yield from snapshot_now(seat, cost)  # the watermarks and every part at one time
    parts = yield from covered_parts(seat, selection, plan, snapshot, cost)
    total = Total()
    for part in parts:
        if part.rollup is None:
            spec, columns = seat.spec, selection.columns
        else:
            spec, columns = part.rollup.spec, (*BAR_FIELDS, *STORED_MOMENTS)
        piece = Query(where=bounds.where, start=part.start, end=part.end, columns=columns, read_time=snapshot)
        read = yield from read_tiers(seat, oldest_first(spec, piece), cost)
        yield from ask(Feed(read, _Folded(total, selection, part)))
    return selection.result(total.bar, parts)


@dataclass(frozen=True)
class _Folded:
    """A :class:`~tsstore.verbs.request.Feed`'s sink: each tick (or stored bar) of one
    ``part`` of a covered aggregate, folded into the ``total``."""

    total: Total
    selection: CoveredSelection
    part: CoveredPart

    def add(self, tick: Tick) -> None:
        self.total.add(self.selection.bar_of(tick, self.part))
