"""The roll-up's side of late ticks, as requests: announce a new horizon, wait for the
writers that have not seen it, read the marks at a snapshot, and clear those folded in.

The writer's side is :mod:`tsstore.write.marks`; the protocol, and why it holds, is
``docs/explanation/late-ticks.md``.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Sequence

from tsstore.asks import DeleteDoc, Fields, FindDocs, GetDoc, SetDoc, ask, asked_together, asked_with
from tsstore.late import WRITERS, Lease, Leases, Mark, mark_id, marks_ask, marks_of, marks_path, watermark_path
from tsstore.verbs.reading import server_time
from tsstore.verbs.request import Pause, Request, Seat


def watermark_ask(name: str, *, read_time: dt.datetime | None = None) -> GetDoc:
    """The ask for roll-up ``name``'s watermark document (at ``read_time``)."""
    return GetDoc(watermark_path(name), f"the watermark of roll-up {name!r}", read_time=read_time)


def read_watermark(seat: Seat, name: str) -> Request[Fields | None]:
    """Roll-up ``name``'s watermark document as it is now (``None``: none yet)."""
    return (yield from ask(watermark_ask(name))).data


def watermark_write(name: str, document: Fields, *, what: str, announced: bool = False) -> SetDoc:
    """The ask that merges ``document`` into roll-up ``name``'s watermark document (with
    ``announced`` the server's time, when a horizon is announced); answered with when it was
    written."""
    stamped = ("announced",) if announced else ()
    return SetDoc(watermark_path(name), document, what, merge=True, server_time=stamped)


def announce(seat: Seat, name: str, document: Fields, closing: dt.datetime) -> Request[dt.datetime]:
    """Tell writers that a run of roll-up ``name`` will fold in every bucket before
    ``closing`` (they mark ticks before it from their next view on); the server time it was
    said at."""
    said = {**document, "closing": closing}
    what = f"announcing the horizon of roll-up {name!r}"
    return (yield from ask(watermark_write(name, said, what=what, announced=True)))


def settle_writers(seat: Seat, source: str, *, announced: dt.datetime | None, refresh: float) -> Request[dt.datetime]:
    """Wait until every write job of ``source`` that is still alive decides with a view of
    the horizons read after ``announced`` (``None``: wait for nothing), so no tick they send
    unmarked can land after the snapshot a run takes next; return the time before which
    every mark's writes have landed (marks older than it may be cleared)."""
    while True:
        now = yield from server_time(seat)
        what = f"reading the leases of the writers of {source!r}"
        found = yield from ask(FindDocs(WRITERS, what, where=(("source", "==", source),)))
        leases = [Lease.of(doc.update_time, doc.data or {}) for doc in found if doc.update_time is not None]
        verdict = Leases.read(leases, now=now, announced=announced, refresh=refresh)
        if not verdict.waiting:
            return verdict.cutoff
        why = f"waiting for {verdict.waiting} writer(s) of {source!r} to see the new horizon"
        yield from ask(Pause(verdict.retry_after, why))


def read_marks(
    seat: Seat, name: str, *, before: dt.datetime | None, read_time: dt.datetime | None
) -> Request[list[Mark]]:
    """The marks of roll-up ``name`` for buckets before ``before`` (``None``: all), at
    ``read_time``, oldest bucket first."""
    return marks_of((yield from ask(marks_ask(name, before=before, read_time=read_time))))


def late_in(
    seat: Seat,
    name: str,
    *,
    start: dt.datetime | None,
    end: dt.datetime | None,
    record: Fields | None = None,
) -> Request[list[Mark]]:
    """The marks in ``[start, end)`` of roll-up ``name`` and of the roll-ups its bars are made
    from (found through their watermark documents' ``source``): the buckets whose bars late
    ticks have changed since they were stored. ``record``: ``name``'s watermark document, when
    the caller has read it. One round trip per layer: a layer's marks are asked together with
    the watermark document of the layer below."""
    found: list[Mark] = []
    data = (yield from read_watermark(seat, name)) if record is None else record
    layer: str | None = name
    seen: set[str] = set()
    while layer is not None and data and layer not in seen:
        seen.add(layer)
        seconds = data.get("interval_seconds")
        reach = dt.timedelta(seconds=seconds) if isinstance(seconds, (int, float)) else dt.timedelta(0)
        since = None if start is None else start - reach
        source = data.get("source")
        below = source if isinstance(source, str) and source not in seen else None
        [now], records = yield from asked_with([marks_ask(layer, since=since, before=end, read_time=None)],
                                               [watermark_ask(below)] if below is not None else [])  # fmt: skip
        found += marks_of(now)
        layer, data = below, (records[0].data if records else None)
    return sorted(found, key=lambda mark: mark.bucket)


def put_marks(seat: Seat, name: str, buckets: Sequence[dt.datetime]) -> Request[None]:
    """Mark these buckets of roll-up ``name`` (a check found their bars differ from the
    ticks): reads stop using them at once, and the next run recomputes them."""
    what = f"marking a bucket of roll-up {name!r}"
    yield from asked_together(
        [SetDoc(f"{marks_path(name)}/{mark_id(bucket)}", {"bucket": bucket, "nonce": uuid.uuid4().hex}, what)
         for bucket in buckets]  # fmt: skip
    )


def clear_marks(seat: Seat, name: str, marks: Iterable[Mark], *, cutoff: dt.datetime) -> Request[int]:
    """Delete the marks written before ``cutoff`` that no writer has written again since they
    were read (a precondition on their update time); how many went."""
    doomed = [mark for mark in marks if mark.written < cutoff]
    if not doomed:
        return 0
    what = f"clearing a late-tick mark of roll-up {name!r}"
    gone = yield from asked_together(
        [DeleteDoc(f"{marks_path(name)}/{mark_id(mark.bucket)}", what, written=mark.written) for mark in doomed]
    )
    return sum(1 for g in gone if g)
