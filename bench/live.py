"""Live data: write->delivery latency of `tail` and `watch` at 3 and 40 shards beside a plain
google-cloud-firestore listener on the unsharded query, and the memory of a tail that has
delivered 100 000 ticks.

(a) Latency. One writer writes each tick (`--rate` a second) into two collections at once,
one with 3 shards and one with 40 (2 chunk listeners), one commit a tick holding both
documents, noting when it called the commit. At the same time, on each collection, a tail,
a watch (a window of 50), and one plain Firestore listener (`timestamp >= start`, no shard
filter: the query one would listen to without sharding, the client's own comparator) run.
All six see the same writes under
the same load; the script prints p50/p99 of delivery minus that time (a watch delivers a
tick when it enters its window) and the ratios to the plain listener on the same collection.
On the emulator every write makes each listener receive its whole result set again, and the
client sorts all it holds at every snapshot: a listener holding more documents (a tail, the
plain listener) pays more per write than a watch's window.

(b) Memory. A tail (lateness 0.5 s, hold 200) follows 100 000 ticks written with current
timestamps in atomic commits of 250, the writer kept at most 1 000 ticks ahead of the tail,
and only the newest 5 000 ticks kept (older ones deleted in batches, as a retention would).
The emulator sends every listener its whole result set again once per commit and scans the
collection to find it, so separate writes (a BulkWriter's) would hold it near 16 ticks/s, a
growing collection slows each commit further, and big windows (hold 1 000, lateness 2 s)
grew its own memory past 7 GB by 30 000 ticks; production Firestore sends changes only. The process's
resident memory is printed every 10 000 ticks, with the ids the tail remembers, its listener
restarts, relistens and stalled replacements, the delivery rate and the emulator's memory.

Run: python bench/live.py [--seconds 20] [--rate 15] [--ticks 100000] [--per-commit 250] [--hold 200]
     [--lateness 0.5] [--emulator-heap 6g] [--only latency|memory]
"""

from __future__ import annotations

import argparse
import datetime as dt
import multiprocessing
import statistics
import sys
import threading
import time
from typing import Any

from _common import emulator
from google.api_core.exceptions import Cancelled, DeadlineExceeded, ServiceUnavailable
from google.cloud.firestore_v1.base_query import FieldFilter

from tsstore import SeriesSpec, TimeSeriesStore, shards_for

UTC = dt.timezone.utc
#: The window of the latency part's watches.
WATCH_WINDOW = 50


def rss_mb(pid: int | str = "self") -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def plain_listeners(address: str, collections: list[str], start: dt.datetime, heard: Any, done: Any) -> None:
    """One plain google-cloud-firestore listener on each collection (``timestamp >= start``,
    no shard filter), in a process of its own; puts what each heard when (tick n -> time) on
    ``heard`` once ``done`` is set."""
    from tsstore.local.emulator import emulator_client

    client = emulator_client(address, database="bench-live")
    received: list[dict[int, float]] = [{} for _ in collections]

    def on_snapshot(got: dict[int, float]) -> Any:
        def take(docs: list[Any], changes: list[Any], read_time: Any) -> None:
            now = time.time()
            for change in changes:
                if change.type.name == "ADDED":
                    got.setdefault(change.document.get("n"), now)

        return take

    listeners = [
        client.collection(name).where(filter=FieldFilter("timestamp", ">=", start)).order_by("timestamp")
        .on_snapshot(on_snapshot(got))
        for name, got in zip(collections, received)
    ]  # fmt: skip
    heard.put("listening")
    done.wait()
    for listener in listeners:
        listener.unsubscribe()
    heard.put(received)


def latency(emu: Any, seconds: float, rate: int) -> None:
    client = emu.client(database="bench-live")
    specs = {n: SeriesSpec(f"live{n}", shards=shards_for(n * 500), key_fields=["n"]) for n in (3, 40)}
    stores = {n: TimeSeriesStore(client, spec) for n, spec in specs.items()}
    names = [f"{kind} {n}" for kind in ("tail", "watch", "plain listener") for n in stores]
    received: dict[str, dict[int, float]] = {name: {} for name in names}
    sent: dict[int, float] = {}
    start = dt.datetime.now(UTC)

    # The plain listeners run in a process of their own: in this one, their client's comparator
    # (which encodes both values at every comparison of its sort at each snapshot) would take the
    # interpreter from the tails and watches.
    context = multiprocessing.get_context("spawn")
    heard: Any = context.Queue()
    done = context.Event()
    plain = context.Process(target=plain_listeners, args=(emu.address, [s.collection for s in specs.values()], start,
                                                          heard, done))  # fmt: skip
    plain.start()
    if heard.get(timeout=120) != "listening":
        raise RuntimeError("the plain listeners did not start")
    tails = {n: store.tail(since=start) for n, store in stores.items()}
    watches = {n: store.watch(limit=WATCH_WINDOW) for n, store in stores.items()}
    stop = threading.Event()

    def follow_tail(n: int) -> None:
        for item in tails[n]:
            received[f"tail {n}"].setdefault(item.tick.data["n"], time.time())

    def follow_watch(n: int) -> None:
        while not stop.is_set():
            update = watches[n].next_update(timeout=0.5)
            now = time.time()
            for tick in update.entered if update is not None else ():
                received[f"watch {n}"].setdefault(tick.data["n"], now)

    threads = [threading.Thread(target=follow, args=(n,)) for follow in (follow_tail, follow_watch) for n in stores]
    for thread in threads:
        thread.start()
    time.sleep(2)  # listeners attached
    count, began = 0, time.time()
    while time.time() < began + seconds:
        row = {"n": count, "timestamp": dt.datetime.now(UTC)}
        batch = client.batch()  # one commit for both collections: their listeners hear of it at once
        for spec in specs.values():
            shard = {spec.shard_field: spec.shards[count % len(spec.shards)]}
            batch.create(client.collection(spec.collection).document(f"t{count:06d}"), row | shard)
        sent[count] = time.time()
        batch.commit()
        count += 1
        time.sleep(max(0.0, began + count / rate - time.time()))
    deadline = time.time() + 90  # let deliveries finish (a watch sees a tick only while it is in its window)
    while time.time() < deadline and any(len(got) < count for name, got in received.items() if "tail" in name):
        time.sleep(0.2)
    time.sleep(1)
    stop.set()
    done.set()
    for n, got in zip(specs, heard.get(timeout=120)):
        received[f"plain listener {n}"] = got
    plain.join()
    for live in (*tails.values(), *watches.values()):
        live.close()
    for thread in threads:
        thread.join()
    print(
        f"(a) write->delivery latency (from the commit's call), {count} ticks, one commit each to a 3-shard and a"
        f" 40-shard collection, at {count / seconds:.1f}/s for {seconds:g} s; a watch of {WATCH_WINDOW} ticks counts"
        " a tick when it enters its window"
    )
    for n in stores:
        plain = received[f"plain listener {n}"]
        base = percentiles([(plain[i] - sent[i]) * 1000 for i in plain])
        for kind in ("tail", "watch", "plain listener"):
            got = received[f"{kind} {n}"]
            p50, p99 = percentiles([(got[i] - sent[i]) * 1000 for i in got])
            ratio = f"  / plain: p50 {p50 / base[0]:.2f}x, p99 {p99 / base[1]:.2f}x" if kind != "plain listener" else ""
            print(
                f"  {kind + f' {n}':<18} p50 {p50:7.0f} ms  p99 {p99:7.0f} ms  delivered {len(got)}/{count}{ratio}",
                flush=True,
            )


def memory(
    emu: Any,
    ticks: int,
    per_commit: int,
    *,
    shards: int,
    hold: int,
    lateness: float,
    ahead: int,
    keep: int,
) -> None:
    client = emu.client(database="bench-live-memory")
    spec = SeriesSpec("mem", shards=shards_for(shards * 500))
    store = TimeSeriesStore(client, spec)
    chunks = len(store.plan().chunks)
    tail = store.tail(hold=hold, lateness=dt.timedelta(seconds=lateness))
    seen: set[int] = set()
    delivered, retried, failure = 0, 0, []

    def consume() -> None:
        nonlocal delivered
        try:
            for item in tail:
                seen.add(item.tick.data["v"])
                delivered += 1
                if delivered >= ticks:
                    return
        except Exception as exc:  # a listener the emulator cancelled for good: report it, do not hang
            failure.append(exc)

    def row() -> str:
        rate = delivered / (time.perf_counter() - started)
        return (
            f"  {delivered:>9} {rss_mb():>8.0f} {tail._state.remembered:>15} {tail.restarts:>9} "
            f"{tail._listeners.relistens:>10} {tail.stalls:>7} {rate:>8.0f} {rss_mb(emu.pid):>13.0f}"
        )

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    print(
        f"(b) memory of a tail over {ticks} ticks at {shards} shards ({chunks} chunk listener(s);"
        f" lateness {lateness:g} s, hold {hold}),"
        f" written in atomic commits of {per_commit}, at most {ahead} ahead of the tail; the newest {keep} kept"
    )
    print(
        f"  {'delivered':>9} {'RSS MB':>8} {'remembered ids':>15} {'restarts':>9} {'relistens':>10} {'stalls':>7}"
        f" {'ticks/s':>8} {'emulator MB':>13}"
    )
    started = time.perf_counter()
    print(row(), flush=True)
    written, deleted, mark, step = 0, 0, ticks // 10, ticks // 10
    collection = client.collection("mem")

    def commit(batch: Any) -> None:
        nonlocal retried
        for attempt in range(5):  # the loaded emulator cancels a commit now and then; sets and deletes are idempotent
            try:
                batch.commit()
                return
            except (Cancelled, DeadlineExceeded, ServiceUnavailable):
                retried += 1
                if attempt == 4:
                    raise

    while delivered < ticks and thread.is_alive():
        if written < ticks and written - delivered < ahead:
            # One commit per batch: the emulator re-sends each listener its whole result set
            # once per commit, so a BulkWriter's separate writes would cap it near 16 ticks/s.
            batch, now, n = client.batch(), dt.datetime.now(UTC), min(per_commit, ticks - written)
            for k in range(n):
                fields = {
                    "timestamp": now + dt.timedelta(microseconds=k),
                    "shard": spec.shards[k % shards],
                    "v": written + k,
                }
                batch.set(collection.document(f"t{written + k}"), fields)
            commit(batch)
            written += n
            # Retention in few commits: for each listener and commit the emulator rescans the
            # collection (and its memory grew fastest with many small commits).
            if written - deleted >= keep + 2 * per_commit and delivered > written - keep:
                while deleted < written - keep:
                    batch, upto = client.batch(), min(deleted + 2 * per_commit, written - keep)
                    for k in range(deleted, upto):
                        batch.delete(collection.document(f"t{k}"))
                    commit(batch)
                    deleted = upto
        else:
            time.sleep(0.05)
        if delivered >= mark:
            print(row(), flush=True)
            mark += step
    thread.join(timeout=120)
    print(row())
    print(f"  delivered {delivered}, distinct {len(seen)}, of {written} written ({retried} commits retried)")
    if failure:
        print(f"  stopped: {failure[0]}")
    tail.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rate", type=int, default=15, help="ticks a second in the latency part, one commit each")
    parser.add_argument("--ticks", type=int, default=100_000)
    parser.add_argument("--per-commit", type=int, default=1_000, help="ticks per commit in the memory part")
    parser.add_argument("--mem-shards", type=int, default=3, help="shards of the memory part's collection")
    parser.add_argument("--ahead", type=int, default=2_000, help="ticks the writer may be ahead of the tail")
    parser.add_argument("--keep", type=int, default=3_000, help="ticks kept; older ones are deleted")
    parser.add_argument("--hold", type=int, default=200, help="the memory part's tail hold")
    parser.add_argument("--lateness", type=float, default=0.5, help="the memory part's tail lateness, seconds")
    parser.add_argument("--emulator-heap", default="6g", help="the emulator JVM's -Xmx (listeners keep it busy)")
    parser.add_argument("--only", choices=["latency", "memory"], default=None)
    args = parser.parse_args()
    emu = emulator(max_heap=args.emulator_heap)
    try:
        if args.only != "memory":
            latency(emu, args.seconds, args.rate)
        if args.only != "latency":
            memory(
                emu,
                args.ticks,
                args.per_commit,
                shards=args.mem_shards,
                hold=args.hold,
                lateness=args.lateness,
                ahead=args.ahead,
                keep=args.keep,
            )
    except BaseException:
        print(f"# the emulator's log ends:\n{emu.log_tail()}", file=sys.stderr)
        raise
    finally:
        emu.stop()


if __name__ == "__main__":
    main()
