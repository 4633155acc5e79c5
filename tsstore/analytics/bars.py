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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from tsstore.analytics.buckets import Buckets, Fill
from tsstore.errors import QueryError
from tsstore.ticks import Tick, get_path

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
BAR_COLUMNS = ("open", "high", "low", "close", "count")


@dataclass
class Bar:
    """One series' bar over one interval, as it grows."""

    key: tuple[Any, ...]
    start: dt.datetime
    open: Any
    high: Any
    low: Any
    close: Any
    count: int = 1
    volume: Any = 0


def bar_start(timestamp: dt.datetime, interval: dt.timedelta) -> dt.datetime:
    """The start of the UTC bar holding ``timestamp``: a multiple of ``interval`` since the epoch."""
    return timestamp - (timestamp - EPOCH) % interval


class BarBuilder:
    """Bars from ticks given in time order (``descending`` when newest first): :meth:`add`
    returns the bars a tick made final, :meth:`rest` the ones still open at the end."""

    def __init__(
        self,
        interval: dt.timedelta | Buckets,
        *,
        by: Sequence[str] = (),
        price: str,
        volume: str | None = None,
        descending: bool = False,
        fill: Fill | None = None,
    ) -> None:
        self.buckets = interval if isinstance(interval, Buckets) else Buckets(dt.timezone.utc, interval, EPOCH)
        self._fill = fill
        self._last: dict[tuple[Any, ...], Bar] = {}  # each series' last bar given out, for the fill
        self._by = [field.split(".") for field in by]
        self._price = price.split(".")
        self._volume = None if volume is None else volume.split(".")
        self._descending = descending
        self._open: dict[tuple[Any, ...], Bar] = {}  # the bars of the current interval
        self._current: dt.datetime | None = None
        self.skipped = 0

    def add(self, tick: Tick) -> list[Bar]:
        price = get_path(tick.data, self._price)
        if price is None or isinstance(price, bool) or not isinstance(price, (int, float)):
            self.skipped += 1
            return []
        start = self.buckets.start(tick.timestamp)
        done: list[Bar] = []
        if self._current is not None and start != self._current:
            later = start < self._current if self._descending else start > self._current
            if not later:
                raise QueryError(f"ticks are out of time order at {tick.timestamp.isoformat()} (tick {tick.id})")
            done = self.rest()
        self._current = start
        key = tuple(get_path(tick.data, path) for path in self._by)
        volume = 0 if self._volume is None else get_path(tick.data, self._volume)
        volume = volume if isinstance(volume, (int, float)) and not isinstance(volume, bool) else 0
        bar = self._open.get(key)
        if bar is None:
            self._open[key] = Bar(key, start, price, price, price, price, 1, volume)
            return done
        if self._descending:
            bar.open = price  # newest first: every older tick replaces the open
        else:
            bar.close = price
        bar.high = max(bar.high, price)
        bar.low = min(bar.low, price)
        bar.count += 1
        bar.volume += volume
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
            made.append(Bar(earlier.key, start, price, price, price, price, 0, 0))
            start = self.buckets.after(start)
        return made[::-1] if self._descending else made


def bars_frame(
    bars: Iterable[Bar], *, by: Sequence[str], timestamp_field: str, volume: str | None, zone: dt.tzinfo | None = None
) -> pd.DataFrame:
    """Bars as a DataFrame indexed by the ``by`` fields and the bar start (a ``DatetimeIndex``
    level named after the timestamp field, in UTC or the buckets' ``zone``), sorted; columns
    ``open``, ``high``, ``low``, ``close`` (the price's type; missing where a ``"nan"`` fill
    made the bar), ``count`` and, with a volume field, ``volume``."""
    rows = sorted(bars, key=lambda b: (tuple(_sortable(k) for k in b.key), b.start))
    columns: dict[str, Any] = {}
    for name in BAR_COLUMNS:
        values = [getattr(b, name) for b in rows]
        columns[name] = pd.array(values, dtype=_dtype(values) if name != "count" else "Int64")
    if volume is not None:
        values = [b.volume for b in rows]
        columns["volume"] = pd.array(values, dtype=_dtype(values))
    starts = pd.DatetimeIndex([b.start for b in rows], tz="UTC", name=timestamp_field).as_unit("us")
    if zone is not None and zone is not dt.timezone.utc:
        starts = starts.tz_convert(zone)
    index: pd.Index = starts
    if by:
        levels = [pd.Index([b.key[i] for b in rows], name=name) for i, name in enumerate(by)]
        index = pd.MultiIndex.from_arrays([*levels, starts])
    return pd.DataFrame(columns, index=index)


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
