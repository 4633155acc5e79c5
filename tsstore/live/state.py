"""What live reads decide, without I/O: the merged window of the newest ticks over every
chunk's own newest ticks, and which arriving ticks a tail delivers.

Each chunk listener reports its chunk's matching documents at its own snapshot time. A
window is the newest ``limit`` of the union of the chunks' latest reports, merged in the
query's order (timestamp, any range-filtered value fields, document id) with the read
engine's merge; each chunk's part of it is as of that
chunk's ``read_time``, and those times only move forward. A tail delivers each tick once: the
first time any listener reports it, if it was created at or after the tail's ``since``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

from tsstore.read.merge import Key, merge_streams, take
from tsstore.ticks import Tick, sort_key


@dataclass(frozen=True)
class WindowUpdate:
    """The newest ticks after a change, and how they changed since the previous update (a
    tick whose content changed has left and entered)."""

    #: The newest ``limit`` matching ticks, newest first (fewer while fewer match).
    window: tuple[Tick, ...]
    #: The ticks of ``window`` not in the previous update's, or there with other content (all of
    #: ``window`` in the first update), in ``window``'s order.
    entered: tuple[Tick, ...]
    #: The ticks of the previous update's window not in this one, or here with other content (none
    #: in the first update), in that window's order.
    left: tuple[Tick, ...]
    #: Each chunk's snapshot time, in the plan's chunk order: its part of ``window`` is as of
    #: then (aware, UTC; ``None`` where its listener reported no time).
    read_times: tuple[dt.datetime | None, ...]


class WindowState:
    """The merged window of ``chunks`` chunk reports, ``limit`` ticks long."""

    def __init__(self, chunks: int, limit: int, *, key: Key = sort_key) -> None:
        self.limit, self._key = limit, key
        self._parts: list[list[Tick] | None] = [None] * chunks
        self._times: list[dt.datetime | None] = [None] * chunks
        self._window: tuple[Tick, ...] | None = None

    def report(self, chunk: int, ticks: Iterable[Tick], read_time: dt.datetime | None) -> None:
        """Chunk ``chunk``'s matching ticks as of ``read_time`` (its newest ``limit``)."""
        self._parts[chunk] = sorted(ticks, key=self._key, reverse=True)
        self._times[chunk] = read_time

    def update(self) -> WindowUpdate | None:
        """The update the reports so far make, or ``None`` while a chunk has not reported yet
        or when the window did not change."""
        if any(part is None for part in self._parts):
            return None
        parts = [part for part in self._parts if part is not None]
        window = tuple(take(merge_streams(parts, descending=True, key=self._key), self.limit))
        before = self._window
        if before is not None and window == before:
            return None
        self._window = window
        old = {t.id: t for t in before or ()}
        new = {t.id: t for t in window}
        entered = tuple(t for t in window if old.get(t.id) != t)
        left = tuple(t for t in before or () if new.get(t.id) != t)
        return WindowUpdate(window, entered, left, tuple(self._times))


@dataclass(frozen=True)
class TailTick:
    """A tick a tail delivers, once."""

    #: The tick: its id, timestamp and data (only the columns asked, when a read named them).
    tick: Tick
    #: Whether its timestamp is older than that of a tick the tail delivered before it.
    late: bool
    #: When Firestore stored its document (the document's create time, aware, UTC).
    created: dt.datetime


class TailState:
    """Which reported ticks a tail delivers, and where its listeners may start: at the newest
    delivered timestamp minus ``lateness`` (at first ``since`` minus it), so what they hold,
    and the ids remembered here, stay bounded however long the tail runs.

    - ``since``: ticks whose documents were created before this instant (aware) are not delivered
    - ``lateness``: how far behind the newest delivered timestamp a tick's own timestamp may be
      and still be seen"""

    def __init__(self, *, since: dt.datetime, lateness: dt.timedelta) -> None:
        self.since = since
        self.lateness = lateness
        self.newest: dt.datetime | None = None
        self.delivered = 0
        self.late = 0
        self._seen: dict[str, dt.datetime] = {}
        self._horizon: dt.datetime | None = None  # ids older than this are forgotten

    def offer(self, tick: Tick, created: dt.datetime) -> TailTick | None:
        """The delivery of ``tick``, or ``None`` when it was delivered already, created before
        ``since``, or older than the ids forgotten (only a listener about to be replaced, or
        one listened to again from its old bound, reports those: they may have been delivered,
        and are more than ``lateness`` late in any case).

        - ``tick``: a tick a listener reported as added
        - ``created``: when Firestore created its document"""
        if tick.id in self._seen or created < self.since:
            return None
        if self._horizon is not None and tick.timestamp < self._horizon:
            return None
        late = self.newest is not None and tick.timestamp < self.newest
        self._seen[tick.id] = tick.timestamp
        if not late:
            self.newest = tick.timestamp
        self.delivered += 1
        self.late += late
        return TailTick(tick, late, created)

    def bound(self) -> dt.datetime:
        """Where a listener (re)started now begins: ``lateness`` before the newest delivered
        timestamp (or before ``since``)."""
        return (self.newest if self.newest is not None and self.newest > self.since else self.since) - self.lateness

    def forget_before(self, bound: dt.datetime) -> None:
        """Drop remembered ids older than ``bound``: no listener reports them again.

        - ``bound``: the earliest bound any chunk's listener now starts from"""
        self._seen = {i: t for i, t in self._seen.items() if t >= bound}
        self._horizon = bound if self._horizon is None else max(self._horizon, bound)

    @property
    def remembered(self) -> int:
        return len(self._seen)
