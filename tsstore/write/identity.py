"""Which document a tick becomes: the identity rule and the duplicate policy.

With ``key_fields`` a tick's *base* is its key values and its timestamp (in microseconds).
Two input rows may share a base and still be two ticks (two trades of one symbol in one
millisecond; two flights on one route in one minute), so the base alone is not an identity.
A tick is its base, its content (every field but the shard) and, for rows repeated whole
within one input, its repeat number *k* (0 for the first such row, 1 for the next…).

It is stored under one of two ids:

- the *slot* id, a hash of (key values, time): the id earlier versions gave every keyed
  tick, taken by the first tick stored with that base;
- its *content* id, a hash of (key values, time, content, k), when the slot holds another
  tick (or for a repeat, k ≥ 1, which never takes the slot).

Every tick is written *only if its document does not exist yet* (a create). When it does,
the stored content decides: the same content means the tick is already there; other
content at the slot means another tick holds it, and the duplicate policy says what happens:

``keep`` (default)
    the tick goes to its content id, beside the other; a re-run finds it there again.
``replace``
    the tick overwrites the slot (key and time are the identity; the last write wins).
``error``
    the tick is refused and named; so is a second row with the same base in one input.

So a tick re-sent in any input, alone or among others, in any order, is found, never
stored twice; rows identical in every field are one tick across inputs and *k* + 1 ticks
when one input lists them *k* + 1 times. A trade id or sequence number in ``key_fields``
makes every row's identity explicit.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from google.cloud.firestore_v1 import GeoPoint
from google.cloud.firestore_v1.vector import Vector

from tsstore.ticks import without_paths
from tsstore.times import to_micros

#: Canonical text of (key values…, timestamp µs[, n]) that slot ids hash: compact JSON.
_KEY_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)

#: Bytes of a document id: 15 bytes → 20 base64url characters, like Firestore's own ids.
ID_BYTES = 15


def base_of(key_values: Iterable[Any], timestamp: dt.datetime) -> tuple[Any, ...]:
    """A tick's base: its key values followed by its time in microseconds."""
    return (*key_values, to_micros(timestamp))


def slot_digest(base: tuple[Any, ...]) -> bytes:
    """The digest behind a base's slot id (id and shard are cut from it)."""
    return hashlib.sha256(_KEY_ENCODER.encode(list(base)).encode()).digest()


def content_digest(base: tuple[Any, ...], fingerprint: bytes, repeat: int) -> bytes:
    """The digest behind the content id of a tick: its base, content and repeat number."""
    parts = [*base, "content", fingerprint.hex(), repeat]
    return hashlib.sha256(_KEY_ENCODER.encode(parts).encode()).digest()


def id_from_digest(digest: bytes) -> str:
    return base64.urlsafe_b64encode(digest[:ID_BYTES]).decode()


def shard_from_digest(digest: bytes, shards: tuple[str, ...]) -> str:
    """A shard value from bits of the digest the id does not use: uniform over ``shards``."""
    return shards[int.from_bytes(digest[ID_BYTES : ID_BYTES + 4], "big") % len(shards)]


def shard_for_id(doc_id: str, shards: tuple[str, ...]) -> str:
    """The shard value a stored tick moves to when its own is retired: uniform over
    ``shards`` and the same every time for the same id, so a resumed move agrees with itself."""
    return shard_from_digest(hashlib.sha256(doc_id.encode()).digest(), shards)


def repeated_base(key: Iterable[Any], timestamp: dt.datetime) -> str:
    """Why ``on_duplicate="error"`` refuses a second record of one base in one input."""
    return (
        f"has the same key {list(key)!r} and time {timestamp.isoformat()} as an earlier record of this input; "
        "on_duplicate='error' refuses it ('keep' stores both; a trade id in key_fields tells them apart)"
    )


class Repeats:
    """Within one input: whether a row's base was seen before, and its repeat number *k*,
    the count of earlier rows with the same base and the same content.

    Memory grows with the distinct bases seen (one dict entry each, about 100 bytes) plus an
    entry per row whose base repeats: what exact counting over an unsorted input needs.
    """

    def __init__(self) -> None:
        self._first: dict[int, int] = {}  # base -> content of its first row (64-bit prefixes)
        self._more: dict[tuple[int, int], int] = {}  # (base, content) -> rows counted so far

    def observe(self, slot: bytes, content: bytes) -> tuple[bool, int]:
        """Note a row with this slot digest and content fingerprint; return whether its base
        was seen before and its repeat number."""
        base, fp = int.from_bytes(slot[:8], "big"), int.from_bytes(content[:8], "big")
        first = self._first.get(base)
        if first is None:
            self._first[base] = fp
            return False, 0
        key = (base, fp)
        k = self._more.get(key, 1 if fp == first else 0)
        self._more[key] = k + 1
        return True, k


def fingerprint(data: Mapping[str, Any], *, ignore: str | None = None) -> bytes:
    """A digest of a document's content, equal exactly when the stored values are equal.

    Types are part of the content (1, 1.0 and true differ, as they do in Firestore), NaN
    equals NaN, times compare by instant, map keys in any order. ``ignore`` names a field
    left out (the shard field, dotted if nested: the same tick under another shard value is
    the same tick). Canonical JSON (encoded in C) hashed with SHA-256: stable across
    processes and Python versions, since content ids are made from it.
    """
    if ignore is not None:
        data = without_paths(data, [ignore])
    return hashlib.sha256(_CANONICAL.encode(data).encode()).digest()


def _special(value: Any) -> Any:
    """JSON for the values JSON lacks, as maps whose one key Firestore reserves (``__x__``
    field names are refused by the writer), so no stored map can look the same."""
    if isinstance(value, dt.datetime):
        return {"__time__": to_micros(value)}
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes__": bytes(value).hex()}
    if isinstance(value, GeoPoint):
        return {"__geo__": [float(value.latitude), float(value.longitude)]}
    if isinstance(value, Vector):
        return {"__vector__": [float(v) for v in value]}
    return {"__ref__": str(getattr(value, "path", value))}  # a document reference


_CANONICAL = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True, default=_special
)
