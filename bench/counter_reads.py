"""Reads a counter's value costs: one sum() aggregation vs reading every shard (the seed's way).

Firestore bills an aggregation one read per 1 000 index entries it scans (at least one),
and a document read one read per document. The emulator does not report billed reads (it
does not answer explain/analyze), so the aggregation's reads are computed from that rule
with the number of shard documents it sums; the per-shard reads are the documents the
seed's method actually fetched. Wall times are measured side by side on the emulator.

Run: python bench/counter_reads.py
"""

from __future__ import annotations

import math
import time

from _common import emulator

from tsstore.counters import SHARDS_COLLECTION, ShardedCounter

ENTRIES_PER_AGGREGATION_READ = 1000


def main() -> None:
    emu = emulator()
    try:
        client = emu.client()
        print("counter value: reads billed and wall time (median of 5)")
        header = ("shards", "sum() reads", "read-all reads", "reads ratio", "sum() ms", "read-all ms")
        print(" ".join(f"{h:>{w}}" for h, w in zip(header, (7, 12, 15, 12, 9, 12))))
        for n in (10, 100, 1000):
            counter = ShardedCounter(client, f"counters/bench-{n}")
            counter.create(shards=n)
            counter.increment_many([1] * (5 * n))
            shards = client.collection(f"{counter.path}/{SHARDS_COLLECTION}")

            def read_all() -> tuple[int, int]:
                docs = list(shards.stream())
                return sum(d.get("count") for d in docs), len(docs)

            agg_times, all_times = [], []
            for _ in range(5):
                t0 = time.perf_counter()
                value = counter.value()
                agg_times.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                total, docs_read = read_all()
                all_times.append(time.perf_counter() - t0)
            assert value == total == 5 * n, (value, total)
            agg_reads = max(1, math.ceil(n / ENTRIES_PER_AGGREGATION_READ))
            med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
            print(
                f"{n:>7} {agg_reads:>12} {docs_read:>15} {agg_reads / docs_read:>11.3f}x "
                f"{med(agg_times) * 1000:>8.1f} {med(all_times) * 1000:>11.1f}"
            )
        client.close()
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
