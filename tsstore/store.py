"""The sync store: :class:`TimeSeriesStore` over ``google.cloud.firestore.Client``.

Its verbs are :class:`~tsstore.verbs.Verbs` (each a request); this module is the driver that
answers their asks: a list of asks on the reader threads, a chunk query through
:mod:`tsstore.wire`, a bulk send through the sender in the caller's thread. It takes a ready
client (which already knows the project, the database and ``FIRESTORE_EMULATOR_HOST``) and a
:class:`~tsstore.spec.SeriesSpec`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, assert_never

from google.cloud import firestore

from tsstore import telemetry
from tsstore.analytics.asof import JoinRead
from tsstore.asks import Asking, DatabaseAsking, KnownTime
from tsstore.backend import Backend, answered, backend_for
from tsstore.cold.objects import DeleteObject, GetObject, ListObjects, ObjectUrls, PutObject
from tsstore.frames import frames
from tsstore.live.listen import ListenTail, ListenWindow, start
from tsstore.read.cold import ColdRead, TieredRead, cold_ticks
from tsstore.read.engine import read_ticks
from tsstore.read.merge import take
from tsstore.spec import SeriesSpec
from tsstore.store_base import DEFAULT_CONCURRENCY, DEFAULT_PAGE_SIZE, StoreBase
from tsstore.ticks import Tick
from tsstore.verbs import declare, reading
from tsstore.verbs import request as asks
from tsstore.verbs.request import Readable, Snapshots
from tsstore.write.options import WriteOptions

R = TypeVar("R")
T = TypeVar("T")
L = TypeVar("L")


class TimeSeriesStore(StoreBase[Backend], declare.ThreadDriver):
    """Write and query one sharded time-series collection over a ``firestore.Client``:
    ``TimeSeriesStore(client, spec).write(ticks)``, then ``store.query(where={"exchange":
    "EXCHG1"}, limit=5)`` (the tutorials walk through it).

    - ``client``: a ready ``google.cloud.firestore.Client`` (its project, database and
      ``FIRESTORE_EMULATOR_HOST``), a ``google.cloud.datastore.Client`` for a database in
      Datastore mode, or a :class:`~tsstore.memory.MemoryDatabase` (in this process, for
      tests: :func:`~tsstore.backend.backend_for`); the store never closes it.
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
        # the backend (made once the options are checked) refuses a firestore.AsyncClient by name
        super().__init__(spec, client, lambda: backend_for(client, spec, fast=fast_wire),
                         write_options=write_options, page_size=page_size, lean=lean, snapshots=snapshots)  # fmt: skip
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tsstore-read")

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

    def _answer(self, asked: asks.Ask) -> object:
        if not isinstance(asked, Asking):  # concurrently, on the reader threads
            return list(self._pool.map(telemetry.in_context(self._answer), asked))
        match ask := asks.question(asked):
            case DatabaseAsking():  # counts, aggregations, a census's documents, document asks
                return answered(self._backend, ask)
            case asks.Collect(read=read):
                return list(self._ticks(read))
            case asks.Feed(read=read, sink=sink):
                for tick in self._ticks(read):
                    sink.add(tick)
                return None
            case PutObject() | GetObject() | ListObjects() | DeleteObject() | ObjectUrls():
                return self._answer_object(ask)
            case asks.Send(read=read):
                return self._writer.job(ask, self._ticks(read) if read is not None else iter(())).run()
            case KnownTime():
                return self._time(ask)
            case asks.Pause(seconds=seconds):
                time.sleep(seconds)
                return None
            case asks.CounterFor(values=values):
                return self._writer.series(self.spec).counter(values)
            case ListenWindow() | ListenTail():
                return start(ask, self._backend.listener())
            case unanswered:
                assert_never(unanswered)

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

    def _listen(self, listening: declare.Listening[L, object]) -> L:
        self._backend.listener()  # refused before anything is read where none listen
        return self._run(listening.opening)

    def _ticks(self, read: Readable) -> Iterator[Tick]:
        if isinstance(read, JoinRead):
            return read.joined(self._ticks(read.left), self._ticks(read.right))
        if isinstance(read, TieredRead):
            return take((tick for part in read.parts for tick in self._ticks(part)), read.limit)
        if isinstance(read, ColdRead):
            return cold_ticks(read, self._object_bytes)
        fetch = self._backend.fetcher(read.plan)
        return read_ticks(read, fetch=fetch, pool=self._pool, renew=lambda: self._run(reading.server_time(self.seat)))
