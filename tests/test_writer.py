"""The bulk sender on the emulator: isolation of refused documents, ordering, progress."""

from __future__ import annotations

from typing import Any

from google.cloud import firestore

from tests.test_wire import too_deep
from tsstore.errors import WriteFailure
from tsstore.records import PreparedDoc
from tsstore.writer import BulkSender


def doc(index: int, doc_id: str, data: dict[str, Any]) -> PreparedDoc:
    return PreparedDoc(index, doc_id, data, 100)


def test_one_refused_document_is_isolated_and_named(client: firestore.Client, collection_name: str) -> None:
    coll = client.collection(collection_name)
    progress: list[int] = []
    sender = BulkSender(
        coll, initial_ops_per_second=10_000, max_ops_per_second=10_000, max_attempts=3, on_progress=progress.append
    )
    docs = [doc(i, f"d{i:03d}", {"i": i}) for i in range(300)]
    docs[137] = doc(137, "bad", too_deep())
    sender.send_all(docs)
    assert sender.written == 299 and sum(progress) == 299
    assert len(sender.failures) == 1
    failure = sender.failures[0]
    assert isinstance(failure, WriteFailure)
    assert (failure.index, failure.document_id, failure.code) == (137, "bad", 3)  # INVALID_ARGUMENT
    assert "nested" in failure.message
    stored = {d.id for d in coll.select([]).stream()}
    assert len(stored) == 299 and "bad" not in stored


def test_later_write_of_the_same_id_wins(client: firestore.Client, collection_name: str) -> None:
    coll = client.collection(collection_name)
    sender = BulkSender(coll, initial_ops_per_second=10_000, max_ops_per_second=10_000, max_attempts=3)
    # Many versions of a few ids, interleaved: the last of each must be what is stored.
    docs = [doc(i, f"k{i % 7}", {"version": i}) for i in range(2000)]
    sender.send_all(docs)
    assert sender.written == 2000 and not sender.failures
    for k in range(7):
        last = max(i for i in range(2000) if i % 7 == k)
        assert coll.document(f"k{k}").get().get("version") == last
