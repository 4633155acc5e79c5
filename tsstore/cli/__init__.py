"""The ``tsstore`` command: a thin click layer over the library.

Each command parses options, calls the library and formats the output; what they share
(the database and series options, the query options, opening a store, turning library
errors into clean click errors) is in :mod:`tsstore.cli.common`, written once. One module
per command group: :mod:`~tsstore.cli.demo`, :mod:`~tsstore.cli.query` (query, count,
explain, purge), :mod:`~tsstore.cli.deploy`, :mod:`~tsstore.cli.counters`,
:mod:`~tsstore.cli.ingest`, :mod:`~tsstore.cli.emulator`, :mod:`~tsstore.cli.layout`
(shards, reshard, capacity), :mod:`~tsstore.cli.live` (tail, watch), :mod:`~tsstore.cli.analytics`
(aggregate, latest, bars, asof, rollup), :mod:`~tsstore.cli.cold` (seal), :mod:`~tsstore.cli.beam` (backfill, export on Apache Beam),
:mod:`~tsstore.cli.console` (the console in the browser, with the ``console`` extra);
:mod:`~tsstore.cli.output` writes query results.
"""

from __future__ import annotations

import importlib

import click

from tsstore.cli.exits import Group, usage
from tsstore.cli.logs import log_level_option

#: Each command as ``module:attribute`` under :mod:`tsstore.cli`, in the order ``--help``
#: lists them. A command's module is imported when the command is looked up, so ``tsstore
#: emulator status`` does not import pandas or the Firestore client.
COMMANDS = {
    "demo": "demo:demo",
    "indexes": "deploy:indexes",
    "rules": "deploy:rules",
    "datastore-indexes": "deploy:datastore_indexes",
    "count": "query:count",
    "aggregate": "analytics:aggregate",
    "latest": "analytics:latest",
    "bars": "analytics:bars",
    "aligned": "analytics:aligned",
    "asof": "analytics:asof",
    "rollup": "analytics:rollup",
    "explain": "query:explain",
    "purge": "query:purge",
    "seal": "cold:seal",
    "query": "query:query_ticks",
    "shards": "layout:shards",
    "reshard": "layout:reshard",
    "capacity": "layout:capacity",
    "tail": "live:tail",
    "watch": "live:watch",
    "ingest": "ingest:ingest",
    "backfill": "beam:backfill",
    "export": "beam:export",
    "counter": "counters:counter",
    "emulator": "emulator:emulator",
    "console": "console:console",
}
#: Earlier names of commands, kept (hidden, with a warning on standard error) for the scripts
#: that still call them.
RENAMED = {"plan": "capacity"}
#: The commands that take ``--memory``: they make their data and read it in one process, where
#: a memory database lives (every other command reads or writes data another process keeps).
MEMORY_COMMANDS = ("demo", "console")


class _Commands(Group):
    """The ``tsstore`` group, whose commands are imported when looked up."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args[:1] == ["--memory"]:
            raise usage("--memory is an option of a command, not of tsstore: give it after the command, as in "
                        "tsstore demo --memory or tsstore console --demo --memory")  # fmt: skip
        return super().parse_args(ctx, args)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        given = rest[: rest.index("--")] if "--" in rest else rest
        if name not in MEMORY_COMMANDS and "--memory" in given:  # refused by name, not as an unknown option
            raise usage(
                f"--memory: tsstore {name} takes no --memory. A memory database lives only in the process that makes "
                "it, so only the commands that write their data and read it in one run take it: tsstore demo --memory "
                "and tsstore console --demo --memory"
            )
        if command is not None:  # the command's one span, its verbs' under it, until its context closes
            from tsstore import telemetry

            ctx.with_resource(telemetry.operation(f"tsstore {name}", {"process.command": f"tsstore {name}"}))
        return name, command, rest

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in RENAMED:
            new = self.get_command(ctx, RENAMED[cmd_name])
            assert new is not None
            return click.Command(
                cmd_name, params=new.params, callback=new.callback, help=new.help, hidden=True,
                deprecated=f"It is now 'tsstore {new.name}', with the same options.",
            )  # fmt: skip
        if cmd_name not in COMMANDS:
            return None
        module, _, attribute = COMMANDS[cmd_name].partition(":")
        command = getattr(importlib.import_module(f"tsstore.cli.{module}"), attribute)
        assert isinstance(command, click.Command) and command.name == cmd_name, (cmd_name, command)
        return command


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="tsstore")
@log_level_option
def main() -> None:
    """tsstore: high-rate time series in Firestore with sharded timestamps.

    \b
    Exit codes: 0 done, 1 a runtime failure (the command was right; Firestore or
    what is stored does not allow it now), 2 a usage error (fixing the command
    fixes it), 3 not running (emulator status), 4 done with rows rejected
    (ingest, backfill), 130 Ctrl-C.
    Environment: TSSTORE_SPEC, TSSTORE_PROJECT, TSSTORE_DATABASE and
    TSSTORE_LOG_LEVEL stand for --spec, --project, --database and --log-level.
    Log records go to stderr (WARNING and above unless --log-level says).
    Commands that print figures or rows (but watch, which redraws a screen)
    take --format json. Times are ISO-8601 with an offset (or add --naive utc|ZONE).
    """


__all__ = ["main"]
