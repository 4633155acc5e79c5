"""The declaration object: validation and derived values."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest

from tsstore import Direction, QueryShape, SeriesSpec, SpecError, TsstoreError, shards_for


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"shards": []}, r"shards is empty"),
        ({"shards": ["x", "y", "x"]}, r"shard values \['x'\] appear more than once"),
        ({"shards": ["x", ""]}, r"shard value '' is not allowed"),
        ({"shards": ["x", 3]}, r"shard value 3 is not allowed"),
        ({"shards": "xyz"}, r"must be a list of strings"),
        ({"shards": 3}, r"shards=3 is a number; give the shard values, e.g. shards=shards_for\(1500\) for 3 values"),
        ({"timestamp_field": "time stamp"}, r"timestamp_field 'time stamp' is not a valid field path"),
        ({"shard_field": "timestamp"}, r"both 'timestamp'"),
        ({"shapes": ["shard"]}, r"filters on \['shard'\]"),
        ({"shapes": [("a", "a")]}, r"repeat a field"),
        ({"key_fields": ["timestamp"]}, r"key_fields \['timestamp'\] must be distinct fields other than the timestamp"),
        ({"key_fields": ["k", "k"]}, r"key_fields \['k', 'k'\] must be distinct"),
        ({"retired": "x"}, r"retired 'x' must be a list of shard values"),
        ({"retired": ["x"]}, r"shard values \['x'\] are both active and retired"),
        ({"retired": ["q", {"value": "q"}]}, r"retired shard values \['q'\] appear more than once"),
        ({"retired": [{"until": "2024-01-01"}]}, r"needs 'value'"),
        ({"on_duplicate": "twice"}, r"twice"),
        ({"expire_after": 3600}, r"expire_after 3600 is not allowed; give a positive datetime.timedelta"),
        ({"expire_after": dt.timedelta(0)}, r"expire_after .* is not allowed"),
        ({"expire_field": "shard"}, r"expire_field 'shard' is already the timestamp or shard field"),
        ({"measures": ["v", "v"]}, r"measures \['v', 'v'\] must be distinct"),
        ({"measures": "v", "columns": {"v": "string"}}, r"measure 'v' is declared string; a measure is Int64"),
        ({"count_by": ["shard"]}, r"count_by \['shard'\] must be distinct fields other than"),
        ({"counter_shards": 0}, r"counter_shards 0 is not allowed"),
        ({"counter_shards": True}, r"counter_shards True is not allowed"),
        ({"columns": {"x": "int"}}, r"column 'x' has type 'int'; allowed: string, Int64"),
        ({"columns": {"timestamp": "datetime"}}, r"is the timestamp field"),
        ({"shapes": [QueryShape(["a"], series_rate=10), ("a",)]}, r"declared twice with series_rate 10.0 and None"),
    ],
)
def test_bad_specs(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message) as info:
        SeriesSpec("ticks", **kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, TsstoreError) and isinstance(info.value, ValueError)


@pytest.mark.parametrize("name", ["", "a/b", "..", "__x__"])
def test_bad_collection_names(name: str) -> None:
    with pytest.raises(SpecError, match="not a valid collection id"):
        SeriesSpec(name)


def test_defaults_follow_the_seed() -> None:
    spec = SeriesSpec("instruments")
    assert spec.shards == ("x", "y", "z")
    assert (spec.timestamp_field, spec.shard_field) == ("timestamp", "shard")
    assert spec.max_write_rate == 1500
    assert [s.fields for s in spec.all_shapes()] == [()]


def test_spec_is_frozen_and_hashable() -> None:
    spec = SeriesSpec("t", shapes=["b", ("a", "c")])
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.collection = "other"  # type: ignore[misc]
    assert hash(spec) == hash(SeriesSpec("t", shapes=["b", ("c", "a")]))


def test_shapes_merge_directions_and_sort_fields() -> None:
    spec = SeriesSpec("t", shapes=[QueryShape(("b", "a")), QueryShape(("a", "b"), "asc"), "c"])
    assert spec.shapes == (QueryShape(("a", "b"), (Direction.DESC, Direction.ASC)), QueryShape(("c",)))
    assert spec.filter_fields == {"a", "b", "c"}


@pytest.mark.parametrize(
    ("rate", "count", "first", "last"),
    [(1, 1, "s0", "s0"), (500, 1, "s0", "s0"), (501, 2, "s0", "s1"), (1500, 3, "s0", "s2"), (20_000, 40, "s0", "s39")],
)
def test_plan_shards_from_write_rate(rate: float, count: int, first: str, last: str) -> None:
    shards = shards_for(rate)
    assert (len(shards), shards[0], shards[-1]) == (count, first, last)
    assert shards == tuple(f"s{i}" for i in range(count))  # unpadded: a larger plan keeps these names
    assert SeriesSpec.for_write_rate("t", writes_per_second=rate).shards == shards


@pytest.mark.parametrize("rate", [0, -1, float("inf"), float("nan"), True, "10"])
def test_plan_shards_refuses_bad_rates(rate: object) -> None:
    with pytest.raises(SpecError, match="writes_per_second"):
        shards_for(rate)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fields": ["symbol"], "series_rate": 0}, r"series_rate 0 is not allowed"),
        ({"fields": ["symbol"], "series_rate": True}, r"series_rate True is not allowed"),
        (
            {"fields": ["symbol"], "series_rate": 600},
            r"series_rate 600 .*leave series_rate out so the shape is sharded",
        ),
        ({"fields": [], "series_rate": 10}, r"series_rate needs equality fields"),
        ({"fields": ["volume"], "ranges": ["volume"]}, r"repeat a field or one of its equality fields"),
        ({"fields": ["a"], "ranges": ["v", "v"]}, r"repeat a field"),
        ({"fields": ["a"], "ranges": [f"v{i}" for i in range(10)]}, r"at most 9"),
        ({"fields": ["a"], "ranges": ["bad field"]}, r"range field 'bad field' is not a valid field path"),
        ({"fields": ["a", "a"]}, r"query shape fields \['a', 'a'\] repeat a field"),
        ({"fields": ["a"], "directions": []}, r"needs at least one direction"),
        ({"fields": ["a"], "directions": ["up"]}, r"'up'"),
    ],
)
def test_bad_shapes(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        QueryShape(**kwargs)  # type: ignore[arg-type]


def test_range_fields_may_not_be_tsstores_own() -> None:
    with pytest.raises(SpecError, match=r"filters on \['timestamp'\]"):
        SeriesSpec("ticks", shapes=[QueryShape(["a"], ranges=["timestamp"])])


def test_series_and_range_shapes() -> None:
    spec = SeriesSpec(
        "ticks",
        shapes=[
            QueryShape(["symbol"], series_rate=50),
            QueryShape(["symbol"], "asc", series_rate=50),  # merged: the same shape, both directions
            QueryShape(["exchange"], ranges=["volume", "price.micros"]),
            QueryShape([], ranges=["volume"]),  # a range shape with no equality field is declared, not implied
        ],
    )
    series, ranged, volume_only = spec.shapes
    assert series.series and series.series_rate == 50.0 and series.directions == (Direction.DESC, Direction.ASC)
    assert ranged.ranges == ("price.micros", "volume") and not ranged.series  # sorted
    assert volume_only.key == ((), ("volume",))
    assert spec.series_shapes == (series,)
    assert spec.filter_fields == {"symbol", "exchange", "volume", "price.micros"}
    assert series.describe() == "[symbol] desc/asc series <= 50 writes/s"
    assert ranged.describe() == "[exchange] ranges [price.micros, volume] desc"


def test_whole_seconds_minutes_and_hours_read_without_pandas_are_what_pandas_reads() -> None:
    """``to_duration`` reads ``"2s"``, ``"5min"`` or ``"1h"`` itself (a late policy's defaults,
    read whenever the spec is imported, so the spec loads without pandas): each such text with
    one to six digits, leading zeros and the largest included, is pandas' ``Timedelta`` of it,
    and text just outside that form is still read by pandas, or refused as it refuses it."""
    import pandas as pd

    from tsstore.times import to_duration

    for unit in ("s", "min", "h"):
        for digits in ("0", "2", "007", "20", "59", "60", "3600", "86400", "999999"):
            text = digits + unit
            assert to_duration(text, name="d") == pd.Timedelta(text).to_pytimedelta(), text
    for text in ("1000000h", "1.5h", "1 h", " 2s", "-2s", "+5min", "2sec", "2ms", "3000000h", "1e9h"):
        try:
            want: object = pd.Timedelta(text).to_pytimedelta()
        except (ValueError, OverflowError):
            want = ValueError
        try:
            got: object = to_duration(text, name="d")
        except ValueError:
            got = ValueError
        assert got == want, text
