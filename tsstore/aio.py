"""The asyncio store: :class:`AsyncTimeSeriesStore` over ``firestore.AsyncClient``.

The same verbs as :class:`~tsstore.store.TimeSeriesStore` (:class:`~tsstore.verbs.Verbs`,
each one request), answered on the event loop by its backend
(:func:`~tsstore.backend.abackend_for`): a list of asks is gathered, a chunk query is awaited
(in Native mode through :mod:`tsstore.wire`, no thread per query; at most ``max_concurrency``
wait on the server at once). A bulk send runs the sender in one worker thread, which takes a
read's ticks from the loop a batch at a time. A series counter's asks are answered on the loop
too (:class:`~tsstore.counters.AsyncCounter`). In Datastore mode and on the memory database (no
asyncio client exists) each call to the database is made in a worker thread, and a chunk's
ticks hop from the loop a batch at a time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, TypeVar, assert_never

from google.cloud import firestore

from tsstore.analytics.asof import JoinRead
from tsstore.asks import Asking, DatabaseAsking, KnownTime
from tsstore.backend import AsyncBackend, aanswered, abackend_for
from tsstore.cold.objects import DeleteObject, GetObject, ListObjects, ObjectUrls, PutObject
from tsstore.counting import AsyncCounter
from tsstore.errors import ConfigError
from tsstore.frames import aframes
from tsstore.live.aio import AsyncLive
from tsstore.live.listen import ListenTail, ListenWindow, start
from tsstore.read.async_engine import aread_ticks, chained, pulled, pushed
from tsstore.read.cold import ColdRead, TieredRead, cold_ticks
from tsstore.series_counters import counter_path
from tsstore.spec import SeriesSpec
from tsstore.store_base import DEFAULT_CONCURRENCY, DEFAULT_PAGE_SIZE, StoreBase
from tsstore.ticks import Tick
from tsstore.verbs import declare, reading
from tsstore.verbs import request as asks
from tsstore.verbs.request import Readable, Snapshots
from tsstore.write.options import WriteOptions

R = TypeVar("R")
T = TypeVar("T")


class AsyncTimeSeriesStore(StoreBase[AsyncBackend], declare.LoopDriver):
    """Write and query one sharded time-series collection from asyncio: every verb of
    :class:`~tsstore.store.TimeSeriesStore` with the same options, awaited
    (``await store.query(limit=10)``), streams as async iterators (``async for tick in
    store.iter_ticks(start=...)``), over a ``firestore.AsyncClient``.

    - ``client``: a ready ``google.cloud.firestore.AsyncClient``, or a
      ``google.cloud.datastore.Client`` for a database in Datastore mode, or a
      :class:`~tsstore.memory.MemoryDatabase` (neither has an asyncio client: each call to the
      database is then made in a worker thread, and a cancelled await leaves its thread to
      finish the call); the store never closes it.
    - ``spec``: the :class:`~tsstore.spec.SeriesSpec` of the collection.
    - ``write_options``: the writer's pace, ramp, batch size and retries
      (:class:`~tsstore.write.options.WriteOptions`).
    - ``page_size``: the largest ``limit`` read as one lean page (default 2000).
    - ``lean``: read each chunk its share of a page first, then refill (the default).
    - ``max_concurrency``: chunk queries sent at once; more wait their turn (default 8).
    - ``snapshots``: ``"estimated"`` (the default) or ``"read"``, as :class:`~tsstore.store.TimeSeriesStore`'s.
    """

    client: firestore.AsyncClient

    def __init__(
        self,
        client: firestore.AsyncClient,
        spec: SeriesSpec,
        *,
        write_options: WriteOptions = WriteOptions(),
        page_size: int = DEFAULT_PAGE_SIZE,
        lean: bool = True,
        max_concurrency: int = DEFAULT_CONCURRENCY,
        snapshots: Snapshots = "estimated",
    ) -> None:
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be at least 1, got {max_concurrency!r}")
        # the backend (made once the options are checked) refuses a firestore.Client by name
        super().__init__(spec, client, lambda: abackend_for(client, spec, concurrency=max_concurrency),
                         write_options=write_options, page_size=page_size, lean=lean, snapshots=snapshots)  # fmt: skip
        self._counters: dict[tuple[Any, ...], AsyncCounter] = {}

    def close(self) -> None:
        """Close what the store made: the sync client made for listeners and bulk jobs, if one
        was, or the worker threads of a database without an asyncio client (the client stays
        open: it is the caller's)."""
        self._backend.close()

    async def __aenter__(self) -> AsyncTimeSeriesStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the driver

    async def _run(self, request: asks.Request[R]) -> R:
        """Run a verb's request, answering its asks on the event loop."""
        return await asks.aanswer(request, self._answer)

    async def _answer(self, asked: asks.Ask) -> object:
        if not isinstance(asked, Asking):  # concurrently, on the loop
            return list(await asyncio.gather(*map(self._answer, asked)))
        backend = self._backend
        match ask := asks.question(asked):
            case DatabaseAsking():  # counts, aggregations, a census's documents, document asks
                return await aanswered(backend, ask)
            case asks.Collect(read=read):
                return [tick async for tick in self._ticks(read)]
            case asks.Feed(read=read, sink=sink):
                async for tick in self._ticks(read):
                    sink.add(tick)
                return None
            case PutObject() | GetObject() | ListObjects() | DeleteObject() | ObjectUrls():
                return await asyncio.to_thread(self._answer_object, ask)
            case asks.Send(read=read):
                loop = asyncio.get_running_loop()
                ticks = pulled(self._ticks(read), loop) if read is not None else iter(())
                return await asyncio.to_thread(self._writer.job(ask, ticks).run)
            case KnownTime():
                return self._time(ask)
            case asks.Pause(seconds=seconds):
                await asyncio.sleep(seconds)
                return None
            case asks.CounterFor(values=values):
                return await self._counter(values)
            case ListenWindow() | ListenTail():  # listeners exist on sync clients only: started in a thread
                return await asyncio.to_thread(start, ask, backend.listener())
            case unanswered:
                assert_never(unanswered)

    async def _counter(self, values: tuple[Any, ...]) -> AsyncCounter:
        """The counter of one series, made once per store, its document asks answered by the backend."""
        if values not in self._counters:
            counter = AsyncCounter(counter_path(self.spec, values), answer=self._backend.answer)
            await counter.create(shards=self.spec.counter_shards)
            self._counters[values] = counter
        return self._counters[values]

    def _stream(self, reading: declare.Reading[T]) -> declare.AsyncTickStream[T]:
        async def items() -> AsyncIterator[Any]:
            opening = reading.opening
            ticks = self._ticks(opening if isinstance(opening, asks.READABLE) else await self._run(opening))
            async for item in (
                ticks
                if reading.rows is None
                else aframes(reading.spec, ticks, rows=reading.rows, columns=reading.columns, arrow=reading.arrow)
            ):
                yield item

        return declare.AsyncTickStream(items(), reading.stats)

    def _listen(self, listening: declare.Listening[object, T]) -> AsyncLive[T]:
        self._backend.listener()  # refused before anything is read where none listen
        return AsyncLive(lambda: self._run(listening.opening), listening.step)

    def _ticks(self, read: Readable) -> AsyncIterator[Tick]:
        if isinstance(read, JoinRead):
            return read.ajoined(self._ticks(read.left), self._ticks(read.right))
        if isinstance(read, TieredRead):
            return chained([self._ticks(part) for part in read.parts], read.limit)
        if isinstance(read, ColdRead):
            return pushed(cold_ticks(read, self._object_bytes))
        fetch = self._backend.fetcher(read.plan)
        return aread_ticks(read, fetch=fetch, renew=lambda: self._run(reading.server_time(self.seat)))
