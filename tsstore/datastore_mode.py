"""How a store answers in Firestore's Datastore mode (a module of its own:
``google-cloud-datastore`` is an extra, imported only for a ``datastore.Client``): the asks
that touch the database (counts and aggregations, a census's documents, document asks, chunk
fetches, bulk sends) on :mod:`tsstore.dswire`'s calls and reads (the async store's in worker
threads: :class:`~tsstore.backend.InThreads`), a writer's side, and the words that refuse what
Datastore mode does not have (real-time listeners)."""

from __future__ import annotations

import functools
import uuid
from typing import Any

from tsstore.asks import DocAsk
from tsstore.clock import ServerClock
from tsstore.dswire import reads
from tsstore.dswire.calls import DatastoreCalls, DatastoreHorizons, answer_document, transport
from tsstore.errors import ModeError
from tsstore.live.listen import Listen
from tsstore.logs import backend_fields
from tsstore.databases import DatastoreKind
from tsstore.read.engine import Fetch
from tsstore.read.plan import QueryPlan
from tsstore.series_counters import SeriesCounters
from tsstore.spec import SeriesSpec
from tsstore.verbs.reading import clock_probe
from tsstore.verbs.request import Count, DatabaseAsk, Documents
from tsstore.write.marks import LateGuard
from tsstore.write.ops import Transport


LIVE_REFUSED = (
    "live reads (watch, tail) need Firestore's real-time listeners, which Datastore mode does not have; poll with "
    "iter_ticks(start=the last tick's time) on a timer, or keep the series in a Native-mode database"
)


class DatastoreSide:
    """A Datastore-mode writer's side."""

    def __init__(self, calls: DatastoreCalls) -> None:
        self._calls = calls

    def late_guard(self, spec: SeriesSpec) -> LateGuard:
        horizons = DatastoreHorizons(self._calls, spec.collection, lease=uuid.uuid4().hex)
        return LateGuard(spec, horizons)

    def counters(self, spec: SeriesSpec) -> SeriesCounters:
        return SeriesCounters(spec, answer=functools.partial(answer_document, self._calls))

    def probe(self, spec: SeriesSpec) -> None:
        answer_document(self._calls, clock_probe(spec))

    def clock(self) -> ServerClock:
        return self._calls.clock


class DatastoreAnswers:
    """The sync store's answers in Datastore mode, on a ``datastore.Client``, for the store of
    ``spec``."""

    def __init__(self, client: Any, spec: SeriesSpec) -> None:
        self.calls, self._spec = DatastoreCalls(client), spec
        self.fields = backend_fields("datastore", spec.collection)
        self.side = DatastoreSide(self.calls)
        self.clock: ServerClock = self.calls.clock

    def collection(self, spec: SeriesSpec) -> DatastoreKind:
        """What the requests of ``spec`` hold as their collection: its kind's name."""
        return DatastoreKind(spec.collection)

    def listener(self) -> Listen:
        """Refused: Datastore mode has no real-time listeners (:data:`LIVE_REFUSED`)."""
        raise ModeError(LIVE_REFUSED)

    def answer(self, ask: DatabaseAsk) -> Any:
        """The answer to ``ask``, one attempt: a count or ``{alias: value}``
        (:func:`tsstore.dswire.reads.aggregate`), the documents of a census ask that names them
        (:func:`~tsstore.dswire.reads.documents`), a document ask's (:func:`~tsstore.dswire.calls.answer_document`)."""
        if isinstance(ask, DocAsk):
            return answer_document(self.calls, ask)
        if isinstance(ask, Documents):
            return reads.documents(self.calls, self._spec, ask.over, ask.read_time)
        aggregations = None if isinstance(ask, Count) else ask.aggregations
        return reads.aggregate(self.calls, self._spec, ask.over, aggregations, read_time=ask.read_time)

    def fetcher(self, plan: QueryPlan) -> Fetch:
        """The engine's fetch of ``plan``'s chunks (:func:`tsstore.dswire.reads.fetcher`)."""
        return reads.fetcher(self.calls, plan, probe=clock_probe(plan.spec).path)

    def transport(self, collection: Any, *, timeout: float) -> Transport:
        """The sender's transport on ``collection`` (a :class:`DatastoreKind`)."""
        send, lookup = transport(self.calls, collection.id, timeout=timeout)
        return send, lookup
