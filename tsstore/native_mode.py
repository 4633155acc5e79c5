"""How a store answers in Firestore's Native mode (the database as a store asks of it, in Native mode): the
queries a count, an aggregation or a census read runs over, built on a sync or an
async client's collections (:class:`NativeQueries`, which the async store awaits), and the
sync store's answers on a ``firestore.Client`` (:class:`NativeAnswers`: a
:class:`~tsstore.backend.Backend`, as :class:`~tsstore.datastore_mode.DatastoreAnswers` is
Datastore mode's)."""

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
from tsstore.wire import (ONE_ATTEMPT, answer_document, astream_ticks, doc_of, late_guard, listen, server_clock,
                          stream_ticks, told_clock, transport)  # fmt: skip
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
