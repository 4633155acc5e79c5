"""How the engine fetches a chunk: the chunk's query (:func:`~tsstore.read.chunks.chunk_query`)
on the collection of the plan's series, streamed by :mod:`tsstore.wire`; one fetch for the
threads, one for the event loop (held by a gate from the query's sending to its first
answer). The stores hand the engine these; they build no query themselves."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from tsstore.read.async_engine import AsyncFetch
from tsstore.read.chunks import Chunk, chunk_query
from tsstore.read.engine import Fetch
from tsstore.read.plan import QueryPlan
from tsstore.spec import SeriesSpec
from tsstore.ticks import Position, Tick
from tsstore.wire import astream_ticks, stream_ticks

#: The collection a series' ticks are in (a store's own, or another one it reads).
CollectionOf = Callable[[SeriesSpec], Any]


def fetcher(collection_of: CollectionOf, plan: QueryPlan, *, fast: bool) -> Fetch:
    """The fetch of ``plan``'s chunks on the sync client (``fast``: through its stub)."""

    def fetch(chunk: Chunk, after: Position | None, limit: int | None, read_time: dt.datetime | None) -> Iterator[Tick]:
        query = chunk_query(collection_of(plan.spec), plan, chunk, after, limit)
        return stream_ticks(query, timestamp_field=plan.spec.timestamp_field, read_time=read_time, fast=fast)

    return fetch


def afetcher(collection_of: CollectionOf, plan: QueryPlan, *, gate: asyncio.Semaphore) -> AsyncFetch:
    """The fetch of ``plan``'s chunks on the async client, each held by ``gate`` until its
    first answer (not while the caller consumes it: a merge keeps every chunk open at once)."""

    async def fetch(
        chunk: Chunk, after: Position | None, limit: int | None, read_time: dt.datetime | None
    ) -> AsyncIterator[Tick]:
        query = chunk_query(collection_of(plan.spec), plan, chunk, after, limit)
        async with gate:
            return await astream_ticks(query, timestamp_field=plan.spec.timestamp_field, read_time=read_time)

    return fetch
