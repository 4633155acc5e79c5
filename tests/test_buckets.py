"""Zone-aligned and filled bars (issue: calendar buckets and fills) against pandas ``resample``.

The oracle is pandas, with its rules written out here (not taken from tsstore):
``resample(closed="left", label="left")`` on the same ticks, ``origin="epoch"`` (or the
origin given) for fixed steps on the tz-aware index; calendar days on local wall time
(``"nD"`` with ``origin="epoch"`` on the tz-naive local times, labels localized back), weeks
as ``W-MON``, months as ``MS``; ``nW`` and ``nM`` for n > 1 anchored on an edge counted from
1970 by a sentinel row before the ticks (pandas anchors those on the first row). Open and
close are the prices of the first and last tick in the read engine's order (timestamp, then
document id), so the oracle aggregates tick positions, not prices, and stays right where
local wall time repeats (the fall-back hour).
A fill is pandas' own empty bins between a series' first and last bar: count and volume 0,
prices the previous close (``"prev"``) or missing (``"nan"``).

- Pure (no Firestore): :class:`Buckets` starts and ends across the 2024 America/New_York
  changes (a day of 23 h and one of 25 h), Monday weeks, months, ``nD`` counted from
  1970-01-01, explicit origins, ticks exactly on an edge, the UTC default, and the refusals;
  then a hypothesis property: :class:`BarBuilder` with and without a fill, ticks given oldest
  or newest first, equals the oracle on random ticks around daylight-saving changes (1969
  and 2024) with ties on bucket edges.
- On the emulator: the same ~600 ticks written at 3 and 40 shards, ``store.bars`` for
  1h and 7min in New York, 1D with both fills, 1W, 1M, 2D, 3M, explicit origins, with and
  without ``by``, a range and a newest-first read (all at 3 shards; at 40, one of each kind
  of read): each equal to the oracle, dtypes and the zone of the index included. The async
  store gives the sync frame, and ``tsstore bars --tz --fill`` prints it.
"""

from __future__ import annotations

import asyncio
import bisect
import copy
import datetime as dt
import functools
import io
import random
import re
import statistics
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.cli import tsstore
from tests.mutants import Mutation, bites, edge_moved, tie_flipped
from tsstore import AsyncTimeSeriesStore, QueryError, QueryShape, SeriesSpec, TimeSeriesStore, shards_for
from tsstore.analytics.bars import (
    EPOCH,
    BarBuilder,
    bar_start,
    bars_frame,
    check_combinable,
    iter_bars,
    side_by_side,
)
from tsstore.analytics.buckets import Buckets, buckets, check_fill, to_zone
from tsstore.analytics.rollup import Rollup
from tsstore.read.cost import ReadStats
from tsstore.ticks import Tick
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

UTC = dt.timezone.utc
NEW_YORK = "America/New_York"
NY = ZoneInfo(NEW_YORK)
SPRING = dt.datetime(2024, 3, 10, 7, tzinfo=UTC)  # 02:00 EST -> 03:00 EDT
FALL = dt.datetime(2024, 11, 3, 6, tzinfo=UTC)  # 02:00 EDT -> 01:00 EST: 01:00-01:59 twice
FALL_1969 = dt.datetime(1969, 10, 26, 6, tzinfo=UTC)  # before the epoch: negative counts
OPEN_0930 = dt.datetime(2024, 3, 4, 9, 30, tzinfo=NY)  # a Monday's opening bell, EST (14:30Z)
EVENING_1700 = dt.datetime(2024, 3, 4, 17, tzinfo=NY)  # a trading day from 17:00 EST (22:00Z)
US = dt.timedelta(microseconds=1)
FAST = EMULATOR_WRITE_OPTIONS  # no ramp, no ceiling: the emulator is the tests' own


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, us: int = 0) -> dt.datetime:
    return dt.datetime(year, month, day, hour, minute, second, us, tzinfo=UTC)


def midnight(day: dt.date, zone: dt.tzinfo = NY) -> dt.datetime:
    """Local midnight of ``day`` in ``zone``, in UTC (by zoneinfo, not by tsstore)."""
    return dt.datetime(day.year, day.month, day.day, tzinfo=zone).astimezone(UTC)


# ------------------------------------------------------------------------------ the oracle


@dataclass(frozen=True)
class Rule:
    """How pandas cuts the buckets: ``fixed`` steps (``freq``, ``origin``) on the tz-aware
    index, ``days`` (``nD``, origin epoch) on local wall time, ``clock`` steps on local wall
    time from midnight plus ``origin`` (an offset: a time of day), ``aware`` calendar offsets
    (``W-MON``, ``MS``) on the tz-aware index, or ``anchored`` (``nW-MON``, ``nMS``) on local
    wall time from a sentinel row at ``origin``: an edge counted from 1970 (a whole number of
    n-week or n-month buckets before 1970-01-05 or January 1970) earlier than every tick."""

    kind: str
    freq: str
    origin: Any = "epoch"


@dataclass(frozen=True)
class Case:
    """One bars request (``interval``, ``tz``, ``origin``, ``fill``, ``by``) and its oracle rule."""

    name: str
    interval: Any
    rule: Rule
    tz: str | None = NEW_YORK
    origin: Any = None
    fill: str | None = None
    by: tuple[str, ...] = ("symbol",)
    where: dict[str, Any] = field(default_factory=dict)
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    span_days: float = 1.5  # the property test's reach around a change: bounds the filled bars

    @property
    def zone(self) -> str:
        return self.tz or "UTC"


@dataclass
class Bins:
    """pandas' bins of some ticks, per series from its first bin to its last, empty ones
    included: the series ``keys``, the bins' ``starts`` (instants in the case's zone), and
    for each bin its ``count``, ``volume``, ``high``, ``low`` and the prices of its ``first``
    and ``last`` tick in the engine's order (``None`` where it holds none)."""

    keys: list[str]
    starts: pd.DatetimeIndex
    count: list[int]
    volume: list[int]
    first: list[int | None]
    last: list[int | None]
    high: list[int | None]
    low: list[int | None]


def pandas_bins(ticks: pd.DataFrame, case: Case) -> Bins:
    """pandas' bins of ``ticks`` (columns symbol, id, timestamp (UTC), price, volume) under
    ``case.rule``, per series when ``case.by``."""
    rule = case.rule
    stamps = pd.DatetimeIndex(ticks["timestamp"])
    order = np.lexsort((ticks["id"].to_numpy(), stamps.asi8))  # the read engine's order
    prices = ticks["price"].to_numpy(dtype=np.int64)[order]
    volumes = ticks["volume"].to_numpy(dtype=np.int64)[order]
    keys = ticks["symbol"].to_numpy()[order] if case.by else np.full(len(order), "", dtype=object)
    at = stamps[order].tz_convert(case.zone)
    options: dict[str, Any] = {}
    naive = rule.kind in ("days", "anchored", "clock")
    index = at.tz_localize(None) if naive else at  # local wall time, or the instants
    if rule.kind in ("fixed", "days"):
        options["origin"] = rule.origin if rule.origin == "epoch" else pd.Timestamp(rule.origin)
    if rule.kind == "clock":  # a time of day: edges at that wall time each day, an offset from midnight
        options.update(origin="epoch", offset=rule.origin)
    rows = pd.Series(1.0, index=index)
    if rule.kind == "anchored":  # pandas anchors nW / nM on the first row: make it an edge counted from 1970
        rows = pd.concat([pd.Series(np.nan, index=pd.DatetimeIndex([rule.origin])), rows])
    # pandas' bins, labelled by their starts: one resample of every row. With origin "epoch",
    # a given origin or a calendar anchor (or the sentinel), a bin's edges do not depend on
    # which rows fall in it, so each series' bins (what groupby("key").resample gives, from its
    # first row's bin to its last one's, empty ones included) are a run of these; a row's bin
    # is the last start at or before it (the bins are closed on the left and tile the line).
    labels = rows.resample(rule.freq, closed="left", label="left", **options).count().index
    slots = labels.searchsorted(index, side="right") - 1
    bins = Bins([], labels[:0], [], [], [], [], [], [])
    taken: list[int] = []
    for key in sorted(set(keys)):
        mine = np.flatnonzero(keys == key)
        held: dict[int, list[int]] = {}
        for row in mine:
            held.setdefault(int(slots[row]), []).append(int(row))
        for slot in range(int(slots[mine[0]]), int(slots[mine[-1]]) + 1):
            members = held.get(slot, [])
            bins.keys.append(key)
            taken.append(slot)
            bins.count.append(len(members))
            bins.volume.append(int(volumes[members].sum()) if members else 0)
            bins.first.append(int(prices[members[0]]) if members else None)
            bins.last.append(int(prices[members[-1]]) if members else None)
            bins.high.append(int(prices[members].max()) if members else None)
            bins.low.append(int(prices[members].min()) if members else None)
    starts = labels[taken]
    bins.starts = (starts.tz_localize(case.zone) if naive else starts).tz_convert(case.zone).as_unit("us")
    bins.starts = bins.starts.rename("timestamp")
    return bins


def oracle(ticks: pd.DataFrame, case: Case) -> pd.DataFrame:
    """pandas' bars of ``ticks`` (columns symbol, id, timestamp (UTC), price, volume) under
    ``case.rule``, shaped as tsstore's frame."""
    bins = pandas_bins(ticks, case)
    kept = [i for i, n in enumerate(bins.count) if n or case.fill is not None]
    columns: dict[str, list[Any]] = {"open": bins.first, "high": bins.high, "low": bins.low, "close": bins.last}
    if case.fill == "prev":  # an empty bin's prices: its series' last close before it
        carried: list[int | None] = []
        for i, close in enumerate(bins.last):
            carried.append(close if close is not None or i == 0 or bins.keys[i - 1] != bins.keys[i] else carried[-1])
        columns = {name: [v if n else c for v, n, c in zip(column, bins.count, carried)]
                   for name, column in columns.items()}  # fmt: skip
    columns.update(count=bins.count, volume=bins.volume)
    index: pd.Index = bins.starts[kept]
    if case.by:
        index = pd.MultiIndex.from_arrays([pd.Index([bins.keys[i] for i in kept], name="symbol"), index])
    return pd.DataFrame({name: pd.array([column[i] for i in kept], dtype="Int64") for name, column in columns.items()},
                        index=index)  # fmt: skip


def same_frame(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """Equal values, dtypes and index (the zone of the bar starts included)."""
    pd.testing.assert_frame_equal(got, want, check_index_type=True, check_exact=True, check_freq=False)
    starts = got.index if isinstance(got.index, pd.DatetimeIndex) else got.index.get_level_values(-1)
    assert str(starts.dtype) == str(want.index.get_level_values(-1).dtype)


# ------------------------------------------------------------------------------ buckets, pure


def test_a_new_york_day_is_23_hours_on_the_spring_change_and_25_on_the_fall_change() -> None:
    days = buckets("1D", tz=NEW_YORK)
    spring = days.start(utc(2024, 3, 10, 12))
    assert spring == utc(2024, 3, 10, 5) and days.after(spring) == utc(2024, 3, 11, 4)  # 00:00 EST, 00:00 EDT
    assert days.after(spring) - spring == dt.timedelta(hours=23)
    fall = days.start(utc(2024, 11, 3, 12))
    assert fall == utc(2024, 11, 3, 4) and days.after(fall) == utc(2024, 11, 4, 5)
    assert days.after(fall) - fall == dt.timedelta(hours=25)
    # both 01:30s of the fall-back night, and the instants around the spring gap, are one day
    assert {days.start(t) for t in (utc(2024, 11, 3, 5, 30), utc(2024, 11, 3, 6, 30), utc(2024, 11, 4, 4, 59))} == {
        fall
    }
    assert {days.start(t) for t in (SPRING - US, SPRING, utc(2024, 3, 11, 3, 59, 59))} == {spring}
    assert days.start(utc(2024, 3, 11, 4)) == utc(2024, 3, 11, 4)  # EDT midnight opens the 11th
    assert days.start(utc(2024, 11, 4, 4, 30)) == fall  # 23:30 EST on the 3rd, not the 4th
    assert days.utc is False and buckets("1D").utc is True
    assert buckets("1D").start(utc(2024, 3, 10, 23)) == utc(2024, 3, 10)  # UTC: days from 00:00Z
    tokyo = buckets("1D", tz="Asia/Tokyo")  # east of UTC: the day starts the evening before in UTC
    assert tokyo.start(utc(2024, 3, 10, 14, 59)) == utc(2024, 3, 9, 15) and tokyo.start(utc(2024, 3, 10, 15)) == utc(
        2024, 3, 10, 15
    )


def test_weeks_start_on_monday_local_midnight_and_n_weeks_count_from_monday_1970_01_05() -> None:
    weeks = buckets("1W", tz=NEW_YORK)
    sunday = utc(2024, 3, 10, 12)  # the spring change is a Sunday: its week began Monday 03-04, EST
    assert weeks.start(sunday) == utc(2024, 3, 4, 5) and weeks.after(utc(2024, 3, 4, 5)) == utc(2024, 3, 11, 4)
    assert weeks.after(utc(2024, 3, 4, 5)) - utc(2024, 3, 4, 5) == dt.timedelta(days=7, hours=-1)
    assert weeks.start(utc(2024, 3, 11, 4)) == utc(2024, 3, 11, 4)  # Monday midnight EDT opens a week
    assert weeks.start(utc(2024, 3, 11, 4) - US) == utc(2024, 3, 4, 5)
    fall_week = weeks.start(utc(2024, 11, 3, 12))
    assert fall_week == utc(2024, 10, 28, 4) and weeks.after(fall_week) == utc(2024, 11, 4, 5)  # 169 h
    assert all(weeks.start(t).astimezone(NY).weekday() == 0 for t in (sunday, FALL, FALL_1969, utc(2024, 7, 4)))
    two = buckets("2W", tz=NEW_YORK)
    # 2024-03-04 is week 2826 since 1970-01-05 (even): 2-week buckets start on it, and 2024-03-11 is inside
    assert (dt.date(2024, 3, 4) - dt.date(1970, 1, 5)).days // 7 == 2826
    assert two.start(utc(2024, 3, 12)) == utc(2024, 3, 4, 5) and two.after(utc(2024, 3, 4, 5)) == utc(2024, 3, 18, 4)
    assert buckets("2W", tz=NEW_YORK).start(utc(1970, 1, 5, 5)) == utc(1970, 1, 5, 5)  # week 0
    assert two.start(utc(1970, 1, 5, 4, 59)) == utc(1969, 12, 22, 5)  # before it: weeks -2 and -1


def test_months_start_on_the_first_and_n_months_count_from_january_1970() -> None:
    months = buckets("1M", tz=NEW_YORK)
    march = months.start(utc(2024, 3, 10, 12))
    assert march == utc(2024, 3, 1, 5) and months.after(march) == utc(2024, 4, 1, 4)  # EST 1st, EDT 1st
    november = months.start(utc(2024, 11, 15))
    assert november == utc(2024, 11, 1, 4) and months.after(november) == utc(2024, 12, 1, 5)
    assert months.after(utc(2024, 12, 1, 5)) == utc(2025, 1, 1, 5)  # over the year's end
    assert months.start(utc(2024, 4, 1, 4)) == utc(2024, 4, 1, 4) and months.start(utc(2024, 4, 1, 3, 59)) == march
    assert buckets("MS", tz=NEW_YORK) == months and buckets("1 month", tz=NEW_YORK) == months
    quarters = buckets("3M", tz=NEW_YORK)  # Jan, Apr, Jul, Oct: counted from January 1970
    assert quarters.start(utc(2024, 3, 10)) == utc(2024, 1, 1, 5) and quarters.after(utc(2024, 1, 1, 5)) == utc(
        2024, 4, 1, 4
    )
    assert quarters.start(utc(2024, 11, 15)) == utc(2024, 10, 1, 4)
    five = buckets("5M", tz=NEW_YORK)  # month 650 since January 1970 is March 2024: 650 = 5 * 130
    assert five.start(utc(2024, 3, 10)) == utc(2024, 3, 1, 5) and five.start(utc(2024, 11, 15)) == utc(2024, 8, 1, 4)
    assert five.start(utc(1969, 12, 15)) == utc(1969, 8, 1, 4)  # month -1 is in the bucket of month -5


def test_n_days_count_from_1970_01_01_in_the_zone() -> None:
    assert (dt.date(2024, 3, 10) - dt.date(1970, 1, 1)).days == 19792  # even, and 19791 = 3 * 6597
    two = buckets("2D", tz=NEW_YORK)
    assert two.start(utc(2024, 3, 11, 12)) == utc(2024, 3, 10, 5) and two.after(utc(2024, 3, 10, 5)) == utc(
        2024, 3, 12, 4
    )  # 47 h
    three = buckets("3D", tz=NEW_YORK)
    assert three.start(utc(2024, 3, 10, 12)) == utc(2024, 3, 9, 5) and three.after(utc(2024, 3, 9, 5)) == utc(
        2024, 3, 12, 4
    )
    assert buckets("2D").start(utc(1970, 1, 2, 23)) == utc(1970, 1, 1) and buckets("2D").start(
        utc(1969, 12, 31)
    ) == utc(1969, 12, 30)
    assert buckets("1 day", tz=NEW_YORK) == buckets("1D", tz=NEW_YORK)
    # the same buckets as pandas on local wall time, for a run of days over the change
    for n in (1, 2, 3, 4):
        cut = buckets(f"{n}D", tz=NEW_YORK)
        times = pd.date_range("2024-03-01", "2024-03-20", freq="5h", tz=UTC)
        wall = pd.Series(1, index=times.tz_convert(NY).tz_localize(None))
        labels = wall.resample(f"{n}D", closed="left", label="left", origin="epoch").count()
        edges = labels.index.tz_localize(NY).tz_convert(UTC)
        for t in times:
            want = edges[edges.searchsorted(t, side="right") - 1]
            assert cut.start(t.to_pydatetime()) == want, (n, t)


def test_an_explicit_origin_makes_fixed_steps_from_it() -> None:
    hourly = buckets("1h", tz=NEW_YORK, origin=OPEN_0930)
    assert hourly.origin == utc(2024, 3, 4, 14, 30) and hourly.zone == NY
    assert hourly.start(utc(2024, 3, 4, 14, 29, 59)) == utc(2024, 3, 4, 13, 30)
    assert hourly.start(utc(2024, 3, 4, 14, 30)) == utc(2024, 3, 4, 14, 30)
    assert hourly.start(utc(2024, 3, 11, 13, 45)) == utc(2024, 3, 11, 13, 30)  # 09:30 EDT: an hour is an hour
    assert hourly.start(utc(2023, 1, 1)) == utc(2022, 12, 31, 23, 30)  # before the origin too
    seven = buckets("7min", tz=NEW_YORK, origin=OPEN_0930)
    assert seven.start(utc(2024, 3, 4, 14, 36, 59, 999_999)) == utc(2024, 3, 4, 14, 30)
    assert seven.start(utc(2024, 3, 4, 14, 37)) == utc(2024, 3, 4, 14, 37)
    assert seven.start(utc(2024, 3, 4, 14, 29)) == utc(2024, 3, 4, 14, 23)
    assert seven.after(utc(2024, 3, 4, 14, 37)) == utc(2024, 3, 4, 14, 44)
    assert buckets("7min", tz=NEW_YORK, origin="2024-03-04T09:30:00-05:00") == seven  # ISO text
    # D and W with an origin: fixed 24 h and 7-day steps (a trading day from 17:00), across the change too
    day = buckets("1D", tz=NEW_YORK, origin=EVENING_1700)
    assert day.step == dt.timedelta(hours=24) and day.start(utc(2024, 3, 12, 21, 59)) == utc(2024, 3, 11, 22)
    assert day.after(utc(2024, 3, 11, 22)) == utc(2024, 3, 12, 22)
    week = buckets("1W", tz=NEW_YORK, origin=EVENING_1700)
    assert week.step == dt.timedelta(days=7) and week.start(utc(2024, 3, 12)) == utc(2024, 3, 11, 22)
    assert buckets("2D", tz=NEW_YORK, origin=EVENING_1700).step == dt.timedelta(days=2)
    assert buckets("1h", tz=NEW_YORK, origin="epoch") == buckets("1h", tz=NEW_YORK)  # "epoch": the default


def test_an_origin_without_an_offset_is_read_in_the_zone_of_the_buckets() -> None:
    """As the CLI reads ``--origin`` in ``--tz``: a naive origin (text or datetime) is local
    time in ``tz`` (UTC without one); what is no time is refused."""
    seven = buckets("7min", tz=NEW_YORK, origin=OPEN_0930)
    assert buckets("7min", tz=NEW_YORK, origin="2024-03-04T09:30") == seven
    assert buckets("7min", tz=NEW_YORK, origin=dt.datetime(2024, 3, 4, 9, 30)) == seven
    assert buckets("7min", tz=NEW_YORK, origin=pd.Timestamp("2024-03-04 09:30")) == seven
    assert buckets("7min", origin="2024-03-04T09:30").origin == utc(2024, 3, 4, 9, 30)
    for bad in ("soon", float("nan"), 7):
        with pytest.raises(QueryError, match=r"^origin .*; or give origin='epoch'$"):
            buckets("1h", tz=NEW_YORK, origin=bad)


def edges_by_the_clock(cut: Buckets, first: dt.datetime, last: dt.datetime) -> list[dt.datetime]:
    """Every instant of ``[first, last)``, minute by minute, whose wall clock in the buckets'
    zone reads the origin's time of day plus a whole number of steps (by zoneinfo alone)."""
    assert cut.clock is not None and cut.step is not None
    base = dt.datetime.combine(dt.date(2000, 1, 1), cut.clock)
    found, at = [], first
    while at < last:
        if not (at.astimezone(cut.zone).replace(tzinfo=None) - base) % cut.step:
            found.append(at)
        at += dt.timedelta(minutes=1)
    return found


def test_a_time_of_day_origin_puts_the_edges_at_that_local_time_in_winter_and_in_summer() -> None:
    """The issue's case: hourly bars at 09:30, 10:30 ... New York time, which is 14:30Z in
    January and 13:30Z in July; a day from 17:00 is 22:00Z in January, 21:00Z in July."""
    hourly = buckets("1h", tz=NEW_YORK, origin="09:30")
    assert hourly == Buckets(NY, step=dt.timedelta(hours=1), clock=dt.time(9, 30))
    assert buckets("1h", tz=NEW_YORK, origin=dt.time(9, 30)) == buckets("1h", tz=NEW_YORK, origin="9:30") == hourly
    assert hourly.start(utc(2024, 1, 16, 14, 45)) == utc(2024, 1, 16, 14, 30)  # 09:30 EST
    assert hourly.start(utc(2024, 7, 16, 13, 45)) == utc(2024, 7, 16, 13, 30)  # 09:30 EDT
    assert hourly.after(utc(2024, 7, 16, 13, 30)) == utc(2024, 7, 16, 14, 30)  # 10:30 EDT
    day = buckets("1D", tz=NEW_YORK, origin="17:00")
    assert day.start(utc(2024, 1, 16, 12)) == utc(2024, 1, 15, 22) and day.after(utc(2024, 1, 15, 22)) == utc(
        2024, 1, 16, 22
    )
    assert day.start(utc(2024, 7, 16, 12)) == utc(2024, 7, 15, 21)
    assert buckets("4h", tz=NEW_YORK, origin="09:30").start(utc(2024, 7, 16, 13, 29)) == utc(2024, 7, 16, 9, 30)
    assert hourly.describe() == "1h buckets from 09:30:00 each day in America/New_York"
    assert hourly.tiled_by(dt.timedelta(minutes=30)) is None  # checked bar by bar: it depends on the day


@pytest.mark.parametrize(
    "interval, origin, starts",
    [  # New York's 2024 changes: 02:00 EST -> 03:00 EDT on 03-10, 02:00 EDT -> 01:00 EST on 11-03
        ("1h", "09:30", [utc(2024, 3, 10, 5, 30), utc(2024, 3, 10, 6, 30), utc(2024, 3, 10, 7, 30)]),  # no 02:30
        ("1h", "09:30", [utc(2024, 11, 3, 4, 30), utc(2024, 11, 3, 5, 30), utc(2024, 11, 3, 6, 30),
                         utc(2024, 11, 3, 7, 30)]),  # 01:30 EDT, then 01:30 EST  # fmt: skip
        ("4h", "10:00", [utc(2024, 3, 10, 3), utc(2024, 3, 10, 10), utc(2024, 3, 10, 14)]),  # 22:00 -> 06:00 EDT
        ("30min", "00:00", [utc(2024, 3, 10, 6, 30), utc(2024, 3, 10, 7), utc(2024, 3, 10, 7, 30)]),  # 01:30, 03:00
        ("1D", "17:00", [utc(2024, 11, 1, 21), utc(2024, 11, 2, 21), utc(2024, 11, 3, 22), utc(2024, 11, 4, 22)]),
    ],
)
def test_time_of_day_edges_across_both_daylight_saving_changes(
    interval: str, origin: str, starts: list[dt.datetime]
) -> None:
    """Where the clock jumps forward over an edge it is missing (the bucket holds the hour that
    did not happen); where it goes back over one, the edge is there twice, an hour apart (two
    buckets labelled 01:30); a day from 17:00 is 25 hours over the fall change."""
    cut = buckets(interval, tz=NEW_YORK, origin=origin)
    for begin, end in zip(starts, starts[1:]):
        assert cut.after(begin) == end
        for at in (begin, begin + US, end - US):
            assert cut.start(at) == begin, at
        assert cut.start(at.astimezone(NY)) == begin  # a zoned time: its instant


@pytest.mark.parametrize("zone", [NEW_YORK, "Australia/Lord_Howe", "Asia/Kolkata"])
@pytest.mark.parametrize("interval, origin", [("1h", "09:30"), ("2h", "01:30"), ("45min", "02:15"), ("1D", "02:30")])
def test_time_of_day_buckets_start_at_the_latest_instant_whose_clock_is_an_edge(
    zone: str, interval: str, origin: str
) -> None:
    """Brute force by the clock around both changes of New York and of Lord Howe (half an
    hour) and in a zone without any: every minute on an edge, and a time every 7 minutes and
    1 µs, starts at the latest instant whose wall clock is an edge; each edge follows the one
    before."""
    cut = buckets(interval, tz=zone, origin=origin)
    for change in (SPRING, FALL, utc(2024, 4, 6, 15), utc(2024, 10, 5, 15)):
        first, last = change - dt.timedelta(days=1), change + dt.timedelta(days=1)
        edges = edges_by_the_clock(cut, first, last)
        assert len(edges) >= 2
        for begin, end in zip(edges, edges[1:]):
            assert cut.after(begin) == end
        at = edges[0]
        while at < edges[-1]:
            assert cut.start(at) == edges[bisect.bisect_right(edges, at) - 1], at
            at += dt.timedelta(minutes=7, microseconds=1)


#: Time-of-day origins on a January and a July week in New York, against pandas on the local
#: wall times with the origin as an offset from midnight (exact away from the change days).
CLOCK_CASES = [
    Case("1h-0930", "1h", Rule("clock", "1h", "9h30min"), origin="09:30"),
    Case("30min-0945", "30min", Rule("clock", "30min", "9h45min"), origin="09:45"),
    Case("4h-0930-prev", "4h", Rule("clock", "4h", "9h30min"), origin="09:30", fill="prev"),
    Case("1D-1700", "1D", Rule("clock", "1D", "17h"), origin="17:00", fill="nan"),
    Case("90min-0000-no-by", "90min", Rule("clock", "90min", "0h"), origin="00:00", by=()),
]


@pytest.mark.parametrize("month", [1, 7])
@pytest.mark.parametrize("chosen", CLOCK_CASES, ids=[c.name for c in CLOCK_CASES])
def test_time_of_day_bars_equal_pandas_on_local_wall_time_in_winter_and_summer(chosen: Case, month: int) -> None:
    rng = random.Random(month)
    first = dt.datetime(2024, month, 15, tzinfo=NY)
    times = [first + dt.timedelta(minutes=rng.randrange(7 * 1440)) for _ in range(300)]
    times += [dt.datetime(2024, month, day, 9, 30, tzinfo=NY) + dt.timedelta(microseconds=jitter)
              for day in (16, 17) for jitter in (-1, 0, 1)]  # fmt: skip
    ticks = [
        Tick(f"{i:04d}", at.astimezone(UTC),
             {"symbol": rng.choice("AB"), "price": {"micros": rng.randrange(1, 999)}, "volume": rng.randrange(9)})
        for i, at in enumerate(times)
    ]  # fmt: skip
    ticks.sort(key=lambda t: (t.timestamp, t.id))
    want = oracle(ticks_frame(ticks), chosen)
    for descending in (False, True):
        same_frame(built(chosen, ticks[::-1] if descending else ticks, descending), want)


@pytest.mark.parametrize(
    "interval, tz, origin, edge, before",
    [
        ("1min", None, None, utc(2024, 3, 10, 7), utc(2024, 3, 10, 6, 59)),
        ("1h", NEW_YORK, None, SPRING, utc(2024, 3, 10, 6)),
        ("7min", NEW_YORK, OPEN_0930, utc(2024, 3, 4, 14, 37), utc(2024, 3, 4, 14, 30)),
        ("1D", NEW_YORK, None, utc(2024, 11, 4, 5), utc(2024, 11, 3, 4)),
        ("1D", NEW_YORK, EVENING_1700, utc(2024, 3, 5, 22), utc(2024, 3, 4, 22)),
        ("1W", NEW_YORK, None, utc(2024, 3, 11, 4), utc(2024, 3, 4, 5)),
        ("1M", NEW_YORK, None, utc(2024, 11, 1, 4), utc(2024, 10, 1, 4)),
        ("3M", NEW_YORK, None, utc(2024, 4, 1, 4), utc(2024, 1, 1, 5)),
    ],
)
def test_a_tick_exactly_on_an_edge_opens_the_later_bucket(
    interval: str, tz: str | None, origin: Any, edge: dt.datetime, before: dt.datetime
) -> None:
    cut = buckets(interval, tz=tz, origin=origin)
    assert cut.start(edge) == edge and cut.start(edge - US) == before and cut.after(before) == edge
    builder = BarBuilder(cut, price="p")
    bars = list(iter_bars(builder, [Tick("a", edge - US, {"p": 1}), Tick("b", edge, {"p": 2})]))
    assert [(b.start, b.open) for b in bars] == [(before, 1), (edge, 2)]


def test_the_utc_default_is_unchanged_one_minute_bars_on_whole_minutes() -> None:
    minute = buckets("1min")
    assert minute == Buckets(UTC, step=dt.timedelta(minutes=1), origin=EPOCH) and minute.utc
    assert buckets(dt.timedelta(minutes=1)) == minute and buckets(60) == minute and buckets("1min", tz="utc") == minute
    when = utc(2024, 3, 10, 6, 59, 59, 999_999)
    assert minute.start(when) == utc(2024, 3, 10, 6, 59) == bar_start(when, dt.timedelta(minutes=1))
    assert buckets("15min").start(utc(2024, 11, 3, 6, 14)) == utc(2024, 11, 3, 6)
    assert BarBuilder(dt.timedelta(minutes=1), price="p").buckets == minute  # a timedelta: the old behaviour
    # a zone moves fixed steps' origin to its local midnight of 1970-01-01 (05:00Z in New York):
    # hours stay on whole UTC hours, 7-minute edges move by 300 % 7 = 6 minutes (pandas: the same)
    assert buckets("1h", tz=NEW_YORK).start(when) == buckets("1h").start(when) == utc(2024, 3, 10, 6)
    assert buckets("7min").start(utc(2024, 3, 10, 7)) == utc(2024, 3, 10, 6, 59)
    assert buckets("7min", tz=NEW_YORK).start(utc(2024, 3, 10, 7)) == utc(2024, 3, 10, 6, 58)


def test_calendar_starts_of_a_new_york_time_are_those_of_its_instant() -> None:
    local = dt.datetime(2024, 3, 10, 3, 3, tzinfo=NY)  # 07:03Z, just after the spring change
    assert buckets("1D", tz=NEW_YORK).start(local) == utc(2024, 3, 10, 5)
    assert buckets("1W", tz=NEW_YORK).start(local) == utc(2024, 3, 4, 5)
    assert buckets("1M", tz=NEW_YORK).start(local) == utc(2024, 3, 1, 5)


def test_a_fixed_step_start_of_a_new_york_time_is_the_start_of_its_instant() -> None:
    # Steps are absolute time: a stdlib aware datetime in a zone does wall-clock arithmetic, which
    # once put the start of 03:03 EDT at 02:58 "EST" (07:58Z), after the time itself.
    cut = buckets("7min", tz=NEW_YORK)
    local = dt.datetime(2024, 3, 10, 3, 3, tzinfo=NY)  # 07:03Z, just after the spring change
    assert cut.start(local) == utc(2024, 3, 10, 6, 58)
    assert cut.start(local) <= local
    hourly = buckets("1h", tz=NEW_YORK)
    assert hourly.after(dt.datetime(2024, 11, 3, 1, tzinfo=NY)) == utc(2024, 11, 3, 6)  # 01:00 EDT + 1 h


def test_lowercase_day_and_week_intervals_are_calendar_units_as_in_pandas() -> None:
    # pandas reads 'd' as 'D' (a calendar day) and 'w' as 'W'; as fixed 24 h / 7-day steps from
    # 1970-01-01 local midnight (a Thursday), summer days would start 01:00 EDT and weeks on Thursday.
    summer = utc(2024, 7, 10, 4, 30)  # 00:30 EDT on 07-10
    assert buckets("1d", tz=NEW_YORK).start(summer) == buckets("1D", tz=NEW_YORK).start(summer) == utc(2024, 7, 10, 4)
    assert buckets("1w", tz=NEW_YORK).start(summer).astimezone(NY).weekday() == 0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: buckets("1D", tz="Mars/Base"),
         r"tz='Mars/Base' is not a time zone; give an IANA name such as 'America/New_York', or 'UTC'"),
        (lambda: to_zone(5), r"tz=5 is not a time zone; give an IANA name"),
        (lambda: buckets("1M", tz=NEW_YORK, origin=OPEN_0930),
         r"interval '1M': months follow the calendar; origin must be 'epoch' \(the 1st\)"),
        (lambda: buckets("3M", origin="2024-03-04T09:30:00Z"), r"interval '3M': months follow the calendar"),
        (lambda: check_fill("zero"),
         r"fill='zero' is not allowed; use None \(no row\), 'prev' \(close carried\) or 'nan'"),
        (lambda: buckets("0s"), r"interval '0s' is not positive"),
        (lambda: buckets("0D", tz=NEW_YORK), r"interval '0D' is not positive"),
        (lambda: buckets("-1h"), r"interval '-1h' is not positive"),
        (lambda: buckets("15"), r"interval '15' has no unit: write e.g. '15s', '15min', '15h' or '15D'"),
        (lambda: buckets("soon"),
         r"interval 'soon' is not a duration.*\(e.g. '1min', '15min', '1h', '1D', '1W', '1M'\)"),
        (lambda: buckets("1h", origin="noon"), r"origin 'noon' is not an ISO-8601 time; or give origin='epoch'"),
        (lambda: buckets("7min", tz=NEW_YORK, origin="09:30"),
         r"^origin '09:30' is a time of day, which puts edges at that time on every day: the interval must divide "
         r"24h \(e\.g\. '1min', .*'1D'\), and '7min' does not; give an origin with a date"),
        (lambda: buckets("1W", tz=NEW_YORK, origin="17:00"), r"^origin '17:00' is a time of day.*'1W' does not"),
        (lambda: buckets("1M", tz=NEW_YORK, origin="17:00"), r"^origin '17:00' is a time of day.*'1M' does not"),
        (lambda: buckets("2D", origin="17:00"), r"^origin '17:00' is a time of day.*'2D' does not"),
        (lambda: buckets("1h", origin="24:00"), r"^origin '24:00' is not a time of day: hours 0-23, minutes"),
        (lambda: buckets("1h", origin=dt.time(9, 30, tzinfo=UTC)), r"^origin .* has a zone; a time of day is read"),
    ],
    ids=["tz", "tz-not-a-name", "1M-origin", "3M-origin", "fill", "0s", "0D", "-1h", "no-unit", "soon", "origin",
         "clock-7min", "clock-1W", "clock-1M", "clock-2D", "clock-24h", "clock-zoned"],
)  # fmt: skip
def test_bad_requests_name_the_value_and_what_is_allowed(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(QueryError, match=message):
        call()


# ------------------------------------------------------------------------------ bars, pure: a property


def case(name: str, interval: Any, rule: Rule, span_days: float, **options: Any) -> Case:
    return Case(name, interval, rule, span_days=span_days, **options)


PROPERTY_CASES = [
    case("1h", "1h", Rule("fixed", "1h"), 1.5),
    case("7min", "7min", Rule("fixed", "7min"), 1.5),
    case("90min", "90min", Rule("fixed", "90min"), 1.5),
    case("15min-utc", "15min", Rule("fixed", "15min"), 1.5, tz=None),
    case("1h-0930", "1h", Rule("fixed", "1h", OPEN_0930), 1.5, origin=OPEN_0930),
    case("7min-0930", "7min", Rule("fixed", "7min", OPEN_0930), 1.5, origin=OPEN_0930),
    case("1D", "1D", Rule("days", "1D"), 12),
    case("2D", "2D", Rule("days", "2D"), 12),
    case("3D", "3D", Rule("days", "3D"), 12),
    case("1D-utc", "1D", Rule("days", "1D"), 12, tz="UTC"),
    case("1D-1700", "1D", Rule("fixed", "24h", EVENING_1700), 12, origin=EVENING_1700),
    case("1W", "1W", Rule("aware", "W-MON"), 70),
    case("2W", "2W", Rule("anchored", "2W-MON", "1968-01-08"), 70),
    case("1W-1700", "1W", Rule("fixed", "168h", EVENING_1700), 70, origin=EVENING_1700),
    case("1M", "1M", Rule("aware", "MS"), 400),
    case("3M", "3M", Rule("anchored", "3MS", "1960-01-01"), 400),
]
JITTER_US = [0, 0, 0, 0, -1, 1, 250_000, 59_999_999]  # on an edge, either side of it, inside
#: The parts of a scenario that do not depend on what it drew before, built once (not for every example).
FILLS, BYS, ANCHORS = (st.sampled_from([None, "prev", "nan"]), st.sampled_from([("symbol",), ()]),
                       st.sampled_from([SPRING, FALL, FALL_1969]))  # fmt: skip
AT_CHANGE, CLOCK_HOURS, CLOCK_MINUTES = (st.integers(-3, 3), st.sampled_from([0, 0, 0, 1, 2, 3, 9, 17, 23]),
                                         st.sampled_from([0, 0, 30, 59]))  # fmt: skip
JITTERS, SYMBOLS_ABC, MONTHS = st.sampled_from(JITTER_US), st.sampled_from("ABC"), st.integers(-13, 13)
PRICES, VOLUMES = st.integers(1, 10**6), st.integers(0, 500)
CASE_CHOICES: dict[int, st.SearchStrategy[Case]] = {}  # by id() of a list of cases (module constants)


@functools.cache
def tick_rows(zone_name: str, span_days: float, monthly: bool, anchor: dt.datetime) -> st.SearchStrategy[list[Any]]:
    """The rows of a scenario's ticks around ``anchor`` (a daylight-saving change) for a case
    of that zone, reach and kind, built once for each (each example built them again: a new
    strategy is validated on its first draw, a third of the scenario's drawing)."""
    zone = ZoneInfo(zone_name)
    days = int(span_days)
    minutes = int(span_days * 1440)
    local_day = anchor.astimezone(zone).date()

    def wall(offset: int, hour: int, minute: int) -> dt.datetime:
        day = local_day + dt.timedelta(days=offset)
        return dt.datetime(day.year, day.month, day.day, hour, minute, tzinfo=zone).astimezone(UTC)

    def month_start(offset: int) -> dt.datetime:
        months = local_day.year * 12 + local_day.month - 1 + offset
        return midnight(dt.date(months // 12, months % 12 + 1, 1), zone)

    instants = [
        st.integers(-minutes, minutes).map(lambda m: anchor + dt.timedelta(minutes=m)),
        AT_CHANGE.map(lambda m: anchor + dt.timedelta(minutes=m)),  # at the change itself
        st.builds(wall, st.integers(-days, days), CLOCK_HOURS, CLOCK_MINUTES),
    ]
    if monthly:
        instants.append(MONTHS.map(month_start))
    return st.lists(st.tuples(st.one_of(instants), JITTERS, SYMBOLS_ABC, PRICES, VOLUMES), min_size=1, max_size=40)


@st.composite
def scenario(draw: st.DrawFn, cases: Sequence[Case] = PROPERTY_CASES) -> tuple[Case, list[Tick], bool]:
    """A case, ticks around a daylight-saving change (many on bucket edges, some at one
    instant), and whether they come newest first."""
    chosen = draw(CASE_CHOICES.setdefault(id(cases), st.sampled_from(cases)))
    fill, by = draw(FILLS), draw(BYS)
    chosen = replace(chosen, fill=fill, by=by)
    anchor = draw(ANCHORS)
    rows = draw(tick_rows(chosen.zone, chosen.span_days, chosen.rule.freq.endswith("MS"), anchor))
    ticks = [
        Tick(f"{i * 37 % 101:03d}", when + dt.timedelta(microseconds=jitter),
             {"symbol": symbol, "price": {"micros": price}, "volume": volume})
        for i, (when, jitter, symbol, price, volume) in enumerate(rows)
    ]  # fmt: skip
    ticks.sort(key=lambda t: (t.timestamp, t.id))  # the read engine's order
    descending = draw(st.booleans())
    return chosen, ticks[::-1] if descending else ticks, descending


def ticks_frame(ticks: Sequence[Tick]) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "symbol": [t.data["symbol"] for t in ticks],
            "id": [t.id for t in ticks],
            "timestamp": pd.DatetimeIndex([t.timestamp for t in ticks]),
            "price": [t.data["price"]["micros"] for t in ticks],
            "volume": [t.data.get("volume", 0) for t in ticks],
        }
    )


def built(chosen: Case, ticks: Sequence[Tick], descending: bool) -> pd.DataFrame:
    cut = buckets(chosen.interval, tz=chosen.tz, origin=chosen.origin)
    builder = BarBuilder(cut, by=chosen.by, price="price.micros", volume="volume", descending=descending,
                         fill=check_fill(chosen.fill))  # fmt: skip
    bars = list(iter_bars(builder, ticks))
    return bars_frame(bars, by=chosen.by, timestamp_field="timestamp", volume="volume", zone=cut.zone)


@settings(max_examples=100, deadline=None)
@given(scenario())
def test_bars_with_and_without_a_fill_equal_pandas_resample_in_either_order(
    drawn: tuple[Case, list[Tick], bool],
) -> None:
    chosen, ticks, descending = drawn
    same_frame(built(chosen, ticks, descending), oracle(ticks_frame(ticks), chosen))


#: Buckets that hourly bars do not tile (Asia/Kolkata is UTC+5:30), beside the New York ones.
KOLKATA_CASES = [
    case("1D-kolkata", "1D", Rule("days", "1D"), 12, tz="Asia/Kolkata"),
    case("1h-kolkata", "1h", Rule("fixed", "1h"), 1.5, tz="Asia/Kolkata"),
]
STORED = [dt.timedelta(minutes=1), dt.timedelta(minutes=15), dt.timedelta(hours=1)]
COMBINED_SCENARIO = scenario(PROPERTY_CASES + KOLKATA_CASES * 4)
STORED_CHOICES, BOUND_KINDS = st.sampled_from(STORED), st.sampled_from(["none", "edge", "edge", "next edge", "tick"])


@st.composite
def combined_scenario(draw: st.DrawFn) -> tuple[Case, list[Tick], bool, dt.timedelta, list[dt.datetime | None]]:
    """A bars scenario, the length of the stored bars to combine, and a range whose bounds are
    a stored bar's edge, a tick's own time, or none."""
    chosen, ticks, descending = draw(COMBINED_SCENARIO)
    stored = draw(STORED_CHOICES)
    times = sorted(t.timestamp for t in ticks)
    bounds: list[dt.datetime | None] = []
    for _ in ("start", "end"):
        at, how = times[draw(st.integers(0, len(times) - 1))], draw(BOUND_KINDS)  # a tick's time, as sampled_from
        edge = bar_start(at, stored)
        bounds.append({"none": None, "edge": edge, "next edge": edge + stored, "tick": at}[how])
    if None not in bounds and bounds[0] >= bounds[1]:  # type: ignore[operator]
        bounds[1] = None
    return chosen, ticks, descending, stored, bounds


@settings(max_examples=150, deadline=None)
@given(combined_scenario())
def test_combined_bars_equal_pandas_on_the_ticks_or_are_refused_for_a_bar_they_would_split(
    drawn: tuple[Case, list[Tick], bool, dt.timedelta, list[dt.datetime | None]],
) -> None:
    """Stored bars (a roll-up's documents, of 1 min, 15 min or 1 h) combined into the case's
    buckets over a range equal pandas' bars of the ticks in that range, fill included; the
    answer is refused exactly when a bound falls inside a stored bar or a stored bar read holds
    an edge of the buckets asked for (fixed buckets: when any could)."""
    chosen, ticks, descending, stored, (start, end) = drawn
    source = SeriesSpec("ticks", shapes=[QueryShape("symbol")], key_fields=["symbol"])
    rollup = Rollup(source, interval=stored, by=chosen.by, volume="volume")
    oldest_first = sorted(ticks, key=lambda t: (t.timestamp, t.id))
    kept = BarBuilder(stored, by=chosen.by, price="price.micros", volume="volume")
    records = rollup.records(iter_bars(kept, oldest_first))
    documents = [Tick(f"bar{i:04d}", r["timestamp"], r) for i, r in enumerate(records)]
    read = [d for d in documents if (start is None or d.timestamp >= start) and (end is None or d.timestamp < end)]
    cut = buckets(chosen.interval, tz=chosen.tz, origin=chosen.origin)
    inside = any(b is not None and bar_start(b, stored) != b for b in (start, end))
    untileable = cut.step is not None and bool(cut.step % stored or (cut.origin - EPOCH) % stored)  # type: ignore[operator]
    crossing = any(cut.start(d.timestamp) != cut.start(d.timestamp + stored - US) for d in read)
    try:
        check_combinable(stored, cut, start=start, end=end)
        builder = BarBuilder(cut, by=chosen.by, price="close", volume="volume", descending=descending,
                             fill=check_fill(chosen.fill), combine=stored)  # fmt: skip
        bars = list(iter_bars(builder, read[::-1] if descending else read))
    except QueryError:
        assert inside or untileable or crossing
        event("refused: " + ", ".join(n for n, why in [("inside", inside), ("untileable", untileable),
                                                       ("crossing", crossing)] if why))  # fmt: skip
        return
    assert not (inside or untileable or crossing)
    event("answered")
    in_range = [t for t in ticks if (start is None or t.timestamp >= start) and (end is None or t.timestamp < end)]
    got = bars_frame(bars, by=chosen.by, timestamp_field="timestamp", volume="volume", zone=cut.zone)
    if not in_range:
        assert got.empty
        return
    same_frame(got, oracle(ticks_frame(in_range), chosen))


VALUES = ["open", "high", "low", "close", "count", "volume", "sum", "mean", "std"]


@settings(max_examples=150, deadline=None)
@given(scenario(), st.sampled_from(VALUES), st.sampled_from(["prev", None]))
def test_aligned_series_equal_brute_force_on_pandas_buckets(
    drawn: tuple[Case, list[Tick], bool], value: str, fill: str | None
) -> None:
    """One column per series and a row per bucket (pandas' labels from the first tick's bucket
    to the last one's): each cell the value of that series' ticks in that bucket, computed
    here from the ticks; with ``fill="prev"`` a bucket without a tick of the series takes its
    last value known before (0 for count, volume, sum), a bucket with ticks never does (the
    std of one tick stays missing)."""
    chosen, ticks, descending = drawn
    chosen = replace(chosen, by=("symbol",), fill=None)
    cut = buckets(chosen.interval, tz=chosen.tz, origin=chosen.origin)
    builder = BarBuilder(cut, by=chosen.by, price="price.micros", volume="volume", descending=descending)
    frame = bars_frame(iter_bars(builder, ticks), by=chosen.by, timestamp_field="timestamp", volume="volume",
                       zone=cut.zone, moments=True)  # fmt: skip
    got = side_by_side(frame, series=1, value=value, fill=fill, edges=cut, amount=value in ("count", "volume", "sum"))
    whole = replace(chosen, by=())
    grid = pandas_bins(ticks_frame(ticks), whole).starts  # pandas' buckets of all the ticks, first to last
    labels = grid.tz_convert(UTC)
    cells: dict[tuple[str, int], list[Tick]] = {}
    for tick in sorted(ticks, key=lambda t: (t.timestamp, t.id)):
        slot = int(labels.searchsorted(pd.Timestamp(tick.timestamp), side="right")) - 1
        cells.setdefault((tick.data["symbol"], slot), []).append(tick)

    def cell(held: list[Tick]) -> Any:
        prices = [t.data["price"]["micros"] for t in held]
        figures = {"open": prices[0], "close": prices[-1], "high": max(prices), "low": min(prices),
                   "count": len(prices), "volume": sum(t.data["volume"] for t in held), "sum": sum(prices),
                   "mean": statistics.fmean(prices), "std": statistics.stdev(prices) if len(prices) > 1 else None}
        return figures[value]  # fmt: skip

    symbols = sorted({t.data["symbol"] for t in ticks})
    want: dict[str, list[Any]] = {}  # each series' column, a cell per bucket of the grid (None: missing)
    for symbol in symbols:
        column: list[Any] = []
        last: Any = None
        for slot in range(len(grid)):
            held = cells.get((symbol, slot))
            if held:
                column.append(found := cell(held))
                last = last if found is None else found  # the last value known is carried
            elif fill == "prev":
                amount = value in ("count", "volume", "sum")
                column.append(0 if amount else last)
            else:
                column.append(None)
        want[symbol] = column
    assert list(got.columns) == symbols and got.index.equals(grid)
    for symbol in symbols:
        mine_column = got[symbol].tolist()
        assert len(mine_column) == len(want[symbol]) == len(grid)
        for mine, theirs in zip(mine_column, want[symbol]):
            assert (pd.isna(mine) and pd.isna(theirs)) or mine == theirs or mine == pytest.approx(theirs, rel=1e-12), (
                symbol, value,
            )  # fmt: skip


@pytest.mark.parametrize("mutation", [edge_moved, tie_flipped], ids=["edge-1us-later", "tie-flipped"])
@pytest.mark.parametrize("name", ["bars", "combined", "aligned"])
def test_each_bars_property_fails_on_an_edge_moved_by_1us_or_a_tie_broken_the_other_way(
    monkeypatch: pytest.MonkeyPatch, name: str, mutation: Mutation
) -> None:
    properties = {
        "bars": (test_bars_with_and_without_a_fill_equal_pandas_resample_in_either_order, [scenario()]),
        "combined": (test_combined_bars_equal_pandas_on_the_ticks_or_are_refused_for_a_bar_they_would_split,
                     [combined_scenario()]),
        "aligned": (test_aligned_series_equal_brute_force_on_pandas_buckets,
                    [scenario(), st.sampled_from(["open", "close", "count"]), st.sampled_from(["prev", None])]),
    }  # fmt: skip
    test, strategies = properties[name]
    mutation(monkeypatch)
    assert bites(test, *strategies)


def test_a_fill_spans_both_changes_with_a_bar_per_local_day() -> None:
    # one tick on 2024-03-08 and one on 2024-11-05 (New York noon): 243 local days, 23 h and 25 h ones included
    ticks = [Tick("a", utc(2024, 3, 8, 17), {"p": 5, "v": 2}), Tick("b", utc(2024, 11, 5, 17), {"p": 7, "v": 3})]
    for fill in ("prev", "nan"):
        for descending in (False, True):
            builder = BarBuilder(buckets("1D", tz=NEW_YORK), price="p", volume="v", fill=fill, descending=descending)
            bars = list(iter_bars(builder, ticks[::-1] if descending else ticks))
            frame = bars_frame(bars, by=(), timestamp_field="timestamp", volume="v", zone=NY)
            assert len(frame) == (dt.date(2024, 11, 5) - dt.date(2024, 3, 8)).days + 1 == 243
            assert all(t.hour == 0 and t.minute == 0 for t in frame.index) and str(frame.index.dtype) == (
                "datetime64[us, America/New_York]"
            )
            assert list(frame["count"].iloc[[0, 1, -2, -1]]) == [1, 0, 0, 1] and frame["volume"].sum() == 5
            middle = frame["close"].iloc[1:-1]
            assert middle.isna().all() if fill == "nan" else (middle == 5).all()
            assert str(frame["close"].dtype) == "Int64"
            steps = np.diff(frame.index.asi8) // 3_600_000_000
            assert sorted(set(steps)) == [23, 24, 25] and list(steps).count(23) == list(steps).count(25) == 1


# ------------------------------------------------------------------------------ on the emulator

SYMBOLS = ["AAA", "BBB", "CCC"]


def spec(collection: str, shards: int) -> SeriesSpec:
    return SeriesSpec(
        collection,
        shards=shards_for(shards * 500),
        shapes=[QueryShape("symbol", ("desc", "asc")), QueryShape("exchange")],  # exchange: newest first only
        key_fields=["symbol", "n"],
    )


def store_rows() -> list[dict[str, Any]]:
    """~600 ticks: dense around both 2024 New York changes, hundreds exactly on bucket edges
    (local midnights, hours, 7-minute steps, the 09:30 origin's, month starts; several at one
    instant, some a microsecond before), scattered ones over the year, a sparse series whose
    daily fill crosses both changes, and a few ticks without price or volume."""
    rng = random.Random(2024)
    rows: list[dict[str, Any]] = []

    def add(when: dt.datetime, symbol: str | None = None, **changes: Any) -> None:
        row: dict[str, Any] = {
            "symbol": symbol or rng.choice(SYMBOLS),
            "exchange": rng.choice(["X1", "X2"]),
            "n": len(rows),
            "timestamp": when,
            "price": {"micros": rng.randrange(10**6, 10**9)},
            "volume": rng.randrange(1, 50) * 100,
        }
        row.update(changes)
        rows.append(row)

    epoch_ny = midnight(dt.date(1970, 1, 1))
    for change in (SPRING, FALL):
        day = change.astimezone(NY).date()
        low, high = midnight(day - dt.timedelta(days=2)), midnight(day + dt.timedelta(days=3))
        for _ in range(140):
            add(low + dt.timedelta(seconds=rng.randrange(int((high - low).total_seconds())),
                                   microseconds=rng.choice([0, 0, rng.randrange(10**6)])))  # fmt: skip
        edges = [midnight(day + dt.timedelta(days=k)) for k in range(-2, 4)]  # 03-11 and 11-04 are Mondays
        edges += [change + dt.timedelta(hours=k) for k in range(-2, 3)]
        seven = change - (change - epoch_ny) % dt.timedelta(minutes=7)
        edges += [seven + dt.timedelta(minutes=7 * k) for k in range(-2, 3)]
        edges += [dt.datetime(d.year, d.month, d.day, 9, 30, tzinfo=NY).astimezone(UTC)
                  for d in (day + dt.timedelta(days=k) for k in range(-2, 3))]  # fmt: skip
        edges += [change - dt.timedelta(hours=5)]  # 17:00 EST the evening before: the 24 h origin's edge
        for edge in edges:
            add(edge, "AAA")
            add(edge, "BBB")
            add(edge, "AAA")  # two of one series at one instant: the document id orders them
            add(edge - US)
    start, end = utc(2024, 1, 10), utc(2024, 12, 20)
    for _ in range(90):
        add(start + dt.timedelta(seconds=rng.randrange(int((end - start).total_seconds()))))
    for month in range(2, 13):
        first = midnight(dt.date(2024, month, 1))
        add(first, "CCC")
        add(first - US, "CCC")
    add(utc(2024, 3, 8, 17), "ZZZ")  # a sparse series: a daily fill across both changes
    add(utc(2024, 6, 3, 16), "ZZZ")
    add(utc(2024, 11, 5, 17), "ZZZ")
    for k in range(4):
        add(SPRING + dt.timedelta(minutes=k), "BBB", price={})  # no price: counted nowhere
        add(FALL + dt.timedelta(minutes=k + 1))
        del rows[-1]["volume"]  # no volume: adds none
    return rows


ROWS = store_rows()
MARCH = (midnight(dt.date(2024, 3, 8)), dt.datetime(2024, 3, 12, 12, tzinfo=NY))  # ends inside a bar
STORE_CASES = [
    Case("1h", "1h", Rule("fixed", "1h")),
    Case("7min", "7min", Rule("fixed", "7min")),
    Case("1D-prev", "1D", Rule("days", "1D"), fill="prev"),
    Case("1D-nan", "1D", Rule("days", "1D"), fill="nan"),
    Case("1W", "1W", Rule("aware", "W-MON")),
    Case("1M-no-by", "1M", Rule("aware", "MS"), by=()),
    Case("2D-prev", "2D", Rule("days", "2D"), fill="prev"),
    Case("3M", "3M", Rule("anchored", "3MS", "1960-01-01")),
    Case(
        "1h-0930-prev-range",
        "1h",
        Rule("fixed", "1h", OPEN_0930),
        origin=OPEN_0930,
        fill="prev",
        start=MARCH[0],
        end=MARCH[1],
    ),  # fmt: skip
    Case("7min-0930-no-by", "7min", Rule("fixed", "7min", OPEN_0930), origin=OPEN_0930, by=()),
    Case("1D-1700", "1D", Rule("fixed", "24h", EVENING_1700), origin=EVENING_1700, fill="nan"),
    Case("1D-nan-no-by-newest-first", "1D", Rule("days", "1D"), fill="nan", by=(), where={"exchange": "X1"}),
    # a time of day: New York's offsets are whole hours, so 09:30 each day is :30 of every UTC hour
    # (both changes included); a day from 17:00 is wall time (17:00 happens once on both change days)
    Case("1h-at-0930", "1h", Rule("fixed", "1h", OPEN_0930), origin="09:30"),
    Case("1D-at-1700", "1D", Rule("clock", "1D", "17h"), origin="17:00", fill="prev"),
]


@dataclass
class Written:
    store: TimeSeriesStore
    rows: list[dict[str, Any]]
    ticks: pd.DataFrame  # every priced tick written, with its document id


@pytest.fixture(scope="module")
def written(tsstore_emulator: Any) -> Iterator[Callable[[int], Written]]:
    """The same ticks in a store of each shard count, written once per module (and worker)."""
    client = tsstore_emulator.client(database=f"buckets-{random.randrange(10**9)}")
    made: dict[int, Written] = {}

    def get(shards: int) -> Written:
        if shards not in made:
            store = TimeSeriesStore(client, spec(f"ticks{shards}", shards), write_options=FAST)
            ids = store.write(copy.deepcopy(ROWS)).ids
            priced = [(r, i) for r, i in zip(ROWS, ids) if "micros" in r["price"]]
            frame = pd.DataFrame(
                {
                    "symbol": [r["symbol"] for r, _ in priced],
                    "exchange": [r["exchange"] for r, _ in priced],
                    "id": [i for _, i in priced],
                    "timestamp": pd.DatetimeIndex([r["timestamp"] for r, _ in priced]),
                    "price": [r["price"]["micros"] for r, _ in priced],
                    "volume": [r.get("volume", 0) for r, _ in priced],
                }
            )
            made[shards] = Written(store, ROWS, frame)
        return made[shards]

    yield get
    client.close()


def selected(ticks: pd.DataFrame, chosen: Case) -> pd.DataFrame:
    keep = pd.Series(True, index=ticks.index)
    for name, value in chosen.where.items():
        keep &= ticks[name] == value
    if chosen.start is not None:
        keep &= ticks["timestamp"] >= chosen.start
    if chosen.end is not None:
        keep &= ticks["timestamp"] < chosen.end
    return ticks[keep]


def bars_of(store: Any, chosen: Case, stats: ReadStats | None = None) -> Any:
    return store.bars(
        interval=chosen.interval, tz=chosen.tz, origin=chosen.origin, fill=chosen.fill, by=chosen.by,
        price="price.micros", volume="volume", where=chosen.where or None, start=chosen.start, end=chosen.end,
        stats=stats,
    )  # fmt: skip


def test_the_store_data_holds_what_the_oracle_tests_need() -> None:
    times = [r["timestamp"] for r in ROWS]
    assert 550 <= len(ROWS) <= 650 and len(set(times)) < len(times)  # ties
    edges = {SPRING, FALL, utc(2024, 3, 11, 4), utc(2024, 11, 4, 5), utc(2024, 4, 1, 4), utc(2024, 3, 11, 13, 30)}
    assert edges <= set(times)
    assert any(utc(2024, 11, 3, 5) <= t < FALL for t in times) and any(FALL <= t < utc(2024, 11, 3, 7) for t in times)


#: Every case at 3 shards. At 40 (two chunks merged into one stream in the read engine's order) one
#: case per read: all ticks oldest first (7min, 1D-prev with its fill), a range, a filter newest
#: first; the other cases cut the buckets of the very same stream as these, and do at 3 shards.
AT_40 = {"7min", "1D-prev", "1h-0930-prev-range", "1D-nan-no-by-newest-first"}
STORE_READS = [pytest.param(c, shards, id=f"{c.name}-{shards}") for shards in (3, 40) for c in STORE_CASES
               if shards == 3 or c.name in AT_40]  # fmt: skip


@pytest.mark.parametrize("chosen, shards", STORE_READS)
def test_store_bars_equal_pandas_resample_on_the_same_ticks(
    written: Callable[[int], Written], shards: int, chosen: Case
) -> None:
    data = written(shards)
    stats = ReadStats()
    got = bars_of(data.store, chosen, stats)
    want = oracle(selected(data.ticks, chosen), chosen)
    assert len(want) > 2 and (chosen.fill is None or (want["count"] == 0).any())  # the case tests something
    same_frame(got, want)
    in_range = [
        r for r in ROWS
        if all(r[k] == v for k, v in chosen.where.items())
        and (chosen.start is None or r["timestamp"] >= chosen.start)
        and (chosen.end is None or r["timestamp"] < chosen.end)
    ]  # fmt: skip
    assert stats.documents == len(in_range)  # priceless ticks are read, counted in no bar
    if chosen.where:
        assert data.store.plan(where=chosen.where).descending  # this one is read newest first


def test_bad_store_requests_fail_before_reading(written: Callable[[int], Written]) -> None:
    store = written(3).store
    bad: list[tuple[dict[str, Any], str]] = [
        ({"tz": "Mars/Base"}, "tz='Mars/Base' is not a time zone"),
        ({"fill": "zero"}, "fill='zero' is not allowed"),
        ({"interval": "1M", "origin": OPEN_0930}, "origin must be 'epoch'"),
        ({"interval": "0s"}, "interval '0s' is not positive"),
    ]
    for options, message in bad:
        stats = ReadStats()
        with pytest.raises(QueryError, match=message):
            store.bars(**{"interval": "1D", **options}, price="price.micros", stats=stats)
        assert stats.documents == 0


def test_the_async_store_gives_the_same_bars(written: Callable[[int], Written], tsstore_emulator: Any) -> None:
    data = written(40)
    chosen = STORE_CASES[2]  # 1D, New York, fill prev, by symbol

    async def run() -> pd.DataFrame:
        client = tsstore_emulator.async_client(database=data.store.client._database)
        try:
            frame: pd.DataFrame = await bars_of(AsyncTimeSeriesStore(client, data.store.spec), chosen)
            return frame
        finally:
            client.close()

    got = asyncio.run(run())
    same_frame(got, bars_of(data.store, chosen))
    same_frame(got, oracle(data.ticks, chosen))


def test_the_bars_command_prints_the_same_bars(
    written: Callable[[int], Written], tsstore_emulator: Any, tmp_path: Any
) -> None:
    data = written(3)
    (tmp_path / "spec.toml").write_text(
        '[[series]]\ncollection = "ticks3"\nshards = ["s0", "s1", "s2"]\nkey_fields = ["symbol", "n"]\n'
        'shapes = [{ fields = ["symbol"], directions = ["desc", "asc"] }, "exchange"]\n'
    )
    env = {"FIRESTORE_EMULATOR_HOST": tsstore_emulator.address}
    common = ["--spec", "spec.toml", "--database", data.store.client._database, "--interval", "1D",
              "--price", "price.micros"]  # fmt: skip
    done = tsstore("bars", *common, "--tz", NEW_YORK, "--fill", "prev", "--by", "symbol", "--volume", "volume",
                   "--format", "csv", cwd=tmp_path, env=env)  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = pd.read_csv(io.StringIO(done.stdout), dtype={"symbol": str})
    want = oracle(data.ticks, STORE_CASES[2]).reset_index()
    assert list(printed.columns) == ["timestamp", "symbol", "open", "high", "low", "close", "count", "volume"]
    starts = pd.DatetimeIndex(pd.to_datetime(printed["timestamp"], format="ISO8601", utc=True))
    assert list(starts) == list(want["timestamp"]) and list(printed["symbol"]) == list(want["symbol"])
    assert all(s.endswith(("-0500", "-0400")) for s in printed["timestamp"]), printed["timestamp"][:3]  # local
    for column in ("open", "high", "low", "close", "count", "volume"):
        assert [int(v) for v in printed[column]] == [int(v) for v in want[column]], column
    clock = tsstore("bars", *common[:4], "--price", "price.micros", "--interval", "1h", "--origin", "09:30", "--tz",
                    NEW_YORK, "--by", "symbol", "--volume", "volume", "--format", "csv", cwd=tmp_path, env=env)
    assert clock.returncode == 0, clock.stderr
    printed = pd.read_csv(io.StringIO(clock.stdout), dtype={"symbol": str})
    want = oracle(data.ticks, next(c for c in STORE_CASES if c.name == "1h-at-0930")).reset_index()
    starts = pd.DatetimeIndex(pd.to_datetime(printed["timestamp"], format="ISO8601", utc=True))
    assert list(starts) == list(want["timestamp"]) and list(printed["open"]) == list(want["open"])
    assert {s[11:16] for s in printed["timestamp"]} >= {"09:30", "10:30"}  # local bar starts
    refused = tsstore("bars", *common, "--tz", "Mars/Base", cwd=tmp_path, env=env)
    assert refused.returncode in (1, 2) and "Traceback" not in refused.stderr
    errors = [line for line in refused.stderr.splitlines() if line.startswith("Error:")]
    assert errors == refused.stderr.strip().splitlines()[-1:], refused.stderr  # one Error: line, the last
    assert "--tz 'Mars/Base' is not a time zone; give an IANA name" in errors[0]
    assert refused.stdout == ""


INTERVALS_PAGE = Path(__file__).resolve().parents[1] / "docs" / "reference" / "intervals.md"


def interval_rows() -> list[tuple[str, str]]:
    """The (tsstore, pandas) code cells of the reference's table of intervals and origins."""
    rows = re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", INTERVALS_PAGE.read_text(), flags=re.M)
    assert len(rows) >= 9, rows
    return rows


@functools.cache  # an index is immutable: the rows of one zone share it
def edge_ticks(zone: str) -> pd.DatetimeIndex:
    """Times from November 2023, around both 2024 New York changes and month ends, every 7
    minutes across the days around them, and each local midnight, 09:30 and 17:00 of those days 1 µs either
    side: every row's edges are in there, each with its neighbours."""
    # from November 2023: an n-month row anchored on the first tick's month (pandas' 3MS) shows
    spans = [("2023-11-03", "2023-11-05"), ("2024-03-08", "2024-03-13"), ("2024-10-30", "2024-11-05"),
             ("2024-01-29", "2024-02-02")]  # fmt: skip
    times: list[pd.Timestamp] = []
    for first, last in spans:
        times += list(pd.date_range(first, last, freq="7min", tz=UTC))
        for day in pd.date_range(first, last, freq="D"):
            for clock in ("00:00", "09:30", "17:00"):
                wall = pd.Timestamp(f"{day.date()} {clock}")
                at = wall.tz_localize(zone, ambiguous=False, nonexistent="shift_forward")
                times += [(at + pd.Timedelta(us, "us")).tz_convert(UTC) for us in (-1, 0, 1)]
    return pd.DatetimeIndex(sorted(set(times))).tz_convert(zone).as_unit("us")


@pytest.mark.parametrize("row", interval_rows(), ids=[ours for ours, _ in interval_rows()])
def test_each_row_of_the_intervals_table_cuts_the_buckets_pandas_cuts(row: tuple[str, str]) -> None:
    ours, theirs = row
    options: dict[str, Any] = eval(f"dict({ours})")  # the page's own code, as a reader pastes it
    zone = options.get("tz") or "UTC"
    index = edge_ticks(zone)
    ticks = pd.Series(1, index=index)
    local = pd.Series(1, index=index.tz_localize(None))
    resampled = eval(theirs.replace(".resample(", '.resample(closed="left", label="left", rule='), {"pd": pd},
                     {"ticks": ticks, "local": local})  # fmt: skip
    labels = resampled.count().index
    if labels.tz is None:  # wall times: localized back (midnights exist once in New York)
        labels = labels.tz_localize(zone)
    labels = labels.tz_convert(UTC)
    cut = buckets(**options)
    wants = labels[labels.searchsorted(index.tz_convert(UTC), side="right") - 1]  # pandas' bucket of each time
    for at, want in zip(index.to_pydatetime(), wants.to_pydatetime(), strict=True):
        assert cut.start(at) == want, (row, at)
