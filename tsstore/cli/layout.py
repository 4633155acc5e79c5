"""``tsstore shards`` (the shard census), ``tsstore reshard`` (moving ticks off retired shard
values) and ``tsstore capacity`` (the capacity planner)."""

from __future__ import annotations

import dataclasses
import datetime as dt

import click
from tqdm import tqdm

from tsstore.cli.common import Database, pick_spec, series_options, warn_if_no_collection
from tsstore.cli.exits import Failure, exit_interrupted, library_warnings, usage
from tsstore.cli.mode import mode_option
from tsstore.cli.output import echo_figures, figures_format
from tsstore.cli.values import naive_option
from tsstore.errors import Interrupted
from tsstore.layout.capacity import PlanMode, capacity_for
from tsstore.prices import prices_for
from tsstore.spec import SeriesSpec
from tsstore.times import to_duration
from tsstore.typed import parse_time


@click.command("shards")
@library_warnings
@series_options
@click.option(
    "--since", default=None, help="Judge the spread over ticks from this time on (e.g. the last layout change)."
)
@naive_option
@click.option("--check", is_flag=True, help="Exit with status 1 when the census finds a problem.")
@figures_format
def shards(
    *, spec: SeriesSpec, database: Database, since: str | None, naive: str | None, check: bool, fmt: str
) -> None:
    """The shard census: ticks per shard value (active, retired, and values the declaration
    does not list), the spread over the active values, and what needs attention (with
    --check, exit 1 then, or when the collection holds no tick at all). Count
    aggregations and limit-1 queries only; no tick is read.

    \b
    Example:
      tsstore shards --spec spec.toml --since 2026-11-01T00:00:00Z --check
    """
    with database.open_store(spec) as store:
        census = store.shard_census(since=parse_time(since, option="--since", naive=naive))
        if not census.total:
            warn_if_no_collection(store, database)
    echo_figures(fmt, census.describe(), census)
    found = len(census.problems()) if check else 0
    if check and (found or not census.total):
        raise Failure(f"shards --check: {found} problem(s) found (above)" if found else
                      f"shards --check: {spec.collection!r} holds no tick")  # fmt: skip


@click.command("reshard")
@library_warnings
@series_options
@click.option("--max-rate", type=click.IntRange(min=1), default=None, help="Cap on writes per second.")
@figures_format
def reshard(*, spec: SeriesSpec, database: Database, max_rate: int | None, fmt: str) -> None:
    """Move every tick under a retired shard value onto the active values (same ids and
    content; only the shard field changes), at the writer's ramped rate, with progress.
    Readers never miss nor repeat a tick meanwhile; a killed run resumes when run again. The
    summary is the census of the retired values afterwards: once they hold nothing, drop them
    from the declaration.

    \b
    Example:
      tsstore reshard --spec spec.toml && tsstore shards --spec spec.toml
    """
    if not spec.retired:
        raise usage(f"{spec.collection!r} declares no retired shard values: there is nothing to move")
    try:
        with database.open_store(spec, max_rate=max_rate, writes=spec.collection) as store:
            before = store.shard_census()
            total = sum(before.count_of(r.value) for r in spec.retired)
            with tqdm(total=total, unit="tick", desc="moving", dynamic_ncols=True) as bar:
                result = store.reshard(on_progress=bar.update)
            after = store.shard_census()
    except Interrupted as stop:
        click.echo(f"moved {stop.partial.moved} tick(s) before the interrupt")  # type: ignore[attr-defined]
        exit_interrupted("run the same command to move the rest")
    census = {"retired": after.ticks("retired"), "active": after.ticks("active"), "collection": after.total}
    text = (f"{result.describe()}\ncensus: retired values hold {census['retired']}, active values "
            f"{census['active']}, collection {census['collection']}")  # fmt: skip
    echo_figures(fmt, text, {**dataclasses.asdict(result), "census": census})


def positive(text: str, *, name: str) -> dt.timedelta:
    """A duration typed for ``name``, refused (as typed) unless it is longer than zero."""
    duration = to_duration(text, name=name)
    if duration <= dt.timedelta(0):
        raise ValueError(f"{name} {text!r} is not positive")
    return duration


@click.command("capacity")
@library_warnings
@click.option("--writes-per-second", "rate", type=float, required=True, help="Sustained write rate to plan for.")
@click.option(
    "--retention",
    default=None,
    help="How long ticks are kept (e.g. '30 days'); storage at steady state. Default: the spec's expire_after.",
)
@click.option("--headroom", type=float, default=1.25, show_default=True, help="Spare capacity factor.")
@click.option("--pages-per-day", type=click.FloatRange(min=0), default=0.0, help="Pages of 100 ticks read a day, for the read cost.")
@click.option(
    "--busiest-series",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Write rate of the busiest single series (a symbol): with --spec, which shapes may be read as one "
    "series (series_rate) and which must stay sharded.",
)
@click.option(
    "--tier", "tier_items", multiple=True, metavar="INTERVAL[=RETENTION]",
    help="Bars kept beside the ticks, e.g. 1min=3650days (repeat; no retention: for good). Needs --series.",
)  # fmt: skip
@click.option("--series", type=click.IntRange(min=1), default=None, help="How many series (symbols) are rolled up.")
@click.option(
    "--location", default=None,
    help="The database's location the costs are priced at (nam5, us-central1, ...). Default: the spec's declared "
    "location, else nam5.",
)  # fmt: skip
@click.option("--spec", "declaration", default=None, help="Compare with this declaration (module:NAME or a file).")
@click.option("--collection", default=None, help="Which declared series, when the declaration holds several.")
@mode_option
@figures_format
def capacity(
    *, rate: float, retention: str | None, headroom: float, pages_per_day: float, busiest_series: float | None,
    tier_items: tuple[str, ...], series: int | None, location: str | None, declaration: str | None,
    collection: str | None, mode: PlanMode, fmt: str,
) -> None:  # fmt: skip
    """Plan shards, chunks, reads per page, index entries, storage and monthly cost for a
    write rate; with --spec, say what to change in that declaration. Nothing is sent.

    \b
    Example:
      tsstore capacity --writes-per-second 20000 --retention '90 days' --spec spec.toml
      tsstore capacity --writes-per-second 20000 --busiest-series 80 --spec spec.toml
      tsstore capacity --writes-per-second 5000 --retention '7 days' --series 4000 --tier 1min=3650days --tier 1D
      tsstore capacity --writes-per-second 20000 --mode datastore
      tsstore capacity --writes-per-second 20000 --retention '7 days' --location us-central1
    """
    if collection is not None and declaration is None:
        raise usage(f"--collection {collection!r} picks a series of the declaration: give --spec too")
    spec = None if declaration is None else pick_spec(declaration, collection=collection)
    try:
        kept = None if retention is None else positive(retention, name="--retention")
        tiers = [
            (interval, positive(held, name=f"--tier {interval}={held}: retention") if held else None)
            for interval, _, held in (item.partition("=") for item in tier_items)
        ]
    except ValueError as exc:
        raise usage(str(exc)) from None
    if tiers and series is None:
        raise usage("--tier needs --series, the number of series (symbols) rolled up")
    if kept is None and spec is not None:
        kept = spec.expire_after  # the declaration's TTL is its retention
    declared = location if location is not None else spec.location if spec is not None else None
    plan = capacity_for(
        rate, retention=kept, spec=spec, headroom=headroom, pages_per_day=pages_per_day, busiest_series=busiest_series,
        series=series, tiers=tiers, mode=mode, prices=prices_for(declared, mode=mode),
    )  # fmt: skip
    echo_figures(fmt, plan.describe(spec), plan)
