"""``tsstore counter``: create, increment, read, roll up and grow distributed counters."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

import click

from tsstore.cli.common import Database, database_options
from tsstore.cli.exits import library_warnings
from tsstore.cli.output import figures_format
from tsstore.counters import MAX_COUNTER_SHARDS, ShardedCounter
from tsstore.limits import MAX_INT64, MIN_INT64

SHARDS = click.IntRange(1, MAX_COUNTER_SHARDS)


@click.group("counter")
def counter() -> None:
    """Distributed counters: create, increment, read and roll up.

    \b
    Example:
      tsstore counter create counters/likes --shards 10
      tsstore counter incr counters/likes --by 5
      tsstore counter get counters/likes --live
      tsstore counter rollup counters/likes
    """


def _counter_command(name: str) -> Callable[[Callable[..., str]], click.Command]:
    """Register ``tsstore counter NAME``. It takes PATH (the counter document's path) and the
    database options; the command gets the counter at PATH and its own options, and what it
    returns is printed. A refusal of the library ends it with a clean error."""

    def register(command: Callable[..., str]) -> click.Command:
        @functools.wraps(command)
        def run(*, path: str, database: Database, **options: Any) -> None:
            with database.connect() as (client, _):
                click.echo(command(ShardedCounter(client, path), **options))

        return counter.command(name)(library_warnings(click.argument("path")(database_options(run))))

    return register


@_counter_command("create")
@click.option("--shards", type=SHARDS, required=True, help="Number of shard documents.")
def counter_create(sharded: ShardedCounter, *, shards: int) -> str:
    """Create a counter (idempotent: an existing one is left as it is).

    \b
    Example:
      tsstore counter create counters/likes --shards 10
    """
    return f"{sharded.path}: {sharded.create(shards=shards)} shards"


@_counter_command("incr")
@click.option("--by", type=click.IntRange(MIN_INT64, MAX_INT64), default=1, show_default=True,
              help="Amount (negative allowed).")  # fmt: skip
def counter_incr(sharded: ShardedCounter, *, by: int) -> str:
    """Add to a counter (on a random shard).

    \b
    Example:
      tsstore counter incr counters/likes --by -2
    """
    sharded.increment(by)
    return f"{sharded.path}: {by:+d}"


@_counter_command("get")
@click.option("--live", is_flag=True, help="Sum the shards now instead of reading the last roll-up.")
@figures_format
def counter_get(sharded: ShardedCounter, *, live: bool, fmt: str) -> str:
    """Print a counter's value and when it was true.

    \b
    Example:
      tsstore counter get counters/likes --live
    """
    v = sharded.read(live=live)
    if fmt == "json":
        return json.dumps({"path": sharded.path, "value": v.value, "as_of": v.as_of.isoformat(), "live": v.live})
    return f"{v.value} (as of {v.as_of.isoformat()}, {'live sum' if v.live else 'roll-up'})"


@_counter_command("rollup")
def counter_rollup(sharded: ShardedCounter) -> str:
    """Store the live total in the counter document.

    \b
    Example:
      tsstore counter rollup counters/likes
    """
    return f"{sharded.path}: rolled up {sharded.rollup().value}"


@_counter_command("grow")
@click.option("--shards", type=SHARDS, required=True, help="New (larger) number of shards.")
def counter_grow(sharded: ShardedCounter, *, shards: int) -> str:
    """Raise a counter's shard count; counts are kept.

    \b
    Example:
      tsstore counter grow counters/likes --shards 20
    """
    return f"{sharded.path}: {sharded.grow(shards=shards)} shards"
