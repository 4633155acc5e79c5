"""The values queries return: one :class:`Tick` per document, grouped in a :class:`Page`."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Tick:
    """One stored document: its id, its timestamp (aware UTC) and its data as stored
    (nested maps stay nested; the timestamp and shard fields are included)."""

    id: str
    timestamp: dt.datetime
    data: dict[str, Any]


def get_path(data: Mapping[str, Any], path: list[str]) -> Any:
    """The value at a split dotted path (``["price", "currency"]``) in nested maps, or ``None``."""
    value: Any = data
    for part in path:
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def sort_key(tick: Tick) -> tuple[dt.datetime, str]:
    """Firestore's order for ``order_by(timestamp).order_by(__name__)`` within one collection:
    time first, ties broken by document id (in the query's direction)."""
    return (tick.timestamp, tick.id)


@dataclass(frozen=True)
class Page(Sequence[Tick]):
    """Up to ``limit`` ticks in query order, the cursor that continues after them (``None``
    once the query has no more results), and what reading them cost (a
    :class:`~tsstore.read.cost.ReadStats`)."""

    ticks: tuple[Tick, ...]
    cursor: str | None
    stats: Any = None

    def __len__(self) -> int:
        return len(self.ticks)

    def __getitem__(self, index: Any) -> Any:
        return self.ticks[index]

    def __iter__(self) -> Iterator[Tick]:
        return iter(self.ticks)
