"""How fast a store's writer may go: :class:`WriteOptions`."""

from __future__ import annotations

from dataclasses import dataclass

from tsstore.errors import ConfigError
from tsstore.limits import RAMP_START_OPS_PER_SECOND


@dataclass(frozen=True)
class WriteOptions:
    """How fast the writer may go.

    New traffic should start at 500 ops/s and grow by 50 % every 5 minutes ("500/50/5");
    tsstore's :class:`~tsstore.write.ramp.RampLimiter` does that between
    ``initial_ops_per_second`` and ``max_ops_per_second``. BulkWriter's default ceiling is
    also 500, which would cap a sharded collection at the rate sharding was meant to
    lift, so the ceiling here defaults to the spec's capacity, 500 writes/s per shard
    value. ``ramp=False`` starts at the ceiling: for the local emulator only (Firestore
    asks all new traffic to ramp, a new database's included). ``max_attempts`` bounds the
    tries per document on retryable errors.
    """

    #: The pace a ramp starts at (500 writes/s, as Firestore asks of new traffic).
    initial_ops_per_second: int = RAMP_START_OPS_PER_SECOND
    #: The ceiling (``None``: 500 writes/s per shard value of the declaration).
    max_ops_per_second: int | None = None
    #: Grow from ``initial_ops_per_second`` by 50 % every 5 minutes (``False``: the emulator only).
    ramp: bool = True
    #: Tries per document on retryable errors.
    max_attempts: int = 15

    def __post_init__(self) -> None:
        for name in ("initial_ops_per_second", "max_ops_per_second", "max_attempts"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name} {value!r} is not allowed; give a positive integer")


#: How fast to write to an emulator: no ramp and no production ceiling, since no one else
#: shares it (a real project gets the default ramped, spec-bounded rate). The commands use it
#: on the local emulator, and tsstore's tests on theirs.
EMULATOR_WRITE_OPTIONS = WriteOptions(ramp=False, max_ops_per_second=100_000)
