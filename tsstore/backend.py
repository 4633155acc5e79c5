"""What a store asks of a database, and the one place a store's backend is chosen
(:func:`backend_for`, :func:`abackend_for`, by :func:`tsstore.databases.mode_of`).

A :class:`Backend` (the sync store's) or an :class:`AsyncBackend` (the async store's, the same
asks awaited) answers the asks that touch the database, each in one call (a
:data:`~tsstore.verbs.request.DatabaseAsk`: counts and aggregations, a census's documents,
document asks; both stores try it again after faults through :func:`answered` and
:func:`aanswered`), gives the read engine its chunk fetches and a live read its listeners
(:meth:`Database.listener`: Native mode's and the memory database's) and a bulk send its side
(:class:`~tsstore.write.writer.WriterSide`) and transport; the stores answer every other ask the
same way whatever the database. Native mode's are :class:`~tsstore.native_mode.NativeAnswers`
and :class:`~tsstore.native_mode.AsyncNativeAnswers`, Datastore mode's
:class:`~tsstore.datastore_mode.DatastoreAnswers` (imported only for a ``datastore.Client``:
``google-cloud-datastore`` is an extra), the memory database's
:class:`~tsstore.memory.MemoryAnswers`; a database without an asyncio client is the async
store's through :class:`InThreads`.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from google.cloud import firestore

from tsstore import faults, telemetry
from tsstore.clock import ServerClock
from tsstore.databases import mode_of
from tsstore.errors import ConfigError
from tsstore.live.listen import Listen
from tsstore.logs import DB_OPERATION
from tsstore.memory import MemoryAnswers
from tsstore.native_mode import AsyncNativeAnswers, NativeAnswers
from tsstore.read.async_engine import AsyncFetch, fetched_in_threads
from tsstore.read.engine import Fetch
from tsstore.read.plan import QueryPlan
from tsstore.series_counters import SeriesCounters
from tsstore.spec import SeriesSpec
from tsstore.verbs.request import Aggregation, DatabaseAsk, narrowed
from tsstore.write.ops import Transport
from tsstore.write.writer import WriterSide

log = logging.getLogger(__name__)


class Database(Protocol):
    """What a store holds of its database besides the answers: what its requests hold as a
    collection, its clock, and what a bulk send asks of it."""

    @property
    def fields(self) -> Mapping[str, str]:
        """The database and the store's collection, as log records name them
        (:func:`tsstore.logs.backend_fields`)."""

    @property
    def side(self) -> WriterSide[SeriesCounters]:
        """What a bulk send asks of the database besides its writes."""

    @property
    def clock(self) -> ServerClock:
        """The project's clock, told every server time an answer carries."""

    def collection(self, spec: SeriesSpec) -> Any:
        """What ``spec``'s requests hold as their collection (their queries are built on it,
        and a bulk send's transport takes it)."""

    def listener(self) -> Listen:
        """The database's listeners, one per chunk query of a live read (started in a worker
        thread by the async store); a :class:`~tsstore.errors.ModeError` where it has none."""

    def transport(self, collection: Any, *, timeout: float) -> Transport:
        """A bulk sender's send and lookup on ``collection`` (from :meth:`collection`), called
        in the sender's thread (made on the async store's loop)."""


class Backend(Database, Protocol):
    """A database as the sync store asks of it (each call one attempt, in the caller's thread)."""

    def answer(self, ask: DatabaseAsk) -> Any:
        """The answer to ``ask``, one attempt: a count or ``{alias: value}`` over the shard values
        its ``over`` names, a census's documents, a document ask's answer."""

    def fetcher(self, plan: QueryPlan) -> Fetch:
        """The read engine's fetch of ``plan``'s chunks."""


class AsyncBackend(Database, Protocol):
    """A database as the async store asks of it: :class:`Backend`'s asks, awaited on the loop
    (the fetch, the event-loop engine's), and what it made to let go of when the store closes
    (threads, a sync twin; the client stays open)."""

    async def answer(self, ask: DatabaseAsk) -> Any: ...

    def fetcher(self, plan: QueryPlan) -> AsyncFetch: ...

    def close(self) -> None: ...


class InThreads:
    """A sync ``backend`` as the async store asks of it (a database without an asyncio client:
    Datastore mode's, the memory database's): each call in a worker thread of its own pool, at
    most ``workers`` at once, and a chunk's ticks read :data:`~tsstore.read.async_engine.HOP_BATCH`
    a hop. Not the loop's own threads: a bulk job holds one of those while it takes the ticks it
    sends from the loop, and with all of them held no read could answer it. A cancelled await
    leaves its thread to finish the call it is in."""

    def __init__(self, backend: Backend, *, workers: int) -> None:
        self._backend, self.side, self.clock, self.fields = backend, backend.side, backend.clock, backend.fields
        self.collection, self.listener, self.transport = backend.collection, backend.listener, backend.transport
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tsstore-read")

    async def answer(self, ask: DatabaseAsk) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._backend.answer, ask)

    def fetcher(self, plan: QueryPlan) -> AsyncFetch:
        return fetched_in_threads(self._backend.fetcher(plan), self._pool)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def answered(backend: Backend, ask: DatabaseAsk) -> object:
    """``backend``'s answer to ``ask``, tried again after faults and overloads; a count or an
    aggregation that keeps failing is asked in parts of its shard values where they answer at
    one snapshot (:attr:`~tsstore.verbs.request.Aggregation.divisible`): one answer per part."""
    _asking(backend, ask)
    with telemetry.child(_span_name(ask)):
        if isinstance(ask, Aggregation):
            return faults.call_split(lambda values: backend.answer(narrowed(ask, values)), ask.values, what=ask.what,
                                     divisible=ask.divisible)  # fmt: skip
        return faults.call(functools.partial(backend.answer, ask), what=ask.what)


async def aanswered(backend: AsyncBackend, ask: DatabaseAsk) -> object:
    """:func:`answered` on the event loop."""
    _asking(backend, ask)
    with telemetry.child(_span_name(ask)):
        if isinstance(ask, Aggregation):
            return await faults.acall_split(lambda values: backend.answer(narrowed(ask, values)), ask.values,
                                            what=ask.what, divisible=ask.divisible)  # fmt: skip
        return await faults.acall(functools.partial(backend.answer, ask), what=ask.what)


def _span_name(ask: DatabaseAsk) -> str:
    """The name of the span of a database ask under its verb's: ``tsstore.count``, ``tsstore.get_doc``, ..."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(ask).__name__).lower()


def _asking(backend: Database, ask: DatabaseAsk) -> None:
    """A debug record of ``ask``, named by its kind (``Count``, ``GetDoc``); its fields are not
    even gathered below DEBUG (a counter's increments ask several times a second)."""
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s", ask.what, extra={**backend.fields, DB_OPERATION: type(ask).__name__})


def backend_for(client: Any, spec: SeriesSpec, *, fast: bool = True) -> Backend:
    """The backend of the sync store of ``spec`` on ``client``, by the database it talks to
    (:func:`tsstore.databases.mode_of`, which refuses any other client by name): Native mode on a
    ``firestore.Client``, Datastore mode on a ``datastore.Client``, the in-process database on a
    :class:`~tsstore.memory.MemoryDatabase` (``fast``: Native mode's queries and writes through
    the client's own stub). A ``firestore.AsyncClient`` is refused: it is the async store's."""
    match mode_of(client):
        case "datastore":
            from tsstore.datastore_mode import DatastoreAnswers  # only with the datastore extra

            return DatastoreAnswers(client, spec)
        case "native":
            if isinstance(client, firestore.AsyncClient):
                raise ConfigError(
                    "TimeSeriesStore takes a firestore.Client; for an AsyncClient use AsyncTimeSeriesStore"
                )
            return NativeAnswers(client, spec, fast=fast)
        case "memory":
            return MemoryAnswers(client, spec)


def abackend_for(client: Any, spec: SeriesSpec, *, concurrency: int) -> AsyncBackend:
    """The backend of the async store of ``spec`` on ``client``: Native mode's on a
    ``firestore.AsyncClient`` (at most ``concurrency`` queries waiting on the server at once); on
    a database without an asyncio client, its sync backend in as many worker threads. A
    ``firestore.Client`` is refused: it is the sync store's."""
    if mode_of(client) != "native":
        return InThreads(backend_for(client, spec), workers=concurrency)
    if not isinstance(client, firestore.AsyncClient):
        raise ConfigError("AsyncTimeSeriesStore takes a firestore.AsyncClient; for a Client use TimeSeriesStore")
    return AsyncNativeAnswers(client, spec, concurrency=concurrency)
