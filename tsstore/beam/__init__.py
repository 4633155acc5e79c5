"""tsstore on Apache Beam (``pip install 'tsstore[beam]'``): load and export a sharded
collection with many workers.

- :class:`WriteTicks` (:mod:`~tsstore.beam.write`): rows to a collection, exactly once
  under bundle retries, with a dead-letter output and counts as Beam metrics.
- :class:`PipelineRamp` (:mod:`~tsstore.beam.ramp`): the 500/50/5 ramp shared by every
  worker of a pipeline, capped at 500 writes/s per active shard value.
- :class:`ReadTicks` (:mod:`~tsstore.beam.read`): a range read split into (shard chunk x
  time slice) units at one snapshot.
- :class:`ReadTickFiles` (:mod:`~tsstore.beam.files`): tick files parsed as ``tsstore
  ingest`` parses them.
- :class:`SealPartitions` (:mod:`~tsstore.beam.seal`): ``store.seal()`` with a partition
  per element, its manifest switched by one last step.
- :func:`backfill`, :func:`export`, :func:`seal` (:mod:`~tsstore.beam.jobs`): the pipelines
  behind ``tsstore backfill``, ``tsstore export`` and ``tsstore seal --runner``.
- :class:`Target` (:mod:`~tsstore.beam.target`): the database workers reach, in either mode.
- :class:`RunLease` (:mod:`~tsstore.beam.datastore`): a Datastore-mode write run's late-tick lease.
"""

from __future__ import annotations

try:
    import apache_beam  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the install
    from tsstore.errors import ConfigError

    raise ConfigError("tsstore.beam needs Apache Beam: pip install 'tsstore[beam]'") from exc

from tsstore.beam.datastore import RunLease
from tsstore.beam.files import ReadTickFiles
from tsstore.beam.jobs import (
    LOCAL_RUNNERS,
    BackfillSummary,
    ExportSummary,
    backfill,
    export,
    pipeline_options,
    seal,
    split_options,
    unknown_options,
)
from tsstore.beam.outputs import DeadLetter, Sourced
from tsstore.beam.ramp import PipelineRamp
from tsstore.beam.read import ReadTicks, arrow_schema, beam_schema
from tsstore.beam.seal import SealPartitions
from tsstore.beam.target import Target
from tsstore.beam.write import WriteTicks

__all__ = [
    "LOCAL_RUNNERS",
    "BackfillSummary",
    "DeadLetter",
    "ExportSummary",
    "PipelineRamp",
    "ReadTickFiles",
    "ReadTicks",
    "RunLease",
    "SealPartitions",
    "Sourced",
    "Target",
    "WriteTicks",
    "arrow_schema",
    "beam_schema",
    "backfill",
    "export",
    "pipeline_options",
    "seal",
    "split_options",
    "unknown_options",
]
