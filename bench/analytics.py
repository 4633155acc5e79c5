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
(d) Billed reads of count, sum(volume), avg, min, max and std of AAA's price over the day's
    session with ragged edges (09:30:15 to 15:45:30), answered from the hourly and minute
    roll-ups (`aggregate(rollups=...)`: hourly bars inside, minute bars beside, ticks at the
    edges), against the ticks (Firestore's `aggregate` for count, sum and avg, plus every tick
    read for min, max and std, which Firestore cannot aggregate); then the roll-up answer
    through a proxy that cuts its connections for --cut-span s (bench/faults.py): every answer
    must equal the clean one. The emulator answers a query only after scanning the collection
    (~0.5-1 s at 200 000 ticks on this machine), and an attempt cut before its first answer makes
    no progress, so the cuts come every ~2.5 x the wait for a first tick measured just before
    (at least 1 s; --every fixes it), as in bench/asof.py.

Run: python bench/analytics.py [--ticks 100000] [--repeats 3] [--every SECONDS] [--cut-span 10]
"""

from __future__ import annotations

import argparse
import datetime as dt
import time
from typing import Any

import pandas as pd
from _common import emulator, measure
from faults import Trial, through_cuts, trial_seconds

from tsstore import Rollup, TimeSeriesStore, WriteOptions
from tsstore.demo import BARS_1MIN, SPEC
from tsstore.local.synthetic import trading_day
from tsstore.read.cost import ReadStats

UTC = dt.timezone.utc
DAY = dt.datetime(2019, 1, 2, tzinfo=UTC)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=100_000, help="ticks per day")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--every", type=float, default=None, help="mean seconds between cuts in (d) (default: auto)")
    parser.add_argument("--down", type=float, default=0.3, help="seconds new connections are refused after a cut")
    parser.add_argument("--cut-span", type=float, default=10.0, help="seconds (d)'s read repeats through cuts")
    parser.add_argument("--case-timeout", type=float, default=300.0, help="time limit of (d) through cuts")
    parser.add_argument("--seed", type=int, default=0, help="seed of the cut schedule")
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

        # (d) an aggregate from the hourly and minute roll-ups vs from the ticks
        hourly = Rollup(BARS_1MIN, interval="1h")
        print(f"# hourly roll-up: {rollups.rollup(hourly, until=end).describe()}")
        session = {"where": {"symbol": "AAA"}, "start": DAY.replace(hour=9, minute=30, second=15),
                   "end": DAY.replace(hour=15, minute=45, second=30)}  # fmt: skip
        price = ["price.micros"]
        asked = {"sum": ["volume"], "avg": price, "min": price, "max": price, "std": price}

        def from_bars(on: TimeSeriesStore, stats: ReadStats | None = None) -> dict[str, Any]:
            return on.aggregate(**session, rollups=[hourly, BARS_1MIN], stats=stats, **asked).as_dict()

        covered = ReadStats()
        answer = from_bars(store, covered)
        counted = ReadStats()
        firestore = store.aggregate(**session, sum=["volume"], avg=price, stats=counted)
        read = store.iter_ticks(**session, columns=price)
        prices = pd.Series([t.data["price"]["micros"] for t in read], dtype="int64")
        assert answer["count"] == firestore.count == len(prices) and answer["sum(volume)"] == firestore.sum["volume"]
        assert answer["avg(price.micros)"] == firestore.avg["price.micros"]
        assert (answer["min(price.micros)"], answer["max(price.micros)"]) == (prices.min(), prices.max())
        assert abs(answer["std(price.micros)"] - prices.std()) <= 1e-9 * prices.std()
        ticks_reads = counted.billed_reads + read.stats.billed_reads
        print(f"(d) count, sum, avg, min, max, std of AAA's {answer['count']} ticks 09:30:15-15:45:30 (equal answers)")
        print(store.explain_aggregate(**session, rollups=[hourly, BARS_1MIN]).describe())
        print(f"  from the roll-ups        {covered.billed_reads:>7} billed reads")
        print(f"  from the ticks           {ticks_reads:>7} billed reads ({counted.billed_reads} aggregate "
              f"+ {read.stats.billed_reads} reading every tick for min, max, std)")  # fmt: skip
        print(f"  ratio ticks / roll-ups: {ticks_reads / covered.billed_reads:.1f}x")
        wanted = from_bars(store)
        clean = Trial.run(lambda: from_bars(store), span=3.0, timeout=args.case_timeout)
        if args.every is None:
            began = time.perf_counter()
            next(iter(store.iter_ticks(**session, direction="asc")), None)
            args.every = max(1.0, 2.5 * (time.perf_counter() - began))
        cut, cuts = through_cuts(emu, "bench-analytics", args, lambda c: from_bars(TimeSeriesStore(c, SPEC)),
                                 span=max(args.cut_span, 3 * args.every))  # fmt: skip
        equal = all(a == wanted for a in (*clean.values, *cut.values))
        print(f"  through {cuts} cuts (every ~{args.every:.1f} s, down {args.down} s): {cut.runs} runs, median "
              f"{trial_seconds(cut)} s against {trial_seconds(clean)} s clean; every answer equal: {equal}; "
              f"failed runs: {sum(cut.errors.values())}")  # fmt: skip
        for problem in cut.problems(args.case_timeout):
            print(f"  {problem}")
        assert equal and cut.ok and cuts, "an answer through the cuts differed or failed, or no cut came"
        rollups.close()
        store.close()
        client.close()
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
