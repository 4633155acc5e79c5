"""``--mode``: which database mode a command means, Firestore in Native mode or in Datastore
mode. Its own light module: ``tsstore emulator status --mode datastore`` imports neither pandas
nor a Google client."""

from __future__ import annotations

import click

#: ``--mode``: which database mode, for every command that reaches a database and for ``tsstore emulator``.
mode_option = click.option(
    "--mode",
    type=click.Choice(["native", "datastore"]),
    default="native",
    envvar="TSSTORE_MODE",
    show_envvar=True,
    show_default=True,
    help="The database's mode: Firestore in Native mode, or in Datastore mode (needs tsstore[datastore]).",
)


def in_mode(mode: str) -> str:
    """`` in Datastore mode`` after what a command names in that mode; nothing in Native mode."""
    return " in Datastore mode" if mode == "datastore" else ""
