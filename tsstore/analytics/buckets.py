"""Where bars begin and end: fixed steps from an origin, or calendar days, weeks and months in
a time zone (pure logic, no Firestore).

- A fixed step (``"15min"``, ``"1h"``, a ``timedelta``) cuts time into ``[origin + k·step,
  origin + (k+1)·step)``. The origin is local midnight of 1970-01-01 in the zone (UTC: the
  Unix epoch, so 1-minute bars start on whole minutes), or a time given. Steps are absolute
  time: an hour is an hour across a daylight-saving change.
- Calendar units count in the zone's own calendar: ``"1D"`` is a local day from local
  midnight (23 or 25 hours long on a daylight-saving change day), ``"1W"`` a week from
  Monday's midnight, ``"1M"`` a month from the 1st. ``n`` of them are counted from 1970
  (days from 1970-01-01, weeks from Monday 1970-01-05, months from January 1970), so a bucket
  does not depend on the data read. With an origin given, ``D`` and ``W`` are fixed steps of
  24 h and 7 days from it (a trading day from 17:00, say); months need the calendar.
- A time of day as the origin (``"09:30"``) puts the edges at that local clock time in the
  zone, and every ``step`` after it, on every local day: hourly bars at 09:30, 10:30 ... New
  York time in winter and in summer alike (a fixed instant would drift by the hour of daylight
  saving). The step must divide 24 h, so that every day has the same edges (``"1D"`` is a day
  from that time). An edge is every instant whose local clock reads one of those times: where
  the clock jumps forward over an edge, that edge is missing (its bucket is longer); where it
  goes back over one, the edge happens twice (two buckets of the same label, an hour apart).

A tick exactly on an edge opens the later bucket. These are the rules of pandas'
``resample`` with ``closed="left", label="left"`` and ``origin="epoch"`` (for calendar days,
on local wall time; weeks as ``W-MON``, months as ``MS``), which the tests hold them to; the
reference page ``docs/reference/intervals.md`` gives the pandas call for every form.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from dataclasses import dataclass
from typing import Literal

import pandas as pd

from tsstore.errors import QueryError
from tsstore.times import EPOCH, interval_label, to_duration, to_utc, utc_text

UTC = dt.timezone.utc
_MICROSECOND = dt.timedelta(microseconds=1)
_CLOCK = re.compile(r"T?(\d{1,2}):(\d{2})(?::(\d{2}(?:\.\d+)?))?")  # a time of day alone
_DAY = dt.timedelta(days=1)
_SWITCH = dt.timedelta(hours=3)  # more than any zone's daylight-saving (or other) jump of its clock
_DAY0 = dt.date(1970, 1, 1)
_MONDAY0 = dt.date(1970, 1, 5)
Unit = Literal["D", "W", "M"]
_CALENDAR = re.compile(r"\s*(\d*)\s*([DdWw]|MS|M|days?|weeks?|months?)\s*")  # "m" stays minutes
_UNITS: dict[str, Unit] = {"d": "D", "day": "D", "days": "D", "w": "W", "week": "W", "weeks": "W"}
_UNITS.update({"m": "M", "ms": "M", "month": "M", "months": "M"})
FILLS = ("prev", "nan")
Fill = Literal["prev", "nan"]


@dataclass(frozen=True)
class Buckets:
    """Bucket edges: ``step`` (fixed) from ``origin``, or ``count`` calendar ``unit``\\ s in ``zone``."""

    zone: dt.tzinfo
    step: dt.timedelta | None = None
    origin: dt.datetime | None = None  # UTC; with ``step``
    unit: Unit | None = None
    count: int = 1
    clock: dt.time | None = None  # with ``step`` and no ``origin``: edges at this local time each day

    def start(self, when: dt.datetime) -> dt.datetime:
        """The start (UTC) of the bucket holding ``when``."""
        if self.clock is not None:
            return self._clock_start(when.astimezone(UTC))
        if self.step is not None:
            assert self.origin is not None
            when = when.astimezone(UTC)  # steps are absolute time: no wall-clock arithmetic
            return when - (when - self.origin) % self.step
        local = when.astimezone(self.zone).date()
        if self.unit == "M":
            months = (local.year - 1970) * 12 + local.month - 1
            months -= months % self.count
            return self._midnight(dt.date(1970 + months // 12, months % 12 + 1, 1))
        first, length = (_MONDAY0, 7) if self.unit == "W" else (_DAY0, 1)
        units = (local - first).days // length
        units -= units % self.count
        return self._midnight(first + dt.timedelta(days=units * length))

    def after(self, start: dt.datetime) -> dt.datetime:
        """The start (UTC) of the bucket that follows the one starting at ``start``."""
        if self.clock is not None:
            return self._clock_after(start.astimezone(UTC))
        if self.step is not None:
            return start.astimezone(UTC) + self.step
        local = start.astimezone(self.zone).date()
        if self.unit == "M":
            months = local.year * 12 + local.month - 1 + self.count
            return self._midnight(dt.date(months // 12, months % 12 + 1, 1))
        return self._midnight(local + dt.timedelta(days=self.count * (7 if self.unit == "W" else 1)))

    # A local time-of-day grid: within a stretch of one UTC offset the edges are every step
    # from the clock time, shifted by the offset; across a switch the edge is the latest (or
    # first) one whose own offset is the one it was computed with. A switch is never nearer
    # than a day to the next, so the offsets at ``when`` and a step and a switch before it
    # (or after it) are the only ones to try.

    def _grid(self, offset: dt.timedelta, when: dt.datetime) -> dt.datetime:
        """The latest instant at or before ``when`` (UTC) whose clock at ``offset`` is an edge."""
        assert self.step is not None and self.clock is not None
        wall = when.replace(tzinfo=None) + offset
        base = dt.datetime.combine(wall.date(), self.clock)
        return (base + ((wall - base) // self.step) * self.step - offset).replace(tzinfo=UTC)

    def _offset(self, when: dt.datetime) -> dt.timedelta:
        return when.astimezone(self.zone).utcoffset() or dt.timedelta(0)

    def _clock_start(self, when: dt.datetime) -> dt.datetime:
        assert self.step is not None
        found: list[dt.datetime] = []
        tried: list[dt.timedelta] = []
        for probe in (when, when - self.step - _SWITCH):
            offset = self._offset(probe)
            if offset in tried:
                continue  # the same offset finds the same edge (no switch near: the common case)
            tried.append(offset)
            edge = self._grid(offset, when)
            while self._offset(edge) != offset and edge > when - self.step - 2 * _SWITCH:
                edge -= self.step  # computed past the switch: step back into its own stretch
            if self._offset(edge) == offset:
                found.append(edge)
        return max(found, default=self._grid(self._offset(when), when))

    def _clock_after(self, start: dt.datetime) -> dt.datetime:
        assert self.step is not None
        found: list[dt.datetime] = []
        tried: list[dt.timedelta] = []
        for probe in (start, start + self.step + _SWITCH):
            offset = self._offset(probe)
            if offset in tried:
                continue
            tried.append(offset)
            edge = self._grid(offset, start) + self.step
            while self._offset(edge) != offset and edge < start + self.step + 2 * _SWITCH:
                edge += self.step  # before the switch: step on into its own stretch
            if self._offset(edge) == offset:
                found.append(edge)
        return min(found, default=self._grid(self._offset(start), start) + self.step)

    def _midnight(self, day: dt.date) -> dt.datetime:
        return dt.datetime(day.year, day.month, day.day, tzinfo=self.zone).astimezone(UTC)

    @property
    def utc(self) -> bool:
        """Whether bucket starts are shown in UTC (no zone was asked for)."""
        return self.zone is UTC

    def describe(self) -> str:
        """These buckets in words: ``1D buckets in Asia/Kolkata``, ``90min buckets from 09:30Z``."""
        where = "" if self.utc else f" in {self.zone}"
        if self.step is None:
            return f"{self.count}{self.unit} buckets{where}"
        if self.clock is not None:
            return f"{interval_label(self.step)} buckets from {self.clock.isoformat()} each day{where}"
        assert self.origin is not None
        local_epoch = dt.datetime(1970, 1, 1, tzinfo=self.zone).astimezone(UTC)
        since = "" if self.origin == local_epoch else f" from {utc_text(self.origin)}"
        return f"{interval_label(self.step)} buckets{since}{where}"

    def straddled(self, start: dt.datetime, length: dt.timedelta) -> dt.datetime | None:
        """The edge of these buckets inside ``[start, start + length)`` (a stored bar that two
        buckets would share), or ``None`` when the span lies in one bucket."""
        last = start + length - _MICROSECOND
        if self.start(start) == self.start(last):
            return None
        return self.after(self.start(start))

    def tiled_by(self, length: dt.timedelta) -> bool | None:
        """Whether every edge of these buckets is an edge of bars of ``length`` counted from the
        UTC epoch (a roll-up's): ``True``/``False`` for fixed steps, ``None`` (it depends on
        the dates: calendar units in a zone) otherwise."""
        if self.step is None or self.clock is not None:
            return None
        assert self.origin is not None
        return not self.step % length and not (self.origin - EPOCH) % length


def to_zone(tz: object) -> dt.tzinfo:
    """``tz`` as a time zone: ``None`` or ``"UTC"`` is UTC, else an IANA name such as
    ``"America/New_York"`` (or a ``tzinfo``)."""
    if tz is None or (isinstance(tz, str) and tz.upper() == "UTC"):
        return UTC
    if isinstance(tz, dt.tzinfo):
        return tz
    if isinstance(tz, str):
        try:
            return zoneinfo.ZoneInfo(tz)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            pass
    raise QueryError(f"tz={tz!r} is not a time zone; give an IANA name such as 'America/New_York', or 'UTC'")


def buckets(interval: object, *, tz: object = None, origin: object = None) -> Buckets:
    """The buckets of ``interval`` (a ``timedelta``, seconds, or ``"15min"``, ``"1h"``,
    ``"1D"``, ``"1W"``, ``"1M"``) in zone ``tz``, from ``origin`` (``None`` or ``"epoch"``:
    1970-01-01 local midnight; or a time)."""
    zone = to_zone(tz)
    clock = time_of_day(origin)
    start = None if origin is None or origin == "epoch" or clock is not None else _origin(origin, zone)
    calendar = _CALENDAR.fullmatch(interval) if isinstance(interval, str) else None
    if calendar is not None:
        count = int(calendar.group(1) or 1)
        unit = _UNITS[calendar.group(2).lower()]
        if count < 1:
            raise QueryError(f"interval {interval!r} is not positive")
        if clock is not None:
            days = None if unit == "M" else dt.timedelta(days=count * (7 if unit == "W" else 1))
            return _daily(origin, interval, days, clock, zone)
        if start is None:
            return Buckets(zone, unit=unit, count=count)
        if unit == "M":
            raise QueryError(f"interval {interval!r}: months follow the calendar; origin must be 'epoch' (the 1st)")
        return Buckets(zone, step=dt.timedelta(days=count * (7 if unit == "W" else 1)), origin=start)
    step = to_interval(interval)
    if clock is not None:
        return _daily(origin, interval, step, clock, zone)
    if start is None:
        start = dt.datetime(1970, 1, 1, tzinfo=zone).astimezone(UTC)
    return Buckets(zone, step=step, origin=start)


def time_of_day(origin: object) -> dt.time | None:
    """``origin`` as a time of day (``"09:30"``, ``"9:30:15"``, a ``datetime.time``), or
    ``None`` when it is something else (an instant, ``"epoch"``)."""
    if isinstance(origin, dt.time):
        if origin.tzinfo is not None:
            raise QueryError(f"origin {origin!r} has a zone; a time of day is read in tz=, give it without one")
        return origin
    found = _CLOCK.fullmatch(origin.strip()) if isinstance(origin, str) else None
    if found is None:
        return None
    hours, minutes, seconds = (float(part) for part in (*found.group(1, 2), found.group(3) or 0))
    if hours >= 24 or minutes >= 60 or seconds >= 60:
        raise QueryError(f"origin {origin!r} is not a time of day: hours 0-23, minutes and seconds 0-59")
    return (dt.datetime.min + dt.timedelta(hours=hours, minutes=minutes, seconds=seconds)).time()


def _daily(origin: object, interval: object, step: dt.timedelta | None, clock: dt.time, zone: dt.tzinfo) -> Buckets:
    """Buckets of ``step`` from the local time ``clock`` on every day in ``zone``; refused for a
    step that does not divide a day (the days would not share their edges)."""
    if step is None or step > _DAY or _DAY % step:
        said = origin if isinstance(origin, str) else clock.isoformat()
        raise QueryError(
            f"origin {said!r} is a time of day, which puts edges at that time on every day: the interval "
            f"must divide 24h (e.g. '1min', '15min', '30min', '1h', '2h', '4h', '1D'), and {interval!r} does not; "
            "give an origin with a date (a fixed instant) for it"
        )
    return Buckets(zone, step=step, clock=clock)


def _origin(origin: object, zone: dt.tzinfo) -> dt.datetime:
    """``origin`` as an instant (UTC): a time without an offset is read in the buckets' ``zone``,
    as the CLI reads ``--origin`` in ``--tz`` (a time of day alone is :func:`time_of_day`'s)."""
    value = origin
    if isinstance(origin, str):
        try:
            value = pd.Timestamp(origin).to_pydatetime()
        except ValueError:
            raise QueryError(f"origin {origin!r} is not an ISO-8601 time; or give origin='epoch'") from None
    if not isinstance(value, dt.datetime):
        raise QueryError(
            f"origin {origin!r} is not a time: give a datetime or ISO-8601 text (read in tz when it has no "
            "offset); or give origin='epoch'"
        )
    if value.tzinfo is None:
        value = (value.to_pydatetime() if isinstance(value, pd.Timestamp) else value).replace(tzinfo=zone)
    try:
        return to_utc(value, name="origin")
    except ValueError as exc:
        raise QueryError(f"{exc}; or give origin='epoch'") from None


def to_interval(value: object) -> dt.timedelta:
    """A fixed bar interval: a ``timedelta``, seconds, or a string such as '1min', '15min',
    '1h', '1D'; positive, and a whole number of microseconds."""
    try:
        interval = to_duration(value, name="interval")
    except ValueError as exc:
        raise QueryError(f"{exc} (e.g. '1min', '15min', '1h', '1D', '1W', '1M')") from None
    if interval <= dt.timedelta(0):
        raise QueryError(f"interval {value!r} is not positive")
    return interval


def check_fill(fill: object) -> Fill | None:
    """``fill`` as a fill policy for empty buckets: ``None`` (no row), ``"prev"`` (the
    previous close carried, no volume) or ``"nan"`` (missing prices, no volume)."""
    if fill is None or fill in FILLS:
        return fill  # type: ignore[return-value]
    raise QueryError(f"fill={fill!r} is not allowed; use None (no row), 'prev' (close carried) or 'nan'")
