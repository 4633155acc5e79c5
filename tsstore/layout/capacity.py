"""The capacity planner: from a sustained write rate (and a retention) to the shards, chunks,
reads per page, index entries, storage and monthly cost of one sharded collection.

Every figure comes from the code the store runs: shard names from
:func:`~tsstore.spec.shards_for`, chunks from the query planner, reads per page from the
read engine's cost model (:func:`~tsstore.read.explain.explain`), index entries from the
index generator. Sizes follow Firestore's published storage-size rules; prices come from the
one dated table of :mod:`tsstore.prices`, at the declared location (``spec.location``), which
a caller may replace.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from tsstore.errors import SpecError
from tsstore.indexes.build import declared_indexes, field_overrides
from tsstore.limits import SEQUENTIAL_WRITES_PER_SECOND
from tsstore.prices import PRICES as PRICES  # the default row, importable here as before
from tsstore.prices import Prices as Prices
from tsstore.prices import prices_for
from tsstore.read.explain import explain
from tsstore.read.plan import plan_query
from tsstore.spec import Direction, QueryShape, SeriesSpec, shards_for
from tsstore.ticks import get_path
from tsstore.times import interval_label, to_duration
from tsstore.write.identity import ID_BYTES

#: Bytes Firestore adds to every document, document name and index entry (storage-size rules).
DOCUMENT_EXTRA, NAME_EXTRA, ENTRY_EXTRA = 32, 16, 32
#: The database mode a plan is for. Datastore mode counts sizes by its own rules: an entity's
#: key (kind and key name, + 16 bytes) where Native mode has a document name and its parent's,
#: a built-in index entry holding the kind's name too, a composite one only the key and values;
#: its unit prices are Native mode's for the same location.
PlanMode = Literal["native", "datastore"]
#: Fixed-width value sizes (storage-size rules); strings are UTF-8 bytes + 1.
_FIXED = {bool: 1, int: 8, float: 8, dt.datetime: 8, type(None): 1}
_GIB = 2**30
_DAY = 86_400
_MONTH_DAYS = 30

#: What the planner's parameters mean (shown in the reference for :func:`capacity_for` and
#: :class:`Capacity`, which records them).
PARAMETER_HELP = {
    "writes_per_second": "the sustained write rate of the whole collection, ticks per second",
    "headroom": "the factor of spare capacity planned above the rate (1.25: 25 % spare); at least 1",
    "retention": "how long ticks are kept (a positive timedelta); ``None``: kept for good, storage priced "
    "after one month",
    "prices": "the unit prices costs are computed from (default: the table's at the spec's declared location, "
    ":func:`~tsstore.prices.prices_for`)",
    "pages_per_day": "pages read a day on the plain time range, newest first (0: reads not priced)",
    "page_limit": "the page size those reads use",
    "busiest_series": "the write rate of the busiest single series (a symbol), which a series shape "
    "(``series_rate``) must keep under 500 writes/s; ``None``: not known, shapes not judged",
    "spec": "the declaration compared with or planned for",
    "mode": "the database mode planned for: ``native`` or ``datastore`` (sizes by its rules; the same unit prices)",
}


#: What a tick looks like when the caller gives no sample: the seeds' instrument tick.
SAMPLE_TICK: Mapping[str, Any] = {
    "symbol": "ABCD",
    "price": {"currency": "USD", "micros": 34_790_000},
    "exchange": "EXCHG1",
    "instrumentType": "commonstock",
    "volume": 1_200,
    "timestamp": dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc),
}


@dataclass(frozen=True)
class ShapeCost:
    """One declared query shape in one direction: its chunks (1 for a series shape, read with
    one query) and the reads of one page."""

    shape: str
    direction: Direction
    chunks: int
    reads_per_page: Mapping[int, int]  # page limit -> billed reads (lean first round, snapshot, index entries)
    series: bool = False


@dataclass(frozen=True)
class Tier:
    """Bars kept beside the ticks (a roll-up), each ``interval`` per series, for ``retention``
    (``None``: for good, priced at ten years): at most one bar per series and interval, and
    never more bars than ticks."""

    interval: dt.timedelta
    retention: dt.timedelta | None
    bars_per_day: float
    bar_bytes: int  # the document and its index entries

    @property
    def stored_gib(self) -> float:
        days = self.retention / dt.timedelta(days=1) if self.retention is not None else _FOREVER_DAYS
        return self.bars_per_day * days * self.bar_bytes / _GIB

    def describe(self) -> str:
        kept = _days(self.retention) if self.retention is not None else "ten years (no retention)"
        return (
            f"{interval_label(self.interval)} bars: {self.bars_per_day:,.0f} a day, {self.bar_bytes} B each with their "
            f"indexes; at {kept}: {self.stored_gib:,.1f} GiB"
        )


#: How long bars kept "for good" are priced for.
_FOREVER_DAYS = 3650
#: A stored bar's fields besides the series key and the timestamp (see :mod:`tsstore.analytics.rollup`).
_SAMPLE_BAR: Mapping[str, Any] = {
    **{name: 34_790_000 for name in ("open", "high", "low", "close")},
    "count": 120,
    "volume": 144_000,
    "sum": 4_174_800_000,
    "m2": 1.5e9,
    "open_at": dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc),
    "close_at": dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc),
}


@dataclass(frozen=True)
class Capacity:
    """What a write rate needs and costs; :meth:`describe` prints it, :meth:`advice` compares
    it with a declaration."""

    writes_per_second: float
    headroom: float
    #: The shard values planned, named as :func:`~tsstore.spec.shards_for` names them.
    shards: tuple[str, ...]
    #: Each declared query shape's chunks and reads per page, in each of its directions.
    shapes: tuple[ShapeCost, ...]
    #: The stored size of one tick document (its name and fields), in bytes.
    tick_bytes: int
    #: The index entries one tick writes (the declared composite indexes and the single-field ones).
    index_entries_per_tick: int
    #: The stored size of those index entries, in bytes.
    index_bytes_per_tick: int
    retention: dt.timedelta | None
    prices: Prices
    pages_per_day: float
    page_limit: int
    #: The monthly cost in USD by item (writes, storage, deletes, reads, bar writes, ...).
    costs: Mapping[str, float] = field(default_factory=dict)
    busiest_series: float | None = None
    #: The database mode planned for.
    mode: PlanMode = "native"
    #: The roll-ups priced beside the ticks.
    tiers: tuple[Tier, ...] = ()

    @property
    def max_write_rate(self) -> int:
        return SEQUENTIAL_WRITES_PER_SECOND * len(self.shards)

    @property
    def stored_bytes_per_tick(self) -> int:
        return self.tick_bytes + self.index_bytes_per_tick

    @property
    def gib_per_day(self) -> float:
        return self.writes_per_second * _DAY * self.stored_bytes_per_tick / _GIB

    @property
    def stored_gib(self) -> float:
        """Storage held at steady state (at the retention), or after one month without one."""
        days = self.retention / dt.timedelta(days=1) if self.retention is not None else _MONTH_DAYS
        return self.gib_per_day * days

    @property
    def monthly_cost(self) -> float:
        return sum(self.costs.values())

    def reads_per_page(
        self, fields: Sequence[str] = (), direction: Direction | str = Direction.DESC
    ) -> Mapping[int, int]:
        """Reads per page by limit for one declared shape in one direction.

        - ``fields``: the field names the shape pins with equality, exactly
        - ``direction``: ``"desc"`` (newest first, the default) or ``"asc"``"""
        key, wanted = tuple(sorted(fields)), Direction.parse(direction)
        for cost in self.shapes:
            if cost.shape == _shape_name(key) and cost.direction is wanted:
                return cost.reads_per_page
        raise SpecError(f"no declared shape filters exactly {list(key)!r} in direction {wanted.value!r}")

    def advice(self, spec: SeriesSpec) -> list[str]:
        """What to change in ``spec`` for this plan (its active shards, and its series shapes
        against the busiest series' rate); empty when it fits."""
        return self._shard_advice(spec) + self._series_advice(spec)

    def _shard_advice(self, spec: SeriesSpec) -> list[str]:
        have, need = len(spec.shards), len(self.shards)
        if have >= need:
            spare = (have - need) * SEQUENTIAL_WRITES_PER_SECOND
            extra = f"; {have - need} more than needed ({spare} writes/s of spare capacity)" if have > need else ""
            return [] if not extra else [f"the declaration's {have} active shards suffice{extra}"]
        rate = math.ceil(self.writes_per_second * self.headroom)
        grow = f"grow from {have} to {need} active shards ({self.max_write_rate} writes/s)"
        if set(spec.shards) <= set(self.shards):  # planned names: the plan extends them
            added = [s for s in self.shards if s not in spec.read_shards]
            revived = [s for s in self.shards if s in spec.read_shards and s not in spec.shards]
            again = f" and make retired {_names(revived)} active again" if revived else ""
            how = f"set writes_per_second = {rate} in the spec file, or add {_names(added)}{again}"
        else:
            how = (
                f"add {need - have} more active values, or set writes_per_second = {rate} and declare "
                f"{_names(spec.shards)} as retired"
            )
        return [f"{grow}: {how}; existing values keep their names, so no tick drops out of view"]

    def _series_advice(self, spec: SeriesSpec) -> list[str]:
        """Series shapes against the busiest series' write rate (with head-room): one whose
        series outgrow one index range must be sharded; a sharded shape on the key fields whose
        series stay well under it could be read with one query."""
        if self.busiest_series is None:
            return []
        busiest = self.busiest_series * self.headroom
        lines = []
        for shape in spec.shapes:
            name = _shape_name(shape.fields, shape.ranges)
            if shape.series and busiest > SEQUENTIAL_WRITES_PER_SECOND:
                lines.append(
                    f"[{name}] is read as one series, but its busiest series writes {busiest:g}/s with head-room, "
                    f"above the {SEQUENTIAL_WRITES_PER_SECOND} writes/s one index range takes: the sharded plan is "
                    f"necessary, leave series_rate out ({self._reads(shape, sharded=True)} reads per page of "
                    f"{self.page_limit} instead of {self._reads(shape, sharded=False)})"
                )
            elif shape.series and shape.series_rate is not None and busiest > shape.series_rate:
                lines.append(f"[{name}] declares series_rate {shape.series_rate:g}; raise it to {math.ceil(busiest)}")
            elif (
                not shape.series
                and busiest <= SEQUENTIAL_WRITES_PER_SECOND
                and spec.key_fields
                and set(spec.key_fields) <= set(shape.fields)
            ):
                one, many = self._reads(shape, sharded=False), self._reads(shape, sharded=True)
                lines.append(
                    f"[{name}] pins one series, whose busiest writes {busiest:g}/s with head-room: declare "
                    f"series_rate = {math.ceil(busiest)} to read it with one query ({one} reads per page of "
                    f"{self.page_limit} instead of {many})"
                )
        return lines

    def _reads(self, shape: QueryShape, *, sharded: bool) -> int:
        """Billed reads of one newest-first page of ``page_limit`` of ``shape``, read as one
        series or sharded over this plan's shards."""
        rate = None if sharded else SEQUENTIAL_WRITES_PER_SECOND
        planned = SeriesSpec(
            "capacity",
            shards=self.shards,
            shapes=[QueryShape(shape.fields, ranges=shape.ranges, series_rate=rate)],
        )
        return _shape_cost(planned, planned.shapes[0], Direction.DESC, [self.page_limit], {}).reads_per_page[
            self.page_limit
        ]

    def describe(self, spec: SeriesSpec | None = None) -> str:
        lines = [
            f"write rate {self.writes_per_second:g}/s with head-room x{self.headroom:g}: "
            f"{len(self.shards)} shards ({_names(self.shards)}), up to {self.max_write_rate} writes/s",
        ]
        limits = sorted({limit for cost in self.shapes for limit in cost.reads_per_page})
        lines.append(
            f"{'query shape':<40} {'dir':<4} {'plan':<7} {'chunks':>6}  "
            + "  ".join(f"{'reads@' + str(n):>10}" for n in limits)
        )
        for cost in self.shapes:
            reads = "  ".join(f"{cost.reads_per_page[n]:>10}" for n in limits)
            plan = "series" if cost.series else "sharded"
            lines.append(f"{cost.shape:<40} {cost.direction.value:<4} {plan:<7} {cost.chunks:>6}  {reads}")
        stored = "entity" if self.mode == "datastore" else "document"
        lines.append(
            f"per tick: {self.tick_bytes} B {stored}, {self.index_entries_per_tick} index entries "
            f"({self.index_bytes_per_tick} B); {self.gib_per_day:.2f} GiB a day"
        )
        held = f"at a retention of {_days(self.retention)}" if self.retention else "after 30 days (no retention)"
        lines.append(f"storage {held}: {self.stored_gib:,.1f} GiB")
        lines += [tier.describe() for tier in self.tiers]
        lines.append(
            f"monthly cost in USD at {self.prices.describe()}: "
            + ", ".join(f"{k} {v:,.2f}" for k, v in self.costs.items())
            + f"; total {self.monthly_cost:,.2f}"
        )
        if self.mode == "datastore":
            lines.append(
                "Datastore mode: every property keeps its built-in ascending and descending index, the timestamp's "
                "too (a composite index needs it indexed), so until a real project shows that a sharded composite "
                "index lifts the 500 writes/s a monotonically increasing indexed property takes, plan for it per kind"
            )
        if spec is not None:
            lines += [f"compared with {spec.collection!r}: {a}" for a in self.advice(spec) or ["it fits"]]
        return "\n".join(lines)


def capacity_for(
    writes_per_second: float,
    *,
    retention: dt.timedelta | None = None,
    spec: SeriesSpec | None = None,
    headroom: float = 1.25,
    limits: Sequence[int] = (10, 100, 1000),
    pages_per_day: float = 0.0,
    page_limit: int = 100,
    tick: Mapping[str, Any] | None = None,
    prices: Prices | None = None,
    busiest_series: float | None = None,
    series: int | None = None,
    tiers: Sequence[tuple[object, dt.timedelta | None]] = (),
    mode: PlanMode = "native",
) -> Capacity:
    """Plan a collection for a sustained ``writes_per_second``: ⌈rate·headroom/500⌉ shards,
    named as :func:`~tsstore.spec.shards_for` names them. With ``busiest_series``,
    :meth:`Capacity.advice` says which shapes must be sharded and which could be read with
    one query. Costs are at ``prices``, by default the table's prices at ``spec``'s declared
    location in ``mode`` (:func:`~tsstore.prices.prices_for`; none declared: ``nam5``'s).

    - ``spec``: supplies the collection, query shapes and fields (its shards are ignored;
      compare with :meth:`Capacity.advice`); default a collection ``ticks`` with the plain
      time range only
    - ``limits``: the page sizes reads per page are shown for
    - ``tick``: a sample tick the sizes are computed from (default :data:`SAMPLE_TICK`)
    - ``tiers``: roll-ups kept beside the ticks, as ``(interval, retention)`` pairs
      (``("1min", timedelta(days=3650))``; retention ``None``: for good); typically ticks
      for days and minute bars for years
    - ``series``: the number of series (symbols) the tiers roll up; needed with ``tiers``
    - ``mode``: ``"datastore"`` sizes entities and index entries by Datastore mode's rules"""
    if mode not in ("native", "datastore"):
        raise SpecError(f"mode {mode!r} is not allowed; give native or datastore")
    _check_capacity_options(writes_per_second, headroom=headroom, retention=retention, busiest_series=busiest_series,
                            limits=limits)  # fmt: skip
    try:
        needed = shards_for(writes_per_second * headroom)
    except SpecError:
        raise SpecError(
            f"writes_per_second {writes_per_second!r} is not allowed; give a positive finite number"
        ) from None
    base = spec if spec is not None else SeriesSpec("ticks")
    if prices is None:
        prices = prices_for(spec.location if spec is not None else None, mode=mode)
    planned = dataclasses.replace(base, shards=needed, retired=())
    sample = dict(tick if tick is not None else SAMPLE_TICK)
    shapes = tuple(
        _shape_cost(planned, shape, direction, limits, sample)
        for shape in planned.all_shapes()
        for direction in shape.directions
    )
    doc_bytes, entries, entry_bytes = _sizes(planned, sample, mode=mode)
    plan = Capacity(
        writes_per_second=writes_per_second,
        headroom=float(headroom),
        shards=needed,
        shapes=shapes,
        tick_bytes=doc_bytes,
        index_entries_per_tick=entries,
        index_bytes_per_tick=entry_bytes,
        retention=retention,
        prices=prices,
        pages_per_day=pages_per_day,
        page_limit=page_limit,
        busiest_series=busiest_series,
        tiers=_tiers(planned, tiers, series=series, writes_per_second=writes_per_second, mode=mode),
        mode=mode,
    )
    page_reads = _shape_cost(planned, QueryShape(()), Direction.DESC, [page_limit], sample).reads_per_page[page_limit]
    return dataclasses.replace(plan, costs=_monthly_costs(plan, page_reads))


def _check_capacity_options(
    writes_per_second: float,
    *,
    headroom: float,
    retention: dt.timedelta | None,
    busiest_series: float | None,
    limits: Sequence[int],
) -> None:
    """Refuse an option of :func:`capacity_for` that plans nothing."""
    if isinstance(headroom, bool) or not isinstance(headroom, (int, float)) or not headroom >= 1:
        raise SpecError(f"headroom {headroom!r} is not allowed; give a number >= 1 (1.25 plans 25% spare)")
    if retention is not None and (not isinstance(retention, dt.timedelta) or retention <= dt.timedelta(0)):
        raise SpecError(f"retention {retention!r} is not allowed; give a positive timedelta")
    if busiest_series is not None and (
        isinstance(busiest_series, bool)
        or not isinstance(busiest_series, (int, float))
        or not (0 < busiest_series <= writes_per_second)
    ):
        raise SpecError(
            f"busiest_series {busiest_series!r} is not allowed; give one series' writes/s, positive and at most "
            f"the collection's {writes_per_second!r}"
        )
    bad = [n for n in limits if isinstance(n, bool) or not isinstance(n, int) or n < 1]
    if bad or not limits:
        raise SpecError(f"limits {list(limits)!r} are not allowed; give positive page sizes such as 10, 100, 1000")


def _monthly_costs(plan: Capacity, page_reads: int) -> dict[str, float]:
    """What a month of ``plan`` costs, by item: writes and storage; deletes at steady state
    when ticks expire (as many expire as arrive); ``pages_per_day`` reads of ``page_reads``
    each; the tiers' bar writes, storage and deletes."""
    prices, made = plan.prices, plan.tiers
    ticks_a_month = plan.writes_per_second * _DAY * _MONTH_DAYS
    costs = {
        "writes": ticks_a_month / 1e5 * prices.writes_per_100k,
        "storage": plan.stored_gib * prices.storage_gib_month,
    }
    if plan.retention is not None:
        costs["deletes"] = ticks_a_month / 1e5 * prices.deletes_per_100k
    if plan.pages_per_day:
        costs["reads"] = plan.pages_per_day * _MONTH_DAYS * page_reads / 1e5 * prices.reads_per_100k
    if made:
        costs["bar writes"] = sum(t.bars_per_day for t in made) * _MONTH_DAYS / 1e5 * prices.writes_per_100k
        costs["bar storage"] = sum(t.stored_gib for t in made) * prices.storage_gib_month
        expiring = sum(t.bars_per_day for t in made if t.retention is not None) * _MONTH_DAYS
        if expiring:
            costs["bar deletes"] = expiring / 1e5 * prices.deletes_per_100k
    return costs


def _tiers(
    spec: SeriesSpec,
    tiers: Sequence[tuple[object, dt.timedelta | None]],
    *,
    series: int | None,
    writes_per_second: float,
    mode: PlanMode,
) -> tuple[Tier, ...]:
    if not tiers:
        return ()
    if isinstance(series, bool) or not isinstance(series, int) or series < 1:
        raise SpecError(
            f"series {series!r} is not allowed; tiers need the number of series rolled up, a positive integer"
        )
    made = []
    key = spec.key_fields or spec.count_by
    shapes = [QueryShape(key, ("desc", "asc"))] if key else []
    bar_spec = SeriesSpec(
        f"{spec.collection}_bars", shards=("s0",), shapes=shapes, key_fields=key, measures=("count", "volume")
    )
    sample = {k: _value_at(SAMPLE_TICK, k) or "ABCD" for k in key} | {
        "timestamp": SAMPLE_TICK["timestamp"],
        **_SAMPLE_BAR,
    }
    doc, _, index = _sizes(bar_spec, sample, mode=mode)
    for interval, kept in tiers:
        try:
            step = to_duration(interval, name="tier interval")
        except ValueError as exc:
            raise SpecError(str(exc)) from None
        if step <= dt.timedelta(0):
            raise SpecError(f"tier interval {interval!r} is not positive")
        if kept is not None and (not isinstance(kept, dt.timedelta) or kept <= dt.timedelta(0)):
            raise SpecError(f"tier retention {kept!r} is not allowed; give a positive timedelta or None (for good)")
        per_day = min(series * _DAY / step.total_seconds(), writes_per_second * _DAY)
        made.append(Tier(step, kept, per_day, doc + index))
    return tuple(made)


def _shape_cost(
    spec: SeriesSpec, shape: QueryShape, direction: Direction, limits: Sequence[int], sample: Mapping[str, Any]
) -> ShapeCost:
    # one value per field: equality, and a lower bound on each range field
    where = [(f, "==", _value_at(sample, f)) for f in shape.fields]
    where += [(f, ">=", _value_at(sample, f)) for f in shape.ranges]
    reads, chunks = {}, 0
    for limit in limits:
        explained = explain(plan_query(spec, where=where, direction=direction, limit=limit))
        assert explained.lean_reads is not None
        reads[limit] = explained.lean_reads + explained.snapshot_reads + explained.index_reads
        chunks = len(explained.plan.chunks)  # the same for every limit
    return ShapeCost(_shape_name(shape.fields, shape.ranges), direction, chunks, reads, series=shape.series)


def _shape_name(fields: Sequence[str], ranges: Sequence[str] = ()) -> str:
    name = ", ".join(sorted(fields)) or "time range"
    return name + (f"; ranges {', '.join(ranges)}" if ranges else "")


def _sizes(spec: SeriesSpec, sample: Mapping[str, Any], *, mode: PlanMode = "native") -> tuple[int, int, int]:
    """Document bytes, index entries and index bytes of one tick as Firestore counts them in
    ``mode``."""
    data = dict(sample)
    data[spec.shard_field.split(".")[0]] = spec.shards[0] if "." not in spec.shard_field else {}
    if spec.expire_after is not None:
        data[spec.expire_field] = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    # a document name or an entity key: the collection (kind) and the base64 id of ID_BYTES bytes, + 16
    name = _text(spec.collection) + ID_BYTES * 4 // 3 + 1 + NAME_EXTRA
    # Native mode's entries hold the parent's name too (a root collection's: the database, empty); Datastore
    # mode's built-in ones hold the kind's name, its composite ones neither
    built_in, composite = (_text(spec.collection), 0) if mode == "datastore" else (NAME_EXTRA, NAME_EXTRA)
    leaves = dict(_leaves(data))
    doc = (
        name
        + sum(_text(path.rsplit(".", 1)[-1]) for path in _all_names(data))
        + sum(_value(v) for v in leaves.values())
        + DOCUMENT_EXTRA
    )
    # Datastore mode indexes every property tsstore writes (a long text aside): no exemptions deployed
    exempt = {o["fieldPath"] for o in field_overrides(spec)} if mode == "native" else set()
    single = [path for path in leaves if path not in exempt]
    entries = 2 * len(single)  # ascending and descending, automatically
    size = sum(2 * (name + built_in + _text(path) + _value(leaves[path]) + ENTRY_EXTRA) for path in single)
    for index in declared_indexes(spec):
        entries += 1
        size += name + composite + sum(_value(leaves.get(f.field_path)) for f in index.fields) + ENTRY_EXTRA
    return doc, entries, size


def _leaves(data: Mapping[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        if isinstance(value, Mapping):
            out += _leaves(value, f"{prefix}{key}.")
        else:
            out.append((f"{prefix}{key}", value))
    return out


def _all_names(data: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in data.items():
        out.append(f"{prefix}{key}")
        if isinstance(value, Mapping):
            out += _all_names(value, f"{prefix}{key}.")
    return out


def _value(value: Any) -> int:
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, (list, tuple)):
        return sum(_value(v) for v in value)
    for kind, size in _FIXED.items():
        if isinstance(value, kind):
            return size
    return 8


def _text(value: str) -> int:
    return len(value.encode()) + 1


def _value_at(sample: Mapping[str, Any], path: str) -> Any:
    """The sample's value at a dotted path, or a placeholder when it has none."""
    value = get_path(sample, path.split("."))
    return "x" if value is None else value


def _names(shards: Sequence[str]) -> str:
    return ", ".join(shards) if len(shards) <= 4 else f"{shards[0]}, {shards[1]} … {shards[-1]}"


def _days(delta: dt.timedelta) -> str:
    return f"{delta / dt.timedelta(days=1):g} days"
