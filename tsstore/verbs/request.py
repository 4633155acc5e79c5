"""What a verb is: a request that decides, run by a driver that does the I/O.

Every public verb of the stores is written once, as a generator (a *request*) that yields
what it needs from Firestore (an *ask*: a document, a count, an aggregation, a read
of ticks, a bulk send) and receives the answer; what it returns is the verb's result. A
request does no I/O itself: it plans, builds query objects (no call) and combines answers.

Two drivers answer the asks: :class:`~tsstore.store.TimeSeriesStore` on its reader threads,
:class:`~tsstore.aio.AsyncTimeSeriesStore` on its event loop (:func:`answer`, :func:`aanswer`).
A list of asks is answered concurrently, in order. How a request becomes a method of both
stores is :mod:`tsstore.verbs.declare`.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
import typing
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, ParamSpec, Protocol, TypeGuard, TypeVar

from google.cloud.firestore_v1.base_collection import BaseCollectionReference

from tsstore.analytics.aggregate import Number
from tsstore.analytics.asof import JoinRead
from tsstore.asks import (Asking, CreateDoc, DatabaseAsking, DeleteDoc, Doc, DocAsk, FindDocs, GetDoc, KnownTime,
                          SetDoc, UpdateDoc, step)  # fmt: skip
from tsstore.census_asks import Ask as CensusAsk
from tsstore.census_asks import FirstValue
from tsstore.cold.objects import DeleteObject, GetObject, ListObjects, ObjectUrls, PutObject
from tsstore.counting import SeriesCounter
from tsstore.live.listen import ListenTail, ListenWindow
from tsstore.read.chunks import ChunkTicks
from tsstore.read.cold import ColdRead, TieredRead
from tsstore.read.cost import ReadStats
from tsstore.read.engine import TickRead
from tsstore.spec import SeriesSpec
from tsstore.ticks import Tick
from tsstore.write.writer import Making, SendOptions

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


#: How a read of several queries gets its snapshot (see :class:`Seat`).
Snapshots = Literal["read", "estimated"]


class Checks:
    """When a store last made each check it makes now and then (thread-safe); ``local``: the
    local clock, in seconds (monotonic)."""

    def __init__(self, *, local: Callable[[], float] = time.monotonic) -> None:
        self._local = local
        self._lock = threading.Lock()
        self._done: dict[str, float] = {}

    def due(self, what: str, every: dt.timedelta) -> bool:
        """Whether ``what`` was never checked, or last checked more than ``every`` ago."""
        with self._lock:
            last = self._done.get(what)
        return last is None or self._local() - last > every.total_seconds()

    def done(self, what: str) -> None:
        """``what`` was checked now, and found right."""
        with self._lock:
            self._done[what] = self._local()


@dataclass(frozen=True)
class Seat:
    """What a request may know of its store: the declaration, the collection it builds its
    queries on (a sync or async ``CollectionReference``: building a query is no call), and
    how the store reads."""

    spec: SeriesSpec
    collection: BaseCollectionReference[Any]
    page_size: int
    lean: bool
    #: How a read of several queries gets its one snapshot: ``"estimated"`` from recent answers
    #: (:mod:`tsstore.clock`), or ``"read"`` the server's time (one round trip).
    snapshots: Snapshots = "estimated"
    #: The checks the store's requests make now and then, not every time (:class:`Checks`).
    checks: Checks = field(default_factory=Checks, compare=False)


# ---------------------------------------------------------------------------- the asks


#: What a store reads: one query's ticks (from Firestore, from the cold tier, or from both
#: across the seam), or an as-of join of two (its joined ticks).
Readable = TickRead | TieredRead | ColdRead | JoinRead
#: The same, for ``isinstance``.
READABLE = (TickRead, TieredRead, ColdRead, JoinRead)

#: What a count or an aggregation runs over: one chunk of a plan's ticks, or one ask of the
#: shard census (every document, one shard value's ticks, a range of shard values).
Over = ChunkTicks | CensusAsk


class Aggregation:
    """A count or aggregations over ``over`` at ``read_time``, answered with one result per
    query the driver sent: the whole, or (when it keeps failing, and the read has a snapshot
    that keeps the parts consistent) its chunk's shard values in parts."""

    over: Over
    read_time: dt.datetime | None

    @property
    def values(self) -> tuple[str, ...]:
        return self.over.chunk if isinstance(self.over, ChunkTicks) else ()

    @property
    def divisible(self) -> bool:
        return self.read_time is not None and isinstance(self.over, ChunkTicks)


@dataclass(frozen=True)
class Aggregate(Aggregation, DatabaseAsking[list[dict[str, Number | None]]]):
    """The ``aggregations`` (``(kind, alias, field)``: ``count``, ``sum`` or ``avg``, ``field``
    ``None`` for a count) over ``over``: ``{alias: value}`` per query sent (an average of
    nothing is ``None``)."""

    over: Over
    aggregations: tuple[tuple[str, str, str | None], ...]
    read_time: dt.datetime | None
    what: str = "aggregating ticks"


@dataclass(frozen=True)
class Count(Aggregation, DatabaseAsking[list[int]]):
    """The ``count()`` of ``over``: one count per query sent, each billed by what it counted."""

    over: Over
    read_time: dt.datetime | None
    what: str = "counting ticks"


A = TypeVar("A", bound=Count | Aggregate)


def narrowed(ask: A, values: Sequence[str]) -> A:
    """``ask`` over ``values``, a part of its chunk's shard values (a count or an aggregation
    that keeps failing is asked in parts); a census ask has no parts: ``ask`` itself."""
    return replace(ask, over=replace(ask.over, chunk=tuple(values))) if isinstance(ask.over, ChunkTicks) else ask


def billed(counts: Sequence[list[int]], stats: ReadStats) -> list[int]:
    """The totals of some :class:`Count` answers, each query's count billed into ``stats``
    (one read per 1 000 index entries counted, at least one)."""
    for answer in counts:
        for counted in answer:
            stats.aggregation_done(counted)
    return [sum(answer) for answer in counts]


def billed_aggregates(
    answers: Sequence[list[dict[str, Number | None]]], stats: ReadStats
) -> list[dict[str, Number | None]]:
    """The answers of some :class:`Aggregate` asks, one per query sent (a part asked in halves
    answers twice), each billed into ``stats`` by the index entries it went over: the count
    it returned."""
    answered = [answer for split in answers for answer in split]
    for answer in answered:
        counted = next(v for k, v in answer.items() if k == "count" or k.startswith("count_"))
        stats.aggregation_done(int(counted or 0))
    return answered


@dataclass(frozen=True)
class Documents(DatabaseAsking[list[Doc]]):
    """The documents of census ask ``over`` (a limit-1 query) at ``read_time``."""

    over: FirstValue
    read_time: dt.datetime | None
    what: str = "reading documents"


@dataclass(frozen=True)
class Collect(Asking[list[Tick]]):
    """All the ticks of ``read``, as a list. In a list of asks, only reads of one cursor
    (the stores run a list's asks on their reader threads, which a merge needs itself)."""

    read: Readable
    what: str = "reading ticks"


class Sink(Protocol):
    """Where a :class:`Feed` puts each tick as it streams: a frame, bar or join builder, or
    a fold of a request's own."""

    def add(self, tick: Tick, /) -> object: ...


@dataclass(frozen=True)
class Feed(Asking[None]):
    """Every tick of ``read`` given to ``sink`` as it streams (memory stays flat); answers
    ``None``."""

    read: Readable
    sink: Sink
    what: str = "reading ticks"


@dataclass(frozen=True)
class Send(Asking[R]):
    """A bulk job (:class:`~tsstore.write.job.Job`) through the store's sender at its ramped
    rate: what ``making`` makes of the ticks of ``read`` (none when ``read`` is None), into
    ``spec``'s collection (default: the store's); answers ``making.result(sender)``.
    ``counted``: the batches settled go to the series counters too; ``tolerate``: refusal
    codes that are an answer, not a failure; ``what`` names the job."""

    making: Making[R]
    what: str
    read: TickRead | None = None
    spec: SeriesSpec | None = None
    counted: bool = False
    tolerate: frozenset[int] = frozenset()
    options: SendOptions = SendOptions()


@dataclass(frozen=True)
class Pause(Asking[None]):
    """Wait ``seconds`` (a roll-up waiting for writers to see its horizon: ``what``); answers
    ``None``."""

    seconds: float
    what: str


@dataclass(frozen=True)
class CounterFor(Asking[SeriesCounter]):
    """The sharded counter of one series (``spec.count_by`` values), made on first use: a
    :class:`~tsstore.counting.SyncCounter` from the sync store, an
    :class:`~tsstore.counting.AsyncCounter` (the same verbs, awaited) from the async store."""

    values: tuple[Any, ...]
    what: str = "making a series counter"


#: What a request yields: one ask, or a list of asks answered concurrently (in order).
Ask = Asking[object] | Sequence[Asking[object]]

#: What a store's backend answers, each in one call (:class:`~tsstore.asks.DatabaseAsking`):
#: a count or an aggregation (one answer for the shard values its ``over`` names), a census's
#: documents, a document ask (a series counter's too).
DatabaseAsk = Count | Aggregate | Documents | DocAsk

#: Every kind of ask a request yields to a store. Each store answers each kind with one case of
#: one ``match`` that ends in ``assert_never``: a kind added here and answered nowhere fails
#: the type check. The database's kinds (:class:`~tsstore.asks.DatabaseAsking`) are one case.
Question = (
    Count | Aggregate | Documents | Collect | Feed | Send[Any] | Pause | CounterFor | KnownTime
    | GetDoc | SetDoc | DeleteDoc | FindDocs | CreateDoc | UpdateDoc
    | PutObject | GetObject | ListObjects | DeleteObject | ObjectUrls
    | ListenWindow | ListenTail
)  # fmt: skip
_KINDS = tuple(typing.get_origin(kind) or kind for kind in typing.get_args(Question))


def question(ask: Asking[object]) -> Question:
    """``ask`` as one of the kinds a store answers; a ``TypeError`` naming any other."""
    if not is_question(ask):
        kinds = ", ".join(kind.__name__ for kind in _KINDS)
        raise TypeError(f"no store answers {ask!r}; the asks a request may yield are {kinds}")
    return ask


def is_question(ask: object) -> TypeGuard[Question]:
    """Whether ``ask`` is one of the kinds a store answers."""
    return isinstance(ask, _KINDS)

#: A request: yields asks, receives their answers, returns the verb's result.
Request = Generator[Ask, Any, R]


def answer(request: Request[R], respond: Callable[[Ask], object]) -> R:
    """Run ``request`` to its result, each ask answered by ``respond`` (the thread driver)."""
    stepped = step(request, None)
    while stepped[0] is False:
        stepped = step(request, respond(stepped[1]))
    return stepped[1]


async def aanswer(request: Request[R], respond: Callable[[Ask], Awaitable[object]]) -> R:
    """Run ``request`` to its result, each ask answered by ``await respond(ask)`` (the
    event-loop driver)."""
    stepped = step(request, None)
    while stepped[0] is False:
        stepped = step(request, await respond(stepped[1]))
    return stepped[1]
