"""The sealed history as it stands, as requests: a DuckDB view and a BigQuery recipe over the
objects the manifest names now, the tier's status, and each sealed partition verified
against Firestore at one read time (which a purge of sealed days relies on:
:mod:`tsstore.verbs.retention`). Sealing itself is :mod:`tsstore.verbs.cold`.
"""

from __future__ import annotations

import datetime as dt

from tsstore.asks import GetDoc, ask, asked_with
from tsstore.cold.bigquery import BigQueryRecipe, bigquery_recipe, bigquery_table
from tsstore.cold.checks import ColdStatus, ColdVerifyResult, IdSum, PartitionCheck
from tsstore.cold.manifest import Entry, Manifest, duckdb_view, manifest_ask, manifest_path
from tsstore.cold.objects import ObjectUrls
from tsstore.cold.tier import horizon_name, partition_label
from tsstore.cold_tier import ColdTier
from tsstore.errors import QueryError
from tsstore.late import PURGED, marks_ask, marks_of
from tsstore.read.cost import ReadStats
from tsstore.read.plan import oldest_first
from tsstore.read.query import Query
from tsstore.ticks import Tick
from tsstore.verbs.cold import TICKS_PER_READ, WINDOW, declared_tier, manifest_now
from tsstore.verbs.marks import read_watermark
from tsstore.verbs.reading import read, snapshot_now
from tsstore.verbs.request import Feed, Request, Seat

#: What each parameter of these verbs means (the API reference describes a parameter from here).
PARAMETER_HELP = {
    "name": "the view's name; default the collection's",
    "table": "the BigQuery table to make: ``dataset.table`` or ``project.dataset.table``",
}


def cold_sql(seat: Seat, *, name: str | None = None) -> Request[str]:
    """A DuckDB statement making a view over the current generation of every sealed
    partition (the objects the manifest names now, with the hive ``date`` column), named
    ``name`` (default: the collection's): ``duckdb.sql(store.cold_sql())``, then query it."""
    if name is not None and (not isinstance(name, str) or not name.strip()):
        raise QueryError(f"cold_sql: name {name!r} is not allowed; give the view's name, or None for the collection's")
    declared_tier(seat.spec)
    manifest = yield from manifest_now(seat.spec.collection)
    urls = yield from ask(ObjectUrls(tuple(manifest.current())))
    return duckdb_view(name or seat.spec.collection, urls)




def verify_cold(seat: Seat, *, stats: ReadStats | None = None) -> Request[ColdVerifyResult]:
    """Compare the sealed history with Firestore, partition by partition: each partition
    the manifest names, its ticks' count and the checksum of their ids
    (:func:`~tsstore.cold.parquet.id_checksum`) against the entry's ``rows`` and ``ids``; and
    every other partition before ``through`` (sealed as empty: it held no tick) is checked
    to hold none still. The manifest, the tier's late-tick marks and the ids are read at one
    read time. A partition a late tick changed since it was sealed (marked) is not compared:
    reads take it from Firestore, and the next seal seals it again. The ids are read alone
    (no field), consecutive partitions together as a seal reads them (about
    :data:`TICKS_PER_READ` ticks, at most :data:`WINDOW` partitions a read, each read at a
    read time of its own). Billed: one read per tick of the sealed history (a read of the
    sealed days; at least one a query), in ``stats``. Partitions before where a purge ended
    (the result's ``purged_before``) are not compared: their ticks were deleted from
    Firestore once verified, by design."""
    declared_tier(seat.spec)
    cost = stats if stats is not None else ReadStats()
    if not isinstance(cost, ReadStats):
        raise QueryError(f"verify_cold: stats {stats!r} is not allowed; give a ReadStats, or None")
    horizon = yield from read_watermark(seat, horizon_name(seat.spec.collection))
    purged = (horizon or {}).get(PURGED)
    purged = purged if isinstance(purged, dt.datetime) else None
    return (yield from verify_span(seat, purged, None, cost, purged_before=purged))


def verify_span(
    seat: Seat, since: dt.datetime | None, until: dt.datetime | None, cost: ReadStats, *,
    purged_before: dt.datetime | None = None,
) -> Request[ColdVerifyResult]:
    """:func:`verify_cold` of the partitions in ``[since, until)`` (``None``: unbounded);
    ``purged_before``: where a purge ended, said in the result."""
    collection = seat.spec.collection
    known = yield from ask(manifest_ask(collection))
    start = since
    checks: list[PartitionCheck] = []
    ticks = 0
    pending = sorted((e for e in Manifest.of(collection, known).entries.values()
                      if (start is None or e.start >= start) and (until is None or e.start < until)),
                     key=lambda entry: entry.start)  # fmt: skip
    while pending:
        taken = _verify_window(pending)
        pending = pending[len(taken) :]
        found, read_now = yield from _verify_read(seat, start, taken[-1].end, cost)
        checks += found
        ticks += read_now
        start = taken[-1].end
    if until is not None and (start is None or start < until):  # the days after the last entry: held no tick
        found, read_now = yield from _verify_read(seat, start, until, cost)
        checks += found
        ticks += read_now
    return ColdVerifyResult.of(checks, ticks=ticks, billed_reads=cost.billed_reads, purged_before=purged_before)


def cold_status(seat: Seat) -> Request[ColdStatus]:
    """The series' cold tier as its manifest and its late-tick marks say now: where the
    sealed history ends (``through``), how many partitions, ticks and bytes are sealed, and
    which partitions a late tick changed since (reads take those from Firestore until the
    next seal). Two document reads, no tick read."""
    tier = declared_tier(seat.spec)
    collection = seat.spec.collection
    marks_now = marks_ask(horizon_name(collection), before=None, read_time=None)
    [doc], [found] = yield from asked_with([manifest_ask(collection)], [marks_now])
    manifest = Manifest.of(collection, doc)
    entries = list(manifest.entries.values())
    return ColdStatus(
        collection, tier.path, manifest.through, len(entries), sum(e.rows for e in entries),
        sum(e.bytes for e in entries), tuple(partition_label(mark.bucket) for mark in marks_of(found)),
        max((e.sealed_at for e in entries), default=None),
    )  # fmt: skip


def cold_bigquery(seat: Seat, table: str) -> Request[BigQueryRecipe]:
    """How BigQuery reads the sealed partitions of a tier in Cloud Storage, as ``table``
    (``dataset.table`` or ``project.dataset.table``): an external table over the objects
    the manifest names now, with the hive ``date`` column (a GoogleSQL ``CREATE OR REPLACE
    EXTERNAL TABLE`` statement), and a ``bq load`` of the same objects into a table of
    BigQuery's own. Every object is named, none superseded or orphaned: make it again after
    a seal. The declared fields whose names BigQuery does not take as column names (a dotted
    ``price.micros``) are named in it. A local tier is refused: BigQuery reads ``gs://``
    objects only."""
    bigquery_table(table)
    tier = declared_tier(seat.spec)
    if tier.local:
        raise QueryError(f"cold_bigquery: the cold tier of {seat.spec.collection!r} is the directory {tier.path!r}; "
                         "BigQuery reads gs:// objects only: declare a gs://bucket/prefix path, or read the "
                         "directory with cold_sql()")  # fmt: skip
    manifest = yield from manifest_now(seat.spec.collection)
    urls = yield from ask(ObjectUrls(tuple(manifest.current())))
    spec = seat.spec
    fields = (spec.timestamp_field, *spec.key_fields, *(name for name, _ in spec.columns), *spec.measures)
    return bigquery_recipe(table, urls, prefix=f"{tier.path}/{spec.collection}", fields=fields)


def _verify_window(pending: list[Entry]) -> list[Entry]:
    """The first entries of ``pending`` one read compares: about :data:`TICKS_PER_READ`
    ticks by their rows, their span at most :data:`WINDOW` partitions (at least one)."""
    taken = [pending[0]]
    rows = pending[0].rows
    for entry in pending[1:]:
        span = (entry.end - taken[0].start) // (taken[0].end - taken[0].start)
        if rows + entry.rows > TICKS_PER_READ or span > WINDOW:
            break
        taken.append(entry)
        rows += entry.rows
    return taken


def _verify_read(
    seat: Seat, start: dt.datetime | None, end: dt.datetime, cost: ReadStats
) -> Request[tuple[list[PartitionCheck], int]]:
    """The comparisons of the partitions in ``[start, end)`` (``None``: from the first tick)
    and the ticks read: the manifest (as it is at the read time: a partition sealed again
    meanwhile is compared with its new entry), the marks and the ids of the span read at
    one read time. A partition the manifest does not name was sealed holding no tick if it
    is before the manifest's ``through`` then, else not sealed then (not compared)."""
    collection, tier = seat.spec.collection, declared_tier(seat.spec)
    snapshot = yield from snapshot_now(seat, cost)
    marks = marks_ask(horizon_name(collection), since=start, before=end, read_time=snapshot)
    manifest_then = GetDoc(manifest_path(collection), f"reading the cold tier manifest of {collection!r}",
                           read_time=snapshot)  # fmt: skip
    [doc], [found] = yield from asked_with([manifest_then], [marks])
    manifest, marked = Manifest.of(collection, doc), {mark.bucket for mark in marks_of(found)}
    plan = oldest_first(seat.spec, Query(start=start, end=end, read_time=snapshot, columns=()))
    ids = _IdSums(tier)
    yield from ask(Feed((yield from read(seat, plan, cost)), ids))
    named = {entry.start: entry for entry in manifest.entries.values() if start is None or entry.start >= start}
    through = manifest.through  # at the read time: a partition from there on was not sealed then
    checks = []
    for at in sorted({*(at for at in named if at < end), *(at for at in ids.sums if through and at < through)}):
        entry, stored = named.get(at), ids.sums.get(at, IdSum())
        rows, checksum = (entry.rows, entry.ids) if entry is not None else (0, IdSum().checksum)
        if at in marked:
            checks.append(PartitionCheck(partition_label(at), "marked", (), rows, checksum, None, None, snapshot))
            continue
        differs = tuple(what for what, same in (("rows", stored.rows == rows), ("ids", stored.checksum == checksum))
                        if not same)  # fmt: skip
        checks.append(PartitionCheck(partition_label(at), "differs" if differs else "verified", differs, rows,
                                     checksum, stored.rows, stored.checksum, snapshot))  # fmt: skip
    return checks, sum(one.rows for one in ids.sums.values())


class _IdSums:
    """A :class:`~tsstore.verbs.request.Feed`'s sink: each partition's count and id checksum."""

    def __init__(self, tier: ColdTier) -> None:
        self._tier = tier
        self.sums: dict[dt.datetime, IdSum] = {}

    def add(self, tick: Tick) -> None:
        self.sums.setdefault(self._tier.start_of(tick.timestamp), IdSum()).add(tick.id)
