"""Shard layouts that change: ticks written under one layout stay in view under the next
(grow, shrink, rename), reads skip retired values from their ``until`` on, the census finds
values the declaration does not list, and the capacity planner agrees with the store."""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cli import run_cli
from tests.shared import EMULATOR_MODES, MODES, mode_client, put_doc, stored_docs
from tsstore import (
    QueryShape,
    ReshardResult,
    RetiredShard,
    SeriesSpec,
    SpecError,
    TimeSeriesStore,
    UndeclaredShardsWarning,
    WriteOptions,
    capacity_for,
    shards_for,
)
from tsstore.indexes.build import field_overrides
from tsstore.local.synthetic import trading_day
from tsstore.read.explain import explain

UTC = dt.timezone.utc
FAST = WriteOptions(ramp=False)
DAY = dt.date(2024, 5, 6)
AFTER = dt.datetime(2024, 5, 7, tzinfo=UTC)  # later than every tick of DAY
SHAPES = [QueryShape("symbol", ("desc", "asc"))]


def spec(collection: str, **options: Any) -> SeriesSpec:
    return SeriesSpec(collection, shapes=SHAPES, key_fields=["symbol"], **options)


#: The cases whose memory case adds no verb the others leave out (the suite's time): on the emulator only.
ON_THE_EMULATOR = pytest.mark.parametrize("database", EMULATOR_MODES, indirect=True)


@pytest.fixture(params=MODES)
def database(request: pytest.FixtureRequest, uses_emulator: None) -> Iterator[Any]:
    """A client of each database mode on a database of this test's own."""
    client = mode_client(request, request.param, f"layout-{random.randrange(10**9)}")
    yield client
    client.close()


def stored(client: Any, collection: str) -> list[tuple[dt.datetime, str, dict[str, Any]]]:
    """The oracle: every document of the collection, read with the plain client, in (timestamp, id) order."""
    return sorted(((d.get("timestamp"), i, d) for i, d in stored_docs(client, collection).items()),
                  key=lambda row: row[:2])  # fmt: skip


def pages(store: TimeSeriesStore, direction: str, limit: int, **options: Any) -> list[str]:
    ids: list[str] = []
    cursor = None
    while True:
        page = store.query(direction=direction, limit=limit, cursor=cursor, **options)
        ids += [t.id for t in page]
        if page.cursor is None:
            return ids
        cursor = page.cursor


def test_planned_names_stay_when_the_count_grows() -> None:
    assert shards_for(10 * 500) == tuple(f"s{i}" for i in range(10))
    assert shards_for(20 * 500)[:10] == shards_for(10 * 500)
    assert shards_for(90 * 500)[:20] == shards_for(20 * 500)


def test_retired_values_are_declared_in_python_and_in_files_alike(tmp_path: Any) -> None:
    from tsstore.declaration import load_specs

    (tmp_path / "spec.toml").write_text(
        '[[series]]\ncollection = "t"\nshards = ["x", "y"]\n'
        'retired = ["s0", { value = "s1", until = 2026-01-01T00:00:00Z }]\n'
    )
    [toml] = load_specs(str(tmp_path / "spec.toml"))
    until = dt.datetime(2026, 1, 1, tzinfo=UTC)
    python = SeriesSpec("t", shards=["x", "y"], retired=["s0", RetiredShard("s1", until)])
    as_map = SeriesSpec("t", shards=["x", "y"], retired={"s0": None, "s1": "2026-01-01T00:00:00Z"})
    assert python == as_map == toml
    assert python.read_shards == ("x", "y", "s0", "s1") and python.shards == ("x", "y")
    assert python.shards_from(until) == (("x", "y", "s0"), ("s1",))
    with pytest.raises(SpecError, match=r"\['x'\] are both active and retired"):
        SeriesSpec("t", shards=["x", "y"], retired=["x"])
    with pytest.raises(SpecError, match="until of retired shard 's1'"):
        SeriesSpec("t", retired=[{"value": "s1", "until": "yesterday"}])
    with pytest.raises(SpecError, match="needs 'value'"):
        SeriesSpec("t", retired=[{"until": until}])


LAYOUTS = {
    "grow 10 to 20": dict(shards=shards_for(10_000)),
    "shrink 10 to 3": dict(shards=shards_for(1_500), retired=shards_for(5_000)[3:]),
    "rename": dict(shards=["x", "y", "z"], retired=shards_for(5_000)),
}


@pytest.mark.parametrize("layout", LAYOUTS, ids=list(LAYOUTS))
def test_every_read_verb_sees_every_tick_after_a_layout_change(database: Any, layout: str) -> None:
    before = TimeSeriesStore(database, spec("ticks", shards=shards_for(5_000)), write_options=FAST)
    before.write(trading_day(300, day=DAY, seed=4))
    after = TimeSeriesStore(database, spec("ticks", **LAYOUTS[layout]), write_options=FAST)
    after.write(trading_day(75, day=DAY, seed=5))  # new ticks go to the new active values
    oracle = stored(database, "ticks")
    assert len(oracle) == 375
    ids = [i for _, i, _ in oracle]
    assert after.count() == 375
    assert pages(after, "asc", 97) == ids and pages(after, "desc", 97) == ids[::-1]  # 4 pages each
    assert [t.id for t in after.iter_ticks(direction="asc")] == ids
    frame = after.query_frame(direction="asc")
    assert len(frame) == 375 and list(frame.index) == [t for t, _, _ in oracle]
    aaa = [i for _, i, data in oracle if data["symbol"] == "AAA"]
    assert pages(after, "desc", 13, where={"symbol": "AAA"}) == aaa[::-1] and len(aaa) > 2 * 13  # 3 pages
    assert after.purge(before=AFTER, dry_run=True).matched == 375
    planned = {v for chunk in after.plan().chunks for v in chunk}
    assert planned == set(after.spec.read_shards)
    used = {data["shard"] for _, _, data in oracle} - set(before.spec.shards)
    assert used <= set(after.spec.shards)  # the writer used the active values only


def test_a_layout_that_forgets_old_values_warns_when_it_counts_everything(database: Any) -> None:
    TimeSeriesStore(database, spec("ticks", shards=shards_for(5_000)), write_options=FAST).write(
        trading_day(300, day=DAY, seed=6)
    )
    forgetful = TimeSeriesStore(database, spec("ticks", shards=shards_for(1_500)))
    with pytest.warns(UndeclaredShardsWarning, match=r"holds 300 documents but its declared shard values only \d+"):
        partial = forgetful.count()
    assert 0 < partial < 300
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a filtered or bounded count does not compare, so it cannot warn
        forgetful.count(where={"symbol": "AAA"})


def test_reads_from_a_retirement_time_on_skip_the_retired_values(database: Any) -> None:
    old = TimeSeriesStore(database, spec("ticks", shards=shards_for(45_000)), write_options=FAST)  # 90: 3 chunks
    old.write(trading_day(400, day=DAY, seed=7))
    new_spec = spec("ticks", shards=["x", "y", "z"], retired=[RetiredShard(v, AFTER) for v in shards_for(45_000)])
    new = TimeSeriesStore(database, new_spec, write_options=FAST)
    new.write(trading_day(200, day=AFTER.date(), seed=8))
    oracle = stored(database, "ticks")
    late = [i for t, i, _ in oracle if t >= AFTER]
    assert len(late) == 200 and len(oracle) == 600
    plan = new.plan(start=AFTER)
    assert plan.chunks == (("x", "y", "z"),) and len(plan.skipped) == 90
    assert "skipped 90 retired shard value(s)" in explain(new.plan(start=AFTER, limit=10)).describe()
    page = new.query(start=AFTER, direction="asc", limit=500)
    assert [t.id for t in page] == late and page.stats.chunks == 1
    assert new.count(start=AFTER) == 200 and len(new.plan(start=AFTER - dt.timedelta(days=1)).chunks) == 4
    assert pages(new, "desc", 150) == [i for _, i, _ in oracle][::-1]


# 3 and 40 declared values: one census over one or many values, each counted, with gaps before,
# between and after them (90 values ran the very same rounds as 40, only more of each ask).
@pytest.mark.parametrize(
    ("database", "declared"),
    [pytest.param(m.values[0], declared, marks=m.marks, id=f"{m.values[0]}-{declared}") for m in MODES
     for declared in (3, 40) if (m.values[0], declared) != ("memory", 40)],
    indirect=["database"],
)  # fmt: skip
def test_the_census_finds_undeclared_values_and_counts_each_value_exactly(database: Any, declared: int) -> None:
    values = shards_for(declared * 500)
    undeclared = ["a", "s1x", "zz"]  # before, between and after the declared values
    writer = TimeSeriesStore(database, spec("ticks", shards=values + tuple(undeclared)), write_options=FAST)
    writer.write(trading_day(900, day=DAY, seed=declared))
    put_doc(database, "ticks/no-shard", {"timestamp": AFTER, "symbol": "AAA"})
    # the server's time read, not estimated: an estimate from the writer's answers may be older than put_doc's commit
    store = TimeSeriesStore(database, spec("ticks", shards=values), snapshots="read")
    census = store.shard_census()
    early = dt.datetime(2000, 1, 1, tzinfo=UTC)  # a bounded count: each value's own, without the whole-count check
    every = {
        v: TimeSeriesStore(database, spec("ticks", shards=[v])).count(start=early) for v in values + tuple(undeclared)
    }
    assert {r.value for r in census.undeclared} == set(undeclared)
    assert {r.value: r.ticks for r in census.rows} == every
    assert census.total == 901 == sum(every.values()) + census.other and census.other == 1
    assert census.unnamed == 0 and len(census.problems()) == 2
    assert "carry shard values the declaration does not list" in census.describe()
    clean = TimeSeriesStore(database, spec("clean", shards=values), write_options=FAST)
    clean.write(trading_day(300, day=DAY, seed=1))
    tidy = clean.shard_census()
    assert tidy.problems() == [] and tidy.total == 300 == tidy.ticks("active")
    # the collection's count, one per value, and at most one read of the server's time
    assert tidy.stats.queries == declared + 1 + tidy.stats.snapshot_reads and tidy.stats.snapshot_reads <= 1


def test_the_census_reports_retired_ticks_after_until_and_an_uneven_spread(database: Any) -> None:
    rows = [{"symbol": "S", "timestamp": AFTER + dt.timedelta(seconds=i), "shard": "hot"} for i in range(300)]
    rows += [{"symbol": "T", "timestamp": AFTER + dt.timedelta(seconds=i), "shard": "b"} for i in range(100)]
    TimeSeriesStore(database, spec("ticks", shards=["hot", "b", "c"]), write_options=FAST).write(rows)
    store = TimeSeriesStore(database, spec("ticks", shards=["b", "c", "d"], retired=[RetiredShard("hot", AFTER)]))
    census = store.shard_census()
    assert [(r.value, r.role, r.ticks, r.late) for r in census.rows] == [
        ("b", "active", 100, None),
        ("c", "active", 0, None),
        ("d", "active", 0, None),
        ("hot", "retired", 300, 300),
    ]
    assert census.spread.even is False and census.spread.worst == "b"
    assert any("holds 300 ticks at or after its 'until'" in p for p in census.problems())


@ON_THE_EMULATOR
def test_the_planner_agrees_with_the_store_on_shards_and_reads_per_page(database: Any) -> None:
    plan = capacity_for(20_000, headroom=1.25, limits=(10, 100))
    layout = spec("ticks", shards=plan.shards)
    assert plan.shards == SeriesSpec.for_write_rate("t", writes_per_second=25_000).shards and len(plan.shards) == 50
    # The planner counts a read of the server's time a page, as a store made with snapshots="read"
    # makes it (one with estimated snapshots, the default, skips it while answers tell the time).
    store = TimeSeriesStore(database, layout, write_options=FAST, snapshots="read")
    store.write(trading_day(1000, day=DAY, seed=9))  # every chunk still fills its lean ask before 09:00
    checked = 0
    for limit in (10, 100):
        planned = plan.reads_per_page(direction="desc")[limit]
        for end_minute in (60, 200, 400):
            end = dt.datetime.combine(DAY, dt.time(8), tzinfo=UTC) + dt.timedelta(minutes=end_minute)
            page = store.query(end=end, limit=limit)
            if page.stats.refills == 0:  # a refill reads more where a chunk may hide rows
                assert page.stats.billed_reads == planned
                checked += 1
    assert checked >= 4
    advice = plan.advice(spec("t", shards=shards_for(5_000)))
    assert advice and "grow from 10 to 50 active shards" in advice[0]
    assert plan.advice(layout) == []


def test_the_planner_says_which_shapes_a_series_rate_allows() -> None:
    layout = SeriesSpec(
        "ticks",
        key_fields=["symbol"],
        shapes=[QueryShape(["symbol"]), QueryShape(["symbol", "venue"], series_rate=100), QueryShape(["venue"])],
    )
    calm = capacity_for(20_000, spec=layout, busiest_series=60)  # 75/s with the head-room
    assert [c.series for c in calm.shapes] == [False, False, False, True, False]
    assert calm.describe(layout).count(" series ") == 1
    [grow, one_query] = calm.advice(layout)
    assert "grow from 3 to 50" in grow and "[symbol] pins one series" in one_query
    assert "declare series_rate = 75 to read it with one query (101 reads per page of 100 instead of 123)" in one_query
    hot = capacity_for(20_000, spec=layout, busiest_series=900).advice(layout)
    assert len(hot) == 2 and "[symbol, venue] is read as one series, but its busiest series writes 1125/s" in hot[1]
    assert "the sharded plan is necessary, leave series_rate out" in hot[1]
    busy = capacity_for(20_000, spec=layout, busiest_series=200).advice(layout)
    assert "[symbol, venue] declares series_rate 100; raise it to 250" in busy and len(busy) == 3
    assert len(capacity_for(20_000, spec=layout).advice(layout)) == 1  # without the rate: nothing said of series
    with pytest.raises(SpecError, match="busiest_series 30000 is not allowed"):
        capacity_for(20_000, busiest_series=30_000)


def test_the_planner_refuses_bad_inputs_by_name() -> None:
    with pytest.raises(SpecError, match="writes_per_second -1"):
        capacity_for(-1)
    with pytest.raises(SpecError, match="headroom 0.5"):
        capacity_for(100, headroom=0.5)
    with pytest.raises(SpecError, match="retention"):
        capacity_for(100, retention=dt.timedelta(0))


def test_the_shards_count_and_plan_commands(tsstore_emulator: Any, tmp_path: Path) -> None:
    name = f"layout-cli-{random.randrange(10**9)}"
    client = tsstore_emulator.client(database=name)
    TimeSeriesStore(client, spec("ticks", shards=shards_for(5_000)), write_options=FAST).write(
        trading_day(300, day=DAY, seed=11)
    )
    base = '[[series]]\ncollection = "ticks"\nkey_fields = ["symbol"]\nwrites_per_second = 1500\n'
    (tmp_path / "shrunk.toml").write_text(base)
    (tmp_path / "retired.toml").write_text(base + 'retired = ["s3", "s4", "s5", "s6", "s7", "s8", "s9"]\n')
    common = ("--database", name)

    def cli(*args: str) -> Any:
        return run_cli(*args, *common, emulator=tsstore_emulator, cwd=tmp_path)

    counted = cli("count", "--spec", "shrunk.toml")
    assert counted.returncode == 0 and 0 < int(counted.stdout) < 300
    assert f"warning: 'ticks' holds 300 documents but its declared shard values only {int(counted.stdout)}" in (
        counted.stderr
    )
    census = cli("shards", "--spec", "shrunk.toml", "--check")
    assert census.returncode == 1, census.stderr
    undeclared = {
        line.split()[0]: int(line.split()[2]) for line in census.stdout.splitlines() if " undeclared " in line
    }
    assert set(undeclared) == {f"s{i}" for i in range(3, 10)} and sum(undeclared.values()) == 300 - int(counted.stdout)
    fixed = cli("shards", "--spec", "retired.toml", "--check")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "no problems" in fixed.stdout and "ticks: 300 documents" in fixed.stdout
    recount = cli("count", "--spec", "retired.toml")
    assert recount.stdout.strip() == "300" and "warning" not in recount.stderr
    planned = run_cli("capacity", "--writes-per-second", "4000", "--spec", "retired.toml", emulator=None, cwd=tmp_path)
    assert planned.returncode == 0 and "grow from 3 to 10 active shards" in planned.stdout
    assert "make retired s3, s4 … s9 active again" in planned.stdout
    client.close()


def moved_state(client: Any, collection: str) -> dict[str, dict[str, Any]]:
    """Every document's content without its shard field, by id (either mode)."""
    return {i: {k: v for k, v in d.items() if k != "shard"} for i, d in stored_docs(client, collection).items()}


@ON_THE_EMULATOR  # on the memory database: tests/test_cold_seam.py's reshard
def test_reshard_moves_every_tick_once_while_readers_see_each_exactly_once(database: Any) -> None:
    old = TimeSeriesStore(database, spec("ticks", shards=shards_for(5_000)), write_options=FAST)
    old.write(trading_day(750, day=DAY, seed=12))  # ~525 to move at 300/s: readers overlap the move
    before = moved_state(database, "ticks")
    layout = spec("ticks", shards=shards_for(1_500), retired=shards_for(5_000)[3:])
    to_move = sum(data["shard"] in layout.read_shards[3:] for data in stored_docs(database, "ticks").values())
    slow = TimeSeriesStore(database, layout, write_options=WriteOptions(ramp=False, max_ops_per_second=300))
    reader = TimeSeriesStore(database, layout)
    seen: list[tuple[int, int]] = []
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            page = reader.query(limit=2000)  # one page, one snapshot, every tick
            seen.append((reader.count(start=dt.datetime(2000, 1, 1, tzinfo=UTC)), len({t.id for t in page})))

    thread = threading.Thread(target=read)
    thread.start()
    progress: list[int] = []
    try:
        result = slow.reshard(on_progress=progress.append)
    finally:
        stop.set()
        thread.join()
    assert result.remaining == {v: 0 for v in shards_for(5_000)[3:]} and result.vanished == 0
    assert result.moved == sum(progress) == to_move > 450 and result.passes == 1
    assert len(seen) >= 2 and set(seen) == {(750, 750)}  # no read missed or doubled a tick during the move
    after = moved_state(database, "ticks")
    assert after == before  # the same ids with the same content: only the shard field changed
    census = reader.shard_census()
    assert census.ticks("retired") == 0 and census.ticks("active") == 750 == census.total
    assert slow.reshard() == ReshardResult(0, 0, result.remaining, 0)  # idempotent: nothing left to move


def test_reshard_command_resumes_after_sigkill_exactly(tsstore_emulator: Any, tmp_path: Path) -> None:
    name = f"reshard-cli-{random.randrange(10**9)}"
    client = tsstore_emulator.client(database=name)
    TimeSeriesStore(client, spec("ticks", shards=shards_for(5_000)), write_options=FAST).write(
        trading_day(750, day=DAY, seed=13)
    )
    before = moved_state(client, "ticks")
    retired = shards_for(5_000)[3:]
    (tmp_path / "spec.toml").write_text(
        '[[series]]\ncollection = "ticks"\nkey_fields = ["symbol"]\nwrites_per_second = 1500\n'
        f"retired = {list(retired)!r}\n".replace("'", '"')
    )
    early = dt.datetime(2000, 1, 1, tzinfo=UTC)
    # It counts what another process wrote a moment before: at the server's time, not an estimate
    # (an estimate may miss the killed run's last batch: it left 135 counted where 116 were left).
    on_retired = TimeSeriesStore(client, spec("ticks", shards=retired), snapshots="read")
    initial = on_retired.count(start=early)
    env = dict(os.environ, FIRESTORE_EMULATOR_HOST=tsstore_emulator.address)
    command = [sys.executable, "-m", "tsstore", "reshard", "--spec", "spec.toml", "--database", name]
    # ~525 ticks to move at 200/s: batches of 200, a second apart; killed after the first
    first = subprocess.Popen([*command, "--max-rate", "200"], cwd=tmp_path, env=env, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while on_retired.count(start=early) > initial - 100 and time.monotonic() < deadline:
        time.sleep(0.1)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    left = on_retired.count(start=early)
    assert 0 < left < initial, "the first run was not killed half-way"
    assert moved_state(client, "ticks") == before  # killed mid-move: nothing lost, nothing doubled
    second = run_cli(*command[3:], emulator=tsstore_emulator, cwd=tmp_path)  # the resumed run: in this process
    assert second.returncode == 0, second.stderr
    assert f"moved {left} ticks off retired shard values {', '.join(retired)}; they now hold no tick" in second.stdout
    assert "census: retired values hold 0, active values 750, collection 750" in second.stdout
    assert "moving" in second.stderr  # the progress bar
    assert moved_state(client, "ticks") == before
    assert {d.get("shard") for d in client.collection("ticks").stream()} <= set(shards_for(1_500))
    again = run_cli(*command[3:], emulator=tsstore_emulator, cwd=tmp_path)  # nothing to kill: in this process
    assert again.returncode == 0 and "moved 0 ticks" in again.stdout and "census: retired values hold 0" in again.stdout
    client.close()


def test_capacity_takes_the_retention_from_the_declarations_ttl(tmp_path: Path) -> None:
    (tmp_path / "ttl.toml").write_text(
        '[[series]]\ncollection = "ticks"\nshards = ["x", "y", "z"]\nexpire_after = "90 days"\n'
    )
    planned = run_cli("capacity", "--writes-per-second", "1200", "--spec", "ttl.toml", emulator=None, cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr
    assert "storage at a retention of 90 days" in planned.stdout
    given = run_cli("capacity", "--writes-per-second", "1200", "--spec", "ttl.toml", "--retention", "7 days",
                    emulator=None, cwd=tmp_path)  # fmt: skip
    assert "storage at a retention of 7 days" in given.stdout  # the option wins


def test_the_capacity_planner_prices_tiers_of_bars_beside_the_ticks() -> None:
    """Ticks for a week and minute bars for ten years: each tier's bars a day (one per series
    and interval, never more than the ticks), its storage at its retention, and its writes,
    storage and deletes in the monthly cost."""
    week, decade = dt.timedelta(days=7), dt.timedelta(days=3650)
    flat = capacity_for(5_000, retention=week)
    tiered = capacity_for(5_000, retention=week, series=4_000, tiers=[("1min", decade), ("1D", None)])
    minute, day = tiered.tiers
    assert (minute.bars_per_day, day.bars_per_day) == (4_000 * 1_440, 4_000)
    assert minute.stored_gib == minute.bars_per_day * 3_650 * minute.bar_bytes / 2**30
    assert day.stored_gib == day.bars_per_day * 3_650 * day.bar_bytes / 2**30  # kept for good: priced at ten years
    assert {k: v for k, v in tiered.costs.items() if not k.startswith("bar ")} == flat.costs
    assert tiered.costs["bar storage"] == (minute.stored_gib + day.stored_gib) * tiered.prices.storage_gib_month
    assert tiered.costs["bar deletes"] == minute.bars_per_day * 30 / 1e5 * tiered.prices.deletes_per_100k
    assert "1min bars: 5,760,000 a day" in tiered.describe()
    sparse = capacity_for(10, series=4_000, tiers=[("1s", None)])
    assert sparse.tiers[0].bars_per_day == 10 * 86_400  # no more bars than ticks
    with pytest.raises(SpecError, match="tiers need the number of series"):
        capacity_for(5_000, tiers=[("1min", decade)])
    with pytest.raises(SpecError, match="tier interval 'soon' is not a duration"):
        capacity_for(5_000, series=3, tiers=[("soon", None)])


def test_the_planner_sizes_a_datastore_mode_plan_by_its_rules() -> None:
    """In Datastore mode no single-field exemption is deployed (every property keeps its two
    built-in index entries, each holding the kind's name instead of a parent's), composite
    entries hold no parent name, and the unit prices are the same; the plan says that the
    timestamp's built-in index stays."""
    layout = spec("ticks", shards=shards_for(2_000), expire_after=dt.timedelta(days=7))
    native = capacity_for(2_000, spec=layout)
    datastore = capacity_for(2_000, spec=layout, mode="datastore")
    assert (native.mode, datastore.mode) == ("native", "datastore") and native.shards == datastore.shards
    assert datastore.tick_bytes == native.tick_bytes  # an entity and a document count the same bytes here
    exempt = len(field_overrides(layout))
    assert exempt > 0 and datastore.index_entries_per_tick == native.index_entries_per_tick + 2 * exempt
    assert datastore.costs["writes"] == native.costs["writes"]  # the same unit prices
    assert "built-in ascending and descending index, the timestamp's too" in datastore.describe()
    assert "built-in" not in native.describe()
    with pytest.raises(SpecError, match="mode 'sql' is not allowed; give native or datastore"):
        capacity_for(2_000, mode="sql")  # type: ignore[arg-type]
