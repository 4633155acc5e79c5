"""The cold tier: ``tsstore seal``."""

from __future__ import annotations

import click

from tsstore.cli.beam import BEAM_ARGS, runner_option, seal_pipeline
from tsstore.cli.common import Database, series_options
from tsstore.cli.exits import FAILED, exit_interrupted, usage
from tsstore.cli.output import echo_figures, figures_format
from tsstore.cli.values import naive_option
from tsstore.cold.manifest import SealedPartition
from tsstore.spec import SeriesSpec
from tsstore.typed import parse_time


@click.command("seal", context_settings=BEAM_ARGS)
@series_options
@click.option("--until", default=None, help="Seal the partitions that end by this time (default: now less seal_after).")
@click.option("--sql", is_flag=True, help="Seal nothing: print a DuckDB view over the sealed partitions' objects.")
@click.option("--verify", is_flag=True, help="Seal nothing: compare each sealed partition with Firestore (rows, ids); "
              "exit 1 if one differs. Reads every tick of the sealed partitions (billed).")  # fmt: skip
@click.option("--status", is_flag=True, help="Seal nothing: say where the sealed history ends, its size and its "
              "marked partitions.")  # fmt: skip
@click.option("--bigquery", "bigquery_table", default=None, metavar="DATASET.TABLE", help="Seal nothing: print a "
              "BigQuery external table over the sealed objects and a bq load of them (gs:// tiers).")  # fmt: skip
@naive_option
@runner_option(default=None, without=" Without it, the seal runs in this process.")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="With --runner DirectRunner: the processes it starts (default: the CPUs here).")  # fmt: skip
@figures_format
@click.pass_context
def seal(
    ctx: click.Context, *, spec: SeriesSpec, database: Database, until: str | None, sql: bool, verify: bool,
    status: bool, bigquery_table: str | None, naive: str | None, runner: str | None, workers: int | None, fmt: str,
) -> None:  # fmt: skip
    """Seal every closed partition of the series not sealed yet into its declared cold tier
    (cold = { path = ..., partition = "1D", seal_after = "2D" }): one Parquet object per
    partition, named in the manifest readers go by. A run again seals nothing new; a run
    stopped at any point is finished by the next. The path is a local directory or a Cloud
    Storage bucket, gs://bucket/prefix (pip install 'tsstore[gcs]'; the default Google
    credentials, or none with STORAGE_EMULATOR_HOST naming a local server).

    --sql, --verify, --status and --bigquery seal nothing: each looks at what is sealed.
    --verify reads the ids of every sealed tick from Firestore (billed as a read of those
    days) and exits 1 when a day differs from what was sealed.

    With --runner (or TSSTORE_RUNNER) the seal is an Apache Beam pipeline, a partition per
    element (pip install 'tsstore[beam]'); options tsstore does not know (--region,
    --temp_location…) go to Beam.

    \b
    Example:
      tsstore seal --spec myapp.cold:TICKS                  # every day closed for seal_after
      tsstore seal --spec myapp.cold:TICKS --until 2019-01-05T00:00:00Z
      tsstore seal --spec myapp.cold:TICKS --sql > sealed.sql   # a DuckDB view over what is sealed
      tsstore seal --spec myapp.cold:TICKS --verify         # each sealed day against Firestore
      tsstore seal --spec myapp.cold:TICKS --status         # sealed through, size, marked days
      tsstore seal --spec myapp.cold:TICKS --project P --runner DataflowRunner \\
        --region europe-west1 --temp_location gs://b/tmp
    """
    end = parse_time(until, option="--until", naive=naive)
    if runner is None and (ctx.args or workers is not None):
        given = ctx.args[0] if ctx.args else f"--workers {workers}"
        raise usage(f"{given} is a Beam pipeline's option; give --runner (or TSSTORE_RUNNER) to seal with Beam")
    if verify or status or bigquery_table is not None:
        if runner is not None and ctx.get_parameter_source("runner") is click.core.ParameterSource.COMMANDLINE:
            raise usage(f"--runner {runner!r} runs a seal; --verify, --status and --bigquery seal nothing: leave it out")
        _look(spec, database, verify=verify, status=status, bigquery_table=bigquery_table, sql=sql, until=until,
              fmt=fmt)  # fmt: skip
        return
    if sql:
        if until is not None:
            raise usage(f"--sql seals nothing, so --until {until!r} is not allowed with it; leave out --until")
        with database.open_store(spec) as store:
            click.echo(store.cold_sql())
        return
    done: list[SealedPartition] = []

    def sealed(partition: SealedPartition) -> None:
        done.append(partition)
        click.echo(f"sealed {partition.label}: {partition.rows} ticks, {partition.size} bytes ({partition.object})",
                   err=True)  # fmt: skip

    try:
        if runner is not None:
            result = seal_pipeline(ctx, spec, database, until=end, runner=runner, workers=workers)
            for partition in (*result.resealed, *result.sealed):
                sealed(partition)
        else:
            with database.open_store(spec, writes=spec.collection) as store:
                result = store.seal(until=end, on_progress=sealed)
    except KeyboardInterrupt:
        if runner is None:  # a pipeline's switches are its last step's, not counted here
            rows = sum(p.rows for p in done)
            click.echo(f"sealed {len(done)} partition(s) ({rows} ticks) before the interrupt", err=True)
        exit_interrupted("run the same command to seal the rest (a sealed partition is not sealed again)")
    echo_figures(fmt, result.describe(), result)


def _look(
    spec: SeriesSpec, database: Database, *, verify: bool, status: bool, bigquery_table: str | None, sql: bool,
    until: str | None, fmt: str,
) -> None:  # fmt: skip
    """``--verify``, ``--status`` or ``--bigquery``: one look at the sealed tier, nothing sealed."""
    given = [name for name, on in (("--sql", sql), ("--verify", verify), ("--status", status),
                                   ("--bigquery", bigquery_table is not None)) if on]  # fmt: skip
    if len(given) > 1:
        raise usage(f"{' and '.join(given)} are each a look of their own; give one of them")
    if until is not None:
        raise usage(f"{given[0]} seals nothing, so --until {until!r} is not allowed with it; leave out --until")
    with database.open_store(spec) as store:
        if status:
            found = store.cold_status()
            echo_figures(fmt, found.describe(), found)
        elif bigquery_table is not None:
            recipe = store.cold_bigquery(bigquery_table)
            echo_figures(fmt, recipe.describe(), recipe)
        else:
            checked = store.verify_cold()
            echo_figures(fmt, checked.describe(), checked)
            if checked.differ:
                raise SystemExit(FAILED)
