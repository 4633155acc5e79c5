"""OHLCV bars computed while ticks stream past: pure logic, no Firestore.

A bar covers one bucket ``[start, next)`` of :mod:`tsstore.analytics.buckets` (by default a
multiple of the interval counted from the Unix epoch in UTC, so 1-minute bars start on whole
minutes; or calendar days, weeks and months in a time zone); a tick exactly on an edge opens
the next bar. Per series (the values of the ``by`` fields) and bucket: ``open`` and ``close``
are the price of the first and the last tick in the read engine's order (timestamp, then
document id), ``high`` and ``low`` its extremes, ``count`` its ticks and ``volume`` the sum of
the volume field. Ticks without a price count nowhere (they are skipped and counted in
:attr:`BarBuilder.skipped`); a tick without volume adds none.

A bucket with no tick has no bar, unless a fill is asked for: between two bars of a series,
each empty bucket then gets a bar with ``count`` 0 and ``volume`` 0, and as prices the
earlier bar's close (``"prev"``) or none (``"nan"``). Before a series' first bar and after
its last, nothing is filled.

The ticks arrive in time order (either direction), so once a tick opens a later bucket,
every bar of earlier buckets is final: memory holds the bars of one bucket (and each
series' last bar, for the fill), not ticks.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

import numpy as np
import pandas as pd

from tsstore.analytics.buckets import Buckets, Fill
from tsstore.errors import QueryError
from tsstore.ticks import Tick, get_path
from tsstore.times import bucket_start, interval_label, utc_text

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
BAR_COLUMNS = ("open", "high", "low", "close", "count")


#: The columns ``moments=True`` adds to bars, and the fields a stored bar keeps beside OHLCV
#: so that bars combine into longer ones exactly (see :meth:`Bar.absorb`).
MOMENT_COLUMNS = ("sum", "mean", "std", "open_at", "close_at")
STORED_MOMENTS = ("sum", "m2", "open_at", "close_at")


@dataclass
class Bar:
    """One series' bar over one bucket, as it grows: OHLCV, and what makes bars combine
    into longer ones exactly (:meth:`absorb`): the price's ``sum`` and ``m2``, and the times
    of the ``open`` and ``close`` ticks. Prices are of the price field's type; "first" and
    "last" are in the read engine's order (timestamp, then document id)."""

    #: The values of the ``by`` fields that name the series, in the order of ``by`` (empty without ``by``).
    key: tuple[Any, ...]
    #: Where the bar's bucket starts (aware, UTC).
    start: dt.datetime
    #: The price of the first tick; ``None`` in a bar a ``"nan"`` fill made.
    open: Any
    #: The highest price; ``None`` in a bar a ``"nan"`` fill made.
    high: Any
    #: The lowest price; ``None`` in a bar a ``"nan"`` fill made.
    low: Any
    #: The price of the last tick; ``None`` in a bar a ``"nan"`` fill made.
    close: Any
    #: The ticks with a price the bar holds (0 in a bar a fill made).
    count: int = 1
    #: The sum of the volume field over those ticks (a tick without a volume adds none; 0 without a volume field).
    volume: Any = 0
    #: The sum of the prices; ``None`` in a bar read back without it (stored before it was kept).
    sum: Any = None
    #: The sum of the prices' squared deviations from the bar's mean, the stable form of a sum
    #: of squares (``std = sqrt(m2 / (count - 1))``); ``None`` where ``sum`` is.
    m2: float | None = 0.0
    #: The time of the ``open`` tick (aware, UTC); ``None`` in a bar a fill made or read back without it.
    open_at: dt.datetime | None = None
    #: The time of the ``close`` tick (aware, UTC); ``None`` in a bar a fill made or read back without it.
    close_at: dt.datetime | None = None

    def absorb(self, part: Bar, *, earlier: bool) -> None:
        """Take ``part`` into this bar, exactly as if its ticks had been added one by one.

        - ``part``: ticks or a bar of the same series and bucket, as a bar
        - ``earlier``: ``True`` when ``part``'s ticks come before those the bar holds (it
          gives the ``open``), ``False`` when they come after (it gives the ``close``)"""
        if earlier:
            self.open, self.open_at = part.open, part.open_at
        else:
            self.close, self.close_at = part.close, part.close_at
        self.high = max(self.high, part.high)
        self.low = min(self.low, part.low)
        if self.sum is None or part.sum is None or self.m2 is None or part.m2 is None:
            self.sum = self.m2 = None
        else:  # Chan et al.'s pairwise update: exact sums, a stable sum of squared deviations
            delta = part.sum / part.count - self.sum / self.count
            self.m2 = self.m2 + part.m2 + delta * delta * self.count * part.count / (self.count + part.count)
            self.sum += part.sum
        self.count += part.count
        self.volume += part.volume


def tick_bar(tick: Tick, by: Sequence[list[str]], price: list[str], volume: list[str] | None) -> Bar | None:
    """One tick as a bar of its own (the fields as split paths), or ``None`` without a price."""
    value = get_path(tick.data, price)
    if not _number(value):
        return None
    key = tuple(get_path(tick.data, path) for path in by)
    size = 0 if volume is None else get_path(tick.data, volume)
    at = tick.timestamp
    return Bar(key, at, value, value, value, value, 1, size if _number(size) else 0, value, 0.0, at, at)


def stored_bar(tick: Tick, by: Sequence[list[str]]) -> Bar | None:
    """A stored bar (a roll-up's document) as a bar to combine, or ``None`` without prices."""
    data = tick.data
    opening, high, low, close = (data.get(name) for name in ("open", "high", "low", "close"))
    count = data.get("count")
    if not all(_number(p) for p in (opening, high, low, close)) or not isinstance(count, int) or count < 1:
        return None
    key = tuple(get_path(data, path) for path in by)
    volume = data.get("volume") if _number(data.get("volume")) else 0
    total, m2 = data.get("sum"), data.get("m2")
    if not (_number(total) and _number(m2)):
        total = m2 = None
    opened, closed = data.get("open_at"), data.get("close_at")
    return Bar(key, tick.timestamp, opening, high, low, close, count, volume, total, m2, opened, closed)


def bar_start(timestamp: dt.datetime, interval: dt.timedelta) -> dt.datetime:
    """The start of the UTC bar holding ``timestamp``: a multiple of ``interval`` since the epoch."""
    return bucket_start(timestamp, interval)


class BarBuilder:
    """Bars from ticks given in time order (``descending`` when newest first): :meth:`add`
    returns the bars a tick made final, :meth:`rest` the ones still open at the end. With
    ``combine`` (the stored bars' length), the input is shorter bars (a roll-up's documents,
    see :data:`STORED_MOMENTS`) combined into longer ones exactly, as if built from their
    ticks; a stored bar that would fall in two buckets is refused (:func:`untiled`)."""

    def __init__(
        self,
        interval: dt.timedelta | Buckets,
        *,
        by: Sequence[str] = (),
        price: str,
        volume: str | None = None,
        descending: bool = False,
        fill: Fill | None = None,
        combine: dt.timedelta | None = None,
    ) -> None:
        self.buckets = interval if isinstance(interval, Buckets) else Buckets(dt.timezone.utc, interval, EPOCH)
        self._fill = fill
        self._combine = combine  # the input is bars of this length (a roll-up's documents), not ticks
        self._last: dict[tuple[Any, ...], Bar] = {}  # each series' last bar given out, for the fill
        self._by = [field.split(".") for field in by]
        self._price = price.split(".")
        self._volume = None if volume is None else volume.split(".")
        self._descending = descending
        self._open: dict[tuple[Any, ...], Bar] = {}  # the bars of the current interval
        self._current: dt.datetime | None = None
        self.skipped = 0

    def add(self, tick: Tick) -> list[Bar]:
        if self._combine is None:
            part = tick_bar(tick, self._by, self._price, self._volume)
        else:
            part = stored_bar(tick, self._by)
            edge = self.buckets.straddled(tick.timestamp, self._combine)
            if edge is not None:  # its ticks belong to two buckets: no combining can split them
                raise untiled(self._combine, self.buckets, bar=tick.timestamp, edge=edge)
        return self.add_bar(part, what=f"tick {tick.id}")

    def add_bar(self, part: Bar | None, *, what: str = "a bar") -> list[Bar]:
        """Take ``part`` (one tick's bar or a shorter bar, already read as a :class:`Bar`, its
        ``start`` where it is ordered; ``None``: without a price) as :meth:`add` takes a tick:
        the bars it made final. Combined bars take a late bucket's ticks or finer bars so."""
        if part is None:
            self.skipped += 1
            return []
        start = self.buckets.start(part.start)
        done: list[Bar] = []
        if self._current is not None and start != self._current:
            later = start < self._current if self._descending else start > self._current
            if not later:
                raise QueryError(f"ticks are out of time order at {part.start.isoformat()} ({what})")
            done = self.rest()
        self._current = start
        part.start = start
        bar = self._open.get(part.key)
        if bar is None:
            self._open[part.key] = part
        else:
            bar.absorb(part, earlier=self._descending)  # newest first: each part is older
        return done

    def rest(self) -> list[Bar]:
        """The open bars (final once no tick follows), and forget them; with a fill, each
        after the empty buckets between it and its series' previous bar."""
        done, self._open = list(self._open.values()), {}
        if self._fill is None:
            return done
        filled: list[Bar] = []
        for bar in done:
            before = self._last.get(bar.key)
            if before is not None:
                filled.extend(self._between(*((bar, before) if self._descending else (before, bar))))
            filled.append(bar)
            self._last[bar.key] = bar
        return filled

    def _between(self, earlier: Bar, later: Bar) -> list[Bar]:
        """The empty buckets' bars between two bars of a series, in the read's order."""
        price = earlier.close if self._fill == "prev" else None
        made = []
        start = self.buckets.after(earlier.start)
        while start < later.start:
            made.append(Bar(earlier.key, start, price, price, price, price, 0, 0, 0, 0.0))
            start = self.buckets.after(start)
        return made[::-1] if self._descending else made


def untiled(
    length: dt.timedelta, asked: Buckets, *, bar: dt.datetime | None = None, edge: dt.datetime | None = None
) -> QueryError:
    """The refusal to combine stored bars of ``length`` (from the UTC epoch, as a roll-up
    stores them) into ``asked`` buckets they do not tile: ``bar`` the first one that would
    cross an ``edge``."""
    label = interval_label(length)
    where = ""
    if bar is not None and edge is not None:
        where = f": the stored bar {utc_text(bar)}–{utc_text(bar + length)} holds the edge {utc_text(edge)}"
    return QueryError(
        f"cannot combine {label} bars (aligned on the UTC epoch) into {asked.describe()}{where}; "
        f"ask for buckets made of whole {label} bars, or make the bars from the ticks (bars(price=...) on the "
        "source's store)"
    )


def check_combinable(
    length: dt.timedelta, asked: Buckets, *, start: dt.datetime | None, end: dt.datetime | None
) -> None:
    """Refuse, before reading, to combine stored bars of ``length`` into ``asked`` buckets over
    ``[start, end)`` where that cannot be exact: fixed buckets whose edges are not edges of the
    stored bars, or a bound inside a stored bar (its ticks cannot be split). Calendar buckets
    are checked bar by bar as they are read (:meth:`BarBuilder.add`)."""
    if asked.tiled_by(length) is False:
        raise untiled(length, asked)
    for name, moment in (("start", start), ("end", end)):
        if moment is not None:
            _on_edge(length, moment, name=name)


def _on_edge(length: dt.timedelta, moment: dt.datetime, *, name: str) -> None:
    begin = bucket_start(moment, length)
    if begin != moment:
        label, first, after = interval_label(length), utc_text(begin), utc_text(begin + length)
        raise QueryError(
            f"{name} {utc_text(moment)} falls inside the stored {label} bar {first}–{after}, whose ticks cannot be "
            f"split; give a {name} on a bar edge ({first} or {after}), or an exact count from the ticks with "
            "aggregate(rollups=[...]) on the source's store"
        )


def bars_frame(
    bars: Iterable[Bar],
    *,
    by: Sequence[str],
    timestamp_field: str,
    volume: str | None,
    zone: dt.tzinfo | None = None,
    moments: bool = False,
) -> pd.DataFrame:
    """Bars as a DataFrame indexed by the ``by`` fields and the bar start (a ``DatetimeIndex``
    level named after the timestamp field, in UTC or the buckets' ``zone``), sorted; columns
    ``open``, ``high``, ``low``, ``close`` (the price's type; missing where a ``"nan"`` fill
    made the bar), ``count`` and, with a volume field, ``volume``. With ``moments``, also the
    price's ``sum``, ``mean`` and ``std`` (the sample standard deviation, missing below two
    ticks) and the times of the open and close ticks (``open_at``, ``close_at``)."""
    rows = sorted(bars, key=lambda b: (tuple(_sortable(k) for k in b.key), b.start))
    columns: dict[str, Any] = {}
    for name in BAR_COLUMNS:
        values = [getattr(b, name) for b in rows]
        columns[name] = pd.array(values, dtype=_dtype(values) if name != "count" else "Int64")
    if volume is not None:
        values = [b.volume for b in rows]
        columns["volume"] = pd.array(values, dtype=_dtype(values))
    if moments:
        columns.update(_moments(rows))
    starts = pd.DatetimeIndex([b.start for b in rows], tz="UTC", name=timestamp_field).as_unit("us")
    if zone is not None and zone is not dt.timezone.utc:
        starts = starts.tz_convert(zone)
    index: pd.Index = starts
    if by:
        levels = [pd.Index([b.key[i] for b in rows], name=name) for i, name in enumerate(by)]
        index = pd.MultiIndex.from_arrays([*levels, starts])
    return pd.DataFrame(columns, index=index)


def side_by_side(
    frame: pd.DataFrame, *, series: int, value: str, fill: str | None, edges: Buckets, amount: bool
) -> pd.DataFrame:
    """Bars (a :func:`bars_frame` whose first ``series`` index levels name the series) as one
    row per bucket of ``edges`` from the first bar to the last and one column per series,
    each the bar's ``value``. With ``fill="prev"`` a bucket where a series has no bar takes
    the series' last value before it, missing before its first bar (an ``amount``, such as
    ``count`` or ``volume``: 0); a bar's own missing value (the ``std`` of one tick) stays
    missing and is not carried."""
    levels = list(range(series))
    if not len(frame):
        return pd.DataFrame(index=frame.index)
    wide = frame[value].unstack(level=levels)
    at, last = (wide.index[i].to_pydatetime().astimezone(dt.timezone.utc) for i in (0, -1))
    starts = []
    while at <= last:
        starts.append(at)
        at = edges.after(at)
    index = pd.DatetimeIndex(starts, name=wide.index.name).tz_convert(wide.index.tz).as_unit("us")
    columns = wide.columns
    wide = wide.reindex(index)
    if fill == "prev":
        # The cells with a bar, placed from the frame's own index (unstacking a second column
        # and aligning it cost pandas more than the rest of this function).
        held = np.zeros(wide.shape, dtype=bool)
        held[index.get_indexer(frame.index.get_level_values(-1)), columns.get_indexer(frame.index.droplevel(-1))] = True
        wide = wide.where(held, 0 if amount else wide.ffill())
    return wide


def iter_bars(builder: BarBuilder, ticks: Iterable[Tick]) -> Iterator[Bar]:
    """Every bar of ``ticks``, each as soon as it is final."""
    for tick in ticks:
        yield from builder.add(tick)
    yield from builder.rest()


def _dtype(values: list[Any]) -> str:
    return "Float64" if any(isinstance(v, float) for v in values) else "Int64"


def _sortable(value: Any) -> tuple[int, Any]:
    """Series keys in a total order: missing, then numbers, then the rest as text."""
    if value is None:
        return (0, 0)
    return (1, value) if isinstance(value, (int, float)) else (2, str(value))


def _moments(rows: Sequence[Bar]) -> dict[str, Any]:
    sums = [b.sum if b.count else None for b in rows]
    means = [None if b.sum is None or not b.count else b.sum / b.count for b in rows]
    stds = [None if b.m2 is None or b.count < 2 else math.sqrt(max(b.m2, 0.0) / (b.count - 1)) for b in rows]
    moments: dict[str, Any] = {
        "sum": pd.array(sums, dtype=_dtype(sums)),
        "mean": pd.array(means, dtype="Float64"),
        "std": pd.array(stds, dtype="Float64"),
    }
    for name in ("open_at", "close_at"):
        moments[name] = pd.DatetimeIndex([getattr(b, name) for b in rows], tz="UTC").as_unit("us").array
    return moments


def _number(value: Any) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
