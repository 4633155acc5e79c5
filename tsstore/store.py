"""The sync store: :class:`TimeSeriesStore` over ``google.cloud.firestore.Client``.

Its verbs are :class:`~tsstore.verbs.Verbs` (each a request); this module is the driver that
answers their asks: a list of asks on the reader threads, a chunk query through
:mod:`tsstore.wire`, a bulk send through the sender in the caller's thread. It takes a ready
client (which already knows the project, the database and ``FIRESTORE_EMULATOR_HOST``) and a
:class:`~tsstore.spec.SeriesSpec`.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from google.cloud import firestore

from tsstore import faults
from tsstore.analytics.asof import JoinRead
from tsstore.asks import CreateDoc, DeleteDoc, Doc, FindDocs, GetDoc, KnownTime, SetDoc, UpdateDoc
from tsstore.cold.objects import DeleteObject, GetObject, ListObjects, ObjectUrls, PutObject
from tsstore.clock import local_us
from tsstore.errors import ConfigError
from tsstore.frames import frames
from tsstore.modes import FirestoreSide, refuse_live
from tsstore.read.cold import ColdRead, TieredRead, cold_ticks
from tsstore.read.engine import Fetch, read_ticks
from tsstore.read.fetch import fetcher
from tsstore.read.merge import take
from tsstore.read.plan import QueryPlan
from tsstore.spec import SeriesSpec
from tsstore.store_base import DEFAULT_CONCURRENCY, DEFAULT_PAGE_SIZE, StoreBase, Writer, aggregated
from tsstore.ticks import Tick
from tsstore.verbs import declare, reading
from tsstore.verbs import request as asks
from tsstore.verbs.request import Readable, Snapshots
from tsstore.wire import ONE_ATTEMPT, answer_document, transport
from tsstore.write.ops import Transport
from tsstore.write.options import WriteOptions

if TYPE_CHECKING:
    from tsstore.datastore_mode import DatastoreAnswers

R = TypeVar("R")
T = TypeVar("T")
L = TypeVar("L")


class TimeSeriesStore(StoreBase, declare.ThreadDriver):
    """Write and query one sharded time-series collection over a ``firestore.Client``:
    ``TimeSeriesStore(client, spec).write(ticks)``, then ``store.query(where={"exchange":
    "EXCHG1"}, limit=5)`` (the tutorials walk through it).

    - ``client``: a ready ``google.cloud.firestore.Client`` (its project, database and
      ``FIRESTORE_EMULATOR_HOST``); the store never closes it.
    - ``spec``: the :class:`~tsstore.spec.SeriesSpec` of the collection.
    - ``write_options``: the writer's pace, ramp, batch size and retries
      (:class:`~tsstore.write.options.WriteOptions`).
    - ``max_workers``: reader threads, so chunk queries that run at once (default 8).
    - ``page_size``: the largest ``limit`` read as one lean page; above it, and without a
      limit, each chunk is one streaming query (default 2000).
    - ``fast_wire``: send queries and writes through the client's own gRPC stub and decode
      documents directly (the default); ``False`` uses the client's public calls.
    - ``lean``: read each chunk its share of a page first and refill what may be missing
      (the default), instead of ``limit`` documents from every chunk.
    - ``snapshots``: how a read of several queries (chunks, series, parts) gets its one
      snapshot: ``"estimated"`` from recent answers (the default: no round trip; every write
      of this process is in it, and a write another client committed in about the last half
      round trip may not be: :mod:`tsstore.clock`), or ``"read"``: the server's time read
      first (one round trip more, and every write committed before it is in the answer).
    """

    client: firestore.Client

    def __init__(
        self,
        client: firestore.Client,
        spec: SeriesSpec,
        *,
        write_options: WriteOptions = WriteOptions(),
        max_workers: int = DEFAULT_CONCURRENCY,
        page_size: int = DEFAULT_PAGE_SIZE,
        fast_wire: bool = True,
        lean: bool = True,
        snapshots: Snapshots = "estimated",
    ) -> None:
        if isinstance(client, firestore.AsyncClient):
            raise ConfigError("TimeSeriesStore takes a firestore.Client; for an AsyncClient use AsyncTimeSeriesStore")
        super().__init__(spec, client, write_options=write_options, page_size=page_size, lean=lean,
                         snapshots=snapshots)  # fmt: skip
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tsstore-read")
        self._answers: _NativeAnswers | DatastoreAnswers = self._datastore or _NativeAnswers(self, fast=fast_wire)
        self._writer = Writer(spec, write_options, side=self._answers.side, collection_of=self._collection_of,
                              transport=self._answers.transport)  # fmt: skip

    def close(self) -> None:
        """Stop the reader threads (the client stays open: it is the caller's)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> TimeSeriesStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the driver

    def _run(self, request: asks.Request[R]) -> R:
        """Run a verb's request, answering its asks on this thread and the reader threads."""
        return asks.answer(request, self._answer)

    def _answer(self, ask: Any) -> Any:
        match ask:
            case list():  # concurrently, on the reader threads
                return list(self._pool.map(self._answer, ask))
            case asks.Count() | asks.Aggregate():

                aggregate = functools.partial(self._answers.aggregate, ask)
                return faults.call_split(aggregate, ask.values, what=ask.what, divisible=ask.divisible)
            case asks.Documents(over=over, read_time=read_time):
                return faults.call(functools.partial(self._answers.documents, over, read_time), what=ask.what)
            case asks.Collect(read=read):
                return list(self._ticks(read))
            case asks.Feed(read=read, sink=sink):
                for tick in self._ticks(read):
                    sink.add(tick)
                return None
            case GetDoc() | SetDoc() | DeleteDoc() | FindDocs() | CreateDoc() | UpdateDoc():
                return faults.call(functools.partial(self._answers.answer_document, ask), what=ask.what)
            case PutObject() | GetObject() | ListObjects() | DeleteObject() | ObjectUrls():
                return self._answer_object(ask)
            case asks.Send(read=read):
                return self._writer.job(ask, self._ticks(read) if read is not None else iter(())).run()
            case KnownTime(at_least=at_least):
                return self._clock.at_least() if at_least else self._clock.now()
            case asks.Pause(seconds=seconds):
                time.sleep(seconds)
                return None
            case asks.CounterFor(values=values):
                return self._writer.series(self.spec).counter(values)
        raise TypeError(f"no answer for {ask!r}")  # pragma: no cover - every ask is answered above

    def _stream(self, reading: declare.Reading[T]) -> declare.TickStream[T]:
        def items() -> Iterator[Any]:
            opening = reading.opening
            ticks = self._ticks(opening if isinstance(opening, asks.READABLE) else self._run(opening))
            yield from (
                ticks
                if reading.rows is None
                else frames(reading.spec, ticks, rows=reading.rows, columns=reading.columns, arrow=reading.arrow)
            )

        return declare.TickStream(items(), reading.stats)

    def _listen(self, listening: declare.Listening[L, Any]) -> L:
        if self._datastore is not None:
            refuse_live(listening)
        return self._run(listening.opening)(self._collection)

    def _ticks(self, read: Readable) -> Iterator[Tick]:
        if isinstance(read, JoinRead):
            return read.joined(self._ticks(read.left), self._ticks(read.right))
        if isinstance(read, TieredRead):
            return take((tick for part in read.parts for tick in self._ticks(part)), read.limit)
        if isinstance(read, ColdRead):
            return cold_ticks(read, self._object_bytes)
        fetch = self._answers.fetcher(read.plan)
        return read_ticks(read, fetch=fetch, pool=self._pool, renew=lambda: self._run(reading.server_time(self.seat)))


class _NativeAnswers:
    """The sync store's answers in Native mode, on its ``firestore.Client``: the asks that
    touch the database, as :class:`~tsstore.datastore_mode.DatastoreAnswers` gives Datastore
    mode's (the store's driver is the same for both)."""

    def __init__(self, store: TimeSeriesStore, *, fast: bool) -> None:
        self._store, self._fast = store, fast
        self.side = FirestoreSide(lambda: store.client)

    def aggregate(self, ask: asks.Count | asks.Aggregate, values: Sequence[str]) -> Any:
        """The count, or ``{alias: value}``, of ``ask`` over ``values``."""
        store = self._store
        query, sent = store._aggregation(ask, values), local_us()
        return aggregated(ask, query.get(read_time=ask.read_time, retry=ONE_ATTEMPT), store._clock, sent)

    def documents(self, over: asks.Over, read_time: Any) -> list[Doc]:
        """The documents a census ask names."""
        query, sent = self._store._over(over, ()), local_us()
        return self._store._docs(query.get(read_time=read_time, retry=ONE_ATTEMPT), sent, pinned=read_time is not None)

    def answer_document(self, ask: Any) -> Any:
        return answer_document(self._store.client, ask)

    def fetcher(self, plan: QueryPlan) -> Fetch:
        """The engine's fetch of ``plan``'s chunks."""
        return fetcher(self._store._collection_of, plan, fast=self._fast)

    def transport(self, collection: Any, *, timeout: float) -> Transport:
        """The sender's transport on ``collection``."""
        return transport(collection, timeout=timeout, fast=self._fast)
