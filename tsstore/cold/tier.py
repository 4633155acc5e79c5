"""The cold tier's partition arithmetic: a partition's name and start, the hive-style object
names, and the name and fields the tier goes by in the late-tick protocol. Which partition a
time falls in is the declaration's (:meth:`tsstore.cold_tier.ColdTier.start_of`).

Everything here is plain data; nothing touches Firestore or the object store.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from tsstore.cold_tier import ColdTier
from tsstore.late import COLD_TIER


def partition_label(start: dt.datetime) -> str:
    """A partition's name: its start's UTC date (``2026-11-01``)."""
    return start.astimezone(dt.timezone.utc).date().isoformat()


def partition_start(label: str) -> dt.datetime:
    """The start of the partition named ``label`` (:func:`partition_label`)."""
    return dt.datetime.combine(dt.date.fromisoformat(label), dt.time(), tzinfo=dt.timezone.utc)


def object_name(collection: str, start: dt.datetime, generation: int) -> str:
    """The object holding generation ``generation`` of the partition starting at ``start``,
    in hive layout: ``<collection>/date=YYYY-MM-DD/part-<generation>.parquet``."""
    return f"{collection}/date={partition_label(start)}/part-{generation}.parquet"


def manifest_copy_name(collection: str, version: int) -> str:
    """The object holding the copy of version ``version`` of a collection's manifest."""
    return f"{collection}/_manifest/{version}.json"


def horizon_name(collection: str) -> str:
    """The name the cold tier of ``collection`` goes by in the late-tick protocol: its
    watermark document ``tsstore_rollups/<collection>.cold`` (``source``: the collection,
    ``interval_seconds``: the partition) and its marks under it, one per partition a late,
    replaced or erased tick changed after it was sealed (id: the partition's start in epoch
    milliseconds, as a roll-up's), which writers leave as they leave a roll-up's."""
    return f"{collection}.cold"


def horizon_fields(collection: str, tier: ColdTier) -> dict[str, Any]:
    """What the cold tier's watermark document says besides its times: the series it seals
    (``source``: writers of it find the document as they find a roll-up's), the partition's
    seconds and that it is a cold tier (a late-data window never refuses a tick for it)."""
    return {"source": collection, "interval_seconds": tier.partition.total_seconds(), COLD_TIER: True}
