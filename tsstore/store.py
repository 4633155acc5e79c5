"""The store: a sharded time-series collection in Firestore, written and queried.

This is the only module (with :mod:`tsstore.wire`) that talks to Firestore. It takes a
ready ``google.cloud.firestore.Client`` (which already knows the project, the database
and ``FIRESTORE_EMULATOR_HOST``) and a :class:`~tsstore.spec.SeriesSpec`.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pandas as pd
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import BaseQuery

from tsstore.counters import ShardedCounter, increment_counters
from tsstore.errors import (
    ConfigError,
    Interrupted,
    QueryError,
    RecordError,
    TsstoreError,
    WriteError,
)
from tsstore.frames import check_frame_rows, frame_to_records, frames, ticks_to_frame
from tsstore.limits import RAMP_START_OPS_PER_SECOND
from tsstore.read.chunks import chunk_query
from tsstore.read.cost import ReadStats
from tsstore.read.cursor import decode_cursor
from tsstore.read.engine import (
    ChunkCursor,
    ChunkStream,
    Fetch,
    Position,
    chunk_cursors,
    finish_page,
    name_expiry,
    read_page,
)
from tsstore.read.explain import Explanation, explain
from tsstore.read.merge import merge_streams, take
from tsstore.read.plan import QueryPlan, plan_query
from tsstore.read.query import Query, Where
from tsstore.spec import Direction, SeriesSpec
from tsstore.ticks import Page, Tick, get_path
from tsstore.times import NaivePolicy
from tsstore.wire import batch_write, get_documents, stream_ticks
from tsstore.write.identity import DuplicatePolicy
from tsstore.write.prepare import PreparedDoc, prepare_records
from tsstore.write.ramp import RampLimiter
from tsstore.write.sender import BulkSender, Written

#: The largest ``limit`` an iteration reads as one lean page; above it (and without a
#: limit) each chunk is one streaming query, resumed after its last tick if it breaks off.
DEFAULT_PAGE_SIZE = 2000

#: Per-series counters live in the collection "<collection>_counts", one document per series.
COUNTERS_SUFFIX = "_counts"

#: A document id that is never written; reading it returns the server's current time.
_CLOCK_PROBE_ID = "tsstore-read-time-probe"
#: The query fields count() uses.
COUNT_OPTIONS = ("where", "start", "end", "read_time")

ProgressCallback = Callable[[int], None]


@dataclass(frozen=True)
class WriteOptions:
    """How fast the writer may go.

    New traffic should start at 500 ops/s and grow by 50 % every 5 minutes ("500/50/5");
    google-cloud-firestore's ``RateLimiter`` does exactly that between
    ``initial_ops_per_second`` and ``max_ops_per_second``. BulkWriter's default ceiling is
    also 500, which would cap a sharded collection at the rate sharding was meant to
    lift, so the ceiling here defaults to the spec's capacity, 500 writes/s per shard
    value. ``ramp=False`` starts at the ceiling (for the local emulator or a database no
    one else uses). ``max_attempts`` bounds the tries per document on retryable errors.
    """

    initial_ops_per_second: int = RAMP_START_OPS_PER_SECOND
    max_ops_per_second: int | None = None
    ramp: bool = True
    max_attempts: int = 15

    def __post_init__(self) -> None:
        for name in ("initial_ops_per_second", "max_ops_per_second", "max_attempts"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name} {value!r} is not allowed; give a positive integer")


@dataclass(frozen=True)
class PurgeResult:
    """What a purge matched (counted first) and deleted; a dry run deletes nothing."""

    matched: int
    deleted: int
    dry_run: bool


@dataclass(frozen=True)
class WriteResult:
    """What a write did with the records it sent, in input order.

    ``count`` records are now stored: ``created`` new documents, ``present`` ticks that were
    already stored with the same content (a re-run, a retried write), ``replaced`` ticks that
    overwrote another with the same key and time (``on_duplicate="replace"``). ``ids`` are
    their document ids (empty when asked not to keep them). ``unsettled`` records were not
    confirmed when Ctrl-C stopped the write (a re-run settles them).
    """

    count: int
    ids: tuple[str, ...]
    created: int = 0
    present: int = 0
    replaced: int = 0
    unsettled: int = 0


class TimeSeriesStore:
    """Write and query one sharded time-series collection.

    >>> store = TimeSeriesStore(client, SeriesSpec("instruments", shapes=["exchange"]))
    >>> store.write(ticks)                       # doctest: +SKIP
    >>> store.query(where={"exchange": "EXCHG1"}, limit=5)   # doctest: +SKIP
    """

    def __init__(
        self,
        client: firestore.Client,
        spec: SeriesSpec,
        *,
        write_options: WriteOptions = WriteOptions(),
        max_workers: int = 8,
        page_size: int = DEFAULT_PAGE_SIZE,
        fast_wire: bool = True,
        lean: bool = True,
    ) -> None:
        if not isinstance(spec, SeriesSpec):
            raise ConfigError(f"spec must be a SeriesSpec, got {type(spec).__name__}")
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ConfigError(f"page_size {page_size!r} is not allowed; give a positive integer")
        self.client = client
        self.spec = spec
        self.write_options = write_options
        self._collection = client.collection(spec.collection)
        self._page_size = page_size
        self._fast = fast_wire
        self._lean = lean
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tsstore-read")
        self._counters: dict[tuple[Any, ...], ShardedCounter] = {}
        ceiling = write_options.max_ops_per_second or spec.max_write_rate
        initial = ceiling if not write_options.ramp else min(write_options.initial_ops_per_second, ceiling)
        # One ramp for every write and purge of this store: its traffic to the collection is
        # one stream, so a second write() continues the ramp instead of starting at 500 again.
        self._limiter = RampLimiter(initial=initial, ceiling=ceiling)
        self._batch_docs = initial  # a batch never needs more tokens than the slowest second holds

    def close(self) -> None:
        """Stop the reader threads (the client stays open: it is the caller's)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "TimeSeriesStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing

    def write(
        self,
        records: Iterable[Mapping[str, Any]] | pd.DataFrame,
        *,
        naive: NaivePolicy = "error",
        on_duplicate: DuplicatePolicy | None = None,
        on_progress: ProgressCallback | None = None,
        on_reject: Callable[[RecordError], None] | None = None,
        on_written: Callable[[list[int]], None] | None = None,
        on_status: Callable[[str | None], None] | None = None,
        skip_first: int = 0,
        keep_ids: bool = True,
    ) -> WriteResult:
        """Write ticks (mappings, or a DataFrame with dotted column names) and return what was
        stored. Every record is validated before it is queued; a bad record raises
        :class:`~tsstore.errors.RecordError` naming its position, after the records before it
        have been sent (a re-run of the same input stores nothing twice). Firestore refusals
        that persist after retries raise :class:`~tsstore.errors.WriteError` naming each
        refused record; every other record is written.

        Ticks sharing key fields and timestamp are handled by ``on_duplicate`` (default: the
        spec's, ``"keep"``); see :mod:`tsstore.write.identity`. ``on_progress`` is called with the
        number of documents confirmed since the last call, ``on_status`` with what the writer
        is waiting for (retries and why) or ``None``. With ``spec.count_by``, each written
        batch adds its newly created ticks to each series' counter in one commit, so a
        re-written tick is never counted twice (see :meth:`series_counter`).

        ``on_reject``, if given, receives each invalid record's :class:`RecordError` and the
        write goes on without it (the result then holds only what was written);
        ``on_written`` receives the input positions of the records each batch settled. The
        first ``skip_first`` records were written by an earlier run (a resumed ingest): they
        are numbered for identity but not sent. ``keep_ids=False`` returns no ids, keeping
        memory flat for huge inputs. Ctrl-C raises :class:`~tsstore.errors.Interrupted` with
        the result so far once the batches in flight are settled (or 10 s have passed).
        """
        rows = frame_to_records(self.spec, records) if isinstance(records, pd.DataFrame) else records
        policy = self.spec.on_duplicate if on_duplicate is None else on_duplicate
        final_ids: dict[int, str] = {}

        def written(batch: list[Written]) -> None:
            if keep_ids:
                for item in batch:
                    final_ids[item.doc.index] = item.id
            if self.spec.count_by:
                self._count_written(batch)
            if on_written is not None:
                on_written([item.doc.index for item in batch])

        docs = prepare_records(
            self.spec, rows, naive=naive, on_duplicate=policy, on_reject=on_reject, skip_first=skip_first
        )
        sender = self._sender(on_duplicate=policy, on_progress=on_progress, on_written=written, on_status=on_status)

        def result() -> WriteResult:
            counts = sender.counts
            return WriteResult(
                count=sender.written,
                ids=tuple(final_ids[i] for i in sorted(final_ids)),
                created=counts["created"],
                present=counts["present"],
                replaced=counts["replaced"],
                unsettled=sender.unsettled,
            )

        try:
            sender.send_all(docs)
        except KeyboardInterrupt as stop:
            raise Interrupted(result(), "write interrupted") from stop
        if sender.failures:
            failures = sorted(sender.failures, key=lambda f: f.index)
            raise WriteError(failures, written=sender.written, result=result())
        return result()

    # ------------------------------------------------------------------ reading

    def plan(self, query: Query | None = None, /, **options: Any) -> QueryPlan:
        """The validated plan a query runs (no Firestore call). Every read verb takes a
        :class:`~tsstore.read.query.Query`, or its fields as keyword options: ``where``,
        ``start`` (inclusive), ``end`` (exclusive), ``direction``, ``limit``, ``columns``,
        ``cursor``, ``read_time``."""
        return plan_query(self.spec, query, **options)

    def explain(self, query: Query | None = None, /, **options: Any) -> Explanation:
        """What a query would send and cost, without touching Firestore: its chunk queries,
        the composite index serving them, the reads a page takes lean and eager
        (``print(store.explain(...).describe())``)."""
        return explain(self.plan(query, **options))

    def firestore_queries(self, plan: QueryPlan) -> list[BaseQuery]:
        """The Firestore query each chunk of ``plan`` starts with, as sent (no Firestore call):
        for inspecting what tsstore asks of Firestore, e.g. which index serves it."""
        size = self._page_size if plan.limit is None else min(plan.limit + 1, self._page_size)
        return [chunk_query(self._collection, plan, chunk, None, size) for chunk in plan.chunks]

    def query(self, query: Query | None = None, /, **options: Any) -> Page:
        """One page of ticks in time order (newest first by default).

        ``where`` holds equality and ``in`` filters on declared fields, as a mapping
        (``{"exchange": "EXCHG1", "symbol": ["AAA", "BBB"]}``) or ``(field, op, value)``
        triples; ``start`` is inclusive and ``end`` exclusive. With a ``limit`` the page holds
        at most that many ticks and ``page.cursor`` continues after the last one (``None``
        when nothing follows); without one the page holds every match.
        """
        plan = self.plan(query, **options)
        stats = ReadStats()
        if plan.limit is None:
            return Page(tuple(self._run(plan, stats)), None, stats)
        after, snapshot = self._start(plan, stats)
        # One more than the limit tells whether a next page exists.
        ticks = self._page(plan, after=after, rows=plan.limit + 1, read_time=snapshot, stats=stats)
        return finish_page(plan, ticks, stats)

    def iter_ticks(self, query: Query | None = None, /, **options: Any) -> TickStream:
        """Every matching tick, lazily, in time order: one streaming query per chunk, all at
        one snapshot, merged as they arrive (a ``limit`` up to the store's page size is read
        as one lean page instead). Its ``stats`` say what it has cost so far."""
        plan = self.plan(query, **options)
        stats = ReadStats()
        return TickStream(self._run(plan, stats), stats)

    def query_frame(self, query: Query | None = None, /, **options: Any) -> pd.DataFrame:
        """The query's ticks as one DataFrame (see :mod:`tsstore.frames` for the schema)."""
        return ticks_to_frame(self.spec, self.iter_ticks(query, **options))

    def stream_frames(
        self, query: Query | None = None, /, *, rows: int = 10_000, **options: Any
    ) -> Iterator[pd.DataFrame]:
        """The query's ticks as DataFrames of at most ``rows`` rows, streamed so memory stays
        bounded by about one frame plus what gRPC buffers per chunk."""
        check_frame_rows(rows)
        return frames(self.spec, self.iter_ticks(query, **options), rows=rows)

    def server_time(self) -> dt.datetime:
        """The database's current time, for a ``read_time`` that sees every committed write.

        Reading a document that does not exist costs one read and returns the server's
        time; the client's clock may lag the server's and miss a write just committed.
        """
        snap = self._collection.document(_CLOCK_PROBE_ID).get(field_paths=[self.spec.timestamp_field])
        if snap.read_time is None:  # pragma: no cover - the API always sets it
            raise TsstoreError("Firestore returned no read time")
        return snap.read_time

    # ------------------------------------------------------------------ counting

    def count(self, query: Query | None = None, /, *, stats: ReadStats | None = None, **options: Any) -> int:
        """How many ticks match (``where``, ``start``, ``end``, ``read_time`` as in
        :meth:`query`): one ``count()`` aggregation per shard chunk, run concurrently at one
        snapshot, summed. Billed one read per 1 000 index entries counted, per chunk; pass a
        ``ReadStats`` as ``stats`` to have the cost added to it."""
        plan = self.plan(query, **options)
        plan.query.only(COUNT_OPTIONS, "count")
        cost = stats if stats is not None else ReadStats()
        cost.chunks = len(plan.chunks)
        snapshot = self._snapshot(plan, cost)

        def count_chunk(chunk: tuple[str, ...]) -> int:
            query: Any = chunk_query(self._collection, plan, chunk, None, None)
            [[result]] = query.count().get(read_time=snapshot)
            counted = int(result.value)  # the emulator reports an empty count as 0.0
            cost.aggregation_done(counted)
            return counted

        cost.waited()
        return sum(self._pool.map(count_chunk, plan.chunks))

    def series_counter(self, key: Mapping[str, Any]) -> ShardedCounter:
        """The sharded counter the writer keeps for one series (``spec.count_by`` fields →
        values), e.g. ``store.series_counter({"symbol": "AAA"}).read(live=True)``.

        Counters count the ticks the writer created: writing the same tick again counts
        nothing. Purges do not decrement them, and a process killed between a batch and its
        counter increment leaves that batch uncounted; :meth:`count` is the exact figure."""
        if not self.spec.count_by:
            raise ConfigError(f"spec for {self.spec.collection!r} has no count_by fields; no series counters kept")
        missing = sorted(set(self.spec.count_by) - set(key))
        extra = sorted(set(key) - set(self.spec.count_by))
        if missing or extra:
            raise ConfigError(
                f"series key {dict(key)!r} must name exactly the count_by fields {list(self.spec.count_by)!r}"
            )
        return self._counter_for(tuple(key[f] for f in self.spec.count_by))

    # ------------------------------------------------------------------ retention

    def purge(
        self,
        *,
        before: object = None,
        start: object = None,
        end: object = None,
        where: Where = None,
        dry_run: bool = False,
        on_progress: ProgressCallback | None = None,
    ) -> PurgeResult:
        """Delete the ticks before ``before`` (or in ``[start, end)``), optionally filtered.

        Each shard chunk is read oldest first as one stream (ids and timestamps only, resumed
        after its last tick if it breaks off, at no shared snapshot), and its ticks are deleted
        with the writer's bulk batches at its bounded, ramped rate. ``dry_run`` only counts. A
        purge needs at least one time bound."""
        if before is not None:
            if end is not None:
                raise QueryError("give either before or end, not both (before is end)")
            end = before
        if start is None and end is None:
            raise QueryError("purge needs a time bound: before=, or start=/end=; refusing to delete everything")
        try:  # oldest first where an index for it is declared; the order is only cosmetic here
            plan = self.plan(where=where, start=start, end=end, direction=Direction.ASC, columns=())
        except QueryError:
            plan = self.plan(where=where, start=start, end=end, direction=Direction.DESC, columns=())
        matched = self.count(where=where, start=start, end=end)
        if dry_run:
            return PurgeResult(matched=matched, deleted=0, dry_run=True)
        sender = self._sender(on_progress=on_progress)

        def doomed() -> Iterator[PreparedDoc]:
            # No shared snapshot: each chunk is one stream at its own time, resumed after its
            # last tick on an error, so a purge may outlast read_time's hour.
            fetch, stats = self._fetcher(plan), ReadStats()
            for chunk in plan.chunks:
                stream = ChunkStream(fetch, ChunkCursor(chunk, after=None, limit=None, read_time=None, stats=stats))
                for i, tick in enumerate(stream):
                    yield PreparedDoc(i, tick.id, None, 0)

        def result() -> PurgeResult:
            return PurgeResult(matched=matched, deleted=sender.counts["deleted"], dry_run=False)

        try:
            sender.send_all(doomed())
        except KeyboardInterrupt as stop:
            raise Interrupted(result(), "purge interrupted") from stop
        if sender.failures:
            raise WriteError(sender.failures, written=sender.written, result=result())
        return result()

    # ------------------------------------------------------------------ internals

    def _sender(self, *, on_duplicate: DuplicatePolicy = "keep", **callbacks: Any) -> BulkSender:
        return BulkSender(
            send=functools.partial(batch_write, self._collection, fast=self._fast),
            lookup=functools.partial(get_documents, self._collection),
            take_tokens=self._limiter.take,
            max_batch_docs=self._batch_docs,
            max_attempts=self.write_options.max_attempts,
            on_duplicate=on_duplicate,
            ignore_field=self.spec.shard_field,
            **callbacks,
        )

    def _counter_for(self, values: tuple[Any, ...]) -> ShardedCounter:
        counter = self._counters.get(values)
        if counter is None:
            path = f"{self.spec.collection}{COUNTERS_SUFFIX}/{series_document_id(values)}"
            counter = ShardedCounter(self.client, path)
            counter.create(shards=self.spec.counter_shards)
            self._counters[values] = counter
        return counter

    def _count_written(self, batch: list[Written]) -> None:
        """One increment per series a written batch changed, all in one commit: +1 for each
        created tick; a replace that moved a tick to another series moves its count too.
        Ticks found already present count nothing, so a re-run never counts twice."""
        tally: dict[tuple[Any, ...], int] = {}
        paths = [f.split(".") for f in self.spec.count_by]
        for item in batch:
            assert item.doc.data is not None
            key = tuple(get_path(item.doc.data, p) for p in paths)
            if item.outcome == "created":
                tally[key] = tally.get(key, 0) + 1
            elif item.outcome == "replaced" and item.previous is not None:
                old = tuple(get_path(item.previous, p) for p in paths)
                if old != key:
                    tally[key] = tally.get(key, 0) + 1
                    tally[old] = tally.get(old, 0) - 1
        if any(tally.values()):
            increment_counters(self.client, {self._counter_for(k): n for k, n in tally.items() if n})

    def _start(self, plan: QueryPlan, stats: ReadStats) -> tuple[Position | None, dt.datetime | None]:
        """Where the query's cursor continues, and the one snapshot every chunk reads at."""
        cursor = plan.query.cursor
        return (decode_cursor(plan, cursor) if cursor is not None else None), self._snapshot(plan, stats)

    def _run(self, plan: QueryPlan, stats: ReadStats) -> Iterator[Tick]:
        """The plan's ticks, lazily (nothing is sent before the first one is asked for)."""
        after, snapshot = self._start(plan, stats)
        if plan.limit is not None and plan.limit <= self._page_size:
            yield from self._page(plan, after=after, rows=plan.limit, read_time=snapshot, stats=stats)
            return
        # A snapshot chosen here may be renewed when a long read outlives it; one the
        # caller chose may not (the read then stops with SnapshotExpiredError).
        renew = self.server_time if plan.query.read_time is None else None
        fetch = self._fetcher(plan)
        streams = [
            ChunkStream(fetch, cursor, renew=renew, pool=self._pool)
            for cursor in chunk_cursors(plan, after, snapshot, stats)
        ]
        merged = take(merge_streams(streams, descending=plan.descending), plan.limit)
        yield from name_expiry(plan, merged, snapshot)

    def _page(
        self,
        plan: QueryPlan,
        *,
        after: tuple[dt.datetime, str] | None,
        rows: int,
        read_time: dt.datetime | None,
        stats: ReadStats,
    ) -> list[Tick]:
        ticks = read_page(
            chunks=plan.chunks,
            fetch=self._fetcher(plan),
            pool=self._pool,
            rows=rows,
            after=after,
            read_time=read_time,
            descending=plan.descending,
            stats=stats,
            lean=self._lean,
        )
        return list(name_expiry(plan, iter(ticks), read_time))

    def _snapshot(self, plan: QueryPlan, stats: ReadStats) -> dt.datetime | None:
        """One snapshot for every chunk: the caller's, or the server's time now (the client's
        clock may lag the server's and miss a write just committed). One chunk needs none."""
        read_time = plan.query.read_time
        if read_time is not None or len(plan.chunks) == 1:
            return read_time
        stats.query_done(0)  # reading a document that does not exist: one billed read
        stats.waited()
        return self.server_time()

    def _fetcher(self, plan: QueryPlan) -> Fetch:
        def fetch(
            chunk: tuple[str, ...],
            after: tuple[dt.datetime, str] | None,
            limit: int | None,
            read_time: dt.datetime | None,
        ) -> Iterator[Tick]:
            query = chunk_query(self._collection, plan, chunk, after, limit)
            return stream_ticks(query, timestamp_field=self.spec.timestamp_field, read_time=read_time, fast=self._fast)

        return fetch


class TickStream(Iterator[Tick]):
    """The ticks of :meth:`TimeSeriesStore.iter_ticks`, and ``stats``: what reading them has
    cost so far (a :class:`~tsstore.read.cost.ReadStats`)."""

    def __init__(self, ticks: Iterator[Tick], stats: ReadStats) -> None:
        self._ticks = ticks
        self.stats = stats

    def __next__(self) -> Tick:
        return next(self._ticks)


def series_document_id(values: tuple[Any, ...]) -> str:
    """A readable document id for a series key, or a hash when the values cannot make one."""
    text = "|".join(str(v) for v in values)
    if (
        all(isinstance(v, str) for v in values)
        and "/" not in text
        and text not in (".", "..")
        and (0 < len(text.encode()) <= 500 and not (text.startswith("__") and text.endswith("__")))
    ):
        return text
    return "h-" + hashlib.sha256(repr(values).encode()).hexdigest()[:32]
