"""``tsstore ingest``: load ticks from a CSV, JSON Lines or Parquet file, with a progress bar,
a reject file and a checkpoint to resume from."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click
from tqdm import tqdm

from tsstore.cli.common import Command, Database, series_options
from tsstore.cli.exits import REJECTED, exit_interrupted, library_warnings, usage
from tsstore.cli.output import echo_figures
from tsstore.cli.values import OutputFile
from tsstore.errors import IngestError, Interrupted
from tsstore.ingest import DEFAULT_MAX_FIELD_BYTES, FORMATS, IngestSummary, ingest_file, write_rejects
from tsstore.rows.readers import detect_format
from tsstore.rows.parse import EPOCH_UNITS
from tsstore.spec import DUPLICATE_POLICIES, DuplicatePolicy, SeriesSpec
from tsstore.times import naive_zone


def _zone(ctx: click.Context, param: click.Parameter, value: str) -> str:
    try:
        naive_zone(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


def parse_options(command: Command) -> Command:
    """How rows are read, for every command that loads files (``ingest``, ``backfill``):
    ``--format``, ``--naive``, ``--strict``, ``--max-field-bytes``, ``--time-column``,
    ``--time-unit``, ``--on-duplicate``."""
    for option in reversed(
        [
            click.option(
                "--format", "fmt", type=click.Choice(sorted(FORMATS)), default=None, help="Default: from the suffix."
            ),
            click.option(
                "--naive",
                default="error",
                show_default=True,
                callback=_zone,
                metavar="error|utc|ZONE",
                help="Times without an offset: reject the row, or read them as UTC or in an IANA zone (Europe/Rome).",
            ),
            click.option("--strict", is_flag=True, help="Reject rows with values in undeclared columns."),
            click.option(
                "--max-field-bytes", type=click.IntRange(min=1), default=DEFAULT_MAX_FIELD_BYTES, show_default=True
            ),
            click.option(
                "--time-column", default=None, help="The column holding each tick's time. Default: the spec's "
                "timestamp field.",
            ),
            click.option(
                "--time-unit", type=click.Choice(sorted(EPOCH_UNITS)), default=None,
                help="Read the time column as a number of s, ms, us or ns since 1970-01-01 UTC. Default: ISO-8601.",
            ),
            click.option(
                "--on-duplicate",
                type=click.Choice(DUPLICATE_POLICIES),
                default=None,
                help="A row whose key and time another tick with other content holds: keep both, replace it, "
                "or reject the row. Default: the spec's (keep).",
            ),
        ]
    ):
        command = option(command)
    return command


@click.command("ingest")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@library_warnings
@series_options
@parse_options
@click.option(
    "--rejects",
    "rejects_path",
    type=OutputFile(),
    default=None,
    help="Where rejected rows go (line,reason,raw). Default: FILE.rejects.csv",
)
@click.option(
    "--checkpoint",
    type=OutputFile(),
    default=None,
    help="Checkpoint file. Default: FILE.<target hash>.tsstore-checkpoint.json",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")
def ingest(
    *,
    file: Path,
    spec: SeriesSpec,
    database: Database,
    fmt: str | None,
    naive: str,
    strict: bool,
    max_field_bytes: int,
    rejects_path: Path | None,
    checkpoint: Path | None,
    on_duplicate: DuplicatePolicy | None,
    time_column: str | None,
    time_unit: str | None,
    as_json: bool,
) -> None:
    """Load ticks from a CSV, JSON Lines or Parquet file.

    Columns map to fields (dotted names such as price.currency become nested maps) and are
    typed by the spec's declared columns. Bad rows go to the reject file with their line
    number and reason; good rows are always written. Rows sharing key and time are all
    kept (see --on-duplicate). Interrupted (Ctrl-C, a crash)? Run the same command again:
    it resumes after the checkpoint and never stores a tick twice. Exit 4 when it finished
    with rejected rows (the summary counts them), 0 when every row was stored.

    \b
    Example:
      tsstore ingest ticks.csv --spec myapp.schema:TICKS
      tsstore ingest ticks.parquet --spec series.toml --naive utc
      tsstore ingest trades.csv --spec series.toml --time-column ts --time-unit ms
    """
    try:
        detect_format(file, fmt)
    except IngestError as exc:  # the file's name, as typed: --format says what it is
        raise usage(str(exc)) from None
    if file.stat().st_size == 0:  # the wrong file, or one still being written: not a load of no rows
        raise usage(f"{file} is empty (0 bytes: no header, no rows); there is nothing to ingest")
    rejects_file = rejects_path or file.with_name(file.name + ".rejects.csv")
    sink, close = write_rejects(rejects_file)
    try:
        with (
            database.open_store(spec, writes=spec.collection) as store,
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
                time_column=time_column,
                time_unit=time_unit,
            )
    except Interrupted as stop:
        close()
        partial: IngestSummary = stop.partial  # type: ignore[assignment]
        click.echo(partial.describe())
        exit_interrupted(
            f"every row up to line {partial.checkpoint_line} is done (checkpoint saved); run the same command to resume"
        )
    finally:
        close()
    echo_figures("json" if as_json else "text", summary.describe(), summary)
    if summary.rejected:
        click.echo(f"rejected rows (line, reason, raw) are in {rejects_file}", err=True)
        raise SystemExit(REJECTED)


def _status_on(bar: tqdm) -> Callable[[str | None], None]:
    """Show what the writer waits for (a retry and its reason) beside the progress bar."""

    def show(text: str | None) -> None:
        bar.set_postfix_str(text or "", refresh=True)

    return show
