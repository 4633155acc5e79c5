"""The read engine on an event loop: the same :class:`~tsstore.read.engine.PageRounds` and
:class:`~tsstore.read.engine.ChunkCursor` as the thread side, driven with ``await``.

A fetch here is ``await fetch(chunk, after, limit, read_time)`` → an async iterator of the
chunk's ticks in query order. Concurrency is the event loop's: a round's chunk queries are
gathered, and the merge opens every chunk's stream together; no thread per query. Where a
thread side meets the loop, items hop a batch at a time: a sync fetch's chunks and a sync
iterator read in worker threads (:func:`fetched_in_threads`, :func:`pushed`), the loop's ticks
read from a bulk job's thread (:func:`pulled`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import heapq
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from concurrent.futures import Executor
from typing import Any, TypeVar

from google.api_core import exceptions as gexc

from tsstore import telemetry
from tsstore.errors import FaultError
from tsstore.logs import DOCUMENTS, QUERIES
from tsstore.read.engine import RENEW, Chunk, ChunkCursor, Fetch, PageRounds, TickRead, reraise_stopped
from tsstore.read.merge import Key
from tsstore.read.plan import QueryPlan
from tsstore.ticks import Position, Tick, sort_key

AsyncFetch = Callable[[Chunk, Position | None, int | None, dt.datetime | None], Awaitable[AsyncIterator[Tick]]]

T = TypeVar("T")

#: Items a worker thread reads for the loop at a time (a chunk of a database without an asyncio
#: client, a sealed object's rows) or the loop for a bulk job's thread: one hop per batch, not per tick.
HOP_BATCH = 500


async def pushed(items: Iterator[T], executor: Executor | None = None, *, batch: int = HOP_BATCH) -> AsyncIterator[T]:
    """A sync iterator read in worker threads (``executor``'s; the loop's own when None),
    ``batch`` items per hop from the loop."""
    loop = asyncio.get_running_loop()
    while taken := await loop.run_in_executor(executor, list, itertools.islice(items, batch)):
        for item in taken:
            yield item


def pulled(items: AsyncIterator[T], loop: asyncio.AbstractEventLoop, *, batch: int = HOP_BATCH) -> Iterator[T]:
    """An async iterator read from a worker thread (a bulk job's, sending what it reads from
    ``loop``: a purge, a reshard, a roll-up), ``batch`` items per hop to ``loop``."""

    async def some() -> list[T]:
        taken: list[T] = []
        async for item in items:
            taken.append(item)
            if len(taken) == batch:
                break
        return taken

    while taken := asyncio.run_coroutine_threadsafe(some(), loop).result():
        yield from taken


async def chained(parts: Sequence[AsyncIterator[T]], limit: int | None) -> AsyncIterator[T]:
    """The items of ``parts`` one after another (each started when the one before it ends),
    at most ``limit``: :func:`~tsstore.read.merge.take` of their chain, on the loop."""
    given = 0
    for part in parts:
        async for item in part:
            if limit is not None and given >= limit:
                return
            given += 1
            yield item


def fetched_in_threads(fetch: Fetch, executor: Executor) -> AsyncFetch:
    """A thread side's ``fetch`` as the loop's: each chunk's query sent, and its ticks read, in
    ``executor``'s worker threads, :data:`HOP_BATCH` at a time."""

    async def afetch(
        chunk: Chunk, after: Position | None, limit: int | None, read_time: dt.datetime | None
    ) -> AsyncIterator[Tick]:
        def ticks() -> Iterator[Tick]:  # the fetch itself sends its query: in the first hop's thread
            yield from fetch(chunk, after, limit, read_time)

        return pushed(ticks(), executor)

    return afetch


async def aread_ticks(
    read: TickRead, *, fetch: AsyncFetch, renew: Callable[[], Awaitable[dt.datetime]]
) -> AsyncIterator[Tick]:
    """The ticks of ``read`` on the event loop: a page's rounds gathered; streams merged."""
    if read.rounds is not None:
        for tick in await aread_page(read.rounds, fetch=fetch):
            yield tick
        return
    if read.sweep:
        for cursor in read.cursors:
            async for tick in chunk_ticks(fetch, cursor):
                yield tick
        return
    streams = [chunk_ticks(fetch, cursor, renew) for cursor in read.cursors]
    returned = 0
    async for tick in aname_stops(
        read.plan, amerge(streams, descending=read.plan.descending, key=read.plan.key), read.read_time
    ):
        yield tick
        returned += 1
        if returned == read.plan.limit:
            return


async def aread_page(rounds: PageRounds, *, fetch: AsyncFetch) -> list[Tick]:
    """A page's rounds on the event loop: each cursor's chunk stream read to its end, a
    round's cursors gathered."""
    with rounds.stops():
        cursors = rounds.first()
        while cursors:
            with telemetry.child("round", {QUERIES: len(cursors)}) as span:
                results = await asyncio.gather(*(_collect(chunk_ticks(fetch, c)) for c in cursors))
                span.set_attribute(DOCUMENTS, sum(map(len, results)))
            cursors = rounds.feed(results)
    return rounds.result()


async def _collect(ticks: AsyncIterator[Tick]) -> list[Tick]:
    return [tick async for tick in ticks]


async def chunk_ticks(
    fetch: AsyncFetch, cursor: ChunkCursor, renew: Callable[[], Awaitable[dt.datetime]] | None = None
) -> AsyncIterator[Tick]:
    """One chunk's ticks as one streaming query, reopened after its last tick when it breaks
    off (see :meth:`~tsstore.read.engine.ChunkCursor.failed`), or read on as the merge of its
    halves' streams once it keeps breaking off before a tick."""
    while not cursor.done:
        try:
            async for tick in await fetch(*cursor.query_args()):
                yield cursor.returned(tick)
                if cursor.done:
                    return
            cursor.done = True
        except Exception as exc:
            pause = cursor.failed(exc)
            if pause == RENEW:
                assert renew is not None
                cursor.read_time = await renew()
                continue
            await asyncio.sleep(float(pause))
            if halves := cursor.split():
                streams = [chunk_ticks(fetch, half, renew) for half in halves]
                async for tick in amerge(streams, descending=cursor.descending, key=cursor.key):
                    yield cursor.returned(tick)
                    if cursor.done:
                        return
                return


class _Descending:
    """A sort key that orders in reverse, for the min-heap of a newest-first merge."""

    __slots__ = ("key",)

    def __init__(self, key: Any) -> None:
        self.key = key

    def __lt__(self, other: _Descending) -> bool:
        return bool(other.key < self.key)


async def amerge(
    streams: Sequence[AsyncIterator[Tick]], *, descending: bool, key: Key = sort_key
) -> AsyncIterator[Tick]:
    """Merge async streams each sorted by ``key`` (by default (timestamp, id)) in the query's
    direction, pulling one tick at a time; every stream's first tick is awaited together."""
    order: Callable[[Tick], Any] = (lambda t: _Descending(key(t))) if descending else key
    firsts = await asyncio.gather(*(anext(s, None) for s in streams))
    heap = [(order(t), i, t) for i, t in enumerate(firsts) if t is not None]
    heapq.heapify(heap)
    while heap:
        _, i, tick = heap[0]
        yield tick
        following = await anext(streams[i], None)
        if following is None:
            heapq.heappop(heap)
        else:
            heapq.heapreplace(heap, (order(following), i, following))


async def aname_stops(
    plan: QueryPlan, ticks: AsyncIterator[Tick], read_time: dt.datetime | None
) -> AsyncIterator[Tick]:
    """``ticks``, with an expired snapshot or faults past the budget turned into the engine's
    named errors."""
    returned, last = 0, None
    try:
        async for last in ticks:
            yield last
            returned += 1
    except (gexc.FailedPrecondition, FaultError) as exc:
        reraise_stopped(plan, exc, returned=returned, last=last, read_time=read_time)
