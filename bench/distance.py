"""Issue 43, "At a real distance": every read verb and the writer with a network's round trip
between the client and the emulator (tests/proxy.DistanceProxy, in a process of its own: half
the round trip each way, with jitter), side by side with a direct connection, and with each
verb's one-round anchor.

- Reads, on ``--ticks`` ticks at each of ``--shards`` (the demo declaration's fields, written
  once, directly): a page of 100, a cursor walk of ``--walk-pages`` pages of 100, ``count()``,
  ``aggregate(count, sum, avg)``, ``latest`` of 5 symbols, and the whole range as a frame. Each
  is timed direct and at each ``--round-trips`` (ms), interleaved, ``--repeats`` times; every
  answer must equal the direct one. Beside each, its **anchor**: what the same answer costs in
  one plain request of the Firestore client (a page: one query; a walk: one query per page; a
  count or aggregate: one aggregation query; latest: one query per symbol, sent together; a
  frame: the plan's chunk queries streamed together by the client, the "plain streams").
  "Added" is (median at the distance - median direct) / round trip: the round trips the verb
  waits for. The server's own ``round_trips`` (``ReadStats``) and billed reads are printed too.
- Writes: ``--write-ticks`` ticks by ``TimeSeriesStore.write`` (ramp off) into a database of
  their own per run, direct and at each distance, timed from the first tick handed to the
  writer (the client's connection is opened before, by a plain read: it is not the writer's
  work, and a long-running writer pays it once); each run must store exactly the ticks sent
  (ids and ``count()``). After ``--write-warmups`` runs (the emulator's rate still rises over the
  first), ``--write-repeats`` repeats, each place once a repeat in alternating order; "x direct"
  is the median of each repeat's ratio to its direct run.
- ``--cut``: the 80 ms reads and the write once more through a proxy that also cuts every
  connection about once a second: answers equal, nothing lost.

Run: python bench/distance.py [--ticks 2500] [--shards 3,40] [--round-trips 20,80] [--repeats 5]
     [--walk-pages 20] [--write-ticks 100000] [--write-shards 40] [--write-repeats 3] [--write-warmups 1]
     [--jitter 0.1] [--cut]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from _common import emulator
from google.cloud.firestore_v1.base_query import FieldFilter

from tests.proxy import ProxyProcess
from tsstore import SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.demo import SPEC as DEMO
from tsstore.local.emulator import DEFAULT_PROJECT, Emulator, emulator_client
from tsstore.local.synthetic import trading_day
from tsstore.read.cost import ReadStats
from tsstore.read.plan import plan_query
from tsstore.write.prepare import prepare_records

SYMBOLS = ["AAPL", "MSFT", "GOOG", "AMZN", "META"]
PAGE = 100


def spec_of(shards: int, collection: str = "ticks") -> SeriesSpec:
    """The demo declaration's fields and shapes over ``shards`` shard values."""
    return SeriesSpec(collection, shards=[f"s{i:02d}" for i in range(shards)], shapes=DEMO.shapes,
                      key_fields=["symbol"], columns=DEMO.columns, measures=DEMO.measures)  # fmt: skip


@dataclass
class Place:
    """Where a client connects: straight to the emulator (``round_trip`` 0) or through a proxy."""

    name: str
    round_trip: float  # seconds
    address: str
    proxy: ProxyProcess | None = None


@contextmanager
def places(emu: Emulator, round_trips: list[float], *, jitter: float, cut: bool) -> Iterator[list[Place]]:
    made = [Place("direct", 0.0, emu.address)]
    for rtt in round_trips:
        proxy = ProxyProcess(emu.address, round_trip=rtt, jitter=jitter * rtt / 2)
        made.append(Place(f"{rtt * 1000:.0f} ms", rtt, proxy.address, proxy))
    if cut:
        rtt = max(round_trips)
        proxy = ProxyProcess(emu.address, round_trip=rtt, jitter=jitter * rtt / 2, down=0.2, seed=1)
        made.append(Place(f"{rtt * 1000:.0f} ms cut", rtt, proxy.address, proxy))
    try:
        yield made
    finally:
        for place in made:
            if place.proxy is not None:
                place.proxy.close()


@contextmanager
def cutting(place: Place) -> Iterator[None]:
    if place.proxy is not None and place.name.endswith("cut"):
        with place.proxy.cutting(every=1.0, seed=2):
            yield
    else:
        yield


# ------------------------------------------------------------------------------------ reads


@dataclass
class Case:
    """A verb and its anchor, each ``(store, client) -> (answer, stats or None)``; times and
    stats by place, for the default store and one made with ``snapshots="estimated"``."""

    name: str
    verb: Callable[[TimeSeriesStore, Any], tuple[Any, ReadStats | None]]
    anchor: Callable[[TimeSeriesStore, Any], Any]
    seconds: dict[str, list[float]] = field(default_factory=dict)
    estimated_seconds: dict[str, list[float]] = field(default_factory=dict)
    anchor_seconds: dict[str, list[float]] = field(default_factory=dict)
    stats: dict[str, ReadStats] = field(default_factory=dict)
    estimated_stats: dict[str, ReadStats] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)


def page_ids(page: Any) -> list[str]:
    return [t.id for t in page.ticks]


def read_cases(spec: SeriesSpec, walk_pages: int) -> list[Case]:
    ts = spec.timestamp_field

    def page(store: TimeSeriesStore, client: Any) -> tuple[Any, ReadStats]:
        got = store.query(limit=PAGE)
        return page_ids(got), got.stats

    def page_anchor(store: TimeSeriesStore, client: Any) -> Any:
        query = client.collection(spec.collection).order_by(ts, direction="DESCENDING").limit(PAGE)
        return len(query.get())

    def walk(store: TimeSeriesStore, client: Any) -> tuple[Any, ReadStats]:
        ids: list[str] = []
        total = ReadStats()
        cursor = None
        for _ in range(walk_pages):
            got = store.query(limit=PAGE, cursor=cursor)
            ids += page_ids(got)
            for name in ("queries", "round_trips", "documents", "billed_reads", "refills"):
                setattr(total, name, getattr(total, name) + getattr(got.stats, name))
            if (cursor := got.cursor) is None:
                break
        return ids, total

    def walk_anchor(store: TimeSeriesStore, client: Any) -> Any:
        query = client.collection(spec.collection).order_by(ts, direction="DESCENDING").limit(PAGE)
        last = None
        for _ in range(walk_pages):
            docs = (query.start_after(last) if last is not None else query).get()
            if not docs:
                break
            last = docs[-1]
        return last is not None

    def count(store: TimeSeriesStore, client: Any) -> tuple[Any, ReadStats]:
        stats = ReadStats()
        return store.count(stats=stats), stats

    def count_anchor(store: TimeSeriesStore, client: Any) -> Any:
        return client.collection(spec.collection).count().get()[0][0].value

    def aggregate(store: TimeSeriesStore, client: Any) -> tuple[Any, ReadStats]:
        stats = ReadStats()
        return store.aggregate(sum=["volume"], avg=["price.micros"], stats=stats), stats

    def aggregate_anchor(store: TimeSeriesStore, client: Any) -> Any:
        whole = client.collection(spec.collection)
        return whole.count(alias="n").sum("volume", alias="s").avg("price.micros", alias="a").get()

    def latest(store: TimeSeriesStore, client: Any) -> tuple[Any, ReadStats]:
        stats = ReadStats()
        got = store.latest(by="symbol", values=SYMBOLS, stats=stats)
        return got.to_csv(), stats

    def latest_anchor(store: TimeSeriesStore, client: Any) -> Any:
        def one(symbol: str) -> Any:
            query = client.collection(spec.collection).where(filter=FieldFilter("symbol", "==", symbol))
            return query.order_by(ts, direction="DESCENDING").limit(1).get()

        with ThreadPoolExecutor(len(SYMBOLS)) as pool:
            return list(pool.map(one, SYMBOLS))

    def frame(store: TimeSeriesStore, client: Any) -> tuple[Any, ReadStats | None]:
        got = store.query_frame()
        return (len(got), int(got["price.micros"].sum())), None

    def frame_anchor(store: TimeSeriesStore, client: Any) -> Any:
        plan = plan_query(spec)

        def stream(chunk: tuple[str, ...]) -> int:
            query = client.collection(spec.collection).where(filter=FieldFilter(spec.shard_field, "in", list(chunk)))
            return sum(1 for _ in query.order_by(ts, direction="DESCENDING").stream())

        with ThreadPoolExecutor(len(plan.chunks)) as pool:
            return sum(pool.map(stream, plan.chunks))

    return [
        Case("page of 100", page, page_anchor),
        Case(f"walk of {walk_pages} pages", walk, walk_anchor),
        Case("count()", count, count_anchor),
        Case("aggregate", aggregate, aggregate_anchor),
        Case("latest of 5", latest, latest_anchor),
        Case("frame of all", frame, frame_anchor),
    ]


def again(call: Callable[[], Any], *, tries: int = 50) -> Any:
    """``call()`` tried until it answers: the plain client's calls are not retried through a
    cut (an anchor is a reference, not what is measured for faults)."""
    for attempt in range(tries):
        try:
            return call()
        except Exception:
            if attempt == tries - 1:
                raise
            time.sleep(0.05)
    return None


def same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return all(same(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a))
    return bool(a == b)


def reads(emu: Emulator, args: argparse.Namespace, shards: int, problems: list[str]) -> None:
    spec = spec_of(shards)
    database = f"read-{shards}"
    writer = TimeSeriesStore(emu.client(database=database), spec, write_options=WriteOptions(ramp=False))
    writer.write(trading_day(args.ticks, symbols=len(SYMBOLS) + 3, seed=5), keep_ids=False)
    writer.close()
    cases = read_cases(spec, args.walk_pages)
    with places(emu, [r / 1000 for r in args.round_trips], jitter=args.jitter, cut=args.cut) as where:
        stores = {}
        for place in where:
            client = emulator_client(place.address, database=database)
            stores[place.name] = (TimeSeriesStore(client, spec), TimeSeriesStore(client, spec, snapshots="estimated"),
                                  client)  # fmt: skip
        for case in cases:  # one warm-up of each, everywhere (connections, the emulator's JIT)
            for store, estimated, client in stores.values():
                case.verb(store, client)
                case.verb(estimated, client)
                case.anchor(store, client)
        for _ in range(args.repeats):
            for case in cases:
                for place in where:
                    store, estimated, client = stores[place.name]
                    with cutting(place):
                        runs = (
                            (lambda: case.verb(store, client), case.seconds, case.stats),
                            (lambda: case.verb(estimated, client), case.estimated_seconds, case.estimated_stats),
                            (lambda: (again(lambda: case.anchor(store, client)), None), case.anchor_seconds, None),
                        )
                        for run, seconds, kept in runs:
                            began = time.perf_counter()
                            answer, stats = run()
                            seconds.setdefault(place.name, []).append(time.perf_counter() - began)
                            if kept is None:
                                continue
                            if stats is not None:
                                kept[place.name] = stats
                            want = case.answers.setdefault("direct", answer)
                            if not same(answer, want):
                                problems.append(f"{shards} shards, {case.name} at {place.name}: the answer differs")
        for store, estimated, client in stores.values():
            store.close()
            estimated.close()
            client.close()
    print(f"\nreads: {args.ticks} ticks, {shards} shards, medians of {args.repeats} (seconds; +: the round trips "
          "added to the direct time; trips and billed: as ReadStats counts them, read / estimated)")  # fmt: skip
    header = f"  {'verb':<17}{'place':>10}{'read':>8}{'+':>6}{'estimated':>10}{'+':>6}{'anchor':>8}{'+':>6}"
    print(header + f"{'trips':>8}{'billed':>11}")
    for case in cases:
        direct = {name: statistics.median(times["direct"]) for name, times in
                  (("read", case.seconds), ("estimated", case.estimated_seconds), ("anchor", case.anchor_seconds))}  # fmt: skip
        for place in where:
            cells = []
            for name, times in (("read", case.seconds), ("estimated", case.estimated_seconds),
                                ("anchor", case.anchor_seconds)):  # fmt: skip
                median = statistics.median(times[place.name])
                added = f"{(median - direct[name]) / place.round_trip:.1f}" if place.round_trip else ""
                cells.append(f"{median:>{10 if name == 'estimated' else 8}.3f}{added:>6}")
            read, estimated = case.stats.get(place.name), case.estimated_stats.get(place.name)
            trips = f"{read.round_trips}/{estimated.round_trips}" if read and estimated else "-"
            billed = f"{read.billed_reads}/{estimated.billed_reads}" if read and estimated else "-"
            print(f"  {case.name:<17}{place.name:>10}{''.join(cells)}{trips:>8}{billed:>11}")


# ------------------------------------------------------------------------------------ writes


def writes(emu: Emulator, args: argparse.Namespace, problems: list[str]) -> None:
    spec = spec_of(args.write_shards, "writes")
    rows = list(trading_day(args.write_ticks, seed=9))
    expected = {doc.id for doc in prepare_records(spec, rows)}
    rates: dict[str, list[float]] = {}
    ratios: dict[str, list[float]] = {}  # each run's rate over the direct rate of the same repeat
    with places(emu, [r / 1000 for r in args.round_trips], jitter=args.jitter, cut=args.cut) as where:
        for run in range(args.write_warmups):  # the emulator's JIT: its rate still rises for the first runs
            warm = emu.client(database=f"write-warm-{run}")
            TimeSeriesStore(warm, spec, write_options=WriteOptions(ramp=False)).write(rows, keep_ids=False)
            warm.close()
            emu.reset(project=DEFAULT_PROJECT, database=f"write-warm-{run}")  # the heap holds every document
        for run in range(args.write_repeats):
            for place in where if run % 2 == 0 else where[::-1]:  # the order alternates: no place always first
                database = f"write-{run}-{place.name.replace(' ', '-')}"
                client = emulator_client(place.address, database=database)
                store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
                client.collection("elsewhere").document("none").get()  # the connection: not the writer's work
                with cutting(place):
                    began = time.perf_counter()
                    store.write(rows, keep_ids=False)
                    rates.setdefault(place.name, []).append(len(rows) / (time.perf_counter() - began))
                store.close()
                client.close()
                check = emu.client(database=database)
                ids = {snap.id for snap in check.collection(spec.collection).select([]).stream()}
                counted = TimeSeriesStore(check, spec).count()
                check.close()
                emu.reset(project=DEFAULT_PROJECT, database=database)
                if ids != expected or counted != len(expected):
                    problems.append(f"write at {place.name}: {len(expected - ids)} missing, "
                                    f"{len(ids - expected)} extra, count() {counted}")  # fmt: skip
            for place in where:
                ratios.setdefault(place.name, []).append(rates[place.name][-1] / rates["direct"][-1])
    print(f"\nwrites: {args.write_ticks} ticks, {args.write_shards} shards, ramp off, after {args.write_warmups} "
          f"warm-up runs; medians of {args.write_repeats} (x direct: the median of each repeat's ratio)")  # fmt: skip
    for name, got in rates.items():
        print(f"  {name:>12}: {statistics.median(got):>9.0f} ticks/s  {statistics.median(ratios[name]):.2f}x direct  "
              f"(each: {', '.join(f'{r:.2f}' for r in ratios[name])})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=2500)
    parser.add_argument("--shards", default="3,40")
    parser.add_argument("--round-trips", default="20,80", help="milliseconds, comma separated")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--walk-pages", type=int, default=20)
    parser.add_argument("--write-ticks", type=int, default=100_000)
    parser.add_argument("--write-shards", type=int, default=40)
    parser.add_argument("--write-repeats", type=int, default=3)
    parser.add_argument("--write-warmups", type=int, default=1)
    parser.add_argument("--jitter", type=float, default=0.1, help="of each way's delay, either side")
    parser.add_argument("--cut", action="store_true", help="also at the longest round trip through cuts")
    parser.add_argument("--skip", default="", help="reads, writes")
    parser.add_argument("--heap", default="10g", help="the emulator's heap (it keeps every document on it)")
    args = parser.parse_args()
    args.round_trips = [float(r) for r in args.round_trips.split(",") if r]
    problems: list[str] = []
    began = time.perf_counter()
    emu = emulator(max_heap=args.heap)
    try:
        if "reads" not in args.skip:
            for shards in (int(s) for s in args.shards.split(",")):
                reads(emu, args, shards, problems)
        if "writes" not in args.skip:
            writes(emu, args, problems)
    finally:
        emu.stop()
    print("\nevery answer equal to the direct one, every write exact" if not problems else "\nPROBLEMS:")
    for line in problems:
        print(f"   {line}")
    print(f"# total {time.perf_counter() - began:.0f} s", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
