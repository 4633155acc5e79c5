"""``tsstore emulator``: start, stop and ask about the local store (a background emulator)."""

from __future__ import annotations

from pathlib import Path

import click

from tsstore.cli.exits import library_warnings
from tsstore.local import supervisor


@click.group("emulator")
def emulator() -> None:
    """The local store: a background Firestore emulator that keeps its data.

    \b
    Example:
      tsstore emulator start      # data kept in ~/.local/share/tsstore (or $TSSTORE_HOME)
      tsstore emulator status
      tsstore emulator stop       # saves the data; the next start restores it
    """


@emulator.command("start")
@library_warnings
@click.option(
    "--rules",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="A firestore.rules file to enforce on web and mobile requests (e.g. indexes/firestore.rules).",
)
def emulator_start(*, rules: Path | None) -> None:
    """Start the local store in the background (no-op if it runs).

    With --rules, the store enforces that security rules file on requests that are not the
    server's (your web or mobile app pointed at it), as production would; tsstore's own
    commands go through as the server. Given to a running store, the file replaces the rules
    of its project.

    \b
    Example:
      TSSTORE_HOME=~/ticks-store tsstore emulator start
      tsstore rules tsstore.demo:DECLARATION && tsstore emulator start --rules indexes/firestore.rules
    """
    store, started = supervisor.start(rules=rules)
    verb = "started" if started else "already running"
    click.echo(f"local store {verb} at {store.address} (pid {store.pid}), data in {store.data_dir}")
    if rules is not None:
        click.echo(f"  enforcing the rules in {rules} on {store.rules_scope} (the server's requests bypass them)")
        for warning in store.rules_warnings:
            click.echo(f"warning: {warning}", err=True)
    click.echo(
        "  other tools can use it with: "
        f"export FIRESTORE_EMULATOR_HOST={store.address} GOOGLE_CLOUD_PROJECT={store.project}"
    )


@emulator.command("stop")
@library_warnings
def emulator_stop() -> None:
    """Stop the local store, saving its data for the next start.

    \b
    Example:
      tsstore emulator stop
    """
    stopped = supervisor.stop()
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
    if store.rules is not None:
        click.echo(f"  enforcing the rules in {store.rules} on {store.rules_scope}")
