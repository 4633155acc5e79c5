"""Send prepared documents to Firestore in rate-limited, size-bounded bulk batches.

Each batch is one non-atomic ``BatchWrite`` request (one status per document), sent by a
*send* function (normally :func:`tsstore.wire.batch_write`) at the pace a :class:`Pace`
allows (normally the 500/50/5 ramp of :class:`tsstore.write.ramp.RampLimiter`, which also
hears every answer and throttles while Firestore refuses work). Both are given to the
sender, so its bookkeeping is tested without Firestore.

Failures are told apart (:mod:`tsstore.faults`): a request that fails without an answer (a
cut connection, a timeout) is sent again after a jittered pause, for up to
:data:`~tsstore.faults.FAULT_BUDGET_SECONDS` of faults in a row, and the pace is not told
(nor takes its writes again); the pause ends early at another request's answer (the
connection is back), and a batch cut :data:`~tsstore.faults.SPLIT_AFTER` times in a row is
sent in halves, the batches made after it no larger until answers let them grow back (a
request that takes longer than the connection stays up never answers whole). Writes the
server refuses as overload are retried (at most ``max_attempts`` times) and the pace hears
of them.

It does not use the client's ``BulkWriter``: ``BulkWriter.flush()`` waits on its batch
futures without looking at their exceptions, so a ``BatchWrite`` call that fails as a
whole drops its documents without calling either callback. Here every document ends
written (created, already present, replaced or deleted), named as a
:class:`~tsstore.errors.WriteFailure`, or, after Ctrl-C, counted as not sent.

Ticks are written as *creates*: Firestore refuses a create whose document exists
(ALREADY_EXISTS), and the stored content then decides what the tick is (see
:mod:`tsstore.write.identity`): the same tick already present, or another tick in its slot, which
the duplicate policy keeps beside it, replaces, or refuses. So a re-sent tick is never
counted as new, and a distinct tick never silently replaces another.
"""

from __future__ import annotations

import collections
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import grpc
from google.api_core import exceptions as gexc

from tsstore import telemetry
from tsstore.errors import WriteFailure
from tsstore.faults import (
    FAULT_BUDGET_SECONDS,
    SPLIT_AFTER,
    Backoff,
    describe,
    error_type,
    kind_of,
    status_kind,
    too_large,
)
from tsstore.logs import ERROR_TYPE, FAULTS_RETRIED
from tsstore.spec import DuplicatePolicy
from tsstore.write.identity import content_digest, fingerprint, id_from_digest
from tsstore.write.ops import ALREADY_EXISTS, Erase, Patch, Stored, WriteOp, WriteStatus
from tsstore.write.prepare import PreparedDoc
from tsstore.write.window import Window

log = logging.getLogger(__name__)

#: Documents per BatchWrite request. The request is also capped at MAX_BATCH_BYTES.
MAX_BATCH_DOCS = 500
#: Firestore refuses requests over 10 MiB, and the emulator's gRPC server messages over 4 MiB
#: (RESOURCE_EXHAUSTED; 500 documents of 19 KB were refused as 9 454 481 bytes): a request holds
#: at most this many bytes of documents (their storage size and :data:`NAME_BYTES` each), clear of
#: both. A request refused for its size all the same is sent in halves.
MAX_BATCH_BYTES = 4 * 1024 * 1024 - 256 * 1024
#: What a document's name and its write's framing add to its storage size in a request, at most
#: for names of the usual length (``projects/<p>/databases/<d>/documents/<collection>/<id>``).
NAME_BYTES = 256

_CODE_NAMES: dict[int, str] = {code.value[0]: code.name for code in grpc.StatusCode}

#: How far a client's clock may run ahead of Firestore's. A create whose request failed as
#: a whole may still have landed; if its retry then finds the same content, created at or
#: after the first send (less this margin), the document is counted as created by us.
CLOCK_SKEW_SECONDS = 1.0

#: How often one document may find its slot changed under it before it is reported.
_MAX_RESOLUTIONS = 4

Outcome = Literal["created", "present", "replaced", "deleted", "patched"]
Send = Callable[[list[WriteOp]], list[WriteStatus]]
Lookup = Callable[[list[str]], Mapping[str, Stored]]


class Pace(Protocol):
    """How fast a sender may go (:class:`~tsstore.write.ramp.RampLimiter` is one): ``take``
    blocks until ``n`` writes may be sent; ``answered`` hears how many of a request's writes
    the server refused as overload; ``rate`` is the writes a second it allows now (what the
    sender keeps enough batches in flight for); ``throttled`` is ``(rate, ramp)`` while
    refusals hold the rate below the ramp."""

    def take(self, n: int) -> None: ...

    def answered(self, *, sent: int, refused: int) -> None: ...

    @property
    def rate(self) -> float: ...

    @property
    def throttled(self) -> tuple[float, float] | None: ...


@dataclass(frozen=True, slots=True)
class Written:
    """What became of one document: its final id (its content id when the tick went beside
    another), the outcome, and for a replace the content it replaced."""

    doc: PreparedDoc
    id: str
    outcome: Outcome
    previous: dict[str, Any] | None = None


@dataclass(slots=True)
class _Item:
    doc: PreparedDoc
    id: str
    op: Literal["create", "set", "delete", "patch"]
    sent_at: float | None = None  # wall-clock time of the first send
    ambiguous: bool = False  # a request holding it failed as a whole: it may have landed
    unanswered: bool = False  # the last request holding it failed without an answer (a fault)
    resolutions: int = 0
    previous: dict[str, Any] | None = None


@dataclass
class _Outcome:
    written: list[Written] = field(default_factory=list)
    failures: list[WriteFailure] = field(default_factory=list)
    not_sent: int = 0  # given up because the sender was stopping

    def add(self, other: _Outcome) -> None:
        self.written += other.written
        self.failures += other.failures
        self.not_sent += other.not_sent


class _Turns:
    """At most ``limit`` batches sending at once (a stop lets each waiting one through, to
    count itself not sent): as many more as send wait ready behind them, so a finished one
    is followed at once."""

    def __init__(self, limit: int, stopping: threading.Event) -> None:
        self._limit, self._stopping = limit, stopping
        self._sending = 0
        self._turn = threading.Condition()

    def allow(self, limit: int) -> int:
        """Let ``limit`` send at once from now on; returns it."""
        with self._turn:
            self._limit = limit
            self._turn.notify_all()
        return limit

    def __enter__(self) -> None:
        with self._turn:
            while self._sending >= self._limit and not self._stopping.is_set():
                self._turn.wait(0.2)
            self._sending += 1

    def __exit__(self, *exc: object) -> None:
        with self._turn:
            self._sending -= 1
            self._turn.notify()


class _Cuts:
    """What a sender's batches learn of cuts together: the requests answered so far (a pause
    after a fault ends at the next answer: the connection is back, and a pause grown through a
    streak of cuts would only hold the batch back while others write), and the ``size`` to
    make batches at (at most half a batch split after cuts, grown back by a quarter with each
    request answered whole at it, up to ``most``)."""

    def __init__(self, most: int, stopping: threading.Event) -> None:
        self.answers, self.size, self._most, self._stopping = 0, most, most, stopping
        self._answer = threading.Condition()

    def answered(self, docs: int) -> None:
        with self._answer:
            self.answers += 1
            if docs >= self.size:
                self.size = min(self._most, self.size + max(1, self.size // 4))
            self._answer.notify_all()

    def split(self, docs: int) -> int:
        """Where a request of ``docs`` writes is halved; the batches made from now on no larger."""
        middle = (docs + 1) // 2
        self.size = min(self.size, middle)
        return middle

    def wait(self, seconds: float, *, since: int | None) -> None:
        """Sleep ``seconds``, or until a stop, or (``since`` given) an answer after the ``since``-th."""
        if since is None:
            self._stopping.wait(seconds)
            return
        with self._answer:
            self._answer.wait_for(lambda: self.answers > since or self._stopping.is_set(), seconds)

    def stop(self) -> None:
        self._stopping.set()
        with self._answer:
            self._answer.notify_all()


def waiting_for(reasons: Iterable[str]) -> list[str]:
    """What the worker threads wait for, each reason once, with how many wait for it when more
    than one do (``retrying after connection faults (UNAVAILABLE: ...) (x3)``): a store that is
    gone has every batch in flight retry the same fault, and the status line said it once per
    batch."""
    return [f"{why} (x{n})" if n > 1 else why for why, n in sorted(collections.Counter(reasons).items())]


def code_name(code: int) -> str:
    return _CODE_NAMES.get(code, str(code))


class BulkSender:
    """Writes batches on a thread pool, as many in flight as ``window`` says carry the pace's
    rate across the network's round trip (:mod:`tsstore.write.window`; memory bounded). A
    document whose ``data`` is ``None`` is deleted instead of created.

    Two writes to the same document never travel concurrently: a later write of an id
    waits for the batch holding the earlier one, so the last record given wins, as it
    would with sequential writes.

    Callbacks run in the calling thread: ``on_written`` with each finished batch's
    :class:`Written` documents, ``on_progress`` with their number, ``on_status`` with a
    line saying what the sender is waiting for (a fault's retry, writes refused as
    overload, the throttled rate) or ``None`` once it is not waiting.

    ``created_since`` (a wall-clock time, seconds since the epoch) says that every document
    found with the same content and created at or after it was created by this run: a run
    made of parts that may be retried whole (a Beam bundle) counts what its failed attempt
    stored as created, not as already present. Without it only a document whose own request
    failed as a whole, and was created after that request, counts so. No clock-skew margin
    applies to it: with one, a run started within the margin after another would count the
    other's last documents as its own.

    ``fault_budget`` is how many seconds of faults in a row (no answer) one batch rides out
    before its documents are reported as not written.
    """

    def __init__(
        self,
        *,
        send: Send,
        lookup: Lookup,
        pace: Pace,
        max_batch_docs: int = MAX_BATCH_DOCS,
        max_attempts: int,
        on_duplicate: DuplicatePolicy = "keep",
        ignore_field: str | None = None,
        window: Window | None = None,
        stop_timeout: float = 10.0,
        on_progress: Callable[[int], None] | None = None,
        on_written: Callable[[list[Written]], None] | None = None,
        on_status: Callable[[str | None], None] | None = None,
        created_since: float | None = None,
        fault_budget: float = FAULT_BUDGET_SECONDS,
    ) -> None:
        self._send_fn, self._lookup, self._pace = send, lookup, pace  # the three calls it makes
        self._max_docs = max(1, min(MAX_BATCH_DOCS, max_batch_docs))
        self._max_attempts, self._fault_budget, self._stop_timeout = max_attempts, fault_budget, stop_timeout
        self._policy, self._ignore, self._created_since = on_duplicate, ignore_field, created_since
        self._window = window if window is not None else Window()
        self._pool = ThreadPoolExecutor(max_workers=self._window.most, thread_name_prefix="tsstore-write")
        self._opened = self._window.least  # batches allowed in flight so far: one more per answer (a slow start)
        self._on_progress, self._on_written, self._on_status = on_progress, on_written, on_status
        self._in_flight: dict[Future[_Outcome], frozenset[str]] = {}  # batch -> its ids
        self._held: list[PreparedDoc] = []  # the batch being filled
        self._stopping = threading.Event()
        self._cuts = _Cuts(self._max_docs, self._stopping)
        self._turns = _Turns(self._opened, self._stopping)
        self._waiting: dict[int, str] = {}  # worker thread -> what it waits for
        self._waiting_lock = threading.Lock()
        self._shown_status: str | None = None
        self.written = 0
        self.counts: dict[Outcome, int] = {"created": 0, "present": 0, "replaced": 0, "deleted": 0, "patched": 0}
        self.failures: list[WriteFailure] = []
        #: Documents not confirmed when a stop (Ctrl-C) ended the wait: never sent, or sent
        #: with no answer yet. A resumed run sends them again (and finds those that landed).
        self.unsettled = 0

    def send_all(self, docs: Iterable[PreparedDoc]) -> None:
        """Send every document. On an exception from ``docs`` (a bad record), first finish
        sending what came before it, then re-raise. On Ctrl-C (KeyboardInterrupt), stop
        taking documents at once, wait at most ``stop_timeout`` seconds for the batches in
        flight, count the rest as unsettled, and re-raise."""
        ids: set[str] = set()
        size = 0
        try:
            try:
                for doc in docs:
                    if doc.id in ids or len(self._held) >= self._cuts.size or size + doc.size > MAX_BATCH_BYTES:
                        self._submit_held()
                        ids, size = set(), 0
                    self._wait_for_id(doc.id)
                    self._held.append(doc)
                    ids.add(doc.id)
                    size += doc.size + NAME_BYTES
            except Exception:
                self._submit_held()  # a bad record: what came before it is still written
                self._drain(0)
                raise
            self._submit_held()
            self._drain(0)
        except KeyboardInterrupt:
            self._stop()
            raise
        finally:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._show_status(None)

    # ------------------------------------------------------------------ main thread

    def _stop(self) -> None:
        self._cuts.stop()  # sets the stopping event
        deadline = time.monotonic() + self._stop_timeout
        while self._in_flight and time.monotonic() < deadline:
            done, _ = wait(list(self._in_flight), timeout=deadline - time.monotonic(), return_when=FIRST_COMPLETED)
            for future in done:
                self._finish(future)
        self.unsettled += len(self._held) + sum(len(ids) for ids in self._in_flight.values())
        for future in list(self._in_flight):
            future.cancel()

    def _wait_for_id(self, doc_id: str) -> None:
        for future, ids in list(self._in_flight.items()):
            if doc_id in ids:
                while not future.done():
                    wait([future], timeout=0.5)
                    self._poll_status()
                self._finish(future)

    def _submit_held(self) -> None:
        if not self._held:
            return
        size = sum(doc.size for doc in self._held)
        window = self._window.size(rate=self._pace.rate, batch_docs=len(self._held), batch_bytes=size)
        self._drain(2 * self._turns.allow(min(window, self._opened)) - 1)
        batch, self._held = self._held, []
        self._in_flight[self._pool.submit(telemetry.in_context(self._send), batch)] = frozenset(d.id for d in batch)

    def _drain(self, keep: int) -> None:
        """Collect finished batches until at most ``keep`` are in flight."""
        while len(self._in_flight) > keep:
            done, _ = wait(list(self._in_flight), timeout=0.5, return_when=FIRST_COMPLETED)
            for future in done:
                self._finish(future)
            self._poll_status()

    def _finish(self, future: Future[_Outcome]) -> None:
        if future not in self._in_flight:
            return
        outcome = future.result()  # _send never raises for a Firestore error: it reports it
        del self._in_flight[future]
        self._opened = min(self._opened + 1, self._window.most)
        self.written += len(outcome.written)
        for item in outcome.written:
            self.counts[item.outcome] += 1
        self.failures.extend(outcome.failures)
        self.unsettled += outcome.not_sent
        if outcome.written:
            if self._on_written is not None:
                self._on_written(outcome.written)
            if self._on_progress is not None:
                self._on_progress(len(outcome.written))

    def _poll_status(self) -> None:
        with self._waiting_lock:
            reasons = waiting_for(self._waiting.values())
        throttled = self._pace.throttled
        if throttled is not None:
            rate, ramp = throttled
            reasons.append(f"throttled to {rate:,.0f} writes/s (ramp {ramp:,.0f}) while Firestore refuses writes")
        self._show_status("; ".join(reasons) if reasons else None)

    def _show_status(self, text: str | None) -> None:
        if text != self._shown_status:
            self._shown_status = text
            if self._on_status is not None:
                self._on_status(text)

    # ------------------------------------------------------------------ worker threads

    def _send(self, docs: list[PreparedDoc]) -> _Outcome:
        items = [_Item(d, d.id, _op(d)) for d in docs]
        try:
            with self._turns:
                return self._send_items(items)
        finally:
            with self._waiting_lock:
                self._waiting.pop(threading.get_ident(), None)

    def _send_items(self, items: list[_Item], faults: Backoff | None = None) -> _Outcome:
        outcome = _Outcome()
        pending = items
        attempt = 0  # rounds in which the server refused or failed some writes
        if faults is None:  # requests that failed without an answer, in a row (halves share it)
            faults = Backoff(budget=self._fault_budget)
        unanswered = 0  # requests of these pending writes that failed without an answer, in a row
        last_error = (2, "")
        while pending:
            if self._stopping.is_set():
                outcome.not_sent += len(pending)
                break
            # A request that had no answer is sent again on the tokens it took: a cut costs no pace.
            self._pace.take(sum(not i.unanswered for i in pending))
            now = time.time()
            for item in pending:
                if item.sent_at is None:
                    item.sent_at = now
            retry: list[_Item] = []
            conflicts: list[_Item] = []
            try:
                telemetry.committed()
                with telemetry.child("commit", {"tsstore.writes": len(pending)}):
                    statuses = self._send_fn([(i.id, i.doc.data, i.op == "create") for i in pending])
            except gexc.GoogleAPICallError as exc:
                kind = kind_of(exc)
                if kind is None:
                    return self._refused(pending, exc, outcome)
                for item in pending:
                    item.ambiguous = True  # it may have landed: a retry's lookup decides
                    item.unanswered = kind == "fault"
                if kind == "fault":  # no answer: the same request again, the pace untouched
                    pause = faults.pause()
                    if pause is None:
                        why = f"{exc.message} (gave up after {faults.elapsed:.0f} s of connection faults)"
                        outcome.failures += [_failure(i, _code(exc), why) for i in pending]
                        return outcome
                    telemetry.retried("a batch write", exc, pause)
                    self._wait(f"retrying after connection faults ({describe(exc)})", pause, since=self._cuts.answers,
                               retried=len(pending), error=error_type(exc))  # fmt: skip
                    unanswered += 1
                    if unanswered >= SPLIT_AFTER and len(pending) > 1:
                        # Longer than the connection stays up: its halves may answer (see _Cuts).
                        middle = self._cuts.split(len(pending))
                        outcome.add(self._send_items(pending[:middle], faults))
                        pending, unanswered = pending[middle:], 0
                    continue
                self._pace.answered(sent=len(pending), refused=len(pending))
                retry, last_error = pending, (_code(exc), exc.message)
            else:
                faults.progress()
                unanswered = 0
                self._cuts.answered(len(pending))
                refused, retried = _sort_answered(pending, statuses, outcome, conflicts, retry)
                self._pace.answered(sent=len(pending), refused=refused)
                last_error = retried or last_error
            again = self._resolve(conflicts, outcome, retry) if conflicts else []
            if retry:
                attempt += 1
                retry = self._again_or_failed(retry, attempt, last_error, outcome)
            pending = again + retry
        return outcome

    def _again_or_failed(
        self, retry: list[_Item], attempt: int, last_error: tuple[int, str], outcome: _Outcome
    ) -> list[_Item]:
        """The writes refused for now to send again, after a back-off (none: they failed, the
        attempts spent)."""
        code, message = last_error
        if attempt >= self._max_attempts:
            why = f"{message} (gave up after {self._max_attempts} attempts)"
            outcome.failures += [_failure(i, code, why) for i in retry]
            return []
        # Exponential back-off with jitter, capped: contention clears in seconds.
        delay = min(0.05 * 2**attempt, 10.0) * (0.5 + random.random())
        attempts = f"attempt {attempt + 1} of {self._max_attempts}"
        self._wait(f"retrying writes refused with {code_name(code)} ({attempts})", delay, retried=len(retry),
                   error=code_name(code))  # fmt: skip
        return retry

    def _refused(self, pending: list[_Item], exc: gexc.GoogleAPICallError, outcome: _Outcome) -> _Outcome:
        """A request refused as a whole, for a reason a retry would meet again."""
        if (isinstance(exc, gexc.InvalidArgument) or too_large(exc)) and len(pending) > 1:
            # Firestore refuses the whole request for one bad document (e.g. one nested too
            # deeply), or for its size: split the batch until the culprit stands alone (or the
            # halves are small enough), so only it is reported and every other document is written.
            middle = len(pending) // 2
            for part in (pending[:middle], pending[middle:]):
                outcome.add(self._send_items(part))
            return outcome
        # Other refusals (permissions, a missing database…) concern every document alike.
        outcome.failures += [_failure(i, _code(exc), exc.message) for i in pending]
        return outcome

    def _wait(self, why: str, seconds: float, *, retried: int, error: str, since: int | None = None) -> None:
        """Sleep in a worker thread (see :meth:`_Cuts.wait`) before ``retried`` writes are sent
        again, saying why in the status line and the log."""
        log.warning("%s: %d write(s) sent again in %.1f s", why, retried, seconds,
                    extra={ERROR_TYPE: error, FAULTS_RETRIED: retried})  # fmt: skip
        with self._waiting_lock:
            self._waiting[threading.get_ident()] = why
        self._cuts.wait(seconds, since=since)

    def _resolve(self, conflicts: list[_Item], outcome: _Outcome, retry: list[_Item]) -> list[_Item]:
        """Decide what each create refused with ALREADY_EXISTS is, from the stored content;
        return the items to send again (content slots, replaces); add lookup failures to ``retry``."""
        try:
            stored = self._lookup([i.id for i in conflicts])
        except gexc.GoogleAPICallError as exc:
            if kind_of(exc) is None:
                raise
            retry.extend(conflicts)
            return []
        again = []
        for item in conflicts:
            item.resolutions += 1
            if item.resolutions > _MAX_RESOLUTIONS:
                why = "the document kept changing while tsstore wrote it; not written"
                outcome.failures.append(_failure(item, ALREADY_EXISTS, why))
            elif _settle(item, stored.get(item.id), self._policy, self._ignore, self._created_since, outcome):
                again.append(item)
        return again


@dataclass(frozen=True)
class Verdict:
    """What a create whose id holds ``found`` is (:func:`settle`): ``create`` it (nothing is
    there), ``written`` (the same content: ``outcome`` created or present), ``moved`` to its
    content id ``to`` (another tick holds the slot), ``replace`` it, or ``failed`` (``why``)."""

    kind: Literal["create", "written", "moved", "replace", "failed"]
    outcome: Outcome = "created"
    to: str = ""
    why: str = ""


def settle(
    doc: PreparedDoc,
    doc_id: str,
    found: Stored | None,
    *,
    policy: DuplicatePolicy,
    ignore: str | None,
    landed: Callable[[float], bool],
) -> Verdict:
    """What creating ``doc`` at ``doc_id`` is, given what is stored there (``found``): the
    same content (created, when ``landed`` says its creation time, seconds since the epoch,
    is this job's, or present before it), another tick in the slot (``keep``: to its content
    id), one to overwrite (``replace``), or a failure."""
    if found is None:
        return Verdict("create")
    assert isinstance(doc.data, dict)  # only creates are settled
    mine = doc.content or fingerprint(doc.data, ignore=ignore)
    if fingerprint(found.data, ignore=ignore) == mine:
        return Verdict("written", "created" if landed(found.create_time.timestamp()) else "present")
    if policy == "keep" and doc.base is not None and doc_id == doc.id and doc.at_slot:
        return Verdict("moved", to=id_from_digest(content_digest(doc.base, mine, doc.repeat)))
    if policy == "replace":
        return Verdict("replace")
    why = (
        "another tick with the same key and time is stored there with different content; "
        "on_duplicate='error' refuses to replace it ('keep' stores both, 'replace' overwrites)"
        if policy == "error"
        else "its document id is taken by a document with other content"
    )
    return Verdict("failed", why=why)


def _settle(
    item: _Item,
    found: Stored | None,
    policy: DuplicatePolicy,
    ignore: str | None,
    created_since: float | None,
    outcome: _Outcome,
) -> bool:
    """Apply :func:`settle` to a create refused with ALREADY_EXISTS; true when the item is to
    be sent again (deleted since, moved to its content id, or a replace)."""

    def landed(created: float) -> bool:
        mine = item.ambiguous and item.sent_at is not None and created >= item.sent_at - CLOCK_SKEW_SECONDS
        return mine or (created_since is not None and created >= created_since)

    verdict = settle(item.doc, item.id, found, policy=policy, ignore=ignore, landed=landed)
    if verdict.kind == "written":
        outcome.written.append(Written(item.doc, item.id, verdict.outcome))
    elif verdict.kind == "moved":
        item.id = verdict.to
        item.sent_at, item.ambiguous = None, False  # a new document: its own first send
    elif verdict.kind == "replace":
        assert found is not None
        item.op, item.previous = "set", found.data
    elif verdict.kind == "failed":
        outcome.failures.append(_failure(item, ALREADY_EXISTS, verdict.why))
    return verdict.kind in ("create", "moved", "replace")


def _op(doc: PreparedDoc) -> Literal["create", "delete", "patch"]:
    if doc.data is None or isinstance(doc.data, Erase):
        return "delete"
    return "patch" if isinstance(doc.data, Patch) else "create"


def _code(exc: gexc.GoogleAPICallError) -> int:
    return exc.grpc_status_code.value[0] if exc.grpc_status_code else 2


def _failure(item: _Item, code: int, message: str) -> WriteFailure:
    return WriteFailure(item.doc.index, item.id, code, message)


def _sort_answered(
    pending: list[_Item], statuses: list[tuple[int, str]], outcome: _Outcome, conflicts: list[_Item], retry: list[_Item]
) -> tuple[int, tuple[int, str] | None]:
    """Sort an answered request's writes by their statuses: written, a create that met a
    stored document (``conflicts``), refused for now (``retry``), or failed. How many were
    refused for overload, and the last status retried, if any."""
    refused, last_error = 0, None
    for item, (code, message) in zip(pending, statuses, strict=True):
        item.unanswered = False
        if code == 0:
            outcome.written.append(_written(item))
        elif code == ALREADY_EXISTS and item.op == "create":
            conflicts.append(item)
        elif (kind := status_kind(code)) is not None:
            retry.append(item)
            last_error = (code, message)
            refused += kind == "overload"
        else:
            outcome.failures.append(_failure(item, code, message))
    return refused, last_error


def _written(item: _Item) -> Written:
    outcome: Outcome = {"create": "created", "set": "replaced", "delete": "deleted", "patch": "patched"}[item.op]  # type: ignore[assignment]
    return Written(item.doc, item.id, outcome, item.previous)
