"""The shard census's asks as data: what one count, or one limit-1 query on the shard field,
covers (a shard value, a range between declared values, the whole collection). The census
(:mod:`tsstore.layout.census`) hands them out in rounds; each database builds its own query
from one (Native mode's :func:`~tsstore.layout.census.census_query`, Datastore mode's
:func:`~tsstore.dswire.queries.census_query`, the memory database's answers), and a request
asks for its count as what a count runs over (:data:`tsstore.verbs.request.Over`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass


@dataclass(frozen=True)
class CountValue:
    """Count the ticks under one shard value (at or after ``since``, when given)."""

    value: str
    since: dt.datetime | None = None


@dataclass(frozen=True)
class CountRange:
    """Count documents whose shard value is a string strictly between ``low`` and ``high``
    (``None``: unbounded)."""

    low: str | None
    high: str | None


@dataclass(frozen=True)
class FirstValue:
    """The largest shard value strictly between ``low`` and ``high`` (``None`` if none)."""

    low: str | None
    high: str | None


@dataclass(frozen=True)
class CountAll:
    """Count every document of the collection."""


Ask = CountValue | CountRange | FirstValue | CountAll
