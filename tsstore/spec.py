"""The declaration of one time-series collection: the single source of truth.

A :class:`SeriesSpec` says where ticks live, which shard values spread their index
entries, which fields carry the timestamp and the shard, which query shapes the
application uses, and which fields identify a series. The writer, the query planner,
the frame builder and the index generator all read this one frozen object.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from tsstore.access import DEFAULT_ACCESS, ClientAccess, access_from
from tsstore.cold_tier import ColdTier, cold_from
from tsstore.errors import QueryError, SpecError, refuse_unknown_keys
from tsstore.late import DEFAULT_LATE, LatePolicy, late_from
from tsstore.limits import MAX_INEQUALITY_FIELDS, SEQUENTIAL_WRITES_PER_SECOND
from tsstore.prices import check_location
from tsstore.times import to_duration, to_utc

#: What the writer does with a tick whose key fields and timestamp are already stored
#: (see :mod:`tsstore.write.identity`): keep the stored one, replace it, or refuse.
DuplicatePolicy = Literal["keep", "replace", "error"]
DUPLICATE_POLICIES: tuple[DuplicatePolicy, ...] = ("keep", "replace", "error")


def check_policy(policy: object) -> DuplicatePolicy:
    if policy not in DUPLICATE_POLICIES:
        raise ValueError(f"on_duplicate={policy!r} is not allowed; use one of {', '.join(DUPLICATE_POLICIES)}")
    return policy


#: A field path tsstore can use in filters and index definitions without quoting:
#: dot-separated segments of letters, digits and underscores, not starting with a digit.
_SEGMENT = r"[A-Za-z_][A-Za-z0-9_]*"
FIELD_PATH_RE = re.compile(rf"{_SEGMENT}(\.{_SEGMENT})*")
#: Collection ids: no slash, not "." or "..", not the reserved ``__.*__`` form.
_COLLECTION_RE = re.compile(r"[^/]{1,1500}")

SEED_SHARDS: tuple[str, ...] = ("x", "y", "z")

#: Column types a spec may declare for DataFrame output (see the README's dtype table).
COLUMN_TYPES: tuple[str, ...] = ("string", "Int64", "Float64", "boolean", "datetime", "object")
#: Column types a measure (a field aggregates sum and average) may be declared with.
NUMERIC_TYPES: tuple[str, ...] = ("Int64", "Float64")


class Direction(str, Enum):
    """Time order of a query. ``DESC`` is newest first."""

    DESC = "desc"
    ASC = "asc"

    @classmethod
    def parse(cls, value: "Direction | str") -> "Direction":
        if isinstance(value, Direction):
            return value
        try:
            return cls(str(value).lower())
        except ValueError:
            raise SpecError(f"direction {value!r} is not allowed; use one of 'desc' (newest first), 'asc'") from None


def check_field_path(path: object, *, what: str) -> str:
    """Return ``path`` if it is a plain dotted field path, else raise :class:`SpecError`."""
    if not isinstance(path, str) or not FIELD_PATH_RE.fullmatch(path):
        raise SpecError(
            f"{what} {path!r} is not a valid field path; use dot-separated names of "
            "letters, digits and '_' that do not start with a digit (e.g. 'price.currency')"
        )
    if any(seg.startswith("__") and seg.endswith("__") for seg in path.split(".")):
        raise SpecError(f"{what} {path!r} uses a reserved name (__...__)")
    return path


@dataclass(frozen=True)
class QueryShape:
    """One kind of query the application runs.

    ``fields`` are filtered by equality or ``in`` (order does not matter; kept sorted);
    ``directions`` are the time orders the shape is queried in. The empty shape is the
    plain time-range query, which every spec serves.

    ``ranges`` are value fields the shape's queries also filter by range or ``!=``
    (``volume >= 10000``), on the server: each such query needs exactly these fields' range
    conditions, and its index holds them after the timestamp (kept sorted).

    ``series_rate`` declares that the shape's equality fields pin one series (a symbol, a
    device) whose ticks arrive at most this many per second: the shape is then indexed
    without the shard (``(symbol, timestamp)``), whose entries spread over the series' key
    ranges, and read with one query instead of one per shard chunk. One series may not pass
    Firestore's 500 writes/s on a growing indexed field; above that, leave it ``None`` (the
    sharded plan).
    """

    #: Fields filtered by equality or ``in`` (kept sorted).
    fields: tuple[str, ...]
    #: The time orders the shape is queried in (``"desc"``, ``"asc"``).
    directions: tuple[Direction, ...]
    #: Value fields filtered by range or ``!=`` on the server (kept sorted).
    ranges: tuple[str, ...]
    #: Ticks per second of the one series the equality fields pin (``None``: sharded reads).
    series_rate: float | None

    def __init__(
        self,
        fields: str | Iterable[str] = (),
        directions: Direction | str | Iterable[Direction | str] = (Direction.DESC,),
        *,
        ranges: str | Iterable[str] = (),
        series_rate: float | None = None,
    ) -> None:
        equal = _checked_shape_fields(fields)
        ranged = _checked_shape_ranges(ranges, equal)
        object.__setattr__(self, "fields", tuple(sorted(equal)))
        object.__setattr__(self, "directions", _checked_directions(directions))
        object.__setattr__(self, "ranges", tuple(sorted(ranged)))
        object.__setattr__(self, "series_rate", None if series_rate is None else check_series_rate(series_rate, equal))

    @property
    def series(self) -> bool:
        """Whether the shape is read as one series: indexed without the shard, one query."""
        return self.series_rate is not None

    @property
    def key(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """What a query must filter to be this shape: its equality fields and range fields."""
        return self.fields, self.ranges

    def describe(self) -> str:
        names = ", ".join(self.fields) or "(time range only)"
        ranged = f" ranges [{', '.join(self.ranges)}]" if self.ranges else ""
        series = f" series <= {self.series_rate:g} writes/s" if self.series_rate is not None else ""
        return f"[{names}]{ranged} {'/'.join(d.value for d in self.directions)}{series}"


def _checked_shape_fields(fields: str | Iterable[str]) -> tuple[str, ...]:
    """A shape's equality fields: valid paths, none twice."""
    paths = tuple(
        check_field_path(f, what="query shape field") for f in ((fields,) if isinstance(fields, str) else fields)
    )
    if len(set(paths)) != len(paths):
        raise SpecError(f"query shape fields {list(paths)!r} repeat a field")
    return paths


def _checked_directions(directions: Direction | str | Iterable[Direction | str]) -> tuple[Direction, ...]:
    """A shape's time orders: at least one, each once."""
    given = (directions,) if isinstance(directions, (str, Direction)) else directions
    parsed = tuple(dict.fromkeys(Direction.parse(d) for d in given))
    if not parsed:
        raise SpecError("a query shape needs at least one direction ('desc', 'asc')")
    return parsed


def _checked_shape_ranges(ranges: str | Iterable[str], fields: tuple[str, ...]) -> tuple[str, ...]:
    """A shape's range fields: valid paths, none twice nor an equality field, within
    Firestore's range-field budget beside the timestamp."""
    paths = tuple(
        check_field_path(f, what="query shape range field") for f in ((ranges,) if isinstance(ranges, str) else ranges)
    )
    if len(set(paths)) != len(paths) or set(paths) & set(fields):
        raise SpecError(
            f"query shape range fields {list(paths)!r} repeat a field or one of its equality fields {list(fields)!r}"
        )
    if len(paths) > MAX_INEQUALITY_FIELDS - 1:  # the timestamp is one of Firestore's 10
        raise SpecError(
            f"query shape range fields {list(paths)!r}: Firestore allows {MAX_INEQUALITY_FIELDS} range fields "
            f"per query and the timestamp is one, so at most {MAX_INEQUALITY_FIELDS - 1}"
        )
    return paths


def check_series_rate(rate: object, fields: tuple[str, ...]) -> float:
    """``rate`` as a series shape's writes/s per series, or a :class:`SpecError` that says why
    not (and, above Firestore's ceiling for one growing index range, that the shape needs
    the sharded plan)."""
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not (rate > 0 and math.isfinite(rate)):
        raise SpecError(f"series_rate {rate!r} is not allowed; give one series' writes/s, a positive number")
    if not fields:
        raise SpecError(
            "series_rate needs equality fields that pin one series (e.g. ['symbol']); the plain time range "
            "is one growing index range and must stay sharded"
        )
    if rate > SEQUENTIAL_WRITES_PER_SECOND:
        raise SpecError(
            f"series_rate {rate:g} for [{', '.join(fields)}]: one series above {SEQUENTIAL_WRITES_PER_SECOND} "
            f"writes/s makes its own (field, timestamp) index range a hotspot; leave series_rate out so the "
            "shape is sharded (one query per shard chunk)"
        )
    return float(rate)


@dataclass(frozen=True)
class RetiredShard:
    """A shard value no longer written to but still read: ticks written under it stay in
    view until they are moved (``tsstore reshard``) or expire. ``until``, when known, is a
    time such that the value holds no tick at or after it (typically when the writers
    stopped using it); a read whose range starts at or after ``until`` skips the value."""

    #: The shard value.
    value: str
    #: A time at and after which the value holds no tick (``None``: not known).
    until: dt.datetime | None = None


def _coerce_retired(raw: object) -> RetiredShard:
    if isinstance(raw, RetiredShard):
        value, until = raw.value, raw.until
    elif isinstance(raw, str):
        value, until = raw, None
    elif isinstance(raw, Mapping):
        extra = sorted(set(raw) - {"value", "until"})
        if extra or "value" not in raw:
            raise SpecError(f"retired shard {dict(raw)!r} needs 'value' and may have 'until'; unknown: {extra}")
        value, until = raw["value"], raw.get("until")
    else:
        raise SpecError(f"retired shard {raw!r} is not a shard value, a RetiredShard or {{value, until}}")
    if not isinstance(value, str) or not value:
        raise SpecError(f"retired shard value {value!r} is not allowed; shard values are non-empty strings")
    if until is not None:
        try:
            until = to_utc(until, name=f"until of retired shard {value!r}")
        except ValueError as exc:
            raise SpecError(str(exc)) from None
    return RetiredShard(value, until)


def _coerce_shape(value: "QueryShape | str | Iterable[str]") -> QueryShape:
    if isinstance(value, QueryShape):
        return value
    if isinstance(value, str):
        return QueryShape((value,))
    return QueryShape(tuple(value))


@dataclass(frozen=True)
class SeriesSpec:
    """How one time-series collection is laid out and queried.

    Parameters (all but ``collection`` keyword-only):

    - ``collection``: the Firestore collection the ticks are stored in
    - ``shards``: the active shard values, which new ticks are written to (``shard_field``);
      each lifts the collection's write ceiling by another 500 writes/s. Distinct, non-empty
      strings.
    - ``retired``: shard values that earlier layouts wrote to and that are still read, so a
      layout change never hides a tick: names, :class:`RetiredShard` values or ``{value,
      until}`` mappings. Every read verb covers active and retired values
      (:attr:`read_shards`); a read whose range starts at or after a retired value's
      ``until`` skips it.
    - ``timestamp_field``: the field holding each tick's time (a Firestore timestamp)
    - ``shard_field``: the field holding each tick's shard value
    - ``shapes``: the query shapes the application uses besides the plain time range
      (which is always served). A shape may be given as a ``QueryShape``, a field name,
      or a sequence of field names (then queried newest first only).
    - ``key_fields``: fields that, with the timestamp, name one series' tick (e.g. ``symbol``).
      With key fields, a tick's document id is a hash of key and time, or of key, time and
      content when another tick holds that one, so writing a tick again stores nothing
      twice and two ticks sharing key and time are both kept. Without, ids are random. See
      :mod:`tsstore.write.identity`.
    - ``on_duplicate``: what a tick does when another tick with the same key and time but
      other content is stored: ``"keep"`` both (default), ``"replace"`` it, or refuse it
      (``"error"``). Identical content is always the same tick, never stored twice.
    - ``columns``: declared DataFrame columns as ``{dotted field path: type}`` with types
      from :data:`COLUMN_TYPES`. Declared columns are always present, in this order and
      with this dtype, even in an empty result; other fields follow, sorted by name.
    - ``expire_after``: a ``timedelta``; the writer then sets ``expire_field`` to timestamp +
      expire_after, and the index file marks that field as the collection's TTL field
      (Firestore deletes expired documents itself, typically within a day or so).
    - ``expire_field``: the field the expiry time is written to (the TTL field)
    - ``measures``: numeric fields :meth:`~tsstore.store.TimeSeriesStore.aggregate` may sum
      and average. Firestore computes ``sum()`` and ``avg()`` from index entries, so each
      measure adds one composite index per query shape (shard, the shape's fields,
      timestamp, measure), in the shape's aggregate direction (:func:`aggregate_direction`).
    - ``count_by``: fields whose values name a series (e.g. ``symbol``); the writer then keeps
      one sharded counter per series, incremented once per written batch, with
      ``counter_shards`` shards each.
    - ``counter_shards``: the shard documents of each series counter (each takes about one
      write a second)
    - ``late``: what a tick landing in a bucket a roll-up has stored does
      (:class:`~tsstore.late.LatePolicy`: by default it is folded in however late; a declared
      window refuses ticks further behind a roll-up's data than that).
    - ``cold``: where and when closed partitions are sealed into Parquet
      (:class:`~tsstore.cold_tier.ColdTier`, or its fields as a mapping); ``None``: no cold tier
    - ``access``: what web and mobile clients may do with the collection
      (:class:`~tsstore.access.ClientAccess`, its ``read`` value, or its fields as a
      mapping); default signed-in reads, no client writes
    - ``location``: the database's location (``nam5``, ``us-central1``, ...), which prices
      every read, bound and plan of the collection (:func:`~tsstore.prices.prices_for`); one
      the price table does not hold is refused. ``None``: priced at ``nam5``, and said so
    """

    collection: str
    shards: tuple[str, ...] = SEED_SHARDS
    retired: tuple[RetiredShard, ...] = ()
    timestamp_field: str = "timestamp"
    shard_field: str = "shard"
    shapes: tuple[QueryShape, ...] = ()
    key_fields: tuple[str, ...] = ()
    on_duplicate: DuplicatePolicy = "keep"
    columns: tuple[tuple[str, str], ...] = ()
    expire_after: dt.timedelta | None = None
    expire_field: str = "expireAt"
    measures: tuple[str, ...] = ()
    count_by: tuple[str, ...] = ()
    counter_shards: int = 10
    access: ClientAccess = DEFAULT_ACCESS
    late: LatePolicy = DEFAULT_LATE
    cold: ColdTier | None = None
    location: str | None = None
    #: The roll-up whose bars the collection holds (a :class:`~tsstore.analytics.rollup.Rollup`,
    #: which sets it on its own spec), so that a store on its bars can read what they are made
    #: of; ``None`` for ticks. Not part of the declaration: equal specs may differ in it.
    rollup: Any = field(default=None, init=False, compare=False, repr=False)
    #: The file the declaration was read from (``None``: written in Python), so advice names
    #: what to edit there; set by :func:`spec_from_mapping`, never compared.
    declared_in: str | None = field(default=None, init=False, compare=False, repr=False)

    def __init__(
        self,
        collection: str,
        *,
        shards: Iterable[str] = SEED_SHARDS,
        retired: "Iterable[str | RetiredShard | Mapping[str, object]] | Mapping[str, object]" = (),
        timestamp_field: str = "timestamp",
        shard_field: str = "shard",
        shapes: Iterable["QueryShape | str | Iterable[str]"] = (),
        key_fields: Iterable[str] = (),
        on_duplicate: DuplicatePolicy = "keep",
        columns: "Mapping[str, str] | Iterable[tuple[str, str]]" = (),
        expire_after: dt.timedelta | None = None,
        expire_field: str = "expireAt",
        measures: Iterable[str] = (),
        count_by: Iterable[str] = (),
        counter_shards: int = 10,
        access: "ClientAccess | str | Mapping[str, object]" = DEFAULT_ACCESS,
        late: "LatePolicy | Mapping[str, object] | None" = None,
        cold: "ColdTier | Mapping[str, object] | None" = None,
        location: str | None = None,
    ) -> None:
        active = _checked_shards(shards)
        reserved = _checked_reserved(timestamp_field, shard_field)
        column_items = _checked_columns(columns, timestamp_field)
        checked = {
            "collection": _checked_collection(collection),
            "shards": active,
            "retired": _checked_retired(retired, active),
            "timestamp_field": timestamp_field,
            "shard_field": shard_field,
            "shapes": _checked_shapes(shapes, reserved),
            "key_fields": _checked_fields(key_fields, reserved, what="key field", name="key_fields"),
            "on_duplicate": _checked_policy(on_duplicate),
            "columns": column_items,
            "expire_after": _checked_expiry(expire_after),
            "expire_field": _checked_expire_field(expire_field, reserved),
            "measures": _checked_measures(measures, reserved, dict(column_items)),
            "count_by": _checked_fields(count_by, reserved, what="count_by field", name="count_by"),
            "counter_shards": _checked_counter_shards(counter_shards),
            "access": access_from(access),
            "late": late_from(late),
            "cold": cold_from(cold),
            "location": check_location(location),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    @classmethod
    def for_write_rate(cls, collection: str, *, writes_per_second: float, **options: object) -> "SeriesSpec":
        """A spec with ⌈writes_per_second / 500⌉ shards named ``s0``, ``s1``, …; the other
        options as :class:`SeriesSpec` takes them.

        - ``collection``: the Firestore collection the ticks are stored in
        - ``writes_per_second``: the sustained write rate to plan for"""
        return cls(collection, shards=shards_for(writes_per_second), **options)  # type: ignore[arg-type]

    @property
    def read_shards(self) -> tuple[str, ...]:
        """Every shard value a read covers: the active ones, then the retired ones."""
        return self.shards + tuple(r.value for r in self.retired)

    def shards_from(self, start: dt.datetime | None) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The shard values a read of ticks at or after ``start`` covers, and the retired ones
        it skips because they hold nothing from their ``until`` on."""
        if start is None:
            return self.read_shards, ()
        skipped = tuple(r.value for r in self.retired if r.until is not None and r.until <= start)
        return tuple(v for v in self.read_shards if v not in skipped), skipped

    @property
    def max_write_rate(self) -> int:
        """Sustained writes/s the shards allow: 500 per shard value."""
        return SEQUENTIAL_WRITES_PER_SECOND * len(self.shards)

    @property
    def filter_fields(self) -> frozenset[str]:
        """Every field some declared shape filters on (by equality, ``in`` or range)."""
        return frozenset(f for shape in self.shapes for f in (*shape.fields, *shape.ranges))

    @property
    def declared_fields(self) -> frozenset[str]:
        """Every field the declaration names: its columns, key fields, timestamp, measures,
        ``count_by`` fields and shape fields. When ``columns`` is declared, a verb refuses a
        field outside this set (:meth:`check_declared`)."""
        named = (*dict(self.columns), *self.key_fields, self.timestamp_field, *self.measures, *self.count_by)
        return frozenset(named) | self.filter_fields

    def check_declared(self, fields: Iterable[tuple[str, str | None]], *, verb: str) -> None:
        """Refuse, before any read, a field that a declaration with ``columns`` does not name:
        a misspelt field reads as missing in every tick, which would answer nothing, or one
        series keyed by a missing value.

        - ``fields``: ``(what, name)`` pairs (``("price", "price.micros")``); ``None`` names
          are skipped
        - ``verb``: the verb's name, as the refusal shows it"""
        if not self.columns:
            return
        known = self.declared_fields
        for what, name in fields:
            if name is not None and name not in known:
                raise QueryError(
                    f"{verb}: {what} {name!r} is not a field of {self.collection!r} "
                    f"(declared: {', '.join(sorted(known))})"
                )

    def check_columns(self, names: Iterable[str], *, option: str = "columns") -> None:
        """Refuse, before any read, a column a declaration with ``columns`` does not name (a
        misspelt column would read as missing in every tick): a declared field, the shard
        field, the expiry field (with ``expire_after``), a map holding declared fields, or a
        field inside a declared one.

        - ``names``: the column names asked for
        - ``option``: the option as the refusal names it (``"--columns"`` on the command line)"""
        if not self.columns:
            return
        declared = self.declared_fields
        known = declared | {self.shard_field} | ({self.expire_field} if self.expire_after is not None else set())
        unknown = [
            name for name in names
            if name not in known and not any(k.startswith(f"{name}.") or name.startswith(f"{k}.") for k in known)
        ]  # fmt: skip
        if unknown:
            raise QueryError(
                f"{option} {', '.join(unknown)}: not declared in {self.collection!r} "
                f"(declared: {', '.join(sorted(declared))})"
            )

    def shape_advice(self, fields: Iterable[str], ranges: Iterable[str] = ()) -> str:
        """How to declare the query shape of ``fields`` (and range fields ``ranges``) where this
        declaration was written: a :class:`QueryShape` in Python, an entry of the series'
        ``shapes`` in the TOML or JSON file it came from (:attr:`declared_in`).

        - ``fields``: the shape's equality fields
        - ``ranges``: the shape's range fields"""
        equal, ranged = sorted(fields), sorted(ranges)
        if self.declared_in is None:
            return f"QueryShape({equal!r}" + (f", ranges={ranged!r}" if ranged else "") + ") in the SeriesSpec"
        if self.declared_in.endswith(".json"):
            entry = json.dumps({"fields": equal, **({"ranges": ranged} if ranged else {})})
            return f'{entry} in the "shapes" list of series {self.collection!r} in {self.declared_in}'
        entry = "{ fields = " + json.dumps(equal) + (f", ranges = {json.dumps(ranged)}" if ranged else "") + " }"
        return f"{entry} in the shapes = [...] line of series {self.collection!r} in {self.declared_in}"

    @property
    def series_shapes(self) -> tuple[QueryShape, ...]:
        """The shapes read as one series (one query, indexed without the shard)."""
        return tuple(shape for shape in self.shapes if shape.series)

    @property
    def range_directions(self) -> tuple[Direction, ...]:
        """Directions the plain time-range query is served in: both, always."""
        return (Direction.DESC, Direction.ASC)

    def all_shapes(self) -> tuple[QueryShape, ...]:
        """The declared shapes plus the plain time-range shape, in a stable order."""
        return (QueryShape((), self.range_directions),) + self.shapes


# ------------------------------------------------------- the checking steps of SeriesSpec


def _checked_collection(collection: object) -> str:
    """A valid collection id: non-empty, no ``/``, not ``.``, ``..`` or ``__reserved__``."""
    if (
        not isinstance(collection, str)
        or not _COLLECTION_RE.fullmatch(collection)
        or (collection in (".", "..") or (collection.startswith("__") and collection.endswith("__")))
    ):
        raise SpecError(
            f"collection {collection!r} is not a valid collection id; use a non-empty "
            "name without '/', not '.', '..' or __reserved__"
        )
    return collection


def _checked_shards(shards: Iterable[str]) -> tuple[str, ...]:
    """The active shard values: a non-empty list of distinct non-empty strings."""
    if isinstance(shards, str):
        raise SpecError(f"shards {shards!r} must be a list of strings, not one string")
    if isinstance(shards, int):
        raise SpecError(
            f"shards={shards!r} is a number; give the shard values, e.g. shards=shards_for({shards * 500}) for "
            f"{shards} values ({shards * 500} writes/s), or ['x', 'y', 'z']"
        )
    values = tuple(shards)
    if not values:
        raise SpecError("shards is empty; give at least one shard value, e.g. ['x', 'y', 'z']")
    for value in values:
        if not isinstance(value, str) or not value:
            raise SpecError(f"shard value {value!r} is not allowed; shard values are non-empty strings")
    dupes = sorted({s for s in values if values.count(s) > 1})
    if dupes:
        raise SpecError(f"shard values {dupes!r} appear more than once; shard values must be distinct")
    return values


def _checked_retired(
    retired: "Iterable[str | RetiredShard | Mapping[str, object]] | Mapping[str, object]", active: tuple[str, ...]
) -> tuple[RetiredShard, ...]:
    """The retired shard values: distinct, none of them active."""
    if isinstance(retired, str):
        raise SpecError(f"retired {retired!r} must be a list of shard values, not one string")
    if isinstance(retired, Mapping):  # {value: until or None}
        retired = [{"value": v, "until": u} for v, u in retired.items()]
    values = tuple(_coerce_retired(r) for r in retired)
    names = [r.value for r in values]
    both = sorted(set(names) & set(active))
    if both:
        raise SpecError(f"shard values {both!r} are both active and retired; a value is one or the other")
    dupes = sorted({v for v in names if names.count(v) > 1})
    if dupes:
        raise SpecError(f"retired shard values {dupes!r} appear more than once")
    return values


def _checked_reserved(timestamp_field: str, shard_field: str) -> frozenset[str]:
    """The two fields tsstore handles itself (valid paths, not the same one)."""
    check_field_path(timestamp_field, what="timestamp_field")
    check_field_path(shard_field, what="shard_field")
    if timestamp_field == shard_field:
        raise SpecError(f"timestamp_field and shard_field are both {shard_field!r}")
    return frozenset((timestamp_field, shard_field))


def _checked_shapes(
    shapes: Iterable["QueryShape | str | Iterable[str]"], reserved: frozenset[str]
) -> tuple[QueryShape, ...]:
    """The declared query shapes, merged; none filters on the shard or timestamp field, and
    the plain time range (always served) is left out."""
    kept: list[QueryShape] = []
    for raw in (shapes,) if isinstance(shapes, (str, QueryShape)) else shapes:
        shape = _coerce_shape(raw)
        taken = reserved & {*shape.fields, *shape.ranges}
        if taken:
            raise SpecError(
                f"query shape {shape.describe()} filters on {sorted(taken)!r}; the shard and "
                "timestamp fields are handled by tsstore (use start/end for time)"
            )
        if shape.fields or shape.ranges:
            kept.append(shape)
    return _merge_shapes(kept)


def _checked_fields(fields: Iterable[str], reserved: frozenset[str], *, what: str, name: str) -> tuple[str, ...]:
    """``name``'s field paths: valid, distinct, neither the timestamp nor the shard field."""
    paths = tuple(check_field_path(f, what=what) for f in fields)
    if reserved & set(paths) or len(set(paths)) != len(paths):
        raise SpecError(f"{name} {list(paths)!r} must be distinct fields other than the timestamp and shard")
    return paths


def _checked_policy(on_duplicate: object) -> DuplicatePolicy:
    try:
        return check_policy(on_duplicate)
    except ValueError as exc:
        raise SpecError(str(exc)) from None


def _checked_columns(
    columns: "Mapping[str, str] | Iterable[tuple[str, str]]", timestamp_field: str
) -> tuple[tuple[str, str], ...]:
    """The declared columns as ``(path, type)``, types from :data:`COLUMN_TYPES`; the
    timestamp is the frame's index, never a column."""
    items = tuple(columns.items() if isinstance(columns, Mapping) else columns)
    for path, kind in items:
        check_field_path(path, what="column")
        if path == timestamp_field:
            raise SpecError(f"column {path!r} is the timestamp field; it becomes the frame's index")
        if kind not in COLUMN_TYPES:
            raise SpecError(f"column {path!r} has type {kind!r}; allowed: {', '.join(COLUMN_TYPES)}")
    return tuple((path, kind) for path, kind in items)


def _checked_expiry(expire_after: object) -> dt.timedelta | None:
    if expire_after is not None and (not isinstance(expire_after, dt.timedelta) or expire_after <= dt.timedelta(0)):
        raise SpecError(f"expire_after {expire_after!r} is not allowed; give a positive datetime.timedelta")
    return expire_after


def _checked_expire_field(expire_field: str, reserved: frozenset[str]) -> str:
    check_field_path(expire_field, what="expire_field")
    if expire_field in reserved:
        raise SpecError(f"expire_field {expire_field!r} is already the timestamp or shard field")
    return expire_field


def _checked_measures(
    measures: str | Iterable[str], reserved: frozenset[str], kinds: Mapping[str, str]
) -> tuple[str, ...]:
    """The measures: distinct fields, neither timestamp nor shard, numeric where declared."""
    measured = _checked_fields((measures,) if isinstance(measures, str) else measures, reserved,
                               what="measure", name="measures")  # fmt: skip
    for name in measured:
        if name in kinds and kinds[name] not in NUMERIC_TYPES:
            raise SpecError(f"measure {name!r} is declared {kinds[name]}; a measure is Int64 or Float64")
    return measured


def _checked_counter_shards(counter_shards: object) -> int:
    if isinstance(counter_shards, bool) or not isinstance(counter_shards, int) or counter_shards < 1:
        raise SpecError(f"counter_shards {counter_shards!r} is not allowed; give a positive integer")
    return counter_shards


def aggregate_direction(shape: QueryShape) -> Direction:
    """The time order aggregates of ``shape`` are read in, and their indexes declared in:
    oldest first where the shape is served so, else newest first."""
    return Direction.ASC if Direction.ASC in shape.directions else Direction.DESC


def _merge_shapes(shapes: Iterable[QueryShape]) -> tuple[QueryShape, ...]:
    """Combine shapes with the same fields and ranges (their directions united), in
    first-seen order; one such shape cannot be both a series shape and a sharded one."""
    merged: dict[tuple[tuple[str, ...], tuple[str, ...]], tuple[list[Direction], float | None]] = {}
    for shape in shapes:
        dirs, rate = merged.setdefault(shape.key, ([], shape.series_rate))
        if rate != shape.series_rate:
            raise SpecError(
                f"query shape {shape.describe()} is declared twice with series_rate {rate!r} and "
                f"{shape.series_rate!r}; a shape is read one way: declare it once"
            )
        dirs.extend(d for d in shape.directions if d not in dirs)
    return tuple(
        QueryShape(fields, tuple(dirs), ranges=ranges, series_rate=rate)
        for (fields, ranges), (dirs, rate) in merged.items()
    )


def shards_for(writes_per_second: float) -> tuple[str, ...]:
    """Shard values for a target sustained write rate: ⌈rate / 500⌉ of them.

    Names are ``s0``…``s{n-1}``, not padded, so a plan for more shards keeps every name of a
    plan for fewer: growing a collection from 10 to 20 shards adds ``s10``…``s19``.

    - ``writes_per_second``: the sustained write rate, a positive finite number
    """
    if (
        not isinstance(writes_per_second, (int, float))
        or isinstance(writes_per_second, bool)
        or not (writes_per_second > 0 and math.isfinite(writes_per_second))
    ):
        raise SpecError(f"writes_per_second {writes_per_second!r} is not allowed; give a positive finite number")
    n = math.ceil(writes_per_second / SEQUENTIAL_WRITES_PER_SECOND)
    return tuple(f"s{i}" for i in range(n))


_SPEC_KEYS = (
    "collection",
    "shards",
    "writes_per_second",
    "retired",
    "timestamp_field",
    "shard_field",
    "shapes",
    "key_fields",
    "on_duplicate",
    "columns",
    "expire_after",
    "expire_field",
    "measures",
    "count_by",
    "counter_shards",
    "access",
    "late",
    "cold",
    "location",
)


_SHAPE_KEYS = ("fields", "directions", "ranges", "series_rate")


def spec_from_mapping(data: Mapping[str, object], *, source: str | None = None) -> SeriesSpec:
    """A spec from plain data (a TOML or JSON table), for declarations kept in files.

    Keys are the ``SeriesSpec`` options, plus ``writes_per_second`` instead of ``shards``.
    A shape is a field name, a list of field names, or ``{fields = [...], directions = [...],
    ranges = [...], series_rate = N}`` (see :class:`QueryShape`).

    - ``source``: the file the table was read from (the spec's :attr:`~SeriesSpec.declared_in`)
    """
    if isinstance(data, Mapping) and isinstance(data.get("cold"), Mapping):  # a relative path is the file's
        data = {**data, "cold": cold_from(data["cold"], source=source)}  # type: ignore[arg-type]
    spec = _spec_of(data)
    object.__setattr__(spec, "declared_in", source)
    return spec


def _spec_of(data: Mapping[str, object]) -> SeriesSpec:
    if not isinstance(data, Mapping):
        raise SpecError(f"a series declaration must be a table, got {type(data).__name__}")
    refuse_unknown_keys(data, _SPEC_KEYS, where="series declaration")
    if "collection" not in data:
        raise SpecError("a series declaration needs 'collection'")
    options = dict(data)
    collection = options.pop("collection")
    if "expire_after" in options:
        try:
            options["expire_after"] = to_duration(options["expire_after"], name="expire_after")
        except ValueError as exc:
            raise SpecError(str(exc)) from None
    shapes = []
    for raw in options.pop("shapes", []):  # type: ignore[attr-defined]
        if isinstance(raw, Mapping):
            refuse_unknown_keys(raw, _SHAPE_KEYS, where=f"shape {dict(raw)!r}")
            shapes.append(
                QueryShape(
                    raw.get("fields", ()),
                    raw.get("directions", (Direction.DESC,)),
                    ranges=raw.get("ranges", ()),
                    series_rate=raw.get("series_rate"),
                )
            )
        else:
            shapes.append(raw)
    if "writes_per_second" in options:
        if "shards" in options:
            raise SpecError("give either 'shards' or 'writes_per_second', not both")
        rate = options.pop("writes_per_second")
        return SeriesSpec.for_write_rate(collection, writes_per_second=rate, shapes=shapes, **options)  # type: ignore[arg-type]
    return SeriesSpec(collection, shapes=shapes, **options)  # type: ignore[arg-type]
