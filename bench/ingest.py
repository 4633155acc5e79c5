"""Ingest throughput vs the core writer alone, on the same rows.

`ingest_file` reads a CSV (parsing, typing and checking every row, tracking the
checkpoint) and writes through the store; the baseline hands the same ticks, already
Python dicts, straight to `store.write`. Both write into an emptied emulator, alternating
which goes first, so the ratio shows what parsing costs. Target: ingest >= 0.8x the writer alone.

Run: python bench/ingest.py [--rows 50000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import csv
import statistics
import tempfile
import time
from pathlib import Path

from _common import emulator, verdict

from tsstore import TimeSeriesStore, WriteOptions
from tsstore.demo import SPEC
from tsstore.ingest import ingest_file
from tsstore.local.synthetic import CSV_COLUMNS, flat_row, trading_day


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    ticks = list(trading_day(args.rows, seed=17))
    folder = Path(tempfile.mkdtemp(prefix="tsstore-bench-"))
    source = folder / "ticks.csv"
    with open(source, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(flat_row(t) for t in ticks)
    emu = emulator()
    rates: dict[str, list[float]] = {"ingest (CSV)": [], "writer alone": []}
    try:
        client = emu.client()
        store = TimeSeriesStore(client, SPEC, write_options=WriteOptions(ramp=False, max_ops_per_second=1_000_000))
        for i in range(args.repeats + 1):  # the first round warms the emulator up and is not counted
            # Alternate which method goes first: after a reset the emulator's JVM is still
            # collecting the previous round's garbage, which would tax whoever runs first.
            for name in sorted(rates, reverse=bool(i % 2)):
                emu.reset()
                t0 = time.perf_counter()
                if name == "writer alone":
                    store.write(ticks)
                else:
                    summary = ingest_file(store, source, checkpoint=folder / f"ck-{i}.json")
                    assert summary.written == args.rows and summary.rejected == 0
                if i:
                    rates[name].append(args.rows / (time.perf_counter() - t0))
        med = {k: statistics.median(v) for k, v in rates.items()}
        print(f"ingest throughput, {args.rows} rows, median of {args.repeats}")
        for name, rate in med.items():
            print(f"  {name:<14} {rate:9,.0f} rows/s")
        ratio = med["ingest (CSV)"] / med["writer alone"]
        print(f"  ingest / writer alone: {ratio:.2f}x {verdict(ratio, 0.8, at_most=False)}")
        store.close()
        client.close()
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
