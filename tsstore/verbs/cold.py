"""The cold tier as requests: seal every closed partition not sealed yet into Parquet,
exactly once (what is sealed is looked at by :mod:`tsstore.verbs.sealed`).

A partition is sealed in three steps, each an ask: its ticks read at one read time (a
:class:`~tsstore.verbs.request.Feed` of the ordinary read, one for every consecutive
partition up to a number of ticks, cut into partitions as the ticks stream), its Parquet object written under
a name that must not exist (:class:`~tsstore.cold.objects.PutObject`), and the manifest
switched to name it under a precondition (:meth:`~tsstore.cold.manifest.Manifest.switch`).
The pure parts are :mod:`tsstore.cold`; why it holds: ``docs/explanation/cold-tier.md``.
"""

from __future__ import annotations

import datetime as dt
import io
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import IO, Literal

from tsstore.asks import ask
from tsstore.cold.manifest import (
    ORPHAN_GRACE,
    Entry,
    Manifest,
    SealedPartition,
    SealResult,
    manifest_ask,
)
from tsstore.cold.gcs import storage_module
from tsstore.cold.objects import DeleteObject, ListObjects, Placed, PutObject
from tsstore.cold.parquet import id_checksum, parquet_bytes, sorted_rows, with_ids
from tsstore.cold.tier import (
    horizon_fields,
    horizon_name,
    manifest_copy_name,
    object_name,
    partition_label,
    partition_start,
)
from tsstore.cold_tier import ColdTier
from tsstore.errors import QueryError, StateError
from tsstore.frames import FrameBuilder
from tsstore.late import Horizon, Mark
from tsstore.limits import MAX_QUERY_LIMIT
from tsstore.read.cost import ReadStats
from tsstore.read.plan import oldest_first, plan_query
from tsstore.read.query import Query
from tsstore.spec import Direction, SeriesSpec
from tsstore.ticks import Tick
from tsstore.times import TimeLike, to_utc
from tsstore.verbs.marks import (
    announce,
    clear_marks,
    read_marks,
    read_watermark,
    settle_writers,
    watermark_write,
)
from tsstore.verbs.reading import read, server_time
from tsstore.verbs.request import Collect, Feed, Request, Seat

#: What each parameter of these verbs means (the API reference describes a parameter from here).
PARAMETER_HELP = {
    "until": "seal every partition that ends by this time; ``None``: now less the tier's ``seal_after``",
    "on_progress": "called with each partition sealed (a :class:`~tsstore.cold.manifest.SealedPartition`) once "
    "the manifest names it",
    "unit": "one partition of ``sealing``'s (a :class:`SealUnit`)",
    "sealing": "what a pipeline's driver decided once (a :class:`SealPlan`, from :meth:`seal_plan`)",
    "written": "each partition of ``sealing`` with what its worker made of it (from :meth:`seal_partition`)",
}

#: The most marked partitions one read seals again (on the emulator every query scans the
#: whole collection, so a read a partition would scan it a time a partition).
WINDOW = 31
#: The ticks after which a read of new partitions stops at the end of a partition (its limit:
#: these and the most a partition held): a read must end within the hour Firestore keeps its
#: read time.
TICKS_PER_READ = 2_000_000

#: How many times a sealer tries again when another sealer switched the manifest first, or
#: wrote an object under the name it tried, or the object store found its object damaged.
_TRIES = 20

SealProgress = Callable[[SealedPartition], None]

#: What became of a partition a run did not seal: sealed already (or by another sealer
#: meanwhile), or without a tick.
Outcome = Literal["skipped", "empty"]


def seal(seat: Seat, *, until: TimeLike | None = None, on_progress: SealProgress | None = None) -> Request[SealResult]:
    """Seal every closed partition of the series not sealed yet into the declared cold
    tier (``SeriesSpec(cold=ColdTier(...))``): from the partition of the oldest tick to the
    last one that ends by ``until`` (default: now less ``seal_after``), the ticks of
    consecutive partitions read in one read at one read time, from the first partition not
    sealed yet on (the oldest tick's when none is), stopped once it has read about
    :data:`TICKS_PER_READ` ticks (the partition it stopped in is read by the next read),
    each partition written as one Parquet object (zstd, sorted by time then
    document id, ``query_table``'s columns and a ``document_id`` column) under
    ``<collection>/date=YYYY-MM-DD/part-<generation>.parquet``, then named in the manifest
    (``tsstore_cold/<collection>``), which readers go by. Exactly once: a run again seals
    nothing new, a run killed at any point leaves each partition sealed or not (a later run
    finishes it), and of two sealers at once each partition is sealed by one; an object no
    manifest names (left by a kill, or by the sealer that lost) is never read, and a later
    seal deletes it once another object of its partition is named and an hour has passed. A
    partition without a tick is not sealed (nothing is
    written for it). ``on_progress`` is
    called with each partition sealed.

    Late ticks: a sealed partition is a horizon to writers as a roll-up's is. Before reading,
    the run announces the end it seals to and waits for the writers that have not seen it,
    so a tick created, replaced or erased later in a partition before that end leaves a mark
    (``tsstore_rollups/<collection>.cold/marks``). A run first seals every marked partition
    again (a new generation; its entry removed when no tick is left), and clears the marks
    its manifest switches folded in (``resealed``, ``emptied``)."""
    tier, until_at, snapshot, clearing = yield from _opening(seat, until)
    collection = seat.spec.collection
    known = clearing.manifest = yield from manifest_now(collection)  # what was sealed before: skipped without a read
    newest = max(known.entries.values(), key=lambda entry: entry.start, default=None)
    partitions = 1 if newest is None else _window(newest.rows)  # how many one read takes
    resealed, emptied = yield from _reseal(seat, tier, known, clearing, on_progress, partitions)
    again = {p.label for p in resealed} | set(emptied)
    done_before = {entry.start for entry in known.entries.values()}  # not read again by this run
    done_before |= {partition_start(label) for label in again}
    end = tier.start_of(until_at)  # the partitions before it end by until_at
    skipped = sum(entry.start < end and label not in again for label, entry in known.entries.items())
    sealed: list[SealedPartition] = []
    most = 0 if newest is None else newest.rows  # the most ticks a partition held, by what is known
    for first, last in _gaps(sorted(done_before), tier.partition, end):
        if first is None and done_before:  # before the sealed partitions: a limit-1 query finds a tick
            snapshot = yield from server_time(seat)
            first = yield from _next_tick(seat, tier, None, snapshot, clearing)
            if first is None or first >= last:
                continue
        done, lost, most = yield from _seal_gap(seat, tier, first, last, clearing, on_progress, most)
        sealed += done
        skipped += lost
    removed = yield from _closing(seat)
    return SealResult(tuple(sealed), skipped, removed, until_at, tuple(resealed), tuple(emptied))


def _hold_writers(seat: Seat, tier: ColdTier, closing: dt.datetime) -> Request[dt.datetime]:
    """Before a seal reads: announce ``closing`` (the end it seals to) on the cold tier's
    watermark document unless writers hold a horizon as late already, and wait for the
    writers deciding with an older view. Answers the cutoff of the marks the seal may clear."""
    collection = seat.spec.collection
    name = horizon_name(collection)
    mine = yield from read_watermark(seat, name)
    held = Horizon.of(name, mine) if mine else None
    announced = (mine or {}).get("announced")
    if held is None or held.horizon is None or closing > held.horizon:
        announced = yield from announce(seat, name, horizon_fields(collection, tier), closing)
    waited = announced if isinstance(announced, dt.datetime) else None
    return (yield from settle_writers(seat, collection, announced=waited,
                                      refresh=seat.spec.late.refresh.total_seconds()))  # fmt: skip


@dataclass
class _Clearing:
    """The marks a seal read (``marks``, those not cleared yet) and what it found of their
    partitions at its read times (after the writers saw its horizon): the objects it named
    (``ours``, by partition start) and the spans it read without a tick (``empty``; ``None``:
    unbounded). A mark is cleared once a switch has put what the seal read of its partition
    in the manifest, if it was written before ``cutoff`` (its tick had landed before the read).
    ``manifest``: the manifest as the seal last read or switched it (``None``: not yet), which
    the next partition's switch starts from without reading it again (when another sealer
    switched it since, that switch is refused and the manifest read again)."""

    name: str
    marks: list[Mark]
    cutoff: dt.datetime
    ours: dict[dt.datetime, str] = field(default_factory=dict)
    empty: list[tuple[dt.datetime | None, dt.datetime | None]] = field(default_factory=list)
    manifest: Manifest | None = None

    def _read_empty(self, bucket: dt.datetime) -> bool:
        return any((start is None or start <= bucket) and (end is None or bucket < end) for start, end in self.empty)

    def due(self, manifest: Manifest) -> list[Mark]:
        """The marks ``manifest`` (just switched to) has folded in: of partitions before its
        ``through`` that it names with this seal's object, or leaves out as this seal read
        them empty."""
        through = manifest.through
        if through is None:
            return []
        due = []
        for mark in self.marks:
            entry = manifest.entries.get(partition_label(mark.bucket))
            folded = self.ours.get(mark.bucket) == entry.object if entry else self._read_empty(mark.bucket)
            if mark.bucket < through and mark.written < self.cutoff and folded:
                due.append(mark)
        return due

    def clear(self, seat: Seat, manifest: Manifest) -> Request[None]:
        """After the switch to ``manifest``: clear the marks it folded in (never before: a
        reader between would take the old entry unmarked)."""
        due = self.due(manifest)
        if due:
            self.marks = [mark for mark in self.marks if mark not in due]
            yield from clear_marks(seat, self.name, due, cutoff=self.cutoff)


def _reseal(
    seat: Seat,
    tier: ColdTier,
    known: Manifest,
    clearing: _Clearing,
    on_progress: SealProgress | None,
    partitions: int,
) -> Request[tuple[list[SealedPartition], list[str]]]:
    """Seal again every marked partition before ``known.through`` (a late tick changed it
    after it was sealed), runs of consecutive ones read together (at most ``partitions`` a
    read): a new generation, or its entry removed when it holds no tick any more; the
    partitions sealed again, and those emptied."""
    through = known.through
    marked = sorted({m.bucket for m in clearing.marks if through is not None and m.bucket < through})
    resealed: list[SealedPartition] = []
    emptied: list[str] = []
    for first, end in _runs(marked, tier.partition, partitions):
        snapshot = yield from server_time(seat)
        ticks = yield from _read_partitions(seat, tier, first, end, snapshot)
        try:
            for at in (m for m in marked if first <= m < end):
                whole = ticks.done.get(at)
                if whole is None:
                    clearing.empty.append((at, at + tier.partition))
                    if (yield from _empty(seat, at, snapshot, clearing)) == "emptied":
                        emptied.append(partition_label(at))
                    continue
                done = yield from _place(seat, tier, at, whole, snapshot, clearing, again=True)
                if isinstance(done, SealedPartition):
                    resealed.append(done)
                    if on_progress is not None:
                        on_progress(done)
        finally:
            ticks.close()
    return resealed, emptied


def _runs(starts: list[dt.datetime], step: dt.timedelta, most: int) -> list[tuple[dt.datetime, dt.datetime]]:
    """``[first, end)`` of each run of consecutive partitions among ``starts`` (in order), at
    most ``most`` partitions each."""
    runs: list[tuple[dt.datetime, dt.datetime]] = []
    for at in starts:
        if runs and runs[-1][1] == at and (at - runs[-1][0]) < step * most:
            runs[-1] = (runs[-1][0], at + step)
        else:
            runs.append((at, at + step))
    return runs


def declared_tier(spec: SeriesSpec) -> ColdTier:
    """The cold tier ``spec`` declares, or a :class:`~tsstore.errors.QueryError` saying how to
    declare one (a ``gs://`` tier without its extra is refused here too)."""
    if spec.cold is None:
        raise QueryError(
            f"collection {spec.collection!r} declares no cold tier; declare one (SeriesSpec(cold=ColdTier(path=...)), "
            'or cold = { path = "..." } in a declaration file)'
        )
    if not spec.cold.local:  # a missing extra is refused before anything is read
        storage_module()
    return spec.cold


def _time(value: object) -> dt.datetime:
    try:
        return to_utc(value, name="until")
    except ValueError as exc:
        raise QueryError(str(exc)) from None


def manifest_now(collection: str) -> Request[Manifest]:
    """The manifest of ``collection`` as it is now (one document read)."""
    return Manifest.of(collection, (yield from ask(manifest_ask(collection))))


def _next_tick(
    seat: Seat, tier: ColdTier, after: dt.datetime | None, snapshot: dt.datetime, clearing: _Clearing
) -> Request[dt.datetime | None]:
    """The start of the partition of the first tick at or after ``after`` (``None``: the
    oldest tick's) at ``snapshot``; ``None`` when there is none. The partitions between
    held no tick then (``clearing`` notes it)."""
    plan = plan_query(seat.spec, Query(start=after, limit=1, columns=(), direction=Direction.ASC, read_time=snapshot))
    first = yield from ask(Collect((yield from read(seat, plan, ReadStats()))))  # Firestore's ticks: what is sealed
    start = tier.start_of(first[0].timestamp) if first else None
    clearing.empty.append((after, start))
    return start


def _window(rows: int) -> int:
    """How many partitions one read takes when a partition holds up to ``rows`` ticks: as many
    as :data:`TICKS_PER_READ` allows, at least one and at most :data:`WINDOW`."""
    return max(1, min(WINDOW, TICKS_PER_READ // max(rows, 1)))


def _gaps(
    done: list[dt.datetime], step: dt.timedelta, end: dt.datetime
) -> list[tuple[dt.datetime | None, dt.datetime]]:
    """The spans before ``end`` outside the partitions sealed already (their starts ``done``,
    in order, each ``step`` long), oldest first; the first unbounded before (``None``)."""
    parts = _without((None, end), [start for start in done if start < end], step)
    return [(first, last) for first, last in parts if last is not None]


def _seal_gap(
    seat: Seat,
    tier: ColdTier,
    start: dt.datetime | None,
    end: dt.datetime,
    clearing: _Clearing,
    on_progress: SealProgress | None,
    most: int,
) -> Request[tuple[list[SealedPartition], int, int]]:
    """Seal every partition from ``start`` (``None``: from the oldest tick) to ``end``, in as
    few reads as :data:`TICKS_PER_READ` allows: each read streams from where the last one
    stopped to ``end`` at one read time, cut into partitions as it streams, each finished
    partition's object written and switched to once the read ends; a read stops after
    :data:`TICKS_PER_READ` and ``most`` more ticks (the most a partition held), and the
    partition it stopped in, maybe cut short, is read again by the next read. What was sealed,
    how many partitions another sealer took first, and the most ticks a partition held."""
    sealed: list[SealedPartition] = []
    lost = 0
    while start is None or start < end:
        snapshot = yield from server_time(seat)
        limit = min(TICKS_PER_READ + most, MAX_QUERY_LIMIT)
        ticks = yield from _read_partitions(seat, tier, start, end, snapshot, limit=limit)
        try:
            most = max([most, ticks.held, *(whole.rows for whole in ticks.done.values())])
            if ticks.cut is not None and not ticks.done:
                continue  # one partition holds more than the limit: read again with it raised
            covered = ticks.covered(start, end)
            clearing.empty += _without(covered, sorted(ticks.done), tier.partition)
            for at in sorted(ticks.done):
                done = yield from _place(seat, tier, at, ticks.done[at], snapshot, clearing)
                if isinstance(done, SealedPartition):
                    sealed.append(done)
                    if on_progress is not None:
                        on_progress(done)
                else:
                    lost += 1
        finally:
            ticks.close()
        if ticks.cut is None:
            break
        if ticks.descending:  # the rest is older than the partition it stopped in, which is read again
            end = ticks.cut + tier.partition
        else:
            start = ticks.cut
    return sealed, lost, most


def _without(
    span: tuple[dt.datetime | None, dt.datetime | None], starts: list[dt.datetime], step: dt.timedelta
) -> list[tuple[dt.datetime | None, dt.datetime | None]]:
    """The parts of ``span`` outside the partitions starting at ``starts`` (in order, each
    ``step`` long): what a read found without a tick."""
    parts: list[tuple[dt.datetime | None, dt.datetime | None]] = []
    at, end = span
    for start in starts:
        if at is None or at < start:
            parts.append((at, start))
        at = start + step
    if at is None or end is None or at < end:
        parts.append((at, end))
    return parts


def _read_partitions(
    seat: Seat,
    tier: ColdTier,
    start: dt.datetime | None,
    end: dt.datetime,
    snapshot: dt.datetime,
    *,
    limit: int | None = None,
) -> Request[_Partitions]:
    """The partitions from ``start`` to ``end`` read in one read at ``snapshot``, at most
    ``limit`` ticks (a read that took them all stops in a partition it may have cut short:
    that one is left out, :attr:`_Partitions.cut`)."""
    plan = oldest_first(seat.spec, Query(start=start, end=end, limit=limit, read_time=snapshot))
    ticks = _Partitions(seat.spec, tier, descending=plan.descending)
    try:
        yield from ask(Feed((yield from read(seat, plan, ReadStats())), ticks))
        if limit is not None and ticks.read >= limit:
            ticks.stop()
        else:
            ticks.finish()
    except BaseException:
        ticks.close()
        raise
    return ticks


def _place(
    seat: Seat,
    tier: ColdTier,
    start: dt.datetime,
    ticks: _Sealed,
    snapshot: dt.datetime,
    clearing: _Clearing,
    *,
    again: bool = False,
) -> Request[SealedPartition | Outcome]:
    """Write the partition starting at ``start`` (read at ``snapshot``) under a new name and
    switch the manifest to it, then clear the marks that switch folded in; ``"skipped"`` when
    the manifest names it already (unless sealing it ``again``: a new generation replaces the
    entry), or another sealer names it first, or switched from a later read."""
    written = yield from _put(seat, tier, start, ticks, snapshot, again=again, known=clearing.manifest)
    if isinstance(written, str):
        return written
    manifest, entry = written
    clearing.ours[start] = entry.object
    return (yield from _name(seat, manifest, entry, snapshot, clearing, again=again))


def _taken(manifest: Manifest, label: str, snapshot: dt.datetime, again: bool) -> bool:
    """Whether a switch of partition ``label`` read at ``snapshot`` is not this sealer's to
    make: the manifest names the partition (a first seal), or a switch from a later read landed."""
    return manifest.behind(snapshot) or (not again and label in manifest.entries)


def _empty(seat: Seat, start: dt.datetime, snapshot: dt.datetime, clearing: _Clearing) -> Request[str]:
    """A marked partition before ``through`` found without a tick at ``snapshot``: switch the
    manifest to a version without its entry (``"emptied"``), or, without one, to the next
    version that says so (``"empty"``), then clear its marks; ``"skipped"`` when a switch from
    a later read landed."""
    collection, label = seat.spec.collection, partition_label(start)
    for _ in range(_TRIES):
        manifest = yield from manifest_now(collection)
        if manifest.behind(snapshot):
            return "skipped"
        held = label in manifest.entries
        after = manifest.without(label, read_at=snapshot) if held else manifest.read(snapshot)
        said = f"no entry of partition {label} ({'no tick left' if held else 'still without a tick'})"
        at = yield from ask(manifest.switch_to(after, said))
        if at is not None:
            yield from _switched(seat, replace(after, written=at), clearing)
            return "emptied" if held else "empty"
    raise StateError(f"cold tier: the manifest of {collection!r} was switched by others {_TRIES} times while partition "
                     f"{label} waited; run the seal again")  # fmt: skip


def _switched(seat: Seat, switched: Manifest, clearing: _Clearing) -> Request[None]:
    """After a switch to ``switched`` (its write time known): its copy in the object store, then
    the marks it folded in cleared."""
    clearing.manifest = switched
    copy = manifest_copy_name(seat.spec.collection, switched.version)
    yield from ask(PutObject(copy, switched.copy_json(), f"writing {copy} to the cold tier"))
    yield from clearing.clear(seat, switched)


def _remove_orphans(seat: Seat, collection: str) -> Request[int]:
    """Delete the partition objects the manifest does not name that are older than
    :data:`~tsstore.cold.manifest.ORPHAN_GRACE`; how many."""
    listed = yield from ask(ListObjects(f"{collection}/date=", f"listing the cold tier objects of {collection!r}"))
    manifest = yield from manifest_now(collection)
    now = yield from server_time(seat)
    removed = 0
    generations = {info.name: info.generation for info in listed}  # the one listed, not one written since
    for name in manifest.orphans(listed, now=now, grace=ORPHAN_GRACE):
        deleting = DeleteObject(name, f"deleting orphan object {name} of the cold tier", generations[name])
        removed += bool((yield from ask(deleting)))
    return removed


#: The Parquet bytes of a read's finished partitions held in memory before they go to a
#: temporary file until the read ends (a read of many partitions holds them all).
SPOOL_BYTES = 16 * 2**20


@dataclass(frozen=True)
class _Sealed:
    """A partition read whole: where its Parquet bytes are in its read's spool, its rows, id
    checksum and first and last times."""

    spool: IO[bytes]
    at: int
    size: int
    rows: int
    ids: str
    first: dt.datetime
    last: dt.datetime

    @property
    def data(self) -> bytes:
        """Its Parquet bytes."""
        self.spool.seek(self.at)
        return self.spool.read(self.size)


class _Partitions:
    """The ticks of a read of consecutive partitions as they stream (a partition's ticks come
    together, in the read's order): the partition being read as a table under way, each one
    read whole already as its Parquet bytes, written on as it ends to a spool (memory up to
    :data:`SPOOL_BYTES`, then a temporary file) the caller closes (:meth:`close`), and
    described in :attr:`done` (by start). A read stopped by its limit (:meth:`stop`) leaves out
    the partition it stopped in (:attr:`cut`, its start)."""

    def __init__(self, spec: SeriesSpec, tier: ColdTier, *, descending: bool = False) -> None:
        self._spec, self._tier, self.descending = spec, tier, descending
        self.done: dict[dt.datetime, _Sealed] = {}
        self.cut: dt.datetime | None = None
        self.read = 0  # ticks read
        self.held = 0  # the most ticks a partition held, the one left out too
        self._spool: IO[bytes] = tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES)  # noqa: SIM115 - closed by close()
        self._start: dt.datetime | None = None
        self._open()

    def _open(self) -> None:
        self._builder = FrameBuilder(self._spec, shard=True)  # a tick read back from the tier is the document
        self._ids: list[str] = []
        self._first: dt.datetime | None = None
        self._last: dt.datetime | None = None

    def add(self, tick: Tick) -> None:
        stamp = tick.timestamp
        start = self._tier.start_of(stamp)
        if start != self._start:
            self.finish()
            self._start = start
        self._builder.add(tick)
        self._ids.append(tick.id)
        self.read += 1
        self.held = max(self.held, len(self._ids))
        self._first = stamp if self._first is None or stamp < self._first else self._first
        self._last = stamp if self._last is None or stamp > self._last else self._last

    def finish(self) -> None:
        """Encode the partition being read (if any) and start afresh."""
        if self._start is None or self._first is None or self._last is None:
            return
        if self._start in self.done:
            raise StateError(f"cold tier: the read of {self._spec.collection!r} came back to partition "
                             f"{partition_label(self._start)} after leaving it; run the seal again")  # fmt: skip
        table = sorted_rows(with_ids(self._builder.table(), self._ids), timestamp_field=self._spec.timestamp_field)
        data = parquet_bytes(table)
        at = self._spool.seek(0, io.SEEK_END)
        self._spool.write(data)
        self.done[self._start] = _Sealed(self._spool, at, len(data), len(self._ids), id_checksum(self._ids),
                                         self._first, self._last)  # fmt: skip
        self._open()

    def stop(self) -> None:
        """The read ended at its limit: leave out the partition being read (it may go on)."""
        self.cut = self._start
        self._open()

    def covered(self, start: dt.datetime | None, end: dt.datetime) -> tuple[dt.datetime | None, dt.datetime]:
        """The part of the range from ``start`` to ``end`` this read saw whole."""
        if self.cut is None:
            return start, end
        return (self.cut + self._tier.partition, end) if self.descending else (start, self.cut)

    def close(self) -> None:
        self._spool.close()


# ---------------------------------------------------------------------------- a seal in parts
# (a pipeline's driver, its workers and its last step: :mod:`tsstore.beam.seal`)


def _opening(seat: Seat, until: TimeLike | None) -> Request[tuple[ColdTier, dt.datetime, dt.datetime, _Clearing]]:
    """What a seal does once before it reads: the tier, the time it seals up to, the writers
    held (the end announced, the writers waited for), its snapshot after that, and the marks
    read at it."""
    given = None if until is None else _time(until)
    tier = declared_tier(seat.spec)
    collection = seat.spec.collection
    now = yield from server_time(seat)
    until_at = min(now - tier.seal_after if given is None else given, now)  # an open partition never
    cutoff = yield from _hold_writers(seat, tier, tier.start_of(until_at))
    snapshot = yield from server_time(seat)  # every writer decides with the new horizon by now
    marks = yield from read_marks(seat, horizon_name(collection), before=None, read_time=snapshot)
    return tier, until_at, snapshot, _Clearing(horizon_name(collection), marks, cutoff)


def _closing(seat: Seat) -> Request[int]:
    """What a seal does once after its switches: the watermark written where the manifest's
    sealed history ends, and the orphans past their grace removed (how many)."""
    collection = seat.spec.collection
    through = (yield from manifest_now(collection)).through
    what = f"the watermark of the cold tier of {collection!r}"
    yield from ask(watermark_write(horizon_name(collection), {"watermark": through}, what=what))
    return (yield from _remove_orphans(seat, collection))


def _put(
    seat: Seat,
    tier: ColdTier,
    start: dt.datetime,
    ticks: _Sealed,
    snapshot: dt.datetime,
    *,
    again: bool,
    known: Manifest | None = None,
) -> Request[tuple[Manifest, Entry] | Outcome]:
    """The first half of :func:`_place`: the partition's object written under a name that
    must not exist; the manifest read last (or ``known``: as the seal last switched it) and
    the entry naming the object, or ``"skipped"`` (as :func:`_place` says)."""
    collection, label = seat.spec.collection, partition_label(start)
    manifest = known if known is not None else (yield from manifest_now(collection))
    if _taken(manifest, label, snapshot, again):
        return "skipped"
    data, generation = ticks.data, manifest.next_generation(label)
    for _ in range(_TRIES):
        name = object_name(collection, start, generation)
        placed = yield from ask(PutObject(name, data, f"writing {name} to the cold tier"))
        if isinstance(placed, Placed):
            break
        # the name is taken (by a sealer of it, or an orphan), or the object was damaged and deleted
        manifest = yield from manifest_now(collection)
        if _taken(manifest, label, snapshot, again):
            return "skipped"
        generation = max(generation + 1, manifest.next_generation(label))
    else:
        raise StateError(f"cold tier: {_TRIES} object names of partition {label} of {collection!r} were taken or "
                         f"their objects damaged (last: {placed}); is another sealer running? "
                         "run the seal again")  # fmt: skip
    entry = Entry(
        generation=generation, rows=ticks.rows, ids=ticks.ids, start=start,
        end=start + tier.partition, first=ticks.first, last=ticks.last, sealed_at=snapshot, object=placed.name,
        object_generation=placed.generation, bytes=placed.size,
    )  # fmt: skip
    return manifest, entry


def _name(
    seat: Seat, manifest: Manifest, entry: Entry, snapshot: dt.datetime, clearing: _Clearing, *, again: bool
) -> Request[SealedPartition | Outcome]:
    """The second half of :func:`_place`: the manifest (as last read) switched to name
    ``entry``, retried when another switch lands first, then the marks it folded in cleared."""
    collection, label, generation = seat.spec.collection, entry.label, entry.generation
    for _ in range(_TRIES):
        at = yield from ask(manifest.switch(entry))
        if at is not None:
            yield from _switched(seat, replace(manifest.with_entry(entry), written=at), clearing)
            return SealedPartition(label, entry.rows, entry.bytes, generation, entry.object)
        manifest = yield from manifest_now(collection)  # another sealer switched it first
        if _taken(manifest, label, snapshot, again):
            return "skipped"  # it sealed this partition: ours is an orphan, deleted later
    raise StateError(f"cold tier: the manifest of {collection!r} was switched by others {_TRIES} times while partition "
                     f"{label} waited; run the seal again")  # fmt: skip




@dataclass(frozen=True)
class SealUnit:
    """One partition a pipeline seals (one element): its start, and whether it is sealed
    ``again`` (a sealed partition late ticks marked) or for the first time."""

    start: dt.datetime
    again: bool = False


@dataclass(frozen=True)
class SealPlan:
    """What a pipeline's driver decided once (:func:`seal_plan`): the time it seals up to,
    the one snapshot every partition is read at (after the writers saw the new horizon), the
    marks read then and their ``cutoff``, the partitions to seal (marked ones first, then
    new ones, each oldest first), those sealed before (``skipped``) and the spans it found
    without a tick (``empty``)."""

    until: dt.datetime
    snapshot: dt.datetime
    cutoff: dt.datetime
    marks: tuple[Mark, ...]
    units: tuple[SealUnit, ...]
    skipped: int
    empty: tuple[tuple[dt.datetime | None, dt.datetime | None], ...]


#: What a worker of a pipeline made of its partition (:func:`seal_partition`): the entry
#: naming the object it wrote, or the partition skipped (named already) or found empty.
Written = Entry | Outcome


def seal_plan(seat: Seat, *, until: TimeLike | None = None) -> Request[SealPlan]:
    """The first part of :meth:`seal` as a pipeline runs it (:mod:`tsstore.beam`), done once
    by its driver: the end announced and the writers waited for, the snapshot, the marks,
    and which partitions to seal: every marked one before the sealed history's end, then
    every closed partition holding a tick at the snapshot that the manifest does not name.
    Nothing is read or written for a partition: its workers do that (:func:`seal_partition`)."""
    tier, until_at, snapshot, clearing = yield from _opening(seat, until)
    known = yield from manifest_now(seat.spec.collection)
    through = known.through
    marked = sorted({m.bucket for m in clearing.marks if through is not None and m.bucket < through})
    units = [SealUnit(at, again=True) for at in marked]
    done_before = set(known.entries) | {partition_label(at) for at in marked}
    skipped = 0
    start = yield from _next_tick(seat, tier, None, snapshot, clearing)
    while start is not None and start + tier.partition <= until_at:
        if partition_label(start) in done_before:  # as seal() passes over them
            skipped += partition_label(start) in known.entries and start not in marked
            start += tier.partition
            continue
        units.append(SealUnit(start))
        start = yield from _next_tick(seat, tier, start + tier.partition, snapshot, clearing)
    return SealPlan(until_at, snapshot, clearing.cutoff, tuple(clearing.marks), tuple(units), skipped,
                    tuple(clearing.empty))  # fmt: skip


def seal_partition(seat: Seat, unit: SealUnit, *, sealing: SealPlan) -> Request[Written]:
    """The part of :meth:`seal` a pipeline's worker does for one partition: its ticks read at
    the snapshot of ``sealing`` (:func:`seal_plan`) and written as Parquet under a name that
    must not exist (the same writer and names as :meth:`seal`); the entry that would name the
    object (switched in by :func:`seal_switch`), ``"empty"`` (no tick) or ``"skipped"`` (the
    manifest names it already, or a switch from a later read landed). Run again (a retried
    bundle), it writes the next generation: the first attempt's object is an orphan no
    manifest names."""
    tier = declared_tier(seat.spec)
    ticks = yield from _read_partitions(seat, tier, unit.start, unit.start + tier.partition, sealing.snapshot)
    try:
        whole = ticks.done.get(unit.start)
        if whole is None:
            return "empty"
        written = yield from _put(seat, tier, unit.start, whole, sealing.snapshot, again=unit.again)
    finally:
        ticks.close()  # its spool
    return written if isinstance(written, str) else written[1]


def seal_switch(
    seat: Seat,
    sealing: SealPlan,
    written: Sequence[tuple[SealUnit, Written]],
    *,
    on_progress: SealProgress | None = None,
) -> Request[SealResult]:
    """The last part of :meth:`seal` as a pipeline runs it, done once: the manifest switched
    to name each partition its workers wrote, one switch per partition in the order of
    ``sealing`` (:func:`seal_plan`: oldest first, so a reader never takes a partition before
    the sealed history's end as empty while its object waits to be named), each retried when
    another switch lands first; the marks each switch folded in cleared after it; a marked
    partition found without a tick taken out of the manifest; then the watermark and the
    orphans as :meth:`seal` ends. Run again (a retried step), a partition the manifest names
    with its worker's object already is reported sealed and its marks cleared."""
    collection, tier = seat.spec.collection, declared_tier(seat.spec)
    clearing = _Clearing(horizon_name(collection), list(sealing.marks), sealing.cutoff, empty=list(sealing.empty))
    made = dict(written)
    sealed: list[SealedPartition] = []
    resealed: list[SealedPartition] = []
    emptied: list[str] = []
    skipped = sealing.skipped
    for unit in sealing.units:
        done = yield from _switch_unit(seat, tier, sealing, unit, made.get(unit, "skipped"), clearing)
        if isinstance(done, SealedPartition):
            (resealed if unit.again else sealed).append(done)
            if on_progress is not None:
                on_progress(done)
        emptied += [partition_label(unit.start)] if done == "emptied" else []
        skipped += done == "skipped" and not unit.again
    removed = yield from _closing(seat)
    return SealResult(tuple(sealed), skipped, removed, sealing.until, tuple(resealed), tuple(emptied))


def _switch_unit(
    seat: Seat, tier: ColdTier, sealing: SealPlan, unit: SealUnit, written: Written, clearing: _Clearing
) -> Request[SealedPartition | str]:
    """:func:`seal_switch` for one partition: what became of it (``"emptied"``: a marked
    partition left without a tick, its entry removed)."""
    if isinstance(written, str):
        if written == "empty":
            clearing.empty.append((unit.start, unit.start + tier.partition))
            if unit.again:
                return (yield from _empty(seat, unit.start, sealing.snapshot, clearing))
        return written
    clearing.ours[unit.start] = written.object
    manifest = yield from manifest_now(seat.spec.collection)
    named = manifest.entries.get(written.label)
    if named is not None and named.object == written.object:  # this step's earlier attempt switched it
        yield from clearing.clear(seat, manifest)
        return SealedPartition(written.label, written.rows, written.bytes, written.generation, written.object)
    if _taken(manifest, written.label, sealing.snapshot, unit.again):
        return "skipped"
    return (yield from _name(seat, manifest, written, sealing.snapshot, clearing, again=unit.again))
