"""Arrow tables, record-batch streams and Polars frames from reads, on the emulator.

Each is held to ``query_frame`` on the same store: the same rows in the same order, the same
values, the types Arrow gives the frame's dtypes, the timestamps in UTC; at 3 shards on the
sync store and 40 on the async one, with a projection, a range and a descending read.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import random
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from tests.shared import arrow_of
from tsstore import QueryShape, SeriesSpec, Tick, TimeSeriesStore
from tsstore.aio import AsyncTimeSeriesStore

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 3, 8, 14, 30, tzinfo=UTC)


def records(n: int) -> list[dict[str, Any]]:
    rng = random.Random(n)
    out = []
    for i in range(n):
        record: dict[str, Any] = {
            "timestamp": T0 + dt.timedelta(milliseconds=rng.randrange(60_000)),
            "symbol": rng.choice(["AAA", "BBB", "CCC"]),
            "price": {"currency": "USD", "micros": rng.randrange(10**9)},
            "exchange": rng.choice(["X1", "X2"]),
        }
        if i % 7:  # a column some ticks lack
            record["volume"] = rng.randrange(1, 500) / 4
        if i % 11 == 0:  # and one that only a few have
            record["halted"] = i % 2 == 0
        out.append(record)
    return out


READS: list[dict[str, Any]] = [
    {},
    {"direction": "desc", "columns": ["symbol", "price.micros"]},
    {"where": {"symbol": "BBB"}, "start": T0 + dt.timedelta(seconds=10), "end": T0 + dt.timedelta(seconds=40)},
    {"limit": 25},
]


@pytest.mark.parametrize("shards", [3, 40])
def test_tables_batches_and_polars_frames_equal_query_frame(shards: int, tsstore_emulator: Any, database_id: str,
                                                            collection_name: str) -> None:  # fmt: skip
    import polars as pl  # here, not at collection (0.55 CPU-s), which the lane without the emulator runs too
    import polars.testing

    spec = SeriesSpec(collection_name, shards=[f"s{n}" for n in range(shards)],
                      columns={"volume": "Float64", "price.micros": "Int64"},
                      shapes=[QueryShape("symbol", ("asc", "desc"))])
    store = TimeSeriesStore(tsstore_emulator.client(database=database_id), spec)
    store.write(records(600))
    if shards == 3:
        got = [(store.query_table(**read), list(store.stream_batches(rows=128, **read)), store.query_polars(**read))
               for read in READS]  # fmt: skip
    else:
        astore = AsyncTimeSeriesStore(tsstore_emulator.async_client(database=database_id), spec)

        async def reads() -> list[tuple[pa.Table, list[pa.RecordBatch], pl.DataFrame]]:
            return [(await astore.query_table(**read), [b async for b in astore.stream_batches(rows=128, **read)],
                     await astore.query_polars(**read)) for read in READS]  # fmt: skip

        got = asyncio.run(reads())
    for read, (table, batches, polar) in zip(READS, got):
        frame = store.query_frame(**read)
        assert len(frame) and table.equals(arrow_of(frame)), read
        assert table.schema.field("timestamp").type == pa.timestamp("us", tz="UTC")
        assert table.column("symbol").to_pylist() == frame["symbol"].tolist()  # order and values, not only types
        assert pa.Table.from_batches(batches).equals(table), read
        assert [b.num_rows for b in batches[:-1]] == [128] * (len(batches) - 1)
        polars.testing.assert_frame_equal(polar, pl.DataFrame(arrow_of(frame)))
        assert polar.schema["timestamp"] == pl.Datetime("us", "UTC")
    assert "volume" in got[0][0].column_names and got[0][0].column("volume").null_count == 600 // 7 + 1


def test_a_missing_polars_is_a_config_error_naming_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from tsstore.errors import ConfigError
    from tsstore.frames import polars_frame

    monkeypatch.setitem(sys.modules, "polars", None)
    with pytest.raises(ConfigError, match=r"pip install 'tsstore\[polars\]'"):
        polars_frame(pa.table({"a": [1]}))


def test_ticks_give_one_table_through_the_builder_without_a_frame() -> None:
    """The table is built from the builder's columns: no DataFrame is made on the way."""
    from tsstore.frames import FrameBuilder

    spec = SeriesSpec("ticks")
    builder = FrameBuilder(spec)
    made: list[int] = []
    real = pd.DataFrame.__init__

    def counting(self: pd.DataFrame, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        real(self, *args, **kwargs)

    for i, record in enumerate(records(50)):
        builder.add(Tick(f"t{i}", record["timestamp"], record))
    pd.DataFrame.__init__ = counting  # type: ignore[method-assign]
    try:
        table = builder.table()
    finally:
        pd.DataFrame.__init__ = real  # type: ignore[method-assign]
    assert table.num_rows == 50 and not made
