"""One place that turns user time values into tz-aware UTC datetimes.

Firestore stores microseconds; a finer value would be truncated on write, so a value
with sub-microsecond digits is refused rather than altered. :func:`to_utc` takes any one
value a caller passes; :func:`parse_iso` and :func:`naive_zone` are the fast path file
ingest takes for every row.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
import zoneinfo
from typing import Any

#: What a time without a timezone means: ``"error"`` (refuse it), ``"utc"``, or an IANA zone
#: name such as ``"Europe/Rome"`` (daylight saving included): see :func:`naive_zone`.
NaivePolicy = str

#: A time as a verb takes it: an aware ``datetime`` (a pandas ``Timestamp`` is one) or ISO-8601
#: text with its offset (``"2024-03-01T09:30:00Z"``); see :func:`to_utc`.
TimeLike = dt.datetime | str

#: A duration as a verb takes it: a ``timedelta`` (a pandas ``Timedelta`` is one), seconds, or
#: text with its unit (``"5min"``, ``"1h"``, ``"30 days"``, ``"P30D"``); see :func:`to_duration`.
DurationLike = dt.timedelta | float | str

#: A time zone as a verb takes it: a ``tzinfo`` or an IANA name (``"America/New_York"``).
ZoneLike = dt.tzinfo | str

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
#: The earliest time Firestore stores (0001-01-01T00:00:00Z).
EARLIEST = dt.datetime(1, 1, 1, tzinfo=dt.timezone.utc)

_LEAP_SECOND = re.compile(r"\d\d:\d\d:60")
_FRACTION = re.compile(r"[.,](\d+)")


def to_utc(value: object, *, name: str, naive: NaivePolicy = "error", naive_option: bool = False) -> dt.datetime:
    """Return ``value`` as an aware UTC ``datetime`` or raise ``ValueError`` naming ``name``.

    Accepts ``datetime`` (including pandas ``Timestamp`` and Firestore's
    ``DatetimeWithNanoseconds``) and ISO-8601 strings. A naive value is an error unless
    ``naive`` names a zone to read it in (``"utc"`` or an IANA zone; the message mentions the
    option when the caller has one, ``naive_option``); a value with nanoseconds that are not
    whole microseconds is an error.
    """
    if type(value) is dt.datetime and value.tzinfo is dt.timezone.utc:
        return value  # already what Firestore stores: the common case, kept cheap
    if isinstance(value, str):
        import pandas as pd  # only to parse text: the spec, and what imports it, load without pandas

        try:
            parsed = pd.Timestamp(value)
        except ValueError as exc:
            raise ValueError(f"{name} {value!r} is not an ISO-8601 time") from exc
        value = parsed
    if not isinstance(value, dt.datetime):
        raise ValueError(
            f"{name} must be a timezone-aware datetime or ISO-8601 string, got {type(value).__name__} {value!r}"
        )
    pandas = sys.modules.get("pandas")  # a value of pandas' (a Timestamp, NaT) is made only once it is loaded
    if pandas is not None and (value is pandas.NaT or (isinstance(value, pandas.Timestamp) and pandas.isna(value))):
        raise ValueError(f"{name} is NaT; a time is required")
    nanos = getattr(value, "nanosecond", 0)
    if nanos % 1000:
        raise ValueError(
            f"{name} {value!r} has sub-microsecond precision ({nanos} ns); "
            "Firestore keeps microseconds, so round it first"
        )
    if value.tzinfo is None or value.utcoffset() is None:
        zone = naive_zone(naive)
        if zone is None:
            option = " or say in which zone to read naive times (naive='utc' or naive='Europe/Rome')"
            raise ValueError(
                f"{name} {value.isoformat()} is naive (no timezone); pass an aware datetime"
                + (option if naive_option else "")
            )
        value = value.replace(tzinfo=zone)
    moment: dt.datetime = value.to_pydatetime() if pandas is not None and isinstance(value, pandas.Timestamp) else value
    try:
        return plain_datetime(moment).astimezone(dt.timezone.utc)
    except OverflowError:
        # e.g. 0001-01-01T00:00:00+01:00: inside datetime's range, outside it once in UTC.
        raise ValueError(
            f"{name} {moment.isoformat()} is outside the times Firestore stores "
            "(0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999999Z)"
        ) from None


def parse_iso(text: str) -> dt.datetime:
    """``text`` as ``datetime.fromisoformat`` reads it (naive when it has no offset), or
    ``ValueError`` naming it: not ISO-8601, a leap second (``:60``), or digits finer than a
    microsecond (which Firestore would drop). Cheap: the cost of ``fromisoformat``, plus a
    closer look only at a value with a seventh fractional digit."""
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        if _LEAP_SECOND.search(text):
            raise ValueError(f"{text!r} is a leap second (:60); Firestore times have none") from None
        raise ValueError(f"{text!r} is not an ISO-8601 time") from None
    dot = max(text.find("."), text.find(",", 10))  # ISO allows a comma as decimal mark
    if dot >= 0 and text[dot + 7 : dot + 8].isdigit():  # a 7th fractional digit: look closer
        fraction = _FRACTION.search(text)
        if fraction and fraction.group(1)[6:].strip("0"):
            raise ValueError(f"{text!r} has sub-microsecond digits; Firestore keeps microseconds")
    return parsed


def naive_zone(policy: str) -> dt.tzinfo | None:
    """The zone a policy reads naive times in: ``"error"`` gives ``None`` (refuse them),
    ``"utc"`` UTC, any other value the IANA zone of that name (daylight-saving gaps and folds
    resolve as ``zoneinfo`` does: fold=0); ``ValueError`` naming the allowed policies if it
    is none of those."""
    if policy == "error":
        return None
    if policy == "utc":
        return dt.timezone.utc
    if not isinstance(policy, str):
        raise ValueError(f"timezone policy {policy!r} is not allowed; use 'error', 'utc' or an IANA zone name")
    try:
        return zoneinfo.ZoneInfo(policy)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ValueError(
            f"timezone policy {policy!r} is not allowed; use 'error', 'utc' or an IANA zone such as 'Europe/Rome'"
        ) from None


def plain_datetime(value: dt.datetime) -> dt.datetime:
    """``value`` as a plain ``datetime`` (same instant and zone): subclasses such as
    Firestore's ``DatetimeWithNanoseconds`` compare equal but are different types."""
    if type(value) is dt.datetime:
        return value
    return dt.datetime(
        value.year,
        value.month,
        value.day,
        value.hour,
        value.minute,
        value.second,
        value.microsecond,
        tzinfo=value.tzinfo,
        fold=value.fold,
    )


def to_micros(value: dt.datetime) -> int:
    """Microseconds since the Unix epoch of an aware datetime (exact, no float rounding)."""
    delta = value - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> dt.datetime:
    """Inverse of :func:`to_micros`."""
    return EPOCH + dt.timedelta(microseconds=micros)


def from_timestamp_pb(stamp: Any) -> dt.datetime:
    """A protobuf ``Timestamp`` (either mode's answers carry them) as an aware UTC datetime,
    nanoseconds below a microsecond dropped."""
    return EPOCH + dt.timedelta(seconds=stamp.seconds, microseconds=stamp.nanos // 1000)


def bucket_start(moment: dt.datetime, step: dt.timedelta) -> dt.datetime:
    """The start of the bucket holding ``moment``: a multiple of ``step`` since the epoch, in UTC."""
    return moment - (moment - EPOCH) % step


def bucket_ceil(moment: dt.datetime, step: dt.timedelta) -> dt.datetime:
    """The first bucket start at or after ``moment`` (computed upward: near :data:`EARLIEST`
    the bucket start below ``moment`` is out of a ``datetime``'s range)."""
    return moment + (EPOCH - moment) % step


def to_duration(value: object, *, name: str) -> dt.timedelta:
    """A ``timedelta`` from seconds (a Python number) or a duration string with its unit such
    as '30 days', '12h', '5min' or 'P30D'; a ``ValueError`` naming ``name`` otherwise. Text
    without a unit (``"5"``, which pandas reads as nanoseconds) and durations that are not a
    whole number of microseconds (what Firestore keeps) are refused."""
    if isinstance(value, dt.timedelta):
        return value
    if isinstance(value, str) and _BARE_NUMBER.fullmatch(value):
        number = value.strip()
        raise ValueError(
            f"{name} {value!r} has no unit: write e.g. '{number}s', '{number}min', '{number}h' or '{number}D'"
        )
    try:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return dt.timedelta(seconds=value)
        if isinstance(value, str):
            if whole := _WHOLE_UNITS.fullmatch(value):
                return dt.timedelta(seconds=int(whole[1]) * _UNIT_SECONDS[whole[2]])
            import pandas as pd  # only to parse other text, as to_utc

            parsed = pd.Timedelta(value)
            if not pd.isna(parsed):  # "NaT" parses, to no duration
                if parsed.value % 1000:
                    raise ValueError(
                        f"{name} {value!r} is not a whole number of microseconds; Firestore keeps microseconds"
                    )
                delta: dt.timedelta = parsed.to_pytimedelta()
                return delta
    except OverflowError:  # past a timedelta's range
        pass
    except ValueError as exc:  # not a number of seconds (nan), or not a duration
        if "microseconds" in str(exc):
            raise
    raise ValueError(
        f"{name} {value!r} is not a duration (or is out of range); give one with its unit such as '30 days', '5min' "
        "or 'P30D'"
    )


_BARE_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*")
#: Whole seconds, minutes or hours (``"2s"``, ``"5min"``, ``"1h"``), read without pandas as
#: pandas reads them: a late policy's defaults are such text, read whenever the spec is
#: imported (pandas took 0.63 of its 0.84 s import, measured). Six digits at most keep them well
#: inside the 292 years a pandas ``Timedelta`` holds, so none is one pandas would refuse.
_WHOLE_UNITS = re.compile(r"(\d{1,6})(s|min|h)")
_UNIT_SECONDS = {"s": 1, "min": 60, "h": 3600}


def utc_text(moment: dt.datetime) -> str:
    """An instant as messages show it: ISO-8601 in UTC with a ``Z`` (``2019-01-02T09:30:00Z``)."""
    return moment.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")


def interval_label(interval: dt.timedelta) -> str:
    """A short name for an interval: ``1min``, ``15min``, ``1h``, ``1d``, else seconds (``90s``)."""
    seconds = interval.total_seconds()
    for unit, size in (("d", 86_400), ("h", 3_600), ("min", 60)):
        if seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s".replace(".", "_")
