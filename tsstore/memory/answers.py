"""How a store answers on the memory database (:mod:`tsstore.memory.database`): the asks that
touch the database (counts and aggregations, a census's documents, document asks, chunk
fetches, bulk sends) and a writer's side, with the surface of
:class:`~tsstore.datastore_mode.DatastoreAnswers`. Each query is the one Native mode sends
(:func:`tsstore.read.chunks.chunk_query`, :func:`tsstore.layout.census.census_query`), built
as a :class:`~tsstore.memory.database.Query`."""

from __future__ import annotations

import datetime as dt
import functools
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from google.api_core import exceptions as gexc

from tsstore.asks import (AddToDocs, CreateDoc, DeleteDoc, Doc, DocAsk, FindDocs, GetDoc, SetDoc, SumDocs, UpdateDoc,
                          refusal, refused)  # fmt: skip
from tsstore.census_asks import Ask, CountAll, CountValue, FirstValue
from tsstore.clock import ServerClock
from tsstore.databases import DatastoreKind, register
from tsstore.indexes.build import SHARD_ORDER, after_timestamp
from tsstore.late import WATERMARKS, WRITERS, BarProbe, Horizon, mark_id, marks_path
from tsstore.live.listen import ChunkQuery, Listen, OnSnapshot, Subscription
from tsstore.logs import backend_fields
from tsstore.memory.database import NAME, Found, MemoryDatabase, Query, Write
from tsstore.memory.listen import MemoryListener
from tsstore.read.chunks import Chunk, ChunkTicks
from tsstore.read.engine import Fetch
from tsstore.read.plan import UNSHARDED, QueryPlan, plan_query
from tsstore.series_counters import SeriesCounters
from tsstore.spec import SeriesSpec
from tsstore.ticks import Position, Tick, get_path, leaf_paths
from tsstore.times import plain_datetime
from tsstore.verbs.request import Count, DatabaseAsk, Documents, Over
from tsstore.write.marks import LateGuard
from tsstore.write.ops import ALREADY_EXISTS, NOT_FOUND, Erase, Patch, Stored, Transport, WriteOp, WriteStatus

def chunk_query(plan: QueryPlan, chunk: Chunk, after: Position | None = None, size: int | None = None, *,
                also_by: str | None = None) -> Query:  # fmt: skip
    """The query of one chunk of ``plan``, as :func:`tsstore.read.chunks.chunk_query` builds
    it for Native mode: ``shard in chunk``, the filters, the time range, ordered by (timestamp,
    ``also_by``, the range fields, document id) in the plan's direction, projected, after
    ``after``, limited to ``size``."""
    spec = plan.spec
    filters: list[tuple[str, str, Any]] = []
    if chunk != UNSHARDED:
        filters.append((spec.shard_field, "in", list(chunk)))
    for f in (*plan.filters, *plan.ranges):
        filters.append((f.field, f.op, list(f.values) if f.op == "in" else f.values[0]))
    if plan.start is not None:
        filters.append((spec.timestamp_field, ">=", plan.start))
    if plan.end is not None:
        filters.append((spec.timestamp_field, "<", plan.end))
    desc = plan.descending
    fields = (spec.timestamp_field, *after_timestamp(plan.order_fields, also_by), NAME)
    cursor = None
    if after is not None:
        cursor = (after[0], *(ordered.raw for ordered in after[1:-1]), after[-1])
    return Query(spec.collection, tuple(filters), tuple((f, desc) for f in fields), cursor, size, plan.columns)


def census_query(spec: SeriesSpec, ask: Ask) -> Query:
    """The query of one census ask, as :func:`tsstore.layout.census.census_query` builds it."""
    if isinstance(ask, CountAll):
        return Query(spec.collection)
    if isinstance(ask, CountValue):
        return chunk_query(plan_query(spec, start=ask.since), (ask.value,))
    filters: list[tuple[str, str, Any]] = []
    if ask.low is not None:
        filters.append((spec.shard_field, ">", ask.low))
    if ask.high is not None:
        filters.append((spec.shard_field, "<", ask.high))
    desc = SHARD_ORDER == "DESCENDING"
    orders = ((spec.shard_field, desc), (spec.timestamp_field, True))
    first = isinstance(ask, FirstValue)
    return Query(spec.collection, tuple(filters), orders, limit=1 if first else None,
                 select=(spec.shard_field,) if first else None)  # fmt: skip


class MemoryAnswers:
    """A store's answers on ``database`` for the store of ``spec``: the surface of
    :class:`~tsstore.datastore_mode.DatastoreAnswers`."""

    def __init__(self, database: MemoryDatabase, spec: SeriesSpec) -> None:
        self.database, self._spec = database, spec
        self.fields = backend_fields("memory", spec.collection)
        self.side = MemorySide(database)
        self.clock: ServerClock = database.clock

    def collection(self, spec: SeriesSpec) -> DatastoreKind:
        """What the requests of ``spec`` hold as their collection: its name (as Datastore
        mode's kind: a request that would build a Firestore query on it is told so)."""
        return DatastoreKind(spec.collection)

    def listener(self) -> Listen:
        """The database's own listeners (:mod:`tsstore.memory.listen`): :meth:`listen`."""
        return self.listen

    def listen(self, query: ChunkQuery, on_snapshot: OnSnapshot, /, *, ordered: bool) -> Subscription:
        """A listener on one chunk's query, built as a read of the chunk builds it (every
        snapshot comes in the query's order: the database runs the query whole)."""
        return MemoryListener(self.database, chunk_query(query.plan, query.chunk, None, query.limit), on_snapshot)

    def answer(self, ask: DatabaseAsk) -> Any:
        """The answer to ``ask``: a count or ``{alias: value}``, the documents a census ask
        names (:class:`~tsstore.census_asks.FirstValue`), a document ask's (:func:`answer_document`)."""
        if isinstance(ask, DocAsk):
            return answer_document(self.database, ask)
        if isinstance(ask, Documents):
            found, _ = self.database.run(self._over(ask.over), read_time=ask.read_time)
            return [_doc(f) for f in found]
        wanted = [("count", "n", None)] if isinstance(ask, Count) else list(ask.aggregations)
        answer, _ = self.database.aggregate(self._over(ask.over), wanted, read_time=ask.read_time)
        return answer["n"] if isinstance(ask, Count) else answer

    def fetcher(self, plan: QueryPlan) -> Fetch:
        """The engine's fetch of ``plan``'s chunks (:data:`~tsstore.read.engine.Fetch`)."""
        path = plan.spec.timestamp_field

        def fetch(chunk: Chunk, after: Position | None, limit: int | None,
                  read_time: dt.datetime | None) -> Iterator[Tick]:  # fmt: skip
            found, _ = self.database.run(chunk_query(plan, chunk, after, limit), read_time=read_time)
            return iter([Tick(f.id, _time_at(f.data, path), f.data) for f in found])

        return fetch

    def transport(self, collection: Any, *, timeout: float) -> Transport:
        """The sender's transport on ``collection`` (its ``.id``: the collection's name);
        ``timeout`` is not needed (nothing waits)."""
        sender = MemoryTransport(self.database, collection.id)
        return sender.send, sender.lookup

    def _over(self, over: Over) -> Query:
        if isinstance(over, ChunkTicks):
            return chunk_query(over.plan, over.chunk, also_by=over.also_by)
        return census_query(self._spec, over)

def answer_document(db: MemoryDatabase, ask: DocAsk) -> Any:
    """The answer to a document ask on ``db`` (a refused precondition answered as both wires do)."""
    try:
        return _document(db, ask)
    except gexc.GoogleAPICallError as exc:
        if refused(ask, exc):
            return refusal(ask)
        raise


def _document(db: MemoryDatabase, ask: DocAsk) -> Any:
    match ask:
        case GetDoc(path=path, fields=fields, read_time=read_time):
            found, read = db.get(path, read_time=read_time, fields=fields)
            return _doc(found) if found is not None else Doc(path.rsplit("/", 1)[-1], None, None, read)
        case SetDoc(path=path, data=data, merge=merge, server_time=stamped):
            fields = (*leaf_paths(data), *stamped) if merge else None
            return db.commit([Write(path, data, fields=fields, server_time=stamped)])[0]
        case DeleteDoc(path=path, written=written):
            db.commit([Write(path, None, written=written)])
            return True
        case FindDocs(collection=collection, where=where, read_time=read_time):
            every, _ = db.run(Query(collection, where), read_time=read_time)
            return [_doc(f) for f in every]
        case CreateDoc(path=path, data=data):
            return db.commit([Write(path, data, exists=False)])[0]
        case UpdateDoc(path=path, data=data, written=written):
            return db.commit([Write(path, data, fields=tuple(data), exists=True, written=written)])[0]
        case AddToDocs(adds=adds, receipt=receipt):
            writes = [Write(path, {}, fields=(), increments=((field, amount),)) for path, field, amount in adds]
            if receipt is not None:
                writes.append(Write(receipt, {}, exists=False))
            db.commit(writes)
            return True
        case SumDocs(collection=collection, field=field):
            answer, read = db.aggregate(Query(collection), [("sum", "s", field)])
            return answer["s"], read
    raise TypeError(f"not a document ask: {ask!r}")  # pragma: no cover - DocAsk is the eight above


class MemoryTransport:
    """The sender's :data:`~tsstore.write.ops.Transport` on one collection of the database: a
    batch applied write by write, each at its own commit (Firestore's ``BatchWrite`` is not
    atomic), answering a status per write; and the look-up of stored documents."""

    def __init__(self, database: MemoryDatabase, collection: str) -> None:
        self._database, self._collection = database, collection

    def send(self, ops: list[WriteOp]) -> list[WriteStatus]:
        statuses = []
        for doc_id, data, create in ops:
            path = f"{self._collection}/{doc_id}"
            if data is None or isinstance(data, Erase):
                write = Write(path, None)
            elif isinstance(data, Patch):
                write = Write(path, data.fields, fields=tuple(data.fields), exists=True)
            else:
                write = Write(path, data, exists=False if create else None)
            try:
                self._database.commit([write])
            except gexc.NotFound as exc:
                statuses.append((NOT_FOUND, exc.message))
            except gexc.AlreadyExists as exc:
                statuses.append((ALREADY_EXISTS, exc.message))
            else:
                statuses.append((0, ""))
        return statuses

    def lookup(self, ids: list[str]) -> dict[str, Stored]:
        got = {doc_id: self._database.get(f"{self._collection}/{doc_id}")[0] for doc_id in ids}
        return {doc_id: Stored(found.data, found.create_time) for doc_id, found in got.items() if found is not None}


class MemorySide:
    """A writer's side on the memory database: the late-tick guard, the probe of the round
    trip, the clock and the series counters (their document asks answered on the database)."""

    def __init__(self, database: MemoryDatabase) -> None:
        self._database = database

    def late_guard(self, spec: SeriesSpec) -> LateGuard:
        return LateGuard(spec, MemoryHorizons(self._database, spec.collection))

    def counters(self, spec: SeriesSpec) -> SeriesCounters:
        return SeriesCounters(spec, answer=functools.partial(answer_document, self._database))

    def probe(self, spec: SeriesSpec) -> None:
        return None  # the database is in this process: there is no round trip to learn

    def clock(self) -> ServerClock:
        return self._database.clock


class MemoryHorizons:
    """What a writer's :class:`~tsstore.write.marks.LateGuard` asks of the database, as
    :class:`tsstore.wire.FirestoreHorizons` asks Firestore: the job's lease, the roll-ups'
    horizons, whether a roll-up holds a bar, and marks."""

    def __init__(self, database: MemoryDatabase, collection: str) -> None:
        self._database, self._source = database, collection
        self._lease = f"{WRITERS}/{uuid.uuid4().hex}"

    def put_lease(self, data: dict[str, Any]) -> dt.datetime:
        return self._database.commit([Write(self._lease, data)])[0]

    def drop_lease(self) -> None:
        self._database.commit([Write(self._lease, None)])

    def horizons(self) -> list[Horizon]:
        found, _ = self._database.run(Query(WATERMARKS, (("source", "==", self._source),)))
        return [h for h in (Horizon.of(f.id, f.data) for f in found) if h is not None]

    def holds_bar(self, probe: BarProbe) -> bool:
        def found(shards: list[str]) -> bool:
            query = Query(probe.rollup, ((probe.shard_field, "in", shards), (probe.timestamp_field, ">=", probe.start),
                                         (probe.timestamp_field, "<", probe.end)), limit=1)  # fmt: skip
            return bool(self._database.run(query)[0])

        return any(found(shards) for shards in probe.chunks())

    def put_marks(self, marks: Mapping[str, Iterable[dt.datetime]]) -> None:
        for rollup, buckets in marks.items():
            writes = [Write(f"{marks_path(rollup)}/{mark_id(b)}", {"bucket": b, "nonce": uuid.uuid4().hex})
                      for b in buckets]  # fmt: skip
            for write in writes:
                self._database.commit([write])


def _doc(found: Found) -> Doc:
    return Doc(found.id, found.data, found.update_time, found.read_time)


def _time_at(data: dict[str, Any], path: str) -> dt.datetime:
    value = get_path(data, path.split("."))
    if not isinstance(value, dt.datetime):  # an ordered query returns no document without it
        raise ValueError(f"document has no timestamp value ({value!r})")
    return plain_datetime(value)


register("memory", MemoryDatabase, lambda database: functools.partial(answer_document, database))
