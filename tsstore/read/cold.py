"""Ticks read from sealed partitions: a query's filters, range, order, cursor and projection
applied to Parquet objects as Firestore applies them to documents.

Each object is read with the time range and the string equality filters pushed down (row
groups whose statistics rule them out are skipped), then every filter is checked on each
row as Firestore compares values (:class:`~tsstore.ticks.Ordered`: a range condition
matches values of its own type only, ``!=`` every present value but null), the rows put in
the query's order (:meth:`~tsstore.read.plan.QueryPlan.key`) and continued after a cursor.
A row becomes a :class:`~tsstore.ticks.Tick` as Firestore would return the document: dotted
columns nested again, a null left out (a sealed row holds null where the document had no
such field), projected as the query's ``columns``; when the pushed-down filters were all
the query had and no cursor continues it, each row streams as a
:class:`~tsstore.frames.TableRow` instead (:class:`SealedRows`), whose values are made only
when asked: a frame builder takes runs of them from the table's columns.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tsstore.cold.parquet import ID_COLUMN
from tsstore.errors import StateError
from tsstore.frames import RowSource, TableRow, projected
from tsstore.read.cost import ReadStats
from tsstore.read.engine import TickRead
from tsstore.read.plan import Filter, QueryPlan
from tsstore.ticks import Ordered, Position, Tick, get_path


@dataclass(frozen=True)
class ColdRead:
    """The ticks of ``plan`` (its range narrowed to the sealed partitions read) in the
    Parquet ``objects`` (oldest first), after position ``after``, at most ``limit``."""

    plan: QueryPlan
    objects: tuple[str, ...]
    after: Position | None = None
    limit: int | None = None
    stats: ReadStats | None = field(default=None, compare=False)


@dataclass(frozen=True)
class TieredRead:
    """A read whose range meets the cold tier: its ``parts`` (Firestore's reads and the cold
    tier's, each of one stretch of the range, in the plan's order) read one after another,
    at most ``limit`` ticks in all."""

    plan: QueryPlan
    parts: tuple[TickRead | ColdRead, ...]
    limit: int | None = None


#: How a driver gets an object's bytes (``None``: there is none).
ObjectBytes = Callable[[str], bytes | None]


def cold_table(
    plan: QueryPlan, data: bytes, stats: ReadStats | None = None, *, after: Position | None = None
) -> pa.Table:
    """The rows of one sealed object in ``plan``'s time range (from the time of position
    ``after`` on, in the plan's direction), with the string equality and ``in`` filters
    applied: row groups ruled out by their statistics are not decoded."""
    reader = pq.ParquetFile(pa.BufferReader(data))
    names = set(reader.schema_arrow.names)
    field = plan.spec.timestamp_field
    wanted: Any = None
    since, until = plan.start, plan.end
    for bound, op in ((since, ">="), (until, "<"), (after and after[0], "<=" if plan.descending else ">=")):
        if bound is not None:
            wanted = _and(wanted, _compare(pc.field(field), op, pa.scalar(bound, pa.timestamp("us", tz="UTC"))))
    for f in plan.filters:
        if f.field not in names:
            return reader.schema_arrow.empty_table()
        if all(isinstance(v, str) for v in f.values) and pa.types.is_string(_type(reader, f.field)):
            wanted = _and(wanted, pc.field(f.field).isin(list(f.values)))
    table = pq.read_table(pa.BufferReader(data), filters=wanted) if wanted is not None else reader.read()
    if stats is not None:
        stats.object_read(len(data))
    return table


def _compare(left: Any, op: str, right: Any) -> Any:
    return {">=": left >= right, "<": left < right, "<=": left <= right}[op]


def _type(reader: pq.ParquetFile, name: str) -> pa.DataType:
    kind = reader.schema_arrow.field(name).type
    return pa.string() if pa.types.is_large_string(kind) else kind


def _and(left: Any, right: Any) -> Any:
    return right if left is None else left & right


def _kept(plan: QueryPlan, table: pa.Table) -> list[str]:
    """The columns of ``table`` a tick of ``plan`` holds (its projection's; the id's and the date's never)."""
    return [name for name in table.column_names
            if name not in (ID_COLUMN, "date") and (plan.columns is None or projected(name, plan.columns))]  # fmt: skip


class _Shape:
    """How a row's values become a tick's data: the plain fields (``flat``) and each map's
    leaves (by the map's name: their path in it, their place among the row's values, after
    the plain fields')."""

    def __init__(self, kept: Sequence[str]) -> None:
        self.flat = [name for name in kept if "." not in name]
        self.nested = [(name, name.split(".")) for name in kept if "." in name]
        self.maps: dict[str, list[tuple[list[str], int]]] = {}
        for at, (_, path) in enumerate(self.nested, start=len(self.flat)):
            self.maps.setdefault(path[0], []).append((path[1:], at))

    @property
    def names(self) -> list[str]:
        return self.flat + [name for name, _ in self.nested]

    def data(self, held: Sequence[Any]) -> dict[str, Any]:
        """The data of a row whose values are ``held`` (in :attr:`names` order): dotted columns
        nested again, a null left out."""
        data = {name: value for name, value in zip(self.flat, held) if value is not None}
        for head, leaves in self.maps.items():
            inner: dict[str, Any] = {}
            for path, at in leaves:
                if held[at] is not None:
                    _put(inner, path, held[at])
            if inner:
                data[head] = inner
        return data


def table_ticks(plan: QueryPlan, table: pa.Table, *, after: Position | None = None) -> Iterator[Tick]:
    """The rows of ``table`` (from :func:`cold_table`: by time, then id) that match every
    filter of ``plan`` and come after position ``after``, as ticks, in the plan's order: made
    one at a time as they are taken, unless range conditions reorder them (then all sorted)."""
    spec = plan.spec
    shape = _Shape(_kept(plan, table))
    stamps = _values(table.column(spec.timestamp_field))
    ids = table.column(ID_COLUMN).to_pylist()
    columns_of = [_values(table.column(name)) for name in shape.names]
    checks = [(f, _values(table.column(f.field)) if f.field in table.column_names else None)
              for f in (*plan.filters, *plan.ranges)]  # fmt: skip

    def made() -> Iterator[Tick]:
        rows = list(zip(range(len(ids)), ids, stamps, *columns_of))
        for row, doc_id, stamp, *held in reversed(rows) if plan.descending else rows:
            if checks and not all(_holds(f, None if of is None else of[row]) for f, of in checks):
                continue
            tick = Tick(doc_id, stamp, shape.data(held))
            if after is None or not _not_after(plan, tick, after):
                yield tick

    return iter(sorted(made(), key=plan.key, reverse=plan.descending)) if plan.ranges else made()


class SealedRows(RowSource):
    """The rows of a sealed object's table (:func:`cold_table`) that a plan takes whole (no
    filter left to check on them, no cursor), in its order, as :class:`~tsstore.frames.TableRow`
    ticks: a frame builder takes them from the columns; each tick's values are made from
    them when asked (the columns converted in bulk once, when first asked)."""

    def __init__(self, plan: QueryPlan, table: pa.Table) -> None:
        self.table = table[::-1] if plan.descending else table
        self.columns = tuple(_kept(plan, table))
        self._time = plan.spec.timestamp_field
        self._shape = _Shape(self.columns)
        self.columnar = True
        self._converted: dict[str, list[Any]] = {}

    def _column(self, name: str) -> list[Any]:
        values = self._converted.get(name)
        if values is None:
            column = self.table.column(name)
            values = self._converted[name] = column.to_pylist() if name == ID_COLUMN else _values(column)
        return values

    def id_of(self, row: int) -> str:
        value: str = self._column(ID_COLUMN)[row]
        return value

    def time_of(self, row: int) -> dt.datetime:
        value: dt.datetime = self._column(self._time)[row]
        return value

    def data_of(self, row: int) -> dict[str, Any]:
        return self._shape.data([self._column(name)[row] for name in self._shape.names])

    def values(self, name: str, start: int, stop: int) -> list[Any]:
        return self._column(name)[start:stop]


def taken_whole(plan: QueryPlan, table: pa.Table, after: Position | None) -> bool:
    """Whether :func:`cold_table` has applied every filter of ``plan`` to ``table``'s rows as
    Firestore would, so each row is a tick of the plan: no cursor, no range condition, each
    filter of strings on a column of strings (the time range is exact in Arrow too)."""
    if after is not None or plan.ranges:
        return False
    for f in plan.filters:
        if f.op not in ("==", "in") or f.field not in table.column_names or not all(isinstance(v, str) for v in f.values):
            return False
        kind = table.schema.field(f.field).type
        if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
            return False
    return True


def count_rows(plan: QueryPlan, data: bytes, stats: ReadStats | None = None) -> int:
    """How many rows of one sealed object (its bytes, ``data``) ``plan`` matches."""
    table = cold_table(plan, data, stats)
    if taken_whole(plan, table, None):  # every filter applied in Arrow already
        return int(table.num_rows)
    return sum(1 for _ in table_ticks(plan, table))


def cold_aggregates(
    plan: QueryPlan, data: bytes, requests: Sequence[tuple[str | None, Sequence[tuple[str, str, str | None]]]],
    stats: ReadStats | None = None,
) -> list[dict[str, Any]]:
    """What each of ``requests`` (the measure a query is also ordered by, and its ``(kind,
    alias, field)`` aggregations: ``count``, ``sum``, ``avg``) answers over the rows of one
    sealed object ``plan`` matches, as Firestore's aggregation query answers it: a request
    ordered by a measure counts the rows holding it; a sum adds the numbers (integers
    exactly), an average is theirs (``None`` without one)."""
    ticks = list(table_ticks(plan, cold_table(plan, data, stats)))
    answers = []
    for measure, asks in requests:
        held = ticks if measure is None else [t for t in ticks if get_path(t.data, measure.split(".")) is not None]
        answer: dict[str, Any] = {}
        for kind, alias, name in asks:
            numbers = [] if name is None else [v for t in held if _numeric(v := get_path(t.data, name.split(".")))]
            if kind == "count":
                answer[alias] = len(held)
            elif kind == "sum":
                answer[alias] = sum(numbers)
            else:
                answer[alias] = sum(numbers) / len(numbers) if numbers else None
        answers.append(answer)
    return answers


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def cold_ticks(read: ColdRead, fetch: ObjectBytes) -> Iterator[Tick]:
    """The ticks of ``read``, in its plan's order, each object fetched with ``fetch`` as the
    read comes to it (the objects are oldest first: newest first reads them backwards)."""
    plan, after = read.plan, read.after
    names: Sequence[str] = read.objects[::-1] if plan.descending else read.objects
    given = 0
    for name in names:
        table = cold_table(plan, present(name, fetch(name)), read.stats, after=after)
        if taken_whole(plan, table, after):  # each row a tick: a frame builder takes them from the columns
            rows = SealedRows(plan, table)
            ticks: Iterator[Tick] = (TableRow(rows, row) for row in range(rows.table.num_rows))
        else:
            ticks = table_ticks(plan, table, after=after)
        for tick in ticks:
            if read.limit is not None and given >= read.limit:
                return
            given += 1
            yield tick


def present(name: str, data: bytes | None) -> bytes:
    """The bytes of the object ``name`` the manifest names (``data``, as fetched); a
    :class:`~tsstore.errors.StateError` naming it when it is gone."""
    if data is None:
        raise StateError(f"the cold tier's object {name} is gone, though the manifest names it; "
                         "run tsstore seal --verify")  # fmt: skip
    return data


def _not_after(plan: QueryPlan, tick: Tick, after: Position) -> bool:
    key = plan.key(tick)
    return key <= after if not plan.descending else key >= after


def _values(column: pa.ChunkedArray) -> list[Any]:
    """A column's values as Python's (``None`` where null), times as aware datetimes in
    ``datetime.timezone.utc`` as Firestore's are; converted in bulk (a value at a time is
    several times slower)."""
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    kind = array.type
    if pa.types.is_timestamp(kind):
        micros = array.cast(pa.timestamp("us")).cast(pa.int64()).fill_null(0).to_numpy().tolist()
        values: list[Any] = [_EPOCH + dt.timedelta(microseconds=v) for v in micros]
    elif pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind):
        values = array.fill_null(False if pa.types.is_boolean(kind) else 0).to_numpy(zero_copy_only=False).tolist()
    elif pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return list(array.to_numpy(zero_copy_only=False).tolist())
    else:
        return list(array.to_pylist())
    if array.null_count:
        for at in np.flatnonzero(array.is_null().to_numpy(zero_copy_only=False)).tolist():
            values[at] = None
    return values


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def _put(data: dict[str, Any], path: list[str], value: Any) -> None:
    if len(path) == 1:
        data[path[0]] = value
        return
    target = data
    for part in path[:-1]:
        target = target.setdefault(part, {})
    target[path[-1]] = value


def _holds(f: Filter, value: Any) -> bool:
    """Whether a document whose field holds ``value`` (``None``: missing, or null) matches
    filter ``f`` as Firestore decides."""
    if f.op in ("==", "in"):
        return value is not None and any(_same(value, v) for v in f.values)
    if value is None:
        return False
    if f.op == "!=":
        return not _same(value, f.values[0])
    bound = f.values[0]
    if _bracket(value) != _bracket(bound) or _nan(value) or _nan(bound):
        return False
    mine, theirs = Ordered(value), Ordered(bound)
    return {"<": mine < theirs, "<=": mine <= theirs, ">": mine > theirs, ">=": mine >= theirs}[f.op]


def _same(value: Any, wanted: Any) -> bool:
    return _bracket(value) == _bracket(wanted) and Ordered(value) == Ordered(wanted)


def _bracket(value: Any) -> str:
    """The kind of value Firestore compares a range condition within."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, dt.datetime):
        return "time"
    return type(value).__name__


def _nan(value: Any) -> bool:
    return isinstance(value, float) and value != value
