"""What every ``tsstore`` command shares, written once: where the data is (``--project``,
``--database``) and how to reach it, which series (``--spec``, ``--collection``), the query
options, how library errors end a command, and how Ctrl-C does.

Only this module reads the environment (``FIRESTORE_EMULATOR_HOST``, ``GOOGLE_CLOUD_PROJECT``;
in Datastore mode ``DATASTORE_EMULATOR_HOST``, ``DATASTORE_PROJECT_ID``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import re
import shlex
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import click

from tsstore.analytics.rollup import Rollup
from tsstore.cli.exits import Failure, end_now, usage
from tsstore.cli.mode import in_mode, mode_option
from tsstore.cli.values import LIMIT, naive_option
from tsstore.declaration import load_declaration
from tsstore.errors import SpecError
from tsstore.limits import DATABASE_ID_PATTERN, DEFAULT_DATABASE_ID
from tsstore.local import supervisor
from tsstore.local.connect import DATASTORE_EMULATOR_ENV, EMULATOR_ENV, emulator_project
from tsstore.local.emulator import DEFAULT_PROJECT, Mode, datastore_client, emulator_client, start_emulator
from tsstore.memory import MemoryDatabase
from tsstore.read.query import Query
from tsstore.spec import SeriesSpec
from tsstore.store import TimeSeriesStore
from tsstore.typed import parse_columns, parse_time, parse_where
from tsstore.wire import quick_reconnects
from tsstore.write.options import EMULATOR_WRITE_OPTIONS, WriteOptions

#: A click command callback, before or after the decorators below.
Command = Callable[..., Any]


@contextlib.contextmanager
def connect(
    *, project: str | None, database: str, mode: Mode = "native", ephemeral: bool = False, writing: str | None = None
) -> Iterator[tuple[Any, bool]]:
    """A client of ``mode`` (a ``firestore.Client``, or a ``datastore.Client`` in Datastore
    mode) and whether it talks to an emulator.

    With the mode's emulator variable (``FIRESTORE_EMULATOR_HOST``, ``DATASTORE_EMULATOR_HOST``)
    set or a ``--project`` given, the client goes where those say (the Google clients read
    them themselves). Otherwise it goes to the local store of that mode (the background
    emulator of ``tsstore emulator start [--mode datastore]``, started now if needed), whose
    data survives restarts; with ``ephemeral`` to a temporary emulator that stops with the
    command. Either way one line on stderr says where (and, ``writing``, into which collection).
    """
    into = "" if writing is None else f"; writing to collection {writing}"
    shown_mode = in_mode(mode)
    variable = DATASTORE_EMULATOR_ENV if mode == "datastore" else EMULATOR_ENV
    emulator_host = os.environ.get(variable)
    if emulator_host or project:
        if emulator_host and not project:
            # The same project the local store uses, so both see the same data.
            project = emulator_project(mode)
        target = f"emulator at {emulator_host}, project {project}" if emulator_host else f"project {project}"
        click.echo(f"tsstore: using {target}{shown_mode}, database {database}{into}", err=True)
        running = supervisor.status(mode=mode) if emulator_host else None
        if running is not None and running.address == emulator_host and project == running.project:
            supervisor.remember_database(database, mode=mode)  # the local store, reached by address: keep it
        with contextlib.closing(_project_client(mode, project or "", database)) as client:
            yield client, bool(emulator_host)
        return
    if ephemeral:
        click.echo(f"tsstore: no {variable} or --project: starting a temporary local emulator{shown_mode}", err=True)
        with start_emulator(mode=mode) as emulator:
            click.echo(f"tsstore: emulator ready at {emulator.address} (pid {emulator.pid})", err=True)
            with contextlib.closing(_emulator_client(mode, emulator.address, DEFAULT_PROJECT, database)) as client:
                yield client, True
        return
    store, started = supervisor.start(mode=mode)
    supervisor.remember_database(database, mode=mode)
    how = "started" if started else "using"
    stop = "tsstore emulator stop" + (" --mode datastore" if mode == "datastore" else "")
    click.echo(
        f"tsstore: {how} the local store{shown_mode} at {store.address} (data in {store.data_dir}; "
        f"`{stop}` stops it), database " + database + into,
        err=True,
    )
    with _watched(store), contextlib.closing(_emulator_client(mode, store.address, store.project, database)) as client:
        yield client, True


#: How often a command that uses the local store looks whether the store still runs.
WATCH_SECONDS = 1.0


@contextlib.contextmanager
def _watched(store: supervisor.LocalStore) -> Iterator[None]:
    """The block, with the local store watched (:func:`supervisor.gone`, each second): when
    the store stops while the command runs, the command says why, where the store's log is
    and how to go on, and ends with exit 1 at once. Its requests would otherwise meet a refused
    connection for minutes (each retried for a minute) and end as rejected rows. Ending there
    is as safe as a kill, which every command that changes data resumes from (ingest's
    checkpoint, the writer's fixed ids)."""
    done = threading.Event()

    def watch() -> None:
        while not done.wait(WATCH_SECONDS):
            why = supervisor.gone(store)
            if why is not None and not done.is_set():
                start = "tsstore emulator start" + (" --mode datastore" if store.mode == "datastore" else "")
                end_now(
                    f"the local store{in_mode(store.mode)} at {store.address} stopped while this command used it: "
                    f"{why}; its log: {store.log}. Start it again (`{start}`; it holds what it saved when it "
                    f"was last stopped) and run the command again:\n  {shlex.join(['tsstore', *sys.argv[1:]])}"
                )

    threading.Thread(target=watch, daemon=True, name="tsstore-store-watch").start()
    try:
        yield
    finally:
        done.set()


def _project_client(mode: Mode, project: str, database: str) -> Any:
    """A client of ``mode`` on ``project`` (or the emulator its variable names)."""
    if mode == "native":
        from google.cloud import firestore

        return quick_reconnects(firestore.Client(project=project, database=database))
    try:
        from google.cloud import datastore
    except ImportError:
        raise Failure("Datastore mode needs google-cloud-datastore: pip install 'tsstore[datastore]'") from None
    named = "" if database == DEFAULT_DATABASE_ID else database
    return datastore.Client(project=project, database=named)  # type: ignore[no-untyped-call]


def _emulator_client(mode: Mode, address: str, project: str, database: str) -> Any:
    """A client of ``mode`` on the emulator at ``address``."""
    if mode == "native":
        return emulator_client(address, project=project, database=database)
    return datastore_client(address, project=project, database=database)


@contextlib.contextmanager
def in_memory(*, writing: str | None = None) -> Iterator[tuple[Any, bool]]:
    """A new :class:`~tsstore.memory.MemoryDatabase`, as :func:`connect` gives a client (local:
    nothing to ramp up for), named on stderr as :func:`connect` names where it goes."""
    into = "" if writing is None else f"; writing to collection {writing}"
    click.echo(f"tsstore: using a memory database in this process (no emulator; its data ends with the command){into}",
               err=True)  # fmt: skip
    yield MemoryDatabase(), True


@dataclass(frozen=True, kw_only=True)
class Database:
    """Where a command's data is: ``--project`` (``None``: the local store or the emulator
    ``FIRESTORE_EMULATOR_HOST`` names), ``--database`` and ``--mode``; or, ``memory``
    (``--memory``, of the commands that make their data and read it in one process), a memory
    database of the command's own."""

    project: str | None
    name: str
    mode: Mode = "native"
    memory: bool = False

    def connect(
        self, *, ephemeral: bool = False, writing: str | None = None
    ) -> contextlib.AbstractContextManager[tuple[Any, bool]]:
        """A client on this database and whether it is an emulator (see :func:`connect`); with
        ``memory``, a new memory database (:func:`in_memory`)."""
        if self.memory:
            return in_memory(writing=writing)
        return connect(project=self.project, database=self.name, mode=self.mode, ephemeral=ephemeral, writing=writing)

    @contextlib.contextmanager
    def open_store(
        self, spec: SeriesSpec, *, ephemeral: bool = False, max_rate: int | None = None, writes: str | None = None
    ) -> Iterator[TimeSeriesStore]:
        """The store of ``spec`` on this database; on an emulator it writes at
        :data:`~tsstore.write.options.EMULATOR_WRITE_OPTIONS`; ``max_rate`` caps its writes per second. A command that
        ``writes`` (to that collection) names it on stderr, and is refused on a project when
        the declaration was not given (it would be the demo's)."""
        if writes is not None:
            self.check_write_target(spec)
        with self.connect(ephemeral=ephemeral, writing=writes) as (client, local):
            options = EMULATOR_WRITE_OPTIONS if local else WriteOptions()
            if max_rate is not None:
                options = dataclasses.replace(options, max_ops_per_second=max_rate)
            with TimeSeriesStore(client, spec, write_options=options) as store:
                yield store

    def check_write_target(self, spec: SeriesSpec) -> None:
        """Refuse to write to a project's collection when ``--spec`` (or ``TSSTORE_SPEC``) was
        not given: the default is the demo's declaration, whose only home is the local store."""
        context = click.get_current_context(silent=True)
        given = context is not None and context.get_parameter_source("declaration") not in (
            None, click.core.ParameterSource.DEFAULT
        )  # fmt: skip
        if self.project is not None and not given:
            raise usage(
                f"which declaration? give --spec (or {SPEC_ENV}): without one this command would write to the demo's "
                f"collection {spec.collection!r} in project {self.project!r}"
            )


#: The environment variables that stand for the options every command repeats.
SPEC_ENV, PROJECT_ENV, DATABASE_ENV = "TSSTORE_SPEC", "TSSTORE_PROJECT", "TSSTORE_DATABASE"

#: A Google Cloud project id (6 to 30 lowercase letters, digits and hyphens, from a letter, not
#: ending with a hyphen), optionally after an organisation's domain (``example.com:my-project``).
PROJECT_ID = re.compile(r"([a-z0-9.-]+\.[a-z]{2,}:)?[a-z][a-z0-9-]{4,28}[a-z0-9]")


def _project_id(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not PROJECT_ID.fullmatch(value):
        where = (
            f"{PROJECT_ENV}={value!r}"
            if ctx.get_parameter_source("project") is click.core.ParameterSource.ENVIRONMENT
            else repr(value)
        )
        raise click.BadParameter(
            f"{where} is not a Google Cloud project id: 6 to 30 lowercase letters, digits and hyphens, starting "
            "with a letter (as `gcloud projects list` shows it)"
        )
    return value


_project_option = click.option(
    "--project",
    default=None,
    envvar=PROJECT_ENV,
    show_envvar=True,
    callback=_project_id,
    help="Use this Google Cloud project instead of the local emulator.",
)


def _database_id(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if value != DEFAULT_DATABASE_ID and not re.fullmatch(DATABASE_ID_PATTERN, value):
        raise click.BadParameter(
            f"{value!r} is not a database id: give (default) or 4-63 lowercase letters, digits and hyphens, "
            "starting with a letter and not ending with a hyphen"
        )
    return value


_database_option = click.option(
    "--database",
    default=DEFAULT_DATABASE_ID,
    envvar=DATABASE_ENV,
    show_envvar=True,
    show_default=True,
    callback=_database_id,
)
SPEC_HELP = "The series declaration (module:NAME or a .toml/.json file)."
_spec_option = click.option(
    "--spec",
    "declaration",
    default="tsstore.demo:DECLARATION",
    envvar=SPEC_ENV,
    show_envvar=True,
    show_default=True,
    help=SPEC_HELP,
)
_collection_option = click.option(
    "--collection", default=None, help="Which declared series, when the declaration holds several."
)


def database_options(command: Command) -> Command:
    """``--project``, ``--database`` and ``--mode``; the command gets them as ``database``, a
    :class:`Database`."""

    @functools.wraps(command)
    def run(*args: Any, project: str | None, database: str, mode: Mode, **kwargs: Any) -> Any:
        return command(*args, database=Database(project=project, name=database, mode=mode), **kwargs)

    return mode_option(_database_option(_project_option(run)))


def memory_option(command: Command) -> Command:
    """``--memory``, for a command that makes its data and reads it in one process (below
    :func:`database_options`, which it refines): the command's ``database`` is then a memory
    database of its own. ``--project``, ``--database`` or ``--mode`` given with it on
    the command line say another place, and are refused (from the environment they are left out)."""

    @functools.wraps(command)
    def run(*args: Any, memory: bool, database: Database, **kwargs: Any) -> Any:
        if memory:
            context = click.get_current_context()
            given = [name for name in ("project", "database", "mode")
                     if context.get_parameter_source(name) is click.core.ParameterSource.COMMANDLINE]  # fmt: skip
            if given:
                where = " ".join(f"--{name} {context.params[name]}" for name in given)
                options = " and ".join(f"--{name}" for name in given)
                raise usage(f"--memory with {where}: --memory is a database in this process, of no project, named "
                            f"database or mode; leave out {options}, or --memory")  # fmt: skip
            database = dataclasses.replace(database, memory=True)
        return command(*args, database=database, **kwargs)

    return click.option(
        "--memory",
        is_flag=True,
        help="Use a memory database in this process instead of Firestore or an emulator: no Java, and its data ends "
        "with the command.",
    )(run)


def series_options(command: Command) -> Command:
    """``--spec`` and ``--collection`` (which declared series) and the database options; the
    command gets ``spec``, the loaded :class:`~tsstore.spec.SeriesSpec`, and ``database``."""

    @functools.wraps(command)
    def run(*args: Any, declaration: str, collection: str | None, **kwargs: Any) -> Any:
        return command(*args, spec=pick_spec(declaration, collection=collection), **kwargs)

    return database_options(_collection_option(_spec_option(run)))


def series_rollup_options(command: Command) -> Command:
    """:func:`series_options`, and the declaration's roll-ups of the picked series (of its
    ticks, through roll-ups of roll-ups) as ``declared_rollups``."""

    @functools.wraps(command)
    def run(*args: Any, declaration: str, collection: str | None, **kwargs: Any) -> Any:
        loaded = load_named(declaration)
        spec = pick_declared(declaration, loaded, collection=collection)
        rollups = tuple(r for r in loaded[1] if r.series.collection == spec.collection)
        return command(*args, spec=spec, declared_rollups=rollups, **kwargs)

    return database_options(_collection_option(_spec_option(run)))


def echo_cost(stats: Any, show: bool) -> None:
    """With ``--stats``, what a read cost (a :class:`~tsstore.read.cost.ReadStats`), on stderr."""
    if show:
        click.echo(f"cost: {stats.describe()}", err=True)


def declaration_options(command: Command) -> Command:
    """``--spec``, ``--collection`` and the database options, for a command that needs the
    declaration itself (its roll-ups): it gets ``declaration`` and ``collection`` as given."""
    return database_options(_collection_option(_spec_option(command)))


def pick_spec(declaration: str, *, collection: str | None) -> SeriesSpec:
    """The series ``collection`` of ``declaration`` (a roll-up's collection too), or its only
    series."""
    return pick_declared(declaration, load_named(declaration), collection=collection)


def load_named(declaration: str) -> tuple[tuple[SeriesSpec, ...], tuple[Rollup, ...]]:
    """:func:`~tsstore.declaration.load_declaration`, whose errors say when the declaration
    came from ``TSSTORE_SPEC`` rather than ``--spec`` (the one a user may not know is set)."""
    try:
        return load_declaration(declaration)
    except SpecError as exc:
        context = click.get_current_context(silent=True)
        source = None if context is None else context.get_parameter_source("declaration")
        if source is click.core.ParameterSource.ENVIRONMENT:
            raise SpecError(f"{exc} (from {SPEC_ENV}={declaration})") from None
        raise


def pick_declared(
    declaration: str, declared: tuple[tuple[SeriesSpec, ...], tuple[Rollup, ...]], *, collection: str | None
) -> SeriesSpec:
    """:func:`pick_spec` from the series and roll-ups ``declaration`` was loaded as."""
    series, rollups = declared
    specs = series + tuple(r.spec for r in rollups)
    if collection is None:
        if len(series) > 1:
            names = ", ".join(s.collection for s in series)
            raise usage(f"{declaration} declares several series ({names}); pick one with --collection")
        return series[0]
    for spec in specs:
        if spec.collection == collection:
            return spec
    raise usage(f"{declaration} declares no series {collection!r} (declared: {', '.join(s.collection for s in specs)})")


#: What ``--where`` takes, for its help.
WHERE_HELP = (
    "FIELD=VALUE (repeat a field for 'in'), or a range condition on a shape's range field: "
    "'FIELD>=VALUE' (also <, <=, >, !=). Typed as the spec declares the field."
)


def where_option(*, help: str) -> Callable[[Command], Command]:
    """``--where FIELD=VALUE``, repeatable; :func:`parse_where` reads what it collects."""
    return click.option("--where", "where_items", multiple=True, metavar="FIELD=VALUE|FIELD>=VALUE", help=help)


def query_options(*, page: bool = False, limit_help: str = "", cursor: bool = False) -> Callable[[Command], Command]:
    """The query options, turned into one :class:`~tsstore.read.query.Query` the command gets
    as ``query``: ``--where``, ``--start`` and ``--end`` always; with ``page`` also
    ``--direction``, ``--limit`` (helped by ``limit_help``) and ``--columns``; with ``cursor``
    also ``--cursor``. The query holds only the options given here, so a verb that refuses
    the others (``count``) gets none of them."""

    def decorate(command: Command) -> Command:
        @functools.wraps(command)
        def run(*args: Any, where_items: tuple[str, ...], start: str | None, end: str | None, naive: str | None,
                **kwargs: Any) -> Any:  # fmt: skip
            spec = kwargs.get("spec")
            fields: dict[str, Any] = {
                "where": parse_where(where_items, spec=spec),
                "start": parse_time(start, option="--start", naive=naive),
                "end": parse_time(end, option="--end", naive=naive),
            }
            if page:
                fields["direction"] = kwargs.pop("direction")
                fields["limit"] = kwargs.pop("limit")
                fields["columns"] = parse_columns(kwargs.pop("columns"), spec=spec)
            if cursor:
                fields["cursor"] = kwargs.pop("cursor")
            return command(*args, query=Query(**fields), **kwargs)

        if cursor:
            run = click.option("--cursor", default=None, help="Continue after the page that printed this cursor.")(run)
        if page:
            run = click.option("--columns", default=None, help="Comma-separated fields to read (projection).")(run)
            run = click.option("--limit", type=LIMIT, default=None, help=limit_help)(run)
            run = click.option("--direction", type=click.Choice(["desc", "asc"]), default="desc", show_default=True)(
                run
            )
        run = naive_option(run)
        run = click.option("--end", default=None, help="Exclusive end time (ISO-8601 with offset, or a date).")(run)
        run = click.option("--start", default=None, help="Inclusive start time (ISO-8601 with offset, or a date).")(run)
        return where_option(help=WHERE_HELP)(run)

    return decorate


def warn_if_no_collection(store: TimeSeriesStore, database: Database) -> None:
    """After a read that found nothing: when the collection holds no document at all (a
    name with a typo reads as an empty series), say so on stderr and name the collections
    (in Datastore mode, kinds) the database has. Costs one read, and only then."""
    client: Any = store.client
    collection = store.spec.collection
    if database.mode == "datastore":
        found = client.query(kind=collection)
        found.keys_only()
        if list(found.fetch(limit=1)):
            return
        names = _kinds(client)
    else:
        if list(client.collection(collection).select([]).limit(1).stream()):
            return
        names = sorted(c.id for c in client.collections())
    there = f"collections here: {', '.join(names)}" if names else "the database has no collections"
    click.echo(
        f"warning: collection {collection!r} holds no documents in database {database.name!r}; is the name right?"
        + ("" if names is None else f" ({there})"),
        err=True,
    )


def _kinds(client: Any) -> list[str] | None:
    """The kinds of a Datastore-mode database (its collections), or ``None`` when it does not
    say (the emulator in Datastore mode answers no kind query)."""
    from google.api_core.exceptions import GoogleAPICallError

    kinds = client.query(kind="__kind__")
    kinds.keys_only()
    try:
        return sorted(str(k.key.id_or_name) for k in kinds.fetch() if not str(k.key.id_or_name).startswith("__"))
    except GoogleAPICallError:
        return None
