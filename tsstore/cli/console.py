"""``tsstore console``: the console in the browser (:mod:`tsstore.console`, the ``console``
extra), over the declaration's series on the database every command reaches (the local store
by default; ``--project``, ``--mode`` as everywhere). ``--demo`` writes the demo's ticks
first, on a temporary emulator (with ``--memory``, on a memory database in this process)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import webbrowser
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

from tsstore.analytics.rollup import Rollup
from tsstore.cli.common import Database, declaration_options, load_named, memory_option, pick_declared
from tsstore.cli.exits import library_warnings, usage
from tsstore.console.app import Console, Series
from tsstore.console.forms import Reach
from tsstore.console.server import bind, new_token, serve_forever
from tsstore.demo import SPEC as DEMO_SPEC
from tsstore.demo import demo_rows
from tsstore.spec import SeriesSpec
from tsstore.store import TimeSeriesStore
from tsstore.wire import emulator_host
from tsstore.write.options import EMULATOR_WRITE_OPTIONS

#: The demo's data the console shows with ``--demo``: the seed's instruments and a day of ticks.
DEMO_TICKS = 20_000
#: The exit code after SIGTERM.
TERMINATED = 128 + signal.SIGTERM


@click.command("console")
@library_warnings
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to serve on (loopback only, "
              "unless --allow-remote).")  # fmt: skip
@click.option("--port", type=click.IntRange(0, 65535), default=0, help="The port (default: a free one).")
@click.option("--allow-remote", is_flag=True, help="Serve on an address other than loopback (anyone who reaches it "
              "with the token reads the database).")  # fmt: skip
@click.option("--no-browser", is_flag=True, help="Print the address; do not open a browser.")
@click.option("--files", type=click.Path(file_okay=False, path_type=Path), default=Path("indexes"), show_default=True,
              help="The folder whose generated index and rules files are compared with the declaration.")  # fmt: skip
@click.option("--demo", is_flag=True, help=f"Write the demo's ticks ({DEMO_TICKS:,}) to a temporary emulator (or, with "
              "--memory, a memory database) first and show them.")  # fmt: skip
@declaration_options
@memory_option
def console(*, host: str, port: int, allow_remote: bool, no_browser: bool, files: Path, demo: bool, declaration: str,
            collection: str | None, database: Database) -> None:  # fmt: skip
    """Open the console in the browser: the declared series, queries with their cost, bars,
    the live ticks, the layout and whether the generated files are current. Read-only.

    The page's address carries a random token (the console refuses requests without it).
    Ctrl-C (or SIGTERM) stops it.

    \b
    Example:
      tsstore console --spec series.toml
      tsstore console --demo                 # the demo's day on a temporary emulator
      tsstore console --demo --memory        # the demo's day in this process, without Java
    """
    if demo and database.project is not None and not database.memory:
        raise usage(f"--demo writes the demo's {DEMO_TICKS:,} ticks before it shows them, so it runs on a temporary "
                    f"emulator only: leave out --project {database.project} (or give --spec to look at that "
                    "project's series)")  # fmt: skip
    if database.memory and not demo:
        raise usage("--memory without --demo: the console reads what is stored, and a memory database of its own "
                    "would hold nothing; give --demo too (the demo's day, written first), or leave out --memory")
    declared = ((DEMO_SPEC,), ()) if demo else load_named(declaration)
    sock = bind(host, port, allow_remote=allow_remote)
    with contextlib.closing(sock), _stores(declaration, declared, collection, database, demo=demo) as (
        series, where, reach
    ):  # fmt: skip
        shown = Console(series, declaration, where, new_token(), mode=database.mode, files=files, declared=declared,
                        reach=reach)  # fmt: skip

        def announce(url: str) -> None:
            click.echo(f"tsstore console at {url}  (Ctrl-C stops it)")
            if not no_browser:
                webbrowser.open(url)

        stopped_by = serve_forever(shown, sock, announce=announce, host=host)
    if stopped_by == signal.SIGINT:
        raise KeyboardInterrupt  # Ctrl-C ends it as it ends every command (130)
    if stopped_by == signal.SIGTERM:
        _terminated()


def _terminated() -> None:
    """After SIGTERM: say so on stderr and exit 143 (128 + SIGTERM, as the shell reports a
    process the signal ended), without waiting for threads still blocked on a call."""
    click.echo("terminated: tsstore console stopped", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    if any(t is not threading.main_thread() and t.is_alive() and not t.daemon for t in threading.enumerate()):
        os._exit(TERMINATED)
    raise SystemExit(TERMINATED)


@contextlib.contextmanager
def _stores(declaration: str, declared: tuple[tuple[SeriesSpec, ...], tuple[Rollup, ...]], collection: str | None,
            database: Database, *, demo: bool) -> Iterator[tuple[dict[str, Series], str, Reach]]:  # fmt: skip
    """A store per declared series (only ``collection``'s when given) and per roll-up, on one
    client, where they are in words and as a command reaches them; with ``demo``, the demo's
    series on a temporary emulator, written first."""
    specs, rollups = declared
    if collection is not None:
        specs = (pick_declared(declaration, declared, collection=collection),)
    with database.connect(ephemeral=demo) as (client, local):
        options: Any = {"write_options": EMULATOR_WRITE_OPTIONS} if local else {}
        made: dict[str, Series] = {}
        for spec in specs:
            own = tuple(r for r in rollups if r.series.collection == spec.collection)
            made[spec.collection] = Series(spec, TimeSeriesStore(client, spec, **options), own,
                                           {r.name: TimeSeriesStore(client, r.spec) for r in own})  # fmt: skip
        if demo:
            _write_demo(made[DEMO_SPEC.collection].store)
        reach = Reach(project=database.project, database=database.name, mode=database.mode,
                      emulator=emulator_of(client))  # fmt: skip
        where = ("a memory database in this process" if database.memory else
                 f"{database.mode} mode, database {database.name}" + (" (local)" if local else ""))  # fmt: skip
        try:
            yield made, where, reach
        finally:
            for series in made.values():
                for store in (series.store, *series.rollup_stores.values()):
                    store.close()


def emulator_of(client: Any) -> str | None:
    """The ``host:port`` of the emulator ``client`` talks to, ``None`` for Google Cloud: a
    Firestore client's, or a ``datastore.Client``'s, which says it only in its base URL."""
    base = getattr(client, "base_url", None)
    if isinstance(base, str) and base.startswith("http://"):
        return base.removeprefix("http://")
    return emulator_host(client)


def _write_demo(store: TimeSeriesStore) -> None:
    written = store.write(demo_rows(DEMO_TICKS))
    click.echo(f"wrote the demo's {written.count:,} ticks to {store.spec.collection!r}")


__all__ = ["console"]
