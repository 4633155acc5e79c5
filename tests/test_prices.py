"""The money of reads and plans (issue 62): the price table by location, refused locations, a
read's price after it ran against the bound ``explain`` gives before, on the emulator in both
modes, and the figures of ``docs/howto/cost.md`` worked out again by hand from the published
unit prices (nam5: reads $0.06, writes $0.18, deletes $0.02 per 100 000; storage $0.18 a
GiB-month)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from tests.cli import tsstore
from tests.shared import EMULATOR_MODES, mode_client
from tsstore import QueryShape, SeriesSpec, TimeSeriesStore, WriteOptions, capacity_for, prices_for, shards_for
from tsstore.demo import SPEC as DEMO_SPEC
from tsstore.errors import SpecError, UsageError
from tsstore.local.synthetic import SEED_INSTRUMENTS, trading_day
from tsstore.prices import DATASTORE_PRICING, FIRESTORE_PRICING, PRICE_TABLE, usd
from tsstore.read.cost import ReadStats
from tsstore.read.explain import explain
from tsstore.read.plan import plan_query
from tsstore.spec import spec_from_mapping

#: The seed's three queries (the sharded-timestamps page): newest 5 of each.
SEED_QUERIES = ({"instrumentType": "commonstock"}, {"exchange": "EXCHG1"}, {"price.currency": "USD"})
#: The seed's collection: shards x, y, z and the three shapes its queries need.
SEED = SeriesSpec("instruments", shards=["x", "y", "z"], shapes=["instrumentType", "exchange", "price.currency"],
                  location="nam5")  # fmt: skip


def test_the_table_holds_the_published_unit_prices_of_each_location() -> None:
    nam5, iowa = prices_for("nam5"), prices_for("us-central1")
    assert (nam5.reads_per_100k, nam5.writes_per_100k, nam5.deletes_per_100k, nam5.storage_gib_month) == (
        0.06, 0.18, 0.02, 0.18)  # fmt: skip
    assert (iowa.reads_per_100k, iowa.writes_per_100k, iowa.deletes_per_100k, iowa.storage_gib_month) == (
        0.03, 0.09, 0.01, 0.15)  # fmt: skip
    assert {"nam5", "eur3", "us-central1", "us-east1", "europe-west1", "europe-west3", "asia-northeast1"} <= set(
        PRICE_TABLE)  # fmt: skip
    # Datastore mode: the same unit prices, from its own pricing page
    ds = prices_for("us-central1", mode="datastore")
    assert (ds.reads_per_100k, ds.writes_per_100k, ds.source, ds.mode) == (0.03, 0.09, DATASTORE_PRICING, "datastore")
    assert nam5.source == FIRESTORE_PRICING and nam5.as_of == "2026-11"
    assert nam5.reads(100_000) == pytest.approx(0.06) and iowa.writes(50_000) == pytest.approx(0.045)


@pytest.mark.parametrize("declare", [
    lambda: SeriesSpec("ticks", location="mars-north1"),
    lambda: spec_from_mapping({"collection": "ticks", "location": "mars-north1"}),
    lambda: prices_for("mars-north1"),
])  # fmt: skip
def test_a_location_without_a_price_is_refused_by_name_listing_the_known_ones(declare: Any) -> None:
    with pytest.raises(SpecError) as refused:
        declare()
    assert isinstance(refused.value, UsageError)
    assert "'mars-north1' has no price" in str(refused.value)
    assert all(known in str(refused.value) for known in PRICE_TABLE)


def test_an_undeclared_location_is_priced_at_nam5_and_says_so() -> None:
    told = explain(plan_query(SeriesSpec("ticks"), limit=10))
    assert told.prices.location == "nam5" and not told.prices.declared
    assert "nam5 (no location declared) prices" in told.describe(cost=True)
    declared = explain(plan_query(SeriesSpec("ticks", location="europe-west1"), limit=10))
    assert "europe-west1 prices, Native mode, of 2026-11" in declared.describe(cost=True)
    assert "(no location declared)" not in declared.describe(cost=True)
    assert "price" not in explain(plan_query(SeriesSpec("ticks"), limit=10)).describe()  # as before, unless asked


def test_usd_shows_a_reads_price_by_its_significant_digits() -> None:
    assert [usd(0.0000036), usd(0.0360054), usd(12_775.074), usd(0)] == ["0.0000036", "0.036", "12,775.07", "0.00"]


@pytest.mark.parametrize("mode", EMULATOR_MODES)
def test_the_bound_before_is_at_least_the_price_after_in_both_modes(
    mode: str, request: pytest.FixtureRequest, uses_emulator: None
) -> None:
    """The seed's three queries, and pages of a 40-shard collection (two chunks: refills, a
    snapshot) with a value range (Datastore mode: variants), cost at most explain's bound."""
    client = mode_client(request, mode, f"prices-{mode}")
    seed = TimeSeriesStore(client, SEED, write_options=WriteOptions(ramp=False))
    seed.write(list(SEED_INSTRUMENTS))
    after_total = 0
    for where in SEED_QUERIES:
        bound = seed.explain(where=where, limit=5).cost()
        page = seed.query(where=where, limit=5)
        after = page.stats.cost(seed.explain(where=where, limit=5).prices)
        assert bound is not None and after.usd <= bound.usd and after.reads <= bound.reads
        assert (len(page), after.reads, bound.reads) == (2, 2, 6)  # each matches 2 of the 3 instruments
        after_total += after.reads
    # by hand: 3 queries x 2 documents at $0.06 per 100 000 reads; the bound 3 x (5 + 1)
    assert after_total / 100_000 * 0.06 == pytest.approx(0.0000036)

    wide = SeriesSpec("quotes", shards=shards_for(20_000), shapes=[QueryShape(["symbol"], ["desc", "asc"]), QueryShape(["exchange"], ranges=["volume"])],
                      key_fields=["symbol"], location="us-central1")  # fmt: skip
    quotes = TimeSeriesStore(client, wide, write_options=WriteOptions(ramp=False))
    quotes.write(list(trading_day(800)))
    asks: list[dict[str, Any]] = [
        {"where": {"symbol": ["AAA", "BBB", "CCC"]}, "limit": 20},
        {"where": [("exchange", "==", "EXCHG1"), ("volume", ">=", 1000)], "limit": 15},
        {"where": {"symbol": "AAA"}, "limit": 50, "direction": "asc"},
    ]
    for ask in asks:
        told = quotes.explain(**ask)
        page = quotes.query(**ask)
        bound, after = told.cost(), page.stats.cost(told.prices)
        assert bound is not None and page.stats.billed_reads > 0
        assert after.reads <= bound.reads, (ask, page.stats.describe(), told.bound_reads)
        assert after.usd <= bound.usd and after.prices.location == "us-central1"
        assert after.prices.mode == mode
    # the bound is reached: every chunk asked for limit + 1 and each holding that many, and the
    # server's time read for the snapshot
    eager = TimeSeriesStore(client, wide, lean=False, snapshots="read")
    told, page = eager.explain(where={"symbol": ["AAA", "BBB", "CCC"]}, limit=20), eager.query(**asks[0])
    assert page.stats.cost(told.prices).reads == told.bound_reads == 4 * 21 + 1, page.stats.describe()


def test_the_seed_queries_before_and_after_by_hand() -> None:
    """The bound of each seed query is one chunk asked for limit + 1 = 6 documents (the three
    shards fit one `in`): 3 x 6 reads at $0.06 per 100 000."""
    bounds = [explain(plan_query(SEED, where=where, limit=5)).cost() for where in SEED_QUERIES]
    assert [b.reads for b in bounds if b is not None] == [6, 6, 6]
    assert sum(b.usd for b in bounds if b is not None) == pytest.approx(3 * 6 / 100_000 * 0.06)  # $0.0000108
    stats = ReadStats()
    for _ in SEED_QUERIES:
        stats.query_done(2)  # what each returned on the emulator (the test above)
    assert stats.cost(prices_for("nam5")).usd == pytest.approx(3 * 2 / 100_000 * 0.06)  # $0.0000036


def test_a_day_of_the_demo_by_hand() -> None:
    """`tsstore demo` writes the seed's 3 instruments and 20 000 synthetic ticks: 20 003 writes,
    and a month of their storage, at nam5's prices (the demo declares no location)."""
    prices = prices_for(DEMO_SPEC.location)
    sizes = capacity_for(1, spec=DEMO_SPEC)
    ticks = 20_003
    assert prices.writes(ticks) == pytest.approx(20_003 / 100_000 * 0.18)  # $0.0360054
    gib = ticks * sizes.stored_bytes_per_tick / 2**30
    assert prices.storage(gib) == pytest.approx(20_003 * sizes.stored_bytes_per_tick / 2**30 * 0.18)
    assert sizes.stored_bytes_per_tick == 4190  # 212 B of document, 3 978 B of its 34 index entries


def test_a_month_of_20000_ticks_a_second_by_hand() -> None:
    """20 000 ticks/s for 30 days, kept 7 days (deletes as many as are written), read 10 000
    pages of 100 ticks a day newest first, at nam5."""
    plan = capacity_for(20_000, retention=dt.timedelta(days=7), pages_per_day=10_000, page_limit=100,
                        prices=prices_for("nam5"))  # fmt: skip
    assert plan.costs["writes"] == pytest.approx(20_000 * 86_400 * 30 / 100_000 * 0.18)  # 93 312.00
    assert plan.costs["deletes"] == pytest.approx(20_000 * 86_400 * 30 / 100_000 * 0.02)  # 10 368.00
    # 50 shards (25 000 writes/s with head-room) in chunks of 30 and 20: a page of 100 asks for 101
    # rows, lean: floor(1.2 x 101 x 30/50) + 1 = 73 and floor(1.2 x 101 x 20/50) + 1 = 49, and 1
    # read of the server's time
    assert len(plan.shards) == 50 and (73 + 49 + 1) == 123
    assert plan.costs["reads"] == pytest.approx(10_000 * 30 * 123 / 100_000 * 0.06)  # 22.14
    stored = 20_000 * 86_400 * 7 * plan.stored_bytes_per_tick / 2**30
    assert plan.costs["storage"] == pytest.approx(stored * 0.18)
    assert plan.monthly_cost == pytest.approx(93_312 + 10_368 + 22.14 + stored * 0.18)


def test_tsstore_explain_cost_names_the_price_its_source_and_date(tmp_path: Path) -> None:
    declaration = tmp_path / "seed.toml"
    declaration.write_text('[[series]]\ncollection = "instruments"\nshards = ["x", "y", "z"]\n'
                           'shapes = ["exchange"]\nlocation = "us-central1"\n')  # fmt: skip
    told = tsstore("explain", "--spec", str(declaration), "--where", "exchange=EXCHG1", "--limit", "5", "--cost")
    assert told.returncode == 0, told.stderr
    assert ("price of a page: at most USD 0.0000018 (6 billed reads) at us-central1 prices, Native mode, of 2026-11 "
            "(https://cloud.google.com/firestore/pricing)") in told.stdout  # fmt: skip
    figures = json.loads(tsstore("explain", "--spec", str(declaration), "--where", "exchange=EXCHG1", "--limit", "5",
                                 "--cost", "--format", "json").stdout)  # fmt: skip
    assert (figures["bound_reads"], figures["prices"]["location"], figures["prices"]["as_of"]) == (6, "us-central1",
                                                                                                   "2026-11")
    assert figures["bound_usd"] == pytest.approx(6 / 100_000 * 0.03)
    declaration.write_text('[[series]]\ncollection = "instruments"\nlocation = "us-centrall1"\n')
    refused = tsstore("explain", "--spec", str(declaration), "--limit", "5", "--cost")
    assert refused.returncode == 2 and "'us-centrall1' has no price" in refused.stderr + refused.stdout
    assert "Traceback" not in refused.stderr + refused.stdout


def test_capacity_prices_the_declared_location_or_the_one_given(tmp_path: Path) -> None:
    spec = SeriesSpec("ticks", location="us-central1")
    assert capacity_for(1000, spec=spec).costs["writes"] == pytest.approx(1000 * 86_400 * 30 / 100_000 * 0.09)
    assert capacity_for(1000).costs["writes"] == pytest.approx(1000 * 86_400 * 30 / 100_000 * 0.18)  # nam5
    declaration = tmp_path / "ticks.toml"
    declaration.write_text('[[series]]\ncollection = "ticks"\nlocation = "us-central1"\n')
    planned = tsstore("capacity", "--writes-per-second", "1000", "--spec", str(declaration))
    assert planned.returncode == 0, planned.stderr
    assert "monthly cost in USD at us-central1 prices, Native mode, of 2026-11 (https://cloud.google.com/firestore/" \
           "pricing): writes 2,332.80" in planned.stdout  # 1 000 x 86 400 x 30 / 100 000 x 0.09
    told = tsstore("capacity", "--writes-per-second", "1000", "--spec", str(declaration), "--location", "eur3")
    assert "at eur3 prices" in told.stdout and "writes 4,665.60" in told.stdout  # x 0.18
    refused = tsstore("capacity", "--writes-per-second", "1000", "--location", "us-central")
    assert refused.returncode == 2 and "'us-central' has no price" in refused.stderr + refused.stdout


def test_tsstore_query_and_count_cost_print_the_price_after(tsstore_emulator: Any, tmp_path: Path) -> None:
    declaration = tmp_path / "seed.toml"
    declaration.write_text('[[series]]\ncollection = "instruments"\nshards = ["x", "y", "z"]\n'
                           'shapes = ["exchange"]\nkey_fields = ["symbol"]\nlocation = "europe-west1"\n')  # fmt: skip
    rows = tmp_path / "rows.csv"
    rows.write_text("timestamp,symbol,exchange\n" + "".join(
        f"2024-01-02T09:00:{i:02d}+00:00,AAA,EXCHG1\n" for i in range(30)))  # fmt: skip
    env = {"FIRESTORE_EMULATOR_HOST": tsstore_emulator.address, "GOOGLE_CLOUD_PROJECT": None}
    where = ["--spec", str(declaration), "--database", "prices-cli"]
    assert tsstore("ingest", str(rows), *where, env=env, cwd=tmp_path).returncode == 0
    page = tsstore("query", *where, "--where", "exchange=EXCHG1", "--limit", "5", "--cost", env=env, cwd=tmp_path)
    assert page.returncode == 0, page.stderr
    # one chunk query asked for 6 documents: 6 reads at $0.03 per 100 000
    assert ("price: USD 0.0000018 (6 billed reads) at europe-west1 prices, Native mode, of 2026-11 "
            "(https://cloud.google.com/firestore/pricing)") in page.stderr  # fmt: skip
    counted = tsstore("count", *where, "--cost", "--stats", env=env, cwd=tmp_path)
    assert counted.stdout.strip() == "30" and "2 queries, 1 round trip, 1 chunk, 2 billed reads" in counted.stderr
    # each of the count's two requests billed 1 read (30 index entries: under 1 000), at $0.03 per 100 000
    assert f"price: USD {2 / 100_000 * 0.03:.8f} (2 billed reads) at europe-west1" in counted.stderr
