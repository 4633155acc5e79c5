"""As-of joins while two reads stream past: each left tick matched with a right tick near
its time (pure logic, no Firestore).

The rules are those of ``pandas.merge_asof`` (which the tests hold them to): for each left
tick, in its order, the right tick of the same series (equal ``by`` values) that is

- ``"backward"``: the newest at or before its time (the last of several at that time),
- ``"forward"``: the oldest at or after it (the first of several),
- ``"nearest"``: the closer of those two (the backward one on a tie),

no farther than ``tolerance`` when one is given, and at a different time when
``allow_exact_matches`` is false; else no match. Right ticks of one time are taken in the
read's order (timestamp, then document id).

Both reads arrive oldest first, merged into one stream (:func:`priority` says which side
goes first at equal times). Memory holds each series' last right tick and the left ticks
that still wait for a later right tick: with a tolerance, those of one tolerance window;
a backward join waits for nothing.
"""

from __future__ import annotations

import datetime as dt
import heapq
from collections import deque
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import pandas as pd

from tsstore.errors import QueryError
from tsstore.frames import DTYPES
from tsstore.read.cold import TieredRead
from tsstore.read.engine import TickRead
from tsstore.spec import SeriesSpec
from tsstore.ticks import Tick, get_path, without_paths
from tsstore.times import DurationLike, to_duration

Direction = Literal["backward", "forward", "nearest"]


class AsofOptions(TypedDict, total=False):
    """How an as-of join matches, as both of its verbs (``asof``, ``iter_asof``) take it:
    the right series (``right_spec``), the fields equal on both sides, the direction, the
    tolerance, whether a match at the same time counts, and the right columns' prefix."""

    right_spec: SeriesSpec | None
    by: str | Sequence[str]
    direction: str
    tolerance: DurationLike | None
    allow_exact_matches: bool
    prefix: str


#: What an as-of join's options are when not given (the verbs' signatures show them).
ASOF_DEFAULTS = AsofOptions(
    right_spec=None, by=(), direction="backward", tolerance=None, allow_exact_matches=True, prefix="right"
)
DIRECTIONS: tuple[Direction, ...] = ("backward", "forward", "nearest")
LEFT, RIGHT = 0, 1


def check_direction(direction: object) -> Direction:
    if direction not in DIRECTIONS:
        raise QueryError(
            f"direction={direction!r} is not allowed for an as-of join; use one of {', '.join(DIRECTIONS)}"
        )
    return direction


def check_tolerance(tolerance: object) -> dt.timedelta | None:
    """``tolerance`` as a non-negative duration (``"5s"``, seconds, a ``timedelta``) or ``None``."""
    if tolerance is None:
        return None
    try:
        value = to_duration(tolerance, name="tolerance")
    except ValueError as exc:
        raise QueryError(f"{exc} (e.g. '500ms', '5s', '1min')") from None
    if value < dt.timedelta(0):
        raise QueryError(f"tolerance {tolerance!r} is negative; give a duration of 0 or more")
    return value


def priority(direction: Direction, allow_exact_matches: bool) -> tuple[int, int]:
    """The rank of (left, right) ticks at one time in the merged stream: right first where a
    right tick at a left tick's own time is its backward match, left first where it is its
    forward match (or must not match at all)."""
    right_first = (direction != "forward") == allow_exact_matches
    return (1, 0) if right_first else (0, 1)


@dataclass
class _Waiting:
    """A left tick in output order, with its match so far (``done``: it will not change)."""

    left: Tick
    key: tuple[Any, ...]
    right: Tick | None = None
    done: bool = False


@dataclass
class AsofJoiner:
    """Feed it the merged stream with :meth:`add` (side, tick); it returns the (left, right or
    ``None``) pairs that are final, in the left ticks' order; :meth:`rest` the others at the end."""

    direction: Direction = "backward"
    by: Sequence[str] = ()
    tolerance: dt.timedelta | None = None
    allow_exact_matches: bool = True
    _paths: list[list[str]] = field(default_factory=list)
    _last: dict[tuple[Any, ...], Tick] = field(default_factory=dict)  # each series' newest right tick
    _queue: deque[_Waiting] = field(default_factory=deque)  # left ticks in order, the oldest first
    _open: dict[tuple[Any, ...], deque[_Waiting]] = field(default_factory=dict)  # waiting for a later right tick
    _deadlines: list[tuple[dt.datetime, int, _Waiting]] = field(default_factory=list)
    _seq: int = 0

    def __post_init__(self) -> None:
        self._paths = [name.split(".") for name in self.by]

    def key(self, tick: Tick) -> tuple[Any, ...]:
        return tuple(get_path(tick.data, path) for path in self._paths)

    def add(self, side: int, tick: Tick) -> list[tuple[Tick, Tick | None]]:
        self._expire(tick.timestamp)
        if side == RIGHT:
            self._right(tick)
        else:
            self._left(tick)
        return self._ready()

    def rest(self) -> list[tuple[Tick, Tick | None]]:
        """Every pair still waiting: no later right tick came."""
        for waiting in self._queue:
            waiting.done = True
        return self._ready()

    def _within(self, left: Tick, right: Tick) -> bool:
        gap = abs(left.timestamp - right.timestamp)
        if gap == dt.timedelta(0) and not self.allow_exact_matches:
            return False
        return self.tolerance is None or gap <= self.tolerance

    def _left(self, tick: Tick) -> None:
        key = self.key(tick)
        waiting = _Waiting(tick, key)
        self._queue.append(waiting)
        before = self._last.get(key) if self.direction != "forward" else None
        if before is not None and self._within(tick, before):
            waiting.right = before
        exact = waiting.right is not None and waiting.right.timestamp == tick.timestamp
        if self.direction == "backward" or exact:  # nothing later is nearer than an exact match
            waiting.done = True
            return
        opened = self._open.setdefault(key, deque())
        while opened and opened[0].done:  # closed by their deadline: no longer waiting
            opened.popleft()
        opened.append(waiting)
        # no right tick later than this can match: past the tolerance, or (nearest) not nearer
        # than the backward match, ties going backward
        reach = [self.tolerance] if self.tolerance is not None else []
        if waiting.right is not None:
            reach.append(tick.timestamp - waiting.right.timestamp)
        if reach:
            self._seq += 1
            heapq.heappush(self._deadlines, (tick.timestamp + min(reach), self._seq, waiting))

    def _right(self, tick: Tick) -> None:
        key = self.key(tick)
        if self.direction != "backward":
            still: deque[_Waiting] = deque()
            for waiting in self._open.pop(key, ()):
                if waiting.done:
                    continue
                if tick.timestamp == waiting.left.timestamp and not self.allow_exact_matches:
                    still.append(waiting)  # a later right tick may still match
                    continue
                if self._within(waiting.left, tick) and self._nearer(waiting, tick):
                    waiting.right = tick
                waiting.done = True
            if still:
                self._open[key] = still
        self._last[key] = tick

    @staticmethod
    def _nearer(waiting: _Waiting, later: Tick) -> bool:
        """Whether ``later`` beats the backward match so far (a tie goes backward)."""
        before = waiting.right
        left = waiting.left.timestamp
        return before is None or later.timestamp - left < left - before.timestamp

    def _expire(self, now: dt.datetime) -> None:
        """Close the waits no right tick at ``now`` or later can change."""
        while self._deadlines and self._deadlines[0][0] < now:
            _, _, waiting = heapq.heappop(self._deadlines)
            waiting.done = True

    def _ready(self) -> list[tuple[Tick, Tick | None]]:
        out = []
        while self._queue and self._queue[0].done:
            waiting = self._queue.popleft()
            out.append((waiting.left, waiting.right))
        return out


def merged(left: Iterable[Tick], right: Iterable[Tick], ranks: tuple[int, int]) -> Iterator[tuple[int, Tick]]:
    """Two oldest-first streams as one, lazily, each tick with its side; at one time, the
    side of the lower rank first, each side in its own order."""

    def tagged(side: int, stream: Iterable[Tick]) -> Iterator[tuple[tuple[dt.datetime, int, int], int, Tick]]:
        for n, tick in enumerate(stream):
            yield (tick.timestamp, ranks[side], n), side, tick

    for _, side, tick in heapq.merge(tagged(LEFT, left), tagged(RIGHT, right), key=lambda item: item[0]):
        yield side, tick


async def amerged(
    left: AsyncIterator[Tick], right: AsyncIterator[Tick], ranks: tuple[int, int]
) -> AsyncIterator[tuple[int, Tick]]:
    """:func:`merged` of two async streams."""
    streams = (left, right)
    heads: dict[int, Tick] = {}
    for side in (LEFT, RIGHT):
        if (first := await anext(streams[side], None)) is not None:
            heads[side] = first
    while heads:
        side = min(heads, key=lambda s: (heads[s].timestamp, ranks[s]))
        yield side, heads[side]
        if (following := await anext(streams[side], None)) is not None:
            heads[side] = following
        else:
            del heads[side]


@dataclass(frozen=True)
class JoinRead:
    """An as-of join to read: the two reads (both oldest first) and how to join them. The
    store reads both (as any :class:`~tsstore.read.engine.TickRead`) and hands the merged
    stream to :meth:`joined`: each left tick comes out once, as a tick with its own id, time
    and fields and, under ``prefix``, its match's fields but the ``by`` fields (equal to the
    left tick's, as ``merge_asof`` keeps them once), its timestamp and, with ``ids``, its
    document id (absent without a match)."""

    left: TickRead | TieredRead
    right: TickRead | TieredRead
    direction: Direction
    by: tuple[str, ...]
    tolerance: dt.timedelta | None
    allow_exact_matches: bool
    prefix: str
    right_spec: SeriesSpec
    ids: bool

    def _joiner(self) -> AsofJoiner:
        return AsofJoiner(self.direction, self.by, self.tolerance, self.allow_exact_matches)

    def _row(self, left: Tick, right: Tick | None) -> Tick:
        if right is None:
            return left
        matched = dict(without_paths(right.data, [self.right_spec.shard_field, *self.by], prune=True))
        matched[self.right_spec.timestamp_field] = right.timestamp
        if self.ids:
            matched["id"] = right.id
        return Tick(left.id, left.timestamp, {**left.data, self.prefix: matched})

    def with_right_columns(self, frame: pd.DataFrame) -> pd.DataFrame:
        """``frame`` with the match's timestamp, declared columns (but the ``by`` fields) and,
        with ``ids``, id, missing where none matched, even when nothing did (as ``merge_asof``
        keeps its columns)."""
        wanted = {
            f"{self.prefix}.{self.right_spec.timestamp_field}": pd.Series(
                pd.NaT, index=frame.index, dtype="datetime64[us, UTC]"
            ),
        }
        if self.ids:
            wanted[f"{self.prefix}.id"] = pd.Series(pd.NA, index=frame.index, dtype="string")
        for name, kind in self.right_spec.columns:
            if name not in self.by:
                wanted[f"{self.prefix}.{name}"] = pd.Series(pd.NA, index=frame.index, dtype=DTYPES[kind])
        missing = {name: column for name, column in wanted.items() if name not in frame.columns}
        return frame.assign(**missing) if missing else frame

    def joined(self, left: Iterator[Tick], right: Iterator[Tick]) -> Iterator[Tick]:
        joiner = self._joiner()
        for side, tick in merged(left, right, priority(self.direction, self.allow_exact_matches)):
            yield from (self._row(a, b) for a, b in joiner.add(side, tick))
        yield from (self._row(a, b) for a, b in joiner.rest())

    async def ajoined(self, left: AsyncIterator[Tick], right: AsyncIterator[Tick]) -> AsyncIterator[Tick]:
        joiner = self._joiner()
        async for side, tick in amerged(left, right, priority(self.direction, self.allow_exact_matches)):
            for a, b in joiner.add(side, tick):
                yield self._row(a, b)
        for a, b in joiner.rest():
            yield self._row(a, b)
