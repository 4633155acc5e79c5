"""Whole-range reads: tsstore's query_frame vs one plain streaming `shard in [...]` query per
chunk (google-cloud-firestore's public query.stream(), rows collected as dicts), and the
memory stream_frames needs, on a collection several times larger than the range.

Each measurement runs in a process of its own (so its peak RSS is its own), methods
alternating, on one emulator holding the data. The emulator scans its whole collection for
every query (about 20 µs a document per `in` value), which both methods pay alike.

Run: python bench/range_read.py [--docs 150000] [--range-docs 50000] [--shards 3,40] [--repeats 2]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from _common import emulator, resident_kb

from tsstore import SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.local.synthetic import trading_day

DAY = dt.date(2019, 1, 2)
OPEN = dt.datetime(2019, 1, 2, 8, 0, tzinfo=dt.timezone.utc)
SESSION = dt.timedelta(hours=8, minutes=30)


def spec_for(shards: int) -> SeriesSpec:
    return SeriesSpec(f"range{shards}", shards=[f"s{i}" for i in range(shards)], key_fields=["symbol"])


def child(method: str, address: str, shards: int, start: str, end: str) -> None:
    """One measurement, in its own process: prints rows, seconds and RSS figures as JSON."""
    os.environ["FIRESTORE_EMULATOR_HOST"] = address
    from google.cloud import firestore
    from google.cloud.firestore_v1.base_query import FieldFilter

    client = firestore.Client(project="tsstore-local", database=f"range-{shards}")
    spec = spec_for(shards)
    store = TimeSeriesStore(client, spec)
    lo, hi = dt.datetime.fromisoformat(start), dt.datetime.fromisoformat(end)
    # Resident memory sampled every 20 ms while reading (ru_maxrss would show the imports' peak).
    baseline = resident_kb()
    peak = [baseline]
    reading = threading.Event()

    def sample() -> None:
        while not reading.wait(0.02):
            peak[0] = max(peak[0], resident_kb())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    began = time.perf_counter()
    if method == "query_frame":
        rows = len(store.query_frame(start=lo, end=hi))
    elif method == "stream_frames":
        rows = sum(len(frame) for frame in store.stream_frames(start=lo, end=hi))
    else:  # plain: one streaming query per chunk, the same chunks tsstore plans
        rows = 0
        for chunk in store.plan(start=lo, end=hi).chunks:
            query = (
                client.collection(spec.collection)
                .where(filter=FieldFilter(spec.shard_field, "in", list(chunk)))
                .where(filter=FieldFilter(spec.timestamp_field, ">=", lo))
                .where(filter=FieldFilter(spec.timestamp_field, "<", hi))
                .order_by(spec.timestamp_field, direction=firestore.Query.DESCENDING)
            )
            rows += sum(1 for snap in query.stream() if snap.to_dict() is not None)
    seconds = time.perf_counter() - began
    reading.set()
    sampler.join()
    print(json.dumps({"rows": rows, "seconds": seconds, "peak_kb": peak[0], "baseline_kb": baseline}))


def run_child(method: str, address: str, shards: int, start: dt.datetime, end: dt.datetime) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", method, address, str(shards), start.isoformat(), end.isoformat()],
        capture_output=True,
        text=True,
        timeout=3600,
        cwd=Path(__file__).parent,
    )
    if done.returncode:
        raise SystemExit(done.stderr)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6])
        return
    parser = argparse.ArgumentParser()
    parser.add_argument("--docs", type=int, default=150_000)
    parser.add_argument("--range-docs", type=int, default=50_000)
    parser.add_argument("--shards", default="3,40")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    # The emulator keeps every document on its heap and frees nothing on reset: 2 GiB (the
    # default) runs out near 300 000 ticks, and it then answers UNKNOWN with no message.
    emu = emulator(max_heap="8g")
    try:
        # The range: the first range-docs / docs of the session, so the collection is larger.
        end = OPEN + SESSION * (args.range_docs / args.docs)
        print(f"whole-range reads: {args.docs} ticks per collection, range [{OPEN:%H:%M}, {end:%H:%M}) UTC")
        for shards in (int(s) for s in args.shards.split(",")):
            emu.reset()
            client = emu.client(database=f"range-{shards}")
            store = TimeSeriesStore(client, spec_for(shards), write_options=WriteOptions(ramp=False))
            store.write(trading_day(args.docs, day=DAY, seed=shards), keep_ids=False)
            expected = store.count(start=OPEN, end=end)
            store.close()
            client.close()
            results: dict[str, list[dict[str, float]]] = {"query_frame": [], "plain": [], "stream_frames": []}
            for repeat in range(args.repeats):
                order = list(results) if repeat % 2 == 0 else list(reversed(results))
                for method in order:
                    got = run_child(method, emu.address, shards, OPEN, end)
                    assert got["rows"] == expected, (method, got, expected)
                    results[method].append(got)
            secs = {m: statistics.median(r["seconds"] for r in rs) for m, rs in results.items()}
            extra_mb = {m: max((r["peak_kb"] - r["baseline_kb"]) / 1024 for r in rs) for m, rs in results.items()}
            print(f"{shards} shards, {expected} rows in range:")
            for method in results:
                print(
                    f"  {method:<14} {secs[method]:7.1f} s  {expected / secs[method]:9,.0f} rows/s  "
                    f"peak RSS +{extra_mb[method]:6.0f} MB over the RSS before reading"
                )
            print(f"  query_frame / plain stream: {secs['query_frame'] / secs['plain']:.2f}x (target <= 1.1x)")
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
