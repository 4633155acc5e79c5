"""Pure tests of DataFrame building and DataFrame input.

The builder converts its values a chunk of rows at a time; the chunked tests build the same
ticks with small chunks and hold the frames to :func:`reference`, a plain build of the whole
columns as lists (what the builder did before it worked in chunks), including a hypothesis
property over columns whose values change type, go missing, or do not fit their declared
type.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.shared import arrow_of
from tsstore import SchemaError, SeriesSpec, Tick
from tsstore.frames import DTYPES, FrameBuilder, Run, frame_to_records, frames, polars_frame, ticks_to_frame

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 3, 1, 9, 30, tzinfo=UTC)
DECLARED = SeriesSpec(
    "ticks",
    columns={"symbol": "string", "price.currency": "string", "price.micros": "Int64", "volume": "Float64"},
)


def t(i: int, **data: object) -> Tick:
    ts = T0 + dt.timedelta(seconds=i)
    return Tick(f"id{i}", ts, {"timestamp": ts, **data})


TICKS = [
    t(2, symbol="AAA", price={"currency": "USD", "micros": 5}, shard="x", flag=True),
    t(1, symbol="BBB", price={"currency": "JPY"}, shard="y", extra=1.5),
    t(0, symbol="CCC", shard="z", extra=2, when=T0),
]


def test_declared_columns_first_then_others_sorted_with_nullable_dtypes() -> None:
    frame = ticks_to_frame(DECLARED, TICKS)
    assert list(frame.columns) == [
        "symbol",
        "price.currency",
        "price.micros",
        "volume",
        "extra",
        "flag",
        "when",
    ]  # tsstore's own shard field is left out unless asked for
    assert {c: str(d) for c, d in frame.dtypes.items()} == {
        "symbol": "string",
        "price.currency": "string",
        "price.micros": "Int64",
        "volume": "Float64",
        "extra": "Float64",
        "flag": "boolean",
        "when": "datetime64[us, UTC]",
    }
    asked = ticks_to_frame(DECLARED, TICKS, columns=["shard", "symbol"])
    assert list(asked.columns) == ["symbol", "shard"] and str(asked["shard"].dtype) == "string"
    assert isinstance(frame.index, pd.DatetimeIndex) and str(frame.index.tz) == "UTC"
    assert frame.index.name == "timestamp"
    assert list(frame.index) == [tk.timestamp for tk in TICKS]  # query order kept
    assert frame["price.micros"].isna().tolist() == [False, True, True]
    assert frame["volume"].isna().all()
    assert frame.loc[frame.index[1], "extra"] == 1.5


def test_a_projection_is_what_the_frame_holds() -> None:
    """A read of some columns gets those (a map's name brings its leaves; declared ones keep
    their type and come first, even when no tick holds them), not every declared column."""
    frame = ticks_to_frame(DECLARED, TICKS, columns=["price", "extra", "volume"])
    assert list(frame.columns) == ["price.currency", "price.micros", "volume", "extra"]
    assert str(frame["price.micros"].dtype) == "Int64" and frame["volume"].isna().all()
    assert list(ticks_to_frame(DECLARED, [], columns=["symbol"]).columns) == ["symbol"]


def test_empty_result_has_the_declared_columns_and_dtypes() -> None:
    empty = ticks_to_frame(DECLARED, [])
    full = ticks_to_frame(DECLARED, TICKS[:1])
    assert len(empty) == 0
    assert list(empty.columns) == ["symbol", "price.currency", "price.micros", "volume"]
    assert empty.dtypes.to_dict() == full[list(empty.columns)].dtypes.to_dict()
    assert str(empty.index.dtype) == "datetime64[us, UTC]"


def test_declared_type_mismatch_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match=r"column 'price.micros' is declared 'Int64' but holds str 'lots'"):
        ticks_to_frame(DECLARED, [t(0, price={"micros": "lots"})])


def test_stream_of_frames_splits_rows() -> None:
    parts = list(frames(DECLARED, TICKS, rows=2))
    assert [len(p) for p in parts] == [2, 1]
    assert all(list(p.columns)[:4] == ["symbol", "price.currency", "price.micros", "volume"] for p in parts)


def test_frame_round_trips_to_records() -> None:
    frame = ticks_to_frame(DECLARED, TICKS)
    records = list(frame_to_records(DECLARED, frame))
    assert records[0] == {
        "timestamp": TICKS[0].timestamp,
        "symbol": "AAA",
        "price": {"currency": "USD", "micros": 5},
        "flag": True,
    }  # no shard: the writer gives the tick one when it is written again
    assert records[2]["when"] == T0 and "price" not in records[2]  # missing values are left out


# ---------------------------------------------------------------------- chunks


def reference(spec: SeriesSpec, ticks: Iterable[Tick], columns: Iterable[str] | None = None) -> pd.DataFrame:
    """The frame of ``ticks`` built plainly: every column a list of all its values, typed at the end."""
    ticks, wanted = list(ticks), None if columns is None else tuple(columns)
    rows = [dict(flat(tick.data)) for tick in ticks]
    dropped = {spec.timestamp_field}
    if wanted is None or spec.shard_field not in wanted:
        dropped.add(spec.shard_field)
    declared = dict(spec.columns)
    seen = sorted({name for row in rows for name in row} - dropped - set(declared))
    data = {}
    for name in [*declared, *seen]:
        if wanted is None or any(name == c or name.startswith(c + ".") for c in wanted):
            values = [row.get(name) if name not in dropped else None for row in rows]
            data[name] = typed(name, values, declared.get(name) or inferred(values))
    stamps = pd.to_datetime([tick.timestamp for tick in ticks], utc=True)
    return pd.DataFrame(data, index=pd.DatetimeIndex(stamps, name=spec.timestamp_field).as_unit("us"))


def flat(data: dict[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, value in data.items():
        if type(value) is dict and value:
            yield from flat(value, prefix + key + ".")
        else:
            yield prefix + key, value


def inferred(values: list[Any]) -> str:
    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return "object"
    for kind, types in (("string", {str}), ("boolean", {bool}), ("Int64", {int})):
        if kinds == types:
            return kind
    if kinds <= {int, float}:
        return "Float64"
    return "datetime" if all(issubclass(k, dt.datetime) for k in kinds) else "object"


def typed(name: str, values: list[Any], kind: str) -> Any:
    try:
        if kind == "object":
            return pd.array(values, dtype=object)
        if kind == "datetime":
            return pd.array(pd.to_datetime(values, utc=True)).astype(DTYPES[kind])
        with np.errstate(invalid="ignore"):
            return pd.array(values, dtype=DTYPES[kind])
    except (TypeError, ValueError, OverflowError) as exc:
        huge = [v for v in values if kind == "Int64" and type(v) is int and not -(2**63) <= v <= 2**63 - 1]
        if huge:
            raise SchemaError(
                f"column {name!r} holds the integer {huge[0]}, beyond Int64's range ({-(2**63)} to {2**63 - 1}, "
                "the range of Firestore's integers); fix the data, or declare the column 'object' to keep it as it is"
            ) from exc
        bad = next((v for v in values if v is not None and not fits(v, kind)), None)
        raise SchemaError(
            f"column {name!r} is declared {kind!r} but holds {type(bad).__name__} {bad!r}; "
            "change the declared type in the SeriesSpec or fix the stored data"
        ) from exc


def fits(value: Any, kind: str) -> bool:
    if isinstance(value, bool):
        return kind == "boolean"
    types = {"string": (str,), "Int64": (int,), "Float64": (int, float), "boolean": (), "datetime": (dt.datetime,)}
    return isinstance(value, types[kind])


def chunked(spec: SeriesSpec, ticks: Iterable[Tick], rows: int, columns: Iterable[str] | None = None) -> pd.DataFrame:
    builder = FrameBuilder(spec, columns=columns, chunk_rows=rows)
    for tick in ticks:
        builder.add(tick)
    return builder.frame()


def assert_same(got: pd.DataFrame, want: pd.DataFrame) -> None:
    """Equal frames, down to the type of each value of an ``object`` column (and NaN against None)."""
    pd.testing.assert_frame_equal(got, want, check_exact=True)
    assert [str(d) for d in got.dtypes] == [str(d) for d in want.dtypes]
    for name in got.columns:
        if got[name].dtype == object:
            for a, b in zip(got[name], want[name]):
                assert type(a) is type(b) and (a == b or (a is None and b is None) or (a != a and b != b)), (name, a, b)
                if isinstance(a, dt.datetime):
                    assert a.tzinfo is b.tzinfo and a.fold == b.fold


def outcome(build: Any) -> pd.DataFrame | str:
    """The frame ``build()`` returns, or its error as text."""
    try:
        frame: pd.DataFrame = build()
    except Exception as exc:  # noqa: BLE001 - an error is an outcome to compare
        return f"{type(exc).__name__}: {exc}"
    return frame


MANY = [t(i, symbol="ABC"[i % 3], price={"currency": "USD", "micros": i * 10}, shard=f"s{i % 2}", volume=i / 2)
        for i in range(11)]  # fmt: skip


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 10, 11, 12])
def test_a_frame_built_in_chunks_is_the_frame_of_one_chunk(rows: int) -> None:
    for ticks in (TICKS, MANY, MANY + TICKS):
        whole = ticks_to_frame(DECLARED, ticks)
        assert_same(whole, reference(DECLARED, ticks))
        assert_same(chunked(DECLARED, ticks, rows), whole)
        asked = ["price", "extra", "shard"]
        assert_same(chunked(DECLARED, ticks, rows, asked), reference(DECLARED, ticks, asked))
    assert_same(chunked(DECLARED, [], rows), ticks_to_frame(DECLARED, []))


def test_a_column_first_seen_after_a_chunk_and_missing_across_chunks() -> None:
    ticks = [t(i) for i in range(5)] + [t(5, late=7, nested={"a": "x"})] + [t(i) for i in range(6, 9)] + [t(9, late=8)]
    frame = chunked(DECLARED, ticks, 2)
    assert_same(frame, reference(DECLARED, ticks))
    assert frame["late"].isna().tolist() == [True] * 5 + [False] + [True] * 3 + [False]
    assert str(frame["late"].dtype) == "Int64" and frame["late"].iloc[-1] == 8
    assert str(frame["nested.a"].dtype) == "string" and frame["nested.a"].count() == 1
    assert frame["symbol"].isna().all() and str(frame["symbol"].dtype) == "string"  # declared, never given


def test_a_schema_error_in_a_later_chunk_names_the_column_and_the_first_value_that_does_not_fit() -> None:
    ticks = [t(i, price={"micros": i}) for i in range(6)] + [t(6, price={"micros": "lots"})]
    with pytest.raises(SchemaError, match=r"column 'price.micros' is declared 'Int64' but holds str 'lots'"):
        chunked(DECLARED, ticks, 2)
    # 2.0 converts to Int64 on its own, but it is the first value that does not fit
    ticks = [t(i, price={"micros": micros}) for i, micros in enumerate([1, 2.0, 3, 4.5])]
    with pytest.raises(SchemaError, match=r"column 'price.micros' is declared 'Int64' but holds float 2.0"):
        chunked(DECLARED, ticks, 2)
    assert outcome(lambda: chunked(DECLARED, ticks, 2)) == outcome(lambda: reference(DECLARED, ticks))
    fine = ticks[:3]  # 2.0 alone is taken, as before
    assert_same(chunked(DECLARED, fine, 1), reference(DECLARED, fine))
    assert chunked(DECLARED, fine, 1)["price.micros"].tolist() == [1, 2, 3]


@pytest.mark.parametrize(
    ("first", "then", "kind"),
    [
        ([1, 2], [2.5, None], "Float64"),
        ([1, None], ["x", "y"], "object"),
        (["x", None], [1, 2], "object"),
        ([True, False], [1], "object"),
        ([1.5, math.nan], [2, 3], "Float64"),
        ([1.5, math.nan], ["x"], "object"),
        ([0.5, None], ["x"], "object"),
        ([T0, None], ["2024-01-01"], "object"),
        ([T0, T0.astimezone(dt.timezone(dt.timedelta(hours=1)))], [None, T0], "datetime"),
        ([T0, T0.replace(tzinfo=None)], [T0], "datetime"),
        ([None, None], [None, 3], "Int64"),
        ([2**70, 1], [2.5], "Float64"),
        ([[1, 2], [3, 4]], [None, [5]], "object"),
    ],
)
def test_inferred_types_are_those_of_the_whole_column(first: list[Any], then: list[Any], kind: str) -> None:
    values = first + then
    ticks = [t(i, v=v) if v is not None else t(i) for i, v in enumerate(values)]
    want = reference(SeriesSpec("ticks"), ticks)
    assert str(want["v"].dtype) == DTYPES[kind]
    for rows in (1, len(first), len(values)):
        assert_same(chunked(SeriesSpec("ticks"), ticks, rows), want)


VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**65), 2**65),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["x", "y", "", "2024-01-02", "1"]),
    st.sampled_from([T0, T0.replace(tzinfo=None), T0.astimezone(dt.timezone(dt.timedelta(hours=-5)))]),
    st.lists(st.integers(0, 3), max_size=2),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(*[VALUES] * 4, st.one_of(st.integers(0, 9), VALUES), st.booleans()), max_size=12),
    st.integers(1, 5),
)
def test_chunked_builds_equal_the_plain_build(rows: list[tuple[Any, ...]], size: int) -> None:
    """Whatever the values (columns declared Int64, Float64, string and datetime, one
    inferred, present or not), a build in chunks of ``size`` rows gives the plain build's
    frame or error."""
    spec = SeriesSpec("ticks", columns={"n": "Int64", "x": "Float64", "s": "string", "d": "datetime"})
    ticks = []
    for i, (n, x, s, d, v, late) in enumerate(rows):
        data = {"n": n, "x": x, "s": s, "d": d, **({"v": v} if v is not None else {}), **({"late": v} if late else {})}
        ticks.append(t(i, **data))
    want = outcome(lambda: reference(spec, ticks))
    got = outcome(lambda: chunked(spec, ticks, size))
    if isinstance(want, str) or isinstance(got, str):
        assert got == want
    else:
        assert_same(got, want)


def test_chunk_rows_must_be_a_positive_integer() -> None:
    for rows in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="chunk_rows .* is not allowed"):
            FrameBuilder(DECLARED, chunk_rows=rows)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kind", "first", "then"),
    [
        ("Int64", [1, None, -(2**63)], [2**63 - 1]),
        ("Float64", [0.5, None], [-1e300, 2.0]),
        ("boolean", [True, None], [False]),
        ("string", ["é", None, ""], ["xyz", "a"]),
        ("datetime", [T0, None], [T0 + dt.timedelta(microseconds=1)]),
    ],
)
def test_a_run_gives_back_its_arrays_whole_and_in_part(kind: str, first: list[Any], then: list[Any]) -> None:
    """A column's run (one buffer per column instead of an array per chunk): its whole
    array, and any rows of it, are what the chunks and missing rows it took make."""
    run = Run(kind)
    rows = [run.add(typed("c", first, kind)), run.add_missing(2), run.add(typed("c", then, kind))]
    values = first + [None, None] + then
    want = typed("c", values, kind)
    pd.testing.assert_extension_array_equal(run.array(), want)
    assert [len(run.array(r)) for r in rows] == [len(first), 2, len(then)]
    for r in rows:
        pd.testing.assert_extension_array_equal(run.array(r), typed("c", values[r.start : r.stop], kind))
    assert str(run.array().dtype) == DTYPES[kind]


def test_a_table_holds_the_frames_columns_types_and_order_with_the_timestamp_first() -> None:
    for rows in (1, 2, 100):
        builder = FrameBuilder(DECLARED, chunk_rows=rows)
        for tick in MANY + TICKS:
            builder.add(tick)
        table = builder.table()
        assert table.equals(arrow_of(ticks_to_frame(DECLARED, MANY + TICKS)))
    assert table.column_names[:5] == ["timestamp", "symbol", "price.currency", "price.micros", "volume"]
    assert {name: str(table.schema.field(name).type) for name in table.column_names[:5]} == {
        "timestamp": "timestamp[us, tz=UTC]",
        "symbol": "large_string",
        "price.currency": "large_string",
        "price.micros": "int64",
        "volume": "double",
    }
    assert table.column("volume").null_count == len(TICKS)  # missing stays missing, not NaN
    batches = list(frames(DECLARED, MANY + TICKS, rows=4, arrow=True))
    assert [b.num_rows for b in batches] == [4, 4, 4, 2]
    assert pa.Table.from_batches(batches[:2]).equals(arrow_of(ticks_to_frame(DECLARED, MANY[:8])))
    polars = polars_frame(table)
    assert polars.columns == table.column_names and polars.height == table.num_rows
    assert str(polars.schema["timestamp"]) == "Datetime(time_unit='us', time_zone='UTC')"


def test_a_column_of_values_no_arrow_type_holds_is_refused_naming_it() -> None:
    builder = FrameBuilder(SeriesSpec("ticks"))
    for i, value in enumerate([1, "x", 2.5]):
        builder.add(t(i, mixed=value))
    with pytest.raises(SchemaError, match=r"column 'mixed' holds values of float, int, str that no one Arrow type"):
        builder.table()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(*[VALUES] * 3), max_size=10), st.integers(1, 4))
@example(rows=[(None, None, T0), (None, None, 9.223372036854776e18)], size=1)  # Arrow: int64 overflow
def test_a_table_is_what_arrow_makes_of_the_frame(rows: list[tuple[Any, ...]], size: int) -> None:
    """Whatever the values, the table is Arrow's conversion of the frame built from the same
    ticks, or, where Arrow has no one type for a column, a SchemaError (and so is Arrow's own
    conversion an error)."""
    spec = SeriesSpec("ticks", columns={"n": "Int64", "s": "string"})
    ticks = [t(i, **{k: v for k, v in zip("nsv", row) if v is not None}) for i, row in enumerate(rows)]
    frame = outcome(lambda: chunked(spec, ticks, size))
    builder = FrameBuilder(spec, chunk_rows=size)
    for tick in ticks:
        builder.add(tick)
    if isinstance(frame, str):
        assert outcome(builder.table) == frame
        return
    try:
        want = arrow_of(frame)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        with pytest.raises(SchemaError, match="that no one Arrow type holds"):
            builder.table()
        return
    got = builder.table()
    assert got.equals(want), (got.schema, want.schema)


def test_an_integer_beyond_int64_is_refused_naming_it_and_an_object_column_keeps_it() -> None:
    """An int no Int64 column (and no Firestore integer) holds, among ints: a SchemaError that
    names it and the range, in chunks or whole, without a warning on the way; declared
    ``object``, the column keeps it as it is."""
    huge = 15299981304426002432
    ticks = [t(i, v=value) for i, value in enumerate([1, huge, 3])]
    for size in (1, 2, 3):
        builder = FrameBuilder(SeriesSpec("ticks"), chunk_rows=size)
        for tick in ticks:
            builder.add(tick)
        with pytest.raises(SchemaError, match=rf"^column 'v' holds the integer {huge}, beyond Int64's range"):
            builder.frame()
    kept = ticks_to_frame(SeriesSpec("ticks", columns={"v": "object"}), ticks)
    assert list(kept["v"]) == [1, huge, 3]
