"""Native mode's queries on a client (:class:`NativeQueries`), as :mod:`tsstore.dswire.reads`
is Datastore mode's: what a count, an aggregation or a census read runs over, the read engine's
chunk fetches (streamed by :mod:`tsstore.wire`, on a sync or an async client), and their answers
with their read times told to the project's clock. Building a query is no call, so one class
serves both kinds of client; the backends (:mod:`tsstore.native_mode`) make the calls."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from tsstore.asks import Doc
from tsstore.census_asks import Ask
from tsstore.layout.census import census_query
from tsstore.read.async_engine import AsyncFetch
from tsstore.read.chunks import Chunk, ChunkTicks, chunk_query
from tsstore.read.engine import Fetch
from tsstore.read.plan import QueryPlan
from tsstore.spec import SeriesSpec
from tsstore.ticks import Position, Tick
from tsstore.wire import astream_ticks, doc_of, server_clock, stream_ticks, told_clock

#: ``(kind, alias, field)``: a ``count``, ``sum`` or ``avg`` of an aggregation query.
Aggregation = tuple[str, str, str | None]


class NativeQueries:
    """The Firestore queries of the store of ``spec`` on ``client`` (sync or async): a series'
    collection, what a count, an aggregation or a census read runs over, chunk fetches, and the
    answers a query returned."""

    def __init__(self, client: Any, spec: SeriesSpec) -> None:
        self.client, self._spec = client, spec
        self._own = client.collection(spec.collection)

    def collection(self, spec: SeriesSpec) -> Any:
        """The collection of ``spec``: the store's own, or another one a request reads or
        writes (a roll-up's, the right side of an as-of join)."""
        return self._own if spec.collection == self._spec.collection else self.client.collection(spec.collection)

    def over(self, over: ChunkTicks | Ask) -> Any:
        """The query of what a count, an aggregation or a census read runs over (a chunk's
        ticks: on its shard values, the whole chunk or a part of it)."""
        if isinstance(over, ChunkTicks):
            plan = over.plan
            return chunk_query(self.collection(plan.spec), plan, over.chunk, None, None, also_by=over.also_by)
        return census_query(self._own, self._spec, over)

    def aggregation(self, over: ChunkTicks | Ask, aggregations: Sequence[Aggregation] | None) -> Any:
        """The aggregation query over ``over``: a count (``aggregations`` None), or
        ``aggregations``."""
        query = self.over(over)
        if aggregations is None:
            return query.count()
        for kind, alias, field in aggregations:
            query = getattr(query, kind)(*(() if field is None else (field,)), alias=alias)
        return query

    def aggregated(self, results: Any, sent: int, *, count: bool, pinned: bool) -> Any:
        """One answer from an aggregation query's results (of a call ``sent`` then): the count,
        or ``{alias: value}``; their read time told to the project's clock (a lower bound only
        when ``pinned``, read at a time the ask gave: :func:`~tsstore.wire.told_clock`)."""
        [row] = results
        server_clock(self.client).saw(row[0].read_time if row else None, sent=sent, read=not pinned)
        if count:
            [result] = row
            return int(result.value)  # the emulator reports an empty count as 0.0
        return {result.alias: result.value for result in row}

    def docs(self, snapshots: Any, sent: int, *, pinned: bool) -> list[Doc]:
        """The documents a query (sent then; ``pinned``: at a read time it was given) returned,
        their read time told to the project's clock."""
        found: list[Doc] = told_clock(self.client, [doc_of(snapshot) for snapshot in snapshots], sent, pinned=pinned)
        return found

    def fetcher(self, plan: QueryPlan, *, fast: bool) -> Fetch:
        """The read engine's fetch of ``plan``'s chunks on a sync client: each chunk's query
        (:func:`~tsstore.read.chunks.chunk_query`) streamed by :func:`~tsstore.wire.stream_ticks`
        (``fast``: through the client's own stub)."""

        def fetch(
            chunk: Chunk, after: Position | None, limit: int | None, read_time: dt.datetime | None
        ) -> Iterator[Tick]:
            query = chunk_query(self.collection(plan.spec), plan, chunk, after, limit)
            return stream_ticks(query, timestamp_field=plan.spec.timestamp_field, read_time=read_time, fast=fast)

        return fetch

    def afetcher(self, plan: QueryPlan, *, gate: asyncio.Semaphore) -> AsyncFetch:
        """The fetch of ``plan``'s chunks on an async client, each held by ``gate`` from its
        sending to its first answer (the emulator computes a whole query before answering; not
        while the caller consumes it: a merge keeps every chunk open at once, and must not wait
        on itself)."""

        async def fetch(
            chunk: Chunk, after: Position | None, limit: int | None, read_time: dt.datetime | None
        ) -> AsyncIterator[Tick]:
            query = chunk_query(self.collection(plan.spec), plan, chunk, after, limit)
            async with gate:
                return await astream_ticks(query, timestamp_field=plan.spec.timestamp_field, read_time=read_time)

        return fetch
