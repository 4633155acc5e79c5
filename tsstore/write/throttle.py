"""Adaptive throttling: a writer's rate follows what Firestore accepts while it refuses work.

When Firestore answers writes with RESOURCE_EXHAUSTED (or ABORTED contention), the writer
should send less, and only while that lasts. The rule is the client-side throttling of
Google's SRE book (which Beam's Java Firestore connector also follows), written as a rate
for a token bucket:

* Over the last :data:`WINDOW_SECONDS`, count the writes the server *answered*: ``sent``,
  and ``accepted`` (not refused as overload). Calls that failed without an answer (a cut
  connection) are not counted at all: they say nothing about the server's load.
* While the window holds refusals, the rate is capped at ``K * accepted / window``
  (K = :data:`OVERLOAD_RATIO`): a quarter above what the server took, so a server that
  recovers is noticed, and never below the floor (:data:`FLOOR_SHARE` of Firestore's
  starting rate of 500 ops/s, so a writer always makes some progress and never decays
  towards zero). The cap only bites once more than 1 - 1/K = 20 % of the answers are
  refusals (below that it is above what is sent); at a steady overload the writer sends
  K times what the server takes, and the cap is continuous, so it does not oscillate.
* Without refusals in the window there is no cap. Refusals leave the window after
  :data:`WINDOW_SECONDS`, so the writer is back on its ramp within that time once the
  server accepts again (the cap grows with what is accepted meanwhile), not after minutes
  of regrowth.

The ramp (:mod:`tsstore.write.ramp`) still bounds everything from above: throttling only
ever lowers the rate. Nothing here talks to Firestore; the clock is the caller's.
"""

from __future__ import annotations

from collections import deque

__all__ = ["FLOOR_SHARE", "OVERLOAD_RATIO", "WINDOW_SECONDS", "Throttle"]

#: How far back answers count. Short enough that a recovered server gets the full rate back
#: within seconds, long enough to hold several answers of a slow writer.
WINDOW_SECONDS = 10.0
#: "K" of the SRE book's client-side throttling: the rate is capped at K times what the
#: server accepted, so up to 1 - 1/K of the answers may be refusals before it bites.
OVERLOAD_RATIO = 1.25
#: A capped rate is never below this share of Firestore's starting rate (50 ops/s of 500):
#: Firestore asks writers to start at 500 ops/s, so a tenth of that is a trickle any
#: database takes, and it keeps probing whether the overload is over.
FLOOR_SHARE = 0.1
#: The accepted rate is measured over at least this many seconds, so the first answers after
#: a quiet spell do not make a tiny window look like a huge rate (or a tiny one).
_MIN_SPAN_SECONDS = 1.0


class Throttle:
    """The accept-ratio cap of one writer (not thread-safe: its owner holds a lock).

    :meth:`answered` records one answered request; :meth:`cap` is the rate cap at a time
    (``None``: none), never below ``floor``.
    """

    def __init__(self, *, floor: float, window: float = WINDOW_SECONDS, ratio: float = OVERLOAD_RATIO) -> None:
        self.floor, self._window, self._ratio = floor, window, ratio
        self._answers: deque[tuple[float, int, int]] = deque()  # (when, sent, refused)
        self._sent = 0
        self._refused = 0
        self.refused_total = 0

    def answered(self, now: float, *, sent: int, refused: int) -> None:
        """The server answered ``sent`` writes at ``now``, refusing ``refused`` of them as overload."""
        if sent <= 0:
            return
        self._expire(now)
        self._answers.append((now, sent, refused))
        self._sent += sent
        self._refused += refused
        self.refused_total += refused

    def cap(self, now: float) -> float | None:
        """The most ops/s to send at ``now`` while the server refuses work, or ``None``."""
        self._expire(now)
        if not self._refused:
            return None
        accepted = self._sent - self._refused
        span = max(_MIN_SPAN_SECONDS, now - self._answers[0][0])
        return max(self.floor, self._ratio * accepted / span)

    def next_change(self) -> float:
        """When the cap may change without a new answer (the oldest answer leaves the window)."""
        return self._answers[0][0] + self._window if self._answers else float("inf")

    def _expire(self, now: float) -> None:
        while self._answers and self._answers[0][0] <= now - self._window:
            _, sent, refused = self._answers.popleft()
            self._sent -= sent
            self._refused -= refused
