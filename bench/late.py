"""Late ticks: what keeping stored roll-ups exact costs, side by side in one run on one emulator.

(a) Writer throughput (ticks/s) into a series with a stored minute roll-up: the writer as it
    was before late ticks were marked (no lease, no horizons, no marks), against today's on
    time ticks (after the roll-up's watermark: a lease and a view of the horizons per job and
    per refresh, no mark) and with 10 % of the ticks late (their buckets marked before each
    batch). Each method writes --ticks ticks into a fresh database, repetitions interleaved;
    target: both >= 0.9x the unmarked writer. Then the 10 %-late write through a proxy that cuts
    its connections every ~--every s: every tick stored, every late bucket marked, and the
    roll-up after it equal to the bars of the ticks.
(b) Billed reads of an aggregate (count, sum of volume, min, max, std of the price) over a
    trading day of --day-ticks ticks from the hourly and minute roll-ups, with 1 % of the
    day's minutes marked by late ticks, against what the answer needs: the bars it uses, the
    marks, and the ticks of the marked minutes (target: within 1.1x); the answer equals the
    ticks'.
(c) A tick 90 days behind the watermark of a minute roll-up over 120 days of ticks: the next
    run reads only its bucket's ticks and rewrites only that bucket's bars.

Run: python bench/late.py [--ticks 30000] [--repeats 3] [--day-ticks 100000] [--every 1.0] [--only a|b|c]
"""

from __future__ import annotations

import argparse
import datetime as dt
import random
import statistics
import time
from collections.abc import Callable
from typing import Any

import pandas as pd
from _common import emulator, verdict
from faults import finish

from tests.proxy import CuttingProxy
from tsstore import Rollup, SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.demo import SPEC
from tsstore.late import LatePolicy
from tsstore.local.emulator import Emulator, emulator_client
from tsstore.local.synthetic import trading_day
from tsstore.read.cost import ReadStats
from tsstore.wire import database_id
from tsstore.write.marks import LateGuard

UTC = dt.timezone.utc
DAY = dt.datetime(2019, 1, 2, tzinfo=UTC)
FAST = WriteOptions(ramp=False, max_ops_per_second=200_000)


class Unguarded(LateGuard):
    """The writer before late ticks were marked: sends pass straight through (bench only)."""

    def send(self, inner: Callable[..., Any], ops: list[Any]) -> Any:
        return inner(ops)

    def close(self) -> None:
        return None


class Before(TimeSeriesStore):
    """A store whose jobs write as before late ticks were marked: its writer's side hands out
    guards that pass every send through."""

    def __init__(self, *args: Any, **options: Any) -> None:
        super().__init__(*args, **options)
        side = self._backend.side
        guarded = side.late_guard
        side.late_guard = lambda spec: Unguarded(spec, guarded(spec)._io)  # type: ignore[method-assign]


def throughput(emu: Emulator, args: argparse.Namespace) -> list[str]:
    spec = SeriesSpec("ticks", shards=[f"s{i}" for i in range(10)], key_fields=["symbol"])
    bars = Rollup(spec, interval="1min", by="symbol", volume="volume")
    rows = list(trading_day(args.ticks, seed=11))
    history = list(trading_day(2_000, day=(DAY - dt.timedelta(days=1)).date(), seed=3))
    rng = random.Random(5)
    late_rows = [dict(r, timestamp=r["timestamp"] - dt.timedelta(days=1)) if rng.random() < 0.1 else r for r in rows]
    problems: list[str] = []

    def prepared(name: str, kind: type[TimeSeriesStore] = TimeSeriesStore) -> TimeSeriesStore:
        emu.reset()  # every run on an emulator as small as the first one's
        client = emu.client(database=f"late-{name}-{random.randrange(10**9)}")
        store = kind(client, spec, write_options=FAST)
        store.write(history)  # the day before, rolled up: the watermark is at its end
        store.rollup(bars, until=DAY)
        return store

    def run(name: str, data: list[dict[str, Any]], unguarded: bool = False) -> float:
        store = prepared(name, Before if unguarded else TimeSeriesStore)
        t0 = time.perf_counter()
        written = store.write(data)
        rate = len(data) / (time.perf_counter() - t0)
        if written.created != len(data):
            problems.append(f"(a) {name}: {written.created} of {len(data)} created")
        store.client.close()
        return rate

    methods = {
        "unmarked writer (before)": lambda: run("before", rows, unguarded=True),
        "on time (lease, horizons)": lambda: run("ontime", rows),
        "10 % late (marks)": lambda: run("late", late_rows),
    }
    rates: dict[str, list[float]] = {name: [] for name in methods}
    for fn in methods.values():
        fn()  # warm-up
    for _ in range(args.repeats):
        for name, fn in methods.items():
            rates[name].append(fn())
    base = statistics.median(rates["unmarked writer (before)"])
    print(f"(a) writer, {args.ticks} ticks, 10 shards, unramped; median of {args.repeats} (interleaved)")
    for name, got in rates.items():
        rate = statistics.median(got)
        ratio = rate / base
        mark = "" if name.startswith("unmarked") else f"  {ratio:.2f}x  {verdict(ratio, 0.9, at_most=False)}"
        print(f"  {name:<28} {rate:>9,.0f} ticks/s  (runs {', '.join(f'{r:,.0f}' for r in got)}){mark}")

    # the late write again through a proxy that cuts its connections
    store = prepared("cuts")
    proxy = CuttingProxy(emu.address, down=args.down)
    cut_client = emulator_client(proxy.address, database=database_id(store.client))
    try:
        with proxy.cutting(every=args.every, seed=1):
            t0 = time.perf_counter()
            TimeSeriesStore(cut_client, spec, write_options=FAST).write(late_rows)
            seconds = time.perf_counter() - t0
        cuts = proxy.cuts
    finally:
        proxy.close()
        cut_client.close()
    counted = store.count()
    marked = sorted(d.id for d in store.client.collection(f"tsstore_rollups/{bars.name}/marks").stream())
    want = {str(int(r["timestamp"].replace(second=0, microsecond=0).timestamp() * 1000))
            for r in late_rows if r["timestamp"] < DAY}  # fmt: skip
    redone = store.rollup(bars, until=DAY)
    exact = _bars_equal(store, bars, DAY - dt.timedelta(days=1), DAY)
    print(f"  10 % late through {cuts} cuts: {len(late_rows) / seconds:,.0f} ticks/s, {counted - len(history)} of "
          f"{len(late_rows)} stored, {len(marked)} of {len(want)} late minutes marked, then {redone.redone} redone; "
          f"bars equal the ticks': {exact}")  # fmt: skip
    if counted != len(history) + len(late_rows) or set(marked) != want or not exact or redone.redone != len(want):
        problems.append("(a) through cuts: a tick, a mark or a bar is wrong")
    for name, got in rates.items():
        if not name.startswith("unmarked") and statistics.median(got) / base < 0.9:
            problems.append(f"(a) {name}: {statistics.median(got) / base:.2f}x the unmarked writer (target >= 0.9x)")
    store.client.close()
    return problems


def _bars_equal(store: TimeSeriesStore, rollup: Rollup, start: dt.datetime, end: dt.datetime) -> bool:
    want = store.bars(interval=rollup.interval, by=list(rollup.by), price=rollup.price, volume=rollup.volume,
                      start=start, end=end)  # fmt: skip
    stored = TimeSeriesStore(store.client, rollup.spec).query_frame(start=start, end=end, direction="asc")
    have = stored.reset_index().set_index([*rollup.by, "timestamp"]).sort_index()
    columns = ["open", "high", "low", "close", "count", "volume"]
    return bool(list(have.index) == list(want.index) and all(
        [int(v) for v in have[c]] == [int(v) for v in want[c]] for c in columns
    ))  # fmt: skip


def day_reads(emu: Emulator, args: argparse.Namespace) -> list[str]:
    client = emu.client(database=f"late-day-{random.randrange(10**9)}")
    store = TimeSeriesStore(client, SPEC, write_options=FAST)
    minutes = Rollup(SPEC, interval="1min", by="symbol", price="price.micros", volume="volume")
    hours = Rollup(minutes, interval="1h")
    rows = list(trading_day(args.day_ticks, seed=2))
    store.write(rows)
    end = DAY + dt.timedelta(days=1)
    store.rollup(minutes, until=end)
    TimeSeriesStore(client, minutes.spec, write_options=FAST).rollup(hours, until=end)
    asked = {"sum": ["volume"], "min": ["price.micros"], "max": ["price.micros"], "std": ["price.micros"]}
    clean = ReadStats()
    store.aggregate(start=DAY, end=end, rollups=[hours, minutes], stats=clean, **asked)
    busy = sorted({r["timestamp"].replace(second=0, microsecond=0) for r in rows})
    rng = random.Random(9)
    chosen = sorted(rng.sample(busy, max(1, len(busy) // 100)))
    late = [dict(rows[0], symbol="AAA", timestamp=m + dt.timedelta(seconds=59, microseconds=1), volume=100)
            for m in chosen]  # fmt: skip
    store.write(late)
    cost = ReadStats()
    got = store.aggregate(start=DAY, end=end, rollups=[hours, minutes], stats=cost, **asked)
    plan = store.explain_aggregate(start=DAY, end=end, rollups=[hours, minutes])
    needed = 0
    for part in plan.parts:
        spec = SPEC if part.rollup is None else part.rollup.spec
        needed += TimeSeriesStore(client, spec).count(start=part.start, end=part.end)
    needed += len(chosen)  # the marks
    frame = store.query_frame(start=DAY, end=end, columns=["price.micros", "volume"])
    prices = frame["price.micros"].astype("int64")
    exact = (got.count, got.sum["volume"], got.min["price.micros"], got.max["price.micros"]) == (
        len(frame), int(frame["volume"].sum()), int(prices.min()), int(prices.max())
    ) and abs(got.std["price.micros"] - float(pd.Series(prices).std())) <= 1e-9 * float(prices.std())
    ratio = cost.billed_reads / needed
    late_parts = sum(1 for p in plan.parts if p.late and p.rollup is None)
    print(f"\n(b) aggregate over a day of {len(rows) + len(late)} ticks, {len(chosen)} of {len(busy)} minutes marked "
          f"({late_parts} parts read from the ticks), equal to the ticks': {exact}")  # fmt: skip
    print(f"  billed reads {cost.billed_reads} against bars + marks + the marked minutes' ticks {needed}: "
          f"{ratio:.2f}x  {verdict(ratio, 1.1)}; the same day before any mark: {clean.billed_reads}; "
          f"all the ticks: {len(frame)}")
    client.close()
    problems = [] if exact else ["(b) the aggregate from roll-ups differs from the ticks'"]
    return problems + ([] if ratio <= 1.1 else [f"(b) {ratio:.2f}x the reads the answer needs (target <= 1.1x)"])


def ninety_days(emu: Emulator) -> list[str]:
    client = emu.client(database=f"late-90-{random.randrange(10**9)}")
    spec = SeriesSpec("ticks", shards=["a", "b", "c"], key_fields=["symbol"], late=LatePolicy(window="120D"))
    minutes = Rollup(spec, interval="1min", by="symbol", volume="volume")
    store = TimeSeriesStore(client, spec, write_options=FAST)
    start = DAY - dt.timedelta(days=120)
    rows = [row for k in range(120) for row in trading_day(200, day=(start + dt.timedelta(days=k)).date(), seed=k)]
    store.write(rows)
    store.rollup(minutes, until=DAY)
    at = DAY - dt.timedelta(days=90) + dt.timedelta(hours=10, minutes=15, seconds=7)
    bucket = at.replace(second=0)
    in_bucket = store.count(start=bucket, end=bucket + dt.timedelta(minutes=1))
    bars_there = TimeSeriesStore(client, minutes.spec).count(start=bucket, end=bucket + dt.timedelta(minutes=1))
    store.write([dict(rows[0], symbol="AAA", timestamp=at)])
    done = store.rollup(minutes, until=DAY)
    print(f"\n(c) a tick 90 days late, {len(rows)} ticks over 120 days rolled up: {done.describe()}")
    expected = (in_bucket + 1, bars_there + (0 if any(r["symbol"] == "AAA" and r["timestamp"].replace(second=0,
                microsecond=0) == bucket for r in rows) else 1))  # fmt: skip
    print(f"  read {done.ticks} ticks (its bucket holds {in_bucket + 1}), wrote {done.bars} bars "
          f"(its bucket's: {expected[1]})")
    client.close()
    ok = done.redone == 1 and done.ticks == expected[0] and done.bars == expected[1]
    return [] if ok else [f"(c) the 90-day-late tick cost more than its bucket: {done.describe()}"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ticks", type=int, default=30_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--day-ticks", type=int, default=100_000)
    parser.add_argument("--every", type=float, default=1.0, help="mean seconds between cuts")
    parser.add_argument("--down", type=float, default=0.3, help="seconds new connections are refused after a cut")
    parser.add_argument("--only", choices=["a", "b", "c"], default=None, help="run one part")
    args = parser.parse_args()
    began = time.perf_counter()
    emu = emulator()
    parts = {"a": lambda: throughput(emu, args), "b": lambda: day_reads(emu, args), "c": lambda: ninety_days(emu)}
    try:
        problems = [p for name, part in parts.items() if args.only in (None, name) for p in part()]
    finally:
        emu.stop()
    finish(problems, began, ok="every answer equals the ticks'")


if __name__ == "__main__":
    main()
