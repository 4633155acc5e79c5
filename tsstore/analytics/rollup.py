"""Stored roll-ups: a series' bars kept in a collection of their own, declared next to it.

A :class:`Rollup` names its source series, the bar interval, the fields naming a series
(``by``), the price and volume fields, and derives the roll-up collection's own
:class:`~tsstore.spec.SeriesSpec`: the ``by`` fields are its key fields, the bar start its
timestamp, ``open``/``high``/``low``/``close``/``count``/``volume`` its columns, ``count`` and
``volume`` its measures, and its shards are sized to its own write rate (bars, not ticks:
one shard unless ``writes_per_second`` says more). Index generation takes that spec like any
other, and reading a roll-up is the ordinary verbs on it (``tsstore query --collection
instruments_1min``).

A bar's document id is the identity rule's slot id of (series key, bar start) and its spec
replaces on a duplicate, so writing a bar again stores nothing twice, and a bar recomputed
after late ticks replaces the stored one. :meth:`TimeSeriesStore.rollup
<tsstore.store.TimeSeriesStore.rollup>` computes the bars of closed intervals and keeps a
watermark (the end of the last interval done) in ``tsstore_rollups/<collection>``.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tsstore.access import ClientAccess, access_from
from tsstore.analytics.bars import STORED_MOMENTS, Bar, bar_start
from tsstore.analytics.buckets import to_interval
from tsstore.cold.tier import horizon_name
from tsstore.errors import ConfigError, QueryError, SpecError, StateError
from tsstore.late import BAR_SHARDS, WATERMARKS
from tsstore.spec import NUMERIC_TYPES, QueryShape, SeriesSpec, check_field_path, shards_for
from tsstore.times import EARLIEST, DurationLike, bucket_ceil, interval_label, to_duration, utc_text

BAR_FIELDS = ("open", "high", "low", "close", "count", "volume")
_MONTHS = re.compile(r"\s*\d*\s*(M|MS|[Mm]onths?)\s*")  # a calendar month ("1m" is a minute)

#: What a roll-up's parameters mean (shown in the reference for :class:`Rollup` and its methods).
PARAMETER_HELP = {
    "source": "the tick series rolled up (a :class:`~tsstore.spec.SeriesSpec`), or a finer roll-up whose bars "
    "are combined",
    "interval": 'the bar length (``"1min"``, ``"1h"``, ``"1D"`` or a timedelta); for a roll-up of a roll-up '
    "a multiple of the finer one's",
    "by": "the field or fields whose values name a series (one bar per series and interval); a roll-up of a roll-up "
    "keeps its source's",
    "price": "the numeric field the OHLC, sum and m2 are taken from (a dotted path)",
    "volume": "the numeric field summed into each bar's volume; ``None``: bars without volume",
    "collection": "where the bars are stored; default ``<source>_<interval>``",
    "writes_per_second": "the bars' own write rate, which sets their shards as for ticks",
    "access": "what web and mobile clients may read of the bars (a :class:`~tsstore.access.ClientAccess`, its "
    "``read`` value, or its fields as a mapping); default the source's reads; clients never write a roll-up",
    "stored": "the roll-up's watermark document as read from ``tsstore_rollups/<name>``; ``None``: none stored",
    "spec": "the declaration of the store that runs the roll-up",
    "bars": "the bars of one run",
    "since": "the start of the span whose bars are all stored; ``None``: not known",
}


@dataclass(frozen=True)
class Rollup:
    """Bars of ``source`` per ``interval`` and series (``by``), stored in ``spec.collection``
    (default ``<source>_<interval>``, e.g. ``instruments_1min``).

    ``source`` may be another roll-up (``Rollup(BARS_1MIN, interval="1h")``): its bars are
    then combined into longer ones exactly, as if made from the ticks (its ``by`` fields, an
    interval that is a multiple of its own). Each stored bar keeps, beside OHLCV, the price's
    ``sum`` and ``m2`` (sum of squared deviations from the bar's mean) and the times of its
    open and close ticks, which is what makes it combine (:class:`~tsstore.analytics.bars.Bar`)."""

    source: SeriesSpec
    interval: dt.timedelta
    by: tuple[str, ...]
    price: str
    volume: str | None
    spec: SeriesSpec
    finer: Rollup | None

    def __init__(
        self,
        source: SeriesSpec | Rollup,
        *,
        interval: DurationLike = "1min",
        by: str | Iterable[str] = (),
        price: str = "price.micros",
        volume: str | None = None,
        collection: str | None = None,
        writes_per_second: float = 500,
        access: "ClientAccess | str | Mapping[str, object] | None" = None,
    ) -> None:
        finer = source if isinstance(source, Rollup) else None
        if finer is not None:  # bars of bars: 1 h from 1 min, combined exactly
            source, by, price, volume = finer.spec, by or finer.by, finer.price, finer.volume and "volume"
        if not isinstance(source, SeriesSpec):
            raise SpecError(f"a roll-up's source must be a SeriesSpec or a Rollup, got {type(source).__name__}")
        step = _checked_interval(interval, source, finer)
        fields = _checked_by(by, price, volume, source, finer)
        spec = _bars_spec(source, step, fields, _bar_columns(fields, price, volume, source, finer), volume=volume,
                          collection=collection, writes_per_second=writes_per_second, access=access)  # fmt: skip
        checked = {"source": source, "interval": step, "by": fields, "price": price, "volume": volume}
        for name, value in {**checked, "spec": spec, "finer": finer}.items():
            object.__setattr__(self, name, value)
        object.__setattr__(spec, "rollup", self)  # a store on the bars finds its layers and ticks

    @property
    def name(self) -> str:
        """The roll-up collection (how the CLI names a roll-up)."""
        return self.spec.collection

    def records(self, bars: Iterable[Bar]) -> Iterator[dict[str, Any]]:
        """The documents of ``bars``: the series key (nested like the source's fields), the
        bar start as the timestamp, and the bar's values."""
        for bar in bars:
            record: dict[str, Any] = {}
            for field, value in zip(self.by, bar.key):
                if value is None:
                    continue  # a series without this field: the bar leaves it out, as the ticks did
                *parents, leaf = field.split(".")
                target = record
                for part in parents:
                    target = target.setdefault(part, {})
                target[leaf] = value
            record[self.spec.timestamp_field] = bar.start
            record.update(open=bar.open, high=bar.high, low=bar.low, close=bar.close, count=bar.count)
            if self.volume is not None:
                record["volume"] = bar.volume
            if bar.sum is not None and bar.m2 is not None:  # what makes bars of these bars exact
                record.update(sum=bar.sum, m2=bar.m2)
            record.update({name: at for name, at in (("open_at", bar.open_at), ("close_at", bar.close_at)) if at})
            yield record

    def check_source(self, spec: SeriesSpec) -> None:
        """Refuse to run this roll-up (or guard its ticks) from a store on another collection."""
        if self.source.collection != spec.collection:
            raise ConfigError(
                f"roll-up {self.name!r} rolls up {self.source.collection!r}, not this store's {spec.collection!r}"
            )

    @property
    def root(self) -> Rollup:
        """The roll-up of ticks at the bottom of a roll-up of roll-ups (this one, if of ticks)."""
        return self if self.finer is None else self.finer.root

    @property
    def series(self) -> SeriesSpec:
        """The tick series whose bars these are (through the finer roll-ups)."""
        return self.root.source

    def watermark_document(self, end: dt.datetime, since: dt.datetime | None = None) -> dict[str, Any]:
        """What ``tsstore_rollups/<name>`` holds: the source and interval it was written for,
        the ``watermark`` (where the next run starts), the shard values of the bars and, from
        the runs that reached it without a gap, ``since``: the bars of ``[since, watermark)``
        are all stored. A run adds the last tick it rolled up (``last_tick``)."""
        document = {
            "source": self.source.collection,
            "interval_seconds": self.interval.total_seconds(),
            "watermark": end,
            BAR_SHARDS: list(self.spec.read_shards),  # where a writer looks for a stored bar
        }
        if since is not None:
            document["since"] = since
        return document

    def check_watermark(self, stored: Mapping[str, Any] | None) -> dt.datetime | None:
        """The stored watermark, if the stored document was written by this declaration."""
        if not stored:
            return None
        mine = self.watermark_document(dt.datetime.min)
        if (stored.get("source"), stored.get("interval_seconds")) != (mine["source"], mine["interval_seconds"]):
            raise StateError(
                f"the watermark of roll-up {self.name!r} was written for source {stored.get('source')!r} every "
                f"{stored.get('interval_seconds')} s, not {mine['source']!r} every {mine['interval_seconds']:g} s; "
                "give --since to recompute from a time, or use another collection"
            )
        mark = stored.get("watermark")
        return mark if isinstance(mark, dt.datetime) else None

    def coverage(self, stored: Mapping[str, Any] | None) -> tuple[dt.datetime, dt.datetime] | None:
        """``(since, watermark)``: the span whose bars are all stored, from the watermark
        document; ``None`` without one (a document written before tsstore kept ``since`` gets
        one from the next run that starts at or before its watermark)."""
        mark = self.check_watermark(stored)
        since = stored.get("since") if stored else None
        if mark is None or not isinstance(since, dt.datetime) or since >= mark:
            return None
        return since, mark

    def covered_since(self, stored: Mapping[str, Any] | None, start: dt.datetime, end: dt.datetime) -> dt.datetime:
        """The ``since`` to store after a run over ``[start, end)``: the stored span's, made
        earlier when the run reaches it without a gap; the run's own start when it does not
        (the older span is then no longer known to be whole), unless the run lies wholly
        before the stored span, which then stays."""
        held = self.coverage(stored)
        if held is None or start > held[1]:
            return start
        return held[0] if end < held[0] else min(held[0], start)


def rollup_of(value: object, spec: SeriesSpec, *, verb: str) -> Rollup:
    """``value`` if it is a roll-up of ``spec``'s collection (:meth:`Rollup.check_source`); a
    clear refusal for anything else, such as its name, which a store of ticks cannot look up
    (it does not know the declarations made of it)."""
    if not isinstance(value, Rollup):
        name = f" (the CLI takes the name: tsstore rollup --rollup {value})" if isinstance(value, str) else ""
        raise QueryError(
            f"{verb} takes the roll-up's declaration, a Rollup (Rollup(spec, interval=...), or one of "
            f"load_declaration(...)'s), not {type(value).__name__} {value!r}{name}"
        )
    value.check_source(spec)
    return value


@dataclass(frozen=True)
class RollupWindow:
    """What one run of a roll-up computes: the bars of ``[start, end)`` (both on the bar
    grid; ``start`` ``None``: no tick to start from), for a roll-up of a roll-up the first of
    its bars the finer roll-up holds whole (``first_whole``), and where the bars it stores
    are whole from (``whole_from``; ``None``: ``start``): a first run from the oldest tick
    holds every bar from the earliest time on, since a tick written before its oldest later
    is late and marked like any other."""

    start: dt.datetime | None
    end: dt.datetime
    first_whole: dt.datetime | None = None
    whole_from: dt.datetime | None = None

    @property
    def fresh(self) -> bool:
        """Whether the run has a range of closed intervals to roll up."""
        return self.start is not None and self.start < self.end

    def watermark_after(
        self, rollup: Rollup, stored: Mapping[str, Any] | None, watermark: dt.datetime | None
    ) -> dict[str, Any] | None:
        """The watermark document a run that stored every bar of this window writes (``None``:
        the window was empty and the stored one stays): the watermark never moves back, and
        ``since`` never claims a bar the finer roll-up did not hold whole."""
        if self.start is None or not self.fresh:
            return None
        mark = self.end if watermark is None else max(self.end, watermark)
        begin = self.start if self.whole_from is None else min(self.start, self.whole_from)
        begin = begin if self.first_whole is None else max(begin, self.first_whole)
        since = rollup.covered_since(stored, begin, self.end) if begin < self.end else (stored or {}).get("since")
        return rollup.watermark_document(mark, since if isinstance(since, dt.datetime) else None)


def rollup_window(
    rollup: Rollup,
    *,
    now: dt.datetime,
    since: dt.datetime | None,
    until: dt.datetime | None,
    watermark: dt.datetime | None,
    finer: Mapping[str, Any] | None = None,
    oldest: dt.datetime | None = None,
) -> RollupWindow | None:
    """The window of one run: from ``since``, else the stored ``watermark``, else the
    ``oldest`` tick, aligned down (a first run from it stores bars whole from the earliest
    time on); to ``until`` or ``now``, aligned down (an open interval is left for a later
    run), and for a roll-up of a roll-up no further than its ``finer`` watermark document
    says is written. ``None``: the finer roll-up has not run."""
    limit = now if until is None else min(now, until)
    first_whole = None
    if rollup.finer is not None:  # bars of bars: only what the finer roll-up has written
        written = rollup.finer.check_watermark(finer)
        if written is None:
            return None
        limit = min(limit, written)
        span = rollup.finer.coverage(finer)
        first_whole = None if span is None else bucket_ceil(span[0], rollup.interval)
    start = since if since is not None else watermark if watermark is not None else oldest
    first = since is None and watermark is None and oldest is not None  # from the oldest tick: none before it
    return RollupWindow(
        None if start is None else bar_start(start, rollup.interval), bar_start(limit, rollup.interval), first_whole,
        bucket_ceil(EARLIEST, rollup.interval) if first else None,
    )


@dataclass(frozen=True)
class RollupResult:
    """What a roll-up run did: the bars of ``[start, end)`` (``None`` when there was nothing
    to do) from ``ticks`` read; of its ``bars``, ``created`` new, ``replaced`` ones that
    late ticks changed, ``present`` already stored as they are; ``skipped`` ticks had no
    price; ``watermark``, where the next run starts; ``redone``: late buckets (marked by the
    writers) recomputed; ``removed``: stored bars deleted because their bucket holds no tick
    any more."""

    #: Where the range rolled up, ``[start, end)``, starts (``None`` when there was nothing to do).
    start: dt.datetime | None
    #: Where that range ends (``None`` when there was nothing to do).
    end: dt.datetime | None
    #: What was read: ticks, or the source roll-up's bars (see ``read``).
    ticks: int = 0
    #: Bars made.
    bars: int = 0
    #: Of ``bars``, those stored new.
    created: int = 0
    #: Of ``bars``, stored ones that late ticks changed.
    replaced: int = 0
    #: Of ``bars``, those already stored as they are.
    present: int = 0
    #: What was read without a price, and left out.
    skipped: int = 0
    #: Where the next run starts.
    watermark: dt.datetime | None = None
    #: What ``ticks`` counts: ``"ticks"``, or ``"bars"`` for a roll-up of a roll-up.
    read: str = "ticks"
    #: Late buckets (marked by the writers) recomputed.
    redone: int = 0
    #: Stored bars deleted because their bucket holds no tick any more.
    removed: int = 0
    #: The roll-up whose bars these are made of, when it has not run yet (nothing to combine).
    waiting_for: str | None = None

    def describe(self) -> str:
        late = f"{self.redone} late bucket(s) redone" if self.redone else ""
        removed = f", {self.removed} bar(s) left without ticks removed" if self.removed else ""
        counts = (
            f"{self.ticks} {self.read} into {self.bars} bars ({self.created} new, {self.replaced} replaced, "
            f"{self.present} unchanged{f', {self.skipped} {self.read} without a price' if self.skipped else ''}"
            f"{removed})"
        )
        if self.start is None or self.end is None:
            if self.waiting_for is not None:
                return (
                    f"nothing rolled up: its source, roll-up {self.waiting_for!r}, has not run yet; run it first "
                    f"(tsstore rollup --rollup {self.waiting_for}), then this one"
                )
            if not self.redone and self.watermark is None:
                return "nothing rolled up: no tick in a closed interval yet (the roll-up has not run before)"
            if not self.redone:
                return f"no closed interval to roll up (watermark {_iso(self.watermark)})"
            return f"{late}: {counts}; no new closed interval (watermark {_iso(self.watermark)})"
        also = f"; {late}" if late else ""
        return f"rolled up [{_iso(self.start)}, {_iso(self.end)}): {counts}{also}; watermark {_iso(self.watermark)}"


@dataclass(frozen=True)
class VerifyResult:
    """A check of a roll-up's stored bars against the bars of their ticks over ``[start,
    end)``, bucket by bucket, at one snapshot."""

    #: Where the range checked starts (aware, UTC): ``since``, else where the stored bars begin,
    #: aligned down to a bar's start.
    start: dt.datetime
    #: Where the range checked stops (exclusive): ``until`` or the watermark, whichever is earlier.
    end: dt.datetime
    #: The stored bars read over the range.
    bars: int
    #: What was read to make the bars again: ticks, or the finer roll-up's bars (see ``read``).
    ticks: int
    #: What ``ticks`` counts: ``"ticks"``, or ``"bars"`` for a roll-up of a roll-up.
    read: str
    #: One line per bucket whose stored bar differs from the bar of its ticks, oldest first: the
    #: bucket's start, the first series that differs, and how.
    differ: tuple[str, ...]
    #: Buckets skipped because late ticks marked them already (the next run recomputes them).
    late: int
    #: The reads Firestore billed for the check (added to its ``stats``): the ticks and bars of
    #: the range, and the read of the server's time.
    billed_reads: int
    #: Whether the differing buckets were marked, so that reads stop using their bars and the
    #: next run recomputes them (``repair=True`` and some bar differs).
    repaired: bool

    def describe(self, *, shown: int = 5) -> str:
        """The check in words: what was compared and billed, then the buckets that differ and
        whether they were marked for the next run.

        - ``shown``: list at most this many differing buckets (the rest are counted)"""
        head = (
            f"verified [{_iso(self.start)}, {_iso(self.end)}): {self.bars} stored bars against {self.ticks} {self.read}"
            f"{f', {self.late} late bucket(s) skipped (marked, the next run redoes them)' if self.late else ''}; "
            f"{self.billed_reads} billed reads"
        )
        if not self.differ:
            return f"{head}; every bar equals its {self.read}'"
        lines = [f"{head}; {len(self.differ)} bucket(s) differ:", *(f"  {line}" for line in self.differ[:shown])]
        if len(self.differ) > shown:
            lines.append(f"  ... and {len(self.differ) - shown} more")
        repair = "repair=True (tsstore rollup --verify) marks them for the next run"
        lines.append("marked for the next run" if self.repaired else f"not repaired: {repair}")
        return "\n".join(lines)


def _iso(value: dt.datetime | None) -> str:
    return "none" if value is None else utc_text(value)


def rollup_from_mapping(data: Mapping[str, Any], sources: Mapping[str, SeriesSpec | Rollup]) -> Rollup:
    """A roll-up from a declaration file's ``[[rollup]]`` table; ``source`` names a series of
    the same file, or a roll-up declared before it (by its collection)."""
    allowed = ("source", "interval", "by", "price", "volume", "collection", "writes_per_second", "access")
    unknown = sorted(set(data) - set(allowed))
    if unknown:
        raise SpecError(f"unknown key(s) {unknown} in roll-up declaration; allowed: {', '.join(allowed)}")
    options = dict(data)
    source = options.pop("source", None)
    if source not in sources:
        raise SpecError(
            f"roll-up source {source!r} is not a series or roll-up declared above it ({', '.join(sources)}); "
            "a roll-up of a roll-up names that roll-up's collection (e.g. 'instruments_1min') and comes after it"
        )
    return Rollup(sources[source], **options)


def bar_length(collection: str, record: Mapping[str, Any] | None, *, rollup: Rollup | None = None) -> dt.timedelta:
    """The length of the bars stored in ``collection``, from its roll-up record (the
    watermark document); a clear refusal when it has none: ``rollup``, the roll-up declared
    to store them, has not run yet (a state), or without one the collection holds no
    roll-up's bars (a usage error)."""
    seconds = (record or {}).get("interval_seconds")
    if not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or seconds <= 0:
        if rollup is not None:
            raise StateError(f"roll-up {rollup.name!r} has not run yet: its collection {collection!r} holds no bars "
                             "to combine; run it first (tsstore rollup), or make the bars from the ticks with price=")
        raise QueryError(
            f"combine=True reads a roll-up's bars, and {collection!r} has no roll-up record "
            f"({WATERMARKS}/{collection}): run its roll-up first (tsstore rollup), or make the bars from the "
            "ticks with price="
        )
    return dt.timedelta(seconds=seconds)


def combined_end(
    collection: str, record: Mapping[str, Any] | None, start: dt.datetime | None, end: dt.datetime | None
) -> dt.datetime:
    """Where bars combined from the roll-up bars in ``collection`` end: ``end``, or without one
    the roll-up's watermark (the end of the bars it has stored). Refused when ``end`` (or
    ``start``) is after the watermark: the bars there are not stored yet, and combining the
    ones that are would answer a bucket from part of its ticks."""
    mark = (record or {}).get("watermark")
    if not isinstance(mark, dt.datetime):
        raise StateError(f"roll-up {collection!r} has stored no bars yet: run it first (tsstore rollup)")
    late = next(((name, at) for name, at in (("start", start), ("end", end)) if at is not None and at > mark), None)
    if late is not None:
        raise StateError(
            f"{late[0]} {utc_text(late[1])} is after the watermark of roll-up {collection!r} ({utc_text(mark)}): its "
            f"bars after it are not stored yet; run the roll-up first (tsstore rollup), give an end at or before "
            f"{utc_text(mark)}, or make the bars from the ticks (bars(price=...) on the source's store)"
        )
    return mark if end is None else end


# --------------------------------------------------------- the checking steps of Rollup


def _checked_reads(access: "ClientAccess | str | Mapping[str, object] | None", source: SeriesSpec) -> ClientAccess:
    """What clients may do with the bars: the source's reads by default, never a create."""
    reads = source.access.read_only() if access is None else access_from(access)
    if reads.creates:
        raise SpecError(f"a roll-up is written by the server only; its access may not let clients create ({reads})")
    return reads


def _checked_interval(interval: object, source: SeriesSpec, finer: Rollup | None) -> dt.timedelta:
    """The bar length: shorter than the ticks' expiry, a multiple of the finer roll-up's."""
    try:
        step = to_duration(interval, name="roll-up interval")
    except ValueError as exc:
        months = ""
        if isinstance(interval, str) and _MONTHS.fullmatch(interval):
            months = (
                "; months are not of one length: store days or hours and combine them into months on read "
                "(bars(interval='1M', tz=..., combine=True) on the roll-up's store)"
            )
        raise SpecError(
            f"{exc}; a roll-up's bars are fixed steps from the UTC epoch (e.g. '1min', '15min', '1h', '1D', '1W')"
            f"{months}"
        ) from None
    if step <= dt.timedelta(0):
        raise SpecError(f"roll-up interval {interval!r} is not positive; give e.g. '1min', '15min', '1h', '1D'")
    if source.expire_after is not None and step >= source.expire_after:
        raise SpecError(
            f"roll-up interval {interval!r} is not shorter than {source.collection!r}'s expire_after "
            f"({source.expire_after}): its ticks would expire before their bar closes"
        )
    if finer is not None and (step <= finer.interval or step % finer.interval):
        raise SpecError(
            f"roll-up interval {interval!r} must be a multiple of the {interval_label(finer.interval)} of "
            f"{finer.name!r} (and longer), so that each of its bars falls in one longer bar"
        )
    return step


def _checked_by(
    by: str | Iterable[str], price: str, volume: str | None, source: SeriesSpec, finer: Rollup | None
) -> tuple[str, ...]:
    """The ``by`` fields (the finer roll-up's, for bars of bars), with the price and volume:
    valid paths, clear of the bar's own fields, numeric where the source declares them."""
    fields = (by,) if isinstance(by, str) else tuple(by)
    if finer is not None and fields != finer.by:
        raise SpecError(f"a roll-up of roll-up {finer.name!r} is by its fields {list(finer.by)}, not {list(fields)}")
    for name, what in [
        *((f, "roll-up by field") for f in fields),
        (price, "roll-up price"),
        (volume, "roll-up volume"),
    ]:
        if name is not None:
            check_field_path(name, what=what)
    clash = sorted(set(fields) & {*BAR_FIELDS, source.timestamp_field, source.shard_field})
    if clash:
        raise SpecError(f"roll-up by fields {clash} clash with the bar's own fields {', '.join(BAR_FIELDS)}")
    declared = dict(source.columns)
    for name, what in ((price, "price"), (volume, "volume")):
        if name in declared and declared[name] not in NUMERIC_TYPES:
            raise SpecError(f"roll-up {what} {name!r} is declared {declared[name]}; it must be Int64 or Float64")
    return fields


def _bar_columns(
    fields: tuple[str, ...], price: str, volume: str | None, source: SeriesSpec, finer: Rollup | None
) -> dict[str, str]:
    """The bars' declared columns: the source's declared types (what the source leaves to
    inference stays so here: big integer prices stay integers), and the bar's own."""
    declared = dict(source.columns)
    columns = {f: declared[f] for f in fields if f in declared}
    if finer is not None:
        columns.update({name: kind for name, kind in source.columns if name in BAR_FIELDS + STORED_MOMENTS})
    elif price in declared:
        columns.update({name: declared[price] for name in ("open", "high", "low", "close", "sum")})
    columns.update(count="Int64", m2="Float64", open_at="datetime", close_at="datetime")
    if volume is not None and volume in declared:
        columns["volume"] = declared[volume]
    return columns


def _bars_spec(
    source: SeriesSpec,
    step: dt.timedelta,
    fields: tuple[str, ...],
    columns: dict[str, str],
    *,
    volume: str | None,
    collection: str | None,
    writes_per_second: float,
    access: "ClientAccess | str | Mapping[str, object] | None",
) -> SeriesSpec:
    """The bars' own declaration: keyed by the ``by`` fields at the bar start, replaced on a
    duplicate, shards sized to the bars' write rate, in a collection other than the source's."""
    spec = SeriesSpec(
        collection or f"{source.collection}_{interval_label(step)}",
        shards=shards_for(writes_per_second),
        timestamp_field=source.timestamp_field,
        shard_field=source.shard_field,
        shapes=[QueryShape(fields, ("desc", "asc"))] if fields else [],
        key_fields=fields,
        on_duplicate="replace",
        columns=columns,
        measures=("count", "volume") if volume is not None else ("count",),
        access=_checked_reads(access, source),
        late=source.late,
        location=source.location,  # the same database: its bars are priced where the ticks are
    )
    if spec.collection == source.collection:
        raise SpecError(f"a roll-up cannot be stored in its source collection {source.collection!r}")
    refuse_cold_name(spec.collection, source)
    return spec


def refuse_cold_name(rollup: str, series: SeriesSpec) -> None:
    """Refuse a roll-up collection named as ``series``' cold tier is in the late-tick protocol
    (:func:`~tsstore.cold.tier.horizon_name`): the two would share one watermark document."""
    if rollup == horizon_name(series.collection):
        raise SpecError(
            f"roll-up collection {rollup!r} is the name the cold tier of {series.collection!r} goes by in "
            f"{WATERMARKS}; give the roll-up another collection (any name but {rollup!r})"
        )
