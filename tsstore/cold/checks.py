"""What a look at a cold tier finds: each sealed partition compared with Firestore
(:class:`ColdVerifyResult`), and the tier as the manifest and the marks say it is now
(:class:`ColdStatus`).

Everything here is plain data; the requests that read them are in :mod:`tsstore.verbs.cold`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from tsstore.cold.parquet import id_hash
from tsstore.times import utc_text

#: What a comparison of a sealed partition with Firestore found: the same rows and ids
#: (``"verified"``), others (``"differs"``), or a late tick changed it since it was sealed
#: (``"marked"``: not compared; the next seal seals it again).
Verdict = Literal["verified", "differs", "marked"]


class IdSum:
    """A partition's id checksum built one id at a time, as
    :func:`~tsstore.cold.parquet.id_checksum` makes it from all of them (memory stays flat)."""

    def __init__(self) -> None:
        self.rows = 0
        self._total = 0

    def add(self, doc_id: str) -> None:
        self.rows += 1
        self._total ^= id_hash(doc_id)

    @property
    def checksum(self) -> str:
        return f"{self._total:016x}"


@dataclass(frozen=True)
class PartitionCheck:
    """One sealed partition compared with Firestore at one read time."""

    #: The partition's name (its start's UTC date).
    label: str
    #: ``"verified"``, ``"differs"`` or ``"marked"`` (not compared: a late tick changed it).
    verdict: Verdict
    #: What differs: ``"rows"``, ``"ids"`` (empty unless it differs).
    differs: tuple[str, ...]
    #: Its ticks as the manifest's entry says (0: sealed as empty, which the manifest names no object of).
    rows: int
    #: Its id checksum as the manifest's entry says (that of no id: sealed as empty).
    ids: str
    #: Its ticks in Firestore at ``read_time`` (``None``: marked, not compared).
    stored_rows: int | None
    #: The checksum of its ids in Firestore at ``read_time`` (``None``: marked, not compared).
    stored_ids: str | None
    #: The one time the manifest, the marks and the ticks were read at.
    read_time: dt.datetime

    def describe(self) -> str:
        """One line: what was found."""
        if self.verdict == "marked":
            return f"{self.label} marked: a late tick changed it since it was sealed; the next seal seals it again"
        if self.verdict == "verified":
            return f"{self.label} verified: {self.rows} ticks, ids {self.ids}"
        said = []
        if "rows" in self.differs:
            said.append(f"rows {self.rows} sealed, {self.stored_rows} in Firestore")
        if "ids" in self.differs:
            said.append(f"ids {self.ids} sealed, {self.stored_ids} in Firestore")
        return f"{self.label} differs: {'; '.join(said)}"


@dataclass(frozen=True)
class ColdVerifyResult:
    """Every partition the manifest names compared with Firestore, and every other one
    before ``through`` (sealed as empty) that holds a tick now (in time order); the names of
    those ``verified``, those that ``differ`` and those ``marked`` (changed by a late tick
    since they were sealed: not compared, sealed again by the next seal); the ticks read and
    the reads Firestore bills for them (a read of every tick of the sealed history)."""

    #: Each partition's comparison, in time order.
    partitions: tuple[PartitionCheck, ...]
    #: The partitions whose rows and ids are Firestore's.
    verified: tuple[str, ...]
    #: The partitions whose rows or ids are not Firestore's.
    differ: tuple[str, ...]
    #: The partitions a late tick changed since they were sealed (not compared).
    marked: tuple[str, ...]
    #: The ticks read (their ids): every tick of the sealed partitions' span, the marked ones' too.
    ticks: int
    #: Firestore's billed reads: one per tick read, one per query at least.
    billed_reads: int
    #: Where a purge ended: the partitions before it are not compared (their ticks were
    #: deleted from Firestore once verified; their sealed files are the only copy). ``None``: none.
    purged_before: dt.datetime | None = None

    @classmethod
    def of(
        cls, checks: Iterable[PartitionCheck], *, ticks: int, billed_reads: int, purged_before: dt.datetime | None = None
    ) -> ColdVerifyResult:
        """The result of these comparisons.

        - ``checks``: each partition's comparison, in any order
        - ``ticks``: the ticks read
        - ``billed_reads``: what Firestore billed for them
        - ``purged_before``: where a purge ended (the partitions before it not compared)"""
        done = tuple(sorted(checks, key=lambda check: check.label))

        def named(verdict: Verdict) -> tuple[str, ...]:
            return tuple(check.label for check in done if check.verdict == verdict)

        return cls(done, named("verified"), named("differs"), named("marked"), ticks, billed_reads, purged_before)

    def describe(self) -> str:
        """A line of figures, then one per partition that is not verified."""
        head = (f"verified {len(self.verified)} of {len(self.partitions)} sealed partition(s) against Firestore "
                f"({self.ticks} ticks read, {self.billed_reads} billed reads); {len(self.differ)} differ, "
                f"{len(self.marked)} marked")  # fmt: skip
        if self.purged_before is not None:
            head += f"; before {utc_text(self.purged_before)} purged from Firestore (the sealed files are the only copy)"
        return "\n".join([head, *(check.describe() for check in self.partitions if check.verdict != "verified")])


@dataclass(frozen=True)
class ColdStatus:
    """A series' cold tier as its manifest and its marks say now."""

    #: The series' collection.
    collection: str
    #: Where its partitions are sealed (the declared ``path``).
    path: str
    #: Where the sealed history ends (``None``: nothing sealed yet).
    through: dt.datetime | None
    #: The partitions the manifest names.
    partitions: int
    #: Their ticks.
    rows: int
    #: Their objects' bytes.
    size: int
    #: The partitions a late tick changed since they were sealed (their marks): reads take
    #: them from Firestore until the next seal seals them again.
    marked: tuple[str, ...]
    #: The read time the newest seal read its ticks at (``None``: nothing sealed yet).
    sealed_at: dt.datetime | None

    def describe(self) -> str:
        """One line."""
        if self.through is None:
            return f"{self.collection}: nothing sealed yet in {self.path}"
        marked = ", ".join(self.marked) if self.marked else "none"
        return (f"{self.collection}: sealed through {utc_text(self.through)} in {self.path}: {self.partitions} "
                f"partition(s), {self.rows} ticks, {self.size} bytes; marked: {marked}")  # fmt: skip
