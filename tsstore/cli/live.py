"""``tsstore tail`` (new ticks as they are written) and ``tsstore watch`` (the newest ticks,
redrawn as they change)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from typing import TypeVar

import click
import pandas as pd

from tsstore.cli.common import WHERE_HELP, Database, series_options, where_option
from tsstore.cli.exits import check_interrupted, ctrl_c_deferred, exit_interrupted, library_warnings, usage
from tsstore.cli.output import rows_format, write_frames
from tsstore.cli.values import naive_option
from tsstore.errors import TsstoreError
from tsstore.frames import ticks_to_frame
from tsstore.live.listen import LiveTail, LiveWatch
from tsstore.spec import SeriesSpec
from tsstore.times import to_duration
from tsstore.typed import parse_time, parse_where

#: The columns tail adds: the document id (a stable key downstream) and the late mark.
ID_COLUMN, LATE_COLUMN = "_id", "_late"
#: How often a wait for the next tick or update looks for a Ctrl-C that Python dropped (seconds).
CTRL_C_CHECK = 1.0

T = TypeVar("T")


def refuse_datastore_mode(command: str, database: Database) -> None:
    """Refuse ``tail``/``watch`` in Datastore mode before connecting, advising what a command
    line does instead (the library's own refusal advises a Python call)."""
    if database.mode == "datastore":
        raise usage(
            f"tsstore {command} reads live with Firestore's real-time listeners, which Datastore mode does not have; "
            "poll instead: run `tsstore query --mode datastore --direction asc --start T` on a timer, T the time of "
            "the last tick it printed (or keep the series in a Native-mode database)"
        )


@click.command("tail")
@library_warnings
@series_options
@where_option(help="Only these ticks: " + WHERE_HELP)
@rows_format
@click.option("--since", default=None, help="Deliver ticks created from this time on (default: now).")
@naive_option
@click.option("--lateness", default="30s", show_default=True, help="How far behind the newest tick one is seen.")
@click.option("--max-ticks", type=click.IntRange(min=1), default=None, help="Stop after this many ticks.")
def tail(
    *, spec: SeriesSpec, database: Database, where_items: tuple[str, ...], fmt: str, since: str | None,
    naive: str | None, lateness: str, max_ticks: int | None,
) -> None:  # fmt: skip
    """Print ticks as they are written, across every shard, until Ctrl-C (or --max-ticks),
    then a one-line summary on stderr (exit 130 after Ctrl-C). Each row carries its document id ('_id') and whether
    it is late ('_late': older than a tick printed before it).

    \b
    Example:
      tsstore tail --spec spec.toml --where symbol=AAA --where symbol=BBB --format jsonl
    """
    refuse_datastore_mode("tail", database)
    try:
        behind = to_duration(lateness, name="--lateness")
    except ValueError as exc:
        raise usage(str(exc)) from None
    if behind < dt.timedelta(0):
        raise usage(f"--lateness {lateness!r} is negative; give a duration of 0 or more")
    where, start = parse_where(where_items, spec=spec), parse_time(since, option="--since", naive=naive)
    printed = {"ticks": 0, "late": 0}
    try:
        with database.open_store(spec) as store, store.tail(where=where, since=start, lateness=behind) as live:
            write_frames(_frames(spec, live, max_ticks, printed), fmt=fmt, output=None, flush=True)
    except KeyboardInterrupt:
        exit_interrupted(f"tailed {printed['ticks']} tick(s), {printed['late']} late", show_command=False)
    click.echo(f"tailed {printed['ticks']} tick(s), {printed['late']} late", err=True)


def _frames(spec: SeriesSpec, live: LiveTail, limit: int | None, printed: dict[str, int]) -> Iterator[pd.DataFrame]:
    """One frame per tick; ``printed`` counts those written. Ctrl-C waits while a row is counted
    and written (held back from the count until the writer asks for the next frame), so the
    summary counts exactly the rows printed: it cannot land between a row and its count."""
    for number, item in enumerate(_until_ctrl_c(live.next_tick, live), start=1):
        frame = ticks_to_frame(spec, [item.tick])
        taken = [c for c in (ID_COLUMN, LATE_COLUMN) if c in frame.columns]
        if taken:
            raise TsstoreError(f"the ticks have a field {taken[0]!r}, a column tail adds itself")
        frame.insert(0, LATE_COLUMN, item.late)
        frame.insert(0, ID_COLUMN, item.tick.id)
        with ctrl_c_deferred():
            printed["ticks"] += 1
            printed["late"] += item.late
            yield frame
        if number == limit:
            return


def _until_ctrl_c(next_item: Callable[[float], T | None], live: LiveTail | LiveWatch) -> Iterator[T]:
    """What ``live`` delivers until it is closed, looking between waits for a Ctrl-C that
    Python dropped (:func:`~tsstore.cli.exits.check_interrupted`)."""
    while True:
        check_interrupted()
        item = next_item(CTRL_C_CHECK)
        if item is not None:
            yield item
        elif live.closed:
            return


@click.command("watch")
@library_warnings
@series_options
@where_option(help="Only these ticks: " + WHERE_HELP)
@click.option("--limit", type=click.IntRange(min=1), default=20, show_default=True, help="How many newest ticks.")
@click.option("--once", is_flag=True, help="Print the first window and exit.")
def watch(*, spec: SeriesSpec, database: Database, where_items: tuple[str, ...], limit: int, once: bool) -> None:
    """Show the newest ticks across every shard, redrawn each time they change, until Ctrl-C
    (exit 130).

    \b
    Example:
      tsstore watch --spec spec.toml --where exchange=EXCHG1 --limit 15
    """
    refuse_datastore_mode("watch", database)
    where = parse_where(where_items, spec=spec)
    with database.open_store(spec) as store, store.watch(where=where, limit=limit) as live:
        for update in _until_ctrl_c(live.next_update, live):
            if not once:
                click.clear()
            frame = ticks_to_frame(spec, update.window)
            click.echo(frame.to_string() if len(frame) else "(no ticks yet)")
            stamp = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
            click.echo(f"{stamp}: {len(update.entered)} entered, {len(update.left)} left", err=True)
            if once:
                return
