"""Bars as requests: OHLCV bars built while ticks stream (or combined from a roll-up's stored
bars), and several series side by side (the arithmetic is :mod:`tsstore.analytics.bars`'s
and :mod:`tsstore.analytics.buckets`'s)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Unpack

import pandas as pd

from tsstore.analytics import PARAMETER_HELP as PARAMETER_HELP  # the analytics verbs' words, one glossary
from tsstore.analytics.bars import (
    STORED_MOMENTS,
    Bar,
    BarBuilder,
    bars_frame,
    check_combinable,
    side_by_side,
    stored_bar,
    tick_bar,
    untiled,
)
from tsstore.analytics.buckets import buckets, check_fill
from tsstore.analytics.covered import CoveredPlan, Part, combined, late_spans
from tsstore.analytics.rollup import BAR_FIELDS, Rollup, bar_length, combined_end
from tsstore.asks import Fields, ask, asked_with
from tsstore.errors import QueryError, SpecError
from tsstore.read.cost import ReadStats
from tsstore.read.plan import QueryPlan, oldest_first, time_range
from tsstore.read.query import Query, RangeOptions
from tsstore.spec import check_field_path
from tsstore.ticks import Tick
from tsstore.times import DurationLike, TimeLike, ZoneLike
from tsstore.verbs.aggregates import layer_marks, marked
from tsstore.verbs.marks import late_in, read_watermark, watermark_ask
from tsstore.verbs.reading import COUNT_OPTIONS, read_tiers, snapshot_now
from tsstore.verbs.request import Feed, Request, Seat


@dataclass(frozen=True)
class FedBars:
    """A :class:`~tsstore.verbs.request.Feed`'s sink: the bars ``builder`` closes as the
    ticks stream in, in order."""

    builder: BarBuilder
    bars: list[Bar] = field(default_factory=list)

    def add(self, tick: Tick) -> None:
        self.bars.extend(self.builder.add(tick))

    def finished(self) -> list[Bar]:
        """Every bar: those closed as ticks came, then those still open at the end."""
        self.bars.extend(self.builder.rest())
        return self.bars

def bars(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    interval: DurationLike,
    price: str | None = None,
    by: str | Sequence[str] | None = None,
    volume: str | None = None,
    tz: ZoneLike | None = None,
    origin: TimeLike | None = None,
    fill: str | None = None,
    moments: bool = False,
    combine: bool = False,
    stats: ReadStats | None = None,
    **options: Unpack[RangeOptions],
) -> Request[pd.DataFrame]:
    """OHLCV bars of the matching ticks (``where``, ``start``, ``end``, ``read_time``):
    ``store.bars(interval="1min", by="symbol", price="price.micros", volume="volume",
    start=..., end=...)`` is a DataFrame indexed by the ``by`` fields and the bar start, with
    ``open``, ``high``, ``low``, ``close``, ``count`` and ``volume``. Bars cover the ticks in
    ``[start, end)``.

    Buckets are multiples of ``interval`` from ``origin`` (default: midnight of 1970-01-01 in
    ``tz``, which in UTC is the Unix epoch; a time of day such as ``"09:30"`` puts the edges at
    that local time in ``tz`` on every day, daylight saving included, for an interval that
    divides 24 h), or
    calendar days, weeks and months (``"1D"``, ``"1W"``, ``"1M"``) in the zone ``tz``
    (``"America/New_York"``; the index is then in that zone); see
    :mod:`tsstore.analytics.buckets`. Buckets without ticks have no row, unless ``fill`` is
    ``"prev"`` (the previous close carried, count and volume 0) or ``"nan"`` (no prices),
    between each series' first and last bar. ``moments=True`` adds the price's ``sum``,
    ``mean`` and ``std`` and the times of the open and close ticks.

    ``combine=True`` reads a roll-up's bars instead of ticks (a store on ``rollup.spec``) and
    combines them into these longer ones, exactly as if from the ticks, at one read per
    stored bar; ``price`` and ``volume`` are then the bars' own. It refuses buckets that
    whole stored bars do not fill (an edge inside a stored bar) and a ``start`` or ``end``
    inside a stored bar, naming the bar. The bars end at ``end`` or, without one, at the
    roll-up's watermark; an ``end`` after the watermark is refused (those bars are not
    stored yet). A bucket late ticks marked (changed after its bar was stored, not rolled up
    again yet) is answered from a finer roll-up's bars or the ticks, as
    ``aggregate(rollups=...)`` answers it; :meth:`explain_bars` says which part comes from where.

    Computed while the ticks stream (projected to the fields the bars need), so memory holds
    one bucket's bars, not the ticks; billed one read per tick read (see
    :mod:`tsstore.analytics.bars`)."""
    bounds = Query.of(query, options)
    bounds.only(COUNT_OPTIONS, "bars")
    if combine:
        volume = "volume"
    elif price is None:
        raise QueryError(
            "bars needs price=, the price field (e.g. 'price.micros'), or combine=True on a roll-up's bars"
        )
    stored = None  # the length of the stored bars combined
    if combine:  # a roll-up's bars: their length and their end are in its record
        record, stored, bounds = yield from combined_bounds(seat, bounds)
    plan, builder, fields = bars_plan(
        seat, bounds, interval=interval, by=by, price=price or "close", volume=volume, tz=tz, origin=origin,
        fill=fill, combine=stored,
    )  # fmt: skip
    fed = FedBars(builder)
    cost = stats if stats is not None else ReadStats()
    parts = None  # the stored bars alone answer the range
    if stored is not None:  # whole stored bars only; late buckets from finer bars or the ticks
        check_combinable(stored, builder.buckets, start=plan.start, end=plan.end)
        parts = yield from combined_parts(seat, plan, record, cost)
    if parts is None:
        yield from ask(Feed((yield from read_tiers(seat, plan, cost)), fed))
    else:
        yield from read_parts(seat, plan, parts, fed, fields, cost)
    done = fed.finished()
    absent(done, builder.skipped, fields, price=None if combine else price)
    zone = builder.buckets.zone
    return bars_frame(
        done, by=fields, timestamp_field=seat.spec.timestamp_field, volume=volume, zone=zone, moments=moments
    )


def explain_bars(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    interval: DurationLike,
    tz: ZoneLike | None = None,
    origin: TimeLike | None = None,
    stats: ReadStats | None = None,
    **options: Unpack[RangeOptions],
) -> Request[CoveredPlan]:
    """Which part of the range ``bars(combine=True, ...)`` on this roll-up's store would take
    from its stored bars, and which (the buckets late ticks marked, not rolled up again yet)
    from a finer roll-up's bars or the ticks (``print(store.explain_bars(interval="1h",
    start=..., end=...).describe())``): reads the roll-ups' records and marks, no bar. Refused
    where the bars would be (an edge inside a stored bar, an end past the watermark)."""
    bounds = Query.of(query, options)
    bounds.only(COUNT_OPTIONS, "explain_bars")
    rollup = seat.spec.rollup
    if not isinstance(rollup, Rollup):
        raise QueryError(
            f"explain_bars says where bars combined from a roll-up's bars come from; {seat.spec.collection!r} is not "
            "a roll-up's collection here: open the store on the roll-up's spec (Rollup.spec)"
        )
    record, stored, bounds = yield from combined_bounds(seat, bounds)
    plan, builder, _ = bars_plan(seat, bounds, interval=interval, by=None, price="close", volume="volume", tz=tz,
                                 origin=origin, combine=stored)  # fmt: skip
    check_combinable(stored, builder.buckets, start=plan.start, end=plan.end)
    parts = yield from combined_parts(seat, plan, record, stats if stats is not None else ReadStats())
    whole = combined(plan.start, plan.end, rollup, (), ())
    return CoveredPlan(seat.spec.collection, tuple(whole if parts is None else parts))


def combined_bounds(seat: Seat, bounds: Query) -> Request[tuple[Fields | None, dt.timedelta, Query]]:
    """For bars combined from the store's roll-up bars: its record (the watermark document),
    the length of its bars, and ``bounds`` ending at ``end`` or else at its watermark (an end
    past the watermark refused)."""
    record = yield from read_watermark(seat, seat.spec.collection)
    rollup = seat.spec.rollup
    stored = bar_length(seat.spec.collection, record, rollup=rollup if isinstance(rollup, Rollup) else None)
    end = combined_end(seat.spec.collection, record, *time_range(bounds.start, bounds.end))
    return record, stored, bounds.replace(end=end)


def combined_parts(
    seat: Seat, plan: QueryPlan, record: Fields | None, cost: ReadStats
) -> Request[list[Part] | None]:
    """Where bars combined from the store's roll-up bars take each part of ``plan``'s range:
    its stored bars, but where late ticks marked them (in it or in a roll-up it is made of),
    which the finer roll-ups' bars or the ticks answer, as :func:`aggregate(rollups=...)
    <tsstore.verbs.aggregates.aggregate>` does; ``None`` when its stored bars answer the whole
    range (no mark in it). The marks of every layer and the finer layers' records are asked in
    one round trip."""
    rollup = seat.spec.rollup
    if not isinstance(rollup, Rollup):  # a spec built by hand: its layers and ticks are not known
        late = yield from late_in(seat, seat.spec.collection, start=plan.start, end=plan.end, record=record)
        if late:
            raise QueryError(
                f"{len(late)} bucket(s) of {seat.spec.collection!r} in this range hold late ticks not rolled up yet "
                f"(first: {late[0].bucket.isoformat()}), and this store's spec is not a roll-up's own (Rollup.spec), "
                "so it cannot read them from the finer bars or the ticks: open the store on the roll-up's spec, run "
                "the roll-up first (tsstore rollup), or make the bars from the ticks (bars(price=...) on the "
                "source's store)"
            )
        return None
    rollup.check_watermark(record)
    layers = [rollup]
    while layers[-1].finer is not None:
        layers.append(layers[-1].finer)
    finer = layers[1:]
    found, records = yield from asked_with(layer_marks(layers, plan, None), [watermark_ask(r.name) for r in finer])
    marks = marked(layers, found, cost)
    if not any(marks.values()):
        return None
    spans = [r.coverage(doc.data) for r, doc in zip(finer, records)]
    sources = [(r, span, late_spans(r, marks)) for r, span in zip(finer, spans)]
    return combined(plan.start, plan.end, rollup, late_spans(rollup, marks), sources)


def read_parts(
    seat: Seat, plan: QueryPlan, parts: Sequence[Part], fed: FedBars, fields: Sequence[str], cost: ReadStats
) -> Request[None]:
    """Each part of combined bars read at one snapshot, in the plan's time order, into ``fed``:
    the store's stored bars as they stream; a late part's finer bars or ticks (a few buckets)
    collected, then given to the builder in order."""
    bounds = plan.query
    snapshot = bounds.read_time
    if snapshot is None:
        snapshot = yield from snapshot_now(seat, cost)
    by = [name.split(".") for name in fields]
    top: Rollup = seat.spec.rollup
    for part in reversed(parts) if plan.descending else parts:
        piece = bounds.replace(start=part.start, end=part.end, read_time=snapshot)
        layer = part.rollup
        if layer is top:
            yield from ask(Feed((yield from read_tiers(seat, oldest_first(seat.spec, piece), cost)), fed))
            continue
        if layer is None:  # the ticks, made bars of one tick by the roll-up of ticks' price and volume
            root = top.root
            spec, columns = top.series, (*fields, root.price, *(() if root.volume is None else (root.volume,)))
            late = LateBars(by, root)
        else:  # a finer roll-up's bars
            spec, columns, late = layer.spec, (*fields, *BAR_FIELDS, *STORED_MOMENTS), LateBars(by, None)
        order = oldest_first(spec, piece.replace(columns=tuple(dict.fromkeys(columns))))
        yield from ask(Feed((yield from read_tiers(seat, order, cost)), late))
        for bar in late.bars[::-1] if order.descending != plan.descending else late.bars:
            edge = None if layer is None else fed.builder.buckets.straddled(bar.start, layer.interval)
            if layer is not None and edge is not None:  # as a stored bar of the store's own is refused
                raise untiled(layer.interval, fed.builder.buckets, bar=bar.start, edge=edge)
            fed.bars.extend(fed.builder.add_bar(bar, what=f"a late bucket's {'ticks' if layer is None else 'bars'}"))


@dataclass(frozen=True)
class LateBars:
    """A :class:`~tsstore.verbs.request.Feed`'s sink: the ticks (``ticks``: the roll-up of
    ticks whose price and volume they give) or finer stored bars of a late part of combined
    bars, each as a :class:`~tsstore.analytics.bars.Bar` of the series ``by`` names."""

    by: Sequence[list[str]]
    ticks: Rollup | None
    bars: list[Bar] = field(default_factory=list)

    def add(self, tick: Tick) -> None:
        if self.ticks is None:
            bar = stored_bar(tick, self.by)
        else:
            volume = self.ticks.volume
            bar = tick_bar(tick, self.by, self.ticks.price.split("."), None if volume is None else volume.split("."))
        if bar is not None:
            self.bars.append(bar)


def absent(done: Sequence[Bar], skipped: int, by: Sequence[str], *, price: str | None) -> None:
    """Refuse bars that say nothing because a field is in none of the ticks read (a declaration
    without ``columns`` cannot say so before reading): no tick held a number at ``price``, or
    none held a ``by`` field (one series keyed by a missing value)."""
    if not done and skipped and price is not None:
        raise QueryError(f"bars: none of the {skipped} ticks read holds a number at price {price!r}; "
                         "name the price field (e.g. price='price.micros')")  # fmt: skip
    for i, name in enumerate(by):
        if done and all(bar.key[i] is None for bar in done):
            raise QueryError(f"bars: none of the ticks read holds the by field {name!r}")


def bars_plan(
    seat: Seat,
    bounds: Query,
    *,
    interval: DurationLike,
    by: str | Sequence[str] | None,
    price: str,
    volume: str | None,
    tz: ZoneLike | None = None,
    origin: TimeLike | None = None,
    fill: str | None = None,
    combine: dt.timedelta | None = None,
) -> tuple[QueryPlan, BarBuilder, tuple[str, ...]]:
    """A bars read: its plan (oldest first where declared, reading only the fields the bars
    need), the builder for the plan's order, and the ``by`` fields; ``combine`` is the length
    of the stored bars read instead of ticks."""
    fields = (by,) if isinstance(by, str) else tuple(by or ())
    try:
        for name, what in [*((f, "by field") for f in fields), (price, "price"), (volume, "volume")]:
            if name is not None:
                check_field_path(name, what=what)
    except SpecError as exc:
        raise QueryError(str(exc)) from None
    own = () if combine is not None else (("price", price), ("volume", volume))  # a roll-up's bars: its own
    seat.spec.check_declared([*(("by field", f) for f in fields), *own], verb="bars")
    edges = buckets(interval, tz=tz, origin=origin)
    filled = check_fill(fill)
    wanted = (*BAR_FIELDS, *STORED_MOMENTS) if combine is not None else (price, *(() if volume is None else (volume,)))
    columns = tuple(dict.fromkeys((*fields, *wanted)))
    plan = oldest_first(seat.spec, bounds.replace(columns=columns))
    builder = BarBuilder(
        edges, by=fields, price=price, volume=volume, descending=plan.descending, fill=filled, combine=combine
    )
    return plan, builder, fields


_AMOUNTS = ("count", "volume", "sum")


def aligned(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    interval: DurationLike,
    by: str | Sequence[str],
    price: str | None = None,
    value: str = "close",
    volume: str | None = None,
    tz: ZoneLike | None = None,
    origin: TimeLike | None = None,
    fill: str | None = "prev",
    combine: bool = False,
    stats: ReadStats | None = None,
    **options: Unpack[RangeOptions],
) -> Request[pd.DataFrame]:
    """Several series side by side: one row per bucket (every bucket from the first bar to the
    last, in ``tz``), one column per series (the values of ``by``), each the series' bar
    ``value`` there: ``close`` (its last price, the default), ``open``, ``high``, ``low``,
    ``mean``, ``std``, ``count``, ``volume`` or ``sum``. ``store.aligned(interval="1min",
    by="symbol", price="price.micros", start=..., end=...)``.

    ``fill="prev"`` carries each series' last value into the buckets where it has no bar
    (before its first bar it stays missing; a bar's own missing value, the std of one tick,
    is neither filled nor carried); amounts (``count``, ``volume``, ``sum``) are 0 there.
    ``fill=None`` leaves them missing. The bars are those of :meth:`bars` (the same buckets,
    ``combine`` from a roll-up), so memory holds bars, not ticks."""
    kinds = ("open", "high", "low", "close", "mean", "std", *_AMOUNTS)
    if value not in kinds:
        raise QueryError(f"value={value!r} is not allowed; use one of {', '.join(kinds)}")
    if fill not in (None, "prev"):
        raise QueryError(f"fill={fill!r} is not allowed for aligned series; use 'prev' or None")
    fields = (by,) if isinstance(by, str) else tuple(by or ())
    if not fields:
        raise QueryError("aligned needs by=, the field(s) whose values name the series (e.g. 'symbol')")
    if value == "volume" and volume is None and not combine:
        raise QueryError("value='volume' needs volume=, the volume field")
    frame = yield from bars(
        seat, query, interval=interval, price=price, by=fields, volume=volume, tz=tz, origin=origin,
        moments=value in ("mean", "std", "sum"), combine=combine, stats=stats, **options,
    )  # fmt: skip
    edges = buckets(interval, tz=tz, origin=origin)
    return side_by_side(frame, series=len(fields), value=value, fill=fill, edges=edges, amount=value in _AMOUNTS)
