"""DataFrames from ticks, and records from DataFrames.

A frame has one row per tick in query order, a tz-aware UTC ``DatetimeIndex`` named after
the timestamp field, and one column per leaf field with nested maps flattened to dotted
names (``price.currency``). A read that projects ``columns`` gets those columns only (a
map's name brings its leaves); tsstore's own shard field is left out unless they name it.
Columns are built directly as lists in one pass over the ticks; no per-row ``json_normalize``.

Dtypes (declared columns use their declared type; others are inferred from the values):

=========== ====================== ================================
type        pandas dtype           missing value
=========== ====================== ================================
string      ``string``             ``<NA>``
Int64       ``Int64``              ``<NA>``
Float64     ``Float64``            ``<NA>``
boolean     ``boolean``            ``<NA>``
datetime    ``datetime64[us, UTC]`` ``NaT``
object      ``object``             ``None``
=========== ====================== ================================
"""

from __future__ import annotations

import datetime as dt
from collections.abc import AsyncIterator, Collection, Iterable, Iterator, Mapping
from typing import Any

import pandas as pd

from tsstore.errors import QueryError, SchemaError
from tsstore.spec import SeriesSpec
from tsstore.ticks import Tick

#: The pandas dtype of each declared column type.
DTYPES = {
    "string": "string",
    "Int64": "Int64",
    "Float64": "Float64",
    "boolean": "boolean",
    "datetime": "datetime64[us, UTC]",
    "object": "object",
}


def _projected(name: str, columns: Collection[str]) -> bool:
    return any(name == c or name.startswith(c + ".") for c in columns)


def ticks_to_frame(spec: SeriesSpec, ticks: Iterable[Tick], *, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """One DataFrame of ``ticks``, in their order, of the projected ``columns`` if given
    (see the module doc for the schema)."""
    builder = FrameBuilder(spec, columns=columns)
    for tick in ticks:
        builder.add(tick)
    return builder.frame()


class FrameBuilder:
    """Ticks in (:meth:`add`, as they stream), one DataFrame out (:meth:`frame`): columns are
    built as lists in one pass, no tick is kept."""

    def __init__(self, spec: SeriesSpec, *, columns: Iterable[str] | None = None) -> None:
        self._spec, self._projection = spec, None if columns is None else tuple(columns)
        self._index: list[dt.datetime] = []
        self._columns: dict[str, list[Any]] = {}

    def add(self, tick: Tick) -> None:
        _flatten_into(tick.data, "", self._columns, len(self._index))
        self._index.append(tick.timestamp)

    def frame(self) -> pd.DataFrame:
        spec, columns, row = self._spec, self._columns, len(self._index)
        projection = self._projection
        columns.pop(spec.timestamp_field, None)
        if projection is None or spec.shard_field not in projection:
            columns.pop(spec.shard_field, None)
        for values in columns.values():
            if len(values) < row:
                values.extend([None] * (row - len(values)))
        data: dict[str, Any] = {}
        declared = [(name, columns.pop(name, [None] * row), kind) for name, kind in spec.columns]
        others = [(name, columns[name], _infer(columns[name])) for name in sorted(columns)]
        for name, values, kind in declared + others:
            if projection is None or _projected(name, projection):
                data[name] = _series(name, values, kind)
        index = pd.DatetimeIndex(pd.to_datetime(self._index, utc=True), name=spec.timestamp_field).as_unit("us")
        return pd.DataFrame(data, index=index)


def check_frame_rows(rows: object) -> None:
    """Refuse a frame size that is not a positive integer, naming it."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise QueryError(f"rows {rows!r} is not allowed; give a positive integer")


class FrameBatcher:
    """Ticks in, a frame out every ``rows`` ticks (:meth:`add`) and for the rest (:meth:`rest`)."""

    def __init__(self, spec: SeriesSpec, rows: int, *, columns: Iterable[str] | None = None) -> None:
        check_frame_rows(rows)
        self._spec, self._rows = spec, rows
        self._columns = None if columns is None else tuple(columns)
        self._batch: list[Tick] = []

    def add(self, tick: Tick) -> pd.DataFrame | None:
        self._batch.append(tick)
        return self.rest() if len(self._batch) == self._rows else None

    def rest(self) -> pd.DataFrame | None:
        batch, self._batch = self._batch, []
        return ticks_to_frame(self._spec, batch, columns=self._columns) if batch else None


def frames(
    spec: SeriesSpec, ticks: Iterable[Tick], *, rows: int, columns: Iterable[str] | None = None
) -> Iterator[pd.DataFrame]:
    """Frames of at most ``rows`` ticks each, built as the ticks arrive (bounded memory)."""
    batcher = FrameBatcher(spec, rows, columns=columns)
    for frame in map(batcher.add, ticks):
        if frame is not None:
            yield frame
    last = batcher.rest()
    if last is not None:
        yield last


async def aframes(
    spec: SeriesSpec, ticks: AsyncIterator[Tick], *, rows: int, columns: Iterable[str] | None = None
) -> AsyncIterator[pd.DataFrame]:
    """:func:`frames` of an async stream of ticks."""
    batcher = FrameBatcher(spec, rows, columns=columns)
    async for tick in ticks:
        if (frame := batcher.add(tick)) is not None:
            yield frame
    if (frame := batcher.rest()) is not None:
        yield frame


def _flatten_into(data: Mapping[str, Any], prefix: str, columns: dict[str, list[Any]], row: int) -> None:
    for key, value in data.items():
        name = prefix + key
        if type(value) is dict and value:
            _flatten_into(value, name + ".", columns, row)
            continue
        column = columns.get(name)
        if column is None:
            column = columns[name] = [None] * row
        elif len(column) < row:
            column.extend([None] * (row - len(column)))
        column.append(value)


def _infer(values: list[Any]) -> str:
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return "object"
    if kinds == {str}:
        return "string"
    if kinds == {bool}:
        return "boolean"
    if kinds == {int}:
        return "Int64"
    if kinds <= {int, float}:
        return "Float64"
    if all(issubclass(k, dt.datetime) for k in kinds):
        return "datetime"
    return "object"


def _series(name: str, values: list[Any], kind: str) -> pd.api.extensions.ExtensionArray | Any:
    dtype: Any = DTYPES[kind]
    if kind == "object":
        return pd.array(values, dtype=object)
    try:
        if kind == "datetime":
            return pd.array(pd.to_datetime(values, utc=True)).astype(dtype)
        return pd.array(values, dtype=dtype)
    except (TypeError, ValueError) as exc:
        bad = next((v for v in values if v is not None and not _fits(v, kind)), None)
        raise SchemaError(
            f"column {name!r} is declared {kind!r} but holds {type(bad).__name__} {bad!r}; "
            "change the declared type in the SeriesSpec or fix the stored data"
        ) from exc


def _fits(value: Any, kind: str) -> bool:
    return {
        "string": isinstance(value, str),
        "Int64": isinstance(value, int) and not isinstance(value, bool),
        "Float64": isinstance(value, (int, float)) and not isinstance(value, bool),
        "boolean": isinstance(value, bool),
        "datetime": isinstance(value, dt.datetime),
    }.get(kind, True)


def frame_to_records(spec: SeriesSpec, frame: pd.DataFrame) -> Iterator[dict[str, Any]]:
    """Records for the writer from a DataFrame: dotted columns become nested maps, missing
    values (NA, NaN, NaT, None) leave the field out, and a ``DatetimeIndex`` supplies the
    timestamp when the frame has no timestamp column."""
    ts_field = spec.timestamp_field
    use_index = ts_field not in frame.columns and isinstance(frame.index, pd.DatetimeIndex)
    names = [str(c) for c in frame.columns]
    paths = [n.split(".") for n in names]
    index_values = frame.index if use_index else None
    for pos, values in enumerate(frame.itertuples(index=False, name=None)):
        record: dict[str, Any] = {}
        if index_values is not None:
            record[ts_field] = index_values[pos]
        for path, value in zip(paths, values):
            if _is_missing(value):
                continue
            target = record
            for part in path[:-1]:
                target = target.setdefault(part, {})
            target[path[-1]] = value
        yield record


def _is_missing(value: Any) -> bool:
    if value is None or value is pd.NA or value is pd.NaT:
        return True
    if isinstance(value, float) and value != value:
        return True
    try:
        return bool(pd.isna(value)) if not isinstance(value, (list, dict, str, bytes)) else False
    except (TypeError, ValueError):
        return False
