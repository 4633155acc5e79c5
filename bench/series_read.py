"""Issue 26, side by side on one emulator: series shapes (one query per series) against the sharded
plan, and value filters on the server against filtering on the client; then both through a proxy
that cuts the connections (bench/faults.py's), against their fault-free answers.

a) The newest --limit ticks of --symbol, --ticks ticks at --shards shards: the symbol shape with
   series_rate (one query, no shard filter) against the same declaration without it (a query per
   chunk of shard values, lean rounds, a snapshot read). The same documents are read under both
   declarations: the emulator enforces no index.
b) The demo (tsstore.demo's SPEC and what ``tsstore demo`` writes: the seed's instruments and a
   --demo-ticks day): its one-symbol query, AAA's newest 5 (run as ``store.query``, the plan and reads
   of the demo's ``query_frame``, with the page's stats), and its ``latest`` of three symbols, with
   the demo's symbol shape sharded (no series_rate, as before issue 26) and a series.
c) --exchange's ticks over the day with volume >= --volume: the condition in ``where``, filtered on
   the server (QueryShape(["exchange"], ranges=["volume"])), against every tick of the exchange in
   the range read and filtered here.
d) a) and c) through tests/proxy.py's CuttingProxy (a cut every ~--every s, as bench/faults.py),
   each repeated for --cut-span s: every answer equal to the fault-free one of a) or c), and the pace
   (median cut run / median clean run). A query whose connection is cut goes on scanning on the
   emulator, so each case starts on an idle emulator and its "drain" (how long it stayed busy) is shown.
   --ticks is 5 000 by default so that a sharded chunk query (~0.5 s on the emulator at 40 shards)
   fits between cuts: at 20 000 (~5 s a query) no attempt of the sharded page outlived a cut, and it
   failed with FaultError after its retry budget (a run of this benchmark at --ticks 20000).

Every answer is checked against an oracle computed from the records written; the exit status is 1
when one differs (or a run failed). Wall times are medians of --repeats runs, alternating, after a
first run each. The emulator scans the whole collection once per ``in`` value of a query
(bench/range_read.py), so a sharded chunk costs it one scan per shard value and the series query
one scan: its wall-time ratios exaggerate what Firestore, reading index ranges, would show.
Documents, queries and billed reads are what production pays.

Run: python bench/series_read.py [--ticks 5000] [--shards 40] [--limit 100] [--volume 4600]
     [--demo-ticks 20000] [--repeats 5] [--every 1.0] [--down 0.3] [--cut-span 10] [--skip-faults]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import functools
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import emulator, measure
from faults import Answer, finish, same, through_cuts, trial_seconds

from tsstore import QueryShape, SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.demo import SPEC as DEMO_SPEC
from tsstore.local.emulator import Emulator
from tsstore.local.synthetic import SEED_INSTRUMENTS, trading_day
from tsstore.read.cost import ReadStats
from tsstore.read.query import Query
from tsstore.ticks import Tick

SERIES_RATE = 50.0  # ticks/s of one symbol, well under a series' 500 writes/s
BOTH = ("desc", "asc")
DAY = dt.datetime(2019, 1, 2, 8, 0, tzinfo=dt.timezone.utc)  # trading_day's default day, 08:00-16:30
DEMO_DAY = dt.date(2018, 12, 31)  # the demo's synthetic day
DEMO_SYMBOLS = ("AAA", "CCC", "EEE")  # the demo's one-symbol page reads the first, its latest() all three

Record = dict[str, Any]
Key = tuple[tuple[str, dt.datetime], ...]  # (symbol, timestamp) identifies a tick
Case = Callable[[TimeSeriesStore], tuple[Answer, ReadStats]]


@dataclass(frozen=True)
class Measured:
    """A case, where it reads, its first (oracle-checked) answer and cost, its median wall seconds."""

    store: TimeSeriesStore
    case: Case
    answer: Answer
    stats: ReadStats
    wall: float


def with_rate(spec: SeriesSpec, field: str, rate: float | None) -> SeriesSpec:
    """``spec`` with its ``[field]`` shape read as one series (``rate``) or sharded (``None``)."""
    shapes = tuple(
        QueryShape(s.fields, s.directions, ranges=s.ranges, series_rate=s.series_rate)
        if s.key != ((field,), ())
        else QueryShape(s.fields, s.directions, series_rate=rate)
        for s in spec.shapes
    )
    return dataclasses.replace(spec, shapes=shapes)


def answer(ticks: Sequence[Tick], stats: ReadStats) -> tuple[Answer, ReadStats]:
    return Answer(tuple((t.data["symbol"], t.timestamp) for t in ticks), len(ticks), stats.billed_reads), stats


def newest(records: Sequence[Record], symbol: str, n: int) -> Key:
    return tuple(sorted(((symbol, r["timestamp"]) for r in records if r["symbol"] == symbol), reverse=True)[:n])


def side_by_side(
    cases: dict[str, tuple[TimeSeriesStore, Case]], oracle: Callable[[Any], bool], repeats: int, problems: list[str]
) -> dict[str, Measured]:
    """Each case once (its answer checked against the oracle, its cost kept), then timed
    alternating; a row each."""
    first = {name: case(store) for name, (store, case) in cases.items()}
    walls = measure({name: functools.partial(case, store) for name, (store, case) in cases.items()},
                    repeats=repeats, warm_up=False)  # fmt: skip
    print(f"   {'':<20} {'docs':>6} {'queries':>7} {'trips':>5} {'chunks':>6} {'billed':>6} {'wall s':>7}  oracle")
    for name, (got, stats) in first.items():
        ok = oracle(got.key)
        problems += [] if ok else [f"{name}: the answer differs from the oracle"]
        print(
            f"   {name:<20} {stats.documents:>6} {stats.queries:>7} {stats.round_trips:>5} {stats.chunks:>6}"
            f" {stats.billed_reads:>6} {walls[name]['wall']:>7.3f}  {'equal' if ok else 'DIFFERS'}"
        )
    return {name: Measured(*cases[name], got, stats, walls[name]["wall"]) for name, (got, stats) in first.items()}


def ratios(label: str, top: Measured, bottom: Measured) -> str:
    fields = (("docs", "documents"), ("queries", "queries"), ("billed", "billed_reads"), ("trips", "round_trips"))
    parts = [f"{n} {getattr(top.stats, f) / max(1, getattr(bottom.stats, f)):.2f}x" for n, f in fields]
    return f"   {label}: {', '.join(parts)}, wall {top.wall / bottom.wall:.2f}x"


def series_page(args: argparse.Namespace, before: TimeSeriesStore, after: TimeSeriesStore,
                records: Sequence[Record], problems: list[str]) -> dict[str, Measured]:  # fmt: skip
    """a): the newest page of one symbol, series plan vs sharded plan."""

    def page(store: TimeSeriesStore) -> tuple[Answer, ReadStats]:
        got = store.query(where={"symbol": args.symbol}, limit=args.limit)
        return answer(got, got.stats)

    print(f"\na) newest {args.limit} ticks of {args.symbol}, {args.ticks} ticks at {args.shards} shards"
          f" (median of {args.repeats}, alternating)")  # fmt: skip
    expected = newest(records, args.symbol, args.limit)
    got = side_by_side({"a) series": (after, page), "a) sharded": (before, page)},
                       lambda key: key == expected, args.repeats, problems)  # fmt: skip
    print(ratios("sharded / series", got["a) sharded"], got["a) series"]))
    stats = got["a) series"].stats
    met = stats.queries == 1 and stats.documents <= args.limit + 1
    problems += [] if met else [f"a) the series page read {stats.documents} documents in {stats.queries} queries"]
    print(f"   series: {stats.documents} documents (limit + 1 = {args.limit + 1}) in {stats.queries} query:"
          f" {'met' if met else 'NOT met'} (target <= limit + 1 in one query)")  # fmt: skip
    return got


def demo(emu: Emulator, args: argparse.Namespace, problems: list[str]) -> None:
    """b): the demo's per-symbol reads, its symbol shape sharded vs a series."""
    records: list[Record] = [*SEED_INSTRUMENTS, *trading_day(args.demo_ticks, day=DEMO_DAY)]
    rate = next((s.series_rate for s in DEMO_SPEC.shapes if s.key == (("symbol",), ()) and s.series), SERIES_RATE)
    client = emu.client(database="demo")
    sharded = TimeSeriesStore(client, with_rate(DEMO_SPEC, "symbol", None), write_options=WriteOptions(ramp=False))
    series = TimeSeriesStore(client, with_rate(DEMO_SPEC, "symbol", rate))
    sharded.write(records, keep_ids=False)

    def page(store: TimeSeriesStore) -> tuple[Answer, ReadStats]:
        got = store.query(Query(where={"symbol": DEMO_SYMBOLS[0]}, limit=5))
        return answer(got, got.stats)

    def latest(store: TimeSeriesStore) -> tuple[Answer, ReadStats]:
        stats = ReadStats()
        frame = store.latest(by="symbol", values=DEMO_SYMBOLS, stats=stats)
        key = tuple((str(s), ts.to_pydatetime()) for s, ts in frame["timestamp"].items())
        return Answer(key, len(frame), stats.billed_reads), stats

    print(f"\nb) the demo: {len(records)} ticks at {len(DEMO_SPEC.shards)} shards, its symbol shape sharded and"
          f" a series (median of {args.repeats}, alternating)")  # fmt: skip
    for name, case, symbols, n in (
        (f"{DEMO_SYMBOLS[0]} limit 5", page, DEMO_SYMBOLS[:1], 5),
        ("latest x3", latest, DEMO_SYMBOLS, 1),
    ):
        expected = tuple(tick for s in symbols for tick in newest(records, s, n))
        got = side_by_side({f"{name}, sharded": (sharded, case), f"{name}, series": (series, case)},
                           lambda key: key == expected, args.repeats, problems)  # fmt: skip
        print(ratios("sharded / series", got[f"{name}, sharded"], got[f"{name}, series"]))
    sharded.close()
    series.close()
    client.close()


def value_filter(args: argparse.Namespace, store: TimeSeriesStore, records: Sequence[Record],
                 problems: list[str]) -> dict[str, Measured]:  # fmt: skip
    """c): a range read with volume >= threshold, on the server vs on the client."""
    end = DAY + dt.timedelta(hours=8, minutes=30)

    def server(store: TimeSeriesStore) -> tuple[Answer, ReadStats]:
        got = store.query(where=[("exchange", "==", args.exchange), ("volume", ">=", args.volume)], start=DAY, end=end)
        return answer(got, got.stats)

    def client(store: TimeSeriesStore) -> tuple[Answer, ReadStats]:
        got = store.query(where={"exchange": args.exchange}, start=DAY, end=end)
        return answer([t for t in got if t.data["volume"] >= args.volume], got.stats)

    exchange = [r for r in records if r["exchange"] == args.exchange]
    expected = sorted((r["symbol"], r["timestamp"]) for r in exchange if r["volume"] >= args.volume)
    print(f"\nc) {args.exchange} over {DAY:%Y-%m-%d}, volume >= {args.volume}: {len(expected)} of {len(exchange)} ticks"
          f" ({len(expected) / max(1, len(exchange)):.1%}), median of {args.repeats}, alternating")  # fmt: skip
    got = side_by_side({"c) server filter": (store, server), "c) client filter": (store, client)},
                       lambda key: sorted(key) == expected, args.repeats, problems)  # fmt: skip
    print(ratios("client / server", got["c) client filter"], got["c) server filter"]))
    return got


def busy(emu: Emulator) -> float:
    """CPU seconds the emulator's process group has used (Linux /proc; 0 elsewhere)."""
    used = 0
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == emu.pid:  # in its process group: utime + stime, in clock ticks
            used += int(fields[11]) + int(fields[12])
    return used / os.sysconf("SC_CLK_TCK")


def settle(emu: Emulator, *, window: float = 0.5, limit: float = 300.0) -> float:
    """Wait until the emulator is idle (under 0.1 CPU s/s over ``window`` s); the seconds it was
    busy before (0: idle at once). A query whose connection was cut goes on scanning on the
    emulator (measured at 20 000 ticks, 40 shards: both cores busy for ~9 s after 5 cuts), which
    would otherwise be charged to the next case."""
    began = time.perf_counter()
    while time.perf_counter() - began < limit:
        used = busy(emu)
        time.sleep(window)
        if busy(emu) - used < 0.1 * window:
            break
    return time.perf_counter() - began - window


def faults(emu: Emulator, args: argparse.Namespace, database: str, cases: dict[str, Measured],
           problems: list[str]) -> None:  # fmt: skip
    """d): each case through cuts; every answer must equal its fault-free one from a) or c)."""
    print(f"\nd) through cuts (every ~{args.every} s, down {args.down} s), each case repeated for {args.cut_span:g} s;"
          " clean: the median of a) or c); drain: seconds the emulator stayed busy afterwards")  # fmt: skip
    print(f"   {'':<20} {'clean s':>8} {'cut s':>8} {'pace':>6} {'cut runs':>9} {'cuts':>5} {'drain s':>7}"
          "  equal to clean")  # fmt: skip
    settle(emu)
    for name, clean in cases.items():

        def cut(client: Any) -> Answer:
            with TimeSeriesStore(client, clean.store.spec) as store:
                return clean.case(store)[0]

        trial, cuts = through_cuts(emu, database, args, cut, span=args.cut_span)
        drain = settle(emu)
        equal = bool(trial.values) and all(same(clean.answer, a) for a in trial.values)
        problems += [f"d) {name}: {line}" for line in trial.problems(args.case_timeout)]
        problems += [] if equal else [f"d) {name}: a cut answer differs from the clean one (or none came)"]
        pace = "-" if trial.median is None else f"{trial.median / clean.wall:.1f}x"
        print(
            f"   {name:<20} {clean.wall:>8.3f} {trial_seconds(trial):>8} {pace:>6}"
            f" {f'{len(trial.seconds)}/{trial.runs}':>9} {cuts:>5} {drain:>7.1f}  {'yes' if equal else 'NO'}"
            f" ({clean.answer.rows} ticks)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=5_000, help="ticks of the day read in a), c), d)")
    parser.add_argument("--shards", type=int, default=40)
    parser.add_argument("--limit", type=int, default=100, help="the page of a)")
    parser.add_argument("--symbol", default="AAA")
    parser.add_argument("--exchange", default="EXCHG1")
    parser.add_argument("--volume", type=int, default=4600, help="c)'s threshold (volumes are 100..4900)")
    parser.add_argument("--demo-ticks", type=int, default=20_000, help="the demo's synthetic day, as tsstore demo")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs per method")
    parser.add_argument("--every", type=float, default=1.0, help="mean seconds between cuts")
    parser.add_argument("--down", type=float, default=0.3, help="seconds new connections are refused after a cut")
    parser.add_argument("--cut-span", type=float, default=10.0, help="seconds each case repeats, cut")
    parser.add_argument("--case-timeout", type=float, default=300.0, help="time limit of each case, in seconds")
    parser.add_argument("--seed", type=int, default=0, help="seed of the cut schedule")
    parser.add_argument("--skip-faults", action="store_true")
    args = parser.parse_args()
    before = SeriesSpec(
        "ticks",
        shards=[f"s{i}" for i in range(args.shards)],
        shapes=[
            QueryShape("symbol", BOTH),
            QueryShape("exchange", BOTH),
            QueryShape("exchange", BOTH, ranges="volume"),
        ],
        key_fields=["symbol"],
    )
    problems: list[str] = []
    emu = emulator(max_heap="4g")  # every document on its heap, two databases
    began = time.perf_counter()
    try:
        client = emu.client(database="series")
        store_before = TimeSeriesStore(client, before, write_options=WriteOptions(ramp=False))
        store_after = TimeSeriesStore(client, with_rate(before, "symbol", SERIES_RATE))
        records: list[Record] = list(trading_day(args.ticks))
        store_before.write(records, keep_ids=False)
        cases = series_page(args, store_before, store_after, records, problems)
        demo(emu, args, problems)
        cases |= value_filter(args, store_before, records, problems)
        if not args.skip_faults:
            faults(emu, args, "series", cases, problems)
        store_before.close()
        store_after.close()
        client.close()
    finally:
        emu.stop()
    finish(problems, began, ok="all answers equal their oracle and fault-free runs")


if __name__ == "__main__":
    main()
