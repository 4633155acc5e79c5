"""How a store answers in Firestore's Native mode: the queries a count, an aggregation, a census
read or a chunk fetch runs, built on a sync or an async client's collections
(:class:`NativeQueries`), and a store's answers on them (a :class:`~tsstore.backend.Backend` on
a ``firestore.Client``, :class:`NativeAnswers`; an :class:`~tsstore.backend.AsyncBackend` on a
``firestore.AsyncClient``, :class:`AsyncNativeAnswers`), with a writer's side
(:class:`FirestoreSide`)."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from google.cloud.firestore_v1.watch import ChangeType

from tsstore.asks import Doc, DocAsk
from tsstore.clock import ServerClock, local_us
from tsstore.layout.census import census_query
from tsstore.live.listen import ChunkQuery, Listen, OnSnapshot, Subscription
from tsstore.read.async_engine import AsyncFetch
from tsstore.read.chunks import Chunk, ChunkTicks, chunk_query
from tsstore.read.engine import Fetch
from tsstore.read.plan import QueryPlan
from tsstore.series_counters import SeriesCounters
from tsstore.spec import SeriesSpec
from tsstore.ticks import Position, Tick
from tsstore.verbs.reading import clock_probe
from tsstore.verbs.request import Aggregate, Count, Over
from tsstore.wire import (AONE_ATTEMPT, ONE_ATTEMPT, aanswer_document, answer_document, astream_ticks, doc_of, late_guard,
                          listen, loop_transport, server_clock, stream_ticks, sync_twin, told_clock, transport)  # fmt: skip
from tsstore.write.marks import LateGuard
from tsstore.write.ops import Transport


class FirestoreSide:
    """A Native-mode writer's side, on the sync client ``client()`` gives (made when first
    needed: the async store's sync twin)."""

    def __init__(self, client: Callable[[], Any]) -> None:
        self._client = client

    def late_guard(self, spec: SeriesSpec) -> LateGuard:
        return late_guard(self._client(), spec)

    def counters(self, spec: SeriesSpec) -> SeriesCounters:
        return SeriesCounters(spec, answer=functools.partial(answer_document, self._client()))

    def probe(self, spec: SeriesSpec) -> None:
        answer_document(self._client(), clock_probe(spec))

    def clock(self) -> ServerClock:
        return server_clock(self._client())


def aggregated(ask: Count | Aggregate, results: Any, clock: ServerClock, sent: int) -> Any:
    """One answer to ``ask`` from the client's aggregation results (of a call ``sent`` then):
    the count, or ``{alias: value}``; their read time told to ``clock`` (a lower bound only
    when the ask gave it: :func:`~tsstore.wire.told_clock`)."""
    [row] = results
    clock.saw(row[0].read_time if row else None, sent=sent, read=ask.read_time is None)
    if isinstance(ask, Count):
        [result] = row
        return int(result.value)  # the emulator reports an empty count as 0.0
    return {result.alias: result.value for result in row}


class NativeQueries:
    """The Firestore queries of the store of ``spec`` on ``client`` (sync or async: building a
    query is no call): a series' collection, what a count, an aggregation or a census read runs
    over, and the documents a query returned."""

    def __init__(self, client: Any, spec: SeriesSpec) -> None:
        self.client, self._spec = client, spec
        self._own = client.collection(spec.collection)

    def collection(self, spec: SeriesSpec) -> Any:
        """The collection of ``spec``: the store's own, or another one a request reads or
        writes (a roll-up's, the right side of an as-of join)."""
        return self._own if spec.collection == self._spec.collection else self.client.collection(spec.collection)

    def over(self, over: Over, values: Sequence[str]) -> Any:
        """The query of what a count, an aggregation or a census read runs over (``values``:
        the chunk's shard values, or a part of them)."""
        if isinstance(over, ChunkTicks):
            plan = over.plan
            return chunk_query(self.collection(plan.spec), plan, tuple(values), None, None, also_by=over.also_by)
        return census_query(self._own, self._spec, over)

    def aggregation(self, ask: Count | Aggregate, values: Sequence[str]) -> Any:
        """The aggregation query ``ask`` sends for ``values``."""
        query = self.over(ask.over, values)
        if isinstance(ask, Count):
            return query.count()
        for kind, alias, field in ask.aggregations:
            query = getattr(query, kind)(*(() if field is None else (field,)), alias=alias)
        return query

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
        sending to its first answer (not while the caller consumes it: a merge keeps every
        chunk open at once, and must not wait on itself)."""

        async def fetch(
            chunk: Chunk, after: Position | None, limit: int | None, read_time: dt.datetime | None
        ) -> AsyncIterator[Tick]:
            query = chunk_query(self.collection(plan.spec), plan, chunk, after, limit)
            async with gate:
                return await astream_ticks(query, timestamp_field=plan.spec.timestamp_field, read_time=read_time)

        return fetch

    def listen(self, query: ChunkQuery, on_snapshot: OnSnapshot, /, *, ordered: bool) -> Subscription:
        """The client's real-time listener on one chunk's query (a sync client's only:
        :func:`tsstore.wire.listen`), reporting each snapshot's documents and its additions."""
        native = chunk_query(self.collection(query.plan.spec), query.plan, query.chunk, None, query.limit)

        def reported(docs: list[Any], changes: list[Any], read_time: dt.datetime) -> None:
            on_snapshot(docs, [change.document for change in changes if change.type is ChangeType.ADDED], read_time)

        listener: Subscription = listen(native, reported, ordered=ordered)
        return listener

    def docs(self, snapshots: Any, sent: int, *, pinned: bool) -> list[Doc]:
        """The documents a query (sent then; ``pinned``: at a read time it was given) returned,
        their read time told to the project's clock."""
        found: list[Doc] = told_clock(self.client, [doc_of(snapshot) for snapshot in snapshots], sent, pinned=pinned)
        return found


class NativeAnswers:
    """The sync store's answers in Native mode, on a ``firestore.Client`` (``fast``: queries
    and writes through the client's own gRPC stub)."""

    def __init__(self, client: Any, spec: SeriesSpec, *, fast: bool) -> None:
        self.client, self._fast = client, fast
        self.queries = NativeQueries(client, spec)
        self.side = FirestoreSide(lambda: client)
        self.clock: ServerClock = server_clock(client)

    def collection(self, spec: SeriesSpec) -> Any:
        return self.queries.collection(spec)

    def listener(self) -> Listen:
        """The client's real-time listeners (:meth:`NativeQueries.listen`)."""
        return self.queries.listen

    def aggregate(self, ask: Count | Aggregate, values: Sequence[str]) -> Any:
        """The count, or ``{alias: value}``, of ``ask`` over ``values``."""
        query, sent = self.queries.aggregation(ask, values), local_us()
        return aggregated(ask, query.get(read_time=ask.read_time, retry=ONE_ATTEMPT), self.clock, sent)

    def documents(self, over: Over, read_time: dt.datetime | None) -> list[Doc]:
        """The documents a census ask names."""
        query, sent = self.queries.over(over, ()), local_us()
        return self.queries.docs(query.get(read_time=read_time, retry=ONE_ATTEMPT), sent, pinned=read_time is not None)

    def answer_document(self, ask: DocAsk) -> Any:
        return answer_document(self.client, ask)

    def fetcher(self, plan: QueryPlan) -> Fetch:
        """The engine's fetch of ``plan``'s chunks."""
        return self.queries.fetcher(plan, fast=self._fast)

    def transport(self, collection: Any, *, timeout: float) -> Transport:
        """The sender's transport on ``collection``."""
        return transport(collection, timeout=timeout, fast=self._fast)


class AsyncNativeAnswers:
    """The async store's answers in Native mode, on a ``firestore.AsyncClient``: its queries
    awaited on the loop, at most ``concurrency`` waiting on the server at once; what exists on a
    sync client only (listeners, a bulk job's late guard and series counters) on its sync twin
    (:func:`~tsstore.wire.sync_twin`, made when first needed), in worker threads."""

    def __init__(self, client: Any, spec: SeriesSpec, *, concurrency: int) -> None:
        self.client, self._spec = client, spec
        self.queries = NativeQueries(client, spec)
        self.side = FirestoreSide(lambda: self._twin)
        self.clock: ServerClock = server_clock(client)
        # Held from sending a query until its first response (the emulator computes a whole
        # query before answering), not while the caller consumes the stream: a merge keeps
        # every chunk's stream open at once, and must not wait on itself.
        self._gate = asyncio.Semaphore(concurrency)

    @functools.cached_property
    def _twin(self) -> Any:
        return sync_twin(self.client)

    def collection(self, spec: SeriesSpec) -> Any:
        return self.queries.collection(spec)

    def listener(self) -> Listen:
        """The sync twin's listeners (listeners exist on sync clients only)."""
        return NativeQueries(self._twin, self._spec).listen

    async def aggregate(self, ask: Count | Aggregate, values: Sequence[str]) -> Any:
        query = self.queries.aggregation(ask, values)
        async with self._gate:
            sent = local_us()
            return aggregated(ask, await query.get(read_time=ask.read_time, retry=AONE_ATTEMPT), self.clock, sent)

    async def documents(self, over: Over, read_time: dt.datetime | None) -> list[Doc]:
        query = self.queries.over(over, ())
        async with self._gate:
            sent = local_us()
            found = await query.get(read_time=read_time, retry=AONE_ATTEMPT)
            return self.queries.docs(found, sent, pinned=read_time is not None)

    async def answer_document(self, ask: DocAsk) -> Any:
        return await aanswer_document(self.client, ask)

    def fetcher(self, plan: QueryPlan) -> AsyncFetch:
        return self.queries.afetcher(plan, gate=self._gate)

    def transport(self, collection: Any, *, timeout: float) -> Transport:
        """The sender's transport on ``collection``, run on the loop it is made on."""
        return loop_transport(collection, timeout=timeout)

    def close(self) -> None:
        """Close the sync twin, if one was made."""
        if "_twin" in self.__dict__:
            self._twin.close()
