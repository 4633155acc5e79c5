"""The shard layout as requests: the census of shard values (the rounds are
:class:`tsstore.read.census.Census`'s; this module turns its asks into Firestore's)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from tsstore.errors import QueryError
from tsstore.read.census import Ask, Census, FirstValue, ShardCensus
from tsstore.read.chunks import census_query, chunk_query
from tsstore.read.cost import ReadStats
from tsstore.read.plan import QueryPlan
from tsstore.times import to_utc
from tsstore.verbs.reading import probe
from tsstore.verbs.request import Count, Documents, Request, Seat, whole


def shard_census(seat: Seat, *, since: object = None, read_time: dt.datetime | None = None) -> Request[ShardCensus]:
    """How many ticks each shard value holds, which values documents carry that the
    declaration does not list, and how evenly the active values share ticks (since
    ``since``, when given, e.g. the last layout change). All at one snapshot, by count
    aggregations and limit-1 queries: see :mod:`tsstore.read.census`."""
    try:
        since_t = None if since is None else to_utc(since, name="since")
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    stats = ReadStats()
    snapshot = read_time or (yield from probe(seat, stats))
    census = Census(seat.spec, since=since_t, read_time=snapshot, stats=stats)
    asks = census.first()
    while asks:
        stats.waited()
        answers = yield [census_ask(seat, ask, snapshot, stats) for ask in asks]
        asks = census.feed([census_answer(seat, ask, answer) for ask, answer in zip(asks, answers)])
    return census.result()


def census_ask(seat: Seat, ask: Ask, read_time: dt.datetime, stats: ReadStats) -> Count | Documents:
    """The Firestore ask of one census ask: a count, or the first document of a range."""
    query: Any = census_query(seat.collection, seat.spec, ask)
    return Documents(query, read_time, stats) if isinstance(ask, FirstValue) else Count(whole(query), read_time, stats)


def census_answer(seat: Seat, ask: Ask, answer: Any) -> int | str | None:
    """What the census takes from an answer: a count, or the first document's shard value."""
    if not isinstance(ask, FirstValue):
        return int(answer)
    return answer[0].get(seat.spec.shard_field) if answer else None


def remaining(seat: Seat, plan: QueryPlan, values: tuple[str, ...]) -> Request[dict[str, int]]:
    """Ticks under each of ``values`` (retired shard values a reshard empties), at one snapshot."""
    stats = ReadStats()
    snapshot = (yield from probe(seat, stats)) if len(values) > 1 else None
    queries = [chunk_query(seat.collection, plan, (value,), None, None) for value in values]
    counts = yield [Count(whole(query), snapshot, stats) for query in queries]
    return dict(zip(values, counts))
