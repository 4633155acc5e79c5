"""Late ticks: the declaration's late-data policy, and where the marks that keep stored
roll-ups exact live.

A tick is *late* for a roll-up when its bucket starts before the roll-up's *horizon*: its
watermark (the bars before it are stored) or, while a run is under way, the end that run has
announced (``closing``). A write, replace or correction of a late tick leaves a *mark* for
that bucket, ``tsstore_rollups/<roll-up>/marks/<bucket start in epoch ms>``, before the tick
is sent; reads answer a marked bucket from the ticks, and the next run recomputes it and
clears the mark. A series' cold tier is such a horizon too (its sealed partitions, under
``tsstore_rollups/<collection>.cold``, ``cold_tier: true``), sealed again where marked.
:mod:`tsstore.write.marks` is the writer's side of the protocol,
``tsstore.verbs.rollups.rollup`` the roll-up's, and ``docs/explanation/late-ticks.md``
states it and why it holds.

Everything here is plain data; nothing talks to Firestore.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tsstore.asks import Doc, FindDocs
from tsstore.errors import SpecError, refuse_unknown_keys
from tsstore.limits import MAX_IN_VALUES
from tsstore.times import EPOCH, bucket_start, to_duration

#: The collection holding each roll-up's watermark document (id: the roll-up's collection).
WATERMARKS = "tsstore_rollups"
#: The subcollection of a roll-up's watermark document holding its marks (one per bucket).
MARKS = "marks"
#: The field of a watermark document saying retention deleted the source's ticks before it:
#: a bucket there keeps its bar and cannot be recomputed, so no late tick may land in it.
PURGED = "purged_before"
#: The field of a watermark document holding the time of the last tick its runs rolled up
#: (through the finer roll-ups): where a declared late-data window counts from.
LAST_TICK = "last_tick"
#: The field of a watermark document listing the shard values of the roll-up's bars: where a
#: writer looks for a stored bar (a time range per chunk of them, as a sharded read asks).
BAR_SHARDS = "shards"
#: The field of a watermark document saying it is a series' cold tier
#: (``tsstore.cold.tier.horizon_name``), not a roll-up: its partitions are sealed into Parquet
#: and sealed again when marked, so it has no bars a late tick could be refused for.
COLD_TIER = "cold_tier"
#: One document per running write job: which source it writes and since when every write it
#: sends was decided with a fresh view of the roll-ups' horizons (its *lease*).
WRITERS = "tsstore_writers"


@dataclass(frozen=True)
class LatePolicy:
    """What a series does with ticks that land in buckets a roll-up has already stored.

    - ``window``: ``None`` (the default) folds every late tick into the roll-ups, however
      late: its bucket is marked and the next run recomputes it, so a backfill, a replaced
      old tick or a late cluster into an old day all end in exact bars. A duration is an
      opt-in limit counted in the data's own time, from the last tick a roll-up has rolled up
      (not from today's date, nor from a watermark a run moved up to now): a tick further
      behind that, into a bucket where the roll-up holds a bar, is refused unsent (a
      :class:`~tsstore.errors.WriteFailure` naming tsstore, the roll-up and the window). A
      tick into a bucket no roll-up holds a bar of is never refused.
    - ``refresh``: how old the writer's view of the roll-ups' horizons may be when it sends a
      batch; it reads them again (one query) when the view is older. No longer than a
      declared ``window``.
    - ``send_timeout``: the longest one write request may take (it is retried after that).

    ``lease`` (``refresh + send_timeout`` and a margin) bounds how long after a writer last
    read the horizons one of its ticks can still land: a roll-up waits at most that long for
    writers that have not seen its new horizon, and keeps a mark younger than that.
    """

    window: dt.timedelta | None
    refresh: dt.timedelta
    send_timeout: dt.timedelta

    def __init__(self, *, window: object = None, refresh: object = "2s", send_timeout: object = "20s") -> None:
        values: dict[str, dt.timedelta | None] = {}
        for name, value in (("window", window), ("refresh", refresh), ("send_timeout", send_timeout)):
            if value is None and name == "window":
                values[name] = None
                continue
            also = ', or None ("none" in a declaration file) to fold in every late tick' if name == "window" else ""
            try:
                delta: dt.timedelta = to_duration(value, name=f"late policy {name}")
            except ValueError as exc:
                raise SpecError(f"{exc}{also}") from None
            if delta <= dt.timedelta(0):
                raise SpecError(f"late policy {name} {value!r} is not allowed; give a positive duration{also}")
            values[name] = delta
        limit, refresh_at = values["window"], values["refresh"]
        if limit is not None and refresh_at is not None and refresh_at > limit:
            raise SpecError(
                f"late policy refresh {refresh!r} is longer than its window {window!r}: a writer's view of the "
                "roll-ups would be older than the window it enforces; give a refresh no longer than the window"
            )
        for name, value in values.items():
            object.__setattr__(self, name, value)

    @property
    def lease(self) -> dt.timedelta:
        """How long after a writer's last view of the horizons its writes may still land."""
        return self.refresh + self.send_timeout + LEASE_MARGIN



#: Slack on top of a writer's refresh and send timeout: a send's deadline starts on the
#: client, the request reaches the server a little later.
LEASE_MARGIN = dt.timedelta(seconds=3)

DEFAULT_LATE = LatePolicy()


def late_from(value: "LatePolicy | Mapping[str, object] | None") -> LatePolicy:
    """A policy from a :class:`LatePolicy` or a declaration file's table (``window``,
    ``refresh``, ``send_timeout``)."""
    if value is None:
        return DEFAULT_LATE
    if isinstance(value, LatePolicy):
        return value
    if isinstance(value, Mapping):
        refuse_unknown_keys(value, ("window", "refresh", "send_timeout"), where="the late policy")
        options: dict[str, Any] = dict(value)
        window = options.get("window")
        if window in ("none", "None"):  # TOML has no null
            options["window"] = None
        elif isinstance(window, (int, float)) and not isinstance(window, bool):  # seconds would be a surprise
            raise SpecError(
                f"late window {window!r} is a number, not a duration; write a duration string such as "
                f'"{window}D" or "{window}h", or "none" to fold in every late tick'
            )
        return LatePolicy(**options)
    raise SpecError(f"late {value!r} is not allowed; give a LatePolicy or a table of window, refresh, send_timeout")


def mark_id(bucket: dt.datetime) -> str:
    """A mark's document id: the bucket start in milliseconds since the epoch (what security
    rules can compute from a tick's time)."""
    return str((bucket - EPOCH) // dt.timedelta(milliseconds=1))


def watermark_path(rollup: str) -> str:
    """The path of roll-up ``rollup``'s watermark document."""
    return f"{WATERMARKS}/{rollup}"


def marks_path(rollup: str) -> str:
    """The collection of ``rollup``'s marks."""
    return f"{WATERMARKS}/{rollup}/{MARKS}"


@dataclass(frozen=True)
class Horizon:
    """One roll-up as a writer sees it: its name, bucket size, where late begins (the later
    of its watermark and the end a run under way announced; ``None``: nothing stored), and
    the last tick its runs rolled up (``None``: not known, a document written before tsstore
    kept it: a window then counts from the horizon)."""

    name: str
    interval: dt.timedelta
    horizon: dt.datetime | None
    purged: dt.datetime | None = None  # retention deleted the ticks before it: bars only
    last_tick: dt.datetime | None = None
    shards: tuple[str, ...] = ()  # of its bars (none known: a document written before tsstore kept them)
    cold: bool = False  # a cold tier's sealed partitions, not a roll-up's bars: a window never refuses for it

    @classmethod
    def of(cls, name: str, document: Mapping[str, Any]) -> Horizon | None:
        """From a watermark document; ``None`` when it is not one."""
        seconds = document.get("interval_seconds")
        if not isinstance(seconds, (int, float)) or seconds <= 0:
            return None
        times = [document.get(k) for k in ("watermark", "closing")]
        known = [t for t in times if isinstance(t, dt.datetime)]
        purged, last, shards = document.get(PURGED), document.get(LAST_TICK), document.get(BAR_SHARDS)
        return cls(
            name, dt.timedelta(seconds=seconds), max(known) if known else None,
            purged if isinstance(purged, dt.datetime) else None, last if isinstance(last, dt.datetime) else None,
            tuple(v for v in shards if isinstance(v, str)) if isinstance(shards, list) else (),
            document.get(COLD_TIER) is True,
        )  # fmt: skip

    def late(self, timestamp: dt.datetime) -> dt.datetime | None:
        """The bucket a tick at ``timestamp`` marks, if it is late for this roll-up."""
        if self.horizon is None:
            return None
        bucket = bucket_start(timestamp, self.interval)
        return bucket if bucket < self.horizon else None

    def probe(self, bucket: dt.datetime, *, shard_field: str, timestamp_field: str) -> BarProbe | None:
        """Where a bar of the bucket starting at ``bucket`` would be stored; ``None`` when the
        watermark document does not say (a writer then takes the bucket to hold one)."""
        if not self.shards:
            return None
        return BarProbe(self.name, shard_field, self.shards, timestamp_field, bucket, bucket + self.interval)

    def behind(self, timestamp: dt.datetime) -> dt.timedelta:
        """How far ``timestamp`` lies behind this roll-up's data: its last tick rolled up (else
        its horizon), in the data's own time; what a late-data window is compared with."""
        since = self.last_tick if self.last_tick is not None else self.horizon
        return dt.timedelta(0) if since is None else since - timestamp


@dataclass(frozen=True)
class BarProbe:
    """A question a writer asks before it refuses a tick past the window: does roll-up
    ``rollup`` store a bar under ``shards`` (its ``shard_field``) whose ``timestamp_field``
    lies in ``[start, end)``? Asked as a sharded read's chunks are (``shard in`` at most 30
    values and the time range, limit 1), so the roll-up's (shard, timestamp) index serves it."""

    rollup: str
    shard_field: str
    shards: tuple[str, ...]
    timestamp_field: str
    start: dt.datetime
    end: dt.datetime

    def chunks(self) -> list[list[str]]:
        """The shard values, at most an ``in`` filter's worth a query."""
        return [list(self.shards[at : at + MAX_IN_VALUES]) for at in range(0, len(self.shards), MAX_IN_VALUES)]


@dataclass(frozen=True)
class Lease:
    """A write job's lease as a roll-up reads it: written at ``written`` (server time), good
    for ``seconds`` after that, and *safe from* ``safe``: every send it decided with a view
    of the horizons older than that has landed."""

    written: dt.datetime
    seconds: float
    safe: dt.datetime

    @classmethod
    def of(cls, written: dt.datetime, document: Mapping[str, Any]) -> Lease:
        busy = document.get("busy_since")
        seconds = document.get("lease_seconds")
        return cls(
            written,
            float(seconds) if isinstance(seconds, (int, float)) else DEFAULT_LATE.lease.total_seconds(),
            busy if isinstance(busy, dt.datetime) and busy < written else written,
        )

    def live(self, now: dt.datetime) -> bool:
        """Whether the job may still send (a job that stopped without dropping its lease,
        killed say, has landed everything once it has expired)."""
        return now < self.written + dt.timedelta(seconds=self.seconds)


@dataclass(frozen=True)
class Leases:
    """What the write jobs' leases, read at ``now``, let a roll-up do: wait (``waiting``
    writers have not seen a horizon announced at ``announced``; ``None``: nothing
    announced), and clear marks written before ``cutoff``."""

    waiting: int
    cutoff: dt.datetime
    retry_after: float

    @classmethod
    def read(cls, leases: list[Lease], *, now: dt.datetime, announced: dt.datetime | None, refresh: float) -> Leases:
        live = [lease for lease in leases if lease.live(now)]
        behind = [lease for lease in live if announced is not None and lease.safe < announced]
        # The earliest a behind lease can change: its writer's next refresh, or its expiry.
        expiries = [(lease.written + dt.timedelta(seconds=lease.seconds) - now).total_seconds() for lease in behind]
        retry = min([refresh, *expiries]) if behind else 0.0
        return cls(len(behind), min([now, *(lease.safe for lease in live)]), max(retry, 0.05))


@dataclass(frozen=True)
class Mark:
    """A marked bucket of a roll-up: its start, and when its mark was last written."""

    bucket: dt.datetime
    written: dt.datetime


def marks_ask(
    name: str, *, since: dt.datetime | None = None, before: dt.datetime | None, read_time: dt.datetime | None
) -> FindDocs:
    """The ask for the marks of roll-up ``name`` for buckets in ``[since, before)`` (``None``:
    unbounded) at ``read_time``; :func:`marks_of` reads its answer."""
    where = (*((("bucket", ">=", since),) if since is not None else ()),
             *((("bucket", "<", before),) if before is not None else ()))  # fmt: skip
    return FindDocs(marks_path(name), f"reading the late-tick marks of roll-up {name!r}", where, read_time)


def marks_of(found: Iterable[Doc]) -> list[Mark]:
    """The marks in an answer of :func:`marks_ask`, oldest bucket first."""
    out = []
    for doc in found:
        bucket = (doc.data or {}).get("bucket")
        if isinstance(bucket, dt.datetime) and doc.update_time is not None:
            out.append(Mark(bucket, doc.update_time))
    return sorted(out, key=lambda mark: mark.bucket)
