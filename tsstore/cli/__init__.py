"""The ``tsstore`` command: a thin click layer over the library.

Each command parses options, calls the library and formats the output; what they share
(the database and series options, the query options, opening a store, turning library
errors into clean click errors) is in :mod:`tsstore.cli.common`, written once. One module
per command group: :mod:`~tsstore.cli.demo`, :mod:`~tsstore.cli.query` (query, count,
explain, purge), :mod:`~tsstore.cli.deploy`, :mod:`~tsstore.cli.counters`,
:mod:`~tsstore.cli.ingest`, :mod:`~tsstore.cli.emulator`, :mod:`~tsstore.cli.layout`
(shards, reshard, capacity), :mod:`~tsstore.cli.live` (tail, watch), :mod:`~tsstore.cli.analytics`
(aggregate, latest, bars, asof, rollup), :mod:`~tsstore.cli.beam` (backfill, export on Apache Beam);
:mod:`~tsstore.cli.output` writes query results.
"""

from __future__ import annotations

import click

from tsstore.cli import analytics, beam, counters, demo, deploy, emulator, ingest, layout, live, query
from tsstore.cli.exits import Group


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="tsstore")
def main() -> None:
    """tsstore: high-rate time series in Firestore with sharded timestamps.

    \b
    Exit codes: 0 done, 1 a failure, 2 a usage error, 3 not running (emulator
    status), 130 Ctrl-C.
    Environment: TSSTORE_SPEC, TSSTORE_PROJECT and TSSTORE_DATABASE stand for
    --spec, --project and --database. Commands that print figures or rows (but
    watch, which redraws a screen) take --format json. Times are ISO-8601 with an offset (or add --naive utc|ZONE).
    """


for _command in (
    demo.demo,
    deploy.indexes,
    deploy.rules,
    query.count,
    analytics.aggregate,
    analytics.latest,
    analytics.bars,
    analytics.aligned,
    analytics.asof,
    analytics.rollup,
    query.explain,
    query.purge,
    query.query_ticks,
    layout.shards,
    layout.reshard,
    layout.capacity,
    live.tail,
    live.watch,
    ingest.ingest,
    beam.backfill,
    beam.export,
    counters.counter,
    emulator.emulator,
):
    main.add_command(_command)

#: Earlier names of commands, kept (hidden, with a warning on standard error) for the scripts
#: that still call them.
RENAMED = {"plan": layout.capacity}
for _old, _new in RENAMED.items():
    main.add_command(
        click.Command(
            _old, params=_new.params, callback=_new.callback, help=_new.help, hidden=True,
            deprecated=f"It is now 'tsstore {_new.name}', with the same options.",
        )  # fmt: skip
    )

__all__ = ["main"]
