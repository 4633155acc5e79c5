"""How many batches a sender keeps in flight: enough to keep its pace across the network.

A batch is in flight for the server's work plus a round trip. :data:`LEAST` batches keep the
server busy where the round trip is nothing (the writer's four threads of before, measured on
the loopback by bench/write.py); a round trip of ``r`` seconds away, sending ``rate``
documents a second in batches of ``batch_docs`` needs about ``rate * r / batch_docs`` more on
the wire (Little's law: the bandwidth-delay product of TCP), times :data:`SPREAD` for the
spread of the calls' times, ``r`` less the part of a call that is the client's and the
server's own work (:data:`NEAR_SECONDS`). The round trip is the network's, measured on small
calls (:meth:`tsstore.clock.ServerClock.round_trip`), not the time a batch takes: that
includes the server's queue, which more batches in flight would lengthen, and a window sized
from it would grow its own wait (bufferbloat). The window stays within :data:`MOST` batches
and :data:`BUDGET_BYTES` of documents sending; the sender keeps as many ready behind them, so
memory stays within twice that.
"""

from __future__ import annotations

import math
from collections.abc import Callable

#: Batches in flight at least (what the loopback needs), and at most.
LEAST, MOST = 4, 32
#: The documents in flight at most, in bytes.
BUDGET_BYTES = 64 * 1024 * 1024
#: The product's multiple kept in flight: through a proxy 80 ms away (bench/distance.py), 1.25
#: kept 0.79 of the rate through the same proxy at 0 ms, 3 kept 0.97 and 10 kept 0.93.
SPREAD = 3.0
#: The part of a round trip that :data:`LEAST` batches already cover: the client's and the
#: server's own work on a call (6-11 ms for a one-document read through the Python client
#: on the loopback, measured), which is not time on the wire.
NEAR_SECONDS = 0.015


def _unknown() -> float | None:
    return None


class Window:
    """The batches to keep in flight; ``round_trip`` gives the network's round trip in seconds
    (``None`` while unknown: then :data:`LEAST`)."""

    def __init__(
        self,
        *,
        round_trip: Callable[[], float | None] = _unknown,
        least: int = LEAST,
        most: int = MOST,
        budget_bytes: int = BUDGET_BYTES,
    ) -> None:
        self.round_trip, self.least, self.most, self.budget_bytes = round_trip, least, most, budget_bytes

    def size(self, *, rate: float, batch_docs: int, batch_bytes: int) -> int:
        """Batches to keep in flight to send ``rate`` documents a second in batches of
        ``batch_docs`` documents and about ``batch_bytes`` bytes."""
        seconds = self.round_trip()
        seconds = None if seconds is None else seconds - NEAR_SECONDS
        if seconds is None or seconds <= 0:
            on_the_wire = 0
        elif not math.isfinite(rate):  # an unbounded pace: the most allowed
            on_the_wire = self.most
        else:
            on_the_wire = math.ceil(SPREAD * rate * seconds / max(1, batch_docs))
        by_bytes = max(1, self.budget_bytes // max(1, batch_bytes))
        return max(1, min(self.least + on_the_wire, self.most, by_bytes))
