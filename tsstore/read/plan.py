"""Query planning: validate a query against its spec and split the shards into chunks.

Pure logic, no Firestore calls. A sharded query becomes one Firestore query per chunk of
shard values, each ``shard in [chunk]`` plus the caller's filters, ordered by
``(timestamp, __name__)`` (with range conditions on value fields: ``(timestamp, the value
fields, __name__)``, the order Firestore gives such a query). A query of a series shape is
one query without a shard filter. Chunks are as large as Firestore's disjunction budget allows
once the caller's own ``in`` lists are multiplied in, so the plan costs as few queries
(and as few billed reads) as possible.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from tsstore.errors import CursorError, QueryError, SpecError
from tsstore.indexes.build import CompositeIndex, after_timestamp, required_index, shape_index
from tsstore.limits import MAX_DISJUNCTIONS, MAX_IN_VALUES, MAX_INDEXED_VALUE_BYTES, MAX_QUERY_LIMIT, indexed_size
from tsstore.read.cost import bills_index_entries, range_fields
from tsstore.read.query import Query, QueryOptions, Where
from tsstore.spec import Direction, QueryShape, SeriesSpec, check_field_path
from tsstore.ticks import Ordered, Position, Tick, get_path
from tsstore.times import to_utc

#: Operators a tsstore query accepts: equality and ``in`` on a shape's fields, and range
#: conditions (``RANGE_OPERATORS``) on its declared ``ranges``; why the others are refused.
EQUALITY_OPERATORS = ("==", "in")
RANGE_OPERATORS = ("<", "<=", ">", ">=", "!=")
ALLOWED_OPERATORS = EQUALITY_OPERATORS + RANGE_OPERATORS
_REFUSED_OPERATORS = {
    "not-in": "Firestore cannot combine 'not-in' with the shard 'in' filter",
    "not_in": "Firestore cannot combine 'not-in' with the shard 'in' filter",
    "array-contains": "array filters are not supported by tsstore queries",
    "array-contains-any": "array filters are not supported by tsstore queries",
}

#: The chunk of a series plan: no shard filter at all, so one query reads every shard value
#: (undeclared ones included) through the shape's index without the shard.
UNSHARDED: tuple[str, ...] = ()


@dataclass(frozen=True)
class Filter:
    """``field == values[0]``, ``field in values``, or a range condition ``field op values[0]``
    (``op`` one of :data:`RANGE_OPERATORS`)."""

    field: str
    op: str
    values: tuple[Any, ...]

    @property
    def disjunctions(self) -> int:
        return len(self.values) if self.op == "in" else 1

    @property
    def is_range(self) -> bool:
        return self.op in RANGE_OPERATORS

    def describe(self) -> str:
        return (
            f"{self.field} in {list(self.values)!r}"
            if self.op == "in"
            else f"{self.field} {self.op} {self.values[0]!r}"
        )


@dataclass(frozen=True)
class QueryPlan:
    """Everything the store needs to run one query: its chunk queries (``chunks``; a series
    plan has one, :data:`UNSHARDED`), the filters and range, the order and the index."""

    #: The declaration the query was planned against.
    spec: SeriesSpec
    #: The equality and ``in`` filters on value fields.
    filters: tuple[Filter, ...]
    start: dt.datetime | None
    end: dt.datetime | None
    direction: Direction
    limit: int | None
    columns: tuple[str, ...] | None
    #: The shard values of each chunk query, each within the disjunction budget.
    chunks: tuple[tuple[str, ...], ...]
    #: The composite index that serves every chunk query.
    index: CompositeIndex
    #: The query as asked: its cursor and read_time are the run's, not the plan's.
    query: Query
    #: Retired shard values that hold nothing from ``start`` on, left out of the chunks.
    skipped: tuple[str, ...] = ()
    #: The range conditions on value fields, sorted by field.
    ranges: tuple[Filter, ...] = ()
    #: The declared query shape that serves the query.
    shape: QueryShape = QueryShape(())

    @property
    def descending(self) -> bool:
        return self.direction is Direction.DESC

    @property
    def series(self) -> bool:
        """Read as one series: one query without a shard filter (see :class:`QueryShape`)."""
        return self.shape.series

    @property
    def range_fields(self) -> tuple[str, ...]:
        """The range fields of each chunk query, as Firestore bills index entries
        (:func:`~tsstore.read.cost.range_fields`): the timestamp when bounded, the value
        fields of range conditions, the timestamp again as their order. The document-id
        tie-break is left out: it is Firestore's own last order of every query (whether a
        project is billed for it is checked with Query Explain, see the query-cost page)."""
        return range_fields(*self._range_and_order())

    @property
    def index_billed(self) -> bool:
        """Whether each chunk query is billed its index entries on top of its documents (two or
        more range fields: a range condition on a value field)."""
        return bills_index_entries(*self._range_and_order())

    def _range_and_order(self) -> tuple[list[str], tuple[str, ...]]:
        """The fields each chunk query filters by range, and those it orders by (the id left out)."""
        timestamp = self.spec.timestamp_field
        bounded = [timestamp] if self.start is not None or self.end is not None else []
        return [*bounded, *(f.field for f in self.ranges)], (timestamp, *self.order_fields)

    @property
    def order_fields(self) -> tuple[str, ...]:
        """The value fields the server orders by after the timestamp and before the document
        id: the range-filtered ones, sorted (Firestore orders by every range field)."""
        return after_timestamp(f.field for f in self.ranges)

    def key(self, tick: Tick) -> Position:
        """Where ``tick`` stands in the query's order: (timestamp, the order fields' values in
        Firestore's order of values, document id). The merge and cursors use it.

        - ``tick``: a tick this query read"""
        if not self.ranges:
            return (tick.timestamp, tick.id)
        return (tick.timestamp, *(Ordered(get_path(tick.data, f.split("."))) for f in self.order_fields), tick.id)


def normalize_where(where: Where) -> tuple[Filter, ...]:
    """Turn a mapping (``{field: value}``; a list or set value means ``in``) or a sequence of
    ``(field, op, value)`` triples into filters, validating operators, ``in`` lists and the
    size of each value (Firestore compares at most :data:`~tsstore.limits.MAX_INDEXED_VALUE_BYTES`).
    A field takes one equality or ``in`` filter, or any number of range conditions (at most
    one ``!=`` in the query, as Firestore allows)."""
    filters: list[Filter] = []
    equal: set[str] = set()
    ranged: set[str] = set()
    for field, op, value in _triples(where):
        _check_operator(field, op)
        if field in equal or (field in ranged and op in EQUALITY_OPERATORS):
            raise QueryError(
                f"field {field!r} is filtered twice; combine equality values into one 'in' filter "
                "(range conditions may repeat a field, equality may not join them)"
            )
        (equal if op in EQUALITY_OPERATORS else ranged).add(field)
        made = Filter(field, "in", _in_values(field, value)) if op == "in" else _compared(field, op, value)
        _check_sizes(made)
        filters.append(made)
    if sum(f.op == "!=" for f in filters) > 1:
        raise QueryError("Firestore allows one '!=' filter per query; keep one and filter the rest after reading")
    return tuple(sorted(filters, key=lambda f: (f.field, f.op, repr(f.values))))


def _triples(where: Where) -> list[tuple[str, str, Any]]:
    """``where`` as ``(field, operator, value)`` triples (a mapping's list value means ``in``)."""
    if where is None:
        return []
    if isinstance(where, (str, bytes)) or not isinstance(where, (Mapping, Iterable)):
        raise QueryError(
            f"where={where!r} is not allowed; give a mapping {{field: value}} or a list of (field, op, value) triples"
        )
    if isinstance(where, Mapping):
        for k, v in where.items():
            if isinstance(v, tuple):
                raise QueryError(
                    f"where={{{k!r}: {v!r}}}: a tuple in a where mapping could be an operator and a value or "
                    f"the values of 'in'; write [({k!r}, op, value)] for a condition, or a list for 'in' "
                    f"({{{k!r}: {list(v)!r}}})"
                )
        return [(k, "in" if isinstance(v, (list, set, frozenset)) else "==", v) for k, v in where.items()]
    triples = []
    for item in where:
        if not isinstance(item, (tuple, list)) or len(item) != 3:
            raise QueryError(f"filter {item!r} is not a (field, operator, value) triple")
        triples.append((item[0], item[1], item[2]))
    return triples


def _check_operator(field: str, op: str) -> None:
    """Refuse a field that is no field path and an operator tsstore does not serve."""
    try:
        check_field_path(field, what="filter field")
    except SpecError as exc:
        raise QueryError(str(exc)) from None
    if op not in ALLOWED_OPERATORS:
        why = _REFUSED_OPERATORS.get(op, "unknown operator")
        allowed = ", ".join(ALLOWED_OPERATORS)
        raise QueryError(f"operator {op!r} on {field!r} is not allowed ({why}); allowed: {allowed}")


def _in_values(field: str, value: object) -> tuple[Any, ...]:
    """An ``in`` filter's values: a list of 1 to 30 distinct values (repeats dropped)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise QueryError(f"'in' on {field!r} needs a list of values, got {value!r}")
    values = tuple(dict.fromkeys(value))
    if not values:
        raise QueryError(f"'in' on {field!r} has no values; give 1 to {MAX_IN_VALUES}")
    if len(values) > MAX_IN_VALUES:
        raise QueryError(f"'in' on {field!r} has {len(values)} values; Firestore allows at most {MAX_IN_VALUES}")
    return values


def _check_sizes(f: Filter) -> None:
    """Refuse a text or bytes value larger than Firestore compares in a query (it refuses the
    query in both database modes), naming the field and the size."""
    for value in f.values:
        size = indexed_size(value)
        if size is not None and size > MAX_INDEXED_VALUE_BYTES:
            counted = "as Firestore counts a text (its UTF-8 bytes and one)" if isinstance(value, str) else "long"
            raise QueryError(
                f"filter on {f.field!r}: the {type(value).__name__} value {value!r:.30}... is {size} bytes {counted}; "
                f"Firestore compares indexed values of at most {MAX_INDEXED_VALUE_BYTES} bytes in a query, so no "
                "filter finds a longer one"
            )


def _compared(field: str, op: str, value: Any) -> Filter:
    """An equality or range filter: a range condition compares with one value, never a list,
    a map, null (but ``!= None``) or NaN."""
    if op in RANGE_OPERATORS and (
        isinstance(value, (list, tuple, set, frozenset, Mapping)) or (value is None and op != "!=")
    ):
        raise QueryError(f"{field} {op} {value!r}: a range condition compares with one value (not null)")
    if op in ("<", "<=", ">", ">=") and isinstance(value, float) and math.isnan(value):
        raise QueryError(
            f"{field} {op} nan: Firestore takes no NaN as a range bound (NaN orders before every number); give a number"
        )
    return Filter(field, op, (value,))


def check_own_fields(spec: SeriesSpec, filters: Iterable[Filter]) -> None:
    """Refuse a filter on the fields tsstore fills itself: the shard (the planner chooses the
    shard values a read covers) and the timestamp (a read's range is ``start``/``end``)."""
    for f in filters:
        if f.field == spec.shard_field:
            raise QueryError(
                f"filter {f.describe()}: {f.field!r} is tsstore's shard field, chosen by tsstore when it writes; "
                "the query planner already covers every shard value of the declaration, so filter on the "
                "series' own fields (store.shard_census() counts the ticks per shard value)"
            )
        if f.field == spec.timestamp_field:
            raise QueryError(
                f"filter {f.describe()}: {f.field!r} is the series' time field; give the time range as start= "
                "(inclusive) and end= (exclusive) instead"
            )


#: What a value of each declared column type is in Python (``object``: anything).
_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    "Int64": ((int, float), "a number"),
    "Float64": ((int, float), "a number"),
    "string": ((str,), "a string"),
    "boolean": ((bool,), "True or False"),
    "datetime": ((dt.datetime,), "a datetime"),
}


def check_value_types(spec: SeriesSpec, filters: Iterable[Filter]) -> None:
    """Refuse a filter value of another type than the field's declared column: Firestore
    compares values of one type only, so ``volume >= "1000"`` on an Int64 field matches
    nothing instead of failing (a number of either kind is fine on a numeric field)."""
    declared = dict(spec.columns)
    for f in filters:
        kind = declared.get(f.field)
        if kind not in _KINDS:
            continue
        allowed, what = _KINDS[kind]
        for value in f.values:
            wrong = not isinstance(value, allowed) or (isinstance(value, bool) and kind != "boolean")
            if value is not None and wrong:
                shown = f"{f.field} in {list(f.values)!r}" if f.op == "in" else f"{f.field} {f.op} {value!r}"
                raise QueryError(
                    f"{shown}: {f.field!r} is declared {kind}, and Firestore matches no {kind} value with the "
                    f"{type(value).__name__} {value!r}; give {what}"
                )


def chunk_size(filters: Sequence[Filter]) -> int:
    """Largest shard chunk the disjunction budget leaves after the caller's own ``in`` lists."""
    product = math.prod(f.disjunctions for f in filters)
    budget = MAX_DISJUNCTIONS // product
    if budget < 1:
        detail = " x ".join(f"{f.field} in [{len(f.values)}]" for f in filters if f.op == "in")
        raise QueryError(
            f"filters {detail} expand to {product} disjunctions per shard; Firestore allows at most "
            f"{MAX_DISJUNCTIONS} per query, so shorten the 'in' lists"
        )
    return min(budget, MAX_IN_VALUES)


def chunk_shards(shards: Sequence[str], size: int) -> tuple[tuple[str, ...], ...]:
    """Split ``shards`` into the fewest chunks of at most ``size``, as even as possible.

    Even chunks (40 shards at size 30 → 20 + 20, not 30 + 10) keep the concurrent chunk
    queries similar in cost, so none finishes long after the others.
    """
    if size < 1:
        raise ValueError(f"chunk size {size} must be at least 1")
    count = math.ceil(len(shards) / size)
    base, extra = divmod(len(shards), count)
    chunks: list[tuple[str, ...]] = []
    pos = 0
    for i in range(count):
        n = base + (1 if i < extra else 0)
        chunks.append(tuple(shards[pos : pos + n]))
        pos += n
    return tuple(chunks)


def check_index(
    spec: SeriesSpec, fields: Iterable[str], direction: Direction, *, ranges: Iterable[str] = ()
) -> tuple[CompositeIndex, QueryShape]:
    """The declared shape a query with equality/``in`` filters on ``fields`` and range
    conditions on ``ranges`` in ``direction`` is, and the composite index serving it; or a
    :class:`QueryError` naming the shape and the index it needs. This is the index check the
    emulator does not do; it asks :func:`~tsstore.indexes.build.required_index`, as the
    generator does."""
    key, ranged = tuple(sorted(fields)), tuple(sorted(set(ranges)))
    unknown = sorted((set(key) | set(ranged)) - spec.filter_fields)
    if unknown:
        declared = sorted(spec.filter_fields) or "none"
        index = required_index(spec, key, direction, ranges=ranged)
        raise QueryError(
            f"filter on undeclared field(s) {unknown!r}; fields declared in query shapes: {declared}. Declare "
            f"{spec.shape_advice(key, ranged)} (Firestore serves it with the composite index {index.describe()}), "
            "regenerate the indexes and deploy them"
        )
    unranged = sorted(set(ranged) - {f for shape in spec.shapes for f in shape.ranges})
    if unranged:
        raise QueryError(
            f"range condition on {unranged!r}: no query shape declares {'it' if len(unranged) == 1 else 'them'} "
            f"in its ranges; declare e.g. {spec.shape_advice(key, ranged)}, regenerate the "
            "indexes and deploy them (the index holds range fields after the timestamp)"
        )
    for shape in spec.all_shapes():
        if shape.key != (key, ranged):
            continue
        needed = shape_index(spec, shape, direction)
        if direction in shape.directions:
            return needed, shape
        raise QueryError(
            f"query shape {shape.describe()} is not declared for direction {direction.value!r}: it needs the "
            f"composite index {needed.describe()}; declare the direction, regenerate the indexes and deploy them"
        )
    needed = required_index(spec, key, direction, ranges=ranged)

    def name(fields: tuple[str, ...], ranges: tuple[str, ...]) -> str:
        return f"[{', '.join(fields) or '(time range)'}]" + (f" ranges [{', '.join(ranges)}]" if ranges else "")

    declared_shapes = "; ".join(name(*s.key) for s in spec.all_shapes())
    raise QueryError(
        f"query shape {name(key, ranged)} is not declared (declared: {declared_shapes}); Firestore would refuse "
        f"it without the index {needed.describe()}: declare the shape, regenerate the indexes and deploy them"
    )


def plan_query(
    spec: SeriesSpec,
    query: Query | None = None,
    /,
    *,
    max_chunk: int | None = None,
    **options: Unpack[QueryOptions],
) -> QueryPlan:
    """Validate a query (a :class:`~tsstore.read.query.Query`, or its fields as keyword
    options) and plan its shard chunks.

    ``start`` is inclusive and ``end`` exclusive (``[start, end)``); both must be aware
    times.

    - ``spec``: the declaration the query must fit (a declared shape, declared fields)
    - ``max_chunk``: caps the chunk size below the disjunction budget (for measurements)
    """
    q = Query.of(query, options)
    every = normalize_where(q.where)
    check_own_fields(spec, every)
    check_value_types(spec, every)
    filters = tuple(f for f in every if not f.is_range)
    ranges = tuple(f for f in every if f.is_range)
    try:
        direction = Direction.parse(q.direction)
    except SpecError as exc:
        raise QueryError(str(exc)) from None
    index, shape = check_index(spec, (f.field for f in filters), direction, ranges=(f.field for f in ranges))
    start, end = time_range(q.start, q.end)
    _check_run_options(q)
    size = chunk_size(filters) if max_chunk is None else max(1, min(chunk_size(filters), max_chunk))
    shards, skipped = spec.shards_from(start)
    return QueryPlan(
        spec=spec,
        filters=filters,
        start=start,
        end=end,
        direction=direction,
        limit=_checked_limit(q.limit),
        columns=_projection(spec, q.columns, ranges),
        chunks=(UNSHARDED,) if shape.series else chunk_shards(shards, size),
        index=index,
        query=q,
        skipped=() if shape.series else skipped,
        ranges=ranges,
        shape=shape,
    )


def time_range(start: object, end: object) -> tuple[dt.datetime | None, dt.datetime | None]:
    """``[start, end)`` as UTC times, not empty."""
    try:
        start_t = None if start is None else to_utc(start, name="start")
        end_t = None if end is None else to_utc(end, name="end")
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    if start_t is not None and end_t is not None and start_t >= end_t:
        raise QueryError(f"empty time range: start {start_t.isoformat()} is not before end {end_t.isoformat()}")
    return start_t, end_t


def _check_run_options(q: Query) -> None:
    """Refuse a ``read_time`` that is not an aware time and a ``cursor`` that is not text,
    before anything is read (a cursor's content is checked against the plan when read)."""
    read_time = q.read_time
    if read_time is not None and (not isinstance(read_time, dt.datetime) or read_time.utcoffset() is None):
        raise QueryError(
            f"read_time {read_time!r} is not allowed; give a timezone-aware datetime within the last hour "
            "(seven days with point-in-time recovery), or None"
        )
    if q.cursor is not None and not isinstance(q.cursor, str):
        raise CursorError(f"cursor {q.cursor!r} is not allowed; give the cursor text of a page (page.cursor), or None")


def _checked_limit(limit: object) -> int | None:
    if limit is not None and (
        isinstance(limit, bool) or not isinstance(limit, int) or not 0 < limit <= MAX_QUERY_LIMIT
    ):
        raise QueryError(
            f"limit {limit!r} is not allowed; give an integer from 1 to {MAX_QUERY_LIMIT}, or None for no limit"
        )
    return limit


def _projection(
    spec: SeriesSpec, columns: str | Iterable[str] | None, ranges: tuple[Filter, ...]
) -> tuple[str, ...] | None:
    """The fields a projected read asks for: the timestamp and the range-filtered fields are
    always read (the merge and the cursor need them), then the columns asked for."""
    if columns is None:
        return None
    if not isinstance(columns, Iterable):
        raise QueryError(f"columns={columns!r} is not allowed; give a list of field names, or None for every field")
    cols = []
    for c in (columns,) if isinstance(columns, str) else columns:
        try:
            cols.append(check_field_path(c, what="column"))
        except SpecError as exc:
            raise QueryError(str(exc)) from None
    return tuple(dict.fromkeys([spec.timestamp_field, *cols, *after_timestamp(f.field for f in ranges)]))


def oldest_first(spec: SeriesSpec, query: Query) -> QueryPlan:
    """The plan of ``query`` on ``spec`` oldest first where an index for that is declared,
    else newest first: for reads that take every match, whose order is only cosmetic."""
    try:
        return plan_query(spec, query, direction=Direction.ASC)
    except QueryError:
        return plan_query(spec, query, direction=Direction.DESC)
