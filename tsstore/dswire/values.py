"""Values and entities of Firestore in Datastore mode, encoded and decoded on the raw protobufs
(``google.cloud.datastore_v1`` types' ``.pb()`` classes) without the public client's ``Entity``
objects: a tick's data is a plain dict both ways, as in Native mode.

A dict is an embedded entity (a value without a key), a list an array value. Datastore mode
refuses an *indexed* string or blob over 1 500 bytes (Native indexes its first 1 500), so such a
value is stored excluded from the indexes: it is kept whole and returned, but no filter or order
finds it (a declared field never holds one in practice: a shard, a symbol, an exchange).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from google.cloud.datastore_v1.types import entity as entity_types

from tsstore.errors import ModeError
from tsstore.limits import MAX_INDEXED_VALUE_BYTES
from tsstore.times import EPOCH, from_timestamp_pb

#: The raw protobuf classes.
ENTITY_PB = entity_types.Entity.pb()
KEY_PB = entity_types.Key.pb()
PARTITION_PB = entity_types.PartitionId.pb()


def partition(project: str, database: str, namespace: str | None) -> Any:
    """The ``PartitionId`` of a project's database (``""``: the default one) and namespace."""
    return PARTITION_PB(project_id=project, database_id=database, namespace_id=namespace or "")


def key(where: Any, path: str) -> Any:
    """The key of document path ``kind/name[/kind/name...]`` in partition ``where``."""
    parts = path.split("/")
    if len(parts) % 2:
        raise ValueError(f"{path!r} is not a document path (kind/name pairs)")
    made = KEY_PB()
    made.partition_id.CopyFrom(where)
    for kind, name in zip(parts[::2], parts[1::2]):
        element = made.path.add()
        element.kind, element.name = kind, name
    return made


def key_path(made: Any) -> str:
    """The document path of a key (``kind/name[/kind/name...]``)."""
    return "/".join(f"{element.kind}/{element.name}" for element in made.path)


def encode_entity(out: Any, data: Mapping[str, Any]) -> None:
    """Fill ``out`` (an ``Entity`` protobuf) with ``data``'s properties."""
    properties = out.properties
    for name, value in data.items():
        encode_value(value, properties[name])


def encode_value(value: Any, out: Any) -> None:
    """Set the ``Value`` protobuf ``out`` to ``value``."""
    kind = type(value)
    if kind is str:
        out.string_value = value
        if unindexable(value):
            out.exclude_from_indexes = True
    elif kind is float:
        out.double_value = value
    elif kind is int:
        out.integer_value = value
    elif kind is dict:
        out.entity_value.SetInParent()  # an empty dict is still an (empty) embedded entity
        encode_entity(out.entity_value, value)
    elif kind is dt.datetime and value.tzinfo is not None:
        set_time(out.timestamp_value, value)
    elif kind is bool:
        out.boolean_value = value
    elif value is None:
        out.null_value = 0
    elif kind is list:
        array = out.array_value
        array.SetInParent()  # an empty list is still an (empty) array value
        for item in value:
            if isinstance(item, list):
                raise ModeError("Datastore mode stores no array inside an array; give a list of values or of maps")
            encode_value(item, array.values.add())
    elif kind is bytes:
        out.blob_value = value
        if unindexable(value):
            out.exclude_from_indexes = True
    else:
        raise ModeError(
            f"a value of type {kind.__name__} ({value!r:.60}) cannot be stored in Datastore mode; give a string, "
            "number, bool, None, aware datetime, bytes, dict or list"
        )


def unindexable(value: str | bytes) -> bool:
    """Whether Datastore mode refuses to index ``value``: text or bytes over 1 500 bytes."""
    if isinstance(value, str):  # a character is at most 4 bytes: encode only what may be long
        return len(value) * 4 > MAX_INDEXED_VALUE_BYTES and len(value.encode()) > MAX_INDEXED_VALUE_BYTES
    return len(value) > MAX_INDEXED_VALUE_BYTES


def decode_entity(entity: Any) -> dict[str, Any]:
    """An ``Entity`` protobuf's properties as a plain dict."""
    properties = entity.properties
    return {name: decode_value(properties[name]) for name in properties}


def decode_value(value: Any) -> Any:
    """A ``Value`` protobuf as a plain Python value (timestamps as aware UTC datetimes)."""
    kind = value.WhichOneof("value_type")
    if kind == "string_value":
        return value.string_value
    if kind == "integer_value":
        return value.integer_value
    if kind == "double_value":
        return value.double_value
    if kind == "timestamp_value":
        return from_timestamp_pb(value.timestamp_value)
    if kind == "entity_value":
        return decode_entity(value.entity_value)
    if kind == "boolean_value":
        return value.boolean_value
    if kind == "null_value" or kind is None:
        return None
    if kind == "array_value":
        return [decode_value(item) for item in value.array_value.values]
    if kind == "blob_value":
        return value.blob_value
    if kind == "key_value":
        return key_path(value.key_value)
    if kind == "geo_point_value":
        return (value.geo_point_value.latitude, value.geo_point_value.longitude)
    raise ModeError(f"a stored value of kind {kind} is not one tsstore reads")  # pragma: no cover - all kinds above


def set_time(out: Any, when: dt.datetime) -> None:
    """Set the ``Timestamp`` protobuf ``out`` to ``when`` (aware)."""
    delta = when - EPOCH
    out.seconds, out.nanos = delta.days * 86_400 + delta.seconds, delta.microseconds * 1000
