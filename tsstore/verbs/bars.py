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
from tsstore.analytics.bars import STORED_MOMENTS, Bar, BarBuilder, bars_frame, check_combinable, side_by_side
from tsstore.analytics.buckets import buckets, check_fill
from tsstore.analytics.rollup import BAR_FIELDS, bar_length, combined_end
from tsstore.errors import QueryError, SpecError
from tsstore.read.cost import ReadStats
from tsstore.read.plan import QueryPlan, oldest_first, time_range
from tsstore.read.query import Query, RangeOptions
from tsstore.spec import check_field_path
from tsstore.ticks import Tick
from tsstore.times import DurationLike, TimeLike, ZoneLike
from tsstore.verbs.marks import late_in, read_watermark
from tsstore.verbs.reading import COUNT_OPTIONS, read
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
    ``tz``, which in UTC is the Unix epoch; a time of day such as ``"09:30"`` is read in ``tz``), or
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
    stored yet).

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
        record = yield from read_watermark(seat, seat.spec.collection)
        stored = bar_length(seat.spec.collection, record)
        bounds = bounds.replace(end=combined_end(seat.spec.collection, record, *time_range(bounds.start, bounds.end)))
    plan, builder, fields = bars_plan(
        seat, bounds, interval=interval, by=by, price=price or "close", volume=volume, tz=tz, origin=origin,
        fill=fill, combine=stored,
    )  # fmt: skip
    if stored is not None:  # whole stored bars only, and none that late ticks changed since
        check_combinable(stored, builder.buckets, start=plan.start, end=plan.end)
        late = yield from late_in(seat, seat.spec.collection, start=plan.start, end=plan.end, record=record)
        if late:
            raise QueryError(
                f"{len(late)} bucket(s) of {seat.spec.collection!r} in this range hold late ticks not rolled up yet "
                f"(first: {late[0].bucket.isoformat()}): run the roll-up first (tsstore rollup), or make the bars "
                "from the ticks (bars(price=...) on the source's store)"
            )
    fed = FedBars(builder)
    yield Feed((yield from read(seat, plan, stats if stats is not None else ReadStats())), fed)
    done = fed.finished()
    absent(done, builder.skipped, fields, price=None if combine else price)
    zone = builder.buckets.zone
    return bars_frame(
        done, by=fields, timestamp_field=seat.spec.timestamp_field, volume=volume, zone=zone, moments=moments
    )


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
