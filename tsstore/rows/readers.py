"""Reading tick files row by row: CSV, JSON Lines and Parquet, and telling them apart.

Each reader yields ``(line, record or Rejected)`` in file order (Parquet: the row number),
in bounded memory (CSV and JSON Lines line by line, Parquet by record batches). A bad row is
a :class:`~tsstore.rows.rejects.Rejected`; a file that cannot be read at all is an
:class:`~tsstore.errors.IngestError`.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import PurePath
from typing import IO, Any

from tsstore.errors import IngestError
from tsstore.rows.parse import BadRow, RowParser
from tsstore.rows.rejects import Rejected, clip_raw

FORMATS: dict[str, tuple[str, ...]] = {
    "csv": (".csv",),
    "jsonl": (".jsonl", ".ndjson"),
    "parquet": (".parquet", ".pq"),
}
#: Largest CSV field read at all (a longer one is a reject, read no further): far above any
#: sensible ``max_field_bytes``, far below what would strain memory.
_CSV_FIELD_LIMIT = 64 * 1024 * 1024
_SURROGATE = re.compile("[\udc80-\udcff]")

#: One row as read: its line (row number for Parquet) and its record, or why it has none.
NumberedRow = tuple[int, dict[str, Any] | Rejected]

#: Opens the file for reading bytes (a local file by default; Beam's file IO gives others,
#: such as ``gs://`` objects). Called once per pass over the file.
Opener = Callable[[], IO[bytes]]


def detect_format(path: PurePath, fmt: str | None = None) -> str:
    if fmt is not None:
        if fmt not in FORMATS:
            raise IngestError(f"format {fmt!r} is not supported; use one of {', '.join(FORMATS)}")
        return fmt
    for name, suffixes in FORMATS.items():
        if path.suffix.lower() in suffixes:
            return name
    raise IngestError(
        f"cannot tell the format of {str(path)!r} from its suffix; name it with --format ({', '.join(FORMATS)})"
    )


def read_rows(kind: str, path: PurePath, parser: RowParser, *, opener: Opener | None = None) -> Iterator[NumberedRow]:
    """Every row of the file at ``path`` in format ``kind`` (see :data:`FORMATS`), opened
    with ``opener`` when given (``path`` then only names the file in messages)."""
    source = opener or (lambda: open(path, "rb"))
    if kind == "csv":
        return _read_csv(path, source, parser)
    if kind == "jsonl":
        return _read_jsonl(path, source, parser)
    return _read_parquet(path, source, parser)


def _read_csv(path: PurePath, opener: Opener, parser: RowParser) -> Iterator[NumberedRow]:
    # Invalid UTF-8 becomes lone surrogates, so one bad byte rejects one row, not the file.
    # utf-8-sig: a byte-order mark (spreadsheet exports) is not part of the first column's name.
    # strict: a stray quote (`"ab"cd`, or one never closed) is an error for that row, which
    # becomes a reject; the reader then goes on with the next line.
    previous_limit = csv.field_size_limit(_CSV_FIELD_LIMIT)
    try:
        with io.TextIOWrapper(opener(), encoding="utf-8-sig", errors="surrogateescape", newline="") as handle:
            lines = _Lines(handle)
            reader = csv.reader(lines, strict=True)
            try:
                header = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise IngestError(f"{path}: line 1 (the header) is not valid CSV: {exc}") from None
            yield from _csv_rows(path, reader, lines, header, parser, opener)
    finally:
        csv.field_size_limit(previous_limit)


class _Lines:
    """The file's lines as the CSV reader takes them, keeping those of the current record:
    a record that spans lines and is malformed (one unclosed quote swallows the lines after
    it) is read again line by line."""

    def __init__(self, handle: Iterator[str]) -> None:
        self._handle = handle
        self.taken: list[str] = []

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = next(self._handle)
        self.taken.append(line)
        return line


def _csv_rows(
    path: PurePath, reader: Any, lines: _Lines, header: list[str], parser: RowParser, opener: Opener
) -> Iterator[NumberedRow]:
    if _SURROGATE.search("".join(header)):
        raise IngestError(f"{path}: line 1 (the header) is not valid UTF-8")
    names = [h.strip() for h in header]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise IngestError(f"{path}: the header names {dupes} more than once; each column must be named once")
    if parser.time_column not in names:
        hint = "" if parser.time_column != parser.spec.timestamp_field else "; name the time column with --time-column"
        raise IngestError(f"{path}: the header has no {parser.time_column!r} column (found {names}){hint}")
    build = parser.compile(names)
    width = len(names)
    check_utf8 = not _valid_utf8(opener)  # a clean file (the usual case) needs no per-row check
    line = reader.line_num

    def one(first: int, row: list[str]) -> NumberedRow:
        if not row:
            return first, Rejected(first, "empty line", "")
        if check_utf8 and _SURROGATE.search(",".join(row)):
            text = ",".join(row).encode("utf-8", "surrogateescape").decode("latin-1")
            return first, Rejected(first, "invalid UTF-8", clip_raw(text))
        if row == header:
            return first, Rejected(first, "repeated header row", ",".join(row))
        if len(row) != width:
            return first, Rejected(first, f"has {len(row)} fields, the header has {width}", clip_raw(",".join(row)))
        try:
            return first, build(row)
        except BadRow as bad:
            return first, Rejected(first, str(bad), clip_raw(",".join(row)))

    while True:
        lines.taken.clear()
        try:
            row: list[str] | None = next(reader)
            error = ""
        except StopIteration:
            return
        except csv.Error as exc:
            row, error = None, str(exc)
        first, line = line + 1, reader.line_num  # a quoted field may span lines
        if len(lines.taken) > 1 and (row is None or len(row) != width):
            # A quote left open swallowed the lines after it: only its own line is bad.
            taken = list(lines.taken)
            why = "a quote opened on this line is not closed" + (f" (malformed CSV: {error})" if error else "")
            yield (
                first,
                Rejected(first, f"{why}; the lines after it are read on their own", clip_raw(taken[0].rstrip("\r\n"))),
            )
            for number, text in enumerate(taken[1:], start=first + 1):
                try:
                    again = next(csv.reader([text], strict=True), [])
                except csv.Error as exc:
                    yield number, Rejected(number, f"malformed CSV ({exc}); a stray or unclosed quote?",
                                           clip_raw(text.rstrip("\r\n")))  # fmt: skip
                    continue
                yield one(number, again)
            continue
        if row is None:
            yield first, Rejected(first, f"malformed CSV ({error}); a stray or unclosed quote?",
                                  clip_raw("".join(lines.taken).rstrip("\r\n")))  # fmt: skip
            continue
        yield one(first, row)


def _valid_utf8(opener: Opener) -> bool:
    """Whether the whole file is valid UTF-8 (decoded in C, in 1 MiB steps)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with opener() as handle:
            while block := handle.read(1 << 20):
                decoder.decode(block)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _read_jsonl(path: PurePath, opener: Opener, parser: RowParser) -> Iterator[NumberedRow]:
    with opener() as handle:
        for number, blob in enumerate(handle, start=1):
            try:
                text = blob.decode("utf-8")
            except UnicodeDecodeError:
                yield number, Rejected(number, "invalid UTF-8", blob.decode("latin-1").rstrip("\n"))
                continue
            if not text.strip():
                yield number, Rejected(number, "empty line", "")
                continue
            try:
                value = json.loads(text)
            except ValueError as exc:
                yield number, Rejected(number, f"not JSON: {exc}", clip_raw(text.rstrip("\n")))
                continue
            if not isinstance(value, dict):
                yield (
                    number,
                    Rejected(number, f"is a JSON {type(value).__name__}, not an object", clip_raw(text.rstrip("\n"))),
                )
                continue
            try:
                yield number, parser.record(dict(_flatten(value)))
            except BadRow as bad:
                yield number, Rejected(number, str(bad), clip_raw(text.rstrip("\n")))
            except UnicodeEncodeError:
                yield (
                    number,
                    Rejected(number, "text that is not valid Unicode (a lone surrogate)", clip_raw(text.rstrip("\n"))),
                )


def _read_parquet(path: PurePath, opener: Opener, parser: RowParser) -> Iterator[NumberedRow]:
    import pyarrow.parquet as pq

    with opener() as handle:
        try:
            parquet = pq.ParquetFile(handle)
        except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
            raise IngestError(f"{path}: not a readable Parquet file ({exc})") from exc
        number = 0
        for batch in parquet.iter_batches(batch_size=10_000):
            for value in batch.to_pylist():
                number += 1
                try:
                    yield number, parser.record(dict(_flatten(value)))
                except BadRow as bad:
                    yield number, Rejected(number, str(bad), clip_raw(json.dumps(value, default=str)))


def _flatten(value: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, item in value.items():
        if isinstance(item, dict) and item:
            yield from _flatten(item, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", item
