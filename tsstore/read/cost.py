"""What a read costs and how much to ask each chunk for: pure arithmetic, no Firestore.

Firestore bills one read per document a query returns and at least one per query, and one
read per 1 000 index entries a ``count()`` aggregation counts (at least one). The writer
draws shards uniformly, so a chunk holding k of n shard values holds about k/n of any
filter's matches: a page of m rows needs about m·k/n from it. :func:`lean_asks` asks each
chunk for a little more than that; :func:`refill_asks` says, from what came back, which
chunks may hide rows the page needs and exactly how many more to ask them for, so one
concurrent refill always completes the page (see its proof).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tsstore.prices import Prices, ReadCost, prices_for
from tsstore.telemetry import read_made

#: A page's first round asks each chunk for its expected share of the page times
#: LEAN_FACTOR, plus LEAN_SLACK; a lean refill asks a chunk for its share of what it may
#: still be missing times REFILL_FACTOR, plus REFILL_SLACK. Chosen with bench/read_cost.py
#: and a simulation of its grid: about 0.9 × the bound 1.3 · rows + 2 · chunks, and at most
#: two round trips for 9 pages in 10.
LEAN_FACTOR = 1.2
LEAN_SLACK = 1
REFILL_FACTOR = 1.25
REFILL_SLACK = 2
#: Index entries one billed read of an aggregation covers.
ENTRIES_PER_AGGREGATION_READ = 1000
#: Index entries one billed read covers for a query with two or more range fields (Standard
#: edition), on top of the documents it returns.
ENTRIES_PER_INDEX_READ = 1000


def range_fields(filtered: Iterable[str], ordered: Sequence[str]) -> tuple[str, ...]:
    """The fields Firestore's Standard edition counts as a query's range fields when it bills
    index entries: each field with a range or inequality filter (``filtered``), ``__name__``
    when ordered by, and each order-by field once another range field exists."""
    fields = dict.fromkeys(filtered)
    if "__name__" in ordered:
        fields.setdefault("__name__")
    if fields:
        for name in ordered:
            fields.setdefault(name)
    return tuple(fields)


def bills_index_entries(filtered: Iterable[str], ordered: Sequence[str]) -> bool:
    """Whether such a query is billed one read per :data:`ENTRIES_PER_INDEX_READ` index
    entries it reads, on top of its documents: when it has two or more range fields."""
    return len(range_fields(filtered, ordered)) >= 2


@dataclass
class ReadStats:
    """What one page, iteration or count cost, as the server saw it; its methods add to it
    from any thread."""

    #: The chunk queries the plan fanned out over (a join's: both sides').
    chunks: int = 0
    #: The queries sent: RunQuery or aggregation requests, and the reads of the server's time.
    queries: int = 0
    #: The waves of requests the caller waited for (concurrent requests count once).
    round_trips: int = 0
    #: The documents the server returned.
    documents: int = 0
    #: Firestore's charge, in document reads: per query the documents it returned, at least 1;
    #: per aggregation 1 per 1 000 index entries it counted, at least 1; and :attr:`index_reads`.
    billed_reads: int = 0
    #: The index-entry reads billed to queries with two or more range fields (value filters:
    #: :func:`bills_index_entries`): 1 per 1 000 entries read, counted here from the documents
    #: returned, each an entry read (the entries a filter skips are billed too, but no answer
    #: says how many: at least this many).
    index_reads: int = 0
    #: The chunk queries a lean page sent after its first round.
    refills: int = 0
    #: The reads of the server's time, for a snapshot of several queries when no answer of the
    #: last seconds told it (:mod:`tsstore.clock`); counted in ``queries`` and ``round_trips`` too.
    snapshot_reads: int = 0
    #: The cold tier's objects read (sealed partitions, :mod:`tsstore.cold`): no billed read.
    objects: int = 0
    #: Their bytes.
    object_bytes: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        read_made(self)  # counted in the span of the verb call that made it (tsstore.telemetry)

    def query_done(self, documents: int) -> None:
        """Count one query that returned ``documents`` documents (thread-safe).

        - ``documents``: how many documents the query returned (0 or more)"""
        with self._lock:
            self.queries += 1
            self.documents += documents
            self.billed_reads += max(1, documents)

    def document_returned(self, *, first_of_query: bool, entry_read: bool = False) -> None:
        """Count one document a streaming query returned; its query's minimum charge already
        covers the first (thread-safe).

        - ``first_of_query``: whether it is the first document its query returned (billed
          already, by the query's minimum charge)
        - ``entry_read``: whether it opens a new billed batch of index entries (a query billed
          by its index entries: its 1st, 1 001st, ... document)"""
        with self._lock:
            self.documents += 1
            self.billed_reads += (not first_of_query) + entry_read
            self.index_reads += entry_read

    def aggregation_done(self, entries: int) -> None:
        """Count one aggregation that counted ``entries`` index entries (thread-safe).

        - ``entries``: how many index entries the aggregation went over (the count it returned)"""
        with self._lock:
            self.queries += 1
            self.billed_reads += max(1, math.ceil(entries / ENTRIES_PER_AGGREGATION_READ))

    def snapshot_read(self) -> None:
        """Count one read of the server's time: a query that returns nothing, waited for
        alone (thread-safe)."""
        self.query_done(0)
        self.waited()
        with self._lock:
            self.snapshot_reads += 1

    def object_read(self, size: int) -> None:
        """Count one object of the cold tier read, of ``size`` bytes (thread-safe).

        - ``size``: the object's bytes"""
        with self._lock:
            self.objects += 1
            self.object_bytes += size

    def waited(self, waves: int = 1) -> None:
        """Count waves of requests the caller waited for (thread-safe).

        - ``waves``: how many waves (concurrent requests count as one)"""
        with self._lock:
            self.round_trips += waves

    def cost(self, prices: Prices | None = None) -> ReadCost:
        """What the billed reads counted so far cost: :attr:`billed_reads` at ``prices``.

        - ``prices``: the unit prices (:func:`~tsstore.prices.prices_for` of the declared
          location, ``spec.location``); ``None``: ``nam5``'s, said as undeclared"""
        with self._lock:
            reads = self.billed_reads
        return ReadCost.of(reads, prices if prices is not None else prices_for(None))

    def describe(self) -> str:
        return (
            f"{self.documents} documents read, {self.queries} quer{'y' if self.queries == 1 else 'ies'}, "
            f"{self.round_trips} round trip{'' if self.round_trips == 1 else 's'}, {self.chunks} "
            f"chunk{'' if self.chunks == 1 else 's'}, {self.billed_reads} billed read"
            f"{'' if self.billed_reads == 1 else 's'}"
            + (f" ({self.index_reads} of index entries)" if self.index_reads else "")
            + (f"; {self.objects} cold object{'' if self.objects == 1 else 's'} ({self.object_bytes} bytes)"
               if self.objects else "")
        )  # fmt: skip


def lean_asks(rows: int, chunk_sizes: Sequence[int]) -> list[int]:
    """How many documents to ask each chunk for first, for a page that needs ``rows`` rows
    from the merge: ``floor(LEAN_FACTOR · rows · share) + LEAN_SLACK``, at most ``rows``
    (one chunk: exactly ``rows``). ``chunk_sizes`` are the shard values per chunk."""
    if rows < 1:
        raise ValueError(f"rows {rows!r} must be positive")
    if len(chunk_sizes) == 1:
        return [rows]
    total = sum(chunk_sizes)
    return [_share(rows, size / total, LEAN_FACTOR, LEAN_SLACK) for size in chunk_sizes]


def lean_refills(needed: Sequence[int], chunk_sizes: Sequence[int]) -> list[int]:
    """A lean refill round: chunk i, which may miss up to ``needed[i]`` of the page's rows
    (:func:`refill_asks`), is asked for ``floor(REFILL_FACTOR · needed[i] · share) +
    REFILL_SLACK`` of them, at most ``needed[i]``: the rows after its last one are shared
    with every other chunk."""
    total = sum(chunk_sizes)
    return [_share(more, size / total, REFILL_FACTOR, REFILL_SLACK) for more, size in zip(needed, chunk_sizes)]


def _share(rows: int, fraction: float, factor: float, slack: int) -> int:
    return min(rows, math.floor(factor * rows * fraction) + slack)


def refill_asks(rows: int, ranks: Sequence[int | None]) -> list[int]:
    """How many more documents each chunk must be asked for, after a first round, so that
    the first ``rows`` of the merge are exact.

    ``ranks[i]`` is ``None`` when chunk i returned fewer documents than asked (it has no
    more), else the number of documents of the whole first round that sort at or before
    chunk i's last returned document. Chunk i may hold unseen documents only after its
    last one, and the exact top ``rows`` hold at least ``rank`` documents at or before it
    (adding documents never lowers that count), so at most ``rows - rank`` of chunk i's
    unseen documents can be among them: asking each chunk for exactly that many, all
    concurrently, completes the page in one more round.
    """
    return [0 if rank is None else max(0, rows - rank) for rank in ranks]
