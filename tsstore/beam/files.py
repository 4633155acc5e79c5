"""``ReadTickFiles``: tick files (CSV, JSON Lines, Parquet) to rows, through Beam's file IO,
with ``tsstore ingest``'s own readers and row parser, so the same rows are kept and the
same ones rejected, with the same reasons and line numbers."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import PurePath
from typing import Any

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.metrics import Metrics

from tsstore.beam.outputs import METRICS, REJECTED, DeadLetter, Sourced
from tsstore.errors import IngestError
from tsstore.rows.parse import DEFAULT_MAX_FIELD_BYTES, RowParser
from tsstore.rows.readers import detect_format, read_rows
from tsstore.rows.rejects import Rejected
from tsstore.spec import SeriesSpec
from tsstore.times import naive_zone

#: The main output's tag.
ROWS = "rows"


class _ReadFile(beam.DoFn):
    def __init__(
        self, spec: SeriesSpec, fmt: str | None, naive: str, strict: bool, max_field_bytes: int,
        time_column: str | None, time_unit: str | None,
    ) -> None:  # fmt: skip
        self._spec, self._fmt, self._naive = spec, fmt, naive
        self._strict, self._max_field_bytes = strict, max_field_bytes
        self._time_column, self._time_unit = time_column, time_unit

    def setup(self) -> None:
        self._parser = RowParser(
            self._spec, zone=naive_zone(self._naive), strict=self._strict, max_field_bytes=self._max_field_bytes,
            time_column=self._time_column, time_unit=self._time_unit,
        )  # fmt: skip
        self._read = Metrics.counter(METRICS, "rows")
        self._rejected = Metrics.counter(METRICS, "rejected")
        self._unreadable = Metrics.counter(METRICS, "unreadable_files")

    def process(self, readable: Any) -> Iterator[Any]:
        path = readable.metadata.path
        try:
            kind = detect_format(PurePath(path), self._fmt)
            for line, row in read_rows(kind, PurePath(path), self._parser, opener=readable.open):
                self._read.inc()
                if isinstance(row, Rejected):
                    self._rejected.inc()
                    yield beam.pvalue.TaggedOutput(REJECTED, DeadLetter(path, line, row.reason, row.raw))
                else:
                    yield Sourced(path, line, row)
        except IngestError as exc:  # the file as a whole (its header, its format): the others go on
            self._unreadable.inc()
            yield beam.pvalue.TaggedOutput(REJECTED, DeadLetter(path, 0, f"the file cannot be read: {exc}", ""))


class ReadTickFiles(beam.PTransform[beam.pvalue.PBegin, dict[str, beam.PCollection[Any]]]):
    """The rows of every file ``paths`` name (patterns as Beam's file systems read them:
    local paths, ``gs://``…), parsed for ``spec`` as ``tsstore ingest`` parses them.

    ``time_column`` and ``time_unit`` are those of :func:`~tsstore.ingest.ingest_file`.
    Returns ``{"rows": Sourced rows, "rejected": dead letters}``. Each file is read whole by
    one worker, in order, so its line numbers and repeated rows mean what they mean to
    ``tsstore ingest``; spread the input over several files to read in parallel.
    """

    def __init__(
        self,
        paths: Sequence[str],
        spec: SeriesSpec,
        *,
        fmt: str | None = None,
        naive: str = "error",
        strict: bool = False,
        max_field_bytes: int = DEFAULT_MAX_FIELD_BYTES,
        time_column: str | None = None,
        time_unit: str | None = None,
    ) -> None:
        super().__init__()
        try:
            naive_zone(naive)
        except ValueError as exc:
            raise IngestError(str(exc)) from None
        RowParser(spec, zone=None, strict=strict, max_field_bytes=max_field_bytes, time_unit=time_unit)  # checked now
        self._paths = list(paths)
        self._dofn = _ReadFile(spec, fmt, naive, strict, max_field_bytes, time_column, time_unit)

    def expand(self, pbegin: beam.pvalue.PBegin) -> dict[str, beam.PCollection[Any]]:
        parsed = (
            pbegin
            | "Patterns" >> beam.Create(self._paths)
            | "Match" >> fileio.MatchAll()
            | "Spread" >> beam.Reshuffle()
            | "Open" >> fileio.ReadMatches()
            | "Parse" >> beam.ParDo(self._dofn).with_outputs(REJECTED, main=ROWS)
        )
        return {ROWS: parsed[ROWS], REJECTED: parsed[REJECTED]}
