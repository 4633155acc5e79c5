"""No silent loss on the emulator: ticks sharing key and time, re-runs, counts that match.

Generated like the public flights data that showed the loss (flights-3m.parquet from
vega-datasets): minute timestamps without a zone, origin and destination as the key, and
rows that repeat (origin, destination, minute) with other values, or repeat whole.
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from google.cloud import firestore

from tests.cli import Ran, tsstore
from tsstore import SeriesSpec, TimeSeriesStore
from tsstore.ingest import IngestSummary, Rejected, ingest_file
from tsstore.local.emulator import Emulator
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

FAST = EMULATOR_WRITE_OPTIONS  # no ramp, no ceiling: the emulator is the tests' own
AIRPORTS = ["ABQ", "ATL", "BOS", "DEN", "JFK", "LAX", "ORD", "SEA"]
SPEC_TOML = """
[[series]]
collection = "flights"
timestamp_field = "date"
key_fields = ["origin", "destination"]
shards = ["a", "b", "c", "d"]
columns = {delay = "Int64", distance = "Int64"}
count_by = ["origin"]
counter_shards = 3
"""


def flights_spec(**options: Any) -> SeriesSpec:
    return SeriesSpec(
        "flights",
        timestamp_field="date",
        key_fields=["origin", "destination"],
        shards=["a", "b", "c", "d"],
        columns={"delay": "Int64", "distance": "Int64"},
        **options,
    )


def flights(n: int, *, seed: int) -> list[dict[str, Any]]:
    """``n`` flights in few minutes and routes, so many share (origin, destination, minute);
    every 25th row is repeated whole right after it (two flights no field tells apart)."""
    rng = random.Random(seed)
    start = dt.datetime(2001, 1, 1, 6, 0)
    rows: list[dict[str, Any]] = []
    while len(rows) < n:
        origin, destination = rng.sample(AIRPORTS, 2)
        row = {
            "date": start + dt.timedelta(minutes=rng.randrange(60)),
            "delay": rng.randrange(-10, 120),
            "distance": 100 * (AIRPORTS.index(origin) + AIRPORTS.index(destination)),
            "origin": origin,
            "destination": destination,
        }
        rows.append(row)
        if len(rows) % 25 == 0:
            rows.append(dict(row))
    return rows[:n]


def write_parquet(path: Path, rows: list[dict[str, Any]]) -> Path:
    pq.write_table(pa.Table.from_pylist(rows), path)
    return path


def base(row: dict[str, Any]) -> tuple[Any, ...]:
    return (row["origin"], row["destination"], row["date"])


def shared_key_and_time(rows: list[dict[str, Any]]) -> int:
    seen: set[tuple[Any, ...]] = set()
    repeats = 0
    for row in rows:
        repeats += base(row) in seen
        seen.add(base(row))
    return repeats


def totals(summary: IngestSummary) -> tuple[int, int, int, int]:
    return summary.created, summary.present, summary.replaced, summary.rejected


def test_keep_stores_every_row_and_a_rerun_adds_nothing(client: firestore.Client, tmp_path: Path) -> None:
    n = 1500
    rows_a = flights(n, seed=1)
    assert shared_key_and_time(rows_a) > 200  # the case that lost rows: plenty of shared keys and times
    # A second input: the first 500 rows of A again (a re-sent slice: already present), then
    # 300 rows that share key and time with rows of A but are other flights.
    others = [dict(r, delay=r["delay"] + 1000) for r in rows_a[1000:1300]]
    rows_b = rows_a[:500] + others
    a = write_parquet(tmp_path / "a.parquet", rows_a)
    b = write_parquet(tmp_path / "b.parquet", rows_b)
    store = TimeSeriesStore(client, flights_spec(), write_options=FAST)

    first = ingest_file(store, a, naive="utc")
    assert totals(first) == (n, 0, 0, 0) and first.rows == n
    assert store.count() == n  # every input row is stored, none merged
    second = ingest_file(store, b, naive="utc")
    assert totals(second) == (300, 500, 0, 0)
    assert store.count() == n + 300 == first.created + second.created

    # Re-runs (checkpoints removed, so every row goes to Firestore again) add nothing.
    for path in tmp_path.glob("*.tsstore-checkpoint.json"):
        path.unlink()
    assert totals(ingest_file(store, a, naive="utc")) == (0, n, 0, 0)
    assert totals(ingest_file(store, b, naive="utc")) == (0, 800, 0, 0)
    assert store.count() == n + 300

    # What is stored is exactly the multiset of distinct flights: A's rows and B's others.
    frame = store.query_frame(direction="asc")
    got = sorted(
        (r.origin, r.destination, r.Index.to_pydatetime().replace(tzinfo=None), r.delay) for r in frame.itertuples()
    )
    want = sorted((r["origin"], r["destination"], r["date"], r["delay"]) for r in rows_a + others)
    assert got == want


def oracle_replace(inputs: list[list[dict[str, Any]]]) -> tuple[list[tuple[int, int, int]], int]:
    """Key and time are the identity, the last write wins: per input (created, present, replaced)."""
    stored: dict[tuple[Any, ...], dict[str, Any]] = {}
    out = []
    for rows in inputs:
        created = present = replaced = 0
        for row in rows:
            old = stored.get(base(row))
            if old is None:
                created += 1
            elif old == row:
                present += 1
            else:
                replaced += 1
            stored[base(row)] = row
        out.append((created, present, replaced))
    return out, len(stored)


def test_replace_keeps_the_last_write_and_reports_each_replacement(client: firestore.Client, tmp_path: Path) -> None:
    rows_a = flights(1000, seed=2)
    rows_b = [dict(r, delay=r["delay"] + 7) for r in rows_a[:400]] + rows_a[400:600]
    a = write_parquet(tmp_path / "a.parquet", rows_a)
    b = write_parquet(tmp_path / "b.parquet", rows_b)
    store = TimeSeriesStore(client, flights_spec(on_duplicate="replace"), write_options=FAST)
    expected, stored = oracle_replace([rows_a, rows_b])
    first = ingest_file(store, a, naive="utc")
    second = ingest_file(store, b, naive="utc")
    assert [totals(first)[:3], totals(second)[:3]] == expected
    assert store.count() == stored == first.created + second.created


def test_error_refuses_and_names_rows_that_share_key_and_time(client: firestore.Client, tmp_path: Path) -> None:
    rows_a = flights(1000, seed=3)
    repeats = shared_key_and_time(rows_a)
    rows_b = rows_a[:100] + [dict(r, delay=-999) for r in rows_a[100:150]]
    a = write_parquet(tmp_path / "a.parquet", rows_a)
    b = write_parquet(tmp_path / "b.parquet", rows_b)
    store = TimeSeriesStore(client, flights_spec(), write_options=FAST)
    rejects: list[Rejected] = []
    first = ingest_file(store, a, naive="utc", on_duplicate="error", on_reject=rejects.append)
    assert totals(first) == (1000 - repeats, 0, 0, repeats)
    assert all("same key" in r.reason and "on_duplicate='error'" in r.reason for r in rejects)
    firsts = {base(r) for r in rows_a}
    assert len(firsts) == store.count() == first.created
    rejects.clear()
    second = ingest_file(store, b, naive="utc", on_duplicate="error", on_reject=rejects.append)
    # Rows of B that A stored identically are present; the changed ones refused (or, where
    # A already refused that key and time, present or refused likewise).
    assert second.rejected == len(rejects) > 0 and second.created == 0
    assert second.present + second.rejected == 150
    assert all(r.line > 0 for r in rejects)
    assert store.count() == len(firsts)


def test_series_counters_count_each_tick_once(client: firestore.Client, tmp_path: Path) -> None:
    n = 600
    rows = flights(n, seed=4)
    path = write_parquet(tmp_path / "a.parquet", rows)
    store = TimeSeriesStore(client, flights_spec(count_by=["origin"], counter_shards=3), write_options=FAST)
    ingest_file(store, path, naive="utc")
    for cp in tmp_path.glob("*.tsstore-checkpoint.json"):
        cp.unlink()
    assert ingest_file(store, path, naive="utc").present == n  # re-sent: counted nowhere again
    store.write(rows[:50], naive="utc")  # and again through write(): still present
    counted = {origin: store.series_counter({"origin": origin}).value() for origin in AIRPORTS}
    assert counted == {origin: sum(1 for r in rows if r["origin"] == origin) for origin in AIRPORTS}
    assert sum(counted.values()) == store.count() == n


def test_write_reports_what_it_stored(client: firestore.Client) -> None:
    store = TimeSeriesStore(client, flights_spec(), write_options=FAST)
    rows = flights(300, seed=5)
    result = store.write(rows, naive="utc")
    assert (result.count, result.created, result.present, result.replaced) == (300, 300, 0, 0)
    assert len(set(result.ids)) == 300
    again = store.write(rows, naive="utc")
    assert (again.count, again.created, again.present) == (300, 0, 300) and again.ids == result.ids
    assert store.count() == 300


def cli(emulator: Emulator, database: str, *args: str, cwd: Path) -> Ran:
    env = {"GOOGLE_CLOUD_PROJECT": None, "FIRESTORE_EMULATOR_HOST": emulator.address}
    return tsstore(*args, "--database", database, env=env, cwd=cwd)


def test_cli_summary_equals_the_count(emulator: Emulator, database_id: str, tmp_path: Path) -> None:
    (tmp_path / "flights.toml").write_text(SPEC_TOML)
    rows = flights(1000, seed=6)
    assert shared_key_and_time(rows) > 100  # rows that share key and time are counted too
    write_parquet(tmp_path / "flights.parquet", rows)
    args = ("flights.parquet", "--spec", "flights.toml", "--naive", "utc")
    first = cli(emulator, database_id, "ingest", *args, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    summary = first.stdout.strip().splitlines()[-1]
    assert "flights.parquet: 1000 rows read: 1000 stored new, 0 already present, 0 rejected;" in summary
    counted = cli(emulator, database_id, "count", "--spec", "flights.toml", cwd=tmp_path)
    assert counted.stdout.strip() == "1000", counted.stderr
    (tmp_path / "flights.parquet.rejects.csv").unlink(missing_ok=True)
    for cp in tmp_path.glob("*.tsstore-checkpoint.json"):
        cp.unlink()
    again = cli(emulator, database_id, "ingest", *args, cwd=tmp_path)
    assert "1000 rows read: 0 stored new, 1000 already present, 0 rejected;" in again.stdout
    assert cli(emulator, database_id, "count", "--spec", "flights.toml", cwd=tmp_path).stdout.strip() == "1000"


@pytest.mark.parametrize("policy", ["keep", "replace", "error"])
def test_cli_takes_the_duplicate_policy(emulator: Emulator, database_id: str, tmp_path: Path, policy: str) -> None:
    (tmp_path / "flights.toml").write_text(SPEC_TOML)
    rows = flights(400, seed=7)
    write_parquet(tmp_path / "f.parquet", rows)
    done = cli(
        emulator,
        database_id,
        "ingest",
        "f.parquet",
        "--spec",
        "flights.toml",
        "--naive",
        "utc",
        "--on-duplicate",
        policy,
        cwd=tmp_path,
    )
    assert done.returncode == (4 if policy == "error" else 0), done.stderr  # 4: finished, with rows rejected
    counted = int(cli(emulator, database_id, "count", "--spec", "flights.toml", cwd=tmp_path).stdout)
    repeats = shared_key_and_time(rows)
    assert counted == {"keep": 400, "replace": 400 - repeats, "error": 400 - repeats}[policy]
    assert f"{counted} stored new" in done.stdout


def test_a_tick_is_found_whatever_input_it_comes_in(client: firestore.Client) -> None:
    store = TimeSeriesStore(client, flights_spec(), write_options=FAST)
    when = dt.datetime(2001, 1, 1, 6, 30)
    t0, t1, other = (
        {"origin": "BOS", "destination": "JFK", "date": when, "delay": d, "distance": 300} for d in (1, 2, 3)
    )

    def outcome(rows: list[dict[str, Any]]) -> tuple[int, int]:
        result = store.write(rows, naive="utc")
        return result.created, result.present

    assert outcome([t0, t1, t1]) == (3, 0)  # t1 listed twice in one input: two flights
    assert outcome([t1]) == (0, 1)  # the second trade re-sent alone is found at its content id
    assert outcome([other, t0]) == (1, 1)  # t0 found at the slot though it comes second now
    assert outcome([t1, t1, t1]) == (1, 2)  # a third repeat in one input is one more flight
    assert store.count() == 5
