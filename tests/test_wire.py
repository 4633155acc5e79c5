"""The fast wire paths (raw protobuf) against the client's public paths, and the document asks
in both database modes, on the emulator."""

from __future__ import annotations

import datetime as dt
import unittest.mock
from typing import Any

import pytest
from google.cloud import firestore
from google.cloud.firestore_v1 import GeoPoint
from google.cloud.firestore_v1.base_query import FieldFilter

from tests.conftest import unique_database_id
from tests.shared import MODES, answers_of, mode_client, put_doc, stored_doc, too_deep
from tsstore.asks import AddToDocs, CreateDoc, DeleteDoc, GetDoc, SumDocs, UpdateDoc
from tsstore.wire import batch_write, fast_path_problems, get_documents, stream_ticks

UTC = dt.timezone.utc

DOCS: list[tuple[str, dict[str, Any]]] = [
    (
        "every-type",
        {
            "timestamp": dt.datetime(2019, 1, 1, 13, 45, 23, 10_000, tzinfo=UTC),
            "s": "text é 漢字",
            "i": -(2**63),
            "big": 2**63 - 1,
            "f": 1.5,
            "nan": float("nan"),
            "b": True,
            "n": None,
            "bytes": b"\x00\xff",
            "geo": GeoPoint(1.5, -2.25),
            "list": [1, "a", None, {"k": 2}],
            "empty_list": [],
            "empty_map": {},
            "map": {"deep": {"er": {"t": dt.datetime(1960, 5, 6, 7, 8, 9, 123_456, tzinfo=UTC)}}},
        },
    ),
    ("plain", {"timestamp": dt.datetime(2020, 2, 29, tzinfo=UTC), "price": {"currency": "USD", "micros": 5}}),
]


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return bool(a == b) and (type(a) is type(b) or isinstance(a, dt.datetime))


def test_fast_and_public_batch_write_store_identical_documents(client: firestore.Client, collection_name: str) -> None:
    fast, public = client.collection(collection_name + "-fast"), client.collection(collection_name + "-public")
    writes = [(doc_id, data, True) for doc_id, data in DOCS]
    assert batch_write(fast, writes, fast=True) == [(0, ""), (0, "")]
    assert batch_write(public, writes, fast=False) == [(0, ""), (0, "")]
    for doc_id, data in DOCS:
        a = fast.document(doc_id).get().to_dict()
        b = public.document(doc_id).get().to_dict()
        assert same(a, b), (a, b)
        assert same(a, data)


def test_fast_and_public_decoding_agree(client: firestore.Client, collection_name: str) -> None:
    coll = client.collection(collection_name)
    batch_write(coll, [(doc_id, data, False) for doc_id, data in DOCS], fast=False)
    query = coll.where(filter=FieldFilter("timestamp", ">", dt.datetime(1900, 1, 1, tzinfo=UTC))).order_by("timestamp")
    fast = list(stream_ticks(query, timestamp_field="timestamp", read_time=None, fast=True))
    public = list(stream_ticks(query, timestamp_field="timestamp", read_time=None, fast=False))
    assert [t.id for t in fast] == [t.id for t in public] == ["every-type", "plain"]
    for a, b in zip(fast, public):
        assert a.timestamp == b.timestamp and type(a.timestamp) is dt.datetime
        assert same(a.data, b.data)


def test_fast_look_ups_agree_with_the_clients_snapshots_without_making_any(
    client: firestore.Client, collection_name: str
) -> None:
    # The sender reads back every landed document of a request a cut ended; the fast path
    # decodes the protobufs (the client's snapshots took most of a look-up's time).
    coll = client.collection(collection_name)
    batch_write(coll, [(doc_id, data, True) for doc_id, data in DOCS], fast=False)
    ids = [doc_id for doc_id, _ in DOCS] + ["missing"]
    public = get_documents(coll, ids, fast=False)
    with unittest.mock.patch.object(type(client), "get_all", side_effect=AssertionError("snapshots made")):
        fast = get_documents(coll, ids)
    assert sorted(fast) == sorted(public) == sorted(doc_id for doc_id, _ in DOCS)
    for doc_id in fast:
        assert same(fast[doc_id].data, public[doc_id].data) and same(fast[doc_id].data, dict(DOCS)[doc_id])
        assert fast[doc_id].create_time == public[doc_id].create_time


def test_batch_write_raises_when_firestore_refuses_the_request(client: firestore.Client, collection_name: str) -> None:
    import pytest
    from google.api_core import exceptions as gexc

    coll = client.collection(collection_name)
    with pytest.raises(gexc.InvalidArgument, match="invalid nested entity"):
        batch_write(coll, [("ok", {"a": 1}, True), ("too-deep", too_deep(), True)], fast=True)
    assert not coll.document("ok").get().exists  # the request was refused as a whole


def test_the_fast_paths_find_the_client_internals_they_use(client: firestore.Client) -> None:
    # The fast paths fall back to the public ones when a client upgrade moves these parts;
    # the fallback is silent for users (a warning in the log), so the suite says it aloud.
    assert fast_path_problems(client) == []


def test_creates_and_overwrites_agree_on_both_paths(client: firestore.Client, collection_name: str) -> None:
    for fast in (True, False):
        coll = client.collection(f"{collection_name}-{fast}")
        assert batch_write(coll, [("a", {"v": 1}, True), ("b", {"v": 2}, False)], fast=fast) == [(0, ""), (0, "")]
        statuses = batch_write(coll, [("a", {"v": 9}, True), ("b", {"v": 3}, False), ("c", None, False)], fast=fast)
        assert [code for code, _ in statuses] == [6, 0, 0]  # ALREADY_EXISTS for the create only
        stored = get_documents(coll, ["a", "b", "missing"])
        assert {k: v.data for k, v in stored.items()} == {"a": {"v": 1}, "b": {"v": 3}}
        assert all(v.create_time.tzinfo is not None for v in stored.values())


@pytest.mark.parametrize("mode", MODES)
def test_a_conditional_ask_is_refused_alike_in_both_modes(mode: str, request: pytest.FixtureRequest,
                                                         uses_emulator: None) -> None:  # fmt: skip
    """Each conditional document ask answers ``False`` (a create or an update ``None``) and
    writes nothing when its condition fails: a delete or update of a document written since it
    was read, a create of one that exists, an add whose receipt exists; and writes when it
    holds, a create or an update answering the write time a read then gives. (Datastore mode's emulator
    checks a mutation's update time only when the mutation asks to fail on a conflict: without
    that, the stale delete here went through.)"""
    client = mode_client(request, mode, unique_database_id(request.node.name))
    answer = answers_of(client)
    try:
        put_doc(client, "c/a", {"n": 1})
        first = answer(GetDoc("c/a", what="t")).update_time
        put_doc(client, "c/a", {"n": 2})
        now = answer(GetDoc("c/a", what="t")).update_time
        assert first < now
        assert answer(DeleteDoc("c/a", what="t", written=first)) is False
        assert answer(UpdateDoc("c/a", {"n": 3}, written=first, what="t")) is None
        assert answer(CreateDoc("c/a", {"n": 4}, what="t")) is None
        assert stored_doc(client, "c/a") == {"n": 2}
        assert answer(AddToDocs((("c/a", "n", 5), ("c/b", "n", 6)), what="t", receipt="r/1")) is True
        assert answer(AddToDocs((("c/a", "n", 5), ("c/b", "n", 6)), what="t", receipt="r/1")) is False
        assert stored_doc(client, "c/a") == {"n": 7} and stored_doc(client, "c/b") == {"n": 6}
        now = answer(GetDoc("c/a", what="t")).update_time
        written = answer(UpdateDoc("c/a", {"m": {"x": 1}}, written=now, what="t"))
        assert stored_doc(client, "c/a") == {"n": 7, "m": {"x": 1}}
        now = answer(GetDoc("c/a", what="t")).update_time
        assert written == now  # the write time answered is the one a read gives: the next precondition
        created = answer(CreateDoc("d/new", {"n": 1}, what="t"))
        assert created == answer(GetDoc("d/new", what="t")).update_time
        assert answer(UpdateDoc("d/new", {"n": 2}, written=created, what="t")) is not None
        assert answer(DeleteDoc("c/a", what="t", written=now)) is True
        assert stored_doc(client, "c/a") is None
        assert answer(UpdateDoc("c/a", {"n": 1}, written=now, what="t")) is None  # deleted since
        assert answer(SumDocs("c", "n", what="t"))[0] == 6
    finally:
        client.close()
