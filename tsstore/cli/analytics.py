"""Questions asked of the ticks: ``tsstore aggregate``, ``latest``, ``bars`` and ``rollup``."""

from __future__ import annotations

from pathlib import Path

import click
import pandas as pd
from tqdm import tqdm

from tsstore.analytics.buckets import buckets, time_of_day
from tsstore.analytics.plot import CHART_FORMATS, plot_bars
from tsstore.analytics.rollup import Rollup
from tsstore.cli.common import (
    WHERE_HELP,
    Database,
    declaration_options,
    echo_cost,
    pick_declared,
    pick_spec,
    query_options,
    series_options,
    series_rollup_options,
    warn_if_no_collection,
    where_option,
)
from tsstore.cli.exits import Failure, exit_interrupted, library_warnings, usage
from tsstore.cli.output import echo_figures, echo_written, figures_format, format_of_output, output_options, write_frames
from tsstore.cli.query import stats_option
from tsstore.cli.values import OutputFile, naive_option
from tsstore.declaration import load_declaration
from tsstore.errors import Interrupted
from tsstore.read.cost import ReadStats
from tsstore.read.query import Query
from tsstore.results import WriteResult
from tsstore.spec import SeriesSpec
from tsstore.times import TimeLike
from tsstore.typed import parse_columns, parse_time, parse_value, parse_where


@click.command("aggregate")
@library_warnings
@series_rollup_options
@query_options()
@click.option("--count/--no-count", default=True, show_default=True, help="Count the matching ticks.")
@click.option("--sum", "sums", multiple=True, metavar="FIELD", help="Sum this measure (repeat for more).")
@click.option("--avg", "avgs", multiple=True, metavar="FIELD", help="Average this measure (repeat for more).")
@click.option("--min", "mins", multiple=True, metavar="PRICE", help="The lowest price (needs --rollup).")
@click.option("--max", "maxs", multiple=True, metavar="PRICE", help="The highest price (needs --rollup).")
@click.option("--std", "stds", multiple=True, metavar="PRICE", help="The price's standard deviation (needs --rollup).")
@click.option(
    "--rollup", "rollup_names", multiple=True, metavar="NAME",
    help="Answer from this declared roll-up's bars where they cover the range (repeat for more; 'all': every one).",
)  # fmt: skip
@click.option("--explain", is_flag=True, help="Only say which part of the range each source would answer.")
@click.option("--json", "as_json", is_flag=True, help="The same as --format json.")
@figures_format
@stats_option
def aggregate(
    *,
    spec: SeriesSpec,
    declared_rollups: tuple[Rollup, ...],
    database: Database,
    query: Query,
    count: bool,
    sums: tuple[str, ...],
    avgs: tuple[str, ...],
    mins: tuple[str, ...],
    maxs: tuple[str, ...],
    stds: tuple[str, ...],
    rollup_names: tuple[str, ...],
    explain: bool,
    as_json: bool,
    fmt: str,
    show_stats: bool,
) -> None:
    """Count, sum and average the matching ticks with Firestore's aggregations, combined
    exactly over the shard chunks (no tick is downloaded).

    Sums and averages take the spec's measures (SeriesSpec(measures=[...])). With --rollup,
    the range is answered from the roll-ups' stored bars where they cover it and from the
    ticks at its edges; the price's --min, --max and --std come from there too.

    \b
    Example:
      tsstore aggregate --where symbol=AAA --start 2019-01-02T00:00:00Z --sum volume --avg price.micros --stats
      tsstore aggregate --rollup all --start 2019-01-02T00:00:00Z --std price.micros --max price.micros
    """
    rollups = pick_rollups(spec, declared_rollups, rollup_names)
    stats = ReadStats()
    fmt = "json" if as_json else fmt
    with database.open_store(spec) as store:
        if explain:
            if rollups is None:
                raise usage("--explain says which roll-up answers which part of the range; give --rollup")
            told = store.explain_aggregate(query, rollups=rollups, stats=stats)
            echo_figures(
                fmt, told.describe(), {"collection": told.collection, "parts": [p.describe() for p in told.parts]}
            )
            return
        result = store.aggregate(
            query, count=count, sum=sums, avg=avgs, min=mins, max=maxs, std=stds, rollups=rollups, stats=stats
        )
        if result.count == 0:
            warn_if_no_collection(store, database)
    values = result.as_dict()
    width = max(len(name) for name in values)
    text = "\n".join(f"{name:<{width}}  {'none' if value is None else value}" for name, value in values.items())
    if result.sources:
        text += "\nsources:\n" + "\n".join(f"  {source}" for source in result.sources)
    echo_figures(fmt, text, {**values, "sources": list(result.sources)} if result.sources else values)
    echo_cost(stats, show_stats)


def declared_price(spec: SeriesSpec, rollups: tuple[Rollup, ...], given: str | None) -> str:
    """``--price`` as given, else the price field of the series' declared roll-ups (when they
    agree on one): never a field name the declaration does not make."""
    if given is not None:
        return given
    prices = sorted({rollup.root.price for rollup in rollups})
    if len(prices) == 1:
        return prices[0]
    numeric = sorted(name for name, kind in spec.columns if kind in ("Int64", "Float64"))
    hint = f" (numeric fields declared: {', '.join(numeric)})" if numeric else ""
    raise usage(f"which field is the price of {spec.collection!r}? give --price FIELD{hint}")


def pick_rollups(spec: SeriesSpec, declared: tuple[Rollup, ...], names: tuple[str, ...]) -> tuple[Rollup, ...] | None:
    """The roll-ups ``--rollup`` names (``all``: every declared one), or ``None`` without it."""
    if not names:
        return None
    if not declared:
        raise usage(f"no roll-up of {spec.collection!r} is declared; declare one ([[rollup]] or Rollup(...)) first")
    if "all" in names:
        return declared
    known = {r.name: r for r in declared}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise usage(f"no roll-up {', '.join(map(repr, unknown))} of {spec.collection!r} is declared; "
                    f"declared: {', '.join(known)} (or all)")  # fmt: skip
    return tuple(known[name] for name in dict.fromkeys(names))


@click.command("latest")
@library_warnings
@format_of_output
@series_options
@click.argument("values", nargs=-1, required=True)
@click.option("--by", required=True, help="The series key field (a declared query shape's field).")
@where_option(help="Other filters: " + WHERE_HELP)
@click.option("--before", default=None, help="Only ticks older than this time (exclusive).")
@naive_option
@click.option("--columns", default=None, help="Comma-separated fields to read (projection).")
@output_options
@stats_option
def latest(
    *,
    spec: SeriesSpec,
    database: Database,
    values: tuple[str, ...],
    by: str,
    where_items: tuple[str, ...],
    before: str | None,
    naive: str | None,
    columns: str | None,
    fmt: str,
    output: Path | None,
    show_stats: bool,
) -> None:
    """Print the newest tick of each series VALUES of the key field --by (a row of blanks
    for a series with no tick): one limit-1 query per series and shard chunk.

    \b
    Example:
      tsstore latest --by symbol AAA BBB CCC --before 2019-01-02T00:00:00Z --stats
    """
    stats = ReadStats()
    keys = [parse_value(v, field=by, spec=spec) for v in values]
    where, until = parse_where(where_items, spec=spec), parse_time(before, option="--before", naive=naive)
    with database.open_store(spec) as store:
        frame = store.latest(by=by, values=keys, where=where, before=until, columns=parse_columns(columns, spec=spec),
                             stats=stats)  # fmt: skip
    echo_written(write_frames([frame], fmt=fmt, output=output), output)
    echo_cost(stats, show_stats)


#: What --origin takes, for bars and aligned alike.
ORIGIN_HELP = (
    "Where fixed buckets start counting: a time (read in --tz without an offset), or a time of day such as 09:30 "
    "for edges at that local time on every day, DST included (default: 1970-01-01 midnight in --tz)."
)


def cli_origin(origin: str | None, *, tz: str | None) -> TimeLike | None:
    """What ``--origin`` says: ``None`` (the default, or ``epoch``), a time of day as typed
    (the buckets read it in ``--tz``), or an instant (:func:`~tsstore.typed.parse_time`, naive in ``--tz``)."""
    if origin in (None, "epoch"):
        return None
    if time_of_day(origin) is not None:
        return origin
    return parse_time(origin, option="--origin", naive=tz)


@click.command("bars")
@library_warnings
@format_of_output
@series_rollup_options
@query_options()
@click.option(
    "--interval",
    required=True,
    help="Bar length: 1min, 15min, 1h (from the origin), or 1D, 1W, 1M (calendar, in --tz).",
)
@click.option(
    "--tz", default=None, help="Time zone of calendar buckets and of the printed bar starts, e.g. America/New_York."
)
@click.option("--origin", default=None, help=ORIGIN_HELP)
@click.option(
    "--fill", type=click.Choice(["prev", "nan"]), default=None,
    help="Bars for empty buckets between a series' bars: the previous close carried (prev) or no prices (nan).",
)  # fmt: skip
@click.option("--by", "by_fields", multiple=True, help="Series key field(s): one set of bars per value.")
@click.option(
    "--price", default=None, help="The price field (default: the price of the series' declared roll-ups, if one)."
)
@click.option("--volume", default=None, help="A volume field to sum per bar.")
@click.option("--moments", is_flag=True, help="Also the price's sum, mean and std, and the open and close times.")
@click.option("--combine", is_flag=True, help="Read a roll-up's bars (--collection) and combine them into these.")
@click.option(
    "--explain", is_flag=True,
    help="With --combine: only say which part of the range comes from the roll-up's bars, and which (buckets late "
    "ticks marked) from a finer roll-up's bars or the ticks.",
)  # fmt: skip
@output_options
@click.option(
    "--plot", "plot_path", type=OutputFile(suffixes=CHART_FORMATS), default=None,
    help="Also draw candlesticks (with volume) to this .png, .svg or .pdf file (needs tsstore[plot]).",
)  # fmt: skip
@stats_option
def bars(
    *,
    spec: SeriesSpec,
    declared_rollups: tuple[Rollup, ...],
    database: Database,
    query: Query,
    interval: str,
    tz: str | None,
    origin: str | None,
    fill: str | None,
    by_fields: tuple[str, ...],
    price: str | None,
    volume: str | None,
    moments: bool,
    combine: bool,
    explain: bool,
    fmt: str,
    output: Path | None,
    plot_path: Path | None,
    show_stats: bool,
) -> None:
    """Print OHLCV bars (open, high, low, close, count, volume) of the matching ticks in
    [--start, --end), computed while the ticks stream; buckets without ticks are absent
    unless --fill.

    \b
    Example:
      tsstore bars --interval 1min --by symbol --volume volume --start 2018-12-31T12:00:00Z \\
        --end 2018-12-31T13:00:00Z --plot chart.png
      tsstore bars --interval 1D --tz America/New_York --by symbol --fill prev
      tsstore bars --collection instruments_1min --combine --interval 1h --by symbol --moments
      tsstore bars --collection instruments_1min --combine --explain --interval 1h --start 2019-01-02T00:00:00Z
      tsstore bars --interval 1h --origin 09:30 --tz America/New_York --by symbol --format arrow -o bars.arrow
    """
    stats = ReadStats()
    start = cli_origin(origin, tz=tz)
    if explain and not combine:
        raise usage("--explain says where bars combined from a roll-up's bars come from; give --combine")
    price = None if combine else declared_price(spec, declared_rollups, price)
    buckets(interval, tz=tz, origin=start)  # --interval, --tz and --origin refused before a store is started
    with database.open_store(spec) as store:
        if explain:
            click.echo(store.explain_bars(query, interval=interval, tz=tz, origin=start, stats=stats).describe())
            echo_cost(stats, show_stats)
            return
        frame = store.bars(
            query, interval=interval, by=by_fields, price=price, volume=volume, tz=tz, origin=start, fill=fill,
            moments=moments, combine=combine, stats=stats,
        )  # fmt: skip
        if frame.empty:
            warn_if_no_collection(store, database)
    if plot_path is not None:
        title = f"{spec.collection}: {price or 'combined'}, {interval} bars"
        drawn = plot_bars(frame, plot_path, by=by_fields, title=title)
        click.echo(f"drew {drawn} series of bars to {plot_path}", err=True)
    flat = frame if fmt == "table" else frame.reset_index().set_index(spec.timestamp_field)
    echo_written(write_frames([flat], fmt=fmt, output=output), output)
    echo_cost(stats, show_stats)


@click.command("aligned")
@library_warnings
@format_of_output
@series_rollup_options
@query_options()
@click.option("--interval", required=True, help="Bucket length: 1min, 1h (from the origin), or 1D, 1W, 1M (in --tz).")
@click.option("--by", "by_fields", multiple=True, required=True, help="Series key field(s): one column per value.")
@click.option(
    "--value", default="close", show_default=True,
    type=click.Choice(["open", "high", "low", "close", "mean", "std", "count", "volume", "sum"]),
    help="What each column holds per bucket: a bar's price (close: the last one), moment or amount.",
)  # fmt: skip
@click.option(
    "--price", default=None, help="The price field (default: the price of the series' declared roll-ups, if one)."
)
@click.option("--volume", default=None, help="A volume field (for --value volume).")
@click.option("--tz", default=None, help="Time zone of calendar buckets and of the printed times.")
@click.option("--origin", default=None, help=ORIGIN_HELP)
@click.option(
    "--fill", type=click.Choice(["prev", "none"]), default="prev", show_default=True,
    help="A bucket where a series has no bar: its last value carried (amounts 0), or left missing.",
)  # fmt: skip
@click.option("--combine", is_flag=True, help="Read a roll-up's bars (--collection) and combine them into these.")
@output_options
@stats_option
def aligned(
    *,
    spec: SeriesSpec,
    declared_rollups: tuple[Rollup, ...],
    database: Database,
    query: Query,
    interval: str,
    by_fields: tuple[str, ...],
    value: str,
    price: str | None,
    volume: str | None,
    tz: str | None,
    origin: str | None,
    fill: str,
    combine: bool,
    fmt: str,
    output: Path | None,
    show_stats: bool,
) -> None:
    """Print several series side by side: one row per bucket, one column per series (the
    values of --by), each its bar's --value there.

    \b
    Example:
      tsstore aligned --interval 1h --by symbol --start 2019-01-02T08:00:00Z --end 2019-01-02T12:00:00Z
      tsstore aligned --collection instruments_1min --combine --interval 1D --tz America/New_York --by symbol
    """
    stats = ReadStats()
    start = cli_origin(origin, tz=tz)
    price = None if combine else declared_price(spec, declared_rollups, price)
    buckets(interval, tz=tz, origin=start)  # --interval, --tz and --origin refused before a store is started
    with database.open_store(spec) as store:
        frame = store.aligned(
            query, interval=interval, by=by_fields, price=price, value=value, volume=volume,
            tz=tz, origin=start, fill=None if fill == "none" else fill, combine=combine, stats=stats,
        )  # fmt: skip
        if frame.empty:
            warn_if_no_collection(store, database)
    if isinstance(frame.columns, pd.MultiIndex):  # several --by fields: one column per combination
        frame.columns = ["/".join(map(str, key)) for key in frame.columns]
    else:
        frame.columns = [str(key) for key in frame.columns]
    echo_written(write_frames([frame], fmt=fmt, output=output), output)
    echo_cost(stats, show_stats)


@click.command("rollup")
@library_warnings
@declaration_options
@click.option("--rollup", "name", default=None, help="The roll-up's collection (default: the series' only roll-up).")
@click.option("--since", default=None, help="Recompute from this time (aligned down), e.g. after late ticks.")
@click.option("--until", default=None, help="Only intervals ending by this time (default: every closed one).")
@click.option(
    "--verify",
    is_flag=True,
    help="First compare the stored bars with their ticks (--since/--until, default: the span stored) and mark the "
    "buckets that differ, so this run recomputes them; every tick and bar of the span is read.",
)
@naive_option
@figures_format
def rollup(
    *,
    verify: bool,
    database: Database,
    declaration: str,
    collection: str | None,
    name: str | None,
    since: str | None,
    until: str | None,
    naive: str | None,
    fmt: str,
) -> None:
    """Compute the declared roll-up's bars for every closed interval since its watermark and
    store them (re-running stores nothing twice; --since recomputes and replaces changed bars).
    Buckets that late ticks changed since their bars were stored (marked by the writers) are
    recomputed first; the summary says how many.

    --verify first compares the stored bars with their ticks, for writes tsstore did not see
    (other code writing the collection), and marks the buckets that differ for this run.

    \b
    Example:
      tsstore rollup                                   # the demo's instruments_1min
      tsstore rollup --since 2018-12-31T12:00:00Z      # recompute a range from its ticks
      tsstore rollup --verify                          # check the stored span, repair what differs
    """
    loaded = load_declaration(declaration)  # once: the series and its roll-ups
    named = next((r for r in loaded[1] if r.name == name), None)
    if named is not None and collection is None:  # runs on its source's store (a finer roll-up's, for bars of bars)
        spec = named.source
    else:
        spec = pick_declared(declaration, loaded, collection=collection)
    if named is not None and named.source.collection != spec.collection:
        raise usage(f"roll-up {name!r} rolls up {named.source.collection!r}, not --collection {spec.collection!r}; "
                    f"leave out --collection, or give --collection {named.source.collection}")  # fmt: skip
    declared = [r for r in loaded[1] if r.source.collection == spec.collection]
    chosen = [r for r in declared if name is None or r.name == name]
    if not declared:
        raise usage(f"{declaration} declares no roll-up of {spec.collection!r}; declare one first "
                    "([[rollup]] in a declaration file, or Rollup(...) in Python)")  # fmt: skip
    if len(chosen) != 1:
        names = ", ".join(r.name for r in declared)
        what = f"no roll-up {name!r}" if name else "several roll-ups; pick one with --rollup"
        raise usage(f"{declaration} declares {what} of {spec.collection!r} (roll-ups: {names})")
    start, end = parse_time(since, option="--since", naive=naive), parse_time(until, option="--until", naive=naive)
    try:
        with database.open_store(spec, writes=chosen[0].name) as store:
            if verify:
                checked = store.verify_rollup(chosen[0], since=start, until=end, repair=True)
                click.echo(checked.describe())
                start = end = None  # the run itself: from the watermark, the marked buckets first
            with tqdm(unit="tick", desc="rolling up", dynamic_ncols=True) as bar:
                result = store.rollup(chosen[0], since=start, until=end, on_progress=bar.update)
    except Interrupted as stop:
        partial = stop.partial  # the run's result, or its bars' write's when the write was stopped
        if isinstance(partial, WriteResult):
            said = partial.describe("bars")
        else:
            said = partial.describe()  # type: ignore[attr-defined]
        click.echo(f"{said} (before the interrupt)")
        exit_interrupted("run the same command to finish (a bar already stored is not stored twice)")
    if result.waiting_for is not None:  # not done: what is stored does not allow it yet (exit 1)
        raise Failure(result.describe())
    echo_figures(fmt, result.describe(), result)


@click.command("asof")
@library_warnings
@format_of_output
@series_options
@query_options()
@click.option(
    "--right", "right_collection", default=None, help="The declared series to match from (default: the same)."
)
@click.option("--right-where", "right_items", multiple=True, metavar="FIELD=VALUE", help="Filters of the right side.")
@click.option("--columns", "left_columns", default=None, help="Comma-separated fields to read (projection).")
@click.option("--right-columns", default=None, help="Comma-separated fields to read of the right side (projection).")
@click.option("--by", "by_fields", multiple=True, help="Field(s) equal on both sides (e.g. symbol).")
@click.option(
    "--direction", type=click.Choice(["backward", "forward", "nearest"]), default="backward", show_default=True,
    help="backward: the newest right tick at or before; forward: the oldest at or after; nearest: the closer.",
)  # fmt: skip
@click.option("--tolerance", default=None, help="The largest time apart, e.g. 5s, 500ms (default: any).")
@click.option("--no-exact-matches", is_flag=True, help="A right tick at the left tick's own time does not match.")
@click.option("--prefix", default="right", show_default=True, help="Name of the matched columns' group.")
@click.option("--ids", is_flag=True, help="Also print each match's document id (PREFIX.id).")
@output_options
@stats_option
def asof(
    *,
    spec: SeriesSpec,
    database: Database,
    query: Query,
    right_collection: str | None,
    right_items: tuple[str, ...],
    left_columns: str | None,
    right_columns: str | None,
    by_fields: tuple[str, ...],
    direction: str,
    tolerance: str | None,
    no_exact_matches: bool,
    prefix: str,
    ids: bool,
    fmt: str,
    output: Path | None,
    show_stats: bool,
) -> None:
    """Print each tick matching --where/--start/--end with the tick of the --right series
    (matching --right-where) nearest it in time: an as-of join, streamed over both reads.
    The match's fields come as PREFIX.FIELD, but the --by fields (the left tick's).

    \b
    Example:
      tsstore asof --where symbol=AAA --start 2019-01-02T09:00:00Z --end 2019-01-02T10:00:00Z \\
        --right-where symbol=BBB --right-columns price.micros --tolerance 5min
    """
    declaration = click.get_current_context().params["declaration"]
    other = spec if right_collection is None else pick_spec(declaration, collection=right_collection)
    query = query.replace(columns=parse_columns(left_columns, spec=spec))
    right = Query(
        where=parse_where(right_items, spec=other),
        columns=parse_columns(right_columns, spec=other, option="--right-columns"),
    )
    stats = ReadStats()
    with database.open_store(spec) as store:
        frame = store.asof(
            query, right, right_spec=other, by=by_fields, direction=direction, tolerance=tolerance,
            allow_exact_matches=not no_exact_matches, prefix=prefix, ids=ids, stats=stats,
        )  # fmt: skip
        if frame.empty:
            warn_if_no_collection(store, database)
    echo_written(write_frames([frame], fmt=fmt, output=output), output)
    echo_cost(stats, show_stats)
