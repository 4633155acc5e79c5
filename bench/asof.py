"""As-of joins: ``store.asof`` against ``pandas.merge_asof`` on two ``query_frame`` results, peak
memory side by side in one run; then the as-of join through a proxy that cuts its connections; then
an hour of bars from minute (and hourly) roll-ups against from the ticks, billed reads.

The data: --trades trades (``trading_day``'s ticks: symbol, price, exchange, instrument type,
volume) in ``trades`` and --quotes quotes (symbol, bid, ask in micros) in ``quotes``, both over
the same trading day, written once to one emulator database.

a) Each trade with the newest quote of its symbol at or before it, no older than --tolerance:
   - ``asof``: ``trades.asof(Query(start=..., end=...), right_spec=QUOTES, by="symbol",
     tolerance=...)``, the join streamed over the two reads;
   - ``iter_asof``: the same join as a stream of ticks (``trades.iter_asof(...)``), of which the
     run keeps only what the answer check needs, in machine arrays (8 bytes a value): the
     join's own memory, without a frame of the result;
   - ``merge_asof``: ``pd.merge_asof(trades.query_frame(...), quotes.query_frame(...),
     by="symbol", tolerance=...)``, both sides read whole first.
   Each run is a fresh Python process (this file with --child), so that no peak carries over:
   it imports, connects, then measures the case alone. Peak memory is the process's resident
   high-water mark during the case (/proc/self/status VmHWM, reset with /proc/self/clear_refs
   just before it; it counts what pandas, numpy and gRPC hold outside Python's allocator),
   shown whole and above the process's resident size before the case (imports, client, and
   what pandas and Arrow load on first use: a frame of one tick and a ``merge_asof`` of two),
   beside the answer frame's own bytes (its Arrow and NumPy buffers: the least any way of
   getting it holds at the end); with --tracemalloc, a second run of each case in its own
   process gives the peak of Python's allocator (tracemalloc, its slowdown excluded from the
   wall times). Runs alternate (in the order above, then reversed, ...); medians of --repeats.
   What gRPC holds of a read that has arrived but not been taken counts too: with gRPC's
   flow control as it is (its BDP probe grows each stream's receive window to what the link
   seems to carry), tens of MiB on the loopback, varying from run to run; with
   --channel-option grpc.http2.bdp_probe=0 every case's streams keep a small fixed window.
   The answers must be equal: each trade (symbol, time, price, volume) in the same order with
   the same quote (its time, bid, ask) or none. Billed reads: the asof run's ReadStats;
   merge_asof's are the rows of its two frames (query_frame takes no stats; a streamed query
   is billed a read per document).
b) a)'s ``asof`` in this process, once straight to the emulator, then through tests/proxy.py's
   CuttingProxy (bench/faults.py's ``through_cuts``: a cut every ~--every s, new connections
   refused for --down s after each), repeated for --cut-span s (and at least once): every
   answer must equal the fault-free one, and the pace is the median cut run / the clean one.
   The emulator answers a range query only after scanning and sorting the matches (a first
   tick after ~35 s at 1 200 000 documents), and an attempt cut before its first tick makes no
   progress: at 240 000 documents, cuts every ~1 s failed every attempt for the minute of the
   fault budget (a run of this benchmark). So by default the cuts come every ~2.5 x the wait
   for a first tick measured just before (at least 1 s; --every fixes it), which still cuts
   reads mid-stream, and each case repeats for at least 3 cut intervals. A case through which
   no cut came is a problem.
c) (unless --skip-rollup) The trades' 1-minute roll-up and, from it, their hourly one
   (``store.rollup``), then one hour's 1-hour bars of every symbol with moments: from the ticks
   (``store.bars``), from the minute roll-up and from the hourly one (``TimeSeriesStore(client,
   rollup.spec).bars(combine=True)``): billed reads and wall times side by side (median of
   --repeats, alternating), bars equal (OHLCV, count, sum, open/close times; std to 1e-9);
   each read repeated through cuts (cut interval and span as in b, from its own first-tick
   wait), answers equal to the fault-free ones.

The emulator keeps every document on its heap, so --heap must hold both collections; its
resident size after the writes is printed. Measured at the full scale (200 000 trades,
1 000 000 quotes, 3 shards): 6.1-8 GiB resident after the writes, then 13-22 GiB while it
serves the reads at -Xmx9g to -Xmx11g (more than its heap); at -Xmx16g, with other processes
holding ~12 GiB, the kernel's OOM killer stopped it. Writing takes ~1 min, each run of a) ~2-2.5
min (the emulator scans and sorts; wall times are the emulator's, peak memory and billed reads
the client's and production's): a) at --repeats 2 ~15 min, b) and c) ~11 min. The exit
status is 1 when an answer differs or a run failed.

Run: python bench/asof.py [--trades 200000] [--quotes 1000000] [--tolerance 5s] [--direction backward]
     [--repeats 1] [--tracemalloc] [--heap 10g] [--every SECONDS] [--down 0.3] [--cut-span 10]
     [--channel-option NAME=VALUE ...] [--skip-joins] [--skip-faults] [--skip-rollup]
     python bench/asof.py --quick        (2 000 x 10 000, about a minute)
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from _common import emulator
from faults import finish, through_cuts, trial_seconds
from series_read import settle

from tsstore import Rollup, SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.demo import SPEC as DEMO
from tsstore.frames import ticks_to_frame
from tsstore.local.emulator import Emulator, emulator_client
from tsstore.local.synthetic import trading_day
from tsstore.read.cost import ReadStats
from tsstore.read.query import Query
from tsstore.ticks import Tick

DAY = dt.date(2019, 1, 2)  # trading_day's default day, 08:00-16:30 UTC
START = dt.datetime.combine(DAY, dt.time(0, 0), tzinfo=dt.timezone.utc)
END = START + dt.timedelta(days=1)
HOUR = (START + dt.timedelta(hours=12), START + dt.timedelta(hours=13))  # c)'s hour
SHARDS = ("s0", "s1", "s2")

TRADES = SeriesSpec(
    "trades",
    shards=SHARDS,
    key_fields=["symbol"],
    columns=DEMO.columns,  # trading_day's ticks, typed as the demo declares them
    measures=DEMO.measures,
)
QUOTES = SeriesSpec("quotes", shards=SHARDS, key_fields=["symbol"], columns={"symbol": "string", "bid": "Int64",
                    "ask": "Int64"})  # fmt: skip
BARS = Rollup(TRADES, interval="1min", by="symbol", price="price.micros", volume="volume")
BARS_1H = Rollup(BARS, interval="1h")
CASES = ("asof", "iter_asof", "merge_asof")
#: What must be equal between two joins, per trade in order: its symbol, time, price and
#: volume, and its quote's time, bid and ask (NaT / -1 where it has none).
KEY_COLUMNS = ("symbol", "timestamp", "price.micros", "volume", "right.timestamp", "right.bid", "right.ask")

Key = dict[str, np.ndarray]
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
#: Cuts every ~2.5 x a query's first-tick wait (each pause 0.5-1.5 x that): every attempt gets to its first tick.
AUTO_EVERY = 2.5
CUTS_WANTED = 3  # a case runs through cuts for at least this many mean cut intervals
Range = tuple[dt.datetime | None, dt.datetime | None]
MISSING = np.iinfo(np.int64).min  # NaT's value: a trade without a quote


# ---------------------------------------------------------------------- data


def quotes(count: int, *, seed: int) -> Iterator[dict[str, Any]]:
    """``count`` quotes over the trading day: a random-walk mid per symbol, a spread of a few ticks."""
    for n, tick in enumerate(trading_day(count, day=DAY, seed=seed)):
        mid, half = tick["price"]["micros"], 10 + n % 7 * 10
        yield {"symbol": tick["symbol"], "timestamp": tick["timestamp"], "bid": mid - half, "ask": mid + half}


def group_rss(pid: int) -> float:
    """Resident GiB of the processes in ``pid``'s process group (the emulator's JVM; Linux /proc)."""
    pages = 0
    for entry in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = entry.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pid:
            pages += int(fields[21])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**30


def write_data(emu: Emulator, args: argparse.Namespace) -> None:
    client = emu.client(database=args.database)
    options = WriteOptions(ramp=False, max_ops_per_second=args.write_rate)
    for spec, records, label in (
        (TRADES, trading_day(args.trades, day=DAY, seed=args.seed), "trades"),
        (QUOTES, quotes(args.quotes, seed=args.seed + 1), "quotes"),
    ):
        began = time.perf_counter()
        with TimeSeriesStore(client, spec, write_options=options) as store:
            stored = store.write(records, keep_ids=False).count
        print(f"# wrote {stored} {label} in {time.perf_counter() - began:.1f} s", file=sys.stderr)
    client.close()


# ---------------------------------------------------------------------- the two joins


def quote_range(direction: str, tolerance: pd.Timedelta | None) -> Range:
    """The quotes that can match a trade in [START, END): what ``asof`` reads by default."""
    before = direction != "forward"
    after = direction != "backward"
    start = START if not before else START - tolerance if tolerance is not None else None
    end = END if not after else END + tolerance if tolerance is not None else None
    return start, end


def tolerance(args: argparse.Namespace) -> pd.Timedelta | None:
    return None if args.tolerance is None else pd.Timedelta(args.tolerance)


def join_asof(client: Any, args: argparse.Namespace) -> tuple[pd.DataFrame, ReadStats]:
    stats = ReadStats()
    with TimeSeriesStore(client, TRADES) as trades:
        frame = trades.asof(Query(start=START, end=END), right_spec=QUOTES, by="symbol", direction=args.direction,
                            tolerance=args.tolerance, stats=stats)  # fmt: skip
    return frame, stats


def join_merge_asof(client: Any, args: argparse.Namespace) -> tuple[pd.DataFrame, ReadStats]:
    start, end = quote_range(args.direction, tolerance(args))
    with TimeSeriesStore(client, TRADES) as trades, TimeSeriesStore(client, QUOTES) as quoted:
        left = trades.query_frame(start=START, end=END, direction="asc")
        right = quoted.query_frame(start=start, end=end, direction="asc")
        rows = len(left) + len(right)
        right = right.rename(columns={c: f"right.{c}" for c in right.columns if c != "symbol"})
        right["right.timestamp"] = right.index
        frame = pd.merge_asof(left, right, left_index=True, right_index=True, by="symbol", direction=args.direction,
                              tolerance=tolerance(args))  # fmt: skip
    stats = ReadStats(documents=rows, billed_reads=rows)  # query_frame takes no stats: one read per document
    return frame, stats


def join_iter_asof(client: Any, args: argparse.Namespace) -> tuple[Key, ReadStats]:
    """``iter_asof``, keeping only what the answer check needs, in arrays of machine values."""
    symbols: dict[str, int] = {}
    codes, columns = array("i"), {name: array("q") for name in KEY_COLUMNS[1:]}
    none = array("q", [MISSING])
    with TimeSeriesStore(client, TRADES) as trades:
        joined = trades.iter_asof(Query(start=START, end=END), right_spec=QUOTES, by="symbol",
                                  direction=args.direction, tolerance=args.tolerance)  # fmt: skip
        for tick in joined:
            data = tick.data
            codes.append(symbols.setdefault(data["symbol"], len(symbols)))
            columns["timestamp"].append(nanoseconds(tick.timestamp))
            columns["price.micros"].append(data["price"]["micros"])
            columns["volume"].append(data["volume"])
            quote = data.get("right")
            if quote is None:
                for name in KEY_COLUMNS[4:]:
                    columns[name].extend(none)
            else:
                columns["right.timestamp"].append(nanoseconds(quote["timestamp"]))
                columns["right.bid"].append(quote["bid"])
                columns["right.ask"].append(quote["ask"])
        stats = joined.stats
    names = np.array(list(symbols) or [""], dtype=str)
    key: Key = {"symbol": names[np.frombuffer(codes, dtype=np.int32)] if codes else np.array([], dtype=str)}
    for name, values in columns.items():
        got = np.frombuffer(values, dtype=np.int64)
        key[name] = got if name.endswith("timestamp") else np.where(got == MISSING, -1, got).astype("float64")
    return key, stats


def nanoseconds(stamp: dt.datetime) -> int:
    return (stamp - EPOCH) // dt.timedelta(microseconds=1) * 1000


JOINS: dict[str, Callable[[Any, argparse.Namespace], tuple[pd.DataFrame | Key, ReadStats]]] = {
    "asof": join_asof,
    "iter_asof": join_iter_asof,
    "merge_asof": join_merge_asof,
}


def key_of(frame: pd.DataFrame | Key) -> Key:
    """What must be equal between two joins (:data:`KEY_COLUMNS`), as plain arrays."""
    if isinstance(frame, dict):  # iter_asof's, already
        return frame
    out: Key = {}
    for name in KEY_COLUMNS:
        if name == "timestamp":
            values: Any = frame.index
        elif name in frame.columns:
            values = frame[name]
        else:  # no trade matched: the column is absent
            values = pd.Series([None] * len(frame), dtype="object")
        if name.endswith("timestamp"):
            out[name] = pd.to_datetime(pd.Series(values), utc=True).astype("datetime64[ns, UTC]").to_numpy("int64")
        elif name == "symbol":
            out[name] = pd.Series(values).astype("string").fillna("").to_numpy(dtype=str)
        else:
            out[name] = pd.to_numeric(pd.Series(values)).astype("Float64").fillna(-1).to_numpy("float64")
    return out


def differences(a: Key, b: Key) -> str | None:
    """``None`` when equal, else where the first difference is."""
    for name in KEY_COLUMNS:
        x, y = a[name], b[name]
        if len(x) != len(y):
            return f"{len(x)} rows against {len(y)}"
        if not np.array_equal(x, y):
            row = int(np.flatnonzero(x != y)[0])
            return f"row {row}, {name}: {x[row]!r} against {y[row]!r} ({int((x != y).sum())} rows differ)"
    return None


# ---------------------------------------------------------------------- one case, one process


def status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def warm_up() -> None:
    """Load what pandas and Arrow load on first use (a one-tick frame of each shape and a
    ``merge_asof`` of them, no Firestore): every case pays it once per process, so it is
    part of the base, not of one case's peak."""
    trade = next(iter(trading_day(1, day=DAY)))
    stamp = trade.pop("timestamp")
    joined = {**trade, "right": {"symbol": "A", "bid": 1, "ask": 2, "timestamp": stamp, "id": "x"}}
    frames = [ticks_to_frame(spec, [Tick("x", stamp, data)]) for spec, data in ((TRADES, trade), (TRADES, joined))]
    left, right = frames[0], frames[1][["symbol", "right.bid"]]
    pd.merge_asof(left, right, left_index=True, right_index=True, by="symbol", tolerance=pd.Timedelta("5s"))


def child(args: argparse.Namespace) -> None:
    """--child: run one case, print its measures as one JSON line, save its answer's key."""
    import tracemalloc

    client = emulator_client(args.address, database=args.database, channel_options=channel_options(args))
    warm_up()
    gc.collect()
    before = status_kib("VmRSS")
    try:  # reset VmHWM to the present resident size (Linux 4.0+): the peak is the case's own
        Path("/proc/self/clear_refs").write_text("5")
        reset = True
    except OSError:
        reset = False
    if args.tracemalloc:
        tracemalloc.start()
    wall, cpu = time.perf_counter(), time.process_time()
    frame, stats = JOINS[args.child](client, args)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    traced = tracemalloc.get_traced_memory()[1] if args.tracemalloc else None
    tracemalloc.stop()
    peak = status_kib("VmHWM")
    key = key_of(frame)
    np.savez(args.out, **key)  # type: ignore[arg-type]
    matched = int((key["right.timestamp"] != MISSING).sum())
    measured = {
        "case": args.child,
        "rows": len(key["symbol"]),
        "matched": matched,
        "before_kib": before,
        "peak_kib": peak,
        "reset": reset,
        "traced": traced,
        "wall": wall,
        "cpu": cpu,
        "documents": stats.documents,
        "billed": stats.billed_reads,
        "queries": stats.queries,
        "columns": list(frame.columns) if isinstance(frame, pd.DataFrame) else [],
        # the answer's own bytes (Arrow and NumPy buffers): what any way of getting it must hold at the end
        "answer_kib": int(frame.memory_usage(deep=True).sum()) / 1024 if isinstance(frame, pd.DataFrame) else None,
    }
    print("RESULT " + json.dumps(measured), flush=True)
    client.close()


@dataclass(frozen=True)
class Run:
    """One case's run in its own process: its measures and its answer's key."""

    measured: dict[str, Any]
    key: Key

    def __getitem__(self, name: str) -> Any:
        return self.measured[name]


def spawn(case: str, emu: Emulator, args: argparse.Namespace, scratch: Path, *, trace: bool) -> Run:
    out = scratch / f"{case}-{time.monotonic_ns()}.npz"
    command = [sys.executable, __file__, "--child", case, "--address", emu.address, "--database", args.database,
               "--out", str(out), "--direction", args.direction, "--tolerance", str(args.tolerance)]  # fmt: skip
    command += ["--tracemalloc"] if trace else []
    command += [f"--channel-option={option}" for option in args.channel_option]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, timeout=args.case_timeout, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"exit {done.returncode} {done.stdout[-500:]}".strip())
    with np.load(out) as saved:
        key = {name: saved[name] for name in saved.files}
    out.unlink()
    return Run(json.loads(lines[-1][len("RESULT ") :]), key)


def channel_options(args: argparse.Namespace) -> list[tuple[str, int | str]]:
    """--channel-option NAME=VALUE as gRPC channel arguments (a number's value as an int)."""
    options: list[tuple[str, int | str]] = []
    for given in args.channel_option:
        name, _, value = given.partition("=")
        options.append((name, int(value) if value.lstrip("-").isdigit() else value))
    return options


def mib(kib: float) -> str:
    return f"{kib / 1024:,.0f}"


def joins(emu: Emulator, args: argparse.Namespace, problems: list[str]) -> None:
    """a): each case in fresh processes, alternating; a run that fails is reported and skipped."""
    print(f"\na) as-of join of {args.trades:,} trades against {args.quotes:,} quotes, by symbol, {args.direction},"
          f" tolerance {args.tolerance}; a fresh process per run, {args.repeats} run(s) each, alternating"
          + (f"; channel options {channel_options(args)}" if args.channel_option else ""))  # fmt: skip
    runs: dict[str, list[Run]] = {case: [] for case in CASES}
    traced: dict[str, Run] = {}
    schedule = [(case, n, False) for n in range(args.repeats) for case in (CASES if n % 2 == 0 else CASES[::-1])]
    schedule += [(case, 0, True) for case in CASES] if args.tracemalloc else []
    with tempfile.TemporaryDirectory(prefix="bench-asof-") as scratch:
        for case, n, trace in schedule:
            try:
                run = spawn(case, emu, args, Path(scratch), trace=trace)
            except (RuntimeError, subprocess.TimeoutExpired) as exc:
                problems.append(f"a) {case} run {n + 1}{' (tracemalloc)' if trace else ''} failed: {exc}")
                print(f"   {case} run {n + 1}{' (tracemalloc)' if trace else ''}: FAILED", flush=True)
                continue
            if trace:
                traced[case] = run
            else:
                runs[case].append(run)
            shown = f"traced peak {run['traced'] / 2**20:,.0f} MiB" if trace else f"peak {mib(run['peak_kib'])} MiB"
            print(f"   {case} run {n + 1}{' (tracemalloc)' if trace else ''}: {run['wall']:.1f} s, {shown}", flush=True)
    every = [(c, r) for c in CASES for r in runs[c]] + list(traced.items())
    if not every:
        return
    reference = every[0][1]
    equal = True
    for case, run in every[1:]:
        if (diff := differences(reference.key, run.key)) is not None:
            equal = False
            problems.append(f"a) {case} differs from {every[0][0]}'s first answer: {diff}")
    print(f"   {reference['rows']:,} trades, {reference['matched']:,} with a quote; answers"
          f" {'equal' if equal else 'DIFFER'} (trade, time, price, volume, quote time, bid, ask)")  # fmt: skip
    if not all(r["reset"] for rs in runs.values() for r in rs):
        print("   (/proc/self/clear_refs not writable: peaks are the whole process's, since its start)")
    header = f"   {'':<11} {'peak MiB':>9} {'above base':>10} {'base':>6} {'answer':>6}"
    header += f" {'traced MiB':>10}" if args.tracemalloc else ""
    print(header + f" {'wall s':>8} {'cpu s':>7} {'docs':>10} {'billed':>10} {'queries':>7}")
    medians: dict[str, dict[str, float]] = {}
    for case in CASES:
        if not (done := runs[case]):
            continue
        m = {name: statistics.median(r[name] for r in done) for name in ("peak_kib", "before_kib", "wall", "cpu")}
        m["above"] = statistics.median(r["peak_kib"] - r["before_kib"] for r in done)
        medians[case] = m
        answer = done[0]["answer_kib"]
        line = f"   {case:<11} {mib(m['peak_kib']):>9} {mib(m['above']):>10} {mib(m['before_kib']):>6}"
        line += f" {mib(answer) if answer is not None else '-':>6}"
        line += f" {traced[case]['traced'] / 2**20:>10,.0f}" if case in traced else f" {'-':>10}" * args.tracemalloc
        print(line + f" {m['wall']:>8.2f} {m['cpu']:>7.2f} {done[0]['documents']:>10,} {done[0]['billed']:>10,}"
                     f" {done[0]['queries'] if case != 'merge_asof' else '-':>7}")  # fmt: skip
    for case in CASES[:-1]:
        if case not in medians or "merge_asof" not in medians:
            continue
        a, b = medians[case], medians["merge_asof"]
        ratio = a["peak_kib"] / b["peak_kib"]
        above = a["above"] / b["above"]
        print(f"   {case} / merge_asof: peak {ratio:.2f}x ({'met' if ratio < 1 / 3 else 'NOT met'}), above base"
              f" {above:.2f}x ({'met' if above < 1 / 3 else 'NOT met'}; target < 1/3),"
              f" wall {a['wall'] / b['wall']:.2f}x, cpu {a['cpu'] / b['cpu']:.2f}x")  # fmt: skip
    if "merge_asof" in traced:
        shown = ", ".join(
            f"{c} {traced[c]['traced'] / traced['merge_asof']['traced']:.2f}x" for c in CASES[:-1] if c in traced
        )
        print(f"   tracemalloc peak / merge_asof's: {shown}")
    if runs["asof"]:
        print(f"   asof frame columns: {', '.join(runs['asof'][0]['columns'])}")


# ---------------------------------------------------------------------- b) faults


def first_tick(emu: Emulator, args: argparse.Namespace, reads: dict[SeriesSpec, Range]) -> float:
    """Seconds to the first tick of the slowest of ``reads`` (spec: its range), oldest first:
    how long a query resumed after a cut waits before it makes progress, on the emulator."""
    client = emu.client(database=args.database)
    waits = []
    for spec, (start, end) in reads.items():
        with TimeSeriesStore(client, spec) as store:
            began = time.perf_counter()
            ticks = store.iter_ticks(start=start, end=end, direction="asc")
            next(iter(ticks), None)
            waits.append(time.perf_counter() - began)
            del ticks
    client.close()
    settle(emu)
    return max(waits)


def cut_every(emu: Emulator, args: argparse.Namespace, reads: dict[SeriesSpec, Range]) -> tuple[float, str]:
    """Set ``args.every`` (--every, or auto: AUTO_EVERY x the first-tick wait of ``reads``, at
    least 1 s); how long to repeat a case through cuts (--cut-span, and at least CUTS_WANTED
    cut intervals, so that cuts do come), and the schedule in words."""
    if args.given_every is not None:
        args.every = args.given_every
        said = f"every ~{args.every:g} s"
    else:
        wait = first_tick(emu, args, reads)
        args.every = max(1.0, AUTO_EVERY * wait)
        said = f"every ~{args.every:.1f} s: {AUTO_EVERY:g} x the {wait:.2f} s a query waits here for its first tick"
    span = max(args.cut_span, CUTS_WANTED * args.every)
    return span, f"{said}; down {args.down} s; repeated for {span:.0f} s, at least once"


def no_cut(name: str, cuts: int) -> list[str]:
    return [] if cuts else [f"{name}: no cut came during the run(s) through the proxy (see --every)"]


def faults(emu: Emulator, args: argparse.Namespace, problems: list[str]) -> None:
    """b): asof once straight to the emulator, then repeated through cuts, in this process."""
    span, every = cut_every(emu, args, {TRADES: (START, END), QUOTES: quote_range(args.direction, tolerance(args))})
    print(f"\nb) asof in this process, once clean, then through cuts ({every}); drain: seconds the emulator stayed"
          " busy afterwards")  # fmt: skip

    def cut(client: Any) -> Key:
        return key_of(join_asof(client, args)[0])

    client = emu.client(database=args.database)
    began = time.perf_counter()
    reference = cut(client)
    wall, rows = time.perf_counter() - began, len(reference["symbol"])
    client.close()
    settle(emu)
    trial, cuts = through_cuts(emu, args.database, args, cut, span=span)
    drain = settle(emu)
    problems += [f"b) asof: {line}" for line in trial.problems(args.case_timeout)] + no_cut("b) asof", cuts)
    diffs = [d for d in (differences(reference, v) for v in trial.values) if d is not None]
    diff = "no answer" if not trial.values else diffs[0] if diffs else None
    problems += [] if diff is None else [f"b) asof through cuts differs from the clean answer: {diff}"]
    pace = "-" if trial.median is None else f"{trial.median / wall:.2f}x"
    print(f"   {'clean s':>8} {'cut s':>8} {'pace':>6} {'cut runs':>8} {'cuts':>5} {'drain s':>7}  equal to clean")
    print(f"   {wall:>8.2f} {trial_seconds(trial):>8} {pace:>6} {f'{len(trial.seconds)}/{trial.runs}':>8}"
          f" {cuts:>5} {drain:>7.1f}"
          f"  {'yes' if diff is None else f'NO: {diff}'} ({rows:,} trades)")  # fmt: skip


# ---------------------------------------------------------------------- c) roll-up reads

#: The columns of a bar that must be equal whichever way it was computed (``std`` to 1e-9).
EXACT = ["open", "high", "low", "close", "count", "volume", "sum", "open_at", "close_at"]


def hour_bars(client: Any, read: str, stats: ReadStats) -> pd.DataFrame:
    """The hour's 1-hour bars of every symbol, with moments, computed from ``read``: the ticks, the
    minute roll-up's bars or the hourly roll-up's."""
    window = {"start": HOUR[0], "end": HOUR[1], "by": "symbol", "interval": "1h", "moments": True}
    if read == "ticks":
        with TimeSeriesStore(client, TRADES) as store:
            return store.bars(price="price.micros", volume="volume", stats=stats, **window)
    with TimeSeriesStore(client, (BARS if read == "1min" else BARS_1H).spec) as store:
        return store.bars(combine=True, stats=stats, **window)


def same_bars(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if len(a) != len(b) or not a[EXACT].equals(b[EXACT]):
        return False
    return bool(np.allclose(a["std"].astype(float), b["std"].astype(float), rtol=1e-9, equal_nan=True))


def cut_bars(read: str, client: Any) -> pd.DataFrame:
    return hour_bars(client, read, ReadStats())


def rollup_reads(emu: Emulator, args: argparse.Namespace, problems: list[str]) -> None:
    client = emu.client(database=args.database)
    options = WriteOptions(ramp=False, max_ops_per_second=args.write_rate)
    began = time.perf_counter()
    with TimeSeriesStore(client, TRADES, write_options=options) as store:
        minutes = store.rollup(BARS, until=END)
    with TimeSeriesStore(client, BARS.spec, write_options=options) as store:
        hours = store.rollup(BARS_1H, until=END)
    took = time.perf_counter() - began
    print(f"\nc) roll-ups of the trades ({took:.1f} s):\n   {minutes.describe()}\n   {hours.describe()}")
    print(f"   then {HOUR[0]:%H:%M}-{HOUR[1]:%H:%M} in 1-hour bars of every symbol with moments, from the ticks and"
          f" from each roll-up (bars(combine=True)); median of {args.repeats}, alternating")  # fmt: skip
    reads = {"ticks": "from ticks", "1min": "from 1min bars", "1h": "from 1h bars"}
    first: dict[str, tuple[pd.DataFrame, ReadStats]] = {}
    for read in reads:
        stats = ReadStats()
        first[read] = (hour_bars(client, read, stats), stats)
    walls: dict[str, list[float]] = {read: [] for read in reads}
    for n in range(args.repeats):
        for read in list(reads) if n % 2 == 0 else list(reads)[::-1]:
            began = time.perf_counter()
            hour_bars(client, read, ReadStats())
            walls[read].append(time.perf_counter() - began)
    truth = first["ticks"][0]
    equal = {read: same_bars(truth, frame) for read, (frame, _) in first.items()}
    problems += [f"c) the bars {reads[r]} differ from those from the ticks" for r, ok in equal.items() if not ok]
    print(f"   {len(truth)} bars ({int(truth['count'].sum()):,} trades)")
    print(f"   {'':<15} {'docs':>7} {'billed':>7} {'queries':>7} {'wall s':>7}  equal to the ticks' bars")
    for read, (_, stats) in first.items():
        print(f"   {reads[read]:<15} {stats.documents:>7,} {stats.billed_reads:>7,} {stats.queries:>7}"
              f" {statistics.median(walls[read]):>7.3f}  {'yes' if equal[read] else 'NO'}")  # fmt: skip
    ticks = first["ticks"][1]
    for read in ("1min", "1h"):
        print(f"   ticks / {read} roll-up: billed {ticks.billed_reads / max(1, first[read][1].billed_reads):.1f}x,"
              f" wall {statistics.median(walls['ticks']) / statistics.median(walls[read]):.2f}x")  # fmt: skip
    if not args.skip_faults:
        print("   through cuts:")
        for read, spec in (("ticks", TRADES), ("1min", BARS.spec), ("1h", BARS_1H.spec)):
            span, every = cut_every(emu, args, {spec: HOUR})
            cut = functools.partial(cut_bars, read)
            trial, cuts = through_cuts(emu, args.database, args, cut, span=span)
            same = bool(trial.values) and all(same_bars(first[read][0], v) for v in trial.values)
            problems += [f"c) {reads[read]} through cuts: {line}" for line in trial.problems(args.case_timeout)]
            problems += no_cut(f"c) {reads[read]}", cuts)
            problems += [] if same else [f"c) {reads[read]}: a cut answer differs from the clean one (or none)"]
            pace = "-" if trial.median is None else f"{trial.median / statistics.median(walls[read]):.1f}x"
            runs = f"{len(trial.seconds)}/{trial.runs}"
            print(f"   {reads[read]:<15} cut {trial_seconds(trial):>7} s, pace {pace}, {runs} runs, {cuts} cuts,"
                  f" equal to clean: {'yes' if same else 'NO'} ({every})")  # fmt: skip
            settle(emu)
    client.close()


# ---------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trades", type=int, default=200_000, help="trades (left side)")
    parser.add_argument("--quotes", type=int, default=1_000_000, help="quotes (right side)")
    parser.add_argument("--tolerance", default="5s", help="the largest gap between a trade and its quote")
    parser.add_argument("--direction", default="backward", choices=("backward", "forward", "nearest"))
    parser.add_argument("--repeats", type=int, default=1, help="runs of each case (fresh processes), alternating")
    parser.add_argument("--tracemalloc", action="store_true", help="also a run of each case under tracemalloc")
    parser.add_argument("--heap", default="10g", help="the emulator's -Xmx (it holds every document)")
    parser.add_argument("--write-rate", type=int, default=200_000, help="WriteOptions.max_ops_per_second")
    parser.add_argument("--every", type=float, default=None, dest="given_every", metavar="SECONDS",
                        help=f"mean seconds between cuts (default: {AUTO_EVERY:g} x a query's wait for its first tick,"
                        " at least 1)")  # fmt: skip
    parser.add_argument("--down", type=float, default=0.3, help="seconds new connections are refused after a cut")
    parser.add_argument(
        "--cut-span",
        type=float,
        default=10.0,
        help=f"seconds b) and c) repeat through cuts (at least {CUTS_WANTED} x the cut interval)",
    )
    parser.add_argument(
        "--channel-option",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a gRPC channel argument for a)'s clients, e.g. grpc.http2.bdp_probe=0 (repeatable)",
    )
    parser.add_argument("--case-timeout", type=float, default=3600.0, help="time limit of each run, in seconds")
    parser.add_argument("--seed", type=int, default=0, help="seed of the data and of the cut schedule")
    parser.add_argument("--skip-joins", action="store_true", help="skip a)")
    parser.add_argument("--skip-faults", action="store_true", help="skip b) and c)'s runs through cuts")
    parser.add_argument("--skip-rollup", action="store_true")
    parser.add_argument("--quick", action="store_true", help="2 000 trades x 10 000 quotes, 3 repeats, tracemalloc")
    parser.add_argument("--database", default="asof", help=argparse.SUPPRESS)
    parser.add_argument("--child", choices=CASES, help=argparse.SUPPRESS)  # one run of a case, in its own process
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.tolerance = None if args.tolerance.lower() == "none" else args.tolerance
    if args.child:
        child(args)
        return
    if args.quick:
        args.trades, args.quotes, args.repeats, args.tracemalloc = 2_000, 10_000, 3, True
        args.heap, args.cut_span = "2g", 5.0
    problems: list[str] = []
    emu = emulator(max_heap=args.heap)
    began = time.perf_counter()
    try:
        write_data(emu, args)
        print(f"# {args.trades:,} trades and {args.quotes:,} quotes at {len(SHARDS)} shards; emulator resident"
              f" {group_rss(emu.pid):.1f} GiB (-Xmx{args.heap})")  # fmt: skip
        if not args.skip_joins:
            joins(emu, args, problems)
        if not args.skip_faults:
            faults(emu, args, problems)
        if not args.skip_rollup:
            rollup_reads(emu, args, problems)
    except Exception as exc:  # a failed run is a result to report
        problems.append(f"{type(exc).__name__}: {exc}")
    finally:
        emu.stop()
    finish(problems, began, ok="all answers equal")


if __name__ == "__main__":
    main()
