"""The server's time from its answers (tsstore.clock): bounds from when a call was sent and its
answer came back, their midpoint, and no guess without a read time seen lately."""

from __future__ import annotations

import datetime as dt

import pytest

from tsstore.clock import FRESH, HELD, ServerClock
from tsstore.faults import early_read_time, kind_of

UTC = dt.timezone.utc
T = dt.datetime(2026, 11, 27, 12, tzinfo=UTC)
MS = dt.timedelta(milliseconds=1)
US = dt.timedelta(microseconds=1)


class Local:
    """A local clock the test moves (microseconds), and a server clock ``ahead`` of it."""

    def __init__(self, ahead: dt.timedelta = dt.timedelta(hours=1)) -> None:
        self.us = 5_000_000
        self.ahead = ahead

    def __call__(self) -> int:
        return self.us

    def wait(self, delta: dt.timedelta) -> None:
        self.us += delta // US

    def server(self) -> dt.datetime:
        """The server's true time now."""
        return dt.datetime(1970, 1, 1, tzinfo=UTC) + self.us * US + self.ahead


def answer(clock: ServerClock, local: Local, *, up: dt.timedelta, down: dt.timedelta, read: bool = True) -> None:
    """A call that takes ``up`` to reach the server, stamped there on arrival, and ``down``
    back."""
    sent = local()
    local.wait(up)
    stamped = local.server()
    local.wait(down)
    clock.saw(stamped, sent=sent if read else None)


def test_no_time_is_known_before_a_read_answers() -> None:
    local = Local()
    clock = ServerClock(local=local)
    clock.saw(None)  # an answer without a time
    assert clock.now() is None
    answer(clock, local, up=5 * MS, down=5 * MS, read=False)  # a commit: a lower bound only
    assert clock.now() is None


def test_the_time_is_the_tightest_lower_bound_behind_by_the_way_back() -> None:
    local = Local()
    clock = ServerClock(local=local)
    answer(clock, local, up=40 * MS, down=40 * MS)  # 80 ms away, as far each way
    assert local.server() - clock.now() == 40 * MS  # type: ignore[operator]
    local.wait(250 * MS)
    assert local.server() - clock.now() == 40 * MS  # type: ignore[operator]  # the local clock carries it on


def test_it_is_never_ahead_of_the_server_whichever_way_is_slower() -> None:
    """Issue 59: a read time ahead of the server's clock is refused as in the future. The
    midpoint of the bounds (as NTP takes it) was ahead by half the difference when the way
    up was the slower one (a call queued at the server before its read time was stamped)."""
    local = Local()
    clock = ServerClock(local=local)
    answer(clock, local, up=50 * MS, down=10 * MS)
    assert local.server() - clock.now() == 10 * MS  # type: ignore[operator]  # the midpoint: 10 ms ahead
    answer(clock, local, up=10 * MS, down=50 * MS)  # a slower way back loosens nothing
    assert local.server() - clock.now() == 10 * MS  # type: ignore[operator]


def test_the_tightest_bounds_of_recent_answers_win_and_stale_ones_are_dropped() -> None:
    local = Local()
    clock = ServerClock(local=local)
    answer(clock, local, up=40 * MS, down=40 * MS)
    answer(clock, local, up=400 * MS, down=400 * MS)  # a slow answer (a pause, a queue) loosens nothing
    answer(clock, local, up=1 * MS, down=5 * MS, read=False)  # a commit: a lower bound, no round trip
    assert local.server() - clock.now() == 5 * MS  # type: ignore[operator]
    assert clock.round_trip() == pytest.approx(0.080)
    local.wait(FRESH + MS)
    assert clock.now() is None and clock.round_trip() is None  # nothing lately: the caller asks again


def test_answers_of_reads_at_a_time_given_alone_tell_no_time() -> None:
    """Issue 59: such an answer carries the time it was given back (a lower bound only), so a
    walk's pages alone, FRESH after the last read time stamped on arrival, leave the time to
    be read again rather than held back at the walk's snapshot."""
    local = Local()
    clock = ServerClock(local=local)
    answer(clock, local, up=40 * MS, down=40 * MS)
    for _ in range(40):
        local.wait(1 * dt.timedelta(seconds=1))
        answer(clock, local, up=40 * MS, down=40 * MS, read=False)
    assert clock.now() is None and clock.at_least() is not None


def test_a_commit_this_process_saw_stays_in_the_estimate_whatever_answers_come_after_it() -> None:
    """Issue 59: estimated snapshots by default. A read after a write of this process must
    see it, so the estimate is never before a commit time an answer of the last FRESH
    carried, even when more answers than the clock keeps bounds of arrive after it, each
    stamped before the commit and slow on its way back (here the bounds alone put the
    estimate 34 ms before the commit)."""
    local = Local()
    clock = ServerClock(local=local)
    sent = local()
    local.wait(1 * MS)
    stamped = local.server()  # 300 reads sent together, stamped 1 ms after they were sent
    local.wait(84 * MS)
    committed = local.server()  # a write, committed meanwhile; its answer arrives 5 ms later
    local.wait(5 * MS)
    clock.saw(committed, sent=local() - 10 * MS // US, read=False)
    local.wait(10 * MS)  # the reads' answers, 99 ms on their way back
    for _ in range(300):
        clock.saw(stamped, sent=sent)
    assert clock.now() == committed


def test_at_least_is_a_lower_bound_any_answer_keeps_for_an_hour() -> None:
    """Issue 59: a walk's pages read at its snapshot, so their answers bound the server's
    time from below only; the walk tells its snapshot's age from that lower bound, which
    outlives FRESH (clocks drift by milliseconds in an hour, the age has ten minutes to spare)."""
    local = Local()
    clock = ServerClock(local=local)
    assert clock.at_least() is None
    answer(clock, local, up=10 * MS, down=30 * MS, read=False)  # a pinned read: its time told, no upper bound
    assert clock.now() is None and clock.at_least() == local.server() - 30 * MS
    local.wait(FRESH * 10)
    assert clock.now() is None and clock.at_least() == local.server() - 30 * MS  # the local clock carries it on
    local.wait(HELD)
    assert clock.at_least() is None


def test_a_read_time_the_server_has_not_reached_is_retried_not_raised() -> None:
    from google.api_core import exceptions as gexc

    early = gexc.InvalidArgument("The requested 'read_time' cannot be in the future.")
    assert early_read_time(early) and kind_of(early) == "fault"
    other = gexc.InvalidArgument("Invalid query")
    assert not early_read_time(other) and kind_of(other) is None


def test_a_write_whose_answer_carries_no_time_leaves_no_estimate_until_a_read_sent_after_it() -> None:
    """A delete's answer in a ``BatchWrite`` says no time: the next read reads the server's
    time (which sees the delete), and a read sent before the delete's answer came does not
    count, whenever it arrives."""
    local = Local()
    clock = ServerClock(local=local)
    answer(clock, local, up=1 * MS, down=1 * MS)
    assert clock.now() is not None
    sent_before = local()
    local.wait(1 * MS)
    clock.unstamped()  # the purge's deletes answered
    assert clock.now() is None
    local.wait(1 * MS)
    clock.saw(local.server(), sent=sent_before)  # sent before the deletes' answer: proves nothing
    assert clock.now() is None
    answer(clock, local, up=1 * MS, down=1 * MS, read=False)  # a commit time: a lower bound only
    assert clock.now() is None
    answer(clock, local, up=1 * MS, down=1 * MS)  # the server's time read after them
    estimate = clock.now()
    assert estimate is not None and estimate <= local.server()
