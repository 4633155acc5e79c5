"""``tsstore demo``: write the seed's instruments and a synthetic trading day, then query them."""

from __future__ import annotations

import dataclasses
import datetime as dt
import time
from pathlib import Path

import click
import pandas as pd
from tqdm import tqdm

from tsstore.analytics.plot import CHART_FORMATS, plot_bars
from tsstore.cli.common import Database, database_options, memory_option
from tsstore.cli.exits import library_warnings
from tsstore.cli.values import OutputFile
from tsstore.demo import SPEC as DEMO_SPEC
from tsstore.demo import demo_rows
from tsstore.errors import PlotError
from tsstore.local.synthetic import SEED_INSTRUMENTS
from tsstore.read.cost import ReadStats
from tsstore.read.query import Query
from tsstore.store import TimeSeriesStore


@click.command("demo")
@library_warnings
@click.option(
    "--ticks",
    default=20_000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Synthetic ticks to write besides the seed's three instruments.",
)
@click.option("--collection", default="instruments", show_default=True)
@click.option(
    "--chart",
    type=OutputFile(suffixes=CHART_FORMATS),
    default=Path("tsstore-demo-chart.png"),
    show_default=True,
    help="Where to draw the synthetic day's bars (.png, .svg or .pdf; needs tsstore[plot]).",
)
@click.option("--no-chart", is_flag=True, help="Draw no chart.")
@database_options
@memory_option
def demo(*, ticks: int, collection: str, chart: Path, no_chart: bool, database: Database) -> None:
    """Write the seed's instruments and a synthetic trading day, then query them.

    \b
    Example:
      tsstore demo                 # on a local emulator it starts and stops itself
      tsstore demo --ticks 100000
      tsstore demo --memory        # in this process: no Java, no emulator
    """
    pd.set_option("display.width", 140)
    pd.set_option("display.max_columns", 12)
    spec = dataclasses.replace(DEMO_SPEC, collection=collection)
    with database.open_store(spec, ephemeral=True) as store:
        _run_demo(store, ticks=ticks, emulator=not database.memory)
        _analytics(store, chart=None if no_chart else chart)


def _run_demo(store: TimeSeriesStore, *, ticks: int, emulator: bool) -> None:
    spec = store.spec
    click.echo(
        f"collection {spec.collection!r}: shards {list(spec.shards)} "
        f"(production write ceiling {spec.max_write_rate} writes/s instead of 500)"
    )
    rows = demo_rows(ticks)
    total = ticks + len(SEED_INSTRUMENTS)
    began = time.perf_counter()
    with tqdm(total=total, unit="tick", desc="writing", dynamic_ncols=True) as bar:
        result = store.write(rows, on_progress=bar.update)
    elapsed = time.perf_counter() - began
    click.echo(
        f"wrote {result.count:,} ticks (the seed's {len(SEED_INSTRUMENTS)} instruments and {ticks:,} synthetic) "
        f"in {elapsed:.1f} s ({result.count / elapsed:,.0f} ticks/s)"
    )
    if emulator:
        click.echo(
            "(the emulator runs each `in` value of a chunk query as a scan of the collection, so the queries "
            "below take it longer than Firestore, which reads them from the composite index)"
        )
    for title, where in (
        ("queryCommonStock: instrumentType == 'commonstock'", {"instrumentType": "commonstock"}),
        ("queryExchange1Instruments: exchange == 'EXCHG1'", {"exchange": "EXCHG1"}),
        ("queryUSDInstruments: price.currency == 'USD'", {"price.currency": "USD"}),
    ):
        _show(store, title, Query(where=where, limit=5))
    _show(store, "one symbol: AAA's newest 5 (a series shape: one query, no shard filter)",
          Query(where={"symbol": "AAA"}, limit=5))  # fmt: skip
    _show(store, "value filter: EXCHG1 ticks of 4 000 shares or more, newest 5 (filtered by the server)",
          Query(where=[("exchange", "==", "EXCHG1"), ("volume", ">=", 4000)], limit=5))  # fmt: skip
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
    plan = store.plan(query)
    chunks = len(plan.chunks)
    queries = "1 query" if plan.series else f"{chunks} chunk quer{'y' if chunks == 1 else 'ies'}"
    click.echo(f"\n--- {title}  ({len(frame)} rows, {queries}, {ms:.0f} ms)")
    click.echo(frame.to_string() if len(frame) else "(no rows)")


def _analytics(store: TimeSeriesStore, *, chart: Path | None) -> None:
    """The analytics verbs on the synthetic day: latest per symbol, aggregates, bars, a chart."""
    day = dt.datetime(2018, 12, 31, tzinfo=dt.timezone.utc)
    symbols = ["AAA", "CCC", "EEE"]
    stats = ReadStats()
    latest = store.latest(by="symbol", values=symbols, stats=stats)
    click.echo(f"\n--- latest tick per symbol ({stats.billed_reads} billed reads)")
    click.echo(latest.to_string())
    stats = ReadStats()
    lines = []
    for currency in ("USD", "EUR", "JPY", "GBP"):  # prices add up only within one currency
        totals = store.aggregate(
            where={"price.currency": currency}, start=day, end=day + dt.timedelta(days=1), sum=["volume"],
            avg=["price.micros"], stats=stats,
        )  # fmt: skip
        if totals.count:
            average = (totals.avg["price.micros"] or 0.0) / 1e6  # micros: millionths of the currency unit
            lines.append(f"  {currency}: {totals.count:>6,} ticks, volume {totals.sum['volume']:>12,}, "
                         f"average price {average:,.2f} {currency}")  # fmt: skip
    click.echo(f"\n--- the synthetic day per currency, no tick downloaded ({stats.billed_reads} billed reads)")
    click.echo("\n".join(lines))
    stats = ReadStats()
    bars = store.bars(
        interval="30min", by="symbol", price="price.micros", volume="volume", where={"symbol": symbols},
        start=day, end=day + dt.timedelta(days=1), stats=stats,
    )  # fmt: skip
    click.echo(f"\n--- 30-minute bars of {', '.join(symbols)} ({len(bars)} bars from {stats.documents} ticks), first 6")
    click.echo(bars.head(6).to_string())
    if chart is None:
        return
    currency = latest["price.currency"].to_dict()
    in_units = bars.assign(**{c: bars[c].astype("float64") / 1e6 for c in ("open", "high", "low", "close")})
    in_units = in_units.rename(index=lambda s: f"{s} ({currency.get(s, '?')})", level="symbol")
    try:
        drawn = plot_bars(in_units, chart, by=["symbol"], title="the synthetic day (2018-12-31), 30-minute bars")
    except PlotError as exc:
        click.echo(f"\n(no chart: {exc})")
        return
    click.echo(f"\nchart of {drawn} symbols' bars written to {chart}")
