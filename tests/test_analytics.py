"""Analytics: aggregates combined exactly across shard chunks (checked against pandas on what
was written, at 3, 40 and 90 shards), and the arithmetic and declarations behind them without
Firestore."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import math
import os
import random
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pandas as pd
import pytest

from tests.cli import Ran, tsstore
from tests.shared import EMULATOR_MODES, MEMORY, MODES, NATIVE, SYMBOLS, T0, async_twin, cli_env, database_of, mode_client
from tests.shared import oracle_bars
from tests.shared import spec, ticks
from tsstore import (
    AsyncTimeSeriesStore,
    ConfigError,
    QueryError,
    SeriesSpec,
    SpecError,
    StateError,
    TimeSeriesStore,
)
from tsstore.analytics.aggregate import MAX_AGGREGATIONS, AggregateSelection
from tsstore.analytics.bars import Bar, BarBuilder, bar_start, iter_bars
from tsstore.analytics.buckets import to_interval
from tsstore.analytics.rollup import Rollup, RollupWindow, rollup_window
from tsstore.declaration import load_declaration, load_specs
from tsstore.dswire import is_datastore_client
from tsstore.indexes.build import declared_indexes
from tsstore.read.cost import ReadStats
from tsstore.ticks import Tick
from tsstore.times import EARLIEST, interval_label
from tsstore.wire import database_id
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

UTC = dt.timezone.utc
FAST = EMULATOR_WRITE_OPTIONS  # no ramp, no ceiling: the emulator is the tests' own


def test_each_chunk_is_asked_for_its_count_and_each_measure_in_requests_firestore_accepts() -> None:
    s = spec("t", 3)
    request = AggregateSelection.checked(s, sum=["volume", "price.micros"], avg=["price.micros"])
    requests = request.requests()
    assert [measure for measure, _ in requests] == [None, "volume", "price.micros"]
    assert all(len(asks) <= MAX_AGGREGATIONS for _, asks in requests)
    assert [kind for kind, _, _ in requests[2][1]] == ["count", "sum", "avg"]
    assert [m for m, _ in AggregateSelection.checked(s, count=False, avg=["volume"]).requests()] == ["volume"]


def test_chunks_combine_exactly_not_as_an_average_of_averages() -> None:
    s = spec("t", 3)
    request = AggregateSelection.checked(s, sum=["volume"], avg=["volume", "price.micros"])
    big = 2**62  # beyond a float's 53 bits: the sum must stay an integer
    chunks = [
        # 3 ticks, all holding volume; price.micros on 2 of them
        {"count": 3, "count_0": 3, "sum_0": big + 1, "avg_0": (big + 1) / 3, "count_1": 2, "sum_1": 10, "avg_1": 5.0},
        # 5 ticks, 4 hold volume of which one is a string (avg skips it)
        {"count": 5, "count_0": 4, "sum_0": 30, "avg_0": 10.0, "count_1": 0, "sum_1": 0, "avg_1": None},
        {"count": 0, "count_0": 0, "sum_0": 0, "avg_0": None, "count_1": 0, "sum_1": 0, "avg_1": None},
    ]
    result = request.combine(chunks)
    assert result.count == 8
    assert result.sum["volume"] == big + 31 and isinstance(result.sum["volume"], int)
    assert result.avg["volume"] == (big + 31) / 6  # 3 + 3 numbers, not (avg_a + avg_b) / 2
    assert result.avg["price.micros"] == 5.0
    empty = request.combine([{"count": 0.0, "count_0": 0, "sum_0": 0, "avg_0": None}])
    assert (empty.count, empty.sum["volume"], empty.avg["volume"]) == (0, 0, None)
    assert result.as_dict() == {
        "count": 8,
        "sum(volume)": big + 31,
        "avg(volume)": (big + 31) / 6,
        "avg(price.micros)": 5.0,
    }


def test_a_nan_measure_gives_nan_sums_and_averages_not_an_exception(tsstore_emulator: Any) -> None:
    """A NaN the writer stored in a measure: Firestore (and the emulator) answer its chunk's
    sum and avg as NaN; combined, sum and avg are NaN and the count is exact (this raised
    ``ValueError: cannot convert float NaN to integer``)."""
    request = AggregateSelection.checked(spec("t", 3), sum=["volume"], avg=["volume"])
    nan = float("nan")
    chunks = [{"count": 2, "count_0": 2, "sum_0": nan, "avg_0": nan},
              {"count": 1, "count_0": 1, "sum_0": 5, "avg_0": 5.0}]  # fmt: skip
    pure = request.combine(chunks)
    assert pure.count == 3 and math.isnan(pure.sum["volume"]) and math.isnan(pure.avg["volume"])  # type: ignore[arg-type]
    client = tsstore_emulator.client(database=f"nan-{random.randrange(10**9)}")
    store = TimeSeriesStore(client, spec("ticks", 3), write_options=FAST)
    store.write([{"symbol": "AAA", "n": k, "timestamp": T0 + dt.timedelta(seconds=k), "volume": v}
                 for k, v in enumerate([100, nan, 300])])  # fmt: skip
    got = store.aggregate(sum=["volume"], avg=["volume"])
    assert got.count == 3 and math.isnan(got.sum["volume"]) and math.isnan(got.avg["volume"])  # type: ignore[arg-type]
    clean = store.aggregate(where={"symbol": "AAA"}, start=T0, end=T0 + dt.timedelta(seconds=1), avg=["volume"])
    assert (clean.count, clean.avg["volume"]) == (1, 100.0)
    client.close()


def test_aggregates_refuse_what_is_not_a_measure_by_name() -> None:
    s = spec("t", 3)
    with pytest.raises(QueryError, match=r"'exchange': it is not a measure of 't' \(measures: price.micros, volume\)"):
        AggregateSelection.checked(s, sum=["exchange"])
    with pytest.raises(QueryError, match="nothing to aggregate"):
        AggregateSelection.checked(s, count=False)
    with pytest.raises(QueryError, match="avg names a field twice"):
        AggregateSelection.checked(s, avg=["volume", "volume"])
    with pytest.raises(SpecError, match="measure 'symbol' is declared string; a measure is Int64 or Float64"):
        SeriesSpec("t", columns={"symbol": "string"}, measures=["symbol"])
    with pytest.raises(SpecError, match="measures .* other than the timestamp and shard"):
        SeriesSpec("t", measures=["timestamp"])


def test_each_measure_gets_one_index_per_shape_ordered_after_the_timestamp() -> None:
    s = spec("t", 3)
    measured = [i for i in declared_indexes(s) if len(i.fields) > 2 and i.fields[-1].field_path in s.measures]
    assert len(measured) == len(s.measures) * len(s.all_shapes())
    described = {i.describe() for i in measured}
    assert "t (shard DESC, symbol ASC, timestamp ASC, volume ASC)" in described  # symbol is served oldest first
    assert "t (shard DESC, exchange ASC, timestamp DESC, volume DESC)" in described  # exchange newest first only


# ------------------------------------------------------------------------------ on the emulator


def oracle(rows: list[dict[str, Any]], **filters: Any) -> dict[str, Any]:
    frame = pd.DataFrame(
        {
            "symbol": [r["symbol"] for r in rows],
            "exchange": [r["exchange"] for r in rows],
            "timestamp": [r["timestamp"] for r in rows],
            "micros": [r["price"]["micros"] for r in rows],
            "volume": pd.array([r.get("volume") for r in rows], dtype="Int64"),
        }
    )
    keep = pd.Series(True, index=frame.index)
    for field in ("symbol", "exchange"):
        if field in filters:
            values = filters[field] if isinstance(filters[field], list) else [filters[field]]
            keep &= frame[field].isin(values)
    if "start" in filters:
        keep &= frame["timestamp"] >= filters["start"]
    if "end" in filters:
        keep &= frame["timestamp"] < filters["end"]
    hit = frame[keep]
    micros = [int(v) for v in hit["micros"]]
    volumes = [int(v) for v in hit["volume"].dropna()]
    return {
        "count": len(hit),
        "sum(price.micros)": sum(micros),
        "avg(price.micros)": sum(micros) / len(micros) if micros else None,
        "sum(volume)": sum(volumes),
        "avg(volume)": sum(volumes) / len(volumes) if volumes else None,
    }


@pytest.fixture(scope="module", params=MODES)
def stores(request: pytest.FixtureRequest, uses_emulator: None) -> Iterator[dict[int, tuple[Any, list[Any]]]]:
    """The same 200 ticks at 3, 40 and 90 shard values (one, two and three chunks), in each
    database mode."""
    client = mode_client(request, request.param, f"analytics-{random.randrange(10**9)}")
    out = {}
    for shards in (3, 40, 90):
        store = TimeSeriesStore(client, spec(f"agg{shards}", shards), write_options=FAST)
        rows = ticks(200, seed=shards)
        store.write(rows)
        out[shards] = (store, rows)
    yield out
    client.close()


CASES = [
    {},
    {"symbol": "AAA"},
    {"symbol": ["AAA", "CCC"], "start": T0 + dt.timedelta(minutes=20), "end": T0 + dt.timedelta(minutes=95)},
    {"exchange": "X2", "end": T0 + dt.timedelta(minutes=30)},
    {"symbol": "BBB", "start": T0 + dt.timedelta(hours=5)},  # empty
]


#: One chunk (3 shards) and three (90); the 40-shard store's two chunks are combined by the same code,
#: checked against pandas by the async and command tests below.
@pytest.mark.parametrize("shards", [3, 90])
def test_aggregates_equal_pandas_on_what_was_written(stores: dict[int, Any], shards: int) -> None:
    store, rows = stores[shards]
    for case in CASES:
        where = {k: v for k, v in case.items() if k in ("symbol", "exchange")}
        bounds = {k: v for k, v in case.items() if k in ("start", "end")}
        stats = ReadStats()
        got = store.aggregate(
            where=where, sum=["price.micros", "volume"], avg=["price.micros", "volume"], stats=stats, **bounds
        )
        want = oracle(rows, **case)
        answer = got.as_dict()
        for key in ("count", "sum(price.micros)", "sum(volume)"):
            assert answer[key] == want[key] and isinstance(answer[key], int), (shards, case, key)
        for key in ("avg(price.micros)", "avg(volume)"):
            assert (answer[key] is None) == (want[key] is None), (shards, case, key)
            if want[key] is not None:
                assert answer[key] == pytest.approx(want[key], rel=1e-12), (shards, case, key)
        chunks = len(store.plan(where=where, **bounds).chunks)
        # Per chunk one request for the count and one per measure, and at most one read of the
        # server's time for their one snapshot (none when an answer of the last seconds told it).
        assert stats.queries == chunks * 3 + stats.snapshot_reads and stats.snapshot_reads <= 1
        assert stats.documents == 0 and stats.billed_reads <= stats.queries + 3 * want["count"] // 1000 + 3


def test_the_async_store_aggregates_the_same(stores: dict[int, Any], request: pytest.FixtureRequest) -> None:
    store, rows = stores[40]

    async def run() -> Any:
        async with async_twin(store, request) as client:
            return await AsyncTimeSeriesStore(client, store.spec).aggregate(
                where={"symbol": ["AAA", "BBB"]}, avg=["volume"], count=False
            )

    got = asyncio.run(run())
    want = oracle(rows, symbol=["AAA", "BBB"])
    assert got.count is None and got.sum == {} and got.avg["volume"] == pytest.approx(want["avg(volume)"], rel=1e-12)


@pytest.mark.parametrize("stores", EMULATOR_MODES, indirect=True)  # a command: on the emulator
def test_the_aggregate_command(stores: dict[int, Any], request: pytest.FixtureRequest, tmp_path: Any) -> None:

    store, rows = stores[40]
    (tmp_path / "spec.toml").write_text(
        '[[series]]\ncollection = "agg40"\nwrites_per_second = 20000\nkey_fields = ["symbol", "n"]\n'
        'shapes = [{ fields = ["symbol"], directions = ["desc", "asc"] }, "exchange", ["exchange", "symbol"]]\n'
        'measures = ["price.micros", "volume"]\n'
    )
    env = cli_env(request, "datastore" if is_datastore_client(store.client) else "native")
    common = ["--spec", "spec.toml", "--database", database_of(store)]

    def run(*args: str) -> Ran:
        return tsstore("aggregate", *common, *args, cwd=tmp_path, env=env)

    done = run(
        "--where", "symbol=AAA", "--where", "symbol=DDD", "--sum", "volume", "--avg", "volume", "--json", "--stats"
    )
    assert done.returncode == 0, done.stderr
    want = oracle(rows, symbol=["AAA", "DDD"])
    assert json.loads(done.stdout) == {k: want[k] for k in ("count", "sum(volume)", "avg(volume)")}
    assert "billed reads" in done.stderr
    lines = run("--end", T0.isoformat(), "--avg", "price.micros")
    assert lines.returncode == 0 and lines.stdout.split() == ["count", "0", "avg(price.micros)", "none"], lines.stderr
    refused = run("--sum", "exchange")
    assert refused.returncode != 0 and "'exchange': it is not a measure" in refused.stderr


def newest_by_oracle(rows: list[dict[str, Any]], symbol: str, **filters: Any) -> dict[str, Any] | None:
    hits = [
        r
        for r in rows
        if r["symbol"] == symbol
        and all(r[k] == v for k, v in filters.items() if k != "before")
        and ("before" not in filters or r["timestamp"] < filters["before"])
    ]
    return max(hits, key=lambda r: r["timestamp"], default=None)


@pytest.mark.parametrize("shards", [3, 90])
def test_latest_is_the_newest_tick_of_each_series_missing_ones_included(stores: dict[int, Any], shards: int) -> None:
    store, rows = stores[shards]
    # Series with the same newest timestamp twice would have no single answer: the oracle
    # below compares timestamps and the id order decides ties (the engine's order).
    values = ["DDD", "AAA", "ZZZ", "BBB"]  # ZZZ was never written
    for filters in ({}, {"exchange": "X1"}, {"before": T0 + dt.timedelta(minutes=10)}):
        where = {k: v for k, v in filters.items() if k != "before"}
        stats = ReadStats()
        frame = store.latest(by="symbol", values=values, where=where, before=filters.get("before"), stats=stats)
        assert list(frame.index) == values and frame.index.name == "symbol"
        for symbol in values:
            want = newest_by_oracle(rows, symbol, **filters)
            if want is None:
                assert pd.isna(frame.loc[symbol, "timestamp"]) and pd.isna(frame.loc[symbol, "n"])
            else:
                assert frame.loc[symbol, "timestamp"] == want["timestamp"]
                same_time = [r["n"] for r in rows if r["symbol"] == symbol and r["timestamp"] == want["timestamp"]]
                assert frame.loc[symbol, "n"] in same_time
        per_series = len(store.plan(where={**where, "symbol": "AAA"}).chunks)
        assert stats.queries == len(values) * per_series + stats.snapshot_reads and stats.snapshot_reads <= 1
        assert stats.documents <= len(values) * per_series


def test_latest_with_a_series_in_only_some_shards_and_bad_requests(
    stores: dict[int, Any], request: pytest.FixtureRequest
) -> None:
    store, _ = stores[40]
    late = T0 + dt.timedelta(days=1)
    store.write([{"symbol": "ONE", "n": 10**6, "timestamp": late, "exchange": "X1", "volume": 1}])  # one shard only
    frame = store.latest(by="symbol", values=["ONE"], columns=["volume"])
    assert frame.loc["ONE", "timestamp"] == late and list(frame.columns) == ["timestamp", "volume"]
    with pytest.raises(QueryError, match="values is empty"):
        store.latest(by="symbol", values=[])
    with pytest.raises(QueryError, match="'symbol' is the series key here"):
        store.latest(by="symbol", values=["AAA"], where={"symbol": "BBB"})
    with pytest.raises(QueryError, match=r"latest\(\) got unknown option\(s\) start; it takes by, values, where"):
        store.latest(by="symbol", values=["AAA"], start=T0)  # an OptionError: a QueryError and a TypeError
    with pytest.raises(QueryError, match="instrumentType"):
        store.latest(by="instrumentType", values=["x"])  # not a declared shape

    async def run() -> Any:
        async with async_twin(store, request) as client:
            return await AsyncTimeSeriesStore(client, store.spec).latest(by="symbol", values=["ONE", "NONE"])

    got = asyncio.run(run())
    assert got.loc["ONE", "timestamp"] == late and pd.isna(got.loc["NONE", "timestamp"])


@pytest.mark.parametrize("stores", EMULATOR_MODES, indirect=True)  # a command: on the emulator
def test_the_latest_command(stores: dict[int, Any], request: pytest.FixtureRequest, tmp_path: Any) -> None:

    store, rows = stores[3]
    (tmp_path / "spec.toml").write_text(
        '[[series]]\ncollection = "agg3"\nshards = ["s0", "s1", "s2"]\nkey_fields = ["symbol", "n"]\n'
        'shapes = [{ fields = ["symbol"], directions = ["desc", "asc"] }, "exchange", ["exchange", "symbol"]]\n'
    )
    env = cli_env(request, "datastore" if is_datastore_client(store.client) else "native")
    done = tsstore(
        "latest", "--spec", "spec.toml", "--database", database_of(store), "--by", "symbol", "CCC", "NOPE",
        "--where", "exchange=X2", "--format", "jsonl", "--stats", cwd=tmp_path, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    ccc, nope = (json.loads(line) for line in done.stdout.splitlines())
    want = newest_by_oracle(rows, "CCC", exchange="X2")
    assert (
        want is not None and ccc["symbol"] == "CCC" and dt.datetime.fromisoformat(ccc["timestamp"]) == want["timestamp"]
    )
    assert nope == {"symbol": "NOPE"} and "billed reads" in done.stderr


# ------------------------------------------------------------------------------ bars


def test_bars_open_at_boundaries_close_when_time_moves_on_and_skip_what_has_no_price() -> None:

    minute = to_interval("1min")
    assert bar_start(T0 + dt.timedelta(seconds=59, microseconds=999_999), minute) == T0
    assert bar_start(T0 + dt.timedelta(minutes=1), minute) == T0 + dt.timedelta(minutes=1)

    def tick(i: str, seconds: float, price: Any, symbol: str = "A", volume: int = 1) -> Tick:
        return Tick(i, T0 + dt.timedelta(seconds=seconds), {"s": symbol, "p": {"m": price}, "v": volume})

    ticks = [
        tick("a", 0, 10), tick("b", 0, 12, "B"), tick("c", 30, 8), tick("d", 59.5, None),
        tick("e", 60, 11), tick("f", 60, 9, volume=5),  # two ticks on the boundary: both open the next bar
    ]  # fmt: skip
    builder = BarBuilder(minute, by=["s"], price="p.m", volume="v")
    first = builder.add(ticks[0])
    assert first == [] and [b for t in ticks[1:4] for b in builder.add(t)] == []
    closed = builder.add(ticks[4])
    assert [(b.key, b.open, b.high, b.low, b.close, b.count, b.volume) for b in closed] == [
        (("A",), 10, 10, 8, 8, 2, 2),
        (("B",), 12, 12, 12, 12, 1, 1),
    ]
    builder.add(ticks[5])
    [last] = builder.rest()
    assert (last.start, last.open, last.close, last.low, last.volume, builder.skipped) == (
        T0 + dt.timedelta(minutes=1), 11, 9, 9, 6, 1,
    )  # fmt: skip
    newest_first = BarBuilder(minute, by=["s"], price="p.m", descending=True)
    bars = list(iter_bars(newest_first, reversed([t for t in ticks if t.data["s"] == "A"])))
    assert [(b.open, b.close, b.count) for b in bars] == [(11, 9, 2), (10, 8, 2)]
    with pytest.raises(QueryError, match="out of time order"):
        out_of_order = BarBuilder(minute, price="p.m")
        out_of_order.add(ticks[4])
        out_of_order.add(ticks[0])
    with pytest.raises(QueryError, match="interval '0s' is not positive"):
        to_interval("0s")
    with pytest.raises(QueryError, match="is not a duration"):
        to_interval("a while")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shards", [3, 40])
def test_bars_equal_pandas_resample_ohlc_on_the_same_ticks(request: pytest.FixtureRequest, uses_emulator: None,
                                                           mode: str, shards: int) -> None:  # fmt: skip
    client = mode_client(request, mode, f"bars-{random.randrange(10**9)}")
    store = TimeSeriesStore(client, spec(f"bars{shards}", shards), write_options=FAST)
    rows = ticks(400, seed=100 + shards)
    for k, row in enumerate(rows[:150]):  # ties: many ticks exactly on minute boundaries, some at one instant
        row["timestamp"] = T0 + dt.timedelta(minutes=k % 40)
    ids = store.write(rows).ids
    start, end = T0 + dt.timedelta(minutes=3), T0 + dt.timedelta(minutes=95)
    for interval in ("1min", "15min"):
        stats = ReadStats()
        got = store.bars(
            interval=interval, by="symbol", price="price.micros", volume="volume", start=start, end=end, stats=stats
        )
        want = oracle_bars(rows, ids, interval, start, end)
        assert got.index.names == ["symbol", "timestamp"] and len(got) == len(want) > 0
        assert list(got.index) == list(want.index)
        for column in ("open", "high", "low", "close", "count", "volume"):
            assert [int(v) for v in got[column]] == [int(v) for v in want[column]], (interval, column)
        assert stats.documents == int(want["count"].sum())  # one read per tick in range, nothing else
    one = store.bars(interval="1h", price="price.micros", where={"symbol": "AAA"}, start=start, end=end)
    assert one.index.name == "timestamp" and list(one.columns) == ["open", "high", "low", "close", "count"]
    assert str(one.index.dtype) == "datetime64[us, UTC]" and str(one["open"].dtype) == "Int64"
    empty = store.bars(interval="1min", by="symbol", price="price.micros", start=end + dt.timedelta(days=9))
    assert empty.empty and empty.index.names == ["symbol", "timestamp"]
    client.close()


# ------------------------------------------------------------------------------ pictures


def test_charts_of_bars_and_ticks_hold_one_trace_per_series(tsstore_emulator: Any, tmp_path: Any) -> None:

    client = tsstore_emulator.client(database=f"plot-{random.randrange(10**9)}")
    store = TimeSeriesStore(client, spec("plots", 3), write_options=FAST)
    store.write(ticks(200, seed=5))
    (tmp_path / "spec.toml").write_text(
        '[[series]]\ncollection = "plots"\nshards = ["s0", "s1", "s2"]\nkey_fields = ["symbol", "n"]\n'
        'shapes = [{ fields = ["symbol"], directions = ["desc", "asc"] }]\n'
    )
    env = dict(os.environ, FIRESTORE_EMULATOR_HOST=tsstore_emulator.address)
    common = ["--spec", "spec.toml", "--database", client._database]

    def run(*args: str) -> Ran:
        return tsstore(*args, *common, cwd=tmp_path, env=env)

    def series_in(svg: str) -> set[str]:
        return set(re.findall(r'id="series:([^"]+)"', svg))

    done = run("bars", "--price", "price.micros", "--interval", "15min", "--by", "symbol", "--volume", "volume",
               "--plot", "bars.svg", "--where", "symbol=AAA", "--where", "symbol=BBB",
               "--where", "symbol=CCC")  # fmt: skip
    assert done.returncode == 0, done.stderr
    svg = (tmp_path / "bars.svg").read_text()
    assert series_in(svg) == {"AAA", "BBB", "CCC"} and len(svg) > 20_000
    assert "drew 3 series of bars to bars.svg" in done.stderr
    done = run("bars", "--price", "price.micros", "--interval", "1h", "--plot", "one.png", "--format", "csv")
    png = (tmp_path / "one.png").read_bytes()
    assert done.returncode == 0 and png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 10_000, done.stderr
    assert done.stdout.splitlines()[0] == "timestamp,open,high,low,close,count"
    done = run(
        "query", "--plot", "lines.svg", "--plot-by", "symbol", "--columns", "symbol,price.micros", "--format", "csv"
    )
    assert done.returncode == 0, done.stderr
    assert series_in((tmp_path / "lines.svg").read_text()) == set(SYMBOLS) and "drew 4 series" in done.stderr
    refused = run("bars", "--price", "price.micros", "--interval", "1h", "--plot", "chart.html")
    assert refused.returncode == 2 and "chart.html: give a .png, .svg, .pdf file" in refused.stderr
    client.close()


def test_without_matplotlib_a_chart_says_how_to_get_it(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # matplotlib made unimportable in this process for this test only (imported already or not)
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")] + ["matplotlib"]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.chdir(tmp_path)
    from tsstore.analytics.plot import PlotError, plot_lines

    frame = pd.DataFrame({"p": [1, 2]}, index=pd.date_range("2026-01-01", periods=2, tz="UTC"))
    with pytest.raises(PlotError) as refused:
        plot_lines(frame, "x.png", y="p")
    assert str(refused.value) == "charts need matplotlib: pip install 'tsstore[plot]'"
    assert not (tmp_path / "x.png").exists()


# ------------------------------------------------------------------------------ roll-ups


ROLLUP_SOURCE = SeriesSpec(
    "ticks", columns={"symbol": "string", "price.micros": "Int64", "size": "string"}, expire_after=dt.timedelta(hours=2)
)


@pytest.mark.parametrize(
    ("source", "options", "message"),
    [
        ("ticks", {}, r"a roll-up's source must be a SeriesSpec or a Rollup, got str"),
        (ROLLUP_SOURCE, {"interval": "soon"}, r"interval 'soon' is not a duration"),
        (ROLLUP_SOURCE, {"interval": "2h"}, r"roll-up interval '2h' is not shorter than 'ticks'.s expire_after"),
        (ROLLUP_SOURCE, {"by": "open"}, r"roll-up by fields \['open'\] clash with the bar's own fields"),
        (ROLLUP_SOURCE, {"by": "bad field"}, r"roll-up by field 'bad field' is not a valid field path"),
        (ROLLUP_SOURCE, {"price": "symbol"}, r"roll-up price 'symbol' is declared string; it must be Int64"),
        (ROLLUP_SOURCE, {"volume": "size"}, r"roll-up volume 'size' is declared string; it must be Int64"),
        (ROLLUP_SOURCE, {"collection": "ticks"}, r"cannot be stored in its source collection 'ticks'"),
        (ROLLUP_SOURCE, {"access": {"read": "public", "create": "signed-in"}}, r"written by the server only"),
        (Rollup(ROLLUP_SOURCE, interval="15min", by="symbol"), {"interval": "20min"}, r"a multiple of the 15min"),
        (Rollup(ROLLUP_SOURCE, by="symbol"), {"interval": "1h", "by": "size"}, r"is by its fields \['symbol'\], not"),
    ],
)
def test_each_check_of_a_rollup_refuses_with_what_is_allowed(
    source: Any, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        Rollup(source, **options)


def _at(hhmm: str) -> dt.datetime:
    hours, minutes = map(int, hhmm.split(":"))
    return dt.datetime(2024, 3, 1, hours, minutes, tzinfo=UTC)


MINUTES = Rollup(SeriesSpec("ticks"), interval="1min", by="symbol")
HOURS = Rollup(SeriesSpec("ticks"), interval="1h", by="symbol")
HOURS_OF_MINUTES = Rollup(MINUTES, interval="1h")


def _minute_mark(watermark: str, since: str | None = None) -> dict[str, Any]:
    return MINUTES.watermark_document(_at(watermark), None if since is None else _at(since))


@pytest.mark.parametrize(
    ("rollup", "given", "window"),
    [
        # the first run starts at the oldest tick, aligned down (its bars whole from the earliest
        # time: a tick before it comes late, marked); ends at now, aligned down
        (HOURS, {"oldest": "06:10"}, RollupWindow(_at("06:00"), _at("09:00"), whole_from=EARLIEST)),
        (HOURS, {"since": "06:30", "oldest": "05:00"}, RollupWindow(_at("06:00"), _at("09:00"))),
        (HOURS, {"watermark": "08:00"}, RollupWindow(_at("08:00"), _at("09:00"))),
        (HOURS, {"watermark": "09:00"}, RollupWindow(_at("09:00"), _at("09:00"))),  # nothing closed yet
        (HOURS, {"watermark": "06:00", "until": "08:30"}, RollupWindow(_at("06:00"), _at("08:00"))),
        (HOURS, {"since": "07:00", "watermark": "10:00"}, RollupWindow(_at("07:00"), _at("09:00"))),
        (HOURS, {}, RollupWindow(None, _at("09:00"))),  # no tick at all
        # bars of bars: no further than the finer roll-up wrote, never a bar it holds only in part
        (HOURS_OF_MINUTES, {"oldest": "06:30"}, None),  # the minute roll-up has not run
        (HOURS_OF_MINUTES, {"finer": ("08:30", "06:30"), "oldest": "06:30"},
         RollupWindow(_at("06:00"), _at("08:00"), _at("07:00"), EARLIEST)),  # fmt: skip
        (HOURS_OF_MINUTES, {"finer": ("08:30", None), "since": "05:00"}, RollupWindow(_at("05:00"), _at("08:00"))),
    ],
)
def test_a_rollup_window_is_decided_from_the_times_alone(
    rollup: Rollup, given: dict[str, Any], window: RollupWindow | None
) -> None:
    times = {k: _at(v) for k, v in given.items() if k in ("since", "until", "watermark", "oldest")}
    finer = _minute_mark(*given["finer"]) if "finer" in given else None
    got = rollup_window(rollup, now=_at("09:20"), since=times.get("since"), until=times.get("until"),
                        watermark=times.get("watermark"), finer=finer, oldest=times.get("oldest"))  # fmt: skip
    assert got == window
    if got is not None:
        assert got.fresh == (got.start is not None and got.start < got.end)


def test_the_watermark_after_a_run_never_moves_back_nor_claims_a_partial_bar() -> None:
    partial = RollupWindow(_at("06:00"), _at("08:00"), _at("07:00"))  # minutes held from 06:30
    assert partial.watermark_after(HOURS_OF_MINUTES, None, None) == HOURS_OF_MINUTES.watermark_document(
        _at("08:00"), _at("07:00")
    )
    rerun = RollupWindow(_at("06:00"), _at("08:00"))  # a re-run below a later watermark
    stored = HOURS.watermark_document(_at("10:00"), _at("07:00"))
    assert rerun.watermark_after(HOURS, stored, _at("10:00")) == HOURS.watermark_document(_at("10:00"), _at("06:00"))
    assert RollupWindow(_at("09:00"), _at("09:00")).watermark_after(HOURS, stored, _at("09:00")) is None
    assert RollupWindow(None, _at("09:00")).watermark_after(HOURS, None, None) is None


def test_a_rollup_derives_its_own_spec_and_documents() -> None:

    source = SeriesSpec("ticks", columns={"symbol": "string", "price.micros": "Int64"}, shapes=["symbol"])
    bars = Rollup(source, interval="15min", by="symbol", volume="volume")
    assert bars.name == "ticks_15min" and bars.spec.key_fields == ("symbol",) and bars.spec.shards == ("s0",)
    assert bars.spec.on_duplicate == "replace" and bars.spec.measures == ("count", "volume")
    assert dict(bars.spec.columns) == {"symbol": "string", "open": "Int64", "high": "Int64", "low": "Int64",
                                       "close": "Int64", "sum": "Int64", "count": "Int64", "m2": "Float64",
                                       "open_at": "datetime", "close_at": "datetime"}  # fmt: skip
    bar = Bar(("AAA",), T0, 1, 3, 1, 2, 2, 500)
    [record] = bars.records([bar])
    assert record == {"symbol": "AAA", "timestamp": T0, "open": 1, "high": 3, "low": 1, "close": 2, "count": 2,
                      "volume": 500}  # fmt: skip
    nested = Rollup(source, by=["price.currency"], collection="by_currency")
    assert next(nested.records([Bar(("EUR",), T0, 1, 1, 1, 1)]))["price"] == {"currency": "EUR"}
    assert [interval_label(dt.timedelta(seconds=s)) for s in (60, 900, 3600, 86400, 90)] == [
        "1min", "15min", "1h", "1d", "90s",
    ]  # fmt: skip
    with pytest.raises(SpecError, match="clash with the bar's own fields"):
        Rollup(source, by="open")
    with pytest.raises(SpecError, match="interval 'soon' is not a duration"):
        Rollup(source, interval="soon")
    with pytest.raises(SpecError, match="roll-up price 'symbol' is declared string"):
        Rollup(source, price="symbol")
    with pytest.raises(StateError, match="watermark of roll-up 'ticks_15min' was written for source 'ticks' every 60"):
        bars.check_watermark({"source": "ticks", "interval_seconds": 60.0, "watermark": T0})
    later = T0 + dt.timedelta(minutes=3)
    [kept] = bars.records([Bar(("AAA",), T0, 1, 3, 1, 2, 2, 500, 3, 0.5, T0, later)])
    assert (kept["sum"], kept["m2"], kept["open_at"], kept["close_at"]) == (3, 0.5, T0, later)
    # bars of bars: by the finer roll-up's fields, every multiple of its interval
    hourly = Rollup(bars, interval="1h")
    assert (hourly.finer, hourly.source, hourly.by, hourly.volume, hourly.name) == (
        bars, bars.spec, ("symbol",), "volume", "ticks_15min_1h",
    )  # fmt: skip
    assert dict(hourly.spec.columns) == dict(bars.spec.columns)
    with pytest.raises(SpecError, match="must be a multiple of the 15min of 'ticks_15min' \\(and longer\\)"):
        Rollup(bars, interval="20min")
    with pytest.raises(SpecError, match="must be a multiple"):
        Rollup(bars, interval="15min")
    with pytest.raises(SpecError, match=r"is by its fields \['symbol'\], not \['exchange'\]"):
        Rollup(bars, interval="1h", by="exchange")


def test_rollups_are_declared_in_files_next_to_their_series(tmp_path: Any) -> None:

    path = tmp_path / "decl.toml"
    path.write_text(
        '[[series]]\ncollection = "ticks"\nshapes = ["symbol"]\n'
        '[[rollup]]\nsource = "ticks"\ninterval = "1h"\nby = ["symbol"]\nvolume = "volume"\n'
    )
    [series], [hourly] = load_declaration(str(path))
    assert series.collection == "ticks" and hourly.name == "ticks_1h" and hourly.source == series
    assert [s.collection for s in load_specs(str(path))] == ["ticks", "ticks_1h"]  # indexes cover both
    path.write_text('[[series]]\ncollection = "ticks"\n[[rollup]]\nsource = "other"\n')
    with pytest.raises(
        SpecError, match=r"rollup\[0\]: roll-up source 'other' is not a series or roll-up declared above it"
    ):
        load_declaration(str(path))


def stored_bars(client: Any, collection: str) -> dict[str, dict[str, Any]]:
    return {doc.id: doc.to_dict() for doc in client.collection(collection).stream()}


def test_a_rollup_stores_each_bar_once_corrects_late_ticks_and_resumes(tsstore_emulator: Any, tmp_path: Any) -> None:

    database = f"rollup-{random.randrange(10**9)}"
    client = tsstore_emulator.client(database=database)
    source_spec = spec("ticks", 3)
    store = TimeSeriesStore(client, source_spec, write_options=FAST)
    rows = ticks(1500, seed=9)  # at 800 the killed run below once wrote all its bars before the kill
    store.write(rows)
    bars = Rollup(source_spec, interval="1min", by="symbol", volume="volume")
    until = T0 + dt.timedelta(hours=3)

    def expected() -> pd.DataFrame:
        return store.bars(interval="1min", by="symbol", price="price.micros", volume="volume", end=until)

    def as_read() -> pd.DataFrame:  # the roll-up through the ordinary read verbs
        frame = TimeSeriesStore(client, bars.spec).query_frame(direction="asc")
        return frame.reset_index().set_index(["symbol", "timestamp"]).sort_index()

    def same(frame: pd.DataFrame, want: pd.DataFrame) -> bool:
        columns = ["open", "high", "low", "close", "count", "volume"]
        return list(frame.index) == list(want.index) and all(
            [int(v) for v in frame[c]] == [int(v) for v in want[c]] for c in columns
        )

    first = store.rollup(bars, until=until)
    want = expected()
    assert (first.bars, first.created, first.start, first.end) == (len(want), len(want), T0, until)
    assert first.ticks == len(rows) and same(as_read(), want)
    stored = stored_bars(client, bars.name)
    again = store.rollup(bars, until=until)
    assert again.start is None and again.watermark == until  # nothing left: every closed interval done
    redo = store.rollup(bars, since=T0, until=until)
    assert (redo.created, redo.replaced, redo.present) == (0, 0, len(want)) and stored_bars(client, bars.name) == stored

    at = T0 + dt.timedelta(minutes=5, seconds=20)
    late = [{"symbol": "AAA", "exchange": "X1", "n": 10**6 + k, "timestamp": at + dt.timedelta(seconds=k),
             "price": {"micros": 10**13 + k}, "volume": 100} for k in range(3)]  # fmt: skip
    store.write(late)
    fixed = store.rollup(bars, since=T0 + dt.timedelta(minutes=5, seconds=30), until=until)  # aligned down to :05
    assert fixed.start == T0 + dt.timedelta(minutes=5) and fixed.replaced == 1 and fixed.created == 0
    assert same(as_read(), expected()) and len(stored_bars(client, bars.name)) == len(want)
    changed = as_read().loc[("AAA", T0 + dt.timedelta(minutes=5))]
    assert changed["high"] == 10**13 + 2

    # Interrupted: kill a run half-way, run it again, and get what one whole run stores.
    (tmp_path / "decl.toml").write_text(
        '[[series]]\ncollection = "ticks"\nshards = ["s0", "s1", "s2"]\nkey_fields = ["symbol", "n"]\n'
        'shapes = [{ fields = ["symbol"], directions = ["desc", "asc"] }, "exchange", ["exchange", "symbol"]]\n'
        'measures = ["price.micros", "volume"]\n'
        '[[rollup]]\nsource = "ticks"\ninterval = "10s"\nby = ["symbol"]\nvolume = "volume"\ncollection = "ticks_10s"\n'
    )
    env = dict(os.environ, FIRESTORE_EMULATOR_HOST=tsstore_emulator.address)
    command = [sys.executable, "-m", "tsstore", "rollup", "--spec", "decl.toml", "--database", database,
               "--until", until.isoformat()]  # fmt: skip
    killed = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not list(client.collection("ticks_10s").limit(1).stream()):
        time.sleep(0.02)
    killed.send_signal(signal.SIGKILL)
    killed.wait(timeout=30)
    half = len(stored_bars(client, "ticks_10s"))
    announced = client.collection("tsstore_rollups").document("ticks_10s").get().to_dict() or {}
    assert "closing" in announced and "watermark" not in announced  # killed after announcing, before the end
    # the run again: in this process (what it finds matters, not that it is a process of its own)
    done = tsstore(*command[3:], cwd=tmp_path, env={"FIRESTORE_EMULATOR_HOST": tsstore_emulator.address})
    assert done.returncode == 0, done.stderr
    want10 = store.bars(interval="10s", by="symbol", price="price.micros", volume="volume", end=until)
    assert 0 < half and len(stored_bars(client, "ticks_10s")) == len(want10)
    assert f"into {len(want10)} bars" in done.stdout and "watermark 2026-03-02T12:00:00Z" in done.stdout
    ten = TimeSeriesStore(client, Rollup(source_spec, interval="10s", by="symbol", volume="volume").spec)
    assert same(ten.query_frame(direction="asc").reset_index().set_index(["symbol", "timestamp"]).sort_index(), want10)
    client.close()


@pytest.mark.parametrize(("mode", "shards"), [("native", 3), ("native", 40), pytest.param("memory", 3, marks=MEMORY.marks)])
def test_hourly_bars_from_minute_rollups_equal_those_from_ticks(request: pytest.FixtureRequest, uses_emulator: None,
                                                                mode: str, shards: int) -> None:  # fmt: skip
    """Minute bars rolled up, then hours rolled up from them (and combined on read): the same
    OHLCV, price sum, standard deviation and open/close times as hourly bars from the ticks,
    and pandas' own per-hour standard deviation; each read billed what it returns."""
    client = mode_client(request, mode, f"rollups-{shards}-{random.randrange(10**9)}")
    source = spec("ticks", shards)
    store = TimeSeriesStore(client, source, write_options=FAST)
    rows = [row for row in ticks(300, seed=shards) if "volume" in row]
    store.write(rows)
    minutes = Rollup(source, interval="1min", by="symbol", volume="volume")
    hours = Rollup(minutes, interval="1h")
    until = T0 + dt.timedelta(hours=2)
    assert store.rollup_coverage(minutes) is None  # not run yet
    assert store.rollup(minutes, until=until).watermark == until
    assert store.rollup_coverage(minutes) == (EARLIEST, until)  # a first run holds its bars whole from the start
    bar_store = TimeSeriesStore(client, minutes.spec, write_options=FAST)
    assert bar_store.rollup(hours, until=until).watermark == until
    with pytest.raises(ConfigError, match="roll-up 'ticks_1min' rolls up 'ticks', not this store's 'ticks_1min'"):
        bar_store.rollup_coverage(minutes)  # a roll-up of another series
    window = {"start": T0, "end": until, "by": "symbol", "interval": "1h", "moments": True}
    costs = [ReadStats(), ReadStats(), ReadStats()]
    frames = [
        store.bars(price="price.micros", volume="volume", stats=costs[0], **window),
        bar_store.bars(combine=True, stats=costs[1], **window),
        TimeSeriesStore(client, hours.spec).bars(combine=True, stats=costs[2], **window),
    ]
    exact = ["open", "high", "low", "close", "count", "volume", "sum", "open_at", "close_at"]
    for frame in frames[1:]:
        pd.testing.assert_frame_equal(frame[exact], frames[0][exact])
        pd.testing.assert_series_equal(frame["std"], frames[0]["std"], rtol=1e-9)
    table = pd.DataFrame(
        {
            "symbol": [r["symbol"] for r in rows],
            "t": [r["timestamp"] for r in rows],
            "p": [r["price"]["micros"] for r in rows],
        }
    )
    want = table.groupby(["symbol", pd.Grouper(key="t", freq="1h")])["p"].agg(["std", "mean", "count"])
    assert list(want["count"]) == list(frames[0]["count"])
    assert all(abs(a - b) <= 1e-6 * abs(a) for a, b in zip(want["std"], frames[0]["std"].astype(float)))
    assert all(abs(a - b) <= 1e-9 * abs(a) for a, b in zip(want["mean"], frames[0]["mean"].astype(float)))
    minute_bars = sum(1 for _ in bar_store.iter_ticks())
    assert [c.documents for c in costs] == [len(rows), minute_bars, len(frames[0])]  # a read per tick, per bar
    # an hourly roll-up runs only as far as the minute roll-up has
    later = until + dt.timedelta(hours=1)
    store.write([{**rows[0], "n": 10**6, "timestamp": until + dt.timedelta(minutes=5)}])
    # combined bars end at the watermark: past it the bars are not stored yet (the tick at +5 min)
    hourly = {"interval": "1h", "by": "symbol", "start": T0}
    refused = rf"^end {later:%Y-%m-%dT%H:%M}:00Z is after the watermark of roll-up 'ticks_1min' \({until:%Y-%m-%dT%H}"
    with pytest.raises(StateError, match=refused):
        bar_store.bars(combine=True, end=later, **hourly)
    with pytest.raises(StateError, match="^start .* is after the watermark"):
        bar_store.bars(combine=True, interval="1h", start=later)
    to_watermark = bar_store.bars(combine=True, end=until, **hourly)
    pd.testing.assert_frame_equal(bar_store.bars(combine=True, **hourly), to_watermark)
    assert bar_store.rollup(hours, until=later).watermark == until
    assert store.rollup(minutes, until=later).watermark == later
    assert bar_store.rollup(hours, until=later).watermark == later
    client.close()


@pytest.mark.parametrize("mode", [NATIVE, MEMORY])
def test_combined_bars_never_split_a_stored_bar_across_a_bucket_edge_or_a_range_bound(
    request: pytest.FixtureRequest, uses_emulator: None, mode: str
) -> None:
    """Stored hourly bars cannot make Asia/Kolkata days (their midnight is 18:30Z, inside an
    hour) nor answer a range that starts or ends inside a bar: each is refused, naming the
    stored bar and the edge, where the sum of whole bars would have been wrong; on bar edges
    the combined days equal the days from the ticks."""
    client = mode_client(request, mode, f"combine-edges-{random.randrange(10**9)}")
    source = spec("ticks", 3)
    store = TimeSeriesStore(client, source, write_options=FAST)
    day = dt.datetime(2026, 3, 2, tzinfo=UTC)
    at = [day + dt.timedelta(hours=18, minutes=10), day + dt.timedelta(hours=18, minutes=40)]  # 23:40 and 00:10 IST
    at.append(day + dt.timedelta(hours=20, minutes=5))
    store.write([{"symbol": "AAA", "n": i, "price": {"micros": 100 + i}, "volume": 1, "timestamp": t}
                 for i, t in enumerate(at)])  # fmt: skip
    hours = Rollup(source, interval="1h", by="symbol", volume="volume")
    store.rollup(hours, since=day, until=day + dt.timedelta(days=1))
    bars = TimeSeriesStore(client, hours.spec)
    kolkata = {"interval": "1D", "tz": "Asia/Kolkata", "by": "symbol"}
    from_ticks = store.bars(price="price.micros", volume="volume", start=day, **kolkata)
    assert from_ticks["count"].tolist() == [1, 2]  # two Kolkata days
    with pytest.raises(QueryError) as crossed:
        bars.bars(combine=True, start=day, **kolkata)
    assert str(crossed.value) == (
        "cannot combine 1h bars (aligned on the UTC epoch) into 1D buckets in Asia/Kolkata: the stored bar "
        "2026-03-02T18:00:00Z–2026-03-02T19:00:00Z holds the edge 2026-03-02T18:30:00Z; ask for buckets made of "
        "whole 1h bars, or make the bars from the ticks (bars(price=...) on the source's store)"
    )
    with pytest.raises(QueryError, match=r"into 90min buckets; ask for buckets made of whole 1h bars"):
        bars.bars(combine=True, interval="90min", by="symbol")  # refused before reading: no day could tile
    window = {"interval": "1D", "by": "symbol", "end": day + dt.timedelta(days=1)}
    start = day + dt.timedelta(hours=18, minutes=30)  # count() says 2 from here; the bar of 18:00 holds 1 of them
    assert store.count(start=start, end=window["end"]) == 2
    with pytest.raises(QueryError) as inside:
        bars.bars(combine=True, start=start, **window)
    assert str(inside.value).startswith(
        "start 2026-03-02T18:30:00Z falls inside the stored 1h bar 2026-03-02T18:00:00Z–2026-03-02T19:00:00Z, "
        "whose ticks cannot be split; give a start on a bar edge (2026-03-02T18:00:00Z or 2026-03-02T19:00:00Z)"
    )
    with pytest.raises(QueryError, match=r"^end 2026-03-02T20:01:00Z falls inside the stored 1h bar"):
        bars.bars(combine=True, start=day, interval="1D", by="symbol", end=day + dt.timedelta(hours=20, minutes=1))
    new_york = {"interval": "1D", "tz": "America/New_York", "by": "symbol", "start": day}  # whole hours: tiled
    combined = bars.bars(combine=True, **new_york)
    pd.testing.assert_frame_equal(combined, store.bars(price="price.micros", volume="volume", **new_york))
    with pytest.raises(QueryError, match=r"'ticks' has no roll-up record \(tsstore_rollups/ticks\)"):
        store.bars(combine=True, interval="1D")
    client.close()


@pytest.mark.parametrize("mode", [NATIVE, MEMORY])
def test_aligned_fills_only_buckets_without_a_bar(request: pytest.FixtureRequest, uses_emulator: None, mode: str) -> None:
    """``fill="prev"`` carries a value into buckets where a series has no bar, never into a
    bar whose own value is missing: the std of a bucket holding one tick stays missing (it
    was the previous bucket's std)."""
    client = mode_client(request, mode, f"aligned-std-{random.randrange(10**9)}")
    store = TimeSeriesStore(client, spec("ticks", 3), write_options=FAST)
    minutes = [0, 0, 1, 3, 3]  # two ticks, one tick, none, two ticks
    store.write([{"symbol": "AAA", "n": i, "price": {"micros": 100 + 10 * i},
                  "timestamp": T0 + dt.timedelta(minutes=m, seconds=i)} for i, m in enumerate(minutes)])  # fmt: skip
    got = store.aligned(interval="1min", by="symbol", price="price.micros", value="std", start=T0)["AAA"]
    ticks = pd.Series([100 + 10 * i for i in range(5)], index=[T0 + dt.timedelta(minutes=m) for m in minutes])
    per_minute = ticks.groupby(level=0).std().reindex(pd.date_range(T0, periods=4, freq="1min"))
    want = per_minute.where(per_minute.index.isin(ticks.index), per_minute.ffill())  # fill the empty minute only
    assert got.isna().tolist() == [False, True, False, False] == want.isna().tolist()  # as pandas ffill()s
    assert got.dropna().round(9).tolist() == want.dropna().round(9).tolist()
    client.close()


def test_aligned_series_are_one_column_each_per_bucket_filled_as_pandas_does(
    tsstore_emulator: Any, tmp_path: Any
) -> None:
    """Several series side by side: each bucket from the first bar to the last, the last price
    carried where a series has no tick (missing before its first), counts 0 there; the same as
    pandas' pivot of the last price per bucket, forward filled; on the async store and from
    the shell too."""
    client = tsstore_emulator.client(database=f"aligned-{random.randrange(10**9)}")
    source = spec("ticks", 40)
    store = TimeSeriesStore(client, source, write_options=FAST)
    rng = random.Random(5)
    rows = [
        {"symbol": symbol, "exchange": "X1", "n": i, "price": {"micros": rng.randrange(100, 200)},
         "timestamp": T0 + dt.timedelta(minutes=minute, seconds=rng.randrange(60))}
        for i, (symbol, minute) in enumerate(
            [(s, m) for s, minutes in (("AAA", [0, 1, 5, 9]), ("BBB", [3, 4, 12])) for m in minutes for _ in range(2)]
        )
    ]  # fmt: skip
    store.write(rows)
    got = store.aligned(interval="2min", by="symbol", price="price.micros", tz="Europe/London", start=T0)
    table = pd.DataFrame({"symbol": [r["symbol"] for r in rows], "t": [r["timestamp"] for r in rows],
                          "p": [r["price"]["micros"] for r in rows], "n": [r["n"] for r in rows]})  # fmt: skip
    table = table.sort_values(["t", "n"])  # the read's order, ties by id; no two ticks share a time here
    last = table.pivot_table(index=pd.Grouper(key="t", freq="2min"), columns="symbol", values="p", aggfunc="last")
    want = last.reindex(pd.date_range(T0, T0 + dt.timedelta(minutes=12), freq="2min", tz=UTC)).ffill()
    assert list(got.index) == list(want.index) and str(got.index.tz) == "Europe/London"
    assert got["AAA"].tolist() == want["AAA"].tolist()
    assert got["BBB"].isna().tolist() == want["BBB"].isna().tolist()  # missing before BBB's first tick
    assert got["BBB"].dropna().tolist() == want["BBB"].dropna().tolist()
    counts = store.aligned(interval="2min", by="symbol", price="price.micros", value="count", start=T0)
    assert counts.sum().to_dict() == {"AAA": 8, "BBB": 6} and (counts.fillna(-1) >= 0).all().all()
    assert store.aligned(interval="2min", by="symbol", price="price.micros", fill=None, start=T0).isna().sum().sum() > 0

    async def on_the_loop() -> pd.DataFrame:
        async with AsyncTimeSeriesStore(tsstore_emulator.async_client(database=database_id(client)), source) as aio:
            return await aio.aligned(interval="2min", by="symbol", price="price.micros", tz="Europe/London", start=T0)

    pd.testing.assert_frame_equal(asyncio.run(on_the_loop()), got)
    with pytest.raises(QueryError, match="value='vwap' is not allowed; use one of open, high"):
        store.aligned(interval="2min", by="symbol", price="price.micros", value="vwap")
    (tmp_path / "spec.toml").write_text(
        '[[series]]\ncollection = "ticks"\nwrites_per_second = 20000\nkey_fields = ["symbol", "n"]\n'
        'shapes = [{ fields = ["symbol"], directions = ["desc", "asc"] }, "exchange", ["exchange", "symbol"]]\n'
    )
    done = tsstore(
        "aligned", "--spec", "spec.toml", "--database", database_id(client), "--interval", "2min", "--by", "symbol",
        "--by", "exchange", "--price", "price.micros", "--fill", "none", "--start", T0.isoformat(), "--format", "csv",
        cwd=tmp_path, env={"FIRESTORE_EMULATOR_HOST": tsstore_emulator.address},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    printed = pd.read_csv(io.StringIO(done.stdout), index_col=0)
    want = store.aligned(interval="2min", by=["symbol", "exchange"], price="price.micros", fill=None, start=T0)
    assert list(printed.columns) == ["AAA/X1", "BBB/X1"]
    assert pd.to_datetime(printed.index, utc=True).tolist() == want.index.tolist()
    assert printed.fillna(-1).astype(int).values.tolist() == want.fillna(-1).astype(int).values.tolist()
    client.close()
