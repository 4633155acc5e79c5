"""Each chunk's Firestore query, built the same way for the sync and the async client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from google.cloud.firestore_v1.base_collection import BaseCollectionReference
from google.cloud.firestore_v1.base_query import BaseQuery, FieldFilter
from google.cloud.firestore_v1.field_path import FieldPath

from tsstore.indexes.build import after_timestamp
from tsstore.read.plan import UNSHARDED, QueryPlan
from tsstore.spec import SeriesSpec
from tsstore.ticks import Position

Chunk = tuple[str, ...]


@dataclass(frozen=True)
class ChunkTicks:
    """The ticks of one chunk of ``plan`` (its shard values ``chunk``), as data: what a count
    or an aggregation runs over (:func:`chunk_query` builds it); ``also_by`` as there."""

    plan: QueryPlan
    chunk: Chunk
    also_by: str | None = None


def chunk_query(
    collection: BaseCollectionReference[Any],
    plan: QueryPlan,
    chunk: Chunk,
    after: Position | None,
    size: int | None,
    *,
    also_by: str | None = None,
) -> BaseQuery:
    """``shard in chunk`` (none for a series plan's :data:`~tsstore.read.plan.UNSHARDED`
    chunk) plus the plan's filters, range conditions and time range, ordered by (timestamp,
    the range-filtered value fields, document id) in the plan's direction, projected,
    continued after ``after`` (a :meth:`~tsstore.read.plan.QueryPlan.key`) and limited to
    ``size`` (``None``: no limit).

    Every field after the timestamp is named explicitly: Firestore orders a query with range
    filters by their fields after the explicit orders anyway, and refuses an explicit
    ``__name__`` before them, so naming them keeps the order known to the merge and cursors.

    ``also_by``: a measure to order by after the timestamp, so that the query's index holds it
    (Firestore's ``sum()`` and ``avg()`` read it there); only ticks holding it match."""
    spec: SeriesSpec = plan.spec
    query: Any = collection
    if chunk != UNSHARDED:
        query = query.where(filter=FieldFilter(spec.shard_field, "in", list(chunk)))
    for f in (*plan.filters, *plan.ranges):
        value = list(f.values) if f.op == "in" else f.values[0]
        query = query.where(filter=FieldFilter(f.field, f.op, value))
    if plan.start is not None:
        query = query.where(filter=FieldFilter(spec.timestamp_field, ">=", plan.start))
    if plan.end is not None:
        query = query.where(filter=FieldFilter(spec.timestamp_field, "<", plan.end))
    order = "DESCENDING" if plan.descending else "ASCENDING"
    query = query.order_by(spec.timestamp_field, direction=order)
    for field in after_timestamp(plan.order_fields, also_by):
        query = query.order_by(field, direction=order)
    query = query.order_by(FieldPath.document_id(), direction=order)
    if plan.columns is not None:
        query = query.select(list(plan.columns))
    if after is not None:
        values = {field: ordered.raw for field, ordered in zip(plan.order_fields, after[1:-1])}
        position = {spec.timestamp_field: after[0], **values}
        query = query.start_after({**position, FieldPath.document_id(): collection.document(after[-1])})
    chunked: BaseQuery = query if size is None else query.limit(size)
    return chunked
