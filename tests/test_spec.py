"""The declaration object: validation and derived values."""

from __future__ import annotations

import dataclasses

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
        ({"timestamp_field": "time stamp"}, r"timestamp_field 'time stamp' is not a valid field path"),
        ({"shard_field": "timestamp"}, r"both 'timestamp'"),
        ({"shapes": ["shard"]}, r"filters on \['shard'\]"),
        ({"shapes": [("a", "a")]}, r"repeat a field"),
        ({"key_fields": ["timestamp"]}, r"may not include the timestamp"),
        ({"columns": {"x": "int"}}, r"column 'x' has type 'int'; allowed: string, Int64"),
        ({"columns": {"timestamp": "datetime"}}, r"is the timestamp field"),
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
