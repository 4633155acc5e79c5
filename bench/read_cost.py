"""What a page costs: documents the server returned per limited page, lean vs eager.

Eager is how tsstore read a page before the read engine: every chunk asked for limit + 1.
Lean asks each chunk for its share and refills only where the merge may miss rows
(tsstore.read). Both run side by side on the same emulator data (ticks with random shards,
10 symbols) and the same random queries (filter and end time), alternating, at one snapshot each. Counted from
ReadStats, which counts what the server's responses held.

Run: python bench/read_cost.py [--docs 3000] [--pages 4] [--shards 3,30,60,90]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import time

from _common import emulator

from tsstore import QueryShape, SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.local.synthetic import INSTRUMENTS, trading_day

SYMBOLS = [instrument[0] for instrument in INSTRUMENTS][:10]
LIMITS = (10, 100, 1000)
DAY = dt.date(2019, 1, 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=3000)
    parser.add_argument("--pages", type=int, default=4, help="random pages per row, each read lean and eager")
    parser.add_argument("--shards", default="3,30,60,90")
    args = parser.parse_args()
    rng = random.Random(11)
    day_start = dt.datetime.combine(DAY, dt.time(8, 0), tzinfo=dt.timezone.utc)  # trading_day's span
    day_ms = int(8.5 * 3600 * 1000)
    emu = emulator()
    print(f"documents read per page, {args.docs} ticks per collection, {args.pages} random pages per row")
    print(
        f"{'shards':>6} {'filter':>7} {'limit':>5} {'chunks':>6} {'eager':>7} {'lean':>7} {'lean/limit+1':>12} "
        f"{'bound':>7} {'refilled':>8} {'wall lean/eager':>15}"
    )
    ratios: list[float] = []
    over = 0
    try:
        for n_shards in (int(s) for s in args.shards.split(",")):
            emu.reset()  # the emulator scans every stored document: one data set at a time
            spec = SeriesSpec(
                f"cost{n_shards}",
                shards=[f"s{i}" for i in range(n_shards)],
                shapes=[QueryShape("symbol")],
                key_fields=["symbol"],
            )
            client = emu.client(database=f"cost-{n_shards}")
            lean = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
            eager = TimeSeriesStore(client, spec, lean=False)
            lean.write(list(trading_day(args.docs, day=DAY, seed=n_shards, symbols=len(SYMBOLS))))
            for label, pick in (
                ("none", lambda: None),
                ("==", lambda: {"symbol": rng.choice(SYMBOLS)}),
                ("in 3", lambda: {"symbol": rng.sample(SYMBOLS, 3)}),
                ("in 10", lambda: {"symbol": list(SYMBOLS)}),
            ):
                for limit in LIMITS:
                    docs = {"lean": [], "eager": []}
                    walls = {"lean": [], "eager": []}
                    refilled = 0
                    for page in range(args.pages):
                        where = pick()
                        # A random end in the day's second half: every page is its own query.
                        end = day_start + dt.timedelta(milliseconds=rng.randrange(day_ms // 2, day_ms))
                        order = ("lean", "eager") if page % 2 == 0 else ("eager", "lean")
                        for name in order:
                            store = lean if name == "lean" else eager
                            began = time.perf_counter()
                            got = store.query(where=where, end=end, limit=limit)
                            walls[name].append(time.perf_counter() - began)
                            docs[name].append(got.stats.documents)
                            refilled += name == "lean" and got.stats.refills > 0
                            chunks = got.stats.chunks
                    mean_lean, mean_eager = statistics.mean(docs["lean"]), statistics.mean(docs["eager"])
                    bound = 1.3 * (limit + 1) + 2 * chunks
                    over += mean_lean > bound or mean_lean > mean_eager
                    ratio = statistics.median(w / e for w, e in zip(walls["lean"], walls["eager"]))
                    ratios.extend(w / e for w, e in zip(walls["lean"], walls["eager"]))
                    print(
                        f"{n_shards:>6} {label:>7} {limit:>5} {chunks:>6} {mean_eager:>7.0f} {mean_lean:>7.1f} "
                        f"{mean_lean / (limit + 1):>11.2f}x {bound:>7.0f} {refilled:>4}/{args.pages:<3} {ratio:>14.2f}x"
                    )
            lean.close()
            eager.close()
            client.close()
        print(
            f"rows over the bound 1.3 x (limit + 1) + 2 x chunks (or over eager): {over}; "
            f"page wall time lean / eager, median over every page: {statistics.median(ratios):.2f}x (target <= 1.15x)"
        )
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
