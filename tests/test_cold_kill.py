"""The cold tier's sealer SIGKILLed at 20 points drawn at random from every phase of a seal
(issue 60's kill test), while a reader in this process reads what the manifest names (and, every
fifth pass, the whole series through the store, across the seam).

The sealer is a process of the test's own: a fork server that imports tsstore once (a start
costs about 1.4 s of CPU here) and forks one sealer per run, which runs ``store.seal()`` and
SIGKILLs itself at its drawn point. The point is found by wrapping what the store answers in
the child (its ``_answer``, and the ``open`` and ``os.link`` the local object store writes
through): nothing in ``tsstore/`` knows of it. The seed is drawn afresh for each run of the
suite and printed (shown with a failure); ``COLD_KILL_SEED=<seed>`` draws the same points.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import pickle
import random
import select
import signal
import subprocess
import sys
import threading
import traceback
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from tests.shared import T0, stored_doc, ticks
from tests.shared import spec as shared_spec
from tsstore import TimeSeriesStore, WriteOptions
from tsstore.cold.parquet import ID_COLUMN, id_checksum
from tsstore.cold.tier import partition_label
from tsstore.cold_tier import ColdTier
from tsstore.pytest_plugin import unique_database_id

DAYS = 6
TICKS = 1200  # 200 a day
KILLS = 20
#: Where a sealer dies, in the order a partition passes them. The first four leave the
#: partition unsealed: no object, a partial temporary file, a whole temporary file not linked
#: to its name, an object no manifest names (an orphan); the last two leave it sealed.
PHASES = (
    "before its object",
    "half its object's bytes written",
    "its object's bytes written, not named",
    "after its object, before the switch",
    "after the switch, before the manifest copy",
    "after the manifest copy (between partitions)",
)
BEFORE, HALF, UNNAMED, AFTER, SWITCHED, COPIED = PHASES
UNSEALED, SEALED = PHASES[:4], PHASES[4:]

#: The fork server: the spec and where to seal come pickled in the file ``argv[1]``; each line
#: in is ``[label, phase]`` (``[null, null]``: seal to the end), answered by the line of the
#: forked sealer's exit code (``-9``: it SIGKILLed itself where it was told). A sealer seals up
#: to the end of the day after its kill's (a kill after a day's manifest copy falls between two
#: days), so it reads two days, not all those left (its CPU was 0.07-0.19 s a run with all).
SEALER = r"""
import datetime as dt, json, os, pickle, signal, sys, traceback
import tsstore.cold.objects as objects
from tsstore import TimeSeriesStore
from tsstore.asks import CreateDoc, UpdateDoc
from tsstore.cold.objects import Placed, PutObject
from tsstore.cold.tier import partition_start
from tsstore.local.emulator import emulator_client

with open(sys.argv[1], "rb") as given:
    host, database, spec, until, phases = pickle.load(given)
BEFORE, HALF, UNNAMED, AFTER, SWITCHED, COPIED = phases
link = os.link


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def partition(ask):
    # the partition a PutObject writes an object of ('2026-03-04'), None for a manifest copy
    return ask.name.split("/date=")[1].split("/")[0] if isinstance(ask, PutObject) and "/date=" in ask.name else None


class HalfWritten:
    def __init__(self, file):
        self.file = file

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.file.close()

    def write(self, data):
        self.file.write(data[: len(data) // 2])
        self.file.flush()
        os.fsync(self.file.fileno())
        die()


def seal(label, phase):
    store = TimeSeriesStore(emulator_client(host, database=database), spec)
    answer, at, armed = store._answer, [None], []

    def answering(ask):
        at[0] = partition(ask) or at[0]  # the partition being placed: its object, switch and copy
        ours = at[0] == label
        if ours and partition(ask):
            if phase == BEFORE:
                die()
            armed.append(phase)
        answered = answer(ask)
        armed.clear()
        if ours and partition(ask) and phase == AFTER and isinstance(answered, Placed):
            die()
        if ours and isinstance(ask, (CreateDoc, UpdateDoc)) and answered is not None and phase == SWITCHED:
            die()
        if ours and isinstance(ask, PutObject) and "/_manifest/" in ask.name and phase == COPIED:
            die()
        return answered

    def opening(path, mode="r", *args, **kwargs):
        file = open(path, mode, *args, **kwargs)
        return HalfWritten(file) if armed == [HALF] else file

    def linking(source, name, *args, **kwargs):
        if armed == [UNNAMED]:
            die()
        return link(source, name, *args, **kwargs)

    store._answer, objects.open, os.link = answering, opening, linking
    store.seal(until=until if label is None else min(until, partition_start(label) + dt.timedelta(days=2)))


for line in sys.stdin:
    pid = os.fork()
    if pid == 0:
        try:
            seal(*json.loads(line))
        except BaseException:
            traceback.print_exc()
            sys.stderr.flush()
            os._exit(1)
        os._exit(0)
    print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), flush=True)
"""


def draw_kills(seed: int) -> list[tuple[str, str]]:
    """:data:`KILLS` distinct points in the order a seal passes them, every phase among them:
    of each day's four unsealed phases and one of its two sealed ones (after which the day is
    done, so its last)."""
    rng = random.Random(seed)
    while True:
        places = [(day, phase) for day in range(DAYS) for phase in (*UNSEALED, rng.choice(SEALED))]
        drawn = [places[i] for i in sorted(rng.sample(range(len(places)), KILLS))]
        if {phase for _, phase in drawn} == set(PHASES):
            return [(partition_label(T0.replace(hour=0) + dt.timedelta(days=day)), phase) for day, phase in drawn]


class Reader(threading.Thread):
    """Reads the manifest and every object it names, again and again, checking each pass:
    each named day's object holds exactly the ids written that day, and no id is read twice."""

    def __init__(self, store: TimeSeriesStore, lake: Path, days: dict[str, list[str]]) -> None:
        super().__init__(daemon=True)
        self.store, self.client, self.collection = store, store.client, store.spec.collection
        self.lake, self.days = lake, days
        self.everything = sorted(doc_id for ids in days.values() for doc_id in ids)
        self.across = 0  # the passes that also read the whole series through the store, across the seam
        self.begun = self.passes = 0
        self.read: set[str] = set()  # every object it opened
        self.version = 0  # the manifest's version its last pass read
        self.failure: str | None = None
        self.stop, self.woken = threading.Event(), threading.Event()
        self.passed = threading.Condition()

    def run(self) -> None:
        while not self.stop.is_set():
            with self.passed:
                self.begun += 1
            try:
                self.one_pass()
            except BaseException:
                self.failure = traceback.format_exc()
                self.stop.set()
            with self.passed:
                self.passes += 1
                self.passed.notify_all()
            self.woken.wait(0.05)
            self.woken.clear()

    def one_pass(self) -> None:
        manifest = stored_doc(self.client, f"tsstore_cold/{self.collection}") or {"version": 0, "partitions": {}}
        seen: list[str] = []
        for label, entry in manifest["partitions"].items():
            ids = pq.read_table(self.lake / entry["object"], columns=[ID_COLUMN])[ID_COLUMN].to_pylist()
            self.read.add(entry["object"])
            assert sorted(ids) == self.days[label] and entry["rows"] == len(ids), (manifest["version"], label)
            seen += ids
        assert len(seen) == len(set(seen)), manifest["version"]
        self.version = manifest["version"]
        if self.passes % 5 == 0:  # the store's own read: the sealed days from their files, the rest from Firestore
            ids = [tick.id for tick in self.store.query(direction="asc", columns=()).ticks]
            assert sorted(ids) == self.everything, ("across the seam", manifest["version"], len(ids))
            self.across += 1

    def one_more_pass(self) -> int:
        """Wait for a whole pass begun after now; the manifest version it read."""
        with self.passed:
            after = self.begun + 1
            self.woken.set()
            assert self.passed.wait_for(lambda: self.passes >= after or self.stop.is_set(), timeout=60)
            return self.version


def test_a_sealer_killed_at_twenty_random_points_seals_each_day_once_and_a_reader_never_sees_a_tick_twice(
    emulator: Any, tmp_path: Path, collection_name: str
) -> None:
    seed = int(os.environ.get("COLD_KILL_SEED") or random.randrange(2**32))
    kills = draw_kills(seed)
    print(f"COLD_KILL_SEED={seed}:", *(f"{label} {phase}" for label, phase in kills), sep="\n  ")
    lake = tmp_path / "lake"
    spec = shared_spec(collection_name, 3, cold=ColdTier(lake))
    start = T0.replace(hour=0)
    until = start + dt.timedelta(days=DAYS)
    database = unique_database_id("cold-kill")
    (tmp_path / "sealer.pickle").write_bytes(pickle.dumps((emulator.address, database, spec, until, PHASES)))
    errors = (tmp_path / "sealer.err").open("w")
    sealer = subprocess.Popen([sys.executable, "-c", SEALER, str(tmp_path / "sealer.pickle")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=errors, text=True, start_new_session=True)  # fmt: skip
    client = emulator.client(database=database)
    rows = [{**row, "timestamp": row["timestamp"] + dt.timedelta(days=row["n"] % DAYS)} for row in ticks(TICKS, 9)]
    with TimeSeriesStore(client, spec, write_options=WriteOptions(ramp=False)) as store:
        written = store.write(rows)  # while the fork server imports tsstore
    assert written.created == TICKS
    days: dict[str, list[str]] = defaultdict(list)  # each day's ids, as written
    for row, doc_id in zip(rows, written.ids):
        days[partition_label(row["timestamp"])].append(doc_id)
    days = {label: sorted(ids) for label, ids in days.items()}
    assert len(days) == DAYS

    def run(label: str | None, phase: str | None) -> int | None:
        """A sealer's exit code (``None``: the fork server is gone, or the sealer still runs
        after two minutes, then killed with its fork server: their process group)."""
        assert sealer.stdin is not None and sealer.stdout is not None
        sealer.stdin.write(json.dumps([label, phase]) + "\n")
        sealer.stdin.flush()
        if not select.select([sealer.stdout], [], [], 120)[0]:
            os.killpg(sealer.pid, signal.SIGKILL)
            return None
        line = sealer.stdout.readline()
        return int(line) if line else None

    reading = TimeSeriesStore(client, spec)
    reader = Reader(reading, lake, days)
    reader.start()
    found: list[int] = []  # the manifest's version a whole pass read after each run: the days sealed by then
    try:
        for label, phase in [*kills, (None, None)]:  # the last run seals to the end
            ended = run(label, phase)
            found.append(reader.one_more_pass())
            assert reader.failure is None, f"COLD_KILL_SEED={seed}, after {label} {phase}:\n{reader.failure}"
            assert ended == (-signal.SIGKILL if phase else 0), (seed, label, phase, Path(errors.name).read_text())
    finally:
        reader.stop.set()
        reader.join(timeout=60)
        sealer.communicate(timeout=60)  # the fork server ends at the end of its input
        errors.close()
    labels = sorted(days)  # a kill in a day's phase: the days before it are sealed, and it too after its switch
    assert found == [labels.index(label) + (phase in SEALED) for label, phase in kills] + [DAYS], seed
    assert reader.passes >= 2 * len(found), reader.passes  # it read while the sealers ran, too
    assert reader.across >= len(found) // 3, reader.across
    reading.close()

    manifest = stored_doc(client, f"tsstore_cold/{collection_name}")
    assert manifest is not None
    entries = manifest["partitions"]
    assert sorted(entries) == sorted(days) and manifest["version"] == DAYS  # one switch a day: sealed once each
    named = {entry["object"] for entry in entries.values()}
    taken = Counter(label for label, phase in kills if phase == AFTER)
    for label, entry in entries.items():
        ids = pq.read_table(lake / entry["object"])[ID_COLUMN].to_pylist()
        assert (entry["rows"], entry["ids"], sorted(ids)) == (len(days[label]), id_checksum(days[label]), days[label])
        assert entry["generation"] == 1 + taken[label], (seed, label)  # each orphan took its day's name once
    parts = {path.relative_to(lake).as_posix() for path in lake.rglob("part-*.parquet")}
    orphans = parts - named
    assert len(orphans) == sum(taken.values()) and not orphans & reader.read, seed  # left by kills, never read
    assert reader.read <= named
    size = {label: entry["bytes"] for label, entry in entries.items()}  # a day's bytes are the same in every run
    left = Counter((path.parent.name[len("date="):], path.stat().st_size) for path in lake.rglob(".part-*.tmp"))
    assert left == Counter((label, size[label] // 2 if phase == HALF else size[label])
                           for label, phase in kills if phase in (HALF, UNNAMED)), seed  # fmt: skip
    copies = {path.stem for path in lake.rglob("_manifest/*.json")}  # a kill after the switch: that version's copy
    switched_then_killed = {str(1 + labels.index(label)) for label, phase in kills if phase == SWITCHED}
    assert copies == {str(v) for v in range(1, DAYS + 1)} - switched_then_killed, seed
    client.close()
