"""``tsstore backfill`` and ``tsstore export``: the Beam pipelines of :mod:`tsstore.beam`
from the command line, on the DirectRunner (several local processes) or Dataflow. Options
the commands do not know (``--temp_location``, ``--region``, ``--max_num_workers``…) go to
Beam as they are."""

from __future__ import annotations

import glob
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tsstore.cli.common import (
    Database,
    query_options,
    series_options,
)
from tsstore.cli.exits import REJECTED, library_warnings, usage
from tsstore.cli.ingest import parse_options
from tsstore.cli.output import echo_figures
from tsstore.errors import ConfigError
from tsstore.read.query import Query
from tsstore.spec import DuplicatePolicy, SeriesSpec
from tsstore.typed import parse_columns

F = TypeVar("F", bound=Callable[..., Any])

#: A Beam command's settings: options it does not know go to Beam.
BEAM_ARGS = {"ignore_unknown_options": True, "allow_extra_args": True}


def runner_option(*, default: str | None = "DirectRunner", without: str = "") -> Callable[[F], F]:
    """The ``--runner`` option (and ``TSSTORE_RUNNER``); ``without``: what a command does when
    neither is given (``default`` ``None``)."""
    return click.option(
        "--runner",
        default=default,
        show_default=default is not None,
        envvar="TSSTORE_RUNNER",
        show_envvar=True,
        help="Beam runner: DirectRunner (local processes), BundleBasedDirectRunner (in this process) or "
        "DataflowRunner (then also --project, --region, --temp_location…, passed to Beam)." + without,
    )


_runner_option = runner_option()
_workers_option = click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    help="Processes working at once. DirectRunner: how many it starts (default: the CPUs here). Dataflow: "
    "max_num_workers x SDK processes per worker (one per vCPU); the write ramp is divided by it.",
)

_json_option = click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object.")


def _beam() -> Any:
    try:
        import tsstore.beam as beam
    except ConfigError as exc:
        raise click.ClickException(str(exc)) from None
    # Beam's own warnings (its workers' start-up, sinks replacing files) are not the user's.
    logging.getLogger("apache_beam").setLevel(logging.ERROR)
    return beam


def _check_local_paths(*, patterns: tuple[str, ...] = (), prefix: str | None = None) -> None:
    """Refuse, before Beam starts, a local file pattern that names no file (as ingest refuses a
    missing file) and an output prefix under a file; ``gs://`` and other remote paths are
    Beam's to check."""
    for pattern in patterns:
        if "://" not in pattern and not glob.glob(os.path.expanduser(pattern)):
            raise usage(f"{pattern!r} names no file")
    if prefix is None or "://" in prefix:
        return
    folder = next(f for f in Path(prefix).parents if f.exists())  # (the working folder exists)
    if not folder.is_dir():
        raise usage(f"--to {prefix}: {folder} is a file, not a folder")


def _workers(runner: str, workers: int | None) -> int:
    if workers is not None:
        return workers
    if runner == "BundleBasedDirectRunner":
        return 1  # runs in this process
    if runner in _beam().LOCAL_RUNNERS:
        return max(2, os.cpu_count() or 2)
    # No guess from --max_num_workers: each worker runs one process per vCPU, and a hint too
    # small lets the pipeline exceed the ramp by that factor.
    raise click.UsageError(
        f"with --runner {runner}, say how many processes write at once: --workers N "
        "(max_num_workers x vCPUs per worker)"
    )


def _beam_args(ctx: click.Context, database: Database, runner: str) -> list[str]:
    """The options Beam gets: the ones tsstore does not know, and ``--project`` (tsstore's
    Firestore project) as the job's project on a runner that needs one."""
    extra = list(ctx.args)  # click keeps --project for itself, so it is never among them
    if database.project and runner not in _beam().LOCAL_RUNNERS:
        extra.append(f"--project={database.project}")
    return extra


def _target(database: Database, *, writing: SeriesSpec | None = None) -> tuple[Any, bool]:
    if writing is not None:
        database.check_write_target(writing)
    with database.connect(writing=None if writing is None else writing.collection) as (client, local):
        return _beam().Target.of(client), local


@click.command("backfill", context_settings=BEAM_ARGS)
@click.argument("patterns", nargs=-1, required=True)
@library_warnings
@series_options
@parse_options
@click.option(
    "--rejects",
    default="tsstore-backfill.rejects.csv",
    show_default=True,
    help="Where rejected rows go (source,line,reason,raw); a gs:// path on Dataflow.",
)
@_runner_option
@_workers_option
@_json_option
@click.pass_context
def backfill(
    ctx: click.Context,
    *,
    patterns: tuple[str, ...],
    spec: SeriesSpec,
    database: Database,
    fmt: str | None,
    naive: str,
    strict: bool,
    max_field_bytes: int,
    time_column: str | None,
    time_unit: str | None,
    on_duplicate: DuplicatePolicy | None,
    rejects: str,
    runner: str,
    workers: int | None,
    as_json: bool,
) -> None:
    """Load tick files (CSV, JSON Lines, Parquet) with Apache Beam: PATTERNS are globs of
    local files or of gs:// objects (see the examples).

    Rows are parsed and rejected as `tsstore ingest` does (same reasons, same line numbers)
    and written as it writes them: a tick already stored is found, never stored twice, so a
    failed or repeated backfill is safe to run again. Each file is read by one worker; many
    files are read at once. Needs `pip install 'tsstore[beam]'`.

    \b
    Example:
      tsstore backfill 'ticks/*.parquet' --spec myapp.schema:TICKS
      tsstore backfill 'gs://b/ticks/*.csv' --spec series.toml --project P --runner DataflowRunner \\
        --region europe-west1 --temp_location gs://b/tmp --max_num_workers 10 --workers 40
    """
    beam = _beam()
    # click hands the options it does not know (Beam's, or a typo) to the patterns
    options_given, files = beam.split_options(patterns)
    _check_local_paths(patterns=tuple(files))
    extra = [*options_given, *_beam_args(ctx, database, runner)]
    count = _workers(runner, workers)
    options = beam.pipeline_options(runner=runner, workers=count, extra=extra)  # refuses unknown options first
    target, local = _target(database, writing=spec)
    click.echo(
        f"tsstore: backfill on {runner} with {count} writing process(es); "
        + ("no ramp (an emulator)" if local else f"ramp 500/50/5 up to {spec.max_write_rate} writes/s"),
        err=True,
    )
    summary = beam.backfill(
        files,
        spec,
        target=target,
        options=options,
        workers=count,
        fmt=fmt,
        naive=naive,
        strict=strict,
        max_field_bytes=max_field_bytes,
        time_column=time_column,
        time_unit=time_unit,
        on_duplicate=on_duplicate,
        ramp=not local,
        max_ops_per_second=100_000 if local else None,
        rejects=rejects,
    )
    echo_figures("json" if as_json else "text", summary.describe(), summary)
    if summary.rejected or summary.unreadable:
        click.echo(f"rejected rows (source, line, reason, raw) are in {rejects}", err=True)
        raise SystemExit(REJECTED)


@click.command("export", context_settings=BEAM_ARGS)
@library_warnings
@series_options
@query_options()
@click.option("--columns", default=None, help="Comma-separated fields to export. Default: the declared columns.")
@click.option("--to", "to", required=True, help="Output file prefix (out/part → out/part-00000-of-00002.parquet).")
@click.option("--format", "fmt", type=click.Choice(["parquet", "jsonl"]), default="parquet", show_default=True)
@_runner_option
@_workers_option
@_json_option
@click.pass_context
def export(
    ctx: click.Context,
    *,
    spec: SeriesSpec,
    database: Database,
    query: Query,
    columns: str | None,
    to: str,
    fmt: str,
    runner: str,
    workers: int | None,
    as_json: bool,
) -> None:
    """Export a range of ticks to Parquet (or JSON Lines) files with Apache Beam.

    The range is read at one snapshot, split into units of one shard chunk by one time
    slice that workers read in parallel. Columns: the document id, the timestamp, then the
    declared columns (or --columns). Needs `pip install 'tsstore[beam]'`.

    \b
    Example:
      tsstore export --start 2019-01-02T00:00:00Z --end 2019-01-03T00:00:00Z --to out/day
    """
    _check_local_paths(prefix=to)
    beam = _beam()
    extra = _beam_args(ctx, database, runner)
    count = _workers(runner, workers)
    options = beam.pipeline_options(runner=runner, workers=count, extra=extra)  # refuses unknown options first
    target, _ = _target(database)
    summary = beam.export(
        spec,
        target=target,
        options=options,
        to=to,
        fmt=fmt,
        where=query.where or None,
        start=query.start,
        end=query.end,
        columns=parse_columns(columns, spec=spec),
    )
    echo_figures("json" if as_json else "text", summary.describe(), summary)
    for path in [] if as_json else summary.files:  # the JSON object lists them
        click.echo(f"  {path}")


def seal_pipeline(ctx: click.Context, spec: SeriesSpec, database: Database, *, until: Any, runner: str,
                  workers: int | None) -> Any:  # fmt: skip
    """``tsstore seal --runner``: the seal as a Beam pipeline (:func:`tsstore.beam.seal`), a
    partition per element; its :class:`~tsstore.cold.manifest.SealResult`."""
    beam = _beam()
    if runner not in beam.LOCAL_RUNNERS and spec.cold is not None and spec.cold.local:
        raise usage(
            f"the cold tier of {spec.collection!r} is the local directory {spec.cold.path!r}: the workers of "
            f"--runner {runner} would each write to their own disk; declare a gs://bucket/prefix path, or use "
            f"--runner DirectRunner"
        )
    count = workers or (_workers(runner, None) if runner in beam.LOCAL_RUNNERS else 1)  # Dataflow scales itself
    options = beam.pipeline_options(runner=runner, workers=count, extra=_beam_args(ctx, database, runner))
    target, _ = _target(database, writing=spec)
    click.echo(f"tsstore: seal on {runner}, a partition per element", err=True)
    return beam.seal(spec, target=target, options=options, until=until)
