"""The server's time, estimated from its answers, so a read of several queries can skip the
round trip that reads it (``snapshots="estimated"``, the stores' default).

Every answer of Firestore carries a time of the server's: a query's or a document's read
time, a write's commit time. An answer that arrived at local time ``received`` to a call sent
at ``sent`` bounds the server's clock minus the local one: at least ``seen - received`` (the
time was stamped before the answer travelled back), and for a read time stamped when the call
arrived, at most ``seen - sent``. :meth:`ServerClock.now` returns the local clock plus the
tightest lower bound of the answers of the last :data:`FRESH`, never earlier than a time an
answer carried: the latest time the answers prove the server has reached.

So it is never ahead of the server's clock (a read time ahead is refused as "in the future",
and the read sent again after a pause: with the midpoint of the bounds, as NTP takes it, a
call queued at the server before its read time was stamped put the estimate ahead, and on a
busy emulator every chunk query of a page was refused twice and then split); it is behind by
the quickest way back of a recent answer, about half a round trip, plus the time the server
took between stamping that answer's time and sending it (an emulator's query scans: 45-70 ms
over 2 500 documents). A read at it sees every
write whose answer this process saw (the latest time an answer carried, a tsstore write's
commit time included, is kept apart from the bounds, so it is never before one; after a
write whose answer carried no time, a delete's, there is no estimate until a read sent after
it answers), and may
miss a write another client committed during the last half round trip or so; a read at the
server's time read first (``snapshots="read"``) misses none, for one round trip more. The
answer to a read at a time it was given carries that time back: it is told as a lower bound
only (``read=False``), and an upper bound, which only a read time stamped on arrival gives,
must be among the answers of the last :data:`FRESH` for an estimate. Bounds older than that
are dropped (clocks drift); with none left, the server's time is read.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections import deque
from collections.abc import Callable

#: How long an answer's bounds are used: without an answer in this long, a read of several
#: queries asks the server for its time again.
FRESH = dt.timedelta(seconds=30)
#: How long an answer's lower bound is used for :meth:`ServerClock.at_least` (clocks drift
#: by milliseconds in that long; what asks it, the age of a walk's snapshot, has minutes to spare).
HELD = dt.timedelta(hours=1)

_US = dt.timedelta(microseconds=1)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def local_us() -> int:
    """The local monotonic clock, in microseconds."""
    return time.monotonic_ns() // 1000


class ServerClock:
    """Bounds of the server's clock from recent answers (thread-safe); ``local``: the local
    clock, in microseconds (monotonic)."""

    def __init__(self, *, fresh: dt.timedelta = FRESH, local: Callable[[], int] = local_us) -> None:
        self._fresh = fresh // _US
        self._local = local
        self._lock = threading.Lock()
        # (local microseconds it arrived, server - local: at least, at most or None, the call's microseconds)
        self._bounds: deque[tuple[int, int, int | None, int | None]] = deque(maxlen=256)
        # The latest server time an answer carried and when it arrived, kept apart from the bounds:
        # 256 later answers stamped before it (reads sent before a write committed) cannot push it out.
        self._latest: tuple[int, int] | None = None
        # The tightest lower bound of server - local an answer of the last HELD gave, and when it arrived.
        self._floor: tuple[int, int] | None = None
        # When a write's answer carried no time (a delete's): no estimate until a read sent after it.
        self._unstamped: int | None = None

    def saw(self, server_time: dt.datetime | None, *, sent: int | None = None, read: bool = True) -> None:
        """Take the time an answer that just arrived carries (``None``: it had none);
        ``sent``: when its call was sent (local microseconds); ``read``: the time is a read
        time (stamped on arrival), not a commit time (stamped after the write's work)."""
        if server_time is None:
            return
        received = self._local()
        seen = (server_time - _EPOCH) // _US
        took = None if sent is None else received - sent
        with self._lock:
            if read and sent is not None and self._unstamped is not None and sent >= self._unstamped:
                self._unstamped = None  # a read time stamped after the unstamped write's answer came
            self._bounds.append((received, seen - received, seen - sent if sent is not None and read else None, took))
            if self._latest is None or seen >= self._latest[1]:
                self._latest = (received, seen)
            if self._floor is None or seen - received >= self._floor[1] or received - self._floor[0] > HELD // _US:
                self._floor = (received, seen - received)

    def unstamped(self) -> None:
        """A write's answer that just arrived carried no time (a delete's, in a ``BatchWrite``):
        :meth:`now` says ``None`` until a read time stamped on arrival answers a call sent
        after this, so the next read reads the server's time and sees the write. (Seen in the
        suite on a loaded emulator: a count at an estimate after a purge counted 35 of the
        152 ticks it had deleted.)"""
        with self._lock:
            self._unstamped = self._local()

    def round_trip(self) -> float | None:
        """The network's round trip in seconds, at most: the shortest call answered in the
        last :data:`FRESH` (a small read's is the round trip and next to no work); ``None``
        without one."""
        calls = [took for _, _, _, took in self._recent() if took is not None]
        return min(calls) / 1e6 if calls else None

    def now(self) -> dt.datetime | None:
        """The server's time now, at least: the local clock plus the tightest lower bound of
        the answers of the last :data:`FRESH` (and never before a time they carried); ``None``
        when there is no read time stamped on arrival among them."""
        local = self._local()
        recent = self._recent(local)
        if self._unstamped is not None or all(high is None for _, _, high, _ in recent):
            return None
        least = max(low for _, low, _, _ in recent)
        latest = max(at + low for at, low, _, _ in recent)  # the latest time a recent answer carried
        with self._lock:
            if self._latest is not None and local - self._latest[0] <= self._fresh:
                latest = max(latest, self._latest[1])
        return _EPOCH + max(local + least, latest) * _US

    def at_least(self) -> dt.datetime | None:
        """The server's time now, at least: the local clock plus the tightest lower bound an
        answer of the last :data:`HELD` gave (a read at a time it was given, a commit, or a
        read: each was stamped before its answer arrived), ``None`` without one; earlier than
        :meth:`now` by up to the spread of its bounds, and known as long as any answer arrives."""
        local = self._local()
        with self._lock:
            if self._floor is None or local - self._floor[0] > HELD // _US:
                return None
            return _EPOCH + (local + self._floor[1]) * _US

    def _recent(self, local: int | None = None) -> list[tuple[int, int, int | None, int | None]]:
        """The bounds of the answers of the last :data:`FRESH` (older ones are dropped)."""
        local = self._local() if local is None else local
        with self._lock:
            while self._bounds and local - self._bounds[0][0] > self._fresh:
                self._bounds.popleft()
            return list(self._bounds)


#: The server's time as seen on each (endpoint, project): every client and store of this
#: process on the project's databases share it, whatever the database mode.
_CLOCKS: dict[tuple[str, str], ServerClock] = {}
_CLOCKS_LOCK = threading.Lock()


def project_clock(endpoint: str, project: str) -> ServerClock:
    """The one clock of ``project`` on ``endpoint`` (an emulator's ``host:port``; ``""``:
    Google Cloud)."""
    with _CLOCKS_LOCK:
        return _CLOCKS.setdefault((endpoint, project), ServerClock())
