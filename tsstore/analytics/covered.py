"""Aggregates answered from stored roll-ups: which source answers which part of a range,
and how the parts add up (pure logic, no Firestore).

A roll-up's bars are all stored over ``[since, watermark)`` of its watermark document
(:meth:`~tsstore.analytics.rollup.Rollup.coverage`). A range is split coarsest roll-up
first: its whole bars inside the range and its span answer that middle; what is left on
either side goes to the next finer roll-up the same way; what no roll-up covers (the edges
inside a finest bar, the time past the watermarks, before the spans) is read from the ticks.
So a day of an hourly roll-up over minute bars costs 24 bars a series, plus at most 59 minute
bars and a minute of ticks at each end.

Every part is folded into one running :class:`~tsstore.analytics.bars.Bar` (exact counts and
sums, Chan's pairwise update for the spread), so the answer is that of the ticks themselves:

- ``count``: the ticks with a price (the bars' count: a tick without a price is in no bar);
- ``sum`` of the price or the volume, ``avg``, ``min``, ``max`` and ``std`` (the sample
  standard deviation, ``None`` below two ticks) of the price.

Firestore has no min, max or standard deviation aggregation; here they come from the bars.
Filters may name the roll-ups' ``by`` fields only (``==`` or ``in``): a bar holds every tick
of its series, nothing finer. A bucket that late ticks changed after its bar was stored
carries a mark (:mod:`tsstore.late`) until the roll-up is run again: such a bar, and every
coarser bar holding it, is not used; that span is answered by finer bars or the ticks, as an
uncovered one is (``late`` parts).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tsstore.analytics.aggregate import Aggregates, Number
from tsstore.analytics.bars import Bar, bar_start, stored_bar, tick_bar
from tsstore.analytics.rollup import Rollup
from tsstore.errors import QueryError, StateError
from tsstore.read.plan import Filter
from tsstore.spec import SeriesSpec
from tsstore.ticks import Tick
from tsstore.times import bucket_ceil, interval_label, utc_text

Span = tuple[dt.datetime, dt.datetime]


@dataclass(frozen=True)
class Part:
    """One part of an aggregate's range, ``[start, end)``, and what answers it: a roll-up's
    stored bars, or the ticks."""

    #: Where the part starts (inclusive, aware UTC); ``None``: unbounded (the range has no start).
    start: dt.datetime | None
    #: Where the part stops (exclusive, aware UTC); ``None``: unbounded (the range has no end).
    end: dt.datetime | None
    #: The roll-up whose stored bars answer the part; ``None``: the ticks answer it.
    rollup: Rollup | None = None
    #: Whether a roll-up holds bars over the part that late ticks changed (marked, not rolled up
    #: again yet), so that finer bars or the ticks answer it instead.
    late: bool = False
    #: The time before which retention deleted the ticks (the latest ``purged_before`` of the
    #: roll-ups made from ticks); ``None``: none deleted, or not known.
    purged: dt.datetime | None = None

    def describe(self) -> str:
        source = "ticks" if self.rollup is None else f"{self.rollup.name} ({interval_label(self.rollup.interval)} bars)"
        why = f" ({self.late_reason})" if self.late else ""
        if self.purged is not None and (self.start is None or self.start < self.purged):
            left = "what is left of them" if self.rollup is None else "bars only"
            why += f" (ticks before {_iso(self.purged)} deleted by retention: {left})"
        return f"[{_iso(self.start)}, {_iso(self.end)}) from {source}{why}"

    late_reason = "late ticks marked there, not rolled up yet"


@dataclass(frozen=True)
class CoveredPlan:
    """Where an aggregate of ``collection`` from roll-ups takes each part of its range."""

    #: The collection of the ticks aggregated (the store's).
    collection: str
    #: The parts of the range in time order, oldest first (empty for an empty range).
    parts: tuple[Part, ...]

    def describe(self) -> str:
        if not self.parts:
            return f"{self.collection}: an empty range, nothing to read"
        lines = [f"{self.collection}: {len(self.parts)} part{'' if len(self.parts) == 1 else 's'}, oldest first"]
        lines += [f"  {part.describe()}" for part in self.parts]
        return "\n".join(lines)


def cover(
    start: dt.datetime | None, end: dt.datetime | None, sources: Sequence[Source]
) -> list[Part]:
    """The parts of ``[start, end)`` in time order: each roll-up (coarsest first) answers the
    whole bars it holds inside what the coarser ones left, but for its late spans (buckets
    late ticks have changed since it stored them), which go to the finer ones like the rest;
    the ticks answer what is left."""
    ordered = sorted(sources, key=lambda source: source[0].interval, reverse=True)
    return [part for part in _cover(start, end, ordered, False) if not _empty(part.start, part.end)]


#: A roll-up, the span it holds (``None``: none), and its late spans, oldest first.
Source = tuple[Rollup, "Span | None", "Sequence[Span]"]


def combined(
    start: dt.datetime | None, end: dt.datetime | None, rollup: Rollup, late: Sequence[Span], finer: Sequence[Source]
) -> list[Part]:
    """The parts of bars combined from ``rollup``'s over ``[start, end)`` in time order: its
    stored bars answer all but its ``late`` spans (:func:`late_spans`), which the ``finer``
    roll-ups and the ticks answer as they answer an aggregate's (:func:`cover`)."""
    ordered = sorted(finer, key=lambda source: source[0].interval, reverse=True)
    parts: list[Part] = []
    at = start
    for begin, stop in late:
        begin, stop = (begin if at is None else max(begin, at)), (stop if end is None else min(stop, end))
        if begin >= stop:
            continue
        parts += [Part(at, begin, rollup), *_cover(begin, stop, ordered, True)]
        at = stop
    parts.append(Part(at, end, rollup))
    return [part for part in parts if not _empty(part.start, part.end)]


def _cover(start: dt.datetime | None, end: dt.datetime | None, sources: Sequence[Source], late: bool) -> list[Part]:
    if _empty(start, end):
        return []
    if not sources:
        return [Part(start, end, None, late)]
    (rollup, span, marked), finer = sources[0], sources[1:]
    if span is None:
        return _cover(start, end, finer, late)
    step = rollup.interval
    low = span[0] if start is None else max(span[0], bucket_ceil(start, step))
    high = span[1] if end is None else min(span[1], bar_start(end, step))
    if low >= high:
        return _cover(start, end, finer, late)
    middle: list[Part] = []
    at = low
    for begin, stop in marked:  # the bars between late spans; the late spans as if not held
        begin, stop = max(begin, at), min(stop, high)
        if begin >= stop:
            continue
        middle += [Part(at, begin, rollup, late), *_cover(begin, stop, finer, True)]
        at = stop
    middle.append(Part(at, high, rollup, late))
    return [*_cover(start, low, finer, late), *middle, *_cover(high, end, finer, late)]


def late_spans(rollup: Rollup, marks: Mapping[str, Sequence[dt.datetime]]) -> list[Span]:
    """The spans of ``rollup``'s bars that late ticks have changed: its own marked buckets, and
    its bars holding a marked bucket of a roll-up it is made from; joined, oldest first."""
    spans: list[Span] = []
    layer: Rollup | None = rollup
    while layer is not None:
        for bucket in marks.get(layer.name, ()):
            spans.append((bar_start(bucket, rollup.interval), bucket_ceil(bucket + layer.interval, rollup.interval)))
        layer = layer.finer
    return join_spans(spans)


def join_spans(spans: Iterable[Span]) -> list[Span]:
    """``spans`` oldest first, those that touch or overlap joined into one."""
    joined: list[Span] = []
    for begin, stop in sorted(spans):
        if joined and begin <= joined[-1][1]:
            joined[-1] = (joined[-1][0], max(stop, joined[-1][1]))
        else:
            joined.append((begin, stop))
    return joined


@dataclass(frozen=True)
class CoveredSelection:
    """An aggregate to answer from ``rollups`` (of ``spec``'s ticks) and the ticks: what is
    asked, checked against what the bars hold."""

    rollups: tuple[Rollup, ...]
    price: str
    volume: str | None
    count: bool = True
    sum: tuple[str, ...] = ()
    avg: tuple[str, ...] = ()
    min: tuple[str, ...] = ()
    max: tuple[str, ...] = ()
    std: tuple[str, ...] = ()

    @classmethod
    def checked(
        cls,
        spec: SeriesSpec,
        rollups: Iterable[Rollup],
        filters: Sequence[Filter],
        *,
        count: bool,
        asked: Mapping[str, tuple[str, ...]],
    ) -> CoveredSelection:
        """The request, or a :class:`~tsstore.errors.QueryError` naming what the bars cannot
        answer: ``asked`` maps ``sum``, ``avg``, ``min``, ``max``, ``std`` to field names."""
        given = _checked_rollups(spec, rollups)
        price, volume = _common_fields(given)
        names = [r.name for r in given]
        for kind, fields in asked.items():
            allowed = (price, volume) if kind == "sum" and volume is not None else (price,)
            for name in fields:
                if name not in allowed:
                    raise QueryError(
                        f"cannot take {kind}({name}) from roll-ups {names}: their bars hold "
                        f"{' and '.join(repr(a) for a in allowed)} for {kind}"
                    )
        _check_bar_filters(given, filters)
        if not isinstance(count, bool):
            raise QueryError(f"count must be True or False, got {count!r}")
        if not (count or any(asked.values())):
            raise QueryError("nothing to aggregate: ask for count=True or sum, avg, min, max, std of fields")
        return cls(given, price, volume, count, **asked)

    def parts_of(
        self,
        start: dt.datetime | None,
        end: dt.datetime | None,
        spans: Sequence[Span | None],
        marks: Mapping[str, Sequence[dt.datetime]] | None = None,
        purged: dt.datetime | None = None,
    ) -> list[Part]:
        """:func:`cover` with each roll-up's span (in :attr:`rollups` order) and the marked
        buckets of each roll-up of :attr:`layers` (by name); ``purged``: retention deleted the
        ticks before it (each part says so)."""
        found = marks or {}
        parts = cover(start, end, [(r, span, late_spans(r, found)) for r, span in zip(self.rollups, spans)])
        return parts if purged is None else [dataclasses.replace(part, purged=purged) for part in parts]

    @property
    def layers(self) -> tuple[Rollup, ...]:
        """Every roll-up whose marks matter: the given ones and those they are made from."""
        seen: dict[str, Rollup] = {}
        for rollup in self.rollups:
            layer: Rollup | None = rollup
            while layer is not None:
                seen.setdefault(layer.name, layer)
                layer = layer.finer
        return tuple(seen.values())

    @property
    def columns(self) -> tuple[str, ...]:
        """The tick fields the uncovered parts read."""
        return (self.price,) if self.volume is None else (self.price, self.volume)

    def bar_of(self, tick: Tick, part: Part) -> Bar | None:
        """A tick of ``part`` (a tick, or a stored bar of its roll-up) as a bar to fold in;
        ``None`` for a tick without a price."""
        if part.rollup is None:
            return tick_bar(tick, (), self.price.split("."), None if self.volume is None else self.volume.split("."))
        bar = stored_bar(tick, ())
        if bar is not None and bar.sum is None and (self.sum or self.avg or self.std):
            raise StateError(
                f"roll-up {part.rollup.name!r} holds a bar at {tick.timestamp.isoformat()} without its price sums "
                f"(stored by an older tsstore); run it again from before that time (tsstore rollup --rollup "
                f"{part.rollup.name} --since ...) to store them"
            )
        return bar

    def result(self, total: Bar | None, parts: Sequence[Part]) -> Aggregates:
        """The aggregates of everything folded into ``total`` (``None``: no tick)."""
        n = 0 if total is None else total.count
        price_sum: Number = 0 if total is None or total.sum is None else total.sum
        sums = {
            name: (price_sum if name == self.price else (0 if total is None else total.volume)) for name in self.sum
        }
        std = None
        if total is not None and total.m2 is not None and n >= 2:
            std = math.sqrt(max(total.m2, 0.0) / (n - 1))
        return Aggregates(
            count=n if self.count else None,
            sum=sums,
            avg={name: (price_sum / n if n else None) for name in self.avg},
            min={name: None if total is None else total.low for name in self.min},
            max={name: None if total is None else total.high for name in self.max},
            std={name: std for name in self.std},
            sources=tuple(part.describe() for part in parts),
        )


@dataclass
class Total:
    """Every part's bars and ticks folded into one bar as they stream (``None``: none yet)."""

    bar: Bar | None = None

    def add(self, part: Bar | None) -> None:
        if part is None:
            return
        if self.bar is None:
            self.bar = part
        else:  # the order matters to open and close only, which are not asked
            self.bar.absorb(part, earlier=False)


def _empty(start: dt.datetime | None, end: dt.datetime | None) -> bool:
    return start is not None and end is not None and start >= end


def _iso(moment: dt.datetime | None) -> str:
    return "..." if moment is None else utc_text(moment)


def _checked_rollups(spec: SeriesSpec, rollups: Iterable[Rollup]) -> tuple[Rollup, ...]:
    """The roll-ups an aggregate answers from: at least one, each a roll-up of ``spec``'s
    ticks, none twice."""
    given = tuple(rollups)
    if not given:
        raise QueryError("rollups= is empty; give the roll-ups to answer from, or leave it out to ask Firestore")
    for rollup in given:
        if not isinstance(rollup, Rollup):
            raise QueryError(f"rollups= takes Rollup declarations, got {type(rollup).__name__} {rollup!r}")
        if rollup.series.collection != spec.collection:
            raise QueryError(
                f"roll-up {rollup.name!r} holds bars of {rollup.series.collection!r}, not this store's "
                f"{spec.collection!r}"
            )
    names = [r.name for r in given]
    if len(set(names)) != len(names):
        raise QueryError(f"rollups= names a roll-up twice: {names}")
    return given


def _common_fields(given: tuple[Rollup, ...]) -> tuple[str, str | None]:
    """The price and volume fields every one of the roll-ups holds."""
    price, volume = given[0].root.price, given[0].root.volume
    for rollup in given[1:]:
        if (rollup.root.price, rollup.root.volume) != (price, volume):
            raise QueryError(
                f"roll-ups {given[0].name!r} and {rollup.name!r} hold different fields (price {price!r}, volume "
                f"{volume!r}; price {rollup.root.price!r}, volume {rollup.root.volume!r}); give roll-ups of one "
                "price and volume"
            )
    return price, volume


def _check_bar_filters(given: tuple[Rollup, ...], filters: Sequence[Filter]) -> None:
    """Refuse a filter the bars cannot answer: only == or in on a ``by`` field of every roll-up."""
    for found in filters:
        outside = [r.name for r in given if found.field not in r.by]
        if found.op not in ("==", "in") or outside:
            why = f"{', '.join(outside)} {'is' if len(outside) == 1 else 'are'} not by it" if outside else "a range"
            raise QueryError(
                f"an aggregate from roll-ups filters on the roll-ups' by fields only, with == or in: "
                f"{found.describe()} cannot be answered from bars ({why}); leave out rollups= to ask Firestore"
            )
