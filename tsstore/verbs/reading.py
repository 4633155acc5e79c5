"""Reading ticks: pages, streams, frames, counts and the server's time, as requests.

Each function is one public verb of both stores (see :mod:`tsstore.verbs.request`); its
docstring is the verb's.
"""

from __future__ import annotations

import datetime as dt
import logging
import warnings
from typing import TYPE_CHECKING, Unpack

import pandas as pd
import pyarrow as pa

from tsstore.asks import GetDoc, KnownTime, ask, asked_together
from tsstore.census_asks import CountAll
from tsstore.errors import TsstoreError, UndeclaredShardsWarning
from tsstore.frames import FrameBuilder, check_frame_rows, polars_frame
from tsstore.logs import (
    BILLED_READS,
    CHUNKS,
    DB_COLLECTION,
    DB_OPERATION,
    DOCUMENTS,
    INDEX_READS,
    QUERIES,
    REFILLS,
    ROUND_TRIPS,
    SNAPSHOT_READS,
)
from tsstore.read.chunks import ChunkTicks
from tsstore.read.cold import TieredRead
from tsstore.read.cost import ReadStats
from tsstore.read.cursor import cursor_snapshot, decode_cursor
from tsstore.read.engine import ChunkCursor, PageRounds, TickRead, chunk_cursors, finish_page
from tsstore.read.plan import QueryPlan, plan_query
from tsstore.read.query import Query, QueryOptions, RangeOptions
from tsstore.spec import SeriesSpec
from tsstore.ticks import Page, Position, Tick
from tsstore.verbs.declare import Reading
from tsstore.verbs.request import Collect, Count, Feed, Over, Request, Seat, billed
from tsstore.verbs.seam import seam_of, tiered_count, tiered_page, tiered_read

if TYPE_CHECKING:
    import polars as pl

log = logging.getLogger(__name__)

#: A document id that is never written; reading it returns the server's current time.
CLOCK_PROBE_ID = "tsstore-read-time-probe"

#: How old a walk's snapshot may be and still be read at: Firestore reads back one hour (7
#: days with point-in-time recovery); the rest is margin for the walk's pages and the clocks.
WALK_SNAPSHOT_AGE = dt.timedelta(minutes=50)

#: How often a store's count of everything also counts the whole collection, to notice
#: documents under shard values the declaration does not list (its first such count, then
#: once in this long; every time while it finds some): that check is a second query.
UNDECLARED_CHECK_EVERY = dt.timedelta(minutes=10)

#: The query fields count() uses.
COUNT_OPTIONS = ("where", "start", "end", "read_time")


#: What each parameter of these verbs means (the API reference describes a parameter from
#: here unless the verb's docstring says more).
PARAMETER_HELP = {
    "rows": "at most this many rows per frame or batch",
    "plan": "a :class:`~tsstore.read.plan.QueryPlan` (from :meth:`plan`)",
    "chunk": "the shard values of one of the plan's chunks",
}


def clock_probe(spec: SeriesSpec) -> GetDoc:
    """The read that answers with the server's time: a document of ``spec``'s collection that
    is never written (one read)."""
    return GetDoc(f"{spec.collection}/{CLOCK_PROBE_ID}", "reading the server's time", fields=(spec.timestamp_field,))


def server_time(seat: Seat, *, stats: ReadStats | None = None) -> Request[dt.datetime]:
    """The database's current time, for a ``read_time`` that sees every committed write.

    Reading a document that does not exist costs one read and returns the server's time;
    the client's clock may lag the server's and miss a write just committed.

    - ``stats``: a :class:`~tsstore.read.cost.ReadStats` to add the read to (a snapshot read)"""
    (stats if stats is not None else ReadStats()).snapshot_read()  # a new one: the verb call's span counts it
    read_time = (yield from ask(clock_probe(seat.spec))).read_time
    if read_time is None:  # pragma: no cover - the API always sets it
        raise TsstoreError("Firestore returned no read time")
    return read_time


def query(seat: Seat, query: Query | None = None, /, **options: Unpack[QueryOptions]) -> Request[Page]:
    """One page of ticks in time order (newest first by default).

    ``where`` holds equality and ``in`` filters on declared fields, as a mapping
    (``{"exchange": "EXCHG1", "symbol": ["AAA", "BBB"]}``) or ``(field, op, value)``
    triples, which may add range conditions on a shape's ``ranges`` (``("volume", ">=",
    10_000)``, filtered by the server); ``start`` is inclusive and ``end`` exclusive. A
    query of a series shape (``series_rate``) is one Firestore query; others are one per
    shard chunk. With a ``limit`` the page holds
    at most that many ticks and ``page.cursor`` continues after the last one (``None``
    when nothing follows); without one the page holds every match. A page read at a
    snapshot (several chunks, or a ``read_time``) passes it on in its cursor: the pages of
    a walk read the collection as its first page saw it (a new snapshot once it is 50
    minutes old)."""
    plan = planned(seat, query, options)
    page = yield from _page(seat, plan, ReadStats())
    read_told("query", plan, page.stats, f"{len(page)} tick(s)")
    return page


def _page(seat: Seat, plan: QueryPlan, stats: ReadStats) -> Request[Page]:
    if plan.limit is None:
        ticks = yield from ask(Collect((yield from read_tiers(seat, plan, stats))))
        return Page(tuple(ticks), None, stats)
    after, snapshot = start_after(plan), (yield from snapshot_of(seat, plan, stats, parts=2 if seat.spec.cold else None))
    cut = None if snapshot is None else (yield from seam_of(seat, plan, snapshot, stats))
    # One more than the limit tells whether a next page exists.
    if cut is not None and snapshot is not None:
        ticks = yield from tiered_page(seat, plan, cut, after=after, rows=plan.limit + 1, snapshot=snapshot, stats=stats)
        return finish_page(plan, ticks, stats, snapshot=snapshot)
    rounds = page_rounds(seat, plan, after=after, rows=plan.limit + 1, read_time=snapshot, stats=stats)
    return finish_page(plan, (yield from ask(Collect(TickRead(plan, rounds=rounds)))), stats, snapshot=snapshot)


def iter_ticks(seat: Seat, query: Query | None = None, /, **options: Unpack[QueryOptions]) -> Reading[Tick]:
    """Every matching tick, lazily, in time order: one streaming query per chunk, all at one
    snapshot, merged as they arrive (a ``limit`` up to the store's page size is read as one
    lean page instead). The stream's ``stats`` say what it has cost so far."""
    plan = planned(seat, query, options)
    stats = ReadStats()
    return Reading(read_tiers(seat, plan, stats), stats, seat.spec)


def query_frame(seat: Seat, query: Query | None = None, /, **options: Unpack[QueryOptions]) -> Request[pd.DataFrame]:
    """The query's ticks as one DataFrame (see :mod:`tsstore.frames` for the schema), built
    as they stream."""
    plan = planned(seat, query, options)
    builder = FrameBuilder(seat.spec, columns=plan.columns)
    yield from ask(Feed((yield from read_tiers(seat, plan, ReadStats())), builder))
    return builder.frame()


def query_table(seat: Seat, query: Query | None = None, /, **options: Unpack[QueryOptions]) -> Request[pa.Table]:
    """The query's ticks as one Arrow table: :meth:`query_frame`'s columns, values and order,
    with the timestamp as the first column (see :meth:`tsstore.frames.FrameBuilder.table`),
    built from the same decoded columns without a DataFrame in between."""
    plan = planned(seat, query, options)
    builder = FrameBuilder(seat.spec, columns=plan.columns)
    yield from ask(Feed((yield from read_tiers(seat, plan, ReadStats())), builder))
    return builder.table()


def query_polars(seat: Seat, query: Query | None = None, /, **options: Unpack[QueryOptions]) -> Request[pl.DataFrame]:
    """The query's ticks as one Polars DataFrame: :meth:`query_table`'s columns, handed to
    Polars without a copy (needs ``pip install 'tsstore[polars]'``)."""
    return polars_frame((yield from query_table(seat, query, **options)))


def stream_frames(
    seat: Seat, query: Query | None = None, /, *, rows: int = 10_000, **options: Unpack[QueryOptions]
) -> Reading[pd.DataFrame]:
    """The query's ticks as DataFrames of at most ``rows`` rows, streamed so memory stays
    bounded by about one frame plus what gRPC buffers per chunk."""
    check_frame_rows(rows)
    plan = planned(seat, query, options)
    stats = ReadStats()
    return Reading(read_tiers(seat, plan, stats), stats, seat.spec, rows=rows, columns=plan.columns)


def stream_batches(
    seat: Seat, query: Query | None = None, /, *, rows: int = 10_000, **options: Unpack[QueryOptions]
) -> Reading[pa.RecordBatch]:
    """The query's ticks as Arrow record batches of at most ``rows`` rows (each the columns of
    :meth:`query_table`), streamed as :meth:`stream_frames` streams DataFrames. Batches of one
    read may differ in the columns that ticks of only some batches hold."""
    check_frame_rows(rows)
    plan = planned(seat, query, options)
    stats = ReadStats()
    return Reading(read_tiers(seat, plan, stats), stats, seat.spec, rows=rows, columns=plan.columns, arrow=True)


def stream_chunk(
    seat: Seat, plan: QueryPlan, chunk: tuple[str, ...], *, read_time: dt.datetime | None, stats: ReadStats
) -> Reading[Tick]:
    """The ticks of one chunk of ``plan`` (the shard values ``chunk`` lists), in order, from
    one streaming query at ``read_time``, resumed after its last tick on transient errors:
    the unit a read split over many workers reads (:mod:`tsstore.beam`)."""
    cursor = ChunkCursor.of(plan, chunk, after=None, limit=plan.limit, read_time=read_time, stats=stats)
    return Reading(TickRead(plan, cursors=[cursor], read_time=read_time), stats, seat.spec)


def count(
    seat: Seat, query: Query | None = None, /, *, stats: ReadStats | None = None, **options: Unpack[RangeOptions]
) -> Request[int]:
    """How many ticks match (``where``, ``start``, ``end``, ``read_time`` as in
    :meth:`query`): one ``count()`` aggregation per shard chunk, run concurrently at one
    snapshot, summed. Billed one read per 1 000 index entries counted, per chunk; pass a
    ``ReadStats`` as ``stats`` to have the cost added to it. A store's first count of
    everything, and one every :data:`UNDECLARED_CHECK_EVERY` after it, also counts the whole
    collection, and warns (:class:`~tsstore.errors.UndeclaredShardsWarning`) if it holds
    documents under shard values the declaration does not list (then every count of
    everything checks again, until none are left)."""
    plan = plan_query(seat.spec, query, **options)
    plan.query.only(COUNT_OPTIONS, "count")
    cost = stats if stats is not None else ReadStats()
    counted = yield from count_of(seat, plan, cost)
    read_told("count", plan, cost, f"{counted} tick(s)")
    return counted


def read_told(verb: str, plan: QueryPlan, stats: ReadStats, outcome: str) -> None:
    """The record of a read verb's outcome, with what it cost in the spans' words."""
    if not log.isEnabledFor(logging.INFO):
        return
    cost = {CHUNKS: stats.chunks, QUERIES: stats.queries, ROUND_TRIPS: stats.round_trips, DOCUMENTS: stats.documents,
            BILLED_READS: stats.billed_reads, INDEX_READS: stats.index_reads, REFILLS: stats.refills,
            SNAPSHOT_READS: stats.snapshot_reads}  # fmt: skip
    log.info("%s of %r: %s; %s", verb, plan.spec.collection, outcome, stats.describe(),
             extra={DB_COLLECTION: plan.spec.collection, DB_OPERATION: verb, **cost})  # fmt: skip


def count_of(seat: Seat, plan: QueryPlan, cost: ReadStats, *, tiers: bool = True) -> Request[int]:
    """:func:`count` of ``plan``, its cost added to ``cost``; ``tiers=False``: of Firestore's
    ticks alone, sealed or not (what a purge deletes)."""
    cost.chunks = len(plan.chunks)
    overs: list[Over] = [ChunkTicks(plan, chunk) for chunk in plan.chunks]
    everything = not plan.filters and not plan.ranges and plan.start is None and plan.end is None
    checking = everything and seat.checks.due("undeclared shards", UNDECLARED_CHECK_EVERY)
    if checking:  # documents under values the declaration does not list are noticed
        overs.append(CountAll())
    tiered = tiers and seat.spec.cold is not None
    snapshot = yield from snapshot_of(seat, plan, cost, parts=len(overs) + tiered)  # and the manifest
    cut = None if snapshot is None or not tiered else (yield from seam_of(seat, plan, snapshot, cost))
    if cut is not None and snapshot is not None:  # sealed partitions counted in their objects
        return (yield from tiered_count(seat, plan, cut, snapshot=snapshot, stats=cost))
    cost.waited()
    counts = billed((yield from asked_together([Count(over, snapshot) for over in overs])), cost)
    counted = sum(counts[: len(plan.chunks)])
    if checking and counts[-1] <= counted:
        seat.checks.done("undeclared shards")
    elif checking:
        warnings.warn(
            UndeclaredShardsWarning(
                f"{seat.spec.collection!r} holds {counts[-1]} documents but its declared shard values only "
                f"{counted}: {counts[-1] - counted} are under values the declaration does not list and no read "
                "sees them; store.shard_census() (tsstore shards) names them, then declare them as retired"
            ),
            stacklevel=4,
        )
    return counted


# ---------------------------------------------------------------------------- shared steps


def planned(seat: Seat, query: Query | None, options: QueryOptions) -> QueryPlan:
    """The plan of a verb's query, its ``columns`` checked against the declaration
    (:meth:`~tsstore.spec.SeriesSpec.check_columns`, the command line's check too) and its
    ``cursor`` against the query (:func:`~tsstore.read.cursor.decode_cursor`)."""
    plan = plan_query(seat.spec, query, **options)
    if plan.columns is not None:
        seat.spec.check_columns(plan.columns)
    start_after(plan)
    return plan


def read(
    seat: Seat, plan: QueryPlan, stats: ReadStats, *, snapshot: dt.datetime | None = None
) -> Request[TickRead]:
    """How ``plan``'s ticks are read from Firestore: one lean page when its ``limit`` fits
    the store's page size, else one stream per chunk, all at one snapshot (``snapshot``, when
    the caller has taken it)."""
    after = start_after(plan)
    if snapshot is None:
        snapshot = yield from snapshot_of(seat, plan, stats)
    if plan.limit is not None and plan.limit <= seat.page_size:
        rounds = page_rounds(seat, plan, after=after, rows=plan.limit, read_time=snapshot, stats=stats)
        return TickRead(plan, rounds=rounds)
    return TickRead(plan, cursors=chunk_cursors(plan, after, snapshot, stats), read_time=snapshot)


def read_tiers(seat: Seat, plan: QueryPlan, stats: ReadStats) -> Request[TickRead | TieredRead]:
    """How ``plan``'s ticks are read, the sealed partitions of a series with a cold tier
    from their objects (:mod:`tsstore.verbs.seam`) and the rest as :func:`read` reads them,
    all at one snapshot: what every read verb reads (a purge, a reshard, a seal read
    Firestore alone, :func:`read`)."""
    if plan.spec.cold is None:
        return (yield from read(seat, plan, stats))
    after, snapshot = start_after(plan), (yield from snapshot_of(seat, plan, stats, parts=2))
    assert snapshot is not None  # a read of two parts has one
    cut = yield from seam_of(seat, plan, snapshot, stats)
    if cut is None:
        return (yield from read(seat, plan, stats, snapshot=snapshot))
    return tiered_read(seat, plan, cut, after=after, snapshot=snapshot, stats=stats)


def start_after(plan: QueryPlan) -> Position | None:
    """Where the query's cursor continues."""
    return decode_cursor(plan, plan.query.cursor) if plan.query.cursor is not None else None


def snapshot_of(
    seat: Seat, plan: QueryPlan, stats: ReadStats, *, parts: int | None = None
) -> Request[dt.datetime | None]:
    """One snapshot for every chunk (or every one of ``parts`` queries): the caller's, the
    one of the walk a cursor continues (:func:`walk_snapshot`), or :func:`snapshot_now`. One
    query needs none."""
    read_time = plan.query.read_time
    if read_time is None and plan.query.cursor is not None:
        read_time = yield from walk_snapshot(plan.query.cursor)
    if read_time is not None or (parts or len(plan.chunks)) == 1:
        return read_time
    return (yield from snapshot_now(seat, stats))


def walk_snapshot(cursor: str) -> Request[dt.datetime | None]:
    """The snapshot a walk of pages reads at: the one its first page was read at, which each
    page's cursor carries, so the walk is one consistent view for one snapshot read. ``None``
    (read a new one) when the cursor carries none, or when its snapshot is older than
    :data:`WALK_SNAPSHOT_AGE` by the server's time as the clock knows it from answers of the
    last hour (:class:`~tsstore.asks.KnownTime` ``at_least``: the pages' own answers, read at
    the walk's snapshot, keep it known; unknown in a process that has had none):
    Firestore reads back one hour."""
    taken = cursor_snapshot(cursor)
    if taken is None:
        return None
    now = yield from ask(KnownTime(at_least=True))
    if now is None or now - taken > WALK_SNAPSHOT_AGE:
        return None
    return taken


def snapshot_now(seat: Seat, stats: ReadStats) -> Request[dt.datetime]:
    """The time a read of several queries reads them all at: by default the server's time
    estimated from recent answers without a call (:class:`~tsstore.asks.KnownTime`,
    :mod:`tsstore.clock`: every write of this process is in it, and it may miss a write
    another client committed in about the last half round trip), read when no answer told it
    lately; for a store made with ``snapshots="read"``, the server's time, read now (one read
    and one round trip, billed into ``stats``: every write committed before it is in it)."""
    if seat.snapshots == "estimated":
        known = yield from ask(KnownTime())
        if known is not None:
            return known
    return (yield from server_time(seat, stats=stats))


def page_rounds(
    seat: Seat, plan: QueryPlan, *, after: Position | None, rows: int, read_time: dt.datetime | None, stats: ReadStats
) -> PageRounds:
    """The rounds of one page of ``plan``, lean unless the store was made ``lean=False``."""
    return PageRounds(plan, rows=rows, after=after, read_time=read_time, stats=stats, lean=seat.lean)
