"""Looking at a sealed tier: ``verify_cold`` (each partition the manifest names against
Firestore at one read time: rows and id checksum; marked partitions left to the next seal),
``cold_status`` (through, partitions, ticks, bytes, marks) and ``cold_bigquery`` (an external
table and a load over exactly the manifest's current objects), scripted without Firestore
over a real directory, then on the emulator in both modes, both stores and the command."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import io
import itertools
import json
import shlex
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.cli import run_cli
from tests.conftest import unique_database_id
from tests.scripted import seat
from tests.shared import MODES, T0, async_twin, delete_doc, mode_client, put_doc, stored_doc, ticks
from tests.shared import spec as shared_spec
from tsstore import AsyncTimeSeriesStore, ColdTier, QueryError, SeriesSpec, TimeSeriesStore, WriteOptions
from tsstore.asks import CreateDoc, DeleteDoc, Doc, FindDocs, GetDoc, KnownTime, SetDoc, UpdateDoc
from tsstore.cold.bigquery import bigquery_recipe
from tsstore.cold.gcs import GcsObjects
from tsstore.cold.manifest import Manifest, manifest_path
from tsstore.cold.objects import LocalObjects, ObjectUrls, answer_object
from tsstore.cold.parquet import id_checksum
from tsstore.cold.tier import horizon_name
from tsstore.declaration import load_declaration
from tsstore.late import mark_id, marks_path
from tsstore.read.engine import TickRead
from tsstore.ticks import Tick
from tsstore.verbs import cold, sealed
from tsstore.verbs.request import Collect, Feed, Pause, Request, answer

UTC = dt.timezone.utc
DAY1 = dt.datetime(2026, 11, 1, tzinfo=UTC)
DAY = dt.timedelta(days=1)
DAYS = 3


def day_ticks(days: int = DAYS, per_day: int = 4) -> list[Tick]:
    made = []
    for day, i in itertools.product(range(days), range(per_day)):
        at = DAY1 + dt.timedelta(days=day, hours=i)
        made.append(Tick(f"d{day}-{i}", at, {"timestamp": at, "n": day * 100 + i}))
    return made


class Scripted:
    """A database without Firestore: the manifest document, the tier's marks, the ticks a
    read of a range is answered with (and each read's range and read time), and a real
    directory of objects, named by ``gs://`` URL when the tier is a bucket."""

    def __init__(self, root: Path, tier: str | None = None, days: int = DAYS) -> None:
        self.spec = SeriesSpec("ticks", cold=ColdTier(tier or root))
        self.objects = LocalObjects(root)
        self.urls = GcsObjects.at(tier) if tier is not None else self.objects
        self.ticks = day_ticks(days)
        self.manifest: dict[str, Any] | None = None
        self.written: dt.datetime | None = None
        self.marks: list[dt.datetime] = []
        self.versions: list[tuple[dt.datetime, dict[str, Any]]] = []  # each manifest written, and when
        self.lag = dt.timedelta(0)  # how far behind the server an estimated snapshot is
        self.now = DAY1 + dt.timedelta(days=days + 2)
        self.reads: list[tuple[dt.datetime, dt.datetime, dt.datetime | None, tuple[str, ...] | None]] = []

    def run(self, request: Request[Any]) -> Any:
        return answer(request, self.answer)

    def answer(self, ask: Any) -> Any:
        self.now += dt.timedelta(microseconds=1)
        match ask:
            case list():  # asked together
                return [self.answer(one) for one in ask]
            case GetDoc(path=path, read_time=None) if path == manifest_path("ticks"):
                return Doc("ticks", self.manifest, self.written, self.now)
            case GetDoc(path=path, read_time=at) if path == manifest_path("ticks"):  # as it was then
                then = [(written, data) for written, data in self.versions if written <= at][-1:]
                return Doc("ticks", then[0][1] if then else None, then[0][0] if then else None, at)
            case GetDoc(path=path):
                return Doc(path, None, None, self.now)
            case FindDocs(collection=collection) if collection == marks_path(horizon_name("ticks")):
                return [Doc(mark_id(b), {"bucket": b}, self.now, self.now) for b in self.marks]
            case FindDocs() | SetDoc() | DeleteDoc() | Pause():  # a seal's late-tick protocol: no writer runs here
                return {FindDocs: [], SetDoc: self.now, DeleteDoc: True, Pause: None}[type(ask)]
            case KnownTime():
                return self.now - self.lag
            case Collect(read=TickRead(plan=plan)):
                start = plan.query.start
                return [t for t in self.ticks if start is None or t.timestamp >= start][: plan.limit]
            case Feed(read=TickRead(plan=plan), sink=sink):
                query = plan.query
                self.reads.append((query.start, query.end, query.read_time, plan.columns))  # the fields asked for
                for tick in self.ticks:
                    if (query.start is None or query.start <= tick.timestamp) and tick.timestamp < query.end:
                        sink.add(tick)
                return None
            case CreateDoc() | UpdateDoc():
                self.manifest, self.written = dict(ask.data), self.now
                self.versions.append((self.now, self.manifest))
                return self.written
            case ObjectUrls(names=names):
                return [self.urls.url(name) for name in names]
        return answer_object(self.objects, ask)

    def stored(self) -> Manifest:
        return Manifest.of("ticks", Doc("ticks", self.manifest, self.written, self.now))


# ---------------------------------------------------------------------------- verify_cold, scripted


def test_a_verify_finds_each_partition_verified_differing_or_marked(tmp_path: Path) -> None:
    world = Scripted(tmp_path)
    world.run(cold.seal(seat(world.spec)))
    clean = world.run(sealed.verify_cold(seat(world.spec)))
    assert (clean.verified, clean.differ, clean.marked) == (("2026-11-01", "2026-11-02", "2026-11-03"), (), ())
    assert [(c.stored_rows, c.stored_ids) for c in clean.partitions] == [
        (4, id_checksum(f"d{day}-{i}" for i in range(4))) for day in range(DAYS)
    ]
    # a tick of day 2 gone (rows and ids differ), one of day 3 replaced by another id (ids only),
    # and day 1 changed by a late tick and marked (not compared, though it differs too)
    world.ticks = [t for t in world.ticks if t.id not in ("d1-0", "d0-0")]
    replaced = next(t for t in world.ticks if t.id == "d2-1")
    world.ticks = [*[t for t in world.ticks if t is not replaced], dataclasses.replace(replaced, id="late")]
    world.marks = [DAY1]
    found = world.run(sealed.verify_cold(seat(world.spec)))
    assert (found.verified, found.differ, found.marked) == ((), ("2026-11-02", "2026-11-03"), ("2026-11-01",))
    assert [(c.verdict, c.differs, c.stored_rows) for c in found.partitions] == [
        ("marked", (), None), ("differs", ("rows", "ids"), 3), ("differs", ("ids",), 4),
    ]  # fmt: skip
    said = found.describe().splitlines()
    assert said[0] == ("verified 0 of 3 sealed partition(s) against Firestore (10 ticks read, 1 billed reads); "
                       "2 differ, 1 marked")  # fmt: skip
    assert said[1].startswith("2026-11-01 marked: a late tick changed it since it was sealed")
    sealed_ids, stored_ids = world.stored().entries["2026-11-02"].ids, id_checksum(["d1-1", "d1-2", "d1-3"])
    assert said[2] == (f"2026-11-02 differs: rows 4 sealed, 3 in Firestore; ids {sealed_ids} sealed, {stored_ids} "
                       "in Firestore")


def test_a_verify_reads_only_ids_each_read_at_one_read_time_sized_like_a_seal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    world = Scripted(tmp_path, days=5)
    world.run(cold.seal(seat(world.spec)))
    world.reads.clear()
    monkeypatch.setattr(sealed, "TICKS_PER_READ", 8)  # two days of 4 ticks a read
    checked = world.run(sealed.verify_cold(seat(world.spec)))
    # the reads tile the sealed history: from the first tick, so that a day before the first
    # sealed one is read too
    assert [(start and start.day, end.day) for start, end, _, _ in world.reads] == [(None, 3), (3, 5), (5, 6)]
    assert all(columns == ("timestamp",) and read_time is not None for _, _, read_time, columns in world.reads)
    times = [c.read_time for c in checked.partitions]
    assert times[0] == times[1] < times[2] == times[3] < times[4]  # each read's partitions at its read time
    assert checked.verified == tuple(f"2026-11-0{day}" for day in range(1, 6))


def test_a_day_sealed_as_empty_that_holds_a_tick_now_differs_unless_marked(tmp_path: Path) -> None:
    world = Scripted(tmp_path, days=5)
    world.ticks = [t for t in world.ticks if t.timestamp.day not in (2, 4)]  # days 2 and 4 without a tick
    world.run(cold.seal(seat(world.spec)))
    assert sorted(world.stored().entries) == ["2026-11-01", "2026-11-03", "2026-11-05"]
    assert world.run(sealed.verify_cold(seat(world.spec))).verified == ("2026-11-01", "2026-11-03", "2026-11-05")
    early, on_2, on_4 = (Tick(name, at, {"timestamp": at}) for name, at in (
        ("early", DAY1 - 3 * DAY), ("on-2", DAY1 + DAY), ("on-4", DAY1 + 3 * DAY)))  # fmt: skip
    world.ticks += [early, on_2, on_4]
    world.marks = [DAY1 + 3 * DAY]  # day 4's late tick was marked; day 2's and the early one were not
    found = world.run(sealed.verify_cold(seat(world.spec)))
    assert (found.differ, found.marked) == (("2026-10-29", "2026-11-02"), ("2026-11-04",))
    differing = [c for c in found.partitions if c.verdict == "differs"]
    assert [(c.label, c.rows, c.ids, c.stored_rows, c.stored_ids) for c in differing] == [
        ("2026-10-29", 0, id_checksum([]), 1, id_checksum(["early"])),
        ("2026-11-02", 0, id_checksum([]), 1, id_checksum(["on-2"])),
    ]  # fmt: skip


def test_a_day_sealed_after_the_read_time_is_not_compared_even_when_sealed_before_the_verify_began(
    tmp_path: Path,
) -> None:
    """With an estimated snapshot a little behind the server, the manifest at the read time
    may not name the day a seal named just before: its ticks are not taken for a day sealed
    as empty."""
    world = Scripted(tmp_path)
    world.run(cold.seal(seat(world.spec), until=DAY1 + 2 * DAY))
    world.run(cold.seal(seat(world.spec)))  # day 3, sealed last
    world.lag = world.now - world.versions[-1][0] + dt.timedelta(microseconds=5)  # before day 3's switch (2 asks on)
    found = world.run(sealed.verify_cold(seat(world.spec, snapshots="estimated")))
    assert (found.verified, found.differ) == (("2026-11-01", "2026-11-02"), ())


def test_a_series_without_a_cold_tier_is_refused_by_every_look(tmp_path: Path) -> None:
    for request in (sealed.verify_cold, sealed.cold_status, lambda s: sealed.cold_bigquery(s, "lake.ticks")):
        with pytest.raises(QueryError, match="collection 'plain' declares no cold tier; declare one"):
            answer(request(seat(SeriesSpec("plain"))), lambda ask: None)


# ---------------------------------------------------------------------------- cold_status, scripted


def test_the_status_says_through_partitions_ticks_bytes_and_marks(tmp_path: Path) -> None:
    world = Scripted(tmp_path)
    assert world.run(sealed.cold_status(seat(world.spec))).describe() == f"ticks: nothing sealed yet in {tmp_path}"
    world.run(cold.seal(seat(world.spec), until=DAY1 + 2 * DAY))
    world.marks = [DAY1 + DAY]
    status = world.run(sealed.cold_status(seat(world.spec)))
    entries = world.stored().entries
    size = sum(e.bytes for e in entries.values())
    assert (status.through, status.partitions, status.rows, status.size, status.marked) == (
        DAY1 + 2 * DAY, 2, 8, size, ("2026-11-02",))  # fmt: skip
    assert status.sealed_at == max(e.sealed_at for e in entries.values())
    assert status.describe() == (f"ticks: sealed through 2026-11-03T00:00:00Z in {tmp_path}: 2 partition(s), 8 ticks, "
                                 f"{size} bytes; marked: 2026-11-02")  # fmt: skip


# ---------------------------------------------------------------------------- cold_bigquery


def test_the_bigquery_recipe_names_every_current_object_and_none_superseded(tmp_path: Path) -> None:
    world = Scripted(tmp_path, tier="gs://my-lake/ticks")
    world.run(cold.seal(seat(world.spec)))
    assert world.manifest is not None  # day 2 sealed again: generation 2 is current, generation 1 superseded
    again = dict(world.manifest["partitions"]["2026-11-02"], generation=2,
                 object="ticks/date=2026-11-02/part-2.parquet")  # fmt: skip
    world.manifest = {**world.manifest, "partitions": {**world.manifest["partitions"], "2026-11-02": again}}
    recipe = world.run(sealed.cold_bigquery(seat(world.spec), "my-project.analytics.ticks"))
    current = [f"gs://my-lake/ticks/ticks/date=2026-11-0{d}/part-{g}.parquet" for d, g in ((1, 1), (2, 2), (3, 1))]
    assert recipe.uris == tuple(current)
    assert recipe.external_table == (
        "CREATE OR REPLACE EXTERNAL TABLE `my-project.analytics.ticks`\n"
        "WITH PARTITION COLUMNS (date DATE)\n"
        "OPTIONS (\n"
        "  format = 'PARQUET',\n"
        "  hive_partition_uri_prefix = 'gs://my-lake/ticks/ticks',\n"
        "  uris = [\n" + ",\n".join(f"    '{uri}'" for uri in current) + "\n  ]\n);"
    )
    assert "date=2026-11-02/part-1" not in recipe.describe()
    words = shlex.split(recipe.load.replace("\\\n", " "))  # a line continued, as a shell reads it
    assert words == ["bq", "load", "--replace", "--source_format=PARQUET", "--hive_partitioning_mode=CUSTOM",
                     "--hive_partitioning_source_uri_prefix=gs://my-lake/ticks/ticks/{date:DATE}",
                     "my-project:analytics.ticks", ",".join(current)]  # fmt: skip
    assert recipe.describe().startswith("-- an external table over the 3 sealed partition(s) (run in BigQuery):\n")


def test_the_bigquery_recipe_quotes_what_it_names() -> None:
    uris = ["gs://b/p/it's/date=2026-11-01/part-1.parquet", "gs://b/p/it's/date=2026-11-02/part-1 a\\b.parquet"]
    recipe = bigquery_recipe("analytics.ticks_1", uris, prefix="gs://b/p/it's")
    assert "hive_partition_uri_prefix = 'gs://b/p/it\\'s'," in recipe.external_table
    assert "    'gs://b/p/it\\'s/date=2026-11-02/part-1 a\\\\b.parquet'\n" in recipe.external_table
    assert shlex.split(recipe.load.replace("\\\n", " "))[-2:] == ["analytics.ticks_1", ",".join(uris)]
    assert recipe.external_table.startswith("CREATE OR REPLACE EXTERNAL TABLE `analytics.ticks_1`\n")


def test_the_bigquery_recipe_names_the_fields_bigquery_takes_no_column_of(tmp_path: Path) -> None:
    world = Scripted(tmp_path, tier="gs://my-lake/ticks")
    world.spec = SeriesSpec("ticks", key_fields=["symbol"], columns={"symbol": "string", "price.micros": "Int64"},
                            measures=["size.lots"], cold=world.spec.cold)  # fmt: skip
    world.run(cold.seal(seat(world.spec)))
    recipe = world.run(sealed.cold_bigquery(seat(world.spec), "analytics.ticks"))
    assert recipe.unnamed == ("price.micros", "size.lots")
    warned = ("-- BigQuery takes column names of letters, digits and underscores only (unless the project has "
              "flexible column names): price.micros, size.lots will not read\n")
    assert recipe.describe().startswith(warned + "-- an external table over the 3 sealed")


@pytest.mark.parametrize("table", ["ticks", "a.b.c.d", "analytics.`x`", "analytics.x y", "Bad_Project.a.b", "", 5])
def test_a_table_bigquery_cannot_name_is_refused_by_name(tmp_path: Path, table: Any) -> None:
    world = Scripted(tmp_path, tier="gs://my-lake/ticks")
    with pytest.raises(QueryError, match=f"cold_bigquery: table {table!r} is not allowed; give DATASET.TABLE"):
        world.run(sealed.cold_bigquery(seat(world.spec), table))


def test_a_local_tier_is_refused_by_bigquery_by_name(tmp_path: Path) -> None:
    world = Scripted(tmp_path)
    with pytest.raises(QueryError, match=f"the cold tier of 'ticks' is the directory '{tmp_path}'; BigQuery reads "
                                         "gs:// objects only"):  # fmt: skip
        world.run(sealed.cold_bigquery(seat(world.spec), "analytics.ticks"))


def test_nothing_sealed_yet_is_a_recipe_that_says_so(tmp_path: Path) -> None:
    world = Scripted(tmp_path, tier="gs://my-lake/ticks")
    recipe = world.run(sealed.cold_bigquery(seat(world.spec), "analytics.ticks"))
    assert (recipe.uris, recipe.external_table) == ((), "-- no partition under gs://my-lake/ticks/ticks is sealed "
                                                        "yet: nothing to read")  # fmt: skip


# ---------------------------------------------------------------------------- on the emulator


def sealed_store(client: Any, collection: str, root: Path) -> tuple[TimeSeriesStore, list[Tick]]:
    """60 ticks over three days sealed into ``root``; the store and the ticks, oldest first."""
    spec = shared_spec(collection, 3, cold=ColdTier(root))
    rows = [{**row, "timestamp": row["timestamp"] + dt.timedelta(days=row["n"] % 3)} for row in ticks(60, seed=11)]
    store = TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False))
    store.write(rows)
    assert store.seal(until=T0.replace(hour=0) + 3 * DAY).rows == 60
    return store, list(store.query(direction="asc").ticks)


@pytest.mark.parametrize("mode", MODES)
def test_on_the_emulator_a_verify_finds_a_tick_gone_behind_tsstores_back_and_leaves_a_marked_day(
    mode: str, request: pytest.FixtureRequest, uses_emulator: None, collection_name: str, tmp_path: Path
) -> None:
    client = mode_client(request, mode, unique_database_id(request.node.name))
    store, stored = sealed_store(client, collection_name, tmp_path / "lake")
    days = ["2026-03-02", "2026-03-03", "2026-03-04"]
    clean = store.verify_cold()
    assert (clean.verified, clean.differ, clean.marked, clean.ticks) == (tuple(days), (), (), 60)
    assert clean.billed_reads >= 60  # a read of every sealed tick
    assert len({check.read_time for check in clean.partitions}) == 1  # one read: one read time
    on = {day: [t for t in stored if t.timestamp.date().isoformat() == day] for day in days}
    delete_doc(client, f"{collection_name}/{on[days[1]][0].id}")  # a write tsstore did not see
    delete_doc(client, f"{collection_name}/{on[days[2]][0].id}")  # and one into a day marked since
    late = T0.replace(hour=0) + 2 * DAY
    put_doc(client, f"{marks_path(horizon_name(collection_name))}/{mark_id(late)}", {"bucket": late})
    found = store.verify_cold()
    assert (found.verified, found.differ, found.marked) == ((days[0],), (days[1],), (days[2],))
    assert [(c.differs, c.rows, c.stored_rows) for c in found.partitions[1:]] == [
        (("rows", "ids"), len(on[days[1]]), len(on[days[1]]) - 1), ((), len(on[days[2]]), None),
    ]  # fmt: skip
    status = store.cold_status()
    assert (status.through, status.partitions, status.rows, status.marked) == (late + DAY, 3, 60, (days[2],))
    assert asyncio.run(_async_looks(request, store)) == (timeless(found), status)
    store.close()
    client.close()


async def _async_looks(request: pytest.FixtureRequest, store: TimeSeriesStore) -> tuple[Any, Any]:
    async with async_twin(store, request) as client:
        async with AsyncTimeSeriesStore(client, store.spec) as astore:
            found = await astore.verify_cold()
            status = await astore.cold_status()
    assert len({check.read_time for check in found.partitions}) == 1
    return timeless(found), status


def timeless(found: Any) -> Any:
    """A verify's result without its read times and billed reads (another read's)."""
    partitions = tuple(dataclasses.replace(check, read_time=None) for check in found.partitions)
    return dataclasses.replace(found, partitions=partitions, billed_reads=0)


def test_seal_verify_status_and_bigquery_from_the_command_line(emulator: Any, tmp_path: Path,
                                                               collection_name: str) -> None:  # fmt: skip
    database = unique_database_id("seal-verify")
    (tmp_path / "app.toml").write_text(f'[[series]]\ncollection = "{collection_name}"\ncold = {{ path = "lake" }}\n')
    [spec], _ = load_declaration(str(tmp_path / "app.toml"))
    client = emulator.client(database=database)
    with TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) as store:
        store.write([{"timestamp": T0 + dt.timedelta(days=day, minutes=i)} for day in range(2) for i in range(5)])
        store.seal(until=T0.replace(hour=0) + 2 * DAY)
        gone = store.query(limit=1).ticks[0]
    common = ("--spec", "app.toml", "--database", database)
    verified = run_cli("seal", *common, "--verify", emulator=emulator, cwd=tmp_path)
    assert verified.returncode == 0, verified.stderr
    assert verified.stdout.startswith("verified 2 of 2 sealed partition(s) against Firestore (10 ticks read, ")
    status = run_cli("seal", *common, "--status", emulator=emulator, cwd=tmp_path)
    assert status.stdout.startswith(f"{collection_name}: sealed through 2026-03-04T00:00:00Z in {tmp_path / 'lake'}: "
                                    "2 partition(s), 10 ticks, ")  # fmt: skip
    delete_doc(client, f"{collection_name}/{gone.id}")
    differs = run_cli("seal", *common, "--verify", "--format", "json", emulator=emulator, cwd=tmp_path)
    assert differs.returncode == 1 and "Traceback" not in differs.stderr
    said = json.loads(differs.stdout)
    assert (said["verified"], said["differ"], said["partitions"][1]["differs"]) == (
        ["2026-03-02"], ["2026-03-03"], ["rows", "ids"])  # fmt: skip
    for extra, message in (
        (("--bigquery", "analytics.ticks"), f"the cold tier of '{collection_name}' is the directory "),
        (("--verify", "--status"), "--verify and --status are each a look of their own; give one of them"),
        (("--verify", "--until", "2026-03-04T00:00:00Z"), "--verify seals nothing, so --until '2026-03-04T00:00:00Z'"),
        (("--bigquery", "ticks"), "cold_bigquery: table 'ticks' is not allowed; give DATASET.TABLE"),
        (("--status", "--runner", "DirectRunner"), "--runner 'DirectRunner' runs a seal; --verify, --status and"),
    ):
        refused = run_cli("seal", *common, *extra, emulator=emulator, cwd=tmp_path)
        assert refused.returncode == 2 and message in refused.stderr, (extra, refused.stderr)
    client.close()


def test_the_bigquery_recipe_of_a_bucket_names_the_objects_the_manifest_names_there(
    emulator: Any, gcs_bucket: str, collection_name: str, tmp_path: Path
) -> None:
    """Sealed into a bucket (fake-gcs-server): the command's recipe names each object the
    manifest names, each one in the bucket, holding its day's ticks; the verify agrees."""
    database = unique_database_id("seal-bigquery")
    (tmp_path / "app.toml").write_text(f'[[series]]\ncollection = "{collection_name}"\n'
                                       f'cold = {{ path = "gs://{gcs_bucket}/lake" }}\n')  # fmt: skip
    [spec], _ = load_declaration(str(tmp_path / "app.toml"))
    client = emulator.client(database=database)
    with TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) as store:
        store.write([{"timestamp": T0 + dt.timedelta(days=day, minutes=i)} for day in range(2) for i in range(3)])
    common = ("--spec", "app.toml", "--database", database)
    assert run_cli("seal", *common, "--until", "2026-03-04T00:00:00Z", emulator=emulator, cwd=tmp_path).returncode == 0
    printed = run_cli("seal", *common, "--bigquery", "analytics.ticks", "--format", "json", emulator=emulator,
                      cwd=tmp_path)  # fmt: skip
    assert printed.returncode == 0, printed.stderr
    recipe = json.loads(printed.stdout)
    manifest = Manifest.of(collection_name, Doc("m", stored_doc(client, manifest_path(collection_name)), None, T0))
    bucket = GcsObjects.at(f"gs://{gcs_bucket}/lake")
    assert recipe["uris"] == [bucket.url(name) for name in manifest.current()]
    assert [pq.read_table(io.BytesIO(bucket.get(name) or b"")).num_rows for name in manifest.current()] == [3, 3]
    assert f"hive_partition_uri_prefix = 'gs://{gcs_bucket}/lake/{collection_name}'" in recipe["external_table"]
    verified = run_cli("seal", *common, "--verify", emulator=emulator, cwd=tmp_path)
    assert verified.returncode == 0 and verified.stdout.startswith("verified 2 of 2 sealed partition(s)")
    client.close()
