"""Lazy k-way merge of per-chunk result streams into one query order."""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence

from tsstore.ticks import Position, Tick, sort_key

#: Where a tick stands in a query's order (:meth:`tsstore.read.plan.QueryPlan.key`).
Key = Callable[[Tick], Position]


def merge_streams(streams: Sequence[Iterable[Tick]], *, descending: bool, key: Key = sort_key) -> Iterator[Tick]:
    """Merge streams that are each sorted by ``key`` (by default ``(timestamp, id)``) in the
    query's direction.

    With one stream the server's order is trusted and nothing is compared. Otherwise
    ``heapq.merge`` pulls one tick at a time from each stream, so a chunk is only read as
    far as the merged output needs it.
    """
    if len(streams) == 1:
        return iter(streams[0])
    return heapq.merge(*streams, key=key, reverse=descending)


def take(ticks: Iterable[Tick], limit: int | None) -> Iterator[Tick]:
    """The first ``limit`` ticks (all of them for ``None``)."""
    return iter(ticks) if limit is None else itertools.islice(ticks, limit)
