"""One row's cells into a record: typed by the spec's declared columns, nested by dotted
names, checked (size, strictness, the timestamp), or a :class:`BadRow` saying why not.

Times are read by :mod:`tsstore.times` (:func:`~tsstore.times.parse_iso`); a naive time takes
the zone the ingest's ``naive`` policy names, or rejects the row.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any

from tsstore.errors import IngestError
from tsstore.limits import MAX_INDEXED_VALUE_BYTES
from tsstore.spec import SeriesSpec
from tsstore.ticks import get_path
from tsstore.times import EPOCH, parse_iso

#: Longest text field accepted by default: Firestore indexes at most 1 500 bytes of a value,
#: and a longer field in a tick file is almost always a broken quote swallowing lines.
DEFAULT_MAX_FIELD_BYTES = MAX_INDEXED_VALUE_BYTES
_TRUE = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}

#: Times given as numbers since the Unix epoch: microseconds per unit.
EPOCH_UNITS = {"s": Decimal(1_000_000), "ms": Decimal(1_000), "us": Decimal(1), "ns": Decimal("0.001")}

#: Builds one record from one row's cells (in the order of the names it was compiled for).
RecordBuilder = Callable[[list[Any]], dict[str, Any]]


class BadRow(Exception):
    """A row cannot be a record; the message says why (it becomes the reject's reason)."""


class RowParser:
    """Turns one row's cells into a record, or a reason it cannot be one."""

    def __init__(
        self,
        spec: SeriesSpec,
        *,
        zone: dt.tzinfo | None,
        strict: bool,
        max_field_bytes: int,
        time_column: str | None = None,
        time_unit: str | None = None,
    ) -> None:
        if time_unit is not None and time_unit not in EPOCH_UNITS:
            raise IngestError(f"time unit {time_unit!r} is not one of {', '.join(EPOCH_UNITS)} (since 1970-01-01 UTC)")
        self.spec = spec
        self.zone = zone
        self.time_column = time_column or spec.timestamp_field  # the column holding the tick's time
        self.time_unit = time_unit
        self.strict = strict
        self.max_field_bytes = max_field_bytes
        self.types = dict(spec.columns)
        known = {spec.timestamp_field, spec.shard_field, *self.types, *spec.key_fields, *spec.count_by}
        known |= spec.filter_fields
        if spec.expire_after is not None:
            known.add(spec.expire_field)
        self.known = frozenset(known)
        self._builders: dict[tuple[str, ...], RecordBuilder] = {}

    def converter(self, column: str) -> Callable[[Any], Any]:
        if column == self.time_column:
            return self.epoch if self.time_unit is not None else self.time
        kind = self.types.get(column, "string")
        return {
            "string": _as_text,
            "Int64": _as_int,
            "Float64": _as_float,
            "boolean": _as_bool,
            "datetime": self.time,
            "object": _as_is,
        }[kind]

    def time(self, value: Any) -> dt.datetime:
        if isinstance(value, dt.datetime):
            parsed = value
        elif isinstance(value, str):
            try:
                parsed = parse_iso(value)
            except ValueError as bad:
                raise BadRow(str(bad)) from None
        else:
            raise BadRow(f"{value!r} is not a time")
        if parsed.tzinfo is None:
            if self.zone is None:
                raise BadRow(
                    f"{value!s} has no timezone; give an offset or choose a timezone policy (--naive utc or a zone)"
                )
            parsed = parsed.replace(tzinfo=self.zone)
        return parsed

    def epoch(self, value: Any) -> dt.datetime:
        """A time given as a number of :attr:`time_unit` since the Unix epoch (UTC): whole
        microseconds, as Firestore keeps them."""
        try:
            number = Decimal(value.strip() if isinstance(value, str) else str(value))
        except (InvalidOperation, ValueError):
            raise BadRow(f"{value!r} is not a number of {self.time_unit} since 1970") from None
        micros = number * EPOCH_UNITS[self.time_unit or "s"]
        if not micros.is_finite() or micros != micros.to_integral_value():
            raise BadRow(f"{value!r} {self.time_unit} is not a whole number of microseconds")
        try:
            return EPOCH + dt.timedelta(microseconds=int(micros))
        except OverflowError:
            raise BadRow(f"{value!r} {self.time_unit} since 1970 is outside the times Firestore stores") from None

    def record(self, items: Mapping[str, Any]) -> dict[str, Any]:
        """A nested record from an already typed row (JSON Lines, Parquet) with dotted names."""
        names = tuple(items)
        build = self._builders.get(names)
        if build is None:
            if len(self._builders) > 256:  # rows with ever-changing keys: keep memory bounded
                self._builders.clear()
            build = self._builders[names] = self.compile(list(names), typed=True)
        return build(list(items.values()))

    def compile(self, names: list[str], *, typed: bool = False) -> RecordBuilder:
        """A record builder for rows of cells under ``names``: the per-column work (converter,
        nesting, checks) is decided once, since the builder runs for every row. ``typed``
        rows (JSON, Parquet) keep the types of undeclared values; text rows (CSV) are text."""
        if self.time_column != self.spec.timestamp_field:
            if self.time_column not in names:
                raise IngestError(
                    f"the time column {self.time_column!r} is not in the file (columns: {', '.join(names)})"
                )
            if self.spec.timestamp_field in names:
                raise IngestError(
                    f"the file has a {self.spec.timestamp_field!r} column besides the time column "
                    f"{self.time_column!r}; drop one"
                )
        plan = []
        for i, column in enumerate(names):
            name = self.spec.timestamp_field if column == self.time_column else column
            conv = self.converter(column) if (name in self.known or not typed) else _as_is
            passthrough = conv is _as_is or (conv is _as_text and not typed)
            *parents, leaf = name.split(".")
            plan.append((i, column, name, None if passthrough else conv, tuple(parents), leaf, name in self.known))
        strict, limit = self.strict, self.max_field_bytes
        ts_path = self.spec.timestamp_field.split(".")

        def build(row: list[Any]) -> dict[str, Any]:
            record: dict[str, Any] = {}
            for i, column, name, conv, parents, leaf, known in plan:
                raw = row[i]
                if raw == "" or raw is None:
                    continue
                if strict and not known:
                    raise BadRow(f"unknown column {name!r} has a value (strict: declared columns only)")
                if type(raw) is str and len(raw) * 4 > limit and len(raw.encode()) > limit:
                    raise BadRow(f"column {name!r} is {len(raw.encode())} bytes; at most {limit} allowed")
                if conv is None:
                    value: Any = raw
                else:
                    try:
                        value = conv(raw)
                    except BadRow as bad:
                        raise BadRow(f"column {column!r}: {bad}") from None  # the file's name for it
                target = record
                for part in parents:
                    target = target.setdefault(part, {})
                    if not isinstance(target, dict):
                        raise BadRow(f"column {name!r} collides with a value at {part!r}")
                target[leaf] = value
            if get_path(record, ts_path) is None:
                raise BadRow(f"timestamp {'.'.join(ts_path)!r} is missing")
            return record

        return build


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _as_int(value: Any) -> int:
    if isinstance(value, bool):
        raise BadRow(f"{value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, float):
        raise BadRow(f"{value!r} is not an integer")
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise BadRow(f"{value!r} is not an integer") from None


def _as_float(value: Any) -> float:
    if isinstance(value, bool):
        raise BadRow(f"{value!r} is not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise BadRow(f"{value!r} is not a number") from None
    if not math.isfinite(number):
        # NaN in a file usually stands for "missing", which an empty cell says without loss.
        raise BadRow(f"{value!r} is not a finite number (leave the cell empty for a missing value)")
    return number


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    found = _TRUE.get(str(value).strip().lower())
    if found is None:
        raise BadRow(f"{value!r} is not true/false")
    return found


def _as_is(value: Any) -> Any:
    return value
