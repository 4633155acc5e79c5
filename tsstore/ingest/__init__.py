"""Load ticks from CSV, JSON Lines or Parquet files into a store, resumably.

Every row is parsed and coerced on its own: a bad row is rejected with its line number and
reason and never holds back the good ones. Rows go through the store's writer, whose ids
(with ``key_fields``) come from series key, time and, where needed, content and the row's
repeat number in the file (:mod:`tsstore.write.identity`), so writing a row again finds it
already present. A checkpoint file records the last line up to which every row is done
(stored or rejected) and how many rows before it went to the writer; a re-run after an
interruption skips those lines (counting their repeats as before) and reports them, and
rows after the checkpoint that an earlier run stored are found and reported as already
present, never stored twice.

Reading is chunked (CSV and JSON Lines line by line, Parquet by record batches), so memory
stays bounded whatever the file's size.
"""

from __future__ import annotations

import codecs
import csv
import dataclasses
import datetime as dt
import hashlib
import io
import json
import math
import os
import re
import time
import zoneinfo
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tsstore.errors import Interrupted, RecordError, TsstoreError, WriteError
from tsstore.spec import SeriesSpec
from tsstore.store import TimeSeriesStore
from tsstore.ticks import get_path
from tsstore.wire import database_id
from tsstore.write.identity import DuplicatePolicy

FORMATS: dict[str, tuple[str, ...]] = {
    "csv": (".csv",),
    "jsonl": (".jsonl", ".ndjson"),
    "parquet": (".parquet", ".pq"),
}
#: Longest text field accepted by default: Firestore indexes at most 1 500 bytes of a value,
#: and a longer field in a tick file is almost always a broken quote swallowing lines.
DEFAULT_MAX_FIELD_BYTES = 1500
_SURROGATE = re.compile("[\udc80-\udcff]")
_LEAP_SECOND = re.compile(r"\d\d:\d\d:60")
#: The checkpoint's format; a checkpoint of another version is not resumed from.
_CHECKPOINT_VERSION = 2
#: Largest CSV field read at all (a longer one is a reject, read no further): far above any
#: sensible ``max_field_bytes``, far below what would strain memory.
_CSV_FIELD_LIMIT = 64 * 1024 * 1024
#: Raw text kept of a rejected row in the reject file.
_RAW_KEPT = 4096
_FRACTION = re.compile(r"[.,](\d+)")
_TRUE = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


class IngestError(TsstoreError):
    """The file as a whole cannot be ingested (unreadable, unknown format, bad header)."""


@dataclass(frozen=True)
class Rejected:
    """A row that was not written: its line (row number for Parquet), why, and its text."""

    line: int
    reason: str
    raw: str


@dataclass
class IngestSummary:
    """What an ingest did with the ``rows`` it read after the checkpoint: ``created`` new
    documents, found ``present`` (stored before with the same content), ``replaced`` another
    tick's content (``on_duplicate="replace"``), ``rejected``; ``unsettled`` rows were not
    confirmed when Ctrl-C stopped it. ``skipped`` rows were done by an earlier run (up to the
    checkpoint's line ``resumed_from_line``); ``checkpoint_line`` is where the next run
    resumes."""

    path: Path
    rows: int = 0
    created: int = 0
    present: int = 0
    replaced: int = 0
    rejected: int = 0
    unsettled: int = 0
    skipped: int = 0
    seconds: float = 0.0
    resumed_from_line: int = 0
    checkpoint_line: int = 0
    interrupted: bool = False

    @property
    def written(self) -> int:
        """Rows now stored: created, present or replaced."""
        return self.created + self.present + self.replaced

    def describe(self) -> str:
        rate = self.rows / self.seconds if self.seconds else 0.0
        parts = [f"{self.created} stored new", f"{self.present} already present"]
        if self.replaced:
            parts.append(f"{self.replaced} replaced")
        parts.append(f"{self.rejected} rejected")
        if self.unsettled:
            parts.append(f"{self.unsettled} not confirmed")
        resumed = (
            f"; {self.skipped} rows up to line {self.resumed_from_line} skipped (done by an earlier run)"
            if self.resumed_from_line
            else ""
        )
        return (
            f"{self.path}: {self.rows} rows read: {', '.join(parts)}{resumed}; "
            f"in {self.seconds:.1f} s ({rate:,.0f} rows/s)"
        )

    def settle(self, result: Any) -> None:
        """Take the writer's counts (a :class:`~tsstore.store.WriteResult`)."""
        self.created, self.present, self.replaced = result.created, result.present, result.replaced
        self.unsettled = result.unsettled


def _naive_zone(policy: str) -> dt.tzinfo | None:
    """The zone naive times are read in: None to reject them, UTC, or an IANA zone by name
    (daylight-saving gaps and folds resolve as ``zoneinfo`` does: fold=0)."""
    if policy == "error":
        return None
    if policy == "utc":
        return dt.timezone.utc
    try:
        return zoneinfo.ZoneInfo(policy)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise IngestError(
            f"timezone policy {policy!r} is not allowed; use 'error', 'utc' or an IANA zone such as 'Europe/Rome'"
        ) from None


def detect_format(path: Path, fmt: str | None = None) -> str:
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


def ingest_file(
    store: TimeSeriesStore,
    path: str | os.PathLike[str],
    *,
    fmt: str | None = None,
    naive: str = "error",
    strict: bool = False,
    max_field_bytes: int = DEFAULT_MAX_FIELD_BYTES,
    on_duplicate: DuplicatePolicy | None = None,
    checkpoint: str | os.PathLike[str] | None = None,
    on_progress: Callable[[int], None] | None = None,
    on_reject: Callable[[Rejected], None] | None = None,
    on_status: Callable[[str | None], None] | None = None,
) -> IngestSummary:
    """Ingest one file into ``store``; see the module doc. ``naive`` says what a time without
    an offset means: ``"error"`` (reject the row), ``"utc"``, or an IANA zone name.
    ``on_duplicate`` overrides the spec's duplicate policy (:mod:`tsstore.write.identity`).
    ``checkpoint`` is the checkpoint file (default: beside the input, one per target:
    :func:`default_checkpoint`). ``on_progress`` gets the number of rows finished (stored or
    rejected) since its last call; ``on_status`` what the writer waits for (retries).

    Ctrl-C raises :class:`~tsstore.errors.Interrupted` whose ``partial`` is the summary, once
    the checkpoint is saved: the same call resumes after it."""
    source = Path(path)
    if not source.is_file():
        raise IngestError(f"{str(source)!r} is not a file")
    zone = _naive_zone(naive)
    if not store.spec.key_fields:
        raise IngestError(
            f"the spec for {store.spec.collection!r} has no key_fields: ids would be random, so a re-run "
            "would duplicate ticks; declare key_fields (e.g. ['symbol'])"
        )
    policy = store.spec.on_duplicate if on_duplicate is None else on_duplicate
    kind = detect_format(source, fmt)
    parser = _RowParser(store.spec, zone=zone, strict=strict, max_field_bytes=max_field_bytes)
    identity = _identity(source, store.spec)
    # A checkpoint holds only for the same target and the same reading of the file.
    identity.update(
        project=store.client.project,
        database=database_id(store.client),
        format=kind,
        naive=naive,
        strict=strict,
        max_field_bytes=max_field_bytes,
        on_duplicate=policy,
        checkpoint_version=_CHECKPOINT_VERSION,
    )
    marker = _Checkpoint(Path(checkpoint) if checkpoint else default_checkpoint(source, identity))
    resume, done_records = marker.load(identity)
    summary = IngestSummary(source, resumed_from_line=resume, checkpoint_line=resume)
    tracker = _Watermark(resume, done_records)
    started = time.perf_counter()

    def finished(count: int) -> None:
        if on_progress is not None and count:
            on_progress(count)
        if tracker.line > marker.saved_line and time.perf_counter() - marker.saved_at > 0.5:
            marker.save(identity, tracker.line, tracker.records)

    def reject(rejected: Rejected) -> None:
        summary.rejected += 1
        if on_reject is not None:
            on_reject(rejected)

    def records() -> Iterator[dict[str, Any]]:
        for line, row in _read(kind, source, parser):
            if line <= resume:
                summary.skipped += 1
                if not isinstance(row, Rejected):
                    yield row  # numbered for identity by the writer, not sent again
                continue
            summary.rows += 1
            if isinstance(row, Rejected):
                reject(row)
                tracker.done_now(line)
                finished(1)
                continue
            tracker.sent(line)
            yield row

    def record_rejected(error: RecordError) -> None:
        line = tracker.line_of(error.index)
        reject(Rejected(line, error.reason, ""))
        tracker.confirm([error.index])
        finished(1)

    def written(indexes: list[int]) -> None:
        tracker.confirm(indexes)
        finished(len(indexes))

    def close() -> None:
        summary.seconds = time.perf_counter() - started
        marker.save(identity, tracker.line, tracker.records)
        summary.checkpoint_line = tracker.line

    try:
        result = store.write(
            records(),
            on_duplicate=policy,
            on_reject=record_rejected,
            on_written=written,
            on_status=on_status,
            skip_first=done_records,
            keep_ids=False,
        )
    except WriteError as error:
        # Firestore refused these after retries: they are rejects too, and the checkpoint
        # stays before them, so the next run tries them again.
        summary.settle(error.result)
        for failure in error.failures:
            reject(Rejected(tracker.line_of(failure.index), f"Firestore refused it: {failure.message}", ""))
    except KeyboardInterrupt as stop:  # the writer's Interrupted, or a Ctrl-C before it began
        if isinstance(stop, Interrupted):
            summary.settle(stop.partial)
        summary.interrupted = True
        summary.unsettled = tracker.pending  # read and handed to the writer, not confirmed
        close()
        raise Interrupted(summary, f"ingest of {source} interrupted") from stop
    else:
        summary.settle(result)
    close()
    return summary


# ------------------------------------------------------------------------------ parsing


class _RowParser:
    """Turns one row's cells into a record, or a reason it cannot be one."""

    def __init__(self, spec: SeriesSpec, *, zone: dt.tzinfo | None, strict: bool, max_field_bytes: int) -> None:
        self.spec = spec
        self.zone = zone
        self.strict = strict
        self.max_field_bytes = max_field_bytes
        self.types = dict(spec.columns)
        known = {spec.timestamp_field, spec.shard_field, *self.types, *spec.key_fields, *spec.count_by}
        known |= spec.filter_fields
        if spec.expire_after is not None:
            known.add(spec.expire_field)
        self.known = frozenset(known)
        self._builders: dict[tuple[str, ...], Callable[[list[Any]], dict[str, Any]]] = {}

    def converter(self, column: str) -> Callable[[Any], Any]:
        if column == self.spec.timestamp_field:
            return self.time
        kind = self.types.get(column, "string")
        return {
            "string": _as_text,
            "Int64": _as_int,
            "Float64": _as_float,
            "boolean": _as_bool,
            "datetime": self.time,
            "object": _as_is,
        }[kind]

    def time(self, value: Any) -> dt.datetime:
        if isinstance(value, dt.datetime):
            parsed = value
        elif isinstance(value, str):
            try:
                parsed = dt.datetime.fromisoformat(value)
            except ValueError:
                if _LEAP_SECOND.search(value):
                    raise _Reject(f"{value!r} is a leap second (:60); Firestore times have none") from None
                raise _Reject(f"{value!r} is not an ISO-8601 time") from None
            dot = max(value.find("."), value.find(",", 10))  # ISO allows a comma as decimal mark
            if dot >= 0 and value[dot + 7 : dot + 8].isdigit():  # a 7th fractional digit: look closer
                fraction = _FRACTION.search(value)
                if fraction and fraction.group(1)[6:].strip("0"):
                    raise _Reject(f"{value!r} has sub-microsecond digits; Firestore keeps microseconds")
        else:
            raise _Reject(f"{value!r} is not a time")
        if parsed.tzinfo is None:
            if self.zone is None:
                raise _Reject(
                    f"{value!s} has no timezone; give an offset or choose a timezone policy (--naive utc or a zone)"
                )
            parsed = parsed.replace(tzinfo=self.zone)
        return parsed

    def record(self, items: Mapping[str, Any]) -> dict[str, Any]:
        """A nested record from an already typed row (JSON Lines, Parquet) with dotted names."""
        names = tuple(items)
        build = self._builders.get(names)
        if build is None:
            if len(self._builders) > 256:  # rows with ever-changing keys: keep memory bounded
                self._builders.clear()
            build = self._builders[names] = self.compile(list(names), typed=True)
        return build(list(items.values()))

    def compile(self, names: list[str], *, typed: bool = False) -> Callable[[list[Any]], dict[str, Any]]:
        """A record builder for rows of cells under ``names``: the per-column work (converter,
        nesting, checks) is decided once, since the builder runs for every row. ``typed``
        rows (JSON, Parquet) keep the types of undeclared values; text rows (CSV) are text."""
        plan = []
        for i, name in enumerate(names):
            conv = self.converter(name) if (name in self.known or not typed) else _as_is
            passthrough = conv is _as_is or (conv is _as_text and not typed)
            *parents, leaf = name.split(".")
            plan.append((i, name, None if passthrough else conv, tuple(parents), leaf, name in self.known))
        strict, limit = self.strict, self.max_field_bytes
        ts_path = self.spec.timestamp_field.split(".")

        def build(row: list[str]) -> dict[str, Any]:
            record: dict[str, Any] = {}
            for i, name, conv, parents, leaf, known in plan:
                raw = row[i]
                if raw == "" or raw is None:
                    continue
                if strict and not known:
                    raise _Reject(f"unknown column {name!r} has a value (strict: declared columns only)")
                if type(raw) is str and len(raw) * 4 > limit and len(raw.encode()) > limit:
                    raise _Reject(f"column {name!r} is {len(raw.encode())} bytes; at most {limit} allowed")
                if conv is None:
                    value: Any = raw
                else:
                    try:
                        value = conv(raw)
                    except _Reject as bad:
                        raise _Reject(f"column {name!r}: {bad}") from None
                target = record
                for part in parents:
                    target = target.setdefault(part, {})
                    if not isinstance(target, dict):
                        raise _Reject(f"column {name!r} collides with a value at {part!r}")
                target[leaf] = value
            if get_path(record, ts_path) is None:
                raise _Reject(f"timestamp {'.'.join(ts_path)!r} is missing")
            return record

        return build


class _Reject(Exception):
    pass


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def _as_int(value: Any) -> int:
    if isinstance(value, bool):
        raise _Reject(f"{value!r} is not an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, float):
        raise _Reject(f"{value!r} is not an integer")
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        raise _Reject(f"{value!r} is not an integer") from None


def _as_float(value: Any) -> float:
    if isinstance(value, bool):
        raise _Reject(f"{value!r} is not a number")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise _Reject(f"{value!r} is not a number") from None
    if not math.isfinite(number):
        # NaN in a file usually stands for "missing", which an empty cell says without loss.
        raise _Reject(f"{value!r} is not a finite number (leave the cell empty for a missing value)")
    return number


def _as_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    found = _TRUE.get(str(value).strip().lower())
    if found is None:
        raise _Reject(f"{value!r} is not true/false")
    return found


def _as_is(value: Any) -> Any:
    return value


def _read(kind: str, path: Path, parser: _RowParser) -> Iterator[tuple[int, dict[str, Any] | Rejected]]:
    if kind == "csv":
        return _read_csv(path, parser)
    if kind == "jsonl":
        return _read_jsonl(path, parser)
    return _read_parquet(path, parser)


def _read_csv(path: Path, parser: _RowParser) -> Iterator[tuple[int, dict[str, Any] | Rejected]]:
    # Invalid UTF-8 becomes lone surrogates, so one bad byte rejects one row, not the file.
    # utf-8-sig: a byte-order mark (spreadsheet exports) is not part of the first column's name.
    # strict: a stray quote (`"ab"cd`, or one never closed) is an error for that row, which
    # becomes a reject; the reader then goes on with the next line.
    previous_limit = csv.field_size_limit(_CSV_FIELD_LIMIT)
    try:
        with open(path, encoding="utf-8-sig", errors="surrogateescape", newline="") as handle:
            reader = csv.reader(handle, strict=True)
            try:
                header = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise IngestError(f"{path}: line 1 (the header) is not valid CSV: {exc}") from None
            yield from _csv_rows(path, reader, header, parser)
    finally:
        csv.field_size_limit(previous_limit)


def _csv_rows(
    path: Path, reader: Any, header: list[str], parser: _RowParser
) -> Iterator[tuple[int, dict[str, Any] | Rejected]]:
    if _SURROGATE.search("".join(header)):
        raise IngestError(f"{path}: line 1 (the header) is not valid UTF-8")
    names = [h.strip() for h in header]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise IngestError(f"{path}: the header names {dupes} more than once; each column must be named once")
    if parser.spec.timestamp_field not in names:
        raise IngestError(f"{path}: the header has no {parser.spec.timestamp_field!r} column (found {names})")
    build = parser.compile(names)
    width = len(names)
    check_utf8 = not _valid_utf8(path)  # a clean file (the usual case) needs no per-row check
    line = reader.line_num
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            first, line = line + 1, reader.line_num
            span = f"line {first}" if line <= first else f"lines {first}-{line}"
            yield first, Rejected(first, f"malformed CSV ({exc}) in {span}; a stray or unclosed quote?", "")
            continue
        first, line = line + 1, reader.line_num  # a quoted field may span lines
        if not row:
            yield first, Rejected(first, "empty line", "")
        elif check_utf8 and _SURROGATE.search(",".join(row)):
            text = ",".join(row).encode("utf-8", "surrogateescape").decode("latin-1")
            yield first, Rejected(first, "invalid UTF-8", _raw(text))
        elif row == header:
            yield first, Rejected(first, "repeated header row", ",".join(row))
        elif len(row) != width:
            yield first, Rejected(first, f"has {len(row)} fields, the header has {width}", _raw(",".join(row)))
        else:
            try:
                yield first, build(row)
            except _Reject as bad:
                yield first, Rejected(first, str(bad), _raw(",".join(row)))


def _raw(text: str) -> str:
    """A rejected row's text for the reject file, cut short when huge."""
    if len(text) <= _RAW_KEPT:
        return text
    return f"{text[:_RAW_KEPT]}…[{len(text) - _RAW_KEPT} more characters]"


def _valid_utf8(path: Path) -> bool:
    """Whether the whole file is valid UTF-8 (decoded in C, in 1 MiB steps)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(path, "rb") as handle:
            while block := handle.read(1 << 20):
                decoder.decode(block)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _read_jsonl(path: Path, parser: _RowParser) -> Iterator[tuple[int, dict[str, Any] | Rejected]]:
    with open(path, "rb") as handle:
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
                yield number, Rejected(number, f"not JSON: {exc}", _raw(text.rstrip("\n")))
                continue
            if not isinstance(value, dict):
                yield (
                    number,
                    Rejected(number, f"is a JSON {type(value).__name__}, not an object", _raw(text.rstrip("\n"))),
                )
                continue
            try:
                yield number, parser.record(dict(_flatten(value)))
            except _Reject as bad:
                yield number, Rejected(number, str(bad), _raw(text.rstrip("\n")))
            except UnicodeEncodeError:
                yield (
                    number,
                    Rejected(number, "text that is not valid Unicode (a lone surrogate)", _raw(text.rstrip("\n"))),
                )


def _read_parquet(path: Path, parser: _RowParser) -> Iterator[tuple[int, dict[str, Any] | Rejected]]:
    import pyarrow.parquet as pq

    try:
        parquet = pq.ParquetFile(path)
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise IngestError(f"{path}: not a readable Parquet file ({exc})") from exc
    number = 0
    for batch in parquet.iter_batches(batch_size=10_000):
        for value in batch.to_pylist():
            number += 1
            try:
                yield number, parser.record(dict(_flatten(value)))
            except _Reject as bad:
                yield number, Rejected(number, str(bad), _raw(json.dumps(value, default=str)))


def _flatten(value: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    for key, item in value.items():
        if isinstance(item, dict) and item:
            yield from _flatten(item, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", item


# --------------------------------------------------------------------------- checkpoints


def _identity(path: Path, spec: SeriesSpec) -> dict[str, Any]:
    """What a checkpoint belongs to: the file (size, mtime, first MiB) and the collection."""
    stat = path.stat()
    with open(path, "rb") as handle:
        head = hashlib.sha256(handle.read(1 << 20)).hexdigest()
    return {
        "file": str(path.resolve()),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "head_sha256": head,
        "collection": spec.collection,
    }


def default_checkpoint(source: Path, identity: Mapping[str, Any]) -> Path:
    """``<file>.<target>.tsstore-checkpoint.json`` beside the input, where ``<target>`` is a short
    hash of project, database and collection: loading one file into two targets keeps two
    checkpoints."""
    target = json.dumps([identity.get("project"), identity.get("database"), identity.get("collection")])
    return source.with_name(f"{source.name}.{hashlib.sha256(target.encode()).hexdigest()[:8]}.tsstore-checkpoint.json")


class _Checkpoint:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.saved_line = 0
        self.saved_at = 0.0

    def load(self, identity: Mapping[str, Any]) -> tuple[int, int]:
        """(line, records): every row up to ``line`` is done, and ``records`` of them went
        to the writer. (0, 0) when there is no checkpoint for this identity."""
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return 0, 0
        if not isinstance(data, dict) or data.get("identity") != dict(identity):
            return 0, 0  # another file, or this one changed: start over (creates make that safe)
        line, records = data.get("line"), data.get("records")
        if not (isinstance(line, int) and isinstance(records, int) and 0 <= records <= line):
            return 0, 0
        self.saved_line = line
        return line, records

    def save(self, identity: Mapping[str, Any], line: int, records: int) -> None:
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"identity": dict(identity), "line": line, "records": records}, indent=2))
        os.replace(tmp, self.path)  # atomic: a kill never leaves half a checkpoint
        self.saved_line, self.saved_at = line, time.perf_counter()


class _Watermark:
    """The last line up to which every row is done, while batches finish out of order, and
    how many of the rows up to it went to the writer (``records``).

    Rows enter in input order; the writer's record positions count only the rows sent to it
    (rejected rows are done at once), starting after the ``records`` an earlier run did.
    Parallel deques hold the not-yet-passed rows.
    """

    def __init__(self, start: int, records: int) -> None:
        self.line = start
        self.records = records
        self._lines: deque[int] = deque()
        self._done: deque[bool] = deque()
        self._to_writer: deque[bool] = deque()
        self._slot_of: dict[int, int] = {}  # writer position -> absolute slot number, until confirmed
        self._sent = records
        self._base = 0  # absolute slot number of self._lines[0]

    @property
    def pending(self) -> int:
        """Rows handed to the writer and not yet confirmed."""
        return len(self._slot_of)

    def sent(self, line: int) -> None:
        self._slot_of[self._sent] = self._base + len(self._lines)
        self._sent += 1
        self._lines.append(line)
        self._done.append(False)
        self._to_writer.append(True)

    def done_now(self, line: int) -> None:
        self._lines.append(line)
        self._done.append(True)
        self._to_writer.append(False)
        self._advance()

    def line_of(self, index: int) -> int:
        slot = self._slot_of.get(index, -1) - self._base
        return self._lines[slot] if 0 <= slot < len(self._lines) else 0

    def confirm(self, indexes: list[int]) -> None:
        done, base, slot_of = self._done, self._base, self._slot_of
        for index in indexes:
            slot = slot_of.pop(index, -1) - base
            if slot >= 0:
                done[slot] = True
        self._advance()

    def _advance(self) -> None:
        lines, done, to_writer = self._lines, self._done, self._to_writer
        while done and done[0]:
            done.popleft()
            self.records += to_writer.popleft()
            self.line = lines.popleft()
            self._base += 1


def write_rejects(path: Path) -> tuple[Callable[[Rejected], None], Callable[[], None]]:
    """A reject sink writing ``line,reason,raw`` rows to ``path`` (appending, header once),
    and its closer."""
    new = not path.exists() or path.stat().st_size == 0
    handle: io.TextIOWrapper | None = None
    writer: Any = None

    def sink(rejected: Rejected) -> None:
        nonlocal handle, writer
        if handle is None:
            handle = open(path, "a", encoding="utf-8", newline="")
            writer = csv.writer(handle)
            if new:
                writer.writerow(["line", "reason", "raw"])
        writer.writerow(dataclasses.astuple(rejected))
        handle.flush()

    def close() -> None:
        if handle is not None:
            handle.close()

    return sink, close
