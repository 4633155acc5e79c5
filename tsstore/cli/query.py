"""Reading and deleting ticks: ``tsstore query``, ``count``, ``explain`` and ``purge``."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pandas as pd
from tqdm import tqdm

from tsstore.analytics.plot import CHART_FORMATS, plot_lines
from tsstore.cli.common import (
    Command,
    Database,
    declaration_options,
    echo_cost,
    pick_declared,
    query_options,
    series_options,
    warn_if_no_collection,
    where_option,
)
from tsstore.cli.exits import exit_interrupted, library_warnings, usage
from tsstore.cli.output import echo_figures, echo_written, figures_format, format_of_output, output_options, write_frames
from tsstore.cli.values import OutputFile, naive_option
from tsstore.declaration import load_declaration
from tsstore.dswire.kinds import variants
from tsstore.errors import Interrupted
from tsstore.frames import frames as frames_of
from tsstore.frames import ticks_to_frame
from tsstore.prices import prices_for
from tsstore.read.cost import ReadStats
from tsstore.read.explain import explain as explain_plan
from tsstore.read.plan import plan_query
from tsstore.read.query import Query
from tsstore.spec import SeriesSpec
from tsstore.typed import parse_columns, parse_time, parse_where

stats_option = click.option(
    "--stats",
    "show_stats",
    is_flag=True,
    help="Print what it cost on stderr: documents read, queries, round trips, chunks, billed reads.",
)
price_option = click.option(
    "--cost",
    "show_price",
    is_flag=True,
    help="Print on stderr what its billed reads cost in USD, at the declared location's prices (their source and date).",
)


def echo_price(stats: ReadStats, spec: SeriesSpec, database: Database, show: bool) -> None:
    """With ``--cost``, the price of what a read billed, at ``spec``'s declared location in the
    database's mode, on stderr."""
    if show:
        click.echo(f"price: {stats.cost(prices_for(spec.location, mode=database.mode)).describe()}", err=True)


@click.command("query")
@library_warnings
@format_of_output
@series_options
@query_options(page=True, limit_help="At most this many rows (then a cursor).", cursor=True)
@output_options
@click.option(
    "--plot",
    "plot_path",
    type=OutputFile(suffixes=CHART_FORMATS),
    default=None,
    help="Also draw a line per series to this .png, .svg or .pdf file (needs tsstore[plot]).",
)
@click.option("--plot-y", default="price.micros", show_default=True, help="The field --plot draws.")
@click.option("--plot-by", multiple=True, help="Fields naming a series for --plot (default: the spec's key fields).")
@stats_option
@price_option
def query_ticks(
    *,
    spec: SeriesSpec,
    database: Database,
    query: Query,
    fmt: str,
    output: Path | None,
    plot_path: Path | None,
    plot_y: str,
    plot_by: tuple[str, ...],
    show_stats: bool,
    show_price: bool,
) -> None:
    """Query ticks and print them as a table, or write CSV, JSON Lines or Parquet.

    With --limit, a following page is announced on stderr with its --cursor. Without it,
    every match is streamed out frame by frame.

    \b
    Example:
      tsstore query --where exchange=EXCHG1 --limit 20 --stats --cost
      tsstore query --start 2019-01-02T09:00:00Z --end 2019-01-02T10:00:00Z --format parquet -o hour.parquet
      tsstore query --where symbol=AAA --where symbol=BBB --start 2018-12-31T12:00:00Z --plot prices.png
    """
    if plot_path is not None:  # fields the declaration does not have: refused before the ticks are read
        parse_columns(plot_y, spec=spec, option="--plot-y")
        parse_columns(",".join(plot_by), spec=spec, option="--plot-by")
    with database.open_store(spec) as store:
        if query.limit is not None:
            page = store.query(query)
            frames: Iterator[pd.DataFrame] = iter([ticks_to_frame(spec, page, columns=query.columns)])
            next_cursor, stats = page.cursor, page.stats
        else:
            if query.cursor is not None:
                raise usage("--cursor continues a page: give --limit too")
            ticks = store.iter_ticks(query)
            frames, next_cursor, stats = frames_of(spec, ticks, rows=10_000, columns=query.columns), None, ticks.stats
        kept: list[pd.DataFrame] = []
        if plot_path is not None:  # kept to be drawn after they are written
            kept = list(frames)
            frames = iter(kept)
        rows = write_frames(frames, fmt=fmt, output=output)
        if not rows:
            warn_if_no_collection(store, database)
    if plot_path is not None and not rows:
        click.echo(f"no rows, so no chart: {plot_path} not written", err=True)
    elif plot_path is not None:
        whole = pd.concat(kept)
        series = plot_by or spec.key_fields
        drawn = plot_lines(whole, plot_path, y=plot_y, by=series, title=f"{spec.collection}: {plot_y}")
        click.echo(f"drew {drawn} series to {plot_path}", err=True)
    echo_written(rows, output)
    if next_cursor:
        click.echo(f"more rows follow: add --cursor {next_cursor}", err=True)
    echo_cost(stats, show_stats)
    echo_price(stats, spec, database, show_price)


@click.command("count")
@library_warnings
@series_options
@query_options()
@figures_format
@stats_option
@price_option
def count(*, spec: SeriesSpec, database: Database, query: Query, fmt: str, show_stats: bool, show_price: bool) -> None:
    """Count the ticks that match, with count() aggregations over the shard chunks.

    \b
    Example:
      tsstore count --spec myapp.schema:TICKS --where exchange=EXCHG1 --start 2024-01-02T00:00:00Z --stats
    """
    stats = ReadStats()
    with database.open_store(spec) as store:
        counted = store.count(query, stats=stats)
        if not counted:
            warn_if_no_collection(store, database)
    echo_figures(fmt, str(counted), {"count": counted})
    echo_cost(stats, show_stats)
    echo_price(stats, spec, database, show_price)


@click.command("explain")
@library_warnings
@series_options
@query_options(page=True, limit_help="The page size to cost.")
@click.option(
    "--cost",
    "show_cost",
    is_flag=True,
    help="Also print the most a page can cost, in USD at the declared location's prices, with their source and date.",
)
@figures_format
def explain(*, spec: SeriesSpec, database: Database, query: Query, show_cost: bool, fmt: str) -> None:
    """Show what a query would send and cost, without running it: its chunk queries, the
    composite index that serves them, and the documents a page reads lean and eager; with
    --cost, the price of the most a page can read (the declaration's location, nam5 when it
    declares none; --mode datastore prices Datastore mode's variants of value filters).

    \b
    Example:
      tsstore explain --spec myapp.schema:TICKS --where symbol=AAA --where symbol=BBB --limit 100
      tsstore explain --spec myapp.schema:TICKS --where symbol=AAA --limit 100 --cost
    """
    plan = plan_query(spec, query)  # explain touches no database: its mode only prices it
    if database.mode == "datastore":  # each chunk query sent once per kind of value its value filters match
        told = explain_plan(plan, prices=prices_for(spec.location, mode="datastore"),
                            variants=len(variants(plan) or [None]))  # fmt: skip
    else:
        told = explain_plan(plan)
    figures: dict[str, Any] = {
        "plan": "series" if told.plan.series else "sharded",
        "chunks": len(told.plan.chunks),
        "queries": told.queries,
        "index": told.index,
        "lean_reads": told.lean_reads,
        "eager_reads": told.eager_reads,
        "snapshot_reads": told.snapshot_reads,
        "round_trips": told.round_trips,
        "range_fields": list(told.range_fields),
        "index_reads": told.index_reads,
    }
    priced = told.cost()
    if show_cost:
        figures["bound_reads"] = told.bound_reads
        figures["bound_usd"] = None if priced is None else priced.usd
        figures["prices"] = dataclasses.asdict(told.prices)
    echo_figures(fmt, told.describe(cost=show_cost), figures)


@click.command("purge")
@library_warnings
@declaration_options
@click.option("--before", default=None, help="Delete ticks older than this time (exclusive).")
@click.option("--start", default=None, help="Or: inclusive start of the range to delete.")
@click.option("--end", default=None, help="Or: exclusive end of the range to delete.")
@naive_option
@where_option(help="Only ticks matching this filter.")
@click.option("--dry-run", is_flag=True, help="Only count what would be deleted.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option(
    "--past-rollups",
    is_flag=True,
    help="Also delete ticks the series' roll-ups have not rolled up yet (past their watermark).",
)
@click.option(
    "--correct",
    is_flag=True,
    help="Delete to correct the data: the roll-ups drop these ticks too at their next run (retention keeps the bars).",
)
@figures_format
def purge(
    *,
    declaration: str,
    collection: str | None,
    past_rollups: bool,
    correct: bool,
    database: Database,
    before: str | None,
    start: str | None,
    end: str | None,
    naive: str | None,
    where_items: tuple[str, ...],
    dry_run: bool,
    yes: bool,
    fmt: str,
) -> None:
    """Delete old ticks (retention) at a bounded, ramped rate, with progress.

    A purge does not delete ticks that a roll-up of the series (declared, or found by its
    watermark) has not rolled up yet, nor late ticks it has not folded in; it says how far it
    may go. --past-rollups deletes them anyway. The stored bars stay: retention keeps them.
    --correct deletes wrong ticks instead: the roll-ups' next run recomputes their buckets
    without them.

    \b
    Example:
      tsstore purge --spec myapp.schema:TICKS --before 2024-01-01T00:00:00Z --dry-run
      tsstore purge --spec myapp.schema:TICKS --before 2024-01-01T00:00:00Z --yes
      tsstore purge --spec myapp.schema:TICKS --start 2024-03-01T10:05:00Z --end 2024-03-01T10:06:00Z \\
        --where symbol=AAA --correct --yes
    """
    declared = load_declaration(declaration)
    spec = pick_declared(declaration, declared, collection=collection)
    where = parse_where(where_items, spec=spec)
    bounds: dict[str, Any] = {name: parse_time(text, option=f"--{name}", naive=naive)
                              for name, text in (("before", before), ("start", start), ("end", end))}  # fmt: skip
    bounds.update(rollups=[r for r in declared[1] if r.source.collection == spec.collection], past_rollups=past_rollups,
                  correct=correct)  # fmt: skip
    if before is None and start is None and end is None:
        raise usage(
            "give --before T, or --start T and/or --end T: a purge without a time bound would delete everything"
        )
    plan_query(spec, Query(where=where))  # a filter no shape serves is refused before the roll-ups are asked
    try:
        with database.open_store(spec, writes=spec.collection) as store:
            try:
                counted = store.purge(dry_run=True, where=where, **bounds)
            except KeyboardInterrupt:
                click.echo("deleted 0 tick(s): interrupted while counting what to delete")
                exit_interrupted("nothing was deleted; run the same command to start again")
            if dry_run:
                echo_figures(fmt, f"dry run: {counted.matched} tick(s) would be deleted", counted)
                return
            if counted.matched and not yes:
                click.confirm(f"delete {counted.matched} tick(s) from {spec.collection!r}?", abort=True)
            with tqdm(total=counted.matched, unit="tick", desc="deleting", dynamic_ncols=True) as bar:
                result = store.purge(where=where, on_progress=bar.update, **bounds)
            echo_figures(fmt, f"deleted {result.deleted} tick(s)", result)
    except Interrupted as stop:
        click.echo(f"deleted {stop.partial.deleted} tick(s) before the interrupt")  # type: ignore[attr-defined]
        exit_interrupted("run the same command to delete the rest")
