"""What the sync and the async store share: the spec, the ramp, planning, and the write
and purge jobs (prepare, send with the bulk sender, account). The stores only add their
transport: :mod:`tsstore.store` threads, :mod:`tsstore.aio` an event loop."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import pandas as pd

from tsstore.errors import (
    ConfigError,
    FaultError,
    Interrupted,
    QueryError,
    RecordError,
    WriteError,
)
from tsstore.frames import frame_to_records
from tsstore.limits import RAMP_START_OPS_PER_SECOND
from tsstore.read.plan import QueryPlan
from tsstore.read.query import Query
from tsstore.spec import SeriesSpec
from tsstore.times import NaivePolicy
from tsstore.verbs import Verbs
from tsstore.verbs.analytics import oldest_first
from tsstore.verbs.request import Seat
from tsstore.wire import Patch, Stored, WriteOp, WriteStatus
from tsstore.write.identity import DuplicatePolicy, shard_for_id
from tsstore.write.prepare import PreparedDoc, prepare_records
from tsstore.write.ramp import RampLimiter
from tsstore.write.sender import BulkSender, Written

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


class StoreBase(Verbs):
    """The parts of a store that do not depend on how Firestore is reached."""

    def __init__(
        self,
        spec: SeriesSpec,
        client: Any,
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
        self.client = client
        self._collection = client.collection(spec.collection)
        self.seat = Seat(spec, self._collection, page_size, lean)
        self.write_options = write_options
        ceiling = write_options.max_ops_per_second or spec.max_write_rate
        initial = ceiling if not write_options.ramp else min(write_options.initial_ops_per_second, ceiling)
        # One ramp for every write and purge of this store: its traffic to the collection is
        # one stream, so a second write() continues the ramp instead of starting at 500 again.
        self._limiter = RampLimiter(initial=initial, ceiling=ceiling)
        self._batch_docs = initial  # a batch never needs more tokens than the slowest second holds

    def _moves(self, ticks: Iterable[Any]) -> Iterator[PreparedDoc]:
        """Each tick of a retired value as a patch of its shard field only, onto the active
        value its id picks (:func:`~tsstore.write.identity.shard_for_id`)."""
        for i, tick in enumerate(ticks):
            yield PreparedDoc(i, tick.id, Patch({self.spec.shard_field: shard_for_id(tick.id, self.spec.shards)}), 0)

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
        return PurgeRequest(oldest_first(self.seat, bounds.replace(columns=())), bounds, bool(dry_run), on_progress)

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
