"""The two stores have the same verbs with the same options, and the async store's analytics,
roll-ups and reshards equal the sync store's oracles."""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
import random
from typing import Any

import pandas as pd
import pytest

from tests.shared import T0, oracle_bars, spec, ticks
from tsstore import AsyncTimeSeriesStore, OptionError, Rollup, SeriesSpec, TimeSeriesStore, WriteOptions, shards_for
from tsstore.local.synthetic import trading_day

FAST = WriteOptions(ramp=False)


def verbs(store: type) -> dict[str, list[tuple[str, str, Any]]]:
    """Each public method: its parameters (name, kind, default) as a caller sees them."""
    return {
        name: [(p.name, p.kind.name, p.default) for p in inspect.signature(getattr(store, name)).parameters.values()]
        for name in dir(store)
        if not name.startswith("_") and callable(getattr(store, name))
    }


def test_both_stores_have_the_same_verbs_with_the_same_options() -> None:
    sync, aio = verbs(TimeSeriesStore), verbs(AsyncTimeSeriesStore)
    assert sorted(sync) == sorted(aio)
    assert {"bars", "rollup", "reshard", "series_counter", "stream_chunk", "write", "purge", "tail"} <= set(sync)
    for name in sync:
        assert sync[name] == aio[name], name
    options = dict(verbs(TimeSeriesStore))["query"]
    assert [n for n, kind, _ in options if kind == "KEYWORD_ONLY"] == [
        "where", "start", "end", "read_time", "direction", "limit", "columns", "cursor",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("verb", "sync", "aio"),
    [
        ("iter_ticks", "TickStream[tsstore.ticks.Tick]", "AsyncTickStream[tsstore.ticks.Tick]"),
        ("stream_frames", "TickStream[pandas.DataFrame]", "AsyncTickStream[pandas.DataFrame]"),
        ("watch", "LiveWatch", "AsyncLive[tsstore.live.state.WindowUpdate]"),
        ("tail", "LiveTail", "AsyncLive[tsstore.live.state.TailTick]"),
        ("count", "int", "int"),
    ],
)
def test_each_store_shows_what_it_returns(verb: str, sync: str, aio: str) -> None:
    """help() and the reference (which read the class) show each store's own result."""
    from tsstore import AsyncLive, AsyncTickStream, LiveTail, LiveWatch, TickStream

    exported = {TickStream, AsyncTickStream, LiveWatch, LiveTail, AsyncLive}
    for store, shown in ((TimeSeriesStore, sync), (AsyncTimeSeriesStore, aio)):
        returns = inspect.signature(getattr(store, verb)).return_annotation
        name = getattr(returns, "__name__", None) if isinstance(returns, type) else None
        text = name if name is not None else str(returns).replace("tsstore.verbs.declare.", "").replace(
            "tsstore.live.aio.", "")  # fmt: skip
        assert text == shown, (store.__name__, verb, returns)
        origin = getattr(returns, "__origin__", returns)
        assert origin in exported or origin is int
        assert "Reading" not in str(returns) and "Listening" not in str(returns)


def test_a_wrong_keyword_names_the_public_verb_on_both_stores(tsstore_emulator: Any) -> None:
    client, aclient = tsstore_emulator.client(database="parity"), tsstore_emulator.async_client(database="parity")
    store, astore = TimeSeriesStore(client, spec("p", 3)), AsyncTimeSeriesStore(aclient, spec("p", 3))
    with pytest.raises(TypeError, match=r"^write\(\) got unknown option\(s\) on_dupe; it takes naive, on_duplicate"):
        store.write([], on_dupe="keep")
    with pytest.raises(OptionError, match=r"^count\(\) got unknown option\(s\) limit; it takes stats, where"):
        asyncio.run(astore.count(limit=3))
    assert "where" in (TimeSeriesStore.query.__doc__ or "") and inspect.iscoroutinefunction(astore.count)


def test_async_bars_equal_pandas_resample(tsstore_emulator: Any) -> None:
    database = f"abars-{random.randrange(10**9)}"
    rows = ticks(1500, seed=77)
    ids = (
        TimeSeriesStore(tsstore_emulator.client(database=database), spec("bars", 40), write_options=FAST)
        .write(rows)
        .ids
    )
    start, end = T0 + dt.timedelta(minutes=3), T0 + dt.timedelta(minutes=95)

    async def run() -> pd.DataFrame:
        astore = AsyncTimeSeriesStore(tsstore_emulator.async_client(database=database), spec("bars", 40))
        return await astore.bars(
            interval="15min", by="symbol", price="price.micros", volume="volume", start=start, end=end
        )

    got, want = asyncio.run(run()), oracle_bars(rows, ids, "15min", start, end)
    assert list(got.index) == list(want.index) and len(got) > 0
    for column in ("open", "high", "low", "close", "count", "volume"):
        assert [int(v) for v in got[column]] == [int(v) for v in want[column]], column


def test_an_async_rollup_stores_the_sync_stores_bars(tsstore_emulator: Any) -> None:
    database = f"arollup-{random.randrange(10**9)}"
    client = tsstore_emulator.client(database=database)
    source = spec("ticks", 3)
    store = TimeSeriesStore(client, source, write_options=FAST)
    store.write(ticks(2000, seed=5))
    bars = Rollup(source, interval="1min", by="symbol", volume="volume")
    until = T0 + dt.timedelta(hours=3)

    async def run() -> Any:
        astore = AsyncTimeSeriesStore(tsstore_emulator.async_client(database=database), source, write_options=FAST)
        return await astore.rollup(bars, until=until), await astore.rollup(bars, until=until)

    first, again = asyncio.run(run())
    want = store.bars(interval="1min", by="symbol", price="price.micros", volume="volume", end=until)
    stored = TimeSeriesStore(client, bars.spec).query_frame(direction="asc").reset_index()
    stored = stored.set_index(["symbol", "timestamp"]).sort_index()
    assert (first.bars, first.created, first.ticks) == (len(want), len(want), 2000) and again.start is None
    assert list(stored.index) == list(want.index)
    assert [int(v) for v in stored["close"]] == [int(v) for v in want["close"]]


def test_an_async_reshard_moves_every_tick_once(tsstore_emulator: Any) -> None:
    database = f"areshard-{random.randrange(10**9)}"
    client = tsstore_emulator.client(database=database)
    old = TimeSeriesStore(client, SeriesSpec("ticks", shards=shards_for(5_000)), write_options=FAST)
    old.write(trading_day(600, day=dt.date(2026, 3, 2), seed=3))
    before = {d.id: {k: v for k, v in d.to_dict().items() if k != "shard"} for d in client.collection("ticks").stream()}
    layout = SeriesSpec("ticks", shards=shards_for(1_500), retired=shards_for(5_000)[3:])

    async def run() -> Any:
        astore = AsyncTimeSeriesStore(tsstore_emulator.async_client(database=database), layout, write_options=FAST)
        return await astore.reshard(), await astore.count()

    result, counted = asyncio.run(run())
    after = {d.id: d.to_dict() for d in client.collection("ticks").stream()}
    assert result.remaining == {v: 0 for v in shards_for(5_000)[3:]} and result.moved > 200 and counted == 600
    assert {i: {k: v for k, v in d.items() if k != "shard"} for i, d in after.items()} == before
    assert {d["shard"] for d in after.values()} <= set(shards_for(1_500))
