"""``SealPartitions``: :meth:`~tsstore.store.TimeSeriesStore.seal` as a pipeline, a partition
per element.

The driver does what happens once (:meth:`~tsstore.store.TimeSeriesStore.seal_plan`: the end
announced, the writers waited for, the snapshot, the marks, which partitions to seal: marked
ones and new closed ones). Each worker reads its partition at that snapshot and writes its
Parquet object under a name that must not exist (``seal_partition``: the sealer's own reading,
writer and names). One last step switches the manifest to name them, one switch per partition
in time order under the manifest's precondition, clears the marks each switch folded in, and
ends as a seal ends (the watermark, the orphans past their grace): ``seal_switch``. The
switches are one step, not the workers', since a reader takes a partition before the sealed
history's end that the manifest does not name as empty: switched in any order, a later
partition named first would hide an earlier one's ticks until its own switch.

A bundle Beam runs again writes the next generation of its partition: the first attempt's
object is an orphan no manifest names (removed by a later seal once its grace is over). A
switch step run again finds the partitions its first attempt switched named with their
workers' objects, and switches only the rest.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Iterator, Sequence

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics import Metrics

from tsstore.beam.outputs import METRICS
from tsstore.beam.read import worker_store
from tsstore.beam.target import Target
from tsstore.cold.manifest import Entry, SealedPartition, SealResult
from tsstore.spec import SeriesSpec
from tsstore.times import utc_text
from tsstore.verbs.cold import SealPlan, SealUnit, Written


class _Worker(beam.DoFn):
    """A DoFn with its own client and store (a client does not travel between processes)."""

    def __init__(self, spec: SeriesSpec, target: Target, sealing: SealPlan) -> None:
        self._spec, self._target, self._sealing = spec, target, sealing

    def setup(self) -> None:
        self._client = self._target.client()
        self._store = worker_store(self._spec, self._client)

    def teardown(self) -> None:
        store = getattr(self, "_store", None)
        if store is not None:
            store.close()
            self._client.close()


class SealOne(_Worker):
    """A partition's object written (``seal_partition``): the unit and what became of it."""

    def setup(self) -> None:
        super().setup()
        self._written = Metrics.counter(METRICS, "objects_written")

    def process(self, unit: SealUnit) -> Iterator[tuple[SealUnit, Written]]:
        written = self._store.seal_partition(unit, sealing=self._sealing)
        self._written.inc(isinstance(written, Entry))
        yield unit, written


class _SwitchAll(_Worker):
    def process(self, _: None, written: Sequence[tuple[SealUnit, Written]]) -> Iterator[SealResult]:
        yield self._store.seal_switch(self._sealing, written)


class SealPartitions(beam.PTransform[beam.pvalue.PBegin, beam.PCollection[SealResult]]):
    """The partitions ``sealing`` names (from ``store.seal_plan()``, run once by the driver)
    sealed into ``spec``'s cold tier, one element each, by workers reaching ``target``; one
    :class:`~tsstore.cold.manifest.SealResult` out, as ``store.seal()`` returns it."""

    def __init__(self, spec: SeriesSpec, *, target: Target, sealing: SealPlan) -> None:
        super().__init__()
        self._spec, self._target, self._sealing = spec, target, sealing

    def _seal_dofn(self) -> beam.DoFn:
        """The step that writes each partition's object (a subclass, for tests)."""
        return SealOne(self._spec, self._target, self._sealing)

    def expand(self, pbegin: beam.pvalue.PBegin) -> beam.PCollection[SealResult]:
        written = (
            pbegin
            | "Partitions" >> beam.Create(self._sealing.units)
            | "Spread" >> beam.Reshuffle()  # not fused with Create: the partitions go to many workers
            | "WriteObjects" >> beam.ParDo(self._seal_dofn())
        )
        switch = _SwitchAll(self._spec, self._target, self._sealing)
        result: beam.PCollection[SealResult] = (
            pbegin
            | "Once" >> beam.Create([None])
            | "SwitchManifest" >> beam.ParDo(switch, beam.pvalue.AsList(written))  # once all are written
        )
        return result


def save_result(result: SealResult, path: str) -> None:
    """Write a seal's result to ``path`` (any of Beam's file systems), for the launcher; a
    step run again writes it again."""
    text = json.dumps(dataclasses.asdict(result), default=lambda v: utc_text(v) if isinstance(v, dt.datetime) else v)
    with FileSystems.create(path) as out:
        out.write(text.encode())


def result_of(text: str) -> SealResult:
    """The result :func:`save_result` wrote."""
    data = json.loads(text)
    sealed, resealed = ([SealedPartition(**p) for p in data[name]] for name in ("sealed", "resealed"))
    until = dt.datetime.fromisoformat(data["until"].replace("Z", "+00:00"))
    return SealResult(tuple(sealed), data["skipped"], data["removed"], until, tuple(resealed), tuple(data["emptied"]))
