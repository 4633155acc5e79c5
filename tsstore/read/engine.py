"""Run a planned query's chunks: lean pages, resumable streams, one merge.

A *fetch* function (the store's) starts one chunk's Firestore query and returns its ticks
in query order: ``fetch(chunk, after, limit, read_time)``, ``after`` the (timestamp, id)
to resume after, ``limit`` ``None`` for no limit. Everything else is here:

- :class:`PageRounds`: the first ``rows`` ticks of the merge, exact: lean asks first, up
  to LEAN_REFILLS lean refills, then one refill of all that may still be missing
  (:mod:`tsstore.read.cost`). It only decides what each round reads, as chunk cursors;
  :func:`read_page` runs the rounds on a thread pool, :mod:`tsstore.read.async_engine` on
  an event loop.
- :class:`ChunkCursor`: where one chunk's stream stands and what to do when it breaks
  (resume after its last tick after a fault or an overload, with the pauses of
  :class:`tsstore.faults.Backoff`, for up to a minute of trouble in a row; read on as two
  halves when its query keeps failing before a tick; continue at a newer snapshot when the
  one it reads at expires and the caller did not fix ``read_time``).
  :class:`ChunkStream` is the thread-side stream over it (gRPC flow control delivers the
  chunk as it is consumed).
- :func:`finish_page`, :func:`name_stops` and :func:`reraise_stopped`: a page's cursor, and
  the error a read that outlived its snapshot, or met faults past the budget, raises (how
  far it got, and a cursor to go on from).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import NoReturn

from google.api_core import exceptions as gexc

from tsstore.errors import FaultError, SnapshotExpiredError
from tsstore import telemetry
from tsstore.faults import SPLIT_AFTER, Backoff, error_type, pause_or_raise
from tsstore.logs import CHUNKS, DOCUMENTS, ERROR_TYPE, QUERIES, REFILLS
from tsstore.read.cost import ENTRIES_PER_INDEX_READ, ReadStats, lean_asks, lean_refills, refill_asks
from tsstore.read.cursor import encode_cursor
from tsstore.read.merge import Key, merge_streams, take
from tsstore.read.plan import QueryPlan
from tsstore.ticks import Page, Position, Tick, sort_key

Chunk = tuple[str, ...]
Fetch = Callable[[Chunk, Position | None, int | None, dt.datetime | None], Iterator[Tick]]

#: Refill rounds that ask each chunk only its lean share of what may still be missing;
#: the round after them asks for all of it, so a page never takes more than
#: LEAN_REFILLS + 2 rounds (and usually one or two).
LEAN_REFILLS = 2

log = logging.getLogger(__name__)


def snapshot_expired(exc: BaseException) -> bool:
    """Whether Firestore refused a read because its ``read_time`` is older than it keeps."""
    return isinstance(exc, gexc.FailedPrecondition) and "read_time" in str(exc)


class PageRounds:
    """The rounds of one page of ``plan``, without I/O: :meth:`first` and :meth:`feed` give
    the chunk cursors to read to their end next (none once the page is complete),
    :meth:`result` gives the page. Every cursor reads at ``read_time`` and counts into
    ``stats``, and so does each round (one round trip) and refill.

    The page is exactly what asking every chunk for ``rows`` would give (which
    ``lean=False`` does: one round, about chunks × rows documents), for about ``rows``
    documents read."""

    def __init__(
        self,
        plan: QueryPlan,
        *,
        rows: int,
        after: Position | None,
        read_time: dt.datetime | None,
        stats: ReadStats,
        lean: bool = True,
    ) -> None:
        self._plan, self._rows, self._read_time, self._stats = plan, rows, read_time, stats
        self._chunks = list(plan.chunks)
        self._sizes = [len(c) for c in self._chunks]
        self._asks = lean_asks(rows, self._sizes) if lean else [rows] * len(self._chunks)
        self._after = after
        self._lists: list[list[Tick]] = []
        self._todo: list[int] = []
        self._needed: list[int] = []
        self._refill = 0
        stats.chunks = len(self._chunks)

    def first(self) -> list[ChunkCursor]:
        return self._round([(c, self._after, a) for c, a in zip(self._chunks, self._asks)])

    def feed(self, results: Sequence[list[Tick]]) -> list[ChunkCursor]:
        """Take the ticks the last cursors returned, in their order; return the next cursors."""
        if not self._lists:
            self._lists = [list(r) for r in results]
        else:
            for i, more in zip(self._todo, results):
                self._lists[i].extend(more)
                full = len(more) == self._needed[i]
                self._asks[i] = len(self._lists[i]) if full else len(self._lists[i]) + 1  # + 1: it ran dry
        if len(self._chunks) == 1:
            return []  # the server's order is the query's order
        if self._refill > LEAN_REFILLS:
            return []
        lists = self._lists
        merged = merge_streams(lists, descending=self._plan.descending, key=self._plan.key)
        order = {tick.id: pos for pos, tick in enumerate(merged)}
        ranks = [None if len(got) < ask else order[got[-1].id] + 1 for got, ask in zip(lists, self._asks)]
        needed = refill_asks(self._rows, ranks)  # enough to be exact; lean rounds ask less
        self._todo = [i for i, more in enumerate(needed) if more]
        if self._refill < LEAN_REFILLS:
            needed = lean_refills(needed, self._sizes)
        self._needed, self._refill = needed, self._refill + 1
        self._stats.refills += len(self._todo)
        if self._todo:
            log.debug("a page's refill round %d asks %d of %d chunks for %d more tick(s)", self._refill,
                      len(self._todo), len(self._chunks), sum(needed),
                      extra={REFILLS: len(self._todo), CHUNKS: len(self._chunks)})  # fmt: skip
        return self._round([(self._chunks[i], self._plan.key(lists[i][-1]), needed[i]) for i in self._todo])

    def result(self) -> list[Tick]:
        merged = merge_streams(self._lists, descending=self._plan.descending, key=self._plan.key)
        return list(take(merged, self._rows))

    @contextlib.contextmanager
    def stops(self) -> Iterator[None]:
        """Turn an expired snapshot, or faults past the budget, while the rounds run into a
        named error (a page is returned whole or not at all)."""
        try:
            yield
        except (gexc.FailedPrecondition, FaultError) as exc:
            reraise_stopped(self._plan, exc, returned=0, last=None, read_time=self._read_time)

    def _round(self, requests: list[tuple[Chunk, Position | None, int]]) -> list[ChunkCursor]:
        """One cursor per request (chunk, where to continue, how many); a non-empty round is
        one round trip of waiting, its queries concurrent."""
        if requests:
            self._stats.waited()
        return [
            ChunkCursor.of(self._plan, chunk, after=after, limit=ask, read_time=self._read_time, stats=self._stats)
            for chunk, after, ask in requests
        ]


def read_page(rounds: PageRounds, *, fetch: Fetch, pool: Executor) -> list[Tick]:
    """A page's rounds run on ``pool``: each cursor a limited :class:`ChunkStream` read to its
    end (resumed after its last tick on transient errors), a round's cursors concurrently."""
    with rounds.stops():
        cursors = rounds.first()
        while cursors:
            with telemetry.child("round", {QUERIES: len(cursors)}) as span:
                collect: Callable[[ChunkStream], list[Tick]] = telemetry.in_context(list)  # retries told under it
                results = [future.result() for future in [pool.submit(collect, ChunkStream(fetch, c)) for c in cursors]]
                span.set_attribute(DOCUMENTS, sum(map(len, results)))
            cursors = rounds.feed(results)
    return rounds.result()


#: What :meth:`ChunkCursor.failed` tells the stream to do: open again after a pause of
#: this many seconds, or at the snapshot the caller's ``renew`` gives.
RENEW = "renew"


class ChunkCursor:
    """Where one chunk's stream stands (the last tick returned, how many are still wanted,
    the snapshot) and what a failure means; no I/O. The streams over it open the query with
    :meth:`query_args`, pass each tick through :meth:`returned`, and ask :meth:`failed`
    what an exception means (``backoff`` holds its pauses and budget: a fresh
    :class:`~tsstore.faults.Backoff` unless given).

    A chunk whose query fails :data:`~tsstore.faults.SPLIT_AFTER` times in a row before its
    next tick is read on as two halves instead: after the pause, :meth:`split` gives their
    cursors (from the same position, sharing the budget), and the stream merges their ticks
    in the query's order (``descending``) and passes them through :meth:`returned` as before.
    Halves read at the cursor's ``read_time``, so one that reads at none (each query at its
    own time) is only split when it was made ``consistent=False`` (a purge: no snapshot to
    keep)."""

    def __init__(
        self,
        chunk: Chunk,
        *,
        after: Position | None,
        limit: int | None,
        read_time: dt.datetime | None,
        stats: ReadStats,
        descending: bool,
        key: Key = sort_key,
        renewable: bool = False,
        consistent: bool = True,
        backoff: Backoff | None = None,
        index_billed: bool = False,
    ) -> None:
        self.chunk, self.after, self.left, self.read_time = chunk, after, limit, read_time
        self.descending, self.key, self.index_billed = descending, key, index_billed
        self._stats, self._renewable, self._consistent = stats, renewable, consistent
        self._backoff = backoff or Backoff()
        self._read = 0  # ticks returned by all its queries
        self._returned = 0  # by the query now open
        self._fruitless = 0  # queries failed in a row before a tick
        self._halved = False  # its halves' streams read for it now
        self.done = limit == 0

    @classmethod
    def of(
        cls,
        plan: QueryPlan,
        chunk: Chunk,
        *,
        after: Position | None,
        limit: int | None,
        read_time: dt.datetime | None,
        stats: ReadStats,
        renewable: bool = False,
        consistent: bool = True,
    ) -> ChunkCursor:
        """A cursor over ``chunk`` of ``plan``, in the plan's order (its direction and key)."""
        return cls(
            chunk,
            after=after,
            limit=limit,
            read_time=read_time,
            stats=stats,
            descending=plan.descending,
            key=plan.key,
            renewable=renewable,
            consistent=consistent,
            index_billed=plan.index_billed,
        )

    def query_args(self) -> tuple[Chunk, Position | None, int | None, dt.datetime | None]:
        """The arguments of the fetch that opens (or reopens) the chunk's query."""
        self._returned = 0
        self._stats.query_done(0)  # billed at least once, returned documents are added below
        return self.chunk, self.after, self.left, self.read_time

    def returned(self, tick: Tick) -> Tick:
        self._read += 1
        if not self._halved:  # the halves' cursors count their own queries
            self._returned += 1
            self._fruitless = 0
            if self._backoff.failures:
                self._backoff.progress()  # it got somewhere: a new streak of failures starts
            entry_read = self.index_billed and self._returned % ENTRIES_PER_INDEX_READ == 1
            self._stats.document_returned(first_of_query=self._returned == 1, entry_read=entry_read)
        self.after = self.key(tick)
        if self.left is not None:
            self.left -= 1
            self.done = self.left == 0
        return tick

    def failed(self, exc: Exception) -> float | str:
        """After ``exc``: the pause before reopening after the last tick returned (a fault or
        an overload, within :class:`~tsstore.faults.Backoff`'s budget), or :data:`RENEW` (the
        snapshot expired and may be renewed). Otherwise ``exc`` is raised, or a
        :class:`~tsstore.errors.FaultError` once the budget is spent (and whatever a split
        cursor's halves raise: they had their own tries)."""
        if self._halved:
            raise exc
        what = f"reading shard value(s) {', '.join(self.chunk)}" if self.chunk else "reading the series"
        if self._renewable and snapshot_expired(exc):
            log.info("%s: its snapshot expired after %d tick(s); it reads on at a newer one", what, self._read,
                     extra={ERROR_TYPE: error_type(exc)})  # fmt: skip
            return RENEW
        pause = pause_or_raise(exc, self._backoff, what, done=f" after {self._read} of its ticks")
        self._fruitless += 1
        return pause

    def split(self) -> list[ChunkCursor]:
        """The cursors of the two halves to read on with, after :meth:`failed`'s pause, or
        none (it opens its own query again)."""
        if self._fruitless < SPLIT_AFTER or len(self.chunk) < 2 or (self.read_time is None and self._consistent):
            return []
        self._halved = True
        half = (len(self.chunk) + 1) // 2
        log.debug("shard values %s keep failing before a tick: read as two halves", ", ".join(self.chunk),
                  extra={CHUNKS: 2})  # fmt: skip
        self._stats.chunks += 1
        return [
            ChunkCursor(
                part,
                after=self.after,
                limit=self.left,
                read_time=self.read_time,
                stats=self._stats,
                descending=self.descending,
                key=self.key,
                renewable=self._renewable,
                consistent=self._consistent,
                backoff=self._backoff,
            )
            for part in (self.chunk[:half], self.chunk[half:])
        ]


class ChunkStream(Iterator[Tick]):
    """One chunk's ticks from one streaming query, consumed as the merge needs them. Given a
    ``pool``, the query is opened there at once, so every chunk's query is in flight
    together (the client waits for a stream's first result when it opens it). ``renew``
    gives a newer snapshot when the cursor's may be renewed."""

    def __init__(
        self,
        fetch: Fetch,
        cursor: ChunkCursor,
        *,
        renew: Callable[[], dt.datetime] | None = None,
        pool: Executor | None = None,
    ) -> None:
        self._fetch, self._cursor, self._renew = fetch, cursor, renew
        self._it: Iterator[Tick] | None = None
        self._opening: Future[Iterator[Tick]] | None = None
        if pool is not None and not cursor.done:
            self._opening = pool.submit(self._open)

    def _open(self) -> Iterator[Tick]:
        return self._fetch(*self._cursor.query_args())

    def __next__(self) -> Tick:
        cursor = self._cursor
        while not cursor.done:
            try:
                if self._it is None:
                    opening, self._opening = self._opening, None
                    self._it = opening.result() if opening is not None else self._open()
                return cursor.returned(next(self._it))
            except StopIteration:
                cursor.done = True
            except Exception as exc:
                pause = cursor.failed(exc)
                self._it = None
                if pause == RENEW:
                    assert self._renew is not None
                    cursor.read_time = self._renew()
                    continue
                time.sleep(float(pause))
                if halves := cursor.split():
                    streams = [ChunkStream(self._fetch, half, renew=self._renew) for half in halves]
                    self._it = merge_streams(streams, descending=cursor.descending, key=cursor.key)
        raise StopIteration


@dataclass(frozen=True)
class TickRead:
    """Ticks of ``plan`` to read: a page's ``rounds``, or ``cursors`` (one stream per chunk,
    merged in the plan's order, at most ``plan.limit``, at ``read_time``; a cursor may move
    to a newer snapshot, from ``renew``, when the caller did not choose it). A ``sweep``
    reads its cursors one after another instead (a purge's or a reshard's: order does not
    matter there, and one stream at a time is enough)."""

    plan: QueryPlan
    rounds: PageRounds | None = None
    cursors: Sequence[ChunkCursor] = ()
    read_time: dt.datetime | None = None
    sweep: bool = False


def read_ticks(read: TickRead, *, fetch: Fetch, pool: Executor, renew: Callable[[], dt.datetime]) -> Iterator[Tick]:
    """The ticks of ``read`` on threads: a page's rounds on ``pool``; streams opened on
    ``pool`` together (one cursor: in the caller's thread), merged as they are consumed."""
    if read.rounds is not None:
        return iter(read_page(read.rounds, fetch=fetch, pool=pool))
    if read.sweep:
        return (tick for cursor in read.cursors for tick in ChunkStream(fetch, cursor))
    many = pool if len(read.cursors) > 1 else None
    streams = [ChunkStream(fetch, c, renew=renew, pool=many) for c in read.cursors]
    merged = take(merge_streams(streams, descending=read.plan.descending, key=read.plan.key), read.plan.limit)
    return name_stops(read.plan, merged, read.read_time)


def chunk_cursors(
    plan: QueryPlan, after: Position | None, read_time: dt.datetime | None, stats: ReadStats
) -> list[ChunkCursor]:
    """One cursor per chunk of an unlimited (or long) read, all at ``read_time``; the
    snapshot may be renewed when the caller did not choose it."""
    stats.chunks = len(plan.chunks)
    stats.waited()  # every chunk's query is in flight together: one wait for their first results
    renewable = plan.query.read_time is None
    return [
        ChunkCursor.of(
            plan, chunk, after=after, limit=plan.limit, read_time=read_time, stats=stats, renewable=renewable
        )
        for chunk in plan.chunks
    ]


def sweep_cursor(chunk: Chunk, plan: QueryPlan, stats: ReadStats) -> ChunkCursor:
    """A cursor over every tick of ``chunk`` that reads each query at its own time (a purge or
    a reshard keeps no snapshot, and may outlast the hour one is kept), so its halves may too."""
    return ChunkCursor.of(plan, chunk, after=None, limit=None, read_time=None, stats=stats, consistent=False)


def finish_page(plan: QueryPlan, ticks: list[Tick], stats: ReadStats, *, snapshot: dt.datetime | None) -> Page:
    """A page from ``limit + 1`` ticks: the extra one only says that a next page exists. Its
    cursor carries ``snapshot``, the one the page was read at, for the next page."""
    assert plan.limit is not None
    more = len(ticks) > plan.limit
    shown = ticks[: plan.limit]
    cursor = encode_cursor(plan, plan.key(shown[-1]), snapshot=snapshot) if more else None
    return Page(tuple(shown), cursor, stats)


def reraise_stopped(
    plan: QueryPlan, exc: Exception, *, returned: int, last: Tick | None, read_time: dt.datetime | None
) -> NoReturn:
    """Raise ``exc``, or, when it is Firestore's refusal of a snapshot grown too old or a chunk's
    :class:`~tsstore.errors.FaultError`, an error of the same kind that says how far the read
    got (``returned``, ``last``) and carries a cursor to go on from."""
    expired = snapshot_expired(exc)
    if not expired and not isinstance(exc, FaultError):
        raise exc
    kept = None if expired else read_time  # a cursor to go on from reads at the snapshot while it lasts
    cursor = encode_cursor(plan, plan.key(last), snapshot=kept) if last is not None else None
    where = (
        f"after {returned} ticks, the last at {last.timestamp.isoformat()} (id {last.id}); "
        "pass cursor= (the error's .cursor) to a new query to continue from there"
        if last is not None
        else "before its first tick"
    )
    if not expired:
        raise FaultError(f"{exc}; the read stopped {where}", returned=returned, cursor=cursor) from exc
    stamp = read_time.isoformat() if read_time is not None else "its start"
    raise SnapshotExpiredError(
        f"the read at read_time {stamp} outlived the snapshot Firestore keeps (1 hour; 7 days with "
        f"point-in-time recovery) and stopped {where}",
        returned=returned,
        cursor=cursor,
    ) from exc


def name_stops(plan: QueryPlan, ticks: Iterator[Tick], read_time: dt.datetime | None) -> Iterator[Tick]:
    """``ticks``, with an expired snapshot or faults past the budget turned into
    :func:`reraise_stopped`'s error."""
    returned, last = 0, None
    try:
        for last in ticks:
            yield last
            returned += 1
    except (gexc.FailedPrecondition, FaultError) as exc:
        reraise_stopped(plan, exc, returned=returned, last=last, read_time=read_time)
