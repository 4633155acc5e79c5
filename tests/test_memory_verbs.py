"""Verbs on the memory database whose oracle tests on the emulator also run a command (so their
cases stay on the emulator): late ticks into rolled-up buckets, read through the layers of
combined bars and explained, and a check of stored bars against their ticks that finds writes
tsstore did not see and repairs them. Each answer is held to bars made from the ticks."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pandas as pd
import pytest

from tests.shared import T0, put_doc, stored_ids
from tests.shared import spec as shared_spec
from tsstore import Rollup, TimeSeriesStore, WriteOptions
from tsstore.late import mark_id, marks_path
from tsstore.memory import MemoryDatabase

pytestmark = pytest.mark.memory  # every case is on the memory database

FAST = WriteOptions(ramp=False)
EXACT = ["open", "high", "low", "close", "count", "volume"]
UNTIL = T0 + dt.timedelta(hours=2)


def trade(n: int, minute: int, price: int, symbol: str = "AAA") -> dict[str, Any]:
    return {"symbol": symbol, "exchange": "X1", "n": n, "timestamp": T0 + dt.timedelta(minutes=minute, seconds=n % 50),
            "price": {"micros": price}, "volume": 10 + n % 9}  # fmt: skip


def rolled_up() -> tuple[MemoryDatabase, TimeSeriesStore, Rollup, Rollup]:
    """Two hours of trades of two symbols on a memory database, rolled up into minute bars and
    the minute bars into hourly ones."""
    database = MemoryDatabase()
    store = TimeSeriesStore(database, shared_spec("ticks", 3), write_options=FAST)
    store.write([trade(n, n % 120, 1_000 + n, "AAA" if n % 3 else "BBB") for n in range(240)])
    minutes = Rollup(store.spec, interval="1min", by="symbol", volume="volume")
    hours = Rollup(minutes, interval="1h")
    store.rollup(minutes, until=UNTIL)
    TimeSeriesStore(database, minutes.spec).rollup(hours, until=UNTIL)
    return database, store, minutes, hours


def from_ticks(store: TimeSeriesStore, interval: str) -> pd.DataFrame:
    return store.bars(interval=interval, by="symbol", price="price.micros", volume="volume", start=T0, end=UNTIL)


def test_combined_bars_read_a_late_bucket_from_the_ticks_then_from_the_redone_minute_bars() -> None:
    database, store, minutes, hours = rolled_up()
    top = TimeSeriesStore(database, hours.spec)
    store.write([trade(1_000, 7, 5), trade(1_001, 75, 9_999, "BBB")])  # late: into two rolled-up minutes
    assert stored_ids(database, marks_path(minutes.name)) == sorted([mark_id(T0 + dt.timedelta(minutes=m))
                                                                     for m in (7, 75)])  # fmt: skip
    told = top.explain_bars(interval="1h", start=T0, end=UNTIL).describe()
    assert "[2026-03-02T09:07:00Z, 2026-03-02T09:08:00Z) from ticks (late ticks marked there" in told, told
    for interval in ("1h", "2h"):
        got = top.bars(combine=True, interval=interval, by="symbol", start=T0, end=UNTIL)
        pd.testing.assert_frame_equal(got[EXACT], from_ticks(store, interval)[EXACT])
    store.rollup(minutes, until=UNTIL)  # redoes the two minutes and marks their hours
    assert stored_ids(database, marks_path(minutes.name)) == []
    assert stored_ids(database, marks_path(hours.name)) == [mark_id(T0), mark_id(T0 + dt.timedelta(hours=1))]
    told = top.explain_bars(interval="1h", start=T0, end=UNTIL).describe()
    assert "from ticks_1min (1min bars) (late ticks" in told, told
    pd.testing.assert_frame_equal(top.bars(combine=True, interval="1h", by="symbol", start=T0, end=UNTIL)[EXACT],
                                  from_ticks(store, "1h")[EXACT])  # fmt: skip


def test_a_check_of_stored_bars_finds_writes_tsstore_did_not_see_and_a_repair_has_them_redone() -> None:
    database, store, minutes, _ = rolled_up()
    assert store.verify_rollup(minutes).differ == ()
    put_doc(database, "ticks/outside", {**trade(2_000, 12, 1), "shard": "s0"})  # no mark: tsstore did not see it
    found = store.verify_rollup(minutes)
    assert [line.split(" ")[0] for line in found.differ] == [(T0 + dt.timedelta(minutes=12)).isoformat()]
    assert not found.repaired and found.ticks == 241
    fixed = store.verify_rollup(minutes, repair=True)
    assert fixed.repaired and stored_ids(database, marks_path(minutes.name)) == [mark_id(T0 + dt.timedelta(minutes=12))]
    assert store.rollup(minutes, until=UNTIL).redone == 1
    assert store.verify_rollup(minutes).differ == ()
    bars = TimeSeriesStore(database, minutes.spec).bars(combine=True, interval="1h", by="symbol", start=T0, end=UNTIL)
    pd.testing.assert_frame_equal(bars[EXACT], from_ticks(store, "1h")[EXACT])
