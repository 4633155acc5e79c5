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
import typing
from collections.abc import Awaitable, Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar

from tsstore.analytics.asof import JoinRead
from tsstore.asks import DocAsk
from tsstore.read.cost import ReadStats
from tsstore.read.engine import TickRead
from tsstore.spec import SeriesSpec
from tsstore.ticks import Tick
from tsstore.write.prepare import PreparedDoc
from tsstore.write.sender import BulkSender

P = ParamSpec("P")
R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True)
class Seat:
    """What a request may know of its store: the declaration, the collection it builds its
    queries on (a sync or async ``CollectionReference``: building a query is no call), and
    how the store reads."""

    spec: SeriesSpec
    collection: Any
    page_size: int
    lean: bool


# ---------------------------------------------------------------------------- the asks


#: What a store reads: one query's ticks, or an as-of join of two (its joined ticks).
Readable = TickRead | JoinRead

#: A query over some shard values: the values, and its query for any part of them (a part is
#: asked on its own when the whole keeps failing: :func:`tsstore.faults.call_split`).
Part = tuple[tuple[str, ...], Callable[[Sequence[str]], Any]]


def whole(query: Any) -> Part:
    """A query over no shard values of its own (the whole collection, one value's census),
    asked as it is."""
    return (), lambda _values: query


class Aggregation:
    """An aggregation query over the shard values of ``part``, at ``read_time``. A driver
    sends :meth:`query` for all of them (or, when that keeps failing and the read has a
    snapshot, for parts of them: ``divisible``), gives each answer to :meth:`answered` and
    the list of those to :meth:`total`."""

    part: Part
    read_time: dt.datetime | None

    @property
    def values(self) -> tuple[str, ...]:
        return self.part[0]

    @property
    def divisible(self) -> bool:
        return self.read_time is not None

    @property
    def what(self) -> str:
        return f"aggregating shard value(s) {', '.join(self.values)}"

    def query(self, values: Sequence[str]) -> Any:
        return self.part[1](values)

    def answered(self, results: Any) -> Any:
        [row] = results
        return {r.alias: r.value for r in row}

    def total(self, answers: list[Any]) -> Any:
        return answers


@dataclass(frozen=True)
class Aggregate(Aggregation):
    """The aggregations ``part``'s query asks for: a list of ``{alias: value}``, one per
    part it was asked in."""

    part: Part
    read_time: dt.datetime | None


@dataclass(frozen=True)
class Count(Aggregation):
    """The ``count()`` of ``part``'s query, billed into ``stats``: an int."""

    part: Part
    read_time: dt.datetime | None
    stats: ReadStats

    @property
    def what(self) -> str:
        return "counting ticks"

    def query(self, values: Sequence[str]) -> Any:
        return self.part[1](values).count()

    def answered(self, results: Any) -> int:
        [[result]] = results
        counted = int(result.value)  # the emulator reports an empty count as 0.0
        self.stats.aggregation_done(counted)
        return counted

    def total(self, answers: list[Any]) -> int:
        return sum(answers)


@dataclass(frozen=True)
class Documents:
    """The documents ``query`` returns at ``read_time`` (small queries: limit 1), billed."""

    query: Any
    read_time: dt.datetime | None
    stats: ReadStats
    what = "reading documents"

    def answered(self, docs: list[Any]) -> list[Any]:
        self.stats.query_done(len(docs))
        return docs


@dataclass(frozen=True)
class Collect:
    """All the ticks of ``read``, as a list. In a list of asks, only reads of one cursor
    (the stores run a list's asks on their reader threads, which a merge needs itself)."""

    read: Readable


@dataclass(frozen=True)
class Feed:
    """Every tick of ``read`` given to ``sink`` as it streams (memory stays flat); answers
    ``None``."""

    read: Readable
    sink: Callable[[Tick], None]




@dataclass(frozen=True)
class Send(Generic[R]):
    """A bulk job (:class:`~tsstore.write.job.Job`) through the store's sender at its ramped
    rate: ``docs`` made from the ticks of ``read`` (a thread-side iterator; empty when
    ``read`` is None), into ``spec``'s collection (default: the store's). Answers
    ``result(sender)``, which is also what Ctrl-C or a refusal reports as done.

    ``options`` go to the :class:`~tsstore.write.sender.BulkSender` (``on_duplicate``,
    callbacks); ``counted``: the batches settled go to the series counters too;
    ``tolerate``: refusal codes that are an answer, not a failure; ``what`` names the job."""

    docs: Callable[[Iterator[Tick]], Iterable[PreparedDoc]]
    result: Callable[[BulkSender], R]
    what: str
    read: TickRead | None = None
    spec: SeriesSpec | None = None
    counted: bool = False
    tolerate: frozenset[int] = frozenset()
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Pause:
    """Wait ``seconds`` (a roll-up waiting for writers to see its horizon); answers ``None``."""

    seconds: float
    why: str


@dataclass(frozen=True)
class CounterFor:
    """The sharded counter of one series (``spec.count_by`` values), made on first use."""

    values: tuple[Any, ...]


Ask = Aggregation | Documents | Collect | Feed | DocAsk | Send[Any] | Pause | CounterFor | list[Any]

#: A request: yields asks, receives their answers, returns the verb's result.
Request = Generator[Any, Any, R]


def step(request: Request[Any], reply: Any) -> tuple[bool, Any]:
    """Give ``request`` the answer to its last ask: (False, its next ask) or (True, its result)."""
    try:
        return False, request.send(reply)
    except StopIteration as done:
        return True, done.value


def answer(request: Request[R], respond: Callable[[Any], Any]) -> R:
    """Run ``request`` to its result, each ask answered by ``respond`` (the thread driver)."""
    done, value = step(request, None)
    while not done:
        done, value = step(request, respond(value))
    return typing.cast(R, value)


async def aanswer(request: Request[R], respond: Callable[[Any], Awaitable[Any]]) -> R:
    """Run ``request`` to its result, each ask answered by ``await respond(ask)`` (the
    event-loop driver)."""
    done, value = step(request, None)
    while not done:
        done, value = step(request, await respond(value))
    return typing.cast(R, value)
