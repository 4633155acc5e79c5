"""(c) Write throughput: tsstore's writer vs one `set()` per document, BulkWriter with its
defaults, and WriteBatch commits of 500 in threads. Each method writes the same ticks
into its own collection on the emulator (reset between methods); ratios are of docs/s.

Run: python bench/write.py [--docs 20000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from _common import emulator, verdict

from tsstore import SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.local.synthetic import trading_day
from tsstore.write.prepare import prepare_records


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--set-docs", type=int, default=2_000, help="docs for the slow one-set()-per-doc method")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    emu = emulator()
    spec = SeriesSpec("ticks", shards=[f"s{i}" for i in range(10)], key_fields=["symbol"])
    rows = list(trading_day(args.docs, seed=5))
    # The raw methods get documents already prepared (ids and shards), so they pay no validation.
    prepared = [(d.id, d.data) for d in prepare_records(spec, rows)]
    rates: dict[str, list[float]] = {}

    def run(name: str, count: int, fn: Callable[[], None]) -> None:
        emu.reset()
        t0 = time.perf_counter()
        fn()
        rates.setdefault(name, []).append(count / (time.perf_counter() - t0))

    try:
        client = emu.client()
        coll = client.collection("ticks")
        store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False, max_ops_per_second=100_000))

        def one_set() -> None:
            for doc_id, data in prepared[: args.set_docs]:
                coll.document(doc_id).set(data)

        def bulk_defaults() -> None:
            writer = client.bulk_writer()
            for doc_id, data in prepared:
                writer.set(coll.document(doc_id), data)
            writer.close()

        def batches_in_threads() -> None:
            def commit(part: list) -> None:
                batch = client.batch()
                for doc_id, data in part:
                    batch.set(coll.document(doc_id), data)
                batch.commit()

            parts = [prepared[i : i + 500] for i in range(0, len(prepared), 500)]
            with ThreadPoolExecutor(4) as pool:
                list(pool.map(commit, parts))

        def tsstore_writer() -> None:
            store.write(rows)

        for _ in range(args.repeats):
            run("one set() per doc", args.set_docs, one_set)
            run("BulkWriter defaults", args.docs, bulk_defaults)
            run("WriteBatch 500 x 4 threads", args.docs, batches_in_threads)
            run("tsstore writer", args.docs, tsstore_writer)
        med = {k: statistics.median(v) for k, v in rates.items()}
        print(f"write throughput, {args.docs} docs ({args.set_docs} for one set() per doc), median of {args.repeats}")
        for name, rate in med.items():
            print(f"  {name:<28} {rate:9,.0f} docs/s")
        ours = med["tsstore writer"]
        best_raw = max(v for k, v in med.items() if k != "tsstore writer")
        print(f"  tsstore / best raw method: {ours / best_raw:.2f}x {verdict(ours / best_raw, 0.9, at_most=False)}")
        ratio_set = ours / med["one set() per doc"]
        print(f"  tsstore / one set() per doc: {ratio_set:.1f}x {verdict(ratio_set, 10, at_most=False)}")
        store.close()
        client.close()
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
