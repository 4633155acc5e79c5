"""Pure tests of record validation, document ids and shard assignment."""

from __future__ import annotations

import collections
import datetime as dt

import numpy as np
import pandas as pd
import pytest

from tsstore import ConfigError, QueryShape, RecordError, SeriesSpec, TsstoreError
from tsstore.write.prepare import prepare_records

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 3, 1, 9, 30, tzinfo=UTC)
SPEC = SeriesSpec("ticks", key_fields=["symbol"])


def tick(**over: object) -> dict[str, object]:
    base: dict[str, object] = {"symbol": "AAA", "price": {"currency": "USD", "micros": 1}, "timestamp": T0}
    base.update(over)
    return base


def nested(levels: int) -> dict[str, object]:
    """``levels`` maps wrapped around a map: ``levels + 1`` nested maps in all."""
    value: dict[str, object] = {"v": 1}
    for _ in range(levels):
        value = {"d": value}
    return value


def test_nesting_up_to_the_limit_is_accepted() -> None:
    # The emulator stores exactly these and refuses one level more (see limits.py).
    [doc] = prepare_records(SPEC, [tick(deep=nested(19), arr=[nested(18)])])
    assert doc.data["deep"] == nested(19)


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"symbol": "AAA"}, r"record 0: timestamp field 'timestamp' is missing"),
        (tick(timestamp=dt.datetime(2024, 1, 1)), r"is naive \(no timezone\).*naive='utc'"),
        (tick(timestamp="2024-01-01T00:00:00Z"), r"timestamp field 'timestamp' is str"),
        (tick(timestamp=pd.Timestamp("2024-01-01T00:00:00.000000001Z")), r"sub-microsecond precision \(1 ns\)"),
        (tick(timestamp=pd.NaT), r"NaT"),
        (tick(shard="q"), r"shard field 'shard' is 'q', not one of the spec's shard values \['x', 'y', 'z'\]"),
        (tick(symbol=None) | {"symbol": ["A"]}, r"key field 'symbol' is \['A'\]"),
        ({"timestamp": T0}, r"key field 'symbol' is missing"),
        (tick(**{"a.b": 1}), r"field name 'a.b' contains '.'"),
        (tick(**{"__x__": 1}), r"field name '__x__' is reserved"),
        (tick(**{"": 1}), r"empty field name"),
        ({1: 2, "timestamp": T0, "symbol": "A"}, r"field name 1 is not a string"),
        (tick(big=2**63), r"outside Firestore's 64-bit integer range"),
        (tick(obj=object()), r"field 'obj' holds object .*allowed: str, int"),
        (tick(nested=[[1]]), r"array inside an array"),
        (tick(blob="x" * (1 << 20)), r"is 10\d{5} bytes as Firestore counts them; a document may be at most 1048576"),
        (tick(when=dt.datetime(2024, 1, 1)), r"field 'when' .* is naive"),
        (tick(deep=nested(20)), r"more than 20 levels deep"),  # 21 maps
        (tick(deep=[nested(19)]), r"more than 20 levels deep"),  # an array and 20 maps
    ],
)
def test_bad_records_are_refused_with_position_and_reason(record: dict[str, object], message: str) -> None:
    with pytest.raises(RecordError, match=message) as info:
        list(prepare_records(SPEC, [record]))
    assert isinstance(info.value, TsstoreError) and info.value.index == 0


def test_a_text_no_filter_could_find_is_refused_in_a_field_a_shape_filters_on() -> None:
    """Firestore compares at most 1 500 bytes of an indexed value in a query (a text counts its
    UTF-8 bytes and one), so a longer one in a shape's field could never be found by its filter;
    elsewhere in the tick it is stored as any value."""
    spec = SeriesSpec("ticks", key_fields=["symbol"], shapes=["venue", QueryShape([], ranges=["note.text"])])
    rejected: list[RecordError] = []
    records = [tick(venue="v" * 1499), tick(venue="é" * 750), tick(note={"text": b"x" * 1501}), tick(memo="m" * 5000)]
    kept = list(prepare_records(spec, records, on_reject=rejected.append))
    assert [doc.index for doc in kept] == [0, 3]
    assert [(r.index, r.reason) for r in rejected] == [
        (1, "field 'venue' is 1501 bytes as Firestore counts a text (its UTF-8 bytes and one); a query shape filters "
            "on it, and Firestore compares indexed values of at most 1500 bytes in a query, so no filter would find "
            "this tick"),
        (2, "field 'note.text' is 1501 bytes; a query shape filters on it, and Firestore compares indexed values of "
            "at most 1500 bytes in a query, so no filter would find this tick"),
    ]  # fmt: skip


def test_options_are_refused_when_the_write_is_asked_for_not_at_its_first_record() -> None:
    for options, words in (({"naive": 5}, "naive=5"), ({"on_duplicate": "merge"}, "on_duplicate='merge'"),
                           ({"skip_first": -1}, "skip_first=-1"), ({"skip_first": "2"}, "skip_first='2'")):  # fmt: skip
        with pytest.raises(ConfigError, match=words):
            prepare_records(SPEC, [tick()], **options)  # type: ignore[arg-type]


def test_refusal_names_the_position_of_the_bad_record() -> None:
    with pytest.raises(RecordError, match=r"^record 2: ") as info:
        list(prepare_records(SPEC, [tick(), tick(symbol="B"), "not a mapping"]))  # type: ignore[list-item]
    assert info.value.index == 2


def test_naive_times_are_read_in_the_zone_asked_for_and_refused_otherwise() -> None:
    [doc] = prepare_records(SPEC, [tick(timestamp=dt.datetime(2024, 1, 1, 12))], naive="utc")
    assert doc.data["timestamp"] == dt.datetime(2024, 1, 1, 12, tzinfo=UTC)
    winter, summer = dt.datetime(2024, 1, 15, 10), dt.datetime(2024, 7, 15, 10)
    rome = list(prepare_records(SPEC, [tick(timestamp=winter), tick(timestamp=summer)], naive="Europe/Rome"))
    assert [d.data["timestamp"].hour for d in rome] == [9, 8]  # CET, then CEST (daylight saving)
    assert all(d.data["timestamp"].tzinfo == UTC for d in rome)
    with pytest.raises(RecordError, match=r"is naive \(no timezone\); .*naive='Europe/Rome'"):
        list(prepare_records(SPEC, [tick(timestamp=winter)]))
    with pytest.raises(ConfigError, match=r"naive='Mars/Base': timezone policy 'Mars/Base' is not allowed"):
        list(prepare_records(SPEC, [tick()], naive="Mars/Base"))


def test_keyed_ids_are_stable_and_distinct() -> None:
    a1, b, a_later = prepare_records(
        SPEC, [tick(), tick(symbol="BBB"), tick(timestamp=T0 + dt.timedelta(microseconds=1))]
    )
    [a2] = prepare_records(SPEC, [tick()])  # the same tick in another input (a retry, a re-run)
    assert a1.id == a2.id and a1.data == a2.data  # a retried tick is the same document, same shard
    assert len({a1.id, b.id, a_later.id}) == 3
    assert len(a1.id) == 20


def test_equal_instants_in_other_timezones_are_one_tick() -> None:
    plus_one = dt.timezone(dt.timedelta(hours=1))
    [a] = prepare_records(SPEC, [tick()])
    [b] = prepare_records(SPEC, [tick(timestamp=T0.astimezone(plus_one))])
    assert a.id == b.id and b.data["timestamp"] == T0 and b.data["timestamp"].tzinfo == UTC


def test_random_ids_and_shards_spread_evenly() -> None:
    spec = SeriesSpec("ticks", shards=["a", "b", "c", "d"])
    docs = list(prepare_records(spec, (tick() for _ in range(8000))))
    assert len({d.id for d in docs}) == 8000
    counts = collections.Counter(d.data["shard"] for d in docs)
    assert set(counts) == {"a", "b", "c", "d"}
    assert all(1800 < n < 2200 for n in counts.values()), counts
    # ids are not monotonic: consecutive records do not sort in input order
    ordered = sum(1 for x, y in zip(docs, docs[1:]) if x.id < y.id)
    assert 3600 < ordered < 4400


def test_caller_shard_is_kept_when_declared_and_input_is_not_mutated() -> None:
    record = tick(shard="y")
    [doc] = prepare_records(SPEC, [record])
    assert doc.data["shard"] == "y"
    plain = tick()
    [doc2] = prepare_records(SPEC, [plain])
    assert "shard" not in plain and doc2.data["shard"] in SPEC.shards


def test_numpy_and_pandas_values_become_firestore_types() -> None:
    [doc] = prepare_records(
        SPEC,
        [tick(n=np.int64(5), f=np.float32(1.5), b=np.bool_(True), t=pd.Timestamp("2024-01-01", tz="UTC"), tup=(1, 2))],
    )
    assert doc.data["n"] == 5 and type(doc.data["n"]) is int
    assert type(doc.data["f"]) is float and type(doc.data["b"]) is bool
    assert type(doc.data["t"]) is dt.datetime and doc.data["tup"] == [1, 2]
