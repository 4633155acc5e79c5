"""Composite indexes: what each query needs, and the ``firestore.indexes.json`` that declares them.

Pure logic. :func:`required_index` is the one function that says which composite index a
query on a set of equality/``in`` fields in a time direction needs. The query planner uses
it to refuse a query whose index is not declared (the emulator ignores indexes, so nothing
else would catch it before production does), and the generator uses it to write the index
file: the two cannot disagree.

Layout, following the sharded-timestamps guide: the shard field first, then the shape's
fields, then the timestamp in the query's direction, then the value fields the shape filters
by range (in the same direction). A series shape (``series_rate``) leaves the shard out: its
fields spread the entries, as the Datastore-mode best practices put a user id before a
timestamp. The shard is ``DESCENDING`` and the
other fields ``ASCENDING`` exactly as in the guide's example, so a project that followed
the guide keeps its indexes (equality and ``in`` filters are served by either order; only
the timestamp's order must match the query). Firestore appends ``__name__`` in the
direction of the last field, which is the tie-break order tsstore's queries use.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tsstore.errors import SpecError
from tsstore.spec import Direction, QueryShape, SeriesSpec, aggregate_direction

Order = Literal["ASCENDING", "DESCENDING"]
QUERY_SCOPE = "COLLECTION"
SHARD_ORDER: Order = "DESCENDING"
FILTER_ORDER: Order = "ASCENDING"

#: Keys the Firebase CLI understands; it ignores others silently (and production never sees them).
INDEX_KEYS = frozenset({"collectionGroup", "queryScope", "fields", "apiScope", "density", "multikey", "unique"})
FIELD_KEYS = frozenset({"fieldPath", "order", "arrayConfig", "vectorConfig", "searchConfig"})
FIELD_KINDS = ("order", "arrayConfig", "vectorConfig", "searchConfig")
OVERRIDE_KEYS = frozenset({"collectionGroup", "fieldPath", "indexes", "ttl"})
OVERRIDE_INDEX_KEYS = frozenset({"order", "arrayConfig", "queryScope", "apiScope", "density", "multikey", "unique"})
TOP_KEYS = frozenset({"indexes", "fieldOverrides"})


@dataclass(frozen=True)
class IndexField:
    field_path: str
    order: Order

    def to_json(self) -> dict[str, str]:
        return {"fieldPath": self.field_path, "order": self.order}


@dataclass(frozen=True)
class CompositeIndex:
    collection_group: str
    fields: tuple[IndexField, ...]
    query_scope: str = QUERY_SCOPE

    def to_json(self) -> dict[str, Any]:
        return {
            "collectionGroup": self.collection_group,
            "queryScope": self.query_scope,
            "fields": [f.to_json() for f in self.fields],
        }

    def describe(self) -> str:
        cols = ", ".join(f"{f.field_path} {f.order[:3] if f.order == 'ASCENDING' else 'DESC'}" for f in self.fields)
        return f"{self.collection_group} ({cols})"


def after_timestamp(ranges: Iterable[str], measure: str | None = None) -> tuple[str, ...]:
    """The fields a query orders by after the timestamp, in the index's order: the measure an
    aggregation sums (its index must hold it), then the range-filtered value fields, sorted
    (Firestore orders by every range field; tsstore names them so the order is known)."""
    return (*(() if measure is None else (measure,)), *sorted(f for f in set(ranges) if f != measure))


def required_index(
    spec: SeriesSpec,
    fields: Iterable[str],
    direction: Direction,
    *,
    ranges: Iterable[str] = (),
    series: bool = False,
    measure: str | None = None,
) -> CompositeIndex:
    """The composite index a tsstore query on ``fields`` (equality or ``in``) in ``direction``
    needs: the shard (not for a ``series`` shape, read without it), the fields, the
    timestamp, then what the query orders by after it (:func:`after_timestamp`: with
    ``measure``, the field its ``sum()``/``avg()`` reads; the ``ranges`` it filters by
    range or ``!=``), all in the timestamp's direction."""
    ts_order: Order = "DESCENDING" if direction is Direction.DESC else "ASCENDING"
    return CompositeIndex(
        spec.collection,
        (
            *(() if series else (IndexField(spec.shard_field, SHARD_ORDER),)),
            *(IndexField(f, FILTER_ORDER) for f in sorted(fields)),
            IndexField(spec.timestamp_field, ts_order),
            *(IndexField(f, ts_order) for f in after_timestamp(ranges, measure)),
        ),
    )


def shape_index(
    spec: SeriesSpec, shape: QueryShape, direction: Direction, *, measure: str | None = None
) -> CompositeIndex:
    """:func:`required_index` of a declared shape."""
    return required_index(spec, shape.fields, direction, ranges=shape.ranges, series=shape.series, measure=measure)


@functools.lru_cache(maxsize=64)
def declared_indexes(spec: SeriesSpec) -> tuple[CompositeIndex, ...]:
    """Every index the spec's shapes need, once each: each shape in each of its directions,
    then for each measure each shape in its aggregate direction."""
    shapes = spec.all_shapes()
    reads = (shape_index(spec, shape, direction) for shape in shapes for direction in shape.directions)
    sums = (
        shape_index(spec, shape, aggregate_direction(shape), measure=measure)
        for measure in spec.measures
        for shape in shapes
    )
    return tuple(dict.fromkeys((*reads, *sums)))  # a measure that is also a shape's range field needs no second one


def field_overrides(spec: SeriesSpec) -> list[dict[str, Any]]:
    """Single-field index exemptions: none on the timestamp (the hotspot itself) nor on the
    shard (it is only ever used inside the composites), and the TTL field if there is one."""
    overrides: list[dict[str, Any]] = [
        {"collectionGroup": spec.collection, "fieldPath": path, "indexes": []}
        for path in (spec.timestamp_field, spec.shard_field)
    ]
    if spec.expire_after is not None:
        # One TTL field per collection group; it grows with time like the timestamp, so it
        # gets no single-field index either.
        overrides.append(
            {"collectionGroup": spec.collection, "fieldPath": spec.expire_field, "ttl": True, "indexes": []}
        )
    return overrides


def generate(specs: Sequence[SeriesSpec]) -> dict[str, Any]:
    """The whole ``firestore.indexes.json`` for ``specs``, in a stable order."""
    _check_distinct(specs)
    ordered = sorted(specs, key=lambda s: s.collection)
    return {
        "indexes": [index.to_json() for spec in ordered for index in declared_indexes(spec)],
        "fieldOverrides": [o for spec in ordered for o in field_overrides(spec)],
    }


def render(document: Mapping[str, Any]) -> str:
    """The file text: 2-space indent, keys in insertion order, trailing newline."""
    return json.dumps(document, indent=2, ensure_ascii=False) + "\n"


def _check_distinct(specs: Sequence[SeriesSpec]) -> None:
    if not specs:
        raise SpecError("no SeriesSpec given; declare at least one")
    seen: dict[str, SeriesSpec] = {}
    for spec in specs:
        if spec.collection in seen and seen[spec.collection] != spec:
            raise SpecError(f"two different SeriesSpecs declare collection {spec.collection!r}; declare it once")
        seen[spec.collection] = spec


# ------------------------------------------------------------------------------ merging


@dataclass
class MergeReport:
    """What a merge did, for the one-line summary and the warnings."""

    added: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)  # timestamp without shard: the hotspot
    stale_kept: bool = False
    other_indexes: int = 0
    other_overrides: int = 0
    overrides_written: int = 0

    def summary(self) -> str:
        stale = (
            f"{len(self.stale)} stale timestamp index(es) without the shard {'kept' if self.stale_kept else 'removed'}"
        )
        return (
            f"indexes: {len(self.added)} added, {len(self.unchanged)} unchanged, {len(self.removed)} removed, "
            f"{stale}; {self.other_indexes} other index(es) and {self.other_overrides} other field override(s) "
            f"kept; {self.overrides_written} field override(s) written"
        )


def merge(
    existing: Mapping[str, Any], specs: Sequence[SeriesSpec], *, keep_stale: bool = False
) -> tuple[dict[str, Any], MergeReport]:
    """Update an existing index file for ``specs``.

    Entries for other collections, and entries on these collections that involve neither
    the timestamp nor tsstore's fields, stay as they are and in their order. This
    collection's tsstore entries (composites holding shard and timestamp, and the series
    shapes' composites it generates; overrides of the timestamp and shard fields) are replaced
    by the generated ones, appended after the others. Other composites on these collections
    that hold the timestamp but not the shard bring the hotspot back; they are reported, and
    removed unless ``keep_stale``.
    """
    generated = generate(specs)
    by_collection = {s.collection: s for s in specs}
    report = MergeReport(stale_kept=keep_stale)
    indexes = _merged_indexes(_list(existing, "indexes"), generated["indexes"], by_collection, report)
    overrides = _merged_overrides(_list(existing, "fieldOverrides"), generated["fieldOverrides"], set(by_collection),
                                  report)  # fmt: skip
    merged = {k: v for k, v in existing.items() if k not in TOP_KEYS}
    merged = {"indexes": indexes, "fieldOverrides": overrides, **merged}
    return merged, report


def _merged_indexes(
    existing: list[Any], generated: list[dict[str, Any]], by_collection: Mapping[str, SeriesSpec], report: MergeReport
) -> list[Any]:
    """The composites: others kept in their order, then the generated ones (each reported
    added or unchanged, and ours no longer generated as removed); a stale timestamp composite
    without the shard is reported, and kept only when the report says so."""
    old_ours: list[Mapping[str, Any]] = []
    indexes: list[Any] = []
    new_keys = {_index_key(e) for e in generated}
    for entry in existing:
        spec = by_collection.get(str(entry.get("collectionGroup"))) if isinstance(entry, Mapping) else None
        paths = _paths(entry) if spec is not None else set()
        if spec is None or spec.timestamp_field not in paths:
            indexes.append(entry)
            report.other_indexes += 1
        elif spec.shard_field in paths or _index_key(entry) in new_keys:  # a series shape's has no shard
            old_ours.append(entry)
        else:
            report.stale.append(_describe(entry))
            if report.stale_kept:
                indexes.append(entry)
    old_keys = [_index_key(e) for e in old_ours]
    for entry in generated:
        (report.unchanged if _index_key(entry) in old_keys else report.added).append(_describe(entry))
        indexes.append(entry)
    report.removed = [_describe(e) for e in old_ours if _index_key(e) not in new_keys]
    return indexes


def _merged_overrides(
    existing: list[Any], generated: list[dict[str, Any]], collections: set[str], report: MergeReport
) -> list[Any]:
    """The field overrides: others kept, ours replaced by the generated ones. Any TTL override
    on these collections is tsstore's: the declaration alone decides the TTL field, so a
    removed or renamed ``expire_field`` must not keep deleting documents."""
    ours = {(o["collectionGroup"], o["fieldPath"]) for o in generated}
    overrides: list[Any] = []
    for entry in existing:
        mine = isinstance(entry, Mapping) and (entry.get("collectionGroup"), entry.get("fieldPath")) in ours
        if isinstance(entry, Mapping) and entry.get("ttl") is True and entry.get("collectionGroup") in collections:
            if not mine:
                report.removed.append(f"TTL override {entry.get('collectionGroup')}.{entry.get('fieldPath')}")
                continue
        if not mine:
            overrides.append(entry)
            report.other_overrides += 1
    report.overrides_written = len(generated)
    return [*overrides, *generated]


def _list(document: Mapping[str, Any], key: str) -> list[Any]:
    value = document.get(key, [])
    if not isinstance(value, list):
        raise SpecError(f"{key!r} in the index file is {type(value).__name__}, not a list")
    return value


def _paths(entry: Mapping[str, Any]) -> set[Any]:
    return {f.get("fieldPath") for f in entry.get("fields", []) if isinstance(f, Mapping)}


def _index_key(entry: Mapping[str, Any]) -> tuple[Any, ...]:
    fields = tuple(
        (f.get("fieldPath"), f.get("order"), f.get("arrayConfig"))
        for f in entry.get("fields", [])
        if isinstance(f, Mapping)
    )
    return (entry.get("collectionGroup"), entry.get("queryScope", QUERY_SCOPE), fields)


def _describe(entry: Mapping[str, Any]) -> str:
    cols = ", ".join(
        f"{f.get('fieldPath')} {f.get('order') or f.get('arrayConfig') or '?'}"
        for f in entry.get("fields", [])
        if isinstance(f, Mapping)
    )
    return f"{entry.get('collectionGroup')} ({cols})"


# ------------------------------------------------------------------------------ linting


def lint(document: Mapping[str, Any]) -> list[str]:
    """What the Firebase CLI accepts but production rejects or silently drops: unknown keys
    (ignored by the CLI), more than one of order/arrayConfig/… on a field (the CLI keeps
    only the first), and composite indexes on a single field (refused by the API)."""
    problems = [
        f"unknown top-level key {key!r} (the Firebase CLI ignores it)" for key in document if key not in TOP_KEYS
    ]
    for i, entry in enumerate(document.get("indexes", [])):
        problems += _index_problems(i, entry)
    for i, entry in enumerate(document.get("fieldOverrides", [])):
        problems += _override_problems(i, entry)
    return problems


def _index_problems(i: int, entry: object) -> list[str]:
    """What is wrong with composite index ``i``: unknown keys, a field of two kinds, a single field."""
    where = f"indexes[{i}] {_describe(entry) if isinstance(entry, Mapping) else entry!r}"
    if not isinstance(entry, Mapping):
        return [f"{where}: not an object"]
    problems = [f"{where}: unknown key {k!r} (ignored by the CLI)" for k in entry if k not in INDEX_KEYS]
    fields = [f for f in entry.get("fields", []) if isinstance(f, Mapping)]
    for f in fields:
        name = f.get("fieldPath")
        problems += [
            f"{where}: field {name!r} has unknown key {k!r} (ignored by the CLI)" for k in f if k not in FIELD_KEYS
        ]
        kinds = [k for k in FIELD_KINDS if k in f]
        if len(kinds) > 1:
            problems.append(f"{where}: field {name!r} has {' and '.join(kinds)}; the CLI keeps only {kinds[0]!r}")
    if len([f for f in fields if f.get("fieldPath") != "__name__"]) < 2:
        problems.append(
            f"{where}: a composite index needs at least two fields; Firestore refuses single-field "
            "composites (use a field override instead)"
        )
    return problems


def _override_problems(i: int, entry: object) -> list[str]:
    """What is wrong with field override ``i``: unknown keys, an index of two kinds."""
    if not isinstance(entry, Mapping):
        return [f"fieldOverrides[{i}]: not an object"]
    where = f"fieldOverrides[{i}] {entry.get('collectionGroup')}.{entry.get('fieldPath')}"
    problems = [f"{where}: unknown key {k!r} (ignored by the CLI)" for k in entry if k not in OVERRIDE_KEYS]
    for index in entry.get("indexes", []):
        if isinstance(index, Mapping):
            problems += [f"{where}: index has unknown key {k!r}" for k in index if k not in OVERRIDE_INDEX_KEYS]
            if "order" in index and "arrayConfig" in index:
                problems.append(f"{where}: index has both order and arrayConfig; the CLI keeps only 'order'")
    return problems
