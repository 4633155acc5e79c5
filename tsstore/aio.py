"""The asyncio store: :class:`AsyncTimeSeriesStore` over ``firestore.AsyncClient``.

The same verbs as :class:`~tsstore.store.TimeSeriesStore`, on the same planner, the same
read engine (:class:`~tsstore.read.engine.PageRounds` and
:class:`~tsstore.read.engine.ChunkCursor`, driven by :mod:`tsstore.read.async_engine`) and
the same write preparation and bulk sender (:mod:`tsstore.store_base`); only the transport
differs. Reads run on the event loop: a query's chunk queries are gathered, with no thread
per query. Writes and purges run the bulk sender in one worker thread whose batches are sent
on the event loop.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pandas as pd
from google.cloud import firestore

from tsstore import faults
from tsstore.errors import ConfigError, TsstoreError
from tsstore.frames import FrameBatcher, ticks_to_frame
from tsstore.live.listen import LIVENESS_CHECK
from tsstore.live.state import TailTick, WindowUpdate
from tsstore.read.aggregate import Aggregates
from tsstore.read.async_engine import AsyncFetch, amerge, aname_stops, aread_page, chunk_ticks
from tsstore.read.census import Ask, FirstValue, ShardCensus
from tsstore.read.chunks import chunk_query
from tsstore.read.cost import ReadStats
from tsstore.read.cursor import decode_cursor
from tsstore.read.engine import ChunkCursor, Position, chunk_cursors, finish_page, sweep_cursor
from tsstore.read.latest import LatestRequest
from tsstore.read.plan import QueryPlan
from tsstore.read.query import Query
from tsstore.spec import SeriesSpec
from tsstore.store import TimeSeriesStore
from tsstore.store_base import (
    _CLOCK_PROBE_ID,
    COUNT_OPTIONS,
    DEFAULT_CONCURRENCY,
    DEFAULT_PAGE_SIZE,
    Part,
    PurgeResult,
    StoreBase,
    WriteOptions,
    WriteResult,
    _Job,
    whole,
)
from tsstore.ticks import Page, Tick
from tsstore.wire import Stored, WriteOp, WriteStatus, abatch_write, aget_documents, astream_ticks, sync_twin
from tsstore.write.prepare import PreparedDoc

T = TypeVar("T")


class AsyncTimeSeriesStore(StoreBase):
    """Write and query one sharded time-series collection from asyncio.

    >>> store = AsyncTimeSeriesStore(firestore.AsyncClient(), SeriesSpec("instruments"))
    >>> page = await store.query(limit=10)                 # doctest: +SKIP
    >>> async for tick in store.iter_ticks(start=...):     # doctest: +SKIP
    ...     ...

    Series counters (``spec.count_by``) need the sync store: their increments are
    transactions of the sync client.
    """

    def __init__(
        self,
        client: firestore.AsyncClient,
        spec: SeriesSpec,
        *,
        write_options: WriteOptions = WriteOptions(),
        page_size: int = DEFAULT_PAGE_SIZE,
        lean: bool = True,
        max_concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        super().__init__(spec, write_options=write_options, page_size=page_size, lean=lean)
        if spec.count_by:
            raise ConfigError(
                f"spec for {spec.collection!r} keeps series counters (count_by {list(spec.count_by)!r}); "
                "AsyncTimeSeriesStore does not: use TimeSeriesStore for it, or a spec without count_by"
            )
        self.client = client
        self._collection = client.collection(spec.collection)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._listener_store: TimeSeriesStore | None = None
        if max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be at least 1, got {max_concurrency!r}")
        # Held from sending a query until its first response (the emulator computes a whole
        # query before answering), not while the caller consumes the stream: a merge keeps
        # every chunk's stream open at once, and must not wait on itself.
        self._gate = asyncio.Semaphore(max_concurrency)

    # ------------------------------------------------------------------ writing

    async def write(self, records: Iterable[Mapping[str, Any]] | pd.DataFrame, /, **options: Any) -> WriteResult:
        """:meth:`TimeSeriesStore.write <tsstore.store.TimeSeriesStore.write>`, awaited: the same
        options, result and errors. Callbacks run in the writer's worker thread."""
        self._loop = asyncio.get_running_loop()
        return await asyncio.to_thread(lambda: self._write_job(records, **options).run())

    async def purge(self, query: Query | None = None, /, **options: Any) -> PurgeResult:
        """:meth:`TimeSeriesStore.purge <tsstore.store.TimeSeriesStore.purge>`, awaited."""
        request = self._purge_request(query, options)
        plan, matched = request.plan, await self.count(request.bounds)
        if request.dry_run:
            return PurgeResult(matched=matched, deleted=0, dry_run=True)
        loop = self._loop = asyncio.get_running_loop()
        sender = self._sender(on_progress=request.on_progress)

        async def doomed() -> AsyncIterator[PreparedDoc]:
            fetch, stats = self._fetcher(plan), ReadStats()
            for chunk in plan.chunks:
                i = 0
                async for tick in chunk_ticks(fetch, sweep_cursor(chunk, plan, stats)):
                    yield PreparedDoc(i, tick.id, None, 0)
                    i += 1

        def result() -> PurgeResult:
            return PurgeResult(matched=matched, deleted=sender.counts["deleted"], dry_run=False)

        return await asyncio.to_thread(_Job(sender, _pulled(doomed(), loop), result, "purge").run)

    # ------------------------------------------------------------------ reading

    async def query(self, query: Query | None = None, /, **options: Any) -> Page:
        """One page (or, without a limit, every match), as :meth:`TimeSeriesStore.query
        <tsstore.store.TimeSeriesStore.query>`: same rows, order and cursors."""
        plan = self.plan(query, **options)
        stats = ReadStats()
        if plan.limit is None:
            return Page(tuple([tick async for tick in self._run(plan, stats)]), None, stats)
        after, snapshot = await self._start(plan, stats)
        ticks = await self._page(plan, after=after, rows=plan.limit + 1, read_time=snapshot, stats=stats)
        return finish_page(plan, ticks, stats)

    def iter_ticks(self, query: Query | None = None, /, **options: Any) -> AsyncTickStream:
        """Every matching tick as an async iterator (``async for``), lazily, in time order;
        its ``stats`` say what it has cost so far."""
        plan = self.plan(query, **options)
        stats = ReadStats()
        return AsyncTickStream(self._run(plan, stats), stats)

    async def query_frame(self, query: Query | None = None, /, **options: Any) -> pd.DataFrame:
        """The query's ticks as one DataFrame (:mod:`tsstore.frames` schema)."""
        return ticks_to_frame(self.spec, [tick async for tick in self.iter_ticks(query, **options)])

    async def stream_frames(
        self, query: Query | None = None, /, *, rows: int = 10_000, **options: Any
    ) -> AsyncIterator[pd.DataFrame]:
        """The query's ticks as DataFrames of at most ``rows`` rows (``async for``)."""
        batcher = FrameBatcher(self.spec, rows)
        async for tick in self.iter_ticks(query, **options):
            if (frame := batcher.add(tick)) is not None:
                yield frame
        if (frame := batcher.rest()) is not None:
            yield frame

    async def count(self, query: Query | None = None, /, *, stats: ReadStats | None = None, **options: Any) -> int:
        """:meth:`TimeSeriesStore.count <tsstore.store.TimeSeriesStore.count>`, awaited: the
        chunks' aggregations gathered at one snapshot."""
        plan = self.plan(query, **options)
        plan.query.only(COUNT_OPTIONS, "count")
        cost = stats if stats is not None else ReadStats()
        cost.chunks = len(plan.chunks)
        jobs = self._count_queries(plan)
        snapshot = await self._snapshot(plan, cost, parts=len(jobs))
        cost.waited()
        return self._counted(plan, list(await asyncio.gather(*(self._count(job, snapshot, cost) for job in jobs))))

    async def aggregate(
        self,
        query: Query | None = None,
        /,
        *,
        count: bool = True,
        sum: Iterable[str] = (),
        avg: Iterable[str] = (),
        stats: ReadStats | None = None,
        **options: Any,
    ) -> Aggregates:
        """:meth:`TimeSeriesStore.aggregate <tsstore.store.TimeSeriesStore.aggregate>`, awaited."""
        plan, request, jobs = self._aggregate_jobs(query, options, count=count, sum=sum, avg=avg)
        cost = stats if stats is not None else ReadStats()
        cost.chunks = len(plan.chunks)
        snapshot = await self._snapshot(plan, cost, parts=len(jobs))
        cost.waited()

        async def run(job: Part) -> list[dict[str, Any]]:
            values, aggregation = job

            async def ask(part: Sequence[str]) -> dict[str, Any]:
                [results] = await aggregation(part).get(read_time=snapshot, retry=None)
                return {r.alias: r.value for r in results}

            what = f"aggregating shard value(s) {', '.join(values)}"
            return await self._gated_parts(ask, values, what=what, divisible=snapshot is not None)

        answers = await asyncio.gather(*(run(job) for job in jobs))
        return self._aggregated(request, (a for parts in answers for a in parts), cost)

    async def latest(
        self,
        query: Query | None = None,
        /,
        *,
        by: str,
        values: Iterable[Any],
        stats: ReadStats | None = None,
        **options: Any,
    ) -> pd.DataFrame:
        """:meth:`TimeSeriesStore.latest <tsstore.store.TimeSeriesStore.latest>`, awaited."""
        request = LatestRequest.planned(self.spec, self.plan, by=by, values=values, query=query, options=options)
        cost = stats if stats is not None else ReadStats()
        cost.chunks = request.queries
        snapshot = await self._snapshot(request.plans[0], cost, parts=request.queries)
        cost.waited()

        async def newest(i: int, plan: QueryPlan, cursor: ChunkCursor) -> tuple[int, list[Tick]]:
            return i, [tick async for tick in chunk_ticks(self._fetcher(plan), cursor)]

        found = await asyncio.gather(*(newest(*job) for job in request.cursors(snapshot, cost)))
        return request.frame(found)

    async def shard_census(self, *, since: object = None, read_time: dt.datetime | None = None) -> ShardCensus:
        """:meth:`TimeSeriesStore.shard_census <tsstore.store.TimeSeriesStore.shard_census>`, awaited."""
        stats = ReadStats()
        snapshot = read_time or await self._probe(stats)
        census = self._census(since=since, read_time=snapshot, stats=stats)
        asks = census.first()
        while asks:
            stats.waited()
            asks = census.feed(list(await asyncio.gather(*(self._answer(a, snapshot, stats) for a in asks))))
        return census.result()

    def watch(self, query: Query | None = None, /, *, limit: int, **options: Any) -> AsyncLive[WindowUpdate]:
        """:meth:`TimeSeriesStore.watch <tsstore.store.TimeSeriesStore.watch>` as an async
        iterator (``async for update in store.watch(limit=20)``): the same listeners and merge,
        run by the sync client's listeners on this client's database."""
        Query.of(query, {**options, "limit": limit}).only(("where", "limit", "columns"), "watch")
        return AsyncLive(lambda: self._listening().watch(query, limit=limit, **options), "next_update")

    def tail(self, query: Query | None = None, /, **options: Any) -> AsyncLive[TailTick]:
        """:meth:`TimeSeriesStore.tail <tsstore.store.TimeSeriesStore.tail>` as an async iterator."""
        Query.of(query, {k: v for k, v in options.items() if k not in ("since", "lateness", "hold")}).only(
            ("where", "columns"), "tail"
        )
        return AsyncLive(lambda: self._listening().tail(query, **options), "next_tick")

    def _listening(self) -> TimeSeriesStore:
        """The sync store whose listeners the live verbs use (made on first use)."""
        if self._listener_store is None:
            self._listener_store = TimeSeriesStore(sync_twin(self.client), self.spec)
        return self._listener_store

    async def server_time(self) -> dt.datetime:
        """The database's current time (one read of a document that does not exist)."""
        probe = self._collection.document(_CLOCK_PROBE_ID)
        snap = await faults.acall(
            lambda: probe.get(field_paths=[self.spec.timestamp_field], retry=None), what="reading the server's time"
        )
        if snap.read_time is None:  # pragma: no cover - the API always sets it
            raise TsstoreError("Firestore returned no read time")
        return snap.read_time

    # ------------------------------------------------------------------ internals

    async def _start(self, plan: QueryPlan, stats: ReadStats) -> tuple[Position | None, dt.datetime | None]:
        cursor = plan.query.cursor
        return (decode_cursor(plan, cursor) if cursor is not None else None), await self._snapshot(plan, stats)

    async def _snapshot(self, plan: QueryPlan, stats: ReadStats, *, parts: int | None = None) -> dt.datetime | None:
        read_time = plan.query.read_time
        if read_time is not None or (parts or len(plan.chunks)) == 1:
            return read_time
        return await self._probe(stats)

    async def _probe(self, stats: ReadStats) -> dt.datetime:
        stats.query_done(0)
        stats.waited()
        return await self.server_time()

    async def _gated(self, call: Callable[[], Awaitable[T]], *, what: str) -> T:
        """One call through the gate, tried again after faults (the gate is not held while
        it pauses between attempts)."""
        [answer] = await self._gated_parts(lambda _values: call(), (), what=what, divisible=False)
        return answer

    async def _gated_parts(
        self, call: Callable[[Sequence[str]], Awaitable[T]], values: Sequence[str], *, what: str, divisible: bool
    ) -> list[T]:
        """``call(values)`` through the gate, tried again after faults, and asked in parts
        when it keeps failing (:func:`tsstore.faults.acall_split`)."""

        async def attempt(part: Sequence[str]) -> T:
            async with self._gate:
                return await call(part)

        return await faults.acall_split(attempt, values, what=what, divisible=divisible)

    async def _count(self, job: Part, read_time: dt.datetime | None, cost: ReadStats) -> int:
        """The count of ``job``'s query (summed over its parts when the whole kept failing)."""
        values, query = job

        async def count(part: Sequence[str]) -> int:
            [[result]] = await query(part).count().get(read_time=read_time, retry=None)
            cost.aggregation_done(int(result.value))
            return int(result.value)

        return sum(await self._gated_parts(count, values, what="counting ticks", divisible=read_time is not None))

    async def _answer(self, ask: Ask, read_time: dt.datetime, cost: ReadStats) -> int | str | None:
        query: Any = self._census_query(ask)
        if not isinstance(ask, FirstValue):
            return await self._count(whole(query), read_time, cost)
        docs = await self._gated(lambda: query.get(read_time=read_time, retry=None), what="reading the shard census")
        cost.query_done(len(docs))
        return docs[0].get(self.spec.shard_field) if docs else None

    async def _run(self, plan: QueryPlan, stats: ReadStats) -> AsyncIterator[Tick]:
        after, snapshot = await self._start(plan, stats)
        if plan.limit is not None and plan.limit <= self._page_size:
            for tick in await self._page(plan, after=after, rows=plan.limit, read_time=snapshot, stats=stats):
                yield tick
            return
        fetch = self._fetcher(plan)
        streams = [
            chunk_ticks(fetch, cursor, self.server_time) for cursor in chunk_cursors(plan, after, snapshot, stats)
        ]
        returned = 0
        async for tick in aname_stops(plan, amerge(streams, descending=plan.descending), snapshot):
            yield tick
            returned += 1
            if returned == plan.limit:
                return

    async def _page(
        self, plan: QueryPlan, *, after: Position | None, rows: int, read_time: dt.datetime | None, stats: ReadStats
    ) -> list[Tick]:
        rounds = self._page_rounds(plan, after=after, rows=rows, read_time=read_time, stats=stats)
        return await aread_page(rounds, fetch=self._fetcher(plan))

    def _fetcher(self, plan: QueryPlan) -> AsyncFetch:
        async def fetch(
            chunk: tuple[str, ...], after: Position | None, limit: int | None, read_time: dt.datetime | None
        ) -> AsyncIterator[Tick]:
            query = chunk_query(self._collection, plan, chunk, after, limit)
            async with self._gate:
                return await astream_ticks(query, timestamp_field=self.spec.timestamp_field, read_time=read_time)

        return fetch

    def _transport(
        self,
    ) -> tuple[Callable[[list[WriteOp]], list[WriteStatus]], Callable[[list[str]], dict[str, Stored]]]:
        loop = self._loop
        assert loop is not None, "write() and purge() set the loop before they make a sender"

        def send(writes: list[WriteOp]) -> list[WriteStatus]:
            return _on_loop(abatch_write(self._collection, writes), loop)

        def lookup(ids: list[str]) -> dict[str, Stored]:
            return _on_loop(aget_documents(self._collection, ids), loop)

        return send, lookup


class AsyncLive(AsyncIterator[T]):
    """A live watch or tail of the sync store's engine, as an async iterator: each step waits
    in a worker thread (listeners exist on the sync client only), so the event loop never
    blocks. ``async with`` or :meth:`close` stops every listener."""

    def __init__(self, start: Callable[[], Any], step: str) -> None:
        self._start = start
        self._step = step
        self._live: Any = None
        self._closed = False

    async def next(self, timeout: float | None = None) -> T | None:
        """The next item, or ``None`` after ``timeout`` seconds without one or once closed."""
        if self._live is None:
            self._live = await asyncio.to_thread(self._start)
            if self._closed:
                self._live.close()
        result: T | None = await asyncio.to_thread(getattr(self._live, self._step), timeout)
        return result

    async def __anext__(self) -> T:
        while not self._closed:
            item = await self.next(LIVENESS_CHECK)
            if item is not None:
                return item
            if self._live.closed:
                break
        raise StopAsyncIteration

    def close(self) -> None:
        self._closed = True
        if self._live is not None:
            self._live.close()

    async def __aenter__(self) -> AsyncLive[T]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()


class AsyncTickStream(AsyncIterator[Tick]):
    """The ticks of :meth:`AsyncTimeSeriesStore.iter_ticks`, and ``stats``: what reading
    them has cost so far."""

    def __init__(self, ticks: AsyncIterator[Tick], stats: ReadStats) -> None:
        self._ticks = ticks
        self.stats = stats

    async def __anext__(self) -> Tick:
        return await anext(self._ticks)


def _on_loop(coroutine: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> T:
    """Run ``coroutine`` on ``loop`` from a worker thread and wait for its result."""
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result()


def _pulled(ticks: AsyncIterator[T], loop: asyncio.AbstractEventLoop) -> Iterator[T]:
    """An async iterator read from a worker thread, one item at a time on ``loop``."""
    while True:
        try:
            yield _on_loop(anext(ticks), loop)  # type: ignore[arg-type]
        except StopAsyncIteration:
            return
