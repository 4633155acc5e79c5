"""Run one Firestore query and decode its documents into :class:`Tick` values.

Decoding is the client's hot spot: ``query.stream()`` builds a ``DocumentSnapshot`` per
document through proto-plus wrappers, about 150 µs a document. The fast path here sends
the same request on the client's own GAPIC channel and decodes the raw protobuf
responses directly. It relies on private parts of google-cloud-firestore
(``Query._prep_stream``, ``Client._firestore_api``, ``Client._rpc_metadata``), so it lives
in this one module, is tested against the public path, and falls back to the public
``stream()`` if the client's internals change shape.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator
from typing import Any

from google.cloud.firestore_v1 import _helpers
from google.cloud.firestore_v1.base_query import BaseQuery

from .rows import Tick

log = logging.getLogger(__name__)

_UTC = dt.timezone.utc
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)
_ONE_US = dt.timedelta(microseconds=1)


def stream_ticks(
    query: BaseQuery, *, timestamp_field: str, read_time: dt.datetime | None, fast: bool = True
) -> Iterator[Tick]:
    """Yield the query's documents as ticks, in the server's order."""
    if fast:
        try:
            prepared = _prepare(query, read_time)
        except (AttributeError, TypeError, ValueError) as exc:  # client internals changed
            log.warning("tsstore fast query path unavailable (%s); using query.stream()", exc)
        else:
            yield from _decode_responses(*prepared, timestamp_field=timestamp_field)
            return
    yield from _public_stream(query, timestamp_field=timestamp_field, read_time=read_time)


def _public_stream(
    query: BaseQuery, *, timestamp_field: str, read_time: dt.datetime | None
) -> Iterator[Tick]:
    for snap in query.stream(read_time=read_time):  # type: ignore[attr-defined]
        data = snap.to_dict() or {}
        yield Tick(snap.id, _plain_time(_get_path(data, timestamp_field)), data)


def _prepare(query: BaseQuery, read_time: dt.datetime | None) -> tuple[Any, Any, str]:
    client = query._client
    request, expected_prefix, kwargs = query._prep_stream(None, None, None, None, read_time)
    responses = client._firestore_api.run_query(
        request=request, metadata=client._rpc_metadata, **kwargs
    )
    return responses, client, expected_prefix


def _decode_responses(
    responses: Any, client: Any, expected_prefix: str, *, timestamp_field: str
) -> Iterator[Tick]:
    prefix_len = len(expected_prefix) + 1  # "<collection path>/" then the document id
    path = timestamp_field.split(".")
    for response in responses:
        pb = response._pb
        if not pb.HasField("document"):
            continue
        doc = pb.document
        data = _decode_map(doc.fields, client)
        yield Tick(doc.name[prefix_len:], _plain_time(_get_nested(data, path)), data)


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


def _get_path(data: dict[str, Any], path: str) -> Any:
    return _get_nested(data, path.split("."))


def _get_nested(data: dict[str, Any], path: list[str]) -> Any:
    value: Any = data
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _plain_time(value: Any) -> dt.datetime:
    """Timestamps as plain aware UTC datetimes (``DatetimeWithNanoseconds`` from the public
    path compares equal but is a different type)."""
    if not isinstance(value, dt.datetime):
        # A document without the timestamp cannot be in an ordered timestamp query result.
        raise ValueError(f"document has no timestamp value ({value!r})")
    if type(value) is dt.datetime:
        return value
    return dt.datetime(
        value.year, value.month, value.day, value.hour, value.minute, value.second,
        value.microsecond, tzinfo=_UTC,
    )
