"""Issue 22: the writer's rate before, during and after a spell of RESOURCE_EXHAUSTED refusals.

A simulated server (tests/overload.py, the one the throttling test uses) takes at most
``--capacity`` writes a second from second 20 to 60 and everything before and after; a writer
that always has work sends ``--rate`` writes/s (no ramp) through a ``RampLimiter`` on a fake
clock, telling it each answer. Printed: the limiter's rate and the writes sent and accepted,
per phase, and how long the rate took to settle and to come back. No Firestore, no sleeping.

Run: python bench/throttle.py [--rate 5000] [--capacity 1000]
"""

from __future__ import annotations

import argparse
import statistics

from _common import verdict  # noqa: F401 - puts the repository on sys.path

from tests.overload import FakeClock, OverloadedServer, drive
from tsstore.write.ramp import RampLimiter
from tsstore.write.throttle import OVERLOAD_RATIO, WINDOW_SECONDS

START, END, SECONDS = 20, 60, 90


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=int, default=5000, help="the writer's ramp (flat), writes/s")
    parser.add_argument("--capacity", type=int, default=1000, help="writes/s the server takes while overloaded")
    parser.add_argument("--batch", type=int, default=50, help="writes per request")
    args = parser.parse_args()
    for capacity in (args.capacity, args.capacity // 10, 5):
        clock = FakeClock()
        limiter = RampLimiter(initial=args.rate, ceiling=args.rate, clock=clock, sleep=clock.sleep)
        server = OverloadedServer(lambda second, room=capacity: room if START <= second < END else None)
        seconds = drive(limiter, clock, server, seconds=SECONDS, batch=args.batch)
        print(f"\nserver takes {capacity} writes/s from {START} s to {END} s; the writer wants {args.rate}/s")
        print("| phase | seconds | rate (median) | sent/s | accepted/s |")
        print("|---|---|---:|---:|---:|")
        phases = {
            "before": range(1, START),
            "overload, first window": range(START, START + int(WINDOW_SECONDS)),
            "overload, settled": range(START + int(WINDOW_SECONDS), END),
            "after, first window": range(END, END + int(WINDOW_SECONDS)),
            "after": range(END + int(WINDOW_SECONDS), SECONDS),
        }
        for name, span in phases.items():
            part = [seconds[t] for t in span]
            print(
                f"| {name} | {span.start}-{span.stop} | {statistics.median(s.rate for s in part):,.0f} "
                f"| {statistics.mean(s.sent for s in part):,.0f} | {statistics.mean(s.accepted for s in part):,.0f} |"
            )
        settled = next(t for t in range(START, END) if seconds[t].rate <= max(OVERLOAD_RATIO * capacity, 50) * 1.1)
        back = next(t for t in range(END, SECONDS) if seconds[t].rate == args.rate)
        print(f"settled {settled - START} s after the refusals began; back on the ramp {back - END} s after they ended")


if __name__ == "__main__":
    main()
