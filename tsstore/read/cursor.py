"""Opaque pagination cursors: the last (timestamp, document id) of a page, bound to its query
(with range conditions on value fields, also those fields' values: the query's order).

A cursor names a position in the merged order, not an offset, so every chunk resumes
right after it and a page never skips or repeats a document, ties included. It also
carries a fingerprint of the query's filters, range and direction, so a cursor from one
query cannot silently be used to continue another; and, when its page was read at a snapshot
(a query of several chunks, or one given a ``read_time``), that snapshot's time, so a walk
of pages reads them all at its first page's snapshot (see :func:`cursor_snapshot`).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from typing import Any

from tsstore.errors import CursorError
from tsstore.read.plan import QueryPlan
from tsstore.ticks import Ordered, Position
from tsstore.times import from_micros, to_micros

_VERSION = 1


def _fingerprint(plan: QueryPlan) -> str:
    parts = [
        plan.spec.collection,
        plan.direction.value,
        None if plan.start is None else to_micros(plan.start),
        None if plan.end is None else to_micros(plan.end),
        [[f.field, f.op, [repr(v) for v in f.values]] for f in plan.filters],
    ]
    if plan.ranges:  # only then: a cursor of a query without range conditions keeps its fingerprint
        parts.append([[f.field, f.op, repr(f.values[0])] for f in plan.ranges])
    raw = json.dumps(parts, separators=(",", ":"), sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def encode_cursor(plan: QueryPlan, position: Position, *, snapshot: dt.datetime | None = None) -> str:
    """A cursor that continues ``plan`` after ``position`` (a :meth:`QueryPlan.key`), read at
    ``snapshot`` when there is one."""
    timestamp, values, document_id = position[0], position[1:-1], position[-1]
    body: dict[str, Any] = {"v": _VERSION, "t": to_micros(timestamp), "id": document_id, "q": _fingerprint(plan)}
    if values:
        body["k"] = [_encode_value(ordered.raw) for ordered in values]
    if snapshot is not None:
        body["s"] = to_micros(snapshot)
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(plan: QueryPlan, cursor: str) -> Position:
    """The position (a :meth:`QueryPlan.key`) a cursor resumes after; :class:`CursorError` if
    it is malformed or was made by a different query."""
    try:
        body = _body(cursor)
        version, micros, doc_id, fp = body["v"], body["t"], body["id"], body["q"]
        values = tuple(Ordered(_decode_value(v)) for v in body.get("k", ()))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CursorError(f"cursor {cursor[:40]!r} is not a tsstore cursor") from exc
    if version != _VERSION or not isinstance(micros, int) or not isinstance(doc_id, str):
        raise CursorError(f"cursor {cursor[:40]!r} is not a tsstore cursor of version {_VERSION}")
    if fp != _fingerprint(plan) or len(values) != len(plan.order_fields):
        raise CursorError(
            "cursor belongs to a different query (filters, range or direction changed); "
            "a cursor only continues the query that produced it"
        )
    return (from_micros(micros), *values, doc_id)


def cursor_snapshot(cursor: str) -> dt.datetime | None:
    """The snapshot the cursor's page was read at (``None`` if it was read at none, or the
    cursor is not a tsstore cursor: :func:`decode_cursor` says so)."""
    try:
        micros = _body(cursor).get("s")
    except (ValueError, TypeError, AttributeError):
        return None
    return from_micros(micros) if isinstance(micros, int) else None


def _body(cursor: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    return body


def _encode_value(value: Any) -> dict[str, Any]:
    """A value the query orders by, as JSON that keeps its Firestore type."""
    if value is None or isinstance(value, (bool, str)):
        return {"p": value}
    if isinstance(value, int):
        return {"i": str(value)}
    if isinstance(value, float):
        return {"f": repr(value)}
    if isinstance(value, dt.datetime):
        return {"t": to_micros(value)}
    if isinstance(value, bytes):
        return {"b": base64.b64encode(value).decode()}
    raise CursorError(
        f"a cursor cannot hold the {type(value).__name__} value {value!r} of a range-filtered field; "
        "range fields hold numbers, strings, booleans, timestamps or bytes"
    )


def _decode_value(body: dict[str, Any]) -> Any:
    ((kind, value),) = body.items()
    if kind == "p":
        return value
    if kind == "i":
        return int(value)
    if kind == "f":
        return float(value)
    if kind == "t":
        return from_micros(value)
    if kind == "b":
        return base64.b64decode(value)
    raise ValueError(f"unknown cursor value kind {kind!r}")
