"""Late ticks into sealed partitions, on the emulator in both database modes: a late, a
replaced and an erased tick into a sealed day each leave a mark of the cold tier (a tick
after the sealed history leaves none, and a declared late-data window refuses none), and the
next seal writes just those days again, each equal to a fresh read, and clears their marks.
The sealer's side without Firestore is in ``tests/test_cold.py``."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.conftest import unique_database_id
from tests.shared import MODES, T0, mode_client, stored_doc, stored_docs
from tests.shared import spec as shared_spec
from tsstore import LatePolicy, RetentionError, TimeSeriesStore, WriteOptions
from tsstore.cold.parquet import ID_COLUMN
from tsstore.cold.tier import horizon_name
from tsstore.cold_tier import ColdTier
from tsstore.late import mark_id, marks_path

DAY = dt.timedelta(days=1)
DAY0 = T0.replace(hour=0)  # 2026-03-02


@pytest.fixture(scope="module")
def databases() -> dict[str, str]:
    """One database per mode for the module (each test its own collection)."""
    return {mode: unique_database_id(f"cold-late-{mode}") for (mode,), _, _ in MODES}


def rows_of(day: int, count: int, first: int) -> list[dict[str, Any]]:
    return [{"symbol": "AAA", "exchange": "X1", "n": first + i, "volume": 100, "price": {"micros": 10**6 + i},
             "timestamp": DAY0 + day * DAY + dt.timedelta(minutes=10 * i)} for i in range(count)]  # fmt: skip


def marked(client: Any, collection: str) -> list[str]:
    """The ids of the cold tier's marks (each a partition's start in epoch ms)."""
    return sorted(stored_docs(client, marks_path(horizon_name(collection))))


@pytest.mark.parametrize("mode", MODES)
def test_late_replaced_and_erased_ticks_into_sealed_days_are_marked_and_just_those_days_sealed_again(
    mode: str, request: pytest.FixtureRequest, uses_emulator: None, collection_name: str, tmp_path: Path,
    databases: dict[str, str],
) -> None:  # fmt: skip
    client = mode_client(request, mode, databases[mode])
    lake = tmp_path / "lake"
    spec = shared_spec(collection_name, 3, cold=ColdTier(lake), late=LatePolicy(window="1h"))
    until = DAY0 + 4 * DAY
    with TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) as store:
        store.write(rows_of(0, 4, 0) + rows_of(2, 4, 10) + rows_of(3, 4, 20))  # the 2nd day (03-03) empty
        first = store.seal(until=until)
        assert [p.label for p in first.sealed] == ["2026-03-02", "2026-03-04", "2026-03-05"]
        horizon = stored_doc(client, f"tsstore_rollups/{horizon_name(collection_name)}")
        assert horizon is not None and (horizon["cold_tier"], horizon["watermark"]) == (True, until)
        # days behind the sealed history's end by far more than the window: marked, never refused
        late = store.write(rows_of(1, 1, 30) + rows_of(5, 1, 40))  # into the empty day, and after the sealed days
        assert late.created == 2
        assert store.write([{**rows_of(0, 1, 0)[0], "volume": 999}], on_duplicate="replace").replaced == 1
        store.purge(start=DAY0 + 2 * DAY, end=DAY0 + 3 * DAY, correct=True)  # every tick of 03-04 erased
        assert marked(client, collection_name) == [mark_id(DAY0 + day * DAY) for day in range(3)]  # none of 03-07
        again = store.seal(until=until)
        assert [(p.label, p.generation) for p in again.resealed] == [("2026-03-02", 2), ("2026-03-03", 1)]
        assert (again.sealed, again.emptied) == ((), ("2026-03-04",))
        assert marked(client, collection_name) == []
        entries = stored_doc(client, f"tsstore_cold/{collection_name}")["partitions"]  # type: ignore[index]
        assert sorted(entries) == ["2026-03-02", "2026-03-03", "2026-03-05"]
        assert entries["2026-03-05"]["object"] == first.sealed[2].object  # not sealed again
        for day, label in ((0, "2026-03-02"), (1, "2026-03-03")):
            fresh = store.query_table(start=DAY0 + day * DAY, end=DAY0 + (day + 1) * DAY, direction="asc")
            ids = [t.id for t in store.query(start=DAY0 + day * DAY, end=DAY0 + (day + 1) * DAY, direction="asc").ticks]
            sealed = pq.read_table(lake / entries[label]["object"])
            assert sealed.select(fresh.column_names).to_pylist() == fresh.to_pylist()
            assert sealed[ID_COLUMN].to_pylist() == ids
        assert 999 in pq.read_table(lake / entries["2026-03-02"]["object"])["volume"].to_pylist()
        assert store.seal(until=until).resealed == ()
        # a purge deletes sealed, verified days only: the day after the sealed ones is refused, nothing deleted
        with pytest.raises(RetentionError, match="the sealed history ends at 2026-03-06T00:00:00Z, before the purge's "
                                                 "end 2026-03-08T00:00:00Z .seal first"):  # fmt: skip
            store.purge(start=DAY0 + 5 * DAY, end=DAY0 + 6 * DAY)
        horizon = stored_doc(client, f"tsstore_rollups/{horizon_name(collection_name)}")
        assert horizon is not None and horizon.get("purged_before") is None
    client.close()
