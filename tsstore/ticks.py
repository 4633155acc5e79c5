"""The values queries return: one :class:`Tick` per document, grouped in a :class:`Page`."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Tick:
    """One stored document: its id, its timestamp (aware UTC) and its data as stored
    (nested maps stay nested; the timestamp and shard fields are included)."""

    #: The document id.
    id: str
    #: Its time (aware, UTC).
    timestamp: dt.datetime
    #: The document's fields as stored (nested maps nested; time and shard included).
    data: dict[str, Any]


def get_path(data: Mapping[str, Any], path: list[str]) -> Any:
    """The value at a split dotted path (``["price", "currency"]``) in nested maps, or ``None``."""
    value: Any = data
    for part in path:  # a dict is told by its type first: isinstance of the abstract Mapping is slow
        value = value.get(part) if type(value) is dict or isinstance(value, Mapping) else None
    return value


def leaf_paths(data: Mapping[str, Any], *, name: Callable[[str], str] = str, prefix: str = "") -> list[str]:
    """The dotted paths of ``data``'s leaves: every value that is not a non-empty map (the
    fields a merge of ``data`` sets), each key written by ``name`` (Datastore mode quotes a
    name that is not plain)."""
    paths: list[str] = []
    for key, value in data.items():
        path = prefix + name(key)
        if isinstance(value, Mapping) and value:
            paths += leaf_paths(value, name=name, prefix=path + ".")
        else:
            paths.append(path)
    return paths


def without_paths(data: Mapping[str, Any], names: Iterable[str], *, prune: bool = False) -> Mapping[str, Any]:
    """``data`` without the fields at the dotted paths ``names`` (``"price.currency"``):
    ``data`` itself when it has none of them, else a copy (the maps on a path copied, none
    changed); ``prune``: a map left empty by that goes too."""
    for name in names:
        data = _without(data, name.split("."), prune)
    return data


def _without(data: Mapping[str, Any], path: list[str], prune: bool) -> Mapping[str, Any]:
    head = path[0]
    if head not in data:
        return data
    if len(path) == 1:
        return {k: v for k, v in data.items() if k != head}
    inner = data[head]
    trimmed = _without(inner, path[1:], prune) if isinstance(inner, Mapping) else inner
    if prune and isinstance(trimmed, Mapping) and not trimmed:
        return {k: v for k, v in data.items() if k != head}
    return data if trimmed is inner else {**data, head: trimmed}


#: Where a tick stands in a query's order: (timestamp, id), or (timestamp, the value fields
#: the query orders by as :class:`Ordered`, id) (see :meth:`tsstore.read.plan.QueryPlan.key`).
Position = tuple[Any, ...]


def sort_key(tick: Tick) -> tuple[dt.datetime, str]:
    """Firestore's order for ``order_by(timestamp).order_by(__name__)`` within one collection:
    time first, ties broken by document id (in the query's direction)."""
    return (tick.timestamp, tick.id)


@functools.total_ordering
class Ordered:
    """A field value that compares as Firestore orders values of any type: null, booleans,
    NaN, numbers (integers and doubles by value), timestamps, strings (by UTF-8 bytes, which
    is code point order), bytes, references, arrays (element by element), maps; ``raw`` is
    the value itself (for a cursor). A ``!=`` filter matches values of every type, so a
    merge on such a field may compare a number with a string."""

    __slots__ = ("raw", "_rank")

    def __init__(self, raw: Any) -> None:
        self.raw = raw
        self._rank = _rank(raw)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ordered) and self._rank == other._rank

    def __lt__(self, other: Ordered) -> bool:
        return bool(self._rank < other._rank)

    def __hash__(self) -> int:
        return hash(self._rank)  # equal ranks hash alike (2 and 2.0 too), as __eq__ requires

    def __repr__(self) -> str:
        return f"Ordered({self.raw!r})"


def _rank(value: Any) -> tuple[Any, ...]:
    if value is None:
        return (0,)
    if isinstance(value, bool):
        return (1, value)
    if isinstance(value, (int, float)):
        return (2, 0) if value != value else (3, value)  # NaN first
    if isinstance(value, dt.datetime):
        return (4, value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc))
    if isinstance(value, str):
        return (5, value)
    if isinstance(value, bytes):
        return (6, value)
    if isinstance(value, (list, tuple)):
        return (9, tuple(_rank(v) for v in value))
    if isinstance(value, Mapping):
        return (10, tuple((k, _rank(v)) for k, v in sorted(value.items())))
    path = getattr(value, "path", None)  # a document reference
    return (7, str(path)) if path is not None else (8, repr(value))


@dataclass(frozen=True)
class Page(Sequence[Tick]):
    """Up to ``limit`` ticks in query order, the cursor that continues after them (``None``
    once the query has no more results), and what reading them cost (a
    :class:`~tsstore.read.cost.ReadStats`)."""

    #: The page's ticks, in the query's order.
    ticks: tuple[Tick, ...]
    cursor: str | None
    stats: Any = None

    def __len__(self) -> int:
        return len(self.ticks)

    def __getitem__(self, index: Any) -> Any:
        return self.ticks[index]

    def __iter__(self) -> Iterator[Tick]:
        return iter(self.ticks)
