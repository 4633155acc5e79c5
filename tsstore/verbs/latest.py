"""The newest tick of each series as a request: one limit-1 query per series and chunk, all at
one snapshot (the plans and the frame are :mod:`tsstore.analytics.latest`'s)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import pandas as pd

from tsstore.analytics import PARAMETER_HELP as PARAMETER_HELP  # the analytics verbs' words, one glossary
from tsstore.analytics.latest import LatestRequest
from tsstore.read.cost import ReadStats
from tsstore.read.engine import TickRead
from tsstore.read.plan import plan_query
from tsstore.read.query import Query, Where, given
from tsstore.times import TimeLike
from tsstore.verbs.reading import snapshot_of
from tsstore.verbs.request import Collect, Request, Seat


def latest(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    by: str,
    values: Iterable[Any],
    where: Where = None,
    before: TimeLike | None = None,
    end: TimeLike | None = None,
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
    if columns is not None:  # the columns query() would refuse
        seat.spec.check_columns((columns,) if isinstance(columns, str) else columns)
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


