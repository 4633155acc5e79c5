"""Values as the memory database keeps and compares them: as the Python client gives them
back (:func:`stored`), typed and ordered as Firestore orders values of any type
(:func:`type_order`, :class:`~tsstore.ticks.Ordered`), and found at dotted paths in nested
maps, where a missing field is not a null one (:data:`MISSING`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

#: What a dotted path finds where a document has no such field (a stored null is ``None``).
MISSING: Any = object()

#: Firestore's order of value types: null < booleans < numbers (integers and doubles, NaN
#: first) < timestamps < strings < bytes < references < geo points < arrays < maps.
NULL, BOOLEAN, NUMBER, TIMESTAMP, STRING, BYTES, REFERENCE, GEO, ARRAY, MAP = range(10)


def type_order(value: Any) -> int:
    """Where the type of ``value`` stands in Firestore's order of types: a range filter
    compares only values of one type (``2 < "a"`` matches nothing), ``==`` too
    (``1 == 1.0`` matches: both are numbers)."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, (int, float)):
        return NUMBER
    if isinstance(value, dt.datetime):
        return TIMESTAMP
    if isinstance(value, str):
        return STRING
    if isinstance(value, bytes):
        return BYTES
    if isinstance(value, (list, tuple)):
        return ARRAY
    if isinstance(value, Mapping):
        return MAP
    if hasattr(value, "path"):  # a document reference
        return REFERENCE
    return GEO


def stored(value: Any) -> Any:
    """``value`` as Firestore stores it and the client reads it back: a datetime aware in
    UTC (a naive one taken as UTC, as the client sends it), a tuple a list, maps and lists
    copied all the way down (nothing the caller keeps can change what is stored)."""
    if isinstance(value, dt.datetime):
        aware = value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)
        return dt.datetime(aware.year, aware.month, aware.day, aware.hour, aware.minute, aware.second,
                           aware.microsecond, tzinfo=dt.timezone.utc)  # fmt: skip
    if isinstance(value, Mapping):
        return {str(k): stored(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [stored(v) for v in value]
    return value


def copied(value: Any) -> Any:
    """A copy of a stored value, maps and lists copied all the way down (what a read hands out)."""
    if type(value) is dict:  # (what is stored holds plain maps and lists: see stored)
        return {k: copied(v) if type(v) in _NESTED else v for k, v in value.items()}
    if type(value) is list:
        return [copied(v) if type(v) in _NESTED else v for v in value]
    return value


_NESTED = (dict, list)


def at_path(data: Mapping[str, Any], path: str) -> Any:
    """The value at the dotted ``path`` in ``data``'s nested maps, :data:`MISSING` if none."""
    value: Any = data
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return MISSING
        value = value[part]
    return value


def put_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set the dotted ``path`` in ``data`` to ``value``, making (or replacing with) maps on the way."""
    *parents, last = path.split(".")
    target = data
    for part in parents:
        inner = target.get(part)
        if not isinstance(inner, dict):
            inner = target[part] = {}
        target = inner
    target[last] = value

