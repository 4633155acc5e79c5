"""What a distributed (sharded) counter is: many increments a second on one logical count,
each verb a request of document asks, run over an answer on a thread or on an event loop.

A Firestore document takes about one sustained write a second, so a hot counter is split
into N shard documents, each increment lands on a random one, and the value is their sum.
Layout (as in Firestore's distributed-counter guide), under any document path:

    {path}                   {"shards": N, "total": T, "total_as_of": time}   (the counter)
    {path}/shards/{i}        {"count": c}                                    (i = 0 … N-1)
    {path}/receipts/{id}     {}             (a batch's receipt, while its commit is sent)

The value is one ``sum()`` aggregation over the shards (billed one read per 1 000 index
entries), not a read of every shard. ``rollup()`` stores the current total in the counter
document with a plain write (never an increment) guarded by its as-of time, so repeated or
concurrent roll-ups never double-count and an older one never overwrites a newer one.

The counter document is changed only by optimistic conditional writes (read, decide, write
with a precondition; on a lost race read again), never by transactions. The emulator (and a
contended production database) serialises read-write transactions on one document with
locks, so a handful of concurrent roll-ups time out with ``Aborted: Transaction lock
timeout``; a conditional write holds no lock and a loser just decides again.

Each verb is a request (:data:`CounterRequest`): it yields document asks (:mod:`tsstore.asks`),
which any database answers, and returns its result. :class:`SyncCounter` runs it on the
caller's thread, :class:`AsyncCounter` (an async store's series counter) on an event loop,
each over the answer it is given (a store's series counters are answered as its backend
answers); both try each ask again after faults as the stores try theirs
(:func:`tsstore.faults.call`), except a lone increment, which is not safe to send twice. A
counter on a bare client's database is :class:`tsstore.counters.ShardedCounter`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import math
import random
import time
import uuid
from collections import Counter as _Tally
from collections.abc import Awaitable, Callable, Generator, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias, TypeVar

from tsstore import faults
from tsstore.asks import (
    AddToDocs,
    Asking,
    CreateDoc,
    DeleteDoc,
    Doc,
    DocAsk,
    DocumentAnswers,
    GetDoc,
    SumDocs,
    UpdateDoc,
    step,
)
from tsstore.errors import CounterError, FaultError, StateError
from tsstore.limits import DOCUMENT_WRITES_PER_SECOND, MAX_INT64, MIN_INT64
from tsstore.logs import DB_COLLECTION, DB_OPERATION

log = logging.getLogger(__name__)

SHARDS_COLLECTION = "shards"
#: Where :meth:`~tsstore.ShardedCounter.increment_many` keeps a commit's receipt until it has landed.
RECEIPTS_COLLECTION = "receipts"
COUNT_FIELD = "count"
SHARDS_FIELD = "shards"
TOTAL_FIELD = "total"
AS_OF_FIELD = "total_as_of"

#: Reads-and-conditional-writes of the counter document before contention is an error. Each
#: lost race means another writer succeeded, so 20 is far beyond what a few dozen concurrent
#: callers need; running out means the document is being rewritten non-stop.
WRITE_ATTEMPTS = 20
#: Back-off after a lost race: a uniformly random pause up to FIRST * 2**attempt seconds,
#: capped, so losers spread out instead of re-reading and colliding again in lock-step.
_BACKOFF_FIRST = 0.005
_BACKOFF_CAP = 0.25

#: What the parameters of the counters and their methods mean (the reference shows each beside
#: its method).
PARAMETER_HELP = {
    "path": "the counter document's path, an even number of segments (``counters/likes``); its shard "
    "documents live in its ``shards`` subcollection.",
    "shards": "how many shard documents (1 to 10 000); each takes about one write a second.",
    "by": "the amount to add: any integer, negative too.",
    "amounts": "the amounts to add, one increment each (integers, negative too).",
    "live": "sum the shard documents now (one read each) instead of reading the stored roll-up.",
    "answer": "how a document ask is answered, one attempt (a store's backend answers its series counters'; an "
    "async store gives its own, awaited)",
}

_T = TypeVar("_T")
#: What a verb decides from one snapshot of the counter document: its result, and the fields
#: to write (``None``: nothing to write, the result stands as it is).
_Decision: TypeAlias = tuple[_T, dict[str, Any] | None]


@dataclass(frozen=True)
class CounterValue:
    """A counter's value, when it was true, and whether it is live or a stored roll-up."""

    #: The count.
    value: int
    #: When it was true: the read's time for a live value, the roll-up's for a stored one.
    as_of: dt.datetime
    #: Summed from the shards now (``True``), or a stored roll-up (``False``).
    live: bool


def plan_counter_shards(increments_per_second: float) -> int:
    """Shards needed for a sustained increment rate: one write a second per shard document."""
    if isinstance(increments_per_second, bool) or not isinstance(increments_per_second, (int, float)):
        raise CounterError(f"increments_per_second {increments_per_second!r} is not a number")
    if not (increments_per_second > 0 and math.isfinite(increments_per_second)):
        raise CounterError(f"increments_per_second {increments_per_second!r} must be positive and finite")
    return max(1, math.ceil(increments_per_second / DOCUMENT_WRITES_PER_SECOND))


def check_counter_path(path: object) -> str:
    """``path`` if it names a document (an even number of non-empty segments)."""
    if not isinstance(path, str) or not path.strip("/"):
        raise CounterError(f"counter path {path!r} is empty; give a document path such as 'counters/likes'")
    segments = path.strip("/").split("/")
    if any(not s for s in segments):
        raise CounterError(f"counter path {path!r} has an empty segment")
    if len(segments) % 2:
        raise CounterError(
            f"counter path {path!r} has {len(segments)} segments; a counter is a document, so its path needs an "
            "even number (collection/document[/collection/document…]), e.g. 'counters/likes'"
        )
    return "/".join(segments)


#: Most shards a counter may have: each is a document that a live count reads, and 10 000
#: shards already take 10 000 increments a second; a busier count wants several counters.
MAX_COUNTER_SHARDS = 10_000


def _check_shard_count(shards: object) -> int:
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_COUNTER_SHARDS:
        raise CounterError(f"shard count {shards!r} is not allowed; give an integer from 1 to {MAX_COUNTER_SHARDS}")
    return shards


def _check_amount(by: object) -> int:
    if isinstance(by, bool) or not isinstance(by, int):
        raise CounterError(f"increment {by!r} is a {type(by).__name__}; increments are integers (negative allowed)")
    if not MIN_INT64 <= by <= MAX_INT64:
        raise CounterError(f"increment {by} does not fit Firestore's 64-bit integers ({MIN_INT64} to {MAX_INT64})")
    return by



def _missing(path: str) -> StateError:
    """The refusal of a verb on counter ``path``, which has not been created."""
    return StateError(f"counter {path!r} does not exist; create it first")


@dataclass(frozen=True)
class Wait(Asking[None]):
    """Pause ``seconds`` before deciding again (a lost race's back-off); answered by the
    counter that runs the request, not by the database."""

    seconds: float
    what: str = "waiting after a lost race"


#: A counter's verb as a request: it yields document asks (:mod:`tsstore.asks`) and
#: :class:`Wait`, and returns the verb's result; :class:`SyncCounter` runs it on a thread,
#: :class:`AsyncCounter` on an event loop.
CounterRequest: TypeAlias = Generator["DocAsk | Wait", Any, _T]

#: The answer to a document ask, one attempt, awaited (an async store's).
AsyncDocumentAnswers = Callable[[DocAsk], Awaitable[Any]]


class Counter:
    """What both counters are: a path, the shard count last known, and each verb as a request
    (the same decisions on a thread and on an event loop)."""

    def __init__(self, path: str) -> None:
        self.path = check_counter_path(path)
        self._shards_path = f"{self.path}/{SHARDS_COLLECTION}"
        self._known_shards: int | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path!r})"

    def _read(self) -> CounterRequest[Doc]:
        doc: Doc = yield GetDoc(self.path, what=f"reading counter {self.path!r}")
        return doc

    def _create(self, shards: int) -> CounterRequest[int]:
        _check_shard_count(shards)

        def decide(doc: Doc) -> _Decision[int]:
            if doc.data is not None:
                return _shard_count(doc, self.path), None
            return shards, {SHARDS_FIELD: shards}

        count = yield from self._write_counter_doc(decide, verb="create")
        yield from self._ensure_shard_docs(0, count)
        self._known_shards = count
        return count

    def _shards(self) -> CounterRequest[int]:
        doc = yield from self._read()
        if doc.data is None:
            raise _missing(self.path)
        self._known_shards = _shard_count(doc, self.path)
        return self._known_shards

    def _increment(self, by: int) -> CounterRequest[None]:
        amount = _check_amount(by)
        shard = random.randrange((yield from self._shard_count()))
        yield AddToDocs(((f"{self._shards_path}/{shard}", COUNT_FIELD, amount),),
                        what=f"adding {amount} to counter {self.path!r}")  # fmt: skip

    def _increment_many(self, amounts: Iterable[int]) -> CounterRequest[int]:
        n = yield from self._shard_count()
        per_shard: _Tally[int] = _Tally()
        for by in amounts:
            per_shard[random.randrange(n)] += _check_amount(by)
        adds = {f"{self._shards_path}/{shard}": amount for shard, amount in sorted(per_shard.items()) if amount}
        yield from _add_once(adds, receipt=f"{self.path}/{RECEIPTS_COLLECTION}/{uuid.uuid4().hex}",
                             what=f"adding a batch to counter {self.path!r}")  # fmt: skip
        return sum(per_shard.values())

    def _rollup(self) -> CounterRequest[CounterValue]:
        live = yield from self._live()

        def decide(doc: Doc) -> _Decision[CounterValue]:
            if doc.data is None:
                # Writing the total alone would leave a counter document without a shard
                # count, which create() would then refuse; a roll-up needs a counter.
                raise _missing(self.path)
            stored = _stored(doc)
            if stored is not None and stored.as_of >= live.as_of:
                return stored, None
            return CounterValue(live.value, live.as_of, live=False), {TOTAL_FIELD: live.value, AS_OF_FIELD: live.as_of}

        return (yield from self._write_counter_doc(decide, verb="rollup"))

    def _value(self, live: bool) -> CounterRequest[CounterValue]:
        if not live:
            doc = yield from self._read()
            if doc.data is None:
                raise _missing(self.path)
            stored = _stored(doc)
            if stored is not None:
                return stored
        return (yield from self._live())

    def _grow(self, shards: int) -> CounterRequest[int]:
        _check_shard_count(shards)
        doc = yield from self._read()
        if doc.data is not None:  # shards below the count read exist already; never make any past ``shards``
            yield from self._ensure_shard_docs(min(_shard_count(doc, self.path), shards), shards)

        def decide(doc: Doc) -> _Decision[int]:
            if doc.data is None:
                raise _missing(self.path)
            current = _shard_count(doc, self.path)
            if shards < current:
                raise CounterError(
                    f"counter {self.path!r} has {current} shards; shrinking to {shards} is not supported "
                    "(counts on removed shards would be lost)"
                )
            return current, ({SHARDS_FIELD: shards} if shards > current else None)

        yield from self._write_counter_doc(decide, verb="grow")
        self._known_shards = shards
        return shards

    def _write_counter_doc(
        self, decide: Callable[[Doc], _Decision[_T]], *, verb: str, attempts: int = WRITE_ATTEMPTS
    ) -> CounterRequest[_T]:
        """Read the counter document, let ``decide`` choose, and write its fields conditionally.

        Optimistic and lock-free: a missing document is written with a create (refused if
        another writer made it first), an existing one with an update on condition that its
        update time is still the one read (refused if it changed or was deleted). Either
        refusal means another writer won; the loser pauses a random moment and decides again
        on a fresh read. Errors ``decide`` raises (``CounterError``, ``StateError``) pass
        through at once. A retry after a fault of a write that did land shows up as a lost race
        too, and every verb's decision on re-reading its own write is "nothing to do", so that
        is harmless.
        After ``attempts`` lost races in a row, ``StateError``: the document is being
        rewritten non-stop.
        """
        lost = ""
        for attempt in range(attempts):
            if attempt:
                yield Wait(random.uniform(0, min(_BACKOFF_CAP, _BACKOFF_FIRST * 2**attempt)))
            doc = yield from self._read()
            result, fields = decide(doc)
            if fields is None:
                return result
            what = f"writing counter {self.path!r} ({verb})"
            if doc.data is None:
                written = yield CreateDoc(self.path, fields, what=what)
                lost = "it was created meanwhile"
            else:
                assert doc.update_time is not None
                written = yield UpdateDoc(self.path, fields, written=doc.update_time, what=what)
                lost = "it was written or deleted meanwhile"
            if written:
                return result
            log.debug("counter %r: %s lost a race (%s)", self.path, verb, lost,
                      extra={DB_COLLECTION: self.path.rpartition("/")[0], DB_OPERATION: verb})  # fmt: skip
        raise StateError(
            f"counter {self.path!r}: {verb} gave up after {attempts} attempts; each time another writer "
            f"(create, rollup or grow) changed the counter document {self.path!r} between our read and our "
            f"conditional write (last: {lost})"
        )

    def _shard_count(self) -> CounterRequest[int]:
        if self._known_shards is not None:
            return self._known_shards
        return (yield from self._shards())

    def _ensure_shard_docs(self, start: int, stop: int) -> CounterRequest[None]:
        # Adding 0 creates a missing shard at 0 and leaves an existing one as it is: safe to repeat.
        for first in range(start, stop, 500):
            made = range(first, min(stop, first + 500))
            adds = tuple((f"{self._shards_path}/{shard}", COUNT_FIELD, 0) for shard in made)
            yield AddToDocs(adds, what=f"making the shards of counter {self.path!r}")

    def _live(self) -> CounterRequest[CounterValue]:
        total, at = yield SumDocs(self._shards_path, COUNT_FIELD, what=f"summing counter {self.path!r}")
        # The emulator reports an empty sum as 0.0; counts are integers.
        return CounterValue(int(total or 0), at, live=True)


class SyncCounter(Counter):
    """One distributed counter at a document path, its verbs run on the caller's thread: the
    sync store's series counter, and, on a client's database,
    :class:`~tsstore.counters.ShardedCounter` (whose reference shows the verbs).

    Every call to the database is a document ask (:mod:`tsstore.asks`) answered by ``answer``
    (one attempt); each is tried again after faults as the stores try theirs, except a lone
    :meth:`increment`, which is not idempotent (see there)."""

    def __init__(self, path: str, *, answer: DocumentAnswers) -> None:
        super().__init__(path)
        self._answer = answer

    def _run(self, request: CounterRequest[_T]) -> _T:
        """``request``'s result, each ask answered on this thread."""
        stepped = step(request, None)
        while stepped[0] is False:
            ask = stepped[1]
            if isinstance(ask, Wait):
                time.sleep(ask.seconds)
                stepped = step(request, None)
            else:
                stepped = step(request, faults.call(functools.partial(_attempt, self._answer, ask), what=ask.what))
        return stepped[1]

    def create(self, *, shards: int) -> int:
        """Create the counter with ``shards`` shards, or leave an existing one as it is.

        Idempotent: creating twice is not an error and resets nothing. Returns the shard
        count in effect (the existing one if the counter was there already). Concurrent
        creates (the writer makes per-series counters from several places) all agree: one
        document create wins, the others find the document made, read the winner's counter
        and return its shard count.
        """
        return self._run(self._create(shards))

    def shards(self) -> int:
        """The counter's shard count (read from the counter document)."""
        return self._run(self._shards())

    def increment(self, by: int = 1) -> None:
        """Add ``by`` (any integer) to a random shard. A missing shard document is created by
        the write, so a shard lost or not yet made heals on its next increment.

        One write, sent once more only when the database refused it (overloaded or contended:
        nothing was written). A cut connection leaves it unknown whether the increment landed,
        so that is a :class:`~tsstore.errors.FaultError` saying so, never a second add:
        :meth:`increment_many` is the retry-safe way (one receipt per commit)."""
        self._run(self._increment(by))

    def increment_many(self, amounts: Iterable[int]) -> int:
        """Apply many increments in one commit: each goes to a random shard, and each touched
        shard gets one add with its sum. Safe to retry after faults: the commit creates a
        receipt (:func:`increment_counters`). Returns the total added."""
        return self._run(self._increment_many(amounts))

    def value(self) -> int:
        """The live value: one ``sum()`` aggregation over the shard documents."""
        return self._run(self._live()).value

    def rollup(self) -> CounterValue:
        """Store the live total in the counter document and return it.

        A set, never an increment: repeating it, or racing another roll-up, cannot count
        anything twice. The total is one aggregation, true as of its read time; it is written
        only if the stored roll-up is older, with the counter document's update time as the
        precondition, so a roll-up that lost a race re-reads and, finding a newer one stored
        meanwhile, returns that instead of overwriting it. The aggregation is not repeated on
        a lost race: its value stays true as of its time, and the as-of check keeps order.
        """
        return self._run(self._rollup())

    def read(self, *, live: bool = False) -> CounterValue:
        """The stored roll-up (cheap: one document read, possibly stale; see ``as_of``), or the
        live sum with ``live=True`` or when no roll-up has been stored yet."""
        return self._run(self._value(live))

    def grow(self, *, shards: int) -> int:
        """Raise the shard count to ``shards``. Counts stay where they are (the value sums every
        shard document), new shards start at zero. Shrinking is refused: it would strand counts.

        The count is raised by a write conditional on the document being unchanged since it
        was read; a grow that lost a race decides again on the new count. So concurrent grows
        to one target all succeed, and a grow to less than a count another grow has already
        set is refused as the shrink it has become. Every grow makes the new shard documents
        before it writes the count, so no caller ever reads a count whose shards are missing
        (a grow that returns after losing to an identical one finds them already made).
        """
        return self._run(self._grow(shards))


class AsyncCounter(Counter):
    """A series counter from the async store (``await astore.series_counter(...)``):
    :class:`~tsstore.ShardedCounter`'s verbs, awaited, each the same request answered on the store's
    event loop (``answer``: a document ask's answer, one attempt, tried again as the sync
    counter's are)."""

    def __init__(self, path: str, *, answer: AsyncDocumentAnswers) -> None:
        super().__init__(path)
        self._answer = answer

    async def _run(self, request: CounterRequest[_T]) -> _T:
        """``request``'s result, each ask answered on the event loop."""
        stepped = step(request, None)
        while stepped[0] is False:
            ask = stepped[1]
            if isinstance(ask, Wait):
                await asyncio.sleep(ask.seconds)
                stepped = step(request, None)
            else:
                answer = await faults.acall(functools.partial(_aattempt, self._answer, ask), what=ask.what)
                stepped = step(request, answer)
        return stepped[1]

    async def create(self, *, shards: int) -> int:
        """:meth:`~tsstore.ShardedCounter.create`, awaited."""
        return await self._run(self._create(shards))

    async def shards(self) -> int:
        """:meth:`~tsstore.ShardedCounter.shards`, awaited."""
        return await self._run(self._shards())

    async def increment(self, by: int = 1) -> None:
        """:meth:`~tsstore.ShardedCounter.increment`, awaited (not sent again after a fault)."""
        await self._run(self._increment(by))

    async def increment_many(self, amounts: Iterable[int]) -> int:
        """:meth:`~tsstore.ShardedCounter.increment_many`, awaited."""
        return await self._run(self._increment_many(amounts))

    async def value(self) -> int:
        """:meth:`~tsstore.ShardedCounter.value`, awaited."""
        return (await self._run(self._live())).value

    async def rollup(self) -> CounterValue:
        """:meth:`~tsstore.ShardedCounter.rollup`, awaited."""
        return await self._run(self._rollup())

    async def read(self, *, live: bool = False) -> CounterValue:
        """:meth:`~tsstore.ShardedCounter.read`, awaited."""
        return await self._run(self._value(live))

    async def grow(self, *, shards: int) -> int:
        """:meth:`~tsstore.ShardedCounter.grow`, awaited."""
        return await self._run(self._grow(shards))


#: What a store's ``series_counter`` verb gives: the sync store a :class:`SyncCounter`, the
#: async store an :class:`AsyncCounter`.
SeriesCounter: TypeAlias = SyncCounter | AsyncCounter



def _lone(ask: DocAsk) -> bool:
    """Whether ``ask`` is not safe to send twice: an add without a receipt (a lone increment)."""
    return isinstance(ask, AddToDocs) and ask.receipt is None


def _cut(ask: DocAsk, exc: Exception) -> FaultError:
    return FaultError(
        f"{ask.what}: the call was cut off ({faults.describe(exc)}) and may or may not have landed; read the "
        "counter before adding again, or use increment_many, which is safe to retry"
    )


def _attempt(answer: DocumentAnswers, ask: DocAsk) -> Any:
    """One attempt at ``ask``; a fault of a lone add is not tried again (it may have landed)."""
    try:
        return answer(ask)
    except Exception as exc:
        if _lone(ask) and faults.kind_of(exc) == "fault":
            raise _cut(ask, exc) from exc
        raise


async def _aattempt(answer: AsyncDocumentAnswers, ask: DocAsk) -> Any:
    """:func:`_attempt`, awaited."""
    try:
        return await answer(ask)
    except Exception as exc:
        if _lone(ask) and faults.kind_of(exc) == "fault":
            raise _cut(ask, exc) from exc
        raise


def increment_counters(counters: Mapping[SyncCounter, int], *, receipt: str) -> None:
    """One commit holding one increment per counter (each on a random shard of its own).

    An increment is not idempotent, and a commit cut off before its answer may have landed.
    So the commit also creates the document ``receipt`` (a path that does not exist, e.g. a
    fresh random id), atomically: a commit sent again after a fault then either lands once or
    is refused because the receipt exists, which says that the first one landed. The
    increments are applied exactly once however many faults it rides out; the receipt is
    deleted afterwards. The counters share one database (their first one's answers are used).
    """
    if not any(counters.values()):  # (no counter to ask when there is nothing to add)
        return
    first = next(iter(counters))

    def adding() -> CounterRequest[None]:
        adds = {}
        for counter, n in counters.items():
            if n:
                shards = yield from counter._shard_count()
                adds[f"{counter._shards_path}/{random.randrange(shards)}"] = _check_amount(n)
        yield from _add_once(adds, receipt=receipt, what="adding written ticks to the series counters")

    first._run(adding())


def _add_once(adds: Mapping[str, int], *, receipt: str, what: str) -> CounterRequest[None]:
    """Add ``adds`` (shard path → amount) in one commit with ``receipt``, exactly once through
    faults (each ask tried again as a counter's are); then delete the receipt."""
    if not adds:
        return
    yield AddToDocs(tuple((path, COUNT_FIELD, n) for path, n in adds.items()), what=what, receipt=receipt)
    yield DeleteDoc(receipt, what=f"deleting the receipt {receipt!r}")  # (False above: an earlier try landed)


def _shard_count(doc: Doc, path: str) -> int:
    value = (doc.data or {}).get(SHARDS_FIELD)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise StateError(f"counter {path!r} has no valid '{SHARDS_FIELD}' field (found {value!r})")
    return value


def _stored(doc: Doc) -> CounterValue | None:
    data = doc.data or {}
    if TOTAL_FIELD not in data or AS_OF_FIELD not in data:
        return None
    return CounterValue(int(data[TOTAL_FIELD]), data[AS_OF_FIELD], live=False)
