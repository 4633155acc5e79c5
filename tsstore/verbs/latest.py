"""The newest tick of each series as a request: one limit-1 query per series and chunk, all at
one snapshot (the plans and the frame are :mod:`tsstore.analytics.latest`'s)."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable

import pandas as pd

from tsstore.analytics import PARAMETER_HELP as PARAMETER_HELP  # the analytics verbs' words, one glossary
from tsstore.analytics.latest import LatestRequest
from tsstore.asks import asked_together
from tsstore.cold.seam import Stretch
from tsstore.read.cold import ColdRead
from tsstore.read.cost import ReadStats
from tsstore.read.engine import TickRead
from tsstore.read.plan import plan_query
from tsstore.read.query import Query, Where, given
from tsstore.ticks import Tick
from tsstore.times import TimeLike
from tsstore.verbs.reading import snapshot_of
from tsstore.verbs.seam import in_order, seam_of, within
from tsstore.verbs.request import Collect, Request, Seat


def latest(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    by: str,
    values: Iterable[object],
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
    parts = max(request.queries, 2 if seat.spec.cold else 1)  # a cold tier's manifest is read at the snapshot too
    snapshot = yield from snapshot_of(seat, request.plans[0], cost, parts=parts)
    cut = None if snapshot is None else (yield from seam_of(seat, request.plans[0], snapshot, cost))
    if cut is not None:
        return request.frame((yield from _across(request, cut, snapshot, cost)))
    cost.waited()
    return request.frame((yield from _newest(request, snapshot, cost)))


def _newest(
    request: LatestRequest, snapshot: dt.datetime | None, cost: ReadStats, *, only: Iterable[int] | None = None
) -> Request[list[tuple[int, list[Tick]]]]:
    """The newest tick of each series (of those numbered ``only``) and chunk from Firestore:
    one limit-1 query each, all concurrent."""
    wanted = None if only is None else set(only)
    jobs = [job for job in request.cursors(snapshot, cost) if wanted is None or job[0] in wanted]
    found = yield from asked_together([Collect(TickRead(plan, cursors=[cursor], read_time=snapshot))
                                       for _, plan, cursor in jobs])  # fmt: skip
    return [(i, ticks) for (i, _, _), ticks in zip(jobs, found)]


def _across(
    request: LatestRequest, cut: list[Stretch], snapshot: dt.datetime | None, cost: ReadStats
) -> Request[list[tuple[int, list[Tick]]]]:
    """The newest tick of each series over the stretches ``cut`` of a series with a cold
    tier: the newest stretch first, and each older one only for the series not found yet."""
    found: dict[int, list[Tick]] = {}
    for stretch in in_order(request.plans[0], cut, None):
        todo = [i for i in range(len(request.plans)) if i not in found]
        if not todo:
            break
        narrowed = dataclasses.replace(request, plans=tuple(within(plan, stretch) for plan in request.plans))
        if stretch.entries is None:
            cost.waited()
            answers = yield from _newest(narrowed, snapshot, cost, only=todo)
        else:
            objects = tuple(entry.object for entry in stretch.entries)
            reads = [Collect(ColdRead(narrowed.plans[i], objects, None, 1, cost)) for i in todo]
            answers = list(zip(todo, (yield from asked_together(reads))))
        for i, ticks in answers:
            if ticks:
                found.setdefault(i, []).extend(ticks)
    return list(found.items())


