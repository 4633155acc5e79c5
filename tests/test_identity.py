"""The identity rule without Firestore: slot and content ids, repeat numbers, content fingerprints."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json

import pytest
from google.cloud.firestore_v1 import GeoPoint

from tsstore import RecordError, SeriesSpec
from tsstore.write.identity import Repeats, base_of, content_digest, fingerprint, id_from_digest, slot_digest
from tsstore.write.prepare import prepare_records

UTC = dt.timezone.utc
T = dt.datetime(2019, 1, 2, 9, 30, 0, 123_000, tzinfo=UTC)
SPEC = SeriesSpec("t", key_fields=["symbol"])
STABLE = "235a6250e9e59277"  # pinned: content ids must not change between versions


def test_the_slot_id_is_the_id_earlier_versions_gave() -> None:
    # Collections written before content ids existed keep their ids: a re-run of an old
    # input finds its ticks instead of storing them again.
    micros = 1_546_421_400_123_000
    legacy = hashlib.sha256(json.dumps(["AAA", micros], separators=(",", ":")).encode()).digest()
    assert slot_digest(base_of(["AAA"], T)) == legacy
    assert id_from_digest(slot_digest(base_of(["AAA"], T))) == base64.urlsafe_b64encode(legacy[:15]).decode()


def test_content_ids_differ_by_content_and_repeat() -> None:
    base = base_of(["AAA"], T)
    ids = {id_from_digest(slot_digest(base))}
    ids |= {id_from_digest(content_digest(base, fingerprint({"p": p}), k)) for p in range(20) for k in range(5)}
    assert len(ids) == 101
    assert all(len(i) == 20 and "/" not in i for i in ids)


def test_repeats_count_earlier_rows_with_the_same_base_and_content() -> None:
    rep = Repeats()
    a, b = slot_digest(base_of(["A"], T)), slot_digest(base_of(["B"], T))
    x, y = fingerprint({"p": 1}), fingerprint({"p": 2})
    seen = [
        rep.observe(a, x),
        rep.observe(b, x),
        rep.observe(a, y),
        rep.observe(a, x),
        rep.observe(a, y),
        rep.observe(a, x),
    ]
    assert seen == [(False, 0), (False, 0), (True, 0), (True, 1), (True, 1), (True, 2)]


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ({"x": 1, "y": "s"}, {"y": "s", "x": 1}, True),  # map order does not matter
        ({"x": 1}, {"x": 1.0}, False),  # Firestore keeps int and double apart
        ({"x": float("nan")}, {"x": float("nan")}, True),  # NaN is the same stored value
        ({"x": True}, {"x": 1}, False),
        ({"t": T}, {"t": T.astimezone(dt.timezone(dt.timedelta(hours=9)))}, True),  # one instant
        ({"g": GeoPoint(1, 2)}, {"g": GeoPoint(1.0, 2.0)}, True),
        ({"m": {"a": [1, "b", None]}}, {"m": {"a": [1, "b", None]}}, True),
        ({"m": {"a": [1, "b"]}}, {"m": {"a": ["b", 1]}}, False),
        ({"x": None}, {}, False),  # a null field is not a missing one
        ({"b": b"\x00"}, {"b": "\x00"}, False),
    ],
)
def test_fingerprints_equal_exactly_when_stored_values_do(a: dict, b: dict, same: bool) -> None:
    assert (fingerprint(a) == fingerprint(b)) is same


def test_fingerprint_ignores_the_shard_field_even_nested() -> None:
    assert fingerprint({"p": 1, "shard": "x"}, ignore="shard") == fingerprint({"p": 1, "shard": "y"}, ignore="shard")
    assert fingerprint({"m": {"s": "x", "v": 1}}, ignore="m.s") == fingerprint({"m": {"s": "y", "v": 1}}, ignore="m.s")
    assert fingerprint({"m": {"s": "x", "v": 1}}, ignore="m.s") != fingerprint({"m": {"s": "x", "v": 2}}, ignore="m.s")
    assert fingerprint({"p": 1}, ignore="shard") == fingerprint({"p": 1})


def test_fingerprint_is_stable_across_processes() -> None:
    # Content ids are made from it: a change here would store every re-sent tick twice.
    t = dt.datetime(2020, 1, 1, tzinfo=UTC)
    assert fingerprint({"s": "é", "i": 1, "f": 1.5, "t": t, "m": {"b": b"\x01"}}).hex()[:16] == STABLE


def tick(symbol: str, price: int, when: dt.datetime = T) -> dict:
    return {"symbol": symbol, "price": price, "timestamp": when}


def test_prepared_ids_take_the_slot_once_and_repeat_on_a_rerun() -> None:
    rows = [tick("A", 1), tick("A", 2), tick("B", 1), tick("A", 1)]  # the last repeats the first whole
    docs = list(prepare_records(SPEC, rows))
    # Rows 0 and 1 both aim at A's slot; the writer moves the second to its content id.
    assert len({d.id for d in docs}) == 3
    assert [d.id for d in prepare_records(SPEC, rows)] == [d.id for d in docs]  # same input, same ids
    assert [(d.repeat, d.at_slot) for d in docs] == [(0, True), (0, True), (0, True), (1, False)]
    # Row 1 shares row 0's slot (it moves to its content id only if the slot holds other content).
    assert docs[0].id == docs[1].id and docs[1].content != docs[0].content
    # Replace: key and time are the identity, so every "A" row targets one document.
    replace = [d.id for d in prepare_records(SPEC, rows, on_duplicate="replace")]
    assert replace[0] == replace[1] == replace[3] == docs[0].id and replace[2] == docs[2].id


def test_a_row_gets_the_same_ids_whatever_input_it_is_in() -> None:
    # The second of two same-millisecond trades, sent again alone or in another order, has
    # the same slot and the same content id, so the writer finds it wherever it went.
    t0, t1 = tick("A", 1), tick("A", 2)
    [first_alone] = prepare_records(SPEC, [t1])
    reordered = list(prepare_records(SPEC, [t1, t0]))
    for doc in (first_alone, *reordered):
        assert doc.at_slot and doc.id == id_from_digest(slot_digest(doc.base))  # type: ignore[arg-type]
    assert first_alone.content == reordered[0].content == fingerprint(t1 | {"shard": "ignored"}, ignore="shard")


def test_error_policy_names_a_repeated_key_and_time() -> None:
    rejected: list[RecordError] = []
    docs = list(
        prepare_records(
            SPEC, [tick("A", 1), tick("A", 2), tick("B", 1)], on_duplicate="error", on_reject=rejected.append
        )
    )
    assert [d.index for d in docs] == [0, 2]
    assert [e.index for e in rejected] == [1]
    assert "same key ['A'] and time 2019-01-02T09:30:00.123000+00:00" in rejected[0].reason
    with pytest.raises(ValueError, match="on_duplicate='merge' is not allowed; use one of keep, replace, error"):
        list(prepare_records(SPEC, [], on_duplicate="merge"))  # type: ignore[arg-type]


def test_skipped_records_are_counted_but_not_yielded() -> None:
    rows = [tick("A", 1), tick("A", 1), tick("A", 1)]
    all_ids = [d.id for d in prepare_records(SPEC, rows)]
    assert len(set(all_ids)) == 3
    resumed = list(prepare_records(SPEC, rows, skip_first=2))
    assert [(d.index, d.id, d.repeat) for d in resumed] == [(2, all_ids[2], 2)]


def test_times_outside_firestores_range_are_record_errors() -> None:
    plus_one = dt.timezone(dt.timedelta(hours=1))
    rows = [{"symbol": "A", "timestamp": dt.datetime(1, 1, 1, tzinfo=plus_one)}, tick("B", 1)]
    rejected: list[RecordError] = []
    assert [d.index for d in prepare_records(SPEC, rows, on_reject=rejected.append)] == [1]
    assert "outside the times Firestore stores" in rejected[0].reason
    spec = SeriesSpec("t", key_fields=["symbol"], expire_after=dt.timedelta(days=30))
    late = {"symbol": "A", "timestamp": dt.datetime(9999, 12, 30, tzinfo=UTC)}
    with pytest.raises(RecordError, match="expire_after is past the latest time Firestore stores"):
        list(prepare_records(spec, [late]))
