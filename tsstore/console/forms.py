"""What the console's forms say, as the verbs' options: the same parsing as the commands'
(``--where``, ``--start``, ``--columns``: :mod:`tsstore.typed`), so a bad value is
refused with the command's message, and the same query written out as Python and as a
``tsstore`` command to copy. Pure: no store, no request."""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tsstore.errors import UsageError
from tsstore.read.query import Query
from tsstore.spec import SeriesSpec
from tsstore.typed import parse_columns, parse_time, parse_where

#: The largest page the console asks for: a grid of more rows helps no one.
MAX_PAGE = 1000
DIRECTIONS = ("desc", "asc")
#: The variable naming the emulator a command reads, by mode (as :mod:`tsstore.cli.common` reads it).
EMULATOR_VARIABLES = {"native": "FIRESTORE_EMULATOR_HOST", "datastore": "DATASTORE_EMULATOR_HOST"}


@dataclass(frozen=True, kw_only=True)
class Reach:
    """Where the console reads, as a command is told to read there: ``--project``,
    ``--database``, ``--mode``, and the emulator's ``host:port`` (``None``: Google Cloud, or
    the local store a command finds by itself)."""

    project: str | None = None
    database: str = "(default)"
    mode: str = "native"
    emulator: str | None = None

    def words(self) -> list[str]:
        """A ``tsstore query`` command's first words, as a shell takes them: the emulator's
        variable (``FIRESTORE_EMULATOR_HOST=host:port``), the command, its options."""
        where = [f"{EMULATOR_VARIABLES[self.mode]}={self.emulator}"] if self.emulator else []
        options = ["--project", self.project] if self.project else []
        options += ["--database", self.database] + (["--mode", self.mode] if self.mode != "native" else [])
        return [*where, "tsstore", "query", *options]


def text_field(data: Mapping[str, Any], name: str, *, default: str = "") -> str:
    """The request's field ``name`` as text (``default`` when it is missing or null)."""
    value = data.get(name)
    if value is None:
        return default
    if not isinstance(value, str):
        raise UsageError(f"{name} {value!r} is not text")
    return value


def cursor_field(data: Mapping[str, Any]) -> str | None:
    """The page's cursor: text a page answered as its cursor, or ``None`` for the first page."""
    cursor = data.get("cursor")
    if cursor is not None and not isinstance(cursor, str):
        raise UsageError(f"cursor {cursor!r} is not a tsstore cursor: give the text a page answered as its cursor, or "
                    "null for the first page")  # fmt: skip
    return cursor or None


@dataclass(frozen=True)
class QueryForm:
    """The query form as typed: ``where`` one condition a line (``FIELD=VALUE``,
    ``FIELD>=VALUE``), times as the commands take them, ``columns`` comma-separated."""

    where: tuple[str, ...] = ()
    start: str = ""
    end: str = ""
    direction: str = "desc"
    limit: int = 100
    columns: str = ""

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> QueryForm:
        """The form from a request's JSON, each field checked for its type."""
        where = "" if data.get("where") is None else data["where"]
        if not isinstance(where, str):
            raise UsageError(f"where {where!r} is not text; give one condition a line, FIELD=VALUE or FIELD>=VALUE")
        limit = data.get("limit", 100)
        if isinstance(limit, str) and limit.strip().isdigit():
            limit = int(limit)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
            raise UsageError(f"limit {limit!r} is not allowed; give a whole number from 1 to {MAX_PAGE}")
        direction = "desc" if data.get("direction") is None else data["direction"]
        if direction not in DIRECTIONS:
            raise UsageError(f"direction {direction!r} is not allowed; give desc or asc")
        texts = {name: text_field(data, name) for name in ("start", "end", "columns")}
        lines = tuple(line.strip() for line in where.splitlines() if line.strip())
        return cls(lines, texts["start"].strip(), texts["end"].strip(), direction, limit, texts["columns"].strip())

    def query(self, spec: SeriesSpec, *, cursor: str | None = None) -> Query:
        """The :class:`~tsstore.read.query.Query` the form asks for, parsed as the commands
        parse their options (a bad value raises the command's error)."""
        return Query(
            where=parse_where(self.where, spec=spec),
            start=parse_time(self.start or None, option="--start", naive=None),
            end=parse_time(self.end or None, option="--end", naive=None),
            direction=self.direction,
            limit=self.limit,
            columns=parse_columns(self.columns or None, spec=spec),
            cursor=cursor,
        )

    def python(self, spec: SeriesSpec) -> str:
        """The query as a call of Python on a store of ``spec`` (``import datetime``)."""
        query = self.query(spec)
        shown = {"where": query.where or None, "start": query.start, "end": query.end, "direction": query.direction,
                 "limit": query.limit, "columns": query.columns}  # fmt: skip
        args = ", ".join(f"{name}={value!r}" for name, value in shown.items() if value is not None)
        return f"store.query({args})"

    def command(self, declaration: str, collection: str, *, reach: Reach) -> str:
        """The query as a ``tsstore query`` command that reads where the console reads."""
        words = [*reach.words(), "--spec", declaration, "--collection", collection]
        for condition in self.where:
            words += ["--where", condition]
        for option in ("start", "end"):
            if getattr(self, option):
                words += [f"--{option}", getattr(self, option)]
        words += ["--direction", self.direction, "--limit", str(self.limit)]
        if self.columns:
            words += ["--columns", self.columns]
        return shlex.join(words)
