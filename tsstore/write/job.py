"""A bulk job: documents for the sender, run to the end, and what to report.

Writes, purges, reshards and roll-ups are all one :class:`Job`: the documents to send (as an
iterator: a prepared input, or ticks streamed from a read), a :class:`~tsstore.write.sender.
BulkSender` on the store's transport and ramp, and the job's result so far. Ctrl-C, faults
past the budget and refusals end a job with the error that says what was done.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from tsstore.errors import FaultError, Interrupted, WriteError
from tsstore.faults import describe, error_type
from tsstore.logs import DB_COLLECTION, DB_OPERATION, ERROR_TYPE, TICKS_REJECTED, TICKS_WRITTEN
from tsstore.spec import DuplicatePolicy, SeriesSpec
from tsstore.write.ops import Transport
from tsstore.write.prepare import PreparedDoc
from tsstore.write.sender import BulkSender, Pace, Written
from tsstore.write.window import Window

R = TypeVar("R")
log = logging.getLogger(__name__)


def bulk_sender(
    transport: Transport,
    spec: SeriesSpec,
    *,
    pace: Pace,
    batch_docs: int,
    max_attempts: int,
    on_duplicate: DuplicatePolicy = "keep",
    on_progress: Callable[[int], None] | None = None,
    on_written: Callable[[list[Written]], None] | None = None,
    on_status: Callable[[str | None], None] | None = None,
    created_since: float | None = None,
    window: Window | None = None,
) -> BulkSender:
    """The one recipe for a sender of ``spec``'s documents, for the stores' jobs and Beam's
    workers alike: ``transport``'s calls, paced by ``pace`` in batches of at most
    ``batch_docs``, each document tried ``max_attempts`` times, the shard field left out of
    content comparisons (a re-sent tick may land on another shard), as many batches in flight
    as ``window`` says; the rest as :class:`~tsstore.write.sender.BulkSender` takes them."""
    send, lookup = transport
    return BulkSender(send=send, lookup=lookup, pace=pace, max_batch_docs=batch_docs, max_attempts=max_attempts,
                      ignore_field=spec.shard_field, on_duplicate=on_duplicate, on_progress=on_progress,
                      on_written=on_written, on_status=on_status, created_since=created_since,
                      window=window)  # fmt: skip


@dataclass
class Job(Generic[R]):
    """Documents for a bulk sender, and what to report: :meth:`run` sends them all (in the
    caller's thread) and returns the result, or raises what a write or purge raises."""

    sender: BulkSender
    docs: Iterable[PreparedDoc]
    result: Callable[[], R]
    what: str
    tolerate: frozenset[int] = frozenset()  # refusal codes that are an answer, not a failure
    done: Callable[[], None] | None = None  # called once the sender has stopped (the guard's lease goes)
    collection: str = ""  # where it writes, for its log record

    def run(self) -> R:
        sender = self.sender
        try:
            self._send()
        except KeyboardInterrupt as stop:
            raise Interrupted(self.result(), f"{self.what} interrupted") from stop
        except FaultError as exc:  # reading what to write met faults past the budget
            raise FaultError(
                f"{self.what} stopped after {sender.written} documents were written: {exc}; "
                f"run the {self.what} again to finish it (what is done is not done twice)",
                returned=exc.returned,
                cursor=exc.cursor,
            ) from exc
        refused = sum(f.code not in self.tolerate for f in sender.failures)
        fields = {DB_COLLECTION: self.collection, DB_OPERATION: self.what, TICKS_WRITTEN: sender.written,
                  TICKS_REJECTED: refused}  # fmt: skip
        if refused:
            log.warning("%s of %r: %d document(s) written, %d refused", self.what, self.collection, sender.written,
                        refused, extra=fields)  # fmt: skip
            failures = sorted(sender.failures, key=lambda f: f.index)
            raise WriteError(failures, written=sender.written, result=self.result())
        log.info("%s of %r: %d document(s) written", self.what, self.collection, sender.written, extra=fields)
        return self.result()

    def _send(self) -> None:
        try:
            self.sender.send_all(self.docs)
        finally:
            if self.done is not None:
                try:
                    self.done()
                except Exception as exc:  # noqa: BLE001  (a lease left behind expires; the job's outcome comes first)
                    log.warning("%s finished but its writer lease was not dropped (%s)", self.what, describe(exc),
                                extra={DB_COLLECTION: self.collection, ERROR_TYPE: error_type(exc)})  # fmt: skip
