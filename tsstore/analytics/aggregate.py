"""Aggregates over a sharded collection: what to ask each chunk, and how to combine the
answers exactly. Pure arithmetic; the stores send the requests.

Firestore answers ``count()``, ``sum(field)`` and ``avg(field)`` server-side from index
entries, so a field summed or averaged must be in the index the query uses: it is a
*measure* of the spec (``SeriesSpec(measures=[...])``), whose indexes order it after the
timestamp, and its aggregation query is ordered by it too. Such a query only sees ticks
that hold the field. So every chunk is asked, in one request per measure, for the count of
ticks holding it, its sum and its average; and, in one more request, for its plain count.
Combined:

- ``count`` is the sum of the chunks' counts (exact);
- ``sum`` of a field is the sum of the chunks' sums: exact integers while every chunk's sum
  is an integer (Firestore sums integers as integers unless they overflow 64 bits), a float
  otherwise;
- ``avg`` of a field is its total sum over the number of ticks holding a number in it. A NaN
  among the numbers makes the sum and the average NaN, as Firestore answers them.
  Firestore's ``avg`` skips values that are not numbers, so that number is the count of
  ticks holding the field when ``avg × count`` gives back the chunk's sum, and ``sum / avg``
  rounded otherwise (a chunk whose numbers average exactly 0 is taken as all numbers). An
  average of averages would be wrong whenever chunks hold different numbers of ticks. With
  no number anywhere ``avg`` is ``None``; an empty range counts 0 and sums to 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tsstore.errors import QueryError
from tsstore.spec import SeriesSpec

#: Aggregations Firestore accepts in one aggregation request.
MAX_AGGREGATIONS = 5

Aggregation = tuple[str, str, str | None]  # (kind: count/sum/avg, alias, field)
Number = int | float


@dataclass(frozen=True)
class AggregateSelection:
    """Which aggregates to compute: ``count``, and the ``sum`` and ``avg`` of measures."""

    count: bool = True
    sum: tuple[str, ...] = ()
    avg: tuple[str, ...] = ()

    @classmethod
    def checked(
        cls, spec: SeriesSpec, *, count: bool = True, sum: Iterable[str] = (), avg: Iterable[str] = ()
    ) -> AggregateSelection:
        """The request, its fields checked against ``spec``: each must be a declared measure
        (whose indexes serve its ``sum()`` and ``avg()``)."""
        sums, avgs = field_names(sum, "sum"), field_names(avg, "avg")
        for name in (*sums, *avgs):
            if name not in spec.measures:
                raise QueryError(
                    f"cannot aggregate {name!r}: it is not a measure of {spec.collection!r} (measures: "
                    f"{', '.join(spec.measures) or 'none'}); declare it in SeriesSpec(measures=[...]) and deploy "
                    "the indexes that generates, which Firestore's sum() and avg() need"
                )
        if not isinstance(count, bool):
            raise QueryError(f"count must be True or False, got {count!r}")
        if not (count or sums or avgs):
            raise QueryError("nothing to aggregate: ask for count=True, sum=[fields] or avg=[fields]")
        return cls(count=count, sum=sums, avg=avgs)

    @property
    def fields(self) -> tuple[str, ...]:
        """Every measure summed or averaged, once each, in the order given."""
        return tuple(dict.fromkeys((*self.sum, *self.avg)))

    def requests(self) -> list[tuple[str | None, list[Aggregation]]]:
        """What each chunk is asked, one request each: (the measure the query is also
        ordered by, or ``None``; its aggregations, at most :data:`MAX_AGGREGATIONS`)."""
        out: list[tuple[str | None, list[Aggregation]]] = []
        if self.count:
            out.append((None, [("count", "count", None)]))
        for i, name in enumerate(self.fields):
            asks: list[Aggregation] = [("count", f"count_{i}", None), ("sum", f"sum_{i}", name)]
            if name in self.avg:
                asks.append(("avg", f"avg_{i}", name))
            out.append((name, asks))
        return out

    def combine(self, chunks: Sequence[Mapping[str, Any]]) -> Aggregates:
        """The exact aggregates from each chunk's answers (alias → value, every request's)."""
        sums: dict[str, Number] = {}
        avgs: dict[str, float | None] = {}
        for i, name in enumerate(self.fields):
            total: Number = 0
            holding = 0
            for chunk in chunks:
                holders = _whole(chunk.get(f"count_{i}"))
                if not holders:
                    continue  # nothing to add (the emulator sums nothing as 0.0, Firestore as 0)
                part = _number(chunk.get(f"sum_{i}"))
                total += part
                holding += _holding(part, chunk.get(f"avg_{i}"), holders)
            if name in self.sum:
                sums[name] = total
            if name in self.avg:
                avgs[name] = (total / holding) if holding else None  # int / int rounds once, correctly
        count = sum(_whole(chunk.get("count")) for chunk in chunks) if self.count else None
        return Aggregates(count=count, sum=sums, avg=avgs)


@dataclass(frozen=True)
class Aggregates:
    """Combined aggregates: ``count`` ticks (``None`` when not asked for); ``sum`` and
    ``avg`` per field (``avg`` is ``None`` where no tick holds a number in the field);
    from roll-ups also ``min``, ``max`` and ``std`` (``None`` without a tick, ``std`` below
    two), and ``sources``: which part of the range each source answered
    (:mod:`tsstore.analytics.covered`)."""

    #: How many ticks matched (``None`` when the count was not asked for).
    count: int | None
    #: Each summed field's total over the matching ticks.
    sum: Mapping[str, Number] = field(default_factory=dict)
    #: Each averaged field's mean (``None`` where no tick holds a number in it).
    avg: Mapping[str, float | None] = field(default_factory=dict)
    #: Each field's smallest value, from roll-ups (``None`` without a tick).
    min: Mapping[str, Number | None] = field(default_factory=dict)
    #: Each field's largest value, from roll-ups (``None`` without a tick).
    max: Mapping[str, Number | None] = field(default_factory=dict)
    #: Each field's sample standard deviation, from roll-ups (``None`` below two ticks).
    std: Mapping[str, float | None] = field(default_factory=dict)
    #: Which source answered which part of the range (a roll-up's bars, or the ticks).
    sources: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Number | None]:
        """``{"count": n, "sum(volume)": s, "avg(price.micros)": a}`` (and ``min(...)``,
        ``max(...)``, ``std(...)`` when asked)."""
        out: dict[str, Number | None] = {} if self.count is None else {"count": self.count}
        for kind in ("sum", "avg", "min", "max", "std"):
            out.update({f"{kind}({k})": v for k, v in getattr(self, kind).items()})
        return out


def field_names(names: Iterable[str] | str, what: str) -> tuple[str, ...]:
    """``names`` (one name, or several) as a tuple, refusing a name given twice."""
    if isinstance(names, str):
        names = (names,)
    out = tuple(names)
    if len(set(out)) != len(out):
        raise QueryError(f"{what} names a field twice: {list(out)}")
    return out


def _whole(value: Any) -> int:
    return 0 if value is None else int(value)  # the emulator reports an empty count as 0.0


def _number(value: Any) -> Number:
    return 0 if value is None else value


def _holding(chunk_sum: Number, chunk_avg: Any, count: int) -> int:
    """How many of the ``count`` ticks of a chunk holding the field hold a number in it."""
    if chunk_avg is None or count == 0:
        return 0
    if math.isnan(chunk_avg) or math.isnan(chunk_sum):  # a NaN among the numbers: the answer is NaN, as Firestore's
        return count
    if chunk_avg == 0 or math.isclose(chunk_avg * count, chunk_sum, rel_tol=1e-9, abs_tol=1e-9):
        return count
    holding: int = round(chunk_sum / chunk_avg)
    return holding
