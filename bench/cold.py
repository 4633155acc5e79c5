"""Issue 60, the cold tier: a month of ticks sealed into Parquet, then read through the
store's own reads across the seam, from Firestore alone, and with DuckDB, side by side.

- ``--ticks`` ticks (the demo declaration's fields, its synthetic instruments) spread evenly
  over 30 days are written into the emulator directly (no ramp), then sealed into a local
  directory tier (``store.seal``): the sealing rate in ticks/s, its client CPU and the peak
  resident memory it added.
- Reading one day, one symbol's month and the whole month three ways (the same range and
  filter, oldest first): the store's ``query_frame`` on the series with its tier (the sealed
  days from their Parquet objects, the manifest and the marks read at the read's snapshot);
  the same read on the same series declared without a tier (``dataclasses.replace(spec,
  cold=None)``: every tick from Firestore), fed to the frame builder ``query_frame`` feeds,
  as a stream for its ``ReadStats``; and DuckDB over the objects the manifest names
  (``store.cold_sql()``, what an open tool pays). Time, client CPU, billed reads (the
  store's ``ReadStats``: the cold read's from a stream of the same read), objects and bytes
  opened. Every case is checked: the cold frame equals Firestore's, the cold stream's ids
  are Firestore's in order, DuckDB's rows are Firestore's, or the bench fails.
- Parquet bytes per tick against Firestore's billed storage per tick (the document and its
  index entries) from the capacity planner (``capacity_for``, what ``tsstore capacity`` prints).
- The sealing rate against the whole month read from Firestore just before the seal and
  after it (above), and against their mean: the emulator's pace drifts between reads of the
  same range (the first read after the writes was the slowest: 53 s, then the seal 55 s, then
  44 s, for 300 000 ticks at 80 ms), so the seal is bracketed rather than compared with one
  read on one side of it.
- ``--round-trip 80`` (ms): everything again through tests/proxy.ProxyProcess at that round
  trip (the manifest emptied and the tier removed between places, so each seals from
  scratch): Firestore's reads, the seal's and the cold reads' manifest and marks through the
  proxy; the objects are local.

The emulator scans its whole collection for every query (about 20 µs a document), once per
``in`` value (hence one shard value by default): a seal reads its month in one read (a few
million ticks a read), as the whole-range read does; client CPU is printed beside wall time.

Run: python bench/cold.py [--ticks 1000000] [--shards 1] [--days 30] [--round-trip 80 [--no-direct]] [--heap 12g]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import emulator, resident_kb

from tests.proxy import ProxyProcess
from tsstore import ColdTier, SeriesSpec, TimeSeriesStore
from tsstore.cold.parquet import ID_COLUMN
from tsstore.demo import SPEC as DEMO
from tsstore.frames import FrameBuilder
from tsstore.layout.capacity import capacity_for
from tsstore.local.emulator import emulator_client
from tsstore.local.synthetic import INSTRUMENTS, trading_day
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

FIRST_DAY = dt.date(2019, 1, 1)
COLLECTION = "coldbench"
DATABASE = "cold-bench"


def spec_of(shards: int, lake: Path) -> SeriesSpec:
    """The demo declaration's fields and shapes over ``shards`` shard values, sealed into ``lake``."""
    return SeriesSpec(COLLECTION, shards=[f"s{i:02d}" for i in range(shards)], shapes=DEMO.shapes,
                      key_fields=["symbol"], columns=DEMO.columns, measures=DEMO.measures,
                      cold=ColdTier(lake))  # fmt: skip


def month(ticks: int, days: int) -> Iterator[dict[str, Any]]:
    """``ticks`` synthetic ticks spread evenly over ``days`` trading days from :data:`FIRST_DAY`."""
    for n in range(days):
        count = ticks // days + (n < ticks % days)
        yield from trading_day(count, day=FIRST_DAY + dt.timedelta(days=n), seed=n)


def utc(day: dt.date) -> dt.datetime:
    return dt.datetime.combine(day, dt.time(), tzinfo=dt.timezone.utc)


@dataclass(frozen=True)
class Case:
    """One read: a range and an optional symbol."""

    name: str
    start: dt.datetime
    end: dt.datetime
    symbol: str | None = None

    @property
    def where(self) -> dict[str, Any] | None:
        return None if self.symbol is None else {"symbol": self.symbol}


@dataclass
class Figures:
    rows: int
    seconds: float
    cpu: float
    billed: int
    objects: int = 0
    bytes: int = 0


class Peak:
    """The peak resident memory of this process while a block runs, sampled every 20 ms
    (``ru_maxrss`` would show the largest of everything before)."""

    def __init__(self) -> None:
        self.baseline = self.peak = resident_kb()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Peak:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _sample(self) -> None:
        while not self._done.wait(0.02):
            self.peak = max(self.peak, resident_kb())

    @property
    def added_mb(self) -> float:
        return (self.peak - self.baseline) / 1024


def timed(fn: Callable[[], Any]) -> tuple[Any, float, float]:
    w0, c0 = time.perf_counter(), time.process_time()
    got = fn()
    return got, time.perf_counter() - w0, time.process_time() - c0


def duckdb_read(store: TimeSeriesStore, lake: Path, case: Case) -> tuple[Any, Figures]:
    """The case read from the sealed objects with DuckDB: the view ``cold_sql`` makes over
    the objects the manifest names (one read of the manifest document), the partitions
    outside the range pruned by their hive ``date``, the range and symbol pushed down."""
    import duckdb

    def run() -> Any:
        with duckdb.connect() as duck:
            duck.execute("SET TimeZone = 'UTC'")
            duck.execute(store.cold_sql(name="cold"))
            last_day = (case.end - dt.timedelta(microseconds=1)).date()
            sql = (f"SELECT * EXCLUDE (date) FROM cold WHERE date BETWEEN DATE '{case.start.date()}' "
                   f"AND DATE '{last_day}' AND timestamp >= ? AND timestamp < ?")  # fmt: skip
            params: list[Any] = [case.start, case.end]
            if case.symbol is not None:
                sql += " AND symbol = ?"
                params.append(case.symbol)
            return duck.execute(sql + f" ORDER BY timestamp, {ID_COLUMN}", params).df()

    frame, seconds, cpu = timed(run)
    days = [case.start.date() + dt.timedelta(days=n) for n in range((case.end - case.start).days)]
    files = [f for day in days for f in (lake / COLLECTION / f"date={day}").glob("part-*.parquet")]
    return frame, Figures(len(frame), seconds, cpu, billed=1, objects=len(files),
                          bytes=sum(f.stat().st_size for f in files))  # fmt: skip


def options(case: Case) -> dict[str, Any]:
    return {"start": case.start, "end": case.end, "where": case.where, "direction": "asc"}


def tiered_read(store: TimeSeriesStore, case: Case) -> tuple[Any, list[str], Figures]:
    """The case as the store's ``query_frame`` across the seam (timed); its billed reads,
    objects and ids from a stream of the same read."""
    frame, seconds, cpu = timed(lambda: store.query_frame(**options(case)))
    stream = store.iter_ticks(**options(case))
    ids = [tick.id for tick in stream]
    stats = stream.stats
    return frame, ids, Figures(len(frame), seconds, cpu, stats.billed_reads, stats.objects, stats.object_bytes)


def firestore_read(store: TimeSeriesStore, case: Case) -> tuple[Any, list[str], Figures]:
    """The case from Firestore alone (``store``'s series declares no tier): the read
    ``query_frame`` makes, as a stream fed to the same frame builder (timed), for its
    ``ReadStats`` and ids."""

    def run() -> tuple[Any, list[str], Any]:
        stream = store.iter_ticks(**options(case))
        builder = FrameBuilder(store.spec)
        ids = []
        for tick in stream:
            builder.add(tick)
            ids.append(tick.id)
        return builder.frame(), ids, stream.stats

    (frame, ids, stats), seconds, cpu = timed(run)
    return frame, ids, Figures(len(frame), seconds, cpu, stats.billed_reads, stats.objects, stats.object_bytes)


def check(case: Case, tiered: tuple[Any, list[str]], hot: tuple[Any, list[str]], duck: Any) -> None:
    """The cold reads are Firestore's: the tiered frame equal to Firestore's (index, columns,
    dtypes, values), the tiered stream's ids Firestore's in order, DuckDB's ids and values."""
    (cold, cold_ids), (frame, ids) = tiered, hot
    problems = []
    if cold_ids != ids:
        problems.append(f"ids differ: {len(cold_ids)} across the seam, {len(ids)} in Firestore")
    if not cold.equals(frame) or list(cold.dtypes) != list(frame.dtypes):
        problems.append("query_frame across the seam differs from Firestore's frame")
    if duck[ID_COLUMN].tolist() != ids:
        problems.append(f"DuckDB's ids differ: {len(duck)} rows")
    values = frame.reset_index()
    if not values.equals(duck[values.columns].astype(values.dtypes.to_dict())):
        problems.append("DuckDB's values differ")
    if problems:
        raise SystemExit(f"{case.name}: the cold rows are not Firestore's: {'; '.join(problems)}")


def reset_tier(client: Any, lake: Path) -> None:
    """Forget every seal: the manifest document deleted, the tier's directory removed."""
    client.collection("tsstore_cold").document(COLLECTION).delete()
    shutil.rmtree(lake, ignore_errors=True)


def run_place(name: str, address: str, spec: SeriesSpec, lake: Path, args: argparse.Namespace,
              cases: list[Case], stored_per_tick: int) -> None:  # fmt: skip
    client = emulator_client(address, database=DATABASE)
    reset_tier(client, lake)
    store = TimeSeriesStore(client, spec)
    hot = TimeSeriesStore(client, dataclasses.replace(spec, cold=None))
    until = utc(FIRST_DAY + dt.timedelta(days=args.days))
    whole = next(case for case in cases if case.symbol is None and case.end - case.start == dt.timedelta(days=args.days))
    before = firestore_read(hot, whole)[2]  # the month read just before the seal: the emulator's pace drifts
    with Peak() as peak:
        sealed, seal_s, seal_cpu = timed(lambda: store.seal(until=until))
    if sealed.rows != args.ticks or len(sealed.sealed) != args.days:
        raise SystemExit(f"sealed {sealed.rows} ticks in {len(sealed.sealed)} partitions; wrote {args.ticks} "
                         f"over {args.days} days")  # fmt: skip
    load = os.getloadavg()
    print(f"\n## {name} (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} after the seal)")
    print(f"sealing: {sealed.rows:,} ticks in {len(sealed.sealed)} objects, {sealed.size / 1e6:.1f} MB, "
          f"{seal_s:.1f} s ({seal_cpu:.1f} s CPU): {sealed.rows / seal_s:,.0f} ticks/s; "
          f"peak RSS +{peak.added_mb:.0f} MB over the RSS before")  # fmt: skip
    print(f"{'case':<18} {'rows':>9}  {'Firestore s':>11} {'CPU s':>7} {'billed':>9}  {'tiered s':>8} {'CPU s':>7} "
          f"{'billed':>6} {'objects':>7} {'MB':>6}  {'DuckDB s':>8} {'CPU s':>6}  {'tiered/FS':>9} {'DuckDB/FS':>9}"
          "  goal <= 0.1x")  # fmt: skip
    month_seconds = 0.0
    for case in cases:
        cold, cold_ids, cold_fig = tiered_read(store, case)
        duck, duck_fig = duckdb_read(store, lake, case)
        frame, ids, hot_fig = firestore_read(hot, case)
        check(case, (cold, cold_ids), (frame, ids), duck)
        if case.symbol is None and case.end - case.start == dt.timedelta(days=args.days):
            month_seconds = hot_fig.seconds
        ratio, duck_ratio = cold_fig.seconds / hot_fig.seconds, duck_fig.seconds / hot_fig.seconds
        print(f"{case.name:<18} {hot_fig.rows:>9,}  {hot_fig.seconds:>11.2f} {hot_fig.cpu:>7.2f} {hot_fig.billed:>9,}  "
              f"{cold_fig.seconds:>8.2f} {cold_fig.cpu:>7.2f} {cold_fig.billed:>6} {cold_fig.objects:>7} "
              f"{cold_fig.bytes / 1e6:>6.1f}  {duck_fig.seconds:>8.2f} {duck_fig.cpu:>6.2f}  {ratio:>9.3f} "
              f"{duck_ratio:>9.3f}  {'met' if ratio <= 0.1 else 'NOT met'}")  # fmt: skip
    print("tiered billed: what the read across the seam cost in Firestore (the manifest and the marks; no "
          "tick). Every case: the tiered frame == Firestore's, ids in order; DuckDB's rows == Firestore's")
    per_tick = sealed.size / sealed.rows
    size = stored_per_tick / per_tick
    print(f"Parquet {per_tick:.1f} bytes/tick vs Firestore's billed storage {stored_per_tick} bytes/tick (capacity "
          f"planner: document and index entries): {size:.1f}x smaller, {'met' if size >= 10 else 'NOT met'} "
          "(goal >= 10x)")  # fmt: skip
    bracket = (before.seconds + month_seconds) / 2
    rate = bracket / seal_s
    print(f"sealing {sealed.rows / seal_s:,.0f} ticks/s (peak RSS +{peak.added_mb:.0f} MB) vs the month read from "
          f"Firestore just before it ({before.seconds:.1f} s, {before.cpu:.1f} s CPU: {before.seconds / seal_s:.2f}x) "
          f"and after it ({month_seconds:.1f} s: {month_seconds / seal_s:.2f}x), their mean "
          f"{args.ticks / bracket:,.0f} ticks/s: {rate:.2f}x, {'met' if rate >= 0.8 else 'NOT met'} "
          "(goal >= 0.8x)")  # fmt: skip
    hot.close()
    store.close()
    client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="See the module docstring.")
    parser.add_argument("--ticks", type=int, default=1_000_000, help="ticks written over the month (default 1000000)")
    parser.add_argument("--days", type=int, default=30, help="days they are spread over (default 30)")
    parser.add_argument("--shards", type=int, default=1, help="shard values (default 1: the emulator scans once "
                        "per value)")  # fmt: skip
    parser.add_argument("--round-trip", type=float, action="append", default=[], metavar="MS",
                        help="also through the distance proxy at this round trip in ms (repeatable)")  # fmt: skip
    parser.add_argument("--no-direct", action="store_true",
                        help="only through the distance proxy (each --round-trip), not also direct")  # fmt: skip
    parser.add_argument("--heap", default="12g", help="the emulator's heap (default 12g: it keeps every document)")
    args = parser.parse_args()
    if args.no_direct and not args.round_trip:
        parser.error("--no-direct needs at least one --round-trip: there would be nothing to measure")
    if args.ticks < args.days:
        parser.error(f"--ticks {args.ticks} is fewer than --days {args.days}; give at least one tick a day")
    load = os.getloadavg()
    print(f"cold tier: {args.ticks:,} ticks over {args.days} days, {args.shards} shard value(s); load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")  # fmt: skip
    lake = Path(tempfile.mkdtemp(prefix="coldbench-")) / "lake"
    spec = spec_of(args.shards, lake)
    emu = emulator(max_heap=args.heap)
    proxies: list[ProxyProcess] = []
    try:
        client = emulator_client(emu.address, database=DATABASE)
        with TimeSeriesStore(client, spec, write_options=EMULATOR_WRITE_OPTIONS) as store:
            _, seconds, _ = timed(lambda: store.write(month(args.ticks, args.days), keep_ids=False))
        client.close()
        rate = args.ticks / seconds
        print(f"writing: {args.ticks:,} ticks in {seconds:.1f} s ({rate:,.0f} ticks/s, direct, no ramp, no ceiling)")
        sample = next(iter(trading_day(1, day=FIRST_DAY)))
        stored = capacity_for(1.0, spec=spec, tick=sample).stored_bytes_per_tick
        symbol = INSTRUMENTS[0][0]
        mid = FIRST_DAY + dt.timedelta(days=args.days // 2)
        cases = [
            Case(f"one day ({mid:%m-%d})", utc(mid), utc(mid + dt.timedelta(days=1))),
            Case(f"{symbol}'s month", utc(FIRST_DAY), utc(FIRST_DAY + dt.timedelta(days=args.days)), symbol),
            Case("the whole month", utc(FIRST_DAY), utc(FIRST_DAY + dt.timedelta(days=args.days))),
        ]
        places = [] if args.no_direct else [("direct", emu.address)]
        for rtt in args.round_trip:
            proxies.append(ProxyProcess(emu.address, round_trip=rtt / 1000))
            places.append((f"at {rtt:.0f} ms round trips (tests/proxy.ProxyProcess)", proxies[-1].address))
        for name, address in places:
            run_place(name, address, spec, lake, args, cases, stored)
    finally:
        for proxy in proxies:
            proxy.close()
        emu.stop()
        shutil.rmtree(lake.parent, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
