"""Deterministic synthetic market ticks, shaped like the seed's instruments.

Used by ``tsstore demo``, the tests and the benchmarks, so all three exercise the same
realistic mix: several symbols, exchanges, currencies and instrument types, random-walk
prices in micros, millisecond timestamps over a trading day (so equal timestamps occur).
"""

from __future__ import annotations

import datetime as dt
import random
from collections.abc import Iterator
from typing import Any

#: The three instruments of the sharded-timestamps seed document, as written there.
SEED_INSTRUMENTS: tuple[dict[str, Any], ...] = (
    {
        "symbol": "AAA",
        "price": {"currency": "USD", "micros": 34_790_000},
        "exchange": "EXCHG1",
        "instrumentType": "commonstock",
        "timestamp": dt.datetime(2019, 1, 1, 13, 45, 23, 10_000, tzinfo=dt.timezone.utc),
    },
    {
        "symbol": "BBB",
        "price": {"currency": "JPY", "micros": 64_272_000_000},
        "exchange": "EXCHG2",
        "instrumentType": "commonstock",
        "timestamp": dt.datetime(2019, 1, 1, 13, 45, 23, 101_000, tzinfo=dt.timezone.utc),
    },
    {
        "symbol": "Index1 ETF",
        "price": {"currency": "USD", "micros": 473_000_000},
        "exchange": "EXCHG1",
        "instrumentType": "etf",
        "timestamp": dt.datetime(2019, 1, 1, 13, 45, 23, 1_000, tzinfo=dt.timezone.utc),
    },
)

# symbol, exchange, currency, instrument type, starting price in micros
INSTRUMENTS: tuple[tuple[str, str, str, str, int], ...] = (
    ("AAA", "EXCHG1", "USD", "commonstock", 34_790_000),
    ("BBB", "EXCHG2", "JPY", "commonstock", 64_272_000_000),
    ("Index1 ETF", "EXCHG1", "USD", "etf", 473_000_000),
    ("CCC", "EXCHG1", "USD", "commonstock", 152_300_000),
    ("DDD", "EXCHG3", "EUR", "commonstock", 88_120_000),
    ("EEE", "EXCHG3", "EUR", "commonstock", 12_450_000),
    ("FFF", "EXCHG2", "JPY", "commonstock", 3_150_000_000),
    ("Index2 ETF", "EXCHG3", "EUR", "etf", 101_900_000),
    ("EURUSD", "FX", "USD", "currency", 1_084_500),
    ("USDJPY", "FX", "JPY", "currency", 149_320_000),
    ("GGG", "EXCHG4", "GBP", "commonstock", 7_880_000),
    ("Index3 ETF", "EXCHG4", "GBP", "etf", 55_600_000),
)


def trading_day(
    count: int, *, day: dt.date = dt.date(2019, 1, 2), seed: int = 7, symbols: int = len(INSTRUMENTS)
) -> Iterator[dict[str, Any]]:
    """``count`` ticks in time order over 08:00–16:30 UTC of ``day``, at millisecond
    resolution, for the first ``symbols`` instruments. Different symbols may share a
    millisecond; one symbol never ticks twice in the same millisecond, so (symbol,
    timestamp) identifies a tick."""
    rng = random.Random(seed)
    chosen = INSTRUMENTS[:symbols]
    prices = [p for *_, p in chosen]
    start = dt.datetime.combine(day, dt.time(8, 0), tzinfo=dt.timezone.utc)
    span_ms = int(8.5 * 3600 * 1000)
    offsets = sorted(rng.randrange(span_ms) for _ in range(count))
    taken: set[tuple[int, int]] = set()
    for offset in offsets:
        i = rng.randrange(len(chosen))
        while (i, offset) in taken:
            i = (i + 1) % len(chosen)
        taken.add((i, offset))
        symbol, exchange, currency, kind, _ = chosen[i]
        prices[i] = max(1, round(prices[i] * (1 + rng.gauss(0, 0.0004))))
        yield {
            "symbol": symbol,
            "price": {"currency": currency, "micros": prices[i]},
            "exchange": exchange,
            "instrumentType": kind,
            "volume": rng.randrange(1, 50) * 100,
            "timestamp": start + dt.timedelta(milliseconds=offset),
        }


CSV_COLUMNS = ("timestamp", "symbol", "exchange", "instrumentType", "price.currency", "price.micros", "volume")


def flat_row(tick: dict[str, Any]) -> dict[str, Any]:
    """A tick as one flat row with dotted column names (ISO-8601 timestamp)."""
    return {
        "timestamp": tick["timestamp"].isoformat(),
        "symbol": tick["symbol"],
        "exchange": tick["exchange"],
        "instrumentType": tick["instrumentType"],
        "price.currency": tick["price"]["currency"],
        "price.micros": tick["price"]["micros"],
        "volume": tick["volume"],
    }
