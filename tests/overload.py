"""A simulated Firestore that refuses writes beyond its capacity, on a fake clock, for the
throttling test and its benchmark (``bench/faults.py`` prints the same run's figures)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from tsstore.write.ramp import RampLimiter


class FakeClock:
    """A clock that only moves when told to, or when someone sleeps on it."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t
        self.sleeps: list[float] = []
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.t

    def sleep(self, seconds: float) -> None:
        assert seconds > 0, "the limiter must never busy-wait with a zero sleep"
        with self._lock:
            self.t += seconds
            self.sleeps.append(seconds)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.t += seconds


class OverloadedServer:
    """Accepts at most ``capacity(t)`` writes in each whole second ``t`` and refuses the rest
    with RESOURCE_EXHAUSTED (``None``: accepts everything)."""

    def __init__(self, capacity: Callable[[int], int | None]) -> None:
        self._capacity = capacity
        self._second = -1
        self._taken = 0

    def offer(self, now: float, writes: int) -> int:
        """How many of ``writes`` sent at ``now`` are refused."""
        second = int(now)
        if second != self._second:
            self._second, self._taken = second, 0
        room = self._capacity(second)
        if room is None:
            return 0
        accepted = max(0, min(writes, room - self._taken))
        self._taken += accepted
        return writes - accepted


@dataclass
class Second:
    """What one simulated second saw: writes sent, accepted, and the limiter's rate at its end."""

    sent: int = 0
    accepted: int = 0
    rate: float = 0.0


def drive(
    limiter: RampLimiter, clock: FakeClock, server: OverloadedServer, *, seconds: int, batch: int
) -> list[Second]:
    """A writer that always has work: take ``batch`` tokens, send, tell the limiter the answer."""
    seen = [Second() for _ in range(seconds)]
    while clock() < seconds:
        limiter.take(batch)
        now = clock()
        if now >= seconds:
            break
        refused = server.offer(now, batch)
        limiter.answered(sent=batch, refused=refused)
        at = seen[int(now)]
        at.sent += batch
        at.accepted += batch - refused
        at.rate = limiter.rate
    return seen
