"""Live data: write->delivery latency of `tail` at 3 and 40 shards against one plain listener
on the unsharded query, and the memory of a tail that has delivered 100 000 ticks.

(a) Latency. One writer writes each batch of ticks into two collections, one with 3 shards and
one with 40 (2 chunk listeners), stamping each tick with its send time. At the same time a
tail runs on each, and one plain Firestore listener (`timestamp >= start`, no shard filter:
the query one would listen to without sharding) on the 40-shard collection. All three see the
same writes under the same load; the script prints p50/p99 of delivery minus send time and the
ratios to the plain listener.

(b) Memory. A tail (lateness 2 s, hold 1 000) follows 100 000 ticks written with current
timestamps, the writer kept at most 2 000 ticks ahead of the tail (the emulator's listeners
fall far behind a writer at full speed); the process's resident memory is printed every
20 000 ticks, with the ids the tail remembers and its listener restarts.

Run: python bench/live.py [--seconds 20] [--rate 50] [--ticks 100000]
"""

from __future__ import annotations

import argparse
import datetime as dt
import statistics
import threading
import time
from typing import Any

from _common import emulator
from google.cloud.firestore_v1.base_query import FieldFilter

from tsstore import SeriesSpec, TimeSeriesStore, WriteOptions, plan_shards

UTC = dt.timezone.utc


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def latency(emu: Any, seconds: float, rate: int) -> None:
    client = emu.client(database="bench-live")
    specs = {n: SeriesSpec(f"live{n}", shards=plan_shards(n * 500), key_fields=["n"]) for n in (3, 40)}
    stores = {n: TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) for n, spec in specs.items()}
    received: dict[str, dict[int, float]] = {"tail 3": {}, "tail 40": {}, "plain listener": {}}
    sent: dict[int, float] = {}
    start = dt.datetime.now(UTC)

    def on_plain(docs: list[Any], changes: list[Any], read_time: Any) -> None:
        now = time.time()
        for change in changes:
            if change.type.name == "ADDED":
                received["plain listener"].setdefault(change.document.get("n"), now)

    plain = (
        client.collection("live40")
        .where(filter=FieldFilter("timestamp", ">=", start))
        .order_by("timestamp")
        .on_snapshot(on_plain)
    )
    tails = {n: store.tail(since=start) for n, store in stores.items()}

    def consume(n: int) -> None:
        for item in tails[n]:
            received[f"tail {n}"].setdefault(item.tick.data["n"], time.time())

    threads = [threading.Thread(target=consume, args=(n,)) for n in tails]
    for thread in threads:
        thread.start()
    time.sleep(2)  # listeners attached
    batch, count, until = max(1, rate // 20), 0, time.time() + seconds
    while time.time() < until:
        rows = [{"n": count + k, "timestamp": dt.datetime.now(UTC)} for k in range(batch)]
        for k in range(batch):
            sent[count + k] = time.time()
        for store in stores.values():
            store.write(rows)
        count += batch
        time.sleep(0.05)
    deadline = time.time() + 90  # let deliveries finish
    while time.time() < deadline and any(len(got) < count for got in received.values()):
        time.sleep(0.2)
    plain.unsubscribe()
    for tail in tails.values():
        tail.close()
    for thread in threads:
        thread.join()
    print(f"(a) write->delivery latency, {count} ticks at ~{rate}/s for {seconds:g} s, written to both collections")
    base = None
    for name, got in received.items():
        missing = count - len(got)
        lat = [(got[n] - sent[n]) * 1000 for n in got if n in sent]
        p50, p99 = percentiles(lat)
        if name == "plain listener":
            base = (p50, p99)
        print(f"  {name:<15} p50 {p50:7.0f} ms  p99 {p99:7.0f} ms  delivered {len(got)}/{count} (missing {missing})")
    assert base is not None
    for name in ("tail 3", "tail 40"):
        p50, p99 = percentiles([(received[name][n] - sent[n]) * 1000 for n in received[name]])
        print(f"  {name} / plain listener: p50 {p50 / base[0]:.2f}x, p99 {p99 / base[1]:.2f}x")


def memory(emu: Any, ticks: int, rate: int) -> None:
    client = emu.client(database="bench-live-memory")
    spec = SeriesSpec("mem", shards=plan_shards(20_000))
    store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
    tail = store.tail(hold=1_000, lateness=dt.timedelta(seconds=2))
    delivered, failure = 0, []

    def consume() -> None:
        nonlocal delivered
        try:
            for _ in tail:
                delivered += 1
                if delivered >= ticks:
                    return
        except Exception as exc:  # a listener the emulator cancelled: report it, do not hang
            failure.append(exc)

    thread = threading.Thread(target=consume)
    thread.start()
    time.sleep(2)
    print(f"(b) memory of a tail over {ticks} ticks at 40 shards, ~{rate}/s (lateness 2 s, hold 1 000), RSS")
    print(f"  {'delivered':>9} {'RSS MB':>8} {'remembered ids':>15} {'restarts':>9}")
    print(f"  {0:>9} {rss_mb():>8.0f} {tail._state.remembered:>15} {tail.restarts:>9}")
    written, mark, batch = 0, 10_000, max(1, rate // 10)
    while delivered < ticks and thread.is_alive():
        if written < ticks:
            now = dt.datetime.now(UTC)
            store.write({"timestamp": now + dt.timedelta(microseconds=k), "v": written + k} for k in range(batch))
            written += batch
        time.sleep(0.1)
        if delivered >= mark:
            print(f"  {delivered:>9} {rss_mb():>8.0f} {tail._state.remembered:>15} {tail.restarts:>9}", flush=True)
            mark += 10_000
    thread.join(timeout=60)
    print(f"  {delivered:>9} {rss_mb():>8.0f} {tail._state.remembered:>15} {tail.restarts:>9}")
    if failure:
        print(f"  stopped: {failure[0]}")
    tail.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rate", type=int, default=50)
    parser.add_argument("--ticks", type=int, default=100_000)
    parser.add_argument("--mem-rate", type=int, default=300, help="ticks/s written in the memory part")
    parser.add_argument("--only", choices=["latency", "memory"], default=None)
    args = parser.parse_args()
    emu = emulator()
    try:
        if args.only != "memory":
            latency(emu, args.seconds, args.rate)
        if args.only != "latency":
            memory(emu, args.ticks, args.mem_rate)
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
