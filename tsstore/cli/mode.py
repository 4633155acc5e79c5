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


def mode_mismatch(served: str) -> str:
    """What to do when the emulator a command reached runs the other mode (``served``) than the
    command's ``--mode``: the emulator refuses every call ("Database mode not set to ...")."""
    if served == "datastore":
        return (
            "the emulator runs Firestore in Datastore mode, and this command asked for Native mode: give --mode "
            "datastore (or TSSTORE_MODE=datastore) with DATASTORE_EMULATOR_HOST naming that emulator, or point "
            "FIRESTORE_EMULATOR_HOST at an emulator in Native mode (`tsstore emulator start`)"
        )
    return (
        "the emulator runs Firestore in Native mode, and this command asked for Datastore mode (--mode datastore): "
        "leave --mode out (TSSTORE_MODE=native) with FIRESTORE_EMULATOR_HOST naming that emulator, or point "
        "DATASTORE_EMULATOR_HOST at an emulator in Datastore mode (`tsstore emulator start --mode datastore`)"
    )
