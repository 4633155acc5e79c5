"""The cold tier: ``tsstore seal``."""

from __future__ import annotations

import click

from tsstore.cli.common import Database, series_options
from tsstore.cli.exits import exit_interrupted, usage
from tsstore.cli.output import echo_figures, figures_format
from tsstore.cli.values import cli_time, naive_option
from tsstore.cold.manifest import SealedPartition
from tsstore.spec import SeriesSpec


@click.command("seal")
@series_options
@click.option("--until", default=None, help="Seal the partitions that end by this time (default: now less seal_after).")
@click.option("--sql", is_flag=True, help="Seal nothing: print a DuckDB view over the sealed partitions' objects.")
@naive_option
@figures_format
def seal(*, spec: SeriesSpec, database: Database, until: str | None, sql: bool, naive: str | None, fmt: str) -> None:
    """Seal every closed partition of the series not sealed yet into its declared cold tier
    (cold = { path = ..., partition = "1D", seal_after = "2D" }): one Parquet object per
    partition, named in the manifest readers go by. A run again seals nothing new; a run
    stopped at any point is finished by the next. The path is a local directory or a Cloud
    Storage bucket, gs://bucket/prefix (pip install 'tsstore[gcs]'; the default Google
    credentials, or none with STORAGE_EMULATOR_HOST naming a local server).

    \b
    Example:
      tsstore seal --spec myapp.cold:TICKS                  # every day closed for seal_after
      tsstore seal --spec myapp.cold:TICKS --until 2019-01-05T00:00:00Z
      tsstore seal --spec myapp.cold:TICKS --sql > sealed.sql   # a DuckDB view over what is sealed
    """
    end = cli_time(until, option="--until", naive=naive)
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
        with database.open_store(spec, writes=spec.collection) as store:
            result = store.seal(until=end, on_progress=sealed)
    except KeyboardInterrupt:
        rows = sum(p.rows for p in done)
        click.echo(f"sealed {len(done)} partition(s) ({rows} ticks) before the interrupt", err=True)
        exit_interrupted("run the same command to seal the rest (a sealed partition is not sealed again)")
    echo_figures(fmt, result.describe(), result)
