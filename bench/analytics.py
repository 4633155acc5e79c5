"""Analytics: what the analytics verbs save, side by side in one run on one emulator.

The collection holds two synthetic trading days (12 instruments, --ticks per day, the demo's
declaration: 3 shards, measures price.micros and volume, the 1-minute roll-up); every
question is about one of the days, so each read is a range of a collection twice its size.

(a) Documents billed to answer "one day of 1-minute bars for one symbol": computing them
    from the ticks (`store.bars`) against reading the stored roll-up (`tsstore rollup` run
    first) with the ordinary query verb. Both answers are compared bar for bar.
(b) Billed reads of `aggregate(count, sum(volume), avg(price.micros))` over the day against
    pulling every tick of the day (`query_frame`) and computing the same in pandas; the
    answers are compared.
(c) Client CPU of `store.bars(...)` against `query_frame(...)` of the same ticks followed by
    `groupby().resample().ohlc()` (median of --repeats, interleaved).

Run: python bench/analytics.py [--ticks 100000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

import pandas as pd
from _common import emulator, measure

from tsstore import TimeSeriesStore, WriteOptions
from tsstore.demo import BARS_1MIN, SPEC
from tsstore.local.synthetic import trading_day
from tsstore.read.cost import ReadStats

UTC = dt.timezone.utc
DAY = dt.datetime(2019, 1, 2, tzinfo=UTC)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=100_000, help="ticks per day")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    emu = emulator()
    try:
        client = emu.client(database="bench-analytics")
        store = TimeSeriesStore(client, SPEC, write_options=WriteOptions(ramp=False, max_ops_per_second=100_000))
        for day in (DAY - dt.timedelta(days=1), DAY):
            store.write(trading_day(args.ticks, day=day.date(), seed=day.day))
        end = DAY + dt.timedelta(days=1)
        one = {"where": {"symbol": "AAA"}, "start": DAY, "end": end}
        print(f"# {2 * args.ticks} ticks over two days; questions about {DAY.date()} (half of them)")

        # (a) bars from ticks vs from the stored roll-up
        rolled = store.rollup(BARS_1MIN, until=end)
        print(f"# roll-up: {rolled.describe()}")
        from_ticks = ReadStats()
        bars = store.bars(interval="1min", by="symbol", price="price.micros", volume="volume", stats=from_ticks, **one)
        rollups = TimeSeriesStore(client, BARS_1MIN.spec)
        page = rollups.query(direction="asc", limit=10_000, **one)
        stored = pd.DataFrame([{"timestamp": t.timestamp, **t.data} for t in page]).set_index("timestamp")
        assert list(stored["close"]) == [int(v) for v in bars["close"]] and len(stored) == len(bars)
        ratio = from_ticks.billed_reads / page.stats.billed_reads
        print(f"(a) one day of 1-minute bars for AAA ({len(bars)} bars, equal bar for bar)")
        print(f"  from ticks (bars)       {from_ticks.billed_reads:>8} billed reads")
        print(f"  from the roll-up (query) {page.stats.billed_reads:>7} billed reads")
        print(f"  ratio ticks / roll-up: {ratio:.1f}x fewer reads from the roll-up")

        # (b) aggregate vs pulling every tick
        agg = ReadStats()
        totals = store.aggregate(start=DAY, end=end, sum=["volume"], avg=["price.micros"], stats=agg)
        pulled = store.iter_ticks(start=DAY, end=end, columns=["price.micros", "volume"])
        frame = pd.DataFrame([t.data for t in pulled])
        micros = [p["micros"] for p in frame["price"]]
        assert totals.count == len(frame) and totals.sum["volume"] == int(frame["volume"].sum())
        assert totals.avg["price.micros"] == sum(micros) / len(micros)
        print(f"(b) count, sum(volume), avg(price.micros) of {totals.count} ticks (equal answers)")
        print(f"  aggregate                {agg.billed_reads:>7} billed reads")
        print(f"  pulling every tick       {pulled.stats.billed_reads:>7} billed reads")
        print(f"  ratio pulling / aggregate: {pulled.stats.billed_reads / agg.billed_reads:.0f}x")

        # (c) client CPU: bars() vs query_frame + resample().ohlc()
        day = {"start": DAY, "end": end}

        def ours() -> Any:
            return store.bars(interval="1min", by="symbol", price="price.micros", volume="volume", **day)

        def pandas_way() -> Any:
            ticks = store.query_frame(direction="asc", columns=["symbol", "price.micros", "volume"], **day)
            grouped = ticks.groupby("symbol")
            ohlc = grouped["price.micros"].resample("1min").ohlc()
            ohlc["volume"] = grouped["volume"].resample("1min").sum()
            return ohlc.dropna()

        a, b = ours(), pandas_way()
        assert len(a) == len(b) and [int(v) for v in a["open"]] == [int(v) for v in b["open"]]
        r = measure({"bars()": ours, "query_frame+resample": pandas_way}, repeats=args.repeats, warm_up=False)
        print(f"(c) 1-minute bars of every symbol over the day ({len(a)} bars), client CPU, median of {args.repeats}")
        for name, m in r.items():
            print(f"  {name:<22} cpu {m['cpu']:6.2f} s   wall {m['wall']:6.2f} s")
        print(f"  ratio bars() / query_frame+resample: {r['bars()']['cpu'] / r['query_frame+resample']['cpu']:.2f}x")
        rollups.close()
        store.close()
        client.close()
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
