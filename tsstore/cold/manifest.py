"""The manifest: the one truth about which object holds each sealed partition.

One Firestore document per collection, ``tsstore_cold/<collection>`` (beside the roll-ups'
``tsstore_rollups``), holding a ``version`` and one entry per partition (:class:`Entry`):
its generation, rows, id checksum, time span, the read time it was sealed at and its object.
A sealer switches it from the version it read to the next under a precondition (created the
first time, else updated only if not written since): of two sealers that read the same
version, one switch lands and the other is refused, re-reads and finds the partition sealed.
The manifest also keeps the newest read time a switch sealed from (``read_at``), and a switch
from an older read is refused: late ticks into a sealed partition are marked, and a sealer
that sealed them clears their marks, so an older copy switched in after it would go unmarked.
Readers take the objects the entries name and nothing else, so an object written but never
switched in (a crash between, a sealer that lost) is an orphan no reader sees; a later seal
deletes it once its partition is sealed with another object and it is older than
:data:`ORPHAN_GRACE`. A copy of each version goes to the
object store after the switch (:func:`~tsstore.cold.tier.manifest_copy_name`), for tools
that read the bucket alone.

Everything here is plain data; the request that reads and switches it is
:mod:`tsstore.verbs.cold`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from tsstore.asks import CreateDoc, Doc, GetDoc, UpdateDoc
from tsstore.cold.objects import ObjectInfo
from tsstore.cold.tier import partition_label
from tsstore.times import utc_text

#: The collection holding each series' manifest document (id: the series' collection).
MANIFESTS = "tsstore_cold"
#: How old an object the manifest does not name must be before a seal deletes it: a reader
#: still on an older version of the manifest is done with it by then.
ORPHAN_GRACE = dt.timedelta(hours=1)


def manifest_path(collection: str) -> str:
    """The path of ``collection``'s manifest document."""
    return f"{MANIFESTS}/{collection}"


def manifest_ask(collection: str) -> GetDoc:
    """The ask for ``collection``'s manifest document as it is now."""
    return GetDoc(manifest_path(collection), f"reading the cold tier manifest of {collection!r}")


@dataclass(frozen=True)
class Entry:
    """One sealed partition: ``generation`` (the number in its object's name), ``rows``,
    ``ids`` (:func:`~tsstore.cold.parquet.id_checksum` of its document ids), its span
    ``[start, end)``, its first and last tick's time (``None``: no tick), the read time its
    ticks were read at (``sealed_at``), and its object, that object's store generation and
    its size in bytes."""

    generation: int
    rows: int
    ids: str
    start: dt.datetime
    end: dt.datetime
    first: dt.datetime | None
    last: dt.datetime | None
    sealed_at: dt.datetime
    object: str
    object_generation: int
    bytes: int

    @property
    def label(self) -> str:
        """The partition's name (its start's date)."""
        return partition_label(self.start)

    @classmethod
    def of(cls, data: Mapping[str, Any]) -> Entry:
        """An entry as stored in the manifest document."""
        values: dict[str, Any] = {name: data.get(name) for name in cls.__dataclass_fields__}
        return cls(**values)


@dataclass(frozen=True)
class Manifest:
    """A collection's manifest as read: its entries by partition name, its ``version``, when
    the document was last written (``None``: there is none yet), and ``read_at``: the newest
    read time a switch sealed from (``None``: not known). A switch from an older read is
    refused (:meth:`behind`): the ticks it read may have changed since, and the marks that
    said so may be cleared already by the sealer that read them later."""

    collection: str
    entries: Mapping[str, Entry] = field(default_factory=dict)
    version: int = 0
    written: dt.datetime | None = None
    read_at: dt.datetime | None = None

    @classmethod
    def of(cls, collection: str, doc: Doc) -> Manifest:
        """The manifest in ``doc`` (the answer to :func:`manifest_ask`)."""
        data = doc.data
        if data is None:
            return cls(collection)
        stored = data.get("partitions") or {}
        entries = {label: Entry.of(value) for label, value in stored.items()}
        read_at = data.get("read_at")
        return cls(collection, entries, int(data.get("version") or 0), doc.update_time,
                   read_at if isinstance(read_at, dt.datetime) else None)  # fmt: skip

    def next_generation(self, label: str) -> int:
        """The generation a new seal of partition ``label`` is written as."""
        held = self.entries.get(label)
        return 1 if held is None else held.generation + 1

    def with_entry(self, entry: Entry) -> Manifest:
        """The next version: this one with ``entry`` in place of its partition's."""
        return self.read(entry.sealed_at, entries={**self.entries, entry.label: entry})

    def without(self, label: str, *, read_at: dt.datetime) -> Manifest:
        """The next version: this one without partition ``label``'s entry (its ticks, read at
        ``read_at``, are all gone)."""
        return self.read(read_at, entries={k: v for k, v in self.entries.items() if k != label})

    def read(self, read_at: dt.datetime, *, entries: Mapping[str, Entry] | None = None) -> Manifest:
        """The next version, with ``entries`` (default: the same), sealed from a read at ``read_at``."""
        newest = read_at if self.read_at is None else max(self.read_at, read_at)
        kept = self.entries if entries is None else entries
        return replace(self, entries=kept, version=self.version + 1, read_at=newest)

    def behind(self, read_at: dt.datetime) -> bool:
        """Whether a switch sealed from a read at ``read_at`` is refused: a switch from a later
        read has landed."""
        return self.read_at is not None and self.read_at > read_at

    def document(self) -> dict[str, Any]:
        """The manifest document's data."""
        return {
            "collection": self.collection,
            "version": self.version,
            "partitions": {label: asdict(entry) for label, entry in sorted(self.entries.items())},
            **({"read_at": self.read_at} if self.read_at is not None else {}),
        }

    def switch(self, entry: Entry) -> CreateDoc | UpdateDoc:
        """The ask that switches the stored manifest (this version) to the next with ``entry``:
        answered ``False``, and nothing written, when another sealer switched it first."""
        return self.switch_to(self.with_entry(entry), f"partition {entry.label}'s generation {entry.generation}")

    def switch_to(self, after: Manifest, what: str) -> CreateDoc | UpdateDoc:
        """The ask that switches the stored manifest (this version) to ``after`` (saying
        ``what`` it holds): answered ``False``, and nothing written, when another sealer
        switched it first."""
        said = f"switching the cold tier manifest of {self.collection!r} to {what}"
        if self.written is None:
            return CreateDoc(manifest_path(self.collection), after.document(), said)
        return UpdateDoc(manifest_path(self.collection), after.document(), written=self.written, what=said)

    def copy_json(self) -> bytes:
        """The copy of this version written to the object store."""
        return json.dumps(self.document(), default=_text, indent=1, sort_keys=True).encode()

    @property
    def through(self) -> dt.datetime | None:
        """Where the sealed history ends (``None``: nothing sealed): every partition before
        it is sealed, named by an entry or, without one, holding no tick when it was sealed
        (a read takes it as empty unless it is marked)."""
        return max((entry.end for entry in self.entries.values()), default=None)

    def current(self) -> list[str]:
        """The objects readers read: one per sealed partition, by partition."""
        return [entry.object for _, entry in sorted(self.entries.items())]

    def orphans(
        self, listed: Iterable[ObjectInfo], *, now: dt.datetime, grace: dt.timedelta = ORPHAN_GRACE
    ) -> list[str]:
        """The objects among ``listed`` that may be deleted: those of a partition this
        manifest names another object of (a crash left them, a sealer that lost wrote them),
        older than ``grace`` at ``now``. An object of a partition not sealed yet stays: its
        sealer may still be between its object and its switch, however long it has stalled,
        and would name an object deleted under it; once another object is named, no switch
        can name this one (its sealer's precondition is on an older manifest)."""
        named = set(self.current())
        return [o.name for o in listed
                if o.name not in named and o.updated <= now - grace
                and self.entries.get(partition_of(self.collection, o.name) or "") is not None]  # fmt: skip


def partition_of(collection: str, name: str) -> str | None:
    """The partition an object of ``collection`` holds (``2026-11-01`` for
    ``<collection>/date=2026-11-01/part-1.parquet``); ``None`` for another object."""
    head, _, rest = name.partition("/date=")
    label, _, file = rest.partition("/")
    if head != collection or not label or not file.startswith("part-") or not file.endswith(".parquet"):
        return None
    return label


def _text(value: object) -> str:
    if isinstance(value, dt.datetime):
        return utc_text(value)
    raise TypeError(f"{value!r} is not JSON")  # pragma: no cover - an entry holds numbers, text and times


def duckdb_view(name: str, urls: list[str]) -> str:
    """A DuckDB statement making view ``name`` over the Parquet objects at ``urls`` (the
    manifest's current generation), their hive ``date`` column included, and the columns of
    every object by name (a field no tick of one day holds is not in that day's object)."""
    quoted = name.replace('"', '""')
    if not urls:
        return f'-- no partition of "{quoted}" is sealed yet: nothing to view'
    files = ",\n    ".join("'" + url.replace("'", "''") + "'" for url in urls)
    return (f'CREATE OR REPLACE VIEW "{quoted}" AS\nSELECT * FROM read_parquet([\n    {files}\n], '
            "hive_partitioning = true, union_by_name = true);")  # fmt: skip


@dataclass(frozen=True)
class SealedPartition:
    """A partition this run sealed: its name, rows, size in bytes, generation and object."""

    #: The partition's name: its start's UTC date (``2026-11-01``).
    label: str
    #: Its ticks, all in the object.
    rows: int
    #: The object's size in bytes.
    size: int
    #: The number in the object's name, handed out by the manifest.
    generation: int
    #: The object's name in the tier (``<collection>/date=2026-11-01/part-1.parquet``).
    object: str


@dataclass(frozen=True)
class SealResult:
    """What a seal did: the partitions it ``sealed`` (in time order), those it ``skipped``
    (sealed already, or by another sealer meanwhile), the orphan objects it ``removed``, the
    time it sealed up to (``until``: every partition ending by then), and the sealed
    partitions late ticks had changed (marked) that it sealed again (``resealed``: a new
    generation each) or found without a tick any more (``emptied``: their entries removed)."""

    #: The partitions this run sealed, in time order.
    sealed: tuple[SealedPartition, ...]
    #: Partitions already sealed when this run came to them (by an earlier run, or another sealer meanwhile).
    skipped: int
    #: Orphan objects this run deleted (another object of their partition is named; older than an hour).
    removed: int
    #: Every partition ending by this time is sealed.
    until: dt.datetime
    #: Sealed partitions that late ticks changed, sealed again as a new generation, in time order.
    resealed: tuple[SealedPartition, ...] = ()
    #: Sealed partitions that late erases left without a tick: their entries removed.
    emptied: tuple[str, ...] = ()

    @property
    def rows(self) -> int:
        """Ticks sealed by this run."""
        return sum(p.rows for p in self.sealed)

    @property
    def size(self) -> int:
        """Parquet bytes written by this run."""
        return sum(p.size for p in self.sealed)

    def describe(self) -> str:
        """One line: what was sealed, skipped and removed."""
        removed = f", {self.removed} orphan object(s) removed" if self.removed else ""
        again = [f"{p.label} (generation {p.generation}, {p.rows} ticks)" for p in self.resealed]
        again += [f"{label} (no tick left)" for label in self.emptied]
        late = f"; late ticks: sealed again {', '.join(again)}" if again else ""
        return (f"sealed {len(self.sealed)} partition(s) ({self.rows} ticks, {self.size} bytes) up to "
                f"{utc_text(self.until)}; {self.skipped} already sealed{removed}{late}")  # fmt: skip
