"""tsstore: high-rate time series in Google Cloud Firestore with sharded timestamps."""

from __future__ import annotations

from .counters import CounterValue, ShardedCounter
from .errors import (
    ConfigError,
    CounterError,
    CursorError,
    EmulatorError,
    Interrupted,
    QueryError,
    RecordError,
    SchemaError,
    SnapshotExpiredError,
    SpecError,
    TsstoreError,
    WriteError,
    WriteFailure,
)
from .planning import QueryPlan, plan_query
from .rows import Page, Tick
from .spec import Direction, QueryShape, SeriesSpec, plan_shards
from .store import PurgeResult, TimeSeriesStore, WriteOptions, WriteResult

__all__ = [
    "ConfigError",
    "CounterError",
    "CounterValue",
    "PurgeResult",
    "ShardedCounter",
    "CursorError",
    "Direction",
    "EmulatorError",
    "Interrupted",
    "Page",
    "QueryError",
    "QueryPlan",
    "QueryShape",
    "RecordError",
    "SchemaError",
    "SeriesSpec",
    "SnapshotExpiredError",
    "SpecError",
    "Tick",
    "TimeSeriesStore",
    "TsstoreError",
    "WriteError",
    "WriteFailure",
    "WriteOptions",
    "WriteResult",
    "plan_query",
    "plan_shards",
]
