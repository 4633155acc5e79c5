"""The ``tsstore`` command: a thin click layer over the library.

Each command parses options, calls the library, formats the output, and turns
:class:`~tsstore.errors.TsstoreError` into a click error. Only this module reads the
environment.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import itertools
import json
import os
import shlex
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click
import pandas as pd
from tqdm import tqdm

from tsstore.cli.output import write_frames
from tsstore.counters import ShardedCounter
from tsstore.declaration import load_specs
from tsstore.demo import SPEC as DEMO_SPEC
from tsstore.errors import Interrupted, TsstoreError
from tsstore.frames import frames as frames_of
from tsstore.frames import ticks_to_frame
from tsstore.indexes.file import DEFAULT_INDEX_FILE, plan_index_file
from tsstore.ingest import DEFAULT_MAX_FIELD_BYTES, FORMATS, IngestSummary, ingest_file, write_rejects
from tsstore.local import supervisor
from tsstore.local.emulator import DEFAULT_PROJECT, emulator_client, start_emulator
from tsstore.local.synthetic import SEED_INSTRUMENTS, trading_day
from tsstore.read.cost import ReadStats
from tsstore.read.explain import explain as explain_plan
from tsstore.read.plan import plan_query
from tsstore.spec import SeriesSpec
from tsstore.store import TimeSeriesStore, WriteOptions
from tsstore.write.identity import DUPLICATE_POLICIES, DuplicatePolicy

EMULATOR_ENV = "FIRESTORE_EMULATOR_HOST"


@contextlib.contextmanager
def connect(*, project: str | None, database: str, ephemeral: bool = False) -> Iterator[tuple[Any, bool]]:
    """A Firestore client and whether it talks to an emulator.

    With ``FIRESTORE_EMULATOR_HOST`` set or a ``--project`` given, the client goes where
    those say (google-cloud-firestore reads them itself). Otherwise it goes to the local
    store (the background emulator of ``tsstore emulator start``, started now if needed),
    whose data survives restarts; with ``ephemeral`` to a temporary emulator that stops
    with the command. Either way one line on stderr says where.
    """
    from google.cloud import firestore

    emulator_host = os.environ.get(EMULATOR_ENV)
    if emulator_host or project:
        if emulator_host and not project:
            # The same project the local store uses, so both see the same data.
            project = os.environ.get("GOOGLE_CLOUD_PROJECT") or DEFAULT_PROJECT
        target = f"emulator at {emulator_host}, project {project}" if emulator_host else f"project {project}"
        click.echo(f"tsstore: using {target}, database {database}", err=True)
        running = supervisor.status() if emulator_host else None
        if running is not None and running.address == emulator_host and project == running.project:
            supervisor.remember_database(database)  # the local store, reached by address: keep it
        client = firestore.Client(project=project, database=database)
        try:
            yield client, bool(emulator_host)
        finally:
            client.close()
        return
    if ephemeral:
        click.echo("tsstore: no FIRESTORE_EMULATOR_HOST or --project: starting a temporary local emulator", err=True)
        with start_emulator() as emulator:
            click.echo(f"tsstore: emulator ready at {emulator.address} (pid {emulator.pid})", err=True)
            client = emulator.client(database=database)
            try:
                yield client, True
            finally:
                client.close()
        return
    store, started = supervisor.start()
    supervisor.remember_database(database)
    how = "started" if started else "using"
    click.echo(
        f"tsstore: {how} the local store at {store.address} (data in {store.data_dir}; "
        "`tsstore emulator stop` stops it), database " + database,
        err=True,
    )
    client = emulator_client(store.address, project=store.project, database=database)
    try:
        yield client, True
    finally:
        client.close()


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="tsstore")
def main() -> None:
    """tsstore: high-rate time series in Firestore with sharded timestamps."""


@main.command()
@click.option(
    "--ticks",
    default=20_000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Synthetic ticks to write besides the seed's three instruments.",
)
@click.option("--collection", default="instruments", show_default=True)
@click.option("--project", default=None, help="Use this Google Cloud project instead of the local emulator.")
@click.option("--database", default="(default)", show_default=True)
def demo(ticks: int, collection: str, project: str | None, database: str) -> None:
    """Write the seed's instruments and a synthetic trading day, then query them.

    \b
    Example:
      tsstore demo                 # on a local emulator it starts and stops itself
      tsstore demo --ticks 100000
    """
    pd.set_option("display.width", 140)
    pd.set_option("display.max_columns", 12)
    try:
        with connect(project=project, database=database, ephemeral=True) as (client, local):
            spec = dataclasses.replace(DEMO_SPEC, collection=collection)
            options = WriteOptions(ramp=False, max_ops_per_second=100_000) if local else WriteOptions()
            with TimeSeriesStore(client, spec, write_options=options) as store:
                _run_demo(store, ticks)
    except TsstoreError as exc:
        raise click.ClickException(str(exc)) from exc


def _run_demo(store: TimeSeriesStore, ticks: int) -> None:
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
        _show(store, title, where=where, limit=5)
    start = dt.datetime(2018, 12, 31, 12, 0, tzinfo=dt.timezone.utc)
    _show(
        store,
        "time range: EXCHG2 ticks in [12:00, 12:05) on 2018-12-31, oldest first, first 10",
        where={"exchange": "EXCHG2"},
        start=start,
        end=start + dt.timedelta(minutes=5),
        direction="asc",
        limit=10,
    )


def _show(store: TimeSeriesStore, title: str, **query: Any) -> None:
    began = time.perf_counter()
    frame = store.query_frame(**query)
    ms = (time.perf_counter() - began) * 1000
    chunks = len(store.plan(**query).chunks)
    click.echo(f"\n--- {title}  ({len(frame)} rows, {chunks} chunk quer{'y' if chunks == 1 else 'ies'}, {ms:.0f} ms)")
    click.echo(frame.to_string() if len(frame) else "(no rows)")


@main.command()
@click.argument("declaration")
@click.option(
    "--file",
    "path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=str(DEFAULT_INDEX_FILE),
    show_default=True,
    help="The index file to write or update.",
)
@click.option(
    "--check", is_flag=True, help="Change nothing; exit 1 with a diff if the file is not what the declaration yields."
)
@click.option("--stdout", "to_stdout", is_flag=True, help="Print the file instead of writing it.")
@click.option("--keep-stale", is_flag=True, help="Keep composite indexes with the timestamp but not the shard.")
def indexes(declaration: str, path: Path, check: bool, to_stdout: bool, keep_stale: bool) -> None:
    """Write or update firestore.indexes.json from the application's series declaration.

    DECLARATION is an import path to a SeriesSpec or a list of them (``myapp.schema:TICKS``),
    or a .toml/.json file with a [[series]] list. Entries for other collections are kept;
    this collection's are replaced; stale timestamp indexes without the shard are removed
    (they bring the 500 writes/s hotspot back) unless --keep-stale.

    \b
    Example:
      tsstore indexes myapp.schema:TICKS
      tsstore indexes series.toml --check      # in CI: fails when the file is stale
      cd indexes && firebase deploy --only firestore:indexes --project my-project
    """
    try:
        specs = load_specs(declaration)
        update = plan_index_file(path, specs, keep_stale=keep_stale)
    except TsstoreError as exc:
        raise click.ClickException(str(exc)) from exc
    for stale in update.report.stale:
        verb = "kept (--keep-stale)" if keep_stale else "removed"
        click.echo(f"warning: stale index {stale} has the timestamp but not the shard: {verb}", err=True)
    for problem in update.problems:
        click.echo(f"warning: {problem}", err=True)
    if to_stdout:
        click.echo(update.new_text, nl=False)
        return
    if check:
        if update.changed:
            click.echo(update.diff() if update.old_text is not None else f"{path} does not exist", nl=False)
            raise click.ClickException(f"{path} is not what {declaration} yields; run: tsstore indexes {declaration}")
        click.echo(f"{path} is up to date with {declaration}")
        return
    if update.dropped_comments:
        click.echo(f"note: comments and trailing commas in {path} are not kept in the rewritten file", err=True)
    written = update.write() if update.changed else []
    click.echo(update.report.summary())
    click.echo(f"wrote {', '.join(map(str, written))}" if written else f"{path} already up to date")


# ---------------------------------------------------------------- shared options for data commands


def _spec_options(command: Any) -> Any:
    command = click.option(
        "--spec",
        "declaration",
        default="tsstore.demo:SPEC",
        show_default=True,
        help="The series declaration (module:NAME or a .toml/.json file).",
    )(command)
    command = click.option(
        "--collection", default=None, help="Which declared series, when the declaration holds several."
    )(command)
    command = click.option(
        "--project", default=None, help="Use this Google Cloud project instead of the local emulator."
    )(command)
    return click.option("--database", default="(default)", show_default=True)(command)


def _range_options(command: Any) -> Any:
    command = click.option("--end", default=None, help="Exclusive end time (ISO-8601 with offset).")(command)
    command = click.option("--start", default=None, help="Inclusive start time (ISO-8601 with offset).")(command)
    return click.option(
        "--where", "where_items", multiple=True, metavar="FIELD=VALUE", help="Equality filter; repeat a field for 'in'."
    )(command)


def _pick_spec(declaration: str, collection: str | None) -> SeriesSpec:
    specs = load_specs(declaration)
    if collection is None:
        if len(specs) > 1:
            names = ", ".join(s.collection for s in specs)
            raise TsstoreError(f"{declaration} declares several series ({names}); pick one with --collection")
        return specs[0]
    for spec in specs:
        if spec.collection == collection:
            return spec
    raise TsstoreError(
        f"{declaration} declares no series {collection!r} (declared: {', '.join(s.collection for s in specs)})"
    )


def _parse_where(items: tuple[str, ...]) -> dict[str, Any]:
    """``field=value`` pairs; a field given twice becomes ``in``; values are JSON when they parse
    as JSON (numbers, true/false, null, "quoted"), else plain strings."""
    where: dict[str, Any] = {}
    for item in items:
        field, sep, raw = item.partition("=")
        if not sep or not field:
            raise click.BadParameter(f"{item!r} is not field=value", param_hint="--where")
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        if field in where:
            where[field] = [*where[field], value] if isinstance(where[field], list) else [where[field], value]
        else:
            where[field] = value
    return where


_STATS_HELP = "Print what it cost on stderr: documents read, queries, round trips, chunks, billed reads."


@main.command()
@_spec_options
@_range_options
@click.option("--stats", "show_stats", is_flag=True, help=_STATS_HELP)
def count(
    declaration: str,
    collection: str | None,
    project: str | None,
    database: str,
    where_items: tuple[str, ...],
    start: str | None,
    end: str | None,
    show_stats: bool,
) -> None:
    """Count the ticks that match, with count() aggregations over the shard chunks.

    \b
    Example:
      tsstore count --spec myapp.schema:TICKS --where exchange=EXCHG1 --start 2024-01-02T00:00:00Z --stats
    """
    try:
        spec = _pick_spec(declaration, collection)
        where = _parse_where(where_items)
        stats = ReadStats()
        with connect(project=project, database=database) as (client, _), TimeSeriesStore(client, spec) as store:
            click.echo(store.count(where=where, start=start, end=end, stats=stats))
    except TsstoreError as exc:
        raise click.ClickException(str(exc)) from exc
    if show_stats:
        click.echo(f"cost: {stats.describe()}", err=True)


@main.command()
@_spec_options
@_range_options
@click.option("--direction", type=click.Choice(["desc", "asc"]), default="desc", show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="The page size to cost.")
@click.option("--columns", default=None, help="Comma-separated fields to read (projection).")
def explain(
    declaration: str,
    collection: str | None,
    project: str | None,
    database: str,
    where_items: tuple[str, ...],
    start: str | None,
    end: str | None,
    direction: str,
    limit: int | None,
    columns: str | None,
) -> None:
    """Show what a query would send and cost, without running it: its chunk queries, the
    composite index that serves them, and the documents a page reads lean and eager.

    \b
    Example:
      tsstore explain --spec myapp.schema:TICKS --where symbol=AAA --where symbol=BBB --limit 100
    """
    del project, database  # accepted like every data command's; explain touches no database
    try:
        spec = _pick_spec(declaration, collection)
        plan = plan_query(
            spec,
            where=_parse_where(where_items),
            start=start,
            end=end,
            direction=direction,
            limit=limit,
            columns=_parse_columns(columns),
        )
    except TsstoreError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(explain_plan(plan).describe())


def _parse_columns(columns: str | None) -> list[str] | None:
    return [c.strip() for c in columns.split(",") if c.strip()] if columns else None


@main.command()
@_spec_options
@click.option("--before", default=None, help="Delete ticks older than this time (exclusive).")
@click.option("--start", default=None, help="Or: inclusive start of the range to delete.")
@click.option("--end", default=None, help="Or: exclusive end of the range to delete.")
@click.option("--where", "where_items", multiple=True, metavar="FIELD=VALUE", help="Only ticks matching this filter.")
@click.option("--dry-run", is_flag=True, help="Only count what would be deleted.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
def purge(
    declaration: str,
    collection: str | None,
    project: str | None,
    database: str,
    before: str | None,
    start: str | None,
    end: str | None,
    where_items: tuple[str, ...],
    dry_run: bool,
    yes: bool,
) -> None:
    """Delete old ticks (retention) at a bounded, ramped rate, with progress.

    \b
    Example:
      tsstore purge --spec myapp.schema:TICKS --before 2024-01-01T00:00:00Z --dry-run
      tsstore purge --spec myapp.schema:TICKS --before 2024-01-01T00:00:00Z --yes
    """
    try:
        spec = _pick_spec(declaration, collection)
        where = _parse_where(where_items)
        with connect(project=project, database=database) as (client, local):
            options = WriteOptions(ramp=False, max_ops_per_second=100_000) if local else WriteOptions()
            with TimeSeriesStore(client, spec, write_options=options) as store:
                bounds: dict[str, Any] = {"before": before, "start": start, "end": end, "where": where}
                counted = store.purge(dry_run=True, **bounds)
                if dry_run:
                    click.echo(f"dry run: {counted.matched} tick(s) would be deleted")
                    return
                if counted.matched and not yes:
                    click.confirm(f"delete {counted.matched} tick(s) from {spec.collection!r}?", abort=True)
                with tqdm(total=counted.matched, unit="tick", desc="deleting", dynamic_ncols=True) as bar:
                    result = store.purge(on_progress=bar.update, **bounds)
                click.echo(f"deleted {result.deleted} tick(s)")
    except TsstoreError as exc:
        raise click.ClickException(str(exc)) from exc
    except Interrupted as stop:
        click.echo(f"deleted {stop.partial.deleted} tick(s) before the interrupt")  # type: ignore[attr-defined]
        click.echo(f"interrupted: run the same command to delete the rest:\n  {_this_command()}", err=True)
        _exit_interrupted()


@main.group()
def counter() -> None:
    """Distributed counters: create, increment, read and roll up.

    \b
    Example:
      tsstore counter create counters/likes --shards 10
      tsstore counter incr counters/likes --by 5
      tsstore counter get counters/likes --live
      tsstore counter rollup counters/likes
    """


def _counter_options(command: Any) -> Any:
    command = click.argument("path")(command)
    command = click.option("--project", default=None, help="Use this Google Cloud project.")(command)
    return click.option("--database", default="(default)", show_default=True)(command)


def _with_counter(path: str, project: str | None, database: str, action: Callable[[ShardedCounter], str]) -> None:
    try:
        with connect(project=project, database=database) as (client, _):
            click.echo(action(ShardedCounter(client, path)))
    except TsstoreError as exc:
        raise click.ClickException(str(exc)) from exc


@counter.command("create")
@_counter_options
@click.option("--shards", type=int, required=True, help="Number of shard documents.")
def counter_create(path: str, project: str | None, database: str, shards: int) -> None:
    """Create a counter (idempotent: an existing one is left as it is).

    \b
    Example:
      tsstore counter create counters/likes --shards 10
    """
    _with_counter(path, project, database, lambda c: f"{c.path}: {c.create(shards=shards)} shards")


@counter.command("incr")
@_counter_options
@click.option("--by", type=int, default=1, show_default=True, help="Amount (negative allowed).")
def counter_incr(path: str, project: str | None, database: str, by: int) -> None:
    """Add to a counter (on a random shard).

    \b
    Example:
      tsstore counter incr counters/likes --by -2
    """

    def incr(c: ShardedCounter) -> str:
        c.increment(by)
        return f"{c.path}: {by:+d}"

    _with_counter(path, project, database, incr)


@counter.command("get")
@_counter_options
@click.option("--live", is_flag=True, help="Sum the shards now instead of reading the last roll-up.")
def counter_get(path: str, project: str | None, database: str, live: bool) -> None:
    """Print a counter's value and when it was true.

    \b
    Example:
      tsstore counter get counters/likes --live
    """

    def get(c: ShardedCounter) -> str:
        v = c.read(live=live)
        return f"{v.value} (as of {v.as_of.isoformat()}, {'live sum' if v.live else 'roll-up'})"

    _with_counter(path, project, database, get)


@counter.command("rollup")
@_counter_options
def counter_rollup(path: str, project: str | None, database: str) -> None:
    """Store the live total in the counter document.

    \b
    Example:
      tsstore counter rollup counters/likes
    """
    _with_counter(path, project, database, lambda c: f"{c.path}: rolled up {c.rollup().value}")


@counter.command("grow")
@_counter_options
@click.option("--shards", type=int, required=True, help="New (larger) number of shards.")
def counter_grow(path: str, project: str | None, database: str, shards: int) -> None:
    """Raise a counter's shard count; counts are kept.

    \b
    Example:
      tsstore counter grow counters/likes --shards 20
    """
    _with_counter(path, project, database, lambda c: f"{c.path}: {c.grow(shards=shards)} shards")


@main.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_spec_options
@click.option("--format", "fmt", type=click.Choice(sorted(FORMATS)), default=None, help="Default: from the suffix.")
@click.option(
    "--naive",
    default="error",
    show_default=True,
    metavar="error|utc|ZONE",
    help="Times without an offset: reject the row, or read them as UTC or in an IANA zone (Europe/Rome).",
)
@click.option("--strict", is_flag=True, help="Reject rows with values in undeclared columns.")
@click.option("--max-field-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_FIELD_BYTES, show_default=True)
@click.option(
    "--rejects",
    "rejects_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where rejected rows go (line,reason,raw). Default: FILE.rejects.csv",
)
@click.option(
    "--checkpoint",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Checkpoint file. Default: FILE.<target hash>.tsstore-checkpoint.json",
)
@click.option(
    "--on-duplicate",
    type=click.Choice(DUPLICATE_POLICIES),
    default=None,
    help="A row whose key and time another tick with other content holds: keep both, replace it, "
    "or reject the row. Default: the spec's (keep).",
)
def ingest(
    file: Path,
    declaration: str,
    collection: str | None,
    project: str | None,
    database: str,
    fmt: str | None,
    naive: str,
    strict: bool,
    max_field_bytes: int,
    rejects_path: Path | None,
    checkpoint: Path | None,
    on_duplicate: DuplicatePolicy | None,
) -> None:
    """Load ticks from a CSV, JSON Lines or Parquet file.

    Columns map to fields (dotted names such as price.currency become nested maps) and are
    typed by the spec's declared columns. Bad rows go to the reject file with their line
    number and reason; good rows are always written. Rows sharing key and time are all
    kept (see --on-duplicate). Interrupted (Ctrl-C, a crash)? Run the same command again:
    it resumes after the checkpoint and never stores a tick twice.

    \b
    Example:
      tsstore ingest ticks.csv --spec myapp.schema:TICKS
      tsstore ingest ticks.parquet --spec series.toml --naive utc
    """
    rejects_file = rejects_path or file.with_name(file.name + ".rejects.csv")
    sink, close = write_rejects(rejects_file)
    try:
        spec = _pick_spec(declaration, collection)
        with connect(project=project, database=database) as (client, local):
            options = WriteOptions(ramp=False, max_ops_per_second=100_000) if local else WriteOptions()
            with (
                TimeSeriesStore(client, spec, write_options=options) as store,
                tqdm(unit="row", desc="ingesting", dynamic_ncols=True, total=None) as bar,
            ):
                summary = ingest_file(
                    store,
                    file,
                    fmt=fmt,
                    naive=naive,
                    strict=strict,
                    max_field_bytes=max_field_bytes,
                    on_duplicate=on_duplicate,
                    checkpoint=checkpoint,
                    on_progress=bar.update,
                    on_reject=sink,
                    on_status=_status_on(bar),
                )
    except TsstoreError as exc:
        raise click.ClickException(str(exc)) from exc
    except Interrupted as stop:
        close()
        partial: IngestSummary = stop.partial  # type: ignore[assignment]
        click.echo(partial.describe())
        click.echo(
            f"interrupted: every row up to line {partial.checkpoint_line} is done (checkpoint saved); "
            f"run the same command to resume:\n  {_this_command()}",
            err=True,
        )
        _exit_interrupted()
    finally:
        close()
    click.echo(summary.describe())
    if summary.rejected:
        click.echo(f"rejected rows (line, reason, raw) are in {rejects_file}", err=True)


def _status_on(bar: tqdm) -> Callable[[str | None], None]:
    """Show what the writer waits for (a retry and its reason) beside the progress bar."""

    def show(text: str | None) -> None:
        bar.set_postfix_str(text or "", refresh=True)

    return show


def _this_command() -> str:
    return shlex.join(["tsstore", *sys.argv[1:]])


def _exit_interrupted() -> None:
    """Exit with 130 (the shell's code for Ctrl-C). Writer threads still waiting on a request
    Firestore has not answered would hold the interpreter's exit for up to a request
    timeout; what they carry is unconfirmed and already reported, so leave without them."""
    sys.stdout.flush()
    sys.stderr.flush()
    if any(t.name.startswith("tsstore-write") and t.is_alive() for t in threading.enumerate()):
        os._exit(130)
    raise SystemExit(130)


OUTPUT_FORMATS = ("table", "csv", "jsonl", "parquet")


@main.command()
@_spec_options
@_range_options
@click.option("--direction", type=click.Choice(["desc", "asc"]), default="desc", show_default=True)
@click.option("--limit", type=click.IntRange(min=1), default=None, help="At most this many rows (then a cursor).")
@click.option("--columns", default=None, help="Comma-separated fields to read (projection).")
@click.option("--cursor", default=None, help="Continue after the page that printed this cursor.")
@click.option("--format", "fmt", type=click.Choice(OUTPUT_FORMATS), default="table", show_default=True)
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None, help="File (default: stdout)."
)
@click.option("--stats", "show_stats", is_flag=True, help=_STATS_HELP)
def query(
    declaration: str,
    collection: str | None,
    project: str | None,
    database: str,
    where_items: tuple[str, ...],
    start: str | None,
    end: str | None,
    direction: str,
    limit: int | None,
    columns: str | None,
    cursor: str | None,
    fmt: str,
    output: Path | None,
    show_stats: bool,
) -> None:
    """Query ticks and print them as a table, or write CSV, JSON Lines or Parquet.

    With --limit, a following page is announced on stderr with its --cursor. Without it,
    every match is streamed out frame by frame.

    \b
    Example:
      tsstore query --where exchange=EXCHG1 --limit 20 --stats
      tsstore query --start 2019-01-02T09:00:00Z --end 2019-01-02T10:00:00Z --format parquet -o hour.parquet
    """
    if fmt == "parquet" and output is None:
        raise click.UsageError("--format parquet needs --output FILE")
    try:
        spec = _pick_spec(declaration, collection)
        args: dict[str, Any] = {
            "where": _parse_where(where_items),
            "start": start,
            "end": end,
            "direction": direction,
            "columns": _parse_columns(columns),
        }
        with connect(project=project, database=database) as (client, _), TimeSeriesStore(client, spec) as store:
            if limit is not None:
                page = store.query(limit=limit, cursor=cursor, **args)
                frames: Iterator[pd.DataFrame] = iter([ticks_to_frame(spec, page)])
                next_cursor, stats = page.cursor, page.stats
            else:
                if cursor is not None:
                    raise TsstoreError("--cursor continues a page: give --limit too")
                ticks = store.iter_ticks(**args)
                frames, next_cursor, stats = frames_of(spec, ticks, rows=10_000), None, ticks.stats
            rows = write_frames(frames, fmt=fmt, output=output)
    except TsstoreError as exc:
        raise click.ClickException(str(exc)) from exc
    if output is not None:
        click.echo(f"wrote {rows} row(s) to {output}", err=True)
    if next_cursor:
        click.echo(f"more rows follow: add --cursor {next_cursor}", err=True)
    if show_stats:
        click.echo(f"cost: {stats.describe()}", err=True)


@main.group()
def emulator() -> None:
    """The local store: a background Firestore emulator that keeps its data.

    \b
    Example:
      tsstore emulator start      # data kept in ~/.local/share/tsstore (or $TSSTORE_HOME)
      tsstore emulator status
      tsstore emulator stop       # saves the data; the next start restores it
    """


@emulator.command("start")
def emulator_start() -> None:
    """Start the local store in the background (no-op if it runs).

    \b
    Example:
      TSSTORE_HOME=~/ticks-store tsstore emulator start
    """
    try:
        store, started = supervisor.start()
    except TsstoreError as exc:
        raise click.ClickException(str(exc)) from exc
    verb = "started" if started else "already running"
    click.echo(f"local store {verb} at {store.address} (pid {store.pid}), data in {store.data_dir}")
    click.echo(f"  other tools can use it with: export FIRESTORE_EMULATOR_HOST={store.address}")


@emulator.command("stop")
def emulator_stop() -> None:
    """Stop the local store, saving its data for the next start.

    \b
    Example:
      tsstore emulator stop
    """
    try:
        stopped = supervisor.stop()
    except TsstoreError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"local store stopped; data kept in {stopped.data_dir}" if stopped else "local store is not running")


@emulator.command("status")
def emulator_status() -> None:
    """Say whether the local store runs, where, and where its data is (exit 3 if not).

    \b
    Example:
      tsstore emulator status
    """
    store = supervisor.status()
    if store is None:
        click.echo(f"local store is not running (home {supervisor.home()})")
        raise SystemExit(3)
    click.echo(f"local store running at {store.address} (pid {store.pid}), data in {store.data_dir}")
