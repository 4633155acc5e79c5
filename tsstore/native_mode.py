"""How a store answers in Firestore's Native mode, on :class:`~tsstore.native_queries.NativeQueries`:
the sync store's answers on a ``firestore.Client`` (:class:`NativeAnswers`, a
:class:`~tsstore.backend.Backend`), the async store's on a ``firestore.AsyncClient``
(:class:`AsyncNativeAnswers`, an :class:`~tsstore.backend.AsyncBackend`), a writer's side
(:class:`FirestoreSide`) and the client's real-time listeners (:func:`listener`)."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
from collections.abc import Callable
from typing import Any

from google.cloud.firestore_v1.watch import ChangeType

from tsstore.asks import DocAsk
from tsstore.clock import ServerClock, local_us
from tsstore.live.listen import ChunkQuery, Listen, OnSnapshot, Subscription
from tsstore.logs import backend_fields
from tsstore.native_queries import NativeQueries
from tsstore.read.async_engine import AsyncFetch
from tsstore.read.chunks import chunk_query
from tsstore.read.engine import Fetch
from tsstore.read.plan import QueryPlan
from tsstore.series_counters import SeriesCounters
from tsstore.spec import SeriesSpec
from tsstore.verbs.reading import clock_probe
from tsstore.verbs.request import Aggregate, Count, DatabaseAsk, Documents
from tsstore.wire import (AONE_ATTEMPT, ONE_ATTEMPT, aanswer_document, answer_document, late_guard, listen,
                          loop_transport, server_clock, sync_twin, transport)  # fmt: skip
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


def listener(queries: NativeQueries) -> Listen:
    """The real-time listeners of ``queries``' client (a sync client's only:
    :func:`tsstore.wire.listen`), one per chunk's query, reporting each snapshot's documents and
    its additions."""

    def listening(query: ChunkQuery, on_snapshot: OnSnapshot, /, *, ordered: bool) -> Subscription:
        native = chunk_query(queries.collection(query.plan.spec), query.plan, query.chunk, None, query.limit)

        def reported(docs: list[Any], changes: list[Any], read_time: dt.datetime) -> None:
            on_snapshot(docs, [change.document for change in changes if change.type is ChangeType.ADDED], read_time)

        subscription: Subscription = listen(native, reported, ordered=ordered)
        return subscription

    return listening


def _query(queries: NativeQueries, ask: Count | Aggregate | Documents) -> Any:
    """The query ``ask`` sends: a count, an aggregation, or a census read."""
    if isinstance(ask, Documents):
        return queries.over(ask.over)
    return queries.aggregation(ask.over, None if isinstance(ask, Count) else ask.aggregations)


def _answer(queries: NativeQueries, ask: Count | Aggregate | Documents, got: Any, sent: int) -> Any:
    """The answer to ``ask`` from what its query (sent then) returned: the count,
    ``{alias: value}`` or the documents, their read time told to the project's clock."""
    pinned = ask.read_time is not None
    if isinstance(ask, Documents):
        return queries.docs(got, sent, pinned=pinned)
    return queries.aggregated(got, sent, count=isinstance(ask, Count), pinned=pinned)


class NativeAnswers:
    """The sync store's answers in Native mode, on a ``firestore.Client`` (``fast``: queries
    and writes through the client's own gRPC stub)."""

    def __init__(self, client: Any, spec: SeriesSpec, *, fast: bool) -> None:
        self.client, self._fast = client, fast
        self.fields = backend_fields("native", spec.collection)
        self.queries = NativeQueries(client, spec)
        self.side = FirestoreSide(lambda: client)
        self.clock: ServerClock = server_clock(client)

    def collection(self, spec: SeriesSpec) -> Any:
        return self.queries.collection(spec)

    def listener(self) -> Listen:
        """The client's real-time listeners."""
        return listener(self.queries)

    def answer(self, ask: DatabaseAsk) -> Any:
        """The answer to ``ask``, one attempt (:class:`~tsstore.backend.Backend`)."""
        if isinstance(ask, DocAsk):
            return answer_document(self.client, ask)
        query, sent = _query(self.queries, ask), local_us()
        return _answer(self.queries, ask, query.get(read_time=ask.read_time, retry=ONE_ATTEMPT), sent)

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
        self.fields = backend_fields("native", spec.collection)
        self.queries = NativeQueries(client, spec)
        self.side = FirestoreSide(lambda: self._twin)
        self.clock: ServerClock = server_clock(client)
        self._gate = asyncio.Semaphore(concurrency)

    @functools.cached_property
    def _twin(self) -> Any:
        return sync_twin(self.client)

    def collection(self, spec: SeriesSpec) -> Any:
        return self.queries.collection(spec)

    def listener(self) -> Listen:
        """The sync twin's listeners (listeners exist on sync clients only)."""
        return listener(NativeQueries(self._twin, self._spec))

    async def answer(self, ask: DatabaseAsk) -> Any:
        """The answer to ``ask``, one attempt; a query waits for the gate to be sent."""
        if isinstance(ask, DocAsk):
            return await aanswer_document(self.client, ask)
        query = _query(self.queries, ask)
        async with self._gate:
            sent = local_us()
            got = await query.get(read_time=ask.read_time, retry=AONE_ATTEMPT)
        return _answer(self.queries, ask, got, sent)

    def fetcher(self, plan: QueryPlan) -> AsyncFetch:
        return self.queries.afetcher(plan, gate=self._gate)

    def transport(self, collection: Any, *, timeout: float) -> Transport:
        """The sender's transport on ``collection``, run on the loop it is made on."""
        return loop_transport(collection, timeout=timeout)

    def close(self) -> None:
        """Close the sync twin, if one was made."""
        if "_twin" in self.__dict__:
            self._twin.close()
