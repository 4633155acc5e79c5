"""The generated security rules on the emulator's rules engine, through its REST API.

The rules ``tsstore rules`` renders for a declaration are loaded into a project of their own
on the session's emulator (rules are per project; the default project keeps none, so other
tests are unaffected), and requests are sent as a web client would send them: anonymous (no
``Authorization`` header), signed in (an unsigned ID token, which the emulator accepts), signed
in with the demo's custom claim ``feed == true``, and as the server (``Bearer owner``, which
bypasses rules as the Python client does).

Two declarations: the demo's (signed-in reads, creates by feed publishers checked field by
field, 1-minute bars and their watermark readable), and METERS/CLOSED written here (public
reads with a small ``max_limit``, signed-in creates, ``count_by`` counters, ``expire_after``,
a retired shard; and a collection with ``read="none"``). :data:`MATRIX` declares every request,
who sends it and whether it must be allowed; each case is a test of its own, and
:func:`test_matrix_tally` runs the whole matrix and checks the tally. Beside it: a client's
create is read by :class:`TimeSeriesStore` like any tick, the server client is unaffected,
and the rules compile without warnings. (``start_emulator(rules=path)`` enforcing a file on
every project and refusing one that does not compile is checked through the local store that
``tsstore emulator start --rules`` starts with it: tests/test_rules.py.)
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

import pytest

from tsstore import SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.access import ClientAccess
from tsstore.analytics.rollup import Rollup
from tsstore.cold_tier import ColdTier
from tsstore.demo import BARS_1MIN, SPEC
from tsstore.local.emulator import Emulator
from tsstore.rules.file import render_rules
from tsstore.series_counters import series_document_id

UTC = dt.timezone.utc
FAST = WriteOptions(ramp=False, max_ops_per_second=50_000)

Who = Literal["anonymous", "signed-in", "feed", "owner"]
Target = Literal["demo", "meters"]

#: A declaration of its own beside the demo's: public reads of at most 5 documents a query,
#: signed-in creates, counted series, an expiry, a retired shard; and a collection closed to
#: clients altogether.
METERS = SeriesSpec(
    "meters",
    shards=["a", "b"],
    retired=["old"],
    key_fields=["device"],
    columns={"device": "string", "reading.value": "Float64", "reading.unit": "string", "seq": "Int64", "ok": "boolean"},
    measures=["reading.value"],
    count_by=["device"],
    counter_shards=3,
    expire_after=dt.timedelta(days=7),
    access=ClientAccess("public", create="signed-in", max_limit=5),
    cold=ColdTier("cold"),
)
CLOSED = SeriesSpec("closed", key_fields=["sensor"], columns={"sensor": "string", "value": "Float64"}, access="none")

DECLARATIONS: dict[Target, tuple[tuple[SeriesSpec, ...], tuple[Rollup, ...]]] = {
    "demo": ((SPEC,), (BARS_1MIN,)),
    "meters": ((METERS, CLOSED), ()),
}

#: The signed-in users: ``signed-in`` has no custom claims, ``feed`` carries the demo's ``feed == true``.
USERS: dict[Who, tuple[str, dict[str, Any]]] = {"signed-in": ("alice", {}), "feed": ("feeder", {"feed": True})}

T0 = dt.datetime(2024, 1, 2, 14, 30, 5, 123456, tzinfo=UTC)
#: The demo roll-up's watermark in the seeds: ticks before this minute are late.
MINUTE = T0.replace(second=0, microsecond=0)
#: A late minute already marked in the seeds (by a writer before): a tick there must mark it again.
STALE = MINUTE - dt.timedelta(minutes=5)
#: Another marked minute, whose mark no case writes again (a commit that keeps its nonce is refused).
KEPT = MINUTE - dt.timedelta(minutes=6)
#: The end of METERS' sealed days in the seeds (its cold tier's horizon): ticks before it are late.
SEALED = T0.replace(hour=0, minute=0, second=0, microsecond=0)
#: The series whose counter the seeds create (``meters_counts/m-1`` with 3 shards).
SERIES = series_document_id(("m-1",))
#: Marks a field to leave out of a document in :func:`edit`.
DROP = object()
#: Replaced by ``projects/P/databases/(default)/documents`` when a request is sent (commit bodies name documents).
DOCUMENTS = "{documents}"
#: Replaced by a new random id each time a request is sent (a create by id or an upsert that must find no document).
UNIQUE = "{unique}"


# --------------------------------------------------------------------------- requests


def rest_value(value: Any) -> dict[str, Any]:
    """``value`` as a Firestore REST ``Value``."""
    if value is None:
        return {"nullValue": None}
    if isinstance(value, bool):
        return {"booleanValue": value}
    if isinstance(value, int):
        return {"integerValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, str):
        return {"stringValue": value}
    if isinstance(value, dt.datetime):
        return {"timestampValue": value.astimezone(UTC).isoformat().replace("+00:00", "Z")}
    if isinstance(value, Mapping):
        return {"mapValue": {"fields": rest_fields(value)}}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [rest_value(v) for v in value]}}
    raise TypeError(f"no REST value for {value!r}")


def rest_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    return {name: rest_value(value) for name, value in data.items()}


@dataclass(frozen=True)
class Call:
    """One REST request: a method, a path under ``.../documents`` (``""``: the root, or a
    document followed by ``:runQuery`` and the like), query parameters and a JSON body."""

    method: str
    path: str
    params: tuple[tuple[str, str], ...] = ()
    body: Mapping[str, Any] | None = None

    def describe(self) -> str:
        query = f"?{urllib.parse.urlencode(self.params)}" if self.params else ""
        return f"{self.method} /{self.path}{query}"


def get(path: str) -> Call:
    return Call("GET", path)


def _structured(collection: str, limit: int | None, where: Sequence[tuple[str, str, Any]], order: str | None) -> Any:
    query: dict[str, Any] = {"from": [{"collectionId": collection}]}
    filters = [
        {"fieldFilter": {"field": {"fieldPath": path}, "op": op, "value": rest_value(value)}}
        for path, op, value in where
    ]
    if len(filters) == 1:
        query["where"] = filters[0]
    elif filters:
        query["where"] = {"compositeFilter": {"op": "AND", "filters": filters}}
    if order is not None:
        query["orderBy"] = [{"field": {"fieldPath": order}, "direction": "DESCENDING"}]
    if limit is not None:
        query["limit"] = limit
    return query


def run_query(
    collection: str,
    *,
    limit: int | None = None,
    parent: str = "",
    where: Sequence[tuple[str, str, Any]] = (),
    order: str | None = None,
    offset: int | None = None,
) -> Call:
    """A list query (``runQuery``) of ``collection`` under ``parent``."""
    query = _structured(collection, limit, where, order)
    if offset is not None:
        query["offset"] = offset
    return Call("POST", f"{parent}:runQuery", body={"structuredQuery": query})


def aggregate(collection: str, *, limit: int | None = None, parent: str = "", sum_of: str | None = None) -> Call:
    """A ``count()`` (or ``sum(sum_of)``) aggregation of ``collection`` under ``parent``."""
    what: dict[str, Any] = {"count": {}} if sum_of is None else {"sum": {"field": {"fieldPath": sum_of}}}
    body = {
        "structuredAggregationQuery": {
            "structuredQuery": _structured(collection, limit, (), None),
            "aggregations": [{"alias": "n", **what}],
        }
    }
    return Call("POST", f"{parent}:runAggregationQuery", body=body)


def create(collection: str, data: Mapping[str, Any], *, document_id: str | None = None) -> Call:
    """A create (``POST .../collection``), with an id the emulator picks unless one is given."""
    params = (("documentId", document_id),) if document_id is not None else ()
    return Call("POST", collection, params, {"fields": rest_fields(data)})


def patch(path: str, data: Mapping[str, Any], *, mask: Sequence[str] | None = None) -> Call:
    """A write of ``data``'s fields (or the ``mask`` fields) of ``path``: an update, or an upsert."""
    fields = list(data) if mask is None else list(mask)
    return Call("PATCH", path, tuple(("updateMask.fieldPaths", f) for f in fields), {"fields": rest_fields(data)})


def delete(path: str) -> Call:
    return Call("DELETE", path)


def increment(path: str, by: int | float, field: str = "count") -> Call:
    """What a web client's ``updateDoc(ref, {count: increment(by)})`` commits."""
    write = {
        "update": {"name": f"{DOCUMENTS}/{path}", "fields": {}},
        "updateMask": {"fieldPaths": []},
        "updateTransforms": [{"fieldPath": field, "increment": rest_value(by)}],
        "currentDocument": {"exists": True},
    }
    return Call("POST", ":commit", body={"writes": [write]})


def millis(at: dt.datetime) -> str:
    return str(int(at.timestamp() * 1000))


def late_commit(at: dt.datetime, *, mark: str | None = "same", nonce: str = UNIQUE, tick: bool = True) -> Call:
    """One commit of a demo tick at ``at`` (a create) and the mark of its minute, as a web
    client writes a late tick: ``mark`` ``"same"`` names the tick's minute, ``None`` leaves it out."""
    bucket = at.replace(second=0, microsecond=0)
    writes: list[dict[str, Any]] = []
    if tick:
        data = instrument({"timestamp": at})
        writes.append({"update": {"name": f"{DOCUMENTS}/instruments/late-{UNIQUE}", "fields": rest_fields(data)},
                       "currentDocument": {"exists": False}})  # fmt: skip
    if mark is not None:
        name = millis(bucket) if mark == "same" else mark
        fields = rest_fields({"bucket": bucket, "nonce": nonce})
        writes.append({"update": {"name": f"{DOCUMENTS}/tsstore_rollups/instruments_1min/marks/{name}",
                                  "fields": fields}})  # fmt: skip
    return Call("POST", ":commit", body={"writes": writes})


def sealed_commit(at: dt.datetime, *, mark: str | None = "same", tick: bool = True) -> Call:
    """One commit of a METERS tick at ``at`` (a create) and the mark of its day in the cold
    tier, as a web client writes a tick into a sealed day: ``mark`` ``"same"`` names its day."""
    day = at.replace(hour=0, minute=0, second=0, microsecond=0)
    writes: list[dict[str, Any]] = []
    if tick:
        data = meter({"timestamp": at, "expireAt": at + dt.timedelta(days=7)})
        writes.append({"update": {"name": f"{DOCUMENTS}/meters/late-{UNIQUE}", "fields": rest_fields(data)},
                       "currentDocument": {"exists": False}})  # fmt: skip
    if mark is not None:
        fields = rest_fields({"bucket": day, "nonce": UNIQUE})
        name = millis(day) if mark == "same" else mark
        writes.append({"update": {"name": f"{DOCUMENTS}/tsstore_rollups/meters.cold/marks/{name}", "fields": fields}})
    return Call("POST", ":commit", body={"writes": writes})


def edit(base: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``base`` with ``changes`` (dotted paths; :data:`DROP` removes a field)."""
    out = _copy(base)
    for dotted, value in changes.items():
        *parents, leaf = dotted.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        if value is DROP:
            node.pop(leaf, None)
        else:
            node[leaf] = value
    return out


def _copy(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _copy(v) if isinstance(v, Mapping) else v for k, v in data.items()}


# --------------------------------------------------------------------------- documents


INSTRUMENT: dict[str, Any] = {
    "shard": "x",
    "symbol": "AAA",
    "timestamp": T0,
    "exchange": "EXCHG1",
    "instrumentType": "commonstock",
    "price": {"currency": "USD", "micros": 101_250_000},
    "volume": 300,
}


def instrument(changes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A demo tick as the writer would store it, with ``changes``."""
    return edit(INSTRUMENT, changes or {})


METER: dict[str, Any] = {
    "shard": "a",
    "device": "m-1",
    "timestamp": T0,
    "expireAt": T0 + dt.timedelta(days=7),
    "reading": {"value": 21.5, "unit": "C"},
    "seq": 7,
    "ok": True,
}


def meter(changes: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A METERS tick as the writer would store it (expiry = timestamp + 7 days), with ``changes``."""
    return edit(METER, changes or {})


# --------------------------------------------------------------------------- the matrix


@dataclass(frozen=True)
class Case:
    """One request of the matrix: on which declaration's project, by whom, and whether the
    rules must allow it."""

    name: str
    target: Target
    who: Who
    call: Call
    allowed: bool

    @property
    def id(self) -> str:
        return f"{self.target}-{self.name}"


def _cases(target: Target, rows: Sequence[tuple[str, Who, Call, bool]]) -> list[Case]:
    return [Case(name, target, who, call, allowed) for name, who, call, allowed in rows]


ALLOW, DENY = True, False
SHARD0 = f"meters_counts/{SERIES}/shards/0"

DEMO_CASES = _cases(
    "demo",
    [
        # reads: signed-in users, list queries with limit <= 1000
        ("get-tick", "signed-in", get("instruments/seed"), ALLOW),
        ("get-tick-feed", "feed", get("instruments/seed"), ALLOW),
        ("get-tick-anonymous", "anonymous", get("instruments/seed"), DENY),
        ("list-limit-10", "signed-in", run_query("instruments", limit=10), ALLOW),
        ("list-limit-max", "signed-in", run_query("instruments", limit=1000), ALLOW),
        ("list-limit-max+1", "signed-in", run_query("instruments", limit=1001), DENY),
        # an offset's skipped documents are billed too: only offset 0 (or none) is allowed
        ("list-offset-0", "signed-in", run_query("instruments", limit=10, offset=0), ALLOW),
        ("list-offset", "signed-in", run_query("instruments", limit=10, offset=1_000_000), DENY),
        ("list-unbounded", "signed-in", run_query("instruments"), DENY),
        ("list-anonymous", "anonymous", run_query("instruments", limit=10), DENY),
        (
            "list-series-newest",
            "signed-in",
            run_query("instruments", limit=100, where=[("symbol", "EQUAL", "AAA")], order="timestamp"),
            ALLOW,
        ),
        (
            "list-shards-in",
            "signed-in",
            run_query("instruments", limit=500, where=[("shard", "IN", ["x", "y", "z"])], order="timestamp"),
            ALLOW,
        ),
        (
            "list-series-unbounded",
            "signed-in",
            run_query("instruments", where=[("symbol", "EQUAL", "AAA")], order="timestamp"),
            DENY,
        ),
        ("count-limit-max", "signed-in", aggregate("instruments", limit=1000), ALLOW),
        ("count-limit-max+1", "signed-in", aggregate("instruments", limit=1001), DENY),
        ("count-unbounded", "signed-in", aggregate("instruments"), DENY),
        ("count-anonymous", "anonymous", aggregate("instruments", limit=10), DENY),
        ("no-counters-without-count_by", "signed-in", get(f"instruments_counts/{SERIES}"), DENY),
        # roll-up bars and their watermark: read like the source
        ("get-bar", "signed-in", get("instruments_1min/seed"), ALLOW),
        ("list-bars-limit-100", "signed-in", run_query("instruments_1min", limit=100), ALLOW),
        ("list-bars-unbounded", "signed-in", run_query("instruments_1min"), DENY),
        ("list-bars-limit-max+1", "signed-in", run_query("instruments_1min", limit=1001), DENY),
        ("get-bar-anonymous", "anonymous", get("instruments_1min/seed"), DENY),
        ("get-watermark", "signed-in", get("tsstore_rollups/instruments_1min"), ALLOW),
        ("get-watermark-anonymous", "anonymous", get("tsstore_rollups/instruments_1min"), DENY),
        ("list-watermarks", "signed-in", run_query("tsstore_rollups", limit=10), DENY),
        ("get-other-watermark", "signed-in", get("tsstore_rollups/instruments_5min"), DENY),
        # creates: feed publishers only, checked field by field
        ("create-valid", "feed", create("instruments", instrument()), ALLOW),
        (
            "create-valid-minimal",
            "feed",
            create("instruments", {"shard": "y", "symbol": "BBB", "timestamp": T0}),
            ALLOW,
        ),
        ("create-optional-null", "feed", create("instruments", instrument({"exchange": None, "volume": None})), ALLOW),
        ("create-price-partial", "feed", create("instruments", instrument({"price.micros": DROP})), ALLOW),
        ("create-price-micros-null", "feed", create("instruments", instrument({"price.micros": None})), ALLOW),
        ("create-with-id", "feed", create("instruments", instrument(), document_id=f"client-{UNIQUE}"), ALLOW),
        ("create-signed-in-no-claim", "signed-in", create("instruments", instrument()), DENY),
        ("create-anonymous", "anonymous", create("instruments", instrument()), DENY),
        ("create-shard-undeclared", "feed", create("instruments", instrument({"shard": "w"})), DENY),
        ("create-shard-missing", "feed", create("instruments", instrument({"shard": DROP})), DENY),
        ("create-shard-int", "feed", create("instruments", instrument({"shard": 1})), DENY),
        ("create-volume-string", "feed", create("instruments", instrument({"volume": "300"})), DENY),
        ("create-volume-double", "feed", create("instruments", instrument({"volume": 300.5})), DENY),
        ("create-micros-string", "feed", create("instruments", instrument({"price.micros": "101250000"})), DENY),
        ("create-symbol-int", "feed", create("instruments", instrument({"symbol": 42})), DENY),
        ("create-exchange-int", "feed", create("instruments", instrument({"exchange": 1})), DENY),
        ("create-symbol-null", "feed", create("instruments", instrument({"symbol": None})), DENY),
        ("create-symbol-missing", "feed", create("instruments", instrument({"symbol": DROP})), DENY),
        ("create-timestamp-missing", "feed", create("instruments", instrument({"timestamp": DROP})), DENY),
        (
            "create-timestamp-string",
            "feed",
            create("instruments", instrument({"timestamp": "2024-01-02T14:30:05Z"})),
            DENY,
        ),
        ("create-timestamp-int", "feed", create("instruments", instrument({"timestamp": 1704205805})), DENY),
        ("create-extra-field", "feed", create("instruments", instrument({"note": "hi"})), DENY),
        ("create-extra-nested", "feed", create("instruments", instrument({"price.extra": 1})), DENY),
        ("create-price-not-map", "feed", create("instruments", instrument({"price": "101.25 USD"})), DENY),
        ("create-price-null", "feed", create("instruments", instrument({"price": None})), ALLOW),
        # ticks are never changed by a client, not even by the one who created them
        ("update-own-tick", "feed", patch("instruments/seed", {"volume": 301}), DENY),
        ("delete-own-tick", "feed", delete("instruments/seed"), DENY),
        ("upsert-new-tick", "feed", patch(f"instruments/upsert-{UNIQUE}", instrument()), ALLOW),
        ("upsert-over-tick", "feed", patch("instruments/seed", instrument({"volume": 5})), DENY),
        # a tick in a minute the roll-up has stored comes with that minute's mark, in one commit
        ("create-on-time", "feed", create("instruments", instrument({"timestamp": MINUTE})), ALLOW),
        ("create-late-unmarked", "feed", create("instruments", instrument({"timestamp": MINUTE - dt.timedelta(seconds=1)})),
         DENY),  # fmt: skip
        ("create-late-marked", "feed", late_commit(MINUTE - dt.timedelta(minutes=2, seconds=3)), ALLOW),
        ("create-late-stale-mark", "feed", late_commit(STALE + dt.timedelta(seconds=7), mark=None), DENY),
        ("create-late-remarked", "feed", late_commit(STALE + dt.timedelta(seconds=8)), ALLOW),
        ("create-late-same-nonce", "feed", late_commit(KEPT + dt.timedelta(seconds=9), nonce="old"), DENY),
        ("create-late-other-mark", "feed", late_commit(MINUTE - dt.timedelta(minutes=3), mark=millis(STALE)), DENY),
        ("mark-alone", "feed", late_commit(MINUTE - dt.timedelta(minutes=4), tick=False), ALLOW),
        ("mark-anonymous", "anonymous", late_commit(MINUTE - dt.timedelta(minutes=4), tick=False), DENY),
        ("mark-no-claim", "signed-in", late_commit(MINUTE - dt.timedelta(minutes=4), tick=False), DENY),
        ("mark-wrong-id", "feed", late_commit(MINUTE - dt.timedelta(minutes=4), tick=False, mark="123"), DENY),
        ("delete-mark", "feed", delete(f"tsstore_rollups/instruments_1min/marks/{millis(STALE)}"), DENY),
        # roll-ups are written by the server only
        ("create-bar", "feed", create("instruments_1min", {"symbol": "AAA", "timestamp": T0}), DENY),
        ("update-bar", "feed", patch("instruments_1min/seed", {"count": 2}), DENY),
        ("update-watermark", "feed", patch("tsstore_rollups/instruments_1min", {"watermark": T0}), DENY),
        ("delete-watermark", "feed", delete("tsstore_rollups/instruments_1min"), DENY),
        # the server bypasses rules
        ("owner-list-unbounded", "owner", run_query("instruments"), ALLOW),
        ("owner-create-undeclared", "owner", create("instruments", instrument({"note": "server"})), ALLOW),
        ("owner-update-tick", "owner", patch("instruments/owned", instrument()), ALLOW),
        ("owner-write-bar", "owner", patch("instruments_1min/owned", {"symbol": "AAA", "count": 1}), ALLOW),
    ],
)

METERS_CASES = _cases(
    "meters",
    [
        # reads: anyone, list queries with limit <= 5
        ("get-tick-anonymous", "anonymous", get("meters/seed"), ALLOW),
        ("get-tick", "signed-in", get("meters/seed"), ALLOW),
        ("list-limit-max-anonymous", "anonymous", run_query("meters", limit=5), ALLOW),
        ("list-limit-max", "signed-in", run_query("meters", limit=5), ALLOW),
        ("list-limit-max+1", "anonymous", run_query("meters", limit=6), DENY),
        ("list-limit-1000", "signed-in", run_query("meters", limit=1000), DENY),
        ("list-unbounded", "anonymous", run_query("meters"), DENY),
        ("list-offset-anonymous", "anonymous", run_query("meters", limit=5, offset=1_000_000), DENY),
        ("count-limit-max", "anonymous", aggregate("meters", limit=5), ALLOW),
        ("count-limit-max+1", "anonymous", aggregate("meters", limit=6), DENY),
        ("count-unbounded", "anonymous", aggregate("meters"), DENY),
        # creates: signed-in users, checked field by field, the expiry the writer would set
        ("create-valid", "signed-in", create("meters", meter()), ALLOW),
        ("create-anonymous", "anonymous", create("meters", meter()), DENY),
        (
            "create-valid-minimal",
            "signed-in",
            create("meters", meter({"reading": DROP, "seq": DROP, "ok": DROP})),
            ALLOW,
        ),
        ("create-optional-null", "signed-in", create("meters", meter({"seq": None, "ok": None})), ALLOW),
        ("create-float-given-int", "signed-in", create("meters", meter({"reading.value": 21})), ALLOW),
        ("create-float-null", "signed-in", create("meters", meter({"reading.value": None})), ALLOW),
        ("create-other-active-shard", "signed-in", create("meters", meter({"shard": "b"})), ALLOW),
        ("create-shard-retired", "signed-in", create("meters", meter({"shard": "old"})), DENY),
        ("create-shard-undeclared", "signed-in", create("meters", meter({"shard": "c"})), DENY),
        ("create-int-given-string", "signed-in", create("meters", meter({"seq": "7"})), DENY),
        ("create-int-given-double", "signed-in", create("meters", meter({"seq": 7.5})), DENY),
        ("create-string-given-int", "signed-in", create("meters", meter({"device": 1})), DENY),
        ("create-nested-string-given-int", "signed-in", create("meters", meter({"reading.unit": 3})), DENY),
        ("create-float-given-string", "signed-in", create("meters", meter({"reading.value": "21.5"})), DENY),
        ("create-bool-given-string", "signed-in", create("meters", meter({"ok": "yes"})), DENY),
        ("create-key-missing", "signed-in", create("meters", meter({"device": DROP})), DENY),
        ("create-timestamp-missing", "signed-in", create("meters", meter({"timestamp": DROP})), DENY),
        (
            "create-timestamp-string",
            "signed-in",
            create("meters", meter({"timestamp": "2024-01-02T14:30:05.123456Z"})),
            DENY,
        ),
        ("create-expiry-missing", "signed-in", create("meters", meter({"expireAt": DROP})), DENY),
        ("create-expiry-null", "signed-in", create("meters", meter({"expireAt": None})), DENY),
        (
            "create-expiry-1-day",
            "signed-in",
            create("meters", meter({"expireAt": T0 + dt.timedelta(days=1)})),
            DENY,
        ),
        (
            "create-expiry-1us-late",
            "signed-in",
            create("meters", meter({"expireAt": T0 + dt.timedelta(days=7, microseconds=1)})),
            DENY,
        ),
        (
            "create-expiry-string",
            "signed-in",
            create("meters", meter({"expireAt": "2024-01-09T14:30:05.123456Z"})),
            DENY,
        ),
        ("create-extra-field", "signed-in", create("meters", meter({"note": "hi"})), DENY),
        ("create-extra-nested", "signed-in", create("meters", meter({"reading.extra": 1})), DENY),
        ("update-own-tick", "signed-in", patch("meters/seed", {"seq": 8}), DENY),
        ("delete-own-tick", "signed-in", delete("meters/seed"), DENY),
        # a tick into a day the cold tier has sealed comes with that day's mark, in one commit
        ("sealed-create-unmarked", "signed-in", sealed_commit(SEALED - dt.timedelta(hours=3), mark=None), DENY),
        ("sealed-create-marked", "signed-in", sealed_commit(SEALED - dt.timedelta(hours=3)), ALLOW),
        ("sealed-create-other-mark", "signed-in",
         sealed_commit(SEALED - dt.timedelta(hours=3), mark=millis(SEALED - dt.timedelta(days=2))), DENY),
        ("sealed-mark-alone", "signed-in", sealed_commit(SEALED - dt.timedelta(days=3), tick=False), ALLOW),
        ("sealed-mark-anonymous", "anonymous", sealed_commit(SEALED - dt.timedelta(days=3), tick=False), DENY),
        ("sealed-mark-wrong-id", "signed-in", sealed_commit(SEALED - dt.timedelta(days=3), tick=False, mark="1"),
         DENY),
        ("sealed-delete-mark", "signed-in", delete(f"tsstore_rollups/meters.cold/marks/{millis(SEALED)}"), DENY),
        ("sealed-update-horizon", "signed-in", patch("tsstore_rollups/meters.cold", {"closing": T0}), DENY),
        # series counters: read like the ticks; a client only adds to a shard's count
        ("get-counter-anonymous", "anonymous", get(f"meters_counts/{SERIES}"), ALLOW),
        ("list-counters-limit-max", "anonymous", run_query("meters_counts", limit=5), ALLOW),
        ("list-counters-unbounded", "anonymous", run_query("meters_counts"), DENY),
        ("get-counter-shard", "anonymous", get(SHARD0), ALLOW),
        ("list-counter-shards-unbounded", "anonymous", run_query("shards", parent=f"meters_counts/{SERIES}"), ALLOW),
        (
            "sum-counter-shards",
            "anonymous",
            aggregate("shards", parent=f"meters_counts/{SERIES}", sum_of="count"),
            ALLOW,
        ),
        ("increment-shard", "signed-in", increment(SHARD0, 1), ALLOW),
        ("increment-shard-by-100", "signed-in", increment(SHARD0, 100), ALLOW),
        ("increment-shard-anonymous", "anonymous", increment(SHARD0, 1), DENY),
        ("decrement-shard", "signed-in", increment(SHARD0, -1), DENY),
        ("increment-shard-by-0", "signed-in", increment(SHARD0, 0), DENY),
        ("increment-shard-double", "signed-in", increment(SHARD0, 1.5), DENY),
        ("set-shard-count-lower", "signed-in", patch(SHARD0, {"count": -1}), DENY),
        ("set-shard-count-string", "signed-in", patch(SHARD0, {"count": "1000000"}), DENY),
        ("update-shard-other-field", "signed-in", patch(SHARD0, {"count": 10**15, "note": "x"}), DENY),
        ("remove-shard-count", "signed-in", patch(SHARD0, {}, mask=["count"]), DENY),
        ("delete-shard", "signed-in", delete(SHARD0), DENY),
        ("update-counter-document", "signed-in", patch(f"meters_counts/{SERIES}", {"total": 10**6}), DENY),
        ("create-counter-document", "signed-in", create("meters_counts", {"shards": 3}, document_id="m-2"), DENY),
        (
            "create-shard",
            "signed-in",
            create(f"meters_counts/{SERIES}/shards", {"count": 1}, document_id="3"),
            DENY,
        ),
        ("upsert-new-shard", "signed-in", patch(f"meters_counts/{SERIES}/shards/7", {"count": 1}), DENY),
        ("increment-new-shard", "signed-in", increment(f"meters_counts/{SERIES}/shards/8", 1), DENY),
        # read="none": nothing for clients
        ("closed-get", "signed-in", get("closed/seed"), DENY),
        ("closed-get-anonymous", "anonymous", get("closed/seed"), DENY),
        ("closed-list", "signed-in", run_query("closed", limit=1), DENY),
        ("closed-count", "signed-in", aggregate("closed", limit=1), DENY),
        (
            "closed-create",
            "signed-in",
            create("closed", {"shard": "x", "sensor": "s", "timestamp": T0, "value": 1.0}),
            DENY,
        ),
        # the server bypasses rules
        ("owner-closed-get", "owner", get("closed/seed"), ALLOW),
        ("owner-closed-list-unbounded", "owner", run_query("closed"), ALLOW),
        ("owner-create-invalid", "owner", create("meters", meter({"shard": "old", "expireAt": DROP})), ALLOW),
        ("owner-decrement-shard", "owner", increment(f"meters_counts/{SERIES}/shards/2", -1), ALLOW),
        ("owner-create-shard", "owner", patch(f"meters_counts/{SERIES}/shards/9", {"count": 0}), ALLOW),
    ],
)

MATRIX: list[Case] = DEMO_CASES + METERS_CASES

# --------------------------------------------------------------------------- sending


_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class Project:
    """A project on an emulator whose requests are checked against rules."""

    url: str
    project: str
    warnings: tuple[str, ...] = ()

    @property
    def documents(self) -> str:
        return f"projects/{self.project}/databases/(default)/documents"


def id_token(project: str, uid: str, claims: Mapping[str, Any]) -> str:
    """An unsigned Firebase ID token for ``uid`` with ``claims``, as the emulator accepts."""

    def part(data: Mapping[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    now = int(time.time())
    payload = {
        "iss": f"https://securetoken.google.com/{project}",
        "aud": project,
        "sub": uid,
        "user_id": uid,
        "iat": now,
        "exp": now + 3600,
        "auth_time": now,
        **claims,
    }
    return f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(payload)}."


def send(project: Project, who: Who, call: Call) -> tuple[int, str]:
    """Send ``call`` to ``project`` as ``who``: HTTP status and body."""
    unique = uuid.uuid4().hex
    url = f"{project.url}/v1/{project.documents}"
    path = call.path.replace(UNIQUE, unique)
    url += path if path.startswith(":") or not path else "/" + urllib.parse.quote(path, safe="/:")
    if call.params:
        url += "?" + urllib.parse.urlencode([(k, v.replace(UNIQUE, unique)) for k, v in call.params])
    headers = {}
    if who == "owner":
        headers["Authorization"] = "Bearer owner"
    elif who != "anonymous":
        uid, claims = USERS[who]
        headers["Authorization"] = f"Bearer {id_token(project.project, uid, claims)}"
    data = None
    if call.body is not None:
        data = json.dumps(call.body).replace(DOCUMENTS, project.documents).replace(UNIQUE, unique).encode()
        headers["Content-Type"] = "application/json"
    request = urllib.request.Request(url, data=data, method=call.method, headers=headers)
    try:
        with _OPENER.open(request, timeout=30) as response:
            return int(response.status), response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode("utf-8", "replace")


@dataclass(frozen=True)
class Result:
    case: Case
    status: int
    body: str

    @property
    def allowed(self) -> bool | None:
        """True: the request succeeded; False: the rules denied it; None: something else."""
        if 200 <= self.status < 300:
            answer = json.loads(self.body) if self.body.strip() else {}
            streamed = answer if isinstance(answer, list) else [answer]
            return None if any(isinstance(a, dict) and "error" in a for a in streamed) else True
        return False if self.status == 403 and "PERMISSION_DENIED" in self.body else None

    @property
    def as_expected(self) -> bool:
        return self.allowed is self.case.allowed

    def message(self) -> str:
        """The emulator's message (for a denial, which rule said no)."""
        try:
            answer = json.loads(self.body)
        except ValueError:
            return self.body.strip()[:300]
        if isinstance(answer, dict) and isinstance(answer.get("error"), dict):
            return " ".join(str(answer["error"].get("message", "")).split())
        return "ok"

    def describe(self) -> str:
        expected = "allowed" if self.case.allowed else "denied"
        got = {True: "allowed", False: "denied", None: "neither"}[self.allowed]
        return (
            f"{self.case.id}: {self.case.who} {self.case.call.describe()} should be {expected}, was {got} "
            f"(HTTP {self.status}: {self.message()})"
        )


def run(projects: Mapping[Target, Project], case: Case) -> Result:
    return Result(case, *send(projects[case.target], case.who, case.call))


def must(project: Project, who: Who, call: Call) -> dict[str, Any]:
    """Send ``call`` and insist it succeeds (seeding and set-up)."""
    status, body = send(project, who, call)
    assert status == 200, f"{who} {call.describe()}: HTTP {status}: {body}"
    answer: dict[str, Any] = json.loads(body) if body.strip() else {}
    return answer


def load(emulator: Emulator, target: Target) -> Project:
    """The declaration's rules in a new project of the session's emulator, and its seed documents."""
    specs, rollups = DECLARATIONS[target]
    name = f"rules-{target}-{uuid.uuid4().hex[:8]}"
    warnings = emulator.load_rules(render_rules(specs, rollups), project=name, name=f"{target}.rules")
    project = Project(emulator.url, name, tuple(warnings))
    if target == "demo":
        must(project, "feed", create("instruments", instrument(), document_id="seed"))
        bar = {"symbol": "AAA", "timestamp": T0, "open": 1, "high": 2, "low": 1, "close": 2, "count": 1}
        must(project, "owner", patch("instruments_1min/seed", bar))
        rolled = {"source": "instruments", "interval_seconds": 60.0, "watermark": MINUTE}
        must(project, "owner", patch("tsstore_rollups/instruments_1min", rolled))
        for marked in (STALE, KEPT):
            must(project, "owner", patch(f"tsstore_rollups/instruments_1min/marks/{millis(marked)}",
                                         {"bucket": marked, "nonce": "old"}))  # fmt: skip
    else:
        must(project, "signed-in", create("meters", meter(), document_id="seed"))
        sealed = {"source": "meters", "interval_seconds": 86400.0, "cold_tier": True, "watermark": SEALED,
                  "closing": SEALED}  # fmt: skip
        must(project, "owner", patch("tsstore_rollups/meters.cold", sealed))
        must(project, "owner", patch(f"meters_counts/{SERIES}", {"shards": 3}))
        for shard in range(3):
            must(project, "owner", patch(f"meters_counts/{SERIES}/shards/{shard}", {"count": 0}))
        must(project, "owner", patch("closed/seed", {"shard": "x", "sensor": "s", "timestamp": T0, "value": 1.0}))
    return project


@pytest.fixture(scope="module")
def projects(emulator: Emulator) -> dict[Target, Project]:
    """Each declaration's generated rules, loaded into a project of its own (once per worker)."""
    return {target: load(emulator, target) for target in DECLARATIONS}


# --------------------------------------------------------------------------- tests


def test_matrix_is_well_formed() -> None:
    """Unique case ids; every kind of caller, both declarations, both outcomes appear."""
    ids = [c.id for c in MATRIX]
    assert len(ids) == len(set(ids)), sorted(i for i, n in Counter(ids).items() if n > 1)
    assert {c.who for c in MATRIX} == {"anonymous", "signed-in", "feed", "owner"}
    assert {(c.target, c.allowed) for c in MATRIX} == {(t, a) for t in DECLARATIONS for a in (True, False)}


@pytest.mark.parametrize("case", MATRIX, ids=[c.id for c in MATRIX])
def test_rule(projects: dict[Target, Project], case: Case) -> None:
    """One request of the matrix is allowed or denied as declared."""
    result = run(projects, case)
    assert result.as_expected, result.describe()


def tally_table(results: Sequence[Result]) -> str:
    """The matrix as a table: one line per request, then the tally by caller and the total."""
    width = max(len(r.case.id) for r in results)
    lines = [f"{'case':<{width}}  {'who':<9}  {'expected':<8}  {'got':<8}  HTTP  message"]
    for r in results:
        expected = "allow" if r.case.allowed else "deny"
        got = {True: "allow", False: "deny", None: "??"}[r.allowed]
        mark = "" if r.as_expected else "  <-- NOT AS EXPECTED"
        row = f"{r.case.id:<{width}}  {r.case.who:<9}  {expected:<8}  {got:<8}  {r.status:<4}"
        lines.append(f"{row}  {r.message()}{mark}")
    by_who: Counter[tuple[str, bool | None]] = Counter((r.case.who, r.allowed) for r in results)
    for who in ("anonymous", "signed-in", "feed", "owner"):
        lines.append(f"{who}: {by_who[(who, True)]} allowed, {by_who[(who, False)]} denied")
    return "\n".join(lines)


def test_matrix_tally(projects: dict[Target, Project]) -> None:
    """The whole matrix: N requests, A allowed and D denied, each as declared."""
    with ThreadPoolExecutor(max_workers=8) as pool:  # the cases are independent of each other's order
        results = list(pool.map(lambda case: run(projects, case), MATRIX))
    print(tally_table(results))
    wrong = [r for r in results if not r.as_expected]
    assert not wrong, f"{len(wrong)} of {len(results)} requests not as expected:\n" + "\n".join(
        r.describe() for r in wrong
    )
    expected_allowed = sum(1 for c in MATRIX if c.allowed)
    seen = Counter(r.allowed for r in results)
    assert (len(results), seen[True], seen[False]) == (len(MATRIX), expected_allowed, len(MATRIX) - expected_allowed)
    print(f"{len(results)} requests: {seen[True]} allowed, {seen[False]} denied, all as expected")


@pytest.mark.parametrize("target", list(DECLARATIONS))
def test_rules_compile_without_warnings(projects: dict[Target, Project], target: Target) -> None:
    """The generated rules of both declarations compile on the emulator with no warnings."""
    assert projects[target].warnings == ()


def test_client_create_is_read_by_the_store(emulator: Emulator, projects: dict[Target, Project]) -> None:
    """A feed publisher's create passes the rules, and TimeSeriesStore reads it like any tick."""
    demo = projects["demo"]
    symbol = f"CLIENT-{uuid.uuid4().hex[:8]}"
    tick = instrument({"symbol": symbol, "shard": "z", "exchange": None})
    created = must(demo, "feed", create("instruments", tick))
    document_id = created["name"].rsplit("/", 1)[1]
    client = emulator.client(project=demo.project)
    try:
        with TimeSeriesStore(client, SPEC) as store:
            page = store.query(where=[("symbol", "==", symbol)], limit=10)
            assert [t.id for t in page] == [document_id]
            assert page[0].timestamp == T0
            assert page[0].data == {**tick, "timestamp": T0}
            assert store.count(where=[("symbol", "==", symbol)]) == 1
            frame = store.query_frame(where=[("symbol", "==", symbol)], limit=10)
            assert list(frame["symbol"]) == [symbol] and list(frame["price.micros"]) == [101_250_000]
            assert str(frame["price.micros"].dtype) == "Int64"
    finally:
        client.close()


def test_server_client_is_unaffected(emulator: Emulator, projects: dict[Target, Project]) -> None:
    """Where the rules deny every client write (read="none"), the server client writes and
    reads through TimeSeriesStore, while the same document from a client is denied."""
    meters = projects["meters"]
    client = emulator.client(project=meters.project)
    sensor = f"s-{uuid.uuid4().hex[:8]}"
    records = [{"sensor": sensor, "timestamp": T0 + dt.timedelta(seconds=i), "value": 0.5 * i} for i in range(3)]
    try:
        with TimeSeriesStore(client, CLOSED, write_options=FAST) as store:
            written = store.write(records)
            assert written.count == 3
            assert store.count(start=T0, end=T0 + dt.timedelta(seconds=3)) >= 3
            stored = client.collection("closed").document(written.ids[0]).get().to_dict()
    finally:
        client.close()
    assert stored is not None and stored["sensor"] == sensor
    whos: tuple[Who, ...] = ("anonymous", "signed-in", "feed")
    for who in whos:
        for case in (
            Case("create-same-document", "meters", who, create("closed", stored), DENY),
            Case("get-written", "meters", who, get(f"closed/{written.ids[0]}"), DENY),
        ):
            result = run({"meters": meters}, case)
            assert result.as_expected, result.describe()
    assert must(meters, "owner", get(f"closed/{written.ids[0]}"))["fields"]["sensor"] == {"stringValue": sensor}
