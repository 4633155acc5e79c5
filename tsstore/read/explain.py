"""Explain a planned query before running it: its chunk queries, the index that serves
them, what a page is expected to cost, and the most it can cost (:attr:`Explanation.bound_reads`,
priced by :meth:`Explanation.cost`). Pure: nothing here talks to Firestore."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from tsstore.prices import Prices, ReadCost, prices_for
from tsstore.read.cost import ENTRIES_PER_INDEX_READ, lean_asks
from tsstore.read.plan import QueryPlan

#: Refill rounds a page of several chunks may take after its first: its lean refills, then one
#: of all that may still be missing (:data:`tsstore.read.engine.LEAN_REFILLS` + 1).
REFILL_ROUNDS = 3


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
    #: The reads of the server's time a page may need: 1 when several chunks are read at one
    #: snapshot, else 0 (at most: a store with estimated snapshots, the default, skips it
    #: while recent answers tell the server's time; one made with ``snapshots="read"`` does not).
    snapshot_reads: int
    #: The round trips of such a page's first round: 1, and 1 more for a read of the server's
    #: time (refills come on top only where a chunk may hide rows).
    round_trips: int
    #: The fields Firestore counts as each query's range fields when it bills index entries.
    range_fields: tuple[str, ...]
    #: The index-entry reads billed on top of documents: 0 unless the queries have two or more
    #: range fields (a range condition on a value field), then at least 1 per 1 000 entries of
    #: the lean first round (the entries a filter skips are billed too).
    index_reads: int
    #: The reads a series with a cold tier adds, in one round trip at the read's snapshot: its
    #: manifest and its late-tick marks (0 without a tier); what falls in sealed partitions is
    #: then read from their Parquet objects, no billed read (``ReadStats.objects``).
    tier_reads: int = 0
    #: The most billed reads a page can take as :class:`~tsstore.read.cost.ReadStats` counts them
    #: (without faults, whose retried queries bill again): each chunk's documents and minimum
    #: charges, at most ``limit + 1`` however the refills fall (the proof of
    #: :func:`~tsstore.read.cost.refill_asks`), or per variant and round in Datastore mode; the
    #: index entries' batches; the snapshot's read; the cold tier's. ``None`` without a limit: a
    #: read without one is billed for every match, which no plan bounds.
    bound_reads: int | None = None
    #: The unit prices :meth:`cost` uses: the declared location's (``spec.location``).
    prices: Prices = field(default_factory=lambda: prices_for(None))

    def cost(self) -> ReadCost | None:
        """The price of :attr:`bound_reads` at :attr:`prices`, before the query runs (``None``
        without a limit); the read's :meth:`ReadStats.cost <tsstore.read.cost.ReadStats.cost>` is
        at most this."""
        return None if self.bound_reads is None else ReadCost.of(self.bound_reads, self.prices, bound=True)

    def describe(self, *, cost: bool = False) -> str:
        """The explanation in words.

        - ``cost``: also the price of :attr:`bound_reads`, with the prices' location, date and source"""
        lines = [self._plan_lines()]
        if cost:
            priced = self.cost()
            lines.append(
                f"price of a page: {priced.describe()}" if priced is not None else
                f"price: no bound without a limit (every match is billed, one read each, at "
                f"{self.prices.describe()})"
            )  # fmt: skip
        return "\n".join(lines)

    def _plan_lines(self) -> str:
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
        if self.index_reads or self.range_fields:
            billed = "billed" if plan.index_billed else "not billed"
            lines.append(f"index entries: {billed} (range fields: {', '.join(self.range_fields)})"
                         + (f", at least {self.index_reads} read(s) a page" if self.index_reads else ""))  # fmt: skip
        if self.eager_reads is None:
            lines.append("reads: every match, one streaming query per chunk (billed one read per document)")
        elif plan.series:
            lines.append(f"reads per page of {plan.limit}: {self.lean_reads} (one query: no refill, no snapshot read)")
        else:
            lines.append(
                f"reads per page of {plan.limit}: lean about {self.lean_reads} (first round; refills only where a "
                f"chunk may hide rows), eager {self.eager_reads}; plus {self.snapshot_reads} for the snapshot time; "
                f"{self.round_trips} round trip(s)"
            )
        if self.tier_reads and plan.spec.cold is not None:
            lines.append(
                f"cold tier {plan.spec.cold.path}: the sealed, unmarked partitions of the range are read from their "
                f"Parquet objects (no billed read), the rest from Firestore as above; plus {self.tier_reads} reads, "
                "in one round trip, for the manifest and the late-tick marks (none when the range starts today)"
            )
        return "\n".join(lines)


def _query_text(plan: QueryPlan, chunk: tuple[str, ...], ask: int | None) -> str:
    """One chunk's query as text: its filters, order, projection and lean limit."""
    spec = plan.spec
    parts = [f"{spec.shard_field} in {list(chunk)!r}"] if chunk else []
    parts += [f.describe() for f in (*plan.filters, *plan.ranges)]
    if plan.start is not None:
        parts.append(f"{spec.timestamp_field} >= {plan.start.isoformat()}")
    if plan.end is not None:
        parts.append(f"{spec.timestamp_field} < {plan.end.isoformat()}")
    order = "desc" if plan.descending else "asc"
    orders = ", ".join(f"{name} {order}" for name in (spec.timestamp_field, *plan.order_fields, "__name__"))
    text = f"where {' and '.join(parts) or 'everything'} order by {orders}"
    if plan.columns is not None:
        text += f" select {list(plan.columns)!r}"
    return text + (f" limit {ask} (lean)" if ask is not None else "")


def bound_reads(plan: QueryPlan, *, variants: int = 1) -> int | None:
    """The most billed reads a page of ``plan`` can take (:attr:`Explanation.bound_reads`), its
    chunk queries each sent as ``variants`` queries (Datastore mode's value filters)."""
    if plan.limit is None:
        return None
    rows, chunks = plan.limit + 1, len(plan.chunks)
    rounds = 1 if chunks == 1 else 1 + REFILL_ROUNDS
    # one query per chunk: its documents and minimum charges are at most rows; variants each
    # return at most what their round asks (rows in all) and bill at least 1 each
    documents = chunks * rows if variants == 1 else chunks * variants * (rows + rounds)
    index = chunks * variants * (rounds + rows // ENTRIES_PER_INDEX_READ) if plan.index_billed else 0
    snapshot = int(chunks > 1 or variants > 1)
    tier = 2 if plan.spec.cold is not None else 0
    return documents + index + snapshot + tier


def explain(plan: QueryPlan, *, prices: Prices | None = None, variants: int = 1) -> Explanation:
    """What ``plan`` sends and costs, without running it.

    - ``prices``: the unit prices of its bound (default: the declared location's, ``spec.location``)
    - ``variants``: the queries each chunk query is sent as (Datastore mode sends one per kind of
      value a value filter may match; 1 in Native mode)"""
    spec = plan.spec
    rows = None if plan.limit is None else plan.limit + 1
    asks = lean_asks(rows, [len(c) for c in plan.chunks]) if rows is not None else [None] * len(plan.chunks)
    queries = [_query_text(plan, chunk, ask) for chunk, ask in zip(plan.chunks, asks)]
    snapshot_reads = int(len(plan.chunks) > 1)
    index_reads = 0
    if plan.index_billed and rows is not None:
        index_reads = sum(math.ceil(ask / ENTRIES_PER_INDEX_READ) for ask in asks if ask is not None)
    return Explanation(
        plan=plan,
        queries=tuple(queries),
        index=plan.index.describe(),
        eager_reads=None if rows is None else rows * len(plan.chunks),
        lean_reads=None if rows is None else sum(asks),  # type: ignore[arg-type]
        snapshot_reads=snapshot_reads,
        round_trips=1 + snapshot_reads,
        range_fields=plan.range_fields,
        index_reads=index_reads,
        tier_reads=2 if spec.cold is not None else 0,
        bound_reads=bound_reads(plan, variants=variants),
        prices=prices if prices is not None else prices_for(spec.location),
    )
