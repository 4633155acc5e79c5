"""What a read, an aggregation and a census read of a plan send in Datastore mode, and how
their answers are put together: one query, or, when the plan has value filters, one per variant
(:mod:`~tsstore.dswire.kinds`), their ticks merged in the plan's order at one read time and
their aggregations summed (an average weighted by each variant's count)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Sequence
from typing import Any

from tsstore.asks import Doc
from tsstore.dswire import kinds, queries
from tsstore.dswire.calls import DatastoreCalls, read_ticks
from tsstore.dswire.values import decode_entity, key_path
from tsstore.census_asks import Ask
from tsstore.read.chunks import ChunkTicks
from tsstore.read.engine import Fetch
from tsstore.read.merge import merge_streams, take
from tsstore.read.plan import QueryPlan
from tsstore.spec import SeriesSpec
from tsstore.ticks import Position, Tick

#: ``(kind, alias, field)``: a ``count``, ``sum`` or ``avg`` of an aggregation query.
Aggregation = tuple[str, str, str | None]


def aggregate(
    calls: DatastoreCalls, spec: SeriesSpec, over: ChunkTicks | Ask, aggregations: Sequence[Aggregation] | None, *,
    read_time: dt.datetime | None,
) -> Any:  # fmt: skip
    """The count (``aggregations`` None), or ``{alias: value}`` of ``aggregations``, over
    ``over`` (a chunk's ticks: on its shard values; or a census ask of ``spec``'s collection)
    at ``read_time``: over a plan with value filters, the sum of its variants'."""
    split = kinds.variants(over.plan) if isinstance(over, ChunkTicks) else None
    wanted = [("count", "n", None)] if aggregations is None else list(aggregations)
    if split is not None:
        wanted.append(("count", "_n", None))
    answers = [calls.aggregate(query, wanted, read_time) for query in _queries(calls, spec, over, split)]
    if aggregations is None:
        return sum(int(answer["n"] or 0) for answer in answers)
    if split is None:
        [answer] = answers
        return answer
    combined: dict[str, Any] = {}
    for kind, alias, _ in aggregations:
        got = [(answer[alias], int(answer["_n"] or 0)) for answer in answers if answer[alias] is not None]
        if kind == "avg":
            weight = sum(n for _, n in got)
            combined[alias] = sum(value * n for value, n in got) / weight if weight else None
        else:
            combined[alias] = sum(value for value, _ in got)
    return combined


def documents(calls: DatastoreCalls, spec: SeriesSpec, over: Ask, read_time: dt.datetime | None) -> list[Doc]:
    """The documents of a census ask that names them (:class:`~tsstore.census_asks.FirstValue`)."""
    [query] = _queries(calls, spec, over, None)
    found, read = calls.collect(query, read_time=read_time, mask=[spec.shard_field])
    return [Doc(key_path(r.entity.key).rsplit("/", 1)[-1], decode_entity(r.entity), None, read) for r in found]


def fetcher(calls: DatastoreCalls, plan: QueryPlan, *, probe: str) -> Fetch:
    """The read engine's fetch of ``plan``'s chunks (:data:`~tsstore.read.engine.Fetch`); the
    variants of a read given no snapshot are read at the clock's time, or at the time a lookup
    of ``probe`` (a path never written) answers with."""
    spec, where = plan.spec, calls.where
    mask = list(plan.columns) if plan.columns is not None else None
    split = kinds.variants(plan)

    def one(chunk: tuple[str, ...], after: Position | None, limit: int | None, read_time: dt.datetime | None,
            variant: kinds.Variant | None) -> Iterator[Tick]:  # fmt: skip
        asked = [queries.chunk_query(where, plan, chunk, variant=variant)] if after is None else queries.continued(
            where, plan, chunk, after, variant=variant)  # fmt: skip
        if not asked:
            return iter(())
        return read_ticks(calls, asked, timestamp_field=spec.timestamp_field, read_time=read_time, mask=mask,
                          limit=limit)  # fmt: skip

    def fetch(chunk: tuple[str, ...], after: Position | None, limit: int | None,
              read_time: dt.datetime | None) -> Iterator[Tick]:  # fmt: skip
        if split is None:
            return one(chunk, after, limit, read_time, None)
        if read_time is None:  # the variants at one snapshot: the clock's, or one read of it
            read_time = calls.clock.now() or calls.lookup([probe])[1]
        streams = [kinds.kept(plan, variant, one(chunk, after, limit, read_time, variant)) for variant in split]
        return take(merge_streams(streams, descending=plan.descending, key=plan.key), limit)

    return fetch


def _queries(calls: DatastoreCalls, spec: SeriesSpec, over: ChunkTicks | Ask,
             split: list[kinds.Variant] | None) -> list[Any]:  # fmt: skip
    """The queries an aggregation over ``over`` runs: one, or one per variant."""
    if isinstance(over, ChunkTicks):
        plan, chunk = over.plan, over.chunk
        # Variants that differ only in the kind they keep (integers and timestamps, text
        # and bytes) send one query: a count cannot drop what a read drops.
        unique = list({v.conditions: v for v in split}.values()) if split is not None else [None]
        return [queries.chunk_query(calls.where, plan, chunk, also_by=over.also_by, variant=v) for v in unique]
    return [queries.census_query(calls.where, spec, over)]
