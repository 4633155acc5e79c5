"""Validate records for writing and give each its document id and shard.

Pure logic: nothing here talks to Firestore. Each record becomes a :class:`PreparedDoc`
or a :class:`RecordError` naming the record's position and the rule it broke, before
anything is sent, so a bad record never leaves half a batch written.
"""

from __future__ import annotations

import datetime as dt
import secrets
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from google.cloud.firestore_v1 import GeoPoint
from google.cloud.firestore_v1.vector import Vector

from tsstore.errors import ConfigError, RecordError
from tsstore.limits import (
    MAX_DOCUMENT_BYTES,
    MAX_FIELD_DEPTH,
    MAX_INDEXED_VALUE_BYTES,
    MAX_INT64,
    MIN_INT64,
    indexed_size,
)
from tsstore.spec import DuplicatePolicy, SeriesSpec, check_policy
from tsstore.times import NaivePolicy, naive_zone, to_utc
from tsstore.write.identity import (
    ID_BYTES,
    Repeats,
    base_of,
    content_digest,
    fingerprint,
    id_from_digest,
    repeated_base,
    shard_from_digest,
    slot_digest,
)
from tsstore.write.ops import Erase, Patch


@dataclass(frozen=True, slots=True)
class PreparedDoc:
    """A record ready to write: its input position, document id, data (shard set) and its
    size in bytes as Firestore counts it.

    ``base`` (key values and time), ``repeat`` and ``content`` (the content fingerprint, when
    it was needed) place a keyed tick (see :mod:`tsstore.write.identity`); ``at_slot`` says the id
    is its base's slot id. ``base`` is ``None`` for random ids. ``data`` ``None`` deletes the
    document, a :class:`~tsstore.wire.Patch` changes some of its fields.
    """

    index: int
    id: str
    data: dict[str, Any] | Patch | Erase | None
    size: int
    base: tuple[Any, ...] | None = None
    repeat: int = 0
    content: bytes | None = None
    at_slot: bool = False


def check_naive(naive: NaivePolicy) -> None:
    """Refuse a ``naive`` policy that is not ``"error"``, ``"utc"`` or an IANA zone, naming it."""
    try:
        naive_zone(naive)
    except ValueError as exc:
        raise ConfigError(f"naive={naive!r}: {exc}") from None


def prepare_records(
    spec: SeriesSpec,
    records: Iterable[Mapping[str, Any]],
    *,
    naive: NaivePolicy = "error",
    on_duplicate: DuplicatePolicy = "keep",
    on_reject: Callable[[RecordError], None] | None = None,
    skip_first: int = 0,
) -> Iterator[PreparedDoc]:
    """Validate each record and assign its id and shard, lazily, in input order.

    Ids are spread evenly over the key space, never monotonic. With ``spec.key_fields``
    an id is a hash of the key values and the timestamp (the slot id), or, for a record
    repeating an earlier one of this input whole, of those, its content and its repeat
    number (see :mod:`tsstore.write.identity`), so writing the same input again gives the same
    ids; otherwise it is random. The shard comes from other bits of the slot's digest:
    random for random ids, and stable for hashed ids so that a retried write produces the
    identical document. A shard value the caller already set is kept if the spec declares
    it and refused otherwise.

    A record that breaks a rule raises :class:`RecordError`, or, with ``on_reject``, is
    handed to it and skipped while the others go on. The first ``skip_first`` records were
    written by an earlier run: they are numbered like the rest but not yielded, and their
    errors are not reported again.
    """
    check_naive(naive)  # the options are checked when called, before any record is taken
    try:
        policy = check_policy(on_duplicate)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if isinstance(skip_first, bool) or not isinstance(skip_first, int) or skip_first < 0:
        raise ConfigError(
            f"skip_first={skip_first!r} is not allowed; give how many records an earlier run wrote (0 or more)"
        )
    return _prepared(spec, records, naive, policy, on_reject, skip_first)


def _prepared(
    spec: SeriesSpec,
    records: Iterable[Mapping[str, Any]],
    naive: NaivePolicy,
    policy: DuplicatePolicy,
    on_reject: Callable[[RecordError], None] | None,
    skip_first: int,
) -> Iterator[PreparedDoc]:
    """:func:`prepare_records`' documents, its options checked."""
    repeats = Repeats()
    ts_path = spec.timestamp_field.split(".")
    shard_path = spec.shard_field.split(".")
    expire_path = spec.expire_field.split(".")
    key_paths = [k.split(".") for k in spec.key_fields]
    filtered = [(name, name.split(".")) for name in sorted(spec.filter_fields)]
    shards = spec.shards
    allowed_shards = frozenset(shards)
    name_bytes = _name_overhead(spec.collection)

    def prepare_one(index: int, record: Any) -> PreparedDoc:
        if not isinstance(record, Mapping):
            raise RecordError(index, f"is a {type(record).__name__}, not a mapping of field names to values")
        try:
            data, size = _clean_map(record, naive, 0)
        except _Bad as bad:
            raise RecordError(index, str(bad)) from None
        except UnicodeEncodeError:
            raise RecordError(index, "holds text that is not valid Unicode (a lone surrogate)") from None
        raw_ts = _get(data, ts_path)
        if raw_ts is _MISSING:
            raise RecordError(index, f"timestamp field {spec.timestamp_field!r} is missing")
        if not isinstance(raw_ts, dt.datetime):
            raise RecordError(
                index,
                f"timestamp field {spec.timestamp_field!r} is {type(raw_ts).__name__} {raw_ts!r}, "
                "not a timezone-aware datetime",
            )
        if spec.expire_after is not None and _get(data, expire_path) is _MISSING:
            try:
                size += _set(data, expire_path, raw_ts + spec.expire_after)
            except OverflowError:
                raise RecordError(
                    index, f"timestamp {raw_ts.isoformat()} + expire_after is past the latest time Firestore stores"
                ) from None
        shard = _get(data, shard_path)
        if shard is not _MISSING and shard not in allowed_shards:
            raise RecordError(
                index,
                f"shard field {spec.shard_field!r} is {shard!r}, not one of the spec's shard values "
                f"{list(shards)[:10]}{'…' if len(shards) > 10 else ''}; leave it unset and tsstore assigns one",
            )
        for name, path in filtered:
            _check_filterable(index, name, _get(data, path))
        if key_paths:
            key = []
            for path, name in zip(key_paths, spec.key_fields):
                value = _get(data, path)
                if value is _MISSING or not isinstance(value, (str, int, float, bool)) and value is not None:
                    raise RecordError(
                        index,
                        f"key field {name!r} is {'missing' if value is _MISSING else repr(value)}; "
                        "key fields must be present and hold a string, number, boolean or null",
                    )
                key.append(value)
            base: tuple[Any, ...] | None = base_of(key, raw_ts)
            assert base is not None
            digest = slot_digest(base)
            doc_id = id_from_digest(digest)
            content, repeat = None, 0
            if policy == "keep":
                content = fingerprint(data, ignore=spec.shard_field)
                seen, repeat = repeats.observe(digest, content)
                if repeat:  # a repeat never takes the slot: the first such row has it or passed it
                    doc_id = id_from_digest(content_digest(base, content, repeat))
            elif policy == "error" and repeats.observe(digest, b"")[0]:
                raise RecordError(index, repeated_base(key, raw_ts))
        else:
            base, content, repeat = None, None, 0
            digest = secrets.token_bytes(ID_BYTES + 4)
            doc_id = id_from_digest(digest)
        if shard is _MISSING:
            shard = shard_from_digest(digest, shards)
            size += _set(data, shard_path, shard)
        total = size + name_bytes + len(doc_id) + 1 + 32
        if total > MAX_DOCUMENT_BYTES:
            raise RecordError(
                index, f"is {total} bytes as Firestore counts them; a document may be at most {MAX_DOCUMENT_BYTES}"
            )
        return PreparedDoc(index, doc_id, data, total, base, repeat, content, base is not None and repeat == 0)

    for index, record in enumerate(records):
        try:
            doc = prepare_one(index, record)
        except RecordError as error:
            if index < skip_first:
                continue
            if on_reject is None:
                raise
            on_reject(error)
            continue
        if index >= skip_first:
            yield doc


def _check_filterable(index: int, name: str, value: Any) -> None:
    """Refuse a text or bytes value of a field a query shape filters on that is larger than
    Firestore compares in a query: no filter would ever find the tick (Native mode indexes its
    first bytes, Datastore mode stores it unindexed; both refuse the filter)."""
    if not isinstance(value, (str, bytes)) or len(value) * 4 < MAX_INDEXED_VALUE_BYTES:
        return  # a character is at most 4 bytes: only a long value is measured
    size = indexed_size(value)
    if size is not None and size > MAX_INDEXED_VALUE_BYTES:
        counted = " as Firestore counts a text (its UTF-8 bytes and one)" if isinstance(value, str) else ""
        raise RecordError(
            index,
            f"field {name!r} is {size} bytes{counted}; a query shape filters on it, and Firestore compares "
            f"indexed values of at most {MAX_INDEXED_VALUE_BYTES} bytes in a query, so no filter would find this tick",
        )


class _Bad(Exception):
    """A value Firestore would refuse. A message about one field says ``{field}`` where the
    field's name goes: its whole dotted path, known once the maps around it are unwound."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message, self.path = message, list[str]()

    def within(self, key: str) -> _Bad:
        """The same refusal, one map further out (inside the field ``key``)."""
        self.path.insert(0, key)
        return self

    def __str__(self) -> str:
        return self.message.replace("{field}", repr(".".join(self.path)))


_MISSING: Any = object()


def _name_overhead(collection: str) -> int:
    # Firestore's storage size of a document name: each path segment's UTF-8 length + 1, plus 16.
    return len(collection.encode()) + 1 + 16


def _get(data: Mapping[str, Any], path: list[str]) -> Any:
    value: Any = data
    for part in path:
        if not isinstance(value, Mapping) or part not in value:
            return _MISSING
        value = value[part]
    return value


def _set(data: dict[str, Any], path: list[str], value: str | dt.datetime) -> int:
    """Set ``path`` to ``value`` (creating maps on the way); return the bytes added."""
    added = 0
    for part in path[:-1]:
        if part not in data:
            data[part] = {}
            added += len(part.encode()) + 1
        data = data[part]
    added += len(path[-1].encode()) + 1 + (len(value.encode()) + 1 if isinstance(value, str) else 8)
    data[path[-1]] = value
    return added


def _check_key(key: object) -> str:
    if not isinstance(key, str):
        raise _Bad(f"field name {key!r} is not a string")
    if not key:
        raise _Bad("has an empty field name")
    if "." in key:
        raise _Bad(f"field name {key!r} contains '.'; nest a map instead (dots mean nesting in tsstore)")
    if key.startswith("__") and key.endswith("__"):
        raise _Bad(f"field name {key!r} is reserved by Firestore (__...__)")
    return key


def _clean_map(record: Mapping[Any, Any], naive: NaivePolicy, depth: int) -> tuple[dict[str, Any], int]:
    """A converted copy of a map and its Firestore storage size (field names + values).

    The common tick types (str, int, float, nested dict) are handled inline: this loop
    runs for every field of every record, and function calls dominate its cost.
    """
    if depth > MAX_FIELD_DEPTH:
        raise _Bad(f"nests maps or arrays more than {MAX_FIELD_DEPTH} levels deep, which Firestore refuses")
    out: dict[str, Any] = {}
    size = 0
    for key, value in record.items():
        if type(key) is not str or not key or "." in key or (key[:2] == "__" and key[-2:] == "__"):
            _check_key(key)
        size += len(key.encode()) + 1
        kind = type(value)
        if kind is str:
            out[key] = value
            size += len(value.encode()) + 1
        elif kind is float:
            out[key] = value
            size += 8
        elif kind is int and MIN_INT64 <= value <= MAX_INT64:
            out[key] = value
            size += 8
        else:
            try:
                out[key], vsize = (
                    _clean_map(value, naive, depth + 1) if kind is dict else _clean_value(value, naive, key, depth)
                )
            except _Bad as bad:
                raise bad.within(key) from None
            size += vsize
    return out, size


def _clean_value(value: Any, naive: NaivePolicy, name: str, depth: int, *, in_array: bool = False) -> tuple[Any, int]:
    # Order: the common tick types first.
    if isinstance(value, str):
        return value, len(value.encode()) + 1
    if isinstance(value, bool) or isinstance(value, np.bool_):
        return bool(value), 1
    if isinstance(value, (int, np.integer)):
        number = int(value)
        if not MIN_INT64 <= number <= MAX_INT64:
            raise _Bad(f"field {{field}} holds {number}, outside Firestore's 64-bit integer range")
        return number, 8
    if isinstance(value, (float, np.floating)):
        return float(value), 8
    if isinstance(value, (dt.datetime, np.datetime64)):
        return _clean_time(value, naive, name), 8
    if value is None:
        return None, 1
    if isinstance(value, Mapping):
        return _clean_map(value, naive, depth + 1)
    if isinstance(value, (list, tuple)):
        return _clean_array(value, naive, name, depth, in_array=in_array)
    return _clean_other(value)


def _clean_time(value: dt.datetime | np.datetime64, naive: NaivePolicy, name: str) -> dt.datetime:
    try:
        return to_utc(pd.Timestamp(value) if isinstance(value, np.datetime64) else value, name=f"field {name!r}",
                      naive=naive, naive_option=True)  # fmt: skip
    except ValueError as exc:
        raise _Bad(str(exc).replace(f"field {name!r}", "field {field}")) from None


def _clean_array(
    value: list[Any] | tuple[Any, ...], naive: NaivePolicy, name: str, depth: int, *, in_array: bool
) -> tuple[list[Any], int]:
    """An array's values, cleaned: no array directly inside an array, nesting within Firestore's depth."""
    if in_array:
        raise _Bad("field {field} holds an array inside an array, which Firestore does not store")
    if depth + 1 > MAX_FIELD_DEPTH:
        raise _Bad(f"nests maps or arrays more than {MAX_FIELD_DEPTH} levels deep, which Firestore refuses")
    items = [_clean_value(v, naive, name, depth + 1, in_array=True) for v in value]
    return [v for v, _ in items], sum(s for _, s in items)


def _clean_other(value: Any) -> tuple[Any, int]:
    """A value of the rarer types Firestore stores (bytes, a GeoPoint, a Vector), or the refusal."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value), len(value)
    if isinstance(value, GeoPoint):
        return value, 16
    if isinstance(value, Vector):
        return value, 8 * len(value) + 40
    raise _Bad(
        f"field {{field}} holds {type(value).__name__} {value!r}; allowed: str, int, float, bool, None, "
        "datetime, bytes, list, dict, GeoPoint, Vector"
    )
