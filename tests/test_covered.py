"""Aggregates answered from stored roll-ups: how a range is split between bars and ticks
(pure), what the bars can answer (pure), and, on the emulator at 3 and 40 shards, the same
count, sums, mean, extremes and standard deviation as pandas on the ticks written, at a
fraction of the reads, on both stores and from the shell."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import random
import statistics
from typing import Any

import pandas as pd
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from tests.cli import tsstore
from tests.mutants import US, bites
from tsstore import AsyncTimeSeriesStore, QueryError, QueryShape, SeriesSpec, TimeSeriesStore, shards_for
from tsstore.analytics import covered
from tsstore.analytics.bars import BarBuilder, iter_bars
from tsstore.analytics.covered import CoveredSelection, Part, Total, cover, late_spans
from tsstore.analytics.rollup import Rollup
from tsstore.read.cost import ReadStats
from tsstore.read.plan import normalize_where
from tsstore.ticks import Tick
from tsstore.wire import database_id
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
SYMBOLS = ["AAA", "BBB", "CCC"]
FAST = EMULATOR_WRITE_OPTIONS  # no ramp, no ceiling: the emulator is the tests' own


def at(minutes: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=minutes)


def series(shards: int = 3) -> SeriesSpec:
    return SeriesSpec(
        "ticks",
        shards=shards_for(shards * 500),
        shapes=[QueryShape("symbol", ("desc", "asc")), QueryShape("exchange")],
        key_fields=["symbol", "n"],
        measures=["volume"],
    )


SPEC = series()
MINUTES = Rollup(SPEC, interval="1min", by="symbol", volume="volume")
HOURS = Rollup(MINUTES, interval="1h")


# ------------------------------------------------------------------------------ the split


def test_the_coarsest_rollup_takes_the_middle_finer_ones_the_sides_ticks_the_edges() -> None:
    spans = [(MINUTES, (T0, at(150)), ()), (HOURS, (T0, at(120)), ())]
    parts = cover(at(7.5), at(170), spans)
    assert parts == [
        Part(at(7.5), at(8)),
        Part(at(8), at(60), MINUTES),
        Part(at(60), at(120), HOURS),
        Part(at(120), at(150), MINUTES),
        Part(at(150), at(170)),
    ]
    # aligned edges need no ticks; a range inside one minute needs no bar
    assert cover(at(60), at(120), spans) == [Part(at(60), at(120), HOURS)]
    assert cover(at(61.2), at(61.7), spans) == [Part(at(61.2), at(61.7))]


def test_what_no_rollup_holds_is_read_from_the_ticks() -> None:
    # before the spans, past the watermarks, an unbounded range, a roll-up without a span
    spans = [(HOURS, (at(60), at(180)), ()), (MINUTES, None, ())]
    assert cover(None, None, spans) == [Part(None, at(60)), Part(at(60), at(180), HOURS), Part(at(180), None)]
    assert cover(at(0), at(59), spans) == [Part(at(0), at(59))]
    assert cover(at(30), at(30), spans) == []
    assert cover(at(200), at(300), spans) == [Part(at(200), at(300))]


def test_a_late_bucket_is_answered_by_finer_bars_or_the_ticks_and_says_so() -> None:
    request = CoveredSelection.checked(SPEC, [HOURS, MINUTES], [], count=True, asked={})
    spans = [(T0, at(120)), (T0, at(150))]
    # a marked minute at 61: the hour 60-120 is late, the other minutes of it still serve
    parts = request.parts_of(at(0), at(150), spans, {"ticks_1min": [at(61)]})
    assert parts == [
        Part(at(0), at(60), HOURS),
        Part(at(60), at(61), MINUTES, late=True),
        Part(at(61), at(62), None, late=True),
        Part(at(62), at(120), MINUTES, late=True),
        Part(at(120), at(150), MINUTES),
    ]
    assert "late ticks marked there" in parts[2].describe()
    # a marked hour (its minute bars were redone, the hour not yet): minutes answer it
    assert request.parts_of(at(0), at(120), spans, {"ticks_1min_1h": [at(60)]}) == [
        Part(at(0), at(60), HOURS),
        Part(at(60), at(120), MINUTES, late=True),
    ]
    # marks outside the range, or two in one hour, change nothing else
    assert request.parts_of(at(0), at(60), spans, {"ticks_1min": [at(61), at(119)]}) == [Part(at(0), at(60), HOURS)]
    assert late_spans(HOURS, {"ticks_1min": [at(61), at(119)], "ticks_1min_1h": [at(60)]}) == [(at(60), at(120))]
    assert late_spans(MINUTES, {"ticks_1min": [at(61), at(62)]}) == [(at(61), at(63))]
    assert [r.name for r in request.layers] == ["ticks_1min_1h", "ticks_1min"]


MINUTE, HOUR = dt.timedelta(minutes=1), dt.timedelta(hours=1)
GARBAGE = {"open": 10**9, "high": 10**9, "low": -(10**9), "close": 10**9, "count": 1000, "volume": 10**6,
           "sum": 10**12, "m2": 1e20}  # fmt: skip


#: The strategies ``layers`` draws from, built once (not again for every example).
OFFSETS = st.tuples(st.integers(0, 239), st.sampled_from([0, 0, -1, 1, 30_000_000, 59_999_999]))
ROWS = st.lists(st.tuples(OFFSETS, st.integers(-50, 50), st.integers(0, 9)), min_size=0, max_size=40)
MINUTE_MARKS, HOUR_MARKS = st.lists(st.integers(0, 239), max_size=4), st.lists(st.integers(0, 3), max_size=1)
BOUND = st.one_of(st.none(), st.builds(lambda m, us: at(m) + dt.timedelta(microseconds=us), st.integers(-5, 250),
                                       st.sampled_from([0, 0, -1, 1, 1_000_000])))  # fmt: skip


@st.composite
def layers(draw: st.DrawFn) -> tuple[list[Tick], list[Any], dict[str, list[dt.datetime]], list[Any]]:
    """Ticks over four hours (many on minute and hour edges, 1 µs either side, some tied), the
    span each roll-up holds (or none), marked buckets of each, and a range (or open ends)."""
    rows = draw(ROWS)
    ticks = [Tick(f"t{i:03d}", at(m) + dt.timedelta(microseconds=us),
                  {"symbol": "AAA", "n": i, "price": {"micros": p}, "volume": v})
             for i, ((m, us), p, v) in enumerate(rows)]  # fmt: skip

    def span(step: int) -> Any:
        if draw(st.booleans()) and draw(st.booleans()):
            return None  # never run, or run before spans were kept
        first = draw(st.integers(0, 240 // step)) * step
        return (at(first), at(draw(st.integers(first // step + 1, 240 // step + 1)) * step))

    marks = {
        MINUTES.name: [at(m) for m in draw(MINUTE_MARKS)],
        HOURS.name: [at(60 * h) for h in draw(HOUR_MARKS)],
    }
    start, end = draw(BOUND), draw(BOUND)
    if start is not None and end is not None and end < start:
        start, end = end, start
    return ticks, [span(60), span(1)], marks, [start, end]


def stored(rollup: Rollup, ticks: list[Tick], held: Any, stale: list[Any]) -> list[Tick]:
    """``rollup``'s documents as a store may hold them: right inside ``held`` and outside the
    ``stale`` spans; garbage in every other bucket of the four hours (a bar that no answer may use)."""
    builder = BarBuilder(rollup.interval, by=("symbol",), price="price.micros", volume="volume")
    right = {bar.start: bar for bar in iter_bars(builder, sorted(ticks, key=lambda t: (t.timestamp, t.id)))}
    documents: list[dict[str, Any]] = []
    start = at(0)
    while start < at(245):
        good = held is not None and held[0] <= start < held[1] and not any(b <= start < e for b, e in stale)
        if good and start in right:
            documents.extend(rollup.records([right[start]]))
        elif not good:
            documents.append({"symbol": "AAA", "timestamp": start, **GARBAGE})
        start += rollup.interval
    return [Tick(f"{rollup.name}-{i}", d["timestamp"], d) for i, d in enumerate(documents)]


@settings(max_examples=200, deadline=None)
@given(layers())
def test_an_aggregate_from_rollups_equals_the_ticks_on_any_coverage_and_marks(
    drawn: tuple[list[Tick], list[Any], dict[str, list[dt.datetime]], list[Any]],
) -> None:
    """Whatever each roll-up holds (a span, none) and whichever buckets late ticks marked, the
    parts answer count, sum, min, max and std of the ticks in the range exactly (brute force):
    a bar outside its roll-up's span, or stale under a mark, is garbage here, so using one shows."""
    ticks, spans, marks, (start, end) = drawn
    request = CoveredSelection.checked(SPEC, [HOURS, MINUTES], [], count=True, asked={
        "sum": ("price.micros", "volume"), "min": ("price.micros",), "max": ("price.micros",),
        "std": ("price.micros",)})  # fmt: skip
    parts = request.parts_of(start, end, spans, marks)
    documents = {rollup.name: stored(rollup, ticks, span, late_spans(rollup, marks))
                 for rollup, span in zip(request.rollups, spans)}  # fmt: skip
    total = Total()
    for part in parts:
        source = ticks if part.rollup is None else documents[part.rollup.name]
        for tick in sorted(source, key=lambda t: (t.timestamp, t.id)):
            if (part.start is None or tick.timestamp >= part.start) and (part.end is None or tick.timestamp < part.end):
                total.add(request.bar_of(tick, part))
    got = request.result(total.bar, parts)
    inside = [t for t in ticks if (start is None or t.timestamp >= start) and (end is None or t.timestamp < end)]
    prices = [t.data["price"]["micros"] for t in inside]
    event(f"{sum(p.rollup is not None for p in parts)} bar part(s), {sum(p.late for p in parts)} late")
    assert got.count == len(inside)
    assert got.sum == {"price.micros": sum(prices), "volume": sum(t.data["volume"] for t in inside)}
    assert got.min == {"price.micros": min(prices, default=None)}
    assert got.max == {"price.micros": max(prices, default=None)}
    if len(prices) < 2:
        assert got.std == {"price.micros": None}
    else:
        assert got.std["price.micros"] == pytest.approx(statistics.stdev(prices), rel=1e-9, abs=1e-9)


def test_the_coverage_property_fails_when_a_bar_edge_moves_by_1us(monkeypatch: pytest.MonkeyPatch) -> None:
    """The split's bar edges 1 µs later (a range ending on an hour would take that hour's bar):
    the property above finds a range whose answer is then wrong. Ties cannot matter here: the
    aggregates do not depend on the order of the ticks."""
    start = covered.bar_start
    monkeypatch.setattr(covered, "bar_start", lambda when, step: start(when, step) + US)
    assert bites(test_an_aggregate_from_rollups_equals_the_ticks_on_any_coverage_and_marks, layers())


def test_a_rollup_knows_which_span_its_bars_cover() -> None:
    doc = MINUTES.watermark_document(at(90), at(10))
    assert MINUTES.coverage(doc) == (at(10), at(90))
    assert MINUTES.coverage(MINUTES.watermark_document(at(90))) is None  # written before since was kept
    assert MINUTES.coverage(None) is None
    # a run reaching the span makes it longer; one after a gap starts a new one; one wholly before keeps it
    assert MINUTES.covered_since(doc, at(0), at(20)) == at(0)
    assert MINUTES.covered_since(doc, at(90), at(120)) == at(10)
    assert MINUTES.covered_since(doc, at(95), at(120)) == at(95)
    assert MINUTES.covered_since(doc, at(0), at(5)) == at(10)
    assert MINUTES.covered_since(None, at(30), at(40)) == at(30)


def test_an_aggregate_from_rollups_refuses_what_the_bars_do_not_hold_by_name() -> None:
    def check(rollups: Any, where: Any = None, **asked: tuple[str, ...]) -> CoveredSelection:
        return CoveredSelection.checked(SPEC, rollups, normalize_where(where), count=True, asked=asked)

    assert check([HOURS, MINUTES], {"symbol": ["AAA", "BBB"]}, sum=("volume", "price.micros")).volume == "volume"
    cases = [
        ([], {}, "rollups= is empty"),
        ([MINUTES, MINUTES], {}, "names a roll-up twice"),
        ([Rollup(series(), collection="other_1min", by="symbol")], {}, None),  # the same collection: fine
        (
            [Rollup(SeriesSpec("quotes", shards=["a"]), by="symbol")],
            {},
            "holds bars of 'quotes', not this store's 'ticks'",
        ),
        ([MINUTES], {"avg": ("volume",)}, r"cannot take avg\(volume\) .*hold .price.micros. for avg"),
        ([MINUTES], {"min": ("n",)}, r"cannot take min\(n\)"),
        ([Rollup(SPEC, by="symbol", collection="ticks_m"), MINUTES], {}, "hold different fields"),
    ]
    for rollups, asked, error in cases:
        if error is None:
            check(rollups, **asked)
            continue
        with pytest.raises(QueryError, match=error):
            check(rollups, **asked)
    with pytest.raises(QueryError, match=r"exchange == 'X1' cannot be answered from bars \(ticks_1min is not by it\)"):
        check([MINUTES], {"exchange": "X1"})
    with pytest.raises(QueryError, match="nothing to aggregate"):
        CoveredSelection.checked(SPEC, [MINUTES], (), count=False, asked={})


# ------------------------------------------------------------------------------ on the emulator


def written(shards: int, seed: int) -> tuple[SeriesSpec, list[dict[str, Any]]]:
    rng = random.Random(seed)
    rows = []
    for n in range(900):
        rows.append(
            {
                "symbol": rng.choice(SYMBOLS),
                "exchange": rng.choice(["X1", "X2"]),
                "n": n,
                "timestamp": T0 + dt.timedelta(microseconds=rng.randrange(3 * 3600 * 10**6)),
                "price": {"micros": rng.randrange(10**11, 10**12)},
                "volume": rng.randrange(1, 50) * 100,
            }
        )
    return series(shards), rows


def oracle(rows: list[dict[str, Any]], start: dt.datetime, end: dt.datetime, symbols: list[str]) -> dict[str, Any]:
    hit = [r for r in rows if start <= r["timestamp"] < end and r["symbol"] in symbols]
    prices = pd.Series([r["price"]["micros"] for r in hit], dtype="int64")
    return {
        "count": len(hit),
        "sum(price.micros)": sum(r["price"]["micros"] for r in hit),
        "sum(volume)": sum(r["volume"] for r in hit),
        "avg(price.micros)": sum(r["price"]["micros"] for r in hit) / len(hit),
        "min(price.micros)": int(prices.min()),
        "max(price.micros)": int(prices.max()),
        "std(price.micros)": float(prices.std()),
    }


ASKED = {"sum": ["price.micros", "volume"], "avg": ["price.micros"], "min": ["price.micros"],
         "max": ["price.micros"], "std": ["price.micros"]}  # fmt: skip


@pytest.mark.parametrize("shards", [3, 40])
def test_aggregates_from_hour_and_minute_bars_equal_pandas_on_the_ticks(tsstore_emulator: Any, shards: int) -> None:
    """Minute bars to 2h30, hourly ones to 2h from them: a range from 0h07m13.5s to 2h50m reads
    hourly bars for 1h-2h, minute bars around them and ticks at the ends and past 2h30; every
    figure equals pandas' on the ticks (the spread to 1e-9), filtered by symbol or not, at a
    fraction of the reads of the ticks; the async store answers the same."""
    client = tsstore_emulator.client(database=f"covered-{shards}-{random.randrange(10**9)}")
    spec, rows = written(shards, seed=shards)
    minutes = Rollup(spec, interval="1min", by="symbol", volume="volume")
    hours = Rollup(minutes, interval="1h")
    store = TimeSeriesStore(client, spec, write_options=FAST)
    store.write(rows)
    assert store.rollup(minutes, until=at(150)).watermark == at(150)
    assert TimeSeriesStore(client, minutes.spec, write_options=FAST).rollup(hours, until=at(150)).watermark == at(120)
    start, end = at(7) + dt.timedelta(seconds=13.5), at(170)
    plan = store.explain_aggregate(start=start, end=end, rollups=[hours, minutes])
    assert [(p.start, p.end, p.rollup and p.rollup.name) for p in plan.parts] == [
        (start, at(8), None),
        (at(8), at(60), "ticks_1min"),
        (at(60), at(120), "ticks_1min_1h"),
        (at(120), at(150), "ticks_1min"),
        (at(150), end, None),
    ]
    assert "[2026-03-02T10:00:00Z, 2026-03-02T11:00:00Z) from ticks_1min_1h (1h bars)" in plan.describe()
    for symbols in (SYMBOLS, ["AAA"], ["AAA", "CCC"]):
        where = None if symbols == SYMBOLS else {"symbol": symbols if len(symbols) > 1 else symbols[0]}
        cost = ReadStats()
        got = store.aggregate(start=start, end=end, where=where, rollups=[minutes, hours], stats=cost, **ASKED)
        want = oracle(rows, start, end, symbols)
        figures = got.as_dict()
        assert figures.pop("std(price.micros)") == pytest.approx(want.pop("std(price.micros)"), rel=1e-9)
        assert figures == want
        assert len(got.sources) == 5
        assert store.count(start=start, end=end, where=where) == want["count"]
        read = store.iter_ticks(start=start, end=end, where=where, columns=["price.micros"])
        assert sum(1 for _ in read) == want["count"]  # min, max and std without roll-ups: every tick read
        assert cost.billed_reads < read.stats.billed_reads / 2, (cost.describe(), read.stats.describe())

    async def from_asyncio() -> Any:
        async with AsyncTimeSeriesStore(tsstore_emulator.async_client(database=database_id(client)), spec) as astore:
            return await astore.aggregate(start=start, end=end, rollups=[minutes, hours], **ASKED)

    assert asyncio.run(from_asyncio()) == store.aggregate(start=start, end=end, rollups=[minutes, hours], **ASKED)
    client.close()


def test_the_aggregate_command_answers_from_declared_rollups(tsstore_emulator: Any, tmp_path: Any) -> None:
    """``tsstore aggregate --rollup``: the figures pandas gives, where each part came from,
    ``--explain``; and what it refuses, by name."""
    (tmp_path / "decl.toml").write_text(
        '[[series]]\ncollection = "ticks"\nwrites_per_second = 1500\nkey_fields = ["symbol", "n"]\n'
        'shapes = [{ fields = ["symbol"], directions = ["desc", "asc"] }, "exchange"]\nmeasures = ["volume"]\n'
        '[[rollup]]\nsource = "ticks"\ninterval = "1min"\nby = ["symbol"]\nvolume = "volume"\n'
        '[[rollup]]\nsource = "ticks_1min"\ninterval = "1h"\n'
    )
    client = tsstore_emulator.client(database=f"covered-cli-{random.randrange(10**9)}")
    spec, rows = written(3, seed=7)
    minutes = Rollup(spec, interval="1min", by="symbol", volume="volume")
    store = TimeSeriesStore(client, spec, write_options=FAST)
    store.write(rows[:300])
    store.rollup(minutes, until=at(150))
    env = {"FIRESTORE_EMULATOR_HOST": tsstore_emulator.address}

    def run(*args: str) -> Any:
        common = ["--spec", "decl.toml", "--database", database_id(client)]
        return tsstore("aggregate", *common, "--start", at(30.5).isoformat(), "--end", at(125).isoformat(), *args,
                       cwd=tmp_path, env=env)  # fmt: skip

    done = run("--rollup", "all", "--where", "symbol=AAA", "--sum", "volume", "--std", "price.micros", "--json")
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    want = oracle(rows[:300], at(30.5), at(125), ["AAA"])
    assert answer.pop("std(price.micros)") == pytest.approx(want["std(price.micros)"], rel=1e-9)
    assert answer == {
        "count": want["count"],
        "sum(volume)": want["sum(volume)"],
        "sources": [
            "[2026-03-02T09:30:30Z, 2026-03-02T09:31:00Z) from ticks",
            "[2026-03-02T09:31:00Z, 2026-03-02T11:05:00Z) from ticks_1min (1min bars)",
        ],  # the hourly roll-up has not run: the minute bars answer
    }
    told = run("--rollup", "ticks_1min", "--rollup", "ticks_1min_1h", "--explain")
    assert told.returncode == 0, told.stderr
    assert told.stdout.splitlines() == [
        "ticks: 2 parts, oldest first",
        "  [2026-03-02T09:30:30Z, 2026-03-02T09:31:00Z) from ticks",
        "  [2026-03-02T09:31:00Z, 2026-03-02T11:05:00Z) from ticks_1min (1min bars)",
    ]
    refusals = {
        ("--min", "price.micros"): "--min come from stored roll-ups (Firestore aggregates only count, sum and avg)",
        ("--rollup", "nope"): "no roll-up 'nope' of 'ticks' is declared; declared: ticks_1min, ticks_1min_1h (or all)",
        ("--rollup", "all", "--where", "exchange=X1"): "exchange == 'X1' cannot be answered from bars",
        ("--explain",): "--explain says which roll-up answers which part of the range; give --rollup",
    }
    for args, message in refusals.items():
        refused = run(*args)
        assert refused.returncode == 2 and message in refused.stderr and "Traceback" not in refused.stderr, refused
    client.close()
