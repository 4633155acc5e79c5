"""tsstore on Apache Beam: the shared ramp (pure arithmetic), and on the emulator with the
DirectRunner (two worker processes): backfills compared with ``tsstore ingest`` as the
oracle, a bundle failing after it sent, ReadTicks at 3 and 40 shards, a Parquet export, and
seals compared with ``store.seal()`` as the oracle, a partition failing after its object.

Starting worker processes costs seconds per pipeline, so runs whose point is not the
processes use two worker threads of the same runner (the transforms are pickled and run by
its workers all the same), and a run whose point is a worker process starts one: each
transform still runs in worker processes somewhere here (the first backfill's ReadTickFiles
and WriteTicks in two, their counts adding up across them; ReadTicks in the export command,
and backfill as a command, in one)."""

from __future__ import annotations

import csv
import datetime as dt
import functools
import json
import math
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apache_beam as beam
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.testing.util import assert_that, equal_to
from click.testing import CliRunner
from google.cloud import firestore

from tests.conftest import unique_database_id
from tests.overload import FakeClock
from tests.shared import EMULATOR_MODES, MALFORMED, database_of, mode_client, stored_doc, stored_docs, write_malformed
from tests.shared import spec as shared_spec
from tsstore import Rollup, SeriesSpec, TimeSeriesStore
from tsstore.beam import PipelineRamp, ReadTicks, Target, WriteTicks, backfill, export, pipeline_options, seal
from tsstore.beam.files import ReadTickFiles
from tsstore.beam.jobs import metric_totals
from tsstore.beam.outputs import Planned
from tsstore.beam.read import slices
from tsstore.beam.seal import SealOne, SealPartitions
from tsstore.beam.write import _Identify, _Send
from tsstore.cli import main
from tsstore.cold.manifest import SealResult
from tsstore.cold.tier import horizon_name
from tsstore.cold_tier import ColdTier
from tsstore.demo import SPEC
from tsstore.errors import ConfigError, IngestError, QueryError, SpecError
from tsstore.ingest import Rejected, ingest_file
from tsstore.late import marks_path
from tsstore.local.emulator import DEFAULT_PROJECT
from tsstore.local.synthetic import CSV_COLUMNS, flat_row, trading_day
from tsstore.verbs.cold import SealUnit, Written
from tsstore.write.options import EMULATOR_WRITE_OPTIONS
from tsstore.write.prepare import prepare_records
from tsstore.write.ramp import ramp_rate


FAST = EMULATOR_WRITE_OPTIONS  # no ramp, no ceiling: the emulator is the tests' own
TWO_WORKERS = pipeline_options(runner="DirectRunner", workers=2)
TWO_THREADS = PipelineOptions(
    ["--runner=DirectRunner", "--direct_num_workers=2", "--direct_running_mode=multi_threading"]
)

# ---------------------------------------------------------------- the shared ramp, no Firestore


@pytest.mark.parametrize("workers", [1, 4, 32])
def test_each_worker_gets_its_share_of_one_ramp_and_the_total_never_exceeds_500_per_shard(workers: int) -> None:
    spec = SeriesSpec("t", shards=[f"s{i}" for i in range(6)])  # ceiling 3 000 writes/s
    ramp = PipelineRamp.for_spec(spec, workers=workers, start=1_000_000.0)
    assert ramp.ceiling == 3_000 and ramp.initial == 500
    for minutes, total in [(0, 500), (4.9, 500), (5, 750), (10, 1125), (15, 1687.5), (20, 2531.25), (25, 3000)]:
        at = ramp.start + minutes * 60
        assert ramp.total_rate(at) == total == ramp_rate(minutes * 60, initial=500, ceiling=3000)
        assert ramp.worker_rate(at) == pytest.approx(total / workers)
    # Simulate every worker taking as fast as its limiter allows over 30 minutes: in each
    # 10-second window the workers together get at most the ramp's integral plus one bucket each.
    clock = FakeClock(ramp.start)
    limiters = [ramp.limiter(clock=clock, sleep=lambda s: None) for _ in range(workers)]
    step, window, taken = 1.0, 0.0, 0.0  # a second per step: each worker's bucket refills up to its cap
    # Greedy in halving sizes from a power of two above a worker's second at the ceiling (more
    # than half of what its bucket can hold): the clock stands still here, so one try of each
    # takes exactly what taking 1 at a time would (every whole token there is), in fewer calls.
    sizes = [2**k for k in range(math.ceil(math.log2(ramp.ceiling / workers)), -1, -1)]
    windows = []
    for _ in range(int(30 * 60 / step)):
        clock.t += step
        for limiter in limiters:
            for size in sizes:
                if limiter.try_take(size):
                    taken += size
        window += step
        if window >= 10:
            windows.append((clock.t, taken))
            window, taken = 0.0, 0.0
    for end, got in windows:
        allowed = sum(ramp.total_rate(end - 10 + i * 0.05) * 0.05 for i in range(200))
        assert got <= allowed + ramp.total_rate(end) + workers, (end, got, allowed)
        assert got / 10 <= ramp.ceiling + ramp.ceiling / 10 + workers  # never far above 500 x shards
    # once the ramp is at its ceiling, the workers together use it (each its share)
    last_end, last = windows[-1]
    assert last == pytest.approx(ramp.ceiling * 10, rel=0.02)


def test_a_worker_joining_late_starts_at_the_pipelines_current_budget() -> None:
    ramp = PipelineRamp.for_spec(SeriesSpec("t", shards=[f"s{i}" for i in range(90)]), workers=4, start=0.0)
    clock = FakeClock(12 * 60)  # 12 minutes in: two steps, 1 125 ops/s for the pipeline
    late = ramp.limiter(clock=clock, sleep=lambda s: None)
    assert late.rate == pytest.approx(1125 / 4)
    granted = 0
    while late.try_take(1):
        granted += 1
    assert granted == int(1125 / 4)  # a full bucket at today's budget, not at 500 / 4
    clock.t += 3 * 60  # 15 minutes: the next step, for the late one as for the others
    assert late.rate == pytest.approx(1687.5 / 4)


def test_each_worker_throttles_on_its_own_refusals_within_its_share() -> None:
    ramp = PipelineRamp.for_spec(SeriesSpec("t", shards=["a", "b"]), workers=2, start=0.0)
    clock = FakeClock(0.0)
    limiter = ramp.limiter(clock=clock, sleep=clock.sleep)
    assert limiter.rate == 250
    limiter.take(100)
    limiter.answered(sent=100, refused=96)  # 4 accepted in the first second: the floor
    assert limiter.rate == 25  # a tenth of this worker's share of 500
    clock.t = 30.0  # the refusals have left the window: back on the pipeline's ramp
    assert limiter.rate == 250


def test_ramp_and_transform_refuse_what_cannot_work() -> None:
    with pytest.raises(ConfigError, match="workers 0 is not allowed"):
        PipelineRamp.for_spec(SPEC, workers=0)
    target = Target("p")
    with pytest.raises(ConfigError, match="no key_fields: ids would be random"):
        WriteTicks(SeriesSpec("t"), target=target, workers=1)
    with pytest.raises(ConfigError, match="keeps series counters"):
        WriteTicks(SeriesSpec("t", key_fields=["k"], count_by=["k"]), target=target, workers=1)
    with pytest.raises(ConfigError, match="on_duplicate='twice' is not allowed"):
        WriteTicks(SPEC, target=target, workers=1, on_duplicate="twice")  # type: ignore[arg-type]
    with pytest.raises(QueryError, match="unit_ticks 0"):
        ReadTicks(SPEC, target=target, unit_ticks=0)
    with pytest.raises(QueryError):
        ReadTicks(SPEC, target=target, where={"note": "x"})  # no shape declares it
    clash = SeriesSpec("t", columns={"a.b": "string", "a_b": "Int64", "c": "object"})
    # the declaration does not serve a schema: a usage error (export exits 2), not stored values' (SchemaError)
    with pytest.raises(SpecError, match="columns 'a.b' and 'a_b' would both be 'a_b' in a schema"):
        ReadTicks(clash, target=target, columns=["a.b", "a_b"], schema=True)
    with pytest.raises(SpecError, match="column 'c' has no declared type"):
        ReadTicks(clash, target=target, columns=["c"], schema=True)
    with pytest.raises(IngestError, match="time unit 'min' is not one of s, ms, us, ns"):
        ReadTickFiles(["x.csv"], SPEC, time_unit="min")


def test_slices_cover_the_range_without_overlap() -> None:
    start = dt.datetime(2019, 1, 2, tzinfo=dt.UTC)
    parts = slices(start, start + dt.timedelta(seconds=10), 3)
    assert parts[0][0] == start and parts[-1][1] == start + dt.timedelta(seconds=10)
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:])) and len(parts) == 3
    assert len(slices(start, start + dt.timedelta(microseconds=2), 5)) == 2  # never an empty slice


# ---------------------------------------------------------------- identity across bundles, no Firestore


def planned(policy: str, rows: list[tuple[str, int, dict[str, Any]]]) -> list[Any]:
    """What ``WriteTicks``' identity step makes of rows sharing one slot, given in any order."""
    prepared = [(src, line, next(prepare_records(SPEC, [row]))) for src, line, row in reversed(rows)]
    return list(_Identify(SPEC, policy)._plan(_Identify.ordered(SPEC, prepared)))  # type: ignore[arg-type]


def test_identity_numbers_repeats_per_source_as_one_ingest_would() -> None:
    t = dt.datetime(2019, 1, 2, 9, tzinfo=dt.UTC)
    a = {"symbol": "A", "timestamp": t, "volume": 1}
    b = {"symbol": "A", "timestamp": t, "volume": 2}  # another tick in the same slot
    rows = [("f1", 1, a), ("f1", 2, a), ("f1", 3, b), ("f2", 1, a), ("f2", 2, a), ("f2", 3, a)]
    plan = planned("keep", rows)
    sent = [p for p in plan if p.settled is None]
    # f1 alone, as one input, is what prepare_records gives: the same ids
    alone = [d.id for d in prepare_records(SPEC, [a, a, b])]
    assert [p.doc.id for p in sent if p.source == "f1"] == alone
    # f2 repeats f1's two copies of a (present) and adds a third (a new content id)
    assert [(p.source, p.line, p.settled) for p in plan if p.settled] == [("f2", 1, "present"), ("f2", 2, "present")]
    third = [d.id for d in prepare_records(SPEC, [a, a, a])][2]
    assert [p.doc.id for p in sent if p.source == "f2"] == [third]

    plan = planned("replace", rows)
    assert [(p.source, p.line, p.settled) for p in plan] == [
        ("f1", 1, "present"), ("f1", 2, "replaced"), ("f1", 3, "replaced"),
        ("f2", 1, "present"), ("f2", 2, "present"), ("f2", 3, None),
    ]  # fmt: skip

    plan = planned("error", rows)
    refused = [p for p in plan if not isinstance(p, Planned)]
    assert [(r.source, r.line) for r in refused] == [("f1", 2), ("f1", 3), ("f2", 2), ("f2", 3)]
    assert "on_duplicate='error' refuses it" in refused[0].reason and t.isoformat() in refused[0].reason
    # the first row of each source is sent, once: f2's is the same tick as f1's
    assert [(p.source, p.settled) for p in plan if isinstance(p, Planned)] == [("f1", None), ("f2", "present")]


# ---------------------------------------------------------------- backfill vs ingest, on the emulator


def stored(client: firestore.Client, collection: str = "instruments") -> dict[str, dict[str, Any]]:
    return {d.id: d.to_dict() or {} for d in client.collection(collection).stream()}


def tick_files(folder: Path) -> list[Path]:
    """Three files with good and bad rows: repeats within a file, a row repeated across files."""
    folder.mkdir()
    write_malformed(folder / "a.csv")
    ticks = list(trading_day(300, seed=5))
    with open(folder / "a.csv", "a", newline="") as handle:  # a row twice in one file: two ticks
        writer = csv.DictWriter(handle, fieldnames=[*CSV_COLUMNS, "note"])
        writer.writerows([flat_row(ticks[0]), flat_row(ticks[0])])
    lines = [json.dumps({**t, "timestamp": t["timestamp"].isoformat()}) for t in ticks[:150]]
    lines[10:10] = ["{not json", '["a list"]', json.dumps({"symbol": "NOTIME"})]
    (folder / "b.jsonl").write_text("\n".join(lines) + "\n")  # ticks[0] again: the same tick as in a.csv
    rows = [flat_row(t) for t in ticks[150:]]
    rows[7]["symbol"] = "Y" * 2000  # too long to index
    table = pa.table(
        {
            "timestamp": pa.array([t["timestamp"] for t in ticks[150:]], pa.timestamp("us", tz="UTC")),
            **{c: [r[c] for r in rows] for c in CSV_COLUMNS if c != "timestamp"},
        }
    )
    pq.write_table(table, folder / "c.parquet")
    return [folder / "a.csv", folder / "b.jsonl", folder / "c.parquet"]


def ingested(client: Any, files: list[Path], folder: Path) -> set[tuple[str, int, str]]:
    """Run ``tsstore ingest`` of the files, one after another, into ``client``'s database
    (either mode); what it rejected (checkpoints kept in ``folder``)."""
    store = TimeSeriesStore(client, SPEC, write_options=FAST)
    rejects: set[tuple[str, int, str]] = set()
    for path in files:

        def note(rejected: Rejected, path: Path = path) -> None:
            rejects.add((str(path), rejected.line, rejected.reason))

        ingest_file(store, path, strict=True, on_reject=note, checkpoint=folder / f"{path.name}.ck")
    return rejects


def oracle(emulator: Any, files: list[Path]) -> tuple[dict[str, dict[str, Any]], set[tuple[str, int, str]]]:
    """What ``tsstore ingest`` stores and rejects for the same files, one after another."""
    client = emulator.client(database=f"oracle-{os.getpid()}-{len(files)}")
    rejects = ingested(client, files, files[0].parent.parent)
    docs = stored(client)
    client.close()
    return docs, rejects


@pytest.fixture(scope="module")
def inputs(emulator: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], dict[str, Any], set[Any]]:
    """The three files and the oracle's documents and rejects for them, made once for the
    module: the tests only read the files (each writes its rejects and markers elsewhere)."""
    files = tick_files(tmp_path_factory.mktemp("beam") / "in")
    expected_docs, expected_rejects = oracle(emulator, files)
    return files, expected_docs, expected_rejects


def read_rejects(path: Path) -> set[tuple[str, int, str]]:
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    assert rows[0] == ["source", "line", "reason", "raw"]
    return {(r[0], int(r[1]), r[2]) for r in rows[1:]}


def test_backfill_stores_exactly_what_ingest_stores_and_a_rerun_adds_nothing(
    inputs: tuple[list[Path], dict[str, Any], set[Any]], client: firestore.Client, tmp_path: Path
) -> None:
    files, expected_docs, expected_rejects = inputs
    target = Target.of(client)
    run = functools.partial(
        backfill, [str(files[0].parent / "*")], SPEC, target=target, options=TWO_WORKERS, workers=2, strict=True
    )
    first = run(ramp=False, rejects=str(tmp_path / "rejects.csv"))
    docs = stored(client)
    assert docs == expected_docs  # the same ids, the same content
    assert len(docs) == 300 + 1 - 1 + 4  # a.csv's 4 good rows, ticks[0] twice there, ticks[0] again in b
    assert read_rejects(tmp_path / "rejects.csv") == expected_rejects
    assert len(expected_rejects) == len([r for _, r in MALFORMED[1:] if r]) + 3 + 1
    total_rows = len(MALFORMED) - 1 + 2 + 153 + 150
    assert (first.rows, first.created, first.present, first.rejected) == (
        total_rows,
        len(docs),
        1,
        len(expected_rejects),
    )
    assert first.created + first.present + first.replaced + first.rejected == first.rows
    assert first.created == client.collection("instruments").count().get()[0][0].value

    again = run(ramp=True, rejects=str(tmp_path / "rejects2.csv"), options=TWO_THREADS)  # ramped, as on Google Cloud
    assert (again.created, again.present, again.rejected) == (0, first.created + first.present, first.rejected)
    assert stored(client) == docs
    assert f"backfill of 3 file(s): {total_rows} rows read: 0 stored new, {len(docs) + 1} already present" in (
        again.describe()
    )


class FailOnceSend(_Send):
    """Sends its bundle, then fails it once (the marker file says it already did)."""

    def __init__(self, *args: Any, marker: str) -> None:
        super().__init__(*args)
        self._marker = marker

    def flush(self) -> Iterator[Any]:
        outputs = list(super().flush())
        try:
            fd = os.open(self._marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return iter(outputs)
        os.close(fd)
        raise RuntimeError("failing the bundle after its documents were sent")


class FailOnceWriteTicks(WriteTicks):
    def __init__(self, *args: Any, marker: str, **options: Any) -> None:
        super().__init__(*args, **options)
        self._marker = marker

    def _send_dofn(self) -> beam.DoFn:
        return FailOnceSend(self._spec, self._target, self.ramp, self._policy, self._max_attempts, marker=self._marker)


def test_a_bundle_failing_after_it_sent_is_run_again_and_the_collection_stays_exact(
    emulator: Any, inputs: tuple[list[Path], dict[str, Any], set[Any]], client: firestore.Client, tmp_path: Path
) -> None:
    files, expected_docs, expected_rejects = inputs
    marker = tmp_path / "failed-once"
    write = functools.partial(FailOnceWriteTicks, marker=str(marker))
    # The bundle-based DirectRunner runs a failed bundle again (up to 4 times), as Dataflow does.
    summary = backfill(
        [str(p) for p in files],
        SPEC,
        target=Target.of(client),
        options=pipeline_options(runner="BundleBasedDirectRunner", workers=1),
        workers=1,
        strict=True,
        ramp=False,
        write=write,
    )
    assert marker.exists()  # it did fail once, after sending
    assert stored(client) == expected_docs
    # committed counts leave the failed attempt out, and what it stored counts as created
    assert (summary.created, summary.present, summary.rejected) == (len(expected_docs), 1, len(expected_rejects))

    # The DirectRunner's portable runner does not run a bundle again, in worker threads as in
    # worker processes (the same FnApiRunner; threads here, WriteTicks runs in processes in the
    # first backfill and the command): the pipeline fails, and running it again completes the
    # collection without storing anything twice.
    other = emulator.client(database=f"failing-{os.getpid()}")
    marker.unlink()
    options = dict(target=Target.of(other), options=TWO_THREADS, workers=2, strict=True, ramp=False)
    with pytest.raises(Exception, match="failing the bundle after its documents were sent"):
        backfill([str(p) for p in files], SPEC, write=write, **options)  # type: ignore[arg-type]
    partial = len(stored(other))
    assert 0 < partial <= len(expected_docs)
    rerun = backfill([str(p) for p in files], SPEC, **options)  # type: ignore[arg-type]
    assert stored(other) == expected_docs
    assert rerun.created == len(expected_docs) - partial
    other.close()


# ---------------------------------------------------------------- ReadTicks and export


def sharded(shards: int) -> SeriesSpec:
    return SeriesSpec(
        "instruments",
        shards=[f"s{i:02d}" for i in range(shards)],
        shapes=SPEC.shapes,
        key_fields=["symbol"],
        columns=dict(SPEC.columns),
    )


@pytest.mark.parametrize("shards", [3, 40])
def test_read_ticks_returns_exactly_the_ticks_of_the_range(client: firestore.Client, shards: int) -> None:
    spec = sharded(shards)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    ticks = list(trading_day(1_000, seed=shards))
    ids = store.write(ticks).ids
    start, end = ticks[150]["timestamp"], ticks[850]["timestamp"]
    expected = [
        (i, t["timestamp"], t["symbol"], t["price"]["micros"])
        for i, t in zip(ids, ticks)
        if start <= t["timestamp"] < end and t["exchange"] == "EXCHG1"
    ]
    whole = sorted(ids)
    pipeline = beam.Pipeline(options=TWO_THREADS)  # ReadTicks in a worker process: the export command below
    target = Target.of(client)
    ranged = pipeline | "Range" >> ReadTicks(
        spec, target=target, where={"exchange": "EXCHG1"}, start=start, end=end, unit_ticks=100
    )
    assert_that(
        ranged | beam.Map(lambda r: (r["document_id"], r["timestamp"], r["symbol"], r["price.micros"])),
        equal_to(expected),
        label="RangeRows",
    )
    everything = pipeline | "Everything" >> ReadTicks(spec, target=target, unit_ticks=700)  # bounds found
    assert_that(everything | beam.Map(lambda r: r["document_id"]), equal_to(whole), label="AllIds")
    typed = pipeline | "Typed" >> ReadTicks(
        spec, target=target, where={"exchange": "EXCHG1"}, start=start, end=end, schema=True
    )
    names = [name for name, _ in typed.element_type._fields]
    assert names == ["document_id", "timestamp", "symbol", "exchange", "instrumentType"] + [
        "price_currency",
        "price_micros",
        "volume",
    ]
    assert_that(
        typed | beam.Map(lambda r: (r.document_id, r.timestamp.to_utc_datetime(has_tz=True), r.symbol, r.price_micros)),
        equal_to(expected),
        label="SchemaRows",
    )
    result = pipeline.run()
    result.wait_until_finish()
    totals = metric_totals(result)
    assert totals["documents_read"] == 2 * len(expected) + len(whole)
    assert totals["units"] > 2 * (2 if shards == 40 else 1)  # several time slices per chunk
    assert totals["billed_reads"] >= totals["documents_read"]


def test_a_parquet_export_equals_query_frame(client: firestore.Client, tmp_path: Path) -> None:
    store = TimeSeriesStore(client, SPEC, write_options=FAST)
    ticks = list(trading_day(1_000, seed=3))
    ticks[5]["volume"] = None  # a missing value stays missing
    store.write(ticks)
    start, end = ticks[100]["timestamp"], ticks[900]["timestamp"]
    summary = export(
        SPEC, target=Target.of(client), options=TWO_THREADS, to=str(tmp_path / "out" / "part"), start=start, end=end
    )  # the export command below runs it in worker processes
    back = pd.concat([pd.read_parquet(f) for f in summary.files])
    assert summary.rows == len(back) == 800 and summary.files
    frame = store.query_frame(start=start, end=end, direction="asc", columns=[c for c, _ in SPEC.columns])
    back = back.sort_values(["timestamp", "document_id"]).set_index("timestamp").drop(columns="document_id")
    back = back.astype(frame.dtypes.to_dict())
    back.index = back.index.as_unit("us")
    pd.testing.assert_frame_equal(back, frame, check_freq=False)


# ---------------------------------------------------------------- Datastore mode


def entities(client: Any, kind: str = "instruments") -> dict[str, dict[str, Any]]:
    """Every entity of ``kind``, read by the Datastore client's own API."""
    return {entity.key.name: dict(entity) for entity in client.query(kind=kind).fetch()}


def test_a_datastore_mode_write_refuses_what_beams_connector_cannot_do() -> None:
    target = Target("p", mode="datastore")
    with pytest.raises(ConfigError, match="needs the run's late-tick lease"):
        WriteTicks(SPEC, target=target, workers=1)
    with pytest.raises(ConfigError, match="only a project's \\(default\\) database, not 'db1'"):
        WriteTicks(SPEC, target=Target("p", "db1", mode="datastore"), workers=1)


def test_a_datastore_mode_backfill_through_beams_connector_stores_what_ingest_stores(
    datastore_emulator: Any, tmp_path: Path
) -> None:
    """The Native test's files, in Datastore mode: the entities Beam's ``WriteToDatastore``
    stores (its workers in two processes, which find the emulator by the variable the job
    sets) equal those ``tsstore ingest`` stores, rejects and counts included; a second,
    ramped run stores nothing new. Each run in a project of its own: the connector writes
    only a project's (default) database."""
    files = tick_files(tmp_path / "in")
    oracle_client = datastore_emulator.datastore_client(project=f"ingest-{uuid.uuid4().hex[:10]}")
    expected_rejects = ingested(oracle_client, files, tmp_path)
    client = datastore_emulator.datastore_client(project=f"beam-{uuid.uuid4().hex[:10]}")
    run = functools.partial(backfill, [str(tmp_path / "in" / "*")], SPEC, target=Target.of(client), workers=2,
                            strict=True)  # fmt: skip
    first = run(ramp=False, options=TWO_WORKERS, rejects=str(tmp_path / "rejects.csv"))
    docs = entities(client)
    assert docs == entities(oracle_client) and len(docs) == 304
    assert read_rejects(tmp_path / "rejects.csv") == expected_rejects
    assert (first.created, first.present, first.rejected) == (304, 1, len(expected_rejects))
    assert first.created == TimeSeriesStore(client, SPEC).count()
    assert "DATASTORE_EMULATOR_HOST" not in os.environ
    again = run(ramp=True, options=TWO_THREADS)
    assert (again.created, again.present, again.rejected) == (0, 305, len(expected_rejects))
    assert entities(client) == docs


def test_a_datastore_mode_backfill_marks_its_late_ticks_and_an_export_equals_query_frame(
    datastore_emulator: Any, tmp_path: Path
) -> None:
    """Minute bars rolled up to 12:00; a backfill brings one tick at 10:05:30 and one at
    12:30: the late one's bucket is marked before it is sent (the roll-up redoes that one
    bucket and its bars equal the ticks'). Then the whole range exported equals
    ``query_frame``."""
    client = datastore_emulator.datastore_client(project=f"late-{uuid.uuid4().hex[:10]}")
    columns = {"symbol": "string", "n": "Int64", "price.micros": "Int64", "volume": "Int64"}
    spec = SeriesSpec("ticks", shards=["a", "b", "c"], key_fields=["symbol", "n"], measures=["volume"], columns=columns)
    store = TimeSeriesStore(client, spec, write_options=FAST)
    t0 = dt.datetime(2026, 3, 2, 10, tzinfo=dt.UTC)

    def tick(n: int, minutes: float, price: int) -> dict[str, Any]:
        return {"symbol": "AAA", "n": n, "timestamp": t0 + dt.timedelta(minutes=minutes), "price": {"micros": price},
                "volume": 100 + n % 7}  # fmt: skip

    store.write([tick(n, n, 100 + n) for n in range(100)])
    minutes = Rollup(spec, interval="1min", by="symbol", volume="volume")
    assert store.rollup(minutes, until=t0 + dt.timedelta(hours=2)).watermark == t0 + dt.timedelta(hours=2)
    rows = [{**t, "timestamp": t["timestamp"].isoformat()} for t in (tick(1000, 5.5, 999_999), tick(1001, 150.5, 7))]
    (tmp_path / "late.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = backfill([str(tmp_path / "late.jsonl")], spec, target=Target.of(client), options=TWO_THREADS, workers=2,
                       ramp=False)  # fmt: skip
    assert (summary.created, summary.rejected) == (2, 0)
    two_hours = {"start": t0, "end": t0 + dt.timedelta(hours=2)}
    assert "late ticks marked there" in store.explain_aggregate(**two_hours, rollups=[minutes]).describe()
    redone = store.rollup(minutes)
    assert redone.redone == 1, redone.describe()
    got = store.aggregate(**two_hours, rollups=[minutes], max=["price.micros"], sum=["volume"])
    want = store.aggregate(**two_hours, sum=["volume"])  # from the ticks (Firestore has no max)
    assert (got.count, got.sum, got.max) == (want.count, want.sum, {"price.micros": 999_999})
    assert want.count == 101
    assert all("ticks_1min" in source for source in got.sources), got.sources
    out = export(spec, target=Target.of(client), options=TWO_THREADS, to=str(tmp_path / "out" / "part"))
    back = pd.concat([pd.read_parquet(f) for f in out.files])
    frame = store.query_frame(direction="asc", columns=list(columns))
    back = back.sort_values(["timestamp", "document_id"]).set_index("timestamp").drop(columns="document_id")
    back = back.astype(frame.dtypes.to_dict())
    back.index = back.index.as_unit("us")
    assert out.rows == len(frame) == 102
    pd.testing.assert_frame_equal(back, frame, check_freq=False)


def test_the_backfill_and_export_commands(
    emulator: Any, inputs: tuple[list[Path], dict[str, Any], set[Any]], tmp_path: Path
) -> None:
    """As a user runs them, on the emulator FIRESTORE_EMULATOR_HOST names; the printed counts
    are what a count() of the collection says afterwards."""
    files, expected_docs, expected_rejects = inputs
    database = f"cli-{os.getpid()}"
    env = {"FIRESTORE_EMULATOR_HOST": emulator.address, "GOOGLE_CLOUD_PROJECT": DEFAULT_PROJECT}
    runner = CliRunner(env=env)
    # One worker process a pipeline: the commands run in worker processes all the same, and the
    # counts of two processes adding up is the first backfill's (TWO_WORKERS) to show.
    common = ["--database", database, "--workers", "1"]
    rejects = str(tmp_path / "rejected.csv")
    loaded = runner.invoke(main, ["backfill", str(files[0].parent / "*"), "--strict", "--rejects", rejects, *common])
    assert loaded.exit_code == 4, loaded.output  # finished, with rows rejected
    client = emulator.client(database=database)
    count = client.collection("instruments").count().get()[0][0].value
    assert count == len(expected_docs)
    assert f"rows read: {count} stored new, 1 already present, {len(expected_rejects)} rejected" in loaded.stdout
    assert read_rejects(Path(rejects)) == expected_rejects
    out = tmp_path / "out" / "fx"
    exported = runner.invoke(main, ["export", "--where", "exchange=FX", "--to", str(out), "--json", *common])
    assert exported.exit_code == 0, exported.output
    fx = TimeSeriesStore(client, SPEC).count(where={"exchange": "FX"})
    summary = json.loads(exported.stdout)
    assert summary["rows"] == fx > 0 and summary["files"] == [f"{out}-00000-of-00001.parquet"]
    back = pd.read_parquet(f"{out}-00000-of-00001.parquet")
    assert set(back["document_id"]) == {i for i, d in expected_docs.items() if d["exchange"] == "FX"}
    refused = runner.invoke(main, ["backfill", str(tmp_path / "none-*.csv"), *common])
    assert refused.exit_code == 2 and "names no file" in refused.output  # as ingest refuses a missing file
    unsized = runner.invoke(main, ["backfill", str(files[0].parent / "*"), "--runner", "DataflowRunner"])
    assert unsized.exit_code == 2 and "say how many processes write at once: --workers N" in unsized.output
    named = runner.invoke(main, ["export", "--to", str(out)], env={**env, "TSSTORE_RUNNER": "DataflowRunner"})
    assert named.exit_code == 2 and "with --runner DataflowRunner, say how many" in named.output  # the variable
    client.close()


# ---------------------------------------------------------------- sealing


SEAL_DAY0 = dt.datetime(2026, 3, 2, tzinfo=dt.UTC)
#: A seal's pipelines run in this process: with a few partitions, start-up is most of their time.
IN_PROCESS = pipeline_options(runner="BundleBasedDirectRunner", workers=1)
DAY = dt.timedelta(days=1)


def day_rows(day: int, count: int, first: int) -> list[dict[str, Any]]:
    return [{"symbol": "AAA", "exchange": "X1", "n": first + i, "volume": 100, "price": {"micros": 10**6 + i},
             "timestamp": SEAL_DAY0 + day * DAY + dt.timedelta(minutes=10 * i)} for i in range(count)]  # fmt: skip


def sealed_state(client: Any, collection: str, lake: Path) -> tuple[Any, ...]:
    """What a seal leaves: the manifest's entries (without the read time they were sealed at
    and the store's generation of each object, which differ between two seals of the same
    data), each named object's rows, the marks left, and the partitions each version of the
    manifest named (from its copies: the order of the switches)."""
    manifest = stored_doc(client, f"tsstore_cold/{collection}") or {"partitions": {}}
    entries = {label: {k: v for k, v in entry.items() if k not in ("sealed_at", "object_generation")}
               for label, entry in manifest["partitions"].items()}  # fmt: skip
    rows = {label: pq.read_table(lake / entry["object"]).to_pylist() for label, entry in entries.items()}
    copies = sorted((lake / collection / "_manifest").glob("*.json"), key=lambda f: int(f.stem))
    versions = [sorted(json.loads(f.read_text())["partitions"]) for f in copies]
    return entries, rows, sorted(stored_docs(client, marks_path(horizon_name(collection)))), versions


@pytest.mark.parametrize("mode", EMULATOR_MODES)
def test_a_seal_pipeline_seals_what_store_seal_seals_late_ticks_included(
    mode: str, request: pytest.FixtureRequest, uses_emulator: None, collection_name: str, tmp_path: Path
) -> None:
    """The same ticks in two databases, one sealed by ``store.seal()``, the other by the
    pipeline: the same results, manifest entries, objects (row for row) and marks left, for a
    first seal (a day without a tick between), then (Native mode) for late, replaced and erased
    ticks into sealed days: the marked days sealed again, one left empty, the marks cleared.
    A rerun is the next test's."""
    until = SEAL_DAY0 + 4 * DAY
    sides = {}
    for side in ("store", "beam"):
        client = mode_client(request, mode, unique_database_id(f"beam-seal-{side}"))
        spec = shared_spec(collection_name, 3, cold=ColdTier(tmp_path / side))
        store = TimeSeriesStore(client, spec, write_options=FAST)
        store.write(day_rows(0, 4, 0) + day_rows(2, 4, 10) + day_rows(3, 4, 20))  # 03-03 without a tick
        sides[side] = (client, spec, store)

    def both() -> tuple[SealResult, SealResult]:
        by_store = sides["store"][2].seal(until=until)
        client, spec, _ = sides["beam"]
        by_beam = seal(spec, target=Target.of(client), options=IN_PROCESS, until=until)
        assert sealed_state(client, collection_name, tmp_path / "beam") == sealed_state(
            sides["store"][0], collection_name, tmp_path / "store"
        )
        return by_store, by_beam

    first, first_beam = both()
    assert first_beam == first and [p.label for p in first.sealed] == ["2026-03-02", "2026-03-04", "2026-03-05"]
    for _, _, store in sides.values() if mode == "native" else ():
        store.write(day_rows(1, 1, 30) + day_rows(5, 1, 40))  # into the empty day, and after the sealed days
        store.write([{**day_rows(0, 1, 0)[0], "volume": 999}], on_duplicate="replace")
        store.purge(start=SEAL_DAY0 + 2 * DAY, end=SEAL_DAY0 + 3 * DAY, correct=True)  # 03-04 left without a tick
    if mode == "native":  # the marks are the requests' own in either mode (tests/test_cold_late.py)
        late, late_beam = both()
        assert late_beam == late and (late.resealed[0].generation, late.emptied) == (2, ("2026-03-04",))
    for client, _, store in sides.values():
        store.close()
        client.close()


class FailOnceSealOne(SealOne):
    """Writes its partition's object, then fails the first time (its bundle is run again)."""

    def __init__(self, *args: Any, marker: str) -> None:
        super().__init__(*args)
        self._marker = marker

    def process(self, unit: SealUnit) -> Iterator[tuple[SealUnit, Written]]:
        done = list(super().process(unit))
        try:
            os.close(os.open(self._marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return iter(done)
        raise RuntimeError(f"failing {unit} after its object was written")


class FailOnceSeal(SealPartitions):
    def __init__(self, *args: Any, marker: str, **options: Any) -> None:
        super().__init__(*args, **options)
        self._marker = marker

    def _seal_dofn(self) -> beam.DoFn:
        return FailOnceSealOne(self._spec, self._target, self._sealing, marker=self._marker)


def test_a_partition_whose_worker_fails_after_its_object_is_sealed_once_beside_an_orphan(
    emulator: Any, client: firestore.Client, collection_name: str, tmp_path: Path
) -> None:
    """The bundle-based DirectRunner runs a failed bundle again, as Dataflow does: the
    partition whose worker failed after writing its object is written again as the next
    generation, the manifest names that one (each day's objects hold its ticks once), and the
    first attempt's object is an orphan no reader reads. A rerun, by the command on the runner
    TSSTORE_RUNNER names, seals nothing new; without a runner, Beam's options are refused, and
    so is a local directory on Dataflow."""
    spec = shared_spec(collection_name, 3, cold=ColdTier(tmp_path / "lake"))
    store = TimeSeriesStore(client, spec, write_options=FAST)
    ids = store.write(day_rows(0, 5, 0) + day_rows(1, 5, 10)).ids
    marker = tmp_path / "failed-once"
    run = functools.partial(seal, spec, target=Target.of(client), until=SEAL_DAY0 + 2 * DAY,
                            options=IN_PROCESS)  # fmt: skip
    result = run(seal=functools.partial(FailOnceSeal, marker=str(marker)))
    assert marker.exists()  # it did fail once, after its object
    assert sorted(p.generation for p in result.sealed) == [1, 2]
    entries = stored_doc(client, f"tsstore_cold/{collection_name}")["partitions"]  # type: ignore[index]
    for label, first in (("2026-03-02", 0), ("2026-03-03", 5)):
        sealed = pq.read_table(tmp_path / "lake" / entries[label]["object"])["document_id"].to_pylist()
        day = store.query(start=entries[label]["start"], end=entries[label]["end"], direction="asc").ticks
        assert sealed == [t.id for t in day] and sorted(sealed) == sorted(ids[first : first + 5])
    files = sorted(str(f.relative_to(tmp_path / "lake")) for f in (tmp_path / "lake").rglob("*.parquet"))
    orphans = [f for f in files if f not in {e["object"] for e in entries.values()}]
    assert len(files) == 3 and len(orphans) == 1 and orphans[0].endswith("part-1.parquet")
    (tmp_path / "app.toml").write_text(
        f'[[series]]\ncollection = "{collection_name}"\nshards = {json.dumps(list(spec.shards))}\n'
        f'key_fields = ["symbol", "n"]\ncold = {{ path = "{tmp_path / "lake"}" }}\n'
    )
    env = {"FIRESTORE_EMULATOR_HOST": emulator.address, "GOOGLE_CLOUD_PROJECT": DEFAULT_PROJECT}
    command = ["seal", "--spec", str(tmp_path / "app.toml"), "--database", database_of(store),
               "--until", "2026-03-04T00:00:00Z", "--format", "json"]  # fmt: skip
    rerun = CliRunner(env={**env, "TSSTORE_RUNNER": "BundleBasedDirectRunner"}).invoke(main, command)
    assert rerun.exit_code == 0, rerun.output
    assert "tsstore: seal on BundleBasedDirectRunner, a partition per element" in rerun.stderr
    assert (json.loads(rerun.stdout)["sealed"], json.loads(rerun.stdout)["skipped"]) == ([], 2)
    assert stored_doc(client, f"tsstore_cold/{collection_name}")["partitions"] == entries  # type: ignore[index]
    refused = CliRunner(env=env).invoke(main, [*command, "--region", "europe-west1"])
    assert refused.exit_code == 2 and "--region is a Beam pipeline's option; give --runner" in refused.output
    local = CliRunner(env=env).invoke(main, [*command, "--runner", "DataflowRunner"])
    assert local.exit_code == 2 and f"is the local directory '{tmp_path / 'lake'}': the workers of" in local.output
