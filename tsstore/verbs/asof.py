"""The as-of join as a request: two reads at one snapshot, the right one's range from the
left's and the tolerance, merged by :mod:`tsstore.analytics.asof`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Unpack

import pandas as pd

from tsstore.analytics import PARAMETER_HELP as PARAMETER_HELP  # the analytics verbs' words, one glossary
from tsstore.analytics.asof import ASOF_DEFAULTS, AsofOptions, JoinRead, check_direction, check_tolerance
from tsstore.asks import ask
from tsstore.errors import QueryError, SpecError
from tsstore.frames import FrameBuilder
from tsstore.read.cost import ReadStats
from tsstore.read.plan import plan_query
from tsstore.read.query import Query
from tsstore.spec import Direction, SeriesSpec, check_field_path
from tsstore.ticks import Tick
from tsstore.times import to_utc
from tsstore.verbs.declare import Reading
from tsstore.verbs.reading import read_tiers, snapshot_now
from tsstore.verbs.request import Feed, Request, Seat

#: The query fields each side of an as-of join takes.
ASOF_OPTIONS = ("where", "start", "end", "read_time", "columns")


def asof(
    seat: Seat,
    left: Query | None = None,
    right: Query | None = None,
    /,
    *,
    ids: bool = False,
    stats: ReadStats | None = None,
    **options: Unpack[AsofOptions],
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
    joining = yield from asof_read(seat, left, right, ids=ids, stats=stats if stats is not None else ReadStats(),
                                   **options)  # fmt: skip
    builder = FrameBuilder(seat.spec)
    yield from ask(Feed(joining, builder))
    return joining.with_right_columns(builder.frame())


def iter_asof(
    seat: Seat, left: Query | None = None, right: Query | None = None, /, **options: Unpack[AsofOptions]
) -> Reading[Tick]:
    """:meth:`asof` as a stream of ticks, each the left tick with its match under ``prefix``
    (a map: its fields but the ``by`` fields, its timestamp and document ``id``; absent where
    nothing matched), in the left ticks' order; the stream's ``stats`` say what it has cost
    so far."""
    stats = ReadStats()
    opening = asof_read(seat, left, right, ids=True, stats=stats, **options)
    return Reading(opening, stats, seat.spec)


def asof_read(
    seat: Seat, left: Query | None, right: Query | None, *, ids: bool, stats: ReadStats, **given: Unpack[AsofOptions]
) -> Request[JoinRead]:
    """The two reads of an as-of join, oldest first at one snapshot."""
    options: AsofOptions = {**ASOF_DEFAULTS, **given}
    right_spec, by, prefix = options["right_spec"], options["by"], options["prefix"]
    way, reach = check_direction(options["direction"]), check_tolerance(options["tolerance"])
    if right_spec is not None and not isinstance(right_spec, SeriesSpec):
        raise QueryError(f"right_spec takes a SeriesSpec (the right series' declaration), got {right_spec!r}")
    other = right_spec if right_spec is not None else seat.spec
    fields = _join_fields(seat.spec, other, by, prefix)
    lq, rq = (_side(asked, side, fields) for side, asked in (("left", left), ("right", right)))
    rq = _right_reach(lq, rq, way, reach)
    snapshot = lq.read_time or rq.read_time or (yield from snapshot_now(seat, stats))
    lplan = plan_query(seat.spec, lq.replace(read_time=snapshot), direction=Direction.ASC)
    rplan = plan_query(other, rq.replace(read_time=snapshot), direction=Direction.ASC)
    lread = yield from read_tiers(seat, lplan, stats)
    rread = yield from read_tiers(seat, rplan, stats)
    stats.chunks = len(lplan.chunks) + len(rplan.chunks)
    return JoinRead(lread, rread, way, fields, reach, options["allow_exact_matches"], prefix, other, ids)


def _join_fields(spec: SeriesSpec, other: SeriesSpec, by: str | Sequence[str], prefix: str) -> tuple[str, ...]:
    """The ``by`` fields of a join (declared on both sides), with a ``prefix`` that names no
    field of the left series."""
    fields = (by,) if isinstance(by, str) else tuple(by)
    try:
        for name in (*fields, prefix):
            check_field_path(name, what="as-of join field" if name != prefix else "prefix")
    except SpecError as exc:
        raise QueryError(str(exc)) from None
    for declared in (spec, other):
        declared.check_declared((("by field", f) for f in fields), verb="asof")
    taken = {spec.timestamp_field, spec.shard_field, *fields, *spec.filter_fields, *spec.key_fields, *spec.measures}
    taken |= {name.split(".")[0] for name, _ in spec.columns}
    if prefix in taken or "." in prefix:
        raise QueryError(f"prefix {prefix!r} must be a plain field name that is none of the left series' fields")
    return fields


def _side(asked: Query | None, side: str, fields: tuple[str, ...]) -> Query:
    """One side's query, its columns holding the ``by`` fields the join needs."""
    bounds = asked if asked is not None else Query()
    bounds.only(ASOF_OPTIONS, f"asof ({side} query)")
    if bounds.columns is not None:
        bounds = bounds.replace(columns=tuple(dict.fromkeys((*bounds.columns, *fields))))
    return bounds


def _right_reach(lq: Query, rq: Query, way: str, reach: dt.timedelta | None) -> Query:
    """The right side bounded to what can match the left's range, where it gives no bound:
    before it only back to one tolerance (forward: nothing before it), after it only up to
    one tolerance (backward: nothing after)."""
    try:
        lstart = None if lq.start is None else to_utc(lq.start, name="start")
        lend = None if lq.end is None else to_utc(lq.end, name="end")
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    behind = dt.timedelta(0) if way == "forward" else reach
    ahead = dt.timedelta(0) if way == "backward" else reach
    if rq.start is None and lstart is not None and behind is not None:
        rq = rq.replace(start=lstart - behind)
    if rq.end is None and lend is not None and ahead is not None:
        rq = rq.replace(end=lend + ahead)
    return rq


#: Bar columns that are amounts: an empty bucket has none of them (0), not the last one.
