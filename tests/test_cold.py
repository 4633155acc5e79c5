"""The cold tier: the declaration, the local object store, the sealing protocol run without
Firestore against a scripted database and a real directory (a rerun, a sealer that loses its
switch, an orphan, a kill at every ask; late ticks into sealed days: marked days sealed again,
their marks cleared after the switch, the writers waited for), and sealed days read back by
DuckDB and Polars on the emulator, equal to the store's own reads."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import itertools
import json
import os
import operator
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.cli import run_cli
from tests.conftest import unique_database_id
from tests.scripted import seat
from tests.shared import MODES, T0, async_twin, mode_client, stored_doc, ticks
from tests.shared import spec as shared_spec
from tsstore import AsyncTimeSeriesStore, QueryError, QueryShape, SeriesSpec, SpecError, TimeSeriesStore, WriteOptions
from tsstore.analytics.rollup import Rollup
from tsstore.asks import CreateDoc, DeleteDoc, Doc, FindDocs, GetDoc, KnownTime, SetDoc, UpdateDoc
from tsstore.cli.output import echo_figures
from tsstore.cold.manifest import ORPHAN_GRACE, Entry, Manifest, manifest_path
from tsstore.cold.objects import Damaged, DeleteObject, LocalObjects, ObjectInfo, Placed, Taken, answer_object
from tsstore.cold.parquet import ID_COLUMN, id_checksum, parquet_bytes, sorted_rows, with_ids
from tsstore.cold.tier import horizon_fields, partition_label
from tsstore.cold_tier import ColdTier
from tsstore.declaration import load_declaration
from tsstore.late import WRITERS, Horizon, LatePolicy, mark_id, marks_path
from tsstore.read.engine import TickRead
from tsstore.ticks import Tick
from tsstore.verbs import cold, sealed
from tsstore.verbs.request import Collect, Feed, Pause, Request, answer
from tsstore.write.marks import View, decide
from tsstore.write.ops import Erase

UTC = dt.timezone.utc
OPS = {"==": operator.eq, ">=": operator.ge, "<": operator.lt}
DAY1 = dt.datetime(2026, 11, 1, tzinfo=UTC)
DAYS = 3


# ---------------------------------------------------------------------------- the declaration


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"partition": "6h"}, "partition must be a whole number of days, got '6h'"),
        ({"partition": "2D", "seal_after": "1D"}, "seal_after '1D' is shorter than its partition '2D'"),
        ({"partition": "0D"}, "give a positive whole number of days"),
        ({"seal_after": "5"}, "has no unit"),
    ],
)
def test_a_cold_tier_refuses_what_cannot_be(options: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        ColdTier("cold", **options)


@pytest.mark.parametrize("path", ["", "s3://bucket/prefix", "gs://", "gs:///prefix"])
def test_a_cold_tier_path_is_a_directory_or_a_bucket(path: str) -> None:
    with pytest.raises(SpecError, match=f"cold tier path {path!r}"):
        ColdTier(path)


def test_a_declaration_file_declares_a_cold_tier_relative_to_itself(tmp_path: Path) -> None:
    declared = tmp_path / "app" / "series.toml"
    declared.parent.mkdir()
    declared.write_text(
        '[[series]]\ncollection = "ticks"\ncold = { path = "lake", partition = "2D", seal_after = "3D" }\n'
        '[[series]]\ncollection = "bucketed"\ncold = { path = "gs://bucket/prefix/" }\n'
    )
    (ticks, bucketed), _ = load_declaration(str(declared))
    assert ticks.cold == ColdTier(str(declared.parent / "lake"), partition="2D", seal_after="3D")
    assert bucketed.cold == ColdTier("gs://bucket/prefix", partition="1D", seal_after="2D")
    declared.write_text('[[series]]\ncollection = "ticks"\ncold = { path = "lake", every = "1D" }\n')
    with pytest.raises(SpecError, match=r"unknown key\(s\) \['every'\] in the cold tier; allowed: path"):
        load_declaration(str(declared))


def test_a_rollup_named_as_a_series_cold_tier_is_refused_by_name(tmp_path: Path) -> None:
    message = "roll-up collection 'ticks.cold' is the name the cold tier of 'ticks' goes by in tsstore_rollups"
    with pytest.raises(SpecError, match=message):
        Rollup(SeriesSpec("ticks"), collection="ticks.cold")
    declared = tmp_path / "series.toml"
    declared.write_text('[[series]]\ncollection = "ticks"\n[[series]]\ncollection = "quotes"\n'
                        '[[rollup]]\nsource = "quotes"\ncollection = "ticks.cold"\n')  # fmt: skip
    with pytest.raises(SpecError, match=message):
        load_declaration(str(declared))


# ---------------------------------------------------------------------------- the local object store


def test_the_local_store_never_replaces_an_object(tmp_path: Path) -> None:
    objects = LocalObjects(tmp_path)
    placed = objects.put_new("ticks/date=2026-11-01/part-1.parquet", b"first")
    assert isinstance(placed, Placed) and placed.size == 5
    assert objects.put_new("ticks/date=2026-11-01/part-1.parquet", b"second") == Taken(
        "ticks/date=2026-11-01/part-1.parquet"
    )
    assert objects.get("ticks/date=2026-11-01/part-1.parquet") == b"first"
    assert [o.name for o in objects.list("ticks/")] == ["ticks/date=2026-11-01/part-1.parquet"]  # no temporary left
    assert objects.delete("ticks/date=2026-11-01/part-1.parquet") and not objects.delete("ticks/x")
    assert objects.get("ticks/date=2026-11-01/part-1.parquet") is None


def test_a_temporary_file_a_killed_writer_left_goes_with_the_next_write_an_hour_on(tmp_path: Path) -> None:
    store = LocalObjects(tmp_path)
    day = tmp_path / "t" / "date=2026-11-01"
    day.mkdir(parents=True)
    stale, fresh = day / ".part-1.parquet.aaaa.tmp", day / ".part-1.parquet.bbbb.tmp"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    hour_ago = dt.datetime.now().timestamp() - 3601
    os.utime(stale, (hour_ago, hour_ago))
    assert isinstance(store.put_new("t/date=2026-11-01/part-2.parquet", b"whole"), Placed)
    assert (stale.exists(), fresh.exists()) == (False, True)


def test_a_partitions_parquet_is_zstd_in_row_groups_sorted_by_time_then_id() -> None:
    at = [DAY1 + dt.timedelta(seconds=s) for s in (2, 1, 1, 0, 2)]
    table = with_ids(pa.table({"timestamp": pa.array(at, pa.timestamp("us", tz="UTC")), "n": [0, 1, 2, 3, 4]}),
                     ["e", "d", "c", "b", "a"])  # fmt: skip
    data = parquet_bytes(sorted_rows(table, timestamp_field="timestamp"), row_group_rows=2)
    read = pq.ParquetFile(pa.BufferReader(data))
    assert (read.metadata.num_row_groups, read.metadata.row_group(0).column(0).compression) == (3, "ZSTD")
    assert read.read()[ID_COLUMN].to_pylist() == ["b", "c", "d", "a", "e"]


# ---------------------------------------------------------------------------- the protocol, scripted


def day_ticks(per_day: int = 5) -> list[Tick]:
    """Ticks over :data:`DAYS` days, two of each day at one time (ties broken by id)."""
    made = []
    for day, i in itertools.product(range(DAYS), range(per_day)):
        at = DAY1 + dt.timedelta(days=day, hours=i // 2)
        made.append(Tick(f"d{day}-{per_day - i:02d}", at, {"timestamp": at, "symbol": "AAA", "n": day * 100 + i}))
    return made


class World:
    """What a scripted seal runs on: the manifest document (written at a time that moves on
    with each write, which is what a precondition compares), a real directory of objects,
    and the ticks a read of a range is answered with."""

    def __init__(self, root: Path, ticks: list[Tick]) -> None:
        self.spec = SeriesSpec("ticks", cold=ColdTier(root))
        self.objects = LocalObjects(root)
        self.ticks = ticks
        self.manifest: dict[str, Any] | None = None
        self.written: dt.datetime | None = None
        self.now = DAY1 + dt.timedelta(days=DAYS + 2)  # every day closed for seal_after
        self.asked: list[Any] = []
        self.before_switch: Any = None  # called once at the next switch, before it is answered
        self.docs: dict[str, tuple[dict[str, Any], dt.datetime]] = {}  # other documents: data, update time
        self.leases: list[Doc] = []  # the writers' leases

    def seal(self, **options: Any) -> Any:
        return self.run(cold.seal(seat(self.spec), **options))

    def run(self, request: Request[Any]) -> Any:
        return answer(request, self.answer)

    def answer(self, ask: Any) -> Any:
        if isinstance(ask, list):  # asked together
            return [self.answer(one) for one in ask]
        self.asked.append(ask)
        self.now += dt.timedelta(microseconds=1)
        match ask:
            case GetDoc(path=path) if path == manifest_path("ticks"):
                return Doc("ticks", self.manifest, self.written, self.now)
            case GetDoc(path=path) if path in self.docs:
                data, written = self.docs[path]
                return Doc(path.rsplit("/", 1)[-1], dict(data), written, self.now)
            case GetDoc(path=path):  # the server's time
                return Doc(path, None, None, self.now)
            case SetDoc(path=path, data=data, merge=merge, server_time=stamped):
                held = self.docs[path][0] if merge and path in self.docs else {}
                self.docs[path] = ({**held, **data, **{name: self.now for name in stamped}}, self.now)
                return self.now
            case DeleteDoc(path=path, written=written):
                if path not in self.docs or written not in (None, self.docs[path][1]):
                    return False
                del self.docs[path]
                return True
            case FindDocs(collection=collection) if collection == WRITERS:
                return list(self.leases)
            case FindDocs(collection=collection, where=where):
                found = [Doc(path.rsplit("/", 1)[-1], dict(data), written, self.now)
                         for path, (data, written) in sorted(self.docs.items())
                         if path.rsplit("/", 1)[0] == collection]  # fmt: skip
                return [doc for doc in found if all(OPS[op]((doc.data or {}).get(f), v) for f, op, v in where)]
            case Pause(seconds=seconds):
                self.now += dt.timedelta(seconds=seconds)
                return None
            case KnownTime():
                return self.now
            case Collect(read=TickRead(plan=plan)):  # the first tick from a time
                start = plan.query.start
                return [t for t in self.ticks if start is None or t.timestamp >= start][: plan.limit]
            case Feed(read=TickRead(plan=plan), sink=sink):  # in the plan's order, at most its limit
                start, end = plan.query.start, plan.query.end
                found = [t for t in self.ticks if (start is None or start <= t.timestamp) and t.timestamp < end]
                for tick in sorted(found, key=plan.key, reverse=plan.descending)[: plan.limit]:
                    sink.add(tick)
                return None
            case CreateDoc() | UpdateDoc():
                if self.before_switch is not None:
                    other, self.before_switch = self.before_switch, None
                    other()
                if (self.written is None) != isinstance(ask, CreateDoc) or (
                    isinstance(ask, UpdateDoc) and ask.written != self.written
                ):
                    return None  # written since: the precondition fails
                self.manifest, self.written = dict(ask.data), self.now
                return self.written
        return answer_object(self.objects, ask)

    def read_back(self) -> list[tuple[str, dt.datetime]]:
        """(id, time) of every row of the objects the manifest names, in order."""
        rows = []
        for name in Manifest.of("ticks", Doc("ticks", self.manifest, self.written, self.now)).current():
            table = pq.read_table(self.objects.url(name))
            rows += list(zip(table[ID_COLUMN].to_pylist(), table["timestamp"].to_pylist()))
        return rows

    def stored(self) -> Manifest:
        return Manifest.of("ticks", Doc("ticks", self.manifest, self.written, self.now))

    def late(self, tick: Tick | None = None, *, erase: str | None = None) -> None:
        """What a writer does: mark the tick's day of the cold tier, then write it (or erase
        the tick ``erase``)."""
        gone = next((t for t in self.ticks if t.id == erase), None)
        at = tick.timestamp if tick is not None else gone.timestamp if gone is not None else DAY1
        bucket = self.spec.cold.start_of(at) if self.spec.cold is not None else at
        self.now += dt.timedelta(microseconds=1)
        mark = {"bucket": bucket, "nonce": str(self.now)}
        self.docs[f"{marks_path('ticks.cold')}/{mark_id(bucket)}"] = (mark, self.now)
        self.ticks = [t for t in self.ticks if t.id != erase] + ([tick] if tick is not None else [])

    def marked(self) -> list[str]:
        """The days the cold tier's marks name."""
        return [partition_label(data["bucket"]) for path, (data, _) in sorted(self.docs.items())
                if path.startswith(marks_path("ticks.cold"))]  # fmt: skip


def expected(ticks: list[Tick]) -> list[tuple[str, dt.datetime]]:
    return sorted((t.id, t.timestamp) for t in ticks)


def by_time(rows: list[tuple[str, dt.datetime]]) -> list[tuple[str, dt.datetime]]:
    return sorted(rows, key=lambda row: (row[1], row[0]))


def test_a_seal_writes_each_day_sorted_and_a_rerun_seals_nothing_new(tmp_path: Path) -> None:
    world = World(tmp_path, day_ticks())
    first = world.seal()
    assert [(p.label, p.rows, p.generation) for p in first.sealed] == [
        ("2026-11-01", 5, 1), ("2026-11-02", 5, 1), ("2026-11-03", 5, 1),
    ]  # fmt: skip
    assert world.read_back() == by_time(expected(world.ticks))  # by time, then id
    entries = world.stored().entries
    assert [entries[p.label].ids for p in first.sealed] == [
        id_checksum(t.id for t in world.ticks if t.timestamp.date().isoformat() == label)
        for label in ("2026-11-01", "2026-11-02", "2026-11-03")
    ]
    switches = len([a for a in world.asked if isinstance(a, (CreateDoc, UpdateDoc))])
    manifest_reads = [a for a in world.asked if isinstance(a, GetDoc) and a.path == manifest_path("ticks")]
    assert (switches, len(manifest_reads)) == (DAYS, 3)  # read at the start, for the watermark and after listing
    # the objects: each switch starts from the one before it (its write time the next precondition), not a read
    again = world.seal()
    assert (again.sealed, again.skipped) == ((), DAYS)
    assert len([a for a in world.asked if isinstance(a, (CreateDoc, UpdateDoc))]) == switches  # no switch
    assert world.stored().version == DAYS


def test_a_day_without_a_tick_is_passed_over_for_the_next_tick(tmp_path: Path) -> None:
    world = World(tmp_path, [t for t in day_ticks() if t.timestamp.day != 2])
    done = world.seal()
    assert [p.label for p in done.sealed] == ["2026-11-01", "2026-11-03"]
    assert [o.name for o in world.objects.list("ticks/date=")] == [
        "ticks/date=2026-11-01/part-1.parquet", "ticks/date=2026-11-03/part-1.parquet"
    ]  # fmt: skip
    assert world.read_back() == by_time(expected(world.ticks))


def test_the_view_reads_days_whose_columns_differ(tmp_path: Path) -> None:
    made = day_ticks()
    made[0] = Tick(made[0].id, made[0].timestamp, {**made[0].data, "venue": "XNYS"})  # only the first day has it
    world = World(tmp_path, made)
    world.seal()
    with duckdb.connect() as duck:
        duck.execute(world.run(sealed.cold_sql(seat(world.spec))))
        venues = duck.sql("SELECT document_id, venue FROM ticks WHERE venue IS NOT NULL").fetchall()
        assert (venues, duck.sql("SELECT count(*) FROM ticks").fetchall()) == ([(made[0].id, "XNYS")], [(15,)])


def test_a_seal_reads_its_days_in_one_read_stopped_after_about_ticks_per_read_at_a_days_end(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def reads(world: World) -> list[tuple[dt.datetime | None, dt.datetime, int | None]]:
        return [(a.read.plan.query.start, a.read.plan.query.end, a.read.plan.query.limit)
                for a in world.asked if isinstance(a, Feed)]  # fmt: skip

    one, two, three = (DAY1 + dt.timedelta(days=n) for n in (1, 2, 3))
    world = World(tmp_path / "one", day_ticks())
    assert [p.label for p in world.seal().sealed] == ["2026-11-01", "2026-11-02", "2026-11-03"]
    # one read from the oldest tick on (on the emulator each query scans the collection): no query for
    # the oldest tick, no read of a day alone to size the rest
    assert reads(world) == [(None, three, cold.TICKS_PER_READ)] and not any(isinstance(a, Collect) for a in world.asked)
    assert len({entry.sealed_at for entry in world.stored().entries.values()}) == 1
    assert world.read_back() == by_time(expected(world.ticks))
    monkeypatch.setattr(cold, "TICKS_PER_READ", 6)  # a day and one tick of the next: that day is read again
    cut = World(tmp_path / "two", day_ticks())
    cut.seal()
    assert reads(cut) == [(None, three, 6), (one, three, 6 + 5)]  # then 6 and the most a day held
    assert cut.read_back() == by_time(expected(cut.ticks))
    later = World(tmp_path / "three", day_ticks())
    later.seal(until=one)
    later.seal()  # the manifest's newest entry says how many a day held; a limit-1 query looks before it
    assert reads(later) == [(None, one, 6), (one, three, 6 + 5)]
    assert sum(isinstance(a, Collect) for a in later.asked) == 1
    monkeypatch.setattr(cold, "TICKS_PER_READ", 3)  # a day holds more: read again with the limit raised
    big = World(tmp_path / "four", day_ticks())
    big.seal()
    assert reads(big) == [(None, three, 3), (None, three, 3 + 3), (one, three, 3 + 5), (two, three, 3 + 5)]
    assert big.read_back() == by_time(expected(big.ticks))


def test_until_seals_only_the_days_ending_by_it(tmp_path: Path) -> None:
    world = World(tmp_path, day_ticks())
    assert [p.label for p in world.seal(until=DAY1 + dt.timedelta(days=2, hours=23)).sealed] == [
        "2026-11-01", "2026-11-02"
    ]  # fmt: skip
    world.now = DAY1 + dt.timedelta(days=DAYS + 1)  # the third day ended a day ago: seal_after (2D) not passed
    assert world.seal().sealed == ()


def test_a_sealer_whose_switch_loses_leaves_no_visible_duplicate(tmp_path: Path) -> None:
    world = World(tmp_path, day_ticks())
    other: list[Any] = []
    world.before_switch = lambda: other.append(world.seal())  # another sealer runs whole before this one switches
    mine = world.seal()
    assert len(other[0].sealed) == DAYS and (mine.sealed, mine.skipped) == ((), DAYS)
    assert world.read_back() == by_time(expected(world.ticks))  # each tick once
    assert len(world.objects.list("ticks/date=")) == DAYS + 1  # the loser's object: an orphan no reader sees


class Damaging(LocalObjects):
    """Stores its first Parquet object wrongly, finds it out and deletes it, as a bucket's
    check after an upload does (:class:`~tsstore.cold.objects.Damaged`)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.damaged: list[str] = []

    def put_new(self, name: str, data: bytes) -> Placed | Taken | Damaged:
        if name.endswith(".parquet") and not self.damaged:
            self.damaged.append(name)
            return Damaged(name, "1 byte more was stored than written")
        return super().put_new(name, data)


def test_an_object_found_damaged_is_never_named_and_its_day_goes_to_the_next_generation(tmp_path: Path) -> None:
    world = World(tmp_path, day_ticks())
    world.objects = Damaging(tmp_path)
    done = world.seal()
    assert [(p.label, p.generation) for p in done.sealed] == [("2026-11-01", 2), ("2026-11-02", 1), ("2026-11-03", 1)]
    assert world.objects.damaged == ["ticks/date=2026-11-01/part-1.parquet"]
    assert world.stored().entries["2026-11-01"].object == "ticks/date=2026-11-01/part-2.parquet"
    assert world.read_back() == by_time(expected(world.ticks))


def test_an_orphan_is_never_read_and_a_later_seal_finishes_its_day_once(tmp_path: Path) -> None:
    world = World(tmp_path, day_ticks())

    def crash() -> None:
        raise KeyboardInterrupt  # a kill after the object, before the switch

    world.before_switch = crash
    with pytest.raises(KeyboardInterrupt):
        world.seal()
    [orphan] = world.objects.list("ticks/date=")
    assert orphan.name == "ticks/date=2026-11-01/part-1.parquet" and world.manifest is None
    assert world.run(sealed.cold_sql(seat(world.spec))) == '-- no partition of "ticks" is sealed yet: nothing to view'
    done = world.seal()
    assert [(p.label, p.generation) for p in done.sealed] == [("2026-11-01", 2), ("2026-11-02", 1), ("2026-11-03", 1)]
    assert world.read_back() == by_time(expected(world.ticks))
    assert orphan.name not in world.run(sealed.cold_sql(seat(world.spec)))
    assert done.removed == 0  # younger than the grace period
    assert world.stored().orphans(world.objects.list("ticks/"), now=orphan.updated + ORPHAN_GRACE) == [orphan.name]
    world.now = orphan.updated + ORPHAN_GRACE  # an hour on, a seal deletes it: the generation listed, no other
    assert (world.seal().removed, world.objects.get(orphan.name)) == (1, None)
    assert [(a.name, a.generation) for a in world.asked if isinstance(a, DeleteObject)] == [
        (orphan.name, orphan.generation)
    ]
    assert world.read_back() == by_time(expected(world.ticks))


class Killed(BaseException):
    """The sealer's process ends here."""


def test_a_sealer_killed_at_any_ask_then_run_again_seals_each_day_once(tmp_path: Path) -> None:
    whole = World(tmp_path / "whole", day_ticks(3))
    whole.seal()
    for kill_at in range(len(whole.asked)):
        world = World(tmp_path / str(kill_at), day_ticks(3))
        calls = iter(range(kill_at + 1))
        run = world.answer

        def dies(ask: Any, run: Any = run, calls: Any = calls) -> Any:
            if next(calls) == kill_at:
                raise Killed
            return run(ask)

        with pytest.raises(Killed):
            answer(cold.seal(seat(world.spec)), dies)
        seen = world.read_back()  # what a reader sees after the kill: whole days, each tick once
        assert len(set(seen)) == len(seen) and set(seen) <= set(expected(world.ticks))
        world.seal()
        assert world.read_back() == by_time(expected(world.ticks)), kill_at
        assert sorted(world.stored().entries) == ["2026-11-01", "2026-11-02", "2026-11-03"]


def test_an_orphan_is_deleted_once_another_object_of_its_day_is_named_and_the_grace_is_over() -> None:
    at = DAY1
    named = Entry(2, 1, "0", DAY1, DAY1 + dt.timedelta(days=1), DAY1, DAY1, at,
                  "ticks/date=2026-11-01/part-2.parquet", 1, 9)  # fmt: skip
    manifest = Manifest("ticks").with_entry(named)
    listed = [ObjectInfo("ticks/date=2026-11-01/part-1.parquet", 1, 10, at),  # its day is named with part-2
              ObjectInfo("ticks/date=2026-11-01/part-2.parquet", 1, 10, at),  # named
              ObjectInfo("ticks/_manifest/1.json", 1, 10, at),
              ObjectInfo("ticks/date=2026-11-02/part-1.parquet", 1, 10, at)]  # its sealer may not have switched yet
    assert manifest.orphans(listed, now=at + dt.timedelta(hours=1)) == ["ticks/date=2026-11-01/part-1.parquet"]
    assert manifest.orphans(listed, now=at + dt.timedelta(minutes=59)) == []


def test_a_writer_marks_a_tick_into_a_sealed_day_and_a_late_window_never_refuses_it() -> None:
    spec = SeriesSpec("ticks", cold=ColdTier("lake"), late=LatePolicy(window="1h"))
    through = DAY1 + dt.timedelta(days=3)
    document = {**horizon_fields("ticks", ColdTier("lake")), "watermark": through, "closing": through}
    cold = Horizon.of("ticks.cold", document)
    assert cold is not None and cold.cold and (cold.interval, cold.horizon) == (dt.timedelta(days=1), through)
    ops: list[Any] = [("a", {"timestamp": DAY1 + dt.timedelta(hours=5)}, False),  # a new or replaced tick
                      ("b", Erase(DAY1 + dt.timedelta(days=1, hours=1)), False),  # an erased one
                      ("c", {"timestamp": through}, False)]  # after the sealed days: not late  # fmt: skip
    decided = decide(spec, View(0.0, through, (cold,)), ops)
    assert decided.marks == {"ticks.cold": {DAY1, DAY1 + dt.timedelta(days=1)}} and decided.refused == {}


def late_tick(day: int, name: str = "late") -> Tick:
    at = DAY1 + dt.timedelta(days=day, hours=20)
    return Tick(name, at, {"timestamp": at, "symbol": "AAA", "n": -1})


def test_a_marked_day_is_sealed_again_as_its_next_generation_then_its_mark_cleared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    world = World(tmp_path, day_ticks())
    first = world.seal()
    cold_doc = world.docs["tsstore_rollups/ticks.cold"][0]  # what writers read as a horizon
    assert (cold_doc["source"], cold_doc["interval_seconds"], cold_doc["cold_tier"]) == ("ticks", 86400, True)
    assert cold_doc["closing"] == cold_doc["watermark"] == world.stored().through == DAY1 + dt.timedelta(days=3)
    world.late(late_tick(1))
    world.asked.clear()
    again = world.seal()
    assert [(p.label, p.generation, p.rows) for p in again.resealed] == [("2026-11-02", 2, 6)]
    assert (again.sealed, again.skipped, again.emptied) == ((), 2, ())
    assert world.read_back() == by_time(expected(world.ticks))  # the late tick in, once
    assert world.stored().entries["2026-11-02"].object == "ticks/date=2026-11-02/part-2.parquet"
    assert [first.sealed[0].object, first.sealed[2].object] == [world.stored().entries[d].object
                                                                for d in ("2026-11-01", "2026-11-03")]
    assert world.marked() == []
    switched = next(i for i, a in enumerate(world.asked) if isinstance(a, UpdateDoc))
    cleared = next(i for i, a in enumerate(world.asked) if isinstance(a, DeleteDoc))
    assert switched < cleared  # a reader between sees the new generation, or the old one marked
    assert again.describe().endswith("; late ticks: sealed again 2026-11-02 (generation 2, 6 ticks)")
    echo_figures("json", again.describe(), again)  # what tsstore seal --format json prints
    said = json.loads(capsys.readouterr().out)
    assert ([(p["label"], p["generation"], p["rows"]) for p in said["resealed"]], said["emptied"]) == (
        [("2026-11-02", 2, 6)], [])  # fmt: skip
    assert world.seal().resealed == ()  # nothing marked: nothing sealed again


def test_a_replaced_or_erased_tick_seals_its_day_again_and_a_day_left_empty_loses_its_entry(tmp_path: Path) -> None:
    world = World(tmp_path, day_ticks(2))
    world.seal()
    replaced = dataclasses.replace(world.ticks[0], data={**world.ticks[0].data, "n": 999})
    world.late(replaced, erase=replaced.id)
    for gone in [t.id for t in world.ticks if t.timestamp.day == 2]:
        world.late(erase=gone)
    again = world.seal()
    assert ([(p.label, p.generation) for p in again.resealed], again.emptied) == ([("2026-11-01", 2)], ("2026-11-02",))
    assert sorted(world.stored().entries) == ["2026-11-01", "2026-11-03"] and world.marked() == []
    table = pq.read_table(world.objects.url(world.stored().entries["2026-11-01"].object))
    assert sorted(table["n"].to_pylist()) == [1, 999]  # the replaced value
    assert world.read_back() == by_time(expected(world.ticks))
    assert "2026-11-02 (no tick left)" in again.describe()


def test_a_tick_into_a_day_empty_when_sealed_is_sealed_next_time(tmp_path: Path) -> None:
    world = World(tmp_path, [t for t in day_ticks() if t.timestamp.day != 2])
    world.seal()
    assert sorted(world.stored().entries) == ["2026-11-01", "2026-11-03"]  # the 2nd: sealed empty, no entry
    world.late(late_tick(1))
    world.asked.clear()
    again = world.seal()
    assert [(p.label, p.generation, p.rows) for p in again.resealed] == [("2026-11-02", 1, 1)]
    assert world.read_back() == by_time(expected(world.ticks)) and world.marked() == []
    assert again.skipped == 2 and sum(isinstance(a, Feed) for a in world.asked) == 1  # the day read once


def test_a_mark_written_after_the_writers_cutoff_outlives_the_seal_that_read_its_day(tmp_path: Path) -> None:
    world = World(tmp_path, day_ticks())
    world.seal()
    world.late(late_tick(1))
    # a live writer whose view is older than the mark: its tick may land after the seal's read
    since = world.now - dt.timedelta(microseconds=1)
    world.leases = [Doc("job", {"source": "ticks", "lease_seconds": 30.0}, since, None)]
    again = world.seal()
    assert [p.label for p in again.resealed] == ["2026-11-02"] and world.marked() == ["2026-11-02"]
    world.leases = []  # its writer is done: the next seal folds the day in again and clears the mark
    assert [p.generation for p in world.seal().resealed] == [3] and world.marked() == []


def test_a_sealer_announces_its_end_and_waits_for_a_writer_that_has_not_seen_it_before_it_reads(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, day_ticks())
    world.leases = [Doc("job", {"source": "ticks", "lease_seconds": 30.0}, world.now, None)]  # before the announcement
    answer_first = world.answer

    def writer_renews(ask: Any) -> Any:
        if isinstance(ask, Pause):  # the writer reads the horizons again meanwhile
            world.leases = [Doc("job", {"source": "ticks", "lease_seconds": 30.0}, world.now, None)]
        return answer_first(ask)

    world.answer = writer_renews  # type: ignore[method-assign]
    world.seal()
    kinds = [type(a).__name__ for a in world.asked]
    announced = next(i for i, a in enumerate(world.asked) if isinstance(a, SetDoc) and "closing" in a.data)
    assert world.asked[announced].data["closing"] == DAY1 + dt.timedelta(days=3)
    assert announced < kinds.index("Pause") < kinds.index("Feed")  # then the read
    assert "waiting for 1 writer(s) of 'ticks'" in world.asked[kinds.index("Pause")].what
    first_read = world.asked[kinds.index("Feed")]  # at a snapshot after the wait
    assert first_read.read.plan.query.read_time > world.docs["tsstore_rollups/ticks.cold"][0]["announced"]


def test_a_switch_from_an_older_read_than_the_manifests_is_refused(tmp_path: Path) -> None:
    world = World(tmp_path, day_ticks())
    world.seal()
    world.late(late_tick(1))
    other: list[Any] = []
    world.before_switch = lambda: other.append(world.seal())  # a later sealer seals it again first
    mine = world.seal()  # its part-2 written, its switch from the older read refused
    assert [p.generation for p in other[0].resealed] == [3] and mine.resealed == ()
    assert world.stored().entries["2026-11-02"].generation == 3 and world.marked() == []
    assert world.read_back() == by_time(expected(world.ticks))


def test_a_series_without_a_cold_tier_is_refused_by_name() -> None:
    with pytest.raises(QueryError, match="collection 'plain' declares no cold tier; declare one"):
        answer(cold.seal(seat(SeriesSpec("plain"))), lambda ask: None)


# ---------------------------------------------------------------------------- on the emulator, read by open tools


@pytest.mark.parametrize("mode", MODES)
def test_sealed_days_read_by_duckdb_and_polars_are_the_stores_own_rows(
    mode: str, request: pytest.FixtureRequest, uses_emulator: None, collection_name: str, tmp_path: Path
) -> None:
    import polars as pl  # here, not at collection (0.55 CPU-s): only the worker that runs it loads it

    client = mode_client(request, mode, unique_database_id(request.node.name))
    spec = shared_spec(collection_name, 3, cold=ColdTier(tmp_path / "lake"))
    rows = [{**row, "timestamp": row["timestamp"] + dt.timedelta(days=row["n"] % 3)} for row in ticks(60, seed=6)]
    start = T0.replace(hour=0)
    end = start + dt.timedelta(days=3)
    with TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) as store:
        store.write(rows)
        shown = store.query_table(start=start, end=end, direction="asc")  # by time, then id
        # a sealed partition keeps tsstore's shard field too: a tick read back from it is the document
        rows_written = store.query_table(start=start, end=end, direction="asc", columns=[*shown.column_names, "shard"])
        assert rows_written.select(shown.column_names).equals(shown)
        ids = [tick.id for tick in store.query(start=start, end=end, direction="asc").ticks]
        sealed = store.seal(until=end)
        assert ([p.label for p in sealed.sealed], sealed.rows) == (["2026-03-02", "2026-03-03", "2026-03-04"], 60)
        view = store.cold_sql()
    ordered = f'SELECT * FROM "{collection_name}" ORDER BY timestamp, {ID_COLUMN}'
    with duckdb.connect() as duck:
        duck.execute("SET TimeZone = 'UTC'")
        duck.execute(view)
        got = duck.sql(ordered).to_arrow_table()
    assert got[ID_COLUMN].to_pylist() == ids
    assert got.select(rows_written.column_names).to_pylist() == rows_written.to_pylist()
    assert sorted({str(day) for day in got["date"].to_pylist()}) == ["2026-03-02", "2026-03-03", "2026-03-04"]
    files = [line.strip().strip(",'") for line in view.splitlines() if line.strip().startswith("'")]
    for file in files:  # query_table's schema with the shard, and the ids
        assert pq.read_schema(file).remove_metadata() == rows_written.schema.append(pa.field(ID_COLUMN, pa.string()))
    scanned = pl.scan_parquet(files, hive_partitioning=True).sort(["timestamp", ID_COLUMN]).collect()
    assert scanned[ID_COLUMN].to_list() == ids
    assert scanned.select(rows_written.column_names).equals(pl.from_arrow(rows_written))
    assert [str(day) for day in scanned["date"].unique().sort().to_list()] == ["2026-03-02", "2026-03-03", "2026-03-04"]
    if mode != "datastore":  # the async store answers the same asks: nothing new to seal, the same view
        asyncio.run(_async_sees_it_sealed(request, store, view))
    client.close()


async def _async_sees_it_sealed(request: pytest.FixtureRequest, sync: TimeSeriesStore, view: str) -> None:
    async with async_twin(sync, request) as client, AsyncTimeSeriesStore(client, sync.spec) as store:
        again = await store.seal(until=T0.replace(hour=0) + dt.timedelta(days=3))
        assert (again.sealed, again.skipped) == ((), 3)
        assert await store.cold_sql() == view


def test_the_seal_command_says_what_the_manifest_says(emulator: Any, tmp_path: Path, collection_name: str) -> None:
    database = unique_database_id("seal-command")
    (tmp_path / "app.toml").write_text(
        f'[[series]]\ncollection = "{collection_name}"\nshards = ["s0", "s1", "s2"]\nkey_fields = ["symbol", "n"]\n'
        'cold = { path = "lake" }\n'
    )
    [spec], _ = load_declaration(str(tmp_path / "app.toml"))
    client = emulator.client(database=database)
    with TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) as store:
        store.write([{**row, "timestamp": row["timestamp"] + dt.timedelta(days=row["n"] % 2)} for row in ticks(20, 2)])
    common = ("--spec", "app.toml", "--database", database)
    until = ("--until", "2026-03-04T00:00:00Z")
    sealed = run_cli("seal", *common, *until, emulator=emulator, cwd=tmp_path)
    assert sealed.returncode == 0, sealed.stderr
    manifest = stored_doc(client, f"tsstore_cold/{collection_name}")
    assert manifest is not None
    entries = manifest["partitions"]
    rows, size = sum(e["rows"] for e in entries.values()), sum(e["bytes"] for e in entries.values())
    assert sealed.stdout.strip() == (
        f"sealed 2 partition(s) ({rows} ticks, {size} bytes) up to 2026-03-04T00:00:00Z; 0 already sealed"
    ) and rows == 20
    assert [line.split(":")[0] for line in sealed.stderr.splitlines() if line.startswith("sealed")] == [
        "sealed 2026-03-02", "sealed 2026-03-03"
    ]  # fmt: skip
    again = json.loads(run_cli("seal", *common, *until, "--format", "json", emulator=emulator, cwd=tmp_path).stdout)
    assert (again["sealed"], again["skipped"]) == ([], 2)
    sql = run_cli("seal", *common, "--sql", emulator=emulator, cwd=tmp_path)
    assert sql.stdout.startswith(f'CREATE OR REPLACE VIEW "{collection_name}" AS')
    assert str(tmp_path / "lake" / collection_name / "date=2026-03-02" / "part-1.parquet") in sql.stdout
    refused = run_cli("seal", *common, "--sql", *until, emulator=emulator, cwd=tmp_path)
    assert refused.returncode == 2
    assert "--sql seals nothing, so --until '2026-03-04T00:00:00Z' is not allowed" in refused.stderr
    # the commands read across the seam as the library does: what the same series without its tier reads
    (tmp_path / "hot.toml").write_text((tmp_path / "app.toml").read_text().replace('cold = { path = "lake" }\n', ""))
    said = []
    for command in (("query", "--format", "csv", "--direction", "asc", "--stats"), ("count", "--format", "json")):
        cold_read = run_cli(*command, *common, emulator=emulator, cwd=tmp_path)
        hot_read = run_cli(*command, "--spec", "hot.toml", "--database", database, emulator=emulator, cwd=tmp_path)
        assert (cold_read.returncode, cold_read.stdout) == (0, hot_read.stdout) and len(hot_read.stdout) > 10
        said.append(cold_read.stderr)
    assert "; 2 cold objects (" in said[0]  # both sealed days read from their files
    client.close()


def test_ctrl_c_says_which_days_were_sealed_and_a_rerun_seals_the_rest(
    emulator: Any, tmp_path: Path, collection_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tsstore.cli import exits

    database = unique_database_id("seal-ctrl-c")
    (tmp_path / "app.toml").write_text(f'[[series]]\ncollection = "{collection_name}"\ncold = {{ path = "lake" }}\n')
    [spec], _ = load_declaration(str(tmp_path / "app.toml"))
    client = emulator.client(database=database)
    with TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) as store:
        store.write([{"timestamp": T0 + dt.timedelta(days=day, minutes=i)} for day in range(3) for i in range(4)])
    put_new, calls = LocalObjects.put_new, []

    def stopped_at_the_second_day(objects: LocalObjects, name: str, data: bytes) -> Placed | Taken:
        calls.append(name)
        if len(calls) == 3:  # the first day's object and manifest copy are written: Ctrl-C at the second's
            raise KeyboardInterrupt
        return put_new(objects, name, data)

    monkeypatch.setattr(LocalObjects, "put_new", stopped_at_the_second_day)
    monkeypatch.setattr(exits.os, "_exit", lambda code: (_ for _ in ()).throw(SystemExit(code)))
    command = ("seal", "--spec", "app.toml", "--database", database, "--until", "2026-03-05T00:00:00Z")
    stopped = run_cli(*command, emulator=emulator, cwd=tmp_path)
    assert stopped.returncode == 130 and "Traceback" not in stopped.stderr
    assert "sealed 1 partition(s) (4 ticks) before the interrupt" in stopped.stderr
    assert "interrupted: run the same command to seal the rest" in stopped.stderr
    finished = run_cli(*command, emulator=emulator, cwd=tmp_path)
    assert finished.stdout.startswith("sealed 2 partition(s) (8 ticks, ") and "; 1 already sealed" in finished.stdout
    client.close()


@pytest.mark.parametrize("mode", MODES)
def test_on_the_emulator_a_sealer_that_loses_its_switch_claims_nothing(
    mode: str, request: pytest.FixtureRequest, uses_emulator: None, collection_name: str, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    client = mode_client(request, mode, unique_database_id(request.node.name))
    spec = shared_spec(collection_name, 3, cold=ColdTier(tmp_path / "lake"))
    rows = [{**row, "timestamp": row["timestamp"] + dt.timedelta(days=row["n"] % 3)} for row in ticks(30, seed=8)]
    day = dt.timedelta(days=1)
    with TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) as mine, \
            TimeSeriesStore(client, spec) as other:  # fmt: skip
        mine.write(rows)
        put_new, theirs = LocalObjects.put_new, []

        def then_the_other_sealer(objects: LocalObjects, name: str, data: bytes) -> Placed | Taken:
            placed = put_new(objects, name, data)
            if "part-1.parquet" in name and not theirs:  # between my object and my switch, another seals
                theirs.append(None)
                theirs[0] = other.seal(until=until)
            return placed

        monkeypatch.setattr(LocalObjects, "put_new", then_the_other_sealer)
        for until, days, skipped in ((T0.replace(hour=0) + day, 1, 1), (T0.replace(hour=0) + 3 * day, 2, 3)):
            theirs.clear()  # the first race on the manifest's creation, the second on an update of it
            lost = mine.seal(until=until)
            assert (len(theirs[0].sealed), lost.sealed, lost.skipped) == (days, (), skipped)
        view = mine.cold_sql()
    with duckdb.connect() as duck:
        duck.execute(view)
        seen = [row[0] for row in duck.sql(f'SELECT {ID_COLUMN} FROM "{collection_name}"').fetchall()]
    assert sorted(seen) == sorted(set(seen)) and len(seen) == 30  # every tick once: my objects are not read
    assert len(list((tmp_path / "lake").rglob("*.parquet"))) == 5  # mine are there, orphans
    client.close()


# ---------------------------------------------------------------------------- a seal in parts (Beam's)


class Stopped(Exception):
    """A step of a pipeline failing at one ask (its bundle is run again)."""


def test_a_pipelines_switch_step_run_again_switches_only_what_its_first_attempt_did_not(tmp_path: Path) -> None:
    """The parts a pipeline runs (tsstore.beam: the plan once, each day's object by its own
    worker, the switches by one last step), scripted. A switch step that failed after
    switching two days, run again, reports all three sealed and switches only the third; a
    step that failed after the switch of a marked day but before clearing its mark, run again,
    clears it without a new generation."""
    world = World(tmp_path, day_ticks())
    at = seat(world.spec)

    def in_parts(stop: Any) -> Any:
        sealing = world.run(cold.seal_plan(at))
        written = [(unit, world.run(cold.seal_partition(at, unit, sealing=sealing))) for unit in sealing.units]

        def failing(ask: Any) -> Any:
            if any(stop(one) for one in (ask if isinstance(ask, list) else [ask])):
                raise Stopped(ask)
            return world.answer(ask)

        with pytest.raises(Stopped):
            answer(cold.seal_switch(at, sealing, written), failing)
        return world.run(cold.seal_switch(at, sealing, written))

    def third_switch(ask: Any) -> bool:
        return isinstance(ask, UpdateDoc) and len((world.manifest or {}).get("partitions", {})) == 2

    first = in_parts(third_switch)
    assert [(p.label, p.generation) for p in first.sealed] == [("2026-11-01", 1), ("2026-11-02", 1), ("2026-11-03", 1)]
    assert world.stored().version == 3 and world.read_back() == by_time(expected(world.ticks))
    world.late(late_tick(1))
    again = in_parts(lambda ask: isinstance(ask, DeleteDoc) and "marks" in ask.path)
    assert ([(p.label, p.generation) for p in again.resealed], again.sealed) == ([("2026-11-02", 2)], ())
    assert world.stored().version == 4 and world.marked() == []
    assert world.read_back() == by_time(expected(world.ticks))


# ---------------------------------------------------------------------------- sealed rows as frames


def sealed_rows_table() -> pa.Table:
    """A sealed object's rows whose columns take every way into a frame: numbers, flags,
    strings and times with nulls, a NaN, a map's leaves, a list, a column null in every row,
    one declared Float64 holding integers and one declared string holding integers."""
    at = [DAY1 + dt.timedelta(minutes=m) for m in range(7)]
    return pa.table({
        "timestamp": pa.array(at, pa.timestamp("us", tz="UTC")),
        ID_COLUMN: [f"r{n}" for n in range(7)],
        "symbol": ["AAA", None, "BBB", "AAA", "CCC", None, "AAA"],
        "n": [1, 2, None, 4, 5, 6, 7],
        "x": [0.5, float("nan"), None, 1.5, 2.0, 2.5, 3.0],
        "flag": [True, None, False, True, True, False, None],
        "seen": pa.array([at[1], None, at[3], at[0], None, at[6], at[2]], pa.timestamp("us", tz="UTC")),
        "price.micros": [10, 20, 30, None, 50, 60, 70],
        "price.currency": ["USD", "USD", None, "EUR", "USD", None, "USD"],
        "tags": [["a"], None, [], ["b", "c"], ["d"], None, ["e"]],
        "gone": pa.array([None] * 7, pa.string()),
        "volume": [100, 200, 300, None, 500, 600, 700],
        "code": [1, 2, 3, 4, 5, 6, 7],
    })  # fmt: skip


@pytest.mark.parametrize(
    ("options", "columns"),
    [({}, None), ({"direction": "desc"}, None), ({"where": {"symbol": "AAA"}}, None), ({}, ["price", "n"])],
)
def test_sealed_rows_make_the_frame_their_ticks_make(options: dict[str, Any], columns: list[str] | None) -> None:
    from tsstore.frames import FrameBuilder, TableRow
    from tsstore.read.cold import SealedRows, cold_table, taken_whole
    from tsstore.read.plan import plan_query
    from tsstore.read.query import Query

    spec = SeriesSpec("ticks", shapes=[QueryShape("symbol")], columns={"volume": "Float64", "code": "string"})
    plan = plan_query(spec, Query(columns=columns, **options))
    data = parquet_bytes(sealed_rows_table())
    table = cold_table(plan, data)
    assert taken_whole(plan, table, None)
    rows = SealedRows(plan, table)
    sealed = [TableRow(rows, row) for row in range(rows.table.num_rows)]
    plain = [Tick(t.id, t.timestamp, t.data) for t in sealed]
    assert plain == sealed and list(map(repr, sealed)) == list(map(repr, table_ticks_of(plan, data)))  # NaN: by repr
    hot = [Tick(f"h{n}", DAY1 + dt.timedelta(days=1, minutes=n), {"timestamp": DAY1, "n": n, "note": "hot"})
           for n in range(4)]  # fmt: skip
    for chunk_rows in (2, 3, 100):  # runs of rows between ticks, across chunks
        mixed = [*hot[:1], *sealed[:3], *hot[1:3], *sealed[3:], *hot[3:]]
        made, want = (FrameBuilder(spec, columns=columns, chunk_rows=chunk_rows) for _ in range(2))
        for got in mixed:
            made.add(got)
        for tick in mixed:
            want.add(Tick(tick.id, tick.timestamp, tick.data))
        if chunk_rows == 3:
            assert made.table().equals(want.table())
        else:
            pd_testing().assert_frame_equal(made.frame(), want.frame())


def table_ticks_of(plan: Any, data: bytes) -> list[Tick]:
    from tsstore.read.cold import cold_table, table_ticks

    return list(table_ticks(plan, cold_table(plan, data)))


def pd_testing() -> Any:
    import pandas as pd

    return pd.testing
