"""Writing what a command found: rows as a terminal table, CSV, JSON Lines (``jsonl``, or
``json``), an Arrow IPC stream (``arrow``) or Parquet, frame by frame; figures (counts,
summaries) as text or, with ``--format json``, as one JSON object."""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import click
import pandas as pd
import pyarrow as pa
import pyarrow.ipc

from tsstore.cli.exits import usage
from tsstore.cli.values import OutputFile
from tsstore.errors import TsstoreError

#: Row formats: every command that prints rows takes these (``json`` is JSON Lines, one
#: object per row; ``arrow`` an Arrow IPC stream, to a file or a pipe).
ROW_FORMATS = ("table", "csv", "jsonl", "json", "arrow")

#: The row format a file's suffix names (``-o ticks.parquet``): what ``--format`` defaults to
#: for that file, and must agree with when given. Other suffixes (``.txt``) name no format.
SUFFIX_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".parquet": "parquet",
                  ".pq": "parquet", ".arrow": "arrow", ".arrows": "arrow"}  # fmt: skip
#: Formats that write the same bytes (JSON Lines under either name).
_SAME_BYTES = {"json": "jsonl"}


def output_format(fmt: str, *, given: bool, output: Path | None) -> str:
    """The format to write ``output`` in: ``fmt`` when ``--format`` was ``given`` (refused
    when the file's suffix names another), else the one its suffix names, else ``fmt``."""
    named = SUFFIX_FORMATS.get(output.suffix.lower()) if output is not None else None
    if output is None or named is None:
        return fmt
    if not given:
        return named
    if _SAME_BYTES.get(fmt, fmt) != _SAME_BYTES.get(named, named):
        raise usage(
            f"--format {fmt} contradicts --output {output}, a {output.suffix} file ({named}); give --format {named}, "
            f"or leave --format out to write what the suffix names"
        )
    return fmt


#: Figure formats: every command that prints counts or a summary takes these.
FIGURE_FORMATS = ("text", "json")


def rows_format(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--format table|csv|jsonl|json`` for a command that prints rows."""
    return click.option("--format", "fmt", type=click.Choice(ROW_FORMATS), default="table", show_default=True,
                        help="How rows are printed (json: one JSON object per row; arrow: an Arrow IPC "
                             "stream, for a file or a pipe).")(command)  # fmt: skip


#: What a command that writes rows to stdout or a file writes: the row formats and Parquet
#: (a file only).
OUTPUT_FORMATS = (*ROW_FORMATS, "parquet")


def output_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--format`` (the row formats and Parquet) and ``--output/-o FILE`` for a command that
    writes rows (to stdout without it); :func:`format_of_output` settles the two."""
    command = click.option("--output", "-o", type=OutputFile(), default=None, help="File (default: stdout).")(command)
    return click.option(
        "--format", "fmt", type=click.Choice(OUTPUT_FORMATS), default="table", show_default=True,
        help="How rows are written (default with --output: what its suffix names, such as .csv or .parquet).",
    )(command)  # fmt: skip


def format_of_output(command: Callable[..., Any]) -> Callable[..., Any]:
    """For a command with :func:`output_options`: the format an ``--output`` file's suffix
    names when ``--format`` is not given, and ``--format`` refused where it contradicts the
    suffix, or is parquet without ``--output``. Put it first (outermost), so it answers
    before the declaration is loaded."""

    @functools.wraps(command)
    def run(**options: Any) -> Any:
        given = click.get_current_context().get_parameter_source("fmt") is not click.core.ParameterSource.DEFAULT
        options["fmt"] = output_format(options["fmt"], given=given, output=options["output"])
        if options["fmt"] == "parquet" and options["output"] is None:
            raise click.UsageError("--format parquet needs --output FILE")
        return command(**options)

    return run


def echo_written(rows: int, output: Path | None) -> None:
    """Say on stderr how many rows went to ``output`` (nothing when they went to stdout)."""
    if output is not None:
        click.echo(f"wrote {rows} row(s) to {output}", err=True)


def figures_format(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--format text|json`` for a command that prints figures."""
    return click.option("--format", "fmt", type=click.Choice(FIGURE_FORMATS), default="text", show_default=True,
                        help="How the figures are printed (json: one JSON object).")(command)  # fmt: skip


def echo_figures(fmt: str, text: str, value: Any) -> None:
    """Print ``text``, or with ``--format json`` ``value`` (a dataclass or a dict) as one
    JSON object."""
    if fmt != "json":
        click.echo(text)
        return
    click.echo(json.dumps(_plain(value), ensure_ascii=False, default=_json_default))


def _plain(value: Any) -> Any:
    """``value`` as JSON's types: a dataclass as an object of its public fields, mappings and
    sequences item by item; anything else as :func:`_json_default` writes it."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if not f.name.startswith("_")}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def write_frames(frames: Iterable[pd.DataFrame], *, fmt: str, output: Path | None, flush: bool = False) -> int:
    """Write ``frames`` (as built by :func:`tsstore.frames.ticks_to_frame`) to ``output`` or
    stdout and return the number of rows. CSV keeps the dotted column names ``tsstore
    ingest`` reads back; JSON Lines nests them again; Parquet needs a file. ``flush`` sends
    each frame on at once (for output that follows live data); a table then prints its
    header once, above rows aligned as they come."""
    if fmt == "parquet":
        if output is None:
            raise ValueError("Parquet output needs a file")
        return _parquet(frames, output)
    if fmt == "arrow":
        return _arrow_stream(frames, output)
    stream: TextIO = open(output, "w", encoding="utf-8", newline="") if output else sys.stdout
    rows = 0
    live = _LiveTable()
    try:
        for number, frame in enumerate(_same_columns(frames)):
            rows += len(frame)
            if fmt == "table" and flush:
                stream.write(live.lines(frame))
            elif fmt == "table" and len(frame):  # an empty frame says nothing: "(no rows)" is said once, below
                stream.write(frame.to_string() + "\n")
            elif fmt == "table":
                continue
            elif fmt == "csv":
                frame.to_csv(stream, header=number == 0, date_format="%Y-%m-%dT%H:%M:%S.%f%z")
            elif fmt in ("jsonl", "json"):
                for record in _records(frame):
                    stream.write(json.dumps(record, ensure_ascii=False, default=_json_default) + "\n")
            else:
                raise ValueError(f"unknown output format {fmt!r}")
            if flush:
                stream.flush()
        if fmt == "table" and not rows and not flush:
            stream.write("(no rows)\n")  # a table says so; CSV and JSON Lines stay empty
    finally:
        if output:
            stream.close()
    return rows


_LIVE_WIDTH = 10  # room for later values longer than the first ones (prices grow a digit)


class _LiveTable:
    """A table printed as its rows arrive: one header, and every later row in the columns the
    first rows set (at least 10 wide; a cell wider than its column widens it from then on)."""

    def __init__(self) -> None:
        self._widths: list[int] | None = None

    def lines(self, frame: pd.DataFrame) -> str:
        names = [str(frame.index.name or ""), *map(str, frame.columns)]
        cells = [
            [str(i), *("<NA>" if pd.isna(v) else str(v) for v in row)] for i, row in zip(frame.index, frame.values)
        ]
        out = []
        if self._widths is None:
            self._widths = [max(_LIVE_WIDTH, *map(len, column)) for column in zip(names, *cells)]
            out.append(self._row(names))
        out += [self._row(row) for row in cells]
        return "".join(line + "\n" for line in out)

    def _row(self, cells: list[str]) -> str:
        assert self._widths is not None
        self._widths = [max(w, len(c)) for w, c in zip(self._widths, cells)]
        first, *rest = cells
        return "  ".join([first.ljust(self._widths[0]), *(c.rjust(w) for c, w in zip(rest, self._widths[1:]))])


def _same_columns(frames: Iterable[pd.DataFrame]) -> Iterable[pd.DataFrame]:
    """Every frame with the first frame's columns, in its order. A column that first shows up
    later cannot join a file whose header (or schema) is written: that is an error naming it,
    never a silently shifted or dropped value. Declared columns are always present."""
    columns: list[Any] | None = None
    rows = 0
    for frame in frames:
        if columns is None:
            columns = list(frame.columns)
        else:
            new = [c for c in frame.columns if c not in columns]
            if new:
                raise TsstoreError(
                    f"column(s) {new} first appear after {rows} rows; declare them in the SeriesSpec's "
                    "columns (or select columns with --columns) so every part of the output has them"
                )
            frame = frame.reindex(columns=columns)
        rows += len(frame)
        yield frame


def _records(frame: pd.DataFrame) -> Iterable[dict[str, Any]]:
    names = [str(c) for c in frame.columns]
    index_name = str(frame.index.name or "timestamp")
    for stamp, values in zip(frame.index, frame.itertuples(index=False, name=None)):
        record: dict[str, Any] = {index_name: stamp.isoformat() if hasattr(stamp, "isoformat") else stamp}
        for name, value in zip(names, values):
            if value is None or value is pd.NA or (isinstance(value, float) and value != value) or value is pd.NaT:
                continue
            target = record
            *parents, leaf = name.split(".")
            for part in parents:
                target = target.setdefault(part, {})
            target[leaf] = value
        yield record


def _json_default(value: Any) -> Any:
    if hasattr(value, "total_seconds"):
        return value.total_seconds()  # a duration, in seconds
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):
        return value.item()  # numpy scalars
    if isinstance(value, bytes):
        return value.hex()
    return str(value)


def _tables(frames: Iterable[pd.DataFrame]) -> Iterable[pa.Table]:
    """Each frame as an Arrow table, its time index as the first column, every table of the
    first one's schema (a column that changes type is an error saying what to declare)."""
    schema: pa.Schema | None = None
    rows = 0
    for frame in _same_columns(frames):
        with warnings.catch_warnings():
            # pyarrow < 26 reads tz-aware columns through Series.values, which pandas 3.1
            # deprecates; the UTC values and the column's zone are kept all the same.
            warnings.filterwarnings("ignore", message="Series.values returning an ndarray that drops timezone")
            table = pa.Table.from_pandas(frame.reset_index(), preserve_index=False)
        if schema is None:
            schema = table.schema
        else:
            try:
                table = table.cast(schema)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
                raise TsstoreError(
                    f"a column changed type after the first {rows} rows ({exc}); declare the column "
                    "types in the SeriesSpec's columns for a stable schema"
                ) from exc
        rows += len(frame)
        yield table


#: The schema of a file of no rows.
_NO_ROWS = pa.schema([("timestamp", pa.timestamp("us", tz="UTC"))])


def _parquet(frames: Iterable[pd.DataFrame], output: Path) -> int:
    import pyarrow.parquet as pq  # only when asked: every command imports this module

    writer: pq.ParquetWriter | None = None
    rows = 0
    try:
        for table in _tables(frames):
            if writer is None:
                writer = pq.ParquetWriter(output, table.schema)
            writer.write_table(table)
            rows += table.num_rows
        if writer is None:  # no rows at all: still a valid (empty) file
            pq.write_table(_NO_ROWS.empty_table(), output)
    finally:
        if writer is not None:
            writer.close()
    return rows


def _arrow_stream(frames: Iterable[pd.DataFrame], output: Path | None) -> int:
    """An Arrow IPC stream (``pyarrow.ipc.open_stream`` reads it) to ``output`` or stdout's
    bytes; refused on a terminal, which would show bytes, not rows."""
    if output is None and sys.stdout.isatty():
        raise usage("--format arrow writes binary: give --output FILE or pipe it on")
    sink: BinaryIO = open(output, "wb") if output else sys.stdout.buffer
    writer: pa.ipc.RecordBatchStreamWriter | None = None
    rows = 0
    try:
        for table in _tables(frames):
            if writer is None:
                writer = pa.ipc.new_stream(sink, table.schema)
            writer.write_table(table)
            rows += table.num_rows
        if writer is None:
            writer = pa.ipc.new_stream(sink, _NO_ROWS)
        writer.close()
        sink.flush()
    finally:
        if output:
            sink.close()
    return rows
