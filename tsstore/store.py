"""The store: a sharded time-series collection in Firestore, written and queried.

This is the only module (with :mod:`tsstore.wire`) that talks to Firestore. It takes a
ready ``google.cloud.firestore.Client`` (which already knows the project, the database
and ``FIRESTORE_EMULATOR_HOST``) and a :class:`~tsstore.spec.SeriesSpec`.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import pandas as pd
from google.cloud import firestore

from tsstore import faults
from tsstore.bars import bar_start, iter_bars
from tsstore.counters import ShardedCounter, increment_counters
from tsstore.errors import ConfigError, QueryError
from tsstore.frames import frames
from tsstore.live.listen import LiveTail, LiveWatch, decoder
from tsstore.live.state import TailState
from tsstore.read.chunks import chunk_query
from tsstore.read.cost import ReadStats
from tsstore.read.engine import ChunkStream, Fetch, TickRead, read_ticks, sweep_cursor
from tsstore.read.plan import QueryPlan
from tsstore.read.query import Query
from tsstore.rollup import WATERMARKS, Rollup, RollupResult
from tsstore.spec import Direction, SeriesSpec
from tsstore.store_base import (
    COUNTERS_SUFFIX,
    DEFAULT_CONCURRENCY,
    DEFAULT_HOLD,
    DEFAULT_LATENESS,
    DEFAULT_PAGE_SIZE,
    RECEIPTS_SUFFIX,
    ProgressCallback,
    PurgeResult,
    ReshardResult,
    StoreBase,
    WriteOptions,
    WriteResult,
    _Job,
)
from tsstore.ticks import Tick, get_path
from tsstore.times import to_utc
from tsstore.verbs import layout, reading
from tsstore.verbs.analytics import bars_plan, oldest_first
from tsstore.verbs.request import (
    Aggregation,
    Collect,
    Documents,
    Feed,
    Reading,
    Request,
    ThreadDriver,
    TickStream,
    Unary,
    answer,
)
from tsstore.wire import NOT_FOUND, Stored, WriteOp, WriteStatus, batch_write, get_documents, stream_ticks
from tsstore.write.prepare import PreparedDoc
from tsstore.write.sender import Written

R = TypeVar("R")
T = TypeVar("T")


class TimeSeriesStore(StoreBase, ThreadDriver):
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
        max_workers: int = DEFAULT_CONCURRENCY,
        page_size: int = DEFAULT_PAGE_SIZE,
        fast_wire: bool = True,
        lean: bool = True,
    ) -> None:
        super().__init__(spec, client, write_options=write_options, page_size=page_size,
                         lean=lean)  # fmt: skip
        self.client = client
        self._fast = fast_wire
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="tsstore-read")
        self._counters: dict[tuple[Any, ...], ShardedCounter] = {}

    def close(self) -> None:
        """Stop the reader threads (the client stays open: it is the caller's)."""
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> "TimeSeriesStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ writing

    def write(self, records: Iterable[Mapping[str, Any]] | pd.DataFrame, /, **options: Any) -> WriteResult:
        """Write ticks (mappings, or a DataFrame with dotted column names) and return what was
        stored. Options (keyword only): ``naive``, ``on_duplicate``, ``on_progress``,
        ``on_reject``, ``on_written``, ``on_status``, ``skip_first``, ``keep_ids``, below.
        Every record is validated before it is queued; a bad record raises
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
        return self._write_job(records, **options).run()

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

    def purge(self, query: Query | None = None, /, **options: Any) -> PurgeResult:
        """Delete the ticks before ``before`` (or in ``[start, end)``), optionally filtered by
        ``where``; ``dry_run=True`` only counts, ``on_progress`` is called with each batch's
        size. The bounds may come as a :class:`~tsstore.read.query.Query` (where, start, end).

        Each shard chunk is read oldest first as one stream (ids and timestamps only, resumed
        after its last tick if it breaks off, at no shared snapshot), and its ticks are deleted
        with the writer's bulk batches at its bounded, ramped rate. A purge needs at least one
        time bound."""
        request = self._purge_request(query, options)
        plan, matched = request.plan, self.count(request.bounds)
        if request.dry_run:
            return PurgeResult(matched=matched, deleted=0, dry_run=True)
        sender = self._sender(on_progress=request.on_progress)

        def doomed() -> Iterator[PreparedDoc]:
            # No shared snapshot: each chunk is one stream at its own time, resumed after its
            # last tick on an error, so a purge may outlast read_time's hour.
            fetch, stats = self._fetcher(plan), ReadStats()
            for chunk in plan.chunks:
                stream = ChunkStream(fetch, sweep_cursor(chunk, plan, stats))
                for i, tick in enumerate(stream):
                    yield PreparedDoc(i, tick.id, None, 0)

        def result() -> PurgeResult:
            return PurgeResult(matched=matched, deleted=sender.counts["deleted"], dry_run=False)

        return _Job(sender, doomed(), result, "purge").run()

    # ------------------------------------------------------------------ live

    def watch(self, query: Query | None = None, /, *, limit: int, **options: Any) -> LiveWatch:
        """The newest ``limit`` ticks matching ``where`` (projected to ``columns``), kept
        current: iterate for a :class:`~tsstore.live.state.WindowUpdate` each time the window
        changes (``window``, ``entered``, ``left``, each chunk's ``read_times``).

        One listener per shard chunk, on the chunk's query limited to ``limit`` newest first;
        the window merges the chunks' reports by (timestamp, id). Snapshots that arrive
        together on several chunks make one update. Each chunk's part of a window is as of its
        own snapshot time, and each chunk's time only moves forward. ``close()`` (or ``with``)
        stops every listener."""
        q = Query.of(query, {**options, "limit": limit})
        q.only(("where", "limit", "columns"), "watch")
        columns = self.plan(q).columns
        plan = self.plan(q.replace(columns=None), direction=Direction.DESC)
        queries = [chunk_query(self._collection, plan, chunk, None, limit, listen=True) for chunk in plan.chunks]
        return LiveWatch(queries, limit, decoder(self.spec.timestamp_field, columns))

    def tail(
        self,
        query: Query | None = None,
        /,
        *,
        since: object = None,
        lateness: dt.timedelta = DEFAULT_LATENESS,
        hold: int = DEFAULT_HOLD,
        **options: Any,
    ) -> LiveTail:
        """Every tick matching ``where`` that is written from ``since`` (default: the server's
        time now) on, once each, in the order they arrive, as
        :class:`~tsstore.live.state.TailTick` values (``tick``, ``late``, ``created``).

        A tick is seen when its timestamp is at most ``lateness`` older than the newest tick
        delivered; an older one is marked ``late``. Each chunk's listener reads from that
        moving bound on and is restarted from it once it holds more than ``hold`` documents,
        so memory stays bounded however long the tail runs. Reconnections are the client's
        (its listeners resume); a tick reported again is not delivered again. ``close()``
        stops every listener."""
        q = Query.of(query, options)
        q.only(("where", "columns"), "tail")
        if not isinstance(lateness, dt.timedelta) or lateness < dt.timedelta(0):
            raise ConfigError(f"lateness {lateness!r} is not allowed; give a timedelta of zero or more")
        if isinstance(hold, bool) or not isinstance(hold, int) or hold < 1:
            raise ConfigError(f"hold {hold!r} is not allowed; give a positive number of documents")
        columns = self.plan(q).columns
        try:
            start = self.server_time() if since is None else to_utc(since, name="since")
        except ValueError as exc:
            raise QueryError(str(exc)) from None
        state = TailState(since=start, lateness=lateness)
        base = oldest_first(self.seat, q.replace(columns=None, start=state.bound()))

        def query_from(chunk: int, bound: dt.datetime) -> Any:
            plan = self.plan(base.query.replace(start=bound), direction=base.direction)
            return chunk_query(self._collection, plan, base.chunks[chunk], None, None, listen=True)

        return LiveTail(len(base.chunks), query_from, state, decoder(self.spec.timestamp_field, columns), hold=hold)

    # ------------------------------------------------------------------ layout

    def reshard(self, *, on_progress: ProgressCallback | None = None, max_passes: int = 3) -> ReshardResult:
        """Move every tick under a retired shard value onto the active values, so the retired
        values can leave the declaration. Safe to run while others read and write:

        - each tick keeps its id and content; only its shard field changes, in one
          single-document update (an update of the field, on the condition that the
          document exists), so at any snapshot a tick sits under exactly one shard value, and
          every read covers active and retired values alike: no read misses or repeats it;
        - the target value comes from the id (:func:`~tsstore.write.identity.shard_for_id`),
          so a resumed or repeated run agrees with itself, and a run after a finished one
          moves nothing; a run killed half-way is resumed by running it again;
        - writes go through the writer's bulk sender, at this store's ramped, bounded rate,
          with its retries; ``on_progress`` is called with each batch's size.

        A pass streams each retired value oldest first (ids only) and moves what it finds;
        ticks that old writers still add meanwhile are caught by a further pass, up to
        ``max_passes``. A tick deleted during the move (a purge, TTL) is counted as vanished."""
        retired = tuple(r.value for r in self.spec.retired)
        plan = self.plan(direction=Direction.ASC, columns=())
        done = ReshardResult(0, 0, self._remaining(plan, retired), 0)
        while any(done.remaining.values()) and done.passes < max_passes:
            done = self._reshard_pass(plan, done, on_progress)
        return done

    def rollup(
        self,
        rollup: Rollup,
        *,
        since: object = None,
        until: object = None,
        on_progress: ProgressCallback | None = None,
    ) -> RollupResult:
        """Compute and store the bars of ``rollup`` (declared on this store's series) for
        every closed interval: from ``since`` (aligned down to the interval), else from the
        stored watermark, else from the oldest tick; up to ``until`` or now, aligned down, so
        an interval still open is left for a later run. Bars are written through the writer
        with the roll-up spec's identity, replacing a stored bar that changed: a re-run stores
        nothing twice, and a run with ``since`` before late ticks corrects their bars. The
        watermark advances only once every bar is written, so an interrupted run is repeated
        whole by the next. ``on_progress`` gets the number of ticks read as they stream."""
        if rollup.source.collection != self.spec.collection:
            source = rollup.source.collection
            raise ConfigError(f"roll-up {rollup.name!r} rolls up {source!r}, not this store's {self.spec.collection!r}")
        marks = self.client.collection(WATERMARKS).document(rollup.name)
        stored = faults.call(lambda: marks.get(retry=None), what=f"reading the watermark of roll-up {rollup.name!r}")
        watermark = rollup.check_watermark(stored.to_dict() if stored.exists else None)
        now = self.server_time()
        try:
            limit = now if until is None else min(now, to_utc(until, name="until"))
            start = to_utc(since, name="since") if since is not None else watermark
        except ValueError as exc:
            raise QueryError(str(exc)) from None
        end = bar_start(limit, rollup.interval)
        if start is None:
            oldest = self.query(direction=Direction.ASC, limit=1, columns=())
            start = oldest[0].timestamp if len(oldest) else None
        if start is None or bar_start(start, rollup.interval) >= end:
            return RollupResult(None, None, watermark=watermark)
        start = bar_start(start, rollup.interval)
        plan, builder, _ = bars_plan(
            self.seat, Query(start=start, end=end), interval=rollup.interval, by=rollup.by, price=rollup.price,
            volume=rollup.volume,
        )  # fmt: skip
        cost = ReadStats()

        def ticks() -> Iterator[Tick]:
            for n, tick in enumerate(self._ticks(self._run(reading.read(self.seat, plan, cost))), 1):
                yield tick
                if on_progress is not None and n % 1000 == 0:
                    on_progress(1000)

        with TimeSeriesStore(self.client, rollup.spec, write_options=self.write_options) as target:
            written = target.write(rollup.records(iter_bars(builder, ticks())), keep_ids=False)
        if on_progress is not None:
            on_progress(cost.documents % 1000)
        mark = end if watermark is None else max(end, watermark)
        document = rollup.watermark_document(mark)
        faults.call(lambda: marks.set(document, retry=None), what=f"storing the watermark of roll-up {rollup.name!r}")
        return RollupResult(
            start, end, ticks=cost.documents, bars=written.count, created=written.created, replaced=written.replaced,
            present=written.present, skipped=builder.skipped, watermark=mark,
        )  # fmt: skip

    def _reshard_pass(
        self, plan: QueryPlan, before: ReshardResult, on_progress: ProgressCallback | None
    ) -> ReshardResult:
        sender = self._sender(on_progress=on_progress)
        fetch, stats = self._fetcher(plan), ReadStats()
        cursors = (sweep_cursor((value,), plan, stats) for value, left in before.remaining.items() if left)
        ticks = (tick for cursor in cursors for tick in ChunkStream(fetch, cursor))

        def result(remaining: Mapping[str, int] = before.remaining) -> ReshardResult:
            moved, vanished = before.moved + sender.counts["patched"], before.vanished + len(sender.failures)
            return ReshardResult(moved, vanished, remaining, before.passes + 1)

        _Job(sender, self._moves(ticks), result, "reshard", tolerate=frozenset({NOT_FOUND})).run()
        return result(self._remaining(plan, tuple(before.remaining)))

    def _remaining(self, plan: QueryPlan, values: tuple[str, ...]) -> dict[str, int]:
        return self._run(layout.remaining(self.seat, plan, values))

    # ------------------------------------------------------------------ the driver

    def _run(self, request: Request[R]) -> R:
        """Run a verb's request, answering its asks on this thread and the reader threads."""
        return answer(request, self._answer)

    def _answer(self, ask: Any) -> Any:
        match ask:
            case list():  # concurrently, on the reader threads
                return list(self._pool.map(self._answer, ask))
            case Aggregation(read_time=read_time):

                def aggregate(values: Sequence[str]) -> Any:
                    return ask.answered(ask.query(values).get(read_time=read_time, retry=None))

                answers = faults.call_split(aggregate, ask.values, what=ask.what, divisible=ask.divisible)
                return ask.total(answers)
            case Documents(query=query, read_time=read_time):
                return ask.answered(faults.call(lambda: query.get(read_time=read_time, retry=None), what=ask.what))
            case Collect(read=read):
                return list(self._ticks(read))
            case Feed(read=read, sink=sink):
                for tick in self._ticks(read):
                    sink(tick)
                return None
            case Unary(call=call, what=what):
                return faults.call(lambda: call(self.client), what=what)
        raise TypeError(f"no answer for {ask!r}")  # pragma: no cover - every ask is answered above

    def _stream(self, reading: Reading[T]) -> TickStream[T]:
        def items() -> Iterator[Any]:
            opening = reading.opening
            ticks = self._ticks(opening if isinstance(opening, TickRead) else self._run(opening))
            yield from ticks if reading.rows is None else frames(reading.spec, ticks, rows=reading.rows)

        return TickStream(items(), reading.stats)

    def _ticks(self, read: TickRead) -> Iterator[Tick]:
        renew = functools.partial(self._run, reading.server_time(self.seat))
        return read_ticks(read, fetch=self._fetcher(read.plan), pool=self._pool, renew=renew)

    # ------------------------------------------------------------------ internals

    def _transport(
        self,
    ) -> tuple[Callable[[list[WriteOp]], list[WriteStatus]], Callable[[list[str]], dict[str, Stored]]]:
        return (
            functools.partial(batch_write, self._collection, fast=self._fast),
            functools.partial(get_documents, self._collection),
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
            if not isinstance(item.doc.data, dict):  # deletes and patches (reshard) count nothing
                continue
            key = tuple(get_path(item.doc.data, p) for p in paths)
            if item.outcome == "created":
                tally[key] = tally.get(key, 0) + 1
            elif item.outcome == "replaced" and item.previous is not None:
                old = tuple(get_path(item.previous, p) for p in paths)
                if old != key:
                    tally[key] = tally.get(key, 0) + 1
                    tally[old] = tally.get(old, 0) - 1
        if any(tally.values()):
            receipts = self.client.collection(f"{self.spec.collection}{COUNTERS_SUFFIX}{RECEIPTS_SUFFIX}")
            increments = {self._counter_for(k): n for k, n in tally.items() if n}
            increment_counters(self.client, increments, receipt=receipts.document(uuid.uuid4().hex))

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
