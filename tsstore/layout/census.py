"""The shard census: how many ticks each shard value holds, which values the declaration does
not list, and how evenly the writer spreads ticks over the active values.

Decided here without I/O, in rounds, like the read engine's pages: :class:`Census` hands out
*asks* (count one value, count a gap between declared values, name the first value in a gap,
count the whole collection) and takes their answers; a store runs each round's asks
concurrently at one snapshot (:mod:`tsstore.read.chunks` builds their queries).

Finding undeclared values reads no ticks: the whole collection's ``count()`` (Firestore's
built-in index) is compared with the sum of the declared values' counts; only when they
differ are the string ranges between declared values counted, and a non-empty range is named
one value at a time with a limit-1 query on the shard field. Those range queries order by
(shard desc, timestamp desc): the index of the plain time range, newest first, which every
declaration deploys.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any, Literal

from google.cloud.firestore_v1.base_collection import BaseCollectionReference
from google.cloud.firestore_v1.base_query import BaseQuery, FieldFilter

from tsstore.census_asks import Ask, CountAll, CountRange, CountValue, FirstValue
from tsstore.indexes.build import SHARD_ORDER
from tsstore.read.chunks import chunk_query
from tsstore.read.cost import ReadStats
from tsstore.read.plan import plan_query
from tsstore.spec import SeriesSpec

#: How many undeclared values a census names at most (the rest are counted, not named).
MAX_NAMED = 100
#: A shard whose count is further than this many standard deviations from the mean of a
#: uniform spread marks the spread uneven (at 90 shards a uniform writer does so about once
#: in 200 censuses).
SPREAD_SIGMAS = 4.0
#: Below this many ticks per active shard the spread is not judged.
SPREAD_MIN_PER_SHARD = 20


Role = Literal["active", "retired", "undeclared"]


@dataclass(frozen=True)
class ShardCount:
    """One shard value: its role in the declaration and the ticks it holds."""

    #: The shard value.
    value: str
    #: ``"active"`` (the writers write it), ``"retired"`` (declared, read, no longer written) or
    #: ``"undeclared"`` (documents carry it, the declaration does not list it).
    role: Role
    #: The ticks under the value (every document that carries it).
    ticks: int
    #: For a retired value with ``until``, the ticks at or after it (which a read from ``until`` on
    #: would skip; it should be 0); ``None`` for any other value.
    late: int | None = None
    #: For an active value, the ticks at or after the census' ``since``; ``None`` without
    #: ``since``, or for a value not active.
    recent: int | None = None


@dataclass(frozen=True)
class Spread:
    """How evenly ticks lie over the active values: ``worst`` is the value furthest from the
    mean, ``sigmas`` how many standard deviations of a uniform spread that is, ``even``
    ``None`` when there are too few ticks to tell."""

    counts: int
    mean: float
    low: int
    high: int
    worst: str
    sigmas: float
    even: bool | None

    def describe(self) -> str:
        if self.even is None:
            return f"spread: too few ticks to judge ({self.counts} over the active values)"
        verdict = "even" if self.even else f"UNEVEN: {self.worst} is {self.sigmas:.1f} sigmas off (hot-spot risk)"
        ratio = self.high / self.mean if self.mean else 0.0
        return f"spread over active values: min {self.low}, max {self.high}, max/mean {ratio:.2f}, {verdict}"


@dataclass(frozen=True)
class ShardCensus:
    """What :meth:`TimeSeriesStore.shard_census <tsstore.store.TimeSeriesStore.shard_census>`
    found, all at one ``read_time``. The series shapes read without a shard filter do see
    undeclared values, so the two plans disagree until those are declared."""

    #: The collection counted.
    collection: str
    read_time: dt.datetime | None
    #: The ticks per shard value: declared values first, in declaration order, then undeclared ones.
    rows: tuple[ShardCount, ...]
    #: The documents in the collection.
    total: int
    #: Undeclared ticks beyond the :data:`MAX_NAMED` values named in ``rows``.
    unnamed: int
    #: Documents with no string shard value at all.
    other: int
    #: The start of the window the spread over active values is judged on; ``None``: all ticks.
    since: dt.datetime | None
    stats: ReadStats = field(compare=False)
    #: The declared shapes read as one series (without a shard filter).
    series_shapes: tuple[str, ...] = ()

    def ticks(self, role: Role | None = None) -> int:
        """The ticks counted under the shard values of one role.

        - ``role``: ``"active"``, ``"retired"`` or ``"undeclared"``; ``None``: every named value"""
        return sum(r.ticks for r in self.rows if role is None or r.role == role)

    def count_of(self, value: str) -> int:
        """The ticks under one shard value (0 for a value no document carries).

        - ``value``: the shard value"""
        return next((r.ticks for r in self.rows if r.value == value), 0)

    @property
    def undeclared(self) -> tuple[ShardCount, ...]:
        return tuple(r for r in self.rows if r.role == "undeclared")

    @property
    def spread(self) -> Spread:
        active = [r for r in self.rows if r.role == "active"]
        counts = [r.recent if r.recent is not None else r.ticks for r in active]
        total, n = sum(counts), len(counts)
        mean = total / n
        sd = math.sqrt(total * (1 / n) * (1 - 1 / n)) if n > 1 else 0.0
        worst_i = max(range(n), key=lambda i: abs(counts[i] - mean))
        sigmas = abs(counts[worst_i] - mean) / sd if sd else 0.0
        judged = n > 1 and mean >= SPREAD_MIN_PER_SHARD
        return Spread(total, mean, min(counts), max(counts), active[worst_i].value, sigmas,
                      (sigmas <= SPREAD_SIGMAS) if judged else None)  # fmt: skip

    def problems(self) -> list[str]:
        """What needs attention, one sentence each (empty: nothing)."""
        out = []
        if self.undeclared or self.unnamed:
            named = ", ".join(f"{r.value!r} ({r.ticks})" for r in self.undeclared[:10])
            more = f" and {self.unnamed} more under values not named" if self.unnamed else ""
            seen = (
                f"sharded reads do not see them, reads of the series shapes {', '.join(self.series_shapes)} (no shard "
                "filter) do"
                if self.series_shapes
                else "reads do not see them"
            )
            out.append(
                f"{self.ticks('undeclared') + self.unnamed} ticks carry shard values the declaration does not list "
                f"({named}{more}): {seen}; add them to 'retired' (then `tsstore reshard` can move them)"
            )
        if self.other:
            seen = "only series-shape reads see them" if self.series_shapes else "no read of this collection sees them"
            out.append(f"{self.other} documents have no string shard value; {seen}")
        for r in self.rows:
            if r.late:
                out.append(
                    f"retired value {r.value!r} holds {r.late} ticks at or after its 'until'; reads starting then "
                    "skip them: move 'until' later or run `tsstore reshard`"
                )
        if self.spread.even is False:
            out.append(self.spread.describe())
        return out

    def describe(self) -> str:
        at = self.read_time.isoformat() if self.read_time else "now"
        lines = [f"{self.collection}: {self.total} documents at {at}", f"{'shard':<12} {'role':<10} {'ticks':>10}"]
        for r in self.rows:
            late = f"  ({r.late} at or after until)" if r.late else ""
            lines.append(f"{r.value:<12} {r.role:<10} {r.ticks:>10}{late}")
        if self.unnamed:
            lines.append(f"{'(unnamed)':<12} {'undeclared':<10} {self.unnamed:>10}")
        if self.other:
            lines.append(f"{'(no shard)':<12} {'':<10} {self.other:>10}")
        window = f" since {self.since.isoformat()}" if self.since else ""
        lines.append(self.spread.describe() + window)
        lines += [f"problem: {p}" for p in self.problems()] or ["no problems: every document is under a declared value"]
        lines.append(f"cost: {self.stats.describe()}")
        return "\n".join(lines)


class Census:
    """The rounds of one census. ``first()`` gives the first round's asks; ``feed(answers)``
    takes them in order and gives the next round's (empty when done); ``result()``."""

    def __init__(self, spec: SeriesSpec, *, since: dt.datetime | None, read_time: dt.datetime | None,
                 stats: ReadStats) -> None:  # fmt: skip
        self.spec = spec
        self.since = since
        self.read_time = read_time
        self.stats = stats
        self._declared = {v: ("active" if v in spec.shards else "retired") for v in spec.read_shards}
        self._counts: dict[str, int] = {}
        self._late: dict[str, int] = {}
        self._recent: dict[str, int] = {}
        self._total = 0
        self._in_ranges = 0
        self._named = 0
        self._pending: list[Ask] = []

    def first(self) -> list[Ask]:
        asks: list[Ask] = [CountAll()]
        asks += [CountValue(v) for v in self.spec.read_shards]
        asks += [CountValue(r.value, r.until) for r in self.spec.retired if r.until is not None]
        if self.since is not None:
            asks += [CountValue(v, self.since) for v in self.spec.shards]
        return self._out(asks)

    def feed(self, answers: list[int | str | None]) -> list[Ask]:
        asks, self._pending = self._pending, []
        following: list[Ask] = []
        for ask, answer in zip(asks, answers, strict=True):
            if isinstance(ask, CountAll):
                self._total = _int(answer)
            elif isinstance(ask, CountValue) and ask.since is None:
                self._counts[ask.value] = _int(answer)
            elif isinstance(ask, CountValue):
                target = self._late if self._declared.get(ask.value) == "retired" else self._recent
                target[ask.value] = _int(answer)
            elif isinstance(ask, CountRange):
                self._in_ranges += _int(answer)
                if _int(answer):
                    following.append(FirstValue(ask.low, ask.high))
            elif isinstance(answer, str):  # FirstValue found one: count it, look below it
                following += [CountValue(answer), FirstValue(ask.low, answer)]
        if isinstance(asks[0], CountAll):  # the first round: any ticks outside the declared values?
            missing = self._total - sum(self._counts.values())
            if missing > 0:
                bounds: list[str | None] = [None, *sorted(self._declared), None]
                following = [CountRange(lo, hi) for lo, hi in zip(bounds, bounds[1:])]
        named = [a for a in following if isinstance(a, CountValue)]
        self._named += len(named)
        if self._named > MAX_NAMED:  # stop naming: what is left is counted as unnamed
            following = [a for a in following if not isinstance(a, FirstValue)]
        return self._out(following)

    def result(self) -> ShardCensus:
        rows = [
            ShardCount(v, role, self._counts.get(v, 0), self._late.get(v), self._recent.get(v))  # type: ignore[arg-type]
            for v, role in self._declared.items()
        ]
        rows += [ShardCount(v, "undeclared", n) for v, n in sorted(self._counts.items()) if v not in self._declared]
        declared = sum(n for v, n in self._counts.items() if v in self._declared)
        named = sum(n for v, n in self._counts.items() if v not in self._declared)
        # The string ranges between declared values hold every undeclared string value: what
        # was not named (past MAX_NAMED) is unnamed; the rest of the total has no string shard.
        unnamed = self._in_ranges - named
        other = self._total - declared - self._in_ranges
        series = tuple(shape.describe() for shape in self.spec.series_shapes)
        return ShardCensus(self.spec.collection, self.read_time, tuple(rows), self._total, unnamed, other,
                           self.since, self.stats, series)  # fmt: skip

    def _out(self, asks: list[Ask]) -> list[Ask]:
        self._pending = asks
        return asks


def _int(answer: int | str | None) -> int:
    return int(answer or 0)


def census_query(collection: BaseCollectionReference[Any], spec: SeriesSpec, ask: Ask) -> BaseQuery:
    """The query of one census ask : a count is run on it with
    ``count()``, a :class:`FirstValue` as it is."""
    if isinstance(ask, CountAll):
        return collection  # type: ignore[return-value]  # a collection is a query of everything
    if isinstance(ask, CountValue):
        plan = plan_query(spec, start=ask.since)
        return chunk_query(collection, plan, (ask.value,), None, None)
    query: Any = collection
    if ask.low is not None:
        query = query.where(filter=FieldFilter(spec.shard_field, ">", ask.low))
    if ask.high is not None:
        query = query.where(filter=FieldFilter(spec.shard_field, "<", ask.high))
    # The order of the plain time range's index, newest first: (shard desc, timestamp desc).
    query = query.order_by(spec.shard_field, direction=SHARD_ORDER).order_by(
        spec.timestamp_field, direction="DESCENDING"
    )
    asked: BaseQuery = query.select([spec.shard_field]).limit(1) if isinstance(ask, FirstValue) else query
    return asked
