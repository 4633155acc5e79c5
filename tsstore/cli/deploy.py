"""``tsstore indexes`` and ``tsstore rules``: the files ``firebase deploy`` takes, written,
updated or checked from the series declaration; ``tsstore datastore-indexes``: Datastore
mode's ``index.yaml`` for ``gcloud datastore indexes create``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import click

from tsstore.cli.common import SPEC_ENV, SPEC_HELP, Command
from tsstore.cli.exits import library_warnings, usage
from tsstore.cli.mode import mode_option
from tsstore.declaration import load_declaration, load_specs
from tsstore.deploy import GeneratedFile
from tsstore.indexes.datastore import DEFAULT_INDEX_YAML, plan_index_yaml
from tsstore.indexes.file import DEFAULT_INDEX_FILE, plan_index_file
from tsstore.rules.file import DEFAULT_RULES_FILE, plan_rules_file

_CHECK_HELP = "Change nothing; exit 1 with a diff if the file is not what the declaration yields."
_STDOUT_HELP = "Print the file instead of writing it."


def _native_only(command: str, mode: str) -> None:
    """``--mode datastore`` for a Native-mode file: say where Datastore mode's comes from."""
    if mode != "datastore":
        return
    if command == "rules":
        raise usage(
            "Datastore mode has no security rules: only server clients with IAM roles reach a Datastore-mode "
            "database, so there is no rules file to write (its composite indexes: tsstore datastore-indexes)"
        )
    raise usage(
        "Datastore mode's composite indexes are an index.yaml, not firestore.indexes.json: write it with "
        "`tsstore datastore-indexes --spec ...` and deploy it with `gcloud datastore indexes create index.yaml`"
    )


def _declaration(positional: str | None, declaration: str | None) -> str:
    chosen = positional or declaration  # the argument, as before --spec existed
    if chosen is None:
        raise usage(f"which declaration? give --spec (e.g. --spec myapp.schema:TICKS) or set {SPEC_ENV}")
    return chosen


def _settle(update: GeneratedFile, *, command: str, declaration: str, default: Path, check: bool, stdout: bool) -> bool:
    """Print, check or write ``update``; whether the caller should go on to report a write."""
    if stdout:
        click.echo(update.new_text, nl=False)
        return False
    if check:
        if update.changed:
            click.echo(update.diff(), nl=False)
            what = (
                f"{update.path} is not what {declaration} yields"
                if update.old_text != update.new_text
                else f"{update.firebase.path} does not name {update.path.name}"
            )
            raise click.ClickException(
                f"{what}; run: tsstore {command} --spec {declaration}"
                + ("" if update.path == default else f" --file {update.path}")
            )
        click.echo(f"{update.path} is up to date with {declaration}")
        return False
    return True


def _wrote(update: GeneratedFile) -> None:
    missing = [folder for folder in (update.path.parent, *update.path.parent.parents) if not folder.exists()]
    written = update.write() if update.changed else []
    if missing:
        click.echo(f"made folder {', '.join(map(str, missing[::-1]))}")
    click.echo(f"wrote {', '.join(map(str, written))}" if written else f"{update.path} already up to date")


def _file_options(default: Path, what: str) -> Callable[[Command], Command]:
    """The arguments every command writing one generated file takes: the declaration
    (positional or ``--spec``), ``--file`` (default ``default``, the ``what``), ``--check``
    and ``--stdout``."""
    decorators = [
        click.argument("positional", metavar="[DECLARATION]", required=False),
        click.option("--spec", "declaration", default=None, envvar=SPEC_ENV, show_envvar=True, help=SPEC_HELP),
        click.option("--file", "path", type=click.Path(dir_okay=False, path_type=Path), default=str(default),
                     show_default=True, help=f"The {what} to write or update."),  # fmt: skip
        click.option("--check", is_flag=True, help=_CHECK_HELP),
        click.option("--stdout", "to_stdout", is_flag=True, help=_STDOUT_HELP),
    ]

    def apply(command: Command) -> Command:
        for decorator in reversed(decorators):  # the first listed is the outermost, as written by hand
            command = decorator(command)
        return command

    return apply


@click.command("indexes")
@library_warnings
@_file_options(DEFAULT_INDEX_FILE, "index file")
@click.option("--keep-stale", is_flag=True, help="Keep composite indexes with the timestamp but not the shard.")
@mode_option
def indexes(
    *, positional: str | None, declaration: str | None, path: Path, check: bool, to_stdout: bool, keep_stale: bool,
    mode: str,
) -> None:  # fmt: skip
    """Write or update firestore.indexes.json from the application's series declaration.

    The declaration (--spec, $TSSTORE_SPEC, or DECLARATION as the first argument) is an
    import path to a SeriesSpec or a list of them (``myapp.schema:TICKS``), or a .toml/.json
    file with a [[series]] list. Entries for other collections are kept;
    this collection's are replaced; stale timestamp indexes without the shard are removed
    (they bring the 500 writes/s hotspot back) unless --keep-stale. The firebase.json beside
    the file is made to name it.

    \b
    Example:
      tsstore indexes --spec myapp.schema:TICKS
      tsstore indexes --spec myapp.schema:TICKS --check  # in CI: fails when the file is stale
      cd indexes && firebase deploy --only firestore:indexes --project my-project
    """
    _native_only("indexes", mode)
    declaration = _declaration(positional, declaration)
    update = plan_index_file(path, load_specs(declaration), keep_stale=keep_stale)
    for stale in update.report.stale:
        verb = "kept (--keep-stale)" if keep_stale else "removed"
        click.echo(f"warning: stale index {stale} has the timestamp but not the shard: {verb}", err=True)
    for problem in update.problems:
        click.echo(f"warning: {problem}", err=True)
    if not _settle(
        update, command="indexes", declaration=declaration, default=DEFAULT_INDEX_FILE, check=check, stdout=to_stdout
    ):
        return
    if update.dropped_comments:
        click.echo(f"note: comments and trailing commas in {path} are not kept in the rewritten file", err=True)
    click.echo(update.report.summary())
    _wrote(update)


@click.command("rules")
@library_warnings
@_file_options(DEFAULT_RULES_FILE, "rules file")
@mode_option
def rules(
    *, positional: str | None, declaration: str | None, path: Path, check: bool, to_stdout: bool, mode: str
) -> None:
    """Write or update firestore.rules from the application's series declaration.

    What web and mobile clients may do with each collection is the declaration's access
    (default: signed-in clients read with a bounded limit, only the server writes). The
    generated block sits between the lines // tsstore:begin and // tsstore:end; your own
    rules outside them are kept as they are. A file without the markers gets the block at the
    top of its documents block. The firebase.json beside the file is made to name it.

    \b
    Example:
      tsstore rules --spec myapp.schema:TICKS
      tsstore rules --spec myapp.schema:TICKS --check  # in CI: fails when the file is stale
      cd indexes && firebase deploy --only firestore:rules,firestore:indexes --project my-project
    """
    _native_only("rules", mode)
    declaration = _declaration(positional, declaration)
    specs, rollups = load_declaration(declaration)
    update = plan_rules_file(path, specs, rollups)
    for warning in (*update.warnings, *filter(None, [update.firebase.warning])):
        click.echo(f"warning: {warning}", err=True)
    if _settle(
        update, command="rules", declaration=declaration, default=DEFAULT_RULES_FILE, check=check, stdout=to_stdout
    ):
        _wrote(update)


@click.command("datastore-indexes")
@library_warnings
@_file_options(DEFAULT_INDEX_YAML, "index.yaml")
def datastore_indexes(*, positional: str | None, declaration: str | None, path: Path, check: bool,
                      to_stdout: bool) -> None:  # fmt: skip
    """Write index.yaml for Firestore in Datastore mode from the series declaration.

    The same composite indexes as firestore.indexes.json, in the form gcloud deploys for a
    Datastore-mode database (a descending index ends in __key__, descending). The whole file
    is generated: indexes of kinds the declaration does not name are not kept, so keep them
    in a file of their own.

    \b
    Example:
      tsstore datastore-indexes --spec series.toml
      tsstore datastore-indexes --spec series.toml --check   # in CI: fails when the file is stale
      gcloud datastore indexes create indexes/index.yaml --database my-db --project my-project
    """
    declaration = _declaration(positional, declaration)
    update = plan_index_yaml(path, load_specs(declaration))
    if _settle(
        update, command="datastore-indexes", declaration=declaration, default=DEFAULT_INDEX_YAML, check=check,
        stdout=to_stdout,
    ):  # fmt: skip
        _wrote(update)
