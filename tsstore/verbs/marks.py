"""The roll-up's side of late ticks, as requests: announce a new horizon, wait for the
writers that have not seen it, read the marks at a snapshot, and clear those folded in.

The writer's side is :mod:`tsstore.write.marks`; the protocol, and why it holds, is
``docs/explanation/late-ticks.md``.
"""

from __future__ import annotations

import datetime as dt
import inspect
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from google.api_core import exceptions as gexc
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

from tsstore.late import WATERMARKS, WRITERS, Lease, Leases, mark_id, marks_path
from tsstore.verbs.reading import server_time
from tsstore.verbs.request import Pause, Request, Seat, Unary


@dataclass(frozen=True)
class Mark:
    """A marked bucket of a roll-up: its start, and when its mark was last written."""

    bucket: dt.datetime
    written: dt.datetime


def watermark_ask(name: str, *, read_time: dt.datetime | None = None) -> Unary:
    """The ask for roll-up ``name``'s watermark document (at ``read_time``); :func:`document`
    reads its answer."""
    return Unary(
        lambda client: client.collection(WATERMARKS).document(name).get(read_time=read_time, retry=None),
        f"the watermark of roll-up {name!r}",
    )


def document(snapshot: Any) -> dict[str, Any] | None:
    """A document's data, ``None`` when it does not exist."""
    data: dict[str, Any] | None = snapshot.to_dict() if snapshot.exists else None
    return data


def read_watermark(seat: Seat, name: str) -> Request[dict[str, Any] | None]:
    """Roll-up ``name``'s watermark document as it is now (``None``: none yet)."""
    return document((yield watermark_ask(name)))


def announce(seat: Seat, name: str, document: dict[str, Any], closing: dt.datetime) -> Request[dt.datetime]:
    """Tell writers that a run of roll-up ``name`` will fold in every bucket before
    ``closing`` (they mark ticks before it from their next view on); the server time it was
    said at."""
    said = {**document, "closing": closing, "announced": firestore.SERVER_TIMESTAMP}
    written = yield Unary(
        lambda client: client.collection(WATERMARKS).document(name).set(said, merge=True, retry=None),
        f"announcing the horizon of roll-up {name!r}",
    )
    at: dt.datetime = written.update_time
    return at


def settle_writers(seat: Seat, source: str, *, announced: dt.datetime | None, refresh: float) -> Request[dt.datetime]:
    """Wait until every write job of ``source`` that is still alive decides with a view of
    the horizons read after ``announced`` (``None``: wait for nothing), so no tick they send
    unmarked can land after the snapshot a run takes next; return the time before which
    every mark's writes have landed (marks older than it may be cleared)."""
    while True:
        now = yield from server_time(seat)
        found = yield Unary(
            lambda client: client.collection(WRITERS).where(filter=FieldFilter("source", "==", source)).get(retry=None),
            f"reading the leases of the writers of {source!r}",
        )
        leases = [Lease.of(snap.update_time, snap.to_dict() or {}) for snap in found]
        verdict = Leases.read(leases, now=now, announced=announced, refresh=refresh)
        if not verdict.waiting:
            return verdict.cutoff
        why = f"waiting for {verdict.waiting} writer(s) of {source!r} to see the new horizon"
        yield Pause(verdict.retry_after, why)


def marks_ask(
    name: str, *, since: dt.datetime | None = None, before: dt.datetime | None, read_time: dt.datetime | None
) -> Unary:
    """The ask for the marks of roll-up ``name`` for buckets in ``[since, before)`` (``None``:
    unbounded) at ``read_time``; :func:`marks_of` reads its answer."""

    def marks(client: Any) -> Any:
        query = client.collection(marks_path(name))
        if since is not None:
            query = query.where(filter=FieldFilter("bucket", ">=", since))
        if before is not None:
            query = query.where(filter=FieldFilter("bucket", "<", before))
        return query.get(retry=None, read_time=read_time)

    return Unary(marks, f"reading the late-tick marks of roll-up {name!r}")


def marks_of(found: Iterable[Any]) -> list[Mark]:
    """The marks in an answer of :func:`marks_ask`, oldest bucket first."""
    out = []
    for snap in found:
        bucket = (snap.to_dict() or {}).get("bucket")
        if isinstance(bucket, dt.datetime):
            out.append(Mark(bucket, snap.update_time))
    return sorted(out, key=lambda mark: mark.bucket)


def read_marks(
    seat: Seat, name: str, *, before: dt.datetime | None, read_time: dt.datetime | None
) -> Request[list[Mark]]:
    """The marks of roll-up ``name`` for buckets before ``before`` (``None``: all), at
    ``read_time``, oldest bucket first."""
    return marks_of((yield marks_ask(name, before=before, read_time=read_time)))


def late_in(seat: Seat, name: str, *, start: dt.datetime | None, end: dt.datetime | None) -> Request[list[Mark]]:
    """The marks in ``[start, end)`` of roll-up ``name`` and of the roll-ups its bars are made
    from (found through their watermark documents' ``source``): the buckets whose bars late
    ticks have changed since they were stored."""
    found: list[Mark] = []
    layer: str | None = name
    seen: set[str] = set()
    while layer is not None and layer not in seen:
        seen.add(layer)
        current = layer
        data = yield from read_watermark(seat, current)
        if not data:
            break
        seconds = data.get("interval_seconds")
        reach = dt.timedelta(seconds=seconds) if isinstance(seconds, (int, float)) else dt.timedelta(0)
        since = None if start is None else start - reach
        found += marks_of((yield marks_ask(current, since=since, before=end, read_time=None)))
        source = data.get("source")
        layer = source if isinstance(source, str) else None
    return sorted(found, key=lambda mark: mark.bucket)


def put_marks(seat: Seat, name: str, buckets: Sequence[dt.datetime]) -> Request[None]:
    """Mark these buckets of roll-up ``name`` (a check found their bars differ from the
    ticks): reads stop using them at once, and the next run recomputes them."""

    def marker(bucket: dt.datetime) -> Callable[[Any], Any]:
        data = {"bucket": bucket, "nonce": uuid.uuid4().hex}
        return lambda client: client.collection(marks_path(name)).document(mark_id(bucket)).set(data, retry=None)

    yield [Unary(marker(bucket), f"marking a bucket of roll-up {name!r}") for bucket in buckets]


def clear_marks(seat: Seat, name: str, marks: Iterable[Mark], *, cutoff: dt.datetime) -> Request[int]:
    """Delete the marks written before ``cutoff`` that no writer has written again since they
    were read (a precondition on their update time); how many went."""
    doomed = [mark for mark in marks if mark.written < cutoff]
    if not doomed:
        return 0

    def clearer(mark: Mark) -> Callable[[Any], Any]:
        def clear(client: Any) -> Any:
            option = client.write_option(last_update_time=mark.written)
            ref = client.collection(marks_path(name)).document(mark_id(mark.bucket))
            try:
                done = ref.delete(option=option, retry=None)
            except gexc.FailedPrecondition:  # written again since: a tick may be behind it
                return False
            return _kept(done) if inspect.isawaitable(done) else True

        return clear

    gone = yield [Unary(clearer(mark), f"clearing a late-tick mark of roll-up {name!r}") for mark in doomed]
    return sum(1 for g in gone if g)


async def _kept(done: Any) -> bool:
    try:
        await done
    except gexc.FailedPrecondition:
        return False
    return True
