"""One query, as one frozen value: what every read verb accepts or builds.

``store.query(where={"symbol": "AAA"}, limit=10)`` and ``store.query(Query(where={"symbol":
"AAA"}, limit=10))`` are the same call; a verb's keyword options are :class:`Query`'s fields,
so an option is added here once and every verb (sync and async, the CLI, explain) has it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any, TypedDict

from tsstore.errors import QueryError
from tsstore.spec import Direction
from tsstore.times import TimeLike

#: Filters on declared fields: ``{field: value}`` (a list or set value means ``in``; a tuple,
#: which could be an operator pair, is refused) or ``(field, op, value)`` triples with op
#: ``==``, ``in``, or a range condition (``<``, ``<=``, ``>``, ``>=``, ``!=``) on a shape's
#: declared ``ranges``.
Where = Mapping[str, Any] | Iterable[tuple[str, str, Any]] | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class Query:
    """What to read: filters, the time range ``[start, end)``, the order, how many, which
    fields, where to continue (a page's ``cursor``) and at which snapshot (``read_time``).
    Validated when planned (:func:`tsstore.read.plan.plan_query`), against the spec."""

    where: Where = None
    start: TimeLike | None = None
    end: TimeLike | None = None
    direction: Direction | str = Direction.DESC
    limit: int | None = None
    columns: Iterable[str] | None = None
    cursor: str | None = None
    read_time: dt.datetime | None = None

    def replace(self, **changes: Any) -> Query:
        """This query with some fields changed (``q.replace(limit=10)``)."""
        return Query.of(self, changes)

    @staticmethod
    def of(query: Query | None, options: Mapping[str, Any]) -> Query:
        """``query`` (or an empty one) with ``options`` applied; an unknown option is a
        :class:`~tsstore.errors.QueryError` that names it and the allowed ones.

        - ``options``: query options by name (``{"limit": 10}``), each a field of :class:`Query`"""
        if query is not None and not isinstance(query, Query):
            raise QueryError(f"query must be a Query, got {type(query).__name__}; pass options by keyword")
        unknown = sorted(set(options) - FIELDS)
        if unknown:
            raise QueryError(f"unknown query option(s) {', '.join(unknown)}; allowed: {', '.join(sorted(FIELDS))}")
        return dataclasses.replace(query or Query(), **options)

    def only(self, allowed: Iterable[str], verb: str) -> None:
        """Refuse fields ``verb`` does not use (e.g. a ``limit`` given to ``count``).

        - ``allowed``: the names of the fields the verb takes
        - ``verb``: the verb's name, as the refusal shows it"""
        default = Query()
        extra = sorted(f for f in FIELDS - set(allowed) if getattr(self, f) != getattr(default, f))
        if extra:
            raise QueryError(f"{verb} does not take {', '.join(extra)}; it takes {', '.join(sorted(allowed))}")


FIELDS = frozenset(f.name for f in dataclasses.fields(Query))

#: What each query option means, once for every verb that takes it (the API reference
#: describes a verb's parameter from here unless the verb's docstring says more).
OPTION_HELP = {
    "query": "a :class:`Query` holding the options below; an option given by keyword beside it replaces "
    "the query's own",
    "where": "filters on declared fields: ``{field: value}`` (a list or set value means ``in``; a tuple is "
    "refused) or ``(field, op, value)`` triples, ``op`` one of ``==``, ``in``, or a range condition on a shape's "
    "declared ``ranges``; a text or bytes value may be at most 1 500 bytes as Firestore counts it",
    "start": "the first instant of the range (inclusive): a tz-aware ``datetime``, an ISO 8601 text, or "
    "a ``pandas.Timestamp``; ``None``: from the oldest tick",
    "end": "the instant the range stops before (exclusive), given like ``start``; ``None``: up to the newest tick",
    "direction": "``\"desc\"`` (newest first, the default) or ``\"asc\"``, or a :class:`Direction`",
    "limit": "at most this many ticks (a page, with a ``cursor`` to continue); ``None``: all of them",
    "columns": "the fields to read (a map's name brings its leaves; with declared ``columns``, a field the "
    "declaration does not name is refused); ``None``: every field",
    "cursor": "where a previous page stopped (its ``cursor``): continue after it",
    "read_time": "read at this snapshot (a tz-aware ``datetime`` within the last hour); ``None``: one "
    "snapshot the read takes when it starts",
    "stats": "a :class:`~tsstore.read.cost.ReadStats` the read adds its cost to; ``None``: a new one",
}


def given(**options: Any) -> dict[str, Any]:
    """The options a caller gave: ``None`` is "not given", so a :class:`Query` passed beside
    them keeps its own value."""
    return {name: value for name, value in options.items() if value is not None}


class RangeOptions(TypedDict, total=False):
    """The query fields a verb over a time range takes as keyword options (``count``,
    ``aggregate``, ``bars``): see :class:`Query`."""

    where: Where
    start: TimeLike | None
    end: TimeLike | None
    read_time: dt.datetime | None


class QueryOptions(RangeOptions, total=False):
    """Every query field, as keyword options of the reads that return ticks."""

    direction: Direction | str
    limit: int | None
    columns: Iterable[str] | None
    cursor: str | None
