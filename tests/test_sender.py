"""The bulk sender: every document accounted for, on the emulator and with send functions
that fail in each way Firestore can (no emulator needed for those)."""

from __future__ import annotations

import datetime as dt
import functools
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from google.api_core import exceptions as gexc
from google.cloud import firestore

from tests.shared import too_deep
from tsstore.errors import WriteFailure
from tsstore.faults import Backoff
from tsstore.wire import batch_write, get_documents
from tsstore.write.identity import base_of
from tsstore.write.ops import Stored, WriteOp
from tsstore.write.prepare import PreparedDoc
from tsstore.write import sender as sender_module
from tsstore.write.sender import MAX_BATCH_BYTES, NAME_BYTES, BulkSender, Written, waiting_for
from tsstore.write.window import Window


def doc(index: int, doc_id: str, data: dict[str, Any]) -> PreparedDoc:
    return PreparedDoc(index, doc_id, data, 100)


class Unpaced:
    """A pace that never waits, and records what it heard."""

    throttled = None
    rate = float("inf")

    def __init__(self) -> None:
        self.answers: list[tuple[int, int]] = []

    def take(self, n: int) -> None:
        pass

    def answered(self, *, sent: int, refused: int) -> None:
        self.answers.append((sent, refused))


def sender_on(coll: Any, **options: Any) -> BulkSender:
    options.setdefault("max_attempts", 3)
    return BulkSender(
        send=functools.partial(batch_write, coll),
        lookup=functools.partial(get_documents, coll),
        pace=Unpaced(),
        **options,
    )


def test_one_refused_document_is_isolated_and_named(client: firestore.Client, collection_name: str) -> None:
    coll = client.collection(collection_name)
    progress: list[int] = []
    sender = sender_on(coll, on_progress=progress.append)
    docs = [doc(i, f"d{i:03d}", {"i": i}) for i in range(300)]
    docs[137] = doc(137, "bad", too_deep())
    sender.send_all(docs)
    assert sender.written == 299 and sum(progress) == 299 and sender.counts["created"] == 299
    assert len(sender.failures) == 1
    failure = sender.failures[0]
    assert isinstance(failure, WriteFailure)
    assert (failure.index, failure.document_id, failure.code) == (137, "bad", 3)  # INVALID_ARGUMENT
    assert "nested" in failure.message
    stored = {d.id for d in coll.select([]).stream()}
    assert len(stored) == 299 and "bad" not in stored


def test_documents_of_twenty_kilobytes_fill_requests_the_emulator_takes(
    client: firestore.Client, collection_name: str
) -> None:
    """250 documents of 20 KB (5 MB, over the emulator's 4 MiB a message) are written at once:
    before, one request of 500 such documents was refused for its size 15 times, then reported."""
    coll = client.collection(collection_name)
    sender = sender_on(coll, max_attempts=2)
    sender.send_all([PreparedDoc(i, f"d{i:03d}", {"i": i, "text": "x" * 20_000}, 20_010) for i in range(250)])
    assert sender.counts["created"] == 250 and not sender.failures
    assert coll.count().get()[0][0].value == 250


def test_later_write_of_the_same_id_wins_when_replacing(client: firestore.Client, collection_name: str) -> None:
    coll = client.collection(collection_name)
    sender = sender_on(coll, on_duplicate="replace")
    # Many versions of a few ids, interleaved: the last of each must be what is stored. (A
    # batch holds each id once, so every 7 documents wait for the batch before: 50 rounds.)
    n = 350
    docs = [doc(i, f"k{i % 7}", {"version": i}) for i in range(n)]
    sender.send_all(docs)
    assert sender.written == n and not sender.failures
    assert sender.counts == {"created": 7, "present": 0, "replaced": n - 7, "deleted": 0, "patched": 0}
    for k in range(7):
        last = max(i for i in range(n) if i % 7 == k)
        assert coll.document(f"k{k}").get().get("version") == last


def keyed(index: int, doc_id: str, data: dict[str, Any]) -> PreparedDoc:
    return PreparedDoc(index, doc_id, data, 100, base=("AAA", 1_000_000), at_slot=True)


@pytest.mark.parametrize("policy", ["keep", "replace", "error"])
def test_a_taken_slot_is_resolved_by_the_policy(client: firestore.Client, collection_name: str, policy: str) -> None:
    coll = client.collection(collection_name)
    coll.document("slot").set({"price": 1, "shard": "x"})
    done: list[Written] = []
    sender = sender_on(coll, on_duplicate=policy, ignore_field="shard", on_written=done.extend)
    sender.send_all([keyed(0, "slot", {"price": 2, "shard": "y"}), keyed(1, "same", {"price": 5, "shard": "x"})])
    coll.document("same").delete()
    stored = {d.id: d.to_dict() for d in coll.stream()}
    if policy == "keep":
        [moved] = [w for w in done if w.doc.index == 0]
        assert moved.outcome == "created" and moved.id != "slot"
        assert stored[moved.id] == {"price": 2, "shard": "y"} and stored["slot"] == {"price": 1, "shard": "x"}
    elif policy == "replace":
        [replaced] = [w for w in done if w.doc.index == 0]
        assert (replaced.outcome, replaced.id, replaced.previous) == ("replaced", "slot", {"price": 1, "shard": "x"})
        assert stored == {"slot": {"price": 2, "shard": "y"}}
    else:
        [failure] = sender.failures
        assert (failure.index, failure.document_id, failure.code) == (0, "slot", 6)
        assert "different content; on_duplicate='error'" in failure.message
        assert stored == {"slot": {"price": 1, "shard": "x"}}


def test_the_same_content_under_another_shard_is_already_present(
    client: firestore.Client, collection_name: str
) -> None:
    coll = client.collection(collection_name)
    coll.document("slot").set({"price": 1, "shard": "x"})
    sender = sender_on(coll, ignore_field="shard")
    sender.send_all([keyed(0, "slot", {"price": 1, "shard": "z"})])
    assert sender.counts["present"] == 1 and sender.written == 1 and not sender.failures
    assert coll.document("slot").get().to_dict() == {"price": 1, "shard": "x"}


def test_a_create_that_landed_before_its_request_failed_counts_as_created(
    client: firestore.Client, collection_name: str
) -> None:
    # The request reached Firestore and was applied, but the answer was lost (a deadline, a
    # dropped connection): the retry finds the documents, created after the first send.
    coll = client.collection(collection_name)
    calls = 0

    def applied_then_lost(writes: list[WriteOp]) -> list[tuple[int, str]]:
        nonlocal calls
        calls += 1
        statuses = batch_write(coll, writes)
        if calls == 1:
            raise gexc.ServiceUnavailable("connection reset after the commit")
        return statuses

    sender = BulkSender(
        send=applied_then_lost, lookup=functools.partial(get_documents, coll), pace=Unpaced(), max_attempts=5
    )
    sender.send_all([keyed(i, f"d{i}", {"i": i}) for i in range(20)])
    assert calls == 2 and not sender.failures
    assert sender.counts["created"] == 20 and sender.counts["present"] == 0
    # The same documents sent again in a later call are already present, not new.
    again = sender_on(coll)
    again.send_all([keyed(i, f"d{i}", {"i": i}) for i in range(20)])
    assert again.counts["present"] == 20 and again.counts["created"] == 0


# ---------------------------------------------------------------- no emulator: send functions

NON_RETRYABLE = [
    gexc.PermissionDenied,
    gexc.NotFound,
    gexc.FailedPrecondition,
    gexc.Unauthenticated,
    gexc.OutOfRange,
    gexc.MethodNotImplemented,
    gexc.DataLoss,
    gexc.AlreadyExists,
    gexc.InvalidArgument,
]


@pytest.mark.parametrize("error", NON_RETRYABLE, ids=lambda e: e.__name__)
def test_a_whole_batch_refusal_names_every_document(error: type[gexc.GoogleAPICallError]) -> None:
    sent: list[int] = []

    def refuse(writes: list[WriteOp]) -> list[tuple[int, str]]:
        sent.append(len(writes))
        raise error("refused as a whole")

    sender = BulkSender(send=refuse, lookup=lambda ids: {}, pace=Unpaced(), max_attempts=3, max_batch_docs=7)
    docs = [doc(i, f"id{i}", {"i": i}) for i in range(23)]
    sender.send_all(docs)
    assert sender.written == 0
    failures = sorted(sender.failures, key=lambda f: f.index)
    assert [(f.index, f.document_id) for f in failures] == [(d.index, d.id) for d in docs]
    code = error("x").grpc_status_code
    assert code is not None and {f.code for f in failures} == {code.value[0]}
    assert all("refused as a whole" in f.message for f in failures)
    # InvalidArgument is split in halves to find the culprit (here: every document refuses).
    assert sum(sent) >= 23 if error is gexc.InvalidArgument else sorted(sent) == [2, 7, 7, 7]  # batches run at once


class Ticking:
    """A clock that moves one second each time it is read: a fault budget of n seconds is then
    n faults, however long a loaded machine keeps a worker thread waiting."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def short_pauses(monkeypatch: pytest.MonkeyPatch, *, clock: Any = time.monotonic) -> None:
    """The sender's pauses after connection faults start at 1 ms (0.1 s in tsstore) and stay
    under 10 ms, read on ``clock``: what a test of faults checks is which requests went out,
    never how long it slept."""
    monkeypatch.setattr(sender_module, "Backoff", functools.partial(Backoff, first=0.001, cap=0.01, clock=clock))


def test_connection_faults_are_retried_for_the_budget_then_each_document_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    statuses: list[str | None] = []
    attempts = 0
    status_seen = threading.Event()

    def show(status: str | None) -> None:
        statuses.append(status)
        if status:
            status_seen.set()

    def unavailable(writes: list[WriteOp]) -> list[tuple[int, str]]:
        nonlocal attempts
        attempts += 1
        if attempts == 3:
            # The main thread polls the status every half second; the pauses may sum to less.
            # Hold one attempt until the status was shown (5 s at most: the assertion below
            # then fails) so the check does not hang on timing.
            status_seen.wait(5)
        raise gexc.ServiceUnavailable("Stream removed")

    pace = Unpaced()
    short_pauses(monkeypatch, clock=Ticking())  # a budget of 5 s on it: the fifth fault's pause passes it
    sender = BulkSender(
        send=unavailable, lookup=lambda ids: {}, pace=pace, max_attempts=2, on_status=show, fault_budget=5
    )
    sender.send_all([doc(i, f"id{i}", {"i": i}) for i in range(5)])
    assert attempts > 2  # faults are not attempts: max_attempts=2 did not stop them
    assert [(f.index, f.code) for f in sorted(sender.failures, key=lambda f: f.index)] == [(i, 14) for i in range(5)]
    assert all("s of connection faults" in f.message for f in sender.failures)
    assert pace.answers == []  # no answer came back: the pace heard nothing
    shown = [s for s in statuses if s]
    assert shown and all(s.startswith("retrying after connection faults (UNAVAILABLE: Stream removed)") for s in shown)
    assert statuses[-1] is None  # cleared once the sender stopped waiting


@pytest.mark.parametrize(
    ("waiting", "status"),
    [
        ([], []),
        (["retrying after connection faults (UNAVAILABLE: Connection refused)"] * 3,
         ["retrying after connection faults (UNAVAILABLE: Connection refused) (x3)"]),
        (["retrying after connection faults (UNAVAILABLE: Connection refused)",
          "retrying writes refused with RESOURCE_EXHAUSTED (attempt 2 of 15)",
          "retrying after connection faults (UNAVAILABLE: Connection refused)"],
         ["retrying after connection faults (UNAVAILABLE: Connection refused) (x2)",
          "retrying writes refused with RESOURCE_EXHAUSTED (attempt 2 of 15)"]),
        (["retrying after connection faults (DEADLINE_EXCEEDED: Deadline Exceeded)"],
         ["retrying after connection faults (DEADLINE_EXCEEDED: Deadline Exceeded)"]),
    ],
)  # fmt: skip
def test_a_fault_several_batches_wait_on_is_said_once_with_their_count(waiting: list[str], status: list[str]) -> None:
    # The progress line, with a dead store: the same fault three times, each with
    # its own count of attempts in a row.
    assert waiting_for(waiting) == status


def test_a_fault_between_answers_changes_nothing_but_the_time_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0

    def flaky(writes: list[WriteOp]) -> list[tuple[int, str]]:
        nonlocal calls
        calls += 1
        if calls % 2:
            raise gexc.ServiceUnavailable("Socket closed")
        return [(0, "")] * len(writes)

    pace = Unpaced()
    short_pauses(monkeypatch)
    sender = BulkSender(send=flaky, lookup=lambda ids: {}, pace=pace, max_attempts=1, max_batch_docs=10,
                        window=Window(least=1, most=1))  # fmt: skip
    sender.send_all([doc(i, f"id{i}", {"i": i}) for i in range(30)])
    assert sender.counts["created"] == 30 and not sender.failures and calls == 6
    assert pace.answers == [(10, 0)] * 3


class Counted(Unpaced):
    """A pace that never waits, and counts the writes taken."""

    def __init__(self) -> None:
        super().__init__()
        self.taken = 0

    def take(self, n: int) -> None:
        self.taken += n


def test_a_request_longer_than_the_connection_stays_up_goes_in_halves_and_later_batches_smaller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Cuts every request of more than 200 writes before its answer: a batch cut twice in a row
    is sent as two halves (split again the same way), the batches made after it are no larger
    than what answered (growing back by a quarter each answer), and a request sent again after
    a cut takes no writes from the pace a second time."""
    sizes: list[int] = []
    third_filled = threading.Event()  # the fourth batch's first document drawn: three were filled

    def cut_long(writes: list[WriteOp]) -> list[tuple[int, str]]:
        # the first request waits for the batches filled behind it, however the threads are scheduled
        assert sizes or third_filled.wait(30), "the sender filled no third batch while the first was sending"
        sizes.append(len(writes))
        if len(writes) > 200:
            raise gexc.ServiceUnavailable("Socket closed")
        return [(0, "")] * len(writes)

    def docs() -> Iterator[PreparedDoc]:
        for i in range(2000):
            if i == 1500:
                third_filled.set()
            yield doc(i, f"id{i}", {"i": i})

    pace = Counted()
    short_pauses(monkeypatch)
    sender = BulkSender(send=cut_long, lookup=lambda ids: {}, pace=pace, max_attempts=1, fault_budget=30,
                        window=Window(least=1, most=1))  # fmt: skip
    sender.send_all(docs())
    assert sender.counts["created"] == 2000 and not sender.failures
    assert sizes[:6] == [500, 500, 250, 250, 125, 125]
    # the batches filled while the first was cut (one sending, one ready behind it) were made
    # at 500; every later one at what answered
    assert sizes.count(500) == 6 and max(sizes[30:]) < 250  # each of the first three took 10 requests
    assert pace.taken == 2000


def test_a_request_too_large_for_the_server_goes_in_halves_at_once() -> None:
    """The emulator refuses a request over 4 MiB RESOURCE_EXHAUSTED ("gRPC message exceeds
    maximum size"): not an overload, since the same request fails again (500 documents of 19 KB
    were tried 15 times over four minutes, then reported unwritten). It is sent in halves, each
    split again until it passes, and nothing is tried twice at one size."""
    sizes: list[int] = []

    def refuse_large(writes: list[WriteOp]) -> list[tuple[int, str]]:
        sizes.append(len(writes))
        if len(writes) > 100:
            raise gexc.ResourceExhausted(f"gRPC message exceeds maximum size 4194304: {len(writes) * 19_000}")
        return [(0, "")] * len(writes)

    sender = BulkSender(send=refuse_large, lookup=lambda ids: {}, pace=Unpaced(), max_attempts=15,
                        window=Window(least=1, most=1))  # fmt: skip
    sender.send_all([doc(i, f"id{i}", {"i": i}) for i in range(500)])
    assert sender.counts["created"] == 500 and not sender.failures
    assert sizes[:3] == [500, 250, 125] and sorted(set(sizes)) == [62, 63, 125, 250, 500]
    assert sizes.count(500) == 1 and sizes.count(250) == 2  # each size tried once


def test_a_batch_holds_at_most_the_bytes_a_request_may_carry() -> None:
    """Documents of 100 KB: a request carries at most MAX_BATCH_BYTES of them (with each one's
    name), under the emulator's 4 MiB, however many documents a batch may hold."""
    sizes: list[int] = []

    def send(writes: list[WriteOp]) -> list[tuple[int, str]]:
        sizes.append(len(writes))
        return [(0, "")] * len(writes)

    sender = BulkSender(send=send, lookup=lambda ids: {}, pace=Unpaced(), max_attempts=1, window=Window(least=1, most=1))
    sender.send_all([PreparedDoc(i, f"id{i}", {"i": i}, 100_000) for i in range(200)])
    assert sender.counts["created"] == 200
    assert max(sizes) == MAX_BATCH_BYTES // (100_000 + NAME_BYTES) and max(sizes) * 100_000 < 4 * 1024 * 1024


def test_per_document_statuses_are_retried_or_named() -> None:
    seen: dict[str, int] = {}

    def mixed(writes: list[WriteOp]) -> list[tuple[int, str]]:
        out = []
        for doc_id, _, _ in writes:
            seen[doc_id] = seen.get(doc_id, 0) + 1
            if doc_id == "denied":
                out.append((7, "no"))
            elif doc_id == "flaky" and seen[doc_id] < 3:
                out.append((10, "aborted"))
            else:
                out.append((0, ""))
        return out

    sender = BulkSender(send=mixed, lookup=lambda ids: {}, pace=Unpaced(), max_attempts=5)
    sender.send_all([doc(0, "ok", {}), doc(1, "denied", {}), doc(2, "flaky", {})])
    assert sender.counts["created"] == 2 and seen["flaky"] == 3
    assert [(f.index, f.document_id, f.code) for f in sender.failures] == [(1, "denied", 7)]


def test_a_conflict_with_identical_content_is_already_present_without_emulator() -> None:
    data = {"p": 1, "shard": "a"}

    def exists(writes: list[WriteOp]) -> list[tuple[int, str]]:
        return [(6, "exists")] * len(writes)

    def lookup(ids: list[str]) -> dict[str, Stored]:
        return {i: Stored({"p": 1, "shard": "b"}, dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)) for i in ids}

    sender = BulkSender(send=exists, lookup=lookup, pace=Unpaced(), max_attempts=2, ignore_field="shard")
    sender.send_all([PreparedDoc(0, "x", data, 10, base=base_of(["A"], dt.datetime.now(dt.timezone.utc)))])
    assert sender.counts == {"created": 0, "present": 1, "replaced": 0, "deleted": 0, "patched": 0}
    assert not sender.failures


def test_the_pace_hears_overload_refusals_and_not_other_failures() -> None:
    answers = iter([[(8, "quota")], [(14, "unavailable")], [(4, "deadline")], [(0, "")]])
    pace = Unpaced()
    sender = BulkSender(send=lambda writes: next(answers), lookup=lambda ids: {}, pace=pace, max_attempts=5)
    sender.send_all([doc(0, "x", {})])
    assert sender.counts["created"] == 1
    # RESOURCE_EXHAUSTED and an answered UNAVAILABLE are refusals; DEADLINE_EXCEEDED is retried only.
    assert pace.answers == [(1, 1), (1, 1), (1, 0), (1, 0)]


def test_a_request_refused_as_a_whole_for_overload_is_a_refusal_of_each_write() -> None:
    calls = 0

    def exhausted(writes: list[WriteOp]) -> list[tuple[int, str]]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise gexc.ResourceExhausted("Quota exceeded")
        return [(0, "")] * len(writes)

    pace = Unpaced()
    sender = BulkSender(send=exhausted, lookup=lambda ids: {}, pace=pace, max_attempts=2, max_batch_docs=4)
    sender.send_all([doc(i, f"id{i}", {}) for i in range(4)])
    assert sender.counts["created"] == 4 and pace.answers == [(4, 4), (4, 0)]


def test_created_since_counts_what_an_earlier_attempt_of_this_run_stored_as_created() -> None:
    run_started = dt.datetime(2026, 1, 1, 12, tzinfo=dt.timezone.utc)
    made = {"old": run_started - dt.timedelta(seconds=1), "new": run_started + dt.timedelta(seconds=5)}

    def exists(writes: list[WriteOp]) -> list[tuple[int, str]]:
        return [(6, "exists")] * len(writes)

    def lookup(ids: list[str]) -> dict[str, Stored]:
        return {i: Stored({"p": 1}, made[i]) for i in ids}

    counts = []
    for since in (None, run_started.timestamp()):
        sender = BulkSender(send=exists, lookup=lookup, pace=Unpaced(), max_attempts=2, created_since=since)
        sender.send_all([doc(0, "old", {"p": 1}), doc(1, "new", {"p": 1})])
        counts.append((sender.counts["created"], sender.counts["present"]))
    assert counts == [(0, 2), (1, 1)]  # without it both were there already; with it "new" is this run's


def test_ctrl_c_stops_taking_documents_and_waits_a_bounded_time() -> None:
    release = threading.Event()

    def slow(writes: list[WriteOp]) -> list[tuple[int, str]]:
        release.wait(0.05)
        return [(0, "")] * len(writes)

    produced = 0

    def docs() -> Iterator[PreparedDoc]:
        nonlocal produced
        for i in range(10_000):
            if i == 1_234:
                raise KeyboardInterrupt
            produced += 1
            yield doc(i, f"id{i}", {"i": i})

    sender = BulkSender(
        send=slow, lookup=lambda ids: {}, pace=Unpaced(), max_attempts=3, max_batch_docs=100, stop_timeout=5
    )
    with pytest.raises(KeyboardInterrupt):
        sender.send_all(docs())
    assert produced == 1_234
    # Every document taken is written or counted as unsettled; nothing else was sent.
    assert sender.written + sender.unsettled == produced
    assert sender.written > 0


def test_ctrl_c_with_a_request_that_never_answers_returns_after_the_stop_timeout() -> None:
    stuck, entered, answered = threading.Event(), threading.Event(), threading.Event()

    def hangs(writes: list[WriteOp]) -> list[tuple[int, str]]:
        entered.set()
        stuck.wait(30)
        answered.set()
        return [(0, "")] * len(writes)

    def docs() -> Iterator[PreparedDoc]:
        for i in range(50):
            yield doc(i, f"id{i}", {"i": i})
        assert entered.wait(30)  # a request is out, and hangs
        raise KeyboardInterrupt

    sender = BulkSender(
        send=hangs, lookup=lambda ids: {}, pace=Unpaced(), max_attempts=3, max_batch_docs=10, stop_timeout=0.1
    )
    with pytest.raises(KeyboardInterrupt):
        sender.send_all(docs())
    # It returned while its requests were still unanswered: it gave up waiting for them.
    assert entered.is_set() and not answered.is_set()
    assert sender.written == 0 and sender.unsettled == 50
    stuck.set()
