"""Arrow tables and Polars frames against query_frame: build time and peak memory, side by side.

The same ticks (written once per layout, 3 and 40 shards) are read whole by ``query_frame``,
``query_table`` and ``query_polars``, each read in a fresh child process so that its peak
memory is its own: the child connects, reads ten ticks to warm up, notes its resident memory,
reads again and reports wall and CPU seconds and how far its peak resident memory rose
above the mark (``ru_maxrss``; pyarrow's allocations are not seen by tracemalloc). Methods
are interleaved, ``--repeats`` times each; medians are printed, and the ratios to
``query_frame``. The three answers are checked equal first.

Run: python bench/arrow.py [--ticks 30000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from _common import emulator

from tsstore import SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.local.synthetic import trading_day

METHODS = ("query_frame", "query_table", "query_polars")


def child(address: str, database: str, collection: str, shards: int, method: str) -> None:
    """One read in this process: print wall, CPU and peak memory above the warm mark."""
    from tsstore.local.emulator import emulator_client

    store = TimeSeriesStore(emulator_client(address, database=database), spec_for(collection, shards))
    read = getattr(store, method)
    read(direction="asc", limit=10)  # connections, imports, caches; not the whole read, whose peak would stay
    with open("/proc/self/statm") as statm:
        mark = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    w0, c0 = time.perf_counter(), time.process_time()
    result = read(direction="asc")
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"wall": wall, "cpu": cpu, "memory": max(0, peak - mark), "rows": len(result)}))


def spec_for(collection: str, shards: int) -> SeriesSpec:
    return SeriesSpec(collection, shards=[f"s{n:02d}" for n in range(shards)], key_fields=["symbol"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=30_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        address, database, collection, shards, method = args.child
        child(address, database, collection, int(shards), method)
        return
    emu = emulator()
    try:
        ticks = list(trading_day(args.ticks, seed=4))
        for shards in (3, 40):
            collection = f"ticks{shards}"
            store = TimeSeriesStore(emu.client(database="bench-arrow"), spec_for(collection, shards),
                                    write_options=WriteOptions(ramp=False, max_ops_per_second=100_000))  # fmt: skip
            store.write(ticks)
            frame, table = store.query_frame(direction="asc"), store.query_table(direction="asc")
            assert table.num_rows == len(frame) == args.ticks
            assert table.column("price.micros").to_pylist() == frame["price.micros"].tolist()
            assert store.query_polars(direction="asc")["price.micros"].to_list() == frame["price.micros"].tolist()
            runs: dict[str, list[dict[str, float]]] = {m: [] for m in METHODS}
            for _ in range(args.repeats):
                for method in METHODS:
                    done = subprocess.run(
                        [sys.executable, __file__, "--child", emu.address, "bench-arrow", collection, str(shards),
                         method], capture_output=True, text=True, check=True)  # fmt: skip
                    runs[method].append(json.loads(done.stdout.strip().splitlines()[-1]))
            medians = {m: {k: statistics.median(r[k] for r in runs[m]) for k in ("wall", "cpu", "memory")}
                       for m in METHODS}  # fmt: skip
            base = medians["query_frame"]
            print(f"{args.ticks} ticks, {shards} shards, one whole read, median of {args.repeats} (child processes)")
            for method, m in medians.items():
                print(f"  {method:<13} wall {m['wall']:6.2f} s ({m['wall'] / base['wall']:4.2f}x)   "
                      f"cpu {m['cpu']:6.2f} s ({m['cpu'] / base['cpu']:4.2f}x)   "
                      f"peak +{m['memory'] / 2**20:6.1f} MiB "
                      f"({m['memory'] / max(base['memory'], 1):4.2f}x)")  # fmt: skip
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
