"""``tsstore indexes``: write, update or check firestore.indexes.json from the series declaration."""

from __future__ import annotations

from pathlib import Path

import click

from tsstore.cli.common import SPEC_ENV, SPEC_HELP, library_warnings
from tsstore.cli.exits import usage
from tsstore.declaration import load_specs
from tsstore.indexes.file import DEFAULT_INDEX_FILE, plan_index_file


@click.command("indexes")
@library_warnings
@click.argument("positional", metavar="[DECLARATION]", required=False)
@click.option("--spec", "declaration", default=None, envvar=SPEC_ENV, show_envvar=True, help=SPEC_HELP)
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
def indexes(
    *, positional: str | None, declaration: str | None, path: Path, check: bool, to_stdout: bool, keep_stale: bool
) -> None:
    """Write or update firestore.indexes.json from the application's series declaration.

    The declaration (--spec, $TSSTORE_SPEC, or DECLARATION as the first argument) is an
    import path to a SeriesSpec or a list of them (``myapp.schema:TICKS``), or a .toml/.json
    file with a [[series]] list. Entries for other collections are kept;
    this collection's are replaced; stale timestamp indexes without the shard are removed
    (they bring the 500 writes/s hotspot back) unless --keep-stale.

    \b
    Example:
      tsstore indexes --spec myapp.schema:TICKS
      tsstore indexes --spec series.toml --check      # in CI: fails when the file is stale
      cd indexes && firebase deploy --only firestore:indexes --project my-project
    """
    declaration = positional or declaration  # the argument, as before --spec existed
    if declaration is None:
        raise usage(f"which declaration? give --spec (e.g. --spec myapp.schema:TICKS) or set {SPEC_ENV}")
    update = plan_index_file(path, load_specs(declaration), keep_stale=keep_stale)
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
            click.echo(update.diff() if update.old_text is not None else f"{path} does not exist\n", nl=False)
            raise click.ClickException(
                f"{path} is not what {declaration} yields; run: tsstore indexes --spec {declaration}"
                + ("" if path == Path(DEFAULT_INDEX_FILE) else f" --file {path}")
            )
        click.echo(f"{path} is up to date with {declaration}")
        return
    if update.dropped_comments:
        click.echo(f"note: comments and trailing commas in {path} are not kept in the rewritten file", err=True)
    written = update.write() if update.changed else []
    click.echo(update.report.summary())
    click.echo(f"wrote {', '.join(map(str, written))}" if written else f"{path} already up to date")
