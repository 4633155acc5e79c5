"""DataFrames from ticks, and records from DataFrames.

A frame has one row per tick in query order, a tz-aware UTC ``DatetimeIndex`` named after
the timestamp field, and one column per leaf field with nested maps flattened to dotted
names (``price.currency``). A read that projects ``columns`` gets those columns only (a
map's name brings its leaves); tsstore's own shard field is left out unless they name it.
Columns are built in one pass over the ticks (no per-row ``json_normalize``), a chunk of
rows at a time: the Python objects of one chunk are turned into arrays before the next
(:class:`FrameBuilder`), and from a column's second chunk on, those of numbers, flags, times
and (in Arrow) strings go on into one growing buffer per column that becomes the column
without a copy; the frame is the one a build from lists of all the values gives.

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
from array import array as MachineArray
from collections.abc import AsyncIterator, Collection, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TypeAlias

import numpy as np
import pandas as pd
import pyarrow as pa

from tsstore.errors import ConfigError, QueryError, SchemaError
from tsstore.spec import SeriesSpec
from tsstore.ticks import Tick

if TYPE_CHECKING:
    import polars as pl

UTC = dt.timezone.utc

#: The Arrow type of each declared column type (of an ``object`` column: what Arrow makes of its values).
ARROW_TYPES = {
    "string": pa.large_string(),
    "Int64": pa.int64(),
    "Float64": pa.float64(),
    "boolean": pa.bool_(),
    "datetime": pa.timestamp("us", tz="UTC"),
}

#: The pandas dtype of each declared column type.
DTYPES = {
    "string": "string",
    "Int64": "Int64",
    "Float64": "Float64",
    "boolean": "boolean",
    "datetime": "datetime64[us, UTC]",
    "object": "object",
}


def projected(name: str, columns: Collection[str]) -> bool:
    """Whether column ``name`` is among ``columns`` (a map's name brings its leaves)."""
    return any(name == c or name.startswith(c + ".") for c in columns)


def ticks_to_frame(spec: SeriesSpec, ticks: Iterable[Tick], *, columns: Iterable[str] | None = None) -> pd.DataFrame:
    """One DataFrame of ticks, in their order, with the columns, types and index
    :meth:`~tsstore.TimeSeriesStore.query_frame` gives for the same ticks (the schema is in
    :mod:`tsstore.frames`).

    - ``spec``: the series the ticks are of (its declared columns and timestamp field)
    - ``ticks``: a :class:`~tsstore.Page`, or any :class:`~tsstore.Tick` of that series
    - ``columns``: only these fields (with their subfields), as the query's ``columns``"""
    builder = FrameBuilder(spec, columns=columns)
    for tick in ticks:
        builder.add(tick)
    return builder.frame()


#: Rows a :class:`FrameBuilder` holds as Python objects before it turns them into arrays.
CHUNK_ROWS = 4096
_INDEX = ""  # the timestamps' name among a builder's runs (no field is named "")


class Rows(NamedTuple):
    """A column's rows ``[start, stop)`` of its :class:`Run`."""

    start: int
    stop: int


class Typed(NamedTuple):
    """A column's chunk as an array of type ``kind``."""

    kind: str
    array: Any


#: A column's rows of one chunk or more: an array, the values themselves (a list), that
#: many missing values (an int), or rows of its run.
Part = Typed | list[Any] | int | Rows

#: The column types a :class:`Run` holds, with the machine type of a value (of a string:
#: where its UTF-8 bytes end).
_RUN_TYPES = {"Int64": "q", "Float64": "d", "boolean": "b", "datetime": "q", "string": "q"}
_NAT = np.iinfo(np.int64).min  # a missing time in a datetime run (numpy's NaT)


class Run:
    """A column's values of one type (:data:`_RUN_TYPES`) end to end in machine buffers that
    grow in place: the values (8 bytes each, 1 for a flag; a time in microseconds; a string
    as its UTF-8 bytes and where they end, Arrow's layout) and a byte per row that says it is
    missing. The whole run becomes the column's array without a copy (times: one copy, to
    make them UTC), so a column is not held twice, as chunk arrays and their join, when the
    frame is made, nor spread over an array per chunk. Strings go in a run only where
    pandas keeps them in Arrow (its default with pyarrow installed)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._values = MachineArray(_RUN_TYPES[kind], [0] if kind == "string" else [])
        self._text = bytearray()  # a string run's UTF-8 bytes
        self._missing = bytearray()

    @staticmethod
    def takes(kind: str, typed: Any) -> bool:
        """Whether a run holds a column of type ``kind`` with arrays like ``typed``."""
        return kind in _RUN_TYPES and (kind != "string" or isinstance(typed, pd.arrays.ArrowStringArray))

    def __len__(self) -> int:
        return len(self._missing)

    def add(self, typed: Any) -> Rows:
        """Append a pandas array of the run's type; the rows it took."""
        start, missing = len(self), np.asarray(typed.isna(), dtype=np.bool_)
        if self.kind == "string":
            chunk = pa.array(typed, type=pa.large_string())
            _, ends, text = chunk.buffers()
            offsets = np.frombuffer(ends, dtype=np.int64)[chunk.offset : chunk.offset + len(chunk) + 1]
            values = offsets[1:] - offsets[0] + len(self._text)
            if text is not None and offsets[-1] > offsets[0]:
                self._text += memoryview(text)[offsets[0] : offsets[-1]]
        elif self.kind == "datetime":
            values = np.asarray(typed.asi8, dtype=np.int64)
        else:
            values = typed.to_numpy(dtype=np.dtype(self._values.typecode), na_value=0)
        self._values.frombytes(np.ascontiguousarray(values).tobytes())
        self._missing += missing.tobytes()
        return Rows(start, len(self))

    def add_missing(self, rows: int) -> Rows:
        start = len(self)
        fill = {"datetime": _NAT, "string": self._values[-1] if self._values else 0}.get(self.kind, 0)
        self._values.extend(MachineArray(self._values.typecode, [fill]) * rows)
        self._missing.extend(b"\x01" * rows)
        return Rows(start, len(self))

    def array(self, rows: Rows | None = None) -> Any:
        """The pandas array of the whole run (sharing its buffers) or of ``rows`` (a copy)."""
        values = np.frombuffer(self._values, dtype=self._values.typecode)
        missing = np.frombuffer(self._missing, dtype=np.bool_)
        if self.kind == "string":
            text: Any = self._text
            if rows is not None:
                values = values[rows.start : rows.stop + 1]
                text, values = bytes(text[values[0] : values[-1]]), values - values[0]
                missing = missing[rows.start : rows.stop]
            valid = pa.py_buffer(np.packbits(~missing, bitorder="little"))
            strings = pa.LargeStringArray.from_buffers(
                len(missing), pa.py_buffer(values), pa.py_buffer(text), valid, int(missing.sum())
            )
            return pd.arrays.ArrowStringArray(pa.chunked_array([strings]))
        if rows is not None:
            values, missing = values[rows.start : rows.stop].copy(), missing[rows.start : rows.stop].copy()
        if self.kind == "Int64":
            return pd.arrays.IntegerArray(values, missing, copy=False)
        if self.kind == "Float64":
            return pd.arrays.FloatingArray(values, missing, copy=False)
        if self.kind == "boolean":
            return pd.arrays.BooleanArray(values.view(np.bool_), missing, copy=False)
        return pd.array(values.view("datetime64[us]"), copy=False).tz_localize("UTC")


class RowSource:
    """Rows of an Arrow table that stream as ticks (:class:`TableRow`), a sealed object's:
    ``table`` holds them in order, ``columns`` the names of the fields a tick of them holds
    (dotted names for a map's leaves; null where the document had no such field), ``columns``
    of a type :func:`_arrow_part` takes as they are when ``columnar``; a subclass says what
    each row is as a tick."""

    table: pa.Table
    columns: tuple[str, ...]
    columnar: bool

    def id_of(self, row: int) -> str:
        raise NotImplementedError

    def time_of(self, row: int) -> dt.datetime:
        raise NotImplementedError

    def data_of(self, row: int) -> dict[str, Any]:
        raise NotImplementedError

    def values(self, name: str, start: int, stop: int) -> list[Any]:
        """The values of column ``name`` in rows ``[start, stop)`` as ticks hold them (``None``: no such field)."""
        raise NotImplementedError


class TableRow(Tick):
    """Row ``row`` of ``source`` as a tick: its id, time and data made when asked. A
    :class:`FrameBuilder` takes consecutive rows of one source from the table's columns
    instead (no tick's data is made). Equal to the :class:`Tick` of the same values; pickled
    as one."""

    __slots__ = ("source", "row")
    source: RowSource
    row: int

    def __init__(self, source: RowSource, row: int) -> None:  # not Tick's: the fields are made when asked
        object.__setattr__(self, "source", source)
        object.__setattr__(self, "row", row)

    @property
    def id(self) -> str:
        return self.source.id_of(self.row)

    @property
    def timestamp(self) -> dt.datetime:
        return self.source.time_of(self.row)

    @property
    def data(self) -> dict[str, Any]:
        return self.source.data_of(self.row)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Tick):
            return NotImplemented
        return (self.id, self.timestamp, self.data) == (other.id, other.timestamp, other.data)

    __hash__ = Tick.__hash__

    def __repr__(self) -> str:
        return repr(Tick(self.id, self.timestamp, self.data))

    def __reduce__(self) -> tuple[type[Tick], tuple[str, dt.datetime, dict[str, Any]]]:
        return Tick, (self.id, self.timestamp, self.data)


class FrameBuilder:
    """Ticks in (:meth:`add`, as they stream), one DataFrame out (:meth:`frame`): no tick
    is kept. The values of ``chunk_rows`` rows at a time are collected as lists, one per
    column; then each chunk of a column becomes an array when the array gives back the very
    values it was made from (:func:`_part`), so that whatever type the whole column turns out
    to have, it gets the values a build from one list of all its values would; from the
    second chunk on, such arrays of numbers, flags, times or (in Arrow) strings go on into
    the column's :class:`Run`.
    :meth:`frame` converts each column's chunks to the column's type and joins them, one
    column at a time; a column that is one run is its run's array, not a copy. So the
    Python objects of about one chunk are alive at a time, not those of every row, and each
    column's values are held once."""

    def __init__(
        self, spec: SeriesSpec, *, columns: Iterable[str] | None = None, chunk_rows: int = CHUNK_ROWS, shard: bool = False
    ) -> None:
        check_frame_rows(chunk_rows, name="chunk_rows")
        self._shard = shard  # the shard field a column even when columns do not name it (a sealed partition's)
        self._spec, self._projection = spec, None if columns is None else tuple(columns)
        self._chunk_rows = chunk_rows
        self._declared = dict(spec.columns)
        self._done = 0  # rows of the chunks converted
        self._index: list[dt.datetime] = []  # this chunk's timestamps
        self._chunk: dict[str, list[Any]] = {}  # this chunk's values, by column
        self._stamps: list[Part] = []  # the converted chunks' timestamps, kept as a column's (named _INDEX)
        self._parts: dict[str, list[Part]] = {}  # the converted chunks of each column the frame holds
        self._runs: dict[str, Run] = {}  # each such column's run, once a chunk of it fits one
        self._kinds: dict[str, set[type]] = {}  # the types of each such column's values
        self._misfits: set[str] = set()  # declared columns holding a value that does not fit
        self._holds: dict[str, bool] = {}
        self._source: RowSource | None = None  # the table whose rows [_start, _stop) come next
        self._start = self._stop = 0

    def add(self, tick: Tick) -> None:
        if type(tick) is TableRow:  # a row of a table: taken from its columns with the rows after it
            if tick.source is self._source and tick.row == self._stop:
                self._stop += 1
                return
            self._take_rows()
            if tick.source.columnar:
                self._source, self._start, self._stop = tick.source, tick.row, tick.row + 1
                return
        elif self._source is not None:
            self._take_rows()
        _flatten_into(tick.data, "", self._chunk, len(self._index))
        self._index.append(tick.timestamp)
        if len(self._index) == self._chunk_rows:
            self._convert_chunk()

    def _take_rows(self) -> None:
        """The rows of a table added last (after the ticks before them), each column's a chunk
        of the frame as :meth:`_convert_chunk` makes one of ticks: an array of the column's
        values as they are (:func:`_arrow_part`), missing rows, or its values as ticks hold
        them."""
        source, start, stop = self._source, self._start, self._stop
        self._source = None
        if source is None or stop == start:
            return
        self._convert_chunk()
        rows, table, taken = stop - start, source.table.slice(start, stop - start), set()
        for name in source.columns:
            if not self._holds_column(name):
                continue
            column = table.column(name)
            if column.null_count == rows:  # as no tick of them holds the field
                continue
            declared = self._declared.get(name)
            kinds, typed = _arrow_part(column, declared)
            part: Part
            if typed is None:
                values = source.values(name, start, stop)
                kinds = set(map(type, values))
                kinds.discard(type(None))
                part = _part(values, kinds, declared)
            else:
                part = typed
            self._kinds.setdefault(name, set()).update(kinds)
            if declared is not None and not all(_fits(k, declared) for k in kinds):
                self._misfits.add(name)
            self._store(name, self._parts.setdefault(name, [self._done] if self._done else []), part)
            taken.add(name)
        for name, parts in self._parts.items():
            if name not in taken:
                self._store(name, parts, rows)
        stamps = _arrow_part(table.column(self._spec.timestamp_field), "datetime")[1]
        self._store(_INDEX, self._stamps, stamps or Typed("datetime", _typed([source.time_of(r) for r in
                                                                              range(start, stop)], "datetime")))
        self._done += rows

    def frame(self) -> pd.DataFrame:
        """The DataFrame of the ticks added (the builder is empty afterwards)."""
        index, data = self._columns()
        return pd.DataFrame(data, index=pd.DatetimeIndex(index, name=self._spec.timestamp_field), copy=False)

    def table(self) -> pa.Table:
        """The same columns as an Arrow table (the builder is empty afterwards): the timestamp
        first (``timestamp[us, tz=UTC]``, named after the timestamp field), then the frame's
        columns in the frame's order, each the frame's array handed to Arrow (strings,
        numbers, flags and times without a copy of their values; see :data:`ARROW_TYPES`)."""
        index, data = self._columns()
        arrays = {self._spec.timestamp_field: _arrow(self._spec.timestamp_field, index)}
        for name in list(data):
            arrays[name] = _arrow(name, data.pop(name))
        return pa.table(arrays)

    def _columns(self) -> tuple[Any, dict[str, Any]]:
        """The timestamps and each column, as pandas arrays, built from the chunks (see the class doc)."""
        self._take_rows()
        self._convert_chunk()
        projection, declared = self._projection, self._declared
        data: dict[str, Any] = {}
        for name in [*declared, *sorted(name for name in self._parts if name not in declared)]:
            if projection is None or projected(name, projection):
                kind = declared.get(name) or _infer(self._kinds.get(name, set()))
                parts = self._parts.pop(name, [self._done])
                data[name] = _column(name, parts, kind, self._runs.pop(name, None), whole=name in self._misfits)
        stamps, self._stamps = self._stamps, []
        return _column(_INDEX, stamps, "datetime", self._runs.pop(_INDEX, None), whole=False), data

    def _holds_column(self, name: str) -> bool:
        """Whether the frame has a column ``name`` (else its values are dropped as they come)."""
        holds = self._holds.get(name)
        if holds is None:
            spec, projection = self._spec, self._projection
            shard_left_out = not self._shard and (projection is None or spec.shard_field not in projection)
            holds = self._holds[name] = (
                name != spec.timestamp_field
                and not (name == spec.shard_field and shard_left_out)
                and (projection is None or projected(name, projection))
            )
        return holds

    def _convert_chunk(self) -> None:
        rows = len(self._index)
        if not rows:
            return
        chunk, self._chunk = self._chunk, {}
        for name, values in chunk.items():
            if not self._holds_column(name):
                continue
            if len(values) < rows:
                values.extend([None] * (rows - len(values)))
            kinds = set(map(type, values))
            kinds.discard(type(None))
            self._kinds.setdefault(name, set()).update(kinds)
            declared = self._declared.get(name)
            if declared is not None and not all(_fits(k, declared) for k in kinds):
                self._misfits.add(name)
            parts = self._parts.setdefault(name, [self._done] if self._done else [])
            self._store(name, parts, _part(values, kinds, declared))
        for name, parts in self._parts.items():
            if name not in chunk:
                self._store(name, parts, rows)
        self._store(_INDEX, self._stamps, Typed("datetime", pd.to_datetime(self._index, utc=True).as_unit("us").array))
        self._index = []
        self._done += rows

    def _store(self, name: str, parts: list[Part], part: Part) -> None:
        """Keep a chunk of a column. A column's first chunk stays as it is (a frame of one chunk
        has nothing to join); from the second on, an array of a run's type starts the column's
        run, with the chunks before it when they are arrays of that type or missing rows, and
        the run takes such chunks and missing rows after it."""
        run = self._runs.get(name)
        if run is None and isinstance(part, Typed) and self._done and Run.takes(*part):
            if all(isinstance(p, int) or (isinstance(p, Typed) and p.kind == part.kind) for p in parts):
                run = self._runs[name] = Run(part.kind)
                earlier, parts[:] = parts[:], []
                for p in earlier:
                    _append(parts, run, p)
        if run is None:
            parts.append(part)
        else:
            _append(parts, run, part)


def _append(parts: list[Part], run: Run, part: Part) -> None:
    """Add a chunk to a column that has ``run``: into the run when it is missing rows or an
    array of the run's type; rows of the run that follow each other become one part."""
    if isinstance(part, int):
        part = run.add_missing(part)
    elif isinstance(part, Typed) and part.kind == run.kind:
        part = run.add(part.array)
    if isinstance(part, Rows) and parts and isinstance(last := parts[-1], Rows) and last.stop == part.start:
        parts.pop()
        part = Rows(last.start, part.stop)
    parts.append(part)


def polars_frame(table: pa.Table) -> pl.DataFrame:
    """A Polars DataFrame of an Arrow table (its buffers shared, not copied); Polars is an
    extra: ``pip install 'tsstore[polars]'``."""
    try:
        import polars as pl
    except ImportError as exc:
        raise ConfigError("Polars frames need polars, which is not installed: pip install 'tsstore[polars]'") from exc
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def check_frame_rows(rows: object, *, name: str = "rows") -> None:
    """Refuse a frame size (``name``) that is not a positive integer, naming it."""
    if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
        raise QueryError(f"{name} {rows!r} is not allowed; give a positive integer")


#: What a batcher gives: a DataFrame, or an Arrow record batch.
Batch: TypeAlias = "pd.DataFrame | pa.RecordBatch"


class FrameBatcher:
    """Ticks in, a frame out every ``rows`` ticks (:meth:`add`) and for the rest (:meth:`rest`);
    with ``arrow``, record batches of the same columns."""

    def __init__(
        self, spec: SeriesSpec, rows: int, *, columns: Iterable[str] | None = None, arrow: bool = False
    ) -> None:
        check_frame_rows(rows)
        self._spec, self._rows, self._arrow = spec, rows, arrow
        self._columns = None if columns is None else tuple(columns)
        self._batch: list[Tick] = []

    def add(self, tick: Tick) -> Batch | None:
        self._batch.append(tick)
        return self.rest() if len(self._batch) == self._rows else None

    def rest(self) -> Batch | None:
        batch, self._batch = self._batch, []
        if not batch:
            return None
        builder = FrameBuilder(self._spec, columns=self._columns)
        for tick in batch:
            builder.add(tick)
        if not self._arrow:
            return builder.frame()
        (record,) = builder.table().combine_chunks().to_batches()
        return record


def frames(
    spec: SeriesSpec, ticks: Iterable[Tick], *, rows: int, columns: Iterable[str] | None = None, arrow: bool = False
) -> Iterator[Batch]:
    """Frames (record batches, with ``arrow``) of at most ``rows`` ticks each, built as the
    ticks arrive (bounded memory)."""
    batcher = FrameBatcher(spec, rows, columns=columns, arrow=arrow)
    for frame in map(batcher.add, ticks):
        if frame is not None:
            yield frame
    last = batcher.rest()
    if last is not None:
        yield last


async def aframes(
    spec: SeriesSpec,
    ticks: AsyncIterator[Tick],
    *,
    rows: int,
    columns: Iterable[str] | None = None,
    arrow: bool = False,
) -> AsyncIterator[Batch]:
    """:func:`frames` of an async stream of ticks."""
    batcher = FrameBatcher(spec, rows, columns=columns, arrow=arrow)
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


def _infer(kinds: set[type]) -> str:
    """The type of a column whose values are of these types (missing values left out)."""
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


#: The types of value whose arrays give them back as they were (see :func:`_part`).
_ROUND_TRIPS = {str: "string", int: "Int64", bool: "boolean", float: "Float64", dt.datetime: "datetime"}


def _part(values: list[Any], kinds: set[type], declared: str | None) -> Part:
    """One chunk of a column as an array when that array gives back exactly ``values``: all
    of one type of :data:`_ROUND_TRIPS` (no subclass), floats without NaN (missing in an
    array, a float in an ``object`` column), datetimes in ``datetime.timezone.utc``; and, in
    a column declared of another type, ints of a ``Float64`` one. The others stay lists:
    they are converted with the column (:func:`_column`)."""
    if not kinds:
        return len(values)
    kind = _ROUND_TRIPS.get(next(iter(kinds))) if len(kinds) == 1 else None
    if kind is None or (declared not in (None, kind) and (kind, declared) != ("Int64", "Float64")):
        return values
    if kind == "datetime" and any(v is not None and v.tzinfo is not UTC for v in values):
        return values
    try:
        typed = _typed(values, kind)
    except (TypeError, ValueError, OverflowError):
        return values  # converted with the column, which raises as a build from one list does
    if kind == "Float64" and int(typed.isna().sum()) != values.count(None):
        return values
    return Typed(kind, typed)


def _arrow_part(column: pa.ChunkedArray, declared: str | None) -> tuple[set[type], Typed | None]:
    """A chunk of a column from an Arrow column of rows as :func:`_part` makes it from the
    values their ticks hold, and those values' types, without making the values: Arrow's
    integers, floats without NaN, flags, strings and UTC times, in a column declared of
    their type or of none (integers: or ``Float64``). ``None`` for the rest (made from the
    values)."""
    kind_of = column.type
    python: type
    if pa.types.is_integer(kind_of):
        kind, python = "Int64", int
    elif pa.types.is_floating(kind_of):
        kind, python = "Float64", float
    elif pa.types.is_boolean(kind_of):
        kind, python = "boolean", bool
    elif pa.types.is_string(kind_of) or pa.types.is_large_string(kind_of):
        kind, python = "string", str
    elif pa.types.is_timestamp(kind_of) and kind_of.tz in ("UTC", "+00:00"):
        kind, python = "datetime", dt.datetime
    else:
        return set(), None
    if declared not in (None, kind) and (kind, declared) != ("Int64", "Float64"):
        return set(), None
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    missing = array.is_null().to_numpy(zero_copy_only=False)
    if kind == "string":
        if pa.types.is_string(kind_of):
            array = array.cast(pa.large_string())
        typed: Any = pd.StringDtype("pyarrow").__from_arrow__(pa.chunked_array([array]))
        if not isinstance(typed, pd.arrays.ArrowStringArray):
            return set(), None
    elif kind == "datetime":
        micros = array.cast(pa.timestamp("us", tz=kind_of.tz)).cast(pa.int64()).fill_null(_NAT).to_numpy()
        typed = pd.array(micros.view("datetime64[us]"), copy=False).tz_localize("UTC")
    elif kind == "boolean":
        typed = pd.arrays.BooleanArray(array.fill_null(False).to_numpy(zero_copy_only=False), missing)
    elif kind == "Int64":
        typed = pd.arrays.IntegerArray(array.cast(pa.int64()).fill_null(0).to_numpy(), missing)
    else:
        values = array.cast(pa.float64()).fill_null(0.0).to_numpy()
        if np.isnan(values).any():  # a NaN is a float in a tick's values, missing in an array
            return set(), None
        typed = pd.arrays.FloatingArray(values, missing)
    return ({python} if len(array) > array.null_count else set()), Typed(kind, typed)


def _column(name: str, parts: list[Part], kind: str, run: Run | None, *, whole: bool) -> Any:
    """One column of type ``kind`` from its chunks (of them, rows of ``run``), in order, each
    freed once converted; the run itself when it is the whole column; ``whole``: from one
    list of all its values (a declared column holding a value that does not fit it: what
    pandas makes of such values can depend on all of them)."""
    if run is not None and run.kind == kind and not whole and parts == [Rows(0, len(run))]:
        return run.array()
    if whole:
        values = [v for n in range(len(parts)) for v in _values(_taken(parts, n), run)]
        try:
            return _typed(values, kind)
        except (TypeError, ValueError, OverflowError) as exc:
            raise _schema_error(name, kind, values) from exc
    arrays = []
    for n in range(len(parts)):
        part = _taken(parts, n)
        if isinstance(part, int):
            arrays.append(_typed([None] * part, kind))
        elif isinstance(part, Rows):
            assert run is not None
            arrays.append(run.array(part) if run.kind == kind else _typed(_values(part, run), kind))
        elif isinstance(part, list):
            try:
                arrays.append(_typed(part, kind))
            except (TypeError, ValueError, OverflowError) as exc:  # every value fits: a failure is pandas'
                raise _schema_error(name, kind, part) from exc
        else:
            was, array = part
            arrays.append(array if was == kind else _typed(_values(part, run), kind))
    return _concat(arrays) if arrays else _typed([], kind)


def _taken(parts: list[Part], n: int) -> Part:
    """``parts[n]``, dropped from ``parts`` (so that it is freed once its caller is done with it)."""
    part, parts[n] = parts[n], 0
    return part


def _values(part: Part, run: Run | None) -> list[Any]:
    """The values a chunk (or rows of ``run``) was made from (see :func:`_part`)."""
    if isinstance(part, int):
        return [None] * part
    if isinstance(part, list):
        return part
    if isinstance(part, Rows):
        assert run is not None
        kind, array = run.kind, run.array(part)
    else:
        kind, array = part
    if kind == "datetime":
        return [None if v is pd.NaT else v.to_pydatetime() for v in array]
    values: list[Any] = array.to_numpy(dtype=object, na_value=None).tolist()
    return values


def _arrow(name: str, array: Any) -> pa.Array | pa.ChunkedArray:
    """A column's pandas array as Arrow's (see :data:`ARROW_TYPES`); an ``object`` column
    whose values Arrow cannot hold in one type is refused, naming the column."""
    if isinstance(array, pd.arrays.DatetimeArray):  # UTC microseconds, as the builder makes them
        return pa.array(array.asi8, type=ARROW_TYPES["datetime"], mask=np.asarray(array.isna()))
    try:
        converted: pa.Array | pa.ChunkedArray = pa.array(array, from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError) as exc:
        kinds = sorted({type(v).__name__ for v in array if v is not None})
        raise SchemaError(
            f"column {name!r} holds values of {', '.join(kinds)} that no one Arrow type holds ({exc}); "
            "declare its type in the SeriesSpec, leave it out with columns=[...], or read a DataFrame"
        ) from exc
    return converted


def _concat(arrays: list[Any]) -> Any:
    return arrays[0] if len(arrays) == 1 else type(arrays[0])._concat_same_type(arrays)


def _fits(kind_of_value: type, kind: str) -> bool:
    """Whether a value of type ``kind_of_value`` fits a column of type ``kind``."""
    if issubclass(kind_of_value, bool):
        return kind in ("boolean", "object")
    return {
        "string": issubclass(kind_of_value, str),
        "Int64": issubclass(kind_of_value, int),
        "Float64": issubclass(kind_of_value, (int, float)),
        "boolean": False,
        "datetime": issubclass(kind_of_value, dt.datetime),
    }.get(kind, True)


def _typed(values: list[Any], kind: str) -> Any:
    """``values`` as an array of type ``kind`` (raises TypeError or ValueError where pandas
    cannot make one)."""
    if kind == "object":
        return pd.array(values, dtype=object)
    if kind == "datetime":
        return pd.array(pd.to_datetime(values, utc=True)).astype(DTYPES[kind])
    with np.errstate(invalid="ignore"):  # an int beyond int64 is pandas' TypeError, not numpy's warning too
        return pd.array(values, dtype=DTYPES[kind])


#: The range of an Int64 column (and of Firestore's integers).
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _schema_error(name: str, kind: str, values: list[Any]) -> SchemaError:
    """The error of a column whose values do not convert to its type, naming the first that does not fit."""
    beyond = next((v for v in values if kind == "Int64" and type(v) is int and not INT64_MIN <= v <= INT64_MAX), None)
    if beyond is not None:
        return SchemaError(
            f"column {name!r} holds the integer {beyond}, beyond Int64's range ({INT64_MIN} to {INT64_MAX}, "
            "the range of Firestore's integers); fix the data, or declare the column 'object' to keep it as it is"
        )
    bad = next((v for v in values if v is not None and not _fits(type(v), kind)), None)
    return SchemaError(
        f"column {name!r} is declared {kind!r} but holds {type(bad).__name__} {bad!r}; "
        "change the declared type in the SeriesSpec or fix the stored data"
    )


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
