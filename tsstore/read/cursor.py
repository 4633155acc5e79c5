"""Opaque pagination cursors: the last (timestamp, document id) of a page, bound to its query.

A cursor names a position in the merged order, not an offset, so every chunk resumes
right after it and a page never skips or repeats a document, ties included. It also
carries a fingerprint of the query's filters, range and direction, so a cursor from one
query cannot silently be used to continue another.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json

from tsstore.errors import CursorError
from tsstore.read.plan import QueryPlan
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
    raw = json.dumps(parts, separators=(",", ":"), sort_keys=True).encode()
    return hashlib.sha256(raw).hexdigest()[:16]


def encode_cursor(plan: QueryPlan, timestamp: dt.datetime, document_id: str) -> str:
    body = {"v": _VERSION, "t": to_micros(timestamp), "id": document_id, "q": _fingerprint(plan)}
    raw = json.dumps(body, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(plan: QueryPlan, cursor: str) -> tuple[dt.datetime, str]:
    """The (timestamp, document id) a cursor resumes after; :class:`CursorError` if it is
    malformed or was made by a different query."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        body = json.loads(raw)
        version, micros, doc_id, fp = body["v"], body["t"], body["id"], body["q"]
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise CursorError(f"cursor {cursor[:40]!r} is not a tsstore cursor") from exc
    if version != _VERSION or not isinstance(micros, int) or not isinstance(doc_id, str):
        raise CursorError(f"cursor {cursor[:40]!r} is not a tsstore cursor of version {_VERSION}")
    if fp != _fingerprint(plan):
        raise CursorError(
            "cursor belongs to a different query (filters, range or direction changed); "
            "a cursor only continues the query that produced it"
        )
    return from_micros(micros), doc_id
