"""Pure tests of DataFrame building and DataFrame input."""

from __future__ import annotations

import datetime as dt

import pandas as pd
import pytest

from tsstore import SchemaError, SeriesSpec, Tick
from tsstore.frames import frame_to_records, frames, ticks_to_frame

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
