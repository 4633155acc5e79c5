"""One 500/50/5 ramp for a whole pipeline, shared by workers that never talk to each other.

The arithmetic (also in the README, "Beyond one machine"):

- The collection-wide budget at wall-clock time ``t`` is
  ``B(t) = min(C, 500 * 1.5 ** floor((t - start) / 300))`` ops/s, where ``start`` is one
  time chosen when the pipeline is built (so every worker, and every DoFn instance Beam
  makes, measures the same ramp) and ``C`` the ceiling: 500 per active shard value
  (:attr:`SeriesSpec.max_write_rate <tsstore.spec.SeriesSpec.max_write_rate>`), or less if
  the caller says so.
- Each of ``W`` writing processes (the worker hint) gets ``B(t) / W``. The processes'
  budgets add up to ``B(t) <= C`` whatever the time; a process that starts late takes the
  same ``B(t) / W`` as the others at that moment, not 500 / W from the bottom.
- All the DoFn instances of one process share its budget (:func:`process_limiter`): Beam may
  run many of them per process, and a budget per instance would multiply the total.
- A process whose writes Firestore refuses as overload (RESOURCE_EXHAUSTED, ABORTED) caps
  its own budget near what the server accepts from it, and lifts the cap within seconds
  once the refusals stop (:mod:`tsstore.write.throttle`). A cut connection is a fault, not
  an overload: the request is sent again and the budget stays (:mod:`tsstore.faults`).

The hint must count the processes that write at once (on Dataflow: ``max_num_workers`` times
the SDK processes per worker, one per vCPU by default). More processes than the hint exceed
the budget by their ratio; fewer leave it unused.

Nothing here talks to Firestore.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tsstore.errors import ConfigError
from tsstore.limits import RAMP_START_OPS_PER_SECOND
from tsstore.spec import SeriesSpec
from tsstore.write.ramp import RAMP_GROWTH, RAMP_STEP_SECONDS, RampLimiter, ramp_rate

#: The largest request a writer sends (documents per BatchWrite).
_MAX_BATCH = 500


@dataclass(frozen=True)
class PipelineRamp:
    """The ramp every writing process of one pipeline follows (see the module doc).

    ``start`` is wall-clock time (seconds since the epoch, ``time.time()``), the same value in
    every process; ``workers`` the number of processes writing at once; ``ceiling`` the
    collection-wide ops/s never exceeded; ``initial`` where the ramp starts (``ceiling`` for
    no ramp)."""

    start: float
    workers: int
    ceiling: int
    initial: int = RAMP_START_OPS_PER_SECOND

    def __post_init__(self) -> None:
        if not isinstance(self.start, (int, float)) or isinstance(self.start, bool) or not math.isfinite(self.start):
            raise ConfigError(f"start {self.start!r} is not allowed; give a wall-clock time (time.time())")
        for name in ("workers", "ceiling", "initial"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} {value!r} is not allowed; give a positive integer")
        if self.initial > self.ceiling:
            raise ConfigError(f"initial {self.initial} is not allowed; give at most the ceiling ({self.ceiling})")

    @classmethod
    def for_spec(
        cls,
        spec: SeriesSpec,
        *,
        workers: int,
        start: float | None = None,
        max_ops_per_second: int | None = None,
        ramp: bool = True,
    ) -> PipelineRamp:
        """The ramp for writing ``spec``'s collection: capped at 500 × its active shard values
        (or ``max_ops_per_second``), starting now unless ``start`` is given; ``ramp=False``
        starts at the ceiling (the local emulator, a database no one else uses)."""
        ceiling = spec.max_write_rate if max_ops_per_second is None else max_ops_per_second
        if isinstance(ceiling, bool) or not isinstance(ceiling, int) or ceiling < 1:
            raise ConfigError(f"max_ops_per_second {max_ops_per_second!r} is not allowed; give a positive integer")
        initial = min(RAMP_START_OPS_PER_SECOND, ceiling) if ramp else ceiling
        return cls(start=time.time() if start is None else start, workers=workers, ceiling=ceiling, initial=initial)

    def total_rate(self, at: float) -> float:
        """The collection-wide ops/s allowed at wall-clock time ``at`` (the initial rate before ``start``)."""
        return ramp_rate(max(0.0, at - self.start), initial=self.initial, ceiling=self.ceiling)

    def worker_rate(self, at: float) -> float:
        """One process's ops/s at ``at``: its share of :meth:`total_rate`."""
        return self.total_rate(at) / self.workers

    @property
    def batch_docs(self) -> int:
        """Documents per request: what one process may send in its slowest second (at least 1)."""
        return max(1, min(_MAX_BATCH, int(self.initial / self.workers)))

    def limiter(
        self, *, clock: Callable[[], float] = time.time, sleep: Callable[[float], object] = time.sleep
    ) -> RampLimiter:
        """A token bucket granting one process's share of this ramp, from the shared start."""
        return RampLimiter(
            initial=self.initial,
            ceiling=self.ceiling,
            start=self.start,
            share=1 / self.workers,
            step_seconds=RAMP_STEP_SECONDS,
            growth=RAMP_GROWTH,
            clock=clock,
            sleep=sleep,
        )


_LIMITERS: dict[tuple[str, PipelineRamp], RampLimiter] = {}
_LIMITERS_LOCK = threading.Lock()


def process_limiter(target: str, ramp: PipelineRamp) -> RampLimiter:
    """The one limiter of this process for ``ramp`` writing to ``target`` (a collection's
    path with its project and database): every DoFn instance of the process takes from it."""
    with _LIMITERS_LOCK:
        limiter = _LIMITERS.get((target, ramp))
        if limiter is None:
            limiter = _LIMITERS[(target, ramp)] = ramp.limiter()
        return limiter
