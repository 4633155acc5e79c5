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
import dataclasses
import datetime as dt
import io
import json
import random
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if sys.argv[1:2] == ["--worker"]:  # the code of --before: its tsstore, imported before _common puts ours first
    sys.path.insert(0, sys.argv[2])
    import tsstore  # noqa: F401

from _common import emulator
from google.cloud.firestore_v1.base_query import FieldFilter

from tests.proxy import ProxyProcess
from tsstore import SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.demo import SPEC as DEMO
from tsstore.local.emulator import DEFAULT_PROJECT, Emulator, emulator_client
from tsstore.local.synthetic import trading_day
from tsstore.read.cost import ReadStats
from tsstore.read.plan import plan_query
from tsstore.wire import server_clock
from tsstore.write.prepare import prepare_records

ROOT = Path(__file__).resolve().parents[1]

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
    stats by way of reading (:data:`WAYS`) and place."""

    name: str
    verb: Callable[[TimeSeriesStore, Any], tuple[Any, ReadStats | None]]
    anchor: Callable[[TimeSeriesStore, Any], Any]
    seconds: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # way -> place -> seconds
    stats: dict[str, dict[str, dict[str, int]]] = field(default_factory=dict)  # way -> place -> ReadStats' counts
    answers: dict[str, Any] = field(default_factory=dict)


#: The ways each read is timed: the code of ``--before`` (its process: its default store,
#: which read the server's time first, and one made with ``snapshots="estimated"``), this
#: checkout's default store (estimated snapshots) and one made with ``snapshots="read"``, and
#: the anchor (one plain request of the Firestore client).
WAYS = {"before read": "read", "before est.": "estimated", "after": "estimated", "after read": "read", "anchor": ""}
#: ReadStats' counts a run keeps.
COUNTS = ("queries", "round_trips", "documents", "billed_reads", "refills", "snapshot_reads")


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
            for name in COUNTS:
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


def plain(value: Any) -> Any:
    """An answer as JSON holds it (the code of ``--before`` answers from its own process)."""
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return plain(dataclasses.asdict(value))
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return repr(value)


def counts_of(stats: ReadStats | None) -> dict[str, int] | None:
    return None if stats is None else {name: getattr(stats, name) for name in COUNTS}


def archived(revision: str) -> str:
    """A new folder holding the ``tsstore`` package of ``revision`` (``git archive``): put first on
    ``sys.path`` of a process of its own, that process runs the code of ``revision``."""
    folder = tempfile.mkdtemp(prefix="tsstore-before-")
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", revision, "tsstore"], check=True,
                         capture_output=True).stdout  # fmt: skip
    with tarfile.open(fileobj=io.BytesIO(tar)) as archive:
        archive.extractall(folder, filter="data")
    return folder


class Before:
    """The read verbs as the code of another revision runs them: ``git archive`` of its
    ``tsstore`` package, imported by this script in a process of its own (``--worker``),
    asked case by case over a pipe."""

    def __init__(self, revision: str) -> None:
        self.folder = archived(revision)
        self.process = subprocess.Popen([sys.executable, __file__, "--worker", self.folder], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)  # fmt: skip

    def run(self, **ask: Any) -> tuple[float, Any, dict[str, int] | None]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(ask) + "\n")
        self.process.stdin.flush()
        told = json.loads(self.process.stdout.readline())
        return told["seconds"], told["answer"], told["stats"]

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)


def worker() -> None:
    """Answer :class:`Before`'s asks, one JSON line each, with this process's ``tsstore``."""
    clients: dict[tuple[str, str], Any] = {}
    stores: dict[tuple[str, str, str, int], TimeSeriesStore] = {}
    for line in sys.stdin:
        ask = json.loads(line)
        spec = spec_of(ask["shards"])
        where = (ask["address"], ask["database"])
        if where not in clients:
            clients[where] = emulator_client(ask["address"], database=ask["database"])
        client = clients[where]
        key = (*where, ask["snapshots"], ask["shards"])
        if key not in stores:
            stores[key] = TimeSeriesStore(client, spec, snapshots=ask["snapshots"])
        case = {c.name: c for c in read_cases(spec, ask["walk_pages"])}[ask["case"]]
        began = time.perf_counter()
        answer, stats = case.verb(stores[key], client)
        seconds = time.perf_counter() - began
        print(json.dumps({"seconds": seconds, "answer": plain(answer), "stats": counts_of(stats)}), flush=True)


def reads(emu: Emulator, args: argparse.Namespace, shards: int, before: Before | None, problems: list[str]) -> None:
    spec = spec_of(shards)
    database = f"read-{shards}"
    writer = TimeSeriesStore(emu.client(database=database), spec, write_options=WriteOptions(ramp=False))
    writer.write(trading_day(args.ticks, symbols=len(SYMBOLS) + 3, seed=5), keep_ids=False)
    writer.close()
    cases = [case for case in read_cases(spec, args.walk_pages) if case.name.split()[0].rstrip("()") in args.cases]
    ways = [way for way in WAYS if before is not None or not way.startswith("before")]
    with places(emu, [r / 1000 for r in args.round_trips], jitter=args.jitter, cut=args.cut) as where:
        stores = {}
        for place in where:
            client = emulator_client(place.address, database=database)
            stores[place.name] = (TimeSeriesStore(client, spec), TimeSeriesStore(client, spec, snapshots="read"),
                                  client)  # fmt: skip

        def timed(case: Case, way: str, place: Place) -> tuple[float, Any, dict[str, int] | None]:
            store, strict, client = stores[place.name]
            if way.startswith("before"):
                assert before is not None
                return before.run(address=place.address, database=database, snapshots=WAYS[way], shards=shards,
                                  walk_pages=args.walk_pages, case=case.name)  # fmt: skip
            began = time.perf_counter()
            if way == "anchor":
                again(lambda: case.anchor(store, client))
                return time.perf_counter() - began, None, None
            answer, stats = case.verb(store if way == "after" else strict, client)
            return time.perf_counter() - began, plain(answer), counts_of(stats)

        for case in cases:  # one warm-up of each, everywhere (connections, the emulator's JIT)
            for place in where:
                for way in ways:
                    timed(case, way, place)
        for _ in range(args.repeats):
            for case in cases:
                for place in where:
                    with cutting(place):
                        for way in ways:
                            seconds, answer, stats = timed(case, way, place)
                            case.seconds.setdefault(way, {}).setdefault(place.name, []).append(seconds)
                            if stats is not None:
                                case.stats.setdefault(way, {})[place.name] = stats
                            if way != "anchor" and not same(answer, case.answers.setdefault("direct", answer)):
                                problems.append(f"{shards} shards, {case.name} at {place.name} ({way}): the answer "
                                                "differs")  # fmt: skip
        lags = others_writes(emu, where, stores, database, args.lag_samples)
        for store, strict, client in stores.values():
            store.close()
            strict.close()
            client.close()
    print(f"\nreads: {args.ticks} ticks, {shards} shards, medians of {args.repeats} (seconds; +: the round trips "
          "added to the direct time; trips, billed and snapshot reads: as ReadStats counts them, in the order "
          f"{' / '.join(w for w in ways if w != 'anchor')})")  # fmt: skip
    print(f"  {'verb':<17}{'place':>10}" + "".join(f"{way:>12}{'+':>6}" for way in ways)
          + f"{'trips':>14}{'billed':>22}{'snap':>10}")  # fmt: skip
    for case in cases:
        direct = {way: statistics.median(case.seconds[way]["direct"]) for way in ways}
        for place in where:
            cells = []
            for way in ways:
                median = statistics.median(case.seconds[way][place.name])
                added = f"{(median - direct[way]) / place.round_trip:.1f}" if place.round_trip else ""
                cells.append(f"{median:>12.3f}{added:>6}")
            kept = [case.stats.get(way, {}).get(place.name) for way in ways if way != "anchor"]
            told = {name: "/".join(str(k[name]) if k else "-" for k in kept) for name in COUNTS}
            print(f"  {case.name:<17}{place.name:>10}{''.join(cells)}{told['round_trips']:>14}"
                  f"{told['billed_reads']:>22}{told['snapshot_reads']:>10}")  # fmt: skip
    for name, (median, worst, missed, count, rtt) in lags.items():
        print(f"  others' writes at {name}: the estimated snapshot minus the commit time of a write another client "
              f"had just made: median {median * 1000:+.1f} ms, lowest {worst * 1000:+.1f} ms "
              f"({worst / rtt:+.2f} round trips); before the commit (missed) in {missed} of {count}")  # fmt: skip


def others_writes(emu: Emulator, where: list[Place], stores: dict[str, Any], database: str,
                  samples: int) -> dict[str, tuple[float, float, int, int, float]]:  # fmt: skip
    """How far before a write another client just committed the estimated snapshot may be:
    at each distance, a page read through the proxy (the clock's bounds), then a document set
    straight on the emulator (its commit time), then the clock's estimate for the far client;
    ``(median, lowest, how many were before the commit, samples, round trip)`` of estimate -
    commit. A sample without an estimate (a page of several chunks reads at one, and its
    answer tells no time of arrival: the next such read reads the server's time) is left out."""
    direct = emu.client(database=database)
    rng = random.Random(3)
    found = {}
    for place in where:
        if not place.round_trip or place.name.endswith("cut"):
            continue
        store, _, client = stores[place.name]
        gaps = []
        for i in range(samples):
            store.query(limit=1)
            time.sleep(rng.uniform(0.0, 0.3))
            # a document of its own each time: a write that changes nothing keeps the update time it had
            committed = direct.collection("others").document(f"{place.name}-w{i}").set({"i": i}).update_time
            estimate = server_clock(client).now()
            if estimate is not None:  # None: no read time stamped on arrival lately, the next read reads it first
                gaps.append((estimate - committed).total_seconds())
        if gaps:
            found[place.name] = (statistics.median(gaps), min(gaps), sum(g < 0 for g in gaps), len(gaps),
                                 place.round_trip)  # fmt: skip
    direct.close()
    return found


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
                if (wrong := unlike_written(emu, spec, database, expected)) is not None:
                    problems.append(f"write at {place.name}: {wrong}")
            for place in where:
                ratios.setdefault(place.name, []).append(rates[place.name][-1] / rates["direct"][-1])
    print(f"\nwrites: {args.write_ticks} ticks, {args.write_shards} shards, ramp off, after {args.write_warmups} "
          f"warm-up runs; medians of {args.write_repeats} (x direct: the median of each repeat's ratio)")  # fmt: skip
    for name, got in rates.items():
        print(f"  {name:>12}: {statistics.median(got):>9.0f} ticks/s  {statistics.median(ratios[name]):.2f}x direct  "
              f"(each: {', '.join(f'{r:.2f}' for r in ratios[name])})")  # fmt: skip


def unlike_written(emu: Emulator, spec: SeriesSpec, database: str, expected: set[str], *,
                   counted: bool = True) -> str | None:  # fmt: skip
    """How what a write stored in ``database`` differs from the ticks ``expected`` (their ids and,
    if ``counted``, ``count()``: the emulator scans the collection once per shard value for it), or
    None; the database is emptied after (the emulator's heap holds every document)."""
    check = emu.client(database=database)
    ids = {snap.id for snap in check.collection(spec.collection).select([]).stream()}
    count = TimeSeriesStore(check, spec).count() if counted else len(ids)
    check.close()
    emu.reset(project=DEFAULT_PROJECT, database=database)
    if ids == expected and count == len(expected):
        return None
    return f"{len(expected - ids)} missing, {len(ids - expected)} extra, count() {count}"


def main() -> None:
    if sys.argv[1:2] == ["--worker"]:
        worker()
        return
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
    parser.add_argument("--before", default="65a1d25", help="the revision whose reads are timed beside ('': none)")
    parser.add_argument("--cases", default="page,walk,count,aggregate,latest,frame", help="the reads timed")
    parser.add_argument("--lag-samples", type=int, default=40, help="writes of another client, at each distance")
    args = parser.parse_args()
    args.cases = args.cases.split(",")
    args.round_trips = [float(r) for r in args.round_trips.split(",") if r]
    problems: list[str] = []
    began = time.perf_counter()
    emu = emulator(max_heap=args.heap)
    before = Before(args.before) if args.before and "reads" not in args.skip else None
    try:
        if "reads" not in args.skip:
            for shards in (int(s) for s in args.shards.split(",")):
                reads(emu, args, shards, before, problems)
        if "writes" not in args.skip:
            writes(emu, args, problems)
    finally:
        if before is not None:
            before.close()
        emu.stop()
    ended(problems, began, fine="every answer equal to the direct one, every write exact")


def ended(problems: list[str], began: float, *, fine: str) -> None:
    """Say ``fine``, or the problems of a run that began at ``began`` (``perf_counter``), and exit
    with 0 or 1."""
    print(f"\n{fine}" if not problems else "\nPROBLEMS:")
    for line in problems:
        print(f"   {line}")
    print(f"# total {time.perf_counter() - began:.0f} s", file=sys.stderr)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
