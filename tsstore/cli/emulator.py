"""``tsstore emulator``: start, stop and ask about the local store (a background emulator)."""

from __future__ import annotations

from pathlib import Path

import click

from tsstore.cli.exits import library_warnings, usage
from tsstore.cli.mode import in_mode, mode_option
from tsstore.local import supervisor
from tsstore.local.emulator import Mode


@click.group("emulator")
def emulator() -> None:
    """The local store: a background Firestore emulator that keeps its data.

    One emulator serves one database mode: with --mode datastore (or TSSTORE_MODE=datastore)
    each command here means the local store in Datastore mode, a second emulator with its
    data in the datastore/ folder of the first's.

    \b
    Example:
      tsstore emulator start      # data kept in ~/.local/share/tsstore (or $TSSTORE_HOME)
      tsstore emulator status
      tsstore emulator stop       # saves the data; the next start restores it
      tsstore emulator start --mode datastore
    """


@emulator.command("start")
@library_warnings
@click.option(
    "--rules",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A firestore.rules file to enforce on web and mobile requests (e.g. indexes/firestore.rules).",
)
@mode_option
def emulator_start(*, rules: Path | None, mode: Mode) -> None:
    """Start the local store in the background (no-op if it runs).

    With --rules, the store enforces that security rules file on requests that are not the
    server's (your web or mobile app pointed at it), as production would; tsstore's own
    commands go through as the server. Given to a running store, the file replaces the rules
    of its project.

    \b
    Example:
      TSSTORE_HOME=~/ticks-store tsstore emulator start
      tsstore rules tsstore.demo:DECLARATION && tsstore emulator start --rules indexes/firestore.rules
      tsstore emulator start --mode datastore
    """
    if rules is not None and mode == "datastore":
        raise usage("--rules: security rules are Native mode's; a database in Datastore mode has none (IAM decides)")
    store, started = supervisor.start(rules=rules, mode=mode)
    verb = "started" if started else "already running"
    click.echo(f"local store{in_mode(mode)} {verb} at {store.address} (pid {store.pid}), data in {store.data_dir}")
    if rules is not None:
        click.echo(f"  enforcing the rules in {rules} on {store.rules_scope} (the server's requests bypass them)")
        for warning in store.rules_warnings:
            click.echo(f"warning: {warning}", err=True)
    variables = (  # datastore.Client() finds its project in GOOGLE_CLOUD_PROJECT only, not DATASTORE_PROJECT_ID
        f"DATASTORE_EMULATOR_HOST={store.address} DATASTORE_PROJECT_ID={store.project} "
        f"GOOGLE_CLOUD_PROJECT={store.project}"
        if mode == "datastore"
        else f"FIRESTORE_EMULATOR_HOST={store.address} GOOGLE_CLOUD_PROJECT={store.project}"
    )
    click.echo(f"  other tools can use it with: export {variables}")


@emulator.command("stop")
@library_warnings
@mode_option
def emulator_stop(*, mode: Mode) -> None:
    """Stop the local store, saving its data for the next start.

    \b
    Example:
      tsstore emulator stop
    """
    stopped = supervisor.stop(mode=mode)
    click.echo(f"local store{in_mode(mode)} stopped; data kept in {stopped.data_dir}" if stopped
               else f"local store{in_mode(mode)} is not running")  # fmt: skip


@emulator.command("status")
@mode_option
def emulator_status(*, mode: Mode) -> None:
    """Say whether the local store runs, where, and where its data is (exit 3 if not).

    \b
    Example:
      tsstore emulator status
    """
    store = supervisor.status(mode=mode)
    if store is None:
        click.echo(f"local store{in_mode(mode)} is not running (home {supervisor.home(mode)})")
        raise SystemExit(3)
    click.echo(f"local store{in_mode(mode)} running at {store.address} (pid {store.pid}), data in {store.data_dir}")
    if store.rules is not None:
        click.echo(f"  enforcing the rules in {store.rules} on {store.rules_scope}")
