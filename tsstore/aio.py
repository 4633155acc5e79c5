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
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import pandas as pd
from google.cloud import firestore

from tsstore import faults
from tsstore.errors import ConfigError
from tsstore.frames import aframes
from tsstore.live.listen import LIVENESS_CHECK
from tsstore.live.state import TailTick, WindowUpdate
from tsstore.read.async_engine import AsyncFetch, aread_ticks, chunk_ticks
from tsstore.read.chunks import chunk_query
from tsstore.read.cost import ReadStats
from tsstore.read.engine import Position, TickRead, sweep_cursor
from tsstore.read.plan import QueryPlan
from tsstore.read.query import Query
from tsstore.spec import SeriesSpec
from tsstore.store import TimeSeriesStore
from tsstore.store_base import (
    DEFAULT_CONCURRENCY,
    DEFAULT_PAGE_SIZE,
    PurgeResult,
    StoreBase,
    WriteOptions,
    WriteResult,
    _Job,
)
from tsstore.ticks import Tick
from tsstore.verbs import reading
from tsstore.verbs.request import (
    Aggregation,
    AsyncTickStream,
    Collect,
    Documents,
    Feed,
    LoopDriver,
    Reading,
    Request,
    Unary,
    aanswer,
)
from tsstore.wire import Stored, WriteOp, WriteStatus, abatch_write, aget_documents, astream_ticks, sync_twin
from tsstore.write.prepare import PreparedDoc

R = TypeVar("R")
T = TypeVar("T")


class AsyncTimeSeriesStore(StoreBase, LoopDriver):
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
        super().__init__(spec, client, write_options=write_options, page_size=page_size,
                         lean=lean)  # fmt: skip
        if spec.count_by:
            raise ConfigError(
                f"spec for {spec.collection!r} keeps series counters (count_by {list(spec.count_by)!r}); "
                "AsyncTimeSeriesStore does not: use TimeSeriesStore for it, or a spec without count_by"
            )
        self.client = client
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

    # ------------------------------------------------------------------ the driver

    async def _run(self, request: Request[R]) -> R:
        """Run a verb's request, answering its asks on the event loop."""
        return await aanswer(request, self._answer)

    async def _answer(self, ask: Any) -> Any:
        match ask:
            case list():  # concurrently, on the loop
                return list(await asyncio.gather(*map(self._answer, ask)))
            case Aggregation(read_time=read_time):

                async def aggregate(values: Sequence[str]) -> Any:
                    async with self._gate:
                        return ask.answered(await ask.query(values).get(read_time=read_time, retry=None))

                answers = await faults.acall_split(aggregate, ask.values, what=ask.what, divisible=ask.divisible)
                return ask.total(answers)
            case Documents(query=query, read_time=read_time):

                async def documents() -> Any:
                    async with self._gate:
                        return await query.get(read_time=read_time, retry=None)

                return ask.answered(await faults.acall(documents, what=ask.what))
            case Collect(read=read):
                return [tick async for tick in self._ticks(read)]
            case Feed(read=read, sink=sink):
                async for tick in self._ticks(read):
                    sink(tick)
                return None
            case Unary(call=call, what=what):
                return await faults.acall(lambda: call(self.client), what=what)
        raise TypeError(f"no answer for {ask!r}")  # pragma: no cover - every ask is answered above

    def _stream(self, reading: Reading[T]) -> AsyncTickStream[T]:
        async def items() -> AsyncIterator[Any]:
            opening = reading.opening
            ticks = self._ticks(opening if isinstance(opening, TickRead) else await self._run(opening))
            if reading.rows is None:
                async for tick in ticks:
                    yield tick
                return
            async for frame in aframes(reading.spec, ticks, rows=reading.rows):
                yield frame

        return AsyncTickStream(items(), reading.stats)

    def _ticks(self, read: TickRead) -> AsyncIterator[Tick]:
        return aread_ticks(
            read, fetch=self._fetcher(read.plan), renew=lambda: self._run(reading.server_time(self.seat))
        )

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
