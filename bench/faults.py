"""Issue 22, "A cut connection is not an overload": writes and reads side by side, clean (straight
to the emulator) and through a TCP proxy (tests/proxy.py) that cuts every open connection about
once a second and refuses new ones for a moment after each cut, as a flaky network does.

- Reconnects: how long after one cut a plain document read (no retries) succeeds again.
- Writes: ``--ticks`` ticks written by ``TimeSeriesStore.write`` (ramp off; ``--ramp``: from
  500 writes/s, as a new collection's writer starts), clean and cut, each
  into a database of its own, with the late-data protocol on: a minute roll-up of the series is
  stored for the day before (``--history`` ticks, rolled up before the timed write), so the
  writer keeps a lease and a view of the roll-up's horizon (``--no-rollup``: none declared).
  Each run must store exactly the ticks sent: the document ids ``prepare_records`` gives them,
  none missing and none extra (a tick stored twice would hold a second id), and ``count()`` the
  same. ``--write-repeats`` clean and cut runs alternate (the machine's load drifts) and the
  medians are compared. What ``on_status`` reported in the first of each is tallied.
- Reads: ``--read-ticks`` ticks stored once, directly, at each of ``--read-shards``; each case (a
  limited page, a filtered one, a cursor walk over everything, a whole-range frame, a count) runs
  clean and cut, and every answer must equal the first clean one (the same ticks in the same
  order; equal frames; equal counts). A page takes a fraction of a second, less than the time
  between cuts, so each case is repeated back to back for ``--clean-span`` / ``--cut-span``
  seconds (at least once) and the median run is compared: the cut runs meet cuts at every phase.

The emulator scans its whole collection for every query, per ``in`` value (see
bench/range_read.py), so at 40 shards on 20 000 ticks a single clean page takes seconds and the
cursor walk minutes; the ratios, not the absolute times, are the figures to read.

Each case runs in a thread with a time limit (``--case-timeout``): a run that raises is reported as
FAILED with its exception, one that overruns as TIMEOUT (its thread is left behind, its proxy
closed), and the benchmark goes on. Each cut case has a proxy of its own, so its cuts are its own.

Run: python bench/faults.py [--ticks 20000] [--history 2000] [--no-rollup] [--ramp] [--write-repeats 3] [--shards 10] [--read-ticks 20000] [--read-shards 3,40]
     [--page-rows 1000] [--every 1.0] [--down 0.3] [--clean-span 3] [--cut-span 10]
     [--case-timeout 300] [--reconnects 5]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd
from _common import emulator, verdict

from tests.proxy import CuttingProxy
from tsstore import Rollup, SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.local.emulator import Emulator, emulator_client
from tsstore.local.synthetic import trading_day
from tsstore.read.cost import ReadStats
from tsstore.write.prepare import prepare_records

WRITE_TARGET = 1.3  # issue 59: cut / clean at most 1.3x for the 20 000-tick write, roll-up declared
DAY = dt.date(2019, 1, 2)  # the written ticks' day; the roll-up holds the day before


class Trial:
    """Runs of one case, back to back in a daemon thread until ``span`` seconds have passed (at
    least one run), given up on after ``timeout`` seconds: each run's seconds, and its answer or
    the exception it raised (a failed run is a result to report, not a crash of the benchmark)."""

    abandoned = 0  # runs still going at their time limit, in this process

    def __init__(self) -> None:
        self.seconds: list[float] = []  # of the runs that answered
        self.values: list[Any] = []
        self.errors: Counter[str] = Counter()  # the runs that raised, by exception and first line
        self.failed_seconds: list[float] = []
        self.timed_out = False
        self.elapsed = 0.0
        self._lock = threading.Lock()

    @classmethod
    def run(cls, fn: Callable[[], Any], *, span: float, timeout: float) -> Trial:
        trial = cls()

        def loop() -> None:
            began = time.perf_counter()
            while True:
                start = time.perf_counter()
                try:
                    value = fn()
                except Exception as exc:
                    with trial._lock:
                        trial.errors[describe(exc)] += 1
                        trial.failed_seconds.append(time.perf_counter() - start)
                else:
                    with trial._lock:
                        trial.values.append(value)
                        trial.seconds.append(time.perf_counter() - start)
                if time.perf_counter() - began >= span:
                    return

        thread = threading.Thread(target=loop, daemon=True, name="faults-case")
        began = time.perf_counter()
        thread.start()
        thread.join(timeout)
        with trial._lock:  # a timed-out run may still finish later: report what was done by now
            done = cls()
            done.seconds, done.values = list(trial.seconds), list(trial.values)
            done.errors, done.failed_seconds = Counter(trial.errors), list(trial.failed_seconds)
        done.timed_out = thread.is_alive()
        cls.abandoned += done.timed_out
        done.elapsed = time.perf_counter() - began
        return done

    @property
    def runs(self) -> int:
        return len(self.seconds) + len(self.failed_seconds)

    @property
    def ok(self) -> bool:
        """Every run answered, in time."""
        return bool(self.seconds) and not self.errors and not self.timed_out

    @property
    def median(self) -> float | None:
        return statistics.median(self.seconds) if self.seconds else None

    def problems(self, timeout: float) -> list[str]:
        lines = [f"FAILED {error} ({times} of {self.runs} runs)" for error, times in self.errors.most_common()]
        if self.timed_out:
            lines.append(f"TIMEOUT: a run still going after {timeout:.0f} s")
        return lines


def describe(exc: BaseException) -> str:
    """The exception's full class name and the first line of its message."""
    kind = type(exc)
    module = "" if kind.__module__ == "builtins" else f"{kind.__module__}."
    lines = str(exc).strip().splitlines()
    first = lines[0] if lines else ""
    return f"{module}{kind.__qualname__}: {first[:160]}"


def through_cuts(
    emu: Emulator, database: str, args: argparse.Namespace, action: Callable[[Any], Any], *, span: float
) -> tuple[Trial, int]:
    """``action(client)`` run as a :class:`Trial` on a new client whose connections go through a
    proxy of its own, cut every ~``args.every`` s meanwhile; the trial and the cuts made."""
    proxy = CuttingProxy(emu.address, down=args.down)
    client = emulator_client(proxy.address, database=database)
    try:
        with proxy.cutting(every=args.every, seed=args.seed):
            trial = Trial.run(lambda: action(client), span=span, timeout=args.case_timeout)
        cuts = proxy.cuts
    finally:
        proxy.close()
    if not trial.timed_out:  # a timed-out run's thread still holds the client
        client.close()
    return trial, cuts


def finish(problems: list[str], began: float, *, ok: str) -> None:
    """End a benchmark that checks its answers: ``ok``, or each problem; the total time on
    stderr; exit status 1 when a problem was found. A timed-out run's threads would hold the
    interpreter's exit, so then it exits at once (status 1)."""
    print(f"\n{ok if not problems else 'PROBLEMS:'}")
    for line in problems:
        print(f"   {line}")
    print(f"# total {time.perf_counter() - began:.0f} s", file=sys.stderr)
    sys.stdout.flush()
    if Trial.abandoned:
        os._exit(1)
    sys.exit(1 if problems else 0)


def seconds_text(seconds: float | None, *, at_least: bool = False) -> str:
    if seconds is None:
        return "-"
    return f"{'>' if at_least else ''}{seconds:.{2 if seconds < 10 else 1}f}"


def trial_seconds(trial: Trial) -> str:
    """The median run; for a trial that never answered, how long it ran: ">s" when it timed
    out, "(s)" the longest run until it raised."""
    if trial.seconds:
        return seconds_text(trial.median)
    if trial.timed_out:
        return seconds_text(trial.elapsed, at_least=True)
    return f"({seconds_text(max(trial.failed_seconds))})" if trial.failed_seconds else "-"


def ratio(clean: Trial, cut: Trial) -> tuple[float, bool] | None:
    """Median cut run / median clean run, and whether that is only a lower bound (the cut
    trial timed out before any run answered); None when no ratio can be given."""
    if clean.median is None or clean.median <= 0:
        return None
    if cut.median is not None:
        return cut.median / clean.median, False
    if cut.timed_out:
        return cut.elapsed / clean.median, True
    return None


def ratio_text(clean: Trial, cut: Trial) -> str:
    got = ratio(clean, cut)
    return "-" if got is None else f"{'>' if got[1] else ''}{got[0]:.1f}x"


# ---------------------------------------------------------------------- reconnects


def reconnects(emu: Emulator, args: argparse.Namespace) -> None:
    """Seconds from one cut to the first plain document read (no client retries) that succeeds."""
    proxy = CuttingProxy(emu.address, down=args.down)
    client = emulator_client(proxy.address, database="probe")
    doc = client.collection("probe").document("probe")
    waits: list[float] = []
    failures: Counter[str] = Counter()
    try:
        doc.get(retry=None, timeout=10.0)  # connected before the first cut
        for _ in range(args.reconnects):
            proxy.cut()
            began = time.perf_counter()
            while time.perf_counter() - began < 60.0:
                try:
                    doc.get(retry=None, timeout=5.0)
                    break
                except Exception as exc:  # what a request meets after a cut is the point here
                    failures[type(exc).__name__] += 1
                    time.sleep(0.01)
            waits.append(time.perf_counter() - began)
            time.sleep(1.0)
    finally:
        proxy.close()
        client.close()
    print(f"reconnect after one cut (down {args.down} s), {len(waits)} cuts, a read every 10 ms until one succeeds:")
    print(
        f"  seconds to the first success: min {min(waits):.2f}, median {statistics.median(waits):.2f}, "
        f"max {max(waits):.2f}"
    )
    print(f"  failed reads meanwhile: {dict(failures) or 'none'}")


# ---------------------------------------------------------------------- writes


class StatusTally:
    """What ``on_status`` reported, and when (seconds since the tally was made)."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str | None]] = []
        self._began = time.perf_counter()
        self._frozen = False
        self._lock = threading.Lock()

    def __call__(self, text: str | None) -> None:
        with self._lock:
            if not self._frozen:
                self.events.append((time.perf_counter() - self._began, text))

    def freeze(self) -> None:
        """Ignore what a write left running past its time limit reports from now on."""
        with self._lock:
            self._frozen = True

    def report(self, label: str, *, shown: int = 3) -> None:
        with self._lock:
            events = list(self.events)
        texts = Counter(text for _, text in events if text is not None)
        if not texts:
            print(f"  on_status ({label}): nothing reported")
            return
        cleared = sum(text is None for _, text in events)
        print(
            f"  on_status ({label}): {sum(texts.values())} reports, {len(texts)} distinct, cleared {cleared} times;"
            f" the first and last:"
        )
        picked = events if len(events) <= 2 * shown else events[:shown] + [(-1.0, "...")] + events[-shown:]
        for at, text in picked:
            print(f"    {'' if at < 0 else f'{at:7.1f} s':>9}  {'(cleared)' if text is None else text}")
        if texts.most_common(1)[0][1] > 1:
            print("    most frequent: " + "; ".join(f"{times} x {text!r}" for text, times in texts.most_common(shown)))


@dataclass(frozen=True)
class Stored:
    """What a write run left in its database."""

    ids: int
    count: int | str
    missing: int
    extra: int


def stored(emu: Emulator, database: str, spec: SeriesSpec, expected: set[str]) -> Stored:
    """The run's documents, read on a direct client: ids against the expected set, and count()."""
    client = emu.client(database=database)
    store = TimeSeriesStore(client, spec)
    try:
        ids = [snap.id for snap in client.collection(spec.collection).select([]).stream()]
        try:
            count: int | str = store.count()
        except Exception as exc:  # reported, not fatal: the id census above already says what is stored
            count = f"FAILED {describe(exc)}"
    finally:
        store.close()
        client.close()
    found = set(ids)
    return Stored(len(ids), count, len(expected - found), len(found - expected))


def writes(emu: Emulator, args: argparse.Namespace) -> None:
    spec = SeriesSpec("ticks", shards=[f"s{i}" for i in range(args.shards)], key_fields=["symbol"])
    bars = None if args.no_rollup else Rollup(spec, interval="1min", by="symbol", volume="volume")
    rows = list(trading_day(args.ticks, day=DAY, seed=args.seed))
    history = [] if bars is None else list(trading_day(args.history, day=DAY - dt.timedelta(days=1), seed=1))
    expected = {doc.id for doc in prepare_records(spec, history + rows)}
    assert len(expected) == len(history) + args.ticks, "(symbol, timestamp) identifies each tick"

    def prepare(database: str) -> None:
        """The day before, written and rolled up on a direct client: the roll-up's watermark
        is at the start of ``DAY``, so every tick written is on time (a lease and views of the
        horizon, no mark)."""
        if bars is None:
            return
        client = emu.client(database=database)
        store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
        try:
            store.write(history, keep_ids=False)
            store.rollup(bars, until=dt.datetime.combine(DAY, dt.time(), tzinfo=dt.timezone.utc))
        finally:
            store.close()
            client.close()

    def write(client: Any, tally: StatusTally) -> int:
        store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=args.ramp))
        try:
            return store.write(rows, on_status=tally, keep_ids=False).count
        finally:
            store.close()

    names = [f"{kind} {n + 1}" for n in range(args.write_repeats) for kind in ("clean", "cut")]
    for database in ["warm-up", *names]:
        prepare(f"write-{database.replace(' ', '-')}")
    # Warm the emulator (its JIT, its first database) so the first timed run does not pay for it.
    warm_client = emu.client(database="write-warm-up")
    write(warm_client, StatusTally())
    warm_client.close()
    # Clean and cut runs alternate, so the machine's load drifting hits both alike.
    runs: dict[str, tuple[Trial, str, str]] = {}
    tallies: dict[str, StatusTally] = {}
    for name in names:
        database, tally = f"write-{name.replace(' ', '-')}", StatusTally()  # its times count from its start
        if name.startswith("cut"):
            trial, cuts = through_cuts(emu, database, args, lambda c: write(c, tally), span=0)
        else:
            client = emu.client(database=database)
            trial, cuts = Trial.run(lambda: write(client, tally), span=0, timeout=args.case_timeout), 0
            if not trial.timed_out:
                client.close()
        tally.freeze()
        runs[name], tallies[name] = (trial, database, str(cuts) if name.startswith("cut") else "-"), tally

    declared = (
        "no roll-up declared"
        if bars is None
        else f"roll-up {bars.name} stored for the day before ({len(history)} ticks): a lease and views of its horizon"
    )
    print(
        f"writes: {args.ticks} ticks, {args.shards} shards, WriteOptions(ramp={args.ramp}), {declared}; "
        f"cut every ~{args.every} s, down {args.down} s; {args.write_repeats} clean and cut runs alternating;"
        f" time limit {args.case_timeout:.0f} s"
    )
    print(f"  {'run':<8} {'seconds':>8} {'cuts':>5} {'stored':>7} {'count()':>8} {'missing':>8} {'extra':>6}  result")
    exact = True
    for name, (trial, database, cut_count) in runs.items():
        got = stored(emu, database, spec, expected)
        count_text = got.count if isinstance(got.count, int) else "FAILED"
        exact = exact and got.ids == got.count == len(expected) and not got.missing and not got.extra
        result = "; ".join(trial.problems(args.case_timeout)) or f"ok, write() said {trial.values[0]} stored"
        print(
            f"  {name:<8} {trial_seconds(trial):>8} {cut_count:>5} {got.ids:>7} {count_text:>8} {got.missing:>8}"
            f" {got.extra:>6}  {result}"
        )
        if not isinstance(got.count, int):
            print(f"           count(): {got.count}")
    unfinished = [name for name, (trial, _, _) in runs.items() if not trial.ok]
    note = f" (but write() did not return normally: {', '.join(unfinished)})" if unfinished else ""
    print(f"  stored exactly {len(expected)}, 0 duplicated, in every run: {'yes' if exact else 'NO'}{note}")
    # A write that failed has no time: the ratio is given only when every run returned.
    clean = [t.median for n, (t, _, _) in runs.items() if n.startswith("clean") and t.ok and t.median]
    cut = [t.median for n, (t, _, _) in runs.items() if n.startswith("cut") and t.ok and t.median]
    whole = not unfinished and bool(clean) and bool(cut)
    times = statistics.median(cut) / statistics.median(clean) if whole else float("inf")
    shown = f"{times:.1f}x" if whole else "-"
    pairs = ", ".join(f"{c / k:.1f}x" for k, c in zip(clean, cut, strict=False))
    print(f"  cut / clean, medians: {shown} {verdict(times, WRITE_TARGET)}; each pair: {pairs or '-'}")
    for name in ("clean 1", "cut 1"):
        tallies[name].report(name)


# ---------------------------------------------------------------------- reads


@dataclass(frozen=True)
class Answer:
    """A read's answer (what must be equal clean and cut), its rows, and its cost if known."""

    key: Any
    rows: int
    billed: int | None = None


def same(a: Answer, b: Answer) -> bool:
    if isinstance(a.key, pd.DataFrame) or isinstance(b.key, pd.DataFrame):
        return isinstance(a.key, pd.DataFrame) and isinstance(b.key, pd.DataFrame) and a.key.equals(b.key)
    return bool(a.key == b.key)


def read_cases(args: argparse.Namespace) -> dict[str, Callable[[TimeSeriesStore], Answer]]:
    def page(store: TimeSeriesStore) -> Answer:
        got = store.query(limit=50)
        return Answer(tuple(t.id for t in got), len(got), got.stats.billed_reads)

    def filtered(store: TimeSeriesStore) -> Answer:
        got = store.query(limit=50, where={"symbol": "AAA"})
        return Answer(tuple(t.id for t in got), len(got), got.stats.billed_reads)

    def walk(store: TimeSeriesStore) -> Answer:
        ids: list[str] = []
        billed = 0
        cursor: str | None = None
        while True:
            got = store.query(limit=args.page_rows, cursor=cursor)
            ids += (t.id for t in got)
            billed += got.stats.billed_reads
            if (cursor := got.cursor) is None:
                return Answer(tuple(ids), len(ids), billed)

    def frame(store: TimeSeriesStore) -> Answer:
        got = store.query_frame()
        return Answer(got, len(got))

    def count(store: TimeSeriesStore) -> Answer:
        stats = ReadStats()
        got = store.count(stats=stats)
        return Answer(got, got, stats.billed_reads)

    return {
        "page limit=50": page,
        "page limit=50 symbol=AAA": filtered,
        f"cursor walk {args.page_rows}/page": walk,
        "frame, whole range": frame,
        "count()": count,
    }


def reads(emu: Emulator, args: argparse.Namespace, shards: int) -> tuple[int, int]:
    """The read cases at ``shards`` shards; in how many every cut run answered, and equally, of how many."""
    spec = SeriesSpec("ticks", shards=[f"s{i}" for i in range(shards)], shapes=["symbol"], key_fields=["symbol"])
    database = f"read-{shards}"
    client = emu.client(database=database)
    store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
    store.write(trading_day(args.read_ticks, seed=shards), keep_ids=False)

    def cut_read(case: Callable[[TimeSeriesStore], Answer]) -> Callable[[Any], Answer]:
        def run(cut_client: Any) -> Answer:
            cut_store = TimeSeriesStore(cut_client, spec)
            try:
                return case(cut_store)
            finally:
                cut_store.close()

        return run

    print(
        f"reads: {args.read_ticks} ticks, {shards} shards; cut every ~{args.every} s, down {args.down} s;"
        f" each case repeated for {args.clean_span:g} s clean and {args.cut_span:g} s cut (median run shown);"
        f" time limit {args.case_timeout:.0f} s"
    )
    print(
        f"  {'case':<26} {'clean s':>8} {'cut s':>8} {'cut max':>8} {'ratio':>7} {'cut runs':>9} {'cuts':>5}"
        f" {'equal':>5} {'rows clean/cut':>15} {'billed clean/cut':>17}"
    )
    equal = 0
    errors: list[str] = []
    cases = read_cases(args)
    for name, case in cases.items():
        clean = Trial.run(lambda: case(store), span=args.clean_span, timeout=args.case_timeout)
        cut, cuts = through_cuts(emu, database, args, cut_read(case), span=args.cut_span)
        # "equal": every answer that came back, clean or cut, equals the first clean one; a case
        # counts as ridden out when, besides, every run answered in time.
        answers = clean.values[:1]
        agree = bool(answers) and all(same(answers[0], a) for a in clean.values + cut.values)
        equal_text = "yes" if agree and cut.values else "NO" if answers and cut.values else "-"
        equal += agree and clean.ok and cut.ok
        rows = "/".join(str(t.values[0].rows) if t.values else "-" for t in (clean, cut))
        billed = "/".join(
            str(max(a.billed for a in t.values)) if t.values and t.values[0].billed is not None else "-"
            for t in (clean, cut)
        )
        print(
            f"  {name:<26} {trial_seconds(clean):>8} {trial_seconds(cut):>8}"
            f" {seconds_text(max(cut.seconds, default=None)):>8} {ratio_text(clean, cut):>7}"
            f" {f'{len(cut.seconds)}/{cut.runs}':>9} {cuts:>5} {equal_text:>5} {rows:>15} {billed:>17}"
        )
        errors += [
            f"    {name}, {label}: {line}"
            for label, trial in (("clean", clean), ("cut", cut))
            for line in trial.problems(args.case_timeout)
        ]
        if answers and not agree:
            errors.append(f"    {name}: an answer differs from the first clean one")
    print(
        "  (cut runs: answered/all; s in parentheses: no run answered, the longest until it raised;"
        " >s: still running at the time limit)"
    )
    for line in errors:
        print(line)
    print(f"  every cut run answered, and equally: {equal} of {len(cases)} cases")
    store.close()
    client.close()
    return equal, len(cases)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=20_000, help="ticks written, clean and cut")
    parser.add_argument("--history", type=int, default=2_000, help="ticks of the day before, rolled up first")
    parser.add_argument("--no-rollup", action="store_true", help="write with no roll-up declared (no history)")
    parser.add_argument("--ramp", action="store_true", help="the timed writes ramp up from 500 writes/s")
    parser.add_argument("--write-repeats", type=int, default=3, help="clean and cut write runs, alternating")
    parser.add_argument("--shards", type=int, default=10, help="shard values of the written series")
    parser.add_argument("--read-ticks", type=int, default=20_000, help="ticks stored for the read cases")
    parser.add_argument("--read-shards", default="3,40", help="shard counts the read cases run at")
    parser.add_argument("--page-rows", type=int, default=1_000, help="page size of the cursor walk")
    parser.add_argument("--every", type=float, default=1.0, help="mean seconds between cuts")
    parser.add_argument("--down", type=float, default=0.3, help="seconds new connections are refused after a cut")
    parser.add_argument("--clean-span", type=float, default=3.0, help="seconds each read case repeats, clean")
    parser.add_argument("--cut-span", type=float, default=10.0, help="seconds each read case repeats, cut")
    parser.add_argument("--case-timeout", type=float, default=300.0, help="time limit of each case, in seconds")
    parser.add_argument("--reconnects", type=int, default=5, help="cuts of the reconnect probe (0: skip it)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the ticks and of the cut schedule")
    parser.add_argument("--skip-writes", action="store_true", help="run only the reconnect probe and the reads")
    parser.add_argument("--skip-reads", action="store_true", help="run only the reconnect probe and the writes")
    args = parser.parse_args()
    emu = emulator()
    began = time.perf_counter()
    try:
        if args.reconnects > 0:
            reconnects(emu, args)
        if not args.skip_writes:
            writes(emu, args)
        if not args.skip_reads:
            totals = [reads(emu, args, int(s)) for s in args.read_shards.split(",")]
            print(
                f"reads: every cut run answered, and equally, in {sum(e for e, _ in totals)}"
                f" of {sum(n for _, n in totals)} cases"
            )
    finally:
        emu.stop()
    print(f"# total {time.perf_counter() - began:.0f} s", file=sys.stderr)
    if Trial.abandoned:
        # A timed-out run leaves its store's worker threads behind, and concurrent.futures joins
        # every executor's workers at interpreter exit, for as long as their retries last.
        print(f"# {Trial.abandoned} timed-out runs left behind; exiting without waiting for them", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
