"""``tsstore demo``: write the seed's instruments and a synthetic trading day, then query them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import time

import click
import pandas as pd
from tqdm import tqdm

from tsstore.cli.common import Database, database_options, library_errors
from tsstore.demo import SPEC as DEMO_SPEC
from tsstore.local.synthetic import SEED_INSTRUMENTS, trading_day
from tsstore.read.query import Query
from tsstore.store import TimeSeriesStore


@click.command("demo")
@library_errors
@click.option(
    "--ticks",
    default=20_000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Synthetic ticks to write besides the seed's three instruments.",
)
@click.option("--collection", default="instruments", show_default=True)
@database_options
def demo(*, ticks: int, collection: str, database: Database) -> None:
    """Write the seed's instruments and a synthetic trading day, then query them.

    \b
    Example:
      tsstore demo                 # on a local emulator it starts and stops itself
      tsstore demo --ticks 100000
    """
    pd.set_option("display.width", 140)
    pd.set_option("display.max_columns", 12)
    spec = dataclasses.replace(DEMO_SPEC, collection=collection)
    with database.open_store(spec, ephemeral=True) as store:
        _run_demo(store, ticks=ticks)


def _run_demo(store: TimeSeriesStore, *, ticks: int) -> None:
    spec = store.spec
    click.echo(
        f"collection {spec.collection!r}: shards {list(spec.shards)} "
        f"(production write ceiling {spec.max_write_rate} writes/s instead of 500)"
    )
    # The synthetic day is the day before the seed's ticks, so the seed's "newest 5"
    # queries show the seed's documents first, then the newest synthetic ones.
    rows = itertools.chain(SEED_INSTRUMENTS, trading_day(ticks, day=dt.date(2018, 12, 31)))
    total = ticks + len(SEED_INSTRUMENTS)
    began = time.perf_counter()
    with tqdm(total=total, unit="tick", desc="writing", dynamic_ncols=True) as bar:
        result = store.write(rows, on_progress=bar.update)
    elapsed = time.perf_counter() - began
    click.echo(f"wrote {result.count} ticks in {elapsed:.1f} s ({result.count / elapsed:,.0f} ticks/s)")
    for title, where in (
        ("queryCommonStock: instrumentType == 'commonstock'", {"instrumentType": "commonstock"}),
        ("queryExchange1Instruments: exchange == 'EXCHG1'", {"exchange": "EXCHG1"}),
        ("queryUSDInstruments: price.currency == 'USD'", {"price.currency": "USD"}),
    ):
        _show(store, title, Query(where=where, limit=5))
    start = dt.datetime(2018, 12, 31, 12, 0, tzinfo=dt.timezone.utc)
    _show(
        store,
        "time range: EXCHG2 ticks in [12:00, 12:05) on 2018-12-31, oldest first, first 10",
        Query(
            where={"exchange": "EXCHG2"}, start=start, end=start + dt.timedelta(minutes=5), direction="asc", limit=10
        ),
    )


def _show(store: TimeSeriesStore, title: str, query: Query) -> None:
    began = time.perf_counter()
    frame = store.query_frame(query)
    ms = (time.perf_counter() - began) * 1000
    chunks = len(store.plan(query).chunks)
    click.echo(f"\n--- {title}  ({len(frame)} rows, {chunks} chunk quer{'y' if chunks == 1 else 'ies'}, {ms:.0f} ms)")
    click.echo(frame.to_string() if len(frame) else "(no rows)")
