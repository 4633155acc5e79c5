"""One ingest, start to end: read the file, parse its rows, write them through the store,
keep the checkpoint and count what happened (:class:`IngestSummary`)."""

from __future__ import annotations

import functools
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ParamSpec

from tsstore import telemetry
from tsstore.databases import location_of
from tsstore.errors import IngestError, Interrupted, RecordError, WriteError
from tsstore.ingest.checkpoint import CHECKPOINT_VERSION, Checkpoint, Watermark, default_checkpoint, file_identity
from tsstore.logs import DB_COLLECTION, DB_OPERATION, TICKS_REJECTED, TICKS_WRITTEN
from tsstore.rows.parse import DEFAULT_MAX_FIELD_BYTES, RowParser
from tsstore.rows.readers import detect_format, read_rows
from tsstore.rows.rejects import Rejected, clip_raw
from tsstore.spec import DuplicatePolicy
from tsstore.store import TimeSeriesStore
from tsstore.times import naive_zone

log = logging.getLogger(__name__)


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
    checkpoint_removed: bool = False

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
        done = "; the file is done (checkpoint removed)" if self.checkpoint_removed else ""
        return (
            f"{self.path}: {self.rows} rows read: {', '.join(parts)}{resumed}; "
            f"in {self.seconds:.1f} s ({rate:,.0f} rows/s){done}"
        )

    def settle(self, result: Any) -> None:
        """Take the writer's counts (a :class:`~tsstore.store.WriteResult`)."""
        self.created, self.present, self.replaced = result.created, result.present, result.replaced
        self.unsettled = result.unsettled


P = ParamSpec("P")


def _traced(ingest: Callable[P, IngestSummary]) -> Callable[P, IngestSummary]:
    """``ingest`` as one span, ``ingest {collection}``, its store's verbs under it, and what it did."""

    @functools.wraps(ingest)
    def traced(*args: P.args, **kwargs: P.kwargs) -> IngestSummary:
        store: TimeSeriesStore = args[0] if args else kwargs["store"]  # type: ignore[assignment]
        with telemetry.operation(f"ingest {store.spec.collection}",
                                 {DB_COLLECTION: store.spec.collection, DB_OPERATION: "ingest"}) as span:
            summary = ingest(*args, **kwargs)
            span.set_attributes({"tsstore.rows": summary.rows, TICKS_WRITTEN: summary.written,
                                 TICKS_REJECTED: summary.rejected})  # fmt: skip
            return summary

    return traced


@_traced
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
    time_column: str | None = None,
    time_unit: str | None = None,
) -> IngestSummary:
    """Ingest one file into ``store``; see :mod:`tsstore.ingest`. ``naive`` says what a time
    without an offset means: ``"error"`` (reject the row), ``"utc"``, or an IANA zone name.
    ``on_duplicate`` overrides the spec's duplicate policy (:mod:`tsstore.write.identity`).
    ``time_column`` names the column holding the tick's time when it is not the spec's
    timestamp field; ``time_unit`` (``"s"``, ``"ms"``, ``"us"``, ``"ns"``) reads it as a number
    of those since the Unix epoch instead of ISO-8601 text.
    ``checkpoint`` is the checkpoint file (default: beside the input, one per target:
    :func:`~tsstore.ingest.checkpoint.default_checkpoint`). ``on_progress`` gets the number of
    rows finished (stored or rejected) since its last call; ``on_status`` what the writer
    waits for (retries).

    Ctrl-C raises :class:`~tsstore.errors.Interrupted` whose ``partial`` is the summary, once
    the checkpoint is saved: the same call resumes after it."""
    source = Path(path)
    if not source.is_file():
        raise IngestError(f"{str(source)!r} is not a file")
    try:
        zone = naive_zone(naive)
    except ValueError as exc:
        raise IngestError(str(exc)) from None
    if not store.spec.key_fields:
        raise IngestError(
            f"the spec for {store.spec.collection!r} has no key_fields: ids would be random, so a re-run "
            "would duplicate ticks; declare key_fields (e.g. ['symbol'])"
        )
    policy = store.spec.on_duplicate if on_duplicate is None else on_duplicate
    kind = detect_format(source, fmt)
    parser = RowParser(store.spec, zone=zone, strict=strict, max_field_bytes=max_field_bytes,
                       time_column=time_column, time_unit=time_unit)  # fmt: skip
    identity = file_identity(source, store.spec)
    # A checkpoint holds only for the same target and the same reading of the file.
    project, database = location_of(store.client)
    identity.update(
        project=project,
        database=database,
        format=kind,
        naive=naive,
        strict=strict,
        max_field_bytes=max_field_bytes,
        on_duplicate=policy,
        checkpoint_version=CHECKPOINT_VERSION,
        **({"time_column": time_column} if time_column else {}),
        **({"time_unit": time_unit} if time_unit else {}),
    )
    marker = Checkpoint(Path(checkpoint) if checkpoint else default_checkpoint(source, identity))
    resume, done_records = marker.load(identity)
    summary = IngestSummary(source, resumed_from_line=resume, checkpoint_line=resume)
    tracker = Watermark(resume, done_records)
    started = time.perf_counter()

    def finished(count: int) -> None:
        if on_progress is not None and count:
            on_progress(count)
        if tracker.line > marker.saved_line and time.perf_counter() - marker.saved_at > 0.5:
            marker.save(identity, tracker.line, tracker.records)

    def reject(rejected: Rejected) -> None:
        summary.rejected += 1
        telemetry.rejected(store.spec.collection)
        if on_reject is not None:
            on_reject(rejected)

    # Rows handed to the writer and not yet settled, by the writer's record index: a row the
    # writer or Firestore refuses goes to the reject file with its content.
    in_flight: dict[int, dict[str, Any]] = {}

    def records() -> Iterator[dict[str, Any]]:
        index = 0
        for line, row in read_rows(kind, source, parser):
            if line <= resume:
                summary.skipped += 1
                if not isinstance(row, Rejected):
                    index += 1
                    yield row  # numbered for identity by the writer, not sent again
                continue
            summary.rows += 1
            if isinstance(row, Rejected):
                reject(row)
                tracker.done_now(line)
                finished(1)
                continue
            tracker.sent(line)
            in_flight[index] = row
            index += 1
            yield row

    def raw_of(index: int) -> str:
        row = in_flight.pop(index, None)
        return "" if row is None else clip_raw(json.dumps(row, default=str, ensure_ascii=False))

    def record_rejected(error: RecordError) -> None:
        line = tracker.line_of(error.index)
        reject(Rejected(line, error.reason, raw_of(error.index)))
        tracker.confirm([error.index])
        finished(1)

    def written(indexes: list[int]) -> None:
        for index in indexes:
            in_flight.pop(index, None)
        tracker.confirm(indexes)
        finished(len(indexes))

    def close(*, done: bool = False) -> None:
        """Settle the time taken and the checkpoint: saved at the watermark, or removed once
        the file is done (a later ingest of it then reads every row again)."""
        summary.seconds = time.perf_counter() - started
        summary.checkpoint_line = tracker.line
        if done:
            marker.remove()
            summary.checkpoint_removed = True
        else:
            marker.save(identity, tracker.line, tracker.records)
        fields = {DB_COLLECTION: store.spec.collection, DB_OPERATION: "ingest", TICKS_WRITTEN: summary.written,
                  TICKS_REJECTED: summary.rejected}  # fmt: skip
        log.log(logging.WARNING if summary.rejected else logging.INFO, "ingest of %s", summary.describe(),
                extra=fields)  # fmt: skip

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
        # Refused records are rejects too. The duplicate policy's refusals are final, so the
        # checkpoint may pass them; it stays before any that Firestore refused after retries,
        # so the next run tries those again.
        summary.settle(error.result)
        final = [f.index for f in error.failures if f.by_policy]
        for failure in error.failures:
            reject(Rejected(tracker.line_of(failure.index), failure.reason,
                            raw_of(failure.index)))  # fmt: skip
        tracker.confirm(final)
        finished(len(final))
        if len(final) == len(error.failures):
            close(done=not summary.unsettled)
            return summary
    except KeyboardInterrupt as stop:  # the writer's Interrupted, or a Ctrl-C before it began
        if isinstance(stop, Interrupted):
            summary.settle(stop.partial)
        summary.interrupted = True
        # Read, with no outcome counted: handed to the writer and not confirmed, or read just
        # as the Ctrl-C came. From the counts themselves, not from the checkpoint's tracker: a
        # Ctrl-C can land between the writer counting a batch and the tracker confirming it,
        # and the summary's parts must add up to the rows read (the checkpoint stays behind
        # such rows; the next run finds them present).
        summary.unsettled = max(0, summary.rows - summary.written - summary.rejected)
        close()
        raise Interrupted(summary, f"ingest of {source} interrupted") from stop
    else:
        summary.settle(result)
        close(done=not summary.unsettled)
        return summary
    close()
    return summary
