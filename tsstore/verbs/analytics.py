"""Analytics as requests: aggregates computed by Firestore, the newest tick of each series,
OHLCV bars built while ticks stream. The arithmetic lives in :mod:`tsstore.analytics.aggregate`,
:mod:`tsstore.analytics.latest` and :mod:`tsstore.analytics.bars`; this module says what each verb asks."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Unpack

import pandas as pd

from tsstore.analytics.aggregate import AggregateRequest, Aggregates, field_names
from tsstore.analytics.asof import JoinRead, check_direction, check_tolerance
from tsstore.analytics.bars import STORED_MOMENTS, Bar, BarBuilder, bars_frame, check_combinable, side_by_side
from tsstore.analytics.buckets import buckets, check_fill
from tsstore.analytics.covered import CoveredPlan, CoveredRequest, Total
from tsstore.analytics.covered import Part as CoveredPart
from tsstore.analytics.latest import LatestRequest
from tsstore.analytics.rollup import BAR_FIELDS, Rollup, bar_length
from tsstore.asks import asked_together
from tsstore.errors import QueryError, SpecError
from tsstore.frames import FrameBuilder
from tsstore.late import PURGED
from tsstore.read.chunks import ChunkTicks
from tsstore.read.cost import ReadStats
from tsstore.read.engine import TickRead
from tsstore.read.plan import QueryPlan, plan_query
from tsstore.read.query import Query, RangeOptions, Where, given
from tsstore.spec import Direction, SeriesSpec, check_field_path
from tsstore.ticks import Tick
from tsstore.times import to_utc
from tsstore.verbs.declare import Reading
from tsstore.verbs.marks import late_in, marks_ask, marks_of, read_watermark, watermark_ask
from tsstore.verbs.reading import COUNT_OPTIONS, probe, read, snapshot_of
from tsstore.verbs.request import Aggregate, Collect, Feed, Request, Seat

#: What each parameter of these verbs means, once for every verb that takes it (the API
#: reference describes a parameter from here unless the verb's docstring says more).
PARAMETER_HELP = {
    "interval": "the bucket length: a duration (``\"1min\"``, ``\"15min\"``, ``\"1h\"``, a ``timedelta``) "
    "or a calendar unit in ``tz`` (``\"1D\"``, ``\"1W\"``, ``\"1M\"``)",
    "price": "the numeric field the bars' open, high, low and close are of (``\"price.micros\"``); "
    "``None``: the declared roll-ups' price",
    "by": "the field(s) whose values name a series (``\"symbol\"``): one set of rows per series, equal "
    "on both sides of an as-of join",
    "volume": "the numeric field summed into each bar's ``volume``; ``None``: no volume",
    "tz": "the zone buckets are laid out in and the index is shown in (``\"America/New_York\"``); "
    "``None``: UTC",
    "origin": "where fixed buckets start: an instant, or a time of day read in ``tz`` (``\"09:30\"``); "
    "``None``: midnight of 1970-01-01 in ``tz``",
    "fill": "buckets without a tick: ``None`` (no row), ``\"prev\"`` (the last close carried, amounts 0) "
    "or ``\"nan\"`` (missing prices)",
    "moments": "add each bar's ``sum``, ``mean`` and ``std`` of the price and the times of its open and close",
    "combine": "read a roll-up's stored bars (a store on ``rollup.spec``) and combine them into these "
    "longer ones instead of reading ticks",
    "value": "what each series' column holds: ``\"close\"`` (default), ``\"open\"``, ``\"high\"``, "
    "``\"low\"``, ``\"mean\"``, ``\"std\"``, ``\"count\"``, ``\"volume\"`` or ``\"sum\"``",
    "left": "the :class:`~tsstore.read.query.Query` of the ticks to match (every one gives a row)",
    "right": "the :class:`~tsstore.read.query.Query` of the ticks matched from; its range defaults to what "
    "can match the left's (one ``tolerance`` around it)",
    "right_spec": "the declared series the right side reads; ``None``: this store's own",
    "tolerance": "the longest time between a tick and its match (``\"5s\"``, a ``timedelta``); "
    "``None``: any",
    "allow_exact_matches": "whether a right tick at the very time of the left one may match",
    "prefix": "the prefix of the matched tick's columns (``right.price.micros``)",
    "ids": "add the matched tick's document id as a column (``right.id``)",
    "count": "whether to count the ticks",
    "sum": "measures (declared ``measures``) to sum",
    "avg": "measures to average",
    "min": "fields whose least value to give (from the roll-ups' bars: needs ``rollups``)",
    "max": "fields whose greatest value to give (from the roll-ups' bars: needs ``rollups``)",
    "std": "fields whose standard deviation to give (from the roll-ups' bars: needs ``rollups``)",
    "rollups": "roll-ups of this series whose stored bars answer where they cover the range",
    "values": "the series' values of ``by``, in the order of the rows",
    "before": "the instant the newest tick is taken before (exclusive; or ``end``); ``None``: the newest of all",
}


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
        request, plan = covered_request(seat, bounds, rollups, count=count, asked=asked)
        return (yield from covered_aggregate(seat, request, plan, cost))
    spread = [kind for kind, fields in (("min", min), ("max", max), ("std", std)) if tuple(fields)]
    if spread:
        raise QueryError(
            f"{', '.join(spread)} come from stored roll-ups (Firestore aggregates only count, sum and avg): give "
            "rollups=[...] of this series"
        )
    plan = oldest_first(seat.spec, bounds)  # the direction the measures' indexes are declared in
    checked = AggregateRequest.checked(seat.spec, count=count, sum=sum, avg=avg)

    overs = [(ChunkTicks(plan, chunk, m), tuple(asks)) for chunk in plan.chunks for m, asks in checked.requests()]
    cost.chunks = len(plan.chunks)
    snapshot = yield from snapshot_of(seat, plan, cost, parts=len(overs))
    cost.waited()
    answers = yield from asked_together([Aggregate(over, asks, snapshot) for over, asks in overs])
    answered = [answer for split in answers for answer in split]  # a part asked in halves answers twice
    for answer in answered:  # each billed by the index entries it went over: the count it returned
        counted = next(v for k, v in answer.items() if k == "count" or k.startswith("count_"))
        cost.aggregation_done(int(counted or 0))
    return checked.combine(answered)


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
    request, plan = covered_request(seat, bounds, rollups, count=True, asked={})
    cost = stats if stats is not None else ReadStats()
    parts = yield from covered_parts(seat, request, plan, bounds.read_time, cost)
    return CoveredPlan(seat.spec.collection, tuple(parts))


def covered_request(
    seat: Seat, bounds: Query, rollups: Iterable[Rollup], *, count: bool, asked: Mapping[str, Iterable[str]]
) -> tuple[CoveredRequest, QueryPlan]:
    """The aggregate from roll-ups, checked, and the plan of its range on the ticks."""
    if isinstance(rollups, Rollup):
        rollups = [rollups]
    fields = {kind: field_names(names, kind) for kind, names in asked.items()}
    plan = oldest_first(seat.spec, bounds)
    return CoveredRequest.checked(seat.spec, rollups, plan.filters, count=count, asked=fields), plan


def covered_parts(
    seat: Seat, request: CoveredRequest, plan: QueryPlan, snapshot: dt.datetime | None, cost: ReadStats
) -> Request[list[CoveredPart]]:
    """The parts of ``plan``'s range, from the roll-ups' watermark documents and the marks of
    late ticks in the range, at ``snapshot``."""
    stored = yield from asked_together([watermark_ask(rollup.name, read_time=snapshot) for rollup in request.rollups])
    for _ in stored:
        cost.query_done(1)
    documents = [doc.data for doc in stored]
    spans = [r.coverage(doc) for r, doc in zip(request.rollups, documents)]
    gone = [d.get(PURGED) for r, d in zip(request.rollups, documents) if d and r.finer is None]
    purged = max((g for g in gone if isinstance(g, dt.datetime)), default=None)
    layers = request.layers
    found = yield from asked_together(
        [marks_ask(layer.name, since=plan.start and plan.start - layer.interval, before=plan.end, read_time=snapshot)
         for layer in layers]  # fmt: skip
    )
    marks = {}
    for layer, answer in zip(layers, found):
        marked = marks_of(answer)
        cost.query_done(len(marked))
        marks[layer.name] = [mark.bucket for mark in marked]
    return request.parts_of(plan.start, plan.end, spans, marks, purged)


def covered_aggregate(seat: Seat, request: CoveredRequest, plan: QueryPlan, cost: ReadStats) -> Request[Aggregates]:
    """Each part read (bars or ticks) at one snapshot and folded into one bar."""
    bounds = plan.query
    snapshot = bounds.read_time
    if snapshot is None:
        snapshot = yield from probe(seat, cost)  # the watermarks and every part at one time
    parts = yield from covered_parts(seat, request, plan, snapshot, cost)
    total = Total()
    for part in parts:
        if part.rollup is None:
            spec, columns = seat.spec, request.columns
        else:
            spec, columns = part.rollup.spec, (*BAR_FIELDS, *STORED_MOMENTS)
        piece = Query(where=bounds.where, start=part.start, end=part.end, columns=columns, read_time=snapshot)
        ticks = yield from read(seat, oldest_first(spec, piece), cost)

        def sink(tick: Tick, part: CoveredPart = part) -> None:
            total.add(request.bar_of(tick, part))

        yield Feed(ticks, sink)
    return request.result(total.bar, parts)


def latest(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    by: str,
    values: Iterable[Any],
    where: Where = None,
    before: object = None,
    end: object = None,
    columns: Iterable[str] | None = None,
    read_time: dt.datetime | None = None,
    stats: ReadStats | None = None,
) -> Request[pd.DataFrame]:
    """The newest tick of each series: ``store.latest(by="symbol", values=["AAA", "BBB"])``
    is a DataFrame indexed by ``symbol`` in the order given, one row per value (missing
    values where a series has no tick), with its ``timestamp`` and fields. Takes ``where``
    (other filters), ``before`` (exclusive; or ``end``), ``columns`` and ``read_time``;
    ``by`` must be a declared query shape's field (newest first). One limit-1 query per
    series and shard chunk (per series, for a series shape), all concurrent at one snapshot
    (see :mod:`tsstore.analytics.latest`)."""
    options = given(where=where, end=end, columns=columns, read_time=read_time, before=before)
    request = LatestRequest.planned(
        seat.spec, lambda q: plan_query(seat.spec, q), by=by, values=values, query=query, options=options
    )
    cost = stats if stats is not None else ReadStats()
    cost.chunks = request.queries
    snapshot = yield from snapshot_of(seat, request.plans[0], cost, parts=request.queries)
    cost.waited()
    jobs = request.cursors(snapshot, cost)
    found = yield [Collect(TickRead(plan, cursors=[cursor], read_time=snapshot)) for _, plan, cursor in jobs]
    return request.frame([(i, ticks) for (i, _, _), ticks in zip(jobs, found)])


def bars(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    interval: object,
    price: str | None = None,
    by: str | Sequence[str] | None = None,
    volume: str | None = None,
    tz: object = None,
    origin: object = None,
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
    inside a stored bar, naming the bar.

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
    if combine:  # a roll-up's bars: their length is in its record
        stored = bar_length(seat.spec.collection, (yield from read_watermark(seat, seat.spec.collection)))
    plan, builder, fields = bars_plan(
        seat, bounds, interval=interval, by=by, price=price or "close", volume=volume, tz=tz, origin=origin,
        fill=fill, combine=stored,
    )  # fmt: skip
    if stored is not None:  # whole stored bars only, and none that late ticks changed since
        check_combinable(stored, builder.buckets, start=plan.start, end=plan.end)
        late = yield from late_in(seat, seat.spec.collection, start=plan.start, end=plan.end)
        if late:
            raise QueryError(
                f"{len(late)} bucket(s) of {seat.spec.collection!r} in this range hold late ticks not rolled up yet "
                f"(first: {late[0].bucket.isoformat()}): run the roll-up first (tsstore rollup), or make the bars "
                "from the ticks (bars(price=...) on the source's store)"
            )
    done: list[Bar] = []
    ticks = yield from read(seat, plan, stats if stats is not None else ReadStats())
    yield Feed(ticks, lambda tick: done.extend(builder.add(tick)))
    done.extend(builder.rest())
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
    interval: object,
    by: str | Sequence[str] | None,
    price: str,
    volume: str | None,
    tz: object = None,
    origin: object = None,
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


def oldest_first(spec: SeriesSpec, query: Query) -> QueryPlan:
    """The plan of ``query`` on ``spec`` oldest first where an index for that is declared,
    else newest first: for reads that take every match, whose order is only cosmetic."""
    try:
        return plan_query(spec, query, direction=Direction.ASC)
    except QueryError:
        return plan_query(spec, query, direction=Direction.DESC)


#: The query fields each side of an as-of join takes.
ASOF_OPTIONS = ("where", "start", "end", "read_time", "columns")


def asof(
    seat: Seat,
    left: Query | None = None,
    right: Query | None = None,
    /,
    *,
    right_spec: SeriesSpec | None = None,
    by: str | Sequence[str] = (),
    direction: str = "backward",
    tolerance: object = None,
    allow_exact_matches: bool = True,
    prefix: str = "right",
    ids: bool = False,
    stats: ReadStats | None = None,
) -> Request[pd.DataFrame]:
    """An as-of join: each tick of the ``left`` query with the tick of the ``right`` query
    (of this series, or of ``right_spec``'s collection) nearest before it in time, as one
    DataFrame: ``store.asof(Query(where={"symbol": "AAA"}, start=..., end=...), right_spec=QUOTES,
    by="symbol", tolerance="5s")``. The left tick's columns, then its match's under
    ``prefix`` (``right.price.micros``, ``right.timestamp``; with ``ids=True`` also
    ``right.id``, its document id), but the ``by`` fields, which are the left's (as
    ``pandas.merge_asof`` keeps them once); missing where nothing matched.

    ``direction`` ``"backward"`` (the newest at or before), ``"forward"`` (the oldest at or
    after) or ``"nearest"``; ``by``: fields that must be equal on both sides;
    ``tolerance``: the largest time apart (``"5s"``); ``allow_exact_matches=False``: a match
    at the same time does not count. The rules of ``pandas.merge_asof``
    (:mod:`tsstore.analytics.asof`). Each query takes ``where``, ``start``, ``end`` and
    ``columns``; the right query's range defaults to what can match the left's (with a
    tolerance, one tolerance around it). Both are read oldest first at one snapshot and
    joined as they stream: memory holds the rows of the result and one tolerance window, not
    the right side."""
    joining = yield from asof_read(
        seat, left, right, right_spec=right_spec, by=by, direction=direction, tolerance=tolerance,
        allow_exact_matches=allow_exact_matches, prefix=prefix, ids=ids,
        stats=stats if stats is not None else ReadStats(),
    )  # fmt: skip
    builder = FrameBuilder(seat.spec)
    yield Feed(joining, builder.add)
    return joining.with_right_columns(builder.frame())


def iter_asof(
    seat: Seat,
    left: Query | None = None,
    right: Query | None = None,
    /,
    *,
    right_spec: SeriesSpec | None = None,
    by: str | Sequence[str] = (),
    direction: str = "backward",
    tolerance: object = None,
    allow_exact_matches: bool = True,
    prefix: str = "right",
) -> Reading[Tick]:
    """:meth:`asof` as a stream of ticks, each the left tick with its match under ``prefix``
    (a map: its fields but the ``by`` fields, its timestamp and document ``id``; absent where
    nothing matched), in the left ticks' order; the stream's ``stats`` say what it has cost
    so far."""
    stats = ReadStats()
    opening = asof_read(
        seat, left, right, right_spec=right_spec, by=by, direction=direction, tolerance=tolerance,
        allow_exact_matches=allow_exact_matches, prefix=prefix, ids=True, stats=stats,
    )  # fmt: skip
    return Reading(opening, stats, seat.spec)


def asof_read(
    seat: Seat,
    left: Query | None,
    right: Query | None,
    *,
    right_spec: SeriesSpec | None,
    by: str | Sequence[str],
    direction: str,
    tolerance: object,
    allow_exact_matches: bool,
    prefix: str,
    ids: bool,
    stats: ReadStats,
) -> Request[JoinRead]:
    """The two reads of an as-of join, oldest first at one snapshot."""
    way, reach = check_direction(direction), check_tolerance(tolerance)
    fields = (by,) if isinstance(by, str) else tuple(by)
    try:
        for name in (*fields, prefix):
            check_field_path(name, what="as-of join field" if name != prefix else "prefix")
    except SpecError as exc:
        raise QueryError(str(exc)) from None
    spec = seat.spec
    if right_spec is not None and not isinstance(right_spec, SeriesSpec):
        raise QueryError(f"right_spec takes a SeriesSpec (the right series' declaration), got {right_spec!r}")
    for declared in (spec, right_spec or spec):
        declared.check_declared((("by field", f) for f in fields), verb="asof")
    taken = {spec.timestamp_field, spec.shard_field, *fields, *spec.filter_fields, *spec.key_fields, *spec.measures}
    taken |= {name.split(".")[0] for name, _ in spec.columns}
    if prefix in taken or "." in prefix:
        raise QueryError(f"prefix {prefix!r} must be a plain field name that is none of the left series' fields")
    other = right_spec if right_spec is not None else seat.spec
    sides = []
    for side, asked in (("left", left), ("right", right)):
        bounds = asked if asked is not None else Query()
        bounds.only(ASOF_OPTIONS, f"asof ({side} query)")
        if bounds.columns is not None:  # the join needs the by fields
            bounds = bounds.replace(columns=tuple(dict.fromkeys((*bounds.columns, *fields))))
        sides.append(bounds)
    lq, rq = sides
    try:
        lstart = None if lq.start is None else to_utc(lq.start, name="start")
        lend = None if lq.end is None else to_utc(lq.end, name="end")
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    # What of the right side can match the left's range: before it only back to one tolerance
    # (forward: nothing before it), after it only up to one tolerance (backward: nothing after).
    behind = dt.timedelta(0) if way == "forward" else reach
    ahead = dt.timedelta(0) if way == "backward" else reach
    if rq.start is None and lstart is not None and behind is not None:
        rq = rq.replace(start=lstart - behind)
    if rq.end is None and lend is not None and ahead is not None:
        rq = rq.replace(end=lend + ahead)
    snapshot = lq.read_time or rq.read_time or (yield from probe(seat, stats))
    lplan = plan_query(seat.spec, lq.replace(read_time=snapshot), direction=Direction.ASC)
    rplan = plan_query(other, rq.replace(read_time=snapshot), direction=Direction.ASC)
    lread = yield from read(seat, lplan, stats)
    rread = yield from read(seat, rplan, stats)
    stats.chunks = len(lplan.chunks) + len(rplan.chunks)
    return JoinRead(lread, rread, way, fields, reach, allow_exact_matches, prefix, other, ids)


#: Bar columns that are amounts: an empty bucket has none of them (0), not the last one.
_AMOUNTS = ("count", "volume", "sum")


def aligned(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    interval: object,
    by: str | Sequence[str],
    price: str | None = None,
    value: str = "close",
    volume: str | None = None,
    tz: object = None,
    origin: object = None,
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
    is neither filled nor carried); amounts (``count``, ``volume``, ``sum``) are 0 there. ``fill=None`` leaves them missing. The bars are those of :meth:`bars` (the same
    buckets, ``combine`` from a roll-up), so memory holds bars, not ticks."""
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
