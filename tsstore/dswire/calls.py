"""The one place that talks to a ``google.cloud.datastore.Client`` (Firestore in Datastore
mode): its four calls (``RunQuery``, ``RunAggregationQuery``, ``Lookup``, ``Commit``) sent as raw
requests on the client's own generated API (``client._datastore_api``), with no retry of the
API's own (tsstore decides: :mod:`tsstore.faults`), every answer's server time told to the
project's clock.

Why raw: the public API drops what tsstore needs (a query's read time and per-request
property mask, a lookup's read and update times, ``insert`` and ``update`` mutations, a null
``avg``). The only private name used is ``_datastore_api``, plus ``_base_url`` to tell the
emulator's clock from Google Cloud's.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud.datastore_v1.types import datastore as ds_types

from tsstore import asks
from tsstore.clock import ServerClock, local_us, project_clock
from tsstore.dswire import queries
from tsstore.dswire.values import (
    decode_entity,
    decode_value,
    encode_entity,
    key,
    key_path,
    partition,
    set_time,
)
from tsstore.late import WATERMARKS, WRITERS, BarProbe, Horizon, mark_id, marks_path
from tsstore.ticks import Tick, get_path
from tsstore.ticks import leaf_paths as _leaf_paths
from tsstore.times import from_timestamp_pb, plain_datetime
from tsstore.write.ops import ALREADY_EXISTS, NOT_FOUND, Erase, Patch, Stored, WriteOp, WriteStatus

RUN_QUERY = ds_types.RunQueryRequest
AGGREGATE = ds_types.RunAggregationQueryRequest
LOOKUP = ds_types.LookupRequest
COMMIT = ds_types.CommitRequest
_NOT_FINISHED, _AFTER_LIMIT = 2, 3  # QueryResultBatch.MoreResultsType: NOT_FINISHED, MORE_RESULTS_AFTER_LIMIT
#: Entities one RunQuery call asks for at most (the rest by cursor, at the same read time): the
#: emulator answers a query of 60 000 ticks with one 22 MB batch, which the client refuses
#: (gRPC's 4 MB), where Google Cloud cuts batches itself. An answer still too large for the
#: client is asked again for half as many. Not much less: the emulator scans a query again
#: from its start for each cursor (30 000 ticks: 16.6 s in batches of 1 000, 3.9 s of 5 000).
BATCH_ENTITIES = 5000
_TRANSACTIONAL, _NON_TRANSACTIONAL = 1, 2
#: Keys per Lookup at most (Datastore mode's limit).
MAX_LOOKUP_KEYS = 1000
ABORTED = 10
_FAIL_ON_CONFLICT = 3  # Mutation.ConflictResolutionStrategy.FAIL


class DatastoreCalls:
    """The calls of one ``datastore.Client`` on its project, database and namespace, each
    timing out after ``timeout`` seconds."""

    def __init__(self, client: Any, *, timeout: float = 60.0) -> None:
        self.client = client
        self.api = client._datastore_api
        self.project, self.database = str(client.project), str(client.database or "")
        self.where = partition(self.project, self.database, client.namespace)
        endpoint = str(getattr(client, "_base_url", "") or "")
        self.clock: ServerClock = project_clock("" if "googleapis.com" in endpoint else endpoint, self.project)
        self.timeout = timeout

    def _request(self, kind: Any, read_time: dt.datetime | None = None) -> Any:
        request = kind.pb()(project_id=self.project, database_id=self.database)
        if read_time is not None:
            set_time(request.read_options.read_time, read_time)
        return request

    def query_request(self, read_time: dt.datetime | None) -> Any:
        """A new ``RunQueryRequest`` on this database at ``read_time``."""
        return self._request(RUN_QUERY, read_time)

    def _send(self, method: str, kind: Any, request: Any, *, timeout: float | None = None) -> Any:
        call = getattr(self.api, method)
        return call(request=kind.wrap(request), retry=None, timeout=self.timeout if timeout is None else timeout)._pb

    # ------------------------------------------------------------------ queries

    def run(self, query: Any, *, read_time: dt.datetime | None, mask: Sequence[str] | None = None,
            limit: int | None = None, request: Any = None) -> Iterator[Any]:  # fmt: skip
        """The entity results of ``query``, batch after batch (the first request is sent now),
        at ``read_time`` (``None``: the first batch's read time for the rest, set in
        ``request`` when one is given)."""
        request = self.query_request(read_time) if request is None else request
        request.partition_id.CopyFrom(self.where)
        request.query.CopyFrom(query)
        if mask is not None:
            request.property_mask.paths.extend(mask)
        if limit is None and request.query.HasField("limit"):
            limit = request.query.limit.value  # the query's own (a census's first value)
        request.query.limit.value = BATCH_ENTITIES if limit is None else min(limit, BATCH_ENTITIES)
        sent = local_us()
        first = self._query(request)
        return self._batches(request, first, sent, limit)

    def _query(self, request: Any) -> Any:
        """One RunQuery call of ``request``; an answer larger than the client takes is asked
        again for half as many entities (``request``'s limit halved)."""
        while True:
            try:
                return self._send("run_query", RUN_QUERY, request)
            except gexc.ResourceExhausted as exc:
                if "larger than max" not in str(exc) or request.query.limit.value <= 1:
                    raise
                request.query.limit.value //= 2

    def collect(self, query: Any, *, read_time: dt.datetime | None, mask: Sequence[str] | None = None,
                limit: int | None = None) -> tuple[list[Any], dt.datetime | None]:  # fmt: skip
        """Every entity result of ``query`` and the read time they were read at."""
        request = self.query_request(read_time)
        results = list(self.run(query, read_time=read_time, mask=mask, limit=limit, request=request))
        pinned = request.read_options
        return results, from_timestamp_pb(pinned.read_time) if pinned.HasField("read_time") else None

    def _batches(self, request: Any, response: Any, sent: int, limit: int | None) -> Iterator[Any]:
        got, cap = 0, request.query.limit.value
        while True:
            batch = response.batch
            if batch.HasField("read_time"):
                pinned = request.read_options.HasField("read_time")  # given: a lower bound only (told_clock)
                self.clock.saw(from_timestamp_pb(batch.read_time), sent=sent, read=not pinned)
                if not pinned:
                    request.read_options.read_time.CopyFrom(batch.read_time)  # the rest at the same snapshot
            yield from batch.entity_results
            got += len(batch.entity_results)
            # Read on after our own cap per call (the caller's limit not reached yet), when it
            # was reached: the emulator says "more after the limit" below it too.
            cap = min(cap, request.query.limit.value)  # as halved for the client, if it was
            capped = batch.more_results == _AFTER_LIMIT and len(batch.entity_results) == request.query.limit.value
            if not (batch.more_results == _NOT_FINISHED or capped) or (limit is not None and got >= limit):
                return
            request.query.start_cursor = batch.end_cursor
            request.query.limit.value = cap if limit is None else min(limit - got, cap)
            sent = local_us()
            response = self._query(request)

    def aggregate(self, query: Any, aggregations: Sequence[tuple[str, str, str | None]],
                  read_time: dt.datetime | None) -> dict[str, Any]:  # fmt: skip
        """``{alias: value}`` of ``(kind, alias, field)`` aggregations (``count``, ``sum``,
        ``avg``) over ``query`` at ``read_time``; an ``avg`` of nothing is ``None``."""
        return self.aggregate_at(query, aggregations, read_time)[0]

    def aggregate_at(self, query: Any, aggregations: Sequence[tuple[str, str, str | None]],
                     read_time: dt.datetime | None) -> tuple[dict[str, Any], dt.datetime | None]:  # fmt: skip
        """:meth:`aggregate`'s answer and the time it was true at."""
        request = self._request(AGGREGATE, read_time)
        request.partition_id.CopyFrom(self.where)
        nested = request.aggregation_query
        nested.nested_query.CopyFrom(query)
        for kind, alias, field in aggregations:
            made = nested.aggregations.add()
            made.alias = alias
            if kind == "count":
                made.count.SetInParent()
            else:
                getattr(made, kind).property.name = field
        sent = local_us()
        batch = self._send("run_aggregation_query", AGGREGATE, request).batch
        at = from_timestamp_pb(batch.read_time) if batch.HasField("read_time") else None
        self.clock.saw(at, sent=sent, read=read_time is None)
        [result] = batch.aggregation_results
        properties = result.aggregate_properties
        return {alias: decode_value(properties[alias]) for _, alias, _ in aggregations}, at

    # ------------------------------------------------------------------ documents

    def lookup(self, paths: Sequence[str], *, read_time: dt.datetime | None = None,
               mask: Sequence[str] | None = None) -> tuple[dict[str, Any], dt.datetime | None]:  # fmt: skip
        """The entity results of the documents at ``paths`` that exist (by path), and the
        read time (Lookups of at most :data:`MAX_LOOKUP_KEYS` keys each; a deferred key is
        looked up again)."""
        found: dict[str, Any] = {}
        read: dt.datetime | None = None
        todo = [key(self.where, path) for path in paths]
        while todo:
            part, todo = todo[:MAX_LOOKUP_KEYS], todo[MAX_LOOKUP_KEYS:]
            request = self._request(LOOKUP, read_time)
            request.keys.extend(part)
            if mask is not None:
                request.property_mask.paths.extend(mask)
            sent = local_us()
            response = self._send("lookup", LOOKUP, request)
            if response.HasField("read_time"):
                read = from_timestamp_pb(response.read_time)
                self.clock.saw(read, sent=sent, read=read_time is None)
            found.update((key_path(result.entity.key), result) for result in response.found)
            todo = [*response.deferred, *todo]
        return found, read

    def commit(self, mutations: Iterable[Any], *, transactional: bool, timeout: float | None = None) -> Any:
        """Commit ``mutations`` (atomically when ``transactional``) within ``timeout`` seconds
        (``None``: the calls' own); the response."""
        request = self._request(COMMIT)
        request.mode = _TRANSACTIONAL if transactional else _NON_TRANSACTIONAL
        if transactional:
            request.single_use_transaction.read_write.SetInParent()
        request.mutations.extend(mutations)
        sent = local_us()
        response = self._send("commit", COMMIT, request, timeout=timeout)
        self.clock.saw(from_timestamp_pb(response.commit_time), sent=sent, read=False)
        return response

    def merge(self, path: str, changes: Mapping[str, Any]) -> dt.datetime:
        """Merge ``changes`` into the entity at ``path`` as Firestore merges (maps key by key):
        one upsert whose property mask names the leaf paths of ``changes``, so the server
        keeps every other property, whatever another writer merged meanwhile; the commit
        time."""
        mutation = self.mutation("upsert", path, changes)
        mutation.property_mask.paths.extend(leaf_paths(changes))
        return from_timestamp_pb(self.commit([mutation], transactional=False).commit_time)

    def mutation(self, op: str, path: str, data: Mapping[str, Any] | None = None) -> Any:
        """One ``insert``/``upsert``/``update`` of ``data`` at ``path``, or a ``delete``."""
        made = ds_types.Mutation.pb()()
        if op == "delete":
            made.delete.CopyFrom(key(self.where, path))
            return made
        entity = getattr(made, op)
        entity.key.CopyFrom(key(self.where, path))
        encode_entity(entity, data or {})
        return made


# ------------------------------------------------------------------------------ document asks


def answer_document(calls: DatastoreCalls, ask: asks.DocAsk) -> Any:
    """The answer to a document ask (:mod:`tsstore.asks`) in Datastore mode."""
    match ask:
        case asks.GetDoc(path=path, fields=fields, read_time=read_time):
            found, read = calls.lookup([path], read_time=read_time, mask=list(fields) if fields is not None else None)
            return _doc(path, found.get(path), read)
        case asks.SetDoc(path=path, data=data, merge=merge, server_time=stamped):
            return _set(calls, path, dict(data), merge=merge, stamped=stamped)
        case asks.FindDocs(collection=collection, where=where, read_time=read_time):
            results, at = calls.collect(queries.find_query(calls.where, collection, list(where)), read_time=read_time)
            return [_doc(key_path(result.entity.key), result, at) for result in results]
        case asks.SumDocs(collection=collection, field=field):
            query = queries.find_query(calls.where, collection, [])
            summed, at = calls.aggregate_at(query, [("sum", "sum", field)], None)
            return summed["sum"], at
    try:
        response = calls.commit(_conditional(calls, ask), transactional=True)
    except gexc.GoogleAPICallError as exc:
        if asks.refused(ask, exc):
            return asks.refusal(ask)
        raise
    if isinstance(ask, (asks.CreateDoc, asks.UpdateDoc)):  # its write time: the entity's update time
        return from_timestamp_pb(response.mutation_results[0].update_time)
    return True


def _conditional(calls: DatastoreCalls, ask: asks.DocAsk) -> list[Any]:
    """The mutations of a conditional write ask (Native mode's wire says when it is refused)."""
    match ask:
        case asks.DeleteDoc(path=path, written=written):
            mutation = calls.mutation("delete", path)
            if written is not None:
                _only_if_written(mutation, written)
            return [mutation]
        case asks.CreateDoc(path=path, data=data):
            return [calls.mutation("insert", path, data)]
        case asks.UpdateDoc(path=path, data=data, written=written):
            mutation = patch_mutation(calls, path, data)  # a reshard's Patch, on condition
            _only_if_written(mutation, written)
            return [mutation]
        case asks.AddToDocs(adds=adds, receipt=receipt):
            made: dict[str, Any] = {}
            for path, field, amount in adds:  # one mutation per entity: a commit names each key once
                if path not in made:
                    made[path] = calls.mutation("upsert", path)
                    made[path].property_mask.paths.append(queries.KEY)  # keep every property: only the key is written
                added = made[path].property_transforms.add()
                added.property, added.increment.integer_value = _property_path(field), amount
            return [*made.values(), *([calls.mutation("insert", receipt)] if receipt is not None else [])]
    raise TypeError(f"not a document ask: {ask!r}")  # pragma: no cover - DocAsk is the eight above


def _only_if_written(mutation: Any, written: dt.datetime) -> None:
    """Make ``mutation`` apply only to the entity as last written at ``written``: an update time
    to detect a conflict by, and FAIL to resolve one (a commit refused with
    FAILED_PRECONDITION). Without FAIL, Datastore mode keeps the server's entity and answers
    success (``conflict_detected``), and the emulator does not even check."""
    set_time(mutation.update_time, written)
    mutation.conflict_resolution_strategy = _FAIL_ON_CONFLICT


def _doc(path: str, result: Any, read: dt.datetime | None) -> asks.Doc:
    name = path.rsplit("/", 1)[-1]
    if result is None:
        return asks.Doc(id=name, data=None, update_time=None, read_time=read)
    updated = from_timestamp_pb(result.update_time) if result.HasField("update_time") else None
    return asks.Doc(id=name, data=decode_entity(result.entity), update_time=updated, read_time=read)


def _set(calls: DatastoreCalls, path: str, data: dict[str, Any], *, merge: bool, stamped: Sequence[str]) -> dt.datetime:
    """Write ``data`` at ``path`` (merged into what is stored when ``merge``:
    :meth:`DatastoreCalls.merge`), the ``stamped`` fields set to the commit's time; the commit
    time."""
    if stamped:
        # The server's time of the commit is not known before it: stamp the write with the
        # clock's estimate, then merge in the commit time, so it is exact.
        now = calls.clock.now() or dt.datetime.now(dt.timezone.utc)
        data.update(dict.fromkeys(stamped, now))
    if merge:
        committed = calls.merge(path, data)
    else:
        response = calls.commit([calls.mutation("upsert", path, data)], transactional=False)
        committed = from_timestamp_pb(response.commit_time)
    if stamped:
        calls.merge(path, dict.fromkeys(stamped, committed))
    return committed


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _property_path(name: str) -> str:
    """A property's name in a path: as it is when plain, else between backquotes."""
    return name if _PLAIN_NAME.fullmatch(name) else "`" + name.replace("`", "\\`") + "`"


def leaf_paths(changes: Mapping[str, Any]) -> list[str]:
    """The property paths a merge of ``changes`` sets: every value that is not a non-empty
    map, by its dotted path (a name that is not plain between backquotes)."""
    return _leaf_paths(changes, name=_property_path)


# ------------------------------------------------------------------------------ ticks


def read_ticks(
    calls: DatastoreCalls, queries_in_order: Sequence[Any], *, timestamp_field: str, read_time: dt.datetime | None,
    mask: Sequence[str] | None, limit: int | None,
) -> Iterator[Tick]:  # fmt: skip
    """The ticks of ``queries_in_order`` one after the other (a chunk, or a chunk continued
    after a position: :func:`~tsstore.dswire.queries.continued`), at most ``limit``, all at one
    read time; the first request is sent now."""
    path = timestamp_field.split(".")
    if mask is not None and timestamp_field not in mask:
        mask = [*mask, timestamp_field]
    pinned = calls.query_request(read_time)
    first = calls.run(queries_in_order[0], read_time=read_time, mask=mask, limit=limit, request=pinned)

    def ticks() -> Iterator[Tick]:
        nonlocal read_time
        left = limit
        results: Iterator[Any] = first
        for index in range(len(queries_in_order)):
            if index:
                results = calls.run(queries_in_order[index], read_time=read_time, mask=mask, limit=left)
            for result in results:
                entity = result.entity
                data = decode_entity(entity)
                yield Tick(entity.key.path[-1].name, plain_datetime(get_path(data, path)), data)
                if left is not None:
                    left -= 1
                    if left <= 0:
                        return
            if read_time is None and pinned.read_options.HasField("read_time"):  # the next queries at its snapshot
                read_time = from_timestamp_pb(pinned.read_options.read_time)
    return ticks()


# ------------------------------------------------------------------------------ writes


def send_writes(calls: DatastoreCalls, collection: str, ops: list[WriteOp], *, timeout: float) -> list[WriteStatus]:
    """Apply ``ops`` to ``collection`` in commits that each hold a key once, each atomic (a
    create of an existing entity fails its whole commit: each create then answers
    ALREADY_EXISTS and every other write ABORTED, "not applied", which the sender resends);
    one status per op."""
    statuses: list[WriteStatus] = []
    for part in _unique_runs(ops):
        mutations = [_mutation(calls, collection, op) for op in part]
        try:
            calls.commit(mutations, transactional=True, timeout=timeout)
        except gexc.AlreadyExists as exc:
            statuses += [(ALREADY_EXISTS, str(exc)) if create else (ABORTED, "not applied") for _, _, create in part]
            continue
        except gexc.NotFound as exc:
            statuses += [(NOT_FOUND, str(exc)) if isinstance(data, Patch) else (ABORTED, "not applied")
                         for _, data, _ in part]  # fmt: skip
            continue
        statuses += [(0, "")] * len(part)
    return statuses


def _unique_runs(ops: list[WriteOp]) -> Iterator[list[WriteOp]]:
    """``ops`` in runs that name each id once, in order."""
    run: list[WriteOp] = []
    seen: set[str] = set()
    for op in ops:
        if op[0] in seen:
            yield run
            run, seen = [], set()
        run.append(op)
        seen.add(op[0])
    if run:
        yield run


def _mutation(calls: DatastoreCalls, collection: str, op: WriteOp) -> Any:
    doc_id, data, create = op
    path = f"{collection}/{doc_id}"
    if data is None or isinstance(data, Erase):
        return calls.mutation("delete", path)
    if isinstance(data, Patch):
        return patch_mutation(calls, path, data.fields)
    return calls.mutation("insert" if create else "upsert", path, data)


def patch_mutation(calls: DatastoreCalls, path: str, fields: Mapping[str, Any]) -> Any:
    """An update of the entity at ``path`` that sets each dotted path of ``fields`` to its
    value (a map value replaces the map there, as Native mode's update does) and keeps every
    other property; refused with NOT_FOUND when the entity does not exist."""
    nested: dict[str, Any] = {}
    for dotted, value in fields.items():
        *parents, leaf = dotted.split(".")
        at = nested
        for name in parents:
            at = at.setdefault(name, {})
        at[leaf] = value
    mutation = calls.mutation("update", path, nested)
    mutation.property_mask.paths.extend(".".join(map(_property_path, dotted.split("."))) for dotted in fields)
    return mutation


def get_stored(calls: DatastoreCalls, collection: str, ids: list[str]) -> dict[str, Stored]:
    """The entities of ``collection`` with these ids that exist (batched lookups)."""
    found, _ = calls.lookup([f"{collection}/{doc_id}" for doc_id in ids])
    return {path.rsplit("/", 1)[-1]: Stored(decode_entity(r.entity), from_timestamp_pb(r.create_time))
            for path, r in found.items()}  # fmt: skip


def transport(calls: DatastoreCalls, collection: str, *, timeout: float) -> tuple[Any, Any]:
    """The sender's :data:`~tsstore.write.ops.Transport` on ``collection``, each commit timing
    out after ``timeout`` seconds."""
    send = functools.partial(send_writes, calls, collection, timeout=timeout)
    return send, functools.partial(get_stored, calls, collection)


class DatastoreHorizons:
    """What a writer's late-tick guard asks (:class:`~tsstore.write.marks.Horizons`), in
    Datastore mode: its lease, the roll-ups' horizons, and marks."""

    def __init__(self, calls: DatastoreCalls, collection: str, *, lease: str) -> None:
        self._calls, self._source, self._lease = calls, collection, f"{WRITERS}/{lease}"

    def put_lease(self, data: dict[str, Any]) -> dt.datetime:
        response = self._calls.commit([self._calls.mutation("upsert", self._lease, data)], transactional=False)
        return from_timestamp_pb(response.commit_time)

    def drop_lease(self) -> None:
        self._calls.commit([self._calls.mutation("delete", self._lease)], transactional=False)

    def horizons(self) -> list[Horizon]:
        query = queries.find_query(self._calls.where, WATERMARKS, [("source", "==", self._source)])
        found = [Horizon.of(key_path(r.entity.key).rsplit("/", 1)[-1], decode_entity(r.entity))
                 for r in self._calls.run(query, read_time=None)]  # fmt: skip
        return [h for h in found if h is not None]

    def holds_bar(self, probe: BarProbe) -> bool:
        def found(shards: list[str]) -> bool:  # as a chunk query, which its index serves
            conditions = [(probe.shard_field, "in", shards), (probe.timestamp_field, ">=", probe.start),
                          (probe.timestamp_field, "<", probe.end)]  # fmt: skip
            query = queries.find_query(self._calls.where, probe.rollup, conditions)
            return any(True for _ in self._calls.run(query, read_time=None, limit=1))

        return any(found(shards) for shards in probe.chunks())

    def put_marks(self, marks: Mapping[str, Iterable[dt.datetime]]) -> None:
        for rollup, buckets in marks.items():
            mutations = [self._calls.mutation("upsert", f"{marks_path(rollup)}/{mark_id(b)}",
                                              {"bucket": b, "nonce": uuid.uuid4().hex}) for b in buckets]  # fmt: skip
            self._calls.commit(mutations, transactional=False)
