"""The asyncio store: :class:`AsyncTimeSeriesStore` over ``firestore.AsyncClient``.

The same verbs as :class:`~tsstore.store.TimeSeriesStore` (:class:`~tsstore.verbs.Verbs`,
each one request), answered on the event loop: a list of asks is gathered, a chunk query
is awaited through :mod:`tsstore.wire` (no thread per query; at most ``max_concurrency``
wait on the server at once). A bulk send runs the sender in one worker thread whose batches
are sent on the loop. A series counter's asks are answered on the loop too
(:class:`~tsstore.counters.AsyncCounter`). What runs on the sync client only (listeners, and the
bulk job's late guard and series counters) runs on its sync twin (:func:`~tsstore.wire.sync_twin`),
in worker threads.
In Datastore mode (a ``datastore.Client``: no asyncio client exists) the sync store answers
every ask in a worker thread, and streams hop from the loop a batch at a time.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
from collections.abc import AsyncIterator, Coroutine, Iterator, Sequence
from typing import Any, TypeVar, assert_never

from google.cloud import firestore

from tsstore import faults
from tsstore.analytics.asof import JoinRead
from tsstore.asks import Asking, CreateDoc, DeleteDoc, Doc, FindDocs, GetDoc, KnownTime, SetDoc, UpdateDoc
from tsstore.cold.objects import DeleteObject, GetObject, ListObjects, ObjectUrls, PutObject
from tsstore.clock import local_us
from tsstore.counters import AsyncCounter, AsyncDocumentAnswers
from tsstore.errors import ConfigError
from tsstore.frames import aframes
from tsstore.live.aio import AsyncLive
from tsstore.memory import MemoryDatabase
from tsstore.live.listen import ListenTail, ListenWindow, start
from tsstore.native_mode import FirestoreSide, NativeQueries, aggregated
from tsstore.read.async_engine import aread_ticks
from tsstore.read.cold import ColdRead, TieredRead, cold_ticks
from tsstore.series_counters import counter_path
from tsstore.spec import SeriesSpec
from tsstore.store import TimeSeriesStore
from tsstore.store_base import DEFAULT_CONCURRENCY, DEFAULT_PAGE_SIZE, StoreBase, Writer, check_options
from tsstore.ticks import Tick
from tsstore.verbs import declare, reading
from tsstore.verbs import request as asks
from tsstore.verbs.request import Readable, Snapshots
from tsstore.wire import AONE_ATTEMPT, aanswer_document, abatch_write, aget_documents, server_clock, sync_twin
from tsstore.write.ops import Transport
from tsstore.write.options import EMULATOR_WRITE_OPTIONS, WriteOptions

R = TypeVar("R")
T = TypeVar("T")


class AsyncTimeSeriesStore(StoreBase, declare.LoopDriver):
    """Write and query one sharded time-series collection from asyncio: every verb of
    :class:`~tsstore.store.TimeSeriesStore` with the same options, awaited
    (``await store.query(limit=10)``), streams as async iterators (``async for tick in
    store.iter_ticks(start=...)``), over a ``firestore.AsyncClient``.

    - ``client``: a ready ``google.cloud.firestore.AsyncClient``, or a
      ``google.cloud.datastore.Client`` for a database in Datastore mode, or a
      :class:`~tsstore.memory.MemoryDatabase` (neither has an asyncio client: each ask is then
      answered by the sync store in a worker thread, and a cancelled await leaves its thread
      to finish the call); the store never closes it.
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
        if isinstance(client, firestore.Client):
            raise ConfigError("AsyncTimeSeriesStore takes a firestore.AsyncClient; for a Client use TimeSeriesStore")
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise ConfigError(f"max_concurrency must be at least 1, got {max_concurrency!r}")
        check_options(spec, page_size=page_size, snapshots=snapshots)
        # A database without an asyncio client (Datastore mode's) is answered by the sync
        # store, in worker threads; its backend decides the mode (or refuses the client).
        self._sync: TimeSeriesStore | None = None
        self._queries: NativeQueries | None = None
        if isinstance(client, firestore.AsyncClient):
            self._queries = NativeQueries(client, spec)
            collection_of, clock = self._queries.collection, server_clock(client)
            self._documents: AsyncDocumentAnswers = functools.partial(aanswer_document, client)
        else:
            sync_client: Any = client
            self._sync = TimeSeriesStore(sync_client, spec, write_options=write_options, max_workers=max_concurrency,
                                         page_size=page_size, lean=lean, snapshots=snapshots)  # fmt: skip
            collection_of, clock = self._sync._collection_of, self._sync._clock
            answer_document = self._sync._answers.answer_document
            self._documents = lambda ask: asyncio.to_thread(answer_document, ask)
        self._counters: dict[tuple[Any, ...], AsyncCounter] = {}
        super().__init__(spec, client, collection_of=collection_of, clock=clock, write_options=write_options,
                         page_size=page_size, lean=lean, snapshots=snapshots)  # fmt: skip
        # Held from sending a query until its first response (the emulator computes a whole
        # query before answering), not while the caller consumes the stream: a merge keeps
        # every chunk's stream open at once, and must not wait on itself.
        self._gate = asyncio.Semaphore(max_concurrency)
        self._writer: Writer = self._sync._writer if self._sync is not None else Writer(
            spec, write_options, side=FirestoreSide(lambda: self._twin), collection_of=self._collection_of,
            transport=_loop_transport,
        )  # fmt: skip

    @classmethod
    def memory(
        cls, spec: SeriesSpec, *, database: MemoryDatabase | None = None, **options: Any
    ) -> AsyncTimeSeriesStore:
        """The asyncio store of ``spec`` on a :class:`~tsstore.memory.MemoryDatabase`, as
        :meth:`TimeSeriesStore.memory <tsstore.store.TimeSeriesStore.memory>` makes the sync one:
        ``AsyncTimeSeriesStore.memory(spec)``.

        - ``spec``: the :class:`~tsstore.spec.SeriesSpec` of the collection.
        - ``database``: the memory database to use, shared with other stores; a new, empty one when not given.
        - ``options``: the constructor's keyword options; ``write_options`` is
          :data:`~tsstore.write.options.EMULATOR_WRITE_OPTIONS` unless given.
        """
        options.setdefault("write_options", EMULATOR_WRITE_OPTIONS)
        held: Any = MemoryDatabase() if database is None else database
        return cls(held, spec, **options)

    def close(self) -> None:
        """Close the sync client made for listeners and bulk jobs, if one was, and the worker
        threads of Datastore mode's (the client stays open: it is the caller's)."""
        if "_twin" in self.__dict__:
            self._twin.close()
        if self._sync is not None:
            self._sync.close()

    async def __aenter__(self) -> AsyncTimeSeriesStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.close()

    @functools.cached_property
    def _twin(self) -> firestore.Client:
        """A sync client on this client's database, for listeners and a bulk job's late guard
        and series counters."""
        twin: firestore.Client = sync_twin(self.client)
        return twin

    # ------------------------------------------------------------------ the driver

    async def _run(self, request: asks.Request[R]) -> R:
        """Run a verb's request, answering its asks on the event loop."""
        return await asks.aanswer(request, self._answer)

    async def _answer(self, asked: asks.Ask) -> object:
        if self._sync is not None:
            return await self._answer_in_thread(self._sync, asked)
        if not isinstance(asked, Asking):  # concurrently, on the loop
            return list(await asyncio.gather(*map(self._answer, asked)))
        queries = self._queries
        assert queries is not None  # an asyncio client's
        match ask := asks.question(asked):
            case asks.Count() | asks.Aggregate():

                async def aggregate(values: Sequence[str]) -> Any:
                    query = queries.aggregation(ask, values)
                    async with self._gate:
                        sent = local_us()
                        return aggregated(ask, await query.get(read_time=ask.read_time, retry=AONE_ATTEMPT), self._clock, sent)

                return await faults.acall_split(aggregate, ask.values, what=ask.what, divisible=ask.divisible)
            case asks.Documents(over=over, read_time=read_time):

                async def documents() -> list[Doc]:
                    query = queries.over(over, ())
                    async with self._gate:
                        sent = local_us()
                        found = await query.get(read_time=read_time, retry=AONE_ATTEMPT)
                        return queries.docs(found, sent, pinned=read_time is not None)

                return await faults.acall(documents, what=ask.what)
            case asks.Collect(read=read):
                return [tick async for tick in self._ticks(read)]
            case asks.Feed(read=read, sink=sink):
                async for tick in self._ticks(read):
                    sink.add(tick)
                return None
            case GetDoc() | SetDoc() | DeleteDoc() | FindDocs() | CreateDoc() | UpdateDoc():
                return await faults.acall(lambda: aanswer_document(self.client, ask), what=ask.what)
            case PutObject() | GetObject() | ListObjects() | DeleteObject() | ObjectUrls():
                return await asyncio.to_thread(self._answer_object, ask)
            case asks.Send(read=read):
                loop = asyncio.get_running_loop()
                ticks = _pulled(self._ticks(read), loop) if read is not None else iter(())
                return await asyncio.to_thread(self._writer.job(ask, ticks).run)
            case KnownTime(at_least=at_least):
                return self._clock.at_least() if at_least else self._clock.now()
            case asks.Pause(seconds=seconds):
                await asyncio.sleep(seconds)
                return None
            case asks.CounterFor(values=values):
                return await self._counter(values)
            case ListenWindow() | ListenTail():  # on the sync twin: listeners exist on sync clients only
                return await asyncio.to_thread(start, ask, NativeQueries(self._twin, self.spec).listen)
            case unanswered:
                assert_never(unanswered)

    async def _answer_in_thread(self, sync: TimeSeriesStore, ask: asks.Ask) -> object:
        """Datastore mode: the sync store's answer to ``ask``, in a worker thread (a pause and
        a counter on the loop)."""
        match ask:
            case asks.Pause(seconds=seconds):
                await asyncio.sleep(seconds)
                return None
            case asks.CounterFor(values=values):
                return await self._counter(values)
        return await asyncio.to_thread(sync._answer, ask)

    async def _counter(self, values: tuple[Any, ...]) -> AsyncCounter:
        """The counter of one series, made once per store: its document asks answered on the
        loop (on a sync store's database, in worker threads)."""
        if values not in self._counters:
            counter = AsyncCounter(counter_path(self.spec, values), answer=self._documents)
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
        if self._sync is not None:
            self._sync._answers.listener()  # refused before anything is read where none listen
        return AsyncLive(lambda: self._run(listening.opening), listening.step)

    def _ticks(self, read: Readable) -> AsyncIterator[Tick]:
        if self._sync is not None:
            return _pushed(self._sync._ticks(read))
        if isinstance(read, JoinRead):
            return read.ajoined(self._ticks(read.left), self._ticks(read.right))
        if isinstance(read, TieredRead):
            return _chained([self._ticks(part) for part in read.parts], read.limit)
        if isinstance(read, ColdRead):
            return _pushed(cold_ticks(read, self._object_bytes))
        assert self._queries is not None  # an asyncio client's
        fetch = self._queries.afetcher(read.plan, gate=self._gate)
        return aread_ticks(read, fetch=fetch, renew=lambda: self._run(reading.server_time(self.seat)))


#: Ticks a bulk job's thread takes from the loop at a time (a purge, a reshard, a roll-up
#: reads on the loop and sends from a thread): one hop per batch, not per tick.
PULLED_BATCH = 500


def _loop_transport(collection: Any, *, timeout: float) -> Transport:
    """The bulk sender's send and lookup on ``collection``, called from the sender's worker
    threads and run on the loop they are made on (a job is made on the loop)."""
    loop = asyncio.get_running_loop()
    return (
        lambda writes: _on_loop(abatch_write(collection, writes, timeout=timeout), loop),
        lambda ids: _on_loop(aget_documents(collection, ids), loop),
    )


def _on_loop(coroutine: Coroutine[Any, Any, T], loop: asyncio.AbstractEventLoop) -> T:
    """Run ``coroutine`` on ``loop`` from a worker thread and wait for its result."""
    return asyncio.run_coroutine_threadsafe(coroutine, loop).result()


async def _chained(parts: list[AsyncIterator[T]], limit: int | None) -> AsyncIterator[T]:
    """The items of ``parts`` one after another (each started when the one before it ends),
    at most ``limit``."""
    given = 0
    for part in parts:
        async for item in part:
            if limit is not None and given >= limit:
                return
            given += 1
            yield item


async def _pushed(ticks: Iterator[T], *, batch: int = PULLED_BATCH) -> AsyncIterator[T]:
    """A sync iterator read in worker threads, ``batch`` items per hop from the loop."""
    while taken := await asyncio.to_thread(list, itertools.islice(ticks, batch)):
        for item in taken:
            yield item


def _pulled(ticks: AsyncIterator[T], loop: asyncio.AbstractEventLoop, *, batch: int = PULLED_BATCH) -> Iterator[T]:
    """An async iterator read from a worker thread, ``batch`` items per hop to ``loop``."""

    async def some() -> list[T]:
        taken: list[T] = []
        async for item in ticks:
            taken.append(item)
            if len(taken) == batch:
                break
        return taken

    while taken := _on_loop(some(), loop):
        yield from taken
