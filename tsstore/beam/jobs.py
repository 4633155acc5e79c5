"""Whole pipelines behind ``tsstore backfill`` and ``tsstore export``: build, run, wait,
and sum what the workers counted (Beam metrics) into a summary."""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import io
import json
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import GoogleCloudOptions, PipelineOptions, _BeamArgumentParser

from tsstore.beam.datastore import RunLease, emulator_env
from tsstore.beam.files import ROWS, ReadTickFiles
from tsstore.beam.outputs import METRICS, REJECTED, WRITTEN, DeadLetter
from tsstore.beam.read import ReadTicks, arrow_schema, worker_store
from tsstore.beam.seal import SealPartitions, result_of, save_result
from tsstore.beam.target import Target
from tsstore.beam.write import WriteTicks
from tsstore.errors import ConfigError, IngestError
from tsstore.rows.parse import DEFAULT_MAX_FIELD_BYTES
from tsstore.cold.manifest import SealResult
from tsstore.spec import DuplicatePolicy, SeriesSpec
from tsstore.times import TimeLike

#: Runners that run on this machine (no project, no staging).
LOCAL_RUNNERS = ("DirectRunner", "BundleBasedDirectRunner")
EXPORT_FORMATS = ("parquet", "jsonl")


def pipeline_options(*, runner: str, workers: int, extra: Sequence[str] = ()) -> PipelineOptions:
    """Beam options for ``runner``: the DirectRunner in multi-process mode with ``workers``
    processes; any other runner as ``extra`` (``--project``, ``--region``, ``--temp_location``…) say."""
    unknown = unknown_options(extra)
    if unknown:
        raise ConfigError(
            f"unknown option(s) {' '.join(unknown)}: neither tsstore's nor Apache Beam's "
            "(see --help, and Beam's pipeline options)"
        )
    args = [f"--runner={runner}", *extra]
    if runner == "DirectRunner":
        args += [
            f"--direct_num_workers={workers}",
            "--direct_running_mode=multi_processing",
            "--default_sdk_harness_log_level=WARNING",  # the worker processes' start-up chatter
        ]
    return PipelineOptions(args)


def _beam_parser() -> _BeamArgumentParser:
    """Beam's parser of its pipeline options, gathered as Beam gathers them."""
    parser = _BeamArgumentParser(allow_abbrev=False)
    for cls in {str(c): c for c in PipelineOptions.__subclasses__()}.values():
        cls._add_argparse_args(parser)
    return parser


def unknown_options(args: Sequence[str]) -> list[str]:
    """The options among ``args`` no Beam options class declares (a typo such as
    ``--wokers``), as Beam's own parser reads them."""
    _, unknown = _beam_parser().parse_known_args(list(args))
    return [a for a in unknown if a.startswith("-")]


def split_options(tokens: Sequence[str]) -> tuple[list[str], list[str]]:
    """``tokens`` (file patterns mixed with Beam options, as a command line gives them) as
    (options with their values, the rest). An option without ``=`` takes the next token as
    its value when Beam's parser says it takes one (or, for an unknown option, when the next
    token is not an option)."""
    actions = _beam_parser()._option_string_actions
    options: list[str] = []
    rest: list[str] = []
    taking = False
    for token in tokens:
        if taking:
            options.append(token)
            taking = False
        elif token.startswith("-"):
            options.append(token)
            action = actions.get(token) if "=" not in token else None
            taking = "=" not in token and (action is None or action.nargs != 0)
        else:
            rest.append(token)
    return options, rest


def matched_files(patterns: Sequence[str]) -> list[str]:
    """Every file the patterns name (Beam's file systems: local paths, ``gs://``…), sorted;
    a pattern that names nothing is refused, naming it."""
    files: set[str] = set()
    for pattern, result in zip(patterns, FileSystems.match(list(patterns))):
        if not result.metadata_list:
            raise IngestError(f"{pattern!r} names no file")
        files.update(m.path for m in result.metadata_list)
    return sorted(files)


def add_counts(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Several dicts of counts as one (a ``CombineGlobally`` function)."""
    total: dict[str, int] = {}
    for part in counts:
        for name, n in part.items():
            total[name] = total.get(name, 0) + n
    return total


class _Totals:
    """Counts summed inside the pipeline from its outputs (which runners keep only from a
    bundle's successful attempt) into one small file the launcher reads when it is done:
    in the pipeline's ``temp_location`` (``gs://…`` on Dataflow), or a local scratch folder."""

    def __init__(self, options: PipelineOptions) -> None:
        given = options.view_as(GoogleCloudOptions).temp_location
        self._scratch = None if given else tempfile.mkdtemp(prefix="tsstore-beam-")  # ours to remove
        folder = str(given or self._scratch)
        self.path = FileSystems.join(folder, f"tsstore-totals-{uuid.uuid4().hex}.json")

    def write(self, parts: Sequence[beam.PCollection[Any]]) -> None:
        (
            parts
            | "AllCounts" >> beam.Flatten()
            | "SumCounts" >> beam.CombineGlobally(add_counts)
            | "CountsJson" >> beam.Map(json.dumps)
            | "CountsFile" >> beam.io.WriteToText(self.path, shard_name_template="")
        )

    def read(self) -> dict[str, int]:
        totals: dict[str, int] = json.loads(self.text())
        return totals

    def text(self) -> str:
        """What the pipeline wrote to :attr:`path`, which is removed then."""
        with FileSystems.open(self.path) as handle:
            text: str = handle.read().decode()
        FileSystems.delete([self.path])
        if self._scratch is not None:
            os.rmdir(self._scratch)
        return text


@dataclass
class BackfillSummary:
    """What a backfill did: ``rows`` read from ``files``, of which ``created`` new documents,
    ``present`` (stored before with the same content, or by another row of the input),
    ``replaced``, ``rejected`` (in the rejects file); ``unreadable`` files could not be read
    at all. Counted from the pipeline's outputs, so a bundle run twice counts once."""

    files: list[str]
    rows: int = 0
    created: int = 0
    present: int = 0
    replaced: int = 0
    rejected: int = 0
    unreadable: int = 0
    seconds: float = 0.0
    rejects: str | None = None

    def describe(self) -> str:
        rate = self.rows / self.seconds if self.seconds else 0.0
        parts = [f"{self.created} stored new", f"{self.present} already present"]
        if self.replaced:
            parts.append(f"{self.replaced} replaced")
        parts.append(f"{self.rejected} rejected" + (f" (in {self.rejects})" if self.rejects and self.rejected else ""))
        unreadable = f"; {self.unreadable} file(s) could not be read" if self.unreadable else ""
        return (
            f"backfill of {len(self.files)} file(s): {self.rows} rows read: {', '.join(parts)}{unreadable}; "
            f"in {self.seconds:.1f} s ({rate:,.0f} rows/s)"
        )


def reject_line(letter: DeadLetter) -> str:
    """A dead letter as one CSV line of the rejects file (``source,line,reason,raw``)."""
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(letter)
    return out.getvalue()


def backfill(
    patterns: Sequence[str],
    spec: SeriesSpec,
    *,
    target: Target,
    options: PipelineOptions,
    workers: int,
    fmt: str | None = None,
    naive: str = "error",
    strict: bool = False,
    max_field_bytes: int = DEFAULT_MAX_FIELD_BYTES,
    time_column: str | None = None,
    time_unit: str | None = None,
    on_duplicate: DuplicatePolicy | None = None,
    ramp: bool = True,
    max_ops_per_second: int | None = None,
    rejects: str | None = None,
    write: Callable[..., WriteTicks] = WriteTicks,
) -> BackfillSummary:
    """Load every file the patterns name into ``spec``'s collection on Beam and wait for it.
    Rejected rows (and unreadable files) go to ``rejects`` (a CSV file: source, line,
    reason, raw) when given. ``write`` is the write transform (a subclass, for tests)."""
    files = matched_files(patterns)
    with contextlib.ExitStack() as run:
        lease = run.enter_context(RunLease(spec, target)) if target.mode == "datastore" else None
        run.enter_context(emulator_env(target))
        transform = write(
            spec,
            target=target,
            workers=workers,
            on_duplicate=on_duplicate,
            ramp=ramp,
            max_ops_per_second=max_ops_per_second,
            lease=lease,
        )
        started = time.perf_counter()
        pipeline = beam.Pipeline(options=options)
        read = pipeline | "ReadFiles" >> ReadTickFiles(
            files, spec, fmt=fmt, naive=naive, strict=strict, max_field_bytes=max_field_bytes, time_column=time_column,
            time_unit=time_unit,
        )  # fmt: skip
        written = read[ROWS] | "WriteTicks" >> transform
        rejected = (read[REJECTED], written[REJECTED]) | "AllRejected" >> beam.Flatten()
        totals = _Totals(options)
        totals.write([written[WRITTEN], rejected | "CountRejected" >> beam.Map(_rejected_count)])
        if rejects is not None:
            (
                rejected
                | "AsCsv" >> beam.Map(reject_line)
                | "RejectsFile" >> beam.io.WriteToText(rejects, shard_name_template="", header="source,line,reason,raw")
            )
        pipeline.run().wait_until_finish()
    counts = totals.read()
    summary = BackfillSummary(files=files, seconds=time.perf_counter() - started, rejects=rejects)
    for name in ("created", "present", "replaced", "rejected", "unreadable"):
        setattr(summary, name, counts.get(name, 0))
    summary.rows = summary.created + summary.present + summary.replaced + summary.rejected
    return summary


def _rejected_count(letter: DeadLetter) -> dict[str, int]:
    return {"unreadable" if letter.line == 0 else "rejected": 1}


@dataclass
class ExportSummary:
    """What an export wrote: ``rows`` ticks into ``files``, for ``billed_reads`` reads."""

    rows: int = 0
    billed_reads: int = 0
    seconds: float = 0.0
    files: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return (
            f"exported {self.rows} ticks to {len(self.files)} file(s) in {self.seconds:.1f} s "
            f"({self.billed_reads} billed reads)"
        )


def _json_line(row: dict[str, Any]) -> str:
    return json.dumps(row, default=lambda v: v.isoformat() if isinstance(v, dt.datetime) else str(v))


def export(
    spec: SeriesSpec,
    *,
    target: Target,
    options: PipelineOptions,
    to: str,
    fmt: str = "parquet",
    where: Any = None,
    start: Any = None,
    end: Any = None,
    columns: Sequence[str] | None = None,
    read_time: dt.datetime | None = None,
) -> ExportSummary:
    """Write the ticks of a range to files named ``to`` + ``-NNNNN-of-NNNNN.<fmt>`` through
    :class:`~tsstore.beam.read.ReadTicks` and Beam's sinks, and wait for it."""
    if fmt not in EXPORT_FORMATS:
        raise ConfigError(f"format {fmt!r} is not supported; use one of {', '.join(EXPORT_FORMATS)}")
    read = ReadTicks(spec, target=target, where=where, start=start, end=end, columns=columns, read_time=read_time)
    suffix = f".{fmt}"
    started = time.perf_counter()
    pipeline = beam.Pipeline(options=options)
    rows = pipeline | "ReadTicks" >> read
    totals = _Totals(options)
    totals.write([rows | "CountRows" >> beam.Map(lambda _: {"rows": 1})])
    if fmt == "parquet":
        schema = arrow_schema(spec, columns)
        rows | "Parquet" >> beam.io.WriteToParquet(to, schema, file_name_suffix=suffix)
    else:
        rows | "Json" >> beam.Map(_json_line) | "JsonLines" >> beam.io.WriteToText(to, file_name_suffix=suffix)
    result = pipeline.run()
    result.wait_until_finish()
    files = sorted(m.path for m in FileSystems.match([f"{to}-*{suffix}"])[0].metadata_list)
    return ExportSummary(
        rows=totals.read().get("rows", 0),
        billed_reads=metric_totals(result).get("billed_reads", 0),
        seconds=time.perf_counter() - started,
        files=files,
    )


def metric_totals(result: Any) -> dict[str, int]:
    """The ``tsstore`` counters of a finished pipeline, summed over steps: committed where
    the runner commits them (Dataflow: a failed bundle attempt left out), else attempted."""
    totals: dict[str, int] = {}
    for counter in result.metrics().query(MetricsFilter().with_namespace(METRICS))["counters"]:
        value = counter.committed if counter.committed is not None else counter.attempted
        totals[counter.key.metric.name] = totals.get(counter.key.metric.name, 0) + int(value or 0)
    return totals


def seal(
    spec: SeriesSpec,
    *,
    target: Target,
    options: PipelineOptions,
    until: TimeLike | None = None,
    seal: Callable[..., SealPartitions] = SealPartitions,
) -> SealResult:
    """Seal ``spec``'s closed partitions into its cold tier as ``store.seal(until=...)`` does,
    a partition per element of a pipeline (:class:`~tsstore.beam.seal.SealPartitions`), and
    wait for it: this process decides what to seal (``store.seal_plan()``), the workers write
    the objects, the pipeline's last step switches the manifest. ``seal`` is the transform (a
    subclass, for tests)."""
    client = target.client()
    try:
        store = worker_store(spec, client)
        sealing = store.seal_plan(until=until)
        store.close()
    finally:
        client.close()
    pipeline = beam.Pipeline(options=options)
    results = pipeline | "Seal" >> seal(spec, target=target, sealing=sealing)
    outcome = _Totals(options)
    results | "ResultFile" >> beam.Map(save_result, outcome.path)
    pipeline.run().wait_until_finish()
    return result_of(outcome.text())
