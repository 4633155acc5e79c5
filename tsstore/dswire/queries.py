"""The queries tsstore sends to Firestore in Datastore mode, built as raw ``Query`` protobufs
from the same plan the Native queries come from (:mod:`tsstore.read.chunks`,
:mod:`tsstore.layout.census`): pure, no call.

A collection path ``kind`` is a kind; ``parent/id/kind`` is the kind under the ancestor key
``parent/id`` (a roll-up's marks, a counter's shards).

Datastore mode has no "start after these values": its cursors are opaque bytes of one query.
A chunk continued after a position ``(timestamp, *range values, id)`` is therefore read as a
few queries one after the other (:func:`continued`), each the chunk's query with the position's
leading order values held equal and the next one strictly beyond it: first the ticks at the
same timestamp (and values) with a greater id, then the same timestamp with a value beyond,
then the timestamps beyond. They are disjoint and, read in that order, give exactly the ticks
after the position in the query's order; the first ones usually match nothing (ties are rare)
and bill one read each. Unlike an ``OR`` filter, this adds nothing to the 30-disjunction budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.cloud.datastore_v1.types import query as query_types

from tsstore.census_asks import Ask, CountAll, CountValue, FirstValue
from tsstore.dswire.kinds import EVERYTHING, NOTHING, Condition, Variant, position
from tsstore.dswire.values import encode_value, key
from tsstore.indexes.build import SHARD_ORDER, after_timestamp
from tsstore.read.plan import UNSHARDED, QueryPlan, plan_query
from tsstore.spec import SeriesSpec
from tsstore.ticks import Position

QUERY_PB = query_types.Query.pb()
_OP = query_types.PropertyFilter.Operator
OPERATORS = {
    "==": _OP.EQUAL, "in": _OP.IN, "<": _OP.LESS_THAN, "<=": _OP.LESS_THAN_OR_EQUAL, ">": _OP.GREATER_THAN,
    ">=": _OP.GREATER_THAN_OR_EQUAL, "!=": _OP.NOT_EQUAL, "not-in": _OP.NOT_IN,
}  # fmt: skip
ASCENDING, DESCENDING = query_types.PropertyOrder.Direction.ASCENDING, query_types.PropertyOrder.Direction.DESCENDING
KEY = "__key__"


def collection_query(where: Any, collection: str) -> tuple[Any, list[Condition]]:
    """A query of ``collection`` (a kind, or ``parent/id/kind``) and the condition that keeps
    it under its parent (none for a top-level kind)."""
    query = QUERY_PB()
    *parent, kind = collection.split("/")
    query.kind.add().name = kind
    return query, ([("__ancestor__", "has", "/".join(parent))] if parent else [])


def build(where: Any, query: Any, conditions: Sequence[Condition]) -> Any:
    """``query`` with ``conditions`` ANDed as its filter."""
    made = []
    for name, op, value in conditions:
        condition = query_types.Filter.pb()()
        prop = condition.property_filter
        if op == "has":
            prop.property.name, prop.op = KEY, _OP.HAS_ANCESTOR
            prop.value.key_value.CopyFrom(key(where, value))
        else:
            prop.property.name, prop.op = name, OPERATORS[op]
            if name == KEY:
                prop.value.key_value.CopyFrom(key(where, value))
            else:
                encode_value(list(value) if op in ("in", "not-in") else value, prop.value)
                prop.value.exclude_from_indexes = False
        made.append(condition)
    if len(made) == 1:
        query.filter.CopyFrom(made[0])
    elif made:
        composite = query.filter.composite_filter
        composite.op = query_types.CompositeFilter.Operator.AND
        composite.filters.extend(made)
    return query


def order(query: Any, fields: Sequence[str], direction: Any) -> Any:
    for field in fields:
        added = query.order.add()
        added.property.name, added.direction = field, direction
    return query


def _chunk_conditions(plan: QueryPlan, chunk: tuple[str, ...], variant: Variant | None) -> list[Condition]:
    """The chunk's conditions: its shard values, its value filters (as they are, or a
    variant's: :mod:`tsstore.dswire.kinds`) and the time range."""
    spec = plan.spec
    conditions: list[Condition] = []
    if chunk != UNSHARDED:
        conditions.append((spec.shard_field, "in", chunk))
    if variant is None:
        filters = (*plan.filters, *plan.ranges)
        conditions += [(f.field, f.op, f.values if f.op == "in" else f.values[0]) for f in filters]
    else:
        conditions += variant.conditions
    if plan.start is not None:
        conditions.append((spec.timestamp_field, ">=", plan.start))
    if plan.end is not None:
        conditions.append((spec.timestamp_field, "<", plan.end))
    return conditions


def chunk_query(
    where: Any, plan: QueryPlan, chunk: tuple[str, ...], *, also_by: str | None = None, variant: Variant | None = None
) -> Any:
    """The Datastore-mode twin of :func:`tsstore.read.chunks.chunk_query` without a position
    or a limit: ``shard IN chunk`` and the plan's conditions, ordered by (timestamp, the
    range-filtered fields, key) in the plan's direction. Projected columns are not in it: a
    read asks them as the request's property mask (a projection query would drop entities that
    lack a column)."""
    spec = plan.spec
    query = find_query(where, spec.collection, _chunk_conditions(plan, chunk, variant))
    direction = DESCENDING if plan.descending else ASCENDING
    return order(query, [spec.timestamp_field, *after_timestamp(plan.order_fields, also_by), KEY], direction)


def continued(
    where: Any, plan: QueryPlan, chunk: tuple[str, ...], after: Position, *, variant: Variant | None = None
) -> list[Any]:
    """The chunk's ticks after ``after`` (a :meth:`~tsstore.read.plan.QueryPlan.key`), as
    the queries that read them in order (see the module's docstring); a ``variant``'s
    position on a range field is translated into its kind (:func:`~tsstore.dswire.kinds.position`)."""
    spec = plan.spec
    names = [spec.timestamp_field, *plan.order_fields, KEY]
    at = [after[0], *(ordered.raw for ordered in after[1:-1]), f"{spec.collection}/{after[-1]}"]
    kinds = dict(variant.kinds) if variant is not None else {}
    direction = DESCENDING if plan.descending else ASCENDING
    base = _chunk_conditions(plan, chunk, variant)

    def at_level(name: str, value: Any, *, held: bool) -> list[Condition] | None:
        if name not in kinds:
            return [(name, "==", value)] if held else [(name, "<" if plan.descending else ">", value)]
        made = position(value, kinds[name], held=held, descending=plan.descending)
        if made == NOTHING:
            return None
        return [] if made == EVERYTHING else [(name, made[1], made[2])]

    made = []
    for level in range(len(names) - 1, -1, -1):  # the id beyond first, the timestamp beyond last
        parts = [at_level(name, value, held=True) for name, value in zip(names[:level], at[:level])]
        parts.append(at_level(names[level], at[level], held=False))
        if any(part is None for part in parts):
            continue  # nothing of this variant's kinds stands there
        query = find_query(where, spec.collection, [*base, *(c for part in parts if part is not None for c in part)])
        made.append(order(query, names[level:], direction))
    return made


def census_query(where: Any, spec: SeriesSpec, ask: Ask) -> Any:
    """The Datastore-mode twin of :func:`tsstore.layout.census.census_query`."""
    if isinstance(ask, CountAll):
        return collection_query(where, spec.collection)[0]
    if isinstance(ask, CountValue):
        return chunk_query(where, plan_query(spec, start=ask.since), (ask.value,))
    conditions: list[Condition] = []
    if ask.low is not None:
        conditions.append((spec.shard_field, ">", ask.low))
    if ask.high is not None:
        conditions.append((spec.shard_field, "<", ask.high))
    query = find_query(where, spec.collection, conditions)
    shard_order = DESCENDING if SHARD_ORDER == "DESCENDING" else ASCENDING
    order(query, [spec.shard_field], shard_order)
    order(query, [spec.timestamp_field], DESCENDING)
    if isinstance(ask, FirstValue):
        query.limit.value = 1
    return query


def find_query(where: Any, collection: str, conditions: Sequence[Condition]) -> Any:
    """The documents of ``collection`` meeting ``conditions`` (a :class:`~tsstore.asks.FindDocs`,
    and every query above)."""
    query, parent = collection_query(where, collection)
    return build(where, query, [*parent, *conditions])
