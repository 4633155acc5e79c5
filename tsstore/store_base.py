"""What the sync and the async store share: the spec, the ramp, planning, and the write
and purge jobs (prepare, send with the bulk sender, account). The stores only add their
transport: :mod:`tsstore.store` threads, :mod:`tsstore.aio` an event loop."""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pandas as pd
from google.cloud.firestore_v1.base_query import BaseQuery

from tsstore.bars import BarBuilder, to_interval
from tsstore.errors import (
    ConfigError,
    FaultError,
    Interrupted,
    QueryError,
    RecordError,
    SpecError,
    UndeclaredShardsWarning,
    WriteError,
)
from tsstore.frames import frame_to_records
from tsstore.limits import RAMP_START_OPS_PER_SECOND
from tsstore.read.aggregate import AggregateRequest, Aggregates, Aggregation
from tsstore.read.census import Ask, Census
from tsstore.read.chunks import census_query, chunk_query
from tsstore.read.cost import ReadStats
from tsstore.read.engine import PageRounds, Position
from tsstore.read.explain import Explanation, explain
from tsstore.read.plan import QueryPlan, plan_query
from tsstore.read.query import Query
from tsstore.spec import Direction, SeriesSpec, check_field_path
from tsstore.times import NaivePolicy, to_utc
from tsstore.wire import Patch, Stored, WriteOp, WriteStatus
from tsstore.write.identity import DuplicatePolicy, shard_for_id
from tsstore.write.prepare import PreparedDoc, prepare_records
from tsstore.write.ramp import RampLimiter
from tsstore.write.sender import BulkSender, Written

#: One aggregation a read runs: the shard values it covers, and its query for any part of them
#: (parts are asked on their own when the whole keeps failing: :func:`tsstore.faults.call_split`).
Part = tuple[tuple[str, ...], Callable[[Sequence[str]], Any]]


def whole(query: Any) -> Part:
    """An aggregation over no shard values of its own (the whole collection, one value's
    census), asked as it is."""
    return (), lambda _values: query


#: The largest ``limit`` an iteration reads as one lean page; above it (and without a
#: limit) each chunk is one streaming query, resumed after its last tick if it breaks off.
DEFAULT_PAGE_SIZE = 2000

#: How many chunk queries (RunQuery or aggregation requests) a store runs at once: the sync
#: store's reader threads, the async store's gate. Queries beyond it wait their turn, which
#: keeps many concurrent callers from swamping the server (the emulator fails requests with
#: UNKNOWN after minutes when some hundred heavy queries arrive together).
DEFAULT_CONCURRENCY = 8

#: Per-series counters live in the collection "<collection>_counts", one document per series.
COUNTERS_SUFFIX = "_counts"
#: A written batch's counter increments and a receipt in "<collection>_counts_receipts" are
#: one commit, so a commit retried after a fault is applied once (see
#: :func:`~tsstore.counters.increment_counters`); the receipt is deleted once it has landed.
RECEIPTS_SUFFIX = "_receipts"

#: A document id that is never written; reading it returns the server's current time.
_CLOCK_PROBE_ID = "tsstore-read-time-probe"
#: The query fields count() uses.
COUNT_OPTIONS = ("where", "start", "end", "read_time")

ProgressCallback = Callable[[int], None]

#: How far behind the newest delivered tick a tail still sees a tick, and how many documents
#: a tail's chunk listener holds before it moves on (see :meth:`TimeSeriesStore.tail`). A
#: tail holds about write rate x lateness documents (plus ``hold`` per chunk at most before
#: it moves on): 30 s at 1 000 ticks/s is 30 000.
DEFAULT_LATENESS = dt.timedelta(seconds=30)
DEFAULT_HOLD = 10_000

#: The options purge takes: a time bound, filters, and how to run.
PURGE_OPTIONS = frozenset({"before", "start", "end", "where", "dry_run", "on_progress"})


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
class PurgeRequest:
    """A checked purge: its read plan, the bounds it counts with, and how to run it."""

    plan: QueryPlan
    bounds: Query
    dry_run: bool
    on_progress: ProgressCallback | None


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


@dataclass(frozen=True)
class ReshardResult:
    """What a reshard did: ``moved`` ticks rewritten from retired shard values onto active
    ones (same ids and content), ``vanished`` ticks deleted meanwhile (a purge, TTL) and so
    not moved, and ``remaining`` ticks under each retired value when it finished (0 each when
    done: the value can then leave the declaration), after ``passes`` passes."""

    moved: int
    vanished: int
    remaining: Mapping[str, int]
    passes: int

    def describe(self) -> str:
        left = sum(self.remaining.values())
        state = "they now hold no tick" if not left else f"{left} ticks remain under them (run it again)"
        values = ", ".join(self.remaining) or "none"
        gone = f"; {self.vanished} were deleted meanwhile" if self.vanished else ""
        return f"moved {self.moved} ticks off retired shard values {values}{gone}; {state}"


R = TypeVar("R")


@dataclass
class _Job(Generic[R]):
    """Documents for a bulk sender, and what to report: :meth:`run` sends them all (in the
    caller's thread) and returns the result, or raises what a write or purge raises."""

    sender: BulkSender
    docs: Iterable[PreparedDoc]
    result: Callable[[], R]
    what: str
    tolerate: frozenset[int] = frozenset()  # refusal codes that are an answer, not a failure

    def run(self) -> R:
        sender = self.sender
        try:
            sender.send_all(self.docs)
        except KeyboardInterrupt as stop:
            raise Interrupted(self.result(), f"{self.what} interrupted") from stop
        except FaultError as exc:  # reading what to write met faults past the budget
            raise FaultError(
                f"{self.what} stopped after {sender.written} documents were written: {exc}; "
                f"run the {self.what} again to finish it (what is done is not done twice)",
                returned=exc.returned,
                cursor=exc.cursor,
            ) from exc
        if any(f.code not in self.tolerate for f in sender.failures):
            failures = sorted(sender.failures, key=lambda f: f.index)
            raise WriteError(failures, written=sender.written, result=self.result())
        return self.result()


class StoreBase:
    """The parts of a store that do not depend on how Firestore is reached."""

    _collection: Any

    def __init__(
        self,
        spec: SeriesSpec,
        *,
        write_options: WriteOptions,
        page_size: int,
        lean: bool,
    ) -> None:
        if not isinstance(spec, SeriesSpec):
            raise ConfigError(f"spec must be a SeriesSpec, got {type(spec).__name__}")
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ConfigError(f"page_size {page_size!r} is not allowed; give a positive integer")
        self.spec = spec
        self.write_options = write_options
        self._page_size = page_size
        self._lean = lean
        ceiling = write_options.max_ops_per_second or spec.max_write_rate
        initial = ceiling if not write_options.ramp else min(write_options.initial_ops_per_second, ceiling)
        # One ramp for every write and purge of this store: its traffic to the collection is
        # one stream, so a second write() continues the ramp instead of starting at 500 again.
        self._limiter = RampLimiter(initial=initial, ceiling=ceiling)
        self._batch_docs = initial  # a batch never needs more tokens than the slowest second holds

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

    def _count_queries(self, plan: QueryPlan) -> list[Part]:
        """A count's aggregation queries: one per chunk, plus the whole collection's when the
        count covers every tick, so that documents under shard values the declaration does
        not list are noticed (:meth:`_counted`)."""
        parts: list[Part] = [
            (chunk, lambda values: chunk_query(self._collection, plan, tuple(values), None, None))
            for chunk in plan.chunks
        ]
        if not plan.filters and plan.start is None and plan.end is None:
            parts.append(whole(self._collection))
        return parts

    def _counted(self, plan: QueryPlan, counts: list[int]) -> int:
        """The sum of the chunks' counts; warns (:class:`UndeclaredShardsWarning`) when the
        whole collection's count, if it was asked for, holds more."""
        counted = sum(counts[: len(plan.chunks)])
        if len(counts) > len(plan.chunks) and counts[-1] > counted:
            warnings.warn(
                UndeclaredShardsWarning(
                    f"{self.spec.collection!r} holds {counts[-1]} documents but its declared shard values only "
                    f"{counted}: {counts[-1] - counted} are under values the declaration does not list and no read "
                    "sees them; store.shard_census() (tsstore shards) names them, then declare them as retired"
                ),
                stacklevel=3,
            )
        return counted

    def _aggregate_jobs(
        self, query: Query | None, options: Mapping[str, Any], *, count: Any, sum: Any, avg: Any
    ) -> tuple[QueryPlan, AggregateRequest, list[Part]]:
        """An aggregate's plan, its checked request, and its aggregation queries: one for
        every chunk and every request of at most 5 aggregations."""
        bounds = Query.of(query, options)
        bounds.only(COUNT_OPTIONS, "aggregate")
        plan = self._oldest_first(bounds)  # the direction the measures' indexes are declared in
        request = AggregateRequest.checked(self.spec, count=count, sum=sum, avg=avg)

        def asking(measure: str | None, asks: list[Aggregation]) -> Callable[[Sequence[str]], Any]:
            def aggregation(values: Sequence[str]) -> Any:
                built: Any = chunk_query(self._collection, plan, tuple(values), None, None, also_by=measure)
                for kind, alias, field in asks:
                    built = getattr(built, kind)(*(() if field is None else (field,)), alias=alias)
                return built

            return aggregation

        jobs = [(chunk, asking(measure, asks)) for chunk in plan.chunks for measure, asks in request.requests()]
        return plan, request, jobs

    @staticmethod
    def _aggregated(request: AggregateRequest, answers: Iterable[dict[str, Any]], cost: ReadStats) -> Aggregates:
        """Combine the answers of :meth:`_aggregate_jobs`' queries (any number per request,
        a request split in parts answering once per part), and bill each by the index
        entries it went over (the count it returned)."""
        answered = list(answers)
        for answer in answered:
            counted = next(v for k, v in answer.items() if k == "count" or k.startswith("count_"))
            cost.aggregation_done(int(counted or 0))
        return request.combine(answered)

    def _bars_request(
        self,
        query: Query | None,
        options: Mapping[str, Any],
        *,
        interval: object,
        by: str | Sequence[str] | None,
        price: str,
        volume: str | None,
    ) -> tuple[QueryPlan, BarBuilder, tuple[str, ...]]:
        """A bars read: its plan (oldest first where declared, reading only the fields the
        bars need), the builder for the plan's order, and the ``by`` fields."""
        bounds = Query.of(query, options)
        bounds.only(COUNT_OPTIONS, "bars")
        fields = (by,) if isinstance(by, str) else tuple(by or ())
        try:
            for name, what in [*((f, "by field") for f in fields), (price, "price"), (volume, "volume")]:
                if name is not None:
                    check_field_path(name, what=what)
        except SpecError as exc:
            raise QueryError(str(exc)) from None
        step = to_interval(interval)
        columns = tuple(dict.fromkeys((*fields, price, *(() if volume is None else (volume,)))))
        plan = self._oldest_first(bounds.replace(columns=columns))
        return plan, BarBuilder(step, by=fields, price=price, volume=volume, descending=plan.descending), fields

    def _census(self, *, since: object, read_time: dt.datetime | None, stats: ReadStats) -> Census:
        try:
            since_t = None if since is None else to_utc(since, name="since")
        except ValueError as exc:
            raise QueryError(str(exc)) from None
        return Census(self.spec, since=since_t, read_time=read_time, stats=stats)

    def _moves(self, ticks: Iterable[Any]) -> Iterator[PreparedDoc]:
        """Each tick of a retired value as a patch of its shard field only, onto the active
        value its id picks (:func:`~tsstore.write.identity.shard_for_id`)."""
        for i, tick in enumerate(ticks):
            yield PreparedDoc(i, tick.id, Patch({self.spec.shard_field: shard_for_id(tick.id, self.spec.shards)}), 0)

    def _census_query(self, ask: Ask) -> BaseQuery:
        return census_query(self._collection, self.spec, ask)

    def _page_rounds(
        self, plan: QueryPlan, *, after: Position | None, rows: int, read_time: dt.datetime | None, stats: ReadStats
    ) -> PageRounds:
        """The rounds of one page of ``plan``, lean unless the store was made ``lean=False``."""
        return PageRounds(plan, rows=rows, after=after, read_time=read_time, stats=stats, lean=self._lean)

    def _write_job(
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
    ) -> _Job[WriteResult]:
        """The job :meth:`write` runs (see its documentation)."""
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

        return _Job(sender, docs, result, "write")

    def _purge_request(self, query: Query | None, options: Mapping[str, Any]) -> PurgeRequest:
        """Check a purge's options (see :meth:`TimeSeriesStore.purge
        <tsstore.store.TimeSeriesStore.purge>`) and plan its reads."""
        unknown = sorted(set(options) - PURGE_OPTIONS)
        if unknown:
            allowed = ", ".join(sorted(PURGE_OPTIONS))
            raise QueryError(f"unknown purge option(s) {', '.join(unknown)}; allowed: {allowed}")
        options = dict(options)
        before, dry_run, on_progress = (options.pop(k, None) for k in ("before", "dry_run", "on_progress"))
        bounds = Query.of(query, options)
        bounds.only(("where", "start", "end"), "purge")
        if before is not None:
            if bounds.end is not None:
                raise QueryError("give either before or end, not both (before is end)")
            bounds = bounds.replace(end=before)
        if bounds.start is None and bounds.end is None:
            raise QueryError("purge needs a time bound: before=, or start=/end=; refusing to delete everything")
        return PurgeRequest(self._oldest_first(bounds.replace(columns=())), bounds, bool(dry_run), on_progress)

    def _oldest_first(self, query: Query) -> QueryPlan:
        """The plan of ``query`` oldest first where an index for that is declared, else newest
        first: for reads that take every match, whose order is only cosmetic."""
        try:
            return self.plan(query, direction=Direction.ASC)
        except QueryError:
            return self.plan(query, direction=Direction.DESC)

    def _sender(self, *, on_duplicate: DuplicatePolicy = "keep", **callbacks: Any) -> BulkSender:
        send, lookup = self._transport()
        return BulkSender(
            send=send,
            lookup=lookup,
            pace=self._limiter,
            max_batch_docs=self._batch_docs,
            max_attempts=self.write_options.max_attempts,
            on_duplicate=on_duplicate,
            ignore_field=self.spec.shard_field,
            **callbacks,
        )

    def _transport(
        self,
    ) -> tuple[Callable[[list[WriteOp]], list[WriteStatus]], Callable[[list[str]], dict[str, Stored]]]:
        """The bulk sender's send and lookup functions (called from its worker threads)."""
        raise NotImplementedError

    def _count_written(self, batch: list[Written]) -> None:
        """Add a written batch to the series counters (only stores that keep them)."""
