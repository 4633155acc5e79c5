"""Counts, purges, TTL and per-series counters in the store, on the emulator and (what needs no
command) on the memory database."""

from __future__ import annotations

import asyncio
import collections
import datetime as dt
import random
import uuid
import warnings
from pathlib import Path
from collections.abc import Iterator
from typing import Any

import pytest
from google.cloud import firestore

from tests.cli import run_cli
from tests.conftest import FirebaseTools, unique_database_id
from tests.shared import EMULATOR_MODES, MEMORY, NATIVE, async_twin, mode_client, stored_docs
from tsstore import (
    AsyncTimeSeriesStore,
    Query,
    QueryError,
    QueryShape,
    RetentionError,
    RetentionWarning,
    Rollup,
    SeriesSpec,
    SpecError,
    TimeSeriesStore,
)
from tsstore.indexes.build import generate, render
from tsstore.local.synthetic import trading_day
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

UTC = dt.timezone.utc
FAST = EMULATOR_WRITE_OPTIONS  # no ramp, no ceiling: the emulator is the tests' own
BOTH = ("desc", "asc")
DAY = dt.date(2019, 1, 2)
OPEN = dt.datetime(2019, 1, 2, 8, tzinfo=UTC)


def forty_shard_spec(collection: str, **options: Any) -> SeriesSpec:
    return SeriesSpec(
        collection,
        shards=[f"s{i:02d}" for i in range(40)],
        shapes=[QueryShape(("exchange",), BOTH), QueryShape(("symbol",), BOTH)],
        key_fields=["symbol"],
        **options,
    )


def stored_rows(client: Any, collection: str) -> dict[str, dict[str, Any]]:
    return stored_docs(client, collection)


#: Native mode and the memory database: what a test of the store's own requests runs on.
NATIVE_AND_MEMORY = [NATIVE, MEMORY]


@pytest.fixture(params=NATIVE_AND_MEMORY)
def database(request: pytest.FixtureRequest, uses_emulator: None) -> Iterator[Any]:
    """A client on a database of this test's own: Native mode's, or a memory database."""
    client = mode_client(request, request.param, unique_database_id(request.node.name))
    yield client
    client.close()


@pytest.fixture(scope="module", params=NATIVE_AND_MEMORY)
def counted(request: pytest.FixtureRequest, uses_emulator: None) -> Any:
    client = mode_client(request, request.param, f"count-{uuid.uuid4().hex[:10]}")
    store = TimeSeriesStore(client, forty_shard_spec("ticks"), write_options=FAST)
    store.write(trading_day(300, day=DAY, seed=21, symbols=8))
    yield store, list(stored_rows(client, "ticks").values())
    store.close()
    client.close()


def test_counts_equal_the_oracle(counted: Any) -> None:
    store, rows = counted
    rng = random.Random(8)
    symbols = sorted({r["symbol"] for r in rows})
    exchanges = sorted({r["exchange"] for r in rows})
    for _ in range(12):
        where: dict[str, Any] = rng.choice(
            [{}, {"exchange": rng.choice(exchanges)}, {"symbol": rng.sample(symbols, rng.randint(1, 3))}]
        )
        start = OPEN + dt.timedelta(minutes=rng.randrange(0, 250)) if rng.random() < 0.6 else None
        end = OPEN + dt.timedelta(minutes=rng.randrange(260, 510)) if rng.random() < 0.6 else None

        def ok(r: dict[str, Any], where: dict[str, Any] = where, start: Any = start, end: Any = end) -> bool:
            for field, value in where.items():
                if (r[field] not in value) if isinstance(value, list) else r[field] != value:
                    return False
            return (start is None or r["timestamp"] >= start) and (end is None or r["timestamp"] < end)

        assert store.count(where=where, start=start, end=end) == sum(map(ok, rows)), (where, start, end)
    assert store.count(start=OPEN + dt.timedelta(days=3)) == 0


def test_purge_removes_exactly_the_ticks_before_the_cutoff(database: Any, collection_name: str) -> None:
    client = database
    store = TimeSeriesStore(client, forty_shard_spec(collection_name), write_options=FAST)
    store.write(trading_day(800, day=DAY, seed=5))
    written = stored_rows(client, collection_name)
    assert len(written) == 800
    cutoff = OPEN + dt.timedelta(hours=6, minutes=7)
    doomed = {i for i, r in written.items() if r["timestamp"] < cutoff}
    assert 500 < len(doomed) < 800  # more than one batch of deletes

    dry = store.purge(before=cutoff, dry_run=True)
    assert (dry.matched, dry.deleted, dry.dry_run) == (len(doomed), 0, True)
    assert len(stored_rows(client, collection_name)) == 800  # the dry run deleted nothing

    progress: list[int] = []
    result = store.purge(before=cutoff, on_progress=progress.append)
    assert (result.matched, result.deleted) == (len(doomed), len(doomed)) and sum(progress) == len(doomed)
    remaining = stored_rows(client, collection_name)
    assert set(remaining) == set(written) - doomed
    assert all(remaining[i] == written[i] for i in remaining)  # the rest untouched

    # a filtered range purge takes only what matches
    start, end = cutoff + dt.timedelta(hours=1), cutoff + dt.timedelta(hours=2)
    hit = {i for i, r in remaining.items() if start <= r["timestamp"] < end and r["exchange"] == "EXCHG1"}
    bounds = Query(start=start, end=end, where={"exchange": "EXCHG1"})
    assert store.purge(bounds, dry_run=True).matched == len(hit) > 0
    assert store.purge(bounds).deleted == len(hit)
    assert set(stored_rows(client, collection_name)) == set(remaining) - hit


def test_purge_needs_a_bound(database: Any, collection_name: str) -> None:
    client = database
    store = TimeSeriesStore(client, forty_shard_spec(collection_name), write_options=FAST)
    store.write(trading_day(20, day=DAY, seed=1))
    with pytest.raises(QueryError, match="purge needs a time bound"):
        store.purge()
    with pytest.raises(QueryError, match="purge needs a time bound"):
        store.purge(where={"exchange": "EXCHG1"})
    with pytest.raises(QueryError, match="either before .everything older. or start/end"):
        store.purge(before=OPEN, end=OPEN)
    with pytest.raises(
        QueryError, match=r"purge\(\) got unknown option\(s\) after; it takes before, start, end, where, dry_run"
    ):
        store.purge(after=OPEN)
    with pytest.raises(QueryError, match="purge does not take limit"):
        store.purge(Query(limit=5), before=OPEN)
    assert len(stored_rows(client, collection_name)) == 20


def test_ttl_field_is_written_and_declared(
    client: firestore.Client, collection_name: str, firebase_tools: FirebaseTools, tmp_path: Path
) -> None:
    spec = forty_shard_spec(collection_name, expire_after=dt.timedelta(days=30))
    store = TimeSeriesStore(client, spec, write_options=FAST)
    store.write(trading_day(50, day=DAY, seed=2))
    rows = stored_rows(client, collection_name).values()
    assert len(rows) == 50
    assert all(r["expireAt"] == r["timestamp"] + dt.timedelta(days=30) for r in rows)
    document = generate([spec])
    assert {"collectionGroup": collection_name, "fieldPath": "expireAt", "ttl": True, "indexes": []} in document[
        "fieldOverrides"
    ]
    path = tmp_path / "firestore.indexes.json"
    path.write_text(render(document))
    assert firebase_tools.validate("indexes", path) == {"ok": True, "indexes": 6, "fieldOverrides": 3}


def test_expire_after_must_be_a_positive_duration() -> None:
    with pytest.raises(SpecError, match="expire_after .* positive datetime.timedelta"):
        SeriesSpec("t", expire_after=dt.timedelta(0))
    with pytest.raises(SpecError, match="expire_after 30 is not allowed"):
        SeriesSpec("t", expire_after=30)  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", EMULATOR_MODES)  # on the memory database: tests/test_backend.py
def test_series_counters_count_each_batch_once(mode: str, request: pytest.FixtureRequest, uses_emulator: None,
                                               collection_name: str) -> None:  # fmt: skip
    spec = forty_shard_spec(collection_name, count_by=["symbol"], counter_shards=10)
    client = mode_client(request, mode, unique_database_id(request.node.name))
    store = TimeSeriesStore(client, spec, write_options=FAST)
    rows = list(trading_day(1000, day=DAY, seed=3))  # 2 batches of 500
    store.write(rows)
    store.write(rows[:300])  # written again: present, counted nothing
    expected = collections.Counter(r["symbol"] for r in rows)
    for symbol, n in expected.items():
        counter = store.series_counter({"symbol": symbol})
        assert counter.value() == n
        touched = [d for d in stored_docs(client, f"{counter.path}/shards").values() if d.get("count")]
        # one increment per batch per series: at most 2 shards touched (one per tick would touch all 10)
        assert n > 50 and 1 <= len(touched) <= 2, (symbol, n, len(touched))
    assert store.count() == 1000
    assert not stored_docs(client, f"{collection_name}_counts_receipts")  # every receipt deleted once landed
    with pytest.raises(Exception, match="must name exactly the count_by fields"):
        store.series_counter({"exchange": "X"})
    client.close()


# --- the CLI, as a user runs it -----------------------------------------------------------------


def test_counter_count_and_purge_commands(emulator: Any, tmp_path: Path) -> None:
    database = f"cli-{uuid.uuid4().hex[:10]}"
    common = ("--database", database)
    created = run_cli("counter", "create", "counters/likes", "--shards", "5", *common, emulator=emulator, cwd=tmp_path)
    assert created.returncode == 0, created.stderr
    assert created.stdout.strip() == "counters/likes: 5 shards"
    assert "using emulator at" in created.stderr
    for by in ("3", "-1", "10"):
        assert (
            run_cli(
                "counter", "incr", "counters/likes", "--by", by, *common, emulator=emulator, cwd=tmp_path
            ).returncode
            == 0
        )
    live = run_cli("counter", "get", "counters/likes", "--live", *common, emulator=emulator, cwd=tmp_path)
    assert live.stdout.startswith("12 (as of ") and "live sum" in live.stdout
    rolled = run_cli("counter", "rollup", "counters/likes", *common, emulator=emulator, cwd=tmp_path)
    assert rolled.stdout.strip() == "counters/likes: rolled up 12"
    got = run_cli("counter", "get", "counters/likes", *common, emulator=emulator, cwd=tmp_path)
    assert got.stdout.startswith("12 (as of ") and "roll-up" in got.stdout
    bad = run_cli("counter", "create", "counters", "--shards", "0", *common, emulator=emulator, cwd=tmp_path)
    assert bad.returncode == 2 and "0 is not in the range 1<=x<=10000" in bad.stderr
    bad = run_cli("counter", "create", "counters", "--shards", "2", *common, emulator=emulator, cwd=tmp_path)
    assert bad.returncode == 2 and "has 1 segments" in bad.stderr

    (tmp_path / "schema.py").write_text(
        "from tsstore import SeriesSpec\nTICKS = SeriesSpec('ticks', shapes=['exchange'], key_fields=['symbol'])\n"
    )
    client = emulator.client(database=database)
    spec = SeriesSpec("ticks", shapes=["exchange"], key_fields=["symbol"])
    rows = list(trading_day(200, day=DAY, seed=4))
    TimeSeriesStore(client, spec, write_options=FAST).write(rows)
    cutoff = "2019-01-02T12:00:00+00:00"
    older = sum(r["timestamp"] < dt.datetime.fromisoformat(cutoff) for r in rows)
    spec_args = ("--spec", "schema:TICKS", *common)
    counted = run_cli("count", *spec_args, emulator=emulator, cwd=tmp_path)
    assert counted.stdout.strip() == "200", counted.stderr
    ex1 = run_cli("count", *spec_args, "--where", "exchange=EXCHG1", "--end", cutoff, emulator=emulator, cwd=tmp_path)
    assert int(ex1.stdout) == sum(
        r["exchange"] == "EXCHG1" and r["timestamp"] < dt.datetime.fromisoformat(cutoff) for r in rows
    )
    dry = run_cli("purge", *spec_args, "--before", cutoff, "--dry-run", emulator=emulator, cwd=tmp_path)
    assert dry.stdout.strip() == f"dry run: {older} tick(s) would be deleted"
    refused = run_cli("purge", *spec_args, "--before", cutoff, emulator=emulator, cwd=tmp_path, stdin="n\n")
    assert refused.returncode == 1 and "Aborted" in refused.stderr
    assert run_cli("count", *spec_args, emulator=emulator, cwd=tmp_path).stdout.strip() == "200"
    done = run_cli("purge", *spec_args, "--before", cutoff, "--yes", emulator=emulator, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"deleted {older} tick(s)" and "deleting" in done.stderr  # the progress bar
    assert run_cli("count", *spec_args, emulator=emulator, cwd=tmp_path).stdout.strip() == str(200 - older)
    unbounded = run_cli("purge", *spec_args, "--yes", emulator=emulator, cwd=tmp_path)
    assert unbounded.returncode == 2 and "give --before T, or --start T and/or --end T" in unbounded.stderr
    client.close()


# --- retention tiers: a purge does not outrun the roll-ups ----------------------------------------


@pytest.mark.parametrize("mode", NATIVE_AND_MEMORY)
def test_the_retention_guard_refuses_then_allows_after_the_rollup_catches_up(
    request: pytest.FixtureRequest, uses_emulator: None, mode: str, tmp_path: Path
) -> None:
    database = f"tiers-{uuid.uuid4().hex[:10]}"
    client = mode_client(request, mode, database)
    spec = SeriesSpec("ticks", shapes=["symbol"], key_fields=["symbol"])
    store = TimeSeriesStore(client, spec, write_options=FAST)
    rows = list(trading_day(300, day=DAY, seed=12))
    store.write(rows)
    bars = Rollup(spec, interval="1h", by="symbol", volume="volume")
    never = Rollup(spec, interval="1D", by="symbol", collection="ticks_never")
    noon, two = OPEN + dt.timedelta(hours=4), OPEN + dt.timedelta(hours=6)

    with pytest.raises(RetentionError, match=r"'ticks_never' \(never run\).*nothing may be purged") as never_run:
        store.purge(before=noon, rollups=[never], dry_run=True)
    assert (never_run.value.limit, never_run.value.rollups) == (None, ("ticks_never",))

    assert store.rollup(bars, until=noon).watermark == noon  # found by its watermark from now on
    refused_at = two
    with pytest.raises(RetentionError) as refused:
        store.purge(before=refused_at)
    assert refused.value.limit == noon and refused.value.rollups == (bars.name,)
    assert f"watermark {noon.isoformat()}" in str(refused.value) and f"purge before {noon.isoformat()}" in str(
        refused.value
    )
    with pytest.raises(RetentionError):  # no end: everything from start on
        store.purge(start=OPEN)
    assert store.count() == 300  # nothing was deleted

    older = sum(r["timestamp"] < noon for r in rows)
    assert store.purge(before=noon).deleted == older  # up to the watermark is allowed

    assert store.rollup(bars, until=two + dt.timedelta(minutes=30)).watermark == two  # the roll-up catches up
    until_two = sum(noon <= r["timestamp"] < two for r in rows)

    async def purge_async() -> Any:
        async with async_twin(store, request) as aclient, AsyncTimeSeriesStore(aclient, spec, write_options=FAST) as aio:
            return await aio.purge(before=two)

    assert asyncio.run(purge_async()).deleted == until_two  # the same request on the async store
    assert store.count() == 300 - older - until_two
    if mode == "memory":  # the command: on the emulator
        store.close()
        return
    emulator = request.getfixturevalue("emulator")
    later = OPEN + dt.timedelta(hours=8)
    (tmp_path / "schema.py").write_text(
        "from tsstore import Rollup, SeriesSpec\n"
        "TICKS = SeriesSpec('ticks', shapes=['symbol'], key_fields=['symbol'])\n"
        "DECLARATION = [TICKS, Rollup(TICKS, interval='1h', by='symbol', volume='volume')]\n"
    )
    common = ("--spec", "schema:DECLARATION", "--collection", "ticks", "--database", database)
    cli = run_cli("purge", *common, "--before", later.isoformat(), "--yes", emulator=emulator, cwd=tmp_path)
    assert cli.returncode == 1 and cli.stderr.count("\nError: ") == 1 and "Traceback" not in cli.stderr
    assert f"purge --before {two.isoformat()} at most" in cli.stderr and "--past-rollups" in cli.stderr
    forced = run_cli(
        "purge", *common, "--before", later.isoformat(), "--yes", "--past-rollups", emulator=emulator, cwd=tmp_path
    )
    assert forced.returncode == 0, forced.stderr
    assert forced.stdout.strip() == f"deleted {sum(two <= r['timestamp'] < later for r in rows)} tick(s)"
    store.close()
    client.close()


def test_a_rollup_warns_when_the_ticks_ttl_may_have_deleted_what_it_reads(database: Any) -> None:
    client = database
    spec = SeriesSpec("ticks", shapes=["symbol"], key_fields=["symbol"], expire_after=dt.timedelta(days=7))
    with pytest.raises(SpecError, match="its ticks would expire before their bar closes"):
        Rollup(spec, interval="7D", by="symbol")
    store = TimeSeriesStore(client, spec, write_options=FAST)
    store.write(trading_day(50, day=DAY, seed=3))  # 2019: long past their expiry
    bars = Rollup(spec, interval="1h", by="symbol")
    with pytest.warns(RetentionWarning, match=r"expire_after \(7 days, 0:00:00\) may be deleted by their TTL"):
        done = store.rollup(bars)
    assert done.bars > 0  # it warns, and still rolls up what is there
    fresh = TimeSeriesStore(client, SeriesSpec("fresh", key_fields=["symbol"]), write_options=FAST)
    fresh.write(trading_day(20, day=DAY, seed=4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no TTL: nothing to warn of
        fresh.rollup(Rollup(fresh.spec, interval="1h", by="symbol"))
