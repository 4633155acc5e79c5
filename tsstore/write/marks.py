"""The writer's side of late ticks: a mark for every rolled-up bucket a write changes, sent
before the write, and a lease that tells roll-ups how fresh the writer's view is.

Every send of a write job passes through a :class:`LateGuard`:

1. Its *view* of the source's roll-ups (their horizons: :class:`~tsstore.late.Horizon`) is
   at most ``late.refresh`` old when the send starts. Before reading a new view the guard
   writes the job's *lease* (``tsstore_writers/<job>``: the source, and ``busy_since``, the
   oldest view a send still in flight was decided with); the lease write's server time is
   the new view's time. From half ``refresh`` on, one send at a time reads the next view
   while the others go on under the current one (the lease names it as in flight), so a
   fault met renewing fails no send, nor holds one, until the current view has run out.
2. A tick created, replaced or erased (:class:`~tsstore.write.ops.Erase`) in a bucket before
   a roll-up's horizon (or the cold tier's: a partition sealed, or about to be) is late: its
   bucket's mark is written (a new random ``nonce`` each time, so the mark's update time
   moves) and confirmed first. Under a declared ``window``
   a tick further behind the roll-up's last tick than that is refused unsent, if the
   roll-up holds a bar in its bucket (one query, asked only then). Retention deletes
   (``None``) change no bar and mark nothing; a reshard's patch (:class:`~tsstore.write.ops.Patch`
   with its tick's time) changes no bar either, but a sealed tick's shard field: it marks
   the cold tier's day only.
3. The send itself times out after ``late.send_timeout``.

So a tick lands at most ``late.lease`` after the view (and the mark) it was sent under;
roll-ups rely on that (``docs/explanation/late-ticks.md``). The guard does no I/O itself:
:class:`Horizons` is what it asks of Firestore (a sync client provides it:
:class:`tsstore.wire.FirestoreHorizons`), so its decisions are tested without Firestore.
"""

from __future__ import annotations

import datetime as dt
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tsstore import telemetry
from tsstore.errors import REFUSED_UNSENT
from tsstore.faults import describe, error_type
from tsstore.late import BarProbe, Horizon
from tsstore.logs import DB_COLLECTION, ERROR_TYPE, MARKS_WRITTEN, TICKS_REJECTED
from tsstore.spec import SeriesSpec
from tsstore.times import utc_text
from tsstore.write.ops import Erase, Patch, Transport, WriteOp, WriteStatus

log = logging.getLogger(__name__)


class Horizons(Protocol):
    """What the guard asks of Firestore."""

    def put_lease(self, data: dict[str, Any]) -> dt.datetime:
        """Write the job's lease; the write's server time."""

    def drop_lease(self) -> None:
        """Delete the job's lease (the job sends nothing more)."""

    def horizons(self) -> list[Horizon]:
        """The source's roll-ups, as their watermark documents say now."""

    def put_marks(self, marks: Mapping[str, Iterable[dt.datetime]]) -> None:
        """Write these marks (roll-up -> bucket starts); raise ``GoogleAPICallError`` unless
        every one was written."""

    def holds_bar(self, probe: BarProbe) -> bool:
        """Whether the roll-up stores a bar where ``probe`` says."""


@dataclass(frozen=True)
class View:
    """The roll-ups' horizons as read after ``at`` (server time), from ``started`` (the
    guard's clock) on."""

    started: float
    at: dt.datetime
    horizons: tuple[Horizon, ...]


@dataclass(frozen=True)
class Decision:
    """What one send needs: the marks to write first, and the writes refused unsent."""

    marks: dict[str, set[dt.datetime]]
    refused: dict[int, str]


def tick_time(data: object, timestamp_field: str) -> dt.datetime | None:
    """The time whose bucket a write changes: a tick's (created or replaced) or an erased
    one's; ``None`` for retention deletes and patches."""
    if isinstance(data, dict):
        value = data.get(timestamp_field)
        return value if isinstance(value, dt.datetime) else None
    if isinstance(data, Erase):
        return data.timestamp
    return None


#: Whether a roll-up (by its horizon) holds a bar in the bucket starting at the time given.
Holds = Callable[[Horizon, dt.datetime], bool]


def decide(spec: SeriesSpec, view: View, ops: list[WriteOp], *, holds: Holds | None = None) -> Decision:
    """The marks ``ops`` need under ``view``, and the late ticks refused: into ticks retention
    deleted, or further behind a roll-up's last tick than a declared ``spec.late.window``
    into a bucket where it holds a bar (``holds``, asked only then; ``None``: every bucket is
    taken to hold one). A cold tier's horizon (``Horizon.cold``) marks and never refuses:
    its partitions are sealed again, not kept as bars."""
    marks: dict[str, set[dt.datetime]] = {}
    refused: dict[int, str] = {}
    held: Holds = holds if holds is not None else (lambda horizon, bucket: True)
    for index, (_, data, _) in enumerate(ops):
        at, late = _late(spec, view, data)
        refusal = _refusal(spec, at, late, held) if at is not None and late else None
        if refusal is not None:
            refused[index] = refusal
            continue
        for h, bucket in late:
            marks.setdefault(h.name, set()).add(bucket)
    return Decision(marks, refused)


def _late(spec: SeriesSpec, view: View, data: object) -> tuple[dt.datetime | None, list[tuple[Horizon, dt.datetime]]]:
    """The time a write of ``data`` changes, and the horizons it is late for under ``view``,
    each with the bucket it changes (a reshard's patch changes a sealed tick's shard, no
    roll-up's bar)."""
    patched = isinstance(data, Patch)
    at = data.timestamp if isinstance(data, Patch) else tick_time(data, spec.timestamp_field)
    if at is None:
        return None, []
    return at, [(h, bucket) for h in view.horizons if (bucket := h.late(at)) is not None and (h.cold or not patched)]


def _refusal(spec: SeriesSpec, at: dt.datetime, late: list[tuple[Horizon, dt.datetime]], held: Holds) -> str | None:
    """Why a write at ``at``, late for these horizons, is refused (into purged ticks, or past
    the declared window into a bucket holding a bar), or ``None``: it is marked."""
    gone = [h for h, bucket in late if h.purged is not None and bucket < h.purged]
    if gone:
        return _into_purged(spec, gone[0], at)
    window = spec.late.window
    if window is None:
        return None
    past = [(h, bucket) for h, bucket in late if not h.cold and h.behind(at) > window]
    stored = next((h for h, bucket in past if held(h, bucket)), None)
    return None if stored is None else _too_late(spec, stored, at, window)


def remembered(holds: Holds) -> Holds:
    """``holds`` asked once a bucket: a bar stored after the answer is a refusal missed, never
    a bar left wrong (the tick is marked)."""
    known: dict[tuple[str, dt.datetime], bool] = {}

    def held(horizon: Horizon, bucket: dt.datetime) -> bool:
        if (horizon.name, bucket) not in known:
            known[(horizon.name, bucket)] = holds(horizon, bucket)
        return known[(horizon.name, bucket)]

    return held


def holds_from(io: Horizons, spec: SeriesSpec) -> Holds:
    """:func:`decide`'s ``holds``, asked of Firestore through ``io`` (a roll-up's bars name
    their shard and start with the source's fields); a roll-up whose watermark document does
    not list its shards is taken to hold a bar."""

    def holds(horizon: Horizon, bucket: dt.datetime) -> bool:
        probe = horizon.probe(bucket, shard_field=spec.shard_field, timestamp_field=spec.timestamp_field)
        return True if probe is None else io.holds_bar(probe)

    return holds


def _into_purged(spec: SeriesSpec, horizon: Horizon, at: dt.datetime) -> str:
    """The refusal of a tick at ``at`` where a purge deleted the ticks ``horizon`` holds."""
    purged = utc_text(horizon.purged) if horizon.purged is not None else "?"
    if horizon.cold:
        return (f"tsstore refused the tick at {utc_text(at)}: it falls in a sealed day of {spec.collection!r} whose "
                f"ticks a purge deleted from Firestore (before {purged}): its sealed file is the only copy, which a "
                "tick written now would not be in")  # fmt: skip
    return (f"tsstore refused the tick at {utc_text(at)}: it falls in a bucket of roll-up {horizon.name!r} whose "
            f"ticks retention deleted (before {purged}): its bar cannot be recomputed")  # fmt: skip


def _too_late(spec: SeriesSpec, horizon: Horizon, at: dt.datetime, window: dt.timedelta) -> str:
    """The refusal of a tick at ``at`` further behind ``horizon``'s data than ``window``."""
    since = (
        f"the last tick roll-up {horizon.name!r} has rolled up ({utc_text(horizon.last_tick)})"
        if horizon.last_tick is not None
        else f"the horizon of roll-up {horizon.name!r}"
    )
    return (
        f"tsstore refused the tick at {utc_text(at)}: it is {horizon.behind(at)} behind {since}, past "
        f"{spec.collection!r}'s late-data window of {window}, and that roll-up holds a bar in its bucket; declare a "
        'wider LatePolicy(window=...), or window=None ("none" in a declaration file) to fold in every late tick'
    )


def uptime() -> float:
    """Seconds on a clock that keeps counting while the machine is suspended (a writer woken
    from a suspended VM must find its view old), where the system has one."""
    boot = getattr(time, "CLOCK_BOOTTIME", None)
    return time.clock_gettime(boot) if boot is not None else time.monotonic()


#: The part of ``refresh`` after which a view is read again ahead of its end (see
#: :meth:`LateGuard._fresh`): a renewal a fault cuts off has the rest of the view's time to
#: be tried again before any send must wait for it.
RENEW_AT = 0.5


class LateGuard:
    """Wraps a transport's sends so every late write is marked first (see the module).
    Thread-safe: the sender's workers share one view."""

    def __init__(
        self,
        spec: SeriesSpec,
        io: Horizons,
        *,
        clock: Callable[[], float] = uptime,
    ) -> None:
        self._spec, self._io, self._clock = spec, io, clock
        self._refresh = spec.late.refresh.total_seconds()
        self._lock = threading.Lock()
        self._view: View | None = None
        self._in_flight: dict[int, dt.datetime] = {}  # send -> the time of the view it was decided with
        self._marked_now: set[tuple[str, dt.datetime]] = set()  # marks confirmed under the current view
        self._tokens = itertools.count()
        self._renewing = False  # a send is reading a new view
        self._renewed = threading.Condition(self._lock)
        self._holds = remembered(holds_from(io, spec))  # asked again under each new view

    def guard(self, transport: Transport) -> Transport:
        """``transport`` with its sends guarded."""
        send, lookup = transport
        return (lambda ops: self.send(send, ops)), lookup

    def _fresh(self, token: int) -> View:
        """The view send ``token`` starts under, the send counted in flight under it from then
        on: the current view while it is at most ``refresh`` old, else a new one. One send at a
        time reads a new view, outside the lock, from :data:`RENEW_AT` of ``refresh`` on; sends
        meanwhile go on under the current view, and one that finds a renewal fail while that
        view is still good goes on under it too (a later send tries again), so a fault met
        reading the view fails a send only when the view has run out."""
        while True:
            with self._lock:
                view = self._view
                age = None if view is None else self._clock() - view.started
                usable = view if view is not None and age is not None and age <= self._refresh else None
                renew = not self._renewing and (age is None or age > self._refresh * RENEW_AT)
                if usable is not None:
                    self._in_flight[token] = usable.at
                    if not renew:
                        return usable
                elif not renew:
                    self._renewed.wait(0.5)  # another send is reading the view
                    continue
                self._renewing = True
                # Sends may start under the current view until the new one is in: the lease
                # names it (through this send) as in flight.
                lease: dict[str, Any] = {
                    "source": self._spec.collection,
                    "lease_seconds": self._spec.late.lease.total_seconds(),
                }
                if self._in_flight:
                    lease["busy_since"] = min(self._in_flight.values())
            try:
                return self._renew(token, lease)
            except Exception as exc:
                if usable is None:
                    raise
                log.warning("renewing the view of %r's roll-ups failed (%s); sends go on under the current one",
                            self._spec.collection, describe(exc),
                            extra={DB_COLLECTION: self._spec.collection, ERROR_TYPE: error_type(exc)})  # fmt: skip
                return usable  # still good: this send goes on under it
            finally:
                with self._lock:
                    self._renewing = False
                    self._renewed.notify_all()

    def _renew(self, token: int, lease: dict[str, Any]) -> View:
        """Write ``lease``, read the horizons: the new view, send ``token`` in flight under it."""
        started = self._clock()
        with telemetry.child("late_view", {DB_COLLECTION: self._spec.collection}) as span:
            at = self._io.put_lease(lease)
            view = View(started, at, tuple(h for h in self._io.horizons() if h.horizon is not None))
            span.set_attribute("tsstore.horizons", len(view.horizons))
        with self._lock:
            self._view = view
            self._in_flight[token] = view.at
            self._marked_now = set()
            self._holds = remembered(holds_from(self._io, self._spec))
        return view

    def send(self, inner: Callable[[list[WriteOp]], list[WriteStatus]], ops: list[WriteOp]) -> list[WriteStatus]:
        """Mark what ``ops`` change of stored roll-ups, then send the rest with ``inner``."""
        token = next(self._tokens)
        try:
            while True:
                view = self._fresh(token)  # in flight from the moment it is decided: the lease covers it
                decision = decide(self._spec, view, ops, holds=self._holds)
                todo = self._unmarked(view, decision.marks)
                if todo:
                    marked = sum(map(len, todo.values()))
                    with telemetry.child("marks", {MARKS_WRITTEN: marked}):
                        self._io.put_marks(todo)
                    telemetry.marked(self._spec.collection, marked)
                    self._remember(view, todo)
                    log.debug("marked %d bucket(s) of %s before a late write", marked, ", ".join(sorted(todo)),
                              extra={DB_COLLECTION: self._spec.collection, MARKS_WRITTEN: marked})  # fmt: skip
                if self._clock() - view.started <= self._refresh:
                    break  # else the marks took so long that the view must be read again
            if decision.refused:
                log.warning("refused %d late tick(s) unsent; the first: %s", len(decision.refused),
                            next(iter(decision.refused.values())),
                            extra={DB_COLLECTION: self._spec.collection,
                                   TICKS_REJECTED: len(decision.refused)})  # fmt: skip
            kept = [op for i, op in enumerate(ops) if i not in decision.refused]
            answers = iter(inner(kept) if kept else [])
        finally:
            with self._lock:
                self._in_flight.pop(token, None)
        return [
            (REFUSED_UNSENT, decision.refused[i]) if i in decision.refused else next(answers)
            for i in range(len(ops))
        ]

    def _unmarked(self, view: View, marks: dict[str, set[dt.datetime]]) -> dict[str, set[dt.datetime]]:
        """The marks not yet written under ``view``: one written under the current view stays
        (a roll-up clears only marks older than every live lease's view), so once is enough."""
        with self._lock:
            done = self._marked_now if view is self._view else set()
            todo = {name: {b for b in buckets if (name, b) not in done} for name, buckets in marks.items()}
        return {name: buckets for name, buckets in todo.items() if buckets}

    def _remember(self, view: View, marks: dict[str, set[dt.datetime]]) -> None:
        with self._lock:
            if view is self._view:
                self._marked_now.update((name, b) for name, buckets in marks.items() for b in buckets)

    def close(self) -> None:
        """The job sends nothing more: its lease goes (a roll-up then waits for it no longer),
        unless a send is still in flight (after Ctrl-C), which its lease must still cover
        until it expires."""
        with self._lock:
            if self._view is not None and not self._in_flight:
                self._io.drop_lease()
                self._view = None
