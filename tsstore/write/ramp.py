"""The 500/50/5 ramp-up as a pure function and a thread-safe token bucket that follows it.

Firestore asks new write traffic to start at 500 operations/s and grow by at most 50 %
every 5 minutes ("500/50/5"). tsstore used google-cloud-firestore's private
``firestore_v1.rate_limiter.RateLimiter`` for this. That class is private API (it may change
in any release), not thread-safe, and it derives its phase from ``timedelta.seconds``, the
seconds field *within a day*: after 24 h of writing the phase counter falls back to 0. (Its
ceiling is kept, since it only ever grows its token maximum, but its phase bookkeeping is
wrong from then on and one growth step is lost each day.) This module replaces it:

* :func:`ramp_rate` is the rule itself, a pure function of the elapsed time, correct for
  any elapsed time (days, weeks, years) and free of overflow.
* :class:`RampLimiter` is a token bucket whose refill rate follows :func:`ramp_rate`. The
  design leaves room for a ramp shared by a distributed pipeline: every limiter may be given
  the same explicit ``start`` (so workers that join late land on the same step as the
  others), a ``share`` of the collection-wide rate (``1 / workers``), and an injectable
  clock (``time.time`` with a wall-clock start, to share one start across machines; the
  default ``time.monotonic`` is only comparable within one host). :meth:`RampLimiter.answered`
  hears how the server answered each request: while it refuses work as overload, the rate is
  capped near what it accepts (:mod:`tsstore.write.throttle`), and the cap lifts within
  seconds once it accepts again. A cut connection is not an answer and changes nothing.
  Coordinated throttling across workers, and changing the worker count while running, are
  not built yet (each worker throttles on what it hears itself).

The rate grows with *time since start*, whether or not the traffic used its allowance (the
client's class only grows after a phase with traffic). That is what lets many workers agree
on one schedule without talking to each other; a writer that falls idle for a long time and
wants to ramp from the bottom again should make a new limiter.

Nothing here talks to Firestore.
"""

from __future__ import annotations

import itertools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TypeGuard

from tsstore.errors import ConfigError
from tsstore.limits import RAMP_START_OPS_PER_SECOND
from tsstore.write.throttle import FLOOR_SHARE, Throttle

log = logging.getLogger(__name__)

__all__ = [
    "BUCKET_SECONDS",
    "RAMP_GROWTH",
    "RAMP_STEP_SECONDS",
    "RampLimiter",
    "ramp_rate",
]

#: The "50" of 500/50/5: each step multiplies the allowed rate by 1.5.
RAMP_GROWTH = 1.5

#: The "5" of 500/50/5: the rate may grow once every 5 minutes.
RAMP_STEP_SECONDS = 300.0

#: A full bucket holds this many seconds of the current rate: the largest burst a limiter
#: allows after a pause, and the largest request :meth:`RampLimiter.try_take` can grant
#: (:meth:`RampLimiter.take` serves larger ones). At share 1 it holds ``initial`` tokens or
#: more, so the writer's batches (at most ``initial`` documents) always fit.
BUCKET_SECONDS = 1.0

#: Token arithmetic is in floats; a request this close to being covered is granted, so a
#: waiter never loops on a rounding residue.
_TOKEN_TOLERANCE = 1e-6

#: Shortest sleep between checks, so a waiter never spins on sub-microsecond deficits that a
#: clock with coarse resolution (or large values, such as ``time.time()``) cannot show.
_MIN_SLEEP_SECONDS = 1e-3


def _is_real(value: object) -> TypeGuard[int | float]:
    """An int or float, not a bool (``True`` is an int to Python, never a rate to us)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(name: str, value: object, allowed: str, *, above: float = -math.inf, at_least: float = -math.inf) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a finite real number ``> above`` and ``>= at_least``."""
    if not (_is_real(value) and math.isfinite(value) and above < value and value >= at_least):
        raise ConfigError(f"{name} {value!r} is not allowed; {allowed}")


def _check_limiter(
    initial: int,
    ceiling: int,
    start: float | None,
    share: float,
    step_seconds: float,
    growth: float,
    clock: Callable[[], float],
    sleep: Callable[[float], object],
) -> None:
    """Refuse a limiter's options that are not what :class:`RampLimiter` allows."""
    for name, value in (("initial", initial), ("ceiling", ceiling)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} {value!r} is not allowed; give a positive integer of ops/s")
    if ceiling < initial:
        raise ConfigError(f"ceiling {ceiling!r} is not allowed; give an integer of ops/s >= initial ({initial!r})")
    _check_schedule(initial, ceiling, step_seconds, growth)
    if not _is_real(share) or not 0 < share <= 1:
        raise ConfigError(
            f"share {share!r} is not allowed; give this limiter's fraction of the collection's rate, "
            "0 < share <= 1 (1 / workers)"
        )
    if start is not None:
        _finite("start", start, "give None (first use) or a finite value of the limiter's clock")
    for name, fn in (("clock", clock), ("sleep", sleep)):
        if not callable(fn):
            raise ConfigError(f"{name} {fn!r} is not allowed; give a callable")


def _check_schedule(initial: float, ceiling: float, step_seconds: float, growth: float) -> None:
    """Raise :class:`ConfigError` unless the four numbers describe a ramp."""
    _finite("initial", initial, "give a finite number of ops/s > 0", above=0)
    _finite("ceiling", ceiling, f"give a finite number of ops/s >= initial ({initial!r})", at_least=initial)
    _finite("step_seconds", step_seconds, "give a finite number of seconds > 0", above=0)
    _finite("growth", growth, "give a finite factor >= 1 (1.5 grows by 50 % a step)", at_least=1)


def _ramp(elapsed: float, initial: float, ceiling: float, step_seconds: float, growth: float) -> float:
    """:func:`ramp_rate` without argument checks (for arguments checked once, up front).

    The exponent is compared with the number of steps that reach the ceiling *before*
    ``growth ** steps`` is computed, so a week or a year of elapsed time never overflows;
    below that number the power is at most about ``ceiling / initial``.
    """
    if growth == 1.0 or initial >= ceiling:
        return min(initial, ceiling)
    steps = elapsed / step_seconds  # may be inf for absurd inputs: then the ceiling is reached
    # Logarithms of each side, not of ceiling / initial, which may overflow to inf.
    if steps >= math.ceil((math.log(ceiling) - math.log(initial)) / math.log(growth)):
        return ceiling
    try:
        return min(ceiling, initial * growth ** math.floor(steps))
    except OverflowError:  # only for initial far below 1 with a ceiling near the float limit
        return ceiling


def ramp_rate(
    elapsed_seconds: float,
    *,
    initial: float,
    ceiling: float,
    step_seconds: float = RAMP_STEP_SECONDS,
    growth: float = RAMP_GROWTH,
) -> float:
    """Allowed ops/s after ``elapsed_seconds`` of traffic under the 500/50/5 rule.

    ``initial * growth ** floor(elapsed_seconds / step_seconds)``, never above ``ceiling``.
    The whole elapsed time counts (not a time of day), so after a day, a week or a month
    the rate is the ceiling, and the exponent is capped once the ceiling is reached, so it
    never overflows. ``elapsed_seconds`` may be ``inf`` (the ceiling).

    Raises :class:`~tsstore.errors.ConfigError` for a negative or NaN elapsed time, an
    ``initial`` that is not > 0, a ``ceiling`` below ``initial``, a ``step_seconds`` that is
    not > 0 or a ``growth`` below 1 (1 keeps the rate at ``initial``).

    >>> ramp_rate(0, initial=500, ceiling=10_000), ramp_rate(600, initial=500, ceiling=10_000)
    (500.0, 1125.0)
    >>> ramp_rate(30 * 86_400, initial=500, ceiling=10_000)
    10000.0
    """
    if not _is_real(elapsed_seconds) or math.isnan(elapsed_seconds) or elapsed_seconds < 0:
        raise ConfigError(f"elapsed_seconds {elapsed_seconds!r} is not allowed; give a number of seconds >= 0")
    _check_schedule(initial, ceiling, step_seconds, growth)
    return _ramp(float(elapsed_seconds), float(initial), float(ceiling), float(step_seconds), float(growth))


class RampLimiter:
    """A thread-safe token bucket whose refill rate follows :func:`ramp_rate`.

    ``initial`` and ``ceiling`` are collection-wide ops/s; this limiter grants ``share``
    of them (``0 < share <= 1``; ``1 / workers`` when that many workers write to one
    collection, each with its own limiter). The ramp is measured from ``start``, a value of
    ``clock``: by default the first :meth:`take`/:meth:`try_take`/:meth:`answered`; give
    the same explicit ``start`` to many limiters to put them on one schedule, so a worker
    that joins late starts on the current step rather than at the bottom. ``start`` and
    ``clock`` must agree: ``time.monotonic`` values are only comparable within one host,
    so a start shared across machines needs ``clock=time.time`` and a wall-clock start.
    Before ``start`` the rate is the initial one.

    The bucket starts full at first use and holds :data:`BUCKET_SECONDS` of the current
    rate, so in any window of ``T`` seconds a limiter grants at most the integral of its
    rate over the window plus one bucket. A request larger than the bucket is still served
    by :meth:`take`: while it is first in line the bucket may fill up to its size (it then
    waits ``n / rate`` seconds from empty), so ``take(n)`` never deadlocks, whatever ``n``
    and the share. :meth:`try_take` never waits, so it cannot grant such a request until
    the rate has grown enough.

    :meth:`take` serves waiters first come, first served: a small request cannot overtake
    a large one, and :meth:`try_take` fails while anyone waits. ``sleep`` is called
    (without the lock held) for every wait; a ``sleep`` that raises (for example to stop
    on Ctrl-C) abandons that :meth:`take`, which then leaves the line and takes nothing.

    ``step_seconds`` and ``growth`` default to the 500/50/5 rule. While the server refuses
    work as overload (:meth:`answered`), the rate is also capped near what it accepts, never
    below a tenth of this limiter's share of 500 ops/s (:mod:`tsstore.write.throttle`).
    """

    def __init__(
        self,
        *,
        initial: int = RAMP_START_OPS_PER_SECOND,
        ceiling: int,
        start: float | None = None,
        share: float = 1.0,
        step_seconds: float = RAMP_STEP_SECONDS,
        growth: float = RAMP_GROWTH,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], object] = time.sleep,
    ) -> None:
        _check_limiter(initial, ceiling, start, share, step_seconds, growth, clock, sleep)
        self._initial = float(initial)
        self._ceiling = float(ceiling)
        self._step = float(step_seconds)
        self._growth = float(growth)
        self._share = float(share)
        self._start = None if start is None else float(start)
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = 0.0
        self._last: float | None = None  # clock value up to which tokens were added; None before first use
        self._waiters: deque[tuple[int, int]] = deque()  # (ticket, n) of take() calls, in arrival order
        self._tickets = itertools.count()
        # The floor is a share of Firestore's starting rate even for a limiter that starts
        # higher (ramp=False): how much an overloaded database takes does not depend on it.
        self._throttle = Throttle(floor=min(self._initial, RAMP_START_OPS_PER_SECOND) * self._share * FLOOR_SHARE)
        self._cap: float | None = None  # the throttle's cap as of the last refill or answer

    # ------------------------------------------------------------------ public

    @property
    def start(self) -> float | None:
        """The clock value the ramp is measured from (``None`` before first use if none was given)."""
        with self._lock:
            return self._start

    @property
    def share(self) -> float:
        """This limiter's fraction of the collection-wide rate."""
        return self._share

    @property
    def rate(self) -> float:
        """Ops/s this limiter grants now: its share of the ramp, capped while throttled."""
        with self._lock:
            if self._start is None:
                return self._initial * self._share
            now = float(self._clock())
            self._recap(now)
            return self._rate_at(now)

    @property
    def throttled(self) -> tuple[float, float] | None:
        """``(rate, ramp)`` while the throttle holds the rate below the ramp, else ``None``."""
        with self._lock:
            if self._start is None:
                return None
            now = float(self._clock())
            self._recap(now)
            ramp = self._main_rate(now)
            return None if self._cap is None or self._cap >= ramp else (self._cap, ramp)

    @property
    def refused(self) -> int:
        """Writes the server has refused as overload so far (see :meth:`answered`)."""
        with self._lock:
            return self._throttle.refused_total

    def take(self, n: int) -> None:
        """Wait until ``n`` tokens are available, then take them (``n = 0`` returns at once)."""
        _check_count(n)
        if n == 0:
            return
        with self._lock:
            ticket = next(self._tickets)
            self._waiters.append((ticket, n))
        served = False
        try:
            while True:
                with self._lock:
                    now = self._now()
                    self._refill(now)
                    if self._waiters[0][0] == ticket and self._tokens + _TOKEN_TOLERANCE >= n:
                        self._waiters.popleft()
                        self._tokens -= n
                        served = True
                        return
                    delay = self._delay(ticket, now)
                self._sleep(delay)
        finally:
            if not served:
                with self._lock:
                    self._waiters.remove((ticket, n))
                    if self._last is not None:
                        self._tokens = min(self._tokens, self._capacity(self._rate_at(self._last)))

    def try_take(self, n: int) -> bool:
        """Take ``n`` tokens if they are available now and nobody waits in :meth:`take`."""
        _check_count(n)
        with self._lock:
            now = self._now()
            self._refill(now)
            if self._waiters or self._tokens + _TOKEN_TOLERANCE < n:
                return False
            self._tokens -= n
            return True

    def answered(self, *, sent: int, refused: int) -> None:
        """The server answered a request of ``sent`` writes and refused ``refused`` of them as
        overload (RESOURCE_EXHAUSTED, ABORTED contention). Refusals above a fifth of the
        answers in the last seconds cap the rate near what was accepted; tokens beyond the
        smaller bucket are dropped, so no burst follows. Never call it for a call that failed
        without an answer (a cut connection): that says nothing about the server's load."""
        _check_count(sent)
        _check_count(refused)
        with self._lock:
            now = self._now()
            self._refill(now)
            self._throttle.answered(now, sent=sent, refused=refused)
            self._recap(now)
            self._tokens = min(self._tokens, self._capacity(self._rate_at(now)))

    # ------------------------------------------------------------------ internals (lock held)

    def _now(self) -> float:
        """The clock's time; the first call starts the ramp (if no start was given) and fills the bucket."""
        now = float(self._clock())
        if self._last is None:
            if self._start is None:
                self._start = now
            self._last = now
            self._tokens = self._rate_at(now) * BUCKET_SECONDS
        return now

    def _main_rate(self, t: float) -> float:
        assert self._start is not None
        elapsed = max(0.0, t - self._start)
        return _ramp(elapsed, self._initial, self._ceiling, self._step, self._growth) * self._share

    def _rate_at(self, t: float) -> float:
        rate = self._main_rate(t)
        return rate if self._cap is None else min(rate, self._cap)

    def _capacity(self, rate: float) -> float:
        """One bucket at ``rate``, enlarged to the request first in line so it can be served."""
        head = self._waiters[0][1] if self._waiters else 0
        return max(rate * BUCKET_SECONDS, float(head))

    def _next_change(self, t: float) -> float:
        """The first clock value after ``t`` at which the ramp steps (``inf`` if never)."""
        if self._main_rate(t) >= self._ceiling * self._share:
            return math.inf
        assert self._start is not None
        boundary = self._start + (math.floor(max(0.0, t - self._start) / self._step) + 1) * self._step
        return boundary if boundary > t else math.nextafter(t, math.inf)

    def _refill(self, now: float) -> None:
        """Add the tokens the rate earned since the last refill, one constant-rate segment at a time.

        Segments end where the ramp steps, so a refill after a long pause credits each step at
        its own rate. Their number is bounded by the steps still below the ceiling, not by the
        length of the pause. A throttle's cap applies as it stood at the last refill (answers
        arrive often while it matters) and is then brought up to date for ``now``. A clock
        that went backwards adds nothing until it passes the last refill again.
        """
        assert self._last is not None
        t = self._last
        while t < now:
            end = min(now, self._next_change(t))
            mid = t + (end - t) / 2  # inside the segment: immune to rounding at its boundaries
            rate = self._rate_at(mid)
            self._tokens = min(self._capacity(rate), self._tokens + rate * (end - t))
            t = end
        self._last = max(self._last, now)
        self._recap(now)

    def _recap(self, now: float) -> None:
        """The throttle's cap brought up to date for ``now``, and a record when it starts or
        stops holding the rate."""
        cap = self._throttle.cap(now)
        if cap is not None and self._cap is None:
            log.warning("Firestore refuses writes as overload (%d so far): at most %.0f ops/s while it does",
                        self._throttle.refused_total, cap)  # fmt: skip
        elif cap is None and self._cap is not None:
            log.info("Firestore takes writes again: the rate follows the ramp, now %.0f ops/s", self._main_rate(now))
        self._cap = cap

    def _delay(self, ticket: int, now: float) -> float:
        """How long the waiter ``ticket`` should sleep before looking again.

        Long enough for the tokens of everyone ahead of it and its own to accrue at the
        current rate, but never past the next rate change (after which they accrue faster):
        a ramp step, or, while throttled, the moment the oldest answer leaves the throttle's
        window.
        """
        demand = 0
        for waiting, n in self._waiters:
            demand += n
            if waiting == ticket:
                break
        rate = self._rate_at(now)
        delay = (demand - self._tokens) / rate
        change = self._next_change(now)
        if self._cap is not None:
            change = min(change, self._throttle.next_change())
        return max(_MIN_SLEEP_SECONDS, min(delay, change - now))


def _check_count(n: object) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ConfigError(f"n {n!r} is not allowed; give an integer number of tokens >= 0")
