"""Query output files keep one schema from the first row to the last."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pandas as pd
import pytest

from tsstore import SeriesSpec, Tick, TsstoreError
from tsstore.cli.output import write_frames
from tsstore.frames import ticks_to_frame

UTC = dt.timezone.utc
SPEC = SeriesSpec("t", columns={"symbol": "string"})


def frame(*rows: dict[str, object]) -> pd.DataFrame:
    ts = dt.datetime(2024, 1, 1, tzinfo=UTC)
    return ticks_to_frame(SPEC, [Tick(f"i{i}", ts, {"timestamp": ts, **r}) for i, r in enumerate(rows)])


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_a_column_appearing_late_is_an_error_not_a_shifted_value(tmp_path: Path, fmt: str) -> None:
    parts = [frame({"symbol": "A", "x": 1}), frame({"symbol": "B", "x": 2, "late": "!"})]
    with pytest.raises(TsstoreError, match=r"column\(s\) \['late'\] first appear after 1 rows"):
        write_frames(iter(parts), fmt=fmt, output=tmp_path / f"out.{fmt}")


def test_missing_columns_in_later_frames_stay_aligned(tmp_path: Path) -> None:
    parts = [frame({"symbol": "A", "x": 1}), frame({"symbol": "B"})]
    out = tmp_path / "out.csv"
    assert write_frames(iter(parts), fmt="csv", output=out) == 2
    lines = out.read_text().splitlines()
    assert lines[0] == "timestamp,symbol,x" and lines[1].endswith(",A,1") and lines[2].endswith(",B,")


def test_a_live_table_prints_one_header_and_rows_that_line_up(capsys: pytest.CaptureFixture[str]) -> None:
    parts = [frame({"symbol": "AAA", "x": 10}), frame({"symbol": "BBBB", "x": 2}), frame({"symbol": "C", "x": 300})]
    write_frames(iter(parts), fmt="table", output=None, flush=True)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[0].split() == ["timestamp", "symbol", "x"]
    assert len({len(line) for line in lines}) == 1  # every row as wide as the header: the columns line up
    assert [line.split()[-2:] for line in lines[1:]] == [["AAA", "10"], ["BBBB", "2"], ["C", "300"]]


def test_an_arrow_stream_holds_every_frame_in_one_schema_and_parquet_the_same_table(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    parts = [frame({"symbol": "A", "x": 1}), frame({"symbol": "B"}), frame({"symbol": "C", "x": 3})]
    assert write_frames(iter(parts), fmt="arrow", output=tmp_path / "out.arrow") == 3
    with pa.ipc.open_stream(tmp_path / "out.arrow") as reader:
        table = reader.read_all()
    assert table.column_names == ["timestamp", "symbol", "x"]
    assert table.column("x").to_pylist() == [1, None, 3] and str(table.schema.field("x").type) == "int64"
    assert write_frames(iter(parts), fmt="parquet", output=tmp_path / "out.parquet") == 3
    assert pq.read_table(tmp_path / "out.parquet").replace_schema_metadata(None).equals(table)
    assert write_frames(iter([]), fmt="arrow", output=tmp_path / "none.arrow") == 0
    with pa.ipc.open_stream(tmp_path / "none.arrow") as reader:
        assert reader.read_all().num_rows == 0
