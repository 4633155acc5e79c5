"""Explain a planned query before running it: its chunk queries, the index that serves
them and what a page is expected to cost. Pure: nothing here talks to Firestore."""

from __future__ import annotations

from dataclasses import dataclass

from tsstore.read.cost import lean_asks
from tsstore.read.plan import QueryPlan


@dataclass(frozen=True)
class Explanation:
    """What a query would send and cost (:meth:`describe` says it in words)."""

    #: The plan explained.
    plan: QueryPlan
    #: Each query sent, as text (its filters, order, projection and, with a limit, the lean first
    #: round's limit): one per chunk, in the plan's chunk order, or the one query of a series shape.
    queries: tuple[str, ...]
    #: The index that serves the queries, as text: its collection group, and its fields with their order.
    index: str
    #: The documents a page of ``limit`` rows reads when every chunk is asked for ``limit`` + 1;
    #: ``None`` without a limit (a read without one returns, and is billed for, every match, one
    #: streaming query per chunk).
    eager_reads: int | None
    #: The documents the lean first round of such a page reads (refills come on top only where a
    #: chunk may hide rows, see :mod:`tsstore.read.cost`); ``None`` without a limit.
    lean_reads: int | None
    #: The reads of the server's time a page needs: 1 when several chunks are read at one
    #: snapshot, else 0.
    snapshot_reads: int

    def describe(self) -> str:
        plan = self.plan
        values = sum(len(c) for c in plan.chunks)
        if plan.series:
            head = (
                f"{plan.spec.collection}: 1 query, no shard filter (series shape {plan.shape.describe()}), "
                f"served by the index {self.index}"
            )
        else:
            head = (
                f"{plan.spec.collection}: {len(plan.chunks)} chunk quer{'y' if len(plan.chunks) == 1 else 'ies'} "
                f"over {values} shard value{'' if values == 1 else 's'}, served by the index {self.index}"
            )
        lines = [head]
        lines += [f"  {'query' if plan.series else f'chunk {i + 1}'}: {text}" for i, text in enumerate(self.queries)]
        if plan.skipped:
            lines.append(
                f"skipped {len(plan.skipped)} retired shard value(s) {list(plan.skipped)!r}: they hold no tick at or "
                f"after {plan.start.isoformat() if plan.start else ''}"
            )
        if self.eager_reads is None:
            lines.append("reads: every match, one streaming query per chunk (billed one read per document)")
        elif plan.series:
            lines.append(f"reads per page of {plan.limit}: {self.lean_reads} (one query: no refill, no snapshot read)")
        else:
            lines.append(
                f"reads per page of {plan.limit}: lean about {self.lean_reads} (first round; refills only where a "
                f"chunk may hide rows), eager {self.eager_reads}; plus {self.snapshot_reads} for the snapshot time"
            )
        return "\n".join(lines)


def explain(plan: QueryPlan) -> Explanation:
    spec = plan.spec
    order = "desc" if plan.descending else "asc"
    rows = None if plan.limit is None else plan.limit + 1
    asks = lean_asks(rows, [len(c) for c in plan.chunks]) if rows is not None else [None] * len(plan.chunks)
    queries = []
    for chunk, ask in zip(plan.chunks, asks):
        parts = [f"{spec.shard_field} in {list(chunk)!r}"] if chunk else []
        parts += [f.describe() for f in (*plan.filters, *plan.ranges)]
        if plan.start is not None:
            parts.append(f"{spec.timestamp_field} >= {plan.start.isoformat()}")
        if plan.end is not None:
            parts.append(f"{spec.timestamp_field} < {plan.end.isoformat()}")
        orders = ", ".join(f"{name} {order}" for name in (spec.timestamp_field, *plan.order_fields, "__name__"))
        text = f"where {' and '.join(parts) or 'everything'} order by {orders}"
        if plan.columns is not None:
            text += f" select {list(plan.columns)!r}"
        queries.append(text + (f" limit {ask} (lean)" if ask is not None else ""))
    return Explanation(
        plan=plan,
        queries=tuple(queries),
        index=plan.index.describe(),
        eager_reads=None if rows is None else rows * len(plan.chunks),
        lean_reads=None if rows is None else sum(asks),  # type: ignore[arg-type]
        snapshot_reads=int(len(plan.chunks) > 1),
    )
