"""Retention as a request: deleting the ticks of a time range."""

from __future__ import annotations

from collections.abc import Iterator

from tsstore.errors import QueryError
from tsstore.read.cost import ReadStats
from tsstore.read.engine import TickRead, sweep_cursor
from tsstore.read.query import Query, Where, given
from tsstore.results import PurgeResult
from tsstore.ticks import Tick
from tsstore.verbs.analytics import oldest_first
from tsstore.verbs.reading import count
from tsstore.verbs.request import Request, Seat, Send
from tsstore.verbs.writing import ProgressCallback
from tsstore.write.prepare import PreparedDoc
from tsstore.write.sender import BulkSender


def purge(
    seat: Seat,
    query: Query | None = None,
    /,
    *,
    before: object = None,
    start: object = None,
    end: object = None,
    where: Where = None,
    dry_run: bool = False,
    on_progress: ProgressCallback | None = None,
) -> Request[PurgeResult]:
    """Delete the ticks before ``before`` (or in ``[start, end)``), optionally filtered by
    ``where``; ``dry_run=True`` only counts, ``on_progress`` is called with each batch's
    size. The bounds may come as a :class:`~tsstore.read.query.Query` (where, start, end).

    Each shard chunk is read oldest first as one stream (ids and timestamps only, resumed
    after its last tick if it breaks off, at no shared snapshot), and its ticks are deleted
    with the writer's bulk batches at its bounded, ramped rate. A purge needs at least one
    time bound."""
    bounds = Query.of(query, given(where=where, start=start, end=end))
    bounds.only(("where", "start", "end"), "purge")
    if before is not None:
        if bounds.end is not None or bounds.start is not None:
            raise QueryError("give either before (everything older) or start/end (a range), not both")
        bounds = bounds.replace(end=before)
    if bounds.start is None and bounds.end is None:
        raise QueryError("purge needs a time bound: before=, or start=/end=; refusing to delete everything")
    plan = oldest_first(seat, bounds.replace(columns=()))
    matched = yield from count(seat, bounds)
    if dry_run:
        return PurgeResult(matched=matched, deleted=0, dry_run=True)
    # No shared snapshot: each chunk is one stream at its own time, resumed after its last
    # tick on an error, so a purge may outlast read_time's hour.
    stats = ReadStats()
    sweep = TickRead(plan, cursors=[sweep_cursor(chunk, plan, stats) for chunk in plan.chunks], sweep=True)

    def doomed(ticks: Iterator[Tick]) -> Iterator[PreparedDoc]:
        return (PreparedDoc(i, tick.id, None, 0) for i, tick in enumerate(ticks))

    def result(sender: BulkSender) -> PurgeResult:
        return PurgeResult(matched=matched, deleted=sender.counts["deleted"], dry_run=False)

    purged: PurgeResult = yield Send(doomed, result, "purge", read=sweep, options={"on_progress": on_progress})
    return purged
