"""Issue 62, what tracing costs: the read and write paths of the sync store in three
configurations, each in a process of its own, side by side in one run:

- **before**: the code without tracing (``--before``, 490d5b4: its ``tsstore`` from ``git
  archive``, first on the process's path);
- **no SDK**: this checkout with no OpenTelemetry SDK configured (every span and instrument
  the API's no-op: what an application that does not trace pays);
- **SDK**: this checkout with the SDK's ``TracerProvider`` (``SimpleSpanProcessor`` into an
  ``InMemorySpanExporter``) and ``MeterProvider`` (an ``InMemoryMetricReader``) set as the
  global providers before ``tsstore`` is imported: every span recorded and exported.

Reads, on ``--ticks`` ticks of the demo declaration's fields at ``--shards`` shard values
(written once): a page of 100, a cursor walk of ``--walk-pages`` pages, ``count()``,
``iter_ticks`` over all of them, and all of them as a frame. Writes: ``write`` of
``--write-ticks`` ticks (ramp off) into a database of its own per run, timed from the first
tick (the connection is opened before), checked by their ids and ``count()``: nothing lost,
nothing extra. Each path direct and at ``--round-trip`` ms (``tests/proxy.ProxyProcess``, as
``bench/distance.py``), the configurations interleaved (the order rotates each repeat: ABC,
BCA, CAB, ...), after one warm-up of each; the time of a path is measured in its
configuration's process, wall and that process's CPU time (all its threads). Printed: the
medians, and the median of each repeat's ratio no-SDK/before and SDK/before (CPU time is the
steadier figure on a shared machine), whether no SDK is within 5 % of before (``unclear`` when
the repeats' ratios spread wider than that), and with the SDK the spans exported per call of the
path (the verb's, and its children by name). Then no SDK's cost by its parts, which a loaded
machine blurs less: a verb call's span, a child span and a streamed item, each timed alone in
the no-SDK process, times how often the path calls it, as a share of before's CPU time.

Every answer must equal before's direct one (ticks, counts, frames), with the same billed
reads and documents at each place; ``--cut``: each path once more per configuration at the
same round trip through a proxy that also cuts every connection about once a second: answers
equal, nothing lost in writes.

Run: python bench/telemetry.py [--ticks 2000] [--shards 3] [--round-trip 80] [--repeats 5]
     [--walk-pages 10] [--write-ticks 10000] [--write-shards 40] [--write-repeats 5] [--cut]
     [--before 490d5b4]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

if sys.argv[1:2] == ["--serve"]:  # a configuration's process: its tsstore, and the SDK, before tsstore is imported
    sys.path.insert(0, sys.argv[3])
    if sys.argv[2] == "SDK":
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        EXPORTED = InMemorySpanExporter()
        TRACES = TracerProvider()
        TRACES.add_span_processor(SimpleSpanProcessor(EXPORTED))
        trace.set_tracer_provider(TRACES)
        METRICS = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[METRICS]))
    import tsstore  # noqa: F401

import argparse
import collections
import hashlib
import json
import shutil
import statistics
import subprocess
import time
import timeit
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from distance import (PAGE, Place, archived, counts_of, cutting, ended, places, plain, read_cases, same, spec_of,
                      unlike_written)
from _common import emulator

from tsstore import SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.local.emulator import Emulator, emulator_client
from tsstore.local.synthetic import trading_day
from tsstore.read.cost import ReadStats
from tsstore.write.prepare import prepare_records

CONFIGS = ("before", "no SDK", "SDK")
#: The share of before's CPU time no SDK may add (the issue's must-show).
WITHIN = 0.05
#: ``ReadStats``' counts that must be the same in every configuration at one place.
SAME_COUNTS = ("billed_reads", "documents", "queries")


# ------------------------------------------------------------------------- a configuration's process


def paths(spec: SeriesSpec, walk_pages: int) -> dict[str, Callable[[TimeSeriesStore], tuple[Any, ReadStats | None]]]:
    """The read paths, each ``store -> (answer, stats or None)``: bench/distance.py's page, walk,
    count and frame, and ``iter_ticks`` over everything (its answer: how many ticks and a digest
    of their ids, in order)."""
    kept = {"page", "walk", "count()", "frame"}
    verbs = {case.name: case.verb for case in read_cases(spec, walk_pages) if case.name.split()[0] in kept}

    def iter_ticks(store: TimeSeriesStore) -> tuple[Any, ReadStats]:
        stream = store.iter_ticks()
        ids = [tick.id for tick in stream]
        return (len(ids), hashlib.sha256("\n".join(ids).encode()).hexdigest()[:16]), stream.stats

    made: dict[str, Callable[[TimeSeriesStore], tuple[Any, ReadStats | None]]] = {
        name: (lambda store, verb=verb: verb(store, None)) for name, verb in verbs.items()
    }
    made["iter_ticks"] = iter_ticks
    return made


def exported() -> dict[str, Any] | None:
    """The spans the SDK exported since the last call (and forgets them): how many, how many of
    them a verb's (no parent), and how many of each name; None without the SDK."""
    if sys.argv[2] != "SDK":
        return None
    spans = EXPORTED.get_finished_spans()
    EXPORTED.clear()
    names = collections.Counter(span.name.split()[0] for span in spans)
    return {"spans": len(spans), "verbs": sum(span.parent is None for span in spans), "names": dict(names)}


def tracing_parts() -> dict[str, float]:
    """What each of tracing's calls costs in this process, alone (seconds, the best of 7 timings):
    a verb call's span (``verb``), a child span (``child``: a round, a database ask, a commit) and
    an item of a stream passed through its call (``item``: over a plain iterator's)."""
    from tsstore import telemetry
    from tsstore.verbs.declare import _traced

    items = [None] * 100_000

    def best(fn: Callable[[], object], number: int) -> float:
        return min(timeit.repeat(fn, number=number, repeat=7)) / number

    def child() -> None:
        with telemetry.child("round", {"tsstore.queries": 1}):
            pass

    streamed = best(lambda: collections.deque(_traced(iter(items), telemetry.VerbCall("x", "ticks", "native")), 0), 3)
    return {
        "verb": best(lambda: telemetry.called(telemetry.VerbCall("query", "ticks", "native"), lambda: None), 20_000),
        "child": best(child, 20_000),
        "item": (streamed - best(lambda: collections.deque(iter(items), 0), 3)) / len(items),
    }


def serve() -> None:
    """Answer the asks of :class:`Configuration`, one JSON line each, with this process's ``tsstore``."""
    stores: dict[tuple[str, str, int], TimeSeriesStore] = {}
    rows: dict[int, list[dict[str, Any]]] = {}
    for line in sys.stdin:
        ask = json.loads(line)
        if ask["do"] == "parts":
            print(json.dumps(tracing_parts()), flush=True)
            continue
        if ask["do"] == "durations":  # the SDK's metrics: how many verb calls its histogram measured
            data = METRICS.get_metrics_data()
            measured = [metric for rm in data.resource_metrics for sm in rm.scope_metrics for metric in sm.metrics]
            points = [p.count for m in measured if m.name == "db.client.operation.duration" for p in m.data.data_points]
            print(json.dumps({"calls": sum(points)}), flush=True)
            continue
        spec = spec_of(ask["shards"], ask["collection"])
        if ask["do"] == "read":
            key = (ask["address"], ask["database"], ask["shards"])
            if key not in stores:
                stores[key] = TimeSeriesStore(emulator_client(ask["address"], database=ask["database"]), spec)
            path = paths(spec, ask["walk_pages"])[ask["path"]]
            wall, cpu = time.perf_counter(), time.process_time()
            answer, stats = path(stores[key])
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            told = {"answer": plain(answer), "stats": counts_of(stats)}
        else:  # a write into a database of its own
            if ask["ticks"] not in rows:
                rows[ask["ticks"]] = list(trading_day(ask["ticks"], seed=9))
            ticks = rows[ask["ticks"]]
            client = emulator_client(ask["address"], database=ask["database"])
            store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
            client.collection("elsewhere").document("none").get()  # the connection: not the writer's work
            exported()
            wall, cpu = time.perf_counter(), time.process_time()
            result = store.write(ticks, keep_ids=False)
            cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
            store.close()
            client.close()
            told = {"answer": result.count, "stats": None}
        print(json.dumps({"wall": wall, "cpu": cpu, "exported": exported(), **told}), flush=True)


# ------------------------------------------------------------------------- the run


class Configuration:
    """One configuration's process (``--serve``), asked path by path over a pipe."""

    def __init__(self, name: str, folder: str) -> None:
        self.name = name
        self.verb_spans = 0  # the verbs' spans it exported (with the SDK)
        self.process = subprocess.Popen([sys.executable, __file__, "--serve", name, folder], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)  # fmt: skip

    def ask(self, **ask: Any) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(ask) + "\n")
        self.process.stdin.flush()
        told = self.process.stdout.readline()
        if not told:
            raise RuntimeError(f"the process of {self.name} ended (exit {self.process.wait()})")
        answer: dict[str, Any] = json.loads(told)
        if answer.get("exported") is not None:
            self.verb_spans += answer["exported"]["verbs"]
        return answer

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)


def rotated(repeat: int) -> list[str]:
    """The configurations' order in repeat ``repeat``: ABC, BCA, CAB, ABC, ..."""
    k = repeat % len(CONFIGS)
    return [*CONFIGS[k:], *CONFIGS[:k]]


@dataclass
class Timed:
    """One path at one place: each configuration's runs (wall and CPU seconds), its spans."""

    wall: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in CONFIGS})
    cpu: dict[str, list[float]] = field(default_factory=lambda: {c: [] for c in CONFIGS})
    exported: dict[str, Any] | None = None
    items: int = 0  # what the path streams, item by item (iter_ticks' ticks)

    def add(self, config: str, told: dict[str, Any]) -> None:
        self.wall[config].append(told["wall"])
        self.cpu[config].append(told["cpu"])
        if told["exported"] is not None:
            self.exported = told["exported"]

    def ratios(self, figure: str, config: str) -> list[float]:
        """Each repeat's ratio of ``config`` to before."""
        runs = getattr(self, figure)
        return [a / b for a, b in zip(runs[config], runs["before"])]

    def ratio(self, figure: str, config: str) -> float:
        return statistics.median(self.ratios(figure, config))

    def within(self) -> str:
        """Whether no SDK's CPU time is within 5 % of before's: ``yes`` (the median ratio), ``NO``
        (every repeat's ratio beyond), else ``unclear`` (the repeats' spread is wider than 5 %)."""
        ratios = self.ratios("cpu", "no SDK")
        if statistics.median(ratios) <= 1 + WITHIN:
            return "yes"
        return "NO" if min(ratios) > 1 + WITHIN else "unclear"


def timed_places(where: list[Place]) -> tuple[list[Place], list[Place]]:
    """The places timed (direct, at the round trip) and the place through cuts, if any."""
    return [p for p in where if not p.name.endswith("cut")], [p for p in where if p.name.endswith("cut")]


#: What a part of the run found: each timed place's verdict (:meth:`Timed.within`), and the largest
#: share of before's CPU time no SDK's parts cost.
Found = tuple[list[str], float]


def reads(emu: Emulator, args: argparse.Namespace, run: dict[str, Configuration], problems: list[str]) -> Found:
    spec = spec_of(args.shards)
    database = "read"
    writer = TimeSeriesStore(emu.client(database=database), spec, write_options=WriteOptions(ramp=False))
    writer.write(trading_day(args.ticks, symbols=8, seed=5), keep_ids=False)
    writer.close()
    names = list(paths(spec, args.walk_pages))
    results: dict[tuple[str, str], Timed] = {}
    expected: dict[str, Any] = {}
    counted: dict[tuple[str, str], dict[str, int]] = {}

    def one(name: str, place: Place, config: str, *, warm_up: bool = False) -> dict[str, Any]:
        told = run[config].ask(do="read", path=name, address=place.address, database=database, shards=args.shards,
                               collection=spec.collection, walk_pages=args.walk_pages)  # fmt: skip
        if not same(told["answer"], expected.setdefault(name, told["answer"])):
            problems.append(f"{name} at {place.name} ({config}): the answer differs from before's direct one")
        # a store's first count of everything also counts the whole collection: the warm-up's counts differ
        if told["stats"] is not None and not place.name.endswith("cut") and not warm_up:
            kept = {k: told["stats"][k] for k in SAME_COUNTS}
            if kept != (first := counted.setdefault((name, place.name), kept)):
                problems.append(f"{name} at {place.name} ({config}): {kept}, the first run {first}")
        return told

    with places(emu, [args.round_trip / 1000], jitter=args.jitter, cut=args.cut) as where:
        timed, cut = timed_places(where)
        for name in names:  # one warm-up of each (connections, the emulator's JIT, a store's first count)
            for place in timed:
                for config in CONFIGS:
                    one(name, place, config, warm_up=True)
        for repeat in range(args.repeats):
            for name in names:
                for place in timed:
                    for config in rotated(repeat):
                        results.setdefault((name, place.name), Timed()).add(config, one(name, place, config))
                    if name == "iter_ticks":
                        results[(name, place.name)].items = expected[name][0]
        for place in cut:
            with cutting(place):
                for name in names:
                    for config in CONFIGS:
                        results.setdefault((name, place.name), Timed()).add(config, one(name, place, config))
    print(f"\nreads: {args.ticks} ticks, {args.shards} shards; page {PAGE}, walk {args.walk_pages} pages")
    return table(results, args.repeats, cut=bool(cut)), accounted(results, run["no SDK"].ask(do="parts"))


def writes(emu: Emulator, args: argparse.Namespace, run: dict[str, Configuration], problems: list[str]) -> Found:
    spec = spec_of(args.write_shards, "writes")
    expected = {doc.id for doc in prepare_records(spec, trading_day(args.write_ticks, seed=9))}
    results: dict[tuple[str, str], Timed] = {}

    def one(place: Place, config: str, database: str) -> dict[str, Any]:
        told = run[config].ask(do="write", address=place.address, database=database, shards=args.write_shards,
                               collection=spec.collection, ticks=args.write_ticks)  # fmt: skip
        wrong = unlike_written(emu, spec, database, expected, counted=False)  # the ids: none lost, none extra
        if wrong is not None or told["answer"] != len(expected):
            problems.append(f"write at {place.name} ({config}): {wrong}, the result's count {told['answer']}")
        return told

    with places(emu, [args.round_trip / 1000], jitter=args.jitter, cut=args.cut) as where:
        timed, cut = timed_places(where)
        for config in CONFIGS:  # the emulator's JIT, the processes' imports of the writer
            one(timed[0], config, f"warm-{config.replace(' ', '-')}")
        for repeat in range(args.write_repeats):
            for place in timed:
                for config in rotated(repeat):
                    told = one(place, config, f"w{repeat}-{config.replace(' ', '-')}")
                    results.setdefault(("write", place.name), Timed()).add(config, told)
        for place in cut:
            with cutting(place):
                for config in CONFIGS:
                    told = one(place, config, f"cut-{config.replace(' ', '-')}")
                    results.setdefault(("write", place.name), Timed()).add(config, told)
    print(f"\nwrites: {args.write_ticks} ticks, {args.write_shards} shards, ramp off, a database of its own each run")
    return table(results, args.write_repeats, cut=bool(cut)), accounted(results, run["no SDK"].ask(do="parts"))


def table(results: dict[tuple[str, str], Timed], repeats: int, *, cut: bool) -> list[str]:
    """Each path's medians, ratios to before and spans, and whether no SDK is within 5 % of before
    (returned, for each path at each place timed)."""
    print(f"  medians of {repeats} (ms; cpu: the configuration's process, every thread); x before: the median of "
          "each repeat's ratio" + ("; through cuts: one run each" if cut else ""))  # fmt: skip
    print(f"  {'path':<17}{'place':>10}" + "".join(f"{c + ' wall':>13}{'cpu':>8}" for c in CONFIGS)
          + f"{'no SDK x before':>20}{'SDK x before':>17}  no SDK within 5 % (cpu; repeats' range)")  # fmt: skip
    verdicts: list[str] = []
    for (name, place), timed in results.items():
        medians = [(statistics.median(timed.wall[c]) * 1000, statistics.median(timed.cpu[c]) * 1000) for c in CONFIGS]
        cells = "".join(f"{wall:>13.1f}{cpu:>8.1f}" for wall, cpu in medians)
        if place.endswith("cut"):
            print(f"  {name:<17}{place:>10}{cells}")
            continue
        ratios = {c: (timed.ratio("wall", c), timed.ratio("cpu", c)) for c in ("no SDK", "SDK")}
        shown = "".join(f"{f'{w:.3f} / {c:.3f}':>{width}}" for (w, c), width in zip(ratios.values(), (20, 17)))
        spread = timed.ratios("cpu", "no SDK")
        verdicts.append(timed.within())
        print(f"  {name:<17}{place:>10}{cells}{shown}  {verdicts[-1]} ({min(spread):.2f}-{max(spread):.2f})")
    print("  spans exported per call with the SDK (verb spans; children by name):")
    for (name, place), timed in results.items():
        if timed.exported is not None:
            told = timed.exported
            children = ", ".join(f"{n} {k}" for n, k in sorted(told["names"].items()) if n.startswith("tsstore."))
            print(f"  {name:<17}{place:>10}  {told['spans']:>5} spans: {told['verbs']} verb; {children}")
    return verdicts


def accounted(results: dict[tuple[str, str], Timed], parts: dict[str, float]) -> float:
    """No SDK's cost by its parts, steadier than the timings on a loaded machine: each part timed
    alone in the no-SDK process, times how often the path calls it (its spans with the SDK, and the
    items it streams), over before's CPU time (the largest share returned)."""
    largest = 0.0
    print(f"  no SDK by its parts, each timed alone: a verb's span {parts['verb'] * 1e6:.1f} us, a child span "
          f"{parts['child'] * 1e6:.1f} us, a streamed item {parts['item'] * 1e9:.0f} ns")  # fmt: skip
    for (name, place), timed in results.items():
        if place != "direct" or timed.exported is None:
            continue
        verbs = timed.exported["verbs"]
        cost = verbs * parts["verb"] + (timed.exported["spans"] - verbs) * parts["child"] + timed.items * parts["item"]
        share = cost / statistics.median(timed.cpu["before"])
        largest = max(largest, share)
        print(f"  {name:<17} {cost * 1000:>7.3f} ms a call, {share:.3%} of before's CPU time")
    return largest


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve()
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ticks", type=int, default=2000)
    parser.add_argument("--shards", type=int, default=3)
    parser.add_argument("--round-trip", type=float, default=80.0, help="milliseconds")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--walk-pages", type=int, default=10)
    parser.add_argument("--write-ticks", type=int, default=10_000)
    parser.add_argument("--write-shards", type=int, default=40)
    parser.add_argument("--write-repeats", type=int, default=5)
    parser.add_argument("--jitter", type=float, default=0.1, help="of each way's delay, either side")
    parser.add_argument("--cut", action="store_true", help="each path once more through cuts at the round trip")
    parser.add_argument("--skip", default="", help="reads, writes")
    parser.add_argument("--heap", default="4g", help="the emulator's heap")
    parser.add_argument("--before", default="490d5b4", help="the revision without tracing")
    args = parser.parse_args()
    problems: list[str] = []
    began = time.perf_counter()
    folder = archived(args.before)
    emu = emulator(max_heap=args.heap)
    run = {c: Configuration(c, folder if c == "before" else str(ROOT)) for c in CONFIGS}
    try:
        found = [reads(emu, args, run, problems)] if "reads" not in args.skip else []
        found += [writes(emu, args, run, problems)] if "writes" not in args.skip else []
        verdicts = [v for part, _ in found for v in part]
        largest = max((share for _, share in found), default=0.0)
        print(f"\nno SDK within 5 % of before: by the timings' medians at {verdicts.count('yes')} of {len(verdicts)} "
              f"paths and places ({verdicts.count('unclear')} unclear, {verdicts.count('NO')} NO); by its parts "
              f"{'at every path' if largest <= WITHIN else 'NOT at every path'} (at most {largest:.2%} of before's CPU "
              "time)")  # fmt: skip
        calls, spans = run["SDK"].ask(do="durations")["calls"], run["SDK"].verb_spans
        print(f"the SDK's duration histogram measured {calls} verb calls; it exported {spans} verb spans")
        if calls != spans:
            problems.append(f"the SDK measured {calls} verb calls and exported {spans} verb spans")
    finally:
        for configuration in run.values():
            configuration.close()
        emu.stop()
        shutil.rmtree(folder, ignore_errors=True)
    ended(problems, began, fine="every answer equal to before's direct one, every write exact")


if __name__ == "__main__":
    main()
