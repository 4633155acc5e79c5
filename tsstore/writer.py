"""Send prepared documents to Firestore in rate-limited, size-bounded bulk batches.

Built from google-cloud-firestore's own pieces: the non-atomic ``BatchWrite`` RPC (one
status per document; sent by :func:`tsstore.wire.batch_write`, which encodes the raw
protobuf itself or falls back to ``BulkWriteBatch``) and ``RateLimiter`` (the 500/50/5 ramp-up:
start at ``initial`` ops/s, +50 % every 5 minutes, never above the ceiling). It does not
use ``BulkWriter`` itself because ``BulkWriter.flush()`` waits on its batch futures
without looking at their exceptions: a ``BatchWrite`` call that fails as a whole (after
the GAPIC retries) drops its documents without calling either callback. Here every
document ends as written or as a named :class:`~tsstore.errors.WriteFailure`.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

from google.api_core import exceptions as gexc
from google.cloud.firestore_v1.base_collection import BaseCollectionReference
from google.cloud.firestore_v1.rate_limiter import RateLimiter

from .errors import WriteFailure
from .records import PreparedDoc
from .wire import batch_write

#: Documents per BatchWrite request. The request is also capped at MAX_BATCH_BYTES.
MAX_BATCH_DOCS = 500
#: Firestore refuses requests over 10 MiB; stay clear of it with room for the request's framing.
MAX_BATCH_BYTES = 9 * 1024 * 1024

#: gRPC status codes worth another attempt: the write may succeed later.
RETRYABLE_CODES = frozenset(
    {1, 2, 4, 8, 10, 13, 14}
)  # CANCELLED UNKNOWN DEADLINE RESOURCE_EXHAUSTED ABORTED INTERNAL UNAVAILABLE
_RETRYABLE_ERRORS = (
    gexc.ServiceUnavailable,
    gexc.DeadlineExceeded,
    gexc.ResourceExhausted,
    gexc.Aborted,
    gexc.InternalServerError,
    gexc.Unknown,
    gexc.Cancelled,
)


@dataclass
class _Outcome:
    written: list[PreparedDoc] = field(default_factory=list)
    failures: list[WriteFailure] = field(default_factory=list)


class BulkSender:
    """Writes batches on a small thread pool with a bounded number in flight. A document
    whose ``data`` is ``None`` is deleted instead of set.

    Two writes to the same document never travel concurrently: a later write of an id
    waits for the batch holding the earlier one, so the last record given wins, as it
    would with sequential writes.
    """

    def __init__(
        self,
        collection: BaseCollectionReference,
        *,
        initial_ops_per_second: int,
        max_ops_per_second: int,
        max_attempts: int,
        workers: int = 4,
        on_progress: Callable[[int], None] | None = None,
        on_written: Callable[[list[PreparedDoc]], None] | None = None,
        fast: bool = True,
    ) -> None:
        self._collection = collection
        self._fast = fast
        self._limiter = RateLimiter(initial_tokens=initial_ops_per_second, global_max_tokens=max_ops_per_second)
        self._limiter_lock = threading.Lock()
        # A batch may never need more tokens than the limiter can hold at its slowest.
        self._max_docs = max(1, min(MAX_BATCH_DOCS, initial_ops_per_second))
        self._max_attempts = max_attempts
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="tsstore-write")
        self._max_in_flight = workers * 2
        self._on_progress = on_progress
        self._on_written = on_written
        self._in_flight: dict[Future[_Outcome], frozenset[str]] = {}
        self.written = 0
        self.failures: list[WriteFailure] = []

    def send_all(self, docs: Iterable[PreparedDoc]) -> None:
        """Send every document (callbacks run in the calling thread); on an exception from
        ``docs`` (a bad record), first finish sending what came before it, then re-raise."""
        batch: list[PreparedDoc] = []
        ids: set[str] = set()
        size = 0
        try:
            for doc in docs:
                if doc.id in ids or len(batch) == self._max_docs or size + doc.size > MAX_BATCH_BYTES:
                    self._submit(batch)
                    batch, ids, size = [], set(), 0
                self._wait_for_id(doc.id)
                batch.append(doc)
                ids.add(doc.id)
                size += doc.size
        finally:
            if batch:
                self._submit(batch)
            self._drain(0)
            self._pool.shutdown()

    def _wait_for_id(self, doc_id: str) -> None:
        for future, ids in list(self._in_flight.items()):
            if doc_id in ids:
                self._finish(future)

    def _submit(self, batch: list[PreparedDoc]) -> None:
        self._drain(self._max_in_flight - 1)
        future = self._pool.submit(self._send, batch)
        self._in_flight[future] = frozenset(d.id for d in batch)

    def _drain(self, keep: int) -> None:
        """Collect finished batches until at most ``keep`` are in flight."""
        while len(self._in_flight) > keep:
            done, _ = wait(list(self._in_flight), return_when=FIRST_COMPLETED)
            for future in done:
                self._finish(future)

    def _finish(self, future: Future[_Outcome]) -> None:
        outcome = future.result()  # _send never raises for a Firestore error: it reports it
        del self._in_flight[future]
        self.written += len(outcome.written)
        self.failures.extend(outcome.failures)
        if outcome.written:
            if self._on_written is not None:
                self._on_written(outcome.written)
            if self._on_progress is not None:
                self._on_progress(len(outcome.written))

    def _take_tokens(self, count: int) -> None:
        while True:
            with self._limiter_lock:
                if self._limiter.take_tokens(count):
                    return
            time.sleep(0.01)

    def _send(self, docs: list[PreparedDoc]) -> _Outcome:
        outcome = _Outcome()
        pending = docs
        for attempt in range(1, self._max_attempts + 1):
            self._take_tokens(len(pending))
            retry: list[PreparedDoc] = []
            try:
                statuses = batch_write(self._collection, [(d.id, d.data) for d in pending], fast=self._fast)
            except _RETRYABLE_ERRORS as exc:
                retry = pending
                last_error = (exc.grpc_status_code.value[0] if exc.grpc_status_code else 2, str(exc))
            except gexc.GoogleAPICallError as exc:
                if isinstance(exc, gexc.InvalidArgument) and len(pending) > 1:
                    # Firestore refuses the whole request for one bad document (e.g. one
                    # nested too deeply): split the batch until the culprit stands alone,
                    # so only it is reported and every other document is written. Other
                    # refusals (permissions, a missing database) concern every document alike.
                    middle = len(pending) // 2
                    for part in (pending[:middle], pending[middle:]):
                        sub = self._send(part)
                        outcome.written += sub.written
                        outcome.failures.extend(sub.failures)
                    return outcome
                code = exc.grpc_status_code.value[0] if exc.grpc_status_code else 2
                outcome.failures.append(WriteFailure(pending[0].index, pending[0].id, code, exc.message))
                return outcome
            else:
                for doc, (code, message) in zip(pending, statuses, strict=True):
                    if code == 0:
                        outcome.written.append(doc)
                    elif code in RETRYABLE_CODES:
                        retry.append(doc)
                        last_error = (code, message)
                    else:
                        outcome.failures.append(WriteFailure(doc.index, doc.id, code, message))
            if not retry:
                return outcome
            pending = retry
            if attempt < self._max_attempts:
                # Exponential back-off with jitter, capped: contention clears in seconds.
                time.sleep(min(0.05 * 2**attempt, 10.0) * (0.5 + random.random()))
        code, message = last_error
        outcome.failures.extend(
            WriteFailure(d.index, d.id, code, f"{message} (gave up after {self._max_attempts} attempts)")
            for d in pending
        )
        return outcome
