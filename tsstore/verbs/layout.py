"""The shard layout as requests: the census of shard values (the rounds are
:class:`tsstore.layout.census.Census`'s; this module turns its asks into Firestore's), and the
move of ticks off retired values."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass

from tsstore.asks import Doc, ask, asked_together, asked_with
from tsstore.census_asks import FirstValue
from tsstore.errors import QueryError
from tsstore.layout.census import Census, ShardCensus
from tsstore.read.chunks import ChunkTicks
from tsstore.read.cost import ReadStats
from tsstore.read.engine import TickRead, sweep_cursor
from tsstore.read.plan import QueryPlan, plan_query
from tsstore.results import ReshardResult
from tsstore.spec import Direction
from tsstore.ticks import Tick, get_path
from tsstore.times import TimeLike, to_utc
from tsstore.verbs.reading import snapshot_now
from tsstore.verbs.request import Count, Documents, Request, Seat, Send, billed
from tsstore.verbs.writing import ProgressCallback
from tsstore.write.identity import shard_for_id
from tsstore.write.ops import NOT_FOUND, Patch
from tsstore.write.prepare import PreparedDoc
from tsstore.write.sender import BulkSender
from tsstore.write.writer import Making, SendOptions

#: What each parameter of these verbs means (the API reference describes a parameter from
#: here unless the verb's docstring says more).
PARAMETER_HELP = {
    "since": "count the ticks from this instant on (e.g. the last layout change); ``None``: all",
    "on_progress": "called with each moved batch's size",
    "max_passes": "passes over the retired values at most (a further pass catches what old writers added meanwhile)",
}


def shard_census(
    seat: Seat, *, since: TimeLike | None = None, read_time: dt.datetime | None = None
) -> Request[ShardCensus]:
    """How many ticks each shard value holds, which values documents carry that the
    declaration does not list, and how evenly the active values share ticks (since
    ``since``, when given, e.g. the last layout change). All at one snapshot, by count
    aggregations and limit-1 queries: see :mod:`tsstore.layout.census`."""
    try:
        since_t = None if since is None else to_utc(since, name="since")
    except ValueError as exc:
        raise QueryError(str(exc)) from None
    stats = ReadStats()
    snapshot = read_time or (yield from snapshot_now(seat, stats))
    census = Census(seat.spec, since=since_t, read_time=snapshot, stats=stats)
    asks = census.first()
    while asks:
        stats.waited()
        counted, firsts = yield from asked_with(
            [Count(ask, snapshot) for ask in asks if not isinstance(ask, FirstValue)],
            [Documents(ask, snapshot) for ask in asks if isinstance(ask, FirstValue)],
        )
        totals, found = iter(billed(counted, stats)), iter(firsts)
        asks = census.feed([_first_value(seat, next(found), stats) if isinstance(ask, FirstValue) else next(totals)
                            for ask in asks])  # fmt: skip
    return census.result()


def _first_value(seat: Seat, answer: list[Doc], stats: ReadStats) -> str | None:
    """The shard value of the first document of a census range (``None``: none), billed into ``stats``."""
    stats.query_done(len(answer))
    return None if not answer else get_path(answer[0].data or {}, seat.spec.shard_field.split("."))


def remaining(seat: Seat, plan: QueryPlan, values: tuple[str, ...]) -> Request[dict[str, int]]:
    """Ticks under each of ``values`` (retired shard values a reshard empties), at one snapshot."""
    stats = ReadStats()
    snapshot = (yield from snapshot_now(seat, stats)) if len(values) > 1 else None
    counts = yield from asked_together([Count(ChunkTicks(plan, (value,)), snapshot) for value in values])
    return dict(zip(values, billed(counts, stats)))


@dataclass(frozen=True)
class _Moving(Making[ReshardResult]):
    """One pass of a reshard: each tick as a patch of its shard field only, onto the active
    value its id picks; the pass's result adds what it moved (and what vanished meanwhile)
    to what the passes ``before`` it did."""

    shard_field: str
    shards: tuple[str, ...]
    before: ReshardResult

    def docs(self, ticks: Iterator[Tick]) -> Iterator[PreparedDoc]:
        for i, tick in enumerate(ticks):
            moved = Patch({self.shard_field: shard_for_id(tick.id, self.shards)}, tick.timestamp)  # a sealed day: marked
            yield PreparedDoc(i, tick.id, moved, 0)

    def result(self, sender: BulkSender) -> ReshardResult:
        before = self.before
        moved, vanished = before.moved + sender.counts["patched"], before.vanished + len(sender.failures)
        return ReshardResult(moved, vanished, before.remaining, before.passes + 1)


def reshard(seat: Seat, *, on_progress: ProgressCallback | None = None, max_passes: int = 3) -> Request[ReshardResult]:
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
    ``max_passes``. A tick deleted during the move (a purge, TTL) is counted as vanished.
    Reads of series shapes (``series_rate``) have no shard filter: a move does not touch
    what they see."""
    spec = seat.spec
    retired = tuple(r.value for r in spec.retired)
    plan = plan_query(spec, direction=Direction.ASC, columns=())
    done = ReshardResult(0, 0, (yield from remaining(seat, plan, retired)), 0)
    while any(done.remaining.values()) and done.passes < max_passes:
        before, stats = done, ReadStats()
        cursors = [sweep_cursor((value,), plan, stats) for value, left in before.remaining.items() if left]
        read = TickRead(plan, cursors=cursors, sweep=True)
        passed = yield from ask(Send(_Moving(spec.shard_field, spec.shards, before), "reshard", read=read,
                            tolerate=frozenset({NOT_FOUND}), options=SendOptions(on_progress=on_progress)))  # fmt: skip
        done = dataclasses.replace(passed, remaining=(yield from remaining(seat, plan, tuple(before.remaining))))
    return done
