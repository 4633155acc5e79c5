"""``ReadTicks``: a range of a sharded collection read by many workers at one snapshot.

The read is the store's own plan (:func:`~tsstore.read.plan.plan_query`: filters, shard
chunks, the index check), cut into independent *units*, each one shard chunk over one time
slice, so workers read in parallel. One step picks the snapshot (``read_time``: the
caller's, or the server's time when the pipeline runs), finds the range's bounds where the
caller left them open (the oldest and newest tick), and counts the range (one ``count()``
per chunk, a read per 1 000 index entries) to cut it into slices of about ``unit_ticks``
ticks; every unit then streams its chunk's query over its slice at that snapshot
(:meth:`TimeSeriesStore.stream_chunk <tsstore.store.TimeSeriesStore.stream_chunk>`, which
resumes after a transient error). Units do not overlap and together cover the range, so
every tick comes out exactly once, in no particular order.

Rows are dicts: ``document_id``, the timestamp field (an aware UTC datetime), then the
declared columns (or the ``columns`` asked for), named as in ``query_frame`` (dotted paths),
``None`` where a tick has no value. :func:`arrow_schema` is their schema for Beam's
Parquet sink. With ``schema=True`` they are ``beam.Row`` objects with a Beam schema
(:func:`beam_schema`: dots become underscores, times are Beam ``Timestamp`` values), for
schema-aware transforms and sinks such as BigQuery's.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Optional

import apache_beam as beam
from apache_beam.metrics import Metrics
from apache_beam.typehints.row_type import RowTypeConstraint
from apache_beam.utils.timestamp import Timestamp

from tsstore.beam.outputs import METRICS
from tsstore.beam.target import Target
from tsstore.errors import QueryError, SpecError
from tsstore.read.cost import ReadStats
from tsstore.read.plan import QueryPlan, plan_query
from tsstore.spec import Direction, SeriesSpec
from tsstore.ticks import Tick, get_path

#: The column holding each row's document id.
ID_COLUMN = "document_id"
#: Ticks a unit reads, about: small enough to spread a range over many workers, large
#: enough that a unit's query costs little beside its documents.
DEFAULT_UNIT_TICKS = 50_000

_ARROW_TYPES = {"string": "string", "Int64": "int64", "Float64": "float64", "boolean": "bool_"}


class Unit(NamedTuple):
    """One chunk's query over ``[start, end)`` at ``read_time``."""

    chunk: tuple[str, ...]
    start: dt.datetime
    end: dt.datetime
    read_time: dt.datetime


def read_plan(spec: SeriesSpec, query: Mapping[str, Any]) -> QueryPlan:
    """The plan a read of ``query`` (where, start, end, columns) runs: oldest first where an
    index for that is declared, newest first otherwise (a unit's order does not matter)."""
    try:
        return plan_query(spec, direction=Direction.ASC, **query)
    except QueryError:
        return plan_query(spec, direction=Direction.DESC, **query)


def output_columns(spec: SeriesSpec, columns: Sequence[str] | None) -> list[tuple[str, str]]:
    """The row's columns after the id and timestamp: (name, type), declared types where known."""
    declared = dict(spec.columns)
    names = [name for name, _ in spec.columns] if columns is None else list(columns)
    return [(name, declared.get(name, "object")) for name in names if name != spec.timestamp_field]


def arrow_schema(spec: SeriesSpec, columns: Sequence[str] | None = None) -> Any:
    """The pyarrow schema of :class:`ReadTicks`' rows, for ``beam.io.WriteToParquet``.
    Columns of type ``object`` (or undeclared ones) have no fixed type and are refused."""
    import pyarrow as pa

    fields = [(ID_COLUMN, pa.string()), (spec.timestamp_field, pa.timestamp("us", tz="UTC"))]
    for name, kind in output_columns(spec, columns):
        if kind == "datetime":
            fields.append((name, pa.timestamp("us", tz="UTC")))
        elif kind in _ARROW_TYPES:
            fields.append((name, getattr(pa, _ARROW_TYPES[kind])()))
        else:
            raise SpecError(
                f"column {name!r} has no declared type (or is declared 'object'), so it has no Parquet type; "
                f"declare it in the spec's columns as one of {sorted(_ARROW_TYPES) + ['datetime']}"
            )
    return pa.schema(fields)


def schema_name(column: str) -> str:
    """A column's name in a Beam schema (and BigQuery): ``price.micros`` → ``price_micros``."""
    return column.replace(".", "_")


def beam_schema(spec: SeriesSpec, columns: Sequence[str] | None = None) -> Any:
    """The Beam schema of ``ReadTicks(schema=True)``'s rows: the id, the timestamp (a Beam
    ``Timestamp``), then each column, nullable. Columns of type ``object`` (or undeclared
    ones) and two columns with one schema name are refused, naming them."""
    kinds: dict[str, Any] = {"string": str, "Int64": int, "Float64": float, "boolean": bool, "datetime": Timestamp}
    fields: list[tuple[str, Any]] = [(ID_COLUMN, str), (schema_name(spec.timestamp_field), Timestamp)]
    named: dict[str, str] = {ID_COLUMN: ID_COLUMN, schema_name(spec.timestamp_field): spec.timestamp_field}
    for name, kind in output_columns(spec, columns):
        if kind not in kinds:
            raise SpecError(
                f"column {name!r} has no declared type (or is declared 'object'), so it has no Beam schema type; "
                f"declare it in the spec's columns as one of {sorted(kinds)}"
            )
        if schema_name(name) in named:
            raise SpecError(
                f"columns {named[schema_name(name)]!r} and {name!r} would both be {schema_name(name)!r} in a schema"
            )
        named[schema_name(name)] = name
        fields.append((schema_name(name), Optional[kinds[kind]]))
    return RowTypeConstraint.from_fields(fields)


def _as_schema_row(row: dict[str, Any]) -> Any:
    return beam.Row(
        **{schema_name(k): Timestamp.from_utc_datetime(v) if isinstance(v, dt.datetime) else v for k, v in row.items()}
    )


def slices(start: dt.datetime, end: dt.datetime, parts: int) -> list[tuple[dt.datetime, dt.datetime]]:
    """``[start, end)`` cut into ``parts`` adjacent slices of equal length (whole microseconds)."""
    span = (end - start) // dt.timedelta(microseconds=1)
    parts = max(1, min(parts, span))
    bounds = [start + dt.timedelta(microseconds=span * i // parts) for i in range(parts)] + [end]
    return list(zip(bounds[:-1], bounds[1:]))


def worker_store(spec: SeriesSpec, client: Any) -> Any:
    """The store a pipeline's worker reads and seals through: ``spec`` on ``client``, two
    reader threads (a worker runs beside others)."""
    from tsstore.store import TimeSeriesStore

    return TimeSeriesStore(client, spec, max_workers=2)


class _PlanUnits(beam.DoFn):
    def __init__(self, spec: SeriesSpec, target: Target, query: Mapping[str, Any], read_time: Any, unit_ticks: int):
        self._spec, self._target, self._query = spec, target, dict(query)
        self._read_time, self._unit_ticks = read_time, unit_ticks

    def setup(self) -> None:
        self._billed = Metrics.counter(METRICS, "billed_reads")

    def process(self, _: object) -> Iterator[Unit]:
        client = self._target.client()
        store = worker_store(self._spec, client)
        stats = ReadStats()
        try:
            yield from self._units(store, stats)
        finally:
            self._billed.inc(stats.billed_reads)
            store.close()
            client.close()

    def _units(self, store: Any, stats: ReadStats) -> Iterator[Unit]:
        read_time = self._read_time
        if read_time is None:
            read_time = store.server_time(stats=stats)  # reading a document that does not exist: one read
        bounds = {k: v for k, v in self._query.items() if k in ("where", "start", "end")}
        start, end = bounds["start"], bounds["end"]
        if start is None:
            start = self._edge(store, bounds, "asc", read_time, stats)
        if end is None:
            newest = self._edge(store, bounds, "desc", read_time, stats)
            end = None if newest is None else newest + dt.timedelta(microseconds=1)
        if start is None or end is None or start >= end:
            return  # nothing in the range
        plan = read_plan(self._spec, {**self._query, "start": start, "end": end})
        total = store.count(where=bounds["where"], start=start, end=end, read_time=read_time, stats=stats)
        parts = max(1, math.ceil(total / len(plan.chunks) / self._unit_ticks))
        for chunk in plan.chunks:
            for lo, hi in slices(start, end, parts):
                yield Unit(chunk, lo, hi, read_time)

    @staticmethod
    def _edge(store: Any, bounds: dict[str, Any], direction: str, read_time: Any, stats: ReadStats) -> Any:
        """The oldest (``asc``) or newest (``desc``) tick's time in ``bounds``; where no index
        serves that order, the earliest or latest time Firestore stores (every slice still
        covers the range; most of them are then empty)."""
        try:
            page = store.query(**bounds, limit=1, direction=direction, read_time=read_time)
        except QueryError:
            return dt.datetime.min.replace(tzinfo=dt.UTC) if direction == "asc" else _LATEST
        stats.billed_reads += page.stats.billed_reads
        return page.ticks[0].timestamp if page.ticks else None


#: The latest time Firestore stores, less the microsecond an exclusive end adds to it.
_LATEST = dt.datetime(9999, 12, 31, 23, 59, 59, 999998, tzinfo=dt.UTC)


class _ReadUnit(beam.DoFn):
    def __init__(self, spec: SeriesSpec, target: Target, query: Mapping[str, Any]) -> None:
        self._spec, self._target, self._query = spec, target, dict(query)
        self._columns = [(name, name.split(".")) for name, _ in output_columns(spec, query.get("columns"))]

    def setup(self) -> None:
        self._client = self._target.client()
        self._store = worker_store(self._spec, self._client)
        self._documents = Metrics.counter(METRICS, "documents_read")
        self._billed = Metrics.counter(METRICS, "billed_reads")
        self._units = Metrics.counter(METRICS, "units")

    def teardown(self) -> None:
        store = getattr(self, "_store", None)
        if store is not None:
            store.close()
            self._client.close()

    def process(self, unit: Unit) -> Iterator[dict[str, Any]]:
        plan = read_plan(self._spec, {**self._query, "start": unit.start, "end": unit.end})
        stats = ReadStats()
        self._units.inc()
        try:
            for tick in self._store.stream_chunk(plan, unit.chunk, read_time=unit.read_time, stats=stats):
                yield self.row(tick)
        finally:
            self._documents.inc(stats.documents)
            self._billed.inc(stats.billed_reads)

    def row(self, tick: Tick) -> dict[str, Any]:
        row: dict[str, Any] = {ID_COLUMN: tick.id, self._spec.timestamp_field: tick.timestamp}
        for name, path in self._columns:
            value = get_path(tick.data, path)
            row[name] = value
        return row


class ReadTicks(beam.PTransform[beam.pvalue.PBegin, beam.PCollection[Any]]):
    """The ticks of ``spec``'s collection matching ``where`` in ``[start, end)`` as rows
    (see the module doc; ``schema=True``: ``beam.Row`` objects of :func:`beam_schema`), read by
    units of one shard chunk × one time slice, all at one ``read_time``. The query is
    checked when the transform is made (filters, columns, the index serving it), before any
    worker starts."""

    def __init__(
        self,
        spec: SeriesSpec,
        *,
        target: Target,
        where: Any = None,
        start: Any = None,
        end: Any = None,
        columns: Sequence[str] | None = None,
        read_time: dt.datetime | None = None,
        unit_ticks: int = DEFAULT_UNIT_TICKS,
        schema: bool = False,
    ) -> None:
        super().__init__()
        if isinstance(unit_ticks, bool) or not isinstance(unit_ticks, int) or unit_ticks < 1:
            raise QueryError(f"unit_ticks {unit_ticks!r} is not allowed; give a positive integer")
        query: dict[str, Any] = {"where": where, "start": start, "end": end}
        if columns is not None:
            query["columns"] = tuple(columns)
        plan = read_plan(spec, query)  # refuses a bad query now, naming it
        query.update(start=plan.start, end=plan.end)  # as the planner parsed them
        self.spec, self.columns = spec, None if columns is None else tuple(columns)
        self._schema = beam_schema(spec, columns) if schema else None
        self._plan_units = _PlanUnits(spec, target, query, read_time, unit_ticks)
        self._read_unit = _ReadUnit(spec, target, query)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection[Any]:
        rows: beam.PCollection[Any] = (
            pbegin
            | "Start" >> beam.Create([None])
            | "PlanUnits" >> beam.ParDo(self._plan_units)
            | "Spread" >> beam.Reshuffle()
            | "ReadUnits" >> beam.ParDo(self._read_unit)
        )
        if self._schema is None:
            return rows
        schema_rows: beam.PCollection[Any] = rows | "SchemaRows" >> beam.Map(_as_schema_row).with_output_types(
            self._schema
        )
        return schema_rows
