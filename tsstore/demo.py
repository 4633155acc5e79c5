"""The demo's declaration: the seed's ``instruments`` collection, its query shapes, and its
1-minute bars kept as a roll-up (``instruments_1min``).

One symbol's ticks are read as one series (``series_rate``: no symbol passes 100 ticks/s,
so its ``(symbol, timestamp)`` index range is far from Firestore's 500 writes/s), and an
exchange's ticks may be filtered by volume on the server (``ranges``).

``tsstore demo`` writes and queries it; ``tsstore indexes tsstore.demo:DECLARATION`` and
``tsstore rules tsstore.demo:DECLARATION`` generate the repository's
``indexes/firestore.indexes.json`` and ``indexes/firestore.rules`` from it, and it is what the
data commands' ``--spec`` means by default.
"""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Iterator
from typing import Any

from tsstore.access import ClientAccess
from tsstore.analytics.rollup import Rollup
from tsstore.local.synthetic import SEED_INSTRUMENTS, trading_day
from tsstore.spec import QueryShape, SeriesSpec

_BOTH = ("desc", "asc")

#: The most ticks one symbol is expected to write per second.
SYMBOL_RATE = 100

SPEC = SeriesSpec(
    "instruments",
    shapes=[
        *(QueryShape((f,), _BOTH) for f in ("instrumentType", "exchange", "price.currency")),
        QueryShape(("symbol",), _BOTH, series_rate=SYMBOL_RATE),
        QueryShape(("exchange",), _BOTH, ranges=("volume",)),
    ],
    key_fields=["symbol"],
    columns={
        "symbol": "string",
        "exchange": "string",
        "instrumentType": "string",
        "price.currency": "string",
        "price.micros": "Int64",
        "volume": "Int64",
    },
    measures=["price.micros", "volume"],
    # Dashboards read as signed-in users; a feed publisher (a user whose ID token carries the
    # custom claim feed = true) may also create ticks, which the rules check field by field.
    access=ClientAccess("signed-in", create="custom", condition="request.auth.token.feed == true"),
)

#: 1-minute OHLCV bars of every symbol, stored in ``instruments_1min`` (``tsstore rollup``).
BARS_1MIN = Rollup(SPEC, interval="1min", by="symbol", price="price.micros", volume="volume")

DECLARATION = [SPEC, BARS_1MIN]

#: The demo's synthetic trading day: the day before the seed's ticks, so the seed's "newest 5"
#: queries show the seed's documents first, then the newest synthetic ones.
DAY = dt.date(2018, 12, 31)


def demo_rows(ticks: int) -> Iterator[dict[str, Any]]:
    """What the demo writes: the seed's instruments, then ``ticks`` synthetic ticks of :data:`DAY`."""
    return itertools.chain(SEED_INSTRUMENTS, trading_day(ticks, day=DAY))
