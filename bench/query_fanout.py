"""(a) Query wall time: tsstore vs a hand-written single `in` query vs the seed's algorithm.

The seed's algorithm (seed 004) runs one `get()` per shard chunk concurrently, as its
`Promise.all` does, concatenates everything and fully sorts it. tsstore runs the same
chunk queries concurrently (plus one read-time probe when there is more than one chunk,
for a consistent snapshot), decodes the responses itself and merges them lazily.

Run: python bench/query_fanout.py [--docs 20000] [--repeats 7]
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor

from _common import emulator, measure, verdict
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

from tsstore import QueryShape, SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.limits import MAX_IN_VALUES
from tsstore.local.synthetic import trading_day
from tsstore.read.plan import chunk_shards

FIELD, VALUE = "instrumentType", "commonstock"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    emu = emulator()
    pool = ThreadPoolExecutor(8)
    print(f"query wall time, {args.docs} docs per collection, filter {FIELD} == {VALUE!r}, newest first")
    print(f"{'shards':>6} {'limit':>6} {'tsstore':>9} {'single in':>9} {'seed alg':>9}  ratios")
    try:
        for n_shards in (3, 60):
            emu.reset()  # the emulator scans every stored document: keep one data set at a time
            client = emu.client(database=f"bench-q{n_shards}")
            spec = SeriesSpec(
                "ticks",
                shards=[f"s{i}" for i in range(n_shards)],
                shapes=[QueryShape((FIELD,))],
                key_fields=["symbol"],
            )
            store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False, max_ops_per_second=100_000))
            store.write(trading_day(args.docs, seed=n_shards))
            coll = client.collection("ticks")

            def base(shards: list[str], limit: int) -> firestore.Query:
                return (
                    coll.where(filter=FieldFilter("shard", "in", shards))
                    .where(filter=FieldFilter(FIELD, "==", VALUE))
                    .order_by("timestamp", direction=firestore.Query.DESCENDING)
                    .limit(limit)
                )

            for limit in (100, 1000):
                chunks = [list(c) for c in chunk_shards(spec.shards, MAX_IN_VALUES)]

                def ours() -> list:
                    return list(store.query(where={FIELD: VALUE}, limit=limit))

                def seed() -> list:
                    results = list(pool.map(lambda c: base(c, limit).get(), chunks))
                    docs = [d for snap in results for d in snap]
                    if len(results) > 1:
                        docs.sort(key=lambda d: d.get("timestamp"), reverse=True)
                    return docs[:limit]

                methods = {"tsstore": ours, "seed": seed}
                if n_shards <= MAX_IN_VALUES:
                    methods["single"] = lambda: base(list(spec.shards), limit).get()
                # all three must return the same documents (ties aside, the seed's sort is by time only)
                assert [t.timestamp for t in ours()] == [d.get("timestamp") for d in seed()]
                r = measure(methods, repeats=args.repeats)
                t, s = r["tsstore"]["wall"], r["seed"]["wall"]
                single = r.get("single", {}).get("wall")
                ratios = f"vs seed {t / s:.2f}x"
                if single:
                    ratios = f"vs single in {t / single:.2f}x {verdict(t / single, 1.05)}; " + ratios
                if n_shards == 60:
                    ratios += " " + verdict(t / s, 0.8)
                print(
                    f"{n_shards:>6} {limit:>6} {t * 1000:>7.0f}ms "
                    f"{(single or 0) * 1000:>7.0f}ms {s * 1000:>7.0f}ms  {ratios}"
                    + ("" if single else "  (no single in: >30 shards)")
                )
                cpu = {name: f"{m['cpu'] * 1000:.0f}ms" for name, m in r.items()}
                print(f"{'':>13} client CPU: " + ", ".join(f"{name} {ms}" for name, ms in cpu.items()))
            store.close()
            client.close()
    finally:
        pool.shutdown()
        emu.stop()


if __name__ == "__main__":
    main()
