"""The wire: encode writes and decode query results, fast, in one isolated place.

Proto-plus wrappers are the client's hot spot both ways. Reading, ``query.stream()``
builds a ``DocumentSnapshot`` per document, about 150 µs a document; writing, the
client's ``set()`` encoding costs about 160 µs a document, twenty times what building
the raw protobuf ``Write`` messages directly costs. The fast paths here send the same
requests on the client's own GAPIC transport with raw protobuf messages. They rely on
private parts of google-cloud-firestore (``Query._prep_stream``, ``Client._firestore_api``,
``Client._rpc_metadata``, ``Client._database_string``, ``Client._database``), so they live
in this one module (no other module touches a private attribute of the client), are called
by keyword, are tested against the public paths, and fall back to them if the client's
internals change shape (:func:`fast_path_problems` says why, and the suite fails on it).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import json
import logging
import threading
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import grpc
from google.api_core import exceptions as gexc
from google.api_core import retry as retries
from google.api_core import retry_async
from google.cloud.firestore_v1 import SERVER_TIMESTAMP, AsyncClient, Increment, _helpers
from google.cloud.firestore_v1.base_collection import BaseCollectionReference
from google.cloud.firestore_v1.base_document import DocumentSnapshot
from google.cloud.firestore_v1.base_query import BaseQuery, FieldFilter
from google.cloud.firestore_v1.bulk_batch import BulkWriteBatch
from google.cloud.firestore_v1.types import StructuredQuery
from google.cloud.firestore_v1.types import firestore as firestore_types
from google.cloud.firestore_v1.types.firestore import TargetChange
from google.cloud.firestore_v1.watch import ChangeType, Watch

from tsstore import faults
from tsstore.asks import (
    AddToDocs,
    CreateDoc,
    DeleteDoc,
    Doc,
    DocAsk,
    FindDocs,
    GetDoc,
    SetDoc,
    SumDocs,
    UpdateDoc,
    refusal,
    refused,
)
from tsstore.clock import ServerClock, local_us, project_clock
from tsstore.late import WATERMARKS, WRITERS, BarProbe, Horizon, mark_id, marks_path
from tsstore.logs import ERROR_TYPE
from tsstore.spec import SeriesSpec
from tsstore.ticks import Ordered, Tick, get_path
from tsstore.times import EPOCH as _EPOCH
from tsstore.times import from_timestamp_pb, plain_datetime
from tsstore.write.marks import LateGuard
from tsstore.write.ops import Erase, Patch, Stored, Transport, WriteOp, WriteStatus

log = logging.getLogger(__name__)


def _never(exc: Exception) -> bool:
    return False


#: The ``retry`` of a query or aggregation run by the client's own calls (``get``, ``stream``):
#: one attempt, as ``retry=None`` means for its other calls, so that :mod:`tsstore.faults`
#: decides about trying again. Not ``None`` there: when such a stream breaks after its first
#: message, google-cloud-firestore (2.34.1) asks the retry's predicate whether to resume, and
#: ``None`` has none (``AttributeError: 'NoneType' object has no attribute '_predicate'``
#: instead of the gRPC error, a fault). This retry answers no, and the gRPC error is raised.
ONE_ATTEMPT = retries.Retry(predicate=_never)
#: :data:`ONE_ATTEMPT` for an ``AsyncClient``'s calls.
AONE_ATTEMPT = retry_async.AsyncRetry(predicate=_never)


def one_attempt(client: Any) -> retries.Retry | retry_async.AsyncRetry:
    """:data:`ONE_ATTEMPT` for a sync client, :data:`AONE_ATTEMPT` for an ``AsyncClient``."""
    return AONE_ATTEMPT if isinstance(client, AsyncClient) else ONE_ATTEMPT


def stream_ticks(
    query: BaseQuery, *, timestamp_field: str, read_time: dt.datetime | None, fast: bool = True
) -> Iterator[Tick]:
    """The query's documents as ticks, in the server's order. The fast path sends the
    request now, so queries started one after another are in flight together."""
    if fast:
        try:
            call, client, expected_prefix = _run_query(query, read_time)
        except (AttributeError, TypeError, ValueError) as exc:  # client internals changed
            log.warning("the fast query path is unavailable (%s); using query.stream()", exc,
                        extra={ERROR_TYPE: faults.error_type(exc)})  # fmt: skip
        else:
            sent = local_us()
            return _decode_responses(call(), _Decoder(client, expected_prefix, timestamp_field, sent=sent,
                                                            pinned=read_time is not None))
    return _public_stream(query, timestamp_field=timestamp_field, read_time=read_time)


def _public_stream(query: BaseQuery, *, timestamp_field: str, read_time: dt.datetime | None) -> Iterator[Tick]:
    # One attempt: the engine resumes a chunk that breaks off after its last tick.
    snapshots = cast("Iterator[Any]", query.stream(read_time=read_time, retry=ONE_ATTEMPT))  # a sync query here
    for snap in snapshots:
        data = snap.to_dict() or {}
        yield Tick(snap.id, _plain_time(get_path(data, timestamp_field.split("."))), data)


def _run_query(query: BaseQuery, read_time: dt.datetime | None) -> tuple[Callable[[], Any], Any, str]:
    """The RunQuery call for ``query`` on the client's GAPIC API (not made yet: only looked
    up), the client, and the prefix of the result documents' names."""
    client = query._client
    request, expected_prefix, kwargs = query._prep_stream(
        transaction=None, retry=None, timeout=None, explain_options=None, read_time=read_time
    )
    api = client._firestore_api
    call = functools.partial(api.run_query, request=request, metadata=client._rpc_metadata, **kwargs)
    return call, client, expected_prefix


def fast_path_problems(client: Any) -> list[str]:
    """Why the fast paths would fall back to the public ones with this client (empty: they
    would not). The test suite asserts this is empty, so a client upgrade that moves the
    internals fails loudly instead of silently slowing tsstore down."""
    problems = []
    for name in ("_firestore_api", "_rpc_metadata", "_database_string", "_firestore_api_internal", "_target"):
        if not hasattr(client, name):
            problems.append(f"the client has no {name}")
    from google.cloud.firestore_v1 import base_client

    for name in ("_DEFAULT_CHANNEL_OPTIONS", "_GRPC_MSG_SIZE_OPTIONS"):
        if not isinstance(getattr(base_client, name, None), list):
            problems.append(f"google.cloud.firestore_v1.base_client has no list {name}")
    api = getattr(client, "_firestore_api", None)
    for method in ("run_query", "batch_write", "batch_get_documents"):
        if api is not None and not callable(getattr(api, method, None)):
            problems.append(f"the client's GAPIC API has no {method}")
    import inspect

    from google.cloud.firestore_v1.query import Query

    if not callable(getattr(Watch, "for_query", None)) or not hasattr(client.collection("probe").limit(1), "_orders"):
        problems.append("listeners: the client's Watch.for_query or a query's _orders moved")
    dispatch = getattr(Watch, "_target_changetype_dispatch", None)
    changes = TargetChange.TargetChangeType
    if not isinstance(dispatch, dict) or {changes.ADD, changes.RESET} - set(dispatch) or not callable(Watch.push):
        problems.append("listeners: the client's Watch no longer dispatches target changes through a table, or has "
                        "no push (a listener's snapshots would not be reconciled)")
    prep = getattr(Query, "_prep_stream", None)
    if prep is None:
        problems.append("Query has no _prep_stream")
    else:
        wanted = {"transaction", "retry", "timeout", "explain_options", "read_time"}
        missing = wanted - set(inspect.signature(prep).parameters)
        if missing:
            problems.append(f"Query._prep_stream lacks parameters {sorted(missing)}")
    return problems


def listen(
    query: Any, on_snapshot: Callable[[list[Any], list[Any], dt.datetime], None], *, ordered: bool = True
) -> Any:
    """A listener on ``query`` (a sync query) calling ``on_snapshot`` with each snapshot: the
    client's ``Watch`` for the query, with :func:`listener_order` in place of the client's own
    comparator, which looks a field path up as a top-level key (``__name__`` and nested fields
    such as ``price.micros`` are never found, so the listener stopped whenever two timestamps
    tied) and sorts a descending order ascending.

    - ``ordered``: ``False`` for a caller that needs neither the documents nor the changes in
      the query's order (a tail): the client sorts every document it holds at each snapshot,
      which then costs one comparison a document instead of n log n

    Its first snapshot on each stream (new, or reopened by the client), and its snapshot after
    a RESET that dropped documents it had received, are what ``query`` answers at that
    snapshot's read time (:class:`_Reconciling`)."""
    ordering = _Ordered(query, ordered)
    return _Reconciling.for_query(ordering, on_snapshot, DocumentSnapshot)  # type: ignore[no-untyped-call]


#: How a listener's reconciling query (:class:`_Reconciling`) is tried again: on the codes a
#: cut connection or a loaded emulator gives, for up to a minute, each attempt bounded by
#: :data:`RECONCILE_ATTEMPT` seconds (it runs on the listener's own thread, which reports
#: nothing meanwhile); then the listener ends (and tsstore listens again,
#: :meth:`tsstore.live.listen.Listeners.check`).
RECONCILE_RETRY = retries.Retry(
    predicate=retries.if_exception_type(
        gexc.ServiceUnavailable, gexc.Cancelled, gexc.DeadlineExceeded, gexc.InternalServerError, gexc.Unknown
    ),
    timeout=60.0,
)
#: How long one attempt of that query may take (seconds).
RECONCILE_ATTEMPT = 30.0


#: The name the client gives the thread that ends a listener on an error (tests count listener threads by it).
_ERROR_THREAD = "Thread-OnRpcTerminated"


class _Reconciling(Watch):
    """The client's ``Watch``, whose first snapshot on each stream (a new one, or one the
    client reopened) and whose snapshot after a RESET that discarded documents it had received
    are rebuilt from one query at the snapshot's read time (issue 59; measured in the soak,
    emulator 1.19.9, google-cloud-firestore 2.34.1).

    The client reopens a listener's stream by itself on UNAVAILABLE (a cut connection), with
    the resume token of its last snapshot, and tells no one. What the emulator sends at the
    start of a stream is not always the query's result at the read time it gives:

    - a consistent state (CURRENT, NO_CHANGE) without a commit made while it sent that state
      (a new listener: 49 documents streamed, then CURRENT at a read time after the writer's
      last commit, whose 45 documents of that chunk never came; 47 of 228 first snapshots in
      24 soaks at 40 shards and 500 ticks a second lacked one) or while the stream was down (a
      reopened one: the writer's last 100 documents at 3 shards; 1 document in 3 of 92
      reopens at 40 shards and 15 a second);
    - part of the result set, a RESET, and only the rest (46 documents, RESET, 154 of 200 on a
      reopened stream; 116, RESET, 83 on a new one). The client obeys the RESET and drops
      every change received before it, so its next snapshot lacks those documents (REMOVED if
      it held them, never ADDED if new).

    Nothing brings those documents until the next write makes the emulator send every listener
    its result again: a tail whose listener moved on before then, or that lost the writer's
    last commit so, never delivered those ticks; a watch's window lost them, and let them enter
    again at the next write. Here those snapshots are what the query answers at their read time
    (documents held and not answered are REMOVED, the answered ones ADDED or MODIFIED): one
    query per stream opened or RESET not followed by what it dropped, none otherwise (a tail's
    listener, restarted once it holds ``hold`` documents, so reads what it holds twice at
    each start). If that query fails for a minute, the listener ends (and tsstore listens
    again)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._stale = False  # whether the next snapshot is rebuilt from a query
        self._dropped: set[str] = set()  # documents a RESET dropped since the last snapshot
        super().__init__(*args, **kwargs)  # type: ignore[no-untyped-call]  # (which opens the stream)

    def _on_add(self, target_change: Any) -> None:
        super()._on_snapshot_target_change_add(target_change)  # type: ignore[no-untyped-call]
        self._stale = True  # every stream, new or reopened, starts with its target's ADD

    def _on_reset(self, target_change: Any) -> None:
        self._dropped.update(name for name, change in self.change_map.items() if not isinstance(change, ChangeType))
        super()._on_snapshot_target_change_reset(target_change)  # type: ignore[no-untyped-call]

    # The client dispatches target changes through this table of its own functions (overriding
    # the methods alone changes nothing).
    _target_changetype_dispatch: dict[Any, Callable[..., Any]] = {
        **Watch._target_changetype_dispatch,
        TargetChange.TargetChangeType.ADD: _on_add,
        TargetChange.TargetChangeType.RESET: _on_reset,
    }

    def push(self, read_time: Any, next_resume_token: Any) -> None:
        # A RESET followed by every document it dropped is harmless (the emulator sends some
        # documents, RESET, and all of them at a write racing its answer): only a document not
        # sent again calls for the query.
        if any(isinstance(self.change_map.get(name, ChangeType.REMOVED), ChangeType) for name in self._dropped):
            self._stale = True
        self._dropped.clear()
        if self._stale:
            try:
                answered = self._document_reference.get(
                    read_time=read_time, retry=RECONCILE_RETRY, timeout=RECONCILE_ATTEMPT
                )
            except gexc.GoogleAPIError as exc:  # RetryError after the minute, or a code not tried again
                log.warning("a listener's reconciling query failed (%s): the listener ends", exc,
                            extra={ERROR_TYPE: faults.error_type(exc)})  # fmt: skip
                threading.Thread(target=self.close, name=_ERROR_THREAD, daemon=True).start()
                return
            if self._closed:  # closed while the query ran: no one to report to
                return
            self.change_map.clear()
            for held in self.doc_tree.keys():  # type: ignore[no-untyped-call]
                self.change_map[held.reference._document_path] = ChangeType.REMOVED
            for document in answered:
                self.change_map[document.reference._document_path] = document
            self._stale = False
        super().push(read_time, next_resume_token)  # type: ignore[no-untyped-call]


def listener_order(query: Any) -> Callable[[Any, Any], int]:
    """How a listener on ``query`` orders two document snapshots: by the value at each of the
    query's order field paths, in Firestore's order of values and the order's direction, then
    by document name in the last order's direction (Firestore's implicit last order).

    A document's place (its values at those paths) is read once and kept while the client
    holds the snapshot: the client sorts every document it holds at each snapshot it reports,
    and reading the values again at each comparison (``get`` copies each value) made a tail's
    listener holding 200 documents take longer per snapshot than the emulator took between
    writes at 15 a second, so its reports fell further and further behind (issue 59)."""
    descending = StructuredQuery.Direction.DESCENDING
    orders = [(o.field.field_path, o.direction == descending) for o in query._orders]
    orders.append(("__name__", orders[-1][1] if orders else False))
    places: weakref.WeakKeyDictionary[Any, tuple[Ordered, ...]] = weakref.WeakKeyDictionary()

    def place(document: Any) -> tuple[Ordered, ...]:
        found = places.get(document)
        if found is None:
            found = places[document] = tuple(Ordered(_value_at(document, path)) for path, _ in orders)
        return found

    def compare(first: Any, second: Any) -> int:
        for mine, theirs, (_, backwards) in zip(place(first), place(second), orders):
            if mine != theirs:
                return (1 if mine < theirs else -1) if backwards else (-1 if mine < theirs else 1)
        return 0

    return compare


class _Ordered:
    """``query`` as the client's ``Watch`` takes it, with :func:`listener_order` as its comparator
    (or, not ``ordered``, one that finds every two documents equal)."""

    def __init__(self, query: Any, ordered: bool) -> None:
        self._query = query
        self._comparator = listener_order(query) if ordered else _unordered

    def __getattr__(self, name: str) -> Any:
        return getattr(self._query, name)


def _unordered(first: Any, second: Any) -> int:
    return 0


def _value_at(document: Any, path: str) -> Any:
    if path == "__name__":
        return document.reference.path
    try:
        return document.get(path)
    except KeyError:  # not held: compares as null
        return None


def sync_twin(client: Any) -> Any:
    """A sync ``firestore.Client`` on the same project, database, credentials and endpoint as
    ``client`` (an ``AsyncClient``): listeners (``on_snapshot``) exist on the sync client only.
    The emulator's address is read from the environment when a client is made, so it is
    copied over."""
    from google.cloud import firestore

    twin = firestore.Client(
        project=client.project,
        credentials=client._credentials,
        database=client._database,
        client_info=client._client_info,
        client_options=client._client_options,
    )
    twin._emulator_host = client._emulator_host
    return quick_reconnects(twin)


#: The calls that wait for the connection (see :data:`QUICK_RECONNECT_OPTIONS`): the writer's
#: batches, and the commits of its lease and marks (a view of the roll-ups' horizons renewed
#: through a cut would otherwise fail, and with it every send that needs the view).
_WAITING = ("BatchWrite", "Commit")

#: gRPC's channel waits 1 s after a failed connection attempt, then 1.6 times longer after
#: each further one, up to 2 minutes: on a network that drops now and then, a channel that
#: tried to reconnect while the network was down waits longer and longer while every call
#: fails at once. Measured here through a proxy that cuts every ~1 s and refuses connections
#: for 0.3 s: 8 000 ticks took 12x the clean time with gRPC's defaults, 2.5x with attempts
#: from 0.1 s capped at 1 s. With that cap a read after a cut still succeeded 0.59 s after it
#: (median of 8: the attempts at 0.1 and 0.26 s met the network down, the next came at 0.5 s),
#: with an attempt every 0.1 s 0.36 s after it: the network's 0.3 s and at most one attempt's
#: wait. The :data:`_WAITING` calls also wait for the connection (gRPC's ``waitForReady``,
#: within the call's timeout) instead of failing at once while the channel has none, so a
#: batch sent again after a cut leaves the moment the connection is back, and its fault
#: pauses do not grow through a streak of failures that only say the network is still down
#: (they did: nothing was in flight for 0.5-0.9 s after each cut, bench/faults.py).
QUICK_RECONNECT_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 100),
    ("grpc.service_config", json.dumps({"methodConfig": [
        {"name": [{"service": "google.firestore.v1.Firestore", "method": method} for method in _WAITING],
         "waitForReady": True},
    ]}, separators=(",", ":"))),
)  # fmt: skip


def quick_reconnects(client: Any, *, options: Sequence[tuple[str, Any]] = ()) -> Any:
    """The client, with a channel that tries to reconnect every 0.1 s while the network is
    down (gRPC's own back-off between connection attempts grows to 2 minutes), and whose
    writer calls wait for the connection instead of failing while it is down. The
    client still builds its channel and GAPIC client on first use (an ``AsyncClient``'s must
    be built in the event loop that uses it), as it would, with
    :data:`QUICK_RECONNECT_OPTIONS` added. A client already in use, or one whose internals
    moved, is returned as it is.

    - ``client``: a ``firestore.Client`` or ``AsyncClient`` not used yet
    - ``options``: more gRPC channel arguments, ``(name, value)`` pairs, put first (gRPC
      takes the first of a repeated argument, so they win over the client's own)"""
    import grpc
    from google.cloud.firestore_v1 import base_client

    try:
        if client._firestore_api_internal is not None:
            return client
        build = client._firestore_api_helper
    except AttributeError as exc:  # client internals changed
        log.warning("the client's reconnect back-off could not be shortened (%s); using the client as it is", exc,
                    extra={ERROR_TYPE: faults.error_type(exc)})  # fmt: skip
        return client

    def helper(transport: Any, client_class: Any, client_module: Any) -> Any:
        if client._firestore_api_internal is None:
            asynchronous = "GrpcAsyncIOTransport" in transport.__name__  # as the client tells them apart
            if client._emulator_host is not None:
                token = getattr(client._credentials, "id_token", None) or "owner"  # as the client does
                base = [("Authorization", f"Bearer {token}"), *base_client._GRPC_MSG_SIZE_OPTIONS]
                insecure = grpc.aio.insecure_channel if asynchronous else grpc.insecure_channel
                channel = insecure(client._emulator_host, options=[*options, *base, *QUICK_RECONNECT_OPTIONS])
            else:
                every = [*options, *base_client._DEFAULT_CHANNEL_OPTIONS, *QUICK_RECONNECT_OPTIONS]
                channel = transport.create_channel(client._target, credentials=client._credentials, options=every)
            client._transport = transport(host=client._target, channel=channel)
            client._firestore_api_internal = client_class(
                transport=client._transport, client_options=client._client_options
            )
        return build(transport, client_class, client_module)  # sets what else the client sets

    client._firestore_api_helper = helper
    return client


def answer_document(client: Any, ask: DocAsk) -> Any:
    """The answer to a document ask, on a ``firestore.Client`` (one attempt)."""
    call, finish = _document_call(client, ask)
    sent = local_us()
    try:
        return told_clock(client, finish(call()), sent, pinned=getattr(ask, "read_time", None) is not None)
    except gexc.GoogleAPICallError as exc:
        if refused(ask, exc):
            return refusal(ask)
        raise


async def aanswer_document(client: Any, ask: DocAsk) -> Any:
    """The answer to a document ask, on a ``firestore.AsyncClient`` (one attempt)."""
    call, finish = _document_call(client, ask)
    sent = local_us()
    try:
        return told_clock(client, finish(await call()), sent, pinned=getattr(ask, "read_time", None) is not None)
    except gexc.GoogleAPICallError as exc:
        if refused(ask, exc):
            return refusal(ask)
        raise


def told_clock(client: Any, answer: Any, sent: int, *, pinned: bool = False) -> Any:
    """``answer`` to a call ``sent`` then, its server time told to the project's clock (a
    write's commit time, or the latest read time of the documents it holds). ``pinned``: the
    call read at a time it was given, which the answer carries back: a lower bound only, as a
    commit time is (taken as a time stamped on arrival, a snapshot the clock estimated would
    pull its next estimates back by the half round trip it was off, and more each time)."""
    clock = server_clock(client)
    if isinstance(answer, dt.datetime):
        clock.saw(answer, sent=sent, read=False)
    else:
        read = [doc.read_time for doc in (answer if isinstance(answer, list) else [answer]) if isinstance(doc, Doc)]
        clock.saw(max((t for t in read if t is not None), default=None), sent=sent, read=not pinned)
    return answer


def server_clock(client: Any) -> ServerClock:
    """The clock of ``client``'s project (:mod:`tsstore.clock`), told every server time an
    answer on one of its databases carries."""
    return project_clock(emulator_host(client) or "", str(client.project))


def _document_call(client: Any, ask: DocAsk) -> tuple[Callable[[], Any], Callable[[Any], Any]]:
    """The client call a document ask makes (its response, or an awaitable of it on an async
    client) and what turns the response into the ask's answer."""
    match ask:
        case GetDoc(path=path, fields=fields, read_time=read_time):
            paths = list(fields) if fields is not None else None
            return lambda: client.document(path).get(field_paths=paths, read_time=read_time, retry=None), doc_of
        case SetDoc(path=path, merge=merge):
            data = {**ask.data, **dict.fromkeys(ask.server_time, SERVER_TIMESTAMP)}
            return lambda: client.document(path).set(data, merge=merge, retry=None), lambda done: done.update_time
        case DeleteDoc(path=path, written=written):
            option = client.write_option(last_update_time=written) if written is not None else None
            return lambda: client.document(path).delete(option=option, retry=None), lambda _: True
        case FindDocs(collection=collection, where=where, read_time=read_time):
            query = client.collection(collection)
            for field, op, value in where:
                query = query.where(filter=FieldFilter(field, op, value))
            once = one_attempt(client)
            return lambda: query.get(read_time=read_time, retry=once), lambda found: [doc_of(snap) for snap in found]
        case CreateDoc(path=path, data=data):
            return lambda: client.document(path).create(dict(data), retry=None), lambda done: done.update_time
        case UpdateDoc(path=path, data=data, written=written):
            option = client.write_option(last_update_time=written)
            return lambda: client.document(path).update(dict(data), option=option, retry=None), lambda done: done.update_time
        case AddToDocs(adds=adds, receipt=receipt):
            batch = client.batch()
            for path, field, amount in adds:
                batch.set(client.document(path), {field: Increment(amount)}, merge=True)
            if receipt is not None:
                batch.create(client.document(receipt), {})
            return lambda: batch.commit(retry=None), lambda _: True
        case SumDocs(collection=collection, field=field):
            summed = client.collection(collection).sum(field)
            once = one_attempt(client)
            return lambda: summed.get(retry=once), lambda got: (got[0][0].value, got[0][0].read_time)
    raise TypeError(f"not a document ask: {ask!r}")  # pragma: no cover - DocAsk is the eight above


def doc_of(snapshot: Any) -> Doc:
    """A document snapshot of the client as an answer (:class:`~tsstore.asks.Doc`)."""
    return Doc(
        id=snapshot.id,
        data=snapshot.to_dict() if snapshot.exists else None,
        update_time=snapshot.update_time,
        read_time=snapshot.read_time,
    )


def database_id(client: Any) -> str:
    """The database a client talks to (``(default)`` unless it was given one)."""
    return str(getattr(client, "_database", None) or "(default)")


def emulator_host(client: Any) -> str | None:
    """The emulator's ``host:port`` a client talks to, ``None`` for Google Cloud."""
    return getattr(client, "_emulator_host", None) or None


def _decode_responses(responses: Any, decode: _Decoder) -> Iterator[Tick]:
    for response in responses:
        tick = decode(response)
        if tick is not None:
            yield tick


async def astream_ticks(
    query: BaseQuery, *, timestamp_field: str, read_time: dt.datetime | None
) -> AsyncIterator[Tick]:
    """:func:`stream_ticks` for an ``AsyncClient``'s query (the fast path only: it is the
    same request on the client's async GAPIC transport). The request is sent when awaited."""
    call, client, expected_prefix = _run_query(query, read_time)
    sent = local_us()
    return _adecode_responses(await call(), _Decoder(client, expected_prefix, timestamp_field, sent=sent,
                                                            pinned=read_time is not None))


async def _adecode_responses(responses: Any, decode: _Decoder) -> AsyncIterator[Tick]:
    async for response in responses:
        tick = decode(response)
        if tick is not None:
            yield tick


class _Decoder:
    """One RunQuery response to a tick (``None`` for a response without a document); the
    query's read time told to the project's clock (the query was ``sent`` then; ``pinned``:
    at a read time it was given, which is no time stamped on its arrival)."""

    def __init__(self, client: Any, expected_prefix: str, timestamp_field: str, *, sent: int, pinned: bool) -> None:
        self._client = client
        self._prefix_len = len(expected_prefix) + 1  # "<collection path>/" then the document id
        self._path = timestamp_field.split(".")
        self._clock: ServerClock | None = server_clock(client)  # told the first read time, then None
        self._sent = sent
        self._pinned = pinned

    def __call__(self, response: Any) -> Tick | None:
        pb = response._pb
        if self._clock is not None and pb.HasField("read_time"):
            self._clock.saw(from_timestamp_pb(pb.read_time), sent=self._sent, read=not self._pinned)
            self._clock = None
        if not pb.HasField("document"):
            return None
        doc = pb.document
        data = _decode_map(doc.fields, self._client)
        return Tick(doc.name[self._prefix_len :], _plain_time(get_path(data, self._path)), data)


def _decode_map(fields: Any, client: Any) -> dict[str, Any]:
    # Iterating keys and indexing is ~15 % faster on upb maps than .items().
    return {key: _decode_value(fields[key], client) for key in fields}


def _decode_value(value: Any, client: Any) -> Any:
    kind = value.WhichOneof("value_type")
    if kind == "string_value":
        return value.string_value
    if kind == "integer_value":
        return value.integer_value
    if kind == "double_value":
        return value.double_value
    if kind == "timestamp_value":
        ts = value.timestamp_value
        return _EPOCH + dt.timedelta(seconds=ts.seconds, microseconds=ts.nanos // 1000)
    if kind == "map_value":
        fields = value.map_value.fields
        # Maps with "__x__" keys encode vectors and BSON types: let the client decode those.
        if any(k.startswith("__") for k in fields.keys()):
            return _helpers.decode_value(value, client)
        return _decode_map(fields, client)
    if kind == "boolean_value":
        return value.boolean_value
    if kind == "null_value":
        return None
    if kind == "array_value":
        return [_decode_value(v, client) for v in value.array_value.values]
    # Rare kinds (bytes, references, geo points, …) go through the client's own decoder.
    return _helpers.decode_value(value, client)


def _plain_time(value: Any) -> dt.datetime:
    """The timestamp of a result document as a plain aware UTC datetime."""
    if not isinstance(value, dt.datetime):
        # A document without the timestamp cannot be in an ordered timestamp query result.
        raise ValueError(f"document has no timestamp value ({value!r})")
    return plain_datetime(value)


# ---------------------------------------------------------------------------- writing


def batch_write(
    collection: BaseCollectionReference[Any],
    writes: list[WriteOp],
    *,
    fast: bool = True,
    timeout: float = 60.0,
) -> list[WriteStatus]:
    """Apply each write in one non-atomic ``BatchWrite`` request and return one status per
    write, in order. Raises ``GoogleAPICallError`` when the request as a whole fails; no
    retries here (the caller decides)."""
    if fast:
        try:
            request, client = _batch_write_request(collection, writes)
            send = client._firestore_api.batch_write
            metadata = client._rpc_metadata
        except (AttributeError, TypeError, ValueError) as exc:  # client internals changed
            log.warning("the fast write path is unavailable (%s); using BulkWriteBatch", exc,
                        extra={ERROR_TYPE: faults.error_type(exc)})  # fmt: skip
        else:
            sent = local_us()
            response = send(request=request, metadata=metadata, retry=None, timeout=timeout)
            return _statuses(client, response, sent)
    batch = BulkWriteBatch(collection._client)
    for doc_id, data, create in writes:
        if data is None or isinstance(data, Erase):
            batch.delete(collection.document(doc_id))
        elif isinstance(data, Patch):
            batch.update(collection.document(doc_id), data.fields)
        elif create:
            batch.create(collection.document(doc_id), data)
        else:
            batch.set(collection.document(doc_id), data)
    sent = local_us()
    return _statuses(collection._client, batch.commit(retry=None, timeout=timeout), sent)


async def abatch_write(
    collection: BaseCollectionReference[Any], writes: list[WriteOp], *, timeout: float = 60.0
) -> list[WriteStatus]:
    """:func:`batch_write` for an ``AsyncClient``'s collection (the fast path only)."""
    request, client = _batch_write_request(collection, writes)
    send = client._firestore_api.batch_write
    sent = local_us()
    response = await send(request=request, metadata=client._rpc_metadata, retry=None, timeout=timeout)
    return _statuses(client, response, sent)


def _statuses(client: Any, response: Any, sent: int) -> list[WriteStatus]:
    """Each write's status in a ``BatchWrite`` response (to a call ``sent`` then); the latest
    commit time told to the project's clock."""
    results, statuses = response._pb.write_results, response.status
    stamps = [w.update_time for w in results if w.HasField("update_time")]
    clock = server_clock(client)
    if stamps:
        newest = max(stamps, key=lambda t: (t.seconds, t.nanos))
        clock.saw(from_timestamp_pb(newest), sent=sent, read=False)
    if any(st.code == 0 and not w.HasField("update_time") for w, st in zip(results, statuses)):
        clock.unstamped()  # a delete landed at a time its answer does not say
    return [(st.code, st.message) for st in statuses]


def _batch_write_request(collection: BaseCollectionReference[Any], writes: list[WriteOp]) -> tuple[Any, Any]:
    client = collection._client
    prefix = collection.document("x")._document_path[:-1]
    request = _BATCH_WRITE_PB(database=client._database_string)
    for doc_id, data, create in writes:
        write = request.writes.add()
        if data is None or isinstance(data, Erase):
            write.delete = prefix + doc_id
            continue
        if create:
            write.current_document.exists = False
        update = write.update
        update.name = prefix + doc_id
        fields = update.fields
        if isinstance(data, Patch):
            write.current_document.exists = True
            for path, value in data.fields.items():
                *parents, last = path.split(".")
                target = fields
                for part in parents:
                    target = target[part].map_value.fields
                _encode_value(value, target[last])
                write.update_mask.field_paths.append(path)
            continue
        for key, value in data.items():
            _encode_value(value, fields[key])
    return firestore_types.BatchWriteRequest.wrap(request), client


def get_documents(collection: BaseCollectionReference[Any], ids: list[str], *, fast: bool = True) -> dict[str, Stored]:
    """The documents of ``collection`` with these ids that exist (one batched read). The fast
    path decodes the answers' protobufs as :func:`stream_ticks` does, not into the client's
    snapshots: the sender reads back every document of a request a cut ended that had landed,
    and 500 took 0.23-0.40 s through ``get_all`` on a loaded emulator, 0.06-0.15 s of it the
    call itself."""
    if fast:
        try:
            client = collection._client
            prefix = collection.document("x")._document_path[:-1]
            request = {"database": client._database_string, "documents": [prefix + doc_id for doc_id in ids]}
            call, metadata = client._firestore_api.batch_get_documents, client._rpc_metadata
        except (AttributeError, TypeError, ValueError) as exc:  # client internals changed
            log.warning("the fast look-up path is unavailable (%s); using get_all", exc,
                        extra={ERROR_TYPE: faults.error_type(exc)})  # fmt: skip
        else:
            found: dict[str, Stored] = {}
            for response in call(request=request, metadata=metadata):
                pb = response._pb
                if pb.HasField("found"):
                    doc = pb.found
                    found[doc.name[len(prefix) :]] = Stored(
                        _decode_map(doc.fields, client), from_timestamp_pb(doc.create_time)
                    )
            return found
    refs = [collection.document(doc_id) for doc_id in ids]
    return _stored(collection._client.get_all(refs))


def transport(collection: BaseCollectionReference[Any], *, fast: bool = True, timeout: float = 60.0) -> Transport:
    """The sync client's :data:`~tsstore.write.ops.Transport` on ``collection``: its batch
    writes (the fast path unless ``fast=False``; each timing out after ``timeout`` seconds)
    and its batched reads."""
    send = functools.partial(batch_write, collection, fast=fast, timeout=timeout)
    return send, functools.partial(get_documents, collection, fast=fast)


async def aget_documents(collection: BaseCollectionReference[Any], ids: list[str]) -> dict[str, Stored]:
    """:func:`get_documents` for an ``AsyncClient``'s collection."""
    refs = [collection.document(doc_id) for doc_id in ids]
    return _stored([snap async for snap in collection._client.get_all(refs)])


def loop_transport(collection: BaseCollectionReference[Any], *, timeout: float = 60.0) -> Transport:
    """An ``AsyncClient``'s :data:`~tsstore.write.ops.Transport` on ``collection``, called from
    a bulk sender's worker threads and run on the event loop it is made on."""
    loop = asyncio.get_running_loop()

    def send(writes: list[WriteOp]) -> list[WriteStatus]:
        return asyncio.run_coroutine_threadsafe(abatch_write(collection, writes, timeout=timeout), loop).result()

    def lookup(ids: list[str]) -> dict[str, Stored]:
        return asyncio.run_coroutine_threadsafe(aget_documents(collection, ids), loop).result()

    return send, lookup


def _stored(snapshots: Iterable[Any]) -> dict[str, Stored]:
    return {snap.id: Stored(snap.to_dict() or {}, snap.create_time) for snap in snapshots if snap.exists}


_BATCH_WRITE_PB = firestore_types.BatchWriteRequest.pb()


class FirestoreHorizons:
    """What a writer's :class:`~tsstore.write.marks.LateGuard` asks of Firestore, on a sync
    ``firestore.Client``, for writes to ``collection``: its lease, the roll-ups' horizons,
    and marks (one ``BatchWrite`` per roll-up)."""

    def __init__(self, client: Any, collection: str, *, timeout: float) -> None:
        self._client, self._source, self._timeout = client, collection, timeout
        self._lease = client.collection(WRITERS).document(uuid.uuid4().hex)

    def put_lease(self, data: dict[str, Any]) -> dt.datetime:
        written = self._lease.set(data, retry=None, timeout=self._timeout)
        at: dt.datetime = written.update_time
        return at

    def drop_lease(self) -> None:
        # Retried through faults: a lease left behind holds roll-ups back until it expires.
        faults.call(lambda: self._lease.delete(retry=None, timeout=self._timeout), what="dropping a writer lease")

    def horizons(self) -> list[Horizon]:
        query = self._client.collection(WATERMARKS).where(filter=FieldFilter("source", "==", self._source))
        found = [Horizon.of(s.id, s.to_dict() or {}) for s in query.get(retry=ONE_ATTEMPT, timeout=self._timeout)]
        return [h for h in found if h is not None]

    def holds_bar(self, probe: BarProbe) -> bool:
        def found(shards: list[str]) -> bool:  # a sharded read's chunk query: its index serves it
            query = (self._client.collection(probe.rollup).where(filter=FieldFilter(probe.shard_field, "in", shards))
                     .where(filter=FieldFilter(probe.timestamp_field, ">=", probe.start))
                     .where(filter=FieldFilter(probe.timestamp_field, "<", probe.end)).limit(1))  # fmt: skip
            return bool(query.get(retry=ONE_ATTEMPT, timeout=self._timeout))

        return any(found(shards) for shards in probe.chunks())

    def put_marks(self, marks: Mapping[str, Iterable[dt.datetime]]) -> None:
        for rollup, buckets in marks.items():
            collection = self._client.collection(marks_path(rollup))
            ops: list[WriteOp] = [(mark_id(b), {"bucket": b, "nonce": uuid.uuid4().hex}, False) for b in buckets]
            failed = [(code, text) for code, text in batch_write(collection, ops, timeout=self._timeout) if code]
            if failed:
                code, text = failed[0]
                status = next((s for s in grpc.StatusCode if s.value[0] == code), grpc.StatusCode.UNKNOWN)
                why = f"a late-tick mark of roll-up {rollup!r} was not written: {text}"
                raise gexc.from_grpc_status(status, why)  # type: ignore[no-untyped-call]


def late_guard(client: Any, spec: SeriesSpec) -> LateGuard:
    """The guard that marks a write job's late writes into ``spec``'s collection, on the sync
    ``client`` (every job of the stores and of Beam's workers has one)."""
    timeout = spec.late.send_timeout.total_seconds()
    return LateGuard(spec, FirestoreHorizons(client, spec.collection, timeout=timeout))


def _encode_value(value: Any, out: Any) -> None:
    kind = type(value)
    if kind is str:
        out.string_value = value
    elif kind is float:
        out.double_value = value
    elif kind is int:
        out.integer_value = value
    elif kind is dict:
        out.map_value.SetInParent()  # an empty dict is still an (empty) map value
        fields = out.map_value.fields
        for key, item in value.items():
            _encode_value(item, fields[key])
    elif kind is dt.datetime and value.tzinfo is not None:
        delta = value - _EPOCH
        ts = out.timestamp_value
        ts.seconds = delta.days * 86_400 + delta.seconds
        ts.nanos = delta.microseconds * 1000
    elif kind is bool:
        out.boolean_value = value
    elif value is None:
        out.null_value = 0
    elif kind is list:
        array = out.array_value
        array.SetInParent()  # an empty list is still an (empty) array value
        for item in value:
            _encode_value(item, array.values.add())
    else:
        # Rare types (bytes, GeoPoint, Vector, references…): the client's own encoder.
        out.CopyFrom(_helpers.encode_value(value)._pb)
