"""How many batches a sender keeps in flight (tsstore.write.window): the least where the
network is near, plus the pace's rate across the round trip, bounded."""

from __future__ import annotations

import pytest

from tsstore.write.window import BUDGET_BYTES, LEAST, MOST, Window

KB = 1024


def test_without_a_round_trip_known_the_window_is_the_least() -> None:
    assert Window().size(rate=20_000, batch_docs=500, batch_bytes=150 * KB) == LEAST


@pytest.mark.parametrize(
    ("round_trip", "rate", "batches"),
    [
        (0.010, 100_000, LEAST),  # the loopback: a call's own work, nothing on the wire
        (0.095, 20_000, LEAST + 10),  # 80 ms away: 1 600 documents on the wire, 3.2 batches, three times
        (0.095, 500, LEAST + 1),  # a ramp's first step needs one more
        (2.0, 100_000, MOST),  # never more than the most
        (0.095, float("inf"), MOST),  # an unbounded pace: the most
    ],
)
def test_the_window_carries_the_rate_across_the_round_trip(round_trip: float, rate: float, batches: int) -> None:
    window = Window(round_trip=lambda: round_trip)
    assert window.size(rate=rate, batch_docs=500, batch_bytes=150 * KB) == batches


def test_the_bytes_in_flight_stay_within_the_budget() -> None:
    window = Window(round_trip=lambda: 1.0)
    big = 9 * KB * KB  # the largest batch a request takes
    assert window.size(rate=100_000, batch_docs=500, batch_bytes=big) == BUDGET_BYTES // big
    assert Window(budget_bytes=KB).size(rate=1, batch_docs=1, batch_bytes=2 * KB) == 1  # at least one
