"""What a failed Firestore call means, and how long to keep trying it.

Two kinds of trouble look alike on the wire and call for opposite answers:

* A **fault**: a connection cut or reset, a call that timed out, ``UNAVAILABLE`` raised for
  a whole request (the client saw no answer from the server, or the server could not take
  the call). Nothing says the server is busy: the one call is tried again after a short,
  jittered, growing pause, and the rate every other call runs at is left alone. A laptop
  on Wi-Fi or a Cloud Run instance meets such blips every day; treating each as overload
  once made a writer fall from 100 000 to 49 ops/s in 50 s of cuts.
* An **overload**: the server answered and refused the work (``RESOURCE_EXHAUSTED``, or
  ``ABORTED`` contention, or ``UNAVAILABLE`` as the status of one write inside an answered
  request). Writers then lower their rate (:mod:`tsstore.write.throttle`); reads, which
  have no rate, pause and try again like after a fault.

:class:`Backoff` is the pause rule both kinds use for the call that failed: exponential,
jittered, capped at :data:`MAX_PAUSE_SECONDS`, for at most :data:`FAULT_BUDGET_SECONDS` of
trouble in a row (the client's own default deadline is of that order). Progress starts a new
streak. :func:`call` and :func:`acall` run one unary call (a document read) under it, sync
and async; :func:`call_split` and :func:`acall_split` one over shard values (a count, an
aggregation), asked in halves when it keeps failing whole (:class:`PartedCall` decides); the
read engine's chunk cursors and the bulk sender use :class:`Backoff` directly. Nothing here
knows what is being read or written.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, Literal, TypeVar

from google.api_core import exceptions as gexc

from tsstore import telemetry
from tsstore.errors import EmulatorError, FaultError
from tsstore.logs import ERROR_TYPE, FAULTS_RETRIED, error_type

__all__ = [
    "FAULT_BUDGET_SECONDS",
    "FIRST_PAUSE_SECONDS",
    "MAX_PAUSE_SECONDS",
    "Backoff",
    "Kind",
    "PartedCall",
    "SPLIT_AFTER",
    "acall",
    "acall_split",
    "call",
    "call_split",
    "describe",
    "error_type",
    "gave_up",
    "kind_of",
    "mode_name",
    "pause_or_raise",
    "refusing_mode",
    "retrying",
    "status_kind",
]

#: The first pause after a failure; each further failure in a row doubles it (with jitter).
FIRST_PAUSE_SECONDS = 0.1
#: No pause is longer than this: a cut connection is back within a second or two, and a longer
#: pause only delays the call that would have succeeded.
MAX_PAUSE_SECONDS = 2.0
#: How long a streak of failures of one call (no progress in between) is retried before it is
#: reported: of the order of the client's own default deadline for a call.
FAULT_BUDGET_SECONDS = 60.0
#: A query over several shard values that fails this many times in a row before it answers
#: is split in two halves, each its own query (and split again the same way, down to one
#: value): a query that takes longer than the connection stays up never answers whole, and
#: its halves may (on the emulator, which scans the collection per value, a 30-value chunk
#: takes seconds before its first result and one value a twentieth of that). The answers are
#: the same, at one more query's minimum read per split.
SPLIT_AFTER = 2

log = logging.getLogger(__name__)

Kind = Literal["fault", "overload"]

#: Raised for a whole call: the connection or the server could not take it. Retried, never
#: taken as the server's refusal of the work itself.
_FAULTS: tuple[type[Exception], ...] = (
    gexc.ServiceUnavailable,
    gexc.DeadlineExceeded,
    gexc.InternalServerError,
    gexc.Unknown,
    gexc.Cancelled,
    gexc.RetryError,  # the client's own retry gave up (calls made with its default retry)
    ConnectionError,
    TimeoutError,
)
#: Raised for a whole call: the server refused the work as too much.
_OVERLOADS: tuple[type[Exception], ...] = (gexc.ResourceExhausted, gexc.Aborted)

#: Status codes of single writes in an answered BatchWrite: the server refused them as too
#: much (RESOURCE_EXHAUSTED, ABORTED, UNAVAILABLE) or could not finish them (CANCELLED,
#: UNKNOWN, DEADLINE_EXCEEDED, INTERNAL).
_STATUS_OVERLOADS = frozenset({8, 10, 14})
_STATUS_FAULTS = frozenset({1, 2, 4, 13})

#: How an emulator refuses every call of a client of the mode it does not run (``Database mode
#: not set to Firestore Mode. If using the gCloud CLI, please specify the --database-mode
#: flag.``): the mode named is the client's. Trying again cannot help.
_MODE_REFUSAL = re.compile(r"Database mode not set to (Firestore|Datastore) Mode")

T = TypeVar("T")
P = TypeVar("P")


def kind_of(exc: BaseException) -> Kind | None:
    """Whether an exception raised by a call is a fault, an overload, or neither (``None``:
    trying again would fail the same way, as a request too large does)."""
    if too_large(exc):
        return None
    if isinstance(exc, _OVERLOADS):
        return "overload"
    if isinstance(exc, _FAULTS) or early_read_time(exc):
        return "fault"
    return None


def too_large(exc: BaseException) -> bool:
    """Whether the server refused a request for its size: the emulator's gRPC server takes
    messages of up to 4 MiB and answers a larger one RESOURCE_EXHAUSTED ("gRPC message exceeds
    maximum size 4194304: ..."), which is not an overload: the same request fails again."""
    return isinstance(exc, gexc.ResourceExhausted) and "exceeds maximum size" in str(exc)


def early_read_time(exc: BaseException) -> bool:
    """Whether Firestore refused a read at a time it has not reached yet: a snapshot time
    known from earlier answers (:mod:`tsstore.clock`) that this call outran; the same call
    after a pause is read."""
    return isinstance(exc, gexc.InvalidArgument) and "cannot be in the future" in str(exc)


def status_kind(code: int) -> Kind | None:
    """The same for the status code of one write inside an answered BatchWrite."""
    if code in _STATUS_OVERLOADS:
        return "overload"
    if code in _STATUS_FAULTS:
        return "fault"
    return None


def refusing_mode(text: str) -> Literal["native", "datastore"] | None:
    """The mode an emulator runs when ``text`` (an error's message, or an answer) is its
    refusal of a client of the other mode; ``None`` when it is not one."""
    found = _MODE_REFUSAL.search(text)
    if found is None:
        return None
    return "datastore" if found.group(1) == "Firestore" else "native"


def mode_name(mode: str) -> str:
    """``Native mode`` or ``Datastore mode``."""
    return "Datastore mode" if mode == "datastore" else "Native mode"


def describe(exc: BaseException) -> str:
    """A short name for what went wrong: ``UNAVAILABLE: Stream removed``."""
    if isinstance(exc, gexc.GoogleAPICallError):
        code = error_type(exc)
        first = (exc.message or "").strip().splitlines()
        return f"{code}: {first[0]}" if first else code
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


class Backoff:
    """Pauses between the attempts of one call that keeps failing (no I/O: the caller sleeps).

    :meth:`pause` after each failure returns how long to wait before the next attempt,
    ``min(MAX_PAUSE_SECONDS, first * 2 ** (n - 1))`` times a jitter factor in [0.5, 1.5),
    capped again, or ``None`` once the streak has lasted ``budget`` seconds (the caller
    then reports the failure). :meth:`progress` (the call got somewhere: a document came
    back) starts a new streak. ``clock`` and ``rand`` are injectable for tests.
    """

    def __init__(
        self,
        *,
        budget: float = FAULT_BUDGET_SECONDS,
        first: float = FIRST_PAUSE_SECONDS,
        cap: float = MAX_PAUSE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.budget, self._first, self._cap = budget, first, cap
        self._clock, self._rand = clock, rand
        self.failures = 0  # in the current streak
        self._since: float | None = None

    def pause(self) -> float | None:
        """The pause before the next attempt, or ``None``: the budget is spent."""
        now = self._clock()
        if self._since is None:
            self._since = now
        self.failures += 1
        delay: float = min(self._cap, self._first * 2 ** min(self.failures - 1, 30)) * (0.5 + self._rand())
        delay = min(self._cap, delay)
        if now + delay - self._since > self.budget:
            return None
        return delay

    def progress(self) -> None:
        """The call got somewhere: the next failure starts a new streak."""
        self.failures, self._since = 0, None

    @property
    def elapsed(self) -> float:
        """Seconds since the current streak's first failure (0 without one)."""
        return 0.0 if self._since is None else self._clock() - self._since


class PartedCall(Generic[P, T]):
    """The attempts of one call over ``parts`` (shard values), without I/O: :meth:`next` is what
    to ask next, :meth:`answered` and :meth:`failed` take what happened. Faults and overloads
    are tried again within the backoff's budget; after :data:`SPLIT_AFTER` failures in a row
    the part is asked as two halves instead (each split again the same way), unless the call
    is not ``divisible`` (its halves would not answer at one snapshot, or it has no parts).
    :attr:`answers` holds one answer per part that answered, in the order of ``parts``."""

    def __init__(self, parts: Sequence[P], *, what: str, divisible: bool, backoff: Backoff | None) -> None:
        self._todo: list[Sequence[P]] = [parts]
        self._what, self._divisible = what, divisible
        self._backoff = backoff or Backoff()
        self._failed = 0  # attempts at the next part, in a row
        self.answers: list[T] = []

    def next(self) -> Sequence[P] | None:
        """The part to ask next (``None``: every part answered)."""
        return self._todo[0] if self._todo else None

    def answered(self, answer: T) -> None:
        self._todo.pop(0)
        self.answers.append(answer)
        self._failed = 0
        self._backoff.progress()

    def failed(self, exc: Exception) -> float:
        """The pause before the next attempt (see :func:`pause_or_raise`)."""
        pause = pause_or_raise(exc, self._backoff, self._what)
        self._failed += 1
        part = self._todo[0]
        if self._divisible and self._failed >= SPLIT_AFTER and len(part) > 1:
            half = (len(part) + 1) // 2
            self._todo[0:1] = [part[:half], part[half:]]
            self._failed = 0
        return pause


def call_split(
    fn: Callable[[Sequence[P]], T],
    parts: Sequence[P],
    *,
    what: str,
    divisible: bool = True,
    backoff: Backoff | None = None,
    sleep: Callable[[float], object] = time.sleep,
) -> list[T]:
    """``fn(parts)``, tried again after faults and overloads, or asked in parts when it keeps
    failing (:class:`PartedCall`): the answers, one per part asked. ``fn`` should make its
    call without the client's own retry (``retry=None``), so the pauses are these."""
    run: PartedCall[P, T] = PartedCall(parts, what=what, divisible=divisible, backoff=backoff)
    while (part := run.next()) is not None:
        try:
            run.answered(fn(part))
        except Exception as exc:
            sleep(run.failed(exc))
    return run.answers


async def acall_split(
    fn: Callable[[Sequence[P]], Awaitable[T]], parts: Sequence[P], *, what: str, divisible: bool = True
) -> list[T]:
    """:func:`call_split` for a coroutine function."""
    run: PartedCall[P, T] = PartedCall(parts, what=what, divisible=divisible, backoff=None)
    while (part := run.next()) is not None:
        try:
            run.answered(await fn(part))
        except Exception as exc:
            await asyncio.sleep(run.failed(exc))
    return run.answers


def call(
    fn: Callable[[], T], *, what: str, backoff: Backoff | None = None, sleep: Callable[[float], object] = time.sleep
) -> T:
    """``fn()``, tried again after faults and overloads within the backoff's budget; then a
    :class:`~tsstore.errors.FaultError` naming ``what`` was being done."""
    [answer] = call_split(lambda _: fn(), (), what=what, divisible=False, backoff=backoff, sleep=sleep)
    return answer


async def acall(fn: Callable[[], Awaitable[T]], *, what: str) -> T:
    """:func:`call` for a coroutine function."""
    [answer] = await acall_split(lambda _: fn(), (), what=what, divisible=False)
    return answer


def pause_or_raise(exc: Exception, backoff: Backoff, what: str, *, done: str = "") -> float:
    """The pause before trying again after ``exc``; raises ``exc`` itself when trying again
    cannot help, and :func:`gave_up`'s error when the budget is spent."""
    if kind_of(exc) is None:
        served = refusing_mode(str(exc)) if isinstance(exc, gexc.InvalidArgument) else None
        if served is not None:
            raise EmulatorError(other_mode(served)) from exc
        raise exc
    pause = backoff.pause()
    if pause is None:
        raise gave_up(exc, backoff, what, done=done) from exc
    retrying(what, exc, pause, backoff)
    telemetry.retried(what, exc, pause)
    return pause


def retrying(what: str, exc: BaseException, pause: float, backoff: Backoff) -> None:
    """The warning that ``what`` met ``exc`` and is tried again after ``pause`` seconds."""
    log.warning("%s: %s; trying again in %.1f s (failure %d in a row)", what, describe(exc), pause, backoff.failures,
                extra={ERROR_TYPE: error_type(exc), FAULTS_RETRIED: 1})  # fmt: skip


def other_mode(served: str) -> str:
    """What to do with a client of the other mode than its emulator's (which runs ``served``)."""
    client, other = (
        ("a firestore.Client (Native mode)", "a datastore.Client (pip install 'tsstore[datastore]')")
        if served == "datastore"
        else ("a datastore.Client (Datastore mode)", "a firestore.Client")
    )
    mine = "native" if served == "datastore" else "datastore"
    return (
        f"the emulator runs Firestore in {mode_name(served)}, and the store's client is {client}: give the "
        f"store {other} on that emulator, or this client on an emulator in {mode_name(mine)}"
    )


def gave_up(exc: BaseException, backoff: Backoff, what: str, *, done: str = "") -> FaultError:
    """The error for a call that kept failing for the backoff's whole budget."""
    return FaultError(
        f"{what} failed: every attempt for {backoff.elapsed:.0f} s failed before Firestore answered "
        f"({backoff.failures} attempts; last: {describe(exc)}){done}. Check the network (a connection "
        "that drops more often than a query takes cannot finish it) and the database, then run it again"
    )
