"""Pure tests of the 500/50/5 ramp (tsstore.write.ramp): the rate rule and the token bucket.

No Firestore and no real sleeping: every limiter runs on a fake clock whose ``sleep``
advances it.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.overload import FakeClock, OverloadedServer, drive
from tsstore.errors import ConfigError
from tsstore.limits import RAMP_START_OPS_PER_SECOND
from tsstore.write.ramp import (
    RAMP_GROWTH,
    RAMP_STEP_SECONDS,
    RampLimiter,
    ramp_rate,
)
from tsstore.write.throttle import OVERLOAD_RATIO, WINDOW_SECONDS

MINUTE = 60.0
HOUR = 3600.0
DAY = 86_400.0
CEILING = 10_000


def limiter(clock: FakeClock, **kwargs: Any) -> RampLimiter:
    kwargs.setdefault("ceiling", CEILING)
    return RampLimiter(clock=clock, sleep=clock.sleep, **kwargs)


def integral(
    a: float,
    b: float,
    *,
    initial: float,
    ceiling: float,
    start: float = 0.0,
    share: float = 1.0,
    step: float = RAMP_STEP_SECONDS,
) -> float:
    """Tokens a limiter earns between clock values ``a`` and ``b`` (computed independently:
    whole ramp steps, each at the rate ``ramp_rate`` gives at its middle)."""
    total, t = 0.0, a
    while t < b:
        boundary = start + (math.floor(max(0.0, t - start) / step) + 1) * step
        end = min(b, boundary)
        total += ramp_rate(max(0.0, (t + end) / 2 - start), initial=initial, ceiling=ceiling, step_seconds=step) * (
            end - t
        )
        t = end
    return total * share


# ---------------------------------------------------------------- ramp_rate


@pytest.mark.parametrize(
    ("elapsed", "ceiling", "expected"),
    [
        (0, CEILING, 500),
        (299, CEILING, 500),
        (300, CEILING, 750),
        (600, CEILING, 1125),
        (HOUR, CEILING, CEILING),  # 500 * 1.5**12 = 64 873 is over the ceiling
        (HOUR, 10**9, 500 * 1.5**12),
        (23 * HOUR + 59 * MINUTE, CEILING, CEILING),
        (DAY + 1, CEILING, CEILING),  # a time-of-day phase (timedelta.seconds) would give 500 here
        (DAY + 1, 1e300, 500 * 1.5**288),  # uncapped: step 288, not step 0 of a new day
        (30 * DAY, CEILING, CEILING),
        (30 * DAY, 1e300, 1e300),
    ],
)
def test_ramp_rate_table(elapsed: float, ceiling: float, expected: float) -> None:
    assert ramp_rate(elapsed, initial=RAMP_START_OPS_PER_SECOND, ceiling=ceiling) == pytest.approx(expected, rel=1e-12)


def test_ramp_rate_defaults_are_500_50_5() -> None:
    assert (RAMP_START_OPS_PER_SECOND, RAMP_GROWTH, RAMP_STEP_SECONDS) == (500, 1.5, 300.0)
    assert ramp_rate(299.999, initial=500, ceiling=CEILING) == 500
    assert ramp_rate(300, initial=500, ceiling=CEILING) == 500 * RAMP_GROWTH


def test_ramp_rate_stays_at_the_ceiling_for_ever_without_overflow() -> None:
    for elapsed in (DAY * 7, DAY * 365 * 100, 1e18, 1e308, math.inf):
        assert ramp_rate(elapsed, initial=500, ceiling=CEILING) == CEILING
        assert ramp_rate(elapsed, initial=500, ceiling=1e300, growth=10.0) == 1e300
        assert ramp_rate(elapsed, initial=1e-300, ceiling=1e308, step_seconds=1e-300, growth=1e10) == 1e308


def test_ramp_rate_with_growth_one_or_initial_at_ceiling_is_flat() -> None:
    assert ramp_rate(30 * DAY, initial=500, ceiling=CEILING, growth=1.0) == 500
    assert ramp_rate(0, initial=CEILING, ceiling=CEILING) == CEILING


@settings(max_examples=300, deadline=None)
@given(
    a=st.floats(min_value=0, max_value=1e12),
    b=st.floats(min_value=0, max_value=1e12),
    initial=st.floats(min_value=1e-3, max_value=1e6),
    headroom=st.floats(min_value=1.0, max_value=1e6),
    step=st.floats(min_value=1e-3, max_value=1e5),
    growth=st.floats(min_value=1.0, max_value=10.0),
)
def test_ramp_rate_is_bounded_monotone_and_grows_by_one_factor_a_step(
    a: float, b: float, initial: float, headroom: float, step: float, growth: float
) -> None:
    ceiling = initial * headroom
    lo, hi = sorted((a, b))
    kw = {"initial": initial, "ceiling": ceiling, "step_seconds": step, "growth": growth}
    r_lo, r_hi = ramp_rate(lo, **kw), ramp_rate(hi, **kw)
    assert initial <= r_lo <= r_hi <= ceiling
    # One step later the rate is one growth factor higher, or the ceiling.
    r_next = ramp_rate(lo + step, **kw)
    if lo + step != lo and math.floor((lo + step) / step) == math.floor(lo / step) + 1:
        assert r_next == pytest.approx(min(ceiling, r_lo * growth), rel=1e-9)


# ---------------------------------------------------------------- RampLimiter: rate and start


def test_default_start_is_the_first_use() -> None:
    clock = FakeClock(1000.0)
    lim = limiter(clock)
    assert lim.start is None and lim.rate == 500
    clock.advance(HOUR)  # created long ago, but unused: the ramp has not begun
    assert lim.rate == 500
    assert lim.try_take(1)
    assert lim.start == 1000.0 + HOUR
    clock.advance(300)
    assert lim.rate == 750


def test_a_day_of_continuous_writing_ends_at_the_ceiling_not_back_at_500() -> None:
    clock = FakeClock()
    lim = limiter(clock)
    previous = 0.0
    for _ in range(int(DAY / MINUTE) + 2):  # one take a minute, for a day and two minutes
        assert lim.try_take(100)
        assert lim.rate >= previous  # the rate never falls back at the day's end
        previous = lim.rate
        clock.advance(MINUTE)
    assert clock.t > DAY + 1 and lim.rate == CEILING
    # And the bucket grants the ceiling's worth after a second of it.
    clock.advance(1.0)
    assert lim.try_take(CEILING) and not lim.try_take(1)


def test_an_explicit_start_puts_late_limiters_on_the_same_step() -> None:
    clock = FakeClock(500.0)
    early = limiter(clock, start=100.0)
    assert early.try_take(1) and early.rate == 750  # 400 s after the shared start
    clock.advance(250)  # 650 s after it
    late = limiter(clock, start=early.start)
    assert late.rate == early.rate == 1125
    assert late.try_take(1125) and not late.try_take(1)  # its first bucket is one second at 1125/s


def test_before_an_explicit_start_the_rate_is_the_initial_one() -> None:
    clock = FakeClock(0.0)
    lim = limiter(clock, start=1000.0)
    assert lim.rate == 500 and lim.try_take(500) and not lim.try_take(1)
    clock.advance(1000 + 299)
    assert lim.rate == 500
    clock.advance(1)
    assert lim.rate == 750


def test_share_divides_the_rate_and_the_bucket() -> None:
    clock = FakeClock()
    workers = [limiter(clock, initial=500, ceiling=2000, start=0.0, share=0.25) for _ in range(4)]
    assert [w.rate for w in workers] == [125.0] * 4
    assert all(w.try_take(125) and not w.try_take(1) for w in workers)
    clock.advance(300)
    assert sum(w.rate for w in workers) == ramp_rate(300, initial=500, ceiling=2000) == 750
    clock.advance(30 * DAY)
    assert sum(w.rate for w in workers) == 2000


# ---------------------------------------------------------------- RampLimiter: what the bucket grants


@pytest.mark.parametrize("share", [1.0, 0.3])
def test_tokens_over_a_simulated_minute_never_exceed_the_integral_of_the_rate(share: float) -> None:
    """A greedy caller polls every 5 ms across a ramp step (elapsed 270 s to 330 s). It gets
    at most the first bucket plus the integral of the rate, and (being greedy) no less than
    that minus one request."""
    clock = FakeClock(0.0)
    start = -270.0
    lim = limiter(clock, start=start, share=share)
    burst = 500 * share
    request = 7
    taken = 0
    while clock.t < MINUTE:
        while lim.try_take(request):
            taken += request
        allowed = burst + integral(0.0, clock.t, initial=500, ceiling=CEILING, start=start, share=share)
        assert taken <= allowed + 1e-6
        assert taken > allowed - request
        clock.advance(0.005)
    # 30 s at 500/s and 30 s at 750/s, times the share, plus the first bucket.
    assert taken == pytest.approx(share * (500 + 30 * 500 + 30 * 750), abs=2 * request)


def test_a_refill_after_a_pause_credits_each_step_at_its_own_rate() -> None:
    clock = FakeClock()
    lim = limiter(clock, start=-299.9)
    assert lim.try_take(500) and not lim.try_take(1)
    clock.advance(0.2)  # 0.1 s at 500/s, then 0.1 s at 750/s
    assert lim.try_take(125) and not lim.try_take(1)
    clock.advance(3 * DAY)  # a long pause: a full bucket at the ceiling, computed in a few steps
    assert lim.try_take(CEILING) and not lim.try_take(1)


@settings(max_examples=150, deadline=None)
@given(
    share=st.sampled_from([1.0, 0.5, 0.1]),
    ops=st.lists(
        st.tuples(st.floats(min_value=0, max_value=3), st.integers(min_value=0, max_value=1200), st.booleans()),
        max_size=40,
    ),
)
def test_any_sequence_of_requests_stays_within_the_integral(share: float, ops: list[tuple[float, int, bool]]) -> None:
    clock = FakeClock()
    lim = limiter(clock, initial=500, ceiling=2000, step_seconds=10.0, share=share, start=0.0)
    taken = 0
    for pause, n, blocking in ops:
        clock.advance(pause)
        if blocking:
            lim.take(n)
            taken += n
        elif lim.try_take(n):
            taken += n
        allowed = 500 * share + integral(0.0, clock.t, initial=500, ceiling=2000, share=share, step=10.0)
        assert taken <= allowed + 1e-6 * (1 + len(ops))


# ---------------------------------------------------------------- RampLimiter: take() waits


def test_take_waits_exactly_for_the_missing_tokens() -> None:
    clock = FakeClock()
    lim = limiter(clock)
    lim.take(500)
    assert clock.sleeps == []  # the first bucket is there at once
    lim.take(500)
    assert sum(clock.sleeps) == pytest.approx(1.0)
    lim.take(250)
    assert sum(clock.sleeps) == pytest.approx(1.5)
    lim.take(0)
    assert sum(clock.sleeps) == pytest.approx(1.5)


def test_take_wakes_at_a_ramp_step_to_use_the_faster_rate() -> None:
    clock = FakeClock()
    lim = limiter(clock, start=-299.5)
    lim.take(500)  # empty bucket, half a second before the step to 750/s
    lim.take(500)
    # 0.5 s at 500/s (250 tokens), then the other 250 at 750/s.
    assert clock.sleeps[0] == pytest.approx(0.5)
    assert sum(clock.sleeps) == pytest.approx(0.5 + 250 / 750)


def test_a_request_larger_than_the_bucket_is_served_by_take_not_try_take() -> None:
    clock = FakeClock()
    lim = limiter(clock, share=0.01)  # 5 ops/s for this worker, a bucket of 5
    assert lim.try_take(5)
    assert not lim.try_take(500)
    lim.take(500)  # no deadlock: the bucket fills up to the request while it waits
    assert clock.t == pytest.approx(100.0)
    assert not lim.try_take(1)  # and it was emptied by it


def test_waiters_are_served_in_order_and_try_take_does_not_overtake() -> None:
    clock = FakeClock()
    overtook: list[bool] = []
    holder: list[RampLimiter] = []

    def sleep(seconds: float) -> None:
        clock.advance(seconds)
        overtook.append(holder[0].try_take(1))  # someone else, while take() waits

    lim = RampLimiter(ceiling=CEILING, clock=clock, sleep=sleep)
    holder.append(lim)
    lim.take(500)
    lim.take(400)
    assert overtook and not any(overtook)
    assert not lim.try_take(1)  # the 400 went to the waiter, nothing was left over


def test_an_abandoned_take_leaves_the_line_and_keeps_no_tokens() -> None:
    class Stop(Exception):
        pass

    clock = FakeClock()

    def sleep_then_stop(seconds: float) -> None:
        clock.advance(50.0)  # the bucket grows towards the 500 requested...
        raise Stop  # ...then the caller gives up (e.g. Ctrl-C)

    lim = RampLimiter(ceiling=CEILING, clock=clock, sleep=sleep_then_stop, share=0.01)  # 5 ops/s
    assert lim.try_take(5)
    with pytest.raises(Stop):
        lim.take(500)
    assert lim.try_take(5)  # not blocked behind the abandoned request...
    assert not lim.try_take(1)  # ...and the bucket is back to one second's worth


# ---------------------------------------------------------------- RampLimiter: threads


@pytest.fixture
def fast_thread_switching() -> Iterator[None]:
    """Switch threads as often as possible, so races would show."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def run_threads(count: int, target: Callable[[int], None]) -> None:
    barrier = threading.Barrier(count)

    def run(i: int) -> None:
        barrier.wait()
        target(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()


def test_threads_taking_at_once_get_exactly_the_bucket(fast_thread_switching: None) -> None:
    clock = FakeClock()
    lim = limiter(clock, initial=5000, ceiling=5000)
    counts = [0] * 8

    def grab(i: int) -> None:
        while lim.try_take(1):
            counts[i] += 1

    run_threads(8, grab)
    assert sum(counts) == 5000  # the first bucket, no token spent twice or lost
    for _ in range(4):
        clock.advance(0.5)
        counts = [0] * 8
        run_threads(8, grab)
        assert sum(counts) == 2500


def test_threads_blocking_in_take_never_get_more_than_the_rate_allows(fast_thread_switching: None) -> None:
    clock = FakeClock()
    lim = limiter(clock)
    grants: list[tuple[float, int]] = []
    grants_lock = threading.Lock()

    def work(i: int) -> None:
        for _ in range(10):
            lim.take(20)
            with grants_lock:
                grants.append((clock(), 20))

    run_threads(8, work)
    assert sum(n for _, n in grants) == 8 * 10 * 20
    taken = 0
    for when, n in sorted(grants):
        taken += n
        assert taken <= 500 + integral(0.0, when, initial=500, ceiling=CEILING) + 1e-6


# ---------------------------------------------------------------- RampLimiter: throttling


def overload_run(capacity: int) -> tuple[list[float], list[float]]:
    """5 000 writes/s (no ramp) to a server that takes ``capacity`` a second from 20 s to 60 s
    and everything before and after: the rate and the accepted writes each second."""
    clock = FakeClock()
    lim = limiter(clock, initial=5000, ceiling=5000)
    server = OverloadedServer(lambda second: capacity if 20 <= second < 60 else None)
    seconds = drive(lim, clock, server, seconds=90, batch=50)
    return [s.rate for s in seconds], [s.accepted for s in seconds]


def test_under_refusals_the_rate_settles_near_what_the_server_accepts_and_comes_back_after() -> None:
    rates, accepted = overload_run(1000)
    assert all(r == 5000 for r in rates[:20])  # before: the ramp (here flat)
    # During: the rate settles at K times what is accepted (the SRE book's client-side
    # throttling), within one window of the first refusals, and stays there.
    settled = rates[20 + int(WINDOW_SECONDS) + 2 : 60]
    assert all(OVERLOAD_RATIO * 1000 * 0.9 <= r <= OVERLOAD_RATIO * 1000 * 1.1 for r in settled), settled
    assert all(a == 1000 for a in accepted[22:60])  # the server's capacity is used in full
    # After: back to the ramp within one window once the server accepts again.
    back = rates[60 + int(WINDOW_SECONDS) + 1 :]
    assert back and all(r == 5000 for r in back), back


def test_the_throttle_never_takes_the_rate_below_its_floor() -> None:
    rates, accepted = overload_run(5)  # a server that takes almost nothing
    assert min(rates[20:60]) == 50  # a tenth of Firestore's 500 ops/s start
    assert all(r == 5000 for r in rates[60 + int(WINDOW_SECONDS) + 1 :])


def test_a_few_refusals_change_nothing() -> None:
    clock = FakeClock()
    lim = limiter(clock, initial=500, ceiling=1000)
    for _ in range(100):  # one write in 50 refused: retried, not throttled
        lim.take(50)
        lim.answered(sent=50, refused=1)
    assert lim.throttled is None and lim.rate == ramp_rate(clock(), initial=500, ceiling=1000)
    assert lim.refused == 100


def test_throttling_never_raises_the_rate_above_the_ramp() -> None:
    clock = FakeClock()
    lim = limiter(clock, initial=500, ceiling=CEILING)
    clock.advance(1.0)
    lim.answered(sent=100_000, refused=1)  # a huge accepted rate: a cap far above the ramp
    assert lim.rate == 500 and lim.throttled is None


def test_throttling_drops_tokens_above_the_smaller_bucket() -> None:
    clock = FakeClock()
    lim = limiter(clock)
    assert lim.try_take(1)  # full bucket: 499 left
    lim.answered(sent=400, refused=300)  # 100 accepted within 1 s: capped at 125 ops/s
    assert lim.throttled == (125, 500)
    assert not lim.try_take(126) and lim.try_take(125)


def test_a_clock_going_backwards_adds_nothing() -> None:
    clock = FakeClock(100.0)
    lim = limiter(clock)
    assert lim.try_take(500)
    clock.t = 50.0
    assert not lim.try_take(1)
    clock.t = 100.5  # only the half second after the last refill counts
    assert lim.try_take(250) and not lim.try_take(1)


# ---------------------------------------------------------------- argument errors


def _limiter(**kwargs: Any) -> Callable[[], object]:
    return lambda: RampLimiter(**{"ceiling": CEILING, **kwargs})


def _rate(elapsed: Any = 0, **kwargs: Any) -> Callable[[], object]:
    return lambda: ramp_rate(elapsed, **{"initial": 500, "ceiling": CEILING, **kwargs})


def _method(name: str, *args: Any) -> Callable[[], object]:
    return lambda: getattr(RampLimiter(ceiling=CEILING, clock=FakeClock()), name)(*args)


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (_rate(-1), ["elapsed_seconds -1", ">= 0"]),
        (_rate(math.nan), ["elapsed_seconds nan", ">= 0"]),
        (_rate("5"), ["elapsed_seconds '5'"]),
        (_rate(initial=0), ["initial 0", "> 0"]),
        (_rate(initial=math.inf), ["initial inf", "finite"]),
        (_rate(ceiling=100), ["ceiling 100", ">= initial (500)"]),
        (_rate(step_seconds=0), ["step_seconds 0", "> 0"]),
        (_rate(growth=0.5), ["growth 0.5", ">= 1"]),
        (_rate(growth=math.nan), ["growth nan", ">= 1"]),
        (_limiter(initial=0), ["initial 0", "positive integer"]),
        (_limiter(initial=True), ["initial True", "positive integer"]),
        (_limiter(initial=500.0), ["initial 500.0", "positive integer"]),
        (_limiter(ceiling=100), ["ceiling 100", ">= initial (500)"]),
        (_limiter(ceiling="1000"), ["ceiling '1000'", "positive integer"]),
        (_limiter(share=0), ["share 0", "0 < share <= 1"]),
        (_limiter(share=1.5), ["share 1.5", "0 < share <= 1"]),
        (_limiter(share=math.nan), ["share nan", "0 < share <= 1"]),
        (_limiter(start=math.nan), ["start nan", "finite value of the limiter's clock"]),
        (_limiter(start="now"), ["start 'now'", "finite value"]),
        (_limiter(step_seconds=-1.0), ["step_seconds -1.0", "> 0"]),
        (_limiter(growth=0.9), ["growth 0.9", ">= 1"]),
        (_limiter(clock=5), ["clock 5", "callable"]),
        (_limiter(sleep=None), ["sleep None", "callable"]),
        (_method("take", -1), ["n -1", "integer number of tokens >= 0"]),
        (_method("take", 1.5), ["n 1.5", "integer"]),
        (_method("try_take", True), ["n True", "integer"]),
    ],
)
def test_bad_arguments_raise_config_error_naming_them(call: Callable[[], object], words: list[str]) -> None:
    with pytest.raises(ConfigError) as caught:
        call()
    assert isinstance(caught.value, ValueError)
    for word in words:
        assert word in str(caught.value)
