"""Where a read's range meets the cold tier: which stretches come from sealed Parquet and
which from Firestore.

A reader at read time S takes a partition before the manifest's
:attr:`~tsstore.cold.manifest.Manifest.through` from its object when the manifest at S names
it and no late-tick mark at S covers it (a late, replaced or erased tick since it was sealed),
as empty when the manifest does not name it and no mark covers it, and from Firestore when a
mark covers it; everything from ``through`` on comes from Firestore. Everything here is plain
data: the request that reads the manifest and the marks is :mod:`tsstore.verbs.seam`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection
from dataclasses import dataclass

from tsstore.cold.manifest import Entry, Manifest


@dataclass(frozen=True)
class Stretch:
    """One stretch of a read's range, ``[start, end)`` (``None``: unbounded): from Firestore
    (``entries`` is ``None``) or from the objects of ``entries`` (sealed partitions, oldest
    first)."""

    start: dt.datetime | None
    end: dt.datetime | None
    entries: tuple[Entry, ...] | None = None

    @property
    def cold(self) -> bool:
        """Whether the stretch is read from the cold tier."""
        return self.entries is not None


def stretches(
    manifest: Manifest,
    marked: Collection[dt.datetime],
    *,
    start: dt.datetime | None,
    end: dt.datetime | None,
    partition: dt.timedelta,
) -> list[Stretch]:
    """The stretches of ``[start, end)``, oldest first, as a reader of ``manifest`` and of the
    marked partitions ``marked`` (their starts) at one read time takes them: sealed partitions
    not marked from their objects (neighbours joined into one stretch), marked ones and
    everything from ``through`` on from Firestore, and a partition before ``through`` that
    the manifest does not name and no mark covers not at all (it held no tick when sealed).
    An empty range has no stretch."""
    through = manifest.through
    if start is not None and end is not None and start >= end:
        return []
    if through is None or (start is not None and start >= through):
        return [Stretch(start, end)]
    entries = {entry.start: entry for entry in manifest.entries.values()}
    out: list[Stretch] = []
    for at in sorted({*entries, *marked}):  # sealed partitions in range, and marked ones
        stop = at + partition
        if at < through and _overlaps(at, stop, start, end):
            entry = None if at in marked else entries.get(at)  # marked: from Firestore
            _add(out, Stretch(_later(at, start), _earlier(stop, end), None if entry is None else (entry,)))
    if end is None or end > through:
        _add(out, Stretch(_later(through, start), end))
    return out


def _overlaps(at: dt.datetime, stop: dt.datetime, start: dt.datetime | None, end: dt.datetime | None) -> bool:
    """Whether ``[at, stop)`` meets ``[start, end)`` (``None``: unbounded)."""
    return (end is None or at < end) and (start is None or stop > start)


def _later(at: dt.datetime, start: dt.datetime | None) -> dt.datetime:
    """The later of ``at`` and ``start`` (``None``: unbounded below)."""
    return at if start is None or start < at else start


def _earlier(stop: dt.datetime, end: dt.datetime | None) -> dt.datetime:
    """The earlier of ``stop`` and ``end`` (``None``: unbounded above)."""
    return stop if end is None or end > stop else end


def _add(out: list[Stretch], stretch: Stretch) -> None:
    """Append ``stretch``, joined to the last one when they touch and come from the same tier."""
    if out and out[-1].end == stretch.start and out[-1].cold == stretch.cold:
        last = out.pop()
        joined = None if last.entries is None or stretch.entries is None else last.entries + stretch.entries
        stretch = Stretch(last.start, stretch.end, joined)
    out.append(stretch)
